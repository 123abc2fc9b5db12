//! Failure knowledge: evidence, decisions, agreed views and fencing.
//!
//! **Deaths known for certain** (hard evidence, or the detector off) spread in PRRTE's two
//! phases:
//!
//! 1. **Local.** A lost tree link, a neighbour's notice or a reconciled lineage marks ranks dead
//!    (an `Effect::Deaths` the node applies as one repair). Children new in one of this rank's
//!    slots (all children after a promotion) get an adoption notice carrying their expected
//!    lineage; the parent gets a lineage notice with every death the root has not confirmed
//!    (after a parent change this doubles as a hello, so a notice lost with a dying parent is
//!    re-sent to the new one).
//! 2. **Global.** The root stamps the next epoch and broadcasts the new deaths through xcast as a
//!    process-first op (`Effect::RootBroadcast`), so every survivor applies the same deaths in
//!    the same op order and views converge. Duplicate and reordered notices are idempotent: the
//!    dead set only grows.
//!
//! **Soft evidence** (the detector on) never repairs on one rank's word:
//!
//! - **Alerts up the tree.** An observer's evidence goes to the coordinator (the root of the view
//!   without the subject) along the tree without the subject, batched for
//!   `membership.alert_batch` at every hop; an interior rank merges its descendants' evidence
//!   per subject into one entry and skips a parent it suspects (down evidence about it seen
//!   within three periods) or whose link is down. Evidence still standing when the detector
//!   re-sends it, and every refutation, goes straight to the coordinator.
//! - **Decisions.** The coordinator removes a subject on H of its K expected observers (implicit
//!   reporters: observers themselves reported by at least L), waits up to `flux_hold` for
//!   subjects in flux so losses found together share one decision, and refuses decisions that
//!   would leave it in a minority (the majority guard). A decision (`RemovedMsg`) floods the
//!   standing links of the view without its ranks (the detector's rings and the tree: see
//!   `flood_removed`; forwarded on first receipt, ahead of the repair it causes), and is
//!   confirmed in xcast order by the global notice.
//! - **Gray links.** A tree link down on soft evidence is relayed around through a third rank
//!   (`relay.rs`); only if the relay carries nothing either does `membership.gray_timeout` get
//!   the link's child removed, cause "unreachable".
//! - **Fencing.** A rank the root confirmed removed that speaks or dials again is told
//!   ("evicted"); it stops for good.
//!
//! **Links** (`links.rs`): what a lost link means is decided here, not by the node: hard
//! evidence (or any tree link with the detector off) is a death, soft evidence on a tree link
//! starts its gray timeout and, on the parent's link, sends a hello that asks for it back.
//!
//! A rank that dies together with its only tree neighbour is discovered when its new parent's
//! adoption notice cannot be delivered: the driver's bounded dial fails and reports link-down.

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;

use crate::link::LinkCause;
use crate::machine::{Ctx, Effect, Machine, MembersChange};
use crate::time::{Duration, Instant};
use crate::timer::TimerToken;
use crate::tree::{Rank, RankSet, Reconcile, Scope, ViewDelta};
use crate::wire::{Codec, Limits};
use crate::xcast;

mod alerts;
mod cause;
mod config;
mod corroborate;
mod dead_since;
mod event;
#[cfg(test)]
mod flood_tests;
mod joins;
mod links;
pub mod quorum;
#[cfg(test)]
mod refute_tests;
pub(crate) mod relay;
#[cfg(test)]
mod relay_tests;
mod seen;
mod shrink;
#[cfg(test)]
mod shrink_handover_tests;
#[cfg(test)]
mod shrink_tests;
mod silence;
#[cfg(test)]
mod silence_tests;
mod startup;
#[cfg(test)]
mod startup_tests;
mod stats;
#[cfg(test)]
mod tests;
mod timer;
mod view;
mod wire;

pub use cause::RemovalCause;
pub use config::MembershipConfig;
pub use event::{CampaignFailure, MembershipEvent};
pub use relay::RelayStats;
pub use shrink::ShrinkError;
pub use startup::{StartupStats, StartupView};
pub use stats::{CorroborationStats, MembershipStats, ShrinkStats};
pub use timer::MembershipTimer;
pub use view::MembershipView;
pub use wire::{
    AdoptMsg, AlertEntry, AlertMsg, CampaignId, CheckInMsg, CheckInNotice, CorroborateMsg,
    CorroborateOp, EvictedMsg, GlobalFailureMsg, LeftNotice, LineageMsg, MembershipMsg, RelayedMsg,
    RemovedMsg, ShrinkOrder, ShrinkRequestMsg, TreePingMsg, UnreachableMsg,
};

/// What the coordinator holds about one subject.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Reports {
    /// Each observer's latest evidence: (the subject's incarnation it is about, down).
    latest: BTreeMap<Rank, (u64, bool)>,
    /// When the current run of down evidence began (the first down after none).
    first: Instant,
    /// When evidence last arrived (reports with no down standing are dropped a while later).
    last: Instant,
    /// Whether an up about a newer incarnation overtakes older downs (quorum views on: see
    /// `downs`).
    supersede: bool,
}

impl Reports {
    /// Records `observer`'s evidence unless it is older than what that observer said last: a
    /// refutation carries the subject's new incarnation, higher than any down it answers, so
    /// a down overtaken on its way (downs climb the tree, refutations go straight) is
    /// ignored. Returns whether it was recorded.
    fn record(&mut self, now: Instant, observer: Rank, incarnation: u64, down: bool) -> bool {
        if let Some(&(inc, _)) = self.latest.get(&observer) {
            if incarnation < inc {
                return false;
            }
        }
        if down && self.downs() == 0 {
            self.first = now;
        }
        self.last = now;
        self.latest.insert(observer, (incarnation, down));
        true
    }

    /// Observers whose down evidence stands. Silence is counted whatever incarnation the
    /// observer last heard (one that missed the subject's refutation elsewhere has still heard
    /// nothing since: it would have answered a refutation it heard with an up), except a
    /// down about an incarnation older than one another observer reported up: the subject
    /// refuted that suspicion, so it was alive after it was made (Lifeguard's refutation).
    ///
    /// That is what makes an accusation from before a heal stale (issue #23, the partition
    /// sweep's wrongful removals): each side's observers suspected the other side's ranks at
    /// the incarnation they last heard; at the heal the subjects refute, and one observer's
    /// up at the new incarnation clears every older down, instead of each accuser's own up
    /// having to arrive (one lost or late kept a live rank's report standing, and the root
    /// removed it two seconds after the heal: seed 16 at 13 ranks). A dead rank refutes
    /// nothing, so its removal is as fast as before; a rank silent again after refuting is
    /// suspected again at its new incarnation, and then the older downs count again too.
    /// With quorum views off (membership I, no leader elected at a heal) silence counts
    /// whatever the incarnation, as before: the membership swarm's silent-loss bound is
    /// measured there.
    fn downs(&self) -> usize {
        self.latest
            .values()
            .filter(|&&(inc, d)| d && !self.refuted(inc))
            .count()
    }

    fn is_down(&self, observer: Rank) -> bool {
        self.latest
            .get(&observer)
            .is_some_and(|&(inc, d)| d && !self.refuted(inc))
    }

    /// Observers whose down evidence stands (those `downs` counts).
    fn accusers(&self) -> BTreeSet<Rank> {
        self.latest
            .iter()
            .filter(|&(_, &(inc, d))| d && !self.refuted(inc))
            .map(|(&o, _)| o)
            .collect()
    }

    /// `downs` without the evidence of the observers in `ignore`.
    fn downs_except(&self, ignore: &BTreeSet<Rank>) -> usize {
        self.latest
            .iter()
            .filter(|&(o, &(inc, d))| d && !self.refuted(inc) && !ignore.contains(o))
            .count()
    }

    /// Whether a down about incarnation `inc` is overtaken by an up about a newer one, and
    /// the subject was not suspected again since (no down about that newer incarnation or a
    /// later one: a subject that refuted and then froze is silent to everyone again, and
    /// every observer's silence counts as before).
    fn refuted(&self, inc: u64) -> bool {
        if !self.supersede {
            return false;
        }
        let Some(up) = self
            .latest
            .values()
            .filter(|(_, d)| !d)
            .map(|&(i, _)| i)
            .max()
        else {
            return false;
        };
        inc < up && !self.latest.values().any(|&(i, d)| d && i >= up)
    }
}

/// One observer's evidence waiting to go up the tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Pending {
    incarnation: u64,
    down: bool,
    /// Relays it passed before reaching this rank.
    hops: u8,
    /// Ancestors to skip on the way up (`u8::MAX`: straight to the coordinator).
    skip: u8,
}

/// Failure-knowledge state of one rank.
#[derive(Debug, Default)]
pub(crate) struct Membership {
    /// Highest global failure epoch seen (the root's counter when this rank is the root).
    epoch: u64,
    /// Root: deaths already put in a global notice.
    announced: RankSet,
    /// Root: the pending batch of deaths to announce.
    announce_timer: Option<TimerToken>,
    /// This rank joined after the start: it adopts its children at start.
    joiner: bool,
    /// Whether the last view change sent the parent a lineage notice (taken by the members
    /// change that follows it).
    hello_sent: bool,
    /// Evidence waiting for the batch timer to go up the tree, this rank's own and its
    /// descendants', by (subject, observer).
    outgoing: BTreeMap<(Rank, Rank), Pending>,
    /// The batch timer, and when it fires (one option: 8 bytes less a node than two).
    alert_timer: Option<(TimerToken, Instant)>,
    /// Subjects of down evidence seen here (own or relayed), and when last: hops to avoid on
    /// the way up (they expire after three detector periods without a re-send).
    suspects: BTreeMap<Rank, Instant>,
    /// This rank's own evidence per subject: (incarnation, verdict, times sent); re-sent
    /// standing evidence skips the tree.
    own: BTreeMap<Rank, (u64, bool, u8)>,
    /// Coordinator: each reported subject's expected observers in the current live set.
    observers: BTreeMap<Rank, BTreeSet<Rank>>,
    /// Coordinator: standing evidence per subject.
    reports: BTreeMap<Rank, Reports>,
    /// The decide timer, and when it fires.
    decide_timer: Option<(TimerToken, Instant)>,
    /// Refused dials being corroborated, probes, overload holds (`corroborate.rs`).
    corroboration: Option<Box<corroborate::Corroboration>>,
    /// Removed ranks last told of their removal, and when.
    fenced: BTreeMap<Rank, Instant>,
    /// This rank learned it was removed.
    evicted: bool,
    /// Coordinator: decisions made.
    decisions: u64,
    /// This rank's detector sample: (subjects silent now, subjects watched).
    reachability: (u32, u32),
    /// Why ranks known dead here were removed, until the root's notice confirms them (the root
    /// puts them in its notice).
    causes: BTreeMap<Rank, RemovalCause>,
    /// Decisions seen per coordinator (the flood's duplicate filter, `seen.rs`).
    seen_decisions: BTreeMap<Rank, seen::Seen>,
    /// The agreed view: the notices applied so far.
    agreed: view::Agreed,
    /// When ranks recently dead here were learned dead, one entry per change, a large change
    /// by its time alone (`dead_since.rs`; root: the grace before re-flooding a removal someone
    /// missed). Pruned at each change of entries older than [`Self::dead_since_horizon`]: a
    /// rank dead here with no entry died long enough ago, so it holds the recent deaths only.
    dead_since: dead_since::DeadSince,
    /// Root: removals flooded again, and when last.
    reflooded: BTreeMap<Rank, Instant>,
    /// Repairs in progress, as a stack (a repair's members change can cause another repair
    /// before its own completes): whether each one's view change already sent the parent a
    /// lineage notice.
    repairs: Vec<bool>,
    /// The span as of the admissions applied here (and grows granted out of band): the next
    /// admission numbers its joiners from here. The tree's span may run ahead of it (see
    /// `Node::catch_up_span`).
    admitted_span: u32,
    /// Joins: a contact's waiting requests, the coordinator's queue, recent admissions
    /// (boxed on first use).
    joins: Option<Box<joins::Joins>>,
    /// Start-up from check-ins (`startup.rs`; boxed, launched ranks with check-ins on only).
    startup: Option<Box<startup::Startup>>,
    /// Shrink campaigns: requests, the coordinator's queue, recorded targets, leaving mode
    /// (`shrink.rs`; boxed on first use).
    shrink: Option<Box<shrink::Shrink>>,
    /// Gray links (tree links down on soft evidence, both ends alive), their relays, and the
    /// relay counters (`relay.rs`; boxed on first use).
    relay: Option<Box<relay::Relay>>,
    /// Tree-link silence: pings on idle tree links, gray declared on silence (`silence.rs`;
    /// boxed to keep `Node` within its footprint bound, `node/footprint.rs`).
    silence: Box<silence::Silence>,
    /// Quorum agreement: acceptor, candidate and leader state (`quorum/`; boxed on first use).
    quorum: Option<Box<quorum::Quorum>>,
}

impl Membership {
    /// How long a death's learning time matters: the root's grace before re-flooding a missed
    /// removal (two detector periods) and start-up's wait past the last death (two check-in
    /// re-send intervals), with room to spare. Older entries are pruned from `dead_since`.
    fn dead_since_horizon(cfg: &crate::Config) -> Duration {
        let detect = cfg.detect.period.as_nanos().saturating_mul(4);
        let resend = cfg.membership.check_in_resend.as_nanos().saturating_mul(4);
        Duration::from_nanos(detect.max(resend))
    }

    /// A grow granted out of band ([`crate::Node::grow`]): its ranks are members.
    pub(crate) fn note_granted_span(&mut self, span: u32) {
        self.admitted_span = self.admitted_span.max(span);
    }

    /// Join counters (zero until this rank's first join traffic).
    pub(crate) fn join_stats(&self) -> crate::join::JoinStats {
        self.joins
            .as_ref()
            .map(|j| j.stats.clone())
            .unwrap_or_default()
    }

    /// Corroboration and overload-hold counters (zero until this rank first needed the
    /// corroboration state).
    pub(crate) fn corroboration_stats(&self) -> CorroborationStats {
        self.corroboration
            .as_ref()
            .map(|c| c.stats.clone())
            .unwrap_or_default()
    }

    /// Counts a tree grown ahead of the admissions (`Node::catch_up_span`).
    pub(crate) fn count_caught_up(&mut self) {
        self.joins
            .get_or_insert_with(Box::default)
            .stats
            .spans_caught_up += 1;
    }

    /// Counts a join request that did not decode.
    pub(crate) fn count_malformed_join(&mut self) {
        self.joins
            .get_or_insert_with(Box::default)
            .stats
            .join_requests_malformed += 1;
    }

    /// The next answer to a joiner.
    pub(crate) fn poll_join_reply(
        &mut self,
    ) -> Option<(crate::join::JoinConn, crate::join::JoinReply)> {
        self.joins.as_mut()?.poll_reply()
    }

    /// Highest global failure epoch seen.
    pub(crate) fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The ranks removed as of the agreed view (the set behind [`Self::view`]'s list).
    pub(crate) fn agreed_removed(&self) -> &crate::tree::RankSet {
        &self.agreed.removed
    }

    /// The view the root's notices applied here have made (see [`MembershipView`]); its span
    /// is the admissions' (the tree's may run ahead of it).
    pub(crate) fn view(&self) -> MembershipView {
        self.agreed.view(self.admitted_span)
    }

    /// Reacts to a view change: adoption notices first (so they precede xcast's replays on each
    /// link), then the hello to a new parent; a root whose slot changed schedules an announce.
    /// Returns whether a lineage notice went to the parent.
    fn view_changed(&mut self, ctx: &mut Ctx<'_>, d: &ViewDelta) -> bool {
        let Some(view) = ctx.tree.view() else {
            return false;
        };
        let adopted: Vec<Rank> = if d.slot_changed() {
            view.live_children().collect()
        } else {
            d.added_children().collect()
        };
        self.adopt(ctx, adopted);
        let hello = d.parent_changed() && view.parent().is_some();
        if hello {
            self.say_hello(ctx);
        }
        if view.is_root() && d.slot_changed() {
            self.schedule_announce(ctx);
        }
        hello
    }

    /// Sends every live child an adoption notice with this rank's lineage: at a joiner's start
    /// (its children may be ranks that do not know it yet: they had another parent, or knew
    /// fewer deaths than its snapshot) and after a grow (notices sent under the old span are
    /// dropped on arrival).
    fn adopt_children(&mut self, ctx: &mut Ctx<'_>) {
        let Some(view) = ctx.tree.view() else { return };
        let children: Vec<Rank> = view.live_children().collect();
        self.adopt(ctx, children);
    }

    fn adopt(&mut self, ctx: &mut Ctx<'_>, children: Vec<Rank>) {
        let Some(view) = ctx.tree.view() else { return };
        let mut lineage = view.ancestors().to_vec();
        lineage.push(ctx.me());
        let span = ctx.tree.layout().span();
        for c in children {
            let m = AdoptMsg {
                span,
                lineage: lineage.clone(),
            };
            ctx.send(c, m);
        }
    }

    /// Sends the parent this rank's lineage and the deaths the root has not confirmed.
    fn say_hello(&mut self, ctx: &mut Ctx<'_>) {
        let Some(view) = ctx.tree.view() else { return };
        let Some(parent) = view.parent() else { return };
        let max = ctx.cfg.max_list as usize;
        let failed: Vec<Rank> = ctx
            .tree
            .dead()
            .iter()
            .filter(|r| !ctx.tree.confirmed().contains(*r))
            .take(max)
            .collect();
        let m = LineageMsg {
            span: ctx.tree.layout().span(),
            lineage: view.ancestors().to_vec(),
            failed,
        };
        ctx.send(parent, m);
    }

    /// New deaths learned here: the root announces them; anyone else tells its parent.
    fn report_deaths(&mut self, ctx: &mut Ctx<'_>) {
        match ctx.tree.view() {
            Some(v) if v.is_root() => self.schedule_announce(ctx),
            Some(_) => self.say_hello(ctx),
            None => {}
        }
    }

    /// Root: announce after `membership.notice_batch`, so deaths reported close together share
    /// one global notice (one broadcast instead of one per death).
    fn schedule_announce(&mut self, ctx: &mut Ctx<'_>) {
        if self.announce_timer.is_none() {
            let at = ctx.now + ctx.cfg.membership.notice_batch;
            let key = MembershipTimer::Announce;
            self.announce_timer = Some(ctx.timers.set(key, at));
        }
    }

    /// The batching timer fired.
    fn on_announce_timer(&mut self, ctx: &mut Ctx<'_>, token: TimerToken) {
        if self.announce_timer != Some(token) {
            ctx.stats.stale_timers += 1;
            return;
        }
        self.announce_timer = None;
        if ctx.tree.view().is_some_and(|v| v.is_root()) {
            self.announce(ctx);
        }
    }

    /// Root: broadcast under the next epoch every death known here that no notice applied here
    /// carries and this root has not announced: a new root re-announces what its predecessor
    /// decided but did not get into a notice (a decision's flood may have reached it, and only
    /// some ranks, before the old root was lost).
    fn announce(&mut self, ctx: &mut Ctx<'_>) {
        let new: Vec<Rank> = ctx
            .tree
            .dead()
            .iter()
            .filter(|r| !self.agreed.removed.contains(*r) && !self.announced.contains(*r))
            // A departing rank's death is a departure: the departure notice carries it.
            .filter(|&r| !self.is_departing(r))
            .take(ctx.cfg.max_list as usize)
            .collect();
        if new.is_empty() {
            return;
        }
        // Quorum on: one phase 2 at a time, after phase 1 if this root has no ballot.
        let quorum = Self::quorum_on(ctx);
        if quorum && !self.ready_to_propose(ctx) {
            return;
        }
        self.announced.extend(new.iter().copied());
        self.epoch += 1;
        let causes = new
            .iter()
            .map(|&r| {
                let cause = self.causes.remove(&r).unwrap_or(RemovalCause::LinkLost);
                // Removed before it checked in: it never joined (not a failure).
                if self.is_pending(r) {
                    RemovalCause::NeverJoined
                } else {
                    cause
                }
            })
            .collect();
        let m = GlobalFailureMsg {
            epoch: self.epoch,
            failed: new,
            causes,
        };
        if quorum {
            if let Some(b) = self.quorum.as_ref().and_then(|q| q.leading()) {
                self.propose(ctx, b, m);
            }
            return;
        }
        ctx.effect(Effect::RootBroadcast {
            tag: xcast::TAG_FAILURE_NOTICE,
            payload: m.to_payload(),
        });
    }

    /// A delivered global failure notice: confirm the deaths everywhere, in op order (the
    /// repair first, then [`MembershipEvent::FailureConfirmed`]).
    pub(crate) fn on_global_notice(&mut self, ctx: &mut Ctx<'_>, payload: Bytes) {
        let limits: Limits = ctx.cfg.limits();
        let m = match GlobalFailureMsg::from_payload(payload, &limits) {
            Ok(m) => m,
            Err(_) => {
                // The frame that carried it was accepted (and counted) long ago: this is a
                // notice nothing explains, not a dropped input.
                ctx.stats.membership.inconsistent += 1;
                return;
            }
        };
        self.epoch = self.epoch.max(m.epoch);
        let ranks: Vec<Rank> = m
            .failed
            .iter()
            .copied()
            .filter(|&r| ctx.tree.layout().contains(r))
            .collect();
        let set: RankSet = ranks.iter().copied().collect();
        let causes: BTreeMap<Rank, RemovalCause> = m
            .failed
            .iter()
            .copied()
            .zip(m.causes.iter().copied())
            .filter(|(r, _)| set.contains(*r))
            .collect();
        for r in &ranks {
            self.causes.remove(r);
        }
        // Ranks already in the agreed view (a new root re-announcing what reached some ranks in
        // its predecessor's notice) are confirmed again but not reported twice.
        let fresh: RankSet = set
            .iter()
            .filter(|r| !self.agreed.removed.contains(*r))
            .collect();
        self.agreed.apply(m.epoch, &ranks);
        let me_removed = set.contains(ctx.me());
        // Members after this notice: the live set once these deaths are applied (the repair
        // below runs before the event is queued).
        let dead_after =
            ctx.tree.dead().len() + ranks.iter().filter(|&&r| ctx.tree.is_alive(r)).count();
        let members = ctx.tree.layout().span().saturating_sub(dead_after as u32);
        ctx.effect(Effect::Deaths {
            ranks,
            scope: Scope::Global,
        });
        if !fresh.is_empty() {
            let causes = causes
                .into_iter()
                .filter(|(r, _)| fresh.contains(*r))
                .collect();
            ctx.effect(Effect::Event(
                MembershipEvent::FailureConfirmed {
                    epoch: m.epoch,
                    ranks: fresh,
                    causes,
                    members,
                }
                .into(),
            ));
        }
        self.startup_after_removals(ctx, &set, m.epoch, members);
        if me_removed {
            self.evict(ctx, m.epoch);
        }
    }

    /// This rank was removed: say so once (the node stops taking commands and frames once its
    /// own death is in the tree).
    fn evict(&mut self, ctx: &mut Ctx<'_>, epoch: u64) {
        if std::mem::replace(&mut self.evicted, true) {
            return;
        }
        self.joins_on_evicted(ctx);
        self.shrink_on_evicted(ctx);
        let me = ctx.me();
        if ctx.tree.is_alive(me) {
            ctx.effect(Effect::Deaths {
                ranks: vec![me],
                scope: Scope::Global,
            });
        }
        // A leaving rank's exclusion is its departure, not an eviction.
        let e = if self.is_leaving() {
            MembershipEvent::Left { epoch }
        } else {
            MembershipEvent::Evicted { epoch }
        };
        ctx.effect(Effect::Event(e.into()));
    }

    /// Coordinator: removes `ranks` for `cause` (one decision): repairs here and floods the
    /// decision (`flood_removed`).
    /// Returns the decision (the agreement also sends it straight to its promisers).
    fn remove(&mut self, ctx: &mut Ctx<'_>, ranks: Vec<Rank>, cause: RemovalCause) -> RemovedMsg {
        // Ranks not checked in yet were never members: the majority guard does not count them.
        let members = ranks.iter().filter(|&&r| !self.is_pending(r)).count();
        self.note_removals(ctx, members);
        ctx.stats.membership.removed_on_evidence += members as u64;
        for &r in &ranks {
            let cause = if self.is_pending(r) {
                RemovalCause::NeverJoined
            } else {
                cause
            };
            self.causes.insert(r, cause);
        }
        ctx.effect(Effect::Deaths {
            ranks: ranks.clone(),
            scope: Scope::Local,
        });
        self.decisions += 1;
        let m = RemovedMsg {
            coordinator: ctx.me(),
            seq: self.decisions,
            cause,
            ranks,
        };
        self.note_decision(m.coordinator, m.seq);
        if Self::quorum_on(ctx) {
            // Quorum on: flooded once an accept (or promise) quorum backs it.
            self.hold_flood(ctx.me(), m.clone());
        } else {
            // Flooded now, on the overlay of the view the repair above makes.
            self.flood_removed(ctx, m.clone(), None);
        }
        m
    }

    /// Records why `ranks` died (the runtime's word, or a cause learned with them); the root
    /// puts it in its notice.
    fn note_cause(&mut self, ranks: &[Rank], cause: RemovalCause) {
        for &r in ranks {
            self.causes.entry(r).or_insert(cause);
        }
    }

    /// The embedding runtime declared `ranks` dead (out of band): noted as the cause, and
    /// confirmed at once (one repair).
    pub(crate) fn on_declared(&mut self, ctx: &mut Ctx<'_>, ranks: Vec<Rank>) {
        self.note_cause(&ranks, RemovalCause::Declared);
        ctx.effect(Effect::Deaths {
            ranks,
            scope: Scope::Global,
        });
    }

    /// Coordinator: `from` reports its tree link to `m.peer` down past the gray timeout.
    /// Removes exactly one endpoint, the edge's child in this coordinator's view of the tree
    /// (both endpoints' reports name the same one), under the majority guard.
    fn on_unreachable(&mut self, ctx: &mut Ctx<'_>, from: Rank, m: UnreachableMsg) {
        ctx.stats.membership.unreachable_in += 1;
        let (a, b) = (from, m.peer);
        let is_root = ctx.tree.view().is_some_and(|v| v.is_root());
        if !is_root || a == b || !ctx.tree.is_alive(a) || !ctx.tree.is_alive(b) {
            ctx.stats.membership.stale += 1;
            return;
        }
        let (layout, dead) = (ctx.tree.layout(), ctx.tree.dead());
        let parent_of = |r: Rank| {
            crate::tree::View::compute(layout, dead, r)
                .ok()
                .and_then(|v| v.parent())
        };
        let child = if parent_of(a) == Some(b) {
            a
        } else if parent_of(b) == Some(a) {
            b
        } else {
            // Not a tree edge in this view (the tree changed since): stale.
            ctx.stats.membership.stale += 1;
            return;
        };
        let members = usize::from(!self.is_pending(child));
        if !self.majority_stays(ctx, members) {
            ctx.stats.membership.decisions_refused_minority += 1;
            return;
        }
        self.remove(ctx, vec![child], RemovalCause::Unreachable);
    }

    /// The detector's sample of the cluster changed (see [`Effect::Reachability`]).
    pub(crate) fn on_reachability(&mut self, _ctx: &mut Ctx<'_>, suspected: u32, watching: u32) {
        self.reachability = (suspected, watching);
    }

    /// The majority guard: whether removing `n` more ranks on evidence keeps more than half of
    /// the members this coordinator had `membership.majority_window` ago (its removals in the
    /// window count against it), and this coordinator's own detector hears most of its sample
    /// of the cluster (its ring subjects, spread at random). A coordinator on the minority side of a partition sees the
    /// majority fall silent at once; it refuses to remove them (and is itself removed by the
    /// majority, then fenced on heal) instead of splitting the cluster. Failures that take half
    /// the members within the window are left to the quorum agreement (they are not decided
    /// here); the guard's window bounds how fast a cluster can shrink by evidence alone.
    fn majority_stays(&mut self, ctx: &Ctx<'_>, n: usize) -> bool {
        // Most of this coordinator's own sample (its ring subjects, spread at random over the
        // cluster) silent: it is probably the one cut off.
        let (silent, watching) = self.reachability;
        if silent * 2 > watching {
            return false;
        }
        self.keeps_majority(ctx, n)
    }

    /// The count half of the majority guard (`majority_stays` without the reachability
    /// sample): whether removing `n` more ranks keeps more than half of the members.
    fn keeps_majority(&mut self, ctx: &Ctx<'_>, n: usize) -> bool {
        if n == 0 {
            // Only ranks that never checked in: no member is removed.
            return true;
        }
        let window = ctx.cfg.membership.majority_window;
        let recent = self.recent_removals(ctx, window);
        // Members: admitted ranks (those not checked in yet are not counted).
        let members = (ctx.tree.layout().span() as usize - ctx.tree.dead().len())
            .saturating_sub(self.pending_alive(ctx));
        let before = members + recent;
        let remaining = before.saturating_sub(recent + n);
        if Self::quorum_on(ctx) {
            // Weighted (members 2, this root 3): an even split leaves the root's side the
            // larger weight.
            remaining * 2 >= before && remaining > 0
        } else {
            remaining * 2 > before
        }
    }

    /// Records decision `seq` of `coordinator` as seen; whether it was new here.
    fn note_decision(&mut self, coordinator: Rank, seq: u64) -> bool {
        self.seen_decisions
            .entry(coordinator)
            .or_default()
            .note(seq)
    }

    /// Sends a decision to every standing neighbour but `except` in the view with the
    /// decision's ranks removed (the node picks them: the detector's ring neighbours and the
    /// tree neighbours, links already up, so the flood dials nobody; the binomial-graph overlay
    /// of `revoke/overlay.rs` while the detector is off). That view is the one the repair it
    /// causes makes here, so the decision may go before that repair and never goes to a rank
    /// it removes. The K rings alone connect every live rank (each is a cycle through all of
    /// them), so a tree neighbour lost between receiving and forwarding (or cut) does not
    /// leave its subtree untold.
    ///
    /// (The flood once went on the binomial overlay always: at 1,024 real processes every rank
    /// then dialled ~17 ranks it had no link to within 800 ms of each removal, 18,000 TCP
    /// connections that delayed the global notice's tail by half a second.)
    fn flood_removed(&mut self, ctx: &mut Ctx<'_>, m: RemovedMsg, except: Option<Rank>) {
        ctx.effect(Effect::Flood {
            gone: m.ranks.clone(),
            msg: m.into(),
            except,
            count: crate::machine::FloodCount::Removed,
        });
    }

    /// A decision from a member: the first copy of each decision is applied (this rank itself
    /// listed: evicted) and passed on at once on the overlay; later copies stop here.
    ///
    /// Any member may pass one on (the node drops frames from ranks outside the span or known
    /// dead before they get here): the overlay differs with each rank's dead set, so asking the
    /// sender to be a neighbour in this rank's view would drop copies from ranks a death ahead
    /// or behind, and the relay adds no authority anyway. What a decision carries is its
    /// coordinator's: one inside the span, not deposed (quorum on), each seq once.
    fn on_removed(&mut self, ctx: &mut Ctx<'_>, from: Rank, m: RemovedMsg) {
        let member = ctx.tree.layout().contains(from) && ctx.tree.is_alive(from);
        if !member || !ctx.tree.layout().contains(m.coordinator) {
            ctx.stats.membership.stale += 1;
            return;
        }
        if Self::quorum_on(ctx) && self.removal_from_deposed(ctx, m.coordinator) {
            return;
        }
        if !self.note_decision(m.coordinator, m.seq) {
            return;
        }
        let me = ctx.me();
        if m.ranks.contains(&me) {
            self.evict(ctx, self.epoch);
            return;
        }
        self.note_cause(&m.ranks, m.cause);
        let fresh: Vec<Rank> = m
            .ranks
            .iter()
            .copied()
            .filter(|&r| ctx.tree.layout().contains(r) && ctx.tree.is_alive(r))
            .collect();
        // Passed on before the repair: to the repaired view's overlay neighbours, so no frame
        // waits on the repair and none goes to a rank being removed.
        self.flood_removed(ctx, m, Some(from));
        if !fresh.is_empty() {
            ctx.effect(Effect::Deaths {
                ranks: fresh,
                scope: Scope::Global,
            });
        }
    }

    fn on_decide_timer(&mut self, ctx: &mut Ctx<'_>, token: TimerToken) {
        if self.decide_timer.is_none_or(|(t, _)| t != token) {
            ctx.stats.stale_timers += 1;
            return;
        }
        self.decide_timer = None;
        self.decide(ctx);
    }

    fn on_evicted_msg(&mut self, ctx: &mut Ctx<'_>, m: EvictedMsg) {
        self.epoch = self.epoch.max(m.epoch);
        // A leaving rank knows it is removed: it waits (bounded) for its children to apply the
        // departure before it leaves, as when its lifeline closes (`shrink.rs`).
        if self.is_handing_over() || self.wait_for_survivors(ctx) {
            return;
        }
        self.evict(ctx, m.epoch);
    }

    /// An adoption notice from a (new) parent: reconcile the lineage it says I have.
    fn on_adopt(&mut self, ctx: &mut Ctx<'_>, from: Rank, m: AdoptMsg) {
        // An adoption notice names its sender as my parent; anything else is not one.
        if m.lineage.last() != Some(&from) {
            ctx.stats.membership.inconsistent += 1;
            return;
        }
        // Computed before or after a grow this rank has not matched: the same ranks sit in other
        // slots there, so the lineage says nothing about deaths here.
        if m.span != ctx.tree.layout().span() {
            ctx.stats.membership.stale += 1;
            return;
        }
        match ctx.tree.reconcile(&m.lineage) {
            // Nothing new: answer with a hello so the parent syncs and re-polls this rank.
            Reconcile::Agreed => {
                if ctx.tree.view().and_then(|v| v.parent()) == Some(from) {
                    self.say_hello(ctx);
                }
            }
            // The inferred deaths change the view or are reported up: either way a hello with
            // them goes to the parent, so none is added here.
            Reconcile::Inferred(set) if self.all_departing(&set) => {
                self.adopted_past_departures(ctx, &set);
            }
            Reconcile::Inferred(set) => ctx.effect(Effect::Deaths {
                ranks: set.iter().collect(),
                scope: Scope::Local,
            }),
            // The sender knows fewer deaths than this rank: until it learns them it will
            // keep claiming a slot it does not have (and wait on this rank in vain), so tell
            // it what this rank knows.
            Reconcile::Stale => {
                ctx.stats.membership.stale += 1;
                self.tell_deaths(ctx, from);
            }
            Reconcile::Inconsistent => ctx.stats.membership.inconsistent += 1,
        }
    }

    /// Sends `to` every death this rank knows (a lineage notice whose lineage `to` will find
    /// stale; its `failed` list is what matters).
    fn tell_deaths(&mut self, ctx: &mut Ctx<'_>, to: Rank) {
        let Some(view) = ctx.tree.view() else { return };
        let max = ctx.cfg.max_list as usize;
        let m = LineageMsg {
            span: ctx.tree.layout().span(),
            lineage: view.ancestors().to_vec(),
            failed: ctx.tree.dead().iter().take(max).collect(),
        };
        ctx.send(to, m);
    }

    /// A lineage (failure) notice from a child: learn its deaths and those its lineage implies,
    /// then have xcast answer a current child's hello with watermarks and re-polls.
    fn on_lineage(&mut self, ctx: &mut Ctx<'_>, from: Rank, m: LineageMsg) {
        let me = ctx.me();
        let mut deaths: Vec<Rank> = m
            .failed
            .iter()
            .copied()
            .filter(|&r| r != me && ctx.tree.layout().contains(r))
            .collect();
        match m.lineage.split_last() {
            // A lineage from another span (a grow one of us has not seen) is not comparable;
            // the explicit deaths above still hold.
            _ if m.span != ctx.tree.layout().span() => ctx.stats.membership.stale += 1,
            Some((&last, report)) if last == me => match ctx.tree.reconcile(report) {
                Reconcile::Agreed => {}
                // Departures ahead of their notice: with their campaigns' other targets.
                Reconcile::Inferred(set) if self.all_departing(&set) => {
                    deaths.extend(self.departed_with_campaigns(ctx, &set));
                }
                Reconcile::Inferred(set) => deaths.extend(set.iter()),
                Reconcile::Stale => ctx.stats.membership.stale += 1,
                Reconcile::Inconsistent => ctx.stats.membership.inconsistent += 1,
            },
            _ => ctx.stats.membership.stale += 1,
        }
        if !deaths.is_empty() {
            ctx.effect(Effect::Deaths {
                ranks: deaths,
                scope: Scope::Local,
            });
        }
        ctx.effect(Effect::ChildHello { from });
    }
}

impl Machine for Membership {
    type Msg = MembershipMsg;
    type Timer = MembershipTimer;

    fn new(cfg: &crate::Config, _me: Rank) -> Self {
        let mut m = Self {
            joiner: cfg.joiner,
            epoch: cfg.epoch,
            admitted_span: cfg.span,
            ..Self::default()
        };
        m.agreed.epoch = cfg.epoch;
        // The holes the configuration lists (a joiner's admission snapshot, a launcher's
        // departed ranks) are removed as of its epoch: without them a joiner's view counted
        // them as members, and a joiner promoted to coordinator re-announced departed ranks
        // as failures and reported them failed itself (`sim shrink --ranks 16 --radix 4
        // --seed 1244 --campaigns 2 --joins 2 --crashes 2 --window-ms 1456 --detect`).
        m.agreed.removed = cfg.dead.clone();
        m
    }

    fn held(&self) -> usize {
        self.joins.as_ref().map_or(0, |j| j.held()) + self.shrink.as_ref().map_or(0, |s| s.held())
    }

    /// A joiner adopts its children at once (they may not know it yet), and takes start-up
    /// as its admission had it, if it still ran.
    fn on_start(&mut self, ctx: &mut Ctx<'_>) {
        self.silence_start(ctx);
        if self.joiner {
            self.adopt_children(ctx);
            if let Some(v) = ctx.cfg.startup.clone() {
                self.startup_join(ctx, v);
            }
        } else if ctx.cfg.membership.check_in {
            self.startup_begin(ctx);
        }
    }

    fn on_view_change(&mut self, ctx: &mut Ctx<'_>, d: &ViewDelta) {
        self.hello_sent = self.view_changed(ctx, d);
        self.joins_after_view_change(ctx);
        self.startup_after_view_change(ctx);
        self.shrink_after_view_change(ctx);
    }

    /// Evidence about ranks now gone, and alerts for them, are moot (whether or not the deaths
    /// changed this rank's view). The repair's report waits for [`Machine::on_repaired`].
    fn on_members_change(&mut self, ctx: &mut Ctx<'_>, change: &MembersChange<'_>) {
        self.repairs.push(std::mem::take(&mut self.hello_sent));
        let tree = ctx.tree;
        // Only the ranks this change marked dead: the whole dead set grows with every removal
        // (a 4,096-rank shrink), and walking it at every change at every rank was most of a
        // large per-death run's time.
        let horizon = Self::dead_since_horizon(ctx.cfg);
        self.dead_since.prune(ctx.now, horizon);
        self.dead_since.record(ctx.now, change.fresh);
        self.reports.retain(|s, _| tree.is_alive(*s));
        self.outgoing
            .retain(|(s, o), _| tree.is_alive(*s) && tree.is_alive(*o));
        self.suspects.retain(|s, _| tree.is_alive(*s));
        self.own.retain(|s, _| tree.is_alive(*s));
        if let Some(r) = self.relay.as_mut() {
            r.gray.retain(|p, _| tree.is_alive(*p));
        }
        self.retain_relays(ctx);
        if let Some(c) = self.corroboration.as_mut() {
            c.retain_alive(|r| tree.is_alive(r));
        }
        self.forget_heard(|r| tree.is_alive(r));
        // The rings are a function of the live set.
        self.observers.clear();
    }

    /// After a grow every neighbour gets this rank's lineage anew (notices in flight from
    /// before it carry the old span and are dropped by their receivers); deaths learned here
    /// go up (the root announces them; confirmed ones need no report), unless the repair's
    /// view change already told the parent. (The decisions that caused the repair went on
    /// before it, on the repaired view's overlay: `flood_removed`.)
    fn on_repaired(&mut self, ctx: &mut Ctx<'_>, change: &MembersChange<'_>) {
        let Some(hello_sent) = self.repairs.pop() else {
            return;
        };
        self.resend_refusals(ctx);
        if change.grown {
            self.adopt_children(ctx);
            if !hello_sent {
                self.say_hello(ctx);
            }
        } else if change.scope == Scope::Local && !change.fresh.is_empty() && !hello_sent {
            self.report_deaths(ctx);
        }
    }

    fn on_link_up(&mut self, ctx: &mut Ctx<'_>, peer: Rank) {
        self.link_up(ctx, peer);
    }

    fn on_link_down(&mut self, ctx: &mut Ctx<'_>, peer: Rank, cause: LinkCause) {
        self.link_down(ctx, peer, cause);
    }

    fn on_frame_from(&mut self, ctx: &mut Ctx<'_>, peer: Rank) {
        self.on_heard(ctx, peer);
    }

    /// The root's global failure notices and admissions.
    const XCAST_TAGS: &'static [u16] = &[
        xcast::TAG_FAILURE_NOTICE,
        xcast::TAG_JOIN_NOTICE,
        xcast::TAG_CHECK_IN_NOTICE,
        xcast::TAG_SHRINK_ORDER,
        xcast::TAG_LEFT_NOTICE,
    ];

    fn on_xcast(&mut self, ctx: &mut Ctx<'_>, tag: u16, payload: Bytes) {
        match tag {
            xcast::TAG_JOIN_NOTICE => self.on_admit_notice(ctx, payload),
            xcast::TAG_CHECK_IN_NOTICE => self.on_check_in_notice(ctx, payload),
            xcast::TAG_SHRINK_ORDER => self.on_shrink_order(ctx, payload),
            xcast::TAG_LEFT_NOTICE => self.on_left_notice(ctx, payload),
            _ => self.on_global_notice(ctx, payload),
        }
    }

    /// Root: the coordinator's own notices completed everywhere.
    fn on_xcast_done(&mut self, ctx: &mut Ctx<'_>, tag: u16, payload: Bytes) {
        self.on_notice_complete(ctx, tag, payload);
    }

    fn on_message(&mut self, ctx: &mut Ctx<'_>, from: Rank, msg: MembershipMsg) {
        match msg {
            MembershipMsg::Adopt(m) => self.on_adopt(ctx, from, m),
            MembershipMsg::Lineage(m) => self.on_lineage(ctx, from, m),
            MembershipMsg::Alert(m) => self.on_alert_msg(ctx, from, m),
            MembershipMsg::Evicted(m) => self.on_evicted_msg(ctx, m),
            MembershipMsg::Removed(m) => self.on_removed(ctx, from, m),
            MembershipMsg::Unreachable(m) => self.on_unreachable(ctx, from, m),
            MembershipMsg::JoinForward(m) => self.on_join_forward(ctx, from, m),
            MembershipMsg::JoinAnswer(m) => self.on_join_answer(ctx, m),
            MembershipMsg::Corroborate(m) => self.on_corroborate(ctx, from, m),
            MembershipMsg::CheckIn(m) => self.on_check_in(ctx, from, m),
            MembershipMsg::ShrinkRequest(m) => self.on_shrink_request(ctx, m),
            // The node opens envelopes before any machine sees a frame (`node/relay.rs`).
            MembershipMsg::Relayed(_) => ctx.stats.membership.stale += 1,
            // Heard already (`on_frame_from`): its arrival is all it says.
            MembershipMsg::TreePing(_) => {}
            MembershipMsg::Prepare(m) => self.on_prepare(ctx, from, m),
            MembershipMsg::Promise(m) => self.on_promise(ctx, from, m),
            MembershipMsg::Propose(m) => self.on_propose(ctx, from, m),
            MembershipMsg::Accept(m) => self.on_accept(ctx, from, m),
            MembershipMsg::TreeRound(m) => self.on_tree_round(ctx, from, m),
            MembershipMsg::RoundAnswers(m) => self.on_round_answers(ctx, from, m),
        }
    }

    fn on_timer(&mut self, ctx: &mut Ctx<'_>, timer: MembershipTimer, token: TimerToken) {
        match timer {
            MembershipTimer::Announce => self.on_announce_timer(ctx, token),
            MembershipTimer::Alerts => self.on_alert_timer(ctx, token),
            MembershipTimer::Decide => self.on_decide_timer(ctx, token),
            MembershipTimer::Gray(peer) => self.on_gray_timer(ctx, peer),
            MembershipTimer::Relay(peer) => self.on_relay_timer(ctx, peer),
            MembershipTimer::Silence => self.on_silence_timer(ctx),
            MembershipTimer::JoinBatch => self.on_join_batch(ctx, token),
            MembershipTimer::JoinExpiry => self.on_join_expiry(ctx),
            MembershipTimer::Corroborate(subject) => self.on_corroborate_timer(ctx, subject),
            MembershipTimer::CheckIn => self.on_check_in_resend(ctx, token),
            MembershipTimer::CheckInBatch => self.on_check_in_batch(ctx, token),
            MembershipTimer::CheckInRelay => self.on_check_in_relay(ctx, token),
            MembershipTimer::StartupDeadline => self.on_startup_deadline(ctx, token),
            MembershipTimer::ShrinkBatch => self.on_shrink_batch(ctx, token),
            MembershipTimer::Campaign(seq) => self.on_campaign_timer(ctx, seq),
            MembershipTimer::Drain => self.on_drain_timer(ctx),
            MembershipTimer::Depart => self.on_depart_timer(ctx),
            MembershipTimer::Quorum => self.on_quorum_timer(ctx, token),
            MembershipTimer::Round => self.on_round_timer(ctx),
        }
    }
}
