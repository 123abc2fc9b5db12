//! `scale membership`: the membership scenario at scale, over many seeds.
//!
//! Runs [`run_membership`] (the scenario behind `lifeline sim membership`, heartbeat detector
//! on) for `--seeds` consecutive seeds at N ranks: per run one silent loss, one crash with
//! reset, one long pause (2-2.5 s), one short pause (<= 150 ms), a two-way and a one-way cut on
//! random pairs. Fails on any wrongful eviction, missed removal or long-paused rank not told.
//! Reports the detection-latency percentiles (silent and with reset), view changes, frames per
//! view change, wall time and peak RSS.

use std::time::Instant;

use lifeline_core::sim::membership::{run_membership, MembershipParams};
use lifeline_core::sim::Hooks;
use lifeline_core::tree::Layout;
use serde_json::Value;

use crate::args::{CliError, Flags};
use crate::report::{json_line, peak_rss_bytes};

/// Usage text of the subcommand.
pub const USAGE: &str = "\
usage: scale membership --ranks N --radix K [--seeds M] [--seed S] [--cut-ms MS]

Simulates N nodes with the heartbeat detector on, once per seed S..S+M, each run with a silent
loss, a crash with reset, a long and a short pause and a two-way and a one-way cut (--cut-ms,
default 2000). Fails on a wrongful eviction, a missed removal or a long-paused rank not told.

  --ranks N    number of simulated nodes (at least 10)
  --radix K    tree radix (2..=1024)
  --seeds M    runs (default 10)
  --seed S     the first seed (default 1)
  --cut-ms MS  how long each cut lasts (default 2000)

The last stdout line is JSON: {\"ranks\",\"runs\",\"wrongful_evictions\",\"missed_removals\",
\"silent_detect_ms_p50\",\"silent_detect_ms_p99\",\"silent_detect_ms_max\",\"hard_detect_ms_p50\",
\"hard_detect_ms_p99\",\"hard_detect_ms_max\",\"view_changes\",\"frames_per_view_change\",
\"peak_rss_bytes\",\"wall_ms\"}.";

fn quantile(v: &[f64], q: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v[((v.len() as f64 * q).ceil() as usize).clamp(1, v.len()) - 1]
}

/// Runs `scale membership`.
pub fn cli(args: &[String]) -> Result<(), CliError> {
    let f = Flags::parse(args, &["ranks", "radix", "seeds", "seed", "cut-ms"])?;
    let ranks: u32 = f.get("ranks", None)?;
    let radix: u32 = f.get("radix", None)?;
    let seeds: u64 = f.get("seeds", Some(10))?;
    let first: u64 = f.get("seed", Some(1))?;
    let cut_ms: u64 = f.get("cut-ms", Some(2_000))?;
    Layout::new(ranks, radix).map_err(|e| CliError::Usage(e.to_string()))?;
    if ranks < 10 || seeds == 0 {
        return Err(CliError::Usage(
            "need --ranks >= 10 and --seeds >= 1".into(),
        ));
    }
    let start = Instant::now();
    let (mut silent, mut hard) = (Vec::new(), Vec::new());
    let (mut wrongful, mut missed, mut view_changes, mut frames) = (0u64, 0u64, 0u64, 0f64);
    for seed in first..first.saturating_add(seeds) {
        let mut p = MembershipParams::new(ranks, radix, seed);
        p.cut_ms = cut_ms;
        let r =
            run_membership(&p, Hooks::default()).map_err(|e| CliError::Failed(e.to_string()))?;
        if !r.violations().is_empty() || r.evicted_told < p.long_pauses {
            return Err(CliError::Failed(format!(
                "seed {seed}: {:?}, {} long-paused ranks told; replay: {}",
                r.violations(),
                r.evicted_told,
                p.replay_command()
            )));
        }
        wrongful += u64::from(r.wrongful_evictions);
        missed += u64::from(r.missed_removals);
        view_changes += u64::from(r.view_changes);
        frames += r.frames_per_view_change * f64::from(r.view_changes);
        silent.extend(r.detect_ms_silent);
        hard.extend(r.detect_ms_hard);
    }
    silent.sort_by(f64::total_cmp);
    hard.sort_by(f64::total_cmp);
    let wall_ms = start.elapsed().as_secs_f64() * 1e3;
    let per_change = frames / view_changes.max(1) as f64;
    println!(
        "membership: {ranks} ranks, radix {radix}, {seeds} runs: {wrongful} wrongful evictions, \
         {missed} missed; silent loss p50/p99/max {:.0}/{:.0}/{:.0} ms, with reset {:.1}/{:.1}/{:.1} \
         ms; {view_changes} view changes, {per_change:.0} frames each; {:.1} s",
        quantile(&silent, 0.5),
        quantile(&silent, 0.99),
        quantile(&silent, 1.0),
        quantile(&hard, 0.5),
        quantile(&hard, 0.99),
        quantile(&hard, 1.0),
        wall_ms / 1e3
    );
    println!(
        "{}",
        json_line(&[
            ("ranks", Value::from(ranks)),
            ("runs", Value::from(seeds)),
            ("wrongful_evictions", Value::from(wrongful)),
            ("missed_removals", Value::from(missed)),
            ("silent_detect_ms_p50", Value::from(quantile(&silent, 0.5))),
            ("silent_detect_ms_p99", Value::from(quantile(&silent, 0.99))),
            ("silent_detect_ms_max", Value::from(quantile(&silent, 1.0))),
            ("hard_detect_ms_p50", Value::from(quantile(&hard, 0.5))),
            ("hard_detect_ms_p99", Value::from(quantile(&hard, 0.99))),
            ("hard_detect_ms_max", Value::from(quantile(&hard, 1.0))),
            ("view_changes", Value::from(view_changes)),
            ("frames_per_view_change", Value::from(per_change)),
            ("peak_rss_bytes", Value::from(peak_rss_bytes())),
            ("wall_ms", Value::from(wall_ms)),
        ])
    );
    Ok(())
}
