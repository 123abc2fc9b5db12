//! What failure knowledge tells the application.

use std::collections::BTreeMap;

use super::{CampaignId, RemovalCause};
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
    /// A shrink campaign's targets left (in op order, at every member): they are removed as of
    /// `epoch`, cause [`RemovalCause::Left`], in one view change (the same list at every
    /// survivor). Not a failure: no [`MembershipEvent::FailureConfirmed`] names them.
    Departed {
        /// The view's epoch.
        epoch: u64,
        /// The campaigns' targets newly removed here (a target that crashed while leaving may
        /// have been removed already).
        ranks: RankSet,
        /// The campaigns this view completes.
        campaigns: Vec<CampaignId>,
        /// Members of the new view.
        members: u32,
    },
    /// At the requester, exactly once: the campaign's targets are out of the view.
    CampaignCompleted {
        /// The campaign ([`Node::shrink`](crate::Node::shrink) returned it).
        id: CampaignId,
        /// Its targets, all removed (the live ones by this view change).
        removed: RankSet,
        /// The epoch of the view that removed them.
        epoch: u64,
    },
    /// At the requester, at most once and instead of [`MembershipEvent::CampaignCompleted`]:
    /// the campaign could not complete within `membership.shrink_timeout` (or this rank
    /// stopped being a member). The coordinator may still complete it later; nothing more is
    /// reported here.
    CampaignFailed {
        /// The campaign.
        id: CampaignId,
        /// Why.
        reason: CampaignFailure,
    },
    /// This rank was a shrink target and left: it drained, was excluded (or lost its
    /// lifeline, or its departure timer ran out). It takes no more commands and processes no
    /// more frames; a runtime exits cleanly. Never followed by recovery.
    Left {
        /// The epoch this rank knew when it left.
        epoch: u64,
    },
    /// The tree link to `peer` is down while both ends are alive (a gray link): frames to
    /// `peer` now go through `via` (`None`: no live rank to relay through). Advisory: nobody
    /// is removed for it while the relay carries.
    RelayStarted {
        /// The other end of the gray link.
        peer: Rank,
        /// The relay chosen first.
        via: Option<Rank>,
    },
    /// The relay around the link to `peer` ended: a frame arrived on the link itself again
    /// (or `peer` is no longer a member or tree neighbour).
    RelayEnded {
        /// The other end of the link.
        peer: Rank,
    },
}

/// Why a shrink campaign failed ([`MembershipEvent::CampaignFailed`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CampaignFailure {
    /// `membership.shrink_timeout` passed without its completion (the coordinator was lost
    /// and its successor did not finish it in time, or the order could not complete).
    TimedOut,
    /// The requester itself was removed (or left) before the campaign completed.
    RequesterRemoved,
}

impl CampaignFailure {
    /// A short name for logs and JSON.
    pub const fn name(self) -> &'static str {
        match self {
            Self::TimedOut => "timed_out",
            Self::RequesterRemoved => "requester_removed",
        }
    }
}
