//! The bootstrap's errors: [`EnvError`] (reading the launcher's environment) and
//! [`BootstrapError`] (the rendezvous).

use std::io;
use std::time::Duration;

use super::env::Launcher;

/// Why the launcher's environment gave no usable rank and size. Never a panic: every
/// malformed or conflicting value is one of these.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EnvError {
    /// No launcher variable set (not started by a known launcher).
    #[error(
        "no launcher recognised: none of SLURM_PROCID, OMPI_COMM_WORLD_RANK, PMIX_RANK, \
         PMI_RANK, RANK is set"
    )]
    NoLauncher,
    /// A variable is not a decimal number.
    #[error("under {launcher}: {var}={value:?} is not a non-negative integer")]
    NotANumber {
        /// The launcher whose variable it is.
        launcher: Launcher,
        /// The variable.
        var: &'static str,
        /// Its value.
        value: String,
    },
    /// The launcher's rank variable is set but no size variable is.
    #[error(
        "under {launcher} ({rank_var} is set) but none of {size_vars} is, and no other \
         launcher's rank and size are"
    )]
    MissingSize {
        /// The launcher.
        launcher: Launcher,
        /// Its rank variable.
        rank_var: &'static str,
        /// The size variables looked for.
        size_vars: String,
    },
    /// The size is zero.
    #[error("under {launcher}: {var}=0: a job has at least one process")]
    ZeroSize {
        /// The launcher.
        launcher: Launcher,
        /// The size variable.
        var: &'static str,
    },
    /// The rank is not below the size.
    #[error("under {launcher}: rank {rank} is not below size {size}")]
    RankOutOfRange {
        /// The launcher.
        launcher: Launcher,
        /// The rank.
        rank: u32,
        /// The size.
        size: u32,
    },
    /// Two launchers' variables are set and disagree (e.g. `mpirun` inside an `sbatch` script,
    /// whose `SLURM_PROCID` every process inherits); `LIFELINE_LAUNCHER` picks one.
    #[error(
        "{a} says rank {ra} of {sa}, {b} says rank {rb} of {sb}: set LIFELINE_LAUNCHER to \
         slurm, ompi, pmix, mpich or torchrun to pick one"
    )]
    Conflict {
        /// The first launcher (in the documented order).
        a: Launcher,
        /// Its rank.
        ra: u32,
        /// Its size.
        sa: u32,
        /// The other launcher.
        b: Launcher,
        /// Its rank.
        rb: u32,
        /// Its size.
        sb: u32,
    },
    /// `LIFELINE_LAUNCHER` names no known launcher.
    #[error("LIFELINE_LAUNCHER={0:?}: not a launcher (slurm, ompi, pmix, mpich, torchrun)")]
    BadOverride(String),
    /// `LIFELINE_LAUNCHER` names a launcher whose rank variable is not set.
    #[error("LIFELINE_LAUNCHER={launcher} but {rank_var} is not set")]
    OverrideUnset {
        /// The launcher named.
        launcher: Launcher,
        /// Its rank variable.
        rank_var: &'static str,
    },
    /// `MASTER_PORT` is not a port number, or `MASTER_ADDR` is empty.
    #[error("bad rendezvous variables: {0}")]
    BadRendezvous(String),
}

/// Why a rendezvous failed. Every wait is bounded: a rendezvous ends in a book or in one of
/// these within its timeout (plus the answer grace for a registrant).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BootstrapError {
    /// The timeout passed before every rank registered: `missing` never did. At rank 0 (the
    /// server's host), those of them whose registration failed the key check are named as
    /// such (`rank R: wrong key`).
    #[error(
        "rendezvous timed out after {} ms: {} ({} of {size} did)",
        timeout.as_millis(), missing_text(missing, wrong_key), size - missing.len() as u32
    )]
    Missing {
        /// Ranks that never registered, ascending.
        missing: Vec<u32>,
        /// The ranks of `missing` that tried with a wrong key (a different cluster secret), as
        /// their HELLO claimed; known at rank 0 only, empty elsewhere.
        wrong_key: Vec<u32>,
        /// The job size.
        size: u32,
        /// The rendezvous timeout.
        timeout: Duration,
    },
    /// The rendezvous could not be reached before the timeout (rank 0, its host, never came
    /// up, or the address is wrong).
    #[error("the rendezvous at {addr} was not reachable within {} ms (last error: {last})", timeout.as_millis())]
    Unreachable {
        /// The rendezvous address, as given.
        addr: String,
        /// The timeout.
        timeout: Duration,
        /// The last connect or resolve error.
        last: String,
    },
    /// No answer from the rendezvous in time after registering.
    #[error("no answer from the rendezvous at {addr} within {} ms", timeout.as_millis())]
    NoAnswer {
        /// The rendezvous address.
        addr: String,
        /// How long this registrant waited in all.
        timeout: Duration,
    },
    /// The server refused this registration.
    #[error("the rendezvous refused rank {rank}: {reason}")]
    Refused {
        /// This registrant's rank.
        rank: u32,
        /// Why.
        reason: Refusal,
    },
    /// The server did not prove the cluster key (a different key, or not a Lifeline
    /// rendezvous).
    #[error("the rendezvous at {0} failed to prove the cluster key (different keys?)")]
    BadServerMac(String),
    /// The answer's MAC is wrong: a forged or corrupted address book, refused.
    #[error("the rendezvous answer failed its MAC check (forged or corrupted): refused")]
    BadAnswerMac,
    /// A message broke the format (bad magic, version, length, address).
    #[error("malformed rendezvous message: {0}")]
    Malformed(String),
    /// The rendezvous address could not be bound (rank 0 hosts it on that address).
    #[error("rank 0 hosts the rendezvous but cannot bind {addr}: {source}")]
    Bind {
        /// The address.
        addr: String,
        /// The error.
        source: io::Error,
    },
    /// A socket failed mid-rendezvous.
    #[error("rendezvous i/o: {0}")]
    Io(#[from] io::Error),
}

/// Why the server refused an authenticated registration (sent to the registrant, MACed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Refusal {
    /// The rank is not below the server's size.
    #[error("rank out of range")]
    OutOfRange,
    /// The registrant's size differs from the server's.
    #[error("job size differs from the rendezvous's")]
    SizeMismatch,
    /// Another registrant holds this rank with another address.
    #[error("rank already registered with another address")]
    Duplicate,
    /// The registered address is unusable (unspecified IP or port 0).
    #[error("unusable listen address")]
    BadAddress,
}

impl Refusal {
    pub(crate) fn code(self) -> u8 {
        match self {
            Self::OutOfRange => 2,
            Self::SizeMismatch => 3,
            Self::Duplicate => 4,
            Self::BadAddress => 5,
        }
    }

    pub(crate) fn from_code(c: u8) -> Option<Self> {
        Some(match c {
            2 => Self::OutOfRange,
            3 => Self::SizeMismatch,
            4 => Self::Duplicate,
            5 => Self::BadAddress,
            _ => return None,
        })
    }
}

/// The missing ranks, those with a wrong key named first: `rank 3: wrong key; rank(s) 1, 4
/// never registered`.
fn missing_text(missing: &[u32], wrong_key: &[u32]) -> String {
    let mut parts: Vec<String> = wrong_key
        .iter()
        .map(|r| format!("rank {r}: wrong key"))
        .collect();
    let never: Vec<u32> = missing
        .iter()
        .copied()
        .filter(|r| !wrong_key.contains(r))
        .collect();
    if !never.is_empty() {
        parts.push(format!("rank(s) {} never registered", list(&never)));
    }
    parts.join("; ")
}

/// `[1, 4, 7]` as `1, 4, 7`.
pub(crate) fn list(ranks: &[u32]) -> String {
    ranks
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}
