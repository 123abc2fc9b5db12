//! Named edge cases 1–11 of `docs/edge-cases.md` and property tests against a naive reference.

use proptest::prelude::*;

use super::*;

fn r(v: u32) -> Rank {
    Rank(v)
}

fn ranks(v: &[u32]) -> Vec<Rank> {
    v.iter().copied().map(Rank).collect()
}

fn dead(v: &[u32]) -> RankSet {
    v.iter().copied().map(Rank).collect()
}

fn view(span: u32, radix: u32, failed: &[u32], me: u32) -> View {
    View::compute(&Layout::new(span, radix).unwrap(), &dead(failed), r(me)).unwrap()
}

fn kids(v: &View) -> Vec<Option<u32>> {
    v.children().iter().map(|c| c.map(|c| c.0)).collect()
}

// ---------------------------------------------------------------------------------------------
// The deliberately naive reference: the declarative rule over explicit pre-order lists.
// ---------------------------------------------------------------------------------------------

struct Naive {
    /// occupant[slot]
    occupant: Vec<Option<u32>>,
    parent: Vec<Option<u32>>,
    children: Vec<Vec<u32>>,
}

impl Naive {
    fn new(span: u32, k: u32, dead: &RankSet) -> Self {
        let n = span as usize;
        // Base tree by brute force: layer sizes k^d, children r + j·k^d.
        let mut depth = vec![0u32; n];
        let mut width = vec![1u64; n];
        let (mut start, mut w, mut d) = (0u64, 1u64, 0u32);
        for rank in 0..n as u64 {
            while rank >= start + w {
                start += w;
                w *= k as u64;
                d += 1;
            }
            depth[rank as usize] = d;
            width[rank as usize] = w;
        }
        let mut children = vec![Vec::new(); n];
        let mut parent = vec![None; n];
        for rank in 0..n {
            for j in 1..=k as u64 {
                let c = rank as u64 + j * width[rank];
                if c < span as u64 {
                    children[rank].push(c as u32);
                    parent[c as usize] = Some(rank as u32);
                }
            }
        }
        fn rfpre(children: &[Vec<u32>], s: u32, out: &mut Vec<u32>) {
            out.push(s);
            for &c in children[s as usize].iter().rev() {
                rfpre(children, c, out);
            }
        }
        let mut occupant: Vec<Option<u32>> = vec![None; n];
        // Ranks are in depth order, so every ancestor slot is decided before its descendants.
        for s in 0..n {
            let mut anc_occ = Vec::new();
            let mut a = parent[s];
            while let Some(x) = a {
                anc_occ.extend(occupant[x as usize]);
                a = parent[x as usize];
            }
            let mut order = Vec::new();
            rfpre(&children, s as u32, &mut order);
            occupant[s] = order
                .into_iter()
                .find(|&x| !dead.contains(Rank(x)) && !anc_occ.contains(&x));
        }
        Self {
            occupant,
            parent,
            children,
        }
    }

    /// (slot, ancestors root first, children by slot trimmed) of a live rank.
    fn view(&self, me: u32) -> Option<(u32, Vec<u32>, Vec<Option<u32>>)> {
        let slot = self.occupant.iter().position(|&o| o == Some(me))? as u32;
        let mut anc = Vec::new();
        let mut a = self.parent[slot as usize];
        while let Some(x) = a {
            anc.push(self.occupant[x as usize].expect("ancestor slot of a live slot is occupied"));
            a = self.parent[x as usize];
        }
        anc.reverse();
        let mut ch: Vec<Option<u32>> = self.children[slot as usize]
            .iter()
            .map(|&c| self.occupant[c as usize])
            .collect();
        while ch.last() == Some(&None) {
            ch.pop();
        }
        Some((slot, anc, ch))
    }
}

fn assert_matches_naive(span: u32, k: u32, failed: &RankSet) {
    let layout = Layout::new(span, k).unwrap();
    let naive = Naive::new(span, k, failed);
    for me in 0..span {
        let got = View::compute(&layout, failed, r(me));
        match naive.view(me) {
            None => assert!(
                failed.contains(r(me)),
                "k={k} span={span} rank {me} has no slot"
            ),
            Some((slot, anc, ch)) => {
                let v = got.unwrap_or_else(|e| panic!("k={k} span={span} me={me}: {e}"));
                let ctx = format!("k={k} span={span} dead={failed} me={me}");
                assert_eq!(v.slot().0, slot, "{ctx}");
                assert_eq!(
                    v.ancestors().iter().map(|a| a.0).collect::<Vec<_>>(),
                    anc,
                    "{ctx}"
                );
                assert_eq!(kids(&v), ch, "{ctx}");
                assert_eq!(v.depth() as usize, anc.len(), "{ctx}");
            }
        }
    }
}

/// All views of a tree, `None` for dead ranks.
fn all_views(layout: &Layout, failed: &RankSet) -> Vec<Option<View>> {
    (0..layout.span())
        .map(|me| View::compute(layout, failed, r(me)).ok())
        .collect()
}

/// Every survivor's parent lists it; depths are consistent; exactly one root.
fn assert_consistent(layout: &Layout, failed: &RankSet, views: &[Option<View>]) {
    let mut roots = 0;
    for v in views.iter().flatten() {
        match v.parent() {
            None => roots += 1,
            Some(p) => {
                let pv = views[p.index()].as_ref().expect("parent alive");
                assert!(
                    pv.children().contains(&Some(v.me())),
                    "{p} does not list child {} (dead {failed})",
                    v.me()
                );
                assert_eq!(v.depth(), pv.depth() + 1);
            }
        }
        for c in v.live_children() {
            assert_eq!(views[c.index()].as_ref().unwrap().parent(), Some(v.me()));
        }
    }
    let alive = layout.span() as usize - failed.len();
    assert_eq!(roots, usize::from(alive > 0));
}

/// Follows routes from `src` to `dst` through everyone's views; returns the hop count.
fn hops(
    layout: &Layout,
    failed: &RankSet,
    views: &[Option<View>],
    src: u32,
    dst: u32,
) -> Option<u32> {
    let mut at = r(src);
    let mut n = 0;
    loop {
        match views[at.index()].as_ref()?.route(layout, failed, r(dst)) {
            Route::Local => return Some(n),
            Route::Unreachable => return None,
            Route::Next(x) => {
                at = x;
                n += 1;
                if n > 2 * layout.max_depth() + 2 {
                    panic!("route {src}->{dst} loops (dead {failed})");
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Edge cases 1–11.
// ---------------------------------------------------------------------------------------------

/// 1. One parent per rank, and the views of a fault-free tree reach all `n` ranks from the root
///    (the walk covers the `>= n` boundary bug), for radix and span around k-boundaries.
#[test]
fn edge_01_shape_at_radix_boundaries() {
    for k in [2u32, 3, 4, 8, 64] {
        for n in [1, 2, k, k + 1, k * k, k * k + 1, 64] {
            let layout = Layout::new(n, k).unwrap();
            let none = RankSet::new();
            let views = all_views(&layout, &none);
            assert_consistent(&layout, &none, &views);
            let mut stack = vec![r(0)];
            let mut seen = 0;
            while let Some(x) = stack.pop() {
                seen += 1;
                stack.extend(views[x.index()].as_ref().unwrap().live_children());
            }
            assert_eq!(seen, n, "k={k} n={n}");
            assert_matches_naive(n, k, &none);
        }
    }
}

/// 2. Batch, one-at-a-time and shuffled orders give identical views; the PRRTE reproducer
///    (n=15, k=2, kill 1, then 5, then 13) keeps 9's branch under rank 0.
#[test]
fn edge_02_order_independence_n15_kill_1_5_13() {
    let orders: [&[u32]; 3] = [&[1, 5, 13], &[13, 1, 5], &[5, 13, 1]];
    let mut finals = Vec::new();
    for order in orders {
        let mut trees: Vec<Tree> = (0..15).map(|me| Tree::new(15, 2, r(me)).unwrap()).collect();
        for &d in order {
            for t in &mut trees {
                t.mark_dead(&[r(d)], Scope::Local).unwrap();
            }
        }
        let views: Vec<Option<View>> = trees.iter().map(|t| t.view().cloned()).collect();
        finals.push(views);
    }
    let mut batch: Vec<Tree> = (0..15).map(|me| Tree::new(15, 2, r(me)).unwrap()).collect();
    for t in &mut batch {
        t.mark_dead(&ranks(&[1, 5, 13]), Scope::Local).unwrap();
    }
    let batch_views: Vec<Option<View>> = batch.iter().map(|t| t.view().cloned()).collect();
    for f in &finals {
        assert_eq!(f, &batch_views);
    }
    let layout = Layout::new(15, 2).unwrap();
    let failed = dead(&[1, 5, 13]);
    assert_consistent(&layout, &failed, &batch_views);
    let v0 = batch_views[0].as_ref().unwrap();
    assert_eq!(
        kids(v0),
        [Some(9), Some(2)],
        "rank 0 must adopt 9 into slot 1"
    );
    let v9 = batch_views[9].as_ref().unwrap();
    assert_eq!((v9.slot(), v9.parent()), (r(1), Some(r(0))));
    assert_eq!(kids(v9), [Some(3)]);
    for dst in [9, 3, 7, 11] {
        assert!(
            hops(&layout, &failed, &batch_views, 0, dst).is_some(),
            "0 -> {dst}"
        );
    }
}

/// 3. Promotion chains, on PRRTE's real layout.
#[test]
fn edge_03_promotion_chains() {
    // n=9, k=2, kill {1}: RFPre(1) = [1,5,3,7], 5 (a leaf) takes slot 1.
    let v5 = view(9, 2, &[1], 5);
    assert_eq!((v5.slot(), v5.depth(), v5.parent()), (r(1), 1, Some(r(0))));
    assert_eq!(kids(&v5), [Some(3)]);
    assert_eq!(kids(&view(9, 2, &[1], 0)), [Some(5), Some(2)]);
    assert_eq!(view(9, 2, &[1], 3).ancestors(), ranks(&[0, 5]).as_slice());
    let v7 = view(9, 2, &[1], 7);
    assert_eq!(
        (v7.ancestors(), v7.parent()),
        (ranks(&[0, 5, 3]).as_slice(), Some(r(3)))
    );

    // n=15, kill parent and grandparent {1,5}: 13 takes slot 1, 9 takes slot 5.
    let v13 = view(15, 2, &[1, 5], 13);
    assert_eq!((v13.slot(), v13.parent()), (r(1), Some(r(0))));
    assert_eq!(kids(&v13), [Some(3), Some(9)]);
    let v9 = view(15, 2, &[1, 5], 9);
    assert_eq!(
        (v9.slot(), v9.ancestors()),
        (r(5), ranks(&[0, 13]).as_slice())
    );

    // n=9, kill a whole subtree {3,7,8}: slot 3 empty but kept, 4 loses its only child.
    assert_eq!(kids(&view(9, 2, &[3, 7, 8], 1)), [None, Some(5)]);
    assert_eq!(kids(&view(9, 2, &[3, 7, 8], 4)), []);
    assert_eq!(view(9, 2, &[3, 7, 8], 5).parent(), Some(r(1)));

    // n=9, kill {4,6}: 8 takes slot 4 (depth 2) under 2; slot 6 is a dead leaf, trimmed.
    let v8 = view(9, 2, &[4, 6], 8);
    assert_eq!((v8.slot(), v8.depth(), v8.parent()), (r(4), 2, Some(r(2))));
    assert!(v8.children().is_empty());
    assert_eq!(kids(&view(9, 2, &[4, 6], 2)), [Some(8)]);

    // n=10, kill {1,5} (the dockerswarm case): RFPre(1) = [1,5,9,3,7], 9 takes slot 1, 3
    // re-homes under 9 although 9 never had a link to 1.
    let v9 = view(10, 2, &[1, 5], 9);
    assert_eq!((v9.slot(), kids(&v9)), (r(1), vec![Some(3)]));
    assert_eq!(view(10, 2, &[1, 5], 3).parent(), Some(r(9)));
}

/// 4. A root-only survivor set, and root failover: the root slot is filled by the same rule.
#[test]
fn edge_04_root_only_survivor_and_root_failover() {
    let all_but_0: Vec<u32> = (1..9).collect();
    let v0 = view(9, 2, &all_but_0, 0);
    assert!(v0.is_root() && v0.children().is_empty());

    // Root death is defined: RFPre(0) = [0,2,6,4,8,1,5,3,7], so 2 becomes the root.
    let v2 = view(9, 2, &[0], 2);
    assert!(v2.is_root());
    assert_eq!((v2.slot(), kids(&v2)), (r(0), vec![Some(1), Some(6)]));
    let v6 = view(9, 2, &[0], 6);
    assert_eq!(
        (v6.slot(), v6.parent(), kids(&v6)),
        (r(2), Some(r(2)), vec![Some(4)])
    );
    assert_eq!(view(9, 2, &[0], 1).parent(), Some(r(2)));

    // A lone survivor anywhere becomes the root with no children.
    let all_but_7: Vec<u32> = (0..9).filter(|&x| x != 7).collect();
    let v7 = view(9, 2, &all_but_7, 7);
    assert!(v7.is_root() && v7.children().is_empty() && v7.ancestors().is_empty());

    // The failover is an ordinary delta, and the dead root has no view.
    let mut t2 = Tree::new(9, 2, r(2)).unwrap();
    let d = t2.mark_dead(&[r(0)], Scope::Local).unwrap().unwrap();
    assert!(d.promoted && d.parent_changed() && d.new_parent.is_none());
    let mut t0 = Tree::new(9, 2, r(0)).unwrap();
    let d = t0.mark_dead(&[r(0)], Scope::Global).unwrap().unwrap();
    assert!(d.self_dead() && t0.view().is_none());
    assert_eq!(t0.route(r(3)), Route::Unreachable);
}

/// 5. Routes from every survivor to every rank: live targets within 2·depth hops, dead ones
///    unreachable without looping, and a target promoted into my ancestor slot routes up.
#[test]
fn edge_05_routes_every_survivor_to_every_rank() {
    for (n, k, failed) in [
        (9, 2, vec![1]),
        (9, 2, vec![3, 7, 8]),
        (15, 2, vec![1, 5]),
        (15, 2, vec![0, 1]),
        (100, 3, vec![1, 4, 5, 13, 40, 41]),
    ] {
        let layout = Layout::new(n, k).unwrap();
        let failed = dead(&failed);
        let views = all_views(&layout, &failed);
        for src in (0..n).filter(|&s| !failed.contains(r(s))) {
            for dst in 0..n {
                let h = hops(&layout, &failed, &views, src, dst);
                if failed.contains(r(dst)) {
                    assert_eq!(h, None);
                } else {
                    assert!(h.unwrap() <= 2 * layout.max_depth(), "{src}->{dst}");
                }
            }
            assert_eq!(
                views[src as usize]
                    .as_ref()
                    .unwrap()
                    .route(&layout, &failed, r(n)),
                Route::Unreachable
            );
        }
    }
    // n=15, kill {1}: 5 takes slot 1 and 13 takes slot 5; for 13, target 5 sits in its slot's
    // base subtree but occupies an ancestor slot, so the route goes up.
    let layout = Layout::new(15, 2).unwrap();
    let v13 = view(15, 2, &[1], 13);
    assert_eq!(v13.slot(), r(5));
    assert_eq!(v13.route(&layout, &dead(&[1]), r(5)), Route::Next(r(5)));
}

/// 6. Ancestry reconciliation: AGREED, INFERRED (one and several deaths), STALE, INCONSISTENT;
///    a short `[root]` report is not padded; a report naming a root death terminates.
#[test]
fn edge_06_reconcile_ancestry() {
    let t5 = Tree::new(9, 2, r(5)).unwrap();
    assert_eq!(t5.reconcile(&ranks(&[0, 1])), Reconcile::Agreed);
    // Adoption notice [0] from 0 to 5 after 1 died: infer {1}; [0] is not padded into [0,2].
    assert_eq!(t5.reconcile(&ranks(&[0])), Reconcile::Inferred(dead(&[1])));
    let t3 = Tree::new(9, 2, r(3)).unwrap();
    assert_eq!(
        t3.reconcile(&ranks(&[0, 5])),
        Reconcile::Inferred(dead(&[1]))
    );
    let t3 = Tree::new(10, 2, r(3)).unwrap();
    assert_eq!(
        t3.reconcile(&ranks(&[0, 9])),
        Reconcile::Inferred(dead(&[1, 5]))
    );
    // A report naming a rank I know is dead is stale.
    let mut t3 = Tree::new(9, 2, r(3)).unwrap();
    t3.mark_dead(&[r(1)], Scope::Local).unwrap();
    assert_eq!(t3.reconcile(&ranks(&[0, 1])), Reconcile::Stale);
    // Longer than my lineage can be, naming me, or outside the tree: inconsistent.
    let t3 = Tree::new(9, 2, r(3)).unwrap();
    assert_eq!(t3.reconcile(&ranks(&[0, 1, 7])), Reconcile::Inconsistent);
    assert_eq!(t3.reconcile(&ranks(&[0, 3])), Reconcile::Inconsistent);
    assert_eq!(t3.reconcile(&ranks(&[0, 2])), Reconcile::Inconsistent);
    assert_eq!(t3.reconcile(&ranks(&[0, 99])), Reconcile::Inconsistent);
    // A root death: rank 3 hears its lineage is [2] (2 became root, 1 and 5 died too).
    assert_eq!(
        t3.reconcile(&ranks(&[2])),
        Reconcile::Inferred(dead(&[0, 1, 5]))
    );
    // Any report terminates, even one that keeps killing roots.
    let big = Tree::new(2000, 2, r(1999)).unwrap();
    for report in [vec![1998], vec![1000, 3], vec![1500]] {
        let _ = big.reconcile(&ranks(&report));
    }
}

/// 7. Duplicate and reordered notices are idempotent; a known death triggers no repair.
#[test]
fn edge_07_duplicate_and_reordered_notices_idempotent() {
    let mut a = Tree::new(9, 2, r(1)).unwrap();
    let mut b = Tree::new(9, 2, r(1)).unwrap();
    assert!(a
        .mark_dead(&ranks(&[3, 7]), Scope::Local)
        .unwrap()
        .is_some());
    assert!(b.mark_dead(&ranks(&[7]), Scope::Local).unwrap().is_none());
    assert!(b.mark_dead(&ranks(&[3]), Scope::Local).unwrap().is_some());
    assert_eq!(a.view(), b.view());
    assert_eq!(a.mark_dead(&ranks(&[3, 7, 3]), Scope::Local).unwrap(), None);
    // A global confirmation of known deaths changes the confirmed set but not the view.
    assert_eq!(a.mark_dead(&ranks(&[3]), Scope::Global).unwrap(), None);
    assert!(a.confirmed().contains(r(3)) && !a.confirmed().contains(r(7)));
    // An out-of-range rank refuses the whole batch and changes nothing.
    let before = a.clone();
    assert!(a.mark_dead(&ranks(&[5, 9]), Scope::Local).is_err());
    assert_eq!(a.dead(), before.dead());
}

/// 8. A re-homed child re-reports its subtree's unconfirmed failures to the new parent (the
///    upward notice to the old parent may have died with it).
#[test]
fn edge_08_rehomed_child_rereports_unconfirmed_subtree_failures() {
    let mut t3 = Tree::new(15, 2, r(3)).unwrap();
    t3.mark_dead(&[r(7)], Scope::Local).unwrap(); // reported upward to 1, then 1 dies
    t3.mark_dead(&[r(13)], Scope::Global).unwrap(); // outside 3's subtree anyway
    let d = t3.mark_dead(&[r(1)], Scope::Local).unwrap().unwrap();
    assert!(d.parent_changed());
    assert_eq!(d.new_parent, Some(r(5)));
    assert_eq!(t3.unconfirmed_in_subtree(), ranks(&[7]));
    t3.mark_dead(&[r(7)], Scope::Global).unwrap();
    assert_eq!(t3.unconfirmed_in_subtree(), ranks(&[]));
}

/// 9. Silent co-failure: 3 and 7 die together and nobody holds a link to 7. Rank 1 first
///    promotes 7 into slot 3 (it cannot know better); the bounded connect attempt that then
///    fails reports 7, and the slot empties.
#[test]
fn edge_09_silent_cofailure_promotes_then_empties() {
    let mut t1 = Tree::new(9, 2, r(1)).unwrap();
    let d = t1.mark_dead(&[r(3)], Scope::Local).unwrap().unwrap();
    assert_eq!(d.added_children().collect::<Vec<_>>(), [r(7)]);
    assert_eq!(kids(t1.view().unwrap()), [Some(7), Some(5)]);
    let d = t1.mark_dead(&[r(7)], Scope::Local).unwrap().unwrap();
    assert_eq!(d.removed_children().collect::<Vec<_>>(), [r(7)]);
    assert_eq!(kids(t1.view().unwrap()), [None, Some(5)]);
    assert_eq!(t1.route(r(7)), Route::Unreachable);
}

/// 10. Grow after failures: the dead set survives; a new rank whose raw parent is a hole joins
///     from the snapshot; a grow that changes a dead slot's occupant yields a demotion delta.
#[test]
fn edge_10_grow_after_failures() {
    // k=2: rank 2 shrunk away at span 4, then grow to 5. Rank 4's raw parent is the hole 2.
    let mut t0 = Tree::new(4, 2, r(0)).unwrap();
    t0.mark_dead(&[r(2)], Scope::Global).unwrap();
    let d = t0.grow(5).unwrap().unwrap();
    assert_eq!(d.added_children().collect::<Vec<_>>(), [r(4)]);
    assert!(t0.dead().contains(r(2)) && t0.confirmed().contains(r(2)));
    let snap = Snapshot::decode(&t0.snapshot().to_bytes(), MAX_SPAN).unwrap();
    let t4 = Tree::from_snapshot(&snap, r(4)).unwrap();
    let v4 = t4.view().unwrap();
    assert_eq!((v4.slot(), v4.parent()), (r(2), Some(r(0))));
    assert_eq!(kids(t0.view().unwrap()), [Some(1), Some(4)]);

    // k=2, span 4 with 1 dead: 3 holds slot 1. Grow to 6: 5 takes slot 1, 3 is demoted under it.
    let mut t3 = Tree::new(4, 2, r(3)).unwrap();
    t3.mark_dead(&[r(1)], Scope::Global).unwrap();
    assert_eq!(t3.view().unwrap().slot(), r(1));
    let d = t3.grow(6).unwrap().unwrap();
    assert!(d.demoted && d.parent_changed());
    assert_eq!((d.old_parent, d.new_parent), (Some(r(0)), Some(r(5))));
    let mut t0 = Tree::new(4, 2, r(0)).unwrap();
    t0.mark_dead(&[r(1)], Scope::Global).unwrap();
    let d = t0.grow(6).unwrap().unwrap();
    assert_eq!(
        d.child_changes[0],
        ChildChange {
            index: 0,
            old: Some(r(3)),
            new: Some(r(5))
        }
    );
    assert!(matches!(
        t0.grow(5),
        Err(TreeError::SpanShrink { from: 6, to: 5 })
    ));
}

/// 11. Lateral links never trigger a tree repair; a tree neighbour also used laterally does.
#[test]
fn edge_11_lateral_links_never_repair() {
    let t0 = Tree::new(9, 2, r(0)).unwrap();
    assert_eq!(t0.link_role(r(8)), LinkRole::Lateral);
    assert_eq!(t0.link_role(r(1)), LinkRole::Child(0));
    assert_eq!(t0.link_role(r(2)), LinkRole::Child(1));
    let t3 = Tree::new(9, 2, r(3)).unwrap();
    assert_eq!(t3.link_role(r(1)), LinkRole::Parent);
    assert_eq!(t3.link_role(r(7)), LinkRole::Child(0));
    assert_eq!(t3.link_role(r(5)), LinkRole::Lateral);
    // After a repair the roles follow the view: 7 becomes 1's child once 3 dies.
    let mut t1 = Tree::new(9, 2, r(1)).unwrap();
    assert_eq!(t1.link_role(r(7)), LinkRole::Lateral);
    t1.mark_dead(&[r(3)], Scope::Local).unwrap();
    assert_eq!(t1.link_role(r(7)), LinkRole::Child(0));
}

// ---------------------------------------------------------------------------------------------
// Property tests against the naive reference.
// ---------------------------------------------------------------------------------------------

fn arb_tree() -> impl Strategy<Value = (u32, u32, RankSet)> {
    (2u32..=70, 1u32..=2000)
        .prop_flat_map(|(k, n)| {
            let max_dead = (n as usize).min(400);
            (
                Just(k),
                Just(n),
                prop::collection::vec(0..n, 0..=max_dead),
                0u32..4,
            )
        })
        .prop_map(|(k, n, v, shape)| {
            // Mix scattered failures with whole dead subtrees and dead prefixes.
            let mut set: RankSet = v.into_iter().map(Rank).collect();
            let layout = Layout::new(n, k).unwrap();
            if shape == 1 && n > 1 {
                let root = Rank(1 + (set.len() as u32 % (n - 1)));
                for x in 0..n {
                    if layout.in_subtree(root, Rank(x)) {
                        set.insert(Rank(x));
                    }
                }
            }
            if shape == 2 {
                set.insert_range(Rank(0), Rank((n / 4).min(n - 1)));
            }
            (k, n, set)
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    /// Views match the naive declarative rule; parents and children agree; depths chain.
    #[test]
    fn views_match_naive_reference((k, n, failed) in arb_tree()) {
        assert_matches_naive(n, k, &failed);
        let layout = Layout::new(n, k).unwrap();
        assert_consistent(&layout, &failed, &all_views(&layout, &failed));
    }

    /// A rank's standby parent is the parent the view computed with its current parent also
    /// dead gives it (sampled live ranks; the root and a rank its parent's death makes root have
    /// none).
    #[test]
    fn standby_parent_is_the_parent_after_the_parents_death((k, n, failed) in arb_tree(), seed in any::<u64>()) {
        let layout = Layout::new(n, k).unwrap();
        let mut x = seed | 1;
        for _ in 0..64 {
            x ^= x << 13; x ^= x >> 7; x ^= x << 17;
            let me = (x % n as u64) as u32;
            if failed.contains(r(me)) { continue; }
            let tree = Tree::with_dead(layout, failed.clone(), r(me)).unwrap();
            let Some(parent) = tree.view().unwrap().parent() else {
                prop_assert_eq!(tree.standby_parent(), None);
                continue;
            };
            let mut without = failed.clone();
            without.insert(parent);
            let after = View::compute(&layout, &without, r(me)).unwrap().parent();
            prop_assert_eq!(tree.standby_parent(), after);
            prop_assert_ne!(after, Some(parent));
        }
    }

    /// Every live pair routes within 2·depth hops (sampled pairs); dead targets are unreachable.
    #[test]
    fn live_pairs_route_within_two_depths((k, n, failed) in arb_tree(), seed in any::<u64>()) {
        let layout = Layout::new(n, k).unwrap();
        let views = all_views(&layout, &failed);
        let mut x = seed | 1;
        for _ in 0..400 {
            x ^= x << 13; x ^= x >> 7; x ^= x << 17;
            let (src, dst) = ((x % n as u64) as u32, ((x >> 32) % n as u64) as u32);
            if failed.contains(r(src)) { continue; }
            let h = hops(&layout, &failed, &views, src, dst);
            if failed.contains(r(dst)) {
                prop_assert_eq!(h, None);
            } else {
                prop_assert!(h.is_some_and(|h| h <= 2 * layout.max_depth()));
            }
        }
    }

    /// Batch = one at a time = shuffled order, at every rank.
    #[test]
    fn batch_equals_sequential_equals_shuffled((k, n, failed) in arb_tree(), seed in any::<u64>()) {
        let mut order: Vec<Rank> = failed.iter().collect();
        let mut shuffled = order.clone();
        let mut x = seed | 1;
        for i in (1..shuffled.len()).rev() {
            x ^= x << 13; x ^= x >> 7; x ^= x << 17;
            shuffled.swap(i, (x % (i as u64 + 1)) as usize);
        }
        order.reverse();
        for me in (0..n).step_by(((n / 50) as usize).max(1)) {
            let mut batch = Tree::new(n, k, r(me)).unwrap();
            batch.mark_dead(&failed.iter().collect::<Vec<_>>(), Scope::Local).unwrap();
            let mut seq = Tree::new(n, k, r(me)).unwrap();
            for &d in &order { seq.mark_dead(&[d], Scope::Local).unwrap(); }
            let mut shuf = Tree::new(n, k, r(me)).unwrap();
            for &d in &shuffled { shuf.mark_dead(&[d], Scope::Local).unwrap(); }
            prop_assert_eq!(batch.view(), seq.view());
            prop_assert_eq!(batch.view(), shuf.view());
        }
    }

    /// Growing the span with holes equals computing the grown tree from scratch, and the
    /// snapshot a joiner receives reproduces everyone's view.
    #[test]
    fn grow_and_snapshot_match_fresh((k, n, failed) in arb_tree(), extra in 0u32..500) {
        let grown = n + extra;
        let fresh = Layout::new(grown, k).unwrap();
        for me in (0..n).step_by(((n / 40) as usize).max(1)) {
            let mut t = Tree::with_dead(Layout::new(n, k).unwrap(), failed.clone(), r(me)).unwrap();
            t.grow(grown).unwrap();
            prop_assert_eq!(t.view().cloned(), View::compute(&fresh, &failed, r(me)).ok());
            let snap = Snapshot::decode(&t.snapshot().to_bytes(), MAX_SPAN).unwrap();
            let joiner = Tree::from_snapshot(&snap, r(me)).unwrap();
            prop_assert_eq!(joiner.view(), t.view());
        }
    }

    /// The range-list text form round-trips.
    #[test]
    fn rankset_text_round_trip(v in prop::collection::vec(0u32..5000, 0..300)) {
        let s: RankSet = v.iter().copied().map(Rank).collect();
        prop_assert_eq!(s.to_string().parse::<RankSet>().unwrap(), s.clone());
        prop_assert_eq!(s.len(), s.iter().count());
        let mut sorted = v.clone(); sorted.sort_unstable(); sorted.dedup();
        prop_assert_eq!(s.iter().map(|r| r.0).collect::<Vec<_>>(), sorted);
    }
}
