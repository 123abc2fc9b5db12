//! Criterion benchmarks of the routing tree at 2^20 ranks, radix 64, with and without the
//! `scale repair` scenario's 4096 failures (seed 1: victims drawn from the subtree of rank 1).
//!
//! - `view`: [`View::compute`] for a leaf, an interior rank (the failed subtree's root, 64 child
//!   slots) and the root.
//! - `route`: [`Tree::route`] between random live pairs (the tree of the source, one hop).
//! - `mark_dead_batch`: [`Tree::mark_dead`] of the 4096 victims at once, on a fresh tree seen
//!   from the failed subtree's root (whose child slots are repaired).
//!
//! Measurement times are short so `cargo bench -p lifeline-bench` finishes in well under a
//! minute on a shared machine.

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion};
use lifeline_bench::repair::{Config, Scenario};
use lifeline_bench::rng::SplitMix64;
use lifeline_core::tree::{Rank, RankSet, Scope, Tree, View};

const SPAN: u32 = 1 << 20;
const RADIX: u32 = 64;
const FAILED: u32 = 4096;
/// Source trees and (source, destination) pairs for the `route` benchmark (powers of two).
const ROUTE_TREES: usize = 32;
const ROUTE_PAIRS: usize = 4096;

fn scenario() -> Scenario {
    Scenario::new(&Config {
        ranks: SPAN,
        radix: RADIX,
        branch: FAILED,
        seed: 1,
    })
    .expect("the benchmark scenario is valid")
}

/// A uniformly random rank that is not in `dead`.
fn live_rank(rng: &mut SplitMix64, dead: &RankSet) -> Rank {
    loop {
        let r = Rank(rng.below(u64::from(SPAN)) as u32);
        if !dead.contains(r) {
            return r;
        }
    }
}

fn view(c: &mut Criterion) {
    let sc = scenario();
    let none = RankSet::new();
    let interior = sc.subtree.root();
    // The highest-ranked survivor of the failed subtree: a leaf at the deepest layer.
    let leaf = sc
        .subtree
        .iter()
        .filter(|&r| !sc.dead.contains(r))
        .max()
        .expect("the subtree has survivors");
    assert_eq!(sc.layout.child_count(leaf), 0);
    let mut g = c.benchmark_group("view");
    for (failures, dead) in [("no_failures", &none), ("4096_failures", &sc.dead)] {
        for (kind, rank) in [("leaf", leaf), ("interior", interior), ("root", Rank::ROOT)] {
            g.bench_with_input(BenchmarkId::new(failures, kind), &rank, |b, &r| {
                b.iter(|| View::compute(black_box(&sc.layout), black_box(dead), black_box(r)))
            });
        }
    }
    g.finish();
}

fn route(c: &mut Criterion) {
    let sc = scenario();
    let mut g = c.benchmark_group("route");
    for (failures, dead) in [
        ("no_failures", RankSet::new()),
        ("4096_failures", sc.dead.clone()),
    ] {
        let mut rng = SplitMix64::new(2);
        let trees: Vec<Tree> = (0..ROUTE_TREES)
            .map(|_| {
                let me = live_rank(&mut rng, &dead);
                Tree::with_dead(sc.layout, dead.clone(), me).expect("a live rank in the span")
            })
            .collect();
        let pairs: Vec<(usize, Rank)> = (0..ROUTE_PAIRS)
            .map(|_| {
                let src = rng.below(ROUTE_TREES as u64) as usize;
                (src, live_rank(&mut rng, &dead))
            })
            .collect();
        g.bench_function(failures, |b| {
            let mut i = 0usize;
            b.iter(|| {
                let (src, dst) = pairs[i % ROUTE_PAIRS];
                i = i.wrapping_add(1);
                trees[src].route(black_box(dst))
            })
        });
    }
    g.finish();
}

fn mark_dead_batch(c: &mut Criterion) {
    let sc = scenario();
    let me = sc.subtree.root();
    c.bench_function("mark_dead_batch/4096", |b| {
        b.iter_batched(
            || Tree::new(SPAN, RADIX, me).expect("valid tree"),
            |mut t| t.mark_dead(black_box(&sc.victims), Scope::Global),
            BatchSize::SmallInput,
        )
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    targets = view, route, mark_dead_batch
}
criterion_main!(benches);
