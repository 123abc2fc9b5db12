//! `scale shrink`'s tests: the branch, the two repair paths against the tree, the CLI.

use super::*;

fn argv(s: &str) -> Vec<String> {
    s.split_whitespace().map(str::to_owned).collect()
}

#[test]
fn branch_is_whole_subtrees_of_the_first_slots() {
    let l = Layout::new(1 << 20, 64).unwrap();
    let b = Branch::pick(&l, 4096).unwrap();
    assert_eq!((b.parent, b.slots, b.targets.len()), (Rank(1), 16, 4096));
    let l = Layout::new(1 << 16, 64).unwrap();
    let b = Branch::pick(&l, 4096).unwrap();
    assert_eq!((b.parent, b.slots, b.targets.len()), (Rank(0), 4, 4096));
    // Radix 2, 10 ranks, every branch size.
    let l = Layout::new(10, 2).unwrap();
    for m in 1..=9 {
        let b = Branch::pick(&l, m).unwrap();
        assert!(b.targets.len() >= m as usize);
        let roots: Vec<Rank> = (0..b.slots)
            .map(|j| l.child(b.parent, j).unwrap())
            .collect();
        // Exactly the union of those slots' fault-free subtrees, the parent not among them.
        let brute: Vec<Rank> = (0..10)
            .map(Rank)
            .filter(|&r| roots.iter().any(|&c| l.in_subtree(c, r)))
            .collect();
        assert_eq!(b.targets, brute, "m={m}");
        assert!(!b.targets.contains(&b.parent));
        // The fewest slots: one fewer would not reach m.
        let short: u64 = roots[..roots.len() - 1]
            .iter()
            .map(|&c| l.subtree_len(c))
            .sum();
        assert!(short < u64::from(m), "m={m}");
    }
}

#[test]
fn impossible_shapes_are_usage_errors() {
    let l = Layout::new(100, 4).unwrap();
    assert!(matches!(Branch::pick(&l, 0), Err(CliError::Usage(_))));
    assert!(matches!(Branch::pick(&l, 100), Err(CliError::Usage(_))));
    assert!(Branch::pick(&l, 99).is_ok());
    // Outside the span: no tree (not a panic); a notice naming such a rank changes nothing.
    assert!(apply_notices(&l, Rank(100), &[vec![Rank(1)]]).is_none());
    let (w, t) = apply_notices(&l, Rank(2), &[vec![Rank(100)]]).unwrap();
    assert_eq!((w.recomputes, t.dead().len()), (0, 0));
    for bad in [
        "--ranks 100 --radix 4",
        "--ranks 100 --radix 4 --branch 0",
        "--ranks 100 --radix 1 --branch 3",
        "--ranks 100 --radix 4 --branch 3 --sim-ranks 1",
        "--ranks 100 --radix 4 --branch x",
        "--ranks 100 --radix 4 --branch 3 --bogus 1",
        "--ranks 100 --radix 4 --branch 3 --paths some",
        "--ranks 100 --radix 4 --branch 3 --sim-ranks 4294967295",
    ] {
        let r = Config::from_args(&argv(bad)).and_then(|c| run(&c, Instant::now()));
        assert!(matches!(r, Err(CliError::Usage(_))), "{bad}: {r:?}");
    }
    assert_eq!(
        Config::from_args(&argv("--help")).unwrap_err(),
        CliError::Help
    );
    let c = Config::from_args(&argv("--ranks 1048576 --radix 64 --branch 4096 --detect")).unwrap();
    assert_eq!(
        (c.sim_ranks, c.detect, c.seed),
        (DEFAULT_SIM_RANKS, true, 1)
    );
    assert!(c.per_death_sim);
    let c = Config::from_args(&argv("--ranks 100 --radix 4 --branch 3 --paths campaign")).unwrap();
    assert!(!c.per_death_sim && !c.detect);
}

/// Every survivor, whatever the path, ends in the same tree: the view of the batched repair,
/// which is the view computed from scratch with every target dead. Only the candidates (the
/// parent and its ancestors) ever change their view, on either path, at any notice.
#[test]
fn both_paths_end_in_the_same_tree_and_only_candidates_change() {
    for (span, radix, m) in [
        (10, 2, 3),
        (10, 2, 1),
        (100, 4, 7),
        (300, 3, 40),
        (500, 5, 30),
    ] {
        let l = Layout::new(span, radix).unwrap();
        let b = Branch::pick(&l, m).unwrap();
        let dead: RankSet = b.targets.iter().copied().collect();
        let cands = b.candidates(&l);
        for seed in 0..3 {
            let order = death_order(&b.targets, seed);
            let one_by_one: Vec<Vec<Rank>> = order.iter().map(|&r| vec![r]).collect();
            for r in (0..span).map(Rank).filter(|r| !dead.contains(*r)) {
                let (wa, ta) = apply_notices(&l, r, std::slice::from_ref(&b.targets)).unwrap();
                let (wb, tb) = apply_notices(&l, r, &one_by_one).unwrap();
                let want = View::compute(&l, &dead, r).unwrap();
                assert_eq!(ta.view(), Some(&want), "span={span} r={r}");
                assert_eq!(tb.view(), Some(&want), "span={span} r={r} seed={seed}");
                assert_eq!(ta.dead(), tb.dead());
                if !cands.contains(&r) {
                    assert_eq!(wa.view_changes + wb.view_changes, 0, "span={span} r={r}");
                }
                assert_eq!(wa.recomputes, 1);
                assert_eq!(wb.recomputes, b.targets.len() as u64);
            }
        }
    }
}

/// The counts at every rank are what the views say, computed independently from the dead set
/// after each notice.
#[test]
fn counts_are_what_the_tree_says() {
    for (span, radix, m) in [(10, 2, 3), (100, 4, 7), (300, 3, 40), (1000, 8, 100)] {
        let l = Layout::new(span, radix).unwrap();
        let b = Branch::pick(&l, m).unwrap();
        let order = death_order(&b.targets, 7);
        let one_by_one: Vec<Vec<Rank>> = order.iter().map(|&r| vec![r]).collect();
        for r in (0..span).map(Rank) {
            let (w, _) = apply_notices(&l, r, &one_by_one).unwrap();
            // Independent count: the view after each prefix of the order.
            let mut dead = RankSet::new();
            let mut prev = View::compute(&l, &dead, r).unwrap();
            let (mut rec, mut changes, mut promoted, mut rewired) = (0, 0, 0, 0);
            for &d in &order {
                if d == r {
                    break;
                }
                dead.insert(d);
                rec += 1;
                let now = View::compute(&l, &dead, r).unwrap();
                if now != prev {
                    changes += 1;
                    promoted += u64::from(now.depth() < prev.depth());
                    rewired += u64::from(now.parent() != prev.parent());
                    let (a, z) = (prev.children(), now.children());
                    rewired += (0..a.len().max(z.len()))
                        .filter(|&i| {
                            let (o, n) = (a.get(i).copied().flatten(), z.get(i).copied().flatten());
                            (o.is_some() || n.is_some()) && (o != n || prev.slot() != now.slot())
                        })
                        .count() as u64;
                }
                prev = now;
            }
            assert_eq!(
                (w.recomputes, w.view_changes, w.promoted, w.rewired),
                (rec, changes, promoted, rewired),
                "span={span} r={r}"
            );
        }
        // The batched path at the parent: one recompute, one view change, each drained slot
        // emptied, no promotion.
        let (w, _) = apply_notices(&l, b.parent, std::slice::from_ref(&b.targets)).unwrap();
        assert_eq!(
            (
                w.recomputes,
                w.view_changes,
                w.promoted,
                w.rewired,
                w.affected
            ),
            (1, 1, 0, u64::from(b.slots), 1)
        );
        let rw = repair_work(&l, &b, &order);
        assert_eq!((rw.batched.affected, rw.per_death.affected), (1, 1));
        assert_eq!(rw.per_death.recomputes, b.targets.len() as u64);
        assert!(rw.per_death.view_changes >= u64::from(b.slots));
        // Targets still running on the per-death path recompute once per earlier notice.
        let n = b.targets.len() as u64;
        assert_eq!(rw.per_death_targets.recomputes, n * (n - 1) / 2);
    }
}

#[test]
fn small_run_reports_consistent_numbers() {
    let c = Config::from_args(&argv("--ranks 4096 --radix 8 --branch 64 --sim-ranks 512")).unwrap();
    let r = run(&c, Instant::now()).unwrap();
    assert_eq!(r.work.batched.recomputes, 1);
    assert_eq!(r.work.per_death.recomputes, r.branch.targets.len() as u64);
    let sim = r.sim.as_ref().unwrap();
    assert_eq!(sim.failed_checks(), None);
    assert_eq!(sim.campaign.view_changes, 1);
    assert_eq!(sim.campaign.completions, 1);
    assert_eq!(sim.campaign.failure_verdicts, 0);
    let (order, done) = (
        sim.campaign.order_done_ms.unwrap(),
        sim.campaign.completion_ms.unwrap(),
    );
    assert!(0.0 < order && order <= done, "{order} {done}");
    let d = sim.per_death.as_ref().unwrap();
    assert!(d.completion_ms.unwrap() > 0.0);
    assert_eq!(d.survivors_missing, 0);
    // Each target's removal changes the parent's view at least once on the per-death path.
    assert!(d.parent_passes >= 1 && d.view_changes >= 1);
    let json = r.json();
    let v: Value = serde_json::from_str(&json).unwrap();
    assert!(json.starts_with(r#"{"ranks":4096,"radix":8,"branch":64,"targets":"#));
    assert_eq!(v["sim"]["campaign"]["completions"], 1);
    assert!(v["ratio_recomputes"].as_f64().unwrap() >= 1.0);
}

/// With the heartbeat detector on, the campaign still gives no failure verdict for a target,
/// one view change and one repair pass, and the per-death path still removes every target.
#[test]
fn small_run_with_the_detector() {
    let c = Config::from_args(&argv(
        "--ranks 1024 --radix 8 --branch 64 --sim-ranks 512 --detect --seed 3",
    ))
    .unwrap();
    let r = run(&c, Instant::now()).unwrap();
    let sim = r.sim.as_ref().unwrap();
    assert!(sim.detect);
    assert_eq!(sim.failed_checks(), None);
    assert_eq!(sim.campaign.repair_passes_max, 1);
    let d = sim.per_death.as_ref().unwrap();
    assert_eq!(d.survivors_missing, 0);
    assert!(
        d.failure_verdicts > 0,
        "a crash is a failure, not a departure"
    );
}
