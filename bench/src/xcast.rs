//! `scale xcast`: a failure-free stream of reliable broadcasts from the root over N simulated
//! nodes.
//!
//! Runs [`run_xcast`] (the scenario behind `lifeline sim xcast`) with `root_origin: true` and no
//! crashes: N real [`Node`]s in the deterministic simulator, the root starts `M` ops, every rank
//! must deliver each exactly once and in order, and the root must hear each op's completion.
//! The scenario itself checks that a failure-free root-origin run costs exactly `2(N-1)` frames
//! per op (one down and one acknowledgement up per tree edge). Measures the wall time and the
//! process's peak resident set size.

use std::time::{Duration, Instant};

use lifeline_core::sim::scenario::xcast::{run_xcast, XcastParams, XcastReport};
use lifeline_core::sim::Hooks;
use lifeline_core::tree::Layout;
use lifeline_core::Node;
use serde_json::Value;

use crate::args::{CliError, Flags};
use crate::report::{bytes_per_node, json_line, peak_rss_bytes};

/// Usage text of the subcommand.
pub const USAGE: &str = "\
usage: scale xcast --ranks N --radix K [--ops M] [--seed S]

Simulates N nodes of a radix-K tree (failure-free) and starts M reliable broadcasts from the
root; every rank must deliver each exactly once and in order, the root must hear each op's
completion, and each op must cost exactly 2(N-1) frames. Reports the frames, the wall time and
the peak RSS of the whole process.

  --ranks N    number of simulated nodes (1..=4294967292)
  --radix K    tree radix (2..=1024)
  --ops M      broadcasts to start, back to back (1..=4294967295, default 1)
  --seed S     the simulation's seed (default 1)

The last stdout line is JSON: {\"ranks\",\"ops\",\"crashed\",\"frames\",\"delivered_exactly_once\",
\"in_order\",\"completions\",\"completion_reported_to_origin\",\"virtual_ms\",\"peak_rss_bytes\",\"bytes_per_node\",
\"wall_ms\"}.";

/// The experiment's parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// Number of simulated nodes.
    pub ranks: u32,
    /// Radix.
    pub radix: u32,
    /// Broadcasts to start.
    pub ops: u32,
    /// The simulation's seed.
    pub seed: u64,
}

impl Config {
    /// Parses the subcommand's flags (everything after `xcast`).
    pub fn from_args(args: &[String]) -> Result<Self, CliError> {
        let f = Flags::parse(args, &["ranks", "radix", "ops", "seed"])?;
        let cfg = Self {
            ranks: f.get("ranks", None)?,
            radix: f.get("radix", None)?,
            ops: f.get("ops", Some(1))?,
            seed: f.get("seed", Some(1))?,
        };
        if cfg.ops == 0 {
            return Err(CliError::Usage("--ops must be at least 1".into()));
        }
        Layout::new(cfg.ranks, cfg.radix).map_err(|e| CliError::Usage(e.to_string()))?;
        Ok(cfg)
    }

    /// The scenario's parameters: root origin, no crashes.
    pub fn params(&self) -> XcastParams {
        XcastParams {
            ranks: self.ranks,
            radix: self.radix,
            ops: self.ops,
            crash: 0.0,
            seed: self.seed,
            root_origin: true,
        }
    }
}

/// What one run measured.
#[derive(Clone, Debug)]
pub struct Report {
    /// The parameters.
    pub config: Config,
    /// The scenario's own report.
    pub xcast: XcastReport,
    /// Wall time of the simulation (building the nodes included).
    pub sim: Duration,
    /// Wall time of the whole run, argument parsing included.
    pub wall: Duration,
    /// Peak RSS, if known.
    pub peak_rss_bytes: Option<u64>,
}

impl Report {
    /// The human-readable summary line.
    pub fn summary(&self) -> String {
        let c = &self.config;
        let x = &self.xcast;
        let rss = self.peak_rss_bytes.unwrap_or(0);
        format!(
            "xcast: {} ranks, radix {}, seed {}, {} op(s) from the root: {} frames \
             (2(N-1) per op = {}), {} completions, {} events in {:.2} s ({:.2} M events/s); \
             virtual time {:.3} ms; peak RSS {:.1} MiB ({:.0} B per rank; a Node is {} B inline); \
             wall {:.2} s",
            c.ranks,
            c.radix,
            c.seed,
            x.ops,
            x.frames,
            2 * (u64::from(c.ranks) - 1) * u64::from(x.ops),
            x.completions,
            x.events,
            self.sim.as_secs_f64(),
            x.events as f64 / self.sim.as_secs_f64().max(1e-9) / 1e6,
            x.virtual_ns as f64 / 1e6,
            rss as f64 / (1024.0 * 1024.0),
            rss as f64 / f64::from(c.ranks),
            std::mem::size_of::<Node>(),
            self.wall.as_secs_f64(),
        )
    }

    /// The JSON record: exactly these keys, in this order (those of `lifeline sim xcast --json`,
    /// then `peak_rss_bytes` and `wall_ms`).
    pub fn json(&self) -> String {
        let x = &self.xcast;
        json_line(&[
            ("ranks", x.ranks.into()),
            ("ops", x.ops.into()),
            ("crashed", x.crashed.into()),
            ("frames", x.frames.into()),
            ("delivered_exactly_once", x.delivered_exactly_once.into()),
            ("in_order", x.in_order.into()),
            ("completions", x.completions.into()),
            (
                "completion_reported_to_origin",
                x.completion_reported_to_origin.into(),
            ),
            ("virtual_ms", virtual_ms(x.virtual_ns).into()),
            (
                "peak_rss_bytes",
                self.peak_rss_bytes.map_or(Value::Null, Value::from),
            ),
            (
                "bytes_per_node",
                bytes_per_node(self.peak_rss_bytes, self.config.ranks),
            ),
            ("wall_ms", (self.wall.as_millis() as u64).into()),
        ])
    }
}

/// Virtual nanoseconds as milliseconds, rounded to the microsecond.
fn virtual_ms(ns: u64) -> f64 {
    (ns as f64 / 1e3).round() / 1e3
}

/// Runs the stream; `start` is when the process started (for the wall time). A run that breaks
/// the scenario's checks fails.
pub fn run(cfg: &Config, start: Instant) -> Result<Report, CliError> {
    let t = Instant::now();
    let xcast =
        run_xcast(&cfg.params(), Hooks::default()).map_err(|e| CliError::Failed(e.to_string()))?;
    let sim = t.elapsed();
    Ok(Report {
        config: *cfg,
        xcast,
        sim,
        wall: start.elapsed(),
        peak_rss_bytes: peak_rss_bytes(),
    })
}

/// The subcommand: parses `args`, runs, prints the summary line and then the JSON line.
pub fn cli(args: &[String]) -> Result<(), CliError> {
    let start = Instant::now();
    let cfg = Config::from_args(args)?;
    let report = run(&cfg, start)?;
    println!("{}", report.summary());
    println!("{}", report.json());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_owned).collect()
    }

    #[test]
    fn root_stream_costs_two_frames_per_edge_and_reports_the_contract_keys() {
        let cfg = Config::from_args(&argv("--ranks 500 --radix 8 --ops 3 --seed 3")).unwrap();
        let r = run(&cfg, Instant::now()).unwrap();
        assert_eq!(r.xcast.frames, 3 * 2 * 499);
        assert_eq!(r.xcast.completions, 3);
        let line = r.json();
        let v: Value = serde_json::from_str(&line).unwrap();
        let order = [
            "ranks",
            "ops",
            "crashed",
            "frames",
            "delivered_exactly_once",
            "in_order",
            "completions",
            "completion_reported_to_origin",
            "virtual_ms",
            "peak_rss_bytes",
            "bytes_per_node",
            "wall_ms",
        ];
        assert_eq!(v.as_object().unwrap().len(), order.len(), "{line}");
        assert!(
            line.starts_with(r#"{"ranks":500,"ops":3,"crashed":0,"frames":2994,"#),
            "{line}"
        );
        let at: Vec<usize> = order
            .iter()
            .map(|k| line.find(&format!("\"{k}\":")).unwrap())
            .collect();
        assert!(at.windows(2).all(|w| w[0] < w[1]), "{line}");
        for k in [
            "delivered_exactly_once",
            "in_order",
            "completion_reported_to_origin",
        ] {
            assert_eq!(v[k], true, "{line}");
        }
        assert!(v["virtual_ms"].as_f64().unwrap() > 0.0);
    }

    #[test]
    fn ops_defaults_to_one() {
        let cfg = Config::from_args(&argv("--ranks 10 --radix 2")).unwrap();
        assert_eq!((cfg.ops, cfg.seed), (1, 1));
        let p = cfg.params();
        assert!(p.root_origin && p.crash == 0.0);
    }

    #[test]
    fn bad_arguments_are_usage_errors() {
        for bad in [
            "--ranks 0 --radix 4",
            "--ranks 10 --radix 1",
            "--ranks 10 --radix 1025",
            "--ranks 4294967293 --radix 4",
            "--radix 4",
            "--ranks 10 --radix 4 --ops 0",
            "--ranks 10 --radix 4 --ops -1",
            "--ranks 10 --radix 4 --crash 0.1",
        ] {
            assert!(
                matches!(Config::from_args(&argv(bad)), Err(CliError::Usage(_))),
                "{bad}"
            );
        }
    }
}
