//! The partition scenario on a few seeds, its plans, and its checker catching what it must.

use super::*;

/// 24 seeds up to 24 ranks, every plan kind: the checker (S1-S3, a minority decides nothing)
/// holds after every step in each. The liveness and end checks are counted and printed, not
/// asserted here: the sweep (`lifeline sim partition`) finds seeds where they fail, and
/// docs/partitions.md lists them with their replay lines.
#[test]
fn a_few_seeds_keep_every_invariant() {
    let mut kinds = BTreeMap::new();
    let mut failing = Vec::new();
    for seed in 1..=24 {
        let p = PartitionParams::varied(seed, 24);
        let r = run_partition(&p, Hooks::default()).unwrap_or_else(|f| panic!("{f}"));
        if !r.violations.is_empty() {
            failing.push((seed, r.kind, r.violations.len()));
        }
        *kinds.entry(r.kind).or_insert(0) += 1;
    }
    eprintln!("liveness or end checks failed in {failing:?}");
    // The plans cover every kind over these seeds.
    assert_eq!(kinds.len(), 5, "{kinds:?}");
}

/// The split, {0..5} | {6..15} on 16 ranks radix 8 (root in the minority), through the
/// scenario's oracle in full: the majority removes exactly the minority within the bound.
#[test]
fn the_majority_without_the_root_decides_in_time() {
    for seed in 1..=4 {
        let p = PartitionParams {
            ranks: 16,
            radix: 8,
            seed,
        };
        let mut cfg = SimConfig::new(p.ranks, p.radix, seed);
        cfg.node.detect.enabled = true;
        cfg.node.membership.quorum = true;
        let mut s = Sim::new(cfg, Checker::default()).unwrap();
        s.run_until(Instant::ZERO + WARM_UP).unwrap();
        let minority: Vec<Rank> = (0..6).map(Rank).collect();
        let sides = two_sides(16, &minority);
        arm(&mut s, 16, &sides);
        assert_eq!(
            s.observer().minority.as_ref().map(|m| m.len()),
            Some(6),
            "arm marks the lighter side only"
        );
        s.apply(Fault::Partition(sides));
        let t0 = s.world().now();
        let done = |w: &World, _: &Checker| {
            (6..16).all(|r| {
                removed(w, Rank(r))
                    .is_some_and(|x| x.len() == 6 && minority.iter().all(|m| x.contains(*m)))
            })
        };
        let at = s
            .run_checking(Duration::from_millis(5), t0 + LIVENESS_BOUND, done)
            .unwrap();
        assert!(
            done(s.world(), s.observer()),
            "seed {seed}: not decided by {at}"
        );
    }
}

#[test]
fn plans_are_drawn_from_the_seed_and_cover_every_member_once() {
    for seed in 0..200 {
        let p = PartitionParams::varied(seed, 64);
        assert!((8..=64).contains(&p.ranks) && (2..=8).contains(&p.radix));
        let a = plan(&p);
        assert_eq!(a, plan(&p), "seed {seed}: not reproducible");
        if let Some(sides) = a.sides() {
            let mut all: Vec<Rank> = sides.iter().flatten().copied().collect();
            all.sort_unstable();
            assert_eq!(
                all,
                (0..p.ranks).map(Rank).collect::<Vec<_>>(),
                "seed {seed}"
            );
            assert!(sides.iter().all(|s| !s.is_empty()), "seed {seed}: {a:?}");
        }
    }
}

/// The checker is not vacuous: a majority that removes the root, while the checker is told the
/// majority's ranks are a minority, is caught at the step the first of them applies the epoch.
#[test]
fn the_checker_catches_a_decision_on_a_side_it_was_told_is_a_minority() {
    let mut cfg = SimConfig::new(16, 8, 7);
    cfg.node.detect.enabled = true;
    cfg.node.membership.quorum = true;
    let mut s = Sim::new(cfg, Checker::default()).unwrap();
    s.run_until(Instant::ZERO + WARM_UP).unwrap();
    let rest: Vec<Rank> = (1..16).map(Rank).collect();
    arm(&mut s, 16, &[rest]);
    // `arm` only marks sides weighing at most half: 15 of 16 is a majority, so mark by hand.
    let at: BTreeMap<Rank, u64> = (1..16).map(|r| (Rank(r), 0)).collect();
    s.observer_mut().minority = Some(at);
    s.apply(Fault::Partition(vec![vec![Rank(0)]]));
    let e = s
        .run_until(Instant::ZERO + WARM_UP + Duration::from_secs(4))
        .expect_err("the majority decided, and the checker must say so");
    assert!(e.reason.contains("minority rank"), "{e}");
}

/// The late-leader defect the sweep found (docs/partitions.md): a candidate still at an epoch
/// before the last decided one wins phase 1; the promises report the last accepted value, a
/// delta on a view the candidate never applied. Seed 829 (43 ranks, radix 3) is the shape: a
/// duel in which candidate 3 decides epoch 1 = {0, 4, 17} and epoch 2 = {12}, and rank 39,
/// at epoch 0, wins phase 1 at ballot (2, 39) and re-proposed epoch 2's delta on its epoch-0
/// view ("epoch 2 ([12]) brings back 0"). The other three seeds of the sweep broke S1/S3 the
/// same way. Each run must keep S1-S3 and the minority rule after every step.
#[test]
fn a_leader_behind_on_epochs_catches_up_before_it_proposes() {
    for (ranks, radix, seed) in [(43, 3, 829), (29, 5, 117), (64, 4, 291), (54, 2, 717)] {
        let p = PartitionParams { ranks, radix, seed };
        if let Err(f) = run_partition(&p, Hooks::default()) {
            panic!("seed {seed} ({ranks} ranks, radix {radix}): {f}");
        }
    }
}

/// Seeds 118, 364 and 803 of the sweep: a candidate paused by the plan after the heal (the
/// pause is drawn 0-1.5 s after the cut, the cut was shorter) is removed while paused. The
/// scenario's resume at the heal came before the pause began, so the rank stayed paused to
/// the end and could not be told ("removed but never told"). A late pause now ends after
/// `LATE_PAUSE`; the rank, removed, must then hear `Evicted` within the settle.
#[test]
fn a_rank_paused_after_the_heal_is_told_once_it_resumes() {
    for (ranks, radix, seed) in [(38, 8, 118), (14, 2, 364), (20, 7, 803)] {
        let p = PartitionParams { ranks, radix, seed };
        let r = run_partition(&p, Hooks::default()).unwrap_or_else(|f| panic!("{f}"));
        assert!(
            !r.violations.iter().any(|v| v.contains("never told")),
            "seed {seed}: {:?}",
            r.violations
        );
    }
}

/// A simulator with the partition scenario's settings (detector and quorum views on), warmed
/// up to [`WARM_UP`].
fn warm(ranks: u32, radix: u32, seed: u64) -> Sim<Checker> {
    let mut cfg = SimConfig::new(ranks, radix, seed);
    cfg.node.detect.enabled = true;
    cfg.node.membership.quorum = true;
    let mut s = Sim::new(cfg, Checker::default()).unwrap();
    s.run_until(Instant::ZERO + WARM_UP).unwrap();
    s
}

/// Every rank some live rank's agreed view has removed.
fn removed_anywhere(w: &World) -> RankSet {
    let mut gone = RankSet::new();
    for r in w.live_ranks() {
        if let Some(x) = removed(w, r) {
            gone.extend(x.iter());
        }
    }
    gone
}

/// Seed 653's shape (issue #23, wrongful removals of one-way cuts): 8 ranks, radix 5, every
/// frame from {0, 1, 4, 6, 7} to {2, 3, 5} stalls for 7.3 s. The deaf side accuses everyone it
/// cannot hear; its candidate (rank 5, next behind the root) used to run phase 1 against the
/// root, the others promised (queued behind the cut), and at the heal it was elected and
/// removed rank 0, live and heard by everyone else. Now nobody of the side that hears is
/// removed (only the deaf side may be, as the sweep's oracle allows), and the deaf side's
/// candidate does not even run phase 1 at the heal: the first refutations discredit the deaf
/// observers whose downs they clear, the accusers of the root too, and the refute hold keeps
/// the candidate from acting on their word until the root's own refutation is in (without the
/// hold it prepared against rank 0 100 us after the heal, every 200 ms, and only the
/// acceptors' vouching stopped it).
#[test]
fn a_deaf_side_removes_nobody_it_cannot_hear_after_the_heal() {
    let mut s = warm(8, 5, 653);
    let deaf = [2, 3, 5];
    let hearing = [0, 1, 4, 6, 7];
    for &a in &hearing {
        for &b in &deaf {
            s.apply(Fault::CutOneWay(Rank(a), Rank(b)));
        }
    }
    let t0 = s.world().now();
    s.run_until(t0 + Duration::from_millis(7_315)).unwrap();
    s.apply(Fault::Heal);
    s.run_until(t0 + Duration::from_millis(7_315) + SETTLE)
        .unwrap();
    let gone = removed_anywhere(s.world());
    for r in hearing {
        assert!(
            !gone.contains(Rank(r)),
            "rank {r} (heard by the majority) removed: {gone:?}"
        );
    }
    for r in deaf {
        let q = s.world().node(Rank(r)).unwrap().quorum_stats();
        assert_eq!(q.prepares_started, 0, "rank {r} ran phase 1: {q:?}");
    }
}

/// Seed 524's shape (issue #23, wrongful removals of splits): 27 ranks, radix 2, 13 | 14 with
/// the root on the 14 side, the root crashed 94 ms into the cut (so neither side weighs more
/// than half), healed after 1.92 s. Rank 2, the root's successor, ran phase 1 meanwhile; its
/// promises came at the heal, carrying the evidence both sides had gathered against each
/// other, and as the new leader it removed all 26 other ranks from its own tree at once, went
/// silent to them, and was itself removed as unresponsive. Now only the crashed root is.
#[test]
fn a_leader_elected_at_the_heal_keeps_the_ranks_it_hears_again() {
    let mut s = warm(27, 2, 524);
    let one: Vec<Rank> = [1, 5, 8, 10, 11, 12, 15, 19, 21, 22, 24, 25, 26]
        .into_iter()
        .map(Rank)
        .collect();
    let other: Vec<Rank> = (0..27).map(Rank).filter(|r| !one.contains(r)).collect();
    s.apply(Fault::Partition(vec![one, other]));
    let t0 = s.world().now();
    s.schedule(t0 + Duration::from_millis(94), Fault::Crash(Rank(0)));
    s.run_until(t0 + Duration::from_millis(1_920)).unwrap();
    s.apply(Fault::Heal);
    s.run_until(t0 + Duration::from_millis(1_920) + SETTLE)
        .unwrap();
    let gone = removed_anywhere(s.world());
    assert!(
        gone.iter().all(|r| r == Rank(0)),
        "live ranks removed: {gone:?}"
    );
}

/// Seed 213's shape (issue #23, wrongful removals of one-way cuts; docs/partitions.md): 12
/// ranks, radix 8, every frame to {3, 4, 8, 10} stalls for 4.62 s. The deaf side accuses the
/// ranks it cannot hear; the implicit reporters made its accusations of 1 and 2 (the root's own
/// children, which it hears) stable, few enough for the majority guard, and the root removed
/// them with an accept quorum of its side. Now a coordinator removes nobody it hears itself
/// (`membership/quorum/vouch.rs`): nobody of the side that hears is removed.
#[test]
fn a_root_removes_no_rank_it_hears_on_a_deaf_sides_word() {
    let mut s = warm(12, 8, 213);
    let deaf = [3, 4, 8, 10];
    let hearing = [0, 1, 2, 5, 6, 7, 9, 11];
    for &a in &hearing {
        for &b in &deaf {
            s.apply(Fault::CutOneWay(Rank(a), Rank(b)));
        }
    }
    let t0 = s.world().now();
    s.run_until(t0 + Duration::from_millis(4_623)).unwrap();
    s.apply(Fault::Heal);
    s.run_until(t0 + Duration::from_millis(4_623) + SETTLE)
        .unwrap();
    let gone = removed_anywhere(s.world());
    for r in hearing {
        assert!(
            !gone.contains(Rank(r)),
            "rank {r} (heard by the root and its side) removed: {gone:?}"
        );
    }
}

/// The seeds of the 32-rank sweep that removed live ranks on main `b9c25e3` (one-way: 70, 111,
/// 213, 253, 361, 532, 888; split: 642, 771), and 13 (a pass on main that the first version of
/// vouching broke: a candidate's PREPARE queued behind the cut elected it at the heal with
/// promises from members that heard the root it removed), each through the scenario's full
/// oracle: nobody removed that the plan does not allow (docs/partitions.md, "Vouching").
#[test]
fn vouched_ranks_are_not_removed_in_the_sweeps_seeds() {
    for (ranks, radix, seed) in [
        (10, 8, 70),
        (30, 3, 111),
        (12, 8, 213),
        (12, 7, 253),
        (11, 6, 361),
        (27, 4, 532),
        (10, 6, 888),
        (24, 7, 642),
        (32, 3, 771),
        (16, 3, 13),
    ] {
        let p = PartitionParams { ranks, radix, seed };
        let r = run_partition(&p, Hooks::default()).unwrap_or_else(|f| panic!("{f}"));
        assert_eq!(
            r.wrongful_removals, 0,
            "seed {seed} ({ranks} ranks, radix {radix}): {:?}",
            r.violations
        );
    }
}

/// Seed 16 (11 ranks, radix 4, {0, 1, 4, 5, 7, 8} | the rest): the root's side is a slim
/// majority, and every subject of the root's reachability sample is on the other side. The
/// root refused on it and nobody decided; with quorum views the removal check keeps a root on
/// a minority side from removing anything, so the refusal is gone and the majority decides
/// within the bound (905 ms here).
#[test]
fn a_slim_majority_root_decides_though_its_sample_is_silent() {
    let p = PartitionParams {
        ranks: 11,
        radix: 4,
        seed: 16,
    };
    let r = run_partition(&p, Hooks::default()).unwrap_or_else(|f| panic!("{f}"));
    assert!(r.owed, "seed 16 owes liveness");
    assert!(r.violations.is_empty(), "{:?}", r.violations);
    assert!(
        r.decide_ms
            .is_some_and(|d| d <= LIVENESS_BOUND.as_millis_f64()),
        "{:?}",
        r.decide_ms
    );
}

/// Seeds 55, 206, 254 and 667 of the 32-rank sweep (seed 17's class, docs/partitions.md): the
/// lighter side holds the root and the next `membership.quorum_backups` candidates, so the
/// first candidate of the majority side is candidate `quorum_backups + 1`. It holds evidence
/// about every candidate ahead (it is a backup for each), but only candidates up to
/// `quorum_backups` ran for leader, and nobody decided. Now it runs, and the majority side
/// decides within the bound.
#[test]
fn the_first_candidate_past_the_backups_takes_over() {
    for (ranks, radix, seed) in [(25, 4, 55), (27, 5, 206), (16, 5, 254), (31, 3, 667)] {
        let p = PartitionParams { ranks, radix, seed };
        let r = run_partition(&p, Hooks::default()).unwrap_or_else(|f| panic!("{f}"));
        assert!(r.owed, "seed {seed} owes liveness");
        assert!(r.violations.is_empty(), "seed {seed}: {:?}", r.violations);
    }
}
