//! Why reliable messaging refused a command.

use crate::tree::Rank;

/// Why a RELM command was refused. Nothing was queued.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RelmError {
    /// `relm.window` messages to this destination, or `relm.max_bytes` payload bytes in all,
    /// await acknowledgement: retry after a
    /// [`RelmEvent::Acked`](crate::relm::RelmEvent::Acked).
    #[error(
        "{inflight} messages to rank {dst} ({bytes} bytes in all) await acknowledgement; retry after an ACK"
    )]
    Backpressure {
        /// The destination.
        dst: Rank,
        /// Unacknowledged messages to it.
        inflight: usize,
        /// Unacknowledged payload bytes to all destinations.
        bytes: usize,
    },
}
