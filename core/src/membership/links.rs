//! Links and the failure policy on them: what a link up or down means (a hello to the parent,
//! a gray link, a refused dial to corroborate, a death), frames from removed ranks (fencing), and
//! gray links (a tree link down with both ends alive, past `membership.gray_timeout`).

use super::{EvictedMsg, Membership, MembershipTimer, UnreachableMsg};
use crate::link::LinkCause;
use crate::machine::{Ctx, Effect};
use crate::time::Duration;
use crate::tree::{LinkRole, Rank, Scope};

impl Membership {
    /// A link to `peer` is up: a late joiner says hello to its parent as soon as it can reach
    /// it. With the detector on, the peer is alive now: a refused dial about it is refuted
    /// (`corroborate.rs`).
    pub(super) fn link_up(&mut self, ctx: &mut Ctx<'_>, peer: Rank) {
        if self.joiner && ctx.tree.view().and_then(|v| v.parent()) == Some(peer) {
            self.say_hello(ctx);
        }
        if ctx.cfg.detect.enabled {
            self.contact(ctx, peer);
        }
    }

    /// The link to `peer` (alive here) is lost. With the heartbeat detector on
    /// (`detect.enabled`):
    /// - a refused fresh dial ([`LinkCause::Refused`]) is hard evidence but one rank's word: it
    ///   goes to the subject's coordinator to be corroborated by a second rank's dial before a
    ///   removal (`corroborate.rs`); a tree link starts its gray timeout meanwhile;
    /// - another incarnation answering ([`LinkCause::Incarnation`]) marks the peer dead at once,
    ///   on a tree link or a lateral one (the tree is repaired and the parent told);
    /// - a reset, timeout or close is counted in `soft_link_downs` (the peer's observers and the
    ///   coordinator decide) and, for the parent's link, answered with a hello that
    ///   re-establishes it and re-syncs this rank.
    ///
    /// With the detector off, any loss of a tree link repairs (the link is the only detector)
    /// and a lateral link's loss never does.
    pub(super) fn link_down(&mut self, ctx: &mut Ctx<'_>, peer: Rank, cause: LinkCause) {
        // Shrink campaigns (`shrink.rs`): a leaving rank leaves; a departing peer departs.
        if self.leaving_link_down(ctx, peer) || self.departing_link_down(ctx, peer) {
            return;
        }
        // Relays through `peer` move on to their next candidate.
        self.relay_link_down(ctx, peer);
        let role = ctx.tree.link_role(peer);
        if ctx.cfg.detect.enabled && cause == LinkCause::Refused {
            // No hello to a refused parent: it would only be dialled and refused again.
            if role != LinkRole::Lateral {
                self.on_tree_link_down(ctx, peer);
            }
            self.dial_refused(ctx, peer);
            return;
        }
        if ctx.cfg.detect.enabled && !cause.is_hard() {
            ctx.stats.soft_link_downs += 1;
            // The link is wanted back: a hello to the parent asks the driver to reconnect, and
            // once it gets through, the parent re-syncs this rank (watermarks and re-polls), so
            // broadcasts lost with the connection are delivered after the heal.
            if role == LinkRole::Parent {
                self.say_hello(ctx);
            }
            // A tree link that stays down with both ends alive is a gray failure: after
            // `membership.gray_timeout` one endpoint is removed.
            if role != LinkRole::Lateral {
                self.on_tree_link_down(ctx, peer);
            }
            return;
        }
        match role {
            // Without the detector a lateral link is no detector; with it, another
            // incarnation's answer is true on any link.
            LinkRole::Lateral if !ctx.cfg.detect.enabled => ctx.stats.lateral_link_downs += 1,
            LinkRole::Lateral | LinkRole::Parent | LinkRole::Child(_) => {
                ctx.effect(Effect::Deaths {
                    ranks: vec![peer],
                    scope: Scope::Local,
                });
            }
        }
    }

    /// Whether a frame from `from`, a rank known dead here, is heard. A removed rank's frame is
    /// dropped, counted, and (with the detector on: evidence-based membership) answered with a
    /// rate-limited fencing notice. A fencing notice itself is heard from anyone (told by its
    /// kind byte: the receiver decides what it hears): this rank may have inferred the teller
    /// dead while it was itself the one cut off.
    pub(crate) fn hears_removed(&mut self, ctx: &mut Ctx<'_>, from: Rank, frame: &[u8]) -> bool {
        if ctx.cfg.detect.enabled && crate::wire::is_fence(frame) {
            return true;
        }
        ctx.stats.dropped_stale_sender += 1;
        self.on_frame_from_removed(ctx, from);
        false
    }

    /// A frame arrived from a rank the root confirmed removed: tell it, at most once per
    /// `membership.evicted_interval`, so a resumed or healed rank learns its fate. Ranks only
    /// inferred dead here are not told (the root may not have decided them). Active with the
    /// detector (evidence-based removal); without it a removed rank was killed, not judged.
    fn on_frame_from_removed(&mut self, ctx: &mut Ctx<'_>, from: Rank) {
        if !Self::is_fenced(ctx, from) {
            return;
        }
        let due = self
            .fenced
            .get(&from)
            .is_none_or(|&at| ctx.now >= at + ctx.cfg.membership.evicted_interval);
        if !due {
            return;
        }
        self.fenced.insert(from, ctx.now);
        ctx.stats.membership.evicted_sent += 1;
        ctx.send_fence(from, EvictedMsg { epoch: self.epoch });
    }

    /// Whether `peer` is told it was removed when it speaks or dials: the detector is on
    /// (evidence-based removal; without it a removed rank was killed, not judged), the root
    /// confirmed its removal (ranks only inferred dead here are not told), and this rank is
    /// still a member.
    fn is_fenced(ctx: &Ctx<'_>, peer: Rank) -> bool {
        ctx.cfg.detect.enabled && ctx.tree.confirmed().contains(peer) && ctx.tree.view().is_some()
    }

    /// A member refused this rank's dial with "you were removed" (a transport's handshake
    /// verdict, the same news as an [`EvictedMsg`]). Heard only with the detector on (as
    /// fencing notices are); without it, counted stale.
    pub(crate) fn on_fenced(&mut self, ctx: &mut Ctx<'_>, epoch: u64) {
        if !ctx.cfg.detect.enabled {
            ctx.stats.membership.stale += 1;
            return;
        }
        ctx.stats.membership.fenced_dials_in += 1;
        self.on_evicted_msg(ctx, EvictedMsg { epoch });
    }

    /// Whether a dial from `peer` gets the verdict "you were removed" (and the epoch to send):
    /// with the detector on, to a rank the coordinator's decision removed (confirmed here),
    /// while this rank is a member. Not rate-limited: the dialer's back-off bounds its dials.
    pub(crate) fn fence_verdict(&mut self, ctx: &mut Ctx<'_>, peer: Rank) -> Option<u64> {
        if !Self::is_fenced(ctx, peer) {
            return None;
        }
        ctx.stats.membership.evicted_sent += 1;
        Some(self.epoch)
    }

    /// A tree link to `peer` went down on soft evidence (the detector is on; both ends may be
    /// alive): start its gray timeout, unless it already runs.
    pub(super) fn on_tree_link_down(&mut self, ctx: &mut Ctx<'_>, peer: Rank) {
        if !ctx.cfg.detect.enabled || self.is_gray(peer) {
            return;
        }
        self.gray_insert(peer, ctx.now);
        let at = ctx.now + ctx.cfg.membership.gray_timeout;
        ctx.timers.set(MembershipTimer::Gray(peer), at);
        self.start_relay(ctx, peer);
    }

    /// A frame from `peer` arrived on the link itself (never one relayed: the node does not
    /// call this for those): the link works again and its gray timeout stops. A relayed link
    /// only notes it: `peer`'s direction works, and only `peer` can say that this rank's
    /// does (`relay.rs`). (A link reported up is no proof: a dial may connect across a cut
    /// that still eats the frames.)
    pub(super) fn on_heard(&mut self, ctx: &mut Ctx<'_>, peer: Rank) {
        self.silence_heard(ctx.now, peer);
        self.note_heard(ctx, peer);
        if self.is_relayed(peer) {
            self.heard_direct(ctx, peer);
        } else if self.gray_remove(peer) {
            ctx.timers.cancel(MembershipTimer::Gray(peer));
        }
    }

    /// The gray timeout of the link to `peer` passed: if it is still down, `peer` alive and
    /// still a tree neighbour, and its relay carried nothing from `peer` lately
    /// (`relay.rs`), tell the coordinator (the view's root); check again every
    /// `detect.period × 10` while it stands.
    pub(super) fn on_gray_timer(&mut self, ctx: &mut Ctx<'_>, peer: Rank) {
        let Some(view) = ctx.tree.view() else { return };
        let standing = self.is_gray(peer) && ctx.tree.is_alive(peer) && view.is_neighbor(peer);
        let period10 = Duration::from_nanos(ctx.cfg.detect.period.as_nanos().saturating_mul(10));
        if !standing {
            self.gray_remove(peer);
            self.retain_relays(ctx);
            return;
        }
        // A routing problem, not a membership one: while the relay carries, nobody is removed.
        if self.relay_works(ctx, peer) {
            ctx.timers
                .set(MembershipTimer::Gray(peer), ctx.now + period10);
            return;
        }
        ctx.stats.membership.unreachable_out += 1;
        let me = ctx.me();
        let coordinator = view.ancestors().first().copied().unwrap_or(me);
        if coordinator == me {
            self.on_unreachable(ctx, me, UnreachableMsg { peer });
        } else {
            ctx.send(coordinator, UnreachableMsg { peer });
        }
        ctx.timers
            .set(MembershipTimer::Gray(peer), ctx.now + period10);
    }
}
