//! Reliable broadcast counters.

/// Reliable broadcast counters. Monotonic; read through [`Node::stats`](crate::Node::stats).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct XcastStats {
    /// Xcast frames from a rank that is not the expected neighbour, ACKs for unknown ops or
    /// rounds, and other stale protocol input.
    pub stale: u64,
    /// Relays the root had already numbered (retries).
    pub duplicate_relays: u64,
    /// Relays the root postponed (a gap in the origin's sequence, or a full window).
    pub deferred_relays: u64,
    /// Forwards for ops already done here (answered with an immediate ACK).
    pub duplicate_forwards: u64,
    /// Ops re-issued under a new id after a root failover and already delivered here.
    pub duplicate_ops: u64,
    /// Completion reports for broadcasts already reported complete.
    pub duplicate_completions: u64,
    /// Relay re-sends and completion queries made by the retry timer.
    pub retries: u64,
    /// Ops refused because their id lies far beyond any window a root could have numbered.
    pub out_of_window: u64,
    /// A forward whose id names a different op than the one held (must stay 0).
    pub conflicts: u64,
    /// Ops gathered from children during a root-failover recovery.
    pub recovered_ops: u64,
    /// Op ids a new root filled with no-ops (nobody alive held them).
    pub noop_fills: u64,
    /// Ops a late joiner adopted as complete without receiving them.
    pub adopted_as_done: u64,
}
