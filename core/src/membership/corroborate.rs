//! One rank's word is not a verdict: a refused dial is corroborated before a removal, and a
//! coordinator accused of too much at once holds its decisions (the overload hold).
//!
//! **Refused dials** (detector on). A fresh dial refused outright usually means the process is
//! gone, but one rank's refusal can be its own trouble (an overloaded host, a full accept queue
//! at the subject, a bad route): at 2,000 processes one overloaded rank's refused dial removed
//! live ranks. So the observer does not mark the subject dead; it reports the refusal to the
//! subject's coordinator (the root of the view without the subject) at once, unbatched
//! ([`CorroborateOp::Refused`], at most one per `membership.corroborate_timeout` per subject).
//! The coordinator opens a case and corroborates fast:
//!
//! - it asks `membership.corroborate_probes` of the subject's observers (other than the ranks
//!   that reported it) to dial the subject now ([`CorroborateOp::Probe`]), and pings the subject
//!   itself ([`CorroborateOp::Ping`]) unless its own dial was the one refused;
//! - a refusal from a **second rank** (a prober's dial, the coordinator's own, or another
//!   observer's report: a killed process refuses everyone linked to it within a millisecond)
//!   decides the removal, cause [`RemovalCause::LinkLost`]: a death learned at the coordinator
//!   (the root of the view without the subject), announced in its next global notice, and at
//!   every rank that reported the refusal ([`CorroborateOp::Dead`]: they were linked to the
//!   subject, so the tree around it is repaired at once), as hard evidence always was;
//! - an answer refutes the case: the subject's [`CorroborateOp::Pong`] or a new link to it at
//!   the coordinator, or at a prober (which says so with [`CorroborateOp::Contact`]). Only an
//!   answer to a ping sent after the case opened counts, or a link made since: a frame the
//!   subject sent before it died proves nothing;
//! - neither within `membership.corroborate_timeout`: the case is dropped
//!   ([`CorroborationStats::refusals_unconfirmed`]), and the subject's observers decide on their heartbeats, as for
//!   any silent rank.
//!
//! **Not joined yet.** A refusal about a rank never heard from (an expected rank that has not
//! checked in, and whose check-in the coordinator has not heard either) opens no case: nothing
//! listens there because the process has not started, which is not a death. It is counted
//! ([`CorroborationStats::refusals_not_joined`]); start-up's bound removes a rank that never
//! comes (cause "never joined"). The root of this rank's tree is the exception: refusals
//! about a root that never started or crashed first are what lets the next candidate take
//! over (without them start-up never ends).
//!
//! **Small views.** Two ranks are needed, whatever the view: with only the coordinator and one
//! other rank besides the subject (three members), the coordinator's own dial is the second;
//! with two members the coordinator's own refused dial is all there can be, and decides.
//!
//! **Another incarnation** answering the handshake ([`LinkCause::Incarnation`]) stays a
//! verdict at once: it is not an absence of an answer that load could explain but a positive
//! answer from the rank's successor process, which exists only once the old one is gone.
//!
//! **Detector off**: nothing here runs; a lost tree link is the detector, as before.
//!
//! **Overload hold** (Lifeguard; the majority guard made stronger). Down evidence (an
//! observer's alert or a refused dial) first arriving within `membership.overload_window`
//! against more than `membership.overload_percent` of the members (and at least
//! `membership.overload_min_subjects` of them) is more likely this coordinator's own trouble or
//! the network's than that many failures. The coordinator then holds its decisions about the
//! subjects accused within the window until their evidence has stood for the whole window (a
//! real mass failure is decided one window later), or is refuted (dropped). Held subjects are
//! counted once each in [`CorroborationStats::decisions_held_overload`].
//!
//! The counters ([`CorroborationStats`], read with [`Node::corroboration_stats`]) live in the
//! corroboration state, boxed on first use like the rest of it, not inline in every node.
//!
//! Everything runs on the node's timers and the order of its inputs: no clock, no randomness.
//!
//! [`LinkCause::Incarnation`]: crate::link::LinkCause::Incarnation
//! [`Node::corroboration_stats`]: crate::Node::corroboration_stats

use std::collections::{BTreeMap, BTreeSet};

use super::{
    CorroborateMsg, CorroborateOp, CorroborationStats, Membership, MembershipTimer, RemovalCause,
};
use crate::machine::{Ctx, Effect};
use crate::time::Instant;
use crate::tree::{Rank, Scope};

/// Coordinator: one refused dial's case.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Refusal {
    /// When the first report arrived.
    first: Instant,
    /// Ranks whose dial to the subject was refused (the coordinator's own included).
    witnesses: BTreeSet<Rank>,
}

/// Corroboration state of one rank (see the module documentation).
#[derive(Debug, Default)]
pub(super) struct Corroboration {
    /// Coordinator: open cases, per subject.
    cases: BTreeMap<Rank, Refusal>,
    /// Prober: subjects a coordinator asked this rank to dial: (that coordinator, until when).
    probing: BTreeMap<Rank, (Rank, Instant)>,
    /// This rank's refused-dial reports, per subject: when last sent, and to whom.
    sent: BTreeMap<Rank, (Instant, Rank)>,
    /// Coordinator: subjects whose removal the overload hold keeps back (each counted once).
    held: BTreeSet<Rank>,
    /// Coordinator: when each subject's accusation (down evidence of any kind) first arrived;
    /// kept for `membership.overload_window`, removed subjects included, and while the
    /// evidence stands.
    accused: BTreeMap<Rank, Instant>,
    /// Coordinator: accusers whose standing down a refutation cleared (an up that cleared
    /// it: the refute hold of `alerts.rs`), with when their hold began; kept three holds
    /// long (a hold starts at most once in three per accuser).
    pub(super) discredited: BTreeMap<Rank, Instant>,
    /// This rank's counters ([`crate::Node::corroboration_stats`]): here, not inline in every
    /// node's stats. Never pruned (the state, once made, is never dropped).
    pub(super) stats: CorroborationStats,
}

impl Membership {
    /// The live set changed: a refusal reported within `membership.corroborate_timeout` to a
    /// coordinator that is no longer the subject's (it was removed: frozen, or cut off) goes to
    /// the new one.
    pub(super) fn resend_refusals(&mut self, ctx: &mut Ctx<'_>) {
        let Some(c) = self.corroboration.as_deref_mut() else {
            return;
        };
        let every = ctx.cfg.membership.corroborate_timeout;
        let moved: Vec<Rank> = c
            .sent
            .iter()
            .filter(|(&s, &(t, to))| {
                ctx.now < t + every && ctx.tree.root_without(s).is_some_and(|n| n != to)
            })
            .map(|(&s, _)| s)
            .collect();
        for &s in &moved {
            c.sent.remove(&s);
        }
        for s in moved {
            self.dial_refused(ctx, s);
        }
    }
}

impl Corroboration {
    /// Forgets what is about ranks no longer alive.
    pub(super) fn retain_alive(&mut self, alive: impl Fn(Rank) -> bool) {
        self.cases.retain(|s, _| alive(*s));
        self.probing.retain(|s, (c, _)| alive(*s) && alive(*c));
        self.sent.retain(|s, _| alive(*s));
        self.held.retain(|s| alive(*s));
    }
}

impl Membership {
    /// The corroboration state, made on first use (a rank without the detector never needs
    /// it: the node's inline size stays as it was).
    pub(super) fn corr(&mut self) -> &mut Corroboration {
        self.corroboration.get_or_insert_with(Box::default)
    }

    /// This rank's fresh dial to `peer` was refused (detector on): reported to the subject's
    /// coordinator (or, for a probe, to the coordinator that asked), never a verdict here.
    pub(super) fn dial_refused(&mut self, ctx: &mut Ctx<'_>, peer: Rank) {
        if ctx.tree.view().is_none() {
            return;
        }
        let me = ctx.me();
        let asked = self.corr().probing.remove(&peer).map(|(c, _)| c);
        let Some(coordinator) = asked.or_else(|| ctx.tree.root_without(peer)) else {
            return;
        };
        if coordinator == me {
            self.on_refused(ctx, me, peer);
            return;
        }
        let every = ctx.cfg.membership.corroborate_timeout;
        let c = self.corr();
        if asked.is_none() && c.sent.get(&peer).is_some_and(|&(t, _)| ctx.now < t + every) {
            return;
        }
        c.sent.insert(peer, (ctx.now, coordinator));
        c.stats.refusals_out += 1;
        let m = CorroborateMsg {
            op: CorroborateOp::Refused,
            subject: peer,
        };
        ctx.send(coordinator, m);
    }

    /// A corroboration message from `from`.
    pub(super) fn on_corroborate(&mut self, ctx: &mut Ctx<'_>, from: Rank, m: CorroborateMsg) {
        let me = ctx.me();
        if !ctx.cfg.detect.enabled {
            ctx.stats.membership.stale += 1;
            return;
        }
        match m.op {
            CorroborateOp::Refused => self.on_refused(ctx, from, m.subject),
            CorroborateOp::Probe => self.on_probe(ctx, from, m.subject),
            CorroborateOp::Ping if m.subject == me => {
                let pong = CorroborateMsg {
                    op: CorroborateOp::Pong,
                    subject: me,
                };
                ctx.send(from, pong);
            }
            CorroborateOp::Pong if m.subject == from => self.contact(ctx, from),
            CorroborateOp::Contact if ctx.tree.is_alive(from) => self.refute(ctx, m.subject),
            // Only a rank that reported the subject refused hears the verdict.
            CorroborateOp::Dead if self.corr().sent.contains_key(&m.subject) => {
                self.corr().sent.remove(&m.subject);
                ctx.effect(Effect::Deaths {
                    ranks: vec![m.subject],
                    scope: Scope::Local,
                });
            }
            _ => ctx.stats.membership.stale += 1,
        }
    }

    /// `peer` answered, or a link to it came up: it is alive now. A coordinator's case about
    /// it is refuted; a prober tells the coordinator that asked.
    pub(super) fn contact(&mut self, ctx: &mut Ctx<'_>, peer: Rank) {
        self.refute(ctx, peer);
        if let Some((coordinator, until)) = self.corr().probing.remove(&peer) {
            if ctx.now < until && coordinator != ctx.me() {
                let m = CorroborateMsg {
                    op: CorroborateOp::Contact,
                    subject: peer,
                };
                ctx.send(coordinator, m);
            }
        }
    }

    /// Coordinator: drops the case about `subject`, refuted.
    fn refute(&mut self, ctx: &mut Ctx<'_>, subject: Rank) {
        let c = self.corr();
        if c.cases.remove(&subject).is_some() {
            c.held.remove(&subject);
            c.stats.refusals_refuted += 1;
            ctx.timers.cancel(MembershipTimer::Corroborate(subject));
        }
    }

    /// Coordinator: `witness`'s dial to `subject` was refused (`witness` may be this rank).
    fn on_refused(&mut self, ctx: &mut Ctx<'_>, witness: Rank, subject: Rank) {
        self.corr().stats.refusals_in += 1;
        let me = ctx.me();
        // About a rank dead here already: its reporter is told (it was linked to it).
        if !ctx.tree.is_alive(subject) && ctx.tree.is_alive(witness) && witness != me {
            let m = CorroborateMsg {
                op: CorroborateOp::Dead,
                subject,
            };
            ctx.send(witness, m);
            return;
        }
        if !ctx.tree.is_alive(subject)
            || !ctx.tree.is_alive(witness)
            || ctx.tree.root_without(subject) != Some(me)
        {
            ctx.stats.membership.stale += 1;
            return;
        }
        // Not joined yet is not dead (#21): nothing listens at a rank that has not started,
        // and a launcher may start it late (under a parent a grow admitted meanwhile, which
        // dialled it first). Start-up's bound decides about ranks that never come.
        // The root of this rank's tree is the exception: it is the coordinator every rank
        // dials first, and a root that never started (or crashed before it was heard) is
        // exactly what the refusals must prove for the next candidate to take over.
        if self.never_heard_from(subject) && Self::coordinator(ctx) != Some(subject) {
            self.corr().stats.refusals_not_joined += 1;
            return;
        }
        let now = ctx.now;
        self.accuse(now, subject);
        let fresh = !self.corr().cases.contains_key(&subject);
        self.corr()
            .cases
            .entry(subject)
            .or_insert_with(|| Refusal {
                first: now,
                witnesses: BTreeSet::new(),
            })
            .witnesses
            .insert(witness);
        if fresh {
            let at = now + ctx.cfg.membership.corroborate_timeout;
            ctx.timers.set(MembershipTimer::Corroborate(subject), at);
            self.ask_probes(ctx, subject);
        }
        self.settle_refusal(ctx, subject);
    }

    /// Coordinator: asks the subject's observers that did not report it to dial it now, and
    /// pings it itself unless its own dial was the one refused.
    fn ask_probes(&mut self, ctx: &mut Ctx<'_>, subject: Rank) {
        let me = ctx.me();
        let Some(case) = self.corr().cases.get(&subject) else {
            return;
        };
        let witnesses = case.witnesses.clone();
        let n = ctx.cfg.membership.corroborate_probes as usize;
        let probers: Vec<Rank> = self
            .observers_of(ctx, subject)
            .iter()
            .copied()
            .filter(|&o| o != me && o != subject && !witnesses.contains(&o))
            .filter(|&o| ctx.tree.is_alive(o))
            .take(n)
            .collect();
        let probe = CorroborateMsg {
            op: CorroborateOp::Probe,
            subject,
        };
        for p in probers {
            self.corr().stats.probes_out += 1;
            ctx.send(p, probe.clone());
        }
        if !witnesses.contains(&me) {
            let ping = CorroborateMsg {
                op: CorroborateOp::Ping,
                subject,
            };
            ctx.send(subject, ping);
        }
    }

    /// Prober: the coordinator `from` asks this rank to dial `subject` now.
    fn on_probe(&mut self, ctx: &mut Ctx<'_>, from: Rank, subject: Rank) {
        if subject == ctx.me() || !ctx.tree.is_alive(subject) {
            ctx.stats.membership.stale += 1;
            return;
        }
        let until = ctx.now + ctx.cfg.membership.corroborate_timeout;
        self.corr().probing.insert(subject, (from, until));
        let ping = CorroborateMsg {
            op: CorroborateOp::Ping,
            subject,
        };
        ctx.send(subject, ping);
    }

    /// Coordinator: removes `subject` once two ranks' dials were refused (one, when the view
    /// holds only this coordinator besides it), unless the overload hold keeps it back.
    fn settle_refusal(&mut self, ctx: &mut Ctx<'_>, subject: Rank) {
        let Some(case) = self.corr().cases.get(&subject) else {
            return;
        };
        let members = ctx.tree.layout().span() as usize - ctx.tree.dead().len();
        let needed = members.saturating_sub(1).clamp(1, 2);
        if case.witnesses.len() < needed {
            return;
        }
        if let Some(at) = self.overload_holds(ctx, subject) {
            ctx.timers.set(MembershipTimer::Corroborate(subject), at);
            return;
        }
        let witnesses = self
            .corr()
            .cases
            .remove(&subject)
            .map(|c| c.witnesses)
            .unwrap_or_default();
        self.corr().held.remove(&subject);
        ctx.timers.cancel(MembershipTimer::Corroborate(subject));
        // The ranks that reported it were linked to it: they repair around it at once, as
        // they did when a refused dial was a verdict.
        let me = ctx.me();
        let dead = CorroborateMsg {
            op: CorroborateOp::Dead,
            subject,
        };
        ctx.send_all(witnesses.into_iter().filter(|&w| w != me), dead);
        // Its soft evidence is moot too.
        self.reports.remove(&subject);
        // A death learned here, as hard evidence always was: this coordinator is the root of
        // the view without the subject, so it announces it in the next global notice. No
        // decision flood: the ranks linked to a killed process saw their own dials refused and
        // are told above (later reporters when their report arrives), so the tree around it
        // is repaired where it matters, and the coordinator's links carry only the notice.
        self.note_removals(ctx, 1);
        ctx.stats.membership.removed_on_evidence += 1;
        self.causes.insert(subject, RemovalCause::LinkLost);
        ctx.effect(Effect::Deaths {
            ranks: vec![subject],
            scope: Scope::Local,
        });
    }

    /// A case's timer: the overload hold ended (settle it), or the case was neither
    /// corroborated nor refuted in time (drop it: the observers decide).
    pub(super) fn on_corroborate_timer(&mut self, ctx: &mut Ctx<'_>, subject: Rank) {
        let Some(case) = self.corr().cases.get(&subject) else {
            return;
        };
        let members = ctx.tree.layout().span() as usize - ctx.tree.dead().len();
        if case.witnesses.len() >= members.saturating_sub(1).clamp(1, 2) {
            self.settle_refusal(ctx, subject);
            return;
        }
        let due = case.first + ctx.cfg.membership.corroborate_timeout;
        if ctx.now < due {
            ctx.timers.set(MembershipTimer::Corroborate(subject), due);
            return;
        }
        let c = self.corr();
        c.cases.remove(&subject);
        c.held.remove(&subject);
        c.stats.refusals_unconfirmed += 1;
    }

    /// Coordinator: down evidence about `subject` arrived (the overload hold counts it).
    pub(super) fn accuse(&mut self, now: Instant, subject: Rank) {
        self.corr().accused.entry(subject).or_insert(now);
    }

    /// The overload hold: when the decision about `subject` may be made, if it must wait
    /// (counted once per subject). Evidence that stood for `membership.overload_window` since
    /// the subject was first accused is never held.
    pub(super) fn overload_holds(&mut self, ctx: &mut Ctx<'_>, subject: Rank) -> Option<Instant> {
        let first = self.corr().accused.get(&subject).copied()?;
        let release = first + ctx.cfg.membership.overload_window;
        if ctx.now >= release || !self.overloaded(ctx) {
            return None;
        }
        let c = self.corr();
        if c.held.insert(subject) {
            c.stats.decisions_held_overload += 1;
        }
        Some(release)
    }

    /// Whether down evidence first arrived within `membership.overload_window` against more
    /// than `membership.overload_percent` of the members (those removed since included), and
    /// at least `membership.overload_min_subjects` of them. Forgets accusations older than
    /// the window that no longer stand.
    pub(super) fn overloaded(&mut self, ctx: &Ctx<'_>) -> bool {
        let m = &ctx.cfg.membership;
        let (now, window) = (ctx.now, m.overload_window);
        let c = self.corroboration.get_or_insert_with(Box::default);
        let reports = &self.reports;
        let cases = &c.cases;
        let standing =
            |s: &Rank| cases.contains_key(s) || reports.get(s).is_some_and(|r| r.downs() > 0);
        let accused = &mut c.accused;
        accused.retain(|s, t| now < *t + window || standing(s));
        let (mut n, mut gone) = (0u64, 0u64);
        for (&s, &t) in accused.iter() {
            if now < t + window {
                n += 1;
                gone += u64::from(!ctx.tree.is_alive(s));
            }
        }
        let members = ctx.tree.layout().span() as u64 - ctx.tree.dead().len() as u64 + gone;
        n >= u64::from(m.overload_min_subjects) && n * 100 > members * u64::from(m.overload_percent)
    }

    /// Forgets overload holds of subjects no longer accused.
    pub(super) fn release_unaccused(&mut self) {
        let Some(c) = self.corroboration.as_deref_mut() else {
            return;
        };
        let reports = &self.reports;
        let cases = &c.cases;
        c.held
            .retain(|s| cases.contains_key(s) || reports.get(s).is_some_and(|r| r.downs() > 0));
    }
}
