//! The revoke scenario: one revoke from a random origin while ranks crash, shared by the
//! tests and the CLI (`lifeline sim revoke`).
//!
//! Fault-free, the flood must reach every rank once, in exactly the overlay's diameter in hops
//! (with no jitter, first receipt is over a shortest path) and with exactly
//! `degree + (m − 1)(degree − 1)` notices (the origin sends to all its neighbours, every other
//! rank to all but its sender). With faults (all drawn from the seed): some ranks crash and are
//! removed everywhere before the revoke (not in the overlay), some crash just before it
//! (still in every overlay: nobody has noticed), and more crash while it floods, the last two
//! together at most `degree − 1`; every rank alive at the end must get `Revoked` exactly once.

use crate::event::Event;
use crate::revoke::overlay::{degree, diameter};
use crate::revoke::RevokeEvent;
use crate::rng::Rng;
use crate::sim::{Fault, Hooks, NetConfig, Observer, Sim, SimConfig, SimFailure, World};
use crate::time::{Duration, Instant};
use crate::tree::{Rank, RankSet};

/// Parameters of a revoke run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RevokeParams {
    /// Number of ranks.
    pub ranks: u32,
    /// Tree radix (the tree carries the removal of the ranks crashed beforehand).
    pub radix: u32,
    /// The run's seed.
    pub seed: u64,
    /// Crash ranks before and during the flood (drawn from the seed).
    pub faults: bool,
    /// Frames take exactly the base latency (no jitter): first receipt is then over a shortest
    /// path, so the largest hop count is the overlay's diameter.
    pub exact: bool,
}

impl RevokeParams {
    /// The command that replays this run exactly, with a trace.
    pub fn replay_command(&self) -> String {
        format!(
            "cargo run --release -p lifeline-cli -- sim revoke --ranks {} --radix {} --seed {}{}{} --trace",
            self.ranks,
            self.radix,
            self.seed,
            if self.faults { " --faults" } else { "" },
            if self.exact { " --exact" } else { "" },
        )
    }
}

/// What a revoke run measured.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RevokeReport {
    /// Ranks at the start.
    pub ranks: u32,
    /// Members of the overlay when the revoke started (ranks not removed).
    pub members: u32,
    /// The overlay's degree and diameter for `members`.
    pub degree: u32,
    /// See `degree`.
    pub diameter: u32,
    /// The origin.
    pub origin: u32,
    /// Ranks crashed and removed before the revoke.
    pub removed: u32,
    /// Ranks crashed just before the revoke, not detected by anyone.
    pub undetected: u32,
    /// Ranks crashed while the notice flooded.
    pub crashed_during: u32,
    /// Ranks alive at the end (each got `Revoked` exactly once).
    pub survivors: u32,
    /// Hops to the farthest survivor, and the median and 99th percentile over survivors.
    pub hops_max: u32,
    /// See `hops_max`.
    pub hops_p50: u32,
    /// See `hops_max`.
    pub hops_p99: u32,
    /// Virtual time from the command to the last survivor's `Revoked`, and the median, in
    /// nanoseconds.
    pub latency_max_ns: u64,
    /// See `latency_max_ns`.
    pub latency_p50_ns: u64,
    /// Notices sent by the survivors (`RevokeStats::forwarded`, summed).
    pub notices: u64,
}

/// Records each rank's first `Revoked` (time, hops); counts repeats.
#[derive(Debug, Default)]
pub struct RevokeObserver {
    /// Per rank: (virtual time, hops) of its `Revoked`.
    got: Vec<Option<(Instant, u16)>>,
    duplicates: u64,
}

impl RevokeObserver {
    /// When and after how many hops `rank` got the revoke.
    pub fn got(&self, rank: Rank) -> Option<(Instant, u16)> {
        self.got.get(rank.index()).copied().flatten()
    }
}

impl Observer for RevokeObserver {
    fn on_event(&mut self, world: &World, rank: Rank, event: &Event) {
        if let Event::Revoke(RevokeEvent::Revoked { hops, .. }) = event {
            if self.got.len() <= rank.index() {
                self.got.resize(rank.index() + 1, None);
            }
            let slot = &mut self.got[rank.index()];
            if slot.is_some() {
                self.duplicates += 1;
            } else {
                *slot = Some((world.now(), *hops));
            }
        }
    }

    fn check(&mut self, _world: &World) -> Result<(), String> {
        if self.duplicates > 0 {
            return Err(format!("{} duplicate Revoked events", self.duplicates));
        }
        Ok(())
    }
}

/// Runs one revoke (see the module documentation); fails if a survivor never gets it or gets
/// it twice, or (fault-free) if the cost or the hop count is not the overlay's.
pub fn run_revoke(p: &RevokeParams, hooks: Hooks) -> Result<RevokeReport, SimFailure> {
    let mut cfg = SimConfig::new(p.ranks, p.radix, p.seed);
    if p.exact {
        cfg.net = NetConfig {
            jitter: Duration::ZERO,
            ..cfg.net
        };
    }
    let latency = cfg.net.latency;
    let mut sim = Sim::new(cfg, RevokeObserver::default()).map_err(|e| SimFailure {
        seed: p.seed,
        step: 0,
        now: Instant::ZERO,
        reason: format!("invalid configuration: {e}"),
        replay: p.replay_command(),
    })?;
    sim.set_replay(p.replay_command());
    sim.set_hooks(hooks);
    let budget = 64 * u64::from(p.ranks) + 1_000_000;
    let mut rng = Rng::new(p.seed).fork(0x5E70);
    let n = p.ranks;
    let pick_live = |sim: &Sim<RevokeObserver>, rng: &mut Rng, not: &RankSet| -> Option<Rank> {
        let live: Vec<Rank> = sim
            .world()
            .live_ranks()
            .filter(|r| !not.contains(*r))
            .collect();
        (!live.is_empty()).then(|| live[rng.below(live.len() as u64) as usize])
    };
    let mut report = RevokeReport {
        ranks: n,
        ..RevokeReport::default()
    };
    // Before: crash some ranks and let every survivor learn it (they leave the overlay).
    if p.faults && n > 4 {
        let removed = rng.below(u64::from(n / 8).min(8) + 1) as u32;
        let mut gone = RankSet::new();
        for _ in 0..removed {
            if let Some(r) = pick_live(&sim, &mut rng, &gone) {
                gone.insert(r);
                sim.apply(Fault::Crash(r));
            }
        }
        sim.run_until_quiet(budget)?;
        let dead = sim.world().crashed();
        for r in sim.world().live_ranks().collect::<Vec<_>>() {
            sim.command(r, |node, now| node.declare_dead(now, &dead));
        }
        sim.run_until_quiet(budget)?;
        report.removed = dead.len() as u32;
    }
    let members = n - report.removed;
    report.members = members;
    report.degree = degree(members);
    report.diameter = diameter(members);
    let Some(origin) = pick_live(&sim, &mut rng, &RankSet::new()) else {
        return Err(sim.failure("no live rank".into()));
    };
    report.origin = origin.0;
    let spare = report
        .degree
        .saturating_sub(1)
        .min(members.saturating_sub(2));
    if p.faults && spare > 0 {
        // Undetected: crashed an instant before the revoke. During: within the flood's
        // expected duration (diameter hops of base latency, plus some).
        let undetected = rng.below(u64::from(spare.min(3)) + 1) as u32;
        let during = rng.below(u64::from(spare - undetected) + 1) as u32;
        let mut spared = RankSet::from_iter([origin]);
        for _ in 0..undetected {
            if let Some(r) = pick_live(&sim, &mut rng, &spared) {
                spared.insert(r);
                sim.apply(Fault::Crash(r));
                report.undetected += 1;
            }
        }
        let window = latency.as_nanos() * u64::from(report.diameter + 2);
        for _ in 0..during {
            if let Some(r) = pick_live(&sim, &mut rng, &spared) {
                spared.insert(r);
                let at = sim.world().now() + Duration::from_nanos(rng.below(window));
                sim.schedule(at, Fault::Crash(r));
                report.crashed_during += 1;
            }
        }
    }
    let t0 = sim.world().now();
    let group = rng.next_u64();
    let before = notices(sim.world());
    match sim.command(origin, |node, now| node.revoke(now, group, 1)) {
        Some(Ok(())) => {}
        other => return Err(sim.failure(format!("the origin refused the revoke: {other:?}"))),
    }
    sim.run_until_quiet(budget)?;
    // Every survivor got it exactly once (the observer fails the run on a second).
    let mut hops = Vec::new();
    let mut lat = Vec::new();
    for r in sim.world().live_ranks() {
        let Some((at, h)) = sim.observer().got(r) else {
            return Err(sim.failure(format!("survivor {r} never got the revoke")));
        };
        hops.push(u32::from(h));
        lat.push((at - t0).as_nanos());
    }
    hops.sort_unstable();
    lat.sort_unstable();
    report.survivors = hops.len() as u32;
    report.hops_max = hops.last().copied().unwrap_or(0);
    report.hops_p50 = hops[hops.len() / 2];
    report.hops_p99 = hops[(hops.len() * 99 / 100).min(hops.len() - 1)];
    report.latency_max_ns = lat.last().copied().unwrap_or(0);
    report.latency_p50_ns = lat[lat.len() / 2];
    report.notices = notices(sim.world()) - before;
    if !p.faults {
        let (m, d) = (u64::from(members), u64::from(report.degree));
        let want = if m > 1 { d + (m - 1) * (d - 1) } else { 0 };
        if report.notices != want {
            return Err(sim.failure(format!(
                "{} notices for {m} members of degree {d}, expected {want}",
                report.notices
            )));
        }
        if p.exact && report.hops_max != report.diameter {
            return Err(sim.failure(format!(
                "farthest rank {} hops away, the overlay's diameter is {}",
                report.hops_max, report.diameter
            )));
        }
    }
    Ok(report)
}

/// Notices sent so far by the ranks alive now.
fn notices(w: &World) -> u64 {
    w.live_ranks()
        .filter_map(|r| w.node(r))
        .map(|n| n.revoke_stats().forwarded)
        .sum()
}

#[cfg(test)]
mod tests;
