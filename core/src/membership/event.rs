//! What failure knowledge tells the application.

use crate::tree::RankSet;

/// What failure knowledge tells the application. Nested in [`Event`](crate::Event).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum MembershipEvent {
    /// The root's global failure notice: these ranks are dead, as of this epoch, at every
    /// survivor in the same op order.
    FailureConfirmed {
        /// The root's failure epoch.
        epoch: u64,
        /// Newly confirmed dead ranks.
        ranks: RankSet,
    },
    /// This rank was removed from the cluster (the coordinator decided it, and a member told
    /// it so). It takes no more commands and processes no more frames; a runtime exits, or
    /// rejoins later as a new incarnation.
    Evicted {
        /// The failure epoch of the member that told it.
        epoch: u64,
    },
}
