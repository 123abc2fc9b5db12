//! Why reliable broadcast refused a command.

/// Why an xcast command was refused. Nothing was queued.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum XcastError {
    /// Too many broadcasts from this rank await completion (`xcast.max_inflight` ops or
    /// `xcast.max_bytes` payload bytes): retry after a completion event.
    #[error(
        "{ops} broadcasts ({bytes} bytes) already await completion; retry after one completes"
    )]
    Backpressure {
        /// Broadcasts awaiting completion.
        ops: usize,
        /// Their payload bytes.
        bytes: usize,
    },
    /// The tag is reserved for Lifeline's own broadcasts.
    #[error("xcast tag {0} is reserved (use tag 1 for wire-up or 16 and above)")]
    ReservedTag(u16),
}
