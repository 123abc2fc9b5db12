//! The events a Python program sees, as plain Rust values: the core's [`Event`]s and the
//! driver's link changes, flattened, with the member list kept up to date ([`Members`]).
//!
//! The Python layer turns each [`Ev`] into one of the typed event classes of
//! `lifeline/_events.py` (the kind names below are theirs, in snake case).

use std::collections::BTreeSet;

use bytes::Bytes;
use lifeline_core::tree::Rank;
use lifeline_core::{
    DetectEvent, Event, FloodEvent, MembershipEvent, RelmEvent, RevokeEvent, XcastEvent,
};

use crate::shrink::campaign_id;

/// One event, as the Python layer receives it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ev {
    /// A reliable broadcast was delivered here (`XcastDelivered`).
    XcastDelivered {
        /// The originating rank.
        origin: u32,
        /// The origin's sequence number (what its `xcast` returned).
        seq: u64,
        /// The global op id (the same at every rank).
        op: u64,
        /// The tag.
        tag: u16,
        /// The payload.
        payload: Bytes,
    },
    /// A broadcast this rank started reached every member (`XcastCompleted`).
    XcastCompleted {
        /// Its sequence number.
        seq: u64,
        /// Its op id.
        op: u64,
    },
    /// A reliable message was delivered here (`RelmDelivered`).
    RelmDelivered {
        /// The sender.
        src: u32,
        /// Its uid (what the sender's `relm_send` returned).
        uid: u32,
        /// The tag.
        tag: u16,
        /// The payload.
        payload: Bytes,
    },
    /// Messages to `dst` up to `upto` were delivered there (`RelmAcked`).
    RelmAcked {
        /// The destination.
        dst: u32,
        /// Highest uid delivered.
        upto: u32,
    },
    /// `dst` died before `count` messages from `first` on were delivered (`RelmFailed`).
    RelmFailed {
        /// The destination.
        dst: u32,
        /// First uid lost.
        first: u32,
        /// Messages lost.
        count: u32,
    },
    /// The agreed view changed: ranks were removed (`ViewChanged`).
    ViewChanged {
        /// The view's epoch.
        epoch: u64,
        /// The removed ranks and why (`link_lost`, `unresponsive`, `unreachable`, `declared`,
        /// `never_joined`: the [`lifeline_core::RemovalCause`] names).
        removed: Vec<(u32, &'static str)>,
        /// The members of the new view, ascending.
        members: Vec<u32>,
    },
    /// A view admitted joiners (`Joined`).
    Joined {
        /// The view's epoch.
        epoch: u64,
        /// The joiners: rank and address.
        joiners: Vec<(u32, String)>,
        /// The members of the new view, ascending.
        members: Vec<u32>,
    },
    /// A start-up check-in notice was applied: `ranks` checked in (`CheckedIn`; check-ins on).
    CheckedIn {
        /// The view's epoch.
        epoch: u64,
        /// The ranks this notice admits, ascending.
        ranks: Vec<u32>,
        /// How many ranks are admitted so far (checked in, joined) and alive.
        members: u32,
    },
    /// Start-up is over: every launched rank checked in (`Ready`; once, at every member, at the
    /// same epoch).
    Ready {
        /// The epoch of the view that completed start-up.
        epoch: u64,
        /// How many members that view has.
        members: u32,
    },
    /// Start-up is over without `missing`: they never checked in within the start-up timeout
    /// and were removed, cause `never_joined` (`StartupIncomplete`; once, instead of `Ready`).
    StartupIncomplete {
        /// The epoch of the view that completed start-up.
        epoch: u64,
        /// The launched ranks that never checked in, ascending.
        missing: Vec<u32>,
        /// How many members that view has.
        members: u32,
    },
    /// A shrink campaign's targets departed: one view change at every member, not a failure
    /// (`Departed`).
    Departed {
        /// The view's epoch.
        epoch: u64,
        /// The departed ranks, ascending (the same list at every survivor).
        ranks: Vec<u32>,
        /// The campaigns this view completes ([`crate::shrink::campaign_id`]).
        campaigns: Vec<u64>,
        /// The members of the new view, ascending.
        members: Vec<u32>,
    },
    /// This rank was a shrink target and left: it takes no more commands; exit cleanly
    /// (`Left`).
    Left {
        /// The epoch it knew.
        epoch: u64,
    },
    /// At the requester, exactly once: the campaign's targets are out of the view
    /// (`CampaignCompleted`).
    CampaignCompleted {
        /// The campaign ([`crate::shrink::campaign_id`]).
        id: u64,
        /// Its targets, ascending.
        removed: Vec<u32>,
        /// The epoch of the view that removed them.
        epoch: u64,
    },
    /// At the requester, at most once, instead of a completion (`CampaignFailed`).
    CampaignFailed {
        /// The campaign.
        id: u64,
        /// Why: `timed_out` or `requester_removed`.
        reason: &'static str,
    },
    /// This rank was removed from the cluster and stops (`Evicted`).
    Evicted {
        /// The failure epoch of the member that told it.
        epoch: u64,
    },
    /// A group is revoked (`Revoked`): once per (group, epoch) at every live rank, the origin
    /// included.
    Revoked {
        /// The application's group id.
        group: u64,
        /// The revoked epoch of the group.
        epoch: u64,
        /// The rank that revoked it.
        origin: u32,
        /// Overlay hops the notice crossed (0 at the origin).
        hops: u16,
    },
    /// The tree link to `peer` is gray here (down, or silent for `membership_gray_after_ns`,
    /// while both ends are alive): frames to it go through `via` (`None`: no live rank to
    /// relay through). Advisory (`RelayStarted`).
    RelayStarted {
        /// The other end of the gray link.
        peer: u32,
        /// The relay chosen first.
        via: Option<u32>,
    },
    /// The relay around the tree link to `peer` ended (`RelayEnded`).
    RelayEnded {
        /// The other end of the link.
        peer: u32,
    },
    /// A flood (best effort) was delivered here (`FloodDelivered`).
    FloodDelivered {
        /// The originating rank.
        origin: u32,
        /// The flood id.
        id: u64,
        /// The payload.
        payload: Bytes,
    },
    /// The heartbeat detector suspects a rank (advisory; `Suspected`).
    Suspected {
        /// The rank.
        rank: u32,
    },
    /// This rank's place in the tree changed (`TreeChanged`); `slot` is `None` once it has
    /// none (it was removed).
    TreeChanged {
        /// Its slot.
        slot: Option<u32>,
        /// Its parent.
        parent: Option<u32>,
    },
    /// A link to a peer is up (running nodes only; `LinkUp`).
    LinkUp {
        /// The peer.
        peer: u32,
    },
    /// A link to a peer is down (running nodes only; `LinkDown`).
    LinkDown {
        /// The peer.
        peer: u32,
        /// Why, in words.
        reason: String,
    },
    /// Any other core event, by name and debug text (`Other`).
    Other {
        /// The event's name.
        name: &'static str,
        /// Its debug text.
        detail: String,
    },
}

/// The member list as this rank's events tell it: `0..span` less the holes at start, less
/// every rank a view removed, plus every rank a view admitted.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Members(BTreeSet<u32>);

impl Members {
    /// The members of a node built from `cfg`: `0..span` less `cfg.dead`.
    pub fn from_config(cfg: &lifeline_core::Config) -> Self {
        Self(
            (0..cfg.span)
                .filter(|r| !cfg.dead.contains(Rank(*r)))
                .collect(),
        )
    }

    /// The members, ascending.
    pub fn to_vec(&self) -> Vec<u32> {
        self.0.iter().copied().collect()
    }

    /// Whether `rank` is a member.
    pub fn contains(&self, rank: u32) -> bool {
        self.0.contains(&rank)
    }

    /// Converts one core event, updating the members on a view change.
    pub fn convert(&mut self, e: Event) -> Ev {
        match e {
            Event::Xcast(XcastEvent::Delivered {
                op,
                origin,
                seq,
                tag,
                payload,
            }) => Ev::XcastDelivered {
                origin: origin.0,
                seq,
                op,
                tag,
                payload,
            },
            Event::Xcast(XcastEvent::Completed { op, seq }) => Ev::XcastCompleted { seq, op },
            Event::Relm(RelmEvent::Delivered {
                src,
                uid,
                tag,
                payload,
            }) => Ev::RelmDelivered {
                src: src.0,
                uid: uid.get(),
                tag,
                payload,
            },
            Event::Relm(RelmEvent::Acked { dst, upto }) => Ev::RelmAcked {
                dst: dst.0,
                upto: upto.get(),
            },
            Event::Relm(RelmEvent::Failed { dst, first, count }) => Ev::RelmFailed {
                dst: dst.0,
                first: first.get(),
                count,
            },
            Event::Membership(MembershipEvent::FailureConfirmed {
                epoch,
                ranks,
                causes,
                ..
            }) => {
                let removed = ranks
                    .iter()
                    .map(|r| {
                        self.0.remove(&r.0);
                        (r.0, causes.get(&r).map_or("link_lost", |c| c.name()))
                    })
                    .collect();
                Ev::ViewChanged {
                    epoch,
                    removed,
                    members: self.to_vec(),
                }
            }
            Event::Membership(MembershipEvent::Joined { epoch, joiners, .. }) => {
                let joiners = joiners
                    .iter()
                    .map(|a| {
                        self.0.insert(a.rank.0);
                        (a.rank.0, String::from_utf8_lossy(&a.addr).into_owned())
                    })
                    .collect();
                Ev::Joined {
                    epoch,
                    joiners,
                    members: self.to_vec(),
                }
            }
            Event::Membership(MembershipEvent::CheckedIn {
                epoch,
                ranks,
                members,
            }) => Ev::CheckedIn {
                epoch,
                ranks: ranks.iter().map(|r| r.0).collect(),
                members,
            },
            Event::Membership(MembershipEvent::Ready { epoch, members }) => {
                Ev::Ready { epoch, members }
            }
            Event::Membership(MembershipEvent::StartupIncomplete {
                epoch,
                missing,
                members,
            }) => Ev::StartupIncomplete {
                epoch,
                missing: missing.iter().map(|r| r.0).collect(),
                members,
            },
            Event::Membership(MembershipEvent::Evicted { epoch }) => Ev::Evicted { epoch },
            Event::Membership(MembershipEvent::Departed {
                epoch,
                ranks,
                campaigns,
                ..
            }) => {
                let ranks: Vec<u32> = ranks.iter().map(|r| r.0).collect();
                for r in &ranks {
                    self.0.remove(r);
                }
                Ev::Departed {
                    epoch,
                    ranks,
                    campaigns: campaigns.into_iter().map(campaign_id).collect(),
                    members: self.to_vec(),
                }
            }
            Event::Membership(MembershipEvent::Left { epoch }) => Ev::Left { epoch },
            Event::Membership(MembershipEvent::CampaignCompleted { id, removed, epoch }) => {
                Ev::CampaignCompleted {
                    id: campaign_id(id),
                    removed: removed.iter().map(|r| r.0).collect(),
                    epoch,
                }
            }
            Event::Membership(MembershipEvent::CampaignFailed { id, reason }) => {
                Ev::CampaignFailed {
                    id: campaign_id(id),
                    reason: crate::shrink::failure_name(reason),
                }
            }
            Event::Membership(MembershipEvent::RelayStarted { peer, via }) => Ev::RelayStarted {
                peer: peer.0,
                via: via.map(|v| v.0),
            },
            Event::Membership(MembershipEvent::RelayEnded { peer }) => {
                Ev::RelayEnded { peer: peer.0 }
            }
            Event::Flood(FloodEvent::Delivered {
                origin,
                id,
                payload,
                ..
            }) => Ev::FloodDelivered {
                origin: origin.0,
                id,
                payload,
            },
            Event::Revoke(RevokeEvent::Revoked {
                group,
                epoch,
                origin,
                hops,
            }) => Ev::Revoked {
                group,
                epoch,
                origin: origin.0,
                hops,
            },
            Event::Detect(DetectEvent::Suspect { rank, .. }) => Ev::Suspected { rank: rank.0 },
            Event::ViewChanged(d) => Ev::TreeChanged {
                slot: d.new_slot.map(|r| r.0),
                parent: d.new_parent.map(|r| r.0),
            },
            other => Ev::Other {
                name: other_name(&other),
                detail: format!("{other:?}"),
            },
        }
    }
}

/// The name of an event [`Members::convert`] does not flatten.
fn other_name(e: &Event) -> &'static str {
    match e {
        Event::Xcast(XcastEvent::RootCompleted { .. }) => "xcast_root_completed",
        Event::Relm(RelmEvent::SourceLost { .. }) => "relm_source_lost",
        Event::Relm(RelmEvent::Collision { .. }) => "relm_collision",
        Event::Detect(DetectEvent::Refuted { .. }) => "detect_refuted",
        Event::Detect(DetectEvent::Unresponsive { .. }) => "detect_unresponsive",
        _ => "other",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lifeline_core::RemovalCause;
    use std::collections::BTreeMap;

    #[test]
    fn a_revoke_is_flattened() {
        let mut m = Members::from_config(&lifeline_core::Config::new(4, 2));
        let ev = m.convert(Event::Revoke(RevokeEvent::Revoked {
            group: 7,
            epoch: 3,
            origin: Rank(2),
            hops: 1,
        }));
        assert_eq!(
            ev,
            Ev::Revoked {
                group: 7,
                epoch: 3,
                origin: 2,
                hops: 1
            }
        );
        assert_eq!(m.to_vec(), vec![0, 1, 2, 3]);
    }

    #[test]
    fn relay_events_are_flattened() {
        let mut m = Members::from_config(&lifeline_core::Config::new(4, 2));
        let ev = m.convert(Event::Membership(MembershipEvent::RelayStarted {
            peer: Rank(3),
            via: Some(Rank(0)),
        }));
        assert_eq!(
            ev,
            Ev::RelayStarted {
                peer: 3,
                via: Some(0)
            }
        );
        let ev = m.convert(Event::Membership(MembershipEvent::RelayStarted {
            peer: Rank(3),
            via: None,
        }));
        assert_eq!(ev, Ev::RelayStarted { peer: 3, via: None });
        let ev = m.convert(Event::Membership(MembershipEvent::RelayEnded {
            peer: Rank(3),
        }));
        assert_eq!(ev, Ev::RelayEnded { peer: 3 });
        assert_eq!(m.to_vec(), vec![0, 1, 2, 3]);
    }

    #[test]
    fn a_view_change_removes_its_ranks_from_the_members() {
        let mut cfg = lifeline_core::Config::new(5, 2);
        cfg.dead.insert(Rank(4));
        let mut m = Members::from_config(&cfg);
        assert_eq!(m.to_vec(), vec![0, 1, 2, 3]);
        let mut ranks = lifeline_core::tree::RankSet::default();
        ranks.insert(Rank(2));
        let causes = BTreeMap::from([(Rank(2), RemovalCause::Unresponsive)]);
        let ev = m.convert(Event::Membership(MembershipEvent::FailureConfirmed {
            epoch: 3,
            ranks,
            causes,
            members: 3,
        }));
        assert_eq!(
            ev,
            Ev::ViewChanged {
                epoch: 3,
                removed: vec![(2, "unresponsive")],
                members: vec![0, 1, 3],
            }
        );
        assert!(!m.contains(2));
    }

    #[test]
    fn a_departure_removes_its_ranks_and_names_its_campaigns() {
        use lifeline_core::membership::{CampaignFailure, CampaignId};
        let mut m = Members::from_config(&lifeline_core::Config::new(6, 2));
        let ranks: lifeline_core::tree::RankSet = [Rank(2), Rank(4)].into_iter().collect();
        let id = CampaignId {
            requester: Rank(1),
            seq: 1,
        };
        let ev = m.convert(Event::Membership(MembershipEvent::Departed {
            epoch: 4,
            ranks: ranks.clone(),
            campaigns: vec![id],
            members: 4,
        }));
        assert_eq!(
            ev,
            Ev::Departed {
                epoch: 4,
                ranks: vec![2, 4],
                campaigns: vec![(1 << 32) | 1],
                members: vec![0, 1, 3, 5],
            }
        );
        assert!(!m.contains(2) && !m.contains(4));
        let ev = m.convert(Event::Membership(MembershipEvent::CampaignCompleted {
            id,
            removed: ranks,
            epoch: 4,
        }));
        assert_eq!(
            ev,
            Ev::CampaignCompleted {
                id: (1 << 32) | 1,
                removed: vec![2, 4],
                epoch: 4
            }
        );
        let ev = m.convert(Event::Membership(MembershipEvent::CampaignFailed {
            id,
            reason: CampaignFailure::TimedOut,
        }));
        assert_eq!(
            ev,
            Ev::CampaignFailed {
                id: (1 << 32) | 1,
                reason: "timed_out"
            }
        );
        let ev = m.convert(Event::Membership(MembershipEvent::Left { epoch: 3 }));
        assert_eq!(ev, Ev::Left { epoch: 3 });
        assert_eq!(m.to_vec(), vec![0, 1, 3, 5]);
    }

    #[test]
    fn start_up_events_are_flattened_and_never_joined_is_a_cause() {
        let cfg = lifeline_core::Config::new(4, 2);
        let mut m = Members::from_config(&cfg);
        let mut ranks = lifeline_core::tree::RankSet::default();
        ranks.insert(Rank(0));
        ranks.insert(Rank(2));
        let ev = m.convert(Event::Membership(MembershipEvent::CheckedIn {
            epoch: 1,
            ranks: ranks.clone(),
            members: 2,
        }));
        assert_eq!(
            ev,
            Ev::CheckedIn {
                epoch: 1,
                ranks: vec![0, 2],
                members: 2
            }
        );
        let ev = m.convert(Event::Membership(MembershipEvent::Ready {
            epoch: 2,
            members: 4,
        }));
        assert_eq!(
            ev,
            Ev::Ready {
                epoch: 2,
                members: 4
            }
        );
        let mut gone = lifeline_core::tree::RankSet::default();
        gone.insert(Rank(3));
        let causes = BTreeMap::from([(Rank(3), RemovalCause::NeverJoined)]);
        let ev = m.convert(Event::Membership(MembershipEvent::FailureConfirmed {
            epoch: 3,
            ranks: gone.clone(),
            causes,
            members: 3,
        }));
        assert_eq!(
            ev,
            Ev::ViewChanged {
                epoch: 3,
                removed: vec![(3, "never_joined")],
                members: vec![0, 1, 2],
            }
        );
        let ev = m.convert(Event::Membership(MembershipEvent::StartupIncomplete {
            epoch: 3,
            missing: gone,
            members: 3,
        }));
        assert_eq!(
            ev,
            Ev::StartupIncomplete {
                epoch: 3,
                missing: vec![3],
                members: 3
            }
        );
    }
}
