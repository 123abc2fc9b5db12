//! `lifeline sim shrink`: shrink campaigns requested at random times, under joins, crashes
//! (targets among them) and xcast and RELM load, over one or many seeds, with the scenario's
//! oracle verdict and completion latencies.

use std::time::Instant;

use clap::Args;
use lifeline_core::sim::scenario::membership::MembershipSummary;
use lifeline_core::sim::scenario::shrink::{run_shrink, ShrinkParams, ShrinkReport};

use crate::sim_cmd::run_scenario;
use crate::write_stdout;
use crate::CliError;

/// Arguments of `lifeline sim shrink`.
#[derive(Debug, Args)]
pub(crate) struct ShrinkArgs {
    /// Members at the start (with --vary: the largest size drawn).
    #[arg(long, value_name = "N", default_value_t = 64)]
    ranks: u32,
    /// Maximum children per rank, 2..=1024.
    #[arg(long, value_name = "K", default_value_t = 4)]
    radix: u32,
    /// The first seed; with --seeds M, seeds S..S+M run one after the other.
    #[arg(long, value_name = "S", default_value_t = 1)]
    seed: u64,
    /// How many seeds to run.
    #[arg(long, value_name = "M", default_value_t = 1)]
    seeds: u64,
    /// Shrink campaigns per run (1-3 targets each).
    #[arg(long, value_name = "C", default_value_t = 4)]
    campaigns: u32,
    /// Joiners per run (grows).
    #[arg(long, value_name = "J", default_value_t = 2)]
    joins: u32,
    /// Members crashing per run (half of them targets).
    #[arg(long, value_name = "N", default_value_t = 2)]
    crashes: u32,
    /// Campaigns, joins and crashes are spread over this many ms.
    #[arg(long, value_name = "MS", default_value_t = 1_500)]
    window_ms: u64,
    /// The heartbeat detector on.
    #[arg(long)]
    detect: bool,
    /// Each seed draws its own shape (members in 16..=--ranks, campaigns, joins, crashes,
    /// the detector, the window).
    #[arg(long)]
    vary: bool,
    /// Print one line per simulator event to stdout (one seed only).
    #[arg(long)]
    trace: bool,
    /// Print the result as one JSON line (the last line of stdout) instead of a summary.
    #[arg(long)]
    json: bool,
}

impl ShrinkArgs {
    fn params(&self, seed: u64) -> ShrinkParams {
        if self.vary {
            return ShrinkParams::varied(self.radix, seed, self.ranks);
        }
        let mut p = ShrinkParams::new(self.ranks, self.radix, seed, self.campaigns);
        p.joins = self.joins;
        p.crashes = self.crashes;
        p.window_ms = self.window_ms;
        p.detect = self.detect;
        p
    }
}

/// Runs `lifeline sim shrink`.
pub(crate) fn run(args: &ShrinkArgs) -> Result<(), CliError> {
    if args.seeds == 0 {
        return Err(CliError::Usage("--seeds must be at least 1".into()));
    }
    if args.trace && args.seeds > 1 {
        return Err(CliError::Usage(
            "--trace replays one seed: drop --seeds".into(),
        ));
    }
    let start = Instant::now();
    let mut t = Totals::default();
    for seed in args.seed..args.seed.saturating_add(args.seeds) {
        let p = args.params(seed);
        let (r, _) = run_scenario(args.trace, "sim shrink", |hooks| run_shrink(&p, hooks))?;
        t.add(&p, r);
    }
    let wall = start.elapsed().as_secs_f64();
    let [c50, c99, cmax] = MembershipSummary::percentiles(&t.completion_ms);
    write_stdout(|out| {
        if args.json {
            writeln!(
                out,
                r#"{{"runs":{},"ranks_max":{},"campaigns":{},"completed":{},"failed":{},"targets":{},"left":{},"left_views":{},"joins_admitted":{},"completion_ms_p50":{c50:.3},"completion_ms_p99":{c99:.3},"completion_ms_max":{cmax:.3},"violations":{},"wall_ms":{:.1}}}"#,
                t.runs,
                t.ranks_max,
                t.campaigns,
                t.completed,
                t.failed,
                t.targets,
                t.left,
                t.left_views,
                t.joins,
                t.failing.len(),
                wall * 1e3
            )
        } else {
            writeln!(
                out,
                "shrink: {} runs (up to {} members): {} campaigns, {} completed, {} failed, {} targets, {} left, {} departure views, {} joiners admitted, completion p50 {c50:.1} ms, p99 {c99:.1} ms, max {cmax:.1} ms; {} ({wall:.1} s)",
                t.runs,
                t.ranks_max,
                t.campaigns,
                t.completed,
                t.failed,
                t.targets,
                t.left,
                t.left_views,
                t.joins,
                crate::sim_cmd::sweep_verdict(&t.failing),
            )
        }
    })?;
    crate::sim_cmd::sweep_result("shrink", &t.failing, t.runs)
}

/// Many runs merged.
#[derive(Default)]
struct Totals {
    runs: u64,
    ranks_max: u32,
    campaigns: u64,
    completed: u64,
    failed: u64,
    targets: u64,
    left: u64,
    left_views: u64,
    joins: u64,
    completion_ms: Vec<f64>,
    failing: Vec<String>,
}

impl Totals {
    fn add(&mut self, p: &ShrinkParams, r: ShrinkReport) {
        self.runs += 1;
        self.ranks_max = self.ranks_max.max(p.ranks);
        self.campaigns += u64::from(r.campaigns);
        self.completed += u64::from(r.completed);
        self.failed += u64::from(r.failed);
        self.targets += u64::from(r.targets);
        self.left += u64::from(r.left);
        self.left_views += r.left_views;
        self.joins += u64::from(r.joins_admitted);
        if !r.violations.is_empty() {
            self.failing.push(format!(
                "seed {}: {:?}; replay: {}",
                p.seed,
                r.violations,
                p.replay_command()
            ));
        }
        self.completion_ms.extend(r.completion_ms);
    }
}
