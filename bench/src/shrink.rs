//! `scale shrink`: one shrink campaign draining a whole branch, against the per-death path
//! (issue #22 item 8; seed 000's open question "measure the per-daemon vs batch repair cost on
//! a large single-branch shrink").
//!
//! **The branch.** Whole fault-free subtrees hanging off one rank `p`, in consecutive child
//! slots `0..j`: `p` is the deepest rank on the first-child spine whose child subtrees hold at
//! least `--branch` ranks together, and `j` the fewest first children that reach it. With
//! `j = 1` the branch is exactly one subtree; at 2^20 ranks, radix 64 and `--branch 4096` it is
//! the 16 first child subtrees of rank 1 (256 ranks each), at 65,536 the 4 first child subtrees
//! of rank 0 (1,024 each). `p` survives. The targets are exactly the branch's ranks.
//!
//! **Repair work** ([`repair_work`]), with the node's own repair, [`Tree::mark_dead`] (which
//! recomputes the view from the whole dead set whenever a notice names a fresh death, and
//! returns the [`ViewDelta`](lifeline_core::tree::ViewDelta) a node fans out):
//! - (a) the campaign: every affected survivor applies all targets in one call (the one
//!   departure notice);
//! - (b) the per-death path: every affected survivor applies the same targets one removal
//!   notice at a time, in a seeded uniformly random order (independent departures are
//!   discovered in no particular order); and, on this path only, every target still running
//!   repairs too until its own notice arrives (the campaign's targets leave on the one notice
//!   that removes them all, and do no repair).
//!
//! An **affected survivor** is one whose view (parent, ancestors or children) changes at some
//! notice. Removing whole subtrees changes only their parent's view (every other slot keeps its
//! occupant), so the candidates examined are `p` and its ancestors; the unit tests check that
//! against every rank of small trees. Counted per path: recomputations (`mark_dead` calls that
//! recomputed the view), view changes (a delta returned), promoted ranks (a delta moving the
//! rank's slot up), rewired links (a changed parent plus each child slot whose occupant
//! changed), and the time those calls took on one thread.
//!
//! **Completion** ([`crate::shrink_sim`]): the real `Node` machines in the simulator.

use std::hint::black_box;
use std::time::{Duration, Instant};

use lifeline_core::tree::{Layout, Rank, RankSet, Scope, Tree, View};
use serde_json::Value;

use crate::args::{CliError, Flags};
use crate::report::{json_line, median, peak_rss_bytes};
use crate::rng::SplitMix64;
use crate::shrink_sim::{self, EndToEnd};
use crate::subtree::Subtree;

/// Usage text of the subcommand.
pub const USAGE: &str = "\
usage: scale shrink --ranks N --radix K --branch M [--sim-ranks S] [--paths P] [--detect]
                    [--seed S]

Drains a whole branch of at least M ranks (whole subtrees in the first child slots of one rank
p: the deepest on the first-child spine whose child subtrees hold >= M ranks, through the
fewest first children reaching M) from an N-rank radix-K tree, and compares:
  repair work at every affected survivor, with the node's own tree repair: (a) the campaign,
  one batched repair applying every target, against (b) the per-death path, one removal
  notice per target (seeded random order), where the targets still running repair as well;
  completion, end to end with real Node machines in the simulator at span S: one crash-free
  campaign (order xcast, drain, one view change, completion) against the same targets
  crashing at once and removed through failure detection (time to the last confirmation,
  view changes, repair passes).

  --ranks N      span of the tree for the repair work (2..=4294967292)
  --radix K      tree radix (2..=1024)
  --branch M     least ranks in the branch (>= 1)
  --sim-ranks S  span of the simulated runs (default min(N, 8192); 0 skips them; the
                 per-death path at 65536 runs for over an hour, use --paths campaign there)
  --paths P      simulated paths: both (default) or campaign
  --detect       heartbeat detector on in the simulated runs (default off: a crash is found
                 by its lost links, the node's default)
  --seed S       seed of the death order and the simulations (default 1)

The last stdout line is JSON: {\"ranks\",\"radix\",\"branch\",\"targets\",\"parent\",\"slots\",
\"batched\":{...},\"per_death\":{...},\"per_death_targets\":{...},\"ratio_ns\",
\"ratio_recomputes\",\"sim\":{...} or null, then extra keys}.";

/// How many times each survivor path is timed; the median is reported.
pub const BATCHED_REPS: usize = 5;
/// Default span of the simulated runs: both paths finish in minutes on two cores (the
/// per-death path at 65,536 did not finish in 55 minutes, `docs/shrink-bench.md`).
pub const DEFAULT_SIM_RANKS: u32 = 1 << 13;

/// The experiment's parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// Span of the tree for the repair work.
    pub ranks: u32,
    /// Radix.
    pub radix: u32,
    /// Least ranks in the branch.
    pub branch: u32,
    /// Span of the simulated runs (0: none).
    pub sim_ranks: u32,
    /// Heartbeat detector on in the simulated runs.
    pub detect: bool,
    /// Simulate the per-death path too (`--paths both`), not only the campaign.
    pub per_death_sim: bool,
    /// Seed of the death order and the simulations.
    pub seed: u64,
}

impl Config {
    /// Parses the subcommand's flags (everything after `shrink`).
    pub fn from_args(args: &[String]) -> Result<Self, CliError> {
        // `--detect` is the one valueless flag: take it out before the `--name value` parse.
        let detect = args.iter().any(|a| a == "--detect");
        let rest: Vec<String> = args.iter().filter(|a| *a != "--detect").cloned().collect();
        let f = Flags::parse(
            &rest,
            &["ranks", "radix", "branch", "sim-ranks", "paths", "seed"],
        )?;
        let ranks: u32 = f.get("ranks", None)?;
        let per_death_sim = match f.get::<String>("paths", Some("both".into()))?.as_str() {
            "both" => true,
            "campaign" => false,
            other => {
                return Err(CliError::Usage(format!(
                    "--paths: {other:?} is neither both nor campaign"
                )))
            }
        };
        Ok(Self {
            ranks,
            radix: f.get("radix", None)?,
            branch: f.get("branch", None)?,
            sim_ranks: f.get("sim-ranks", Some(ranks.min(DEFAULT_SIM_RANKS)))?,
            detect,
            per_death_sim,
            seed: f.get("seed", Some(1))?,
        })
    }
}

/// The branch a campaign drains: whole subtrees in child slots `0..slots` of `parent`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Branch {
    /// The surviving rank the subtrees hang off.
    pub parent: Rank,
    /// Child slots drained (`0..slots`).
    pub slots: u32,
    /// Every target, ascending.
    pub targets: Vec<Rank>,
}

impl Branch {
    /// The branch of at least `m` ranks in `layout` (see the module docs). A usage error when
    /// `m` is 0 or more than every rank but the root.
    pub fn pick(layout: &Layout, m: u32) -> Result<Self, CliError> {
        let m64 = u64::from(m);
        if m == 0 {
            return Err(CliError::Usage("--branch must be at least 1".into()));
        }
        if layout.subtree_len(Rank::ROOT) - 1 < m64 {
            return Err(CliError::Usage(format!(
                "--branch {m} is too many: the tree has {} ranks besides its root",
                layout.subtree_len(Rank::ROOT) - 1
            )));
        }
        let mut parent = Rank::ROOT;
        while let Some(c) = layout.child(parent, 0) {
            if layout.subtree_len(c) - 1 < m64 {
                break;
            }
            parent = c;
        }
        let mut targets = Vec::new();
        let mut slots = 0;
        while (targets.len() as u64) < m64 {
            let Some(c) = layout.child(parent, slots) else {
                break; // unreachable: the children's subtrees hold >= m ranks
            };
            targets.extend(Subtree::new(layout, c).iter());
            slots += 1;
        }
        targets.sort_unstable();
        Ok(Self {
            parent,
            slots,
            targets,
        })
    }

    /// The survivors whose view some subset of the targets can change: `parent` and its
    /// ancestors (the module docs say why no other rank can be affected).
    pub fn candidates(&self, layout: &Layout) -> Vec<Rank> {
        let mut v: Vec<Rank> = layout
            .ancestors(self.parent)
            .chain(std::iter::once(self.parent))
            .collect();
        v.sort_unstable();
        v.dedup();
        v
    }
}

/// Repair work summed over a set of ranks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Work {
    /// Ranks whose view changed at least once.
    pub affected: u64,
    /// `mark_dead` calls that recomputed the view (a notice naming a fresh death).
    pub recomputes: u64,
    /// Recomputations that changed the view (a delta fanned out to the machines).
    pub view_changes: u64,
    /// View changes that moved the rank's slot up.
    pub promoted: u64,
    /// Changed parents plus child slots whose occupant changed, over all view changes.
    pub rewired: u64,
    /// Time spent in `mark_dead`, on one thread.
    pub elapsed: Duration,
}

impl Work {
    fn json(&self) -> Value {
        serde_json::json!({
            "affected": self.affected,
            "recomputes": self.recomputes,
            "view_changes": self.view_changes,
            "promoted": self.promoted,
            "rewired": self.rewired,
            "ns": self.elapsed.as_nanos() as u64,
        })
    }
}

/// Applies `notices` in turn to `me`'s tree (fault-free at the start), as the node does with
/// each removal notice, stopping at the notice that names `me`; returns the work and the final
/// tree; `None` when `me` is outside the span. A notice naming a rank outside the span changes
/// nothing (the node counts it as a drop). Only the `mark_dead` calls are timed.
pub fn apply_notices(layout: &Layout, me: Rank, notices: &[Vec<Rank>]) -> Option<(Work, Tree)> {
    let mut tree = Tree::with_dead(*layout, RankSet::new(), me).ok()?;
    let mut w = Work::default();
    for n in notices {
        if n.contains(&me) {
            break;
        }
        let fresh = n.iter().any(|&r| tree.is_alive(r));
        let t = Instant::now();
        let delta = tree.mark_dead(black_box(n), Scope::Global);
        w.elapsed += t.elapsed();
        let Ok(delta) = delta else {
            continue;
        };
        w.recomputes += u64::from(fresh);
        if let Some(d) = delta {
            w.view_changes += 1;
            w.promoted += u64::from(d.promoted);
            w.rewired += u64::from(d.parent_changed()) + d.child_changes.len() as u64;
        }
    }
    w.affected = u64::from(w.view_changes > 0);
    Some((w, tree))
}

/// Sums [`apply_notices`] over `ranks` (a rank outside the span adds nothing).
pub fn work_over(layout: &Layout, ranks: &[Rank], notices: &[Vec<Rank>]) -> Work {
    let mut total = Work::default();
    for &r in ranks {
        let Some((w, _)) = apply_notices(layout, r, notices) else {
            continue;
        };
        total.affected += w.affected;
        total.recomputes += w.recomputes;
        total.view_changes += w.view_changes;
        total.promoted += w.promoted;
        total.rewired += w.rewired;
        total.elapsed += w.elapsed;
    }
    total
}

/// The repair work of both paths (`Work::affected` of the survivor paths counts the ranks
/// whose view changed on that path).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RepairWork {
    /// (a) at the affected survivors, the batched pass (the median of [`BATCHED_REPS`] runs).
    pub batched: Work,
    /// (b) at the affected survivors, one notice per target (the median of [`BATCHED_REPS`]).
    pub per_death: Work,
    /// (b) at the targets still running when each notice arrives (timed once).
    pub per_death_targets: Work,
    /// Survivors in the whole tree (every one recomputes once per notice that names a fresh
    /// death: once on path (a), once per target on path (b)).
    pub survivors: u64,
}

/// Measures both paths for `branch` in `layout`, the per-death notices in `order`, at the
/// affected survivors (the candidates whose view changes on either path) and, per-death, at
/// the targets.
pub fn repair_work(layout: &Layout, branch: &Branch, order: &[Rank]) -> RepairWork {
    let all = vec![branch.targets.clone()];
    let one_by_one: Vec<Vec<Rank>> = order.iter().map(|&r| vec![r]).collect();
    // The affected survivors: the candidates whose view changes on either path.
    let affected: Vec<Rank> = branch
        .candidates(layout)
        .into_iter()
        .filter(|&r| {
            [&all, &one_by_one]
                .iter()
                .filter_map(|n| apply_notices(layout, r, n))
                .any(|(w, _)| w.affected > 0)
        })
        .collect();
    // Both survivor paths are short: each is timed BATCHED_REPS times and the median kept, so
    // one preemption on a shared machine does not decide the ratio.
    let median_of = |notices: &[Vec<Rank>]| {
        let mut reps: Vec<Work> = (0..BATCHED_REPS)
            .map(|_| work_over(layout, &affected, notices))
            .collect();
        reps.sort_by_key(|w| w.elapsed);
        reps[BATCHED_REPS / 2]
    };
    let batched = median_of(&all);
    let per_death = median_of(&one_by_one);
    let per_death_targets = work_over(layout, &branch.targets, &one_by_one);
    RepairWork {
        batched,
        per_death,
        per_death_targets,
        survivors: u64::from(layout.span()) - branch.targets.len() as u64,
    }
}

/// Median nanoseconds of one [`View::compute`] at a survivor outside the branch with every
/// target dead (what an unaffected survivor's recomputation costs), over up to 64k ranks
/// drawn uniformly.
pub fn survivor_view_ns(layout: &Layout, dead: &RankSet, rng: &mut SplitMix64) -> f64 {
    let span = u64::from(layout.span());
    let sample: Vec<Rank> = std::iter::repeat_with(|| Rank(rng.below(span) as u32))
        .filter(|&r| !dead.contains(r))
        .take(1 << 16)
        .collect();
    let mut per: Vec<f64> = sample
        .chunks_exact(64)
        .map(|c| {
            let t = Instant::now();
            for &r in c {
                black_box(View::compute(black_box(layout), black_box(dead), r).ok());
            }
            t.elapsed().as_nanos() as f64 / 64.0
        })
        .collect();
    median(&mut per)
}

/// One run's results.
#[derive(Clone, Debug)]
pub struct Report {
    /// The parameters.
    pub config: Config,
    /// The branch.
    pub branch: Branch,
    /// Both paths' repair work.
    pub work: RepairWork,
    /// Median ns of one unaffected survivor's recomputation.
    pub view_ns: f64,
    /// The simulated runs (`None` when skipped).
    pub sim: Option<EndToEnd>,
    /// Wall time of the whole run.
    pub wall: Duration,
    /// Peak RSS, if known.
    pub peak_rss_bytes: Option<u64>,
}

impl Report {
    /// Per-death over batched time at the affected survivors.
    pub fn ratio_ns(&self) -> f64 {
        let b = self.work.batched.elapsed.as_nanos().max(1) as f64;
        self.work.per_death.elapsed.as_nanos() as f64 / b
    }

    /// Per-death over batched recomputations at the affected survivors.
    pub fn ratio_recomputes(&self) -> f64 {
        self.work.per_death.recomputes as f64 / self.work.batched.recomputes.max(1) as f64
    }

    /// The human-readable summary line.
    pub fn summary(&self) -> String {
        let c = &self.config;
        let (a, b, t) = (
            &self.work.batched,
            &self.work.per_death,
            &self.work.per_death_targets,
        );
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        let mut s = format!(
            "shrink: {} ranks, radix {}, branch of {} ranks (child slots 0..{} of rank {}): \
             affected survivors {} (batched) / {} (per-death); batched {} recomputes, {} view \
             changes, {} rewired, {:.4} ms; per-death {} recomputes, {} view changes, {} rewired, {:.3} ms \
             (ratio {:.0}x time, {:.0}x recomputes); per-death targets still running: {} \
             recomputes, {} promotions, {} rewired, {:.1} ms; survivor view {:.0} ns",
            c.ranks,
            c.radix,
            self.branch.targets.len(),
            self.branch.slots,
            self.branch.parent,
            a.affected,
            b.affected,
            a.recomputes,
            a.view_changes,
            a.rewired,
            ms(a.elapsed),
            b.recomputes,
            b.view_changes,
            b.rewired,
            ms(b.elapsed),
            self.ratio_ns(),
            self.ratio_recomputes(),
            t.recomputes,
            t.promoted,
            t.rewired,
            ms(t.elapsed),
            self.view_ns,
        );
        if let Some(e) = &self.sim {
            s.push_str("; ");
            s.push_str(&e.summary());
        }
        s.push_str(&format!(
            "; wall {:.1} s; peak RSS {:.1} MiB",
            self.wall.as_secs_f64(),
            self.peak_rss_bytes.unwrap_or(0) as f64 / (1024.0 * 1024.0)
        ));
        s
    }

    /// The JSON record: the contract keys first, in order, then the extras.
    pub fn json(&self) -> String {
        let c = &self.config;
        let round = |x: f64| (x * 100.0).round() / 100.0;
        let n = self.branch.targets.len() as u64;
        json_line(&[
            ("ranks", c.ranks.into()),
            ("radix", c.radix.into()),
            ("branch", c.branch.into()),
            ("targets", n.into()),
            ("parent", self.branch.parent.0.into()),
            ("slots", self.branch.slots.into()),
            ("batched", self.work.batched.json()),
            ("per_death", self.work.per_death.json()),
            ("per_death_targets", self.work.per_death_targets.json()),
            ("ratio_ns", round(self.ratio_ns()).into()),
            ("ratio_recomputes", round(self.ratio_recomputes()).into()),
            ("sim", self.sim.as_ref().map_or(Value::Null, EndToEnd::json)),
            ("survivors", self.work.survivors.into()),
            (
                "all_survivor_recomputes_batched",
                self.work.survivors.into(),
            ),
            (
                "all_survivor_recomputes_per_death",
                (self.work.survivors * n).into(),
            ),
            ("survivor_view_ns", round(self.view_ns).into()),
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

/// The per-death order: the targets in a uniformly random order drawn from `seed`.
pub fn death_order(targets: &[Rank], seed: u64) -> Vec<Rank> {
    let mut order = targets.to_vec();
    SplitMix64::new(seed).shuffle(&mut order);
    order
}

/// Runs the experiment; `start` is when the process started (for the wall time).
pub fn run(cfg: &Config, start: Instant) -> Result<Report, CliError> {
    let layout = Layout::new(cfg.ranks, cfg.radix).map_err(|e| CliError::Usage(e.to_string()))?;
    let branch = Branch::pick(&layout, cfg.branch)?;
    // Check the simulated shape before the long repair measurement.
    let sim_shape = if cfg.sim_ranks > 0 {
        let l = Layout::new(cfg.sim_ranks, cfg.radix)
            .map_err(|e| CliError::Usage(format!("--sim-ranks: {e}")))?;
        Some((l, Branch::pick(&l, cfg.branch)?))
    } else {
        None
    };
    let order = death_order(&branch.targets, cfg.seed);
    let work = repair_work(&layout, &branch, &order);
    let dead: RankSet = branch.targets.iter().copied().collect();
    let mut rng = SplitMix64::new(cfg.seed ^ 0x5EED_5A71);
    let view_ns = survivor_view_ns(&layout, &dead, &mut rng);
    let sim = match sim_shape {
        Some((l, b)) => Some(
            shrink_sim::run(&l, &b, cfg.detect, cfg.per_death_sim, cfg.seed)
                .map_err(|e| CliError::Failed(e.to_string()))?,
        ),
        None => None,
    };
    if let Some(e) = &sim {
        if let Some(why) = e.failed_checks() {
            return Err(CliError::Failed(why));
        }
    }
    Ok(Report {
        config: *cfg,
        branch,
        work,
        view_ns,
        sim,
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
#[path = "shrink_tests.rs"]
mod tests;
