//! `lifeline sim partition`: quorum views under one random fault plan per seed (splits into
//! two or three sides, one-way cuts, flapping partitions, duelling candidates, the root and
//! candidates crashed or paused mid-decision), with the scenario's invariant checker after
//! every step and its liveness and end checks; a summary and a JSON last line, and a replay
//! line per failing seed.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use clap::Args;
use lifeline_core::sim::scenario::membership::MembershipSummary;
use lifeline_core::sim::scenario::partition::{run_partition, PartitionParams, PartitionReport};
use lifeline_core::sim::Hooks;

use crate::sim_cmd::run_scenario;
use crate::write_stdout;
use crate::CliError;

/// Arguments of `lifeline sim partition`.
#[derive(Debug, Args)]
pub(crate) struct PartitionArgs {
    /// Members (with --vary: the largest size drawn, from 8).
    #[arg(long, value_name = "N", default_value_t = 16)]
    ranks: u32,
    /// Maximum children per rank, 2..=1024 (with --vary: drawn from 2..=8).
    #[arg(long, value_name = "K", default_value_t = 8)]
    radix: u32,
    /// The first seed; with --seeds M, seeds S..S+M run.
    #[arg(long, value_name = "S", default_value_t = 1)]
    seed: u64,
    /// How many seeds to run.
    #[arg(long, value_name = "M", default_value_t = 1)]
    seeds: u64,
    /// Each seed draws its shape: members in 8..=--ranks, radix in 2..=8 (the fault plan is
    /// always drawn from the seed).
    #[arg(long)]
    vary: bool,
    /// Seeds run at once, each on its own thread (the summary is the same for any number).
    #[arg(long, value_name = "N", default_value_t = 1)]
    jobs: u32,
    /// Print one line per simulator event to stdout (one seed only).
    #[arg(long)]
    trace: bool,
    /// Print the result as one JSON line (the last line of stdout) instead of a summary.
    #[arg(long)]
    json: bool,
}

impl PartitionArgs {
    fn params(&self, seed: u64) -> PartitionParams {
        if self.vary {
            PartitionParams::varied(seed, self.ranks)
        } else {
            PartitionParams {
                ranks: self.ranks,
                radix: self.radix,
                seed,
            }
        }
    }
}

/// One seed's result: its report, or why the simulator stopped it (the checker's verdict, a
/// livelock).
type Outcome = Result<PartitionReport, String>;

/// Runs `lifeline sim partition`.
pub(crate) fn run(args: &PartitionArgs) -> Result<(), CliError> {
    if args.seeds == 0 {
        return Err(CliError::Usage("--seeds must be at least 1".into()));
    }
    if args.jobs == 0 {
        return Err(CliError::Usage("--jobs must be at least 1".into()));
    }
    if args.trace && args.seeds > 1 {
        return Err(CliError::Usage(
            "--trace replays one seed: drop --seeds".into(),
        ));
    }
    let start = Instant::now();
    let mut t = Totals::default();
    if args.seeds == 1 {
        let p = args.params(args.seed);
        let r = run_scenario(args.trace, "sim partition", |hooks| {
            run_partition(&p, hooks)
        })
        .map(|(r, _)| r);
        match r {
            Ok(r) => t.add(&p, Ok(r)),
            // The checker stopped the run: a failing seed like any other.
            Err(CliError::Failed(why)) => t.add(&p, Err(why)),
            Err(e) => return Err(e),
        }
    } else {
        for (p, r) in sweep(args) {
            t.add(&p, r);
        }
    }
    let wall = start.elapsed().as_secs_f64();
    let [d50, d99, dmax] = MembershipSummary::percentiles(&t.decide_ms);
    let kinds = t
        .kinds
        .iter()
        .map(|(k, n)| format!("{k} {n}"))
        .collect::<Vec<_>>()
        .join(", ");
    // A flapping split decided in an earlier cut counts as decided without a latency sample.
    let latency = if t.decide_ms.is_empty() {
        "no decision timed".to_string()
    } else {
        format!(
            "decision p50 {d50:.1} ms, p99 {d99:.1} ms, max {dmax:.1} ms ({} timed)",
            t.decide_ms.len()
        )
    };
    write_stdout(|out| {
        if args.json {
            writeln!(
                out,
                r#"{{"runs":{},"ranks_max":{},"owed":{},"decided":{},"decided_timed":{},"decide_ms_p50":{d50:.3},"decide_ms_p99":{d99:.3},"decide_ms_max":{dmax:.3},"minority_decisions":{},"safety_violations":{},"wrongful_removals":{},"violations":{},"wall_ms":{:.1}}}"#,
                t.runs,
                t.ranks_max,
                t.owed,
                t.decided,
                t.decide_ms.len(),
                t.minority,
                t.safety,
                t.wrongful,
                t.failing.len(),
                wall * 1e3
            )
        } else {
            writeln!(
                out,
                "partition: {} runs (up to {} members; {kinds}): liveness owed in {}, {} majority decisions, {latency}, {} minority decisions, {} S1-S3 violations, {} wrongful removals; {} ({wall:.1} s)",
                t.runs,
                t.ranks_max,
                t.owed,
                t.decided,
                t.minority,
                t.safety,
                t.wrongful,
                crate::sim_cmd::sweep_verdict(&t.failing),
            )
        }
    })?;
    crate::sim_cmd::sweep_result("partition", &t.failing, t.runs)
}

/// Runs every seed of `args` on `args.jobs` threads; the outcomes in seed order (so the
/// summary does not depend on the number of threads).
fn sweep(args: &PartitionArgs) -> Vec<(PartitionParams, Outcome)> {
    let seeds: Vec<u64> = (args.seed..args.seed.saturating_add(args.seeds)).collect();
    let next = AtomicU64::new(0);
    let done: Mutex<Vec<Option<(PartitionParams, Outcome)>>> =
        Mutex::new((0..seeds.len()).map(|_| None).collect());
    let jobs = (args.jobs as usize).min(seeds.len());
    std::thread::scope(|scope| {
        for _ in 0..jobs {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed) as usize;
                let Some(&seed) = seeds.get(i) else {
                    break;
                };
                let p = args.params(seed);
                let r = run_partition(&p, Hooks::default())
                    .map_err(|e| format!("at t={} (step {}): {}", e.now, e.step, e.reason));
                done.lock().unwrap_or_else(|e| e.into_inner())[i] = Some((p, r));
            });
        }
    });
    done.into_inner()
        .unwrap_or_else(|e| e.into_inner())
        .into_iter()
        .flatten()
        .collect()
}

/// Many runs merged.
#[derive(Default)]
struct Totals {
    runs: u64,
    ranks_max: u32,
    kinds: std::collections::BTreeMap<&'static str, u64>,
    owed: u64,
    decided: u64,
    minority: u64,
    safety: u64,
    wrongful: u64,
    decide_ms: Vec<f64>,
    failing: Vec<String>,
}

impl Totals {
    fn add(&mut self, p: &PartitionParams, r: Outcome) {
        self.runs += 1;
        self.ranks_max = self.ranks_max.max(p.ranks);
        let r = match r {
            Ok(r) => r,
            Err(why) => {
                if why.contains("minority rank") {
                    self.minority += 1;
                } else if why.contains("S1:") || why.contains("S2:") || why.contains("S3:") {
                    self.safety += 1;
                }
                self.failing.push(format!(
                    "seed {} ({} ranks, radix {}): the checker stopped it: {why}; replay: {}",
                    p.seed,
                    p.ranks,
                    p.radix,
                    p.replay_command()
                ));
                return;
            }
        };
        *self.kinds.entry(r.kind).or_insert(0) += 1;
        self.owed += u64::from(r.owed);
        if let Some(d) = r.decide_ms {
            self.decided += 1;
            self.decide_ms.push(d);
        } else if r.decided_earlier {
            // Decided in an earlier cut of a flapping split: counted, no latency sample.
            self.decided += 1;
        }
        self.wrongful += u64::from(r.wrongful_removals);
        if !r.violations.is_empty() {
            self.failing.push(format!(
                "seed {} ({} ranks, radix {}, {}): {:?}; replay: {}",
                p.seed,
                p.ranks,
                p.radix,
                r.kind,
                r.violations,
                p.replay_command()
            ));
        }
    }
}
