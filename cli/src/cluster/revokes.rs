//! `--revoke R@MS`: rank R revokes a group MS milliseconds into the workload (`lifeline node`'s
//! stdin `revoke GROUP 1`, group `i + 1` for the `i`-th flag), and the report says, per revoke,
//! how long every rank took to print `revoked` and which survivors never did.
//!
//! Latency is measured from the launcher's write of the command to the origin's stdin to each
//! rank's `revoked` line (its `t_ms`), both on this machine's wall clock: the origin's own
//! line is not a usable start, as the origin may print it after its notices went out and other
//! ranks printed theirs. The origin's latency (the command's way in and its line's way out) is
//! listed with the others.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{json, Value};

use super::ClusterArgs;
use crate::CliError;

/// One `--revoke R@MS` as asked.
#[derive(Clone, Copy, Debug)]
pub(super) struct Asked {
    pub(super) rank: u32,
    pub(super) at_ms: u64,
    /// The group it revokes (its flag's position, from 1).
    pub(super) group: u64,
}

/// Parses every `--revoke R@MS`.
pub(super) fn parse(args: &ClusterArgs) -> Result<Vec<Asked>, CliError> {
    args.revokes
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let bad = || CliError::Usage(format!("--revoke {s}: expected R@MS"));
            let (r, at) = s.split_once('@').ok_or_else(bad)?;
            let rank: u32 = r.parse().map_err(|_| bad())?;
            let at_ms: u64 = at.parse().map_err(|_| bad())?;
            if rank >= args.nodes {
                return Err(CliError::Usage(format!(
                    "--revoke {s}: rank {rank} is not below --nodes {}",
                    args.nodes
                )));
            }
            Ok(Asked {
                rank,
                at_ms,
                group: i as u64 + 1,
            })
        })
        .collect()
}

/// The stdin command for `a`.
pub(super) fn command(a: &Asked) -> String {
    format!("revoke {} 1\n", a.group)
}

/// Every rank's `revoked` lines: group -> rank -> (wall time of the first, hops, lines).
#[derive(Debug, Default)]
pub(super) struct Seen(BTreeMap<u64, BTreeMap<u32, (f64, u64, u32)>>);

impl Seen {
    /// One `revoked` line from `rank` at wall time `t`.
    pub(super) fn take(&mut self, rank: u32, t: f64, v: &Value) {
        let Some(group) = v["group"].as_u64() else {
            return;
        };
        let hops = v["hops"].as_u64().unwrap_or(0);
        let e = self
            .0
            .entry(group)
            .or_default()
            .entry(rank)
            .or_insert((t, hops, 0));
        e.2 += 1;
    }
}

/// The report's `revokes` (one object per flag) and whether each reached every survivor
/// exactly once. `sent`: flag index -> wall time the launcher wrote the command.
pub(super) fn summary(
    asked: &[Asked],
    sent: &BTreeMap<usize, f64>,
    seen: &Seen,
    survivors: &BTreeSet<u32>,
) -> (Value, bool, Vec<String>) {
    let mut ok = true;
    let mut out = Vec::new();
    let mut text = Vec::new();
    for (i, a) in asked.iter().enumerate() {
        let empty = BTreeMap::new();
        let got = seen.0.get(&a.group).unwrap_or(&empty);
        let base = sent.get(&i).copied();
        let missing: Vec<u32> = survivors
            .iter()
            .copied()
            .filter(|r| !got.contains_key(r))
            .collect();
        let twice: Vec<u32> = got
            .iter()
            .filter(|(_, g)| g.2 > 1)
            .map(|(r, _)| *r)
            .collect();
        let mut lat: Vec<f64> = match base {
            Some(b) => got
                .iter()
                .filter(|(r, _)| **r != a.rank)
                .map(|(_, g)| g.0 - b)
                .collect(),
            None => Vec::new(),
        };
        lat.sort_by(f64::total_cmp);
        let max = lat.last().copied();
        // From the origin's own `revoked` line (its `Node::revoke` call) to each other rank's:
        // the flood alone, without the origin's reading of its command.
        let at_origin = got.get(&a.rank).map(|g| g.0);
        let flood_max = at_origin.and_then(|o| {
            got.iter()
                .filter(|(r, _)| **r != a.rank)
                .map(|(_, g)| g.0 - o)
                .max_by(f64::total_cmp)
        });
        let median = (!lat.is_empty()).then(|| lat[lat.len() / 2]);
        let hops_max = got.values().map(|g| g.1).max();
        let this_ok = sent.contains_key(&i) && missing.is_empty() && twice.is_empty();
        ok &= this_ok;
        let round = |x: Option<f64>| x.map(|v| (v * 1000.0).round() / 1000.0);
        out.push(json!({
            "origin": a.rank,
            "at_ms": a.at_ms,
            "group": a.group,
            "sent": sent.contains_key(&i),
            "reached": got.len(),
            "latency_ms_max": round(max),
            "latency_ms_median": round(median),
            "hops_max": hops_max,
            "origin_latency_ms": round(got.get(&a.rank).zip(base).map(|(g, b)| g.0 - b)),
            "flood_ms_max": round(flood_max),
            "latency_ms": got.iter()
                .filter_map(|(r, g)| base.map(|b| (r.to_string(), json!(round(Some(g.0 - b))))))
                .collect::<serde_json::Map<String, Value>>(),
            "missing_survivors": missing,
            "delivered_twice": twice,
            "ok": this_ok,
        }));
        text.push(format!(
            "  revoke of group {} by rank {} at {} ms: reached {} ranks, latency max {} ms, \
             median {} ms, {} hops at most; survivors missing: {:?}{}",
            a.group,
            a.rank,
            a.at_ms,
            got.len(),
            max.map_or("?".into(), |m| format!("{m:.1}")),
            median.map_or("?".into(), |m| format!("{m:.1}")),
            hops_max.map_or("?".into(), |h| h.to_string()),
            missing,
            if twice.is_empty() {
                String::new()
            } else {
                format!("; delivered twice at {twice:?}")
            }
        ));
    }
    (Value::Array(out), ok, text)
}
