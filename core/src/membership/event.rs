//! What failure knowledge tells the application.

use std::collections::BTreeMap;

use super::RemovalCause;
use crate::tree::{Rank, RankSet};

/// What failure knowledge tells the application. Nested in [`Event`](crate::Event).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum MembershipEvent {
    /// The view changed: the root's global failure notice says these ranks are removed, as
    /// of this epoch, at every survivor in the same op order. A data plane fences on it (only
    /// a view changes the active set; a `Suspect` is advisory). The member set is the live set
    /// of [`Node::tree`](crate::Node::tree) once this event is polled.
    FailureConfirmed {
        /// The root's failure epoch (the view's number).
        epoch: u64,
        /// Newly removed ranks.
        ranks: RankSet,
        /// Why each was removed (one entry per rank of `ranks`).
        causes: BTreeMap<Rank, RemovalCause>,
        /// Members of the new view.
        members: u32,
    },
    /// A view admitted joiners (in op order, at every member): they are members as of
    /// `epoch`, with ranks past the span before it. An adapter adds each joiner's address to
    /// its book before anything is sent to it (the TCP adapter does so itself).
    Joined {
        /// The admitting view's epoch.
        epoch: u64,
        /// The joiners: rank, join id, address (the adapter's encoding).
        joiners: Vec<crate::join::Admitted>,
        /// Members of the new view.
        members: u32,
    },
    /// This rank was removed from the cluster (the coordinator decided it, and a member told
    /// it so). It takes no more commands and processes no more frames; a runtime exits, or
    /// rejoins later as a new incarnation.
    Evicted {
        /// The failure epoch of the member that told it.
        epoch: u64,
    },
}
