//! `lifeline sim revoke`: one revoke from a random origin over one or many seeds, fault-free
//! or with ranks crashing before (removed, or not yet detected) and during the flood; every
//! survivor must get `Revoked` exactly once. Prints hops and latency against the overlay's
//! diameter, and notices per revoke against `m × degree`.

use clap::Args;
use lifeline_core::sim::scenario::revoke::{run_revoke, RevokeParams, RevokeReport};

use crate::sim_cmd::run_scenario;
use crate::write_stdout;
use crate::CliError;

/// Arguments of `lifeline sim revoke`.
#[derive(Debug, Args)]
pub(crate) struct RevokeArgs {
    /// Ranks.
    #[arg(long, value_name = "N", default_value_t = 1024)]
    ranks: u32,
    /// Tree radix (the tree carries the removals before the revoke).
    #[arg(long, value_name = "K", default_value_t = 8)]
    radix: u32,
    /// The first seed; with --seeds M, seeds S..S+M run one after the other.
    #[arg(long, value_name = "S", default_value_t = 1)]
    seed: u64,
    /// How many seeds to run.
    #[arg(long, value_name = "M", default_value_t = 1)]
    seeds: u64,
    /// Crash ranks before the revoke (some removed everywhere, up to 3 undetected) and during
    /// the flood, the undetected and the during together at most the overlay's degree − 1.
    #[arg(long)]
    faults: bool,
    /// No network jitter: every hop takes the base latency (50 us), so the farthest rank is
    /// exactly the overlay's diameter away.
    #[arg(long)]
    exact: bool,
    /// Print one line per simulator event to stdout (one seed only).
    #[arg(long)]
    trace: bool,
    /// Print each run as one JSON line instead of a summary.
    #[arg(long)]
    json: bool,
}

/// Runs `lifeline sim revoke`.
pub(crate) fn run(args: &RevokeArgs) -> Result<(), CliError> {
    if args.trace && args.seeds > 1 {
        return Err(CliError::Usage("--trace takes one seed".into()));
    }
    for seed in args.seed..args.seed.saturating_add(args.seeds.max(1)) {
        let p = RevokeParams {
            ranks: args.ranks,
            radix: args.radix,
            seed,
            faults: args.faults,
            exact: args.exact,
        };
        let (r, wall) = run_scenario(args.trace, "sim revoke", |hooks| run_revoke(&p, hooks))?;
        let line = if args.json {
            json(seed, &r, wall.as_secs_f64())
        } else {
            summary(seed, &r, wall.as_secs_f64())
        };
        write_stdout(|o| writeln!(o, "{line}"))?;
    }
    Ok(())
}

fn summary(seed: u64, r: &RevokeReport, wall: f64) -> String {
    let m = u64::from(r.members);
    format!(
        "revoke: {} ranks ({} removed before, {} crashed undetected, {} during), seed {seed}, \
         origin {}: all {} survivors revoked once; hops p50 {} max {} (overlay diameter {}, \
         degree {}); latency p50 {:.3} ms max {:.3} ms; {} notices ({:.2} x m x degree); \
         {wall:.2} s wall",
        r.ranks,
        r.removed,
        r.undetected,
        r.crashed_during,
        r.origin,
        r.survivors,
        r.hops_p50,
        r.hops_max,
        r.diameter,
        r.degree,
        r.latency_p50_ns as f64 / 1e6,
        r.latency_max_ns as f64 / 1e6,
        r.notices,
        r.notices as f64 / (m * u64::from(r.degree)).max(1) as f64,
    )
}

fn json(seed: u64, r: &RevokeReport, wall: f64) -> String {
    serde_json::json!({
        "seed": seed,
        "ranks": r.ranks,
        "members": r.members,
        "removed": r.removed,
        "undetected": r.undetected,
        "crashed_during": r.crashed_during,
        "origin": r.origin,
        "survivors": r.survivors,
        "degree": r.degree,
        "diameter": r.diameter,
        "hops_p50": r.hops_p50,
        "hops_max": r.hops_max,
        "latency_ms_p50": r.latency_p50_ns as f64 / 1e6,
        "latency_ms_max": r.latency_max_ns as f64 / 1e6,
        "notices": r.notices,
        "wall_s": wall,
        "pass": true,
    })
    .to_string()
}
