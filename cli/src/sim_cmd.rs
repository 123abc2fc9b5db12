//! `lifeline sim`: deterministic simulations of many real nodes, one seed per run.
//!
//! A subcommand group: `sim flood`, `sim xcast` and `sim relm`, one variant of [`SimCommand`]
//! each. Every run is replayable: a failure prints its seed and the exact command.

use std::cell::{Cell, RefCell};
use std::io::{self, BufWriter, IsTerminal, StdoutLock, Write};
use std::rc::Rc;
use std::time::{Duration, Instant};

use clap::{Args, Subcommand};
use lifeline_core::sim::scenario::flood::{run_flood, FloodParams, FloodReport};
use lifeline_core::sim::scenario::relm::{check_report, run_relm, RelmParams, RelmReport};
use lifeline_core::sim::scenario::xcast::{run_xcast, XcastParams, XcastReport};
use lifeline_core::sim::{Hooks, ProgressHook, SimFailure, TraceSink, World};

use crate::tree_cmd::layout;
use crate::{write_stdout, CliError};

/// Steps between two redraws of the progress line.
const PROGRESS_EVERY: u64 = 1 << 16;

/// Arguments of `lifeline sim`.
#[derive(Debug, Args)]
pub(crate) struct SimArgs {
    #[command(subcommand)]
    command: SimCommand,
}

/// The simulations.
#[derive(Debug, Subcommand)]
enum SimCommand {
    /// Flood the tree: every rank must deliver exactly once, with n-1 frames.
    ///
    /// Fault-free, the root floods once. With --faults, floods run through seeded crashes, a
    /// pause, a cut and a partition; then everything heals and a last flood from the root must
    /// reach every survivor exactly once.
    Flood(FloodArgs),
    /// Stream reliable broadcasts (xcast) while ranks crash; check exactly-once, in-order
    /// delivery and completion.
    ///
    /// Starts --ops broadcasts, one every 20 us of virtual time, from origins drawn from the seed
    /// (or all from the root with --root-origin), while a --crash fraction of the ranks crashes
    /// (scattered ranks, a parent with its child, sometimes the root). Every survivor must
    /// deliver every op exactly once and in op order, and every surviving origin must hear its
    /// op's completion once, after every survivor delivered it. A failure-free run from the root
    /// must cost exactly 2(n-1) frames per op.
    Xcast(XcastArgs),
    /// Stream reliable point-to-point messages (RELM) between random pairs while ranks crash;
    /// check exactly-once, in-order delivery per (source, destination) and that nothing leaks.
    ///
    /// Sends --messages messages, one every 5 us of virtual time (all at once with --burst),
    /// each from a live rank to another live rank drawn from the seed, while a --crash fraction
    /// of the ranks crashes at random times (relays, ends, sometimes the root). Every message
    /// between two survivors must be delivered exactly once and in uid order and acknowledged
    /// to its origin; every message to a rank that died must be acknowledged or reported failed
    /// to its surviving origin; once traffic settles, no survivor may hold message state.
    Relm(RelmArgs),
    /// Run the membership scenario (heartbeat detector on) with faults of every kind; check
    /// that no rank is removed without a fault of its own and every lost rank is.
    ///
    /// Per run: --silent ranks freeze for good (no reset), --crashes die with reset,
    /// --long-pauses freeze for 2-2.5 s (must be removed, then told on resume), --short-pauses
    /// freeze for up to 150 ms (must not be removed), and --cuts / --oneway-cuts pairs lose
    /// their link for --cut-ms. Prints detection-latency percentiles (silent and hard
    /// separately), view changes and frames per view change; --svg writes the latency CDF.
    Membership(crate::sim_membership::MembershipArgs),
    /// Joiners join a running cluster through real contacts (start skew, one or many contacts,
    /// contacts and the coordinator crashing mid-join, joiners crashing, CPU-starved members);
    /// check the oracle (no mixed-up reply, one rank per joiner, views agree, every live joiner
    /// admitted, no wrongful eviction, a later broadcast reaches the joiners).
    Elastic(crate::sim_elastic::ElasticArgs),
    /// Shrink campaigns at random times under joins, crashes (targets among them) and xcast
    /// and RELM load; check the oracle (one completion per campaign naming exactly its
    /// targets, none open past its bound, no failure verdict for a departing rank, only
    /// targets leave, nothing lost or duplicated among survivors, survivors agree).
    Shrink(crate::sim_shrink::ShrinkArgs),
    /// Quorum views under a random fault plan per seed (a split into 2 or 3 sides, a one-way
    /// cut, a flapping partition, duelling candidates; the root or candidates crashed or paused
    /// mid-decision), then a heal; check S1-S3 and that a minority decides nothing after every
    /// step, that a majority side cut past 3 s removes exactly the other sides within 3 s, and
    /// that after the heal every removed rank is told and no other rank is removed.
    Partition(crate::sim_partition::PartitionArgs),
    /// One revoke from a random origin: every survivor must get `Revoked` exactly once, even
    /// with ranks crashed before it (removed, or not yet detected) and during the flood (at
    /// most the overlay's degree − 1 undetected in all). Reports hops against the binomial
    /// overlay's diameter, latency, and notices per revoke.
    Revoke(crate::sim_revoke::RevokeArgs),
}

/// Arguments of `lifeline sim flood`.
#[derive(Debug, Args)]
struct FloodArgs {
    /// Number of ranks, 1..=4294967292.
    #[arg(long, value_name = "N")]
    ranks: u64,
    /// Maximum children per rank, 2..=1024.
    #[arg(long, value_name = "K", default_value_t = 64)]
    radix: u64,
    /// The run's one seed (latency jitter, node seeds, the fault schedule).
    #[arg(long, value_name = "S", default_value_t = 1)]
    seed: u64,
    /// Run the faulty variant.
    #[arg(long)]
    faults: bool,
    /// Print one line per simulator event to stdout.
    #[arg(long)]
    trace: bool,
    /// Print the result as one JSON line (the last line of stdout) instead of a summary.
    #[arg(long)]
    json: bool,
}

/// Arguments of `lifeline sim xcast`.
#[derive(Debug, Args)]
struct XcastArgs {
    /// Number of ranks, 1..=4294967292.
    #[arg(long, value_name = "N")]
    ranks: u64,
    /// Maximum children per rank, 2..=1024.
    #[arg(long, value_name = "K", default_value_t = 64)]
    radix: u64,
    /// Broadcasts to start, back to back, 1..=4294967295.
    #[arg(long, value_name = "M", default_value_t = 10)]
    ops: u64,
    /// Fraction of the ranks to crash during the stream, 0..=0.5.
    #[arg(
        long,
        value_name = "FRACTION",
        default_value_t = 0.0,
        allow_negative_numbers = true
    )]
    crash: f64,
    /// The run's one seed (latency jitter, node seeds, origins, the crash schedule).
    #[arg(long, value_name = "S", default_value_t = 1)]
    seed: u64,
    /// Start every op at the root (otherwise origins are drawn from the seed). If the root
    /// crashed and no survivor has taken over yet when the next op is due, the stream ends
    /// there: the report's "ops" counts the ops started.
    #[arg(long)]
    root_origin: bool,
    /// Print one line per simulator event to stdout.
    #[arg(long)]
    trace: bool,
    /// Print the result as one JSON line (the last line of stdout) instead of a summary.
    #[arg(long)]
    json: bool,
}

/// Arguments of `lifeline sim relm`.
#[derive(Debug, Args)]
struct RelmArgs {
    /// Number of ranks, 2..=4294967292.
    #[arg(long, value_name = "N")]
    ranks: u64,
    /// Maximum children per rank, 2..=1024.
    #[arg(long, value_name = "K", default_value_t = 64)]
    radix: u64,
    /// Messages to send, 1..=4294967295.
    #[arg(long, value_name = "M", default_value_t = 1000)]
    messages: u64,
    /// Fraction of the ranks to crash during the stream, 0..=0.5.
    #[arg(
        long,
        value_name = "FRACTION",
        default_value_t = 0.0,
        allow_negative_numbers = true
    )]
    crash: f64,
    /// The run's one seed (latency jitter, node seeds, the pairs, the crash schedule).
    #[arg(long, value_name = "S", default_value_t = 1)]
    seed: u64,
    /// Send every message at once (all in flight together) instead of one every 5 us.
    #[arg(long)]
    burst: bool,
    /// Print one line per simulator event to stdout.
    #[arg(long)]
    trace: bool,
    /// Print the result as one JSON line (the last line of stdout) instead of a summary.
    #[arg(long)]
    json: bool,
}

/// Runs `lifeline sim`.
pub(crate) fn run(args: &SimArgs) -> Result<(), CliError> {
    match &args.command {
        SimCommand::Flood(a) => flood(a),
        SimCommand::Xcast(a) => xcast(a),
        SimCommand::Relm(a) => relm(a),
        SimCommand::Membership(a) => crate::sim_membership::run(a),
        SimCommand::Elastic(a) => crate::sim_elastic::run(a),
        SimCommand::Shrink(a) => crate::sim_shrink::run(a),
        SimCommand::Partition(a) => crate::sim_partition::run(a),
        SimCommand::Revoke(a) => crate::sim_revoke::run(a),
    }
}

/// Runs a scenario with the trace sink and progress line `trace` and `label` ask for (see
/// [`Output::new`]); returns its report and the wall time it took.
pub(crate) fn run_scenario<R>(
    trace: bool,
    label: &'static str,
    run: impl FnOnce(Hooks) -> Result<R, SimFailure>,
) -> Result<(R, Duration), CliError> {
    let (output, trace, progress) = Output::new(trace, label);
    let hooks = Hooks {
        trace,
        progress,
        progress_every: PROGRESS_EVERY,
    };
    let start = Instant::now();
    let result = run(hooks);
    let wall = start.elapsed();
    Ok((output.finish(result)?, wall))
}

/// The output side of a run: the trace sink and the progress line, set up before the run and
/// finished after it.
struct Output {
    trace: Option<Rc<RefCell<TraceOut>>>,
    progress: Option<Progress>,
}

impl Output {
    /// With `trace`, every event goes to stdout; otherwise, on a terminal, a progress line
    /// labelled `label` is redrawn on stderr. Returns the hooks to hand to the scenario.
    fn new(trace: bool, label: &'static str) -> (Self, Option<TraceSink>, Option<ProgressHook>) {
        let trace = trace.then(|| Rc::new(RefCell::new(TraceOut::new())));
        let sink = trace.as_ref().map(|t| {
            let t = Rc::clone(t);
            Box::new(move |line: &str| t.borrow_mut().line(line)) as TraceSink
        });
        let progress = (trace.is_none() && io::stderr().is_terminal()).then(Progress::default);
        let hook = progress.as_ref().map(|p| {
            let drawn = Rc::clone(&p.drawn);
            Box::new(move |w: &World| {
                // Best effort: a progress line that cannot be drawn is not worth failing the run.
                let _ = write!(
                    io::stderr().lock(),
                    "\r{label}: {} steps, queue {}, t={}   ",
                    w.stats().steps,
                    w.queue_len(),
                    w.now()
                );
                drawn.set(true);
            }) as ProgressHook
        });
        (Self { trace, progress }, sink, hook)
    }

    /// Clears the progress line and flushes the trace, so that every trace line goes out before
    /// the summary (or the failure); then maps the run's result. Call after the scenario
    /// returned (its sink closure died with the simulator, so this holds the last handle).
    fn finish<R>(self, result: Result<R, SimFailure>) -> Result<R, CliError> {
        if let Some(p) = self.progress {
            p.clear();
        }
        let trace_err = self.trace.and_then(|t| {
            let err = t.borrow_mut().finish();
            err
        });
        let report = result.map_err(|e| CliError::Failed(e.to_string()))?;
        match trace_err {
            Some(e) => Err(CliError::Io(e)),
            None => Ok(report),
        }
    }
}

fn flood(args: &FloodArgs) -> Result<(), CliError> {
    let layout = layout(args.ranks, args.radix)?;
    let params = FloodParams {
        ranks: layout.span(),
        radix: layout.radix(),
        seed: args.seed,
        faults: args.faults,
    };
    let (report, wall) = run_scenario(args.trace, "sim flood", |hooks| run_flood(&params, hooks))?;
    write_stdout(|out| {
        if args.json {
            writeln!(out, "{}", json(&report, wall))
        } else {
            writeln!(out, "{}", summary(&params, &report, wall))
        }
    })
}

/// The human-readable summary line.
fn summary(p: &FloodParams, r: &FloodReport, wall: Duration) -> String {
    format!(
        "flood: {} ranks, radix {}, seed {}{}: {} frames, {} deliveries, {} crashed, {} events; \
         virtual time {:.3} ms, wall {:.3} ms",
        r.ranks,
        p.radix,
        p.seed,
        if p.faults { ", with faults" } else { "" },
        r.frames,
        r.delivered,
        r.crashed,
        r.events,
        r.virtual_ns as f64 / 1e6,
        wall.as_secs_f64() * 1e3,
    )
}

/// The JSON record, keys in a fixed order.
fn json(r: &FloodReport, wall: Duration) -> String {
    format!(
        r#"{{"ranks":{},"frames":{},"events":{},"delivered":{},"crashed":{},"virtual_ms":{:.3},"wall_ms":{:.3}}}"#,
        r.ranks,
        r.frames,
        r.events,
        r.delivered,
        r.crashed,
        r.virtual_ns as f64 / 1e6,
        wall.as_secs_f64() * 1e3,
    )
}

/// The largest crash fraction `sim xcast` and `sim relm` accept (the scenarios' own bound).
const MAX_CRASH: f64 = 0.5;

/// Validates `--crash`: a fraction in `0..=MAX_CRASH` (NaN is out of range), with `-0`
/// normalised to `0` (it would print as "-0" in the replay command).
fn crash_fraction(crash: f64) -> Result<f64, CliError> {
    if !(0.0..=MAX_CRASH).contains(&crash) {
        return Err(CliError::Usage(format!(
            "--crash {crash} is out of range (0..={MAX_CRASH})"
        )));
    }
    Ok(if crash == 0.0 { 0.0 } else { crash })
}

fn xcast(args: &XcastArgs) -> Result<(), CliError> {
    let layout = layout(args.ranks, args.radix)?;
    let ops = u32::try_from(args.ops)
        .ok()
        .filter(|&m| m >= 1)
        .ok_or_else(|| {
            CliError::Usage(format!(
                "--ops {} is out of range (1..={})",
                args.ops,
                u32::MAX
            ))
        })?;
    let crash = crash_fraction(args.crash)?;
    let params = XcastParams {
        ranks: layout.span(),
        radix: layout.radix(),
        ops,
        crash,
        seed: args.seed,
        root_origin: args.root_origin,
    };
    let (report, wall) = run_scenario(args.trace, "sim xcast", |hooks| run_xcast(&params, hooks))?;
    write_stdout(|out| {
        if args.json {
            writeln!(out, "{}", xcast_json(&report, wall))
        } else {
            writeln!(out, "{}", xcast_summary(&params, &report, wall))
        }
    })
}

/// The human-readable summary of an xcast run.
fn xcast_summary(p: &XcastParams, r: &XcastReport, wall: Duration) -> String {
    let origins = if p.root_origin {
        "from the root"
    } else {
        "from seeded origins"
    };
    let crashed = match r.crashed {
        0 => "no rank crashed".to_owned(),
        1 => format!("1 of {} ranks crashed (--crash {})", r.ranks, p.crash),
        c => format!("{c} of {} ranks crashed (--crash {})", r.ranks, p.crash),
    };
    let yes_no = |b: bool| if b { "yes" } else { "NO" };
    format!(
        "xcast: {} ranks, radix {}, seed {}, {} ops {origins}: {crashed}; every survivor \
         delivered every op exactly once: {}, in order: {}; {} completions, each reported to its \
         surviving origin: {}; {} frames, {} events; virtual time {:.3} ms, wall {:.3} ms",
        r.ranks,
        p.radix,
        p.seed,
        r.ops,
        yes_no(r.delivered_exactly_once),
        yes_no(r.in_order),
        r.completions,
        yes_no(r.completion_reported_to_origin),
        r.frames,
        r.events,
        r.virtual_ns as f64 / 1e6,
        wall.as_secs_f64() * 1e3,
    )
}

/// The JSON record of an xcast run, keys in a fixed order.
fn xcast_json(r: &XcastReport, wall: Duration) -> String {
    format!(
        r#"{{"ranks":{},"ops":{},"crashed":{},"frames":{},"delivered_exactly_once":{},"in_order":{},"completions":{},"completion_reported_to_origin":{},"virtual_ms":{:.3},"wall_ms":{:.3}}}"#,
        r.ranks,
        r.ops,
        r.crashed,
        r.frames,
        r.delivered_exactly_once,
        r.in_order,
        r.completions,
        r.completion_reported_to_origin,
        r.virtual_ns as f64 / 1e6,
        wall.as_secs_f64() * 1e3,
    )
}

fn relm(args: &RelmArgs) -> Result<(), CliError> {
    let layout = layout(args.ranks, args.radix)?;
    if layout.span() < 2 {
        return Err(CliError::Usage(format!(
            "--ranks {} is out of range for RELM (2..={}): a message needs a source and \
             another destination",
            args.ranks,
            lifeline_core::tree::MAX_SPAN
        )));
    }
    let messages = u32::try_from(args.messages)
        .ok()
        .filter(|&m| m >= 1)
        .ok_or_else(|| {
            CliError::Usage(format!(
                "--messages {} is out of range (1..={})",
                args.messages,
                u32::MAX
            ))
        })?;
    let params = RelmParams {
        ranks: layout.span(),
        radix: layout.radix(),
        messages,
        crash: crash_fraction(args.crash)?,
        seed: args.seed,
        burst: args.burst,
    };
    let (report, wall) = run_scenario(args.trace, "sim relm", |hooks| run_relm(&params, hooks))?;
    // The report goes out even when it breaks an invariant: its counters say which.
    write_stdout(|out| {
        if args.json {
            writeln!(out, "{}", relm_json(&report, wall))
        } else {
            writeln!(out, "{}", relm_summary(&params, &report, wall))
        }
    })?;
    check_report(&report).map_err(|e| {
        CliError::Failed(format!(
            "sim relm broke RELM's guarantees: {}\n  {e}\n  seed: {}\n  replay: {}",
            relm_broken(&report),
            params.seed,
            params.replay_command()
        ))
    })
}

/// The nonzero failure counters of a RELM report, e.g. `2 lost, 1 leaked entries`.
fn relm_broken(r: &RelmReport) -> String {
    let broken: Vec<String> = [
        (r.duplicates, "duplicates"),
        (r.out_of_order, "out of order"),
        (r.lost, "lost"),
        (r.unreported, "unreported failures"),
        (r.leaked_entries, "leaked entries"),
    ]
    .iter()
    .filter(|(n, _)| *n != 0)
    .map(|(n, what)| format!("{n} {what}"))
    .collect();
    if broken.is_empty() {
        "the report fails its checks".to_owned()
    } else {
        broken.join(", ")
    }
}

/// The human-readable summary of a RELM run.
fn relm_summary(p: &RelmParams, r: &RelmReport, wall: Duration) -> String {
    let pace = if p.burst {
        "all at once"
    } else {
        "one every 5 us"
    };
    let crashed = match r.crashed {
        0 => "no rank crashed".to_owned(),
        1 => format!("1 of {} ranks crashed (--crash {})", r.ranks, p.crash),
        c => format!("{c} of {} ranks crashed (--crash {})", r.ranks, p.crash),
    };
    let verdict = if check_report(r).is_ok() {
        "every message between survivors delivered exactly once, in order, and acknowledged"
            .to_owned()
    } else {
        format!("BROKEN: {}", relm_broken(r))
    };
    format!(
        "relm: {} ranks, radix {}, seed {}, {} messages {pace}: {crashed}; {verdict}; \
         {} deliveries, {} duplicates, {} out of order, {} lost; {} to dead ranks reported \
         failed, {} unreported; {:.3} RELM frames per message per hop; {} entries leaked; \
         {} replays, {} retry probes, {} gate timeouts; {} events; virtual time {:.3} ms, \
         wall {:.3} ms",
        r.ranks,
        p.radix,
        p.seed,
        r.messages,
        r.delivered,
        r.duplicates,
        r.out_of_order,
        r.lost,
        r.failed_reported,
        r.unreported,
        r.ctl_frames_per_msg_hop,
        r.leaked_entries,
        r.replays,
        r.retry_probes,
        r.gate_timeouts,
        r.events,
        r.virtual_ns as f64 / 1e6,
        wall.as_secs_f64() * 1e3,
    )
}

/// The JSON record of a RELM run: the contract keys in a fixed order, then the diagnostics.
fn relm_json(r: &RelmReport, wall: Duration) -> String {
    format!(
        r#"{{"ranks":{},"messages":{},"crashed":{},"delivered":{},"duplicates":{},"out_of_order":{},"lost":{},"failed_reported":{},"ctl_frames_per_msg_hop":{:.4},"leaked_entries":{},"replays":{},"retry_probes":{},"gate_timeouts":{},"unreported":{},"virtual_ms":{:.3},"events":{},"wall_ms":{:.3}}}"#,
        r.ranks,
        r.messages,
        r.crashed,
        r.delivered,
        r.duplicates,
        r.out_of_order,
        r.lost,
        r.failed_reported,
        r.ctl_frames_per_msg_hop,
        r.leaked_entries,
        r.replays,
        r.retry_probes,
        r.gate_timeouts,
        r.unreported,
        r.virtual_ns as f64 / 1e6,
        r.events,
        wall.as_secs_f64() * 1e3,
    )
}

/// The trace sink: buffered stdout. After the first write error it drops every further line;
/// a closed pipe (`--trace | head`) is not an error, anything else is reported at the end.
struct TraceOut {
    out: BufWriter<StdoutLock<'static>>,
    error: Option<io::Error>,
}

impl TraceOut {
    fn new() -> Self {
        Self {
            out: BufWriter::with_capacity(1 << 16, io::stdout().lock()),
            error: None,
        }
    }

    fn line(&mut self, line: &str) {
        if self.error.is_none() {
            if let Err(e) = writeln!(self.out, "{line}") {
                self.error = Some(e);
            }
        }
    }

    /// Flushes; returns the first error other than a closed pipe.
    fn finish(&mut self) -> Option<io::Error> {
        if self.error.is_none() {
            self.error = self.out.flush().err();
        }
        self.error
            .take()
            .filter(|e| e.kind() != io::ErrorKind::BrokenPipe)
    }
}

/// The progress line on stderr (a terminal only): redrawn in place with `\r`.
#[derive(Default)]
struct Progress {
    drawn: Rc<Cell<bool>>,
}

impl Progress {
    /// Erases the line if it was ever drawn.
    fn clear(self) {
        if self.drawn.get() {
            let _ = write!(io::stderr().lock(), "\r\x1b[2K");
        }
    }
}

/// A seed sweep's word in its one-line summary: `ok`, or how many runs broke the oracle.
pub(crate) fn sweep_verdict(failing: &[String]) -> String {
    if failing.is_empty() {
        "ok".to_string()
    } else {
        format!("BROKEN in {} runs", failing.len())
    }
}

/// A seed sweep's outcome (`sim NAME`): success, or the failing runs (each with its replay
/// line) as the command's error.
pub(crate) fn sweep_result(name: &str, failing: &[String], runs: u64) -> Result<(), CliError> {
    if failing.is_empty() {
        Ok(())
    } else {
        Err(CliError::Failed(format!(
            "sim {name} broke its oracle in {} of {runs} runs:\n  {}",
            failing.len(),
            failing.join("\n  ")
        )))
    }
}
