//! `scale rankset`: `RankSet::contains` (a run list or a dense bitset, whichever is smaller,
//! `core/src/tree/rank.rs`) against the dense bitset it replaced, on the dead sets of two
//! benches at the same span, in one run.
//!
//! - **shrink**: the targets of `scale shrink` (whole subtrees in the first child slots of one
//!   rank, [`crate::shrink::Branch`]): a few long runs, so the set is a run list.
//! - **scattered**: the victims of `scale repair` (drawn at random inside one subtree,
//!   [`crate::repair::Scenario`]): thousands of short runs, so the set may be dense.
//!
//! Each set is probed with the same seeded queries: half uniform over the span (mostly
//! misses, what routing asks of a live rank) and half members (hits). The baseline is the old
//! representation, copied here: one bit per rank up to the highest member. Reported per set:
//! ns per lookup for each, their ratio (new over old), and the heap each holds.

use std::hint::black_box;
use std::time::Instant;

use lifeline_core::tree::{Layout, Rank, RankSet};
use serde_json::Value;

use crate::args::{CliError, Flags};
use crate::report::{json_line, median};
use crate::rng::SplitMix64;
use crate::{repair, shrink};

/// Usage text of the subcommand.
pub const USAGE: &str = "\
usage: scale rankset [--ranks N] [--radix K] [--branch M] [--lookups L] [--seed S]

Times RankSet::contains against the dense bitset it replaced, on the dead set of a shrink
campaign (scale shrink's branch of >= M ranks) and on M scattered victims (scale repair's),
at span N (default 1048576), radix K (default 64), M = 4096 by default, L lookups per timed
pass (default 1000000, median of 5 passes), seed S (default 1).

The last stdout line is JSON: {\"ranks\",\"radix\",\"branch\",\"lookups\",\"shrink\":{...},
\"scattered\":{...}}, each with ns_old, ns_new, ratio (new/old), bytes_old, bytes_new, runs.";

/// Timed passes per representation; the median is reported.
const PASSES: usize = 5;

/// The dense bitset `RankSet` was before it learned run lists (the baseline).
struct DenseBaseline {
    words: Vec<u64>,
}

impl DenseBaseline {
    fn new(set: &RankSet) -> Self {
        let mut words = vec![0u64; set.max().map_or(0, |m| (m.0 >> 6) as usize + 1)];
        for r in set {
            words[(r.0 >> 6) as usize] |= 1u64 << (r.0 & 63);
        }
        Self { words }
    }

    #[inline]
    fn contains(&self, r: Rank) -> bool {
        let w = (r.0 >> 6) as usize;
        match self.words.get(w) {
            Some(word) => word & (1u64 << (r.0 & 63)) != 0,
            None => false,
        }
    }
}

/// One set's figures.
#[derive(Clone, Copy, Debug)]
pub struct Lookup {
    /// Median ns per lookup, dense baseline.
    pub ns_old: f64,
    /// Median ns per lookup, `RankSet`.
    pub ns_new: f64,
    /// Heap of the dense baseline.
    pub bytes_old: usize,
    /// Heap of the `RankSet`.
    pub bytes_new: usize,
    /// Maximal runs in the set.
    pub runs: usize,
    /// Hits among the queries (both answered the same, checked).
    pub hits: u64,
}

/// Times both representations of `set` on `queries`; fails if they ever disagree.
pub fn measure(set: &RankSet, queries: &[Rank]) -> Result<Lookup, CliError> {
    let old = DenseBaseline::new(set);
    let mut hits = 0u64;
    for &q in queries {
        if old.contains(q) != set.contains(q) {
            return Err(CliError::Failed(format!("contains({q}) differs")));
        }
        hits += u64::from(set.contains(q));
    }
    let time = |f: &dyn Fn(Rank) -> bool| {
        let mut v: Vec<f64> = (0..PASSES)
            .map(|_| {
                let t = Instant::now();
                let mut n = 0u64;
                for &q in queries {
                    n += u64::from(f(black_box(q)));
                }
                black_box(n);
                t.elapsed().as_nanos() as f64 / queries.len().max(1) as f64
            })
            .collect();
        median(&mut v)
    };
    Ok(Lookup {
        ns_old: time(&|q| old.contains(q)),
        ns_new: time(&|q| set.contains(q)),
        bytes_old: old.words.len() * 8,
        bytes_new: set.heap_bytes(),
        runs: set.ranges().count(),
        hits,
    })
}

/// Half uniform queries over `[0, span)`, half members of `set`, shuffled.
fn queries(set: &RankSet, span: u32, n: usize, rng: &mut SplitMix64) -> Vec<Rank> {
    let members: Vec<Rank> = set.iter().collect();
    let mut q: Vec<Rank> = (0..n)
        .map(|i| {
            if i % 2 == 0 || members.is_empty() {
                Rank(rng.below(u64::from(span)) as u32)
            } else {
                members[rng.below(members.len() as u64) as usize]
            }
        })
        .collect();
    rng.shuffle(&mut q);
    q
}

fn json(l: &Lookup) -> Value {
    serde_json::json!({
        "ns_old": l.ns_old, "ns_new": l.ns_new, "ratio": l.ns_new / l.ns_old,
        "bytes_old": l.bytes_old, "bytes_new": l.bytes_new, "runs": l.runs, "hits": l.hits,
    })
}

/// Entry point of `scale rankset`.
pub fn cli(args: &[String]) -> Result<(), CliError> {
    if args.iter().any(|a| a == "-h" || a == "--help") {
        return Err(CliError::Help);
    }
    let f = Flags::parse(args, &["ranks", "radix", "branch", "lookups", "seed"])?;
    let ranks: u32 = f.get("ranks", Some(1 << 20))?;
    let radix: u32 = f.get("radix", Some(64))?;
    let branch: u32 = f.get("branch", Some(4096))?;
    let lookups: usize = f.get("lookups", Some(1_000_000))?;
    let seed: u64 = f.get("seed", Some(1))?;
    let layout = Layout::new(ranks, radix).map_err(|e| CliError::Usage(e.to_string()))?;
    let shrink_set: RankSet = shrink::Branch::pick(&layout, branch)?
        .targets
        .into_iter()
        .collect();
    let scattered = repair::Scenario::new(&repair::Config {
        ranks,
        radix,
        branch,
        seed,
    })?
    .dead;
    let mut rng = SplitMix64::new(seed);
    let qs = queries(&shrink_set, ranks, lookups, &mut rng);
    let a = measure(&shrink_set, &qs)?;
    let qs = queries(&scattered, ranks, lookups, &mut rng);
    let b = measure(&scattered, &qs)?;
    for (name, l) in [("shrink", &a), ("scattered", &b)] {
        println!(
            "rankset {name}: {} runs, contains {:.2} ns (dense bitset {:.2} ns, ratio {:.2}), \
             heap {} B (dense {} B)",
            l.runs,
            l.ns_new,
            l.ns_old,
            l.ns_new / l.ns_old,
            l.bytes_new,
            l.bytes_old
        );
    }
    println!(
        "{}",
        json_line(&[
            ("ranks", ranks.into()),
            ("radix", radix.into()),
            ("branch", branch.into()),
            ("lookups", (lookups as u64).into()),
            ("shrink", json(&a)),
            ("scattered", json(&b)),
        ])
    );
    Ok(())
}
