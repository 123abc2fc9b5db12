//! `scale membership`: the membership scenario at scale, over many seeds.
//!
//! Runs [`run_membership`] (the scenario behind `lifeline sim membership`, heartbeat detector
//! on) for `--seeds` consecutive seeds at N ranks: per run one silent loss, one crash with
//! reset, one long pause (2-2.5 s), one short pause (<= 150 ms), a two-way and a one-way cut on
//! random pairs, and one lossy rank (25% of transmissions lost for 30 s; it may be removed). Fails on any wrongful eviction, missed removal or long-paused rank not told.
//! Reports the detection-latency percentiles (silent and with reset), view changes, frames per
//! view change, wall time and peak RSS.

use std::time::Instant;

use lifeline_core::sim::scenario::membership::{
    run_membership, MembershipParams, MembershipSummary,
};
use lifeline_core::sim::Hooks;
use lifeline_core::tree::Layout;
use serde_json::Value;

use crate::args::{CliError, Flags};
use crate::report::{json_line, peak_rss_bytes};

/// Usage text of the subcommand.
pub const USAGE: &str = "\
usage: scale membership --ranks N --radix K [--seeds M] [--seed S] [--cut-ms MS]
                        [--lossy N] [--loss-pct P] [--loss-ms MS]

Simulates N nodes with the heartbeat detector on, once per seed S..S+M, each run with a silent
loss, a crash with reset, a long and a short pause, a two-way and a one-way cut (--cut-ms,
default 2000) and a lossy rank (may be removed; nobody else may). Fails on a wrongful
eviction, a missed removal or a long-paused rank not told.

  --ranks N      number of simulated nodes (at least 10)
  --radix K      tree radix (2..=1024)
  --seeds M      runs (default 10)
  --seed S       the first seed (default 1)
  --cut-ms MS    how long each cut lasts (default 2000)
  --lossy N      lossy ranks per run (default 1)
  --loss-pct P   loss per transmission on their links, 0..=100 (default 25)
  --loss-ms MS   how long their links stay lossy (default 30000; the run lasts as long)

The last stdout line is JSON: {\"ranks\",\"runs\",\"wrongful_evictions\",\"missed_removals\",\"lossy_removed\",\"lossy_accusations\",
\"silent_detect_ms_p50\",\"silent_detect_ms_p99\",\"silent_detect_ms_max\",\"hard_detect_ms_p50\",
\"hard_detect_ms_p99\",\"hard_detect_ms_max\",\"lossy_coordinator_decisions\",
\"lossy_coordinator_ms_max\",\"view_changes\",\"frames_per_view_change\",
\"removal_frames_per_view_change\",
\"peak_rss_bytes\",\"wall_ms\"}.";

/// Runs `scale membership`.
pub fn cli(args: &[String]) -> Result<(), CliError> {
    let f = Flags::parse(
        args,
        &[
            "ranks", "radix", "seeds", "seed", "cut-ms", "lossy", "loss-pct", "loss-ms",
        ],
    )?;
    let ranks: u32 = f.get("ranks", None)?;
    let radix: u32 = f.get("radix", None)?;
    let seeds: u64 = f.get("seeds", Some(10))?;
    let first: u64 = f.get("seed", Some(1))?;
    let cut_ms: u64 = f.get("cut-ms", Some(2_000))?;
    let defaults = MembershipParams::new(ranks, radix, first);
    let lossy: u32 = f.get("lossy", Some(defaults.lossy))?;
    let loss_pct: u32 = f.get("loss-pct", Some(defaults.loss_pct))?;
    let loss_ms: u64 = f.get("loss-ms", Some(defaults.loss_ms))?;
    Layout::new(ranks, radix).map_err(|e| CliError::Usage(e.to_string()))?;
    if ranks < 10 || seeds == 0 || loss_pct > 100 {
        return Err(CliError::Usage(
            "need --ranks >= 10, --seeds >= 1 and --loss-pct <= 100".into(),
        ));
    }
    let start = Instant::now();
    let mut t = MembershipSummary::default();
    for seed in first..first.saturating_add(seeds) {
        let mut p = MembershipParams::new(ranks, radix, seed);
        p.cut_ms = cut_ms;
        p.lossy = lossy;
        p.loss_pct = loss_pct;
        p.loss_ms = loss_ms;
        let r =
            run_membership(&p, Hooks::default()).map_err(|e| CliError::Failed(e.to_string()))?;
        t.add(&p, r);
        if let Some(f) = t.failing.first() {
            return Err(CliError::Failed(f.clone()));
        }
    }
    let wall_ms = start.elapsed().as_secs_f64() * 1e3;
    let [s50, s99, smax] = MembershipSummary::percentiles(&t.silent_ms);
    let [h50, h99, hmax] = MembershipSummary::percentiles(&t.hard_ms);
    let per_change = t.frames_per_view_change();
    println!(
        "membership: {ranks} ranks, radix {radix}, {seeds} runs: {} wrongful evictions, {} \
         missed, {}/{} lossy removed; silent loss p50/p99/max {s50:.0}/{s99:.0}/{smax:.0} ms, with reset \
         {h50:.1}/{h99:.1}/{hmax:.1} ms; {} view changes, {per_change:.0} frames each; {:.1} s",
        t.wrongful_evictions,
        t.missed_removals,
        t.lossy_removed,
        t.lossy,
        t.view_changes,
        wall_ms / 1e3
    );
    println!(
        "{}",
        json_line(&[
            ("ranks", Value::from(ranks)),
            ("runs", Value::from(seeds)),
            ("wrongful_evictions", Value::from(t.wrongful_evictions)),
            ("missed_removals", Value::from(t.missed_removals)),
            ("lossy_removed", Value::from(t.lossy_removed)),
            ("lossy_accusations", Value::from(t.lossy_accusations)),
            ("silent_detect_ms_p50", Value::from(s50)),
            ("silent_detect_ms_p99", Value::from(s99)),
            ("silent_detect_ms_max", Value::from(smax)),
            ("hard_detect_ms_p50", Value::from(h50)),
            ("hard_detect_ms_p99", Value::from(h99)),
            ("hard_detect_ms_max", Value::from(hmax)),
            (
                "lossy_coordinator_decisions",
                Value::from(t.lossy_coordinator_ms.len()),
            ),
            (
                "lossy_coordinator_ms_max",
                Value::from(MembershipSummary::quantile(&t.lossy_coordinator_ms, 1.0)),
            ),
            ("view_changes", Value::from(t.view_changes)),
            ("frames_per_view_change", Value::from(per_change)),
            (
                "removal_frames_per_view_change",
                Value::from(t.removal_frames_per_view_change()),
            ),
            ("peak_rss_bytes", Value::from(peak_rss_bytes())),
            ("wall_ms", Value::from(wall_ms)),
        ])
    );
    Ok(())
}
