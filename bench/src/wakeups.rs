//! `scale wakeups`: how many times an idle node wakes up per second, with heartbeat rounds
//! each one period after the last (`detect.beat_grid` off: every process beats at the phase
//! its start gave it) and on the wall-clock grid (`beat_grid` on, clocks aligned the way
//! `lifeline_transport_common::WallGrid::for_rank` aligns a host's processes).
//!
//! On a host running hundreds of nodes a node's CPU is its wake-ups, not its frames (a
//! loopback receiver wakes for each frame that arrives while it sleeps, and a wake-up costs
//! tens of microseconds on a VM). The simulator has no scheduler, so this counts them: N core
//! nodes exchange frames with a fixed latency; an input that reaches a node more than
//! `--window-us` after the start of its last wake-up starts a new one (inputs within the window
//! share it, as a process that is still running or whose timer tick has not passed reads
//! them together). The same run also times the core's own handling (ns per node-second).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use bytes::Bytes;
use lifeline_core::tree::Rank;
use lifeline_core::{Config, Instant, Node};
use serde_json::{json, Value};

use crate::args::{CliError, Flags};
use crate::report::json_line;
use crate::rng::SplitMix64;

pub const USAGE: &str = "\
usage: scale wakeups [--ranks N] [--secs S] [--latency-us L] [--window-us W] [--seed S]

Runs N idle simulated nodes (default 256, radix 8, the detector on, 8 observers) for S
simulated seconds (default 10, after 2 s of start-up), their starts spread over 1 s, frames
delivered after L us (default 50), twice: heartbeat rounds one period after the last (the
phase each process's start gave it) and on the wall-clock grid in 4 phases (detect.beat_grid,
what `lifeline node --beat-grid` runs). A node wakes for an input that arrives more than W us (default
1000) after its last wake-up began. Prints wake-ups, frames and core ns per node-second.

The last stdout line is JSON: {\"ranks\",\"secs\",\"latency_us\",\"window_us\",\"free\":{...},
\"grid\":{...},\"wakeups_ratio\"} with wakeups_per_node_s, frames_in_per_node_s,
frames_out_per_node_s, inputs_per_wakeup, core_ns_per_node_s.";

/// Phases of the grid (as `lifeline_transport_common::GRID_PHASES`).
const PHASES: u64 = 4;

/// One scheduled input: a node's timer, or a frame from a rank.
#[derive(PartialEq, Eq, PartialOrd, Ord)]
enum Input {
    Timer,
    Frame(u32, Bytes),
}

/// What one run measured.
struct Outcome {
    wakeups: u64,
    inputs: u64,
    frames_in: u64,
    frames_out: u64,
    core_ns: u128,
}

/// The measured stretch's figures per node-second.
fn per_node_s(o: &Outcome, ranks: u32, secs: f64) -> Value {
    let d = f64::from(ranks) * secs;
    json!({
        "wakeups_per_node_s": o.wakeups as f64 / d,
        "frames_in_per_node_s": o.frames_in as f64 / d,
        "frames_out_per_node_s": o.frames_out as f64 / d,
        "inputs_per_wakeup": o.inputs as f64 / (o.wakeups.max(1)) as f64,
        "core_ns_per_node_s": o.core_ns as f64 / d,
    })
}

/// Runs the cluster once; `grid`: heartbeat rounds on the aligned grid.
fn run(
    ranks: u32,
    secs: u64,
    latency_ns: u64,
    window_ns: u64,
    seed: u64,
    grid: bool,
) -> Result<Outcome, CliError> {
    let mut rng = SplitMix64::new(seed);
    let period_ns = {
        let c = Config::new(ranks, 8);
        c.detect.period.as_nanos()
    };
    // Global time of each node's clock origin (its `Instant::ZERO`).
    let mut origin = Vec::with_capacity(ranks as usize);
    let mut nodes = Vec::with_capacity(ranks as usize);
    for r in 0..ranks {
        let start = rng.below(1_000_000_000);
        let o = if grid {
            // The last point of its phase at or before its start.
            let shift = period_ns * (u64::from(r) % PHASES) / PHASES;
            let past = (start + period_ns - shift % period_ns) % period_ns;
            start - past.min(start)
        } else {
            start
        };
        origin.push(o);
        let mut c = Config::new(ranks, 8);
        c.detect.enabled = true;
        c.detect.beat_grid = grid;
        c.membership.check_in = false;
        let n = Node::new(c, Rank(r), seed ^ u64::from(r), Instant::ZERO)
            .map_err(|e| CliError::Usage(e.to_string()))?;
        nodes.push(n);
    }
    let warm = 2_000_000_000u64;
    let end = warm + secs * 1_000_000_000;
    let mut queue: BinaryHeap<Reverse<(u64, u32, Input)>> = BinaryHeap::new();
    let mut armed: Vec<Option<u64>> = vec![None; ranks as usize];
    let mut awake_from = vec![0u64; ranks as usize];
    let mut out = Outcome {
        wakeups: 0,
        inputs: 0,
        frames_in: 0,
        frames_out: 0,
        core_ns: 0,
    };
    for r in 0..ranks {
        queue.push(Reverse((origin[r as usize], r, Input::Timer)));
        armed[r as usize] = Some(origin[r as usize]);
    }
    while let Some(Reverse((t, r, input))) = queue.pop() {
        if t > end {
            break;
        }
        let i = r as usize;
        if matches!(input, Input::Timer) && armed[i] != Some(t) {
            continue; // superseded
        }
        let measured = t >= warm;
        let local = Instant::from_nanos(t.saturating_sub(origin[i]));
        let node = &mut nodes[i];
        let clock = std::time::Instant::now();
        match input {
            Input::Timer => {
                armed[i] = None;
                node.handle_timeout(local);
            }
            Input::Frame(from, frame) => {
                if measured {
                    out.frames_in += 1;
                }
                node.handle_frame(local, Rank(from), frame);
            }
        }
        let mut sent = Vec::new();
        while let Some(tx) = node.poll_transmit() {
            sent.push(tx);
        }
        while node.poll_event().is_some() {}
        let next = node.poll_timeout().map(|(at, _)| at.as_nanos() + origin[i]);
        if measured {
            out.core_ns += clock.elapsed().as_nanos();
            out.inputs += 1;
            if t >= awake_from[i] + window_ns || out.inputs == 1 {
                out.wakeups += 1;
                awake_from[i] = t;
            }
        } else if t >= awake_from[i] + window_ns {
            awake_from[i] = t;
        }
        for tx in sent {
            if measured {
                out.frames_out += 1;
            }
            // A frame to a node not started yet waits for its start (its listener's backlog).
            let at = (t + latency_ns).max(origin[tx.to.0 as usize]);
            queue.push(Reverse((at, tx.to.0, Input::Frame(r, tx.frame))));
        }
        if let Some(n) = next {
            if armed[i].is_none_or(|a| a != n) {
                armed[i] = Some(n);
                queue.push(Reverse((n.max(t), r, Input::Timer)));
            }
        }
    }
    Ok(out)
}

/// `scale wakeups`.
pub fn cli(args: &[String]) -> Result<(), CliError> {
    if args.iter().any(|a| a == "-h" || a == "--help") {
        return Err(CliError::Help);
    }
    let f = Flags::parse(args, &["ranks", "secs", "latency-us", "window-us", "seed"])?;
    let ranks: u32 = f.get("ranks", Some(256))?;
    let secs: u64 = f.get("secs", Some(10))?;
    let latency_us: u64 = f.get("latency-us", Some(50))?;
    let window_us: u64 = f.get("window-us", Some(1000))?;
    let seed: u64 = f.get("seed", Some(1))?;
    if ranks < 2 || secs == 0 {
        return Err(CliError::Usage(
            "--ranks must be at least 2 and --secs positive".into(),
        ));
    }
    let free = run(
        ranks,
        secs,
        latency_us * 1000,
        window_us * 1000,
        seed,
        false,
    )?;
    let grid = run(ranks, secs, latency_us * 1000, window_us * 1000, seed, true)?;
    let s = secs as f64;
    let (a, b) = (per_node_s(&free, ranks, s), per_node_s(&grid, ranks, s));
    let ratio = grid.wakeups as f64 / free.wakeups.max(1) as f64;
    println!(
        "{ranks} idle nodes, {secs} s: wake-ups per node-second {:.1} (free phases) -> {:.1} (grid), \
         frames in {:.1} -> {:.1}, core {:.0} -> {:.0} ns per node-second",
        a["wakeups_per_node_s"].as_f64().unwrap_or(0.0),
        b["wakeups_per_node_s"].as_f64().unwrap_or(0.0),
        a["frames_in_per_node_s"].as_f64().unwrap_or(0.0),
        b["frames_in_per_node_s"].as_f64().unwrap_or(0.0),
        a["core_ns_per_node_s"].as_f64().unwrap_or(0.0),
        b["core_ns_per_node_s"].as_f64().unwrap_or(0.0),
    );
    println!(
        "{}",
        json_line(&[
            ("ranks", json!(ranks)),
            ("secs", json!(secs)),
            ("latency_us", json!(latency_us)),
            ("window_us", json!(window_us)),
            ("free", a),
            ("grid", b),
            ("wakeups_ratio", json!(ratio)),
        ])
    );
    if grid.frames_in == 0 || free.frames_in == 0 {
        return Err(CliError::Failed("no heartbeat reached any node".into()));
    }
    Ok(())
}
