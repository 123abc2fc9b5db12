//! `scale repair`: batched versus one-death-at-a-time repair of a correlated failure.
//!
//! `M` ranks of one subtree die together (a switch or a rack). Every affected survivor must
//! recompute its [`View`]. Lifeline does that once from the whole batch; PRRTE's shipped path
//! repairs once per death notice, so each affected survivor recomputes `M` times, the `i`-th time
//! with the dead set `{d_1..d_i}`. This measures both in one run, plus the median cost of one
//! view anywhere in the tree (`view_ns`, which must stay flat as the tree grows: a view costs
//! O(radix·depth + dead ranks met), never O(span)).

use std::hint::black_box;
use std::time::{Duration, Instant};

use lifeline_core::tree::{Layout, Rank, RankSet, View};
use serde_json::Value;

use crate::args::{CliError, Flags};
use crate::report::{json_line, median, peak_rss_bytes};
use crate::rng::SplitMix64;
use crate::subtree::Subtree;

/// Usage text of the subcommand.
pub const USAGE: &str = "\
usage: scale repair --ranks N --radix K --branch M [--seed S]

Kills M ranks of one subtree of an N-rank radix-K tree and times (a) every affected survivor
recomputing its view once from the whole batch, against (b) the same survivors repairing once
per death, in death order. The subtree is the deepest rank on the first-child spine whose
fault-free subtree holds at least 2*M ranks (the root if none below it does); its root survives.

  --ranks N    span of the tree (1..=4294967292)
  --radix K    tree radix (2..=1024)
  --branch M   ranks to kill, all in one subtree (>= 1)
  --seed S     PRNG seed for the victims and the view sample (default 1)

The last stdout line is JSON: {\"ranks\",\"radix\",\"failed\",\"batched_ns\",\"sequential_ns\",
\"ratio\",\"view_ns\", then extra keys}.";

/// How many times the (short) batched loop is timed; the median is reported, which keeps a
/// millisecond-scale measurement stable on a shared machine.
pub const BATCHED_REPS: usize = 5;
/// Views per timed batch in the `view_ns` measurement.
pub const VIEW_BATCH: usize = 64;
/// Timed batches in the `view_ns` measurement.
pub const VIEW_BATCHES: usize = 2000;

/// The experiment's parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// Span of the tree.
    pub ranks: u32,
    /// Radix.
    pub radix: u32,
    /// Ranks to kill.
    pub branch: u32,
    /// PRNG seed.
    pub seed: u64,
}

impl Config {
    /// Parses the subcommand's flags (everything after `repair`).
    pub fn from_args(args: &[String]) -> Result<Self, CliError> {
        let f = Flags::parse(args, &["ranks", "radix", "branch", "seed"])?;
        Ok(Self {
            ranks: f.get("ranks", None)?,
            radix: f.get("radix", None)?,
            branch: f.get("branch", None)?,
            seed: f.get("seed", Some(1))?,
        })
    }
}

/// A failure scenario: the tree, the failed subtree and its victims.
#[derive(Clone, Debug)]
pub struct Scenario {
    /// The fault-free tree.
    pub layout: Layout,
    /// The subtree the victims are drawn from; its root survives.
    pub subtree: Subtree,
    /// The victims in death order (distinct, inside the subtree, never its root).
    pub victims: Vec<Rank>,
    /// The victims as a set.
    pub dead: RankSet,
}

impl Scenario {
    /// Picks the subtree for `cfg.branch` victims and draws them with `cfg.seed`.
    pub fn new(cfg: &Config) -> Result<Self, CliError> {
        let layout =
            Layout::new(cfg.ranks, cfg.radix).map_err(|e| CliError::Usage(e.to_string()))?;
        if cfg.branch == 0 {
            return Err(CliError::Usage("--branch must be at least 1".into()));
        }
        let subtree = Subtree::new(&layout, pick_subtree_root(&layout, cfg.branch));
        if subtree.len() - 1 < u64::from(cfg.branch) {
            return Err(CliError::Usage(format!(
                "--branch {} is too many: the subtree of rank {} has only {} ranks besides its root",
                cfg.branch,
                subtree.root(),
                subtree.len() - 1
            )));
        }
        let mut rng = SplitMix64::new(cfg.seed);
        let victims = choose_victims(&subtree, cfg.branch, &mut rng);
        let dead = victims.iter().copied().collect();
        Ok(Self {
            layout,
            subtree,
            victims,
            dead,
        })
    }
}

/// The subtree root for `m` victims: walking down from rank 0 along first children (slot 0), the
/// deepest rank whose fault-free subtree holds at least `2·m` ranks, or rank 0 if none below it
/// does. Subtrees shrink along the walk, so the first rank that falls short ends it.
pub fn pick_subtree_root(layout: &Layout, m: u32) -> Rank {
    let need = 2 * u64::from(m);
    let mut root = Rank::ROOT;
    while let Some(c) = layout.child(root, 0) {
        if layout.subtree_len(c) < need {
            break;
        }
        root = c;
    }
    root
}

/// `m` distinct members of `subtree`, never its root, uniformly drawn and in a uniformly random
/// death order. Robert Floyd's sampling draws the set in O(m) whatever the subtree's size; a
/// Fisher-Yates shuffle then fixes the order. Requires `m < subtree.len()`.
pub fn choose_victims(subtree: &Subtree, m: u32, rng: &mut SplitMix64) -> Vec<Rank> {
    // Member indices 1..len (0 is the root), shifted down to 0..n.
    let n = subtree.len() - 1;
    let m = u64::from(m);
    assert!(m <= n, "cannot draw {m} victims from {n} ranks");
    let mut chosen = std::collections::HashSet::with_capacity(m as usize);
    let mut picks = Vec::with_capacity(m as usize);
    for j in n - m..n {
        let t = rng.below(j + 1);
        let pick = if chosen.insert(t) { t } else { j };
        chosen.insert(pick);
        picks.push(pick);
    }
    rng.shuffle(&mut picks);
    picks.into_iter().map(|i| subtree.nth(i + 1)).collect()
}

/// The live ranks whose view differs between the fault-free tree and the tree with `dead`
/// removed, ascending. `dead` must lie inside `subtree` and spare its root.
///
/// Only the subtree's survivors and the subtree root's ancestors are examined. The occupant of a
/// slot depends only on the dead ranks in that slot's own fault-free subtree and on the occupants
/// of its ancestor slots (they are excluded from it). So for every slot outside the subtree:
/// either it is an ancestor of the subtree root, whose base owner is alive and (inductively from
/// rank 0) not excluded, so it keeps its occupant; or its subtree is disjoint from the dead set
/// and its ancestors keep their occupants, so it keeps its occupant too. A rank outside the
/// subtree that is not one of its ancestors therefore keeps its slot, its ancestor slots' and its
/// child slots' occupants (none of its child slots can be inside the subtree: the only slot
/// outside with a child inside is the subtree root's parent, an ancestor). Its view is unchanged.
/// (With the subtree root alive even its ancestors keep their views; they stay candidates so the
/// rule still holds if that precondition is ever relaxed.)
pub fn affected(layout: &Layout, subtree: &Subtree, dead: &RankSet) -> Vec<Rank> {
    let none = RankSet::new();
    let mut out: Vec<Rank> = layout
        .ancestors(subtree.root())
        .chain(subtree.iter())
        .filter(|&r| !dead.contains(r))
        .filter(|&r| View::compute(layout, &none, r).ok() != View::compute(layout, dead, r).ok())
        .collect();
    out.sort_unstable();
    out
}

/// Time for every rank in `survivors` to compute its view once with the whole dead set.
pub fn time_batched(layout: &Layout, dead: &RankSet, survivors: &[Rank]) -> Duration {
    let t = Instant::now();
    for &r in survivors {
        black_box(View::compute(black_box(layout), black_box(dead), r).ok());
    }
    t.elapsed()
}

/// Time for every rank in `survivors` to recompute its view after each death in turn: for
/// `i = 1..=M`, with the dead set `{victims[0]..victims[i-1]}`. Growing the dead set is inside
/// the timed loop (it is part of handling each notice, and costs nanoseconds).
pub fn time_sequential(layout: &Layout, victims: &[Rank], survivors: &[Rank]) -> Duration {
    let mut dead = RankSet::new();
    let t = Instant::now();
    for &d in victims {
        dead.insert(d);
        for &r in survivors {
            black_box(View::compute(black_box(layout), black_box(&dead), r).ok());
        }
    }
    t.elapsed()
}

/// Median nanoseconds per [`View::compute`] over `batches` timed batches of [`VIEW_BATCH`] live
/// ranks drawn uniformly from the whole tree (the sample is drawn before timing starts).
pub fn view_ns(layout: &Layout, dead: &RankSet, rng: &mut SplitMix64, batches: usize) -> f64 {
    let span = u64::from(layout.span());
    if dead.len() as u64 >= span {
        return 0.0;
    }
    let sample: Vec<Rank> = std::iter::repeat_with(|| Rank(rng.below(span) as u32))
        .filter(|&r| !dead.contains(r))
        .take(batches * VIEW_BATCH)
        .collect();
    // One untimed pass to warm caches and the allocator.
    for &r in sample.iter().take(4 * VIEW_BATCH) {
        black_box(View::compute(layout, dead, r).ok());
    }
    let mut per_view: Vec<f64> = sample
        .chunks_exact(VIEW_BATCH)
        .map(|batch| {
            let t = Instant::now();
            for &r in batch {
                black_box(View::compute(black_box(layout), black_box(dead), r).ok());
            }
            t.elapsed().as_nanos() as f64 / VIEW_BATCH as f64
        })
        .collect();
    median(&mut per_view)
}

/// One run's results.
#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    /// The parameters.
    pub config: Config,
    /// Root of the failed subtree.
    pub subtree_root: Rank,
    /// Size of its fault-free subtree.
    pub subtree_len: u64,
    /// Survivors whose view changed.
    pub affected: usize,
    /// Median over [`BATCHED_REPS`] runs of the batched loop.
    pub batched: Duration,
    /// The one-death-at-a-time loop.
    pub sequential: Duration,
    /// Median nanoseconds of one view.
    pub view_ns: f64,
    /// Wall time of the whole run, setup included.
    pub wall: Duration,
    /// Peak RSS, if known.
    pub peak_rss_bytes: Option<u64>,
}

impl Report {
    /// `sequential / batched`.
    pub fn ratio(&self) -> f64 {
        self.sequential.as_nanos() as f64 / (self.batched.as_nanos().max(1)) as f64
    }

    /// The human-readable summary line.
    pub fn summary(&self) -> String {
        let c = &self.config;
        format!(
            "repair: {} ranks, radix {}, {} failed in the subtree of rank {} ({} ranks): \
             {} affected survivors; batched {:.3} ms, sequential {:.3} ms, ratio {:.1}x; \
             view {:.1} ns; wall {:.2} s; peak RSS {:.1} MiB",
            c.ranks,
            c.radix,
            c.branch,
            self.subtree_root,
            self.subtree_len,
            self.affected,
            self.batched.as_secs_f64() * 1e3,
            self.sequential.as_secs_f64() * 1e3,
            self.ratio(),
            self.view_ns,
            self.wall.as_secs_f64(),
            self.peak_rss_bytes.unwrap_or(0) as f64 / (1024.0 * 1024.0),
        )
    }

    /// The JSON record: the contract keys first, in order, then the extras.
    pub fn json(&self) -> String {
        let c = &self.config;
        let round = |x: f64, places: i32| {
            let p = 10f64.powi(places);
            (x * p).round() / p
        };
        json_line(&[
            ("ranks", c.ranks.into()),
            ("radix", c.radix.into()),
            ("failed", c.branch.into()),
            ("batched_ns", (self.batched.as_nanos() as u64).into()),
            ("sequential_ns", (self.sequential.as_nanos() as u64).into()),
            ("ratio", round(self.ratio(), 2).into()),
            ("view_ns", round(self.view_ns, 2).into()),
            ("affected", self.affected.into()),
            ("subtree_root", self.subtree_root.0.into()),
            ("subtree_len", self.subtree_len.into()),
            ("seed", c.seed.into()),
            ("batched_reps", BATCHED_REPS.into()),
            (
                "peak_rss_bytes",
                self.peak_rss_bytes.map_or(Value::Null, Value::from),
            ),
            ("wall_ms", (self.wall.as_millis() as u64).into()),
        ])
    }
}

/// Runs the experiment; `start` is when the process started (for the wall time).
pub fn run(cfg: &Config, start: Instant) -> Result<Report, CliError> {
    let sc = Scenario::new(cfg)?;
    let survivors = affected(&sc.layout, &sc.subtree, &sc.dead);
    let mut batched: Vec<Duration> = (0..BATCHED_REPS)
        .map(|_| time_batched(&sc.layout, &sc.dead, &survivors))
        .collect();
    batched.sort_unstable();
    let batched = batched[BATCHED_REPS / 2];
    let sequential = time_sequential(&sc.layout, &sc.victims, &survivors);
    // A stream of its own, so the view sample does not depend on how the victims were drawn.
    let mut rng = SplitMix64::new(cfg.seed ^ 0x005E_ED0F_71E3);
    let view_ns = view_ns(&sc.layout, &sc.dead, &mut rng, VIEW_BATCHES);
    Ok(Report {
        config: *cfg,
        subtree_root: sc.subtree.root(),
        subtree_len: sc.subtree.len(),
        affected: survivors.len(),
        batched,
        sequential,
        view_ns,
        wall: start.elapsed(),
        peak_rss_bytes: peak_rss_bytes(),
    })
}

/// The subcommand: parses `args`, runs, prints the summary line and then the JSON line.
pub fn cli(args: &[String]) -> Result<(), CliError> {
    let start = Instant::now();
    let cfg = Config::from_args(args)?;
    let report = run(&cfg, start)?;
    println!("{}", report.summary());
    println!("{}", report.json());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(ranks: u32, radix: u32, branch: u32, seed: u64) -> Config {
        Config {
            ranks,
            radix,
            branch,
            seed,
        }
    }

    #[test]
    fn subtree_root_is_deepest_qualifying_first_child() {
        let l = Layout::new(1 << 20, 64).unwrap();
        // subtree_len(1) = 16384 >= 8192, subtree_len(65) = 256 < 8192.
        assert_eq!(pick_subtree_root(&l, 4096), Rank(1));
        let l = Layout::new(1 << 16, 64).unwrap();
        assert_eq!(pick_subtree_root(&l, 4096), Rank(0));
        let l = Layout::new(1 << 24, 64).unwrap();
        assert_eq!(pick_subtree_root(&l, 4096), Rank(1));
        assert_eq!(pick_subtree_root(&l, 100), Rank(65));
        let l = Layout::new(100, 4).unwrap();
        // 1 → 5 → 21: subtree_len = 25, 6, 2.
        assert_eq!(pick_subtree_root(&l, 3), Rank(5));
        assert_eq!(pick_subtree_root(&l, 1), Rank(21));
        assert_eq!(pick_subtree_root(&l, 13), Rank(0));
    }

    #[test]
    fn victims_are_deterministic_distinct_inside_and_spare_the_root() {
        for (ranks, radix, branch) in [(100, 4, 3), (100, 4, 40), (1 << 16, 64, 4096), (9, 2, 8)] {
            let c = cfg(ranks, radix, branch, 42);
            let a = Scenario::new(&c).unwrap();
            let b = Scenario::new(&c).unwrap();
            assert_eq!(
                a.victims, b.victims,
                "same seed, same victims in the same order"
            );
            assert_eq!(a.victims.len(), branch as usize);
            assert_eq!(a.dead.len(), branch as usize, "victims are distinct");
            let root = a.subtree.root();
            for &v in &a.victims {
                assert_ne!(v, root);
                assert!(
                    a.layout.in_subtree(root, v),
                    "{v} outside the subtree of {root}"
                );
            }
            let other = Scenario::new(&cfg(ranks, radix, branch, 43)).unwrap();
            if u64::from(branch) < a.subtree.len() - 1 {
                assert_ne!(a.victims, other.victims, "another seed, other victims");
            }
        }
    }

    #[test]
    fn victims_cover_the_whole_subtree_over_seeds() {
        let l = Layout::new(100, 4).unwrap();
        let s = Subtree::new(&l, Rank(5));
        let mut hit = RankSet::new();
        for seed in 0..200 {
            hit.extend(choose_victims(&s, 2, &mut SplitMix64::new(seed)));
        }
        let all: RankSet = s.iter().filter(|&r| r != Rank(5)).collect();
        assert_eq!(hit, all);
    }

    #[test]
    fn impossible_configurations_are_usage_errors() {
        for c in [
            cfg(0, 4, 1, 1),
            cfg(100, 1, 1, 1),
            cfg(100, 4, 0, 1),
            cfg(100, 4, 100, 1),
        ] {
            assert!(
                matches!(Scenario::new(&c), Err(CliError::Usage(_))),
                "{c:?}"
            );
        }
        assert!(Scenario::new(&cfg(100, 4, 99, 1)).is_ok());
    }

    /// The candidate-based affected set equals a brute force over every rank of the tree.
    #[test]
    fn affected_matches_brute_force() {
        let none = RankSet::new();
        for (ranks, radix) in [(100, 4), (100, 2), (300, 3), (9, 2)] {
            for branch in [1, 2, 3, 5, 8] {
                for seed in 0..10 {
                    let Ok(sc) = Scenario::new(&cfg(ranks, radix, branch, seed)) else {
                        continue;
                    };
                    let brute: Vec<Rank> = (0..ranks)
                        .map(Rank)
                        .filter(|&r| !sc.dead.contains(r))
                        .filter(|&r| {
                            View::compute(&sc.layout, &none, r)
                                != View::compute(&sc.layout, &sc.dead, r)
                        })
                        .collect();
                    let got = affected(&sc.layout, &sc.subtree, &sc.dead);
                    assert_eq!(
                        got, brute,
                        "ranks={ranks} radix={radix} M={branch} seed={seed}"
                    );
                    assert!(!got.is_empty());
                }
            }
        }
    }

    #[test]
    fn run_reports_consistent_numbers() {
        let r = run(&cfg(100, 4, 5, 1), Instant::now()).unwrap();
        assert_eq!(r.subtree_root, Rank(1)); // subtree_len(1) = 25 >= 2·5
        assert!(r.affected > 0 && r.sequential > Duration::ZERO && r.view_ns > 0.0);
        let v: Value = serde_json::from_str(&r.json()).unwrap();
        let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        assert!(keys.contains(&"ratio") && keys.contains(&"view_ns"));
        assert!(r
            .json()
            .starts_with(r#"{"ranks":100,"radix":4,"failed":5,"batched_ns":"#));
        assert!(r.json().contains(r#","sequential_ns":"#));
    }
}
