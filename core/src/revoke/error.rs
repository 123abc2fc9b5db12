//! Why a revoke command was refused.

/// Why [`Node::revoke`](crate::Node::revoke) was refused. Nothing changed, nothing was sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RevokeError {
    /// A newer epoch of the group is already revoked here: the asked one is stale.
    #[error("group {group} is already revoked at epoch {newest}, newer than {epoch}")]
    Stale {
        /// The group.
        group: u64,
        /// The epoch asked for.
        epoch: u64,
        /// The newest epoch revoked here for the group.
        newest: u64,
    },
}
