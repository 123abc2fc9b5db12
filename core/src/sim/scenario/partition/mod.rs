//! The partition scenario: quorum views (membership.md §3) under a seeded random fault plan,
//! with the invariant checker (`check.rs`: S1, S2, S3, a minority side decides nothing) run after every
//! simulator step, and a liveness oracle where liveness is owed.
//!
//! Each seed draws a shape (members, radix: [`PartitionParams::varied`]) and one fault plan
//! ([`Plan`]), applied 500 ms into the run (every rank is up and heard by then):
//! - **split**: the members cut into two sides (a random subset, sometimes holding the root and
//!   the next candidates, sometimes an exact half) or three;
//! - **one-way**: every frame from one random set to the rest (or from the rest to it) stalls;
//! - **flapping**: one split cut, healed and cut again 2-4 times (no crashes or pauses: the
//!   sides keep their weights from cut to cut);
//! - **duel**: the root (sometimes with a few others) cut off, and the two next candidates cut
//!   from each other (both ways, or one way, sometimes lossy too), so both may start phase 1;
//!
//! and to a split or a duel, in half the seeds, coordinator faults: the root or one of the
//! next candidates crashed or paused (resumed later, or at the heal; a pause beginning after the
//! heal without its own resume lasts 2 s) at a random offset 0-1.5 s after the cut. Every plan
//! ends with a heal and 6 s to settle.
//!
//! Weights are those of view 0 (every member 2, the root, rank 0, 3: an even split has a
//! winner). A side is a **minority** when its members weigh at most half; every rank of every
//! minority side must decide nothing while the cut stands (the checker, `check.rs`). The **majority
//! side** (there is at most one; 3 sides may leave none, and then nobody decides, correctly)
//! owes liveness when the last cut lasts at least [`LIVENESS_BOUND`] and its members that never
//! crash or pause still weigh more than half: by [`LIVENESS_BOUND`] after the cut every one of
//! them has removed every rank of the other sides. In every run, at the end:
//! - no rank removed that the plan does not allow: only ranks of the minority sides (of the
//!   side without a majority of a one-way cut) and ranks that crashed or were paused; with no
//!   majority side, only crashed or paused ranks;
//! - every removed rank still alive was told (`Evicted`).
//!
//! A duel's lossy candidate counts as hit (crashed or paused): a rank losing 10-50% of every
//! transmission is late at every observer, and its removal is a fault of its own.
//!
//! One-way cuts owe no liveness (the cut side hears everyone; whether the others remove it is
//! timing), only safety and the end checks.

mod check;

use std::collections::BTreeMap;

pub(crate) use check::Checker;

use crate::rng::Rng;
use crate::sim::{Fault, Hooks, Sim, SimConfig, SimFailure, World};
use crate::time::{Duration, Instant};
use crate::tree::{Layout, Rank, RankSet};

/// How long a cut must last before the majority side owes its decision, and the bound on it.
pub const LIVENESS_BOUND: Duration = Duration::from_secs(3);

/// When the plan starts (every rank up and heard).
const WARM_UP: Duration = Duration::from_millis(500);

/// How long the run goes on after the heal.
const SETTLE: Duration = Duration::from_secs(6);

/// How long a pause that the plan does not end itself lasts when it begins after the heal (it
/// begins at most 1.5 s after the cut, so it ends at least 2.5 s before the settle does).
const LATE_PAUSE: Duration = Duration::from_secs(2);

/// The shape of one partition run; the fault plan is drawn from the seed and the shape.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionParams {
    /// Members.
    pub ranks: u32,
    /// Tree radix.
    pub radix: u32,
    /// The run's one seed.
    pub seed: u64,
}

impl PartitionParams {
    /// A shape drawn from `seed`: members in `8..=max` (at least 8), radix in `2..=8`.
    pub fn varied(seed: u64, max: u32) -> Self {
        let mut rng = Rng::new(seed).fork(0x7073_6870);
        let max = max.max(8);
        Self {
            ranks: 8 + rng.below(u64::from(max - 7)) as u32,
            radix: 2 + rng.below(7) as u32,
            seed,
        }
    }

    /// The command line that replays this run.
    pub fn replay_command(&self) -> String {
        format!(
            "cargo run --release -p lifeline-cli -- sim partition --ranks {} --radix {} --seed {} --trace",
            self.ranks, self.radix, self.seed
        )
    }
}

/// A coordinator fault during the decision.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CoordFault {
    /// The rank crashes this long after the cut.
    Crash(Rank, Duration),
    /// The rank is paused this long after the cut, and resumed after the second duration
    /// (`None`: never).
    Pause(Rank, Duration, Option<Duration>),
}

impl CoordFault {
    /// The rank it hits.
    pub fn rank(&self) -> Rank {
        match self {
            Self::Crash(r, _) | Self::Pause(r, _, _) => *r,
        }
    }
}

/// One seed's fault plan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Plan {
    /// The sides (every member on exactly one), cut for `cut` from each other.
    Split {
        /// The sides.
        sides: Vec<Vec<Rank>>,
        /// How long the cut lasts.
        cut: Duration,
        /// Faults during the decision.
        faults: Vec<CoordFault>,
    },
    /// Frames from `from` to every other member stall (`reverse`: frames to `from` stall).
    OneWay {
        /// The cut set.
        from: Vec<Rank>,
        /// The direction.
        reverse: bool,
        /// How long.
        cut: Duration,
    },
    /// The same split cut and healed in turn: `(cut, healed)` durations, the last heal final.
    Flapping {
        /// The sides.
        sides: Vec<Vec<Rank>>,
        /// Cut/heal periods.
        periods: Vec<(Duration, Duration)>,
    },
    /// The root's side cut off; the two candidates after it cut from each other.
    Duel {
        /// The sides: `sides[0]` holds the root.
        sides: Vec<Vec<Rank>>,
        /// The duelling candidates.
        candidates: (Rank, Rank),
        /// Their link cut one way only (from the first to the second).
        one_way: bool,
        /// The first candidate's links lossy (percent) through the cut.
        lossy: u32,
        /// How long.
        cut: Duration,
        /// Faults during the decision.
        faults: Vec<CoordFault>,
    },
}

impl Plan {
    /// The plan's name in reports.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Split { sides, .. } if sides.len() > 2 => "split3",
            Self::Split { .. } => "split",
            Self::OneWay { .. } => "oneway",
            Self::Flapping { .. } => "flapping",
            Self::Duel { .. } => "duel",
        }
    }

    /// The two-way sides, if the plan has any.
    fn sides(&self) -> Option<&[Vec<Rank>]> {
        match self {
            Self::Split { sides, .. } | Self::Flapping { sides, .. } | Self::Duel { sides, .. } => {
                Some(sides)
            }
            Self::OneWay { .. } => None,
        }
    }

    fn faults(&self) -> &[CoordFault] {
        match self {
            Self::Split { faults, .. } | Self::Duel { faults, .. } => faults,
            _ => &[],
        }
    }
}

/// Shuffles `v` in place from `rng`.
fn shuffle(rng: &mut Rng, v: &mut [Rank]) {
    for i in (1..v.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        v.swap(i, j);
    }
}

fn ms(rng: &mut Rng, lo: u64, hi: u64) -> Duration {
    Duration::from_millis(lo + rng.below(hi - lo + 1))
}

/// A cut length: past the liveness bound in 3 seeds of 4 (up to 8 s), else 0.3-3 s.
fn cut_len(rng: &mut Rng) -> Duration {
    if rng.chance(0.75) {
        ms(rng, 3_000, 8_000)
    } else {
        ms(rng, 300, 2_999)
    }
}

/// Two sides, `a` and the rest, each sorted.
fn two_sides(n: u32, a: &[Rank]) -> Vec<Vec<Rank>> {
    let set: RankSet = a.iter().copied().collect();
    let mut a = a.to_vec();
    a.sort_unstable();
    let b: Vec<Rank> = (0..n).map(Rank).filter(|r| !set.contains(*r)).collect();
    vec![a, b]
}

/// The plan of `p`, drawn from its seed.
pub fn plan(p: &PartitionParams) -> Plan {
    let mut rng = Rng::new(p.seed).fork(0x706c_616e);
    let n = p.ranks;
    let layout = Layout::new(n, p.radix).expect("a valid shape");
    let cands = crate::membership::quorum::candidates(&layout, &RankSet::new(), 4);
    let mut all: Vec<Rank> = (0..n).map(Rank).collect();
    shuffle(&mut rng, &mut all);
    let faults = |rng: &mut Rng| {
        let mut f = Vec::new();
        if rng.chance(0.5) {
            for _ in 0..1 + rng.below(2) {
                let r = cands[rng.below(cands.len() as u64) as usize];
                if f.iter().any(|x: &CoordFault| x.rank() == r) {
                    continue;
                }
                let at = ms(rng, 0, 1_500);
                f.push(if rng.chance(0.5) {
                    CoordFault::Crash(r, at)
                } else {
                    let back = rng.chance(0.5).then(|| ms(rng, 100, 3_000));
                    CoordFault::Pause(r, at, back)
                });
            }
        }
        f
    };
    match rng.below(10) {
        // A split: a random subset; one holding the root and the next candidates; an exact half.
        0..=3 => {
            let a: Vec<Rank> = match rng.below(3) {
                0 => all[..1 + rng.below(u64::from(n - 1)) as usize].to_vec(),
                1 => {
                    let k = 1 + rng.below(cands.len() as u64) as usize;
                    let mut a: Vec<Rank> = cands[..k].to_vec();
                    let extra = rng.below(u64::from(n / 2)) as usize;
                    a.extend(all.iter().filter(|r| !cands[..k].contains(r)).take(extra));
                    a
                }
                _ => all[..(n / 2) as usize].to_vec(),
            };
            Plan::Split {
                sides: two_sides(n, &a),
                cut: cut_len(&mut rng),
                faults: faults(&mut rng),
            }
        }
        // Three sides.
        4 => {
            let i = 1 + rng.below(u64::from(n - 2)) as usize;
            let j = i + 1 + rng.below((n as usize - i - 1) as u64) as usize;
            let mut sides: Vec<Vec<Rank>> =
                vec![all[..i].to_vec(), all[i..j].to_vec(), all[j..].to_vec()];
            for s in &mut sides {
                s.sort_unstable();
            }
            Plan::Split {
                sides,
                cut: cut_len(&mut rng),
                faults: faults(&mut rng),
            }
        }
        5 | 6 => {
            let mut from = all[..1 + rng.below(u64::from(n / 2)) as usize].to_vec();
            from.sort_unstable();
            Plan::OneWay {
                from,
                reverse: rng.chance(0.5),
                cut: cut_len(&mut rng),
            }
        }
        7 => {
            let a = all[..1 + rng.below(u64::from(n - 1)) as usize].to_vec();
            let periods = (0..2 + rng.below(3))
                .map(|_| (ms(&mut rng, 100, 2_500), ms(&mut rng, 100, 1_500)))
                .collect::<Vec<_>>();
            let mut periods = periods;
            if rng.chance(0.75) {
                if let Some(last) = periods.last_mut() {
                    last.0 = ms(&mut rng, 3_000, 6_000);
                }
            }
            Plan::Flapping {
                sides: two_sides(n, &a),
                periods,
            }
        }
        _ => {
            let extra = rng.below(u64::from(n / 4)) as usize;
            let a: Vec<Rank> = std::iter::once(Rank(0))
                .chain(
                    all.iter()
                        .copied()
                        .filter(|r| !cands[..3.min(cands.len())].contains(r))
                        .take(extra),
                )
                .collect();
            Plan::Duel {
                sides: two_sides(n, &a),
                candidates: (cands[1], cands[2]),
                one_way: rng.chance(0.3),
                lossy: if rng.chance(0.5) {
                    10 + rng.below(40) as u32
                } else {
                    0
                },
                cut: cut_len(&mut rng),
                faults: faults(&mut rng)
                    .into_iter()
                    .filter(|f| f.rank() != Rank(0))
                    .collect(),
            }
        }
    }
}

/// What one partition run measured.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PartitionReport {
    /// The plan's kind ([`Plan::kind`]).
    pub kind: &'static str,
    /// Whether the majority side owed its decision (see the module doc).
    pub owed: bool,
    /// Ms from the (last) cut until every counted majority rank removed the other sides, when
    /// it did so before the heal.
    pub decide_ms: Option<f64>,
    /// The counted majority ranks had removed the other sides before the last cut began (a
    /// flapping split decided in an earlier cut).
    pub decided_earlier: bool,
    /// Ranks removed that the plan does not allow (must be 0; also a violation).
    pub wrongful_removals: u32,
    /// Oracle violations (must be empty).
    pub violations: Vec<String>,
}

/// Weights of view 0: the root (rank 0) 3, every other member 2; total `2n + 1`.
fn weight(side: &[Rank]) -> u64 {
    side.iter().map(|&r| if r == Rank(0) { 3 } else { 2 }).sum()
}

/// Arms the checker at a cut: every rank of a side weighing at most half must decide nothing.
fn arm(s: &mut Sim<Checker>, n: u32, sides: &[Vec<Rank>]) {
    let total = 2 * u64::from(n) + 1;
    let at: BTreeMap<Rank, u64> = sides
        .iter()
        .filter(|side| 2 * weight(side) <= total)
        .flatten()
        .map(|&r| (r, s.world().node(r).map_or(0, |x| x.view().epoch)))
        .collect();
    s.observer_mut().minority = Some(at);
}

fn removed(w: &World, r: Rank) -> Option<RankSet> {
    w.node(r).map(|n| n.view().removed.into_iter().collect())
}

/// Runs the partition scenario; a [`SimFailure`] for an invalid shape, a stuck run, or the
/// checker's verdict (S1-S3, a minority decision); the liveness and end checks are in
/// [`PartitionReport::violations`].
pub fn run_partition(p: &PartitionParams, hooks: Hooks) -> Result<PartitionReport, SimFailure> {
    let fail = |reason: String| SimFailure {
        seed: p.seed,
        step: 0,
        now: Instant::ZERO,
        reason,
        replay: p.replay_command(),
    };
    if p.ranks < 8 || !(2..=1024).contains(&p.radix) {
        return Err(fail(format!(
            "{} ranks, radix {}: at least 8 ranks and a radix in 2..=1024",
            p.ranks, p.radix
        )));
    }
    let plan = plan(p);
    let n = p.ranks;
    let mut cfg = SimConfig::new(n, p.radix, p.seed);
    cfg.node.detect.enabled = true;
    cfg.node.membership.quorum = true;
    let mut s = Sim::new(cfg, Checker::default()).map_err(|e| fail(format!("{e}")))?;
    s.set_replay(p.replay_command());
    s.set_hooks(hooks);
    let mut report = PartitionReport {
        kind: plan.kind(),
        ..PartitionReport::default()
    };
    let t0 = Instant::ZERO + WARM_UP;
    s.run_until(t0)?;
    let total = 2 * u64::from(n) + 1;
    // Ranks crashed or paused by the plan (a fair removal), and the sides.
    let mut hit: RankSet = plan.faults().iter().map(CoordFault::rank).collect();
    // A rank losing 10-50% of every transmission on all its links is late to every observer
    // (each loss costs a retransmission timeout): its removal is a fault of its own, as a
    // pause's is.
    if let Plan::Duel {
        candidates: (c1, _),
        lossy,
        ..
    } = &plan
    {
        if *lossy > 0 {
            hit.insert(*c1);
        }
    }
    let sides: Vec<Vec<Rank>> = plan.sides().map(<[_]>::to_vec).unwrap_or_default();
    let majority: Option<Vec<Rank>> = sides.iter().find(|x| 2 * weight(x) > total).cloned();
    // The ranks the plan allows removed.
    let mut allowed = hit.clone();
    if let Some(m) = &majority {
        for side in &sides {
            if side != m {
                allowed.extend(side.iter().copied());
            }
        }
    }
    // The last cut's start and length.
    let (last_cut, last_len, heal_at) = match &plan {
        Plan::Split { sides, cut, .. } => {
            arm(&mut s, n, sides);
            s.apply(Fault::Partition(sides.clone()));
            (t0, *cut, t0 + *cut)
        }
        Plan::Duel {
            sides,
            candidates: (c1, c2),
            one_way,
            lossy,
            cut,
            ..
        } => {
            arm(&mut s, n, sides);
            s.apply(Fault::Partition(sides.clone()));
            s.apply(if *one_way {
                Fault::CutOneWay(*c1, *c2)
            } else {
                Fault::Cut(*c1, *c2)
            });
            if *lossy > 0 {
                s.apply(Fault::Lossy {
                    rank: *c1,
                    pct: *lossy,
                    duration: *cut,
                });
            }
            (t0, *cut, t0 + *cut)
        }
        Plan::OneWay { from, reverse, cut } => {
            let set: RankSet = from.iter().copied().collect();
            let rest: Vec<Rank> = (0..n).map(Rank).filter(|r| !set.contains(*r)).collect();
            let w_from = weight(from);
            // The side without a majority may be removed (the other cannot be).
            allowed.extend(if 2 * w_from > total {
                rest.clone()
            } else {
                from.clone()
            });
            for &a in from {
                for &b in &rest {
                    s.apply(if *reverse {
                        Fault::CutOneWay(b, a)
                    } else {
                        Fault::CutOneWay(a, b)
                    });
                }
            }
            (t0, *cut, t0 + *cut)
        }
        Plan::Flapping { sides, periods } => {
            let mut t = t0;
            let mut last = (t0, Duration::ZERO);
            for (i, &(cut, healed)) in periods.iter().enumerate() {
                s.run_until(t)?;
                arm(&mut s, n, sides);
                s.apply(Fault::Partition(sides.clone()));
                last = (t, cut);
                if i + 1 == periods.len() {
                    break;
                }
                s.run_until(t + cut)?;
                s.observer_mut().minority = None;
                s.apply(Fault::Heal);
                t = t + cut + healed;
            }
            (last.0, last.1, last.0 + last.1)
        }
    };
    for f in plan.faults() {
        match *f {
            CoordFault::Crash(r, at) => s.schedule(last_cut + at, Fault::Crash(r)),
            CoordFault::Pause(r, at, back) => {
                s.schedule(last_cut + at, Fault::Pause(r));
                if let Some(b) = back {
                    s.schedule(last_cut + at + b, Fault::Resume(r));
                }
            }
        }
    }
    // Liveness: the majority side's ranks never hit, if they still weigh more than half.
    let counted: Vec<Rank> = majority
        .iter()
        .flatten()
        .copied()
        .filter(|r| !hit.contains(*r))
        .collect();
    let others: RankSet = sides
        .iter()
        .filter(|x| Some(*x) != majority.as_ref())
        .flatten()
        .copied()
        .collect();
    report.owed = majority.is_some() && 2 * weight(&counted) > total && last_len >= LIVENESS_BOUND;
    if majority.is_some() && !others.is_empty() {
        let done = |w: &World, _: &Checker| {
            counted
                .iter()
                .all(|&r| removed(w, r).is_some_and(|x| others.iter().all(|o| x.contains(o))))
        };
        if done(s.world(), s.observer()) {
            // A flapping split decided in an earlier cut: no time from the last one.
            report.decided_earlier = true;
        } else {
            let at = s.run_checking(Duration::from_millis(5), heal_at, done)?;
            if done(s.world(), s.observer()) {
                report.decide_ms = Some((at - last_cut).as_millis_f64());
            }
        }
    }
    s.run_until(heal_at)?;
    if report.owed {
        match report.decide_ms {
            _ if report.decided_earlier => {}
            Some(d) if d <= LIVENESS_BOUND.as_millis_f64() => {}
            d => report.violations.push(format!(
                "liveness: the majority side ({} ranks) had not removed the other sides {:?} within {LIVENESS_BOUND:?} of the cut (decided after {d:?} ms); removed at its ranks: {:?}",
                counted.len(),
                others.iter().map(|r| r.0).collect::<Vec<_>>(),
                counted
                    .iter()
                    .take(4)
                    .map(|&r| (r.0, removed(s.world(), r).map(|x| x.iter().map(|y| y.0).collect::<Vec<_>>())))
                    .collect::<Vec<_>>()
            )),
        }
    }
    s.observer_mut().minority = None;
    s.apply(Fault::Heal);
    for f in plan.faults() {
        if let CoordFault::Pause(r, at, back) = f {
            let start = last_cut + *at;
            if start <= heal_at {
                s.apply(Fault::Resume(*r));
            } else if back.is_none() {
                // A pause that begins after the heal would never end (the resume above came
                // first): it ends after LATE_PAUSE, so a removed rank can still be told within
                // the settle (seeds 118, 364, 803 of the sweep reported it "never told").
                s.schedule(start + LATE_PAUSE, Fault::Resume(*r));
            }
        }
    }
    s.run_until(heal_at + SETTLE)?;
    // The end: no rank removed that the plan does not allow, every removed live rank told.
    let w = s.world();
    let mut gone = RankSet::new();
    for r in w.live_ranks() {
        if let Some(x) = removed(w, r) {
            gone.extend(x.iter());
        }
    }
    for r in gone.iter() {
        if !allowed.contains(r) {
            report.wrongful_removals += 1;
            report
                .violations
                .push(format!("{r} removed, which the plan does not allow"));
        } else if !w.is_crashed(r) && !s.observer().evicted.contains_key(&r) {
            report
                .violations
                .push(format!("{r} removed but never told (no Evicted)"));
        }
    }
    Ok(report)
}

#[cfg(test)]
mod tests;
