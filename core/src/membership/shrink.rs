//! Shrink campaigns: removing ranks on purpose, as one collective event (seed 000,
//! `membership.md` §4.2–4.3, PRRTE's collective shrink completion).
//!
//! 1. **Request.** [`Node::shrink`](crate::Node::shrink) at any member returns a
//!    [`CampaignId`] and sends a [`ShrinkRequestMsg`] to the coordinator (the root of the
//!    view), again whenever the coordinator changes. The coordinator keeps one entry per id.
//! 2. **Order.** After `membership.shrink_batch` the coordinator sequences the queued
//!    campaigns as one [`ShrinkOrder`] through xcast, **forward-first**
//!    ([`xcast::TAG_SHRINK_ORDER`]): every rank forwards it to its children before processing
//!    it, and nobody rewires before the order completes, so the order reaches each target
//!    through its own lifeline. Every rank records the targets (they are *departing*).
//! 3. **Leaving mode**, entered by a target as it processes the order (never by a second
//!    message, so no race with its lifeline): it refuses new application commands
//!    ([`CommandError::Leaving`](crate::CommandError::Leaving)), keeps relaying, sends no
//!    alerts and no refutations, and holds its acknowledgement of the order until its own RELM
//!    sends are acknowledged (at most a quarter of `membership.shrink_timeout`): the order's
//!    completion means "every target drained". A leaving rank that loses a tree link, or is
//!    told it was removed, **leaves** ([`MembershipEvent::Left`]), never recovers; a departure
//!    timer (`membership.shrink_timeout`) is the fallback. One with children that survive
//!    first waits (at most a twentieth of `membership.shrink_timeout`) until each closed its
//!    link, having applied the notice: leaving at once would let a child see the close before
//!    the notice and repair twice. A target that processes its own notice (passed down by a
//!    target parent) applies none of it and passes it on to its children, as the old
//!    coordinator does (7).
//! 4. **One view change.** When the order completes at the root (the xcast completion hook),
//!    or at once when every target is already dead, the coordinator broadcasts one
//!    [`LeftNotice`] (process-first): every rank removes all targets in one batched repair
//!    (cause [`RemovalCause::Left`], [`MembershipEvent::Departed`] with the same list
//!    everywhere), survivors' adapters close the targets' links (their ranks are dead now),
//!    which is what ends each target's lifeline, and the requester gets
//!    [`MembershipEvent::CampaignCompleted`] once.
//! 5. **Already-departed guard.** A departing rank's lost link, refused dial or silence is a
//!    departure: the tree routes around it (so the order still completes), but no alert, no
//!    decision and no failure notice names it; the departure notice does. A survivor under a
//!    target, adopted by a rank that already processed the notice, removes every departing
//!    rank in that one repair (`adopted_past_departures`): one pass, not two.
//! 6. **No silent wedge.** A requester reports [`MembershipEvent::CampaignFailed`] for a
//!    campaign not completed within `membership.shrink_timeout`. A new coordinator re-issues
//!    the campaigns it recorded (orders are idempotent per campaign), and requesters re-send
//!    theirs to it.
//! 7. **Planned hand-over.** A campaign may name the coordinator (and the coordinator may
//!    request its own departure). It sequences the order as usual and leaves like any target,
//!    but its own departure notice cannot be applied where it is numbered (the root would lose
//!    its view before passing the notice on): the old coordinator forwards it without applying
//!    it, its children apply it as their one repair, and the root of the view without the
//!    targets finds itself in the root slot and recovers xcast as after a root crash (it
//!    gathers what survivors hold, then numbers after it), with no failure path: no alert, no
//!    decision, no failure notice, cause `left`. The old coordinator completes its own
//!    campaigns as it forwards the notice, forgets its queue (requesters re-send to the
//!    successor when their view changes), admits nobody and orders nothing more, and leaves
//!    once all its children closed their links (each applied the notice; leaving at the first
//!    close could reset a link whose notice is still unread), or at its departure timer. If it crashes first, its
//!    loss is a departure wherever the order was recorded, the successor re-issues the
//!    campaigns it recorded, and the requester's bound still holds.
//! 8. **Concurrency.** The coordinator sequences a shrink only while no join or check-in batch
//!    is open (queued, or its notice not yet complete everywhere) and no other shrink is open;
//!    joins wait while a shrink is open. Campaigns queued together share one order and one
//!    view change; each completes once.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use bytes::Bytes;

use super::{
    CampaignFailure, CampaignId, LeftNotice, Membership, MembershipEvent, MembershipTimer,
    RemovalCause, ShrinkOrder, ShrinkRequestMsg, ShrinkStats,
};
use crate::machine::{Ctx, Effect};
use crate::time::Duration;
use crate::timer::TimerToken;
use crate::tree::{Rank, RankSet, Scope};
use crate::wire::Codec;
use crate::xcast;

/// Finished campaign ids remembered (a late or repeated request for one is ignored).
const REMEMBERED: usize = 256;

/// Why [`Node::shrink`](crate::Node::shrink) refused a campaign (nothing changed).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ShrinkError {
    /// This rank is not a member (removed, or left).
    #[error("this rank is dead and takes no commands")]
    Dead,
    /// This rank is itself leaving.
    #[error("this rank is leaving")]
    Leaving,
    /// No targets.
    #[error("a shrink needs at least one target")]
    Empty,
    /// More targets than `max_list`.
    #[error("{len} targets, more than max_list {max}")]
    TooMany {
        /// Targets asked for.
        len: usize,
        /// The limit.
        max: u32,
    },
    /// A target outside the span.
    #[error("rank {0} is outside the span")]
    OutOfSpan(Rank),
    /// The requester named itself and is not the coordinator (it could not be told of the
    /// completion: the departure notice never reaches a target under a survivor). The
    /// coordinator may name itself: it hands the coordination over (see the module doc).
    #[error("the requester cannot shrink itself away")]
    IncludesSelf,
    /// `membership.shrink_max_pending` campaigns of this rank are open.
    #[error("{0} campaigns open")]
    Busy(usize),
}

/// A target in leaving mode.
#[derive(Debug, Default)]
struct Leaving {
    /// Its RELM sends drained (or the drain bound passed) and the order was acknowledged.
    drained: bool,
    /// The drain bound passed.
    drain_expired: bool,
}

/// Shrink state of one rank (boxed on first use).
#[derive(Debug, Default)]
pub(super) struct Shrink {
    /// Requester: the last campaign sequence number used.
    next_seq: u32,
    /// Requester: open campaigns, by sequence number, with their targets.
    mine: BTreeMap<u32, Vec<Rank>>,
    /// Requester: the coordinator the open campaigns were last sent to.
    forwarded_to: Option<Rank>,
    /// Coordinator: requests waiting for the next order.
    queue: BTreeMap<CampaignId, Vec<Rank>>,
    batch_timer: Option<TimerToken>,
    /// Coordinator: campaigns whose order is in flight (an open shrink).
    open: BTreeSet<CampaignId>,
    /// Coordinator: campaigns whose departure notice was broadcast (not yet delivered here).
    left_sent: BTreeSet<CampaignId>,
    /// Coordinator: join or check-in notices broadcast and not yet complete everywhere.
    admissions_open: u32,
    /// Whether this rank was the coordinator at the last view change.
    was_coordinator: bool,
    /// Every rank: campaigns whose order was delivered here, until their departure notice.
    recorded: BTreeMap<CampaignId, Vec<Rank>>,
    /// Every rank: the recorded campaigns' targets.
    departing: RankSet,
    /// Recently finished campaigns (oldest first).
    finished: VecDeque<CampaignId>,
    /// This rank is a target in leaving mode.
    leaving: Option<Leaving>,
    /// A leaving rank waiting for children whose links are still up: after its hand-over or
    /// passing its own notice down (every live child), or once it learnt it was removed (its
    /// lifeline closed, or fenced: the children no campaign names). It leaves once every one closed (each
    /// applied the notice), not at the first: leaving then could reset a link whose notice is
    /// still unread, or make a child repair around it before the notice reaches it.
    handed_to: Option<RankSet>,
    pub(super) stats: ShrinkStats,
}

impl Shrink {
    pub(super) fn held(&self) -> usize {
        self.mine.len() + self.queue.len() + self.recorded.len()
    }

    fn is_finished(&self, id: &CampaignId) -> bool {
        self.finished.contains(id)
    }

    fn recompute_departing(&mut self) {
        self.departing = self.recorded.values().flatten().copied().collect();
    }
}

impl Membership {
    /// The shrink state, created on first use.
    pub(super) fn s(&mut self) -> &mut Shrink {
        self.shrink.get_or_insert_with(Box::default)
    }

    /// Whether `r` is a target of a campaign whose order was delivered here and not yet
    /// finished: its departure is no failure.
    pub(super) fn is_departing(&self, r: Rank) -> bool {
        self.shrink
            .as_ref()
            .is_some_and(|s| s.departing.contains(r))
    }

    /// An adoption's lineage implies that `inferred` (all departing) are gone: this rank's
    /// new parent removed them, which it does on the departure notice (or on their departure).
    /// The other targets of every campaign naming one of them go with them in this one repair
    /// (a campaign's targets leave in one view change), so the notice, when it arrives here,
    /// finds nothing left to repair: a survivor under a target repairs once, not once for its
    /// parent and again for the other targets. Targets of campaigns naming none of them stay:
    /// their order may still be draining (a campaign recorded here later, or one the notice
    /// does not complete), and removing them early would cut a draining target's lifeline.
    /// Causes are `left`: a departure, no failure.
    pub(super) fn adopted_past_departures(&mut self, ctx: &mut Ctx<'_>, inferred: &RankSet) {
        let ranks = self.departed_with_campaigns(ctx, inferred);
        ctx.effect(Effect::Deaths {
            ranks,
            scope: Scope::Local,
        });
    }

    /// Whether `set` (a lineage's inferred deaths) is all departing ranks, and this rank is not
    /// leaving: the departure notice is behind the news here, and
    /// [`Self::departed_with_campaigns`] applies.
    pub(super) fn all_departing(&self, set: &RankSet) -> bool {
        !self.is_leaving() && set.iter().all(|r| self.is_departing(r))
    }

    /// `inferred` (all departing) and the other targets of every campaign naming one of them,
    /// without this rank, noted as departures (cause `left`): one repair for all of them (see
    /// [`Self::adopted_past_departures`]). Also what a lineage notice implies when a child's
    /// hello reaches a rank the departure promoted (its new root, after a planned hand-over)
    /// before the notice does.
    pub(super) fn departed_with_campaigns(
        &mut self,
        ctx: &mut Ctx<'_>,
        inferred: &RankSet,
    ) -> Vec<Rank> {
        let mut ranks: RankSet = inferred.clone();
        if let Some(s) = self.shrink.as_ref() {
            for targets in s.recorded.values() {
                if targets.iter().any(|&t| inferred.contains(t)) {
                    ranks.extend(targets.iter().copied());
                }
            }
        }
        let ranks: Vec<Rank> = ranks.iter().filter(|&r| r != ctx.me()).collect();
        for &r in &ranks {
            self.causes.insert(r, RemovalCause::Left);
        }
        self.s().stats.departures_observed += ranks.len() as u64;
        ranks
    }

    /// Whether this rank is leaving and waits for children to close their links (after its
    /// hand-over, or its lifeline lost): it leaves when they did or its departure timer fires,
    /// not on being told it was removed (which it knows).
    pub(super) fn is_handing_over(&self) -> bool {
        self.is_leaving()
            && self
                .shrink
                .as_ref()
                .is_some_and(|s| s.handed_to.as_ref().is_some_and(|w| !w.is_empty()))
    }

    /// Whether this rank is a shrink target in leaving mode.
    pub(crate) fn is_leaving(&self) -> bool {
        self.shrink.as_ref().is_some_and(|s| s.leaving.is_some())
    }

    /// Leaving, and the order not yet acknowledged.
    pub(crate) fn awaits_drain(&self) -> bool {
        self.shrink
            .as_ref()
            .and_then(|s| s.leaving.as_ref())
            .is_some_and(|l| !l.drained)
    }

    /// Leaving, and the drain bound passed.
    pub(crate) fn drain_expired(&self) -> bool {
        self.shrink
            .as_ref()
            .and_then(|s| s.leaving.as_ref())
            .is_some_and(|l| l.drain_expired)
    }

    /// The node released this rank's acknowledgement of the order.
    pub(crate) fn on_drained(&mut self, _ctx: &mut Ctx<'_>) {
        let s = self.s();
        let Some(l) = s.leaving.as_mut() else {
            return;
        };
        l.drained = true;
        if l.drain_expired {
            s.stats.drain_timeouts += 1;
        }
    }

    /// Shrink counters (zero until this rank first took part in a campaign).
    pub(crate) fn shrink_stats(&self) -> ShrinkStats {
        self.shrink
            .as_ref()
            .map(|s| s.stats.clone())
            .unwrap_or_default()
    }

    /// Whether a shrink order is in flight at this coordinator, or this coordinator is leaving
    /// (joins wait: a leaving coordinator admits nobody, its successor does).
    pub(super) fn shrink_open(&self) -> bool {
        self.shrink
            .as_ref()
            .is_some_and(|s| !s.open.is_empty() || s.leaving.is_some())
    }

    /// Coordinator: a join or check-in notice was broadcast (a shrink waits for it).
    pub(super) fn note_admission_broadcast(&mut self) {
        self.s().admissions_open += 1;
    }

    /// The bound of a leaving rank's wait for its drain, and of its departure.
    fn drain_bound(ctx: &Ctx<'_>) -> Duration {
        Duration::from_nanos(ctx.cfg.membership.shrink_timeout.as_nanos() / 4)
    }

    // ------------------------------------------------------------------ requester

    /// [`Node::shrink`](crate::Node::shrink): checks the request, opens the campaign here
    /// (its bound starts) and sends it to the coordinator.
    pub(crate) fn request_shrink(
        &mut self,
        ctx: &mut Ctx<'_>,
        targets: &RankSet,
    ) -> Result<CampaignId, ShrinkError> {
        if self.evicted || ctx.tree.view().is_none() {
            return Err(ShrinkError::Dead);
        }
        if self.is_leaving() {
            return Err(ShrinkError::Leaving);
        }
        let targets: Vec<Rank> = targets.iter().collect();
        if targets.is_empty() {
            return Err(ShrinkError::Empty);
        }
        if targets.len() > ctx.cfg.max_list as usize {
            return Err(ShrinkError::TooMany {
                len: targets.len(),
                max: ctx.cfg.max_list,
            });
        }
        if let Some(&r) = targets.iter().find(|r| !ctx.tree.layout().contains(**r)) {
            return Err(ShrinkError::OutOfSpan(r));
        }
        let me = ctx.me();
        if targets.contains(&me) && Self::coordinator(ctx) != Some(me) {
            return Err(ShrinkError::IncludesSelf);
        }
        let open = self.s().mine.len();
        if open >= ctx.cfg.membership.shrink_max_pending as usize {
            return Err(ShrinkError::Busy(open));
        }
        let s = self.s();
        s.next_seq += 1;
        let seq = s.next_seq;
        s.mine.insert(seq, targets.clone());
        let id = CampaignId { requester: me, seq };
        self.s().stats.campaigns_requested += 1;
        let at = ctx.now + ctx.cfg.membership.shrink_timeout;
        ctx.timers.set(MembershipTimer::Campaign(seq), at);
        self.forward_shrink(ctx, id, targets);
        Ok(id)
    }

    fn forward_shrink(&mut self, ctx: &mut Ctx<'_>, id: CampaignId, targets: Vec<Rank>) {
        let Some(coord) = Self::coordinator(ctx) else {
            return;
        };
        self.s().forwarded_to = Some(coord);
        if coord == ctx.me() {
            self.enqueue_shrink(ctx, id, targets);
        } else {
            ctx.send(coord, ShrinkRequestMsg { id, targets });
        }
    }

    /// Requester: the campaign's bound passed without its completion.
    pub(super) fn on_campaign_timer(&mut self, ctx: &mut Ctx<'_>, seq: u32) {
        if self.s().mine.remove(&seq).is_none() {
            ctx.stats.stale_timers += 1;
            return;
        }
        let id = CampaignId {
            requester: ctx.me(),
            seq,
        };
        self.fail_campaign(ctx, id, CampaignFailure::TimedOut);
    }

    fn fail_campaign(&mut self, ctx: &mut Ctx<'_>, id: CampaignId, reason: CampaignFailure) {
        self.s().stats.campaigns_failed += 1;
        ctx.effect(Effect::Event(
            MembershipEvent::CampaignFailed { id, reason }.into(),
        ));
    }

    /// This rank stops being a member: its open campaigns fail (it cannot be told).
    pub(super) fn shrink_on_evicted(&mut self, ctx: &mut Ctx<'_>) {
        let Some(s) = self.shrink.as_mut() else {
            return;
        };
        let mine = std::mem::take(&mut s.mine);
        let me = ctx.me();
        for seq in mine.into_keys() {
            ctx.timers.cancel(MembershipTimer::Campaign(seq));
            let id = CampaignId { requester: me, seq };
            self.fail_campaign(ctx, id, CampaignFailure::RequesterRemoved);
        }
    }

    // ------------------------------------------------------------------ coordinator

    /// A requester's campaign: queued if this rank is the coordinator.
    pub(super) fn on_shrink_request(&mut self, ctx: &mut Ctx<'_>, m: ShrinkRequestMsg) {
        if Self::coordinator(ctx) != Some(ctx.me()) || self.is_leaving() {
            // The requester re-sends when it sees the coordinator change (a leaving
            // coordinator hands over: its successor takes the request).
            self.s().stats.shrink_requests_dropped += 1;
            return;
        }
        self.enqueue_shrink(ctx, m.id, m.targets);
    }

    /// Coordinator: one queue entry per campaign; finished or ordered ones are ignored.
    fn enqueue_shrink(&mut self, ctx: &mut Ctx<'_>, id: CampaignId, targets: Vec<Rank>) {
        let max = ctx.cfg.membership.shrink_max_pending as usize;
        let s = self.s();
        if s.is_finished(&id) || s.recorded.contains_key(&id) || s.queue.contains_key(&id) {
            return;
        }
        if s.queue.len() >= max {
            self.s().stats.shrink_requests_dropped += 1;
            return;
        }
        s.queue.insert(id, targets);
        self.arm_shrink_batch(ctx);
    }

    fn arm_shrink_batch(&mut self, ctx: &mut Ctx<'_>) {
        if self.s().batch_timer.is_none() {
            // A zero batch still waits a little when it must re-arm (never a spin).
            let wait = ctx.cfg.membership.shrink_batch;
            let at = ctx.now + wait;
            self.s().batch_timer = Some(ctx.timers.set(MembershipTimer::ShrinkBatch, at));
        }
    }

    /// Coordinator: whether a join or check-in batch is open (queued, or its notice not yet
    /// complete everywhere): a shrink waits for it (`membership.md` §4.3).
    fn admissions_open(&self) -> bool {
        let joins = self.joins.as_ref().is_some_and(|j| j.batch_open());
        let check_ins = self.startup.as_ref().is_some_and(|s| s.batch_open());
        let notices = self.shrink.as_ref().is_some_and(|s| s.admissions_open > 0);
        joins || check_ins || notices
    }

    /// Coordinator: the batch window passed: sequence the queued campaigns in one order.
    pub(super) fn on_shrink_batch(&mut self, ctx: &mut Ctx<'_>, token: TimerToken) {
        if self.s().batch_timer != Some(token) {
            ctx.stats.stale_timers += 1;
            return;
        }
        self.s().batch_timer = None;
        if Self::coordinator(ctx) != Some(ctx.me()) || self.is_leaving() {
            self.s().queue.clear();
            return;
        }
        if self.s().queue.is_empty() {
            return;
        }
        if self.admissions_open() || self.shrink_open() {
            self.s().stats.shrinks_waited += 1;
            let wait = ctx
                .cfg
                .membership
                .shrink_batch
                .max(Duration::from_millis(1));
            self.s().batch_timer =
                Some(ctx.timers.set(MembershipTimer::ShrinkBatch, ctx.now + wait));
            return;
        }
        self.sequence_shrink(ctx);
    }

    /// Coordinator: one order for the queued campaigns (at most `max_list` targets in all);
    /// when every target is dead already, the departure notice at once.
    fn sequence_shrink(&mut self, ctx: &mut Ctx<'_>) {
        let max = ctx.cfg.max_list as usize;
        let mut campaigns = Vec::new();
        let mut total = 0;
        while let Some((&id, t)) = self.s().queue.first_key_value() {
            if total > 0 && total + t.len() > max {
                break;
            }
            total += t.len();
            let t = t.clone();
            self.s().queue.remove(&id);
            campaigns.push((id, t));
        }
        if !self.s().queue.is_empty() {
            self.arm_shrink_batch(ctx);
        }
        let all_dead = campaigns
            .iter()
            .flat_map(|(_, t)| t)
            .all(|&r| !ctx.tree.is_alive(r));
        if all_dead {
            self.send_left(ctx, campaigns);
            return;
        }
        let s = self.s();
        s.open.extend(campaigns.iter().map(|(id, _)| *id));
        self.s().stats.shrink_orders += 1;
        let m = ShrinkOrder { campaigns };
        ctx.effect(Effect::RootBroadcast {
            tag: xcast::TAG_SHRINK_ORDER,
            payload: m.to_payload(),
        });
    }

    /// Coordinator: the departure notice for `campaigns` (those not already sent), under the
    /// next epoch.
    fn send_left(&mut self, ctx: &mut Ctx<'_>, campaigns: Vec<(CampaignId, Vec<Rank>)>) {
        let s = self.s();
        let campaigns: Vec<(CampaignId, Vec<Rank>)> = campaigns
            .into_iter()
            .filter(|(id, _)| !s.left_sent.contains(id) && !s.is_finished(id))
            .collect();
        if campaigns.is_empty() {
            return;
        }
        s.left_sent.extend(campaigns.iter().map(|(id, _)| *id));
        let ranks: RankSet = campaigns
            .iter()
            .flat_map(|(_, t)| t.iter().copied())
            .collect();
        self.epoch += 1;
        self.s().stats.left_views += 1;
        let m = LeftNotice {
            epoch: self.epoch,
            campaigns: campaigns.into_iter().map(|(id, _)| id).collect(),
            ranks: ranks.iter().collect(),
        };
        ctx.effect(Effect::RootBroadcast {
            tag: xcast::TAG_LEFT_NOTICE,
            payload: m.to_payload(),
        });
    }

    /// Root: an internal op this machine broadcast completed everywhere (the xcast completion
    /// hook). A shrink order's completion means every target processed it and drained: the
    /// departure notice follows. An admission's completion closes its batch.
    pub(super) fn on_notice_complete(&mut self, ctx: &mut Ctx<'_>, tag: u16, payload: Bytes) {
        match tag {
            xcast::TAG_SHRINK_ORDER => {
                let Ok(m) = ShrinkOrder::from_payload(payload, &ctx.cfg.limits()) else {
                    ctx.stats.membership.inconsistent += 1;
                    return;
                };
                self.send_left(ctx, m.campaigns);
            }
            xcast::TAG_JOIN_NOTICE | xcast::TAG_CHECK_IN_NOTICE => {
                if let Some(s) = self.shrink.as_mut() {
                    s.admissions_open = s.admissions_open.saturating_sub(1);
                }
            }
            _ => {}
        }
    }

    // ------------------------------------------------------------------ every rank

    /// A delivered shrink order (in op order, after it went on to this rank's children):
    /// record the targets; a target enters leaving mode.
    pub(super) fn on_shrink_order(&mut self, ctx: &mut Ctx<'_>, payload: Bytes) {
        let Ok(m) = ShrinkOrder::from_payload(payload, &ctx.cfg.limits()) else {
            ctx.stats.membership.inconsistent += 1;
            return;
        };
        let me = ctx.me();
        let mut named = false;
        let s = self.s();
        for (id, targets) in m.campaigns {
            if s.is_finished(&id) {
                continue;
            }
            named |= targets.contains(&me);
            s.departing.extend(targets.iter().copied());
            s.recorded.insert(id, targets);
        }
        if named && s.leaving.is_none() {
            s.leaving = Some(Leaving::default());
            self.s().stats.leaving_entered += 1;
            let drain = Self::drain_bound(ctx);
            ctx.timers.set(MembershipTimer::Drain, ctx.now + drain);
            let depart = ctx.now + ctx.cfg.membership.shrink_timeout;
            ctx.timers.set(MembershipTimer::Depart, depart);
            ctx.effect(Effect::Leaving);
        }
    }

    /// A delivered departure notice (in op order, process-first): the targets are removed
    /// here in one repair, cause `left`; the requester's campaigns complete.
    pub(super) fn on_left_notice(&mut self, ctx: &mut Ctx<'_>, payload: Bytes) {
        let Ok(m) = LeftNotice::from_payload(payload, &ctx.cfg.limits()) else {
            ctx.stats.membership.inconsistent += 1;
            return;
        };
        self.epoch = self.epoch.max(m.epoch);
        if self.is_stale_departure(&m) {
            self.s().stats.stale_departures += 1;
            return;
        }
        let me = ctx.me();
        if m.ranks.contains(&me) && Self::coordinator(ctx) == Some(me) {
            self.hand_over(ctx, &m);
            return;
        }
        if m.ranks.contains(&me) && self.is_leaving() && self.has_live_children(ctx) {
            self.pass_down(ctx, &m);
            return;
        }
        let ranks: Vec<Rank> = m
            .ranks
            .iter()
            .copied()
            .filter(|&r| ctx.tree.layout().contains(r))
            .collect();
        let set: RankSet = ranks.iter().copied().collect();
        for r in &ranks {
            self.causes.remove(r);
        }
        let fresh: RankSet = set
            .iter()
            .filter(|r| !self.agreed.removed.contains(*r))
            .collect();
        self.agreed.apply(m.epoch, &ranks);
        let dead_after =
            ctx.tree.dead().len() + ranks.iter().filter(|&&r| ctx.tree.is_alive(r)).count();
        let members = ctx.tree.layout().span().saturating_sub(dead_after as u32);
        self.s().stats.departed += fresh.len() as u64;
        ctx.effect(Effect::Deaths {
            ranks: ranks.clone(),
            scope: Scope::Global,
        });
        ctx.effect(Effect::Event(
            MembershipEvent::Departed {
                epoch: m.epoch,
                ranks: fresh,
                campaigns: m.campaigns.clone(),
                members,
            }
            .into(),
        ));
        self.finish_campaigns(ctx, &m);
        self.startup_after_removals(ctx, &set, m.epoch, members);
        if set.contains(me) {
            self.evict(ctx, m.epoch);
        }
    }

    /// A departure notice decided here already: every campaign it names finished here and
    /// every rank it names removed by an agreed view. Notices are idempotent: a new
    /// coordinator re-issues the campaigns it recorded when it takes over, and the old
    /// coordinator's notice for them may reach it only after that, through its recovery round
    /// (`shrink_handover_tests::the_next_root_hearing_of_the_hand_over_first_applies_it_once`).
    fn is_stale_departure(&mut self, m: &LeftNotice) -> bool {
        let s = self.s();
        !m.campaigns.is_empty()
            && m.campaigns.iter().all(|id| s.is_finished(id))
            && m.ranks.iter().all(|r| self.agreed.removed.contains(*r))
    }

    /// The campaigns of a departure notice are finished here; the requester's complete (once:
    /// the open campaign is taken).
    fn finish_campaigns(&mut self, ctx: &mut Ctx<'_>, m: &LeftNotice) {
        let me = ctx.me();
        for id in &m.campaigns {
            let s = self.s();
            let targets = s.recorded.remove(id);
            s.open.remove(id);
            s.left_sent.remove(id);
            s.queue.remove(id);
            if !s.is_finished(id) {
                s.finished.push_back(*id);
                if s.finished.len() > REMEMBERED {
                    s.finished.pop_front();
                }
            }
            if id.requester != me {
                continue;
            }
            let Some(mine) = s.mine.remove(&id.seq) else {
                continue;
            };
            ctx.timers.cancel(MembershipTimer::Campaign(id.seq));
            self.s().stats.campaigns_completed += 1;
            let removed: RankSet = targets.unwrap_or(mine).into_iter().collect();
            ctx.effect(Effect::Event(
                MembershipEvent::CampaignCompleted {
                    id: *id,
                    removed,
                    epoch: m.epoch,
                }
                .into(),
            ));
        }
        self.s().recompute_departing();
    }

    /// Whether this rank has a live child in its view.
    fn has_live_children(&self, ctx: &Ctx<'_>) -> bool {
        ctx.tree
            .view()
            .is_some_and(|v| v.live_children().next().is_some())
    }

    /// A leaving target (not the coordinator) named by the departure notice it processes,
    /// with live children: like the old coordinator at its hand-over it applies none of the
    /// removals, so xcast passes the notice on to its children (its view still has them) once
    /// this returns, and each applies it as its one repair; it leaves once every child closed
    /// its link, or after [`Self::hand_over_wait`]. Leaving at once would close those links
    /// first wherever a child's new parent is slower to pass the notice on than this rank to
    /// exit (a loaded machine), and the child would repair twice: around this rank on the
    /// close, then for the other targets on the notice.
    fn pass_down(&mut self, ctx: &mut Ctx<'_>, m: &LeftNotice) {
        self.pass_on(ctx, m);
        let s = self.s();
        s.stats.children_waits += 1;
        let at = ctx.now + Self::hand_over_wait(ctx);
        ctx.timers.set(MembershipTimer::Depart, at);
    }

    /// A departure notice naming this rank, passed on unapplied: its campaigns finish here
    /// and this rank waits for every live child of its view (to which xcast forwards the
    /// notice) to close its link.
    fn pass_on(&mut self, ctx: &mut Ctx<'_>, m: &LeftNotice) {
        self.finish_campaigns(ctx, m);
        let children: RankSet = ctx
            .tree
            .view()
            .map(|v| v.live_children().collect())
            .unwrap_or_default();
        self.s().handed_to = Some(children);
    }

    /// **Planned hand-over**: the coordinator's own departure notice names it. It applies none
    /// of the removals (it would lose its view before passing the notice on): xcast forwards
    /// the notice to its children once this returns, each child applies it as one repair, and
    /// the root of the view without the targets finds itself in the root slot and recovers
    /// xcast as after a root crash, without any failure (the ranks are departed, cause
    /// `left`). Campaigns this rank requested complete here, now: the notice that completes
    /// them is in its children's hands. It forgets its queue (requesters re-send to the
    /// successor when their view changes), stays leaving (no requests, no joins, no new
    /// orders) and leaves once every child it passed the notice to closed its link, or at its
    /// departure timer.
    fn hand_over(&mut self, ctx: &mut Ctx<'_>, m: &LeftNotice) {
        self.pass_on(ctx, m);
        let s = self.s();
        s.queue.clear();
        s.open.clear();
        s.left_sent.clear();
        s.stats.hand_overs += 1;
        if s.leaving.is_none() {
            // Named by a campaign whose order it never processed (a re-issued one): leaving
            // from now on, bounded by the departure timer.
            s.leaving = Some(Leaving {
                drained: true,
                drain_expired: false,
            });
            s.stats.leaving_entered += 1;
            let depart = ctx.now + ctx.cfg.membership.shrink_timeout;
            ctx.timers.set(MembershipTimer::Depart, depart);
            ctx.effect(Effect::Leaving);
        }
    }

    /// After a view change: a requester re-sends its open campaigns to a new coordinator; a
    /// rank that stopped being the coordinator forgets its queue; a new coordinator re-issues
    /// the campaigns it recorded and did not see finish (orders are idempotent per campaign).
    pub(super) fn shrink_after_view_change(&mut self, ctx: &mut Ctx<'_>) {
        if self.shrink.is_none() {
            return;
        }
        let coord = Self::coordinator(ctx);
        let me = ctx.me();
        let is_coord = coord == Some(me);
        let s = self.s();
        let became = is_coord && !s.was_coordinator;
        s.was_coordinator = is_coord;
        if !is_coord {
            s.queue.clear();
            s.open.clear();
            s.left_sent.clear();
            s.admissions_open = 0;
        }
        if became {
            let again: Vec<(CampaignId, Vec<Rank>)> =
                s.recorded.iter().map(|(i, t)| (*i, t.clone())).collect();
            s.open.clear();
            s.admissions_open = 0;
            for (id, t) in again {
                s.queue.insert(id, t);
            }
            if !s.queue.is_empty() {
                self.arm_shrink_batch(ctx);
            }
        }
        let s = self.s();
        if coord.is_none() || coord == s.forwarded_to || s.mine.is_empty() {
            return;
        }
        let again: Vec<(u32, Vec<Rank>)> = s.mine.iter().map(|(q, t)| (*q, t.clone())).collect();
        for (seq, t) in again {
            let id = CampaignId { requester: me, seq };
            self.forward_shrink(ctx, id, t);
        }
    }

    // ------------------------------------------------------------------ leaving

    /// Leaving: the drain bound passed (the node acknowledges the order now).
    pub(super) fn on_drain_timer(&mut self, ctx: &mut Ctx<'_>) {
        match self.s().leaving.as_mut() {
            Some(l) if !l.drained => l.drain_expired = true,
            _ => ctx.stats.stale_timers += 1,
        }
    }

    /// Leaving: nobody ended this rank's lifeline in time: it leaves on its own.
    pub(super) fn on_depart_timer(&mut self, ctx: &mut Ctx<'_>) {
        if self.is_leaving() {
            let epoch = self.epoch;
            self.evict(ctx, epoch);
        } else {
            ctx.stats.stale_timers += 1;
        }
    }

    /// A link of a leaving rank went down: on a tree link, it leaves (never the recovery
    /// path: a lost link while leaving is the departure). Returns whether it was handled.
    ///
    /// A rank waiting for its children (after its hand-over, or [`Self::pass_down`]) leaves
    /// once the last of them closed its link, whatever its role now. Its lifeline lost, a
    /// target with surviving children (children no campaign names) first waits for each of
    /// them to close its link, for at most [`Self::hand_over_wait`]: its parent closed the
    /// lifeline because it applied the departure notice, and the children get that notice
    /// from their new parents. Leaving at once would close their links first wherever the new
    /// parent's dial is slower than this rank's close (a loaded machine), and each would
    /// repair twice: around this rank alone on the close, then for the other targets on the
    /// notice (`shrink_handover_tests::a_target_s_child_hearing_of_its_departure_first_repairs_once`).
    /// If the lifeline was lost another way (the parent crashed), no notice comes and the
    /// children repair around this rank as before, once the wait ends.
    pub(super) fn leaving_link_down(&mut self, ctx: &mut Ctx<'_>, peer: Rank) -> bool {
        if !self.is_leaving() {
            return false;
        }
        let role = ctx.tree.link_role(peer);
        let s = self.s();
        let waited = s.handed_to.as_mut().is_some_and(|w| w.remove(peer));
        if s.handed_to.as_ref().is_some_and(|w| !w.is_empty()) {
            return true;
        }
        let waits = s.handed_to.is_some();
        if role == crate::tree::LinkRole::Lateral && !waited {
            return true;
        }
        if !waits && role == crate::tree::LinkRole::Parent && self.wait_for_survivors(ctx) {
            return true;
        }
        let epoch = self.epoch;
        self.evict(ctx, epoch);
        true
    }

    /// A leaving target that learnt it was removed (its lifeline closed, or a fencing notice
    /// from a rank that applied the departure) and has surviving children (children no
    /// campaign names), not yet waiting for them: it waits for each to close its link (each
    /// gets the notice from its new parent) for at most [`Self::hand_over_wait`]. Returns
    /// whether it waits; otherwise it may leave now.
    pub(super) fn wait_for_survivors(&mut self, ctx: &mut Ctx<'_>) -> bool {
        if !self.is_leaving() || self.s().handed_to.is_some() {
            return false;
        }
        let children: RankSet = ctx
            .tree
            .view()
            .map(|v| {
                v.live_children()
                    .filter(|&c| !self.is_departing(c))
                    .collect()
            })
            .unwrap_or_default();
        if children.is_empty() {
            return false;
        }
        let s = self.s();
        s.handed_to = Some(children);
        s.stats.children_waits += 1;
        let at = ctx.now + Self::hand_over_wait(ctx);
        ctx.timers.set(MembershipTimer::Depart, at);
        true
    }

    /// How long a target (not the coordinator) waits for its children to close their links
    /// before it leaves anyway: a twentieth of `membership.shrink_timeout` (500 ms by
    /// default). It bounds how long those children stay under a target whose parent crashed.
    fn hand_over_wait(ctx: &Ctx<'_>) -> Duration {
        Duration::from_nanos(ctx.cfg.membership.shrink_timeout.as_nanos() / 20)
    }

    /// A departing peer's link went down (or its dial was refused): a departure. The tree
    /// routes around it at once (a tree link), so the order completes without it; no alert,
    /// no corroboration, no gray timeout. Returns whether it was handled.
    pub(super) fn departing_link_down(&mut self, ctx: &mut Ctx<'_>, peer: Rank) -> bool {
        if !self.is_departing(peer) {
            return false;
        }
        self.s().stats.departures_observed += 1;
        self.causes.insert(peer, RemovalCause::Left);
        if ctx.tree.link_role(peer) != crate::tree::LinkRole::Lateral {
            ctx.effect(Effect::Deaths {
                ranks: vec![peer],
                scope: Scope::Local,
            });
        }
        true
    }
}
