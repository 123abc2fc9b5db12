//! Failure knowledge: how deaths spread and how views converge (PRRTE's two phases).
//!
//! This machine is the one the membership work (detector evidence, agreed views, fencing)
//! replaces; today it is PRRTE's notice protocol:
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
//! A rank that dies together with its only tree neighbour is discovered when its new parent's
//! adoption notice cannot be delivered: the driver's bounded dial fails and reports link-down.

use bytes::Bytes;

use crate::machine::{Ctx, Effect, Machine};
use crate::timer::{TimerKey, TimerToken};
use crate::tree::{Rank, RankSet, Reconcile, Scope, ViewDelta};
use crate::wire::Limits;
use crate::xcast;

mod config;
mod event;
mod stats;
mod timer;
mod wire;

pub use config::MembershipConfig;
pub use event::MembershipEvent;
pub use stats::MembershipStats;
pub use timer::MembershipTimer;
pub use wire::{AdoptMsg, GlobalFailureMsg, LineageMsg, MembershipMsg};

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
    /// Whether the last view change sent the parent a lineage notice (read once by the node).
    hello_sent: bool,
}

impl Membership {
    /// Highest global failure epoch seen.
    pub(crate) fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Whether the last view change sent the parent a lineage notice (and forgets it).
    pub(crate) fn take_hello_sent(&mut self) -> bool {
        std::mem::take(&mut self.hello_sent)
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
    pub(crate) fn adopt_children(&mut self, ctx: &mut Ctx<'_>) {
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
    pub(crate) fn say_hello(&mut self, ctx: &mut Ctx<'_>) {
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
    pub(crate) fn report_deaths(&mut self, ctx: &mut Ctx<'_>) {
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
            let key = TimerKey::Membership(MembershipTimer::Announce);
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

    /// Root: broadcast every death not yet announced under the next epoch.
    fn announce(&mut self, ctx: &mut Ctx<'_>) {
        let new: Vec<Rank> = ctx
            .tree
            .dead()
            .iter()
            .filter(|r| !ctx.tree.confirmed().contains(*r) && !self.announced.contains(*r))
            .take(ctx.cfg.max_list as usize)
            .collect();
        if new.is_empty() {
            return;
        }
        self.announced.extend(new.iter().copied());
        self.epoch += 1;
        let m = GlobalFailureMsg {
            epoch: self.epoch,
            failed: new,
        };
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
        ctx.effect(Effect::Deaths {
            ranks,
            scope: Scope::Global,
        });
        ctx.effect(Effect::Event(
            MembershipEvent::FailureConfirmed {
                epoch: m.epoch,
                ranks: set,
            }
            .into(),
        ));
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
        Self {
            joiner: cfg.joiner,
            ..Self::default()
        }
    }

    /// A joiner adopts its children at once (they may not know it yet).
    fn on_start(&mut self, ctx: &mut Ctx<'_>) {
        if self.joiner {
            self.adopt_children(ctx);
        }
    }

    fn on_view_change(&mut self, ctx: &mut Ctx<'_>, d: &ViewDelta) {
        self.hello_sent = self.view_changed(ctx, d);
    }

    fn on_message(&mut self, ctx: &mut Ctx<'_>, from: Rank, msg: MembershipMsg) {
        match msg {
            MembershipMsg::Adopt(m) => self.on_adopt(ctx, from, m),
            MembershipMsg::Lineage(m) => self.on_lineage(ctx, from, m),
        }
    }

    fn on_timer(&mut self, ctx: &mut Ctx<'_>, timer: MembershipTimer, token: TimerToken) {
        match timer {
            MembershipTimer::Announce => self.on_announce_timer(ctx, token),
        }
    }
}
