use super::*;

fn run(ranks: u32, seed: u64, faults: bool, exact: bool) -> RevokeReport {
    let p = RevokeParams {
        ranks,
        radix: 4,
        seed,
        faults,
        exact,
    };
    run_revoke(&p, Hooks::default()).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn fault_free_costs_the_overlay_and_crosses_its_diameter() {
    for ranks in [1, 2, 3, 16, 100, 1000] {
        let r = run(ranks, 3, false, true);
        assert_eq!(r.survivors, ranks);
        assert_eq!(r.hops_max, r.diameter, "{r:?}");
        // One hop is the base latency (50 us); nothing else delays a notice.
        assert_eq!(r.latency_max_ns, u64::from(r.diameter) * 50_000, "{r:?}");
    }
    // With jitter the cost is the same; a path may be a hop longer than the shortest.
    let r = run(1000, 4, false, false);
    assert_eq!(r.survivors, 1000);
    assert!(r.hops_max <= r.diameter + 2, "{r:?}");
}

#[test]
fn crashes_before_and_during_over_many_seeds() {
    let mut crashed = 0;
    let mut worst = 0;
    for seed in 0..300 {
        let ranks = 16 + (seed as u32 * 37) % 300;
        let r = run(ranks, seed, true, false);
        assert_eq!(
            r.survivors,
            ranks - r.removed - r.undetected - r.crashed_during
        );
        assert!(r.undetected + r.crashed_during < r.degree.max(1), "{r:?}");
        crashed += r.undetected + r.crashed_during;
        worst = worst.max(r.latency_max_ns);
    }
    // The draws do crash ranks (the test would be vacuous otherwise) and the flood stays fast.
    assert!(crashed > 300, "only {crashed} crashes over 300 seeds");
    assert!(worst < 2_000_000, "slowest revoke {worst} ns");
}

#[test]
fn same_seed_same_report() {
    let a = run(200, 11, true, false);
    assert_eq!(a, run(200, 11, true, false));
    assert_ne!(a, run(200, 12, true, false));
}
