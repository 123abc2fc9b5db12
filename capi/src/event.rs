//! `lifeline_event`: a flat, node-owned view of the core's `Event`.

use bytes::Bytes;
use lifeline_core::detect::DetectEvent;
use lifeline_core::flood::FloodEvent;
use lifeline_core::membership::MembershipEvent;
use lifeline_core::relm::RelmEvent;
use lifeline_core::revoke::RevokeEvent;
use lifeline_core::xcast::XcastEvent;
use lifeline_core::Event as CoreEvent;

use crate::LIFELINE_NO_RANK;

/// A core event this version of the C API does not know (from a newer core). Ignore it.
pub const LIFELINE_EVENT_UNKNOWN: u32 = 0;
/// An xcast reached this rank, exactly once per op at every survivor (the origin included):
/// `rank` = origin, `op`, `seq` (the origin's sequence number), `tag`, `payload`.
pub const LIFELINE_EVENT_XCAST_DELIVERED: u32 = 1;
/// At the origin: its broadcast `seq` (op `op`) is delivered at every survivor. Once per
/// broadcast.
pub const LIFELINE_EVENT_XCAST_COMPLETED: u32 = 2;
/// At the root: op `op` from `rank` (sequence `seq`) completed everywhere.
pub const LIFELINE_EVENT_XCAST_ROOT_COMPLETED: u32 = 3;
/// The agreed view changed: `ranks[0..ranks_len]` are newly removed as of `epoch` (the same at
/// every survivor, in the same order); `causes[i]` is why `ranks[i]` was removed (a
/// `LIFELINE_CAUSE_*`); `count` = members of the new view.
pub const LIFELINE_EVENT_FAILURE_CONFIRMED: u32 = 4;
/// A reliable message reached this rank: `rank` = source, `uid`, `tag`, `payload`. Exactly once,
/// in uid order per source.
pub const LIFELINE_EVENT_RELM_DELIVERED: u32 = 5;
/// At the origin: every message to `rank` up to and including `uid` is delivered (cumulative).
pub const LIFELINE_EVENT_RELM_ACKED: u32 = 6;
/// At the origin: `rank` died with `count` messages from uid `uid` on not confirmed delivered.
pub const LIFELINE_EVENT_RELM_FAILED: u32 = 7;
/// At a destination: source `rank` died; `count` out-of-order messages from it were dropped.
pub const LIFELINE_EVENT_RELM_SOURCE_LOST: u32 = 8;
/// A peer reused message identity (`rank` = source, `peer` = destination, `uid`) with
/// different bytes: a protocol violation; treat it as fatal for the cluster.
pub const LIFELINE_EVENT_RELM_COLLISION: u32 = 9;
/// This rank's tree view changed: `parent` is the new parent (`LIFELINE_NO_RANK` at the root or
/// when dead), `flags` has `LIFELINE_VIEW_PROMOTED`, `LIFELINE_VIEW_DEMOTED`,
/// `LIFELINE_VIEW_DEAD`; query children with `lifeline_node_children`.
pub const LIFELINE_EVENT_VIEW_CHANGED: u32 = 10;
/// A flood (the test protocol) reached this rank: `rank` = origin, `seq` = its id, `count` =
/// hops, `payload`.
pub const LIFELINE_EVENT_FLOOD_DELIVERED: u32 = 11;
/// This rank was removed from the cluster as of `epoch`: it takes no more commands (they return
/// `LIFELINE_ERR_DEAD`) and must exit or rejoin as a new incarnation.
pub const LIFELINE_EVENT_EVICTED: u32 = 12;
/// Detector (advisory): this rank, an observer of `rank`, heard nothing from it; `seq` = the
/// incarnation last heard.
pub const LIFELINE_EVENT_SUSPECT: u32 = 13;
/// Detector (advisory): suspected `rank` answered with the higher incarnation `seq`.
pub const LIFELINE_EVENT_REFUTED: u32 = 14;
/// Detector (advisory): suspected `rank` (incarnation `seq`) did not refute in time.
pub const LIFELINE_EVENT_UNRESPONSIVE: u32 = 15;
/// A view admitted joiners (at every member, in the same op order): `joiners[0..joiners_len]`
/// are members as of `epoch`, with ranks past the span before it (in rank order); `count` =
/// members of the new view; the span grew to the last joiner's rank + 1. Add each joiner's
/// `addr` to the transport's address book before sending it anything: the same input may also
/// queue transmits to it, and `lifeline_node_poll_transmit` can return them before this event
/// is polled (hold frames to a rank without an address until its event, or drain events
/// first).
pub const LIFELINE_EVENT_JOINED: u32 = 16;
/// Start-up (`membership_check_in` on): launched ranks checked in, at every member in the same
/// op order: `ranks[0..ranks_len]` (ascending) are members as of `epoch`; `count` = members
/// admitted so far and alive (not the span: ranks that have not checked in are not members
/// yet). `causes` is NULL.
pub const LIFELINE_EVENT_CHECKED_IN: u32 = 17;
/// Start-up is over: every expected rank checked in (or was removed after it had). Once, at
/// every member, at the same `epoch`; `count` = members of that view (the live set of the tree
/// once this event is polled). Exactly one of `LIFELINE_EVENT_READY` and
/// `LIFELINE_EVENT_STARTUP_INCOMPLETE` per member (none with `membership_check_in` off, and
/// none at a joiner).
pub const LIFELINE_EVENT_READY: u32 = 18;
/// Start-up is over without some expected ranks, instead of `LIFELINE_EVENT_READY`: they never
/// checked in within `membership_startup_timeout_ns` and were removed (not failures):
/// `ranks[0..ranks_len]` (ascending) are those missing ranks, `causes[i]` is
/// `LIFELINE_CAUSE_NEVER_JOINED` for each; once, at every member, at the same `epoch`; `count` =
/// members of that view. Their removal is also the view change `LIFELINE_EVENT_FAILURE_CONFIRMED`
/// (cause `LIFELINE_CAUSE_NEVER_JOINED`, polled first). The application decides whether to go
/// on with who is there.
pub const LIFELINE_EVENT_STARTUP_INCOMPLETE: u32 = 19;
/// A shrink campaign's targets departed, at every member in the same op order (one view change
/// for every campaign it completes): `ranks[0..ranks_len]` (ascending) are removed as of
/// `epoch`, the same list at every survivor; `causes[i]` is `LIFELINE_CAUSE_LEFT` for each;
/// `campaigns[0..campaigns_len]` are the ids of the campaigns this view completes (see
/// `lifeline_node_shrink`); `count` = members of the new view. Not a failure: no
/// `LIFELINE_EVENT_FAILURE_CONFIRMED` names them. Close the connections to them (that is what
/// ends each target's lifeline). A target that crashed while leaving may have been removed
/// earlier, so `ranks` can be shorter than the campaigns' targets.
pub const LIFELINE_EVENT_DEPARTED: u32 = 20;
/// This rank was a shrink target and left: it drained, was excluded (or lost its lifeline, or
/// its departure timer ran out); `epoch` = the epoch it knew. It takes no more commands (they
/// return `LIFELINE_ERR_DEAD`) and processes no more frames: close its connections and exit
/// cleanly. Never followed by recovery.
pub const LIFELINE_EVENT_LEFT: u32 = 21;
/// At the requester, exactly once per campaign: campaign `seq` (its id; `rank` = this rank, the
/// requester) is complete: its targets `ranks[0..ranks_len]` (ascending) are all out of the
/// view, the live ones by the view change of `epoch`. `causes` is NULL.
pub const LIFELINE_EVENT_CAMPAIGN_COMPLETED: u32 = 22;
/// At the requester, at most once and instead of `LIFELINE_EVENT_CAMPAIGN_COMPLETED`: campaign
/// `seq` (its id; `rank` = the requester) could not complete; `reason` is a
/// `LIFELINE_CAMPAIGN_*`. The coordinator may still complete it later; nothing more is
/// reported here.
pub const LIFELINE_EVENT_CAMPAIGN_FAILED: u32 = 23;
/// A group is revoked (`lifeline_node_revoke`, here or at another rank): `seq` the group,
/// `epoch` its revoked epoch, `rank` the origin, `count` the overlay hops the notice crossed
/// (0 at the origin). Exactly once per (group, epoch) at every live rank, the origin included;
/// never for an epoch older than one already revoked for the group.
pub const LIFELINE_EVENT_REVOKED: u32 = 24;
/// Advisory: the tree link to `rank` is gray here (down, or silent for
/// `membership_gray_after_ns`, while both ends are alive): frames to `rank` now go through
/// `peer` (`LIFELINE_NO_RANK`: no live rank to relay through, they go directly and may be
/// lost). Nobody is removed for it while the relay carries. Followed by exactly one
/// `LIFELINE_EVENT_RELAY_ENDED` for `rank` before another `LIFELINE_EVENT_RELAY_STARTED` for
/// it.
pub const LIFELINE_EVENT_RELAY_STARTED: u32 = 25;
/// Advisory: the relay around the tree link to `rank` ended (the link carries frames again,
/// or `rank` is no longer a member or tree neighbour).
pub const LIFELINE_EVENT_RELAY_ENDED: u32 = 26;

/// `LIFELINE_EVENT_VIEW_CHANGED` flag: the slot moved up (shallower).
pub const LIFELINE_VIEW_PROMOTED: u16 = 1;
/// `LIFELINE_EVENT_VIEW_CHANGED` flag: the slot moved down (a grow with holes).
pub const LIFELINE_VIEW_DEMOTED: u16 = 2;
/// `LIFELINE_EVENT_VIEW_CHANGED` flag: this rank is now dead (no view).
pub const LIFELINE_VIEW_DEAD: u16 = 4;

/// Removal cause: a tree link to the rank was lost on hard evidence (or any loss with the
/// detector off).
pub const LIFELINE_CAUSE_LINK_LOST: u8 = 0;
/// Removal cause: its observers found it silent (the coordinator's decision).
pub const LIFELINE_CAUSE_UNRESPONSIVE: u8 = 1;
/// Removal cause: a tree link to it stayed down past the gray timeout.
pub const LIFELINE_CAUSE_UNREACHABLE: u8 = 2;
/// Removal cause: the embedding runtime declared it dead (`lifeline_node_handle_dead`).
pub const LIFELINE_CAUSE_DECLARED: u8 = 3;
/// Removal cause: a launched rank that never checked in (`membership_check_in`): not a failure.
/// The coordinator removes the ranks still missing at `membership_startup_timeout_ns` (a rank
/// removed on evidence before it checked in gets this cause too); a process that starts later
/// is fenced and may join as a new rank.
pub const LIFELINE_CAUSE_NEVER_JOINED: u8 = 4;
/// Removal cause: a shrink campaign removed it on purpose (`LIFELINE_EVENT_DEPARTED`): it
/// drained and left, or crashed while leaving. Not a failure.
pub const LIFELINE_CAUSE_LEFT: u8 = 5;

/// One joiner admitted by a view (`lifeline_event.joiners`, `LIFELINE_EVENT_JOINED`), owned by
/// the node like the event it is part of.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct Admitted {
    /// Its rank.
    pub rank: u32,
    /// The join id's sequence number (the try that was admitted).
    pub seq: u32,
    /// The join id's nonce (the joiner process's incarnation).
    pub nonce: u64,
    /// Where members reach it, as its transport encoded it (`lifeline_joiner_new`'s `addr`;
    /// NULL when `addr_len` is 0).
    pub addr: *const u8,
    /// Length of `addr` (at most `LIFELINE_MAX_JOIN_ADDR`).
    pub addr_len: usize,
}

/// One application event, owned by the node: the pointer from `lifeline_node_poll_event` and
/// every pointer inside it stay valid until the next call on that node (copy a payload to keep
/// it). Each kind documents the fields it sets; the others are zero (ranks: `LIFELINE_NO_RANK`,
/// pointers: NULL). Unknown kinds must be ignored. New fields are only ever appended (the
/// library allocates the struct, so older programs keep working).
#[repr(C)]
#[derive(Debug)]
pub struct Event {
    /// A `LIFELINE_EVENT_*` kind.
    pub kind: u32,
    /// The rank the event is about (origin, source, destination, subject).
    pub rank: u32,
    /// A second rank (`LIFELINE_EVENT_RELM_COLLISION`: the destination;
    /// `LIFELINE_EVENT_RELAY_STARTED`: the relay).
    pub peer: u32,
    /// Application tag.
    pub tag: u16,
    /// Kind-specific flags (`LIFELINE_VIEW_*`).
    pub flags: u16,
    /// A RELM uid.
    pub uid: u32,
    /// The new parent (`LIFELINE_EVENT_VIEW_CHANGED`).
    pub parent: u32,
    /// An xcast op id.
    pub op: u64,
    /// A sequence number, flood id, incarnation, campaign id
    /// (`LIFELINE_EVENT_CAMPAIGN_COMPLETED`, `_FAILED`) or group (`LIFELINE_EVENT_REVOKED`).
    pub seq: u64,
    /// A failure epoch, or the revoked epoch (`LIFELINE_EVENT_REVOKED`).
    pub epoch: u64,
    /// A count (messages, members, hops).
    pub count: u64,
    /// Payload bytes (NULL when `payload_len` is 0).
    pub payload: *const u8,
    /// Payload length.
    pub payload_len: usize,
    /// Ranks (NULL when `ranks_len` is 0): `LIFELINE_EVENT_FAILURE_CONFIRMED` the removed,
    /// `LIFELINE_EVENT_CHECKED_IN` the checked in, `LIFELINE_EVENT_STARTUP_INCOMPLETE` the
    /// missing, `LIFELINE_EVENT_DEPARTED` the departed, `LIFELINE_EVENT_CAMPAIGN_COMPLETED` the
    /// campaign's targets.
    pub ranks: *const u32,
    /// Number of `ranks` (and of `causes` when it is not NULL).
    pub ranks_len: usize,
    /// One `LIFELINE_CAUSE_*` per rank (`LIFELINE_EVENT_FAILURE_CONFIRMED`,
    /// `LIFELINE_EVENT_STARTUP_INCOMPLETE`, `LIFELINE_EVENT_DEPARTED`); NULL when `ranks_len`
    /// is 0 and for `LIFELINE_EVENT_CHECKED_IN` and `LIFELINE_EVENT_CAMPAIGN_COMPLETED`.
    pub causes: *const u8,
    /// `LIFELINE_EVENT_JOINED`: the admitted joiners (NULL when `joiners_len` is 0).
    pub joiners: *const Admitted,
    /// Number of `joiners`.
    pub joiners_len: usize,
    /// `LIFELINE_EVENT_DEPARTED`: the ids of the campaigns the view completes (NULL when
    /// `campaigns_len` is 0); owned by the node like the rest of the event.
    pub campaigns: *const u64,
    /// Number of `campaigns`.
    pub campaigns_len: usize,
    /// `LIFELINE_EVENT_CAMPAIGN_FAILED`: why (a `LIFELINE_CAMPAIGN_*`; 0 for a reason this
    /// version does not know).
    pub reason: u32,
}

impl Event {
    pub(crate) fn empty() -> Self {
        Self {
            kind: LIFELINE_EVENT_UNKNOWN,
            rank: LIFELINE_NO_RANK,
            peer: LIFELINE_NO_RANK,
            tag: 0,
            flags: 0,
            uid: 0,
            parent: LIFELINE_NO_RANK,
            op: 0,
            seq: 0,
            epoch: 0,
            count: 0,
            payload: std::ptr::null(),
            payload_len: 0,
            ranks: std::ptr::null(),
            ranks_len: 0,
            causes: std::ptr::null(),
            joiners: std::ptr::null(),
            joiners_len: 0,
            campaigns: std::ptr::null(),
            campaigns_len: 0,
            reason: 0,
        }
    }
}

/// The node-side storage behind the current `Event`: it keeps the payload, the rank lists and
/// the joiners (their addresses included) alive until the next call.
#[derive(Debug)]
pub(crate) struct EventSlot {
    pub(crate) ev: Event,
    payload: Bytes,
    ranks: Vec<u32>,
    causes: Vec<u8>,
    /// The joiners as the core gave them (owning the address bytes `joiners` points into).
    admitted: Vec<lifeline_core::join::Admitted>,
    joiners: Vec<Admitted>,
    campaigns: Vec<u64>,
}

impl EventSlot {
    pub(crate) fn new() -> Self {
        Self {
            ev: Event::empty(),
            payload: Bytes::new(),
            ranks: Vec::new(),
            causes: Vec::new(),
            admitted: Vec::new(),
            joiners: Vec::new(),
            campaigns: Vec::new(),
        }
    }

    /// Replaces the current event with `e`, flattened.
    pub(crate) fn fill(&mut self, e: CoreEvent) {
        let mut ev = Event::empty();
        self.payload = Bytes::new();
        self.ranks.clear();
        self.causes.clear();
        self.joiners.clear();
        self.admitted.clear();
        self.campaigns.clear();
        match e {
            CoreEvent::Xcast(x) => match x {
                XcastEvent::Delivered {
                    op,
                    origin,
                    seq,
                    tag,
                    payload,
                } => {
                    ev.kind = LIFELINE_EVENT_XCAST_DELIVERED;
                    (ev.rank, ev.op, ev.seq, ev.tag) = (origin.0, op, seq, tag);
                    self.payload = payload;
                }
                XcastEvent::Completed { op, seq } => {
                    ev.kind = LIFELINE_EVENT_XCAST_COMPLETED;
                    (ev.op, ev.seq) = (op, seq);
                }
                XcastEvent::RootCompleted { op, origin, seq } => {
                    ev.kind = LIFELINE_EVENT_XCAST_ROOT_COMPLETED;
                    (ev.rank, ev.op, ev.seq) = (origin.0, op, seq);
                }
                _ => {}
            },
            CoreEvent::Membership(m) => match m {
                MembershipEvent::FailureConfirmed {
                    epoch,
                    ranks,
                    causes,
                    members,
                } => {
                    ev.kind = LIFELINE_EVENT_FAILURE_CONFIRMED;
                    (ev.epoch, ev.count) = (epoch, u64::from(members));
                    for r in ranks.iter() {
                        self.ranks.push(r.0);
                        // A rank without a recorded cause was learned from a notice: link lost.
                        let c = causes
                            .get(&r)
                            .map_or(LIFELINE_CAUSE_LINK_LOST, |c| c.byte());
                        self.causes.push(c);
                    }
                }
                MembershipEvent::CheckedIn {
                    epoch,
                    ranks,
                    members,
                } => {
                    ev.kind = LIFELINE_EVENT_CHECKED_IN;
                    (ev.epoch, ev.count) = (epoch, u64::from(members));
                    self.ranks.extend(ranks.iter().map(|r| r.0));
                }
                MembershipEvent::Ready { epoch, members } => {
                    ev.kind = LIFELINE_EVENT_READY;
                    (ev.epoch, ev.count) = (epoch, u64::from(members));
                }
                MembershipEvent::StartupIncomplete {
                    epoch,
                    missing,
                    members,
                } => {
                    ev.kind = LIFELINE_EVENT_STARTUP_INCOMPLETE;
                    (ev.epoch, ev.count) = (epoch, u64::from(members));
                    for r in missing.iter() {
                        self.ranks.push(r.0);
                        self.causes.push(LIFELINE_CAUSE_NEVER_JOINED);
                    }
                }
                MembershipEvent::Evicted { epoch } => {
                    ev.kind = LIFELINE_EVENT_EVICTED;
                    ev.epoch = epoch;
                }
                MembershipEvent::Joined {
                    epoch,
                    joiners,
                    members,
                } => {
                    ev.kind = LIFELINE_EVENT_JOINED;
                    (ev.epoch, ev.count) = (epoch, u64::from(members));
                    self.admitted = joiners;
                    // The addresses are `Bytes` held in `self.admitted` until the next fill:
                    // their heap bytes do not move with the vector.
                    self.joiners.extend(self.admitted.iter().map(|a| Admitted {
                        rank: a.rank.0,
                        seq: a.id.seq,
                        nonce: a.id.nonce,
                        addr: if a.addr.is_empty() {
                            std::ptr::null()
                        } else {
                            a.addr.as_ptr()
                        },
                        addr_len: a.addr.len(),
                    }));
                }
                MembershipEvent::Departed {
                    epoch,
                    ranks,
                    campaigns,
                    members,
                } => {
                    ev.kind = LIFELINE_EVENT_DEPARTED;
                    (ev.epoch, ev.count) = (epoch, u64::from(members));
                    for r in ranks.iter() {
                        self.ranks.push(r.0);
                        self.causes.push(LIFELINE_CAUSE_LEFT);
                    }
                    self.campaigns
                        .extend(campaigns.into_iter().map(crate::shrink::campaign_id));
                }
                MembershipEvent::Left { epoch } => {
                    ev.kind = LIFELINE_EVENT_LEFT;
                    ev.epoch = epoch;
                }
                MembershipEvent::CampaignCompleted { id, removed, epoch } => {
                    ev.kind = LIFELINE_EVENT_CAMPAIGN_COMPLETED;
                    (ev.rank, ev.seq, ev.epoch) =
                        (id.requester.0, crate::shrink::campaign_id(id), epoch);
                    self.ranks.extend(removed.iter().map(|r| r.0));
                }
                MembershipEvent::RelayStarted { peer, via } => {
                    ev.kind = LIFELINE_EVENT_RELAY_STARTED;
                    (ev.rank, ev.peer) = (peer.0, via.map_or(LIFELINE_NO_RANK, |v| v.0));
                }
                MembershipEvent::RelayEnded { peer } => {
                    ev.kind = LIFELINE_EVENT_RELAY_ENDED;
                    ev.rank = peer.0;
                }
                MembershipEvent::CampaignFailed { id, reason } => {
                    ev.kind = LIFELINE_EVENT_CAMPAIGN_FAILED;
                    (ev.rank, ev.seq) = (id.requester.0, crate::shrink::campaign_id(id));
                    ev.reason = crate::shrink::failure_reason(reason);
                }
                _ => {}
            },
            CoreEvent::Relm(r) => match r {
                RelmEvent::Delivered {
                    src,
                    uid,
                    tag,
                    payload,
                } => {
                    ev.kind = LIFELINE_EVENT_RELM_DELIVERED;
                    (ev.rank, ev.uid, ev.tag) = (src.0, uid.get(), tag);
                    self.payload = payload;
                }
                RelmEvent::Acked { dst, upto } => {
                    ev.kind = LIFELINE_EVENT_RELM_ACKED;
                    (ev.rank, ev.uid) = (dst.0, upto.get());
                }
                RelmEvent::Failed { dst, first, count } => {
                    ev.kind = LIFELINE_EVENT_RELM_FAILED;
                    (ev.rank, ev.uid, ev.count) = (dst.0, first.get(), u64::from(count));
                }
                RelmEvent::SourceLost { src, discarded } => {
                    ev.kind = LIFELINE_EVENT_RELM_SOURCE_LOST;
                    (ev.rank, ev.count) = (src.0, u64::from(discarded));
                }
                RelmEvent::Collision { src, dst, uid } => {
                    ev.kind = LIFELINE_EVENT_RELM_COLLISION;
                    (ev.rank, ev.peer, ev.uid) = (src.0, dst.0, uid.get());
                }
                _ => {}
            },
            CoreEvent::Revoke(RevokeEvent::Revoked {
                group,
                epoch,
                origin,
                hops,
            }) => {
                ev.kind = LIFELINE_EVENT_REVOKED;
                (ev.rank, ev.seq, ev.epoch, ev.count) = (origin.0, group, epoch, u64::from(hops));
            }
            CoreEvent::Flood(FloodEvent::Delivered {
                origin,
                id,
                hops,
                payload,
            }) => {
                ev.kind = LIFELINE_EVENT_FLOOD_DELIVERED;
                (ev.rank, ev.seq, ev.count) = (origin.0, id, u64::from(hops));
                self.payload = payload;
            }
            CoreEvent::Detect(d) => {
                let (kind, rank, inc) = match d {
                    DetectEvent::Suspect { rank, incarnation } => {
                        (LIFELINE_EVENT_SUSPECT, rank, incarnation)
                    }
                    DetectEvent::Refuted { rank, incarnation } => {
                        (LIFELINE_EVENT_REFUTED, rank, incarnation)
                    }
                    DetectEvent::Unresponsive { rank, incarnation } => {
                        (LIFELINE_EVENT_UNRESPONSIVE, rank, incarnation)
                    }
                    _ => (LIFELINE_EVENT_UNKNOWN, rank_none(), 0),
                };
                (ev.kind, ev.rank, ev.seq) = (kind, rank.0, inc);
            }
            CoreEvent::ViewChanged(d) => {
                ev.kind = LIFELINE_EVENT_VIEW_CHANGED;
                ev.parent = d.new_parent.map_or(LIFELINE_NO_RANK, |r| r.0);
                ev.flags = if d.promoted {
                    LIFELINE_VIEW_PROMOTED
                } else {
                    0
                } | if d.demoted { LIFELINE_VIEW_DEMOTED } else { 0 }
                    | if d.new_slot.is_none() {
                        LIFELINE_VIEW_DEAD
                    } else {
                        0
                    };
            }
            _ => {}
        }
        if !self.payload.is_empty() {
            ev.payload = self.payload.as_ptr();
            ev.payload_len = self.payload.len();
        }
        if !self.ranks.is_empty() {
            ev.ranks = self.ranks.as_ptr();
            ev.ranks_len = self.ranks.len();
        }
        if !self.causes.is_empty() {
            debug_assert_eq!(self.causes.len(), self.ranks.len());
            ev.causes = self.causes.as_ptr();
        }
        if !self.joiners.is_empty() {
            ev.joiners = self.joiners.as_ptr();
            ev.joiners_len = self.joiners.len();
        }
        if !self.campaigns.is_empty() {
            ev.campaigns = self.campaigns.as_ptr();
            ev.campaigns_len = self.campaigns.len();
        }
        self.ev = ev;
    }
}

fn rank_none() -> lifeline_core::tree::Rank {
    lifeline_core::tree::Rank(LIFELINE_NO_RANK)
}

#[cfg(test)]
#[path = "event_shrink_tests.rs"]
mod shrink_tests;

#[cfg(test)]
#[path = "event_relay_tests.rs"]
mod relay_tests;

#[cfg(test)]
mod tests {
    use super::*;
    use lifeline_core::tree::{Rank, RankSet};
    use lifeline_core::RemovalCause;
    use std::collections::BTreeMap;

    #[test]
    fn failure_confirmed_flattens_ranks_and_causes() {
        let mut slot = EventSlot::new();
        let mut ranks = RankSet::new();
        ranks.insert(Rank(2));
        ranks.insert(Rank(5));
        let causes = BTreeMap::from([(Rank(5), RemovalCause::Declared)]);
        slot.fill(CoreEvent::Membership(MembershipEvent::FailureConfirmed {
            epoch: 3,
            ranks,
            causes,
            members: 4,
        }));
        let ev = &slot.ev;
        assert_eq!(
            (ev.kind, ev.epoch, ev.count),
            (LIFELINE_EVENT_FAILURE_CONFIRMED, 3, 4)
        );
        assert_eq!(ev.ranks_len, 2);
        // SAFETY: `ranks`/`causes` point at `ranks_len` elements owned by `slot`.
        let (r, c) = unsafe {
            (
                std::slice::from_raw_parts(ev.ranks, ev.ranks_len),
                std::slice::from_raw_parts(ev.causes, ev.ranks_len),
            )
        };
        assert_eq!(r, [2, 5]);
        assert_eq!(c, [LIFELINE_CAUSE_LINK_LOST, LIFELINE_CAUSE_DECLARED]);
        slot.fill(CoreEvent::Membership(MembershipEvent::Evicted { epoch: 9 }));
        assert_eq!((slot.ev.kind, slot.ev.epoch), (LIFELINE_EVENT_EVICTED, 9));
        assert!(slot.ev.ranks.is_null() && slot.ev.payload.is_null());
    }

    #[test]
    fn joined_flattens_the_joiners_and_keeps_their_addresses() {
        use lifeline_core::join::{Admitted as CoreAdmitted, JoinId};
        let mut slot = EventSlot::new();
        let joiners = vec![
            CoreAdmitted {
                rank: Rank(3),
                id: JoinId { nonce: 77, seq: 2 },
                addr: Bytes::from_static(b"10.0.0.3:7000"),
            },
            CoreAdmitted {
                rank: Rank(4),
                id: JoinId { nonce: 78, seq: 1 },
                addr: Bytes::new(),
            },
        ];
        slot.fill(CoreEvent::Membership(MembershipEvent::Joined {
            epoch: 5,
            joiners,
            members: 5,
        }));
        let ev = &slot.ev;
        assert_eq!(
            (ev.kind, ev.epoch, ev.count, ev.joiners_len),
            (LIFELINE_EVENT_JOINED, 5, 5, 2)
        );
        assert!(ev.ranks.is_null() && ev.causes.is_null() && ev.payload.is_null());
        // SAFETY: `joiners` points at `joiners_len` elements owned by `slot`, and the first
        // one's `addr` at `addr_len` bytes owned by it too.
        let (j, addr) = unsafe {
            let j = std::slice::from_raw_parts(ev.joiners, ev.joiners_len);
            (j, std::slice::from_raw_parts(j[0].addr, j[0].addr_len))
        };
        assert_eq!((j[0].rank, j[0].nonce, j[0].seq), (3, 77, 2));
        assert_eq!(addr, b"10.0.0.3:7000");
        assert_eq!((j[1].rank, j[1].nonce, j[1].seq), (4, 78, 1));
        assert!(j[1].addr.is_null() && j[1].addr_len == 0);
        slot.fill(CoreEvent::Membership(MembershipEvent::Evicted { epoch: 9 }));
        assert!(slot.ev.joiners.is_null() && slot.ev.joiners_len == 0);
    }

    #[test]
    fn start_up_events_flatten_their_ranks() {
        let mut slot = EventSlot::new();
        let ranks: RankSet = [Rank(1), Rank(3)].into_iter().collect();
        slot.fill(CoreEvent::Membership(MembershipEvent::CheckedIn {
            epoch: 2,
            ranks,
            members: 3,
        }));
        let ev = &slot.ev;
        assert_eq!(
            (ev.kind, ev.epoch, ev.count, ev.ranks_len),
            (LIFELINE_EVENT_CHECKED_IN, 2, 3, 2)
        );
        assert!(ev.causes.is_null() && ev.payload.is_null() && ev.joiners.is_null());
        // SAFETY: `ranks` points at `ranks_len` elements owned by `slot`.
        let r = unsafe { std::slice::from_raw_parts(ev.ranks, ev.ranks_len) };
        assert_eq!(r, [1, 3]);

        slot.fill(CoreEvent::Membership(MembershipEvent::Ready {
            epoch: 4,
            members: 5,
        }));
        let ev = &slot.ev;
        assert_eq!(
            (ev.kind, ev.epoch, ev.count, ev.ranks_len),
            (LIFELINE_EVENT_READY, 4, 5, 0)
        );
        assert!(ev.ranks.is_null() && ev.causes.is_null());

        let missing: RankSet = [Rank(6)].into_iter().collect();
        slot.fill(CoreEvent::Membership(MembershipEvent::StartupIncomplete {
            epoch: 7,
            missing,
            members: 6,
        }));
        let ev = &slot.ev;
        assert_eq!(
            (ev.kind, ev.epoch, ev.count, ev.ranks_len),
            (LIFELINE_EVENT_STARTUP_INCOMPLETE, 7, 6, 1)
        );
        // SAFETY: `ranks`/`causes` point at `ranks_len` elements owned by `slot`.
        let (r, c) = unsafe {
            (
                std::slice::from_raw_parts(ev.ranks, ev.ranks_len),
                std::slice::from_raw_parts(ev.causes, ev.ranks_len),
            )
        };
        assert_eq!(
            (r, c),
            ([6].as_slice(), [LIFELINE_CAUSE_NEVER_JOINED].as_slice())
        );
    }

    #[test]
    fn cause_constants_match_the_wire_bytes() {
        for (c, b) in [
            (RemovalCause::LinkLost, LIFELINE_CAUSE_LINK_LOST),
            (RemovalCause::Unresponsive, LIFELINE_CAUSE_UNRESPONSIVE),
            (RemovalCause::Unreachable, LIFELINE_CAUSE_UNREACHABLE),
            (RemovalCause::Declared, LIFELINE_CAUSE_DECLARED),
            (RemovalCause::NeverJoined, LIFELINE_CAUSE_NEVER_JOINED),
            (RemovalCause::Left, LIFELINE_CAUSE_LEFT),
        ] {
            assert_eq!(c.byte(), b);
        }
    }
}
