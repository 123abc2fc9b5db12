//! Heartbeat failure detector (SWIM/Lifeguard-style, on the control class).
//!
//! Every member is watched by up to K observers chosen on pseudo-random rings (`rings`), not
//! by its tree neighbours, so one observer's view of one link decides nothing. Each member
//! heartbeats its observers every `detect.period`; each observer keeps one typed timer per
//! subject (`DetectTimer::Silent(rank)`), re-armed by every heartbeat. A subject silent for
//! `detect.timeout` is suspected ([`DetectEvent::Suspect`]) and told so ([`SuspectMsg`]); it
//! refutes by raising its incarnation and heartbeating at once ([`DetectEvent::Refuted`]). A
//! suspicion that stands for `detect.refute` is soft evidence ([`DetectEvent::Unresponsive`]).
//!
//! **Self-freeze guard.** A timer that fires more than one period late means *this* rank was
//! frozen (SIGSTOP, a long GC, a swapped-out host, a starved CPU): the silence it slept through
//! is its own. It accuses nobody for that stretch: every subject's silence clock (and a
//! suspect's refutation window) is moved on by the time this rank slept, with at least one
//! period left to read what queued meanwhile. Silence while it was awake still counts, so a
//! rank frozen again and again (a loaded host, whose timers run late every few rounds) accuses
//! a silent subject late, never not at all. (Restarting every subject's timeout from zero, as
//! this guard once did, let intermittent freezes postpone detection for as long as they
//! recurred: a starved observer of a partitioned rank never suspected it.)
//!
//! **Local health awareness** (Lifeguard's LHM). A rank whose own links or scheduling are sick
//! (a lossy interface, an overloaded host) sees its subjects' heartbeats late and would accuse
//! healthy ranks. It keeps a local health score, raised (at most one point per heartbeat
//! round) by evidence of its own trouble: two of its observers suspecting it within one
//! `detect.timeout` (one sick observer's suspicion alone is no evidence: a healthy subject of
//! a sick observer must not slow down), or its heartbeat timer firing more than half a period
//! late two rounds in a row (an overloaded host; one late round is a blip, and a freeze is the
//! guard's); and lowered by one point every `detect.health_recover` healthy rounds. Its silence
//! timeout and refutation window are multiplied by 1 + score (at most `detect.health_max`),
//! also for timers already armed when the score rises: a sick observer puts off its
//! accusations, and the healthy observers of a subject decide.
//!
//! Evidence here is advisory: nothing in this machine repairs the tree or evicts anyone.
//! Membership (alerts up the tree to the coordinator, H of K observers, agreed views) consumes
//! it.
//! Off by default (`detect.enabled`): when off it sends nothing and arms nothing.

use std::collections::BTreeMap;

use crate::machine::{Ctx, Effect, Machine, MembersChange};
use crate::time::Instant;
use crate::timer::TimerToken;
use crate::tree::Rank;

mod config;
mod event;
pub(crate) mod rings;
mod stats;
mod switch;
#[cfg(test)]
mod tests;
mod timer;
mod wire;

pub use config::{DetectConfig, MAX_HEALTH_MULTIPLIER, MAX_OBSERVERS};
pub use event::DetectEvent;
pub use stats::DetectStats;
pub use timer::DetectTimer;
pub use wire::{DetectMsg, HeartbeatMsg, SuspectMsg};

use rings::LiveRings;
pub(crate) use switch::Detector;

/// What an observer knows of one subject.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Watch {
    /// Highest incarnation heard from the subject.
    incarnation: u64,
    /// When its pending timer is due: the silence timer, or the refutation timer while
    /// suspected.
    deadline: Instant,
    /// When its silence began (the last heartbeat that re-armed it, or the start of watching).
    heard: Instant,
    /// Suspected as this incarnation, since this time.
    suspected: Option<(u64, Instant)>,
    /// The suspicion outlived the refutation window: an alert stands (re-sent every period).
    alerted: bool,
    /// A heartbeat from the subject arrived since watching began (before that, the start-up
    /// grace applies).
    met: bool,
}

/// Detector state of one rank.
#[derive(Debug)]
pub(crate) struct Detect {
    enabled: bool,
    /// This rank's incarnation (raised to refute a suspicion).
    incarnation: u64,
    seq: u64,
    /// Observers and subjects, kept across changes of the live set.
    rings: LiveRings,
    /// Per-subject state, one entry per current subject.
    watching: BTreeMap<Rank, Watch>,
    /// When the next heartbeat round was due.
    beat_due: Option<Instant>,
    /// The end of the last freeze credited to the subjects' silence ([`Detect::thaw`]): a later
    /// late timer credits only the stretch after it.
    thawed: Instant,
    /// The (suspected, watching) counts last reported ([`Effect::Reachability`]).
    reported: (u32, u32),
    /// Local health awareness.
    health: Health,
    /// When the node started (the start-up grace counts from here).
    started: Instant,
    /// The span this rank last saw, and the grows since (first rank past the old span, when):
    /// a joiner's grace (`detect.join_grace`) counts from the view that admitted it.
    span_seen: u32,
    grows: Vec<(Rank, Instant)>,
    /// A shrink target in leaving mode: it sends no refutations.
    pub(super) leaving: bool,
}

/// Local health awareness (Lifeguard's LHM): how much evidence this rank has of its own
/// trouble. Its timeouts scale with `1 + score`.
#[derive(Debug, Default)]
struct Health {
    /// 0..`detect.health_max`.
    score: u32,
    /// Evidence already counted in this heartbeat round (one point per round at most).
    raised: bool,
    /// Consecutive rounds without evidence since the score last changed.
    healthy_rounds: u32,
    /// The last heartbeat round started late.
    late: bool,
    /// Observers that suspected this rank lately, and when (at most one entry per observer;
    /// older than `detect.timeout` is forgotten).
    suspected_by: BTreeMap<Rank, Instant>,
}

impl Detect {
    /// This rank's observers (it heartbeats them), ascending.
    pub(crate) fn observers(&self) -> impl Iterator<Item = Rank> + '_ {
        self.rings.get().observers.iter().copied()
    }

    /// This rank's subjects (it watches them), ascending.
    pub(crate) fn subjects(&self) -> impl Iterator<Item = Rank> + '_ {
        self.rings.get().subjects.iter().copied()
    }

    fn heartbeat_all(&mut self, ctx: &mut Ctx<'_>) {
        self.seq += 1;
        let m = HeartbeatMsg {
            incarnation: self.incarnation,
            seq: self.seq,
        };
        let observers: Vec<Rank> = self.observers().collect();
        for o in observers {
            ctx.stats.detect.heartbeats_out += 1;
            ctx.send(o, m.clone());
        }
    }

    /// Arms the next heartbeat round: one period from now, or with `detect.beat_grid` the
    /// first multiple of the period (counted from `Instant::ZERO`) after now, so that
    /// processes whose clocks share an origin heartbeat in the same instants.
    fn arm_beat(&mut self, ctx: &mut Ctx<'_>) {
        let period = ctx.cfg.detect.period;
        let at = if ctx.cfg.detect.beat_grid {
            next_grid_point(ctx.now, period)
        } else {
            ctx.now + period
        };
        self.beat_due = Some(at);
        ctx.timers.set(DetectTimer::Beat, at);
    }

    /// The local health score (0 when healthy).
    #[cfg(test)]
    pub(crate) fn health_score(&self) -> u32 {
        self.health.score
    }

    /// `d` scaled by the local health multiplier, 1 + score.
    fn scaled(&self, d: crate::time::Duration) -> crate::time::Duration {
        d.saturating_mul(u64::from(self.health.score) + 1)
    }

    /// Evidence of this rank's own trouble: one more point, unless this round already gave
    /// one or the score is at its cap.
    fn raise_health(&mut self, ctx: &mut Ctx<'_>) {
        let h = &mut self.health;
        h.healthy_rounds = 0;
        if std::mem::replace(&mut h.raised, true) {
            return;
        }
        if h.score + 1 < ctx.cfg.detect.health_max {
            h.score += 1;
            ctx.stats.detect.health_raised += 1;
        }
    }

    /// A heartbeat round ended: a round without evidence counts towards recovery.
    fn end_health_round(&mut self, ctx: &mut Ctx<'_>) {
        let h = &mut self.health;
        if std::mem::take(&mut h.raised) {
            return;
        }
        if h.score == 0 {
            h.healthy_rounds = 0;
            return;
        }
        h.healthy_rounds += 1;
        if h.healthy_rounds >= ctx.cfg.detect.health_recover {
            h.healthy_rounds = 0;
            h.score -= 1;
            ctx.stats.detect.health_lowered += 1;
        }
    }

    /// Gives `subject` a fresh silence deadline from now (and clears any suspicion).
    fn rearm(&mut self, ctx: &mut Ctx<'_>, subject: Rank) {
        let at = ctx.now + self.scaled(ctx.cfg.detect.timeout);
        if let Some(w) = self.watching.get_mut(&subject) {
            w.deadline = at;
            w.heard = ctx.now;
            w.suspected = None;
            w.alerted = false;
        }
        ctx.timers.cancel(DetectTimer::Refute(subject));
        ctx.timers.set(DetectTimer::Silent(subject), at);
    }

    /// Whether a timer due at `due` fired so late that this rank itself was frozen.
    fn was_frozen(ctx: &Ctx<'_>, due: Instant) -> bool {
        ctx.now - due > ctx.cfg.detect.period
    }

    /// This rank was frozen: a timer due at `due` fired only now. The stretch since `due`
    /// (less any part an earlier late timer credited already) is not the subjects' silence:
    /// every subject's silence clock, and a suspect's refutation window, moves on by it, and
    /// no deadline falls sooner than one period from now (time to read the heartbeats that
    /// queued while this rank slept). Standing alerts are untouched (they are re-sent every
    /// period). Counted in `self_freeze_skips`.
    fn thaw(&mut self, ctx: &mut Ctx<'_>, due: Instant) {
        ctx.stats.detect.self_freeze_skips += 1;
        let now = ctx.now;
        let credit = now.saturating_since(due.max(self.thawed));
        self.thawed = now;
        let floor = now + ctx.cfg.detect.period;
        let timeout = self.scaled(ctx.cfg.detect.timeout);
        let refute = self.scaled(ctx.cfg.detect.refute);
        let mut timers = Vec::with_capacity(self.watching.len());
        for (&s, w) in self.watching.iter_mut() {
            if w.alerted {
                continue;
            }
            let (at, timer) = match w.suspected {
                None => {
                    w.heard = (w.heard + credit).min(now);
                    ((w.heard + timeout).max(floor), DetectTimer::Silent(s))
                }
                Some((inc, since)) => {
                    let since = (since + credit).min(now);
                    w.suspected = Some((inc, since));
                    ((since + refute).max(floor), DetectTimer::Refute(s))
                }
            };
            w.deadline = at;
            timers.push((timer, at));
        }
        for (timer, at) in timers {
            ctx.timers.set(timer, at);
        }
    }

    /// Recomputes observers and subjects for the current view; new subjects get a fresh
    /// deadline, former ones lose their state and timers.
    fn recompute(&mut self, ctx: &mut Ctx<'_>) {
        if !self.enabled {
            return;
        }
        if ctx.tree.view().is_none() {
            // This rank is dead: it watches nobody and heartbeats nobody.
            self.rings.clear();
        } else {
            let cfg = &ctx.cfg.detect;
            self.rings.update(ctx.tree, cfg.ring_seed, cfg.observers);
        }
        let rings = self.rings.get();
        let gone: Vec<Rank> = self
            .watching
            .keys()
            .copied()
            .filter(|r| !rings.subjects.contains(r))
            .collect();
        for r in gone {
            self.watching.remove(&r);
            ctx.timers.cancel(DetectTimer::Silent(r));
            ctx.timers.cancel(DetectTimer::Refute(r));
        }
        let new: Vec<Rank> = rings
            .subjects
            .iter()
            .copied()
            .filter(|r| !self.watching.contains_key(r))
            .collect();
        for r in new {
            self.watching.insert(
                r,
                Watch {
                    incarnation: 0,
                    deadline: ctx.now,
                    heard: ctx.now,
                    suspected: None,
                    alerted: false,
                    met: false,
                },
            );
            self.rearm(ctx, r);
        }
        if self.rings.get().observers.is_empty() && self.watching.is_empty() {
            ctx.timers.cancel(DetectTimer::Beat);
            self.beat_due = None;
        } else if self.beat_due.is_none() {
            self.arm_beat(ctx);
        }
    }

    fn on_heartbeat(&mut self, ctx: &mut Ctx<'_>, from: Rank, m: HeartbeatMsg) {
        let Some(w) = self.watching.get_mut(&from) else {
            ctx.stats.detect.stale += 1;
            return;
        };
        ctx.stats.detect.heartbeats_in += 1;
        w.met = true;
        let (suspected, alerted) = (w.suspected, w.alerted);
        w.incarnation = w.incarnation.max(m.incarnation);
        match suspected {
            // Only a higher incarnation refutes: a heartbeat sent before the subject heard of
            // the suspicion says nothing about whether it is still alive.
            Some((inc, _)) if m.incarnation <= inc => {}
            Some(_) => {
                ctx.stats.detect.refuted += 1;
                ctx.event(DetectEvent::Refuted {
                    rank: from,
                    incarnation: m.incarnation,
                });
                if alerted {
                    ctx.effect(Effect::Alert {
                        subject: from,
                        incarnation: m.incarnation,
                        down: false,
                    });
                }
                self.rearm(ctx, from);
            }
            None => self.rearm(ctx, from),
        }
    }

    fn on_suspect(&mut self, ctx: &mut Ctx<'_>, from: Rank, m: SuspectMsg) {
        if m.subject != ctx.me() {
            ctx.stats.detect.stale += 1;
            return;
        }
        if self.rings.get().observers.contains(&from) {
            // Two observers suspecting this rank at about the same time: the trouble is more
            // likely here than at both of them.
            let window = ctx.cfg.detect.timeout;
            let now = ctx.now;
            let h = &mut self.health;
            h.suspected_by.retain(|_, t| now < *t + window);
            let corroborated = h.suspected_by.keys().any(|o| *o != from);
            h.suspected_by.insert(from, now);
            if corroborated {
                self.raise_health(ctx);
            }
        }
        if m.incarnation >= self.incarnation && !self.leaving {
            self.incarnation = m.incarnation + 1;
            ctx.stats.detect.self_refutations += 1;
            self.heartbeat_all(ctx);
        }
    }

    fn on_silent(&mut self, ctx: &mut Ctx<'_>, subject: Rank) {
        let Some(w) = self.watching.get(&subject).copied() else {
            ctx.stats.stale_timers += 1;
            return;
        };
        if Self::was_frozen(ctx, w.deadline) {
            self.thaw(ctx, w.deadline);
            return;
        }
        // Never heard from, within the start-up grace (or, for a joiner, the join grace since
        // the view that admitted it): not started yet is not dead.
        let mut grace_end = self.started + ctx.cfg.detect.startup_grace;
        if let Some(&(_, at)) = self.grows.iter().rev().find(|(first, _)| *first <= subject) {
            grace_end = grace_end.max(at + ctx.cfg.detect.join_grace);
        }
        if !w.met && ctx.now < grace_end {
            ctx.stats.detect.startup_holds += 1;
            self.hold(ctx, subject, grace_end, DetectTimer::Silent(subject));
            return;
        }
        // The score rose since the timer was armed: the longer timeout applies.
        let due = w.heard + self.scaled(ctx.cfg.detect.timeout);
        if ctx.now < due {
            ctx.stats.detect.health_held += 1;
            self.hold(ctx, subject, due, DetectTimer::Silent(subject));
            return;
        }
        ctx.stats.detect.suspicions += 1;
        let at = ctx.now + self.scaled(ctx.cfg.detect.refute);
        if let Some(w) = self.watching.get_mut(&subject) {
            w.suspected = Some((w.incarnation, ctx.now));
            w.deadline = at;
        }
        ctx.event(DetectEvent::Suspect {
            rank: subject,
            incarnation: w.incarnation,
        });
        ctx.send(
            subject,
            SuspectMsg {
                subject,
                incarnation: w.incarnation,
            },
        );
        ctx.timers.set(DetectTimer::Refute(subject), at);
    }

    /// Moves `subject`'s pending timer to `at` (its timeout grew with the health score).
    fn hold(&mut self, ctx: &mut Ctx<'_>, subject: Rank, at: Instant, timer: DetectTimer) {
        if let Some(w) = self.watching.get_mut(&subject) {
            w.deadline = at;
        }
        ctx.timers.set(timer, at);
    }

    /// The refutation window ended with the suspicion standing: soft evidence, sent to the
    /// coordinator as an alert and re-sent every period until the subject leaves the view
    /// (a lost alert, or one held by a coordinator that died, is sent again). The suspicion
    /// notice goes again with it: one lost with a connection (a cut that outlived the link)
    /// would otherwise leave a live subject unable ever to refute.
    fn on_refute_window(&mut self, ctx: &mut Ctx<'_>, subject: Rank) {
        let Some(w) = self.watching.get(&subject).copied() else {
            ctx.stats.stale_timers += 1;
            return;
        };
        let Some((inc, since)) = w.suspected else {
            ctx.stats.stale_timers += 1;
            return;
        };
        if !w.alerted {
            if Self::was_frozen(ctx, w.deadline) {
                self.thaw(ctx, w.deadline);
                return;
            }
            let due = since + self.scaled(ctx.cfg.detect.refute);
            if ctx.now < due {
                ctx.stats.detect.health_held += 1;
                self.hold(ctx, subject, due, DetectTimer::Refute(subject));
                return;
            }
            ctx.stats.detect.unresponsive += 1;
            ctx.event(DetectEvent::Unresponsive {
                rank: subject,
                incarnation: inc,
            });
            if let Some(w) = self.watching.get_mut(&subject) {
                w.alerted = true;
            }
        } else {
            ctx.stats.detect.alerts_resent += 1;
            ctx.stats.detect.suspects_resent += 1;
            ctx.send(
                subject,
                SuspectMsg {
                    subject,
                    incarnation: inc,
                },
            );
        }
        ctx.effect(Effect::Alert {
            subject,
            incarnation: inc,
            down: true,
        });
        let at = ctx.now + ctx.cfg.detect.period;
        self.hold(ctx, subject, at, DetectTimer::Refute(subject));
    }

    /// Reports how much of this rank's sample of the cluster is silent, when that changed.
    fn report_reachability(&mut self, ctx: &mut Ctx<'_>) {
        let suspected = self
            .watching
            .values()
            .filter(|w| w.suspected.is_some())
            .count() as u32;
        let now = (suspected, self.watching.len() as u32);
        if now != self.reported {
            self.reported = now;
            ctx.effect(Effect::Reachability {
                suspected: now.0,
                watching: now.1,
            });
        }
    }

    fn on_beat(&mut self, ctx: &mut Ctx<'_>) {
        let due = self.beat_due.take().unwrap_or(ctx.now);
        self.end_health_round(ctx);
        let half = crate::time::Duration::from_nanos(ctx.cfg.detect.period.as_nanos() / 2);
        let late = ctx.now - due > half;
        if std::mem::replace(&mut self.health.late, late) && late {
            // This rank's own timers keep running late (an overloaded host).
            self.raise_health(ctx);
        }
        if Self::was_frozen(ctx, due) {
            // This rank was frozen: the stretch it slept through is nobody's silence.
            self.thaw(ctx, due);
        }
        self.heartbeat_all(ctx);
        self.arm_beat(ctx);
    }
}

/// The first multiple of `period` (from `Instant::ZERO`) strictly after `now`.
fn next_grid_point(now: Instant, period: crate::time::Duration) -> Instant {
    let p = period.as_nanos().max(1);
    let n = now.as_nanos();
    Instant::from_nanos((n / p).saturating_add(1).saturating_mul(p))
}

/// The first multiple of `period` (from `Instant::ZERO`) at or after `at`.
pub(crate) fn grid_point_at_or_after(at: Instant, period: crate::time::Duration) -> Instant {
    let p = period.as_nanos().max(1);
    Instant::from_nanos(at.as_nanos().div_ceil(p).saturating_mul(p))
}

impl Machine for Detect {
    type Msg = DetectMsg;
    type Timer = DetectTimer;

    fn new(cfg: &crate::Config, _me: Rank) -> Self {
        Self {
            enabled: cfg.detect.enabled,
            incarnation: 0,
            seq: 0,
            rings: LiveRings::default(),
            watching: BTreeMap::new(),
            beat_due: None,
            thawed: Instant::ZERO,
            reported: (0, 0),
            health: Health::default(),
            started: Instant::ZERO,
            span_seen: 0,
            grows: Vec::new(),
            leaving: false,
        }
    }

    fn on_start(&mut self, ctx: &mut Ctx<'_>) {
        self.started = ctx.now;
        self.span_seen = ctx.tree.layout().span();
        self.recompute(ctx);
    }

    /// The rings are a function of the live set, not of this rank's view: they are brought up
    /// to date here, once per change of the live set (a death far away in rank numbers can
    /// still change who watches whom here; a view change always comes with one). Only the
    /// rings that lost this rank's predecessor or successor are recomputed
    /// ([`rings::LiveRings`]). Standing alerts go out again at once: the coordinator may have
    /// changed with the members (a coordinator that froze with alerts unprocessed is replaced
    /// by one that has none).
    fn on_members_change(&mut self, ctx: &mut Ctx<'_>, _change: &MembersChange<'_>) {
        let span = ctx.tree.layout().span();
        if span > self.span_seen {
            let grace = ctx.cfg.detect.join_grace;
            self.grows.retain(|&(_, at)| ctx.now < at + grace);
            self.grows.push((Rank(self.span_seen), ctx.now));
            self.span_seen = span;
        }
        self.recompute(ctx);
        let standing: Vec<(Rank, u64)> = self
            .watching
            .iter()
            .filter(|(_, w)| w.alerted)
            .filter_map(|(r, w)| w.suspected.map(|(inc, _)| (*r, inc)))
            .collect();
        for (subject, incarnation) in standing {
            ctx.stats.detect.alerts_resent += 1;
            ctx.effect(Effect::Alert {
                subject,
                incarnation,
                down: true,
            });
        }
        self.report_reachability(ctx);
    }

    fn on_message(&mut self, ctx: &mut Ctx<'_>, from: Rank, msg: DetectMsg) {
        if !self.enabled {
            ctx.stats.detect.stale += 1;
            return;
        }
        match msg {
            DetectMsg::Heartbeat(m) => self.on_heartbeat(ctx, from, m),
            DetectMsg::Suspect(m) => self.on_suspect(ctx, from, m),
        }
        self.report_reachability(ctx);
    }

    fn on_timer(&mut self, ctx: &mut Ctx<'_>, timer: DetectTimer, _token: TimerToken) {
        match timer {
            DetectTimer::Beat => self.on_beat(ctx),
            DetectTimer::Silent(r) => self.on_silent(ctx, r),
            DetectTimer::Refute(r) => self.on_refute_window(ctx, r),
        }
        self.report_reachability(ctx);
    }
}
