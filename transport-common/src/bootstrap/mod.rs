//! Start-up under a launcher: rank and size from the launcher's environment
//! ([`LauncherEnv`]), and every rank's listening address from a rendezvous ([`join`]), so a job
//! started by Slurm `srun`, `mpirun`/`prterun` or `torchrun` needs no peers file.
//!
//! ```text
//! every rank:  LauncherEnv::from_env()        → rank, size (and MASTER_ADDR:MASTER_PORT)
//!              bind its listener (0.0.0.0:0)  → port
//! rank 0:      RendezvousServer on HOST:PORT  (it binds that address)
//! every rank:  register(rank, ip:port)        → the whole AddressBook, or the missing ranks
//! ```
//!
//! The rendezvous is one TCP connection per rank to `HOST:PORT` (torchrun's
//! `MASTER_ADDR`/`MASTER_PORT` style; rank 0 hosts it). Each registration is authenticated by
//! the cluster secret ([`BootstrapKey`], challenge/response over fresh nonces from both sides,
//! see [`wire`]); the answer, the whole book, is MACed over the registrant's nonce, so a
//! registrant cannot be fed a forged or replayed book. The address a rank registers is its
//! listener's port on the IP of its own end of the connection to the rendezvous: the interface
//! that reaches rank 0 (NCCL chooses the same way), unless the listener is bound to a specific
//! IP.
//!
//! Nothing waits forever: the server gives up `timeout` after it starts, telling every waiting
//! registrant (and its own host) which ranks never registered ([`BootstrapError::Missing`]); a
//! registrant stops trying to reach the server after `timeout` and stops waiting for an answer
//! `answer_grace` later.

mod client;
mod env;
mod error;
mod server;
pub mod wire;

pub use client::{join, register, Joined, RendezvousConfig};
pub use env::{Launcher, LauncherEnv};
pub use error::{BootstrapError, EnvError, Refusal};
pub use server::{RefusalCounts, RendezvousServer, ServerReport};
pub use wire::BootstrapKey;

#[cfg(test)]
mod tests;
