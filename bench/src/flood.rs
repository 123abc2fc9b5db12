//! `scale flood`: one fault-free tree flood over N simulated nodes.
//!
//! Runs [`run_flood`] (the scenario behind `lifeline sim flood`) without faults: N real
//! [`Node`]s in the deterministic simulator, the root floods once, and every rank must deliver
//! it with exactly `N - 1` frames. Measures what the simulator costs at scale: queue entries
//! processed per second of wall time and the process's peak resident set size.

use std::time::{Duration, Instant};

use lifeline_core::sim::scenario::flood::{run_flood, FloodParams, FloodReport};
use lifeline_core::sim::Hooks;
use lifeline_core::tree::Layout;
use lifeline_core::Node;
use serde_json::Value;

use crate::args::{CliError, Flags};
use crate::report::{bytes_per_node, json_line, peak_rss_bytes};

/// Usage text of the subcommand.
pub const USAGE: &str = "\
usage: scale flood --ranks N --radix K [--seed S]

Simulates N nodes of a radix-K tree (fault-free) and floods once from the root; every rank
must deliver the flood, with exactly N-1 frames. Reports the simulator's throughput and the
peak RSS of the whole process.

  --ranks N    number of simulated nodes (1..=4294967292)
  --radix K    tree radix (2..=1024)
  --seed S     the simulation's seed (default 1)

The last stdout line is JSON: {\"ranks\",\"frames\",\"events\",\"sim_events_per_s\",
\"peak_rss_bytes\",\"bytes_per_node\",\"wall_ms\"}.";

/// The experiment's parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// Number of simulated nodes.
    pub ranks: u32,
    /// Radix.
    pub radix: u32,
    /// The simulation's seed.
    pub seed: u64,
}

impl Config {
    /// Parses the subcommand's flags (everything after `flood`).
    pub fn from_args(args: &[String]) -> Result<Self, CliError> {
        let f = Flags::parse(args, &["ranks", "radix", "seed"])?;
        let cfg = Self {
            ranks: f.get("ranks", None)?,
            radix: f.get("radix", None)?,
            seed: f.get("seed", Some(1))?,
        };
        Layout::new(cfg.ranks, cfg.radix).map_err(|e| CliError::Usage(e.to_string()))?;
        Ok(cfg)
    }
}

/// What one run measured.
#[derive(Clone, Debug)]
pub struct Report {
    /// The parameters.
    pub config: Config,
    /// The scenario's own report.
    pub flood: FloodReport,
    /// Wall time of the simulation (building the nodes included).
    pub sim: Duration,
    /// Wall time of the whole run, argument parsing included.
    pub wall: Duration,
    /// Peak RSS, if known.
    pub peak_rss_bytes: Option<u64>,
}

impl Report {
    /// Simulator queue entries processed per second of simulation wall time.
    pub fn events_per_s(&self) -> f64 {
        self.flood.events as f64 / self.sim.as_secs_f64().max(1e-9)
    }

    /// The human-readable summary line.
    pub fn summary(&self) -> String {
        let c = &self.config;
        let rss = self.peak_rss_bytes.unwrap_or(0);
        format!(
            "flood: {} ranks, radix {}, seed {}: {} frames, {} deliveries, {} events in {:.2} s \
             ({:.2} M events/s); peak RSS {:.1} MiB ({:.0} B per rank; a Node is {} B inline); \
             wall {:.2} s",
            c.ranks,
            c.radix,
            c.seed,
            self.flood.frames,
            self.flood.delivered,
            self.flood.events,
            self.sim.as_secs_f64(),
            self.events_per_s() / 1e6,
            rss as f64 / (1024.0 * 1024.0),
            rss as f64 / f64::from(c.ranks),
            std::mem::size_of::<Node>(),
            self.wall.as_secs_f64(),
        )
    }

    /// The JSON record: exactly these keys, in this order.
    pub fn json(&self) -> String {
        json_line(&[
            ("ranks", self.config.ranks.into()),
            ("frames", self.flood.frames.into()),
            ("events", self.flood.events.into()),
            (
                "sim_events_per_s",
                (self.events_per_s().round() as u64).into(),
            ),
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

/// Runs the flood; `start` is when the process started (for the wall time). A run that breaks
/// the scenario's checks (a lost or duplicated delivery, more than `N - 1` frames) fails.
pub fn run(cfg: &Config, start: Instant) -> Result<Report, CliError> {
    let params = FloodParams {
        ranks: cfg.ranks,
        radix: cfg.radix,
        seed: cfg.seed,
        faults: false,
    };
    let t = Instant::now();
    let flood =
        run_flood(&params, Hooks::default()).map_err(|e| CliError::Failed(e.to_string()))?;
    let sim = t.elapsed();
    Ok(Report {
        config: *cfg,
        flood,
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
    fn flood_costs_n_minus_1_frames_and_reports_the_contract_keys() {
        let cfg = Config::from_args(&argv("--ranks 1000 --radix 8 --seed 3")).unwrap();
        let r = run(&cfg, Instant::now()).unwrap();
        assert_eq!(r.flood.frames, 999);
        assert_eq!(r.flood.delivered, 1000);
        assert!(r.flood.events >= 999 && r.events_per_s() > 0.0);
        let line = r.json();
        let v: Value = serde_json::from_str(&line).unwrap();
        let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(keys.len(), 7, "{line}");
        assert!(
            line.starts_with(r#"{"ranks":1000,"frames":999,"events":"#),
            "{line}"
        );
        let order = [
            "\"ranks\"",
            "\"frames\"",
            "\"events\"",
            "\"sim_events_per_s\"",
            "\"peak_rss_bytes\"",
            "\"bytes_per_node\"",
            "\"wall_ms\"",
        ];
        let at: Vec<usize> = order.iter().map(|k| line.find(k).unwrap()).collect();
        assert!(at.windows(2).all(|w| w[0] < w[1]), "{line}");
    }

    #[test]
    fn bad_shapes_are_usage_errors() {
        for bad in [
            "--ranks 0 --radix 4",
            "--ranks 10 --radix 1",
            "--ranks 10 --radix 1025",
            "--ranks 4294967293 --radix 4",
            "--radix 4",
        ] {
            assert!(
                matches!(Config::from_args(&argv(bad)), Err(CliError::Usage(_))),
                "{bad}"
            );
        }
    }
}
