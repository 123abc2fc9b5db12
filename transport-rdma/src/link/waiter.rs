//! [`CompletionWaiter`]: an async wait on a [`Verbs`] value's completion channel.

use std::io;
use std::os::fd::OwnedFd;

use tokio::io::unix::AsyncFd;

use crate::verbs::{Verbs, VerbsError};

/// Waits, without polling, until a completion channel has a notification: the descriptor of
/// [`Verbs::cq_fd`] under tokio's reactor.
///
/// The driving pattern (what the composite link's watcher does): [`Verbs::arm_cq`], drain the
/// completion queue with [`Verbs::poll_cq`], and only when it came back empty wait on
/// [`CompletionWaiter::readable`], then [`Verbs::take_cq_events`] and start over. Arming before
/// the drain means a completion that lands after it always notifies.
#[derive(Debug)]
pub struct CompletionWaiter {
    fd: AsyncFd<OwnedFd>,
}

impl CompletionWaiter {
    /// Registers `verbs`'s completion channel with the current tokio runtime (call it inside
    /// one). `Ok(None)`: the verbs have no completion channel; poll on a tick instead.
    pub fn new<V: Verbs>(verbs: &V) -> Result<Option<Self>, VerbsError> {
        let Some(fd) = verbs.cq_fd()? else {
            return Ok(None);
        };
        register(fd)
            .map(|fd| Some(Self { fd }))
            .map_err(|e| VerbsError::Os {
                call: "epoll_ctl(completion channel)",
                errno: e.raw_os_error().unwrap_or(0),
            })
    }

    /// Resolves once a notification waits on the channel (possibly at once, or spuriously:
    /// the caller's drain decides). Errors only if the reactor fails on the descriptor.
    pub async fn readable(&self) -> io::Result<()> {
        let mut guard = self.fd.readable().await?;
        // Readiness is cleared here; the next wait returns only after new data arrives. The
        // caller consumes the pending events with `take_cq_events` before waiting again.
        guard.clear_ready();
        Ok(())
    }
}

/// Registers an owned descriptor with tokio's reactor.
#[allow(unsafe_code)]
fn register(fd: OwnedFd) -> io::Result<AsyncFd<OwnedFd>> {
    // SAFETY: `AsyncFd::register` requires the descriptor to stay open and refer to the same
    // file description for the `AsyncFd`'s lifetime: the `OwnedFd` is moved into it, so it
    // is closed only when the `AsyncFd` is dropped, and nothing else owns that number.
    unsafe { AsyncFd::register(fd) }.map_err(io::Error::from)
}
