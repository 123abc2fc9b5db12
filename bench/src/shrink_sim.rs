//! `scale shrink`'s end-to-end half: the real [`Node`](lifeline_core::Node) machines in the
//! simulator, draining one branch two ways.
//!
//! - **Campaign** (crash-free): a survivor (the highest-ranked non-target) calls
//!   [`Node::shrink`](lifeline_core::Node::shrink) with every target; the coordinator orders it
//!   through xcast, the targets drain and acknowledge, the order's completion triggers the one
//!   departure notice, every rank removes the targets in one repair, and the requester gets
//!   `CampaignCompleted`.
//! - **Per-death**: the same targets crash at once and are removed by failure handling (their
//!   lost links, or the heartbeat detector with `--detect`), each confirmation a global
//!   failure notice.
//!
//! Both start from the same fault-free world at 200 ms. Measured from the request (or the
//! crash): the time until the requester's completion (campaign) or the coordinator's last
//! confirmation (per-death), the time until every survivor has removed every target, the
//! membership view changes the coordinator made for them, and the repair passes (view changes,
//! [`Event::ViewChanged`]) at each survivor.

use std::collections::BTreeSet;
use std::time::{Duration as StdDuration, Instant as StdInstant};

use lifeline_core::membership::MembershipEvent;
use lifeline_core::sim::{Fault, Observer, Sim, SimConfig, SimFailure, World};
use lifeline_core::tree::{Layout, Rank, RankSet};
use lifeline_core::{Duration, Event, Instant};
use serde_json::Value;

use crate::report::peak_rss_bytes;
use crate::shrink::Branch;

/// Simulated time before the request or the crash (links up, nothing in flight).
const WARM: Duration = Duration::from_millis(200);
/// Simulated time run after convergence, to count any late repair pass.
const SETTLE: Duration = Duration::from_secs(1);
/// Steps allowed to converge.
const BUDGET: u64 = 2_000_000_000;

/// What one simulated path measured.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Path {
    /// Campaign: request to the requester's `CampaignCompleted`. Per-death: crash to the
    /// coordinator's last confirmation of a target. Milliseconds of simulated time.
    pub completion_ms: Option<f64>,
    /// Campaign: request to the coordinator broadcasting the departure notice, which it does
    /// when the order's xcast completed at the root (every rank had it, every target drained
    /// and acknowledged). `None` on the per-death path.
    pub order_done_ms: Option<f64>,
    /// Request (or crash) to the moment every survivor had removed every target.
    pub all_removed_ms: Option<f64>,
    /// Campaign: request to the last target's `Left` (`None` on the per-death path).
    pub all_left_ms: Option<f64>,
    /// Membership view changes (epochs) at the coordinator that removed targets.
    pub view_changes: u64,
    /// Repair passes that changed a survivor's view, summed over survivors.
    pub repair_passes: u64,
    /// The most repair passes at one survivor.
    pub repair_passes_max: u32,
    /// Survivors with at least one repair pass.
    pub affected: u64,
    /// Repair passes at the branch's parent.
    pub parent_passes: u32,
    /// Repair passes at targets before they left (campaign) or crashed (per-death: none).
    pub target_passes: u64,
    /// Failure verdicts naming a target, over every survivor (campaign: must be 0).
    pub failure_verdicts: u64,
    /// `CampaignCompleted` events (campaign: must be 1).
    pub completions: u32,
    /// `CampaignFailed` events (must be 0).
    pub campaign_failures: u32,
    /// Targets that reported `Left`.
    pub left: u64,
    /// Survivors that never removed every target (must be 0).
    pub survivors_missing: u64,
    /// Frames delivered from the request (or crash) to the end of the settle period.
    pub frames: u64,
    /// Simulator steps over the same period.
    pub steps: u64,
    /// Wall time of the path (world built to the end of the settle period).
    pub wall: StdDuration,
    /// Resident set once the world was built and warm, before the request (or crash).
    pub rss_built_bytes: Option<u64>,
    /// Resident set at the end of the settle period.
    pub rss_end_bytes: Option<u64>,
    /// At the end, per live node on average: heap of the three rank sets every node keeps
    /// (the tree's dead and confirmed sets, the agreed removed set; `RankSet::heap_bytes`).
    pub sets_bytes_per_node: f64,
    /// At the end, per live node on average: xcast payload bytes held (ops retained until
    /// the global watermark passes them; `Node::xcast_held_payload_bytes`).
    pub xcast_held_bytes_per_node: f64,
}

impl Path {
    fn json(&self) -> Value {
        let r = |x: Option<f64>| x.map(|v| (v * 1000.0).round() / 1000.0);
        serde_json::json!({
            "completion_ms": r(self.completion_ms),
            "order_done_ms": r(self.order_done_ms),
            "all_removed_ms": r(self.all_removed_ms),
            "all_left_ms": r(self.all_left_ms),
            "view_changes": self.view_changes,
            "repair_passes": self.repair_passes,
            "repair_passes_max": self.repair_passes_max,
            "affected": self.affected,
            "parent_passes": self.parent_passes,
            "target_passes": self.target_passes,
            "failure_verdicts": self.failure_verdicts,
            "completions": self.completions,
            "campaign_failures": self.campaign_failures,
            "left": self.left,
            "survivors_missing": self.survivors_missing,
            "frames": self.frames,
            "steps": self.steps,
            "wall_ms": self.wall.as_millis() as u64,
            "rss_built_bytes": self.rss_built_bytes,
            "rss_end_bytes": self.rss_end_bytes,
            "sets_bytes_per_node": self.sets_bytes_per_node.round(),
            "xcast_held_bytes_per_node": self.xcast_held_bytes_per_node.round(),
        })
    }
}

/// Both simulated paths for one branch.
#[derive(Clone, Debug, PartialEq)]
pub struct EndToEnd {
    /// Span of the simulated tree.
    pub span: u32,
    /// Targets.
    pub targets: u64,
    /// The heartbeat detector was on.
    pub detect: bool,
    /// The campaign.
    pub campaign: Path,
    /// The per-death path (`None`: not run, `--paths campaign`).
    pub per_death: Option<Path>,
    /// Peak RSS of the process after both paths, if known.
    pub peak_rss_bytes: Option<u64>,
}

impl EndToEnd {
    /// Peak RSS over the simulated span (the whole process charged to the nodes).
    pub fn bytes_per_node(&self) -> Option<u64> {
        self.peak_rss_bytes.map(|b| b / u64::from(self.span.max(1)))
    }

    /// Why the runs broke the campaign's contract, if they did: a completion other than one,
    /// a failure verdict for a departing rank, a repair pass more than one at a survivor, a
    /// target that did not leave, a survivor that did not remove every target.
    pub fn failed_checks(&self) -> Option<String> {
        let c = &self.campaign;
        let mut why = Vec::new();
        if c.completions != 1 || c.campaign_failures != 0 {
            why.push(format!(
                "campaign completed {} times, failed {} times",
                c.completions, c.campaign_failures
            ));
        }
        if c.failure_verdicts != 0 {
            why.push(format!(
                "{} failure verdicts for targets",
                c.failure_verdicts
            ));
        }
        if c.repair_passes_max > 1 || c.view_changes != 1 {
            why.push(format!(
                "campaign: {} view changes, up to {} repair passes at a survivor",
                c.view_changes, c.repair_passes_max
            ));
        }
        if c.left != self.targets {
            why.push(format!("{} of {} targets left", c.left, self.targets));
        }
        let paths = std::iter::once(("campaign", c))
            .chain(self.per_death.as_ref().map(|d| ("per-death", d)));
        for (name, p) in paths {
            if p.survivors_missing != 0 {
                why.push(format!(
                    "{name}: {} survivors never removed every target",
                    p.survivors_missing
                ));
            }
        }
        (!why.is_empty()).then(|| why.join("; "))
    }

    /// The human-readable part of the summary line.
    pub fn summary(&self) -> String {
        let c = &self.campaign;
        let ms = |x: Option<f64>| x.map_or_else(|| "-".into(), |v| format!("{v:.1}"));
        let per_death = self.per_death.as_ref().map_or_else(
            || "per-death not run".to_owned(),
            |d| {
                format!(
                    "per-death last confirmation {} ms (all survivors {} ms), {} view changes, \
                     {} repair passes at {} survivors (max {}, {} at the parent)",
                    ms(d.completion_ms),
                    ms(d.all_removed_ms),
                    d.view_changes,
                    d.repair_passes,
                    d.affected,
                    d.repair_passes_max,
                    d.parent_passes,
                )
            },
        );
        format!(
            "simulated at {} ranks ({} targets, detector {}): campaign completed in {} ms \
             (order done {} ms, all survivors {} ms, all left {} ms), {} view change, {} repair passes at {} \
             survivors (max {}), {} failure verdicts; {per_death}; {} B per simulated node (rank \
             sets {:.0} B, xcast payloads held {:.0} B)",
            self.span,
            self.targets,
            if self.detect { "on" } else { "off" },
            ms(c.completion_ms),
            ms(c.order_done_ms),
            ms(c.all_removed_ms),
            ms(c.all_left_ms),
            c.view_changes,
            c.repair_passes,
            c.affected,
            c.repair_passes_max,
            c.failure_verdicts,
            self.bytes_per_node().unwrap_or(0),
            c.sets_bytes_per_node,
            c.xcast_held_bytes_per_node,
        )
    }

    /// The `"sim"` object of the JSON record.
    pub fn json(&self) -> Value {
        serde_json::json!({
            "span": self.span,
            "targets": self.targets,
            "detect": self.detect,
            "campaign": self.campaign.json(),
            "per_death": self.per_death.as_ref().map(Path::json),
            "peak_rss_bytes": self.peak_rss_bytes,
            "bytes_per_node": self.bytes_per_node(),
        })
    }
}

/// Watches one path's events.
struct Watch {
    t0: Instant,
    active: bool,
    parent: Rank,
    targets: RankSet,
    is_target: Vec<bool>,
    n_targets: u32,
    passes: Vec<u32>,
    removed: Vec<u32>,
    survivors_done: u64,
    survivors: u64,
    last_done: Option<Instant>,
    coord_epochs: BTreeSet<u64>,
    coord_last: Option<Instant>,
    completed: u32,
    completed_at: Option<Instant>,
    failed: u32,
    verdicts: u64,
    left: u64,
    last_left: Option<Instant>,
    order_done: Option<Instant>,
}

impl Watch {
    fn new(span: u32, branch: &Branch) -> Self {
        let mut is_target = vec![false; span as usize];
        for t in &branch.targets {
            is_target[t.index()] = true;
        }
        Self {
            t0: Instant::ZERO,
            active: false,
            parent: branch.parent,
            targets: branch.targets.iter().copied().collect(),
            is_target,
            n_targets: branch.targets.len() as u32,
            passes: vec![0; span as usize],
            removed: vec![0; span as usize],
            survivors_done: 0,
            survivors: u64::from(span) - branch.targets.len() as u64,
            last_done: None,
            coord_epochs: BTreeSet::new(),
            coord_last: None,
            completed: 0,
            completed_at: None,
            failed: 0,
            verdicts: 0,
            left: 0,
            last_left: None,
            order_done: None,
        }
    }

    /// `rank` removed `ranks` under `epoch`.
    fn removed(&mut self, now: Instant, rank: Rank, epoch: u64, ranks: &RankSet) {
        let n = ranks.iter().filter(|&r| self.targets.contains(r)).count() as u32;
        if n == 0 {
            return;
        }
        if rank == Rank::ROOT {
            self.coord_epochs.insert(epoch);
            self.coord_last = Some(now);
        }
        if self.is_target[rank.index()] {
            return;
        }
        let before = self.removed[rank.index()];
        self.removed[rank.index()] = before.saturating_add(n);
        if before < self.n_targets && before + n >= self.n_targets {
            self.survivors_done += 1;
            self.last_done = Some(now);
        }
    }
}

impl Observer for Watch {
    fn on_event(&mut self, w: &World, rank: Rank, e: &Event) {
        if !self.active {
            return;
        }
        let now = w.now();
        match e {
            Event::ViewChanged(_) => self.passes[rank.index()] += 1,
            Event::Membership(MembershipEvent::Departed { epoch, ranks, .. }) => {
                self.removed(now, rank, *epoch, ranks);
            }
            Event::Membership(MembershipEvent::FailureConfirmed { epoch, ranks, .. }) => {
                if !self.is_target[rank.index()] {
                    self.verdicts +=
                        ranks.iter().filter(|&r| self.targets.contains(r)).count() as u64;
                }
                self.removed(now, rank, *epoch, ranks);
            }
            Event::Membership(MembershipEvent::CampaignCompleted { .. }) => {
                self.completed += 1;
                self.completed_at.get_or_insert(now);
            }
            Event::Membership(MembershipEvent::CampaignFailed { .. }) => self.failed += 1,
            Event::Membership(MembershipEvent::Left { .. }) => {
                self.left += 1;
                self.last_left = Some(now);
            }
            _ => {}
        }
    }

    fn check(&mut self, w: &World) -> Result<(), String> {
        if self.active && self.order_done.is_none() {
            let sent = w
                .node(Rank::ROOT)
                .is_some_and(|n| n.shrink_stats().left_views > 0);
            if sent {
                self.order_done = Some(w.now());
            }
        }
        Ok(())
    }
}

/// Which path a run takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Campaign,
    PerDeath,
}

fn run_path(
    layout: &Layout,
    branch: &Branch,
    detect: bool,
    seed: u64,
    mode: Mode,
) -> Result<Path, SimFailure> {
    let wall = StdInstant::now();
    let span = layout.span();
    let mut cfg = SimConfig::new(span, layout.radix(), seed);
    cfg.node.detect.enabled = detect;
    cfg.step_budget = BUDGET;
    let mut sim = Sim::new(cfg, Watch::new(span, branch)).map_err(|e| SimFailure {
        seed,
        step: 0,
        now: Instant::ZERO,
        reason: e.to_string(),
        replay: String::new(),
    })?;
    sim.run_until(Instant::ZERO + WARM)?;
    let rss_built_bytes = current_rss_bytes();
    let t0 = sim.world().now();
    let (frames0, steps0) = {
        let s = sim.world().stats();
        (s.frames_delivered, s.steps)
    };
    {
        let o = sim.observer_mut();
        o.t0 = t0;
        o.active = true;
    }
    let targets: RankSet = branch.targets.iter().copied().collect();
    match mode {
        Mode::Campaign => {
            let requester = (1..span)
                .rev()
                .map(Rank)
                .find(|r| !targets.contains(*r) && *r != branch.parent)
                .unwrap_or(Rank::ROOT);
            let r = sim.command(requester, |n, now| n.shrink(now, &targets));
            if !matches!(r, Some(Ok(_))) {
                return Err(sim.failure(format!("the shrink request was refused: {r:?}")));
            }
        }
        Mode::PerDeath => {
            for &t in &branch.targets {
                sim.apply(Fault::Crash(t));
            }
        }
    }
    let n = u64::from(branch.targets.len() as u32);
    sim.run_until_pred(BUDGET, |_, o| {
        let removed = o.survivors_done == o.survivors;
        match mode {
            Mode::Campaign => removed && o.completed > 0 && o.left >= n,
            Mode::PerDeath => removed,
        }
    })?;
    let end = sim.world().now() + SETTLE;
    sim.run_until(end)?;
    let w = sim.world();
    let o = sim.observer();
    let since = |t: Option<Instant>| t.map(|t| t.saturating_since(o.t0).as_millis_f64());
    let mut p = Path {
        completion_ms: match mode {
            Mode::Campaign => since(o.completed_at),
            Mode::PerDeath => since(o.coord_last),
        },
        order_done_ms: since(o.order_done),
        all_removed_ms: since(o.last_done),
        all_left_ms: match mode {
            Mode::Campaign => since(o.last_left),
            Mode::PerDeath => None,
        },
        view_changes: o.coord_epochs.len() as u64,
        parent_passes: o.passes[o.parent.index()],
        failure_verdicts: o.verdicts,
        completions: o.completed,
        campaign_failures: o.failed,
        left: o.left,
        survivors_missing: o.survivors - o.survivors_done,
        frames: w.stats().frames_delivered - frames0,
        steps: w.stats().steps - steps0,
        rss_built_bytes,
        rss_end_bytes: current_rss_bytes(),
        ..Path::default()
    };
    let (mut live, mut sets, mut held) = (0u64, 0u64, 0u64);
    for r in w.live_ranks() {
        let Some(node) = w.node(r) else { continue };
        live += 1;
        let t = node.tree();
        sets += (t.dead().heap_bytes()
            + t.confirmed().heap_bytes()
            + node.agreed_removed().heap_bytes()) as u64;
        held += node.xcast_held_payload_bytes() as u64;
    }
    p.sets_bytes_per_node = sets as f64 / live.max(1) as f64;
    p.xcast_held_bytes_per_node = held as f64 / live.max(1) as f64;
    for (i, &k) in o.passes.iter().enumerate() {
        if o.is_target[i] {
            p.target_passes += u64::from(k);
            continue;
        }
        p.repair_passes += u64::from(k);
        p.repair_passes_max = p.repair_passes_max.max(k);
        p.affected += u64::from(k > 0);
    }
    drop(sim);
    p.wall = wall.elapsed();
    Ok(p)
}

/// Current resident set of this process (`VmRSS`), if readable.
pub fn current_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Runs the campaign for `branch` in `layout` and then, with `per_death`, the per-death path,
/// each in a fresh world.
pub fn run(
    layout: &Layout,
    branch: &Branch,
    detect: bool,
    per_death: bool,
    seed: u64,
) -> Result<EndToEnd, SimFailure> {
    let campaign = run_path(layout, branch, detect, seed, Mode::Campaign)?;
    let per_death = if per_death {
        Some(run_path(layout, branch, detect, seed, Mode::PerDeath)?)
    } else {
        None
    };
    Ok(EndToEnd {
        span: layout.span(),
        targets: branch.targets.len() as u64,
        detect,
        campaign,
        per_death,
        peak_rss_bytes: peak_rss_bytes(),
    })
}
