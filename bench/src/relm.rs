//! `scale relm`: a failure-free stream of reliable point-to-point messages (RELM) over N
//! simulated nodes.
//!
//! Runs [`run_relm`] (the scenario behind `lifeline sim relm`) with no crashes: N real
//! [`Node`]s in the deterministic simulator send `M` messages between random pairs of ranks,
//! one every 5 us of virtual time or, with `--burst`, all at once. The scenario checks every
//! delivery (exactly once, in uid order per chain, acknowledged to the origin) and, after
//! traffic settles, that no rank still holds message state; [`check_report`] must pass. Measures
//! the RELM frames per delivered message per hop, the wall time and the process's peak RSS.

use std::time::{Duration, Instant};

use lifeline_core::sim::scenario::relm::{check_report, run_relm, RelmParams, RelmReport};
use lifeline_core::sim::Hooks;
use lifeline_core::tree::Layout;
use lifeline_core::Node;
use serde_json::Value;

use crate::args::{CliError, Flags};
use crate::report::{json_line, peak_rss_bytes};

/// Usage text of the subcommand.
pub const USAGE: &str = "\
usage: scale relm --ranks N --radix K [--messages M] [--seed S] [--burst]

Simulates N nodes of a radix-K tree (failure-free) sending M reliable messages between random
pairs of ranks, one every 5 us of virtual time (--burst: all at once, every message in flight
together). Every message must be delivered exactly once, in order, and acknowledged, and no
rank may hold message state once traffic settles. Reports RELM frames per delivered message per
hop, the wall time and the peak RSS of the whole process.

  --ranks N       number of simulated nodes (2..=4294967292)
  --radix K       tree radix (2..=1024)
  --messages M    messages to send (1..=4294967295, default 1000)
  --seed S        the simulation's seed (default 1)
  --burst         send every message at once

The last stdout line is JSON: {\"ranks\",\"messages\",\"crashed\",\"delivered\",\"duplicates\",
\"out_of_order\",\"lost\",\"failed_reported\",\"ctl_frames_per_msg_hop\",\"leaked_entries\",
\"replays\",\"retry_probes\",\"gate_timeouts\",\"unreported\",\"virtual_ms\",\"events\",
\"sim_events_per_s\",\"peak_rss_bytes\",\"wall_ms\"}.";

/// The experiment's parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// Number of simulated nodes.
    pub ranks: u32,
    /// Radix.
    pub radix: u32,
    /// Messages to send.
    pub messages: u32,
    /// The simulation's seed.
    pub seed: u64,
    /// Send every message at once.
    pub burst: bool,
}

impl Config {
    /// Parses the subcommand's flags (everything after `relm`). `--burst` is the one flag
    /// without a value.
    pub fn from_args(args: &[String]) -> Result<Self, CliError> {
        let burst = args.iter().filter(|a| *a == "--burst").count();
        if burst > 1 {
            return Err(CliError::Usage("--burst given twice".into()));
        }
        let rest: Vec<String> = args.iter().filter(|a| *a != "--burst").cloned().collect();
        let f = Flags::parse(&rest, &["ranks", "radix", "messages", "seed"])?;
        let cfg = Self {
            ranks: f.get("ranks", None)?,
            radix: f.get("radix", None)?,
            messages: f.get("messages", Some(1000))?,
            seed: f.get("seed", Some(1))?,
            burst: burst == 1,
        };
        if cfg.messages == 0 {
            return Err(CliError::Usage("--messages must be at least 1".into()));
        }
        Layout::new(cfg.ranks, cfg.radix).map_err(|e| CliError::Usage(e.to_string()))?;
        if cfg.ranks < 2 {
            return Err(CliError::Usage(
                "--ranks must be at least 2 (a message needs a source and another destination)"
                    .into(),
            ));
        }
        Ok(cfg)
    }

    /// The scenario's parameters: no crashes.
    pub fn params(&self) -> RelmParams {
        RelmParams {
            ranks: self.ranks,
            radix: self.radix,
            messages: self.messages,
            crash: 0.0,
            seed: self.seed,
            burst: self.burst,
        }
    }
}

/// What one run measured.
#[derive(Clone, Debug)]
pub struct Report {
    /// The parameters.
    pub config: Config,
    /// The scenario's own report.
    pub relm: RelmReport,
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
        self.relm.events as f64 / self.sim.as_secs_f64().max(1e-9)
    }

    /// The human-readable summary line.
    pub fn summary(&self) -> String {
        let c = &self.config;
        let r = &self.relm;
        let rss = self.peak_rss_bytes.unwrap_or(0);
        format!(
            "relm: {} ranks, radix {}, seed {}, {} messages {}: {} delivered ({} duplicates, \
             {} out of order, {} lost), {:.3} RELM frames per message per hop, {} entries \
             leaked; {} events in {:.2} s ({:.2} M events/s); virtual time {:.3} ms; peak RSS \
             {:.1} MiB ({:.0} B per rank; a Node is {} B inline); wall {:.2} s",
            c.ranks,
            c.radix,
            c.seed,
            r.messages,
            if c.burst {
                "all at once"
            } else {
                "one every 5 us"
            },
            r.delivered,
            r.duplicates,
            r.out_of_order,
            r.lost,
            r.ctl_frames_per_msg_hop,
            r.leaked_entries,
            r.events,
            self.sim.as_secs_f64(),
            self.events_per_s() / 1e6,
            r.virtual_ns as f64 / 1e6,
            rss as f64 / (1024.0 * 1024.0),
            rss as f64 / f64::from(c.ranks),
            std::mem::size_of::<Node>(),
            self.wall.as_secs_f64(),
        )
    }

    /// The JSON record: exactly these keys, in this order (those of `lifeline sim relm --json`
    /// without its wall time, then `sim_events_per_s`, `peak_rss_bytes` and `wall_ms`).
    pub fn json(&self) -> String {
        let r = &self.relm;
        json_line(&[
            ("ranks", r.ranks.into()),
            ("messages", r.messages.into()),
            ("crashed", r.crashed.into()),
            ("delivered", r.delivered.into()),
            ("duplicates", r.duplicates.into()),
            ("out_of_order", r.out_of_order.into()),
            ("lost", r.lost.into()),
            ("failed_reported", r.failed_reported.into()),
            (
                "ctl_frames_per_msg_hop",
                round_to(r.ctl_frames_per_msg_hop, 1e4).into(),
            ),
            ("leaked_entries", r.leaked_entries.into()),
            ("replays", r.replays.into()),
            ("retry_probes", r.retry_probes.into()),
            ("gate_timeouts", r.gate_timeouts.into()),
            ("unreported", r.unreported.into()),
            (
                "virtual_ms",
                round_to(r.virtual_ns as f64 / 1e6, 1e3).into(),
            ),
            ("events", r.events.into()),
            (
                "sim_events_per_s",
                (self.events_per_s().round() as u64).into(),
            ),
            (
                "peak_rss_bytes",
                self.peak_rss_bytes.map_or(Value::Null, Value::from),
            ),
            ("wall_ms", (self.wall.as_millis() as u64).into()),
        ])
    }
}

/// `x` rounded to a multiple of `1 / scale`.
fn round_to(x: f64, scale: f64) -> f64 {
    (x * scale).round() / scale
}

/// Runs the stream; `start` is when the process started (for the wall time). A run that breaks
/// the scenario's checks (a duplicate, a reordering, a loss, leaked state) fails.
pub fn run(cfg: &Config, start: Instant) -> Result<Report, CliError> {
    let params = cfg.params();
    let t = Instant::now();
    let relm = run_relm(&params, Hooks::default()).map_err(|e| CliError::Failed(e.to_string()))?;
    let sim = t.elapsed();
    check_report(&relm).map_err(|e| {
        CliError::Failed(format!(
            "{e}\n  seed: {}\n  replay: {}",
            params.seed,
            params.replay_command()
        ))
    })?;
    Ok(Report {
        config: *cfg,
        relm,
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
    fn burst_is_exactly_once_and_reports_the_contract_keys() {
        let cfg = Config::from_args(&argv(
            "--ranks 64 --radix 4 --messages 500 --burst --seed 3",
        ))
        .unwrap();
        assert!(cfg.burst);
        let r = run(&cfg, Instant::now()).unwrap();
        assert_eq!(r.relm.delivered, 500);
        let line = r.json();
        let v: Value = serde_json::from_str(&line).unwrap();
        let order = [
            "ranks",
            "messages",
            "crashed",
            "delivered",
            "duplicates",
            "out_of_order",
            "lost",
            "failed_reported",
            "ctl_frames_per_msg_hop",
            "leaked_entries",
            "replays",
            "retry_probes",
            "gate_timeouts",
            "unreported",
            "virtual_ms",
            "events",
            "sim_events_per_s",
            "peak_rss_bytes",
            "wall_ms",
        ];
        assert_eq!(v.as_object().unwrap().len(), order.len(), "{line}");
        assert!(
            line.starts_with(r#"{"ranks":64,"messages":500,"crashed":0,"delivered":500,"#),
            "{line}"
        );
        let at: Vec<usize> = order
            .iter()
            .map(|k| line.find(&format!("\"{k}\":")).unwrap())
            .collect();
        assert!(at.windows(2).all(|w| w[0] < w[1]), "{line}");
        for k in [
            "duplicates",
            "out_of_order",
            "lost",
            "unreported",
            "leaked_entries",
        ] {
            assert_eq!(v[k], 0, "{line}");
        }
        assert!(v["ctl_frames_per_msg_hop"].as_f64().unwrap() > 0.0);
    }

    #[test]
    fn defaults() {
        let cfg = Config::from_args(&argv("--ranks 10 --radix 2")).unwrap();
        assert_eq!((cfg.messages, cfg.seed, cfg.burst), (1000, 1, false));
        let p = cfg.params();
        assert!(p.crash == 0.0 && !p.burst);
        let cfg = Config::from_args(&argv("--burst --ranks 10 --radix=2")).unwrap();
        assert!(cfg.burst);
    }

    #[test]
    fn bad_arguments_are_usage_errors() {
        for bad in [
            "--ranks 0 --radix 4",
            "--ranks 1 --radix 4",
            "--ranks 10 --radix 1",
            "--ranks 10 --radix 1025",
            "--ranks 4294967293 --radix 4",
            "--radix 4",
            "--ranks 10 --radix 4 --messages 0",
            "--ranks 10 --radix 4 --messages -1",
            "--ranks 10 --radix 4 --crash 0.1",
            "--ranks 10 --radix 4 --burst --burst",
            "--ranks 10 --radix 4 --burst=1",
        ] {
            assert!(
                matches!(Config::from_args(&argv(bad)), Err(CliError::Usage(_))),
                "{bad}"
            );
        }
    }
}
