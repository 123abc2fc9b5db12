//! `scale joins`: a cluster formed from joins.
//!
//! Runs [`run_elastic`] (the scenario behind `lifeline sim elastic`, heartbeat detector on)
//! with a few founding members and every other rank a joiner: each starts at a uniformly random
//! time within `--skew-ms`, asks three random members in turn, and is admitted by the
//! coordinator's batched view changes. Reports how many view changes formed the cluster (and
//! how many joiners each admitted), join latency percentiles, the start-up time (first joiner
//! started to last joiner admitted), wall time and peak RSS. Fails on any oracle violation
//! (mixed-up reply, a rank given twice, views disagreeing, a live joiner not admitted, a
//! wrongful eviction, a later broadcast missing a joiner).
//!
//! With `--launch-skew-ms` the founders are a launch spread over that long that forms view 0
//! from check-ins (`--founders` equal to `--ranks`: a launch of N ranks and no joiner); the
//! check-in view changes and the time to `Ready` are reported too.

use std::time::Instant;

use lifeline_core::sim::scenario::elastic::{run_elastic, ElasticParams};
use lifeline_core::sim::scenario::membership::MembershipSummary;
use lifeline_core::sim::Hooks;
use lifeline_core::tree::Layout;
use serde_json::Value;

use crate::args::{CliError, Flags};
use crate::report::{json_line, peak_rss_bytes};

/// Usage text of the subcommand.
pub const USAGE: &str = "\
usage: scale joins --ranks N --radix K [--founders F] [--skew-ms MS] [--launch-skew-ms MS]
                   [--remembered R] [--seed S]

Simulates a cluster of N ranks formed from joins: F founding members (default 16), the other
N - F join through three random members each, starting uniformly over --skew-ms (default
3000). Fails on any violation of the elastic scenario's oracle.

  --ranks N            ranks once formed (founders included)
  --radix K            tree radix (2..=1024)
  --founders F         members at the start (default 16, 2..=N; N: no joiner)
  --skew-ms MS         joiners start spread over this many ms (default 3000)
  --launch-skew-ms MS  the founders start spread over this many ms and form view 0 from
                       check-ins (default 0: all at once, still checking in)
  --remembered R       join.remembered at every member (default 1024: the node's 8192 would
                       keep 8192 admitted nonces at each of 65,536 simulated members, ~13 GB;
                       no answer is lost here, so no retry needs one)
  --seed S             the run's seed (default 1)

The last stdout line is JSON: {\"ranks\",\"founders\",\"joins\",\"joins_admitted\",\"join_views\",
\"view_size_max\",\"view_sizes_distinct\",\"join_ms_p50\",\"join_ms_p99\",\"join_ms_max\",
\"startup_ms\",\"join_tries\",\"startup_view_changes\",\"ready_ms\",\"wrongful_evictions\",
\"peak_rss_bytes\",\"wall_ms\"}.";

/// Runs `scale joins`.
pub fn cli(args: &[String]) -> Result<(), CliError> {
    let f = Flags::parse(
        args,
        &[
            "ranks",
            "radix",
            "founders",
            "skew-ms",
            "launch-skew-ms",
            "remembered",
            "seed",
        ],
    )?;
    let ranks: u32 = f.get("ranks", None)?;
    let radix: u32 = f.get("radix", None)?;
    let founders: u32 = f.get("founders", Some(16))?;
    let skew_ms: u64 = f.get("skew-ms", Some(3_000))?;
    let launch_skew_ms: u64 = f.get("launch-skew-ms", Some(0))?;
    let remembered: u32 = f.get("remembered", Some(1_024))?;
    let seed: u64 = f.get("seed", Some(1))?;
    Layout::new(ranks, radix).map_err(|e| CliError::Usage(e.to_string()))?;
    if founders < 2 || founders > ranks {
        return Err(CliError::Usage("need 2 <= --founders <= --ranks".into()));
    }
    if remembered == 0 {
        return Err(CliError::Usage("--remembered must be positive".into()));
    }
    let mut p = ElasticParams::new(founders, radix, seed, ranks - founders);
    p.skew_ms = skew_ms;
    p.launch_skew_ms = launch_skew_ms;
    p.remembered = Some(remembered);
    let start = Instant::now();
    let r = run_elastic(&p, Hooks::default()).map_err(|e| CliError::Failed(e.to_string()))?;
    let wall_ms = start.elapsed().as_secs_f64() * 1e3;
    let v = r.all_violations();
    if !v.is_empty() {
        return Err(CliError::Failed(format!(
            "{} violations, first: {}; replay: {}",
            v.len(),
            v[0],
            p.replay_command()
        )));
    }
    let [j50, j99, jmax] = MembershipSummary::percentiles(&r.join_ms);
    let mut sizes = r.view_sizes.clone();
    let size_max = sizes.iter().copied().max().unwrap_or(0);
    sizes.sort_unstable();
    sizes.dedup();
    println!(
        "joins: {ranks} ranks formed from {founders} founders (launched over {launch_skew_ms} ms: {} check-in view changes, last ready {:.0} ms) and {} joiners over {skew_ms} ms in {} view changes (largest {size_max} joiners, {} distinct sizes); join p50/p99/max {j50:.1}/{j99:.1}/{jmax:.1} ms; start-up {:.0} ms; {:.1} s",
        r.startup_view_changes,
        r.ready_ms,
        r.joins,
        r.join_views,
        sizes.len(),
        r.startup_ms,
        wall_ms / 1e3
    );
    println!(
        "{}",
        json_line(&[
            ("ranks", Value::from(ranks)),
            ("founders", Value::from(founders)),
            ("joins", Value::from(r.joins)),
            ("joins_admitted", Value::from(r.joins_admitted)),
            ("join_views", Value::from(r.join_views)),
            ("view_size_max", Value::from(size_max)),
            ("view_sizes_distinct", Value::from(sizes.len())),
            ("join_ms_p50", Value::from(j50)),
            ("join_ms_p99", Value::from(j99)),
            ("join_ms_max", Value::from(jmax)),
            ("startup_ms", Value::from(r.startup_ms)),
            ("join_tries", Value::from(r.join_tries)),
            ("startup_view_changes", Value::from(r.startup_view_changes)),
            ("ready_ms", Value::from(r.ready_ms)),
            ("wrongful_evictions", Value::from(r.wrongful_evictions)),
            ("peak_rss_bytes", Value::from(peak_rss_bytes())),
            ("wall_ms", Value::from(wall_ms)),
        ])
    );
    Ok(())
}
