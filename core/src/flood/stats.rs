//! Flood (test protocol) counters.

/// Flood (test protocol) counters. Monotonic; read through [`Node::stats`](crate::Node::stats).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct FloodStats {
    /// Flood frames for an id already delivered.
    pub duplicates: u64,
    /// Flood ids forgotten early because `flood.max` was reached.
    pub forgotten: u64,
}
