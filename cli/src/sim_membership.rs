//! `lifeline sim membership`: the membership scenario over one or many seeds, its oracle's
//! verdict, latency percentiles, and an optional detection-latency CDF (`--svg`).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::Args;
use lifeline_core::sim::scenario::membership::{
    run_membership, MembershipParams, MembershipSummary,
};

use crate::sim_cmd::run_scenario;
use crate::write_stdout;
use crate::CliError;

/// Arguments of `lifeline sim membership`.
#[derive(Debug, Args)]
pub(crate) struct MembershipArgs {
    /// Number of ranks.
    #[arg(long, value_name = "N", default_value_t = 256)]
    ranks: u32,
    /// Maximum children per rank, 2..=1024.
    #[arg(long, value_name = "K", default_value_t = 64)]
    radix: u32,
    /// The first seed; with --seeds M, seeds S..S+M run one after the other.
    #[arg(long, value_name = "S", default_value_t = 1)]
    seed: u64,
    /// How many seeds to run.
    #[arg(long, value_name = "M", default_value_t = 1)]
    seeds: u64,
    /// Silent losses per run (frozen for good: no reset).
    #[arg(long, default_value_t = 1)]
    silent: u32,
    /// Crashes with reset per run (hard evidence).
    #[arg(long, default_value_t = 1)]
    crashes: u32,
    /// Long pauses (2-2.5 s, then resumed) per run: removed, then told.
    #[arg(long, default_value_t = 1)]
    long_pauses: u32,
    /// Short pauses (<= 150 ms) per run: nobody removed.
    #[arg(long, default_value_t = 1)]
    short_pauses: u32,
    /// Pairs cut both ways per run.
    #[arg(long, default_value_t = 1)]
    cuts: u32,
    /// Pairs cut one way per run.
    #[arg(long, default_value_t = 1)]
    oneway_cuts: u32,
    /// How long each cut lasts, in ms.
    #[arg(long, value_name = "MS", default_value_t = 2_000)]
    cut_ms: u64,
    /// Lossy ranks per run: every link to and from them loses --loss-pct of transmissions for
    /// --loss-ms (TCP retransmits: frames arrive late, in order). They may be removed.
    #[arg(long, value_name = "N", default_value_t = 1)]
    lossy: u32,
    /// Loss per transmission on a lossy rank's links, in percent (0..=100).
    #[arg(long, value_name = "P", default_value_t = 25, value_parser = clap::value_parser!(u32).range(0..=100))]
    loss_pct: u32,
    /// How long a lossy rank's links stay lossy, in ms (the run lasts at least this long).
    #[arg(long, value_name = "MS", default_value_t = 30_000)]
    loss_ms: u64,
    /// Quorum views (`membership.quorum`): removals decided by a majority of the prior view.
    #[arg(long)]
    quorum: bool,
    /// Write the detection-latency CDF (silent and hard) as SVG to FILE.
    #[arg(long, value_name = "FILE")]
    svg: Option<PathBuf>,
    /// Print one line per simulator event to stdout (one seed only).
    #[arg(long)]
    trace: bool,
    /// Print the result as one JSON line (the last line of stdout) instead of a summary.
    #[arg(long)]
    json: bool,
}

/// Runs `lifeline sim membership`.
pub(crate) fn run(args: &MembershipArgs) -> Result<(), CliError> {
    if args.seeds == 0 {
        return Err(CliError::Usage("--seeds must be at least 1".into()));
    }
    if args.trace && args.seeds > 1 {
        return Err(CliError::Usage(
            "--trace replays one seed: drop --seeds".into(),
        ));
    }
    let start = Instant::now();
    let mut t = MembershipSummary::default();
    for seed in args.seed..args.seed.saturating_add(args.seeds) {
        let p = MembershipParams {
            ranks: args.ranks,
            radix: args.radix,
            seed,
            silent: args.silent,
            crashes: args.crashes,
            long_pauses: args.long_pauses,
            short_pauses: args.short_pauses,
            cuts: args.cuts,
            oneway_cuts: args.oneway_cuts,
            cut_ms: args.cut_ms,
            lossy: args.lossy,
            loss_pct: args.loss_pct,
            loss_ms: args.loss_ms,
            quorum: args.quorum,
        };
        let (r, _) = run_scenario(args.trace, "sim membership", |hooks| {
            run_membership(&p, hooks)
        })?;
        t.add(&p, r);
    }
    let wall = start.elapsed();
    for v in [&mut t.silent_ms, &mut t.hard_ms] {
        v.sort_by(f64::total_cmp);
    }
    if let Some(path) = &args.svg {
        write_cdf(path, &t.silent_ms, &t.hard_ms)?;
    }
    write_stdout(|out| {
        if args.json {
            writeln!(out, "{}", json(args, &t, wall))
        } else {
            writeln!(out, "{}", summary(args, &t, wall))
        }
    })?;
    crate::sim_cmd::sweep_result("membership", &t.failing, t.runs)
}

fn summary(a: &MembershipArgs, t: &MembershipSummary, wall: Duration) -> String {
    let verdict = crate::sim_cmd::sweep_verdict(&t.failing);
    let [s50, s99, smax] = MembershipSummary::percentiles(&t.silent_ms);
    let [h50, h99, hmax] = MembershipSummary::percentiles(&t.hard_ms);
    let lmax = MembershipSummary::quantile(&t.lossy_coordinator_ms, 1.0);
    format!(
        "membership: {} ranks, radix {}, {} runs: {} faulty ranks, {} wrongful evictions, {} \
         missed removals, {}/{} long-paused ranks told, {}/{} lossy ranks removed ({} accusations by them); silent loss decided in p50 {s50:.0} ms, \
         p99 {s99:.0} ms, max {smax:.0} ms; loss with reset p50 {h50:.1} ms, p99 {h99:.1} ms, \
         max {hmax:.1} ms; {} silent losses decided by a lossy coordinator (max {lmax:.0} ms); {} view changes, {:.0} frames each ({:.0} removal notices); {verdict} ({:.1} s)",
        a.ranks,
        a.radix,
        t.runs,
        t.faulty,
        t.wrongful_evictions,
        t.missed_removals,
        t.evicted_told,
        t.long_pauses,
        t.lossy_removed,
        t.lossy,
        t.lossy_accusations,
        t.lossy_coordinator_ms.len(),
        t.view_changes,
        t.frames_per_view_change(),
        t.removal_frames_per_view_change(),
        wall.as_secs_f64()
    )
}

fn json(a: &MembershipArgs, t: &MembershipSummary, wall: Duration) -> String {
    let [s50, s99, smax] = MembershipSummary::percentiles(&t.silent_ms);
    // Every silent loss, those decided by a coordinator that was itself the lossy rank too.
    let all: Vec<f64> = t
        .silent_ms
        .iter()
        .chain(&t.lossy_coordinator_ms)
        .copied()
        .collect();
    let all99 = MembershipSummary::quantile(&all, 0.99);
    let [h50, h99, hmax] = MembershipSummary::percentiles(&t.hard_ms);
    format!(
        r#"{{"ranks":{},"radix":{},"runs":{},"faulty":{},"wrongful_evictions":{},"missed_removals":{},"evicted_told":{},"long_pauses":{},"lossy":{},"lossy_removed":{},"lossy_accusations":{},"silent_detect_ms_p50":{s50:.3},"silent_detect_ms_p99":{s99:.3},"silent_detect_ms_max":{smax:.3},"hard_detect_ms_p50":{h50:.3},"hard_detect_ms_p99":{h99:.3},"hard_detect_ms_max":{hmax:.3},"silent_incl_lossy_coordinator_ms_p99":{all99:.3},"lossy_coordinator_decisions":{},"lossy_coordinator_ms_max":{:.3},"everywhere_ms_max":{:.3},"view_changes":{},"frames_per_view_change":{:.1},"removal_frames_per_view_change":{:.1},"wall_ms":{:.1}}}"#,
        a.ranks,
        a.radix,
        t.runs,
        t.faulty,
        t.wrongful_evictions,
        t.missed_removals,
        t.evicted_told,
        t.long_pauses,
        t.lossy,
        t.lossy_removed,
        t.lossy_accusations,
        t.lossy_coordinator_ms.len(),
        MembershipSummary::quantile(&t.lossy_coordinator_ms, 1.0),
        MembershipSummary::quantile(&t.everywhere_ms, 1.0),
        t.view_changes,
        t.frames_per_view_change(),
        t.removal_frames_per_view_change(),
        wall.as_secs_f64() * 1e3
    )
}

/// The detection-latency CDF: one step line per kind of loss, latency (ms) against the
/// fraction of losses decided by then.
fn write_cdf(path: &std::path::Path, silent: &[f64], hard: &[f64]) -> Result<(), CliError> {
    use plotters::prelude::*;
    let err = |e: String| CliError::Failed(format!("--svg {}: {e}", path.display()));
    let max = silent.iter().chain(hard).copied().fold(1.0f64, f64::max) * 1.05;
    let root = SVGBackend::new(path, (800, 500)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(e.to_string()))?;
    let mut chart = ChartBuilder::on(&root)
        .margin(20)
        .caption(
            "Lifeline: failure detection latency (CDF)",
            ("sans-serif", 20),
        )
        .x_label_area_size(40)
        .y_label_area_size(50)
        .build_cartesian_2d(0.0..max, 0.0..1.0)
        .map_err(|e| err(e.to_string()))?;
    chart
        .configure_mesh()
        .x_desc("fault to decided removal (ms)")
        .y_desc("fraction of losses")
        .draw()
        .map_err(|e| err(e.to_string()))?;
    for (v, color, label) in [
        (silent, BLUE, "silent loss"),
        (hard, RED, "loss with reset"),
    ] {
        if v.is_empty() {
            continue;
        }
        let n = v.len() as f64;
        let points: Vec<(f64, f64)> = std::iter::once((0.0, 0.0))
            .chain(
                v.iter()
                    .enumerate()
                    .flat_map(|(i, &x)| [(x, i as f64 / n), (x, (i + 1) as f64 / n)]),
            )
            .collect();
        chart
            .draw_series(LineSeries::new(points, &color))
            .map_err(|e| err(e.to_string()))?
            .label(format!("{label} (n = {})", v.len()))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
    }
    chart
        .configure_series_labels()
        .border_style(BLACK)
        .background_style(WHITE.mix(0.8))
        .draw()
        .map_err(|e| err(e.to_string()))?;
    root.present().map_err(|e| err(e.to_string()))
}
