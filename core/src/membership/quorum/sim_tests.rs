//! Quorum views through real nodes in the simulator (detector on), fixed scenarios, with the
//! invariant checker of the partition scenario (`sim/scenario/partition/check.rs`: S1, S2, S3
//! and "a minority side decides nothing") run after every step. The randomized sweep over
//! splits, one-way cuts, flapping and coordinator faults is `sim/scenario/partition`.

use std::collections::BTreeMap;

use super::candidates;
use crate::sim::scenario::partition::Checker;
use crate::sim::{Fault, Sim, SimConfig, World};
use crate::time::{Duration, Instant};
use crate::tree::{Rank, RankSet};

/// A partition begins: `side` (without a weighted majority) must decide nothing from now on.
fn cut(s: &mut Sim<Checker>, side: &[Rank]) {
    let at: BTreeMap<Rank, u64> = side
        .iter()
        .map(|&r| (r, s.world().node(r).map_or(0, |n| n.view().epoch)))
        .collect();
    s.observer_mut().minority = Some(at);
}

fn sim(span: u32, radix: u32, seed: u64) -> Sim<Checker> {
    let mut cfg = SimConfig::new(span, radix, seed);
    cfg.node.detect.enabled = true;
    cfg.node.membership.quorum = true;
    Sim::new(cfg, Checker::default()).unwrap()
}

fn ranks(r: std::ops::Range<u32>) -> Vec<Rank> {
    r.map(Rank).collect()
}

fn removed_at(s: &Sim<Checker>, r: Rank) -> Vec<Rank> {
    s.world().node(r).unwrap().view().removed
}

/// Runs until every rank of `side` has `victims` removed in its agreed view; returns when, or
/// panics after `budget`.
fn until_agreed(
    s: &mut Sim<Checker>,
    side: &[Rank],
    victims: &[Rank],
    budget: Duration,
) -> Instant {
    let start = s.world().now();
    loop {
        let now = s.world().now();
        if side.iter().all(|&r| removed_at(s, r) == victims) {
            return now;
        }
        assert!(
            now - start <= budget,
            "seed {}: not agreed within {budget:?}: {:?}",
            s.world().seed(),
            side.iter()
                .map(|&r| (r.0, removed_at(s, r)))
                .collect::<Vec<_>>()
        );
        s.run_until(now + Duration::from_millis(5))
            .unwrap_or_else(|f| panic!("{f}"));
    }
}

/// The defect of issue #23: 16 ranks, {0..5} (holding the root) cut from {6..15} for 20 s.
/// The majority removes 0..5 in one epoch soon after detection; the minority decides nothing;
/// after the heal 0..5 are told (evicted) and no majority rank is removed.
fn partition_with_the_root_in_the_minority(seed: u64) -> Duration {
    let mut s = sim(16, 8, seed);
    s.run_until(Instant::ZERO + Duration::from_millis(500))
        .unwrap();
    let minority = ranks(0..6);
    let majority = ranks(6..16);
    let t0 = s.world().now();
    cut(&mut s, &minority);
    s.apply(Fault::Partition(vec![minority.clone()]));
    let at = until_agreed(&mut s, &majority, &minority, Duration::from_secs(3));
    // One epoch removed them all.
    let first = s
        .observer()
        .views
        .iter()
        .find(|(_, v)| !v.is_empty())
        .map(|(e, v)| (*e, v.clone()));
    assert_eq!(first.map(|f| f.1), Some(minority.clone()), "seed {seed}");
    s.run_until(t0 + Duration::from_secs(20))
        .unwrap_or_else(|f| panic!("{f}"));
    s.observer_mut().minority = None;
    s.apply(Fault::Heal);
    s.run_until(t0 + Duration::from_secs(24))
        .unwrap_or_else(|f| panic!("{f}"));
    for &r in &minority {
        assert!(
            s.observer().evicted.contains_key(&r),
            "seed {seed}: {r} not told it was removed"
        );
    }
    for &r in &majority {
        assert!(!s.observer().evicted.contains_key(&r), "seed {seed}: {r}");
        assert_eq!(removed_at(&s, r), minority, "seed {seed}: at {r}");
    }
    at - t0
}

#[test]
fn a_majority_without_the_root_continues_and_the_minority_decides_nothing() {
    let mut worst = Duration::ZERO;
    for seed in 1..=6 {
        let d = partition_with_the_root_in_the_minority(seed);
        eprintln!("seed {seed}: majority agreed {d:?} after the cut");
        worst = worst.max(d);
    }
    eprintln!("worst {worst:?}");
}

/// The root alone, cut off for good: the other 15 remove it within about a second; it decides
/// nothing.
#[test]
fn the_root_alone_partitioned_forever() {
    for seed in 1..=4 {
        let mut s = sim(16, 8, seed);
        s.run_until(Instant::ZERO + Duration::from_millis(500))
            .unwrap();
        let t0 = s.world().now();
        cut(&mut s, &[Rank(0)]);
        s.apply(Fault::Partition(vec![vec![Rank(0)]]));
        let at = until_agreed(&mut s, &ranks(1..16), &[Rank(0)], Duration::from_secs(2));
        eprintln!("seed {seed}: root removed {:?} after the cut", at - t0);
        s.run_until(t0 + Duration::from_secs(5))
            .unwrap_or_else(|f| panic!("{f}"));
        assert_eq!(s.world().node(Rank(0)).unwrap().view().epoch, 0);
    }
}

/// An even split, 8|8: only the side holding the root may decide (weight 17 of 33); the other
/// decides nothing (its candidate's rounds end without a quorum). Whether the root's side
/// decides depends on the root's reachability sample (the majority guard refuses when most of
/// it is silent): printed, not asserted.
#[test]
fn an_even_split_is_decided_by_the_root_side_only() {
    for seed in 1..=4 {
        let mut s = sim(16, 8, seed);
        s.run_until(Instant::ZERO + Duration::from_millis(500))
            .unwrap();
        let (a, b) = (ranks(0..8), ranks(8..16));
        let t0 = s.world().now();
        cut(&mut s, &b);
        s.apply(Fault::Partition(vec![a.clone()]));
        s.run_until(t0 + Duration::from_secs(5))
            .unwrap_or_else(|f| panic!("{f}"));
        let stuck: u64 = b
            .iter()
            .map(|&r| {
                s.world()
                    .node(r)
                    .unwrap()
                    .quorum_stats()
                    .proposals_without_quorum
            })
            .sum();
        assert!(stuck > 0, "seed {seed}: the losing side never tried");
        eprintln!(
            "seed {seed}: root side removed {:?}; losing side's rounds without quorum: {stuck}",
            removed_at(&s, Rank(0))
        );
    }
}

/// A rank lost, then the root crashes while its decision is open: the survivors agree on both
/// removals, one view per epoch.
#[test]
fn the_root_crashes_mid_decision() {
    for seed in 1..=6 {
        let mut s = sim(16, 8, seed);
        s.run_until(Instant::ZERO + Duration::from_millis(500))
            .unwrap();
        s.apply(Fault::Pause(Rank(5)));
        // Until the root proposes (or at most 2 s).
        let root_proposed = |w: &World, _: &Checker| {
            w.node(Rank(0))
                .is_none_or(|n| n.quorum_stats().proposals > 0)
                || w.now() > Instant::ZERO + Duration::from_millis(2500)
        };
        s.run_until_pred(10_000_000, root_proposed)
            .unwrap_or_else(|f| panic!("{f}"));
        s.apply(Fault::Crash(Rank(0)));
        let survivors: Vec<Rank> = (1..16).filter(|&r| r != 5).map(Rank).collect();
        until_agreed(
            &mut s,
            &survivors,
            &[Rank(0), Rank(5)],
            Duration::from_secs(3),
        );
    }
}

/// The first two candidates lost one after the other, 40 ms apart: the third takes over; a
/// candidate that began phase 1 and is lost mid-way is outvoted by ballots.
#[test]
fn candidates_lost_in_a_row_hand_over_by_ballots() {
    for seed in 1..=6 {
        let mut s = sim(16, 8, seed);
        s.run_until(Instant::ZERO + Duration::from_millis(500))
            .unwrap();
        let layout = *s.world().node(Rank(1)).unwrap().tree().layout();
        let c = candidates(&layout, &RankSet::new(), 3);
        s.apply(Fault::Pause(c[0]));
        let t = s.world().now();
        s.run_until(t + Duration::from_millis(300 + 10 * seed))
            .unwrap_or_else(|f| panic!("{f}"));
        s.apply(Fault::Pause(c[1]));
        let survivors: Vec<Rank> = (0..16)
            .map(Rank)
            .filter(|r| *r != c[0] && *r != c[1])
            .collect();
        let mut victims = vec![c[0], c[1]];
        victims.sort_unstable();
        until_agreed(&mut s, &survivors, &victims, Duration::from_secs(4));
    }
}

/// Many seeds of the partition scenario (release builds run it in CI's time).
#[test]
fn partition_over_many_seeds() {
    // `LIFELINE_QUORUM_SEEDS=1000` for the long run.
    let seeds = std::env::var("LIFELINE_QUORUM_SEEDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if cfg!(debug_assertions) { 4 } else { 60 });
    let mut worst = Duration::ZERO;
    for seed in 100..100 + seeds {
        worst = worst.max(partition_with_the_root_in_the_minority(seed));
    }
    eprintln!("{seeds} seeds: worst {worst:?}");
}

/// The partition of issue #23 on a loaded host: three of the root's observers on the majority
/// side (7, 10 and 15 by the default rings) are starved throughout, frozen for 150–250 ms at a
/// time with 100–300 ms awake in between, as processes on an oversubscribed machine are. The
/// evidence against the root needs them (H of its K observers). The majority still removes the
/// minority within 2.5 s, and nobody else. Before the detector credited a freeze instead of
/// restarting every silence timeout from zero, a starved observer never accused anyone (every
/// cycle held a freeze), the root's evidence never became stable and the majority never took
/// over (the real 16-node run under load: 3.8 s, and 7.6 s once in CI).
#[test]
fn a_partition_fails_over_with_starved_observers() {
    let mut worst = Duration::ZERO;
    for seed in 1..=4 {
        let mut s = sim(16, 8, seed);
        s.run_until(Instant::ZERO + Duration::from_millis(500))
            .unwrap();
        let (minority, majority) = (ranks(0..6), ranks(6..16));
        let t0 = s.world().now();
        let mut rng = crate::rng::Rng::new(seed);
        for r in [Rank(7), Rank(10), Rank(15)] {
            let mut t = t0 + Duration::from_millis(rng.below(300));
            while t < t0 + Duration::from_secs(6) {
                let stall = Duration::from_millis(150 + rng.below(101));
                s.schedule(t, Fault::Pause(r));
                s.schedule(t + stall, Fault::Resume(r));
                t = t + stall + Duration::from_millis(100 + rng.below(201));
            }
        }
        cut(&mut s, &minority);
        s.apply(Fault::Partition(vec![minority.clone()]));
        let at = until_agreed(&mut s, &majority, &minority, Duration::from_millis(2_500));
        eprintln!(
            "seed {seed}: starved observers, majority agreed {:?} after the cut",
            at - t0
        );
        worst = worst.max(at - t0);
        // Past the starvation: still exactly the minority removed.
        s.run_until(t0 + Duration::from_secs(7))
            .unwrap_or_else(|f| panic!("{f}"));
        for &r in &majority {
            assert_eq!(removed_at(&s, r), minority, "seed {seed}: at {r}");
        }
    }
    eprintln!("worst {worst:?}");
}

/// Tree rounds (`tree_round.rs`): 256 ranks, radix 8. A paused rank (soft evidence: removal
/// check, then phase 2) and a crashed one are removed at every other rank, and the root
/// handles a few dozen agreement frames for both, not two per member and round: its children
/// gather their subtrees' answers. With direct rounds (`quorum_tree_min` at `u32::MAX`) the
/// root received 870 frames here (seed 1; a check and a phase 2 of 254 members each).
#[test]
fn tree_rounds_remove_at_256_ranks_through_the_roots_children() {
    for seed in 1..=2 {
        let mut s = sim(256, 8, seed);
        s.run_until(Instant::ZERO + Duration::from_millis(1_500))
            .unwrap_or_else(|f| panic!("{f}"));
        let root_in = |s: &Sim<Checker>| s.world().node(Rank(0)).unwrap().stats().frames_in;
        let before = root_in(&s);
        let t0 = s.world().now();
        let (paused, crashed) = (Rank(5), Rank(77));
        s.apply(Fault::Pause(paused));
        s.apply(Fault::Crash(crashed));
        let rest: Vec<Rank> = (0..256)
            .map(Rank)
            .filter(|r| *r != paused && *r != crashed)
            .collect();
        let victims = vec![paused, crashed];
        let at = until_agreed(&mut s, &rest, &victims, Duration::from_secs(3));
        let frames = root_in(&s) - before;
        let q = s.world().node(Rank(0)).unwrap().quorum_stats();
        eprintln!(
            "seed {seed}: agreed {:?} after the faults; root: {frames} frames in, {} tree rounds, \
             {} direct re-sends",
            at - t0,
            q.tree_rounds,
            q.proposals_without_quorum
        );
        assert!(q.tree_rounds >= 2, "seed {seed}: {q:?}");
        // Heartbeats (8 subjects at 10 Hz), alerts and tree traffic over the detection time
        // are a few hundred at most; two direct rounds alone would be 508.
        assert!(frames < 400, "seed {seed}: root received {frames} frames");
    }
}
