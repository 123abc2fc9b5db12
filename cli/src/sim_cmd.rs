//! `lifeline sim`: deterministic simulations of many real nodes, one seed per run.
//!
//! A subcommand group: `sim flood` today; `sim xcast` and `sim relm` slot in as more variants of
//! [`SimCommand`]. Every run is replayable: a failure prints its seed and the exact command.

use std::cell::{Cell, RefCell};
use std::io::{self, BufWriter, IsTerminal, StdoutLock, Write};
use std::rc::Rc;
use std::time::{Duration, Instant};

use clap::{Args, Subcommand};
use lifeline_core::sim::scenario::{run_flood, FloodParams, FloodReport, RunHooks};
use lifeline_core::sim::World;

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

/// Runs `lifeline sim`.
pub(crate) fn run(args: &SimArgs) -> Result<(), CliError> {
    match &args.command {
        SimCommand::Flood(a) => flood(a),
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
    let mut hooks = RunHooks::default();
    let trace = args.trace.then(|| Rc::new(RefCell::new(TraceOut::new())));
    if let Some(t) = &trace {
        let t = Rc::clone(t);
        hooks.trace = Some(Box::new(move |line: &str| t.borrow_mut().line(line)));
    }
    let progress = (!args.trace && io::stderr().is_terminal()).then(Progress::default);
    if let Some(p) = &progress {
        let drawn = Rc::clone(&p.drawn);
        hooks.progress = Some(Box::new(move |w: &World| {
            // Best effort: a progress line that cannot be drawn is not worth failing the run.
            let _ = write!(
                io::stderr().lock(),
                "\rsim flood: {} steps, queue {}, t={}   ",
                w.stats().steps,
                w.queue_len(),
                w.now()
            );
            drawn.set(true);
        }));
        hooks.progress_every = PROGRESS_EVERY;
    }

    let start = Instant::now();
    let result = run_flood(&params, hooks);
    let wall = start.elapsed();

    if let Some(p) = progress {
        p.clear();
    }
    // Every trace line goes out before the summary (or the failure). The sink's closure died
    // with the simulator, so this is the last handle.
    let trace_err = trace.and_then(|t| {
        let err = t.borrow_mut().finish();
        err
    });
    let report = result.map_err(|e| CliError::Failed(e.to_string()))?;
    if let Some(e) = trace_err {
        return Err(CliError::Io(e));
    }
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
