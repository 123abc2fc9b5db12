//! The membership scenario: the heartbeat detector on, faults of every kind the simulator has,
//! a fault oracle, and the membership checkers (`docs/edge-cases.md`: S4 no wrongful eviction, L2
//! the detection bound, L3 an evicted live rank learns it).
//!
//! Faults, each on its own ranks, at random times in the first second after a warm-up:
//! - **silent losses**: the process freezes for good (a host that vanishes: no reset, no
//!   link-down, frames never answered); must be removed everywhere;
//! - **crashes** with reset (a killed process on a live host: hard evidence); must be removed;
//! - **long pauses** (2–2.5 s, then resumed): must be removed, and told on resume;
//! - **short pauses** (≤ 150 ms): must not be removed;
//! - **cuts**, both ways or one way, on random pairs (tree links included) for `cut_ms`, then
//!   healed: nobody may be removed for them;
//! - **lossy ranks**: every link to and from the rank loses `loss_pct`% of transmissions for
//!   `loss_ms` ([`Fault::Lossy`]: TCP retransmits, so frames arrive late and in order). A gray
//!   failure: the lossy rank itself may be removed (as Rapid does), or not; no other rank may
//!   be removed for it.
//!
//! A rank removed without a fault of its own is a wrongful eviction.

use std::collections::BTreeMap;

use crate::detect::DetectEvent;
use crate::event::Event;
use crate::membership::MembershipEvent;
use crate::rng::Rng;
use crate::sim::{Fault, Hooks, Observer, Sim, SimConfig, SimFailure, World};
use crate::time::{Duration, Instant};
use crate::tree::{Rank, RankSet};

/// The shape of one membership run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MembershipParams {
    /// Ranks.
    pub ranks: u32,
    /// Tree radix.
    pub radix: u32,
    /// The run's one seed.
    pub seed: u64,
    /// Silent losses (frozen for good).
    pub silent: u32,
    /// Crashes with reset.
    pub crashes: u32,
    /// Long pauses (2–2.5 s, then resumed).
    pub long_pauses: u32,
    /// Short pauses (≤ 150 ms).
    pub short_pauses: u32,
    /// Pairs cut both ways.
    pub cuts: u32,
    /// Pairs cut one way.
    pub oneway_cuts: u32,
    /// How long each cut lasts.
    pub cut_ms: u64,
    /// Lossy ranks (all their links lossy at `loss_pct` for `loss_ms`); may be removed.
    pub lossy: u32,
    /// Loss probability per transmission on a lossy rank's links, in percent (0..=100).
    pub loss_pct: u32,
    /// How long a lossy rank's links stay lossy, in ms (the run lasts at least this long).
    pub loss_ms: u64,
    /// Quorum views (`membership.quorum`): every removal decided by a majority of the prior
    /// view rather than by the root alone.
    pub quorum: bool,
}

impl MembershipParams {
    /// A run with one fault of each kind; the lossy rank loses 25% of transmissions for 30 s.
    pub fn new(ranks: u32, radix: u32, seed: u64) -> Self {
        Self {
            ranks,
            radix,
            seed,
            silent: 1,
            crashes: 1,
            long_pauses: 1,
            short_pauses: 1,
            cuts: 1,
            oneway_cuts: 1,
            cut_ms: 2_000,
            lossy: 1,
            loss_pct: 25,
            loss_ms: 30_000,
            quorum: crate::membership::MembershipConfig::default().quorum,
        }
    }

    /// The command line that replays this run.
    pub fn replay_command(&self) -> String {
        format!(
            "cargo run --release -p lifeline-cli -- sim membership --ranks {} --radix {} --seed {} --silent {} --crashes {} --long-pauses {} --short-pauses {} --cuts {} --oneway-cuts {} --cut-ms {} --lossy {} --loss-pct {} --loss-ms {} {}--trace",
            self.ranks,
            self.radix,
            self.seed,
            self.silent,
            self.crashes,
            self.long_pauses,
            self.short_pauses,
            self.cuts,
            self.oneway_cuts,
            self.cut_ms,
            self.lossy,
            self.loss_pct,
            self.loss_ms,
            if self.quorum { "--quorum " } else { "" },
        )
    }
}

/// What one membership run measured.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MembershipReport {
    /// Ranks.
    pub ranks: u32,
    /// Ranks the oracle says must be removed (silent, crashed, long-paused).
    pub faulty: u32,
    /// Ranks removed (in any confirmation anywhere).
    pub removed: u32,
    /// Ranks removed with no fault of their own (must be 0; a lossy rank removed is not one).
    pub wrongful_evictions: u32,
    /// Lossy ranks removed (allowed: a gray failure).
    pub lossy_removed: u32,
    /// Accusations (detector `Unresponsive` events) made by lossy ranks: what a sick observer
    /// says about others (local health awareness keeps it low).
    pub lossy_accusations: u32,
    /// Faulty ranks some survivor still holds alive at the end (must be 0).
    pub missed_removals: u32,
    /// Long-paused ranks that were told of their eviction after resuming.
    pub evicted_told: u32,
    /// Distinct confirmation epochs (view changes).
    pub view_changes: u32,
    /// Per soft-lost rank (silent or long pause): ms from the fault until the removal was
    /// decided (the first survivor, the coordinator, confirmed it).
    pub detect_ms_silent: Vec<f64>,
    /// Per crashed rank: the same, for hard evidence (a refused dial corroborated by the
    /// coordinator), unless the coordinator was paused meanwhile.
    pub detect_ms_hard: Vec<f64>,
    /// Crashed ranks whose coordinator (the one that decided, or the root the refusals went
    /// to) was paused or frozen between the crash and the decision: a refused dial is one
    /// rank's word until a coordinator corroborates it, so these wait for the pause to end or
    /// the frozen coordinator's removal; apart from `detect_ms_hard` and its bound.
    pub detect_ms_hard_paused_coordinator: Vec<f64>,
    /// Soft-lost ranks whose removal a lossy rank decided (it was the coordinator): alerts
    /// reach it only after its links' retransmissions, so these are apart from
    /// `detect_ms_silent` and its bound (a sick coordinator is membership's to route around).
    pub detect_ms_lossy_coordinator: Vec<f64>,
    /// Per removed rank: ms from the fault until every survivor confirmed it (survivors cut
    /// off from the tree by a cut hear of it only after the heal).
    pub everywhere_ms: Vec<f64>,
    /// Frames other than heartbeats, per view change (alerts, suspicion notices, the notice's
    /// broadcast, adoption and lineage notices, RELM link updates).
    pub frames_per_view_change: f64,
    /// Removal notices sent (`membership.removed_out`, summed over the ranks alive at the
    /// end): the decisions' flood on the revoke overlay, about `m × (degree − 1)` each.
    pub removal_frames: u64,
}

impl MembershipReport {
    /// The oracle's violations, one line each (empty when the run is correct).
    pub fn violations(&self) -> Vec<String> {
        let mut v = Vec::new();
        if self.wrongful_evictions > 0 {
            v.push(format!("{} wrongful evictions", self.wrongful_evictions));
        }
        if self.missed_removals > 0 {
            v.push(format!("{} faulty ranks not removed", self.missed_removals));
        }
        v
    }
}

/// Many runs merged: the oracle's verdicts summed, latencies pooled for percentiles. Used by
/// `lifeline sim membership` and `scale membership`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MembershipSummary {
    /// Runs merged.
    pub runs: u64,
    /// Ranks the oracle said must be removed.
    pub faulty: u64,
    /// Wrongful evictions (must be 0).
    pub wrongful_evictions: u64,
    /// Lossy ranks, and how many of them were removed (allowed).
    pub lossy: u64,
    /// Lossy ranks removed.
    pub lossy_removed: u64,
    /// Accusations made by lossy ranks.
    pub lossy_accusations: u64,
    /// Faulty ranks not removed (must be 0).
    pub missed_removals: u64,
    /// Long-paused ranks, and how many of them were told.
    pub long_pauses: u64,
    /// Long-paused ranks told of their eviction on resume.
    pub evicted_told: u64,
    /// View changes.
    pub view_changes: u64,
    /// Frames other than heartbeats, over all view changes.
    pub frames: f64,
    /// Removal notices sent, over all runs.
    pub removal_frames: u64,
    /// Decided latencies of silent losses (ms), sorted by [`Self::quantile`].
    pub silent_ms: Vec<f64>,
    /// Decided latencies of losses with reset (ms).
    pub hard_ms: Vec<f64>,
    /// Decided latencies of losses with reset whose coordinator was paused or frozen (ms).
    pub hard_paused_coordinator_ms: Vec<f64>,
    /// Decided latencies of silent losses decided by a lossy coordinator (ms).
    pub lossy_coordinator_ms: Vec<f64>,
    /// Fault-to-everywhere latencies (ms).
    pub everywhere_ms: Vec<f64>,
    /// One line per run that broke the oracle (with its replay command).
    pub failing: Vec<String>,
}

impl MembershipSummary {
    /// Merges one run.
    pub fn add(&mut self, p: &MembershipParams, r: MembershipReport) {
        self.runs += 1;
        self.faulty += u64::from(r.faulty);
        self.wrongful_evictions += u64::from(r.wrongful_evictions);
        self.lossy += u64::from(p.lossy);
        self.lossy_removed += u64::from(r.lossy_removed);
        self.lossy_accusations += u64::from(r.lossy_accusations);
        self.missed_removals += u64::from(r.missed_removals);
        self.long_pauses += u64::from(p.long_pauses);
        self.evicted_told += u64::from(r.evicted_told);
        self.view_changes += u64::from(r.view_changes);
        self.frames += r.frames_per_view_change * f64::from(r.view_changes);
        self.removal_frames += r.removal_frames;
        if !r.violations().is_empty() || r.evicted_told < p.long_pauses {
            self.failing.push(format!(
                "seed {}: {:?}, {} of {} long-paused ranks told; replay: {}",
                p.seed,
                r.violations(),
                r.evicted_told,
                p.long_pauses,
                p.replay_command()
            ));
        }
        self.silent_ms.extend(r.detect_ms_silent);
        self.hard_ms.extend(r.detect_ms_hard);
        self.hard_paused_coordinator_ms
            .extend(r.detect_ms_hard_paused_coordinator);
        self.lossy_coordinator_ms
            .extend(r.detect_ms_lossy_coordinator);
        self.everywhere_ms.extend(r.everywhere_ms);
    }

    /// The `q` quantile (0..=1, nearest rank) of `v`; 0 for an empty list.
    pub fn quantile(v: &[f64], q: f64) -> f64 {
        let mut v = v.to_vec();
        v.sort_by(f64::total_cmp);
        if v.is_empty() {
            return 0.0;
        }
        v[((v.len() as f64 * q).ceil() as usize).clamp(1, v.len()) - 1]
    }

    /// p50, p99 and max of `v`.
    pub fn percentiles(v: &[f64]) -> [f64; 3] {
        [0.5, 0.99, 1.0].map(|q| Self::quantile(v, q))
    }

    /// Non-heartbeat frames per view change.
    pub fn frames_per_view_change(&self) -> f64 {
        self.frames / self.view_changes.max(1) as f64
    }

    /// Removal notices per view change.
    pub fn removal_frames_per_view_change(&self) -> f64 {
        self.removal_frames as f64 / self.view_changes.max(1) as f64
    }
}

/// Confirmation and eviction times, per rank.
#[derive(Default)]
struct Watch {
    /// (subject, survivor) → when the survivor first held the subject dead.
    confirmed: BTreeMap<(Rank, Rank), Instant>,
    /// Ranks confirmed removed anywhere.
    removed: RankSet,
    epochs: RankSet,
    evicted: BTreeMap<Rank, Instant>,
    /// Accusations (`Unresponsive`) per accusing rank.
    accusations: BTreeMap<Rank, u32>,
    /// Per removed rank, the coordinator that decided it: the root of the first view that
    /// held it dead.
    decided_by: BTreeMap<Rank, Rank>,
}

impl Watch {
    /// `survivor` holds `subject` dead from now on.
    fn confirm(&mut self, w: &World, subject: Rank, survivor: Rank) {
        self.confirmed.entry((subject, survivor)).or_insert(w.now());
        if let Some(n) = w.node(survivor) {
            if let Some(root) = n.tree().root_without(subject) {
                self.decided_by.entry(subject).or_insert(root);
            }
        }
    }
}

impl Observer for Watch {
    fn on_event(&mut self, w: &World, rank: Rank, e: &Event) {
        // A removal takes effect at a rank when its tree holds the rank dead: seen at the
        // view change (or the confirmation) that brought it.
        if matches!(e, Event::ViewChanged(_) | Event::Membership(_)) {
            if let Some(n) = w.node(rank) {
                for s in n.tree().dead().iter() {
                    self.confirm(w, s, rank);
                }
            }
        }
        match e {
            Event::Membership(MembershipEvent::FailureConfirmed { epoch, ranks, .. }) => {
                self.epochs.insert(Rank(*epoch as u32));
                for s in ranks.iter() {
                    self.removed.insert(s);
                    self.confirm(w, s, rank);
                }
            }
            Event::Membership(MembershipEvent::Evicted { .. }) => {
                self.evicted.entry(rank).or_insert(w.now());
            }
            Event::Detect(DetectEvent::Unresponsive { .. }) => {
                *self.accusations.entry(rank).or_insert(0) += 1;
            }
            _ => {}
        }
    }
}

/// Runs the membership scenario; a [`SimFailure`] only for an invalid shape or a stuck run
/// (the oracle's verdicts are in the report: [`MembershipReport::violations`]).
pub fn run_membership(p: &MembershipParams, hooks: Hooks) -> Result<MembershipReport, SimFailure> {
    let fail = |reason: String| SimFailure {
        seed: p.seed,
        step: 0,
        now: Instant::ZERO,
        reason,
        replay: p.replay_command(),
    };
    let victims = p.silent + p.crashes + p.long_pauses + p.short_pauses;
    let pair_ranks = 2 * (p.cuts + p.oneway_cuts);
    if u64::from(victims) + u64::from(pair_ranks) + u64::from(p.lossy) + 1 > u64::from(p.ranks) {
        return Err(fail(format!(
            "{} ranks cannot host {victims} victims, {pair_ranks} cut endpoints and {} lossy ranks",
            p.ranks, p.lossy
        )));
    }
    if p.loss_pct > 100 {
        return Err(fail(format!("loss_pct {} is over 100", p.loss_pct)));
    }
    let mut cfg = SimConfig::new(p.ranks, p.radix, p.seed);
    cfg.node.detect.enabled = true;
    cfg.node.membership.quorum = p.quorum;
    let mut sim = Sim::new(cfg, Watch::default()).map_err(|e| fail(format!("{e}")))?;
    sim.set_replay(p.replay_command());
    sim.set_hooks(hooks);
    let mut rng = Rng::new(p.seed).fork(0x6d65_6d62);
    // Distinct ranks for every role, in a seeded order.
    let mut order: Vec<Rank> = (0..p.ranks).map(Rank).collect();
    for i in (1..order.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        order.swap(i, j);
    }
    let mut next = order.into_iter();
    let mut take = |n: u32| -> Vec<Rank> { next.by_ref().take(n as usize).collect() };
    let warm = Instant::ZERO + Duration::from_millis(500);
    let at = |rng: &mut Rng| warm + Duration::from_millis(rng.below(1_000));
    let mut soft: Vec<(Rank, Instant)> = Vec::new();
    let mut hard: Vec<(Rank, Instant)> = Vec::new();
    let mut long: Vec<(Rank, Instant)> = Vec::new();
    let mut end = warm + Duration::from_millis(1_000);
    // Every pause (rank, from, to): a crash whose coordinator is frozen waits for it.
    let mut paused: Vec<(Rank, Instant, Instant)> = Vec::new();
    let never = Instant::ZERO + Duration::from_secs(1 << 30);
    for r in take(p.silent) {
        let t = at(&mut rng);
        sim.schedule(t, Fault::Pause(r));
        soft.push((r, t));
        paused.push((r, t, never));
    }
    for r in take(p.crashes) {
        let t = at(&mut rng);
        sim.schedule(t, Fault::Crash(r));
        hard.push((r, t));
    }
    for r in take(p.long_pauses) {
        let t = at(&mut rng);
        let resume = t + Duration::from_millis(2_000 + rng.below(500));
        sim.schedule(t, Fault::Pause(r));
        sim.schedule(resume, Fault::Resume(r));
        soft.push((r, t));
        long.push((r, resume));
        paused.push((r, t, resume));
        end = end.max(resume);
    }
    for r in take(p.short_pauses) {
        let t = at(&mut rng);
        let resume = t + Duration::from_millis(rng.below(151));
        sim.schedule(t, Fault::Pause(r));
        sim.schedule(resume, Fault::Resume(r));
        paused.push((r, t, resume));
    }
    let cut_ranks = take(pair_ranks);
    let mut last_cut = Instant::ZERO;
    for (i, pair) in cut_ranks.chunks(2).enumerate() {
        let (a, b) = (pair[0], pair[1]);
        // Some cuts on a tree link: b becomes a's parent's rank when that is free to use.
        let t = at(&mut rng);
        let fault = if (i as u32) < p.cuts {
            Fault::Cut(a, b)
        } else {
            Fault::CutOneWay(a, b)
        };
        sim.schedule(t, fault);
        last_cut = last_cut.max(t + Duration::from_millis(p.cut_ms));
    }
    if last_cut > Instant::ZERO {
        sim.schedule(last_cut, Fault::Heal);
        end = end.max(last_cut);
    }
    // Drawn last, so the other faults' ranks and times are those of a run without them.
    let lossy: RankSet = take(p.lossy).into_iter().collect();
    for r in lossy.iter() {
        let t = at(&mut rng);
        let duration = Duration::from_millis(p.loss_ms);
        sim.schedule(
            t,
            Fault::Lossy {
                rank: r,
                pct: p.loss_pct,
                duration,
            },
        );
        end = end.max(t + duration);
    }
    sim.run_until(end + Duration::from_millis(1_500))?;

    let w = sim.world();
    let faulty: RankSet = soft.iter().chain(&hard).map(|(r, _)| *r).collect();
    let obs = sim.observer();
    // A lossy rank that was removed is no survivor (it may never learn the rest).
    let survivors: Vec<Rank> = (0..p.ranks)
        .map(Rank)
        .filter(|r| !faulty.contains(*r) && !w.is_crashed(*r))
        .filter(|r| !(lossy.contains(*r) && obs.removed.contains(*r)))
        .collect();
    let mut report = MembershipReport {
        ranks: p.ranks,
        faulty: faulty.len() as u32,
        removed: obs.removed.len() as u32,
        view_changes: obs.epochs.len() as u32,
        ..Default::default()
    };
    report.wrongful_evictions = obs
        .removed
        .iter()
        .filter(|r| !faulty.contains(*r) && !lossy.contains(*r))
        .count() as u32;
    report.lossy_removed = obs.removed.iter().filter(|r| lossy.contains(*r)).count() as u32;
    report.lossy_accusations = lossy.iter().filter_map(|r| obs.accusations.get(&r)).sum();
    report.missed_removals = faulty
        .iter()
        .filter(|&f| {
            survivors
                .iter()
                .any(|&s| w.node(s).is_some_and(|n| n.tree().is_alive(f)))
        })
        .count() as u32;
    let times = |s: Rank| -> Vec<Instant> {
        survivors
            .iter()
            .filter_map(|&v| obs.confirmed.get(&(s, v)).copied())
            .collect()
    };
    let ms = |d: Duration| d.as_nanos() as f64 / 1e6;
    for (list, hard_loss) in [(&soft, false), (&hard, true)] {
        for (r, t) in list.iter() {
            let ts = times(*r);
            if let Some(first) = ts.iter().min() {
                let by = obs.decided_by.get(r).copied();
                let frozen = |c: Rank| {
                    paused
                        .iter()
                        .any(|&(q, from, to)| q == c && from <= *first && to >= *t)
                };
                // The coordinator: the one that decided, or the root (rank 0) the refusals
                // went to while it was frozen.
                let out = if hard_loss && (by.is_some_and(frozen) || frozen(Rank(0))) {
                    &mut report.detect_ms_hard_paused_coordinator
                } else if hard_loss {
                    &mut report.detect_ms_hard
                } else if by.is_some_and(|c| lossy.contains(c)) {
                    &mut report.detect_ms_lossy_coordinator
                } else {
                    &mut report.detect_ms_silent
                };
                out.push(ms(*first - *t));
            }
            if ts.len() == survivors.len() {
                if let Some(last) = ts.iter().max() {
                    report.everywhere_ms.push(ms(*last - *t));
                }
            }
        }
    }
    report.evicted_told = long
        .iter()
        .filter(|(r, resumed)| obs.evicted.get(r).is_some_and(|t| *t >= *resumed))
        .count() as u32;
    let frames: u64 = (0..p.ranks)
        .filter_map(|r| w.node(Rank(r)))
        .map(|n| {
            let st = n.stats();
            st.frames_out.saturating_sub(st.detect.heartbeats_out)
        })
        .sum();
    report.frames_per_view_change = frames as f64 / f64::from(report.view_changes.max(1));
    report.removal_frames = (0..p.ranks)
        .filter_map(|r| w.node(Rank(r)))
        .map(|n| n.stats().membership.removed_out)
        .sum();
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_fault_kind_at_once_no_wrongful_eviction_and_every_loss_removed() {
        for seed in 1..=6 {
            let p = MembershipParams::new(96, 4, seed);
            let r = run_membership(&p, Hooks::default()).unwrap();
            assert!(
                r.violations().is_empty(),
                "seed {seed}: {:?} {r:?}",
                r.violations()
            );
            assert_eq!(r.faulty, 3);
            assert_eq!(r.evicted_told, 1, "seed {seed}: {r:?}");
            assert!(r.detect_ms_silent.iter().all(|&d| d <= 500.0), "{r:?}");
            assert!(r.detect_ms_hard.iter().all(|&d| d <= 20.0), "{r:?}");
        }
    }

    /// The swarm's run for `seed`: a random shape and fault mix, one lossy rank.
    ///
    /// Scaled to fit CI time: the lossy rank's loss lasts 10 s rather than 30 s in nine seeds
    /// of ten (every tenth keeps the full 30 s). A run lasts until the last fault is over, so
    /// the loss sets its length: this makes a seed about 2.5 times cheaper. Local health
    /// awareness acts in the loss's first seconds (the score rises within a few rounds), so
    /// the shorter loss still shows a sick observer's accusations; the long ones keep a sick
    /// rank's removal, which can come late, in the swarm.
    fn swarm_params(seed: u64) -> MembershipParams {
        let mut rng = Rng::new(seed).fork(7);
        let ranks = 24 + rng.below(160) as u32;
        let radix = [2, 4, 8, 16, 64][rng.below(5) as usize];
        let mut p = MembershipParams::new(ranks, radix, seed);
        p.silent = rng.below(3) as u32;
        p.crashes = rng.below(3) as u32;
        p.long_pauses = rng.below(2) as u32;
        p.short_pauses = rng.below(4) as u32;
        p.cuts = rng.below(3) as u32;
        p.oneway_cuts = rng.below(3) as u32;
        p.cut_ms = 500 + rng.below(4_500);
        // One lossy rank in every run (drawn last: the other faults are as before).
        p.loss_pct = 5 + rng.below(36) as u32;
        if seed % 10 != 0 {
            p.loss_ms = 10_000;
        }
        p
    }

    /// The swarm over `seeds`, run on every core (seeds go to whichever worker is free; the
    /// results are merged in seed order, so the summary is the same however they ran).
    fn swarm(seeds: std::ops::Range<u64>) -> MembershipSummary {
        let mut all = MembershipSummary::default();
        for (p, r) in swarm_runs(seeds, None) {
            all.add(&p, r);
        }
        all
    }

    /// Every run of the swarm over `seeds` in seed order, run on every core, with quorum views
    /// as `quorum` says (`None`: each seed's own draw).
    fn swarm_runs(
        seeds: std::ops::Range<u64>,
        quorum: Option<bool>,
    ) -> Vec<(MembershipParams, MembershipReport)> {
        let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
        let next = std::sync::atomic::AtomicU64::new(seeds.start);
        let done = std::sync::Mutex::new(Vec::new());
        std::thread::scope(|s| {
            for _ in 0..workers {
                s.spawn(|| loop {
                    let seed = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    if seed >= seeds.end {
                        break;
                    }
                    let mut p = swarm_params(seed);
                    if let Some(q) = quorum {
                        p.quorum = q;
                    }
                    let r = run_membership(&p, Hooks::default()).unwrap();
                    done.lock().unwrap().push((p, r));
                });
            }
        });
        let mut done = done.into_inner().unwrap();
        done.sort_by_key(|(p, _)| p.seed);
        done
    }

    /// The swarm: 1,000 seeds with random shapes and fault mixes (`swarm_params` says how
    /// they are scaled to fit CI time). The oracle must hold in every run (every failing seed
    /// is reported, with its replay command); the latency bounds hold at the 99th percentile
    /// over all of them. One test rather than several over parts of the seed range, so the
    /// percentiles are those of the whole swarm; it runs its seeds on every core itself.
    #[test]
    fn swarm_1000_seeds_no_wrongful_eviction_every_loss_removed() {
        let mut all = swarm(0..1_000);
        assert_eq!(all.runs, 1_000);
        assert!(
            all.failing.is_empty(),
            "{} of {} seeds failed:\n{}",
            all.failing.len(),
            all.runs,
            all.failing.join("\n")
        );
        let p99 = |v: &mut Vec<f64>| {
            v.sort_by(f64::total_cmp);
            v.get((v.len() * 99).div_ceil(100).saturating_sub(1))
                .copied()
                .unwrap_or(0.0)
        };
        let (s99, h99) = (p99(&mut all.silent_ms), p99(&mut all.hard_ms));
        assert!(
            s99 <= 500.0,
            "silent p99 {s99} ms over {} losses",
            all.silent_ms.len()
        );
        assert!(
            h99 <= 20.0,
            "hard p99 {h99} ms over {} losses",
            all.hard_ms.len()
        );
        // A paused coordinator corroborates the refusal when it thaws; a frozen one is removed
        // on its observers' evidence, and the refusals go to its successor.
        let frozen = &all.hard_paused_coordinator_ms;
        assert!(frozen.iter().all(|&d| d <= 1_000.0), "{frozen:?}");
        eprintln!(
            "hard: {} losses, p99 {h99} ms; {} with a paused coordinator, max {:?} ms",
            all.hard_ms.len(),
            frozen.len(),
            frozen.iter().copied().reduce(f64::max)
        );
        // A lossy coordinator hears alerts after its links' retransmissions (200 ms, doubling):
        // later, bounded (over these seeds: 37 such losses, median 0.44 s, worst 1.07 s, a
        // lossy root removed itself while deciding and its successor deciding again).
        let sick = &all.lossy_coordinator_ms;
        assert!(sick.iter().all(|&d| d <= 1_500.0), "{sick:?}");
        // Local health awareness keeps the lossy rank from accusing: at most 40 accusations
        // per 3 seeds, the bound of 2,000 per 150 seeds from when every loss lasted 30 s (about
        // 3,600 over these 1,000 seeds; about 34,000 without local health awareness).
        let bound = all.runs * 40 / 3;
        assert!(
            all.lossy_accusations <= bound,
            "{} accusations by lossy ranks over {} seeds (at most {bound})",
            all.lossy_accusations,
            all.runs
        );
    }

    /// Measurement, not a check (run by hand): the swarm's silent-loss figures with quorum
    /// views as `LIFELINE_SWARM_QUORUM` says (`1` on, `0` off, unset: the default), printed
    /// with every seed whose silent loss took over 500 ms (`LIFELINE_SWARM_REPLAY=175,552`:
    /// only those seeds' replay commands).
    #[test]
    #[ignore = "measurement: run by hand"]
    fn swarm_silent_figures() {
        let quorum = std::env::var("LIFELINE_SWARM_QUORUM")
            .ok()
            .map(|v| v == "1");
        if let Ok(list) = std::env::var("LIFELINE_SWARM_REPLAY") {
            // Only the replay commands of the seeds listed (comma-separated).
            for seed in list.split(',').filter_map(|x| x.trim().parse::<u64>().ok()) {
                let mut p = swarm_params(seed);
                if let Some(q) = quorum {
                    p.quorum = q;
                }
                eprintln!("seed {seed}: {}", p.replay_command());
            }
            return;
        }
        let mut all = MembershipSummary::default();
        let mut slow = Vec::new();
        for (p, r) in swarm_runs(0..1_000, quorum) {
            for &d in r.detect_ms_silent.iter().filter(|&&d| d > 500.0) {
                slow.push(format!("seed {} {d:.1} ms: {}", p.seed, p.replay_command()));
            }
            all.add(&p, r);
        }
        let v = &all.silent_ms;
        let over = |t: f64| v.iter().filter(|&&d| d > t).count();
        eprintln!(
            "quorum {quorum:?}: {} failing seeds; silent {} losses, p50 {} p99 {} max {} ms; over 500 ms {} (500-550 {}, 550-600 {}, over 600 {}); hard p99 {} ms over {}",
            all.failing.len(),
            v.len(),
            MembershipSummary::quantile(v, 0.5),
            MembershipSummary::quantile(v, 0.99),
            MembershipSummary::quantile(v, 1.0),
            over(500.0),
            over(500.0) - over(550.0),
            over(550.0) - over(600.0),
            over(600.0),
            MembershipSummary::quantile(&all.hard_ms, 0.99),
            all.hard_ms.len()
        );
        for f in &all.failing {
            eprintln!("FAIL {f}");
        }
        for l in &slow {
            eprintln!("SLOW {l}");
        }
    }

    /// The scale, at a size CI affords (larger runs: `scale membership`): the lossy
    /// rank for 10 s rather than 30 s (each simulated second at 4096 ranks costs about 1.5 s).
    #[test]
    fn at_4096_ranks_radix_64() {
        for seed in [1, 2] {
            let mut p = MembershipParams::new(4096, 64, seed);
            p.loss_ms = 10_000;
            let r = run_membership(&p, Hooks::default()).unwrap();
            assert!(r.violations().is_empty(), "{:?}: {r:?}", r.violations());
            assert_eq!(r.evicted_told, 1, "{r:?}");
            assert!(r.detect_ms_silent.iter().all(|&d| d <= 500.0), "{r:?}");
            assert!(r.detect_ms_hard.iter().all(|&d| d <= 20.0), "{r:?}");
        }
    }
}
