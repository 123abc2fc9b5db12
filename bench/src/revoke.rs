//! `scale revoke`: one revoke flooded over the binomial-graph overlay of N simulated nodes.
//!
//! Runs [`run_revoke`] (the scenario behind `lifeline sim revoke`) with exact hop latency, so
//! first receipt is over a shortest path: the farthest survivor must be exactly the overlay's
//! diameter away and, fault-free, the notices must be exactly `d + (m − 1)(d − 1)` for `m`
//! members of degree `d` (the scenario fails the run otherwise). With `--faults 1` ranks crash
//! before the revoke (removed, or not yet detected) and during the flood, at most `d − 1`
//! undetected in all, and every survivor must still get it once. Reports hops p50/p99/max
//! against the diameter, notices per revoke against the formula, wall time and peak RSS.

use std::time::Instant;

use lifeline_core::sim::scenario::revoke::{run_revoke, RevokeParams};
use lifeline_core::sim::Hooks;
use lifeline_core::tree::Layout;
use serde_json::Value;

use crate::args::{CliError, Flags};
use crate::report::{json_line, peak_rss_bytes};

/// Usage text of the subcommand.
pub const USAGE: &str = "\
usage: scale revoke --ranks N [--radix K] [--faults 0|1] [--seed S]

Simulates N nodes and revokes once from a random origin over the binomial-graph overlay
(neighbours at +-1 skipping dead ranks, +-2, +-4 ...), every hop 50 us exactly. Fails unless
every survivor gets the revoke exactly once; fault-free, also unless the farthest survivor is
exactly the overlay's diameter away and the notices are exactly d + (m - 1)(d - 1).

  --ranks N      number of simulated nodes
  --radix K      tree radix (carries the removals before the revoke; default 64)
  --faults F     1: crash ranks before and during the flood (default 0)
  --seed S       the run's seed (default 1)

The last stdout line is JSON: {\"ranks\",\"members\",\"survivors\",\"degree\",\"diameter\",
\"hops_p50\",\"hops_p99\",\"hops_max\",\"hops_max_over_diameter\",\"notices\",
\"notices_formula\",\"notices_per_member\",\"latency_ms_max\",\"peak_rss_bytes\",\"wall_ms\"}.";

/// Runs `scale revoke`.
pub fn cli(args: &[String]) -> Result<(), CliError> {
    let (summary, json) = run(args)?;
    println!("{summary}");
    println!("{json}");
    Ok(())
}

/// Runs the revoke the flags describe: its summary line and its JSON line.
fn run(args: &[String]) -> Result<(String, String), CliError> {
    let start = Instant::now();
    let f = Flags::parse(args, &["ranks", "radix", "faults", "seed"])?;
    let ranks: u32 = f.get("ranks", None)?;
    let radix: u32 = f.get("radix", Some(64))?;
    let faults: u8 = f.get("faults", Some(0))?;
    let seed: u64 = f.get("seed", Some(1))?;
    if faults > 1 {
        return Err(CliError::Usage("--faults is 0 or 1".into()));
    }
    Layout::new(ranks, radix).map_err(|e| CliError::Usage(e.to_string()))?;
    let p = RevokeParams {
        ranks,
        radix,
        seed,
        faults: faults == 1,
        exact: true,
    };
    let r = run_revoke(&p, Hooks::default()).map_err(|e| CliError::Failed(e.to_string()))?;
    let (m, d) = (u64::from(r.members), u64::from(r.degree));
    let formula = if m > 1 { d + (m - 1) * (d - 1) } else { 0 };
    let rss = peak_rss_bytes();
    let wall = start.elapsed();
    let summary = format!(
        "revoke: {} ranks ({} members, {} removed before, {} crashed undetected, {} during), \
         seed {seed}: all {} survivors revoked once; hops p50 {} p99 {} max {} (overlay \
         diameter {}, degree {}); {} notices ({} fault-free formula, {:.1} per member); \
         latency max {:.3} ms; peak RSS {:.1} MiB; wall {:.1} s",
        r.ranks,
        r.members,
        r.removed,
        r.undetected,
        r.crashed_during,
        r.survivors,
        r.hops_p50,
        r.hops_p99,
        r.hops_max,
        r.diameter,
        r.degree,
        r.notices,
        formula,
        r.notices as f64 / m.max(1) as f64,
        r.latency_max_ns as f64 / 1e6,
        rss.unwrap_or(0) as f64 / (1024.0 * 1024.0),
        wall.as_secs_f64(),
    );
    let json = json_line(&[
        ("ranks", r.ranks.into()),
        ("members", r.members.into()),
        ("survivors", r.survivors.into()),
        ("degree", r.degree.into()),
        ("diameter", r.diameter.into()),
        ("hops_p50", r.hops_p50.into()),
        ("hops_p99", r.hops_p99.into()),
        ("hops_max", r.hops_max.into()),
        (
            "hops_max_over_diameter",
            (f64::from(r.hops_max) / f64::from(r.diameter.max(1))).into(),
        ),
        ("notices", r.notices.into()),
        ("notices_formula", formula.into()),
        (
            "notices_per_member",
            (r.notices as f64 / m.max(1) as f64).into(),
        ),
        ("latency_ms_max", (r.latency_max_ns as f64 / 1e6).into()),
        ("peak_rss_bytes", rss.map_or(Value::Null, Value::from)),
        ("wall_ms", (wall.as_millis() as u64).into()),
    ]);
    Ok((summary, json))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_owned).collect()
    }

    fn field(json: &str, key: &str) -> Value {
        let v: Value = serde_json::from_str(json).unwrap();
        v[key].clone()
    }

    #[test]
    fn a_fault_free_revoke_reaches_the_farthest_rank_in_exactly_the_diameter() {
        let (summary, json) = run(&argv("--ranks 1000 --radix 8 --seed 2")).unwrap();
        assert!(
            summary.contains("all 1000 survivors revoked once"),
            "{summary}"
        );
        assert_eq!(field(&json, "hops_max"), field(&json, "diameter"), "{json}");
        assert_eq!(
            field(&json, "notices"),
            field(&json, "notices_formula"),
            "{json}"
        );
        assert!(
            json.starts_with(r#"{"ranks":1000,"members":1000,"#),
            "{json}"
        );
    }

    #[test]
    fn with_faults_every_survivor_still_gets_it() {
        let (_, json) = run(&argv("--ranks 2000 --faults 1 --seed 5")).unwrap();
        let (members, survivors) = (field(&json, "members"), field(&json, "survivors"));
        assert!(
            survivors.as_u64().unwrap() < members.as_u64().unwrap(),
            "{json}"
        );
        assert!(field(&json, "hops_max").as_u64() >= Some(1), "{json}");
    }

    #[test]
    fn bad_flags_are_usage_errors() {
        assert!(matches!(
            run(&argv("--ranks 100 --faults 2")),
            Err(CliError::Usage(_))
        ));
        assert!(matches!(run(&argv("--radix 8")), Err(CliError::Usage(_))));
    }
}
