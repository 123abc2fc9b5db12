//! The link policy's tuning knobs.

use crate::time::Duration;

/// How persistently a [`LinkPolicy`](super::LinkPolicy) dials. [`LinkConfig::default`] suits a
/// LAN or loopback cluster (the values the TCP adapter has always used).
///
/// [`LinkPolicy::new`](super::LinkPolicy::new) validates it and refuses an invalid one with a
/// [`LinkConfigError`] (never a panic).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LinkConfig {
    /// Failed dials in a row (per slot) before the peer is given up as unreachable
    /// ([`LinkDownReason::Unreachable`](super::LinkDownReason::Unreachable)). At least 1.
    pub dial_attempts: u32,
    /// A dial the peer's host refuses outright
    /// ([`DialOutcome::Refused`](super::DialOutcome::Refused): nothing listens, so the process
    /// is gone) to a peer whose link was up before, or to any peer after `startup_grace`, is
    /// given up after `min(refused_attempts, dial_attempts)` failures in a row instead of
    /// `dial_attempts`. At least 1.
    pub refused_attempts: u32,
    /// How long after the policy's creation a refused dial to a peer never connected is
    /// treated like any failure, because peers may still be starting (a launcher spreads
    /// starts over seconds; an overloaded host starts them late). A peer once connected is not
    /// starting: its refusal counts at once, grace or not. An embedder that publishes
    /// addresses only after every listener is bound can set it to zero.
    pub startup_grace: Duration,
    /// Delay before the first re-dial; it doubles per consecutive failure up to `backoff_max`.
    /// It is also the delay after a [`DialOutcome::Duplicate`](super::DialOutcome::Duplicate)
    /// answer. At most `backoff_max`.
    pub backoff_initial: Duration,
    /// Longest delay between re-dials.
    pub backoff_max: Duration,
}

impl Default for LinkConfig {
    fn default() -> Self {
        Self {
            dial_attempts: 8,
            refused_attempts: 3,
            startup_grace: Duration::from_secs(10),
            backoff_initial: Duration::from_millis(50),
            backoff_max: Duration::from_secs(1),
        }
    }
}

impl LinkConfig {
    /// Checks every field: both attempt counts are positive and `backoff_initial` is at most
    /// `backoff_max`.
    pub fn validate(&self) -> Result<(), LinkConfigError> {
        if self.dial_attempts == 0 {
            return Err(LinkConfigError::Zero("dial_attempts"));
        }
        if self.refused_attempts == 0 {
            return Err(LinkConfigError::Zero("refused_attempts"));
        }
        if self.backoff_initial > self.backoff_max {
            return Err(LinkConfigError::Backoff {
                initial: self.backoff_initial,
                max: self.backoff_max,
            });
        }
        Ok(())
    }

    /// The re-dial delay after `failures` consecutive failed dials (1-based):
    /// `backoff_initial × 2^(failures - 1)`, capped at `backoff_max` (saturating: never
    /// overflows, whatever `failures` is).
    pub fn backoff(&self, failures: u32) -> Duration {
        let shift = failures.saturating_sub(1).min(20);
        self.backoff_initial
            .saturating_mul(1 << shift)
            .min(self.backoff_max)
    }

    /// Whether a refused dial is evidence that the peer is gone: it was connected before
    /// (`met`), or `startup_grace` is over. Otherwise it may still be starting.
    pub(crate) fn refusal_counts(&self, met: bool, since_start: Duration) -> bool {
        met || since_start > self.startup_grace
    }

    /// Failures in a row after which a slot gives up: `dial_attempts`, or
    /// `min(refused_attempts, dial_attempts)` for a refusal that counts
    /// ([`Self::refusal_counts`]).
    pub(crate) fn attempts(&self, counted_refusal: bool) -> u32 {
        if counted_refusal {
            self.refused_attempts.min(self.dial_attempts)
        } else {
            self.dial_attempts
        }
        .max(1)
    }
}

/// Why a [`LinkConfig`] (or the slot count given with it) was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LinkConfigError {
    /// A count that must be positive is zero (`dial_attempts`, `refused_attempts`, or the
    /// number of slots per peer).
    #[error("{0} must be positive")]
    Zero(&'static str),
    /// `backoff_initial` is longer than `backoff_max`.
    #[error("backoff_initial {initial} is longer than backoff_max {max}")]
    Backoff {
        /// `backoff_initial`.
        initial: Duration,
        /// `backoff_max`.
        max: Duration,
    },
}
