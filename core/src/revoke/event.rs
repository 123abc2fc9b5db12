//! What the revoke flood tells the application.

use crate::tree::Rank;

/// What the revoke flood tells the application. Nested in [`Event`](crate::Event).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RevokeEvent {
    /// `group` is revoked as of `epoch`: operations of that group must stop now (ULFM's
    /// `MPIX_ERR_REVOKED`). Emitted once per (group, epoch) at each rank while the group is
    /// remembered ([`RevokeConfig::max_groups`](crate::revoke::RevokeConfig::max_groups)),
    /// the origin included (at once, from [`Node::revoke`](crate::Node::revoke)); never for
    /// an epoch older than one already revoked for the group.
    Revoked {
        /// The application's group (communicator) id.
        group: u64,
        /// The group's epoch that is revoked.
        epoch: u64,
        /// The rank that called [`Node::revoke`](crate::Node::revoke).
        origin: Rank,
        /// Overlay hops the notice crossed to get here (0 at the origin).
        hops: u16,
    },
}
