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
    /// Start-up: launched ranks checked in (in op order, at every member): they are members
    /// as of `epoch`. Until its check-in is in a notice a launched rank is "not joined yet":
    /// never removed as dead, and not counted by the majority guard.
    CheckedIn {
        /// The view's epoch.
        epoch: u64,
        /// The ranks this notice admits.
        ranks: RankSet,
        /// Ranks admitted so far (checked in, joined, or a joiner's whole snapshot) and alive.
        members: u32,
    },
    /// Start-up is over: every expected rank checked in (or was removed after it had). Once,
    /// at every member, at the same epoch. The member set is the live set of
    /// [`Node::tree`](crate::Node::tree) once this event is polled.
    Ready {
        /// The epoch of the view that completed start-up.
        epoch: u64,
        /// Members of that view.
        members: u32,
    },
    /// Start-up is over without some expected ranks: they never checked in within
    /// `membership.startup_timeout` and were removed, cause
    /// [`RemovalCause::NeverJoined`] (not failures). Once, at every member, at the same epoch,
    /// instead of [`MembershipEvent::Ready`]. The application decides whether to go on with
    /// who is there (`lifeline node` does).
    StartupIncomplete {
        /// The epoch of the view that completed start-up.
        epoch: u64,
        /// The expected ranks that never checked in.
        missing: RankSet,
        /// Members of that view.
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
