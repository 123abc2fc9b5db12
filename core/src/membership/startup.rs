//! Start-up from check-ins (`membership.check_in`): membership starts from the ranks that
//! started, not from the launcher's N.
//!
//! - **Check-in.** A launched rank sends [`CheckInMsg`] to its parent at start, again every
//!   `membership.check_in_resend` until a check-in notice applied here lists it, and at once
//!   to a new parent; a relay merges its descendants' check-ins for `membership.relay_batch`
//!   and passes them up. Up the tree, not straight to the root: no rank is dialled by
//!   thousands at once, and no link is opened that the tree does not use (a check-in to a
//!   parent not started yet waits in its dial, retried within the start-up grace).
//! - **Notices.** The coordinator gathers check-ins for `membership.check_in_batch` and
//!   broadcasts them as one process-first xcast op ([`CheckInNotice`], one view change under the
//!   shared epoch). Every member applies the notices in op order:
//!   [`MembershipEvent::CheckedIn`].
//! - **Ready.** The notice (or removal) after which no expected rank is pending completes
//!   start-up at every member at the same epoch: [`MembershipEvent::Ready`], or
//!   [`MembershipEvent::StartupIncomplete`] when some were removed before they checked in.
//! - **The bound.** `membership.startup_timeout` after the coordinator's start (and at least
//!   two re-send intervals after it became coordinator, so check-ins re-sent to a new one
//!   arrive), the coordinator removes the topmost ranks still missing (those whose parent is
//!   not missing) in one decision, cause [`RemovalCause::NeverJoined`]: the tree routes around
//!   their slots, their live children re-send to their new parents, and two re-send intervals
//!   later the next round removes what is still missing (a rank is never removed because the
//!   one above it never started). A process that starts later is fenced (it may join as a new
//!   rank).
//! - **Not joined yet is not dead.** A rank not checked in is not counted by the majority guard
//!   (neither as a member nor as a removal), and any removal of it, on the detector's evidence
//!   or at the bound, carries the cause "never joined" in the root's notice. The detector holds
//!   its silence until `detect.startup_grace` as for any rank never heard from.
//!
//! - **Joiners** admitted while start-up runs get it as their contact's view had it
//!   ([`StartupView`], in the admission): a grow can move the root slot to a joiner (the slot
//!   rule prefers the highest living descendant), which then coordinates start-up: it hears
//!   check-ins, broadcasts the notices and removes the missing at the bound. A joiner reports
//!   no start-up event (it never checked in).
//!
//! What this does not change: every expected rank keeps its slot in the tree from the start
//! (its parent holds what is routed through it until it starts or is removed), so the tree
//! and every rank's view function stay what they were.

use bytes::Bytes;

use super::{
    CheckInMsg, CheckInNotice, Membership, MembershipEvent, MembershipTimer, RemovalCause,
};
use crate::machine::{Ctx, Effect};
use crate::time::Instant;
use crate::timer::TimerToken;
use crate::tree::{Rank, RankSet};
use crate::wire::Codec;
use crate::xcast;

/// Start-up counters of one rank ([`Node::startup_stats`](crate::Node::startup_stats)).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct StartupStats {
    /// Check-ins this rank sent (its own, re-sends included).
    pub check_ins_out: u64,
    /// Check-ins received as coordinator (or not: see `check_ins_stale`).
    pub check_ins_in: u64,
    /// Check-ins refused: this rank is not the coordinator, the sender is already in, or it
    /// was launched with another span.
    pub check_ins_stale: u64,
    /// Check-in notices this rank broadcast as coordinator (start-up view changes).
    pub check_in_views: u64,
    /// Check-in notices applied here.
    pub check_in_notices: u64,
    /// Ranks this coordinator removed at the bound because they never checked in.
    pub never_joined_removed: u64,
}

/// Start-up as a view has it, for a joiner admitted while it runs
/// ([`Admission::startup`](crate::join::Admission::startup)): a joiner that the tree makes the
/// coordinator carries start-up on from it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StartupView {
    /// The span the ranks were launched with (the expected size).
    pub expected: u32,
    /// Expected ranks that no notice of the view listed and none removed.
    pub pending: RankSet,
}

/// Start-up state of a launched rank, or of a joiner admitted while start-up ran (boxed: other
/// joiners and ranks without check-ins hold none).
#[derive(Debug)]
pub(super) struct Startup {
    /// The span this rank was launched with (the expected size).
    expected: u32,
    /// Expected ranks no applied notice has listed and no applied removal has removed.
    pending: RankSet,
    /// Expected ranks removed before they checked in.
    never_joined: RankSet,
    /// Coordinator: check-ins heard and not yet put in a notice.
    heard: RankSet,
    /// Coordinator: ranks it put in a notice (a re-sent check-in is not announced twice).
    announced: RankSet,
    /// Relay: descendants' check-ins waiting to go up.
    relay: RankSet,
    relay_timer: Option<TimerToken>,
    batch_timer: Option<TimerToken>,
    resend_timer: Option<TimerToken>,
    deadline_timer: Option<TimerToken>,
    /// When this rank started.
    started: Instant,
    /// This rank is the coordinator (its bound is armed from when it became one).
    coordinating: bool,
    /// Where this rank's own check-in went last.
    sent_to: Option<Rank>,
    /// Start-up is over here (`Ready` or `StartupIncomplete` given).
    done: bool,
    /// A joiner's copy (from its admission): it reports no start-up event.
    joiner: bool,
    pub(super) stats: StartupStats,
}

impl Startup {
    /// Coordinator: check-ins heard and not yet announced, or a batch armed (a shrink waits).
    pub(super) fn batch_open(&self) -> bool {
        !self.heard.is_empty() || self.batch_timer.is_some()
    }
}

impl Membership {
    /// Whether `r` is an expected rank that has not checked in (nor been removed) here.
    pub(crate) fn is_pending(&self, r: Rank) -> bool {
        self.startup.as_ref().is_some_and(|s| s.pending.contains(r))
    }

    /// Whether `r` was never heard from: an expected rank that no applied notice listed,
    /// none removed, and whose check-in this rank (as coordinator) has neither heard nor put
    /// in a notice (a notice on its way is not applied here yet: `r` is still pending).
    pub(super) fn never_heard_from(&self, r: Rank) -> bool {
        self.startup.as_ref().is_some_and(|s| {
            s.pending.contains(r) && !s.heard.contains(r) && !s.announced.contains(r)
        })
    }

    /// Pending ranks still alive in the tree (not members yet: the majority guard leaves them
    /// out).
    pub(super) fn pending_alive(&self, ctx: &Ctx<'_>) -> usize {
        self.startup.as_ref().map_or(0, |s| {
            s.pending.iter().filter(|&r| ctx.tree.is_alive(r)).count()
        })
    }

    /// Start-up counters (zero without start-up state: check-ins off, or a joiner admitted
    /// after start-up).
    pub(crate) fn startup_stats(&self) -> StartupStats {
        self.startup
            .as_ref()
            .map(|s| s.stats.clone())
            .unwrap_or_default()
    }

    /// Start-up as this rank's view has it while it runs (a joiner admitted now gets it).
    pub(super) fn startup_view(&self) -> Option<StartupView> {
        self.startup
            .as_deref()
            .filter(|s| !s.done)
            .map(|s| StartupView {
                expected: s.expected,
                pending: s.pending.clone(),
            })
    }

    /// A joiner admitted while start-up ran starts with it as its admission had it (the
    /// contact's agreed state: ranks dead there but not yet in a notice are still pending, as
    /// at every member): it relays check-ins and, should the tree make it the coordinator,
    /// carries start-up on.
    pub(super) fn startup_join(&mut self, ctx: &mut Ctx<'_>, v: StartupView) {
        self.startup = Some(Box::new(Startup {
            expected: v.expected,
            pending: v.pending,
            never_joined: RankSet::default(),
            heard: RankSet::default(),
            announced: RankSet::default(),
            relay: RankSet::default(),
            relay_timer: None,
            batch_timer: None,
            resend_timer: None,
            deadline_timer: None,
            started: ctx.now,
            coordinating: false,
            sent_to: None,
            done: false,
            joiner: true,
            stats: StartupStats::default(),
        }));
        self.startup_after_view_change(ctx);
        let epoch = self.epoch;
        let members = self.members_now(ctx, 0);
        self.check_startup_done(ctx, epoch, members);
    }

    /// A launched rank starts: every expected rank alive is pending, this one checks in.
    pub(super) fn startup_begin(&mut self, ctx: &mut Ctx<'_>) {
        let span = ctx.tree.layout().span();
        let mut pending = RankSet::default();
        if span > 0 {
            pending.insert_range(Rank(0), Rank(span - 1));
        }
        for r in ctx.tree.dead().iter() {
            pending.remove(r);
        }
        let deadline = ctx.now + ctx.cfg.membership.startup_timeout;
        let token = ctx.timers.set(MembershipTimer::StartupDeadline, deadline);
        self.startup = Some(Box::new(Startup {
            expected: span,
            pending,
            never_joined: RankSet::default(),
            heard: RankSet::default(),
            announced: RankSet::default(),
            relay: RankSet::default(),
            relay_timer: None,
            batch_timer: None,
            resend_timer: None,
            deadline_timer: Some(token),
            started: ctx.now,
            coordinating: false,
            sent_to: None,
            done: false,
            joiner: false,
            stats: StartupStats::default(),
        }));
        self.startup_after_view_change(ctx);
        self.send_check_in(ctx);
    }

    /// The rank this rank's check-ins go to: its parent (`None` at the root: heard here).
    fn check_in_target(ctx: &Ctx<'_>) -> Option<Rank> {
        ctx.tree.view().and_then(|v| v.parent())
    }

    /// Sends this rank's check-in up the tree (heard here at the root) and arms the re-send.
    fn send_check_in(&mut self, ctx: &mut Ctx<'_>) {
        let me = ctx.me();
        let evicted = self.evicted;
        if ctx.tree.view().is_none() {
            return;
        }
        let target = Self::check_in_target(ctx);
        let Some(s) = self.startup.as_deref_mut() else {
            return;
        };
        if evicted || !s.pending.contains(me) {
            s.resend_timer = None;
            return;
        }
        s.sent_to = Some(target.unwrap_or(me));
        s.stats.check_ins_out += 1;
        let expected = s.expected;
        let at = ctx.now + ctx.cfg.membership.check_in_resend;
        s.resend_timer = Some(ctx.timers.set(MembershipTimer::CheckIn, at));
        match target {
            None => self.heard(ctx, me),
            Some(parent) => ctx.send(
                parent,
                CheckInMsg {
                    span: expected,
                    ranks: vec![me],
                },
            ),
        }
    }

    pub(super) fn on_check_in_resend(&mut self, ctx: &mut Ctx<'_>, token: TimerToken) {
        match self.startup.as_deref_mut() {
            Some(s) if s.resend_timer == Some(token) => s.resend_timer = None,
            _ => {
                ctx.stats.stale_timers += 1;
                return;
            }
        }
        self.send_check_in(ctx);
    }

    /// Check-ins from `from` (a child, or a rank whose view makes this one its parent): heard
    /// here at the root, else merged and passed up.
    pub(super) fn on_check_in(&mut self, ctx: &mut Ctx<'_>, _from: Rank, m: CheckInMsg) {
        let root = ctx.tree.view().is_some_and(|v| v.is_root());
        let Some(s) = self.startup.as_deref_mut() else {
            // A joiner (no start-up state: a member since its admission) that a launched
            // rank has for parent passes its check-ins on as they are.
            match Self::check_in_target(ctx) {
                Some(parent) if !root && ctx.cfg.membership.check_in => ctx.send(parent, m),
                _ => ctx.stats.membership.stale += 1,
            }
            return;
        };
        s.stats.check_ins_in += 1;
        if m.span != s.expected {
            s.stats.check_ins_stale += 1;
            return;
        }
        // Ranks no longer pending here (listed by a notice applied here, or removed) need no
        // more check-ins; the sender learns it from the same notice.
        let fresh: Vec<Rank> = m
            .ranks
            .into_iter()
            .filter(|&r| s.pending.contains(r) && ctx.tree.is_alive(r))
            .collect();
        if fresh.is_empty() {
            s.stats.check_ins_stale += 1;
            return;
        }
        if root {
            for r in fresh {
                self.heard(ctx, r);
            }
            return;
        }
        s.relay.extend(fresh);
        if s.relay_timer.is_none() {
            let at = ctx.now + ctx.cfg.membership.relay_batch;
            s.relay_timer = Some(ctx.timers.set(MembershipTimer::CheckInRelay, at));
        }
    }

    /// Relay: the check-ins gathered go up to the parent in one message (at most `max_list`
    /// ranks; the rest next time), or are heard here if this rank became the root.
    pub(super) fn on_check_in_relay(&mut self, ctx: &mut Ctx<'_>, token: TimerToken) {
        let max = ctx.cfg.max_list as usize;
        let target = Self::check_in_target(ctx);
        let Some(s) = self.startup.as_deref_mut() else {
            return;
        };
        if s.relay_timer != Some(token) {
            ctx.stats.stale_timers += 1;
            return;
        }
        s.relay_timer = None;
        let ranks: Vec<Rank> = s
            .relay
            .iter()
            .filter(|&r| s.pending.contains(r) && ctx.tree.is_alive(r))
            .take(max)
            .collect();
        for &r in &ranks {
            s.relay.remove(r);
        }
        if ranks.len() == max {
            let at = ctx.now + ctx.cfg.membership.relay_batch;
            s.relay_timer = Some(ctx.timers.set(MembershipTimer::CheckInRelay, at));
        } else {
            s.relay.clear();
        }
        let expected = s.expected;
        match target {
            Some(parent) if !ranks.is_empty() => ctx.send(
                parent,
                CheckInMsg {
                    span: expected,
                    ranks,
                },
            ),
            Some(_) => {}
            None => {
                for r in ranks {
                    self.heard(ctx, r);
                }
            }
        }
    }

    /// Coordinator: `r` checked in; it goes into the next notice.
    fn heard(&mut self, ctx: &mut Ctx<'_>, r: Rank) {
        let Some(s) = self.startup.as_deref_mut() else {
            return;
        };
        if !s.pending.contains(r) || s.announced.contains(r) {
            s.stats.check_ins_stale += 1;
            return;
        }
        s.heard.insert(r);
        if s.batch_timer.is_none() {
            let at = ctx.now + ctx.cfg.membership.check_in_batch;
            s.batch_timer = Some(ctx.timers.set(MembershipTimer::CheckInBatch, at));
        }
    }

    pub(super) fn on_check_in_batch(&mut self, ctx: &mut Ctx<'_>, token: TimerToken) {
        match self.startup.as_deref_mut() {
            Some(s) if s.batch_timer == Some(token) => s.batch_timer = None,
            _ => {
                ctx.stats.stale_timers += 1;
                return;
            }
        }
        self.flush_check_ins(ctx);
    }

    /// Coordinator: the check-ins heard go out in one notice (at most `max_list` ranks; the
    /// rest in the next batch).
    fn flush_check_ins(&mut self, ctx: &mut Ctx<'_>) {
        let coordinator = Self::coordinator(ctx) == Some(ctx.me());
        let max = ctx.cfg.max_list as usize;
        let Some(s) = self.startup.as_deref_mut() else {
            return;
        };
        if !coordinator {
            s.heard.clear();
            return;
        }
        let ranks: Vec<Rank> = s
            .heard
            .iter()
            .filter(|&r| ctx.tree.is_alive(r) && s.pending.contains(r))
            .take(max)
            .collect();
        for &r in &ranks {
            s.heard.remove(r);
            s.announced.insert(r);
        }
        if ranks.len() == max {
            let at = ctx.now + ctx.cfg.membership.check_in_batch;
            s.batch_timer = Some(ctx.timers.set(MembershipTimer::CheckInBatch, at));
        } else {
            s.heard.clear();
        }
        if ranks.is_empty() {
            return;
        }
        s.stats.check_in_views += 1;
        self.note_admission_broadcast();
        self.epoch += 1;
        let m = CheckInNotice {
            epoch: self.epoch,
            ranks,
        };
        ctx.effect(Effect::RootBroadcast {
            tag: xcast::TAG_CHECK_IN_NOTICE,
            payload: m.to_payload(),
        });
    }

    /// A delivered check-in notice (in op order): its ranks are members as of its epoch.
    pub(super) fn on_check_in_notice(&mut self, ctx: &mut Ctx<'_>, payload: Bytes) {
        let m = match CheckInNotice::from_payload(payload, &ctx.cfg.limits()) {
            Ok(m) => m,
            Err(_) => {
                ctx.stats.membership.inconsistent += 1;
                return;
            }
        };
        self.epoch = self.epoch.max(m.epoch);
        self.agreed.apply(m.epoch, &[]);
        let me = ctx.me();
        let Some(s) = self.startup.as_deref_mut() else {
            // A joiner admitted after start-up (its snapshot made it a member of everything
            // before it) or a rank without check-ins: the epoch is all it takes.
            return;
        };
        s.stats.check_in_notices += 1;
        let fresh: RankSet = m
            .ranks
            .iter()
            .copied()
            .filter(|&r| s.pending.remove(r))
            .collect();
        if fresh.contains(me) {
            s.resend_timer = None;
        }
        let joiner = s.joiner;
        let members = self.members_now(ctx, 0);
        if !fresh.is_empty() && !joiner {
            ctx.effect(Effect::Event(
                MembershipEvent::CheckedIn {
                    epoch: m.epoch,
                    ranks: fresh,
                    members,
                }
                .into(),
            ));
        }
        self.check_startup_done(ctx, m.epoch, members);
    }

    /// Members now (admitted and alive), less `removing` ranks about to be removed.
    fn members_now(&self, ctx: &Ctx<'_>, removing: usize) -> u32 {
        let live = ctx.tree.layout().span() as usize - ctx.tree.dead().len();
        live.saturating_sub(self.pending_alive(ctx) + removing) as u32
    }

    /// A global notice removed `ranks` (in op order): those still pending never joined.
    /// `members` is the live count once they are removed (pending ranks included).
    pub(super) fn startup_after_removals(
        &mut self,
        ctx: &mut Ctx<'_>,
        ranks: &RankSet,
        epoch: u64,
        members: u32,
    ) {
        let Some(s) = self.startup.as_deref_mut() else {
            return;
        };
        for r in ranks.iter() {
            if s.pending.remove(r) {
                s.never_joined.insert(r);
            }
        }
        let members = members.saturating_sub(self.pending_alive(ctx) as u32);
        self.check_startup_done(ctx, epoch, members);
    }

    /// Start-up completes at the first view with no expected rank pending.
    fn check_startup_done(&mut self, ctx: &mut Ctx<'_>, epoch: u64, members: u32) {
        let Some(s) = self.startup.as_deref_mut() else {
            return;
        };
        if s.done || !s.pending.is_empty() {
            return;
        }
        s.done = true;
        s.deadline_timer = None;
        s.heard.clear();
        s.announced.clear();
        if s.joiner {
            return;
        }
        let ev = if s.never_joined.is_empty() {
            MembershipEvent::Ready { epoch, members }
        } else {
            MembershipEvent::StartupIncomplete {
                epoch,
                missing: s.never_joined.clone(),
                members,
            }
        };
        ctx.effect(Effect::Event(ev.into()));
    }

    /// After a view change: a new coordinator gets this rank's check-in at once; a rank that
    /// became the coordinator arms the bound (at least two re-sends away, so the check-ins its
    /// predecessor heard reach it again).
    pub(super) fn startup_after_view_change(&mut self, ctx: &mut Ctx<'_>) {
        let me = ctx.me();
        let coord = Self::coordinator(ctx);
        let Some(s) = self.startup.as_deref_mut() else {
            return;
        };
        if s.done {
            return;
        }
        if coord == Some(me) {
            if !s.coordinating {
                s.coordinating = true;
                let resend = ctx.cfg.membership.check_in_resend;
                let due =
                    (s.started + ctx.cfg.membership.startup_timeout).max(ctx.now + resend + resend);
                s.deadline_timer = Some(ctx.timers.set(MembershipTimer::StartupDeadline, due));
            }
        } else {
            s.coordinating = false;
            s.heard.clear();
        }
        let target = Some(Self::check_in_target(ctx).unwrap_or(me));
        let resend = s.pending.contains(me) && s.sent_to.is_some() && s.sent_to != target;
        if resend {
            self.send_check_in(ctx);
        }
    }

    /// The bound: the coordinator removes the expected ranks still missing, in one decision.
    pub(super) fn on_startup_deadline(&mut self, ctx: &mut Ctx<'_>, token: TimerToken) {
        let coordinator = Self::coordinator(ctx) == Some(ctx.me());
        match self.startup.as_deref_mut() {
            Some(s) if s.deadline_timer == Some(token) => s.deadline_timer = None,
            _ => {
                ctx.stats.stale_timers += 1;
                return;
            }
        }
        if !coordinator {
            // The coordinator decides; this rank arms the bound again if it becomes one.
            return;
        }
        // Two re-send intervals after the last death learned here: the live ranks below it
        // re-send their check-ins through their new parents first.
        let resend = ctx.cfg.membership.check_in_resend;
        // No entry: the last death is older than `dead_since` keeps, past this wait.
        let settled = self.dead_since.newest().map(|t| t + resend + resend);
        if let Some(at) = settled.filter(|&at| ctx.now < at) {
            if let Some(s) = self.startup.as_deref_mut() {
                s.deadline_timer = Some(ctx.timers.set(MembershipTimer::StartupDeadline, at));
            }
            return;
        }
        self.flush_check_ins(ctx);
        let me = ctx.me();
        let Some(s) = self.startup.as_deref_mut() else {
            return;
        };
        let (layout, dead) = (ctx.tree.layout(), ctx.tree.dead());
        let missing_here = |r: Rank| r != me && ctx.tree.is_alive(r) && !s.announced.contains(r);
        // The topmost missing only: a rank below one that never started could not check in
        // through it; once its parent is removed it re-sends to its new one.
        let missing: Vec<Rank> = s
            .pending
            .iter()
            .filter(|&r| missing_here(r))
            .filter(|&r| {
                let parent = crate::tree::View::compute(layout, dead, r)
                    .ok()
                    .and_then(|v| v.parent());
                parent.is_none_or(|p| !(s.pending.contains(p) && missing_here(p)))
            })
            .take(ctx.cfg.max_list as usize)
            .collect();
        if missing.is_empty() {
            return;
        }
        s.stats.never_joined_removed += missing.len() as u64;
        // The next round: the children of the removed re-send to their new parents first.
        let at = ctx.now + resend + resend + ctx.cfg.membership.check_in_batch;
        s.deadline_timer = Some(ctx.timers.set(MembershipTimer::StartupDeadline, at));
        self.remove(ctx, missing, RemovalCause::NeverJoined);
    }
}
