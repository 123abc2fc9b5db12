//! The leader's removal check (quorum views on; issue #23, the partition sweep's wrongful
//! removals): before a root removes ranks on soft evidence (the observers' H of K), it asks the
//! members whether any of them hears one of those ranks directly (`vouch.rs`), and removes
//! only the ranks nobody who answered vouches for, once members holding more than half of the
//! view's weight answered. Nothing is removed, repaired or proposed before that.
//!
//! The question is a PREPARE at the ballot the root leads with, carrying the ranks: to an
//! acceptor that promised that ballot it is a repeated phase 1 (answered with a promise, which
//! changes nothing), unless it vouches for some of the ranks: then it refuses, naming them
//! (`PromiseMsg::vouched`). An acceptor that promised a higher ballot refuses with it, and the
//! root steps down, as for any phase. So the check costs one round trip; it goes down the
//! root's tree and its answers come back merged (`tree_round.rs`), each still one member's.
//!
//! Why: on the side of a one-way cut that hears everyone, the deaf side's accusations of live
//! ranks reach the root (each accused observer counting as an implicit reporter against the
//! next makes them stable), and the root, which does not hear those ranks itself, removed them
//! from its tree and proposed; its side's acceptors accepted, and the deaf side's completed the
//! quorum at the heal (the sweep's seeds 111, 532). The members of the side that hears are the
//! ranks' observers and tree neighbours: they hear them, and say so.
//!
//! A real failure is not vouched for (nobody hears a crashed or stopped rank for the vouch
//! window before its removal is decided), so it is removed one round trip later than before;
//! hard evidence (a refused dial corroborated, `corroborate.rs`) does not pass through here.
//! A rank vouched for has its evidence dropped at the root: it is removed only on fresh
//! evidence that nobody contradicts. A root cut off with a minority never gets its answers, as
//! it never got its accepts; the check is started again, with whatever is stable then, when it
//! is two detector periods old and its answers have stopped coming (`Checking::fresh`).

use std::collections::{BTreeMap, BTreeSet};

use super::{PrepareMsg, PromiseMsg, Votes};
use crate::machine::Ctx;
use crate::membership::{Membership, RemovalCause};
use crate::time::{Duration, Instant};
use crate::tree::Rank;

/// A removal check in progress at the leader.
#[derive(Debug)]
pub(super) struct Checking {
    /// Per rank it means to remove: the members that answered a check holding it without
    /// vouching for it (the leader itself first).
    votes: BTreeMap<Rank, Votes>,
    /// The ranks some member vouched for.
    vouched: BTreeSet<Rank>,
    /// When it was (last) sent: answers older than two detector periods are not trusted.
    since: Instant,
    /// When its last answer came (when it was first sent, before any): a check whose answers
    /// are still coming in is a slow round, not a lost one.
    answered: Instant,
    /// When it was first sent (for `QuorumStats::check_us_max`).
    started: Instant,
}

impl Checking {
    /// Whether its answers are still trusted at `now`: it was sent less than `fresh_for` (two
    /// detector periods) ago, or answers are still coming in (one within the last `period`)
    /// and it is less than twice that old. A lossy root's check, whose answers stopped, starts
    /// over after two periods, as before; a slow round under load (a tree round of 2,000 ranks
    /// on a saturated host took up to 294 ms, past two periods) is no longer thrown away and
    /// restarted for ever while its answers arrive (the device's 2,000-process run: 15 of the
    /// root's 20 checks expired, the paused rank never removed).
    fn fresh(&self, now: Instant, fresh_for: Duration, period: Duration) -> bool {
        now < self.since + fresh_for
            || (now < self.answered + period && now < self.since + fresh_for + fresh_for)
    }
}

impl Membership {
    /// Root, quorum on: `subjects` are stable on soft evidence (and passed the majority
    /// guard). Each is removed once members holding more than half of the view's weight
    /// answered a check holding it and none vouched for it. New subjects join the check in
    /// progress (asked again with all of them); a check two detector periods old starts over
    /// (its answers may be stale) unless its answers are still coming in (`Checking::fresh`).
    /// A root without a ballot runs phase 1 first (the subjects' evidence stands meanwhile).
    pub(in crate::membership) fn check_removal(&mut self, ctx: &mut Ctx<'_>, subjects: Vec<Rank>) {
        let me = ctx.me();
        let fresh_for = Duration::from_nanos(ctx.cfg.detect.period.as_nanos().saturating_mul(2));
        let weights = self.prior_weights(ctx);
        let q = self.quorum_mut(me);
        let Some(ballot) = q.leading() else {
            // (A phase 1 already open is left to run.)
            self.start_prepare(ctx, Vec::new());
            return;
        };
        let now = ctx.now;
        let fresh = q
            .checking
            .as_ref()
            .is_some_and(|c| c.fresh(now, fresh_for, ctx.cfg.detect.period));
        if !fresh && q.checking.take().is_some() {
            q.stats.checks_expired += 1;
        }
        let c = q.checking.get_or_insert_with(|| Checking {
            votes: BTreeMap::new(),
            vouched: BTreeSet::new(),
            since: now,
            answered: now,
            started: now,
        });
        let mut new = false;
        for &s in &subjects {
            if s != me && !c.vouched.contains(&s) && !c.votes.contains_key(&s) {
                let mut v = Votes::new(weights);
                v.add(me);
                c.votes.insert(s, v);
                new = true;
            }
        }
        if !new {
            return;
        }
        c.since = now;
        let asked: Vec<Rank> = c.votes.keys().copied().collect();
        q.stats.checks += 1;
        let epoch = self.agreed.epoch;
        let to = Self::acceptors(ctx, &asked);
        let m = PrepareMsg {
            ballot,
            epoch,
            removed: asked,
        };
        self.send_round(ctx, super::RoundBody::Check(m), to);
        self.check_done(ctx);
    }

    /// An answer to a PREPARE: whether it answers this leader's removal check (and was taken).
    pub(super) fn on_check_answer(
        &mut self,
        ctx: &mut Ctx<'_>,
        from: Rank,
        m: &PromiseMsg,
    ) -> bool {
        let me = ctx.me();
        let q = self.quorum_mut(me);
        if q.leading() != Some(m.ballot) || q.checking.is_none() {
            return false;
        }
        if !m.ok && m.promised > m.ballot {
            // Promised a higher ballot: this rank no longer leads.
            q.checking = None;
            q.stats.refused += 1;
            self.step_down(me, m.promised);
            return true;
        }
        if let Some(c) = q.checking.as_mut() {
            c.answered = ctx.now;
            for v in &m.vouched {
                c.votes.remove(v);
                c.vouched.insert(*v);
            }
            for s in &m.checked {
                if !m.vouched.contains(s) {
                    if let Some(v) = c.votes.get_mut(s) {
                        v.add(from);
                    }
                }
            }
        }
        self.check_done(ctx);
        true
    }

    /// Every rank of the check is vouched for or has its answers from more than half the
    /// weight: the latter (still alive here) are removed as one decision; those vouched for
    /// lose their evidence (they are removed only on fresh evidence nobody contradicts).
    fn check_done(&mut self, ctx: &mut Ctx<'_>) {
        let me = ctx.me();
        let q = self.quorum_mut(me);
        if !q
            .checking
            .as_ref()
            .is_some_and(|c| c.votes.values().all(Votes::has_quorum))
        {
            return;
        }
        let Some(c) = q.checking.take() else {
            return;
        };
        let took = ctx.now.saturating_since(c.started).as_nanos() / 1_000;
        q.stats.check_us_max = q.stats.check_us_max.max(took);
        q.stats.vouched_kept += c.vouched.len() as u64;
        for v in &c.vouched {
            self.reports.remove(v);
        }
        let gone: Vec<Rank> = c
            .votes
            .into_keys()
            .filter(|s| ctx.tree.is_alive(*s))
            .collect();
        if gone.is_empty() || !ctx.tree.view().is_some_and(|v| v.is_root()) {
            return;
        }
        for s in &gone {
            self.reports.remove(s);
        }
        self.remove(ctx, gone, RemovalCause::Unresponsive);
    }
}
