//! The flood scenario: floods from random origins while ranks crash, shared by the tests, the
//! CLI (`lifeline sim flood`) and the scale bench.

use bytes::Bytes;

use crate::event::Event;
use crate::flood::FloodEvent;
use crate::rng::Rng;
use crate::sim::{Fault, Hooks, Observer, Sim, SimConfig, SimFailure, World};
use crate::time::{Duration, Instant};
use crate::tree::{Rank, RankSet};

/// Parameters of a flood run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FloodParams {
    /// Number of ranks.
    pub ranks: u32,
    /// Tree radix.
    pub radix: u32,
    /// The run's seed.
    pub seed: u64,
    /// Run the faulty variant: a safety phase with crashes, a pause, a cut and a partition
    /// (all drawn from the seed) while floods run, then heal and check liveness.
    pub faults: bool,
}

impl FloodParams {
    /// The command that replays this run exactly, with a trace.
    pub fn replay_command(&self) -> String {
        format!(
            "cargo run --release -p lifeline-cli -- sim flood --ranks {} --radix {} --seed {}{} --trace",
            self.ranks,
            self.radix,
            self.seed,
            if self.faults { " --faults" } else { "" }
        )
    }
}

/// What a flood run measured.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FloodReport {
    /// Ranks at the start.
    pub ranks: u32,
    /// Frames delivered to nodes.
    pub frames: u64,
    /// Simulator steps (queue entries processed).
    pub events: u64,
    /// Flood deliveries (application events).
    pub delivered: u64,
    /// Ranks crashed by the fault schedule.
    pub crashed: u32,
    /// Virtual time at the end, in nanoseconds.
    pub virtual_ns: u64,
}

/// Checks, after every step, that no rank delivers a flood twice.
#[derive(Debug, Default)]
pub struct FloodObserver {
    /// (flood index, ranks that delivered it); flood index = origin-independent order of start.
    delivered: Vec<((Rank, u64), RankSet)>,
    duplicates: u64,
    total: u64,
}

impl FloodObserver {
    /// Ranks that delivered the flood `(origin, id)`.
    pub fn delivered(&self, origin: Rank, id: u64) -> Option<&RankSet> {
        self.delivered
            .iter()
            .find(|(k, _)| *k == (origin, id))
            .map(|(_, s)| s)
    }

    /// Every delivery seen.
    pub fn total(&self) -> u64 {
        self.total
    }
}

impl Observer for FloodObserver {
    fn on_event(&mut self, _world: &World, rank: Rank, event: &Event) {
        if let Event::Flood(FloodEvent::Delivered { origin, id, .. }) = event {
            self.total += 1;
            let key = (*origin, *id);
            let set = match self.delivered.iter().position(|(k, _)| *k == key) {
                Some(i) => &mut self.delivered[i].1,
                None => {
                    self.delivered.push((key, RankSet::new()));
                    &mut self.delivered.last_mut().expect("just pushed").1
                }
            };
            if !set.insert(rank) {
                self.duplicates += 1;
            }
        }
    }

    fn check(&mut self, _world: &World) -> Result<(), String> {
        if self.duplicates > 0 {
            return Err(format!("{} duplicate flood deliveries", self.duplicates));
        }
        Ok(())
    }
}

/// Runs a flood scenario. Fault-free: the lowest rank floods once and every rank must deliver it
/// with exactly `n - 1` frames. Faulty: floods start during a safety phase of seeded faults;
/// then everything heals, every survivor is told the crashed set, and a final flood from the
/// root must reach every survivor exactly once.
pub fn run_flood(p: &FloodParams, hooks: Hooks) -> Result<FloodReport, SimFailure> {
    let cfg = SimConfig::new(p.ranks, p.radix, p.seed);
    let mut sim = Sim::new(cfg, FloodObserver::default()).map_err(|e| SimFailure {
        seed: p.seed,
        step: 0,
        now: Instant::ZERO,
        reason: format!("invalid configuration: {e}"),
        replay: p.replay_command(),
    })?;
    sim.set_replay(p.replay_command());
    sim.set_hooks(hooks);
    let budget = 64 * p.ranks as u64 + 1_000_000;
    let mut crashed = 0;
    if p.faults {
        crashed = safety_phase(&mut sim, p)?;
        sim.heal_all();
        sim.run_until_quiet(budget)?;
        // Liveness: with the crashed set known everywhere, views agree and a flood from the
        // root reaches every survivor.
        let dead = sim.world().crashed();
        for r in sim.world().live_ranks().collect::<Vec<_>>() {
            sim.command(r, |n, now| n.declare_dead(now, &dead));
        }
    }
    let root = sim.world().live_ranks().find(|&r| {
        sim.world()
            .node(r)
            .and_then(|n| n.tree().view())
            .is_some_and(|v| v.is_root())
    });
    let Some(root) = root else {
        return Err(sim.failure("no live root".into()));
    };
    let frames_before = sim.world().stats().frames_delivered;
    let id = sim
        .command(root, |n, now| n.flood(now, Bytes::from_static(b"lifeline")))
        .and_then(Result::ok)
        .ok_or_else(|| sim.failure("root refused the flood".into()))?;
    sim.run_until_quiet(budget)?;
    let live = sim.world().live_ranks().count() as u64;
    let got = sim
        .observer()
        .delivered(root, id)
        .map_or(0, |s| s.len() as u64);
    if got != live {
        return Err(sim.failure(format!("flood reached {got} of {live} survivors")));
    }
    let frames = sim.world().stats().frames_delivered - frames_before;
    if frames != live - 1 {
        return Err(sim.failure(format!(
            "flood used {frames} frames for {live} ranks, expected {}",
            live - 1
        )));
    }
    let w = sim.world();
    Ok(FloodReport {
        ranks: p.ranks,
        frames: w.stats().frames_delivered,
        events: w.stats().steps,
        delivered: sim.observer().total(),
        crashed,
        virtual_ns: w.now().as_nanos(),
    })
}

/// Seeded faults while floods run; returns how many ranks crashed.
fn safety_phase(sim: &mut Sim<FloodObserver>, p: &FloodParams) -> Result<u32, SimFailure> {
    let mut rng = Rng::new(p.seed).fork(0xFA17);
    let n = p.ranks;
    let ms = Duration::from_millis;
    let at = |x: u64| Instant::ZERO + ms(x);
    let pick = |rng: &mut Rng| Rank(rng.below(n as u64) as u32);
    // Up to 5% crashes (at least one when n > 2), spread over the first 20 ms.
    let crashes = if n > 2 {
        1 + rng.below((n as u64 / 20).max(1))
    } else {
        0
    };
    let mut crashed = RankSet::new();
    for _ in 0..crashes {
        let r = pick(&mut rng);
        if crashed.insert(r) {
            sim.schedule(at(rng.below(20)), Fault::Crash(r));
        }
    }
    let paused = pick(&mut rng);
    sim.schedule(at(2 + rng.below(5)), Fault::Pause(paused));
    sim.schedule(at(15 + rng.below(5)), Fault::Resume(paused));
    let (a, b) = (pick(&mut rng), pick(&mut rng));
    if a != b {
        sim.schedule(at(3), Fault::Cut(a, b));
    }
    let half: Vec<Rank> = (0..n).filter(|_| rng.chance(0.5)).map(Rank).collect();
    sim.schedule(at(8), Fault::Partition(vec![half]));
    sim.schedule(at(12), Fault::Heal);
    // Floods from random live origins every few milliseconds.
    for k in 0..8u64 {
        sim.run_until(at(3 * k))?;
        let origin = pick(&mut rng);
        sim.command(origin, |node, now| {
            node.flood(now, Bytes::from(k.to_be_bytes().to_vec()))
        });
    }
    sim.run_until(at(40))?;
    Ok(crashed.len() as u32)
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;
    use std::rc::Rc;

    use super::*;

    fn traced(p: &FloodParams) -> (Result<FloodReport, SimFailure>, String) {
        let buf = Rc::new(RefCell::new(String::new()));
        let sink = buf.clone();
        let hooks = Hooks {
            trace: Some(Box::new(move |l: &str| {
                let mut b = sink.borrow_mut();
                b.push_str(l);
                b.push('\n');
            })),
            ..Hooks::default()
        };
        let r = run_flood(p, hooks);
        let t = buf.borrow().clone();
        (r, t)
    }

    #[test]
    fn fault_free_flood_costs_n_minus_1_frames() {
        for (ranks, radix) in [(1, 2), (2, 2), (9, 2), (100, 3), (1000, 64)] {
            let p = FloodParams {
                ranks,
                radix,
                seed: 7,
                faults: false,
            };
            let r = run_flood(&p, Hooks::default()).unwrap();
            assert_eq!(r.frames, ranks as u64 - 1);
            assert_eq!(r.delivered, ranks as u64);
        }
    }

    #[test]
    fn same_seed_same_trace_under_faults() {
        let p = FloodParams {
            ranks: 200,
            radix: 4,
            seed: 42,
            faults: true,
        };
        let (a, ta) = traced(&p);
        let (b, tb) = traced(&p);
        let a = a.unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(a, b.unwrap());
        assert!(a.crashed > 0);
        assert!(ta.lines().count() > 1000, "trace too short:\n{ta}");
        for kind in [
            "fault    Crash",
            "fault    Pause",
            "fault    Partition",
            "linkdown",
            "deliver",
            "event",
        ] {
            assert!(ta.contains(kind), "trace lacks {kind}");
        }
        assert_eq!(ta, tb, "same seed must give a byte-identical trace");
        let (_, tc) = traced(&FloodParams { seed: 43, ..p });
        assert_ne!(ta, tc);
    }

    #[test]
    fn faulty_floods_over_many_seeds() {
        for seed in 0..40 {
            let p = FloodParams {
                ranks: 60,
                radix: 3,
                seed,
                faults: true,
            };
            if let Err(e) = run_flood(&p, Hooks::default()) {
                panic!("{e}");
            }
        }
    }
}
