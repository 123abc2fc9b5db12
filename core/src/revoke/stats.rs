//! Revoke counters.

/// Revoke counters. Monotonic; read through
/// [`Node::revoke_stats`](crate::Node::revoke_stats).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RevokeStats {
    /// Revokes this rank started (new (group, epoch) pairs given to `Node::revoke`).
    pub started: u64,
    /// `Revoked` events emitted (this rank's own revokes included).
    pub delivered: u64,
    /// Notices forwarded to overlay neighbours (one per neighbour per first receipt).
    pub forwarded: u64,
    /// Notices for a (group, epoch) already revoked here: dropped.
    pub duplicates: u64,
    /// Notices for an epoch older than the newest revoked here for the group: dropped.
    pub stale: u64,
    /// Groups forgotten because `revoke.max_groups` was reached (oldest revoke first).
    pub forgotten: u64,
}
