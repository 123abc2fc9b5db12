//! Quorum agreement wired into the failure-knowledge machine (membership.md §3.5–§3.7, the
//! part built so far; the leader's phase 2 and removal check go down its tree and come back
//! merged, `tree_round.rs`; a candidate's phase 1 is direct sends):
//!
//! - **Phase 2 for every failure notice.** The root's epoch-stamped global failure notice is
//!   broadcast only after members holding more than half of the previous view's weight
//!   accepted it (PROPOSE → ACCEPT); a root cut off with a minority never gets there, and its
//!   side sees no new epoch. A root without a ballot (not the initial root, and not elected)
//!   runs phase 1 first.
//! - **Failover.** Standing evidence also goes straight to the backup candidates of its
//!   subject's view ([`Membership::send_to_backups`]); a candidate holding stable evidence
//!   against every candidate ahead of it is eligible, sends PREPARE to the members, and on a
//!   promise quorum removes the candidates ahead and whatever else its evidence (its own and
//!   what the promises carried) holds stable, as one decision told straight to every promiser
//!   and flooded over its tree. It is then the root of the repaired view, and its notice takes
//!   phase 2 with its ballot.
//! - **Acceptors.** Every member promises higher ballots and accepts proposals at or above its
//!   promise (answering refusals with the ballot it promised); a leader or candidate that sees
//!   a higher ballot steps down.

use super::{candidates, Accepted, Acceptor, Ballot, Votes, Weights};
use super::{AcceptMsg, PrepareMsg, PromiseMsg, ProposeMsg, QuorumStats, RoundBody};
use crate::machine::{Ctx, Effect};
use crate::membership::{
    AlertEntry, AlertMsg, GlobalFailureMsg, Membership, MembershipTimer, Pending, RemovalCause,
    RemovedMsg,
};
use crate::time::{Duration, Instant};
use crate::timer::TimerToken;
use crate::tree::Rank;
use crate::wire::Codec;
use crate::xcast;

/// Phase 1 in progress at a candidate.
#[derive(Debug)]
struct Preparing {
    ballot: Ballot,
    /// The tentative cut (the candidates ahead, and what was stable when it began).
    removed: Vec<Rank>,
    votes: Votes,
    /// The highest-ballot value a promise reported accepted (re-proposed first).
    highest: Option<Accepted>,
}

/// Phase 2 in progress at the leader: one epoch's notice waiting for its accept quorum.
#[derive(Debug)]
struct Proposing {
    ballot: Ballot,
    /// What is broadcast once decided (a re-proposal's notice names the base's ranks too, so a
    /// member that missed the epoch before applies the whole view).
    notice: GlobalFailureMsg,
    /// The epoch's removals (the value proposed), ascending.
    removed: Vec<Rank>,
    /// The view they apply to: the ranks removed as of the leader's agreed epoch.
    base: Vec<Rank>,
    votes: Votes,
    /// When it was proposed (for `QuorumStats::phase2_us_max`).
    started: Instant,
}

/// A rank's agreement state: its acceptor, and its candidate or leader state (boxed in
/// [`Membership`] on first use).
#[derive(Debug)]
pub(in crate::membership) struct Quorum {
    acceptor: Acceptor,
    /// The highest ballot seen anywhere.
    seen: Ballot,
    /// The ballot this rank leads with (the initial root's, or won in phase 1).
    leading: Option<Ballot>,
    preparing: Option<Preparing>,
    proposing: Option<Proposing>,
    /// A value a promise reported accepted and not applied here: proposed before anything else.
    reproposal: Option<Accepted>,
    /// Leader: the ranks removed as of the last epoch it decided (that epoch's base and
    /// value). Its own notice may not have come back to it yet when it proposes the next
    /// epoch, so the next value's base is this joined with its agreed view.
    decided: Vec<Rank>,
    /// The re-send timer of the open phase.
    retry: Option<TimerToken>,
    /// Root: removal decisions made here and not yet flooded (quorum on), released once a
    /// phase 2 covering their ranks is decided.
    held: Vec<RemovedMsg>,
    /// Coordinator: its removals on evidence within `membership.majority_window` (when, how
    /// many), for the majority guard (kept here, with the other coordinator state, so a node
    /// that never coordinates carries none of it inline).
    recent_removals: Vec<(Instant, usize)>,
    /// When a frame from each peer last arrived directly (not relayed): what this rank can
    /// vouch for (`vouch.rs`). One entry per peer that sent one, dropped when it dies.
    pub(super) heard: std::collections::BTreeMap<Rank, Instant>,
    /// Leader: the removal check in progress (`check.rs`).
    pub(super) checking: Option<super::check::Checking>,
    /// Tree rounds: sent (leader) and relayed (member) (`tree_round.rs`).
    pub(super) rounds: super::tree_round::Rounds,
    pub(in crate::membership) stats: QuorumStats,
}

/// Takes the open phase out of `slot` if its votes hold a quorum, clearing the re-send timer
/// (the phase is over); leaves both untouched otherwise.
fn take_if_quorum<P>(
    slot: &mut Option<P>,
    retry: &mut Option<TimerToken>,
    votes: impl Fn(&P) -> &Votes,
) -> Option<P> {
    if !slot.as_ref().is_some_and(|p| votes(p).has_quorum()) {
        return None;
    }
    *retry = None;
    slot.take()
}

impl Quorum {
    /// Fresh state for `me`: promised to the initial root's ballot, which rank 0 leads with.
    fn new(me: Rank) -> Self {
        Self {
            acceptor: Acceptor::default(),
            seen: Ballot::INITIAL,
            leading: (me == Rank(0)).then_some(Ballot::INITIAL),
            preparing: None,
            proposing: None,
            reproposal: None,
            decided: Vec::new(),
            retry: None,
            held: Vec::new(),
            recent_removals: Vec::new(),
            heard: std::collections::BTreeMap::new(),
            checking: None,
            rounds: super::tree_round::Rounds::default(),
            stats: QuorumStats::default(),
        }
    }

    /// The ballot this rank leads with, if it leads.
    pub(in crate::membership) fn leading(&self) -> Option<Ballot> {
        self.leading
    }
}

impl Membership {
    pub(super) fn quorum_mut(&mut self, me: Rank) -> &mut Quorum {
        self.quorum.get_or_insert_with(|| Box::new(Quorum::new(me)))
    }

    /// Coordinator: `n` members removed now (counted by the majority guard).
    pub(in crate::membership) fn note_removals(&mut self, ctx: &Ctx<'_>, n: usize) {
        let now = ctx.now;
        self.quorum_mut(ctx.me()).recent_removals.push((now, n));
    }

    /// Coordinator: members removed within `window` (older entries are dropped).
    pub(in crate::membership) fn recent_removals(
        &mut self,
        ctx: &Ctx<'_>,
        window: Duration,
    ) -> usize {
        let Some(q) = self.quorum.as_mut() else {
            return 0;
        };
        q.recent_removals.retain(|&(t, _)| ctx.now < t + window);
        q.recent_removals.iter().map(|&(_, k)| k).sum()
    }

    /// Agreement counters (zero until this rank's first agreement traffic).
    pub(crate) fn quorum_stats(&self) -> QuorumStats {
        self.quorum
            .as_ref()
            .map(|q| q.stats.clone())
            .unwrap_or_default()
    }

    /// Whether view changes need a quorum (`membership.quorum`).
    pub(in crate::membership) fn quorum_on(ctx: &Ctx<'_>) -> bool {
        ctx.cfg.membership.quorum
    }

    /// The weights of the previous view: its admitted members, i.e. the ranks no applied notice
    /// removed, less those still pending start-up (not admitted by a check-in notice applied
    /// here); its root is the first candidate of that view. Before any rank is admitted (no
    /// check-in notice applied yet: the coordinator that would admit them never started, or
    /// was lost first) the launch itself is the view: every expected rank not removed counts,
    /// so the ranks that did start can still remove the ones that did not.
    pub(super) fn prior_weights(&self, ctx: &Ctx<'_>) -> Weights {
        let layout = ctx.tree.layout();
        let removed = self
            .agreed
            .removed
            .iter()
            .filter(|r| layout.contains(*r))
            .count();
        let root = candidates(layout, &self.agreed.removed, 1)
            .first()
            .copied()
            .unwrap_or(Rank(0));
        // Ranks that never checked in were never members (start-up removes them).
        let pending = (0..layout.span())
            .map(Rank)
            .filter(|&r| self.is_pending(r) && !self.agreed.removed.contains(r))
            .count();
        let expected = u64::from(layout.span()).saturating_sub(removed as u64);
        let admitted = expected.saturating_sub(pending as u64);
        Weights {
            root,
            members: if admitted == 0 { expected } else { admitted },
        }
    }

    /// The members a phase's messages go to: every rank alive here but this one and `skip`.
    pub(super) fn acceptors(ctx: &Ctx<'_>, skip: &[Rank]) -> Vec<Rank> {
        let me = ctx.me();
        (0..ctx.tree.layout().span())
            .map(Rank)
            .filter(|&r| r != me && ctx.tree.is_alive(r) && !skip.contains(&r))
            .collect()
    }

    /// The members a re-sent phase message goes to: the acceptors that have not voted yet.
    fn not_voted(ctx: &Ctx<'_>, skip: &[Rank], votes: &Votes) -> Vec<Rank> {
        Self::acceptors(ctx, skip)
            .into_iter()
            .filter(|&r| !votes.has(r))
            .collect()
    }

    fn arm_retry(&mut self, ctx: &mut Ctx<'_>) {
        let me = ctx.me();
        // Two detector periods, plus up to 15 ms by rank so duelling candidates drift apart.
        let base = ctx.cfg.detect.period.as_nanos().saturating_mul(2);
        let jitter = Duration::from_millis(u64::from(me.0 % 16));
        let at = ctx.now + Duration::from_nanos(base) + jitter;
        let token = ctx.timers.set(MembershipTimer::Quorum, at);
        self.quorum_mut(me).retry = Some(token);
    }

    /// Root, quorum on, about to announce new deaths: whether it may propose now. A phase 2
    /// already open holds the next notice back; a root without a ballot runs phase 1 first; a
    /// value a promise reported accepted is proposed first (then this returns false, and the
    /// deaths wait for the next announce).
    pub(in crate::membership) fn ready_to_propose(&mut self, ctx: &mut Ctx<'_>) -> bool {
        let me = ctx.me();
        let q = self.quorum_mut(me);
        if q.proposing.is_some() || q.preparing.is_some() {
            return false;
        }
        let Some(ballot) = q.leading else {
            self.start_prepare(ctx, Vec::new());
            return false;
        };
        if let Some(v) = q.reproposal.take() {
            // `check_elected` caught this rank up to `v.epoch - 1` (the view `v.base`), so the
            // value applies to this rank's own agreed view.
            if v.epoch == self.agreed.epoch + 1 {
                self.epoch = self.epoch.max(v.epoch);
                // The notice names the base's ranks too: a member that missed the notice of
                // `v.epoch - 1` (its root was lost mid-broadcast) applies the whole view, and
                // one that has it confirms those ranks again without a second event.
                let mut failed = v.base.clone();
                failed.extend(v.removed.iter().copied());
                failed.sort_unstable();
                failed.dedup();
                let causes = vec![RemovalCause::Unresponsive; failed.len()];
                let notice = GlobalFailureMsg {
                    epoch: v.epoch,
                    failed,
                    causes,
                };
                self.propose_value(ctx, ballot, notice, v.removed);
                return false;
            }
        }
        true
    }

    /// Leader: phase 2 for `notice` at `ballot` (this rank accepts it first).
    pub(in crate::membership) fn propose(
        &mut self,
        ctx: &mut Ctx<'_>,
        ballot: Ballot,
        notice: GlobalFailureMsg,
    ) {
        let removed = notice.failed.clone();
        self.propose_value(ctx, ballot, notice, removed);
    }

    /// Leader: phase 2 for the value `removed` at `notice.epoch`, on this rank's agreed view
    /// (the base the acceptors keep with it); `notice` is broadcast once decided.
    fn propose_value(
        &mut self,
        ctx: &mut Ctx<'_>,
        ballot: Ballot,
        notice: GlobalFailureMsg,
        removed: Vec<Rank>,
    ) {
        let me = ctx.me();
        let weights = self.prior_weights(ctx);
        let layout = ctx.tree.layout();
        let q = self.quorum.get_or_insert_with(|| Box::new(Quorum::new(me)));
        let mut base: Vec<Rank> = self
            .agreed
            .removed
            .iter()
            .filter(|r| layout.contains(*r))
            .chain(q.decided.iter().copied())
            .collect();
        base.sort_unstable();
        base.dedup();
        // Ranks the base already removes (decided here, their notice not back yet) are not
        // this epoch's: the value is what the epoch adds.
        let mut removed = removed;
        removed.retain(|r| base.binary_search(r).is_err());
        let mut votes = Votes::new(weights);
        if q.acceptor
            .propose(ballot, notice.epoch, &removed, &base)
            .is_ok()
        {
            votes.add(me);
        }
        q.stats.proposals += 1;
        let m = ProposeMsg {
            ballot,
            epoch: notice.epoch,
            removed: removed.clone(),
            base: base.clone(),
        };
        q.proposing = Some(Proposing {
            ballot,
            notice,
            removed,
            base,
            votes,
            started: ctx.now,
        });
        let to = Self::acceptors(ctx, &m.removed);
        self.quorum_mut(me).rounds.resends = 0;
        self.send_round(ctx, RoundBody::Propose(m), to);
        self.arm_retry(ctx);
        self.check_decided(ctx);
    }

    /// Phase 2 reached its quorum: the notice goes out through xcast.
    fn check_decided(&mut self, ctx: &mut Ctx<'_>) {
        let me = ctx.me();
        let q = self.quorum_mut(me);
        let Some(p) = take_if_quorum(&mut q.proposing, &mut q.retry, |p| &p.votes) else {
            return;
        };
        if !ctx.tree.view().is_some_and(|v| v.is_root()) {
            // The tree changed under the proposal (this rank is no longer root): the root
            // that now is re-announces.
            q.stats.stale += 1;
            return;
        }
        q.stats.decided += 1;
        let took = ctx.now.saturating_since(p.started).as_nanos() / 1_000;
        q.stats.phase2_us_max = q.stats.phase2_us_max.max(took);
        let mut view = p.base.clone();
        view.extend(p.removed.iter().copied());
        view.sort_unstable();
        view.dedup();
        q.decided = view;
        // Decisions whose ranks this epoch (or an earlier one) carries have their quorum now.
        let held = std::mem::take(&mut q.held);
        let (ready, wait): (Vec<RemovedMsg>, Vec<RemovedMsg>) = held.into_iter().partition(|m| {
            m.ranks
                .iter()
                .all(|r| p.notice.failed.contains(r) || self.agreed.removed.contains(*r))
        });
        self.quorum_mut(me).held = wait;
        ctx.effect(Effect::RootBroadcast {
            tag: xcast::TAG_FAILURE_NOTICE,
            payload: p.notice.to_payload(),
        });
        // The ranks are dead here since the decision (the repair is done): flooded now.
        for m in ready {
            self.flood_removed(ctx, m, None);
        }
        // Deaths gathered while the phase ran go in the next notice.
        self.schedule_announce(ctx);
    }

    /// A PROMISE or ACCEPT answering phase `open` (whether it answers the phase in progress):
    /// whether it is a vote to count. A stale answer is counted as such; a refusal is counted
    /// and makes this rank step down to the ballot the member promised.
    fn answer_counts(&mut self, me: Rank, open: bool, ok: bool, promised: Ballot) -> bool {
        let q = self.quorum_mut(me);
        if !open {
            q.stats.stale += 1;
            return false;
        }
        if !ok {
            q.stats.refused += 1;
            self.step_down(me, promised);
            return false;
        }
        true
    }

    /// Stops leading or preparing: a higher ballot than this rank's was seen. An open
    /// proposal's ranks go back to unannounced.
    pub(super) fn step_down(&mut self, me: Rank, seen: Ballot) {
        let Some(q) = self.quorum.as_mut() else {
            return;
        };
        q.seen = q.seen.max(seen);
        let mine = q
            .leading
            .or(q.preparing.as_ref().map(|p| p.ballot))
            .or(q.proposing.as_ref().map(|p| p.ballot));
        if mine.is_none_or(|b| b >= seen) {
            return;
        }
        q.stats.stepped_down += 1;
        q.leading = None;
        q.preparing = None;
        q.checking = None;
        q.stats.removals_dropped += q.held.len() as u64;
        q.held.clear();
        if let Some(p) = q.proposing.take() {
            for r in &p.notice.failed {
                self.announced.remove(*r);
            }
        }
        let _ = me;
    }

    /// Candidate whose evidence no longer passes the majority guard (`alerts.rs`): its open
    /// phase 1, if any, is dropped (not yet elected: nothing was removed or promised here
    /// beyond its own acceptor's promise, which stays).
    pub(in crate::membership) fn abandon_prepare(&mut self) {
        if let Some(q) = self.quorum.as_mut() {
            if q.preparing.take().is_some() {
                q.retry = None;
            }
        }
    }

    /// Candidate: phase 1 for the cut `removed` (the candidates ahead and what is stable).
    pub(in crate::membership) fn start_prepare(&mut self, ctx: &mut Ctx<'_>, removed: Vec<Rank>) {
        let me = ctx.me();
        let weights = self.prior_weights(ctx);
        let epoch = self.agreed.epoch;
        let q = self.quorum_mut(me);
        if q.preparing.is_some() {
            return;
        }
        let ballot = Ballot::next(q.seen.max(q.acceptor.promised), me);
        q.seen = ballot;
        let mut votes = Votes::new(weights);
        let highest = match q.acceptor.prepare(ballot) {
            Ok(a) => {
                votes.add(me);
                a.cloned()
            }
            Err(_) => None,
        };
        q.stats.prepares_started += 1;
        q.leading = None;
        q.preparing = Some(Preparing {
            ballot,
            removed: removed.clone(),
            votes,
            highest,
        });
        let to = Self::acceptors(ctx, &removed);
        ctx.send_all(
            to,
            PrepareMsg {
                ballot,
                epoch,
                removed,
            },
        );
        self.arm_retry(ctx);
        self.check_elected(ctx);
    }

    /// Member: a PREPARE. Promised (with the value accepted here and this rank's standing down
    /// evidence) when its ballot is at least the one promised; refused otherwise. A rank
    /// leading or preparing with a lower ballot yields.
    pub(in crate::membership) fn on_prepare(
        &mut self,
        ctx: &mut Ctx<'_>,
        from: Rank,
        m: PrepareMsg,
    ) {
        if let Some(reply) = self.prepare_reply(ctx, from, m) {
            ctx.send(from, reply);
        }
    }

    /// This rank's answer to a PREPARE from its candidate `from` (directly, or relayed down a
    /// leader's tree round: `tree_round.rs`), `None` for a stale one.
    pub(super) fn prepare_reply(
        &mut self,
        ctx: &mut Ctx<'_>,
        from: Rank,
        m: PrepareMsg,
    ) -> Option<PromiseMsg> {
        let me = ctx.me();
        // A candidate behind this rank's agreed view prepares an instance already decided
        // here (it may itself be removed in it): nothing to promise.
        if m.ballot.rank != from || from == me || m.epoch < self.agreed.epoch {
            self.quorum_mut(me).stats.stale += 1;
            return None;
        }
        // A cut holding ranks this one hears directly (`vouch.rs`): a leader's removal check
        // (a PREPARE at the ballot this rank promised, from the rank that leads with it) is
        // refused naming them, and the leader removes none of them. Not promising is always
        // safe. A candidate's PREPARE is promised as before: it must be able to replace a
        // candidate ahead that only some members still hear (a lossy one).
        let vouched: Vec<Rank> = m
            .removed
            .iter()
            .copied()
            .filter(|&r| self.vouches(ctx, r))
            .collect();
        let promised = self.quorum_mut(me).acceptor.promised;
        // A PREPARE at the ballot promised, from its owner: a leader's removal check.
        let check = m.ballot == promised;
        let checked = if check { m.removed.clone() } else { Vec::new() };
        // A candidate that means to remove the leader this rank promised, while this rank
        // still hears that leader, is not promised either: a candidate cut off from a live
        // leader (a deaf side's, whose PREPARE queued behind the cut) is not elected at the heal
        // by the members that hear it (the sweep's seed 13). A candidate replacing a leader
        // nobody here hears (crashed, cut off, or lossy and silent for two periods) is.
        let deposes_heard = m.ballot > promised
            && m.removed.contains(&promised.rank)
            && self.vouches(ctx, promised.rank);
        // Refused naming the ranks this one hears: the leader it promised (a deposing
        // candidate), or the vouched ranks of a removal check (which echoes the cut).
        let veto = if deposes_heard {
            Some((vec![promised.rank], Vec::new()))
        } else if !vouched.is_empty() && check {
            Some((vouched, checked.clone()))
        } else {
            None
        };
        if let Some((vouched, checked)) = veto {
            self.quorum_mut(me).stats.vetoed += 1;
            return Some(PromiseMsg::refusal(m.ballot, promised, vouched, checked));
        }
        self.step_down(me, m.ballot);
        let downs: Vec<(Rank, u64)> = self
            .own
            .iter()
            .filter(|(_, &(_, down, _))| down)
            .map(|(&s, &(inc, _, _))| (s, inc))
            .take(ctx.cfg.max_list as usize)
            .collect();
        let q = self.quorum_mut(me);
        q.seen = q.seen.max(m.ballot);
        let reply = match q.acceptor.prepare(m.ballot) {
            Ok(accepted) => {
                let accepted = accepted.cloned();
                q.stats.promises_given += 1;
                PromiseMsg {
                    ballot: m.ballot,
                    ok: true,
                    promised: m.ballot,
                    accepted,
                    downs,
                    vouched: Vec::new(),
                    checked,
                }
            }
            Err(promised) => {
                q.stats.refused += 1;
                PromiseMsg::refusal(m.ballot, promised, Vec::new(), Vec::new())
            }
        };
        Some(reply)
    }

    /// Candidate: a member's answer to its PREPARE.
    pub(in crate::membership) fn on_promise(
        &mut self,
        ctx: &mut Ctx<'_>,
        from: Rank,
        m: PromiseMsg,
    ) {
        let me = ctx.me();
        if self.on_check_answer(ctx, from, &m) {
            return;
        }
        let q = self.quorum_mut(me);
        let open = q.preparing.as_ref().is_some_and(|p| p.ballot == m.ballot);
        if !self.answer_counts(me, open, m.ok, m.promised) {
            return;
        }
        let q = self.quorum_mut(me);
        if let Some(p) = q.preparing.as_mut() {
            p.votes.add(from);
            if let Some(a) = m.accepted {
                if p.highest.as_ref().is_none_or(|h| a.supersedes(h)) {
                    p.highest = Some(a);
                }
            }
        }
        // The promiser's standing evidence counts as its alerts.
        for (subject, incarnation) in m.downs {
            if ctx.tree.layout().contains(subject) {
                let p = Pending {
                    incarnation,
                    down: true,
                    hops: 0,
                    skip: 0,
                };
                self.tally(ctx, from, subject, p);
            }
        }
        self.check_elected(ctx);
    }

    /// Phase 1 reached its quorum: this rank leads. It removes its cut and whatever is stable
    /// now as one decision, told straight to every promiser as well as flooded, and proposes
    /// (once the repair makes it root) the value a promise reported accepted, if any, first.
    fn check_elected(&mut self, ctx: &mut Ctx<'_>) {
        let me = ctx.me();
        let q = self.quorum_mut(me);
        let Some(mut p) = take_if_quorum(&mut q.preparing, &mut q.retry, |p| &p.votes) else {
            return;
        };
        if !self.caught_up(ctx, &mut p) {
            return;
        }
        let q = self.quorum_mut(me);
        q.leading = Some(p.ballot);
        q.stats.elected += 1;
        let agreed = self.agreed.epoch;
        let again = p.highest.filter(|v| v.epoch > agreed);
        let mut cut: Vec<Rank> = p.removed;
        // A rank that promised is alive and reaches this one: never in the cut's additions.
        let stable: Vec<Rank> = self
            .stable_subjects(ctx)
            .into_iter()
            .filter(|&r| !p.votes.has(r))
            .collect();
        cut.extend(stable);
        if let Some(v) = &again {
            cut.extend(v.removed.iter().copied());
        }
        self.quorum_mut(me).reproposal = again;
        cut.sort_unstable();
        cut.dedup();
        cut.retain(|&r| r != me && ctx.tree.is_alive(r));
        if cut.is_empty() {
            if ctx.tree.view().is_some_and(|v| v.is_root()) {
                self.schedule_announce(ctx);
            }
            return;
        }
        for s in &cut {
            self.reports.remove(s);
        }
        let decision = self.remove(ctx, cut, RemovalCause::Unresponsive);
        // A promise quorum backs this cut: flooded now, as without quorum.
        let held = std::mem::take(&mut self.quorum_mut(me).held);
        for m in held {
            self.flood_removed(ctx, m, None);
        }
        let promisers: Vec<Rank> = p.votes.voters().filter(|&r| r != me).collect();
        ctx.send_all(promisers, decision);
    }

    /// Candidate with a promise quorum: whether it may lead now. A value reported for a later
    /// epoch than the next one here means this rank is behind: epoch `v.epoch - 1` was decided
    /// (a leader proposes epoch `e` only on its applied view of `e - 1`, which `v.base` is), so
    /// this rank applies that view first, as a delivered notice would (evicted, if it is in
    /// it), and re-proposes `v` on it. Safe: applying a decided view changes no decision, and
    /// it never goes back (the view is later than the agreed one here). The promises are then
    /// counted again under the caught-up view's weights, the ones that decided `v.epoch`
    /// would be counted under: short of a quorum there, the phase stays open (re-sent to the
    /// members that have not answered) and this rank does not lead. Bounded: each catch-up
    /// raises the agreed epoch here, and a value is kept per acceptor, not per epoch.
    fn caught_up(&mut self, ctx: &mut Ctx<'_>, p: &mut Preparing) -> bool {
        let me = ctx.me();
        let agreed = self.agreed.epoch;
        let Some(v) = p.highest.as_ref().filter(|v| v.epoch > agreed + 1) else {
            return true;
        };
        let epoch = v.epoch - 1;
        let failed: Vec<Rank> = v
            .base
            .iter()
            .copied()
            .filter(|&r| ctx.tree.layout().contains(r) && !self.agreed.removed.contains(r))
            .collect();
        let causes = vec![RemovalCause::Unresponsive; failed.len()];
        let m = GlobalFailureMsg {
            epoch,
            failed,
            causes,
        };
        self.quorum_mut(me).stats.caught_up += 1;
        self.on_global_notice(ctx, m.to_payload());
        if self.evicted {
            return false;
        }
        let mut votes = Votes::new(self.prior_weights(ctx));
        for r in p.votes.voters() {
            if !self.agreed.removed.contains(r) {
                votes.add(r);
            }
        }
        p.votes = votes;
        if p.votes.has_quorum() {
            return true;
        }
        let open = Preparing {
            ballot: p.ballot,
            removed: std::mem::take(&mut p.removed),
            votes: p.votes.clone(),
            highest: p.highest.take(),
        };
        self.quorum_mut(me).preparing = Some(open);
        self.arm_retry(ctx);
        false
    }

    /// Member: a PROPOSE. Accepted at or above the promised ballot; refused with it otherwise.
    pub(in crate::membership) fn on_propose(
        &mut self,
        ctx: &mut Ctx<'_>,
        from: Rank,
        m: ProposeMsg,
    ) {
        if let Some(reply) = self.propose_reply(ctx, from, &m) {
            ctx.send(from, reply);
        }
    }

    /// This rank's answer to a PROPOSE from its leader `from` (directly, or relayed down the
    /// leader's tree round: `tree_round.rs`), `None` for a stale one.
    pub(super) fn propose_reply(
        &mut self,
        ctx: &mut Ctx<'_>,
        from: Rank,
        m: &ProposeMsg,
    ) -> Option<AcceptMsg> {
        let me = ctx.me();
        if m.ballot.rank != from || from == me {
            self.quorum_mut(me).stats.stale += 1;
            return None;
        }
        self.step_down(me, m.ballot);
        let q = self.quorum_mut(me);
        q.seen = q.seen.max(m.ballot);
        let (ok, promised) = match q.acceptor.propose(m.ballot, m.epoch, &m.removed, &m.base) {
            Ok(()) => {
                q.stats.accepted += 1;
                (true, m.ballot)
            }
            Err(p) => {
                q.stats.refused += 1;
                (false, p)
            }
        };
        Some(AcceptMsg {
            ballot: m.ballot,
            epoch: m.epoch,
            ok,
            promised,
        })
    }

    /// Leader: a member's answer to its PROPOSE.
    pub(in crate::membership) fn on_accept(&mut self, ctx: &mut Ctx<'_>, from: Rank, m: AcceptMsg) {
        let me = ctx.me();
        let q = self.quorum_mut(me);
        let open = q
            .proposing
            .as_ref()
            .is_some_and(|p| p.ballot == m.ballot && p.notice.epoch == m.epoch);
        if !self.answer_counts(me, open, m.ok, m.promised) {
            return;
        }
        let q = self.quorum_mut(me);
        if let Some(p) = q.proposing.as_mut() {
            p.votes.add(from);
        }
        self.check_decided(ctx);
    }

    /// The last value this rank's acceptor accepted (kept after it is decided: a new leader
    /// behind on epochs learns it from the promises, ERA's re-collect).
    #[cfg(any(test, feature = "sim"))]
    pub(crate) fn quorum_accepted(&self) -> Option<super::Accepted> {
        self.quorum.as_ref()?.acceptor.accepted.clone()
    }

    /// The re-send timer: an open phase that has not reached its quorum is counted and sent
    /// again to the members that have not answered; a candidate that stepped down looks at its
    /// evidence again.
    pub(in crate::membership) fn on_quorum_timer(&mut self, ctx: &mut Ctx<'_>, token: TimerToken) {
        let me = ctx.me();
        let agreed = self.agreed.epoch;
        let q = self.quorum_mut(me);
        if q.retry != Some(token) {
            ctx.stats.stale_timers += 1;
            return;
        }
        q.retry = None;
        if let Some(p) = &q.preparing {
            q.stats.proposals_without_quorum += 1;
            let m = PrepareMsg {
                ballot: p.ballot,
                epoch: agreed,
                removed: p.removed.clone(),
            };
            let to = Self::not_voted(ctx, &m.removed, &p.votes);
            ctx.send_all(to, m);
            self.arm_retry(ctx);
        } else if let Some(p) = &q.proposing {
            q.stats.proposals_without_quorum += 1;
            let m = ProposeMsg {
                ballot: p.ballot,
                epoch: p.notice.epoch,
                removed: p.removed.clone(),
                base: p.base.clone(),
            };
            let to = Self::not_voted(ctx, &m.removed, &p.votes);
            // Down the tree again (a new round), and every second time straight to the
            // members that have not answered (a relay lost mid-round).
            q.rounds.resends += 1;
            if q.rounds.resends % 2 == 0 {
                ctx.send_all(to, m);
            } else {
                self.send_round(ctx, RoundBody::Propose(m), to);
            }
            self.arm_retry(ctx);
        } else if q.leading.is_none() {
            self.decide(ctx);
        }
    }

    /// The candidates of the view without `subject` that stand behind its coordinator and
    /// get its evidence straight (`membership.quorum_backups` of them).
    fn backups(ctx: &Ctx<'_>, subject: Rank) -> Vec<Rank> {
        let n = ctx.cfg.membership.quorum_backups as usize;
        let mut c = candidates(ctx.tree.layout(), ctx.tree.dead(), n + 2);
        c.retain(|&r| r != subject);
        c.into_iter().skip(1).take(n).collect()
    }

    /// Root, quorum on: a removal decision made here waits for its accept quorum before it is
    /// flooded (a root cut off with a minority floods nothing; the ranks are dead in its own
    /// tree only).
    pub(in crate::membership) fn hold_flood(&mut self, me: Rank, m: RemovedMsg) {
        let q = self.quorum_mut(me);
        q.stats.removals_held += 1;
        q.held.push(m);
    }

    /// Member, quorum on: whether a removal decision from `coordinator` must be ignored: this
    /// rank promised an elected leader's ballot (round past the initial one) and `coordinator`
    /// is not that leader (a deposed root, or one cut off with a minority). Counted.
    pub(in crate::membership) fn removal_from_deposed(
        &mut self,
        ctx: &Ctx<'_>,
        coordinator: Rank,
    ) -> bool {
        let Some(q) = self.quorum.as_mut() else {
            return false;
        };
        let p = q.acceptor.promised;
        if p.round == 0 || p.rank == coordinator || coordinator == ctx.me() {
            return false;
        }
        q.stats.removals_ignored += 1;
        true
    }

    /// Whether this rank is a backup candidate for evidence about `subject`.
    pub(in crate::membership) fn is_backup_for(ctx: &Ctx<'_>, subject: Rank) -> bool {
        Self::backups(ctx, subject).contains(&ctx.me())
    }

    /// Observer, quorum on: its evidence about `subject` goes straight to the backup
    /// candidates too, so a candidate behind a coordinator that is lost or cut off holds the
    /// same evidence (and is counted there if this rank is one).
    pub(in crate::membership) fn send_to_backups(
        &mut self,
        ctx: &mut Ctx<'_>,
        subject: Rank,
        p: Pending,
    ) {
        let me = ctx.me();
        let mut tallied = false;
        for b in Self::backups(ctx, subject) {
            if b == me {
                self.tally(ctx, me, subject, p);
                tallied = true;
                continue;
            }
            self.quorum_mut(me).stats.candidate_alerts_out += 1;
            ctx.send(
                b,
                AlertMsg {
                    hops: AlertMsg::MAX_HOPS,
                    entries: vec![AlertEntry {
                        subject,
                        incarnation: p.incarnation,
                        down: p.down,
                        observers: vec![me],
                    }],
                },
            );
        }
        if tallied {
            self.decide(ctx);
        }
    }

    /// A non-root coordinator, quorum on, after its tally: if it is a candidate and its stable
    /// set holds every candidate ahead of it, it starts phase 1 for that cut. It never removes
    /// anyone on its own.
    pub(in crate::membership) fn consider_candidacy(&mut self, ctx: &mut Ctx<'_>, stable: &[Rank]) {
        let me = ctx.me();
        // Evidence about each candidate ahead reaches the `quorum_backups` candidates behind
        // its coordinator (`backups`): about the root, candidates 2..=n+1; about any other
        // candidate ahead, n of the others including candidate n+1. So candidate n+1 holds
        // evidence about every one ahead and may run (a split that puts the root and the next
        // n candidates on the lighter side: the sweep's seed 17 class).
        let n = ctx.cfg.membership.quorum_backups as usize;
        let cands = candidates(ctx.tree.layout(), ctx.tree.dead(), n + 2);
        let Some(k) = cands.iter().position(|&c| c == me) else {
            return;
        };
        if k == 0 || !cands[..k].iter().all(|c| stable.contains(c)) {
            return;
        }
        if self
            .quorum
            .as_ref()
            .is_some_and(|q| q.preparing.is_some() || q.leading.is_some())
        {
            return;
        }
        let mut cut: Vec<Rank> = stable.to_vec();
        cut.sort_unstable();
        cut.dedup();
        self.start_prepare(ctx, cut);
    }
}
