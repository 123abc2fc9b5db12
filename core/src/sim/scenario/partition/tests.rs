//! The partition scenario on a few seeds, its plans, and its checker catching what it must.

use super::*;

#[test]
fn a_few_seeds_keep_every_invariant() {
    let mut kinds = BTreeMap::new();
    for seed in 1..=24 {
        let p = PartitionParams::varied(seed, 24);
        let r = run_partition(&p, Hooks::default()).unwrap_or_else(|f| panic!("{f}"));
        assert!(r.violations.is_empty(), "seed {seed} {:?}: {:?}", plan(&p), r.violations);
        if r.owed {
            assert!(r.decide_ms.is_some(), "seed {seed}");
        }
        *kinds.entry(r.kind).or_insert(0) += 1;
    }
    // The plans cover every kind over these seeds.
    assert_eq!(kinds.len(), 5, "{kinds:?}");
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
            assert_eq!(all, (0..p.ranks).map(Rank).collect::<Vec<_>>(), "seed {seed}");
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
