//! `--grow N@MS`: N new `lifeline node --join` processes started MS milliseconds into the
//! workload, each given the addresses of up to [`CONTACTS`] live members spread over the
//! cluster; and what the report says of their joins.
//!
//! A joiner listens on an address of its own (`rank_ip(nodes + j)` for the `j`-th joiner: on
//! Linux a loopback address no rank has), joins, prints `joined` (rank, epoch, join id, join
//! latency, tries) and from then on is a rank like the others: an origin of xcasts, a source
//! and destination of RELM messages, a survivor whose deliveries are checked. An op must reach
//! a joiner when it started after the joiner's `joined` line (earlier ops it adopts as
//! complete); a removal must be confirmed by a joiner that joined before the removal's first
//! confirmation anywhere.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{json, Value};

use super::procs::{node_command, start, LinesTx, Procs, UNJOINED};
use super::setup::{rank_ip, Setup};
use super::tally::Tally;
use super::ClusterArgs;
use crate::node_cmd::wall_ms;
use crate::CliError;

/// Members each joiner is given (fewer when fewer are live).
pub(super) const CONTACTS: usize = 3;

/// One `--grow N@MS` as asked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Grow {
    pub(super) count: u32,
    pub(super) at_ms: u64,
}

/// Parses every `--grow N@MS` (N at least 1), in time order.
pub(super) fn parse_grows(args: &ClusterArgs) -> Result<Vec<Grow>, CliError> {
    let mut grows = Vec::new();
    for g in &args.grows {
        let bad = || CliError::Usage(format!("--grow {g}: expected N@MS, N at least 1"));
        let (n, at) = g.split_once('@').ok_or_else(bad)?;
        let count: u32 = n.parse().map_err(|_| bad())?;
        let at_ms: u64 = at.parse().map_err(|_| bad())?;
        if count == 0 {
            return Err(bad());
        }
        grows.push(Grow { count, at_ms });
    }
    grows.sort_by_key(|g| g.at_ms);
    Ok(grows)
}

/// A joiner process as started.
#[derive(Clone, Debug)]
pub(super) struct Started {
    /// Its index among the joiners (its lines are tagged `UNJOINED + j` until admitted).
    pub(super) j: u32,
    pub(super) pid: u32,
    /// The ranks it was given as contacts.
    pub(super) contacts: Vec<u32>,
    /// Wall time it was started.
    pub(super) wall: f64,
}

/// Up to [`CONTACTS`] of `live` for the `j`-th joiner, spread: a hash of `j` picks the first,
/// the others are a third of the way round from each other.
pub(super) fn contacts(j: u32, live: &[u32]) -> Vec<u32> {
    if live.is_empty() {
        return Vec::new();
    }
    let mut z = u64::from(j).wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    let first = (z ^ (z >> 31)) as usize % live.len();
    let k = CONTACTS.min(live.len());
    let mut picked: Vec<u32> = (0..k)
        .map(|i| live[(first + i * live.len() / k) % live.len()])
        .collect();
    picked.dedup();
    picked
}

/// Starts grow `g`'s joiners (`started` so far before them), each given contacts among `live`
/// (members neither gone nor paused).
pub(super) fn spawn_joiners(
    args: &ClusterArgs,
    setup: &Setup,
    procs: &mut Procs,
    g: Grow,
    live: &[u32],
    started: &mut Vec<Started>,
    tx: &LinesTx,
) -> Result<(), CliError> {
    for _ in 0..g.count {
        let j = started.len() as u32;
        let ranks = contacts(j, live);
        let join: Vec<String> = ranks
            .iter()
            .map(|r| setup.eps[*r as usize].to_string())
            .collect();
        let mut cmd = node_command(args, setup)?;
        cmd.args(["--join", &join.join(",")])
            .args(["--listen", &format!("{}:0", rank_ip(args.nodes + j))]);
        let pid = start(procs, cmd, UNJOINED + j, Some(procs.joined.clone()), tx)?;
        tracing::debug!(joiner = j, pid, contacts = ?ranks, "joiner started");
        started.push(Started {
            j,
            pid,
            contacts: ranks,
            wall: wall_ms(),
        });
    }
    Ok(())
}

/// What the report says of the joins, and whether they went right: every joiner admitted
/// (with a distinct rank) and none failed.
pub(super) struct Joins {
    pub(super) json: Value,
    pub(super) ok: bool,
    /// Distinct epochs that admitted the run's joiners.
    pub(super) views: usize,
}

/// The joins: each joiner's line (rank, join id, admitting epoch, latency, tries), the views
/// that admitted joiners as the members reported them, and the failures.
pub(super) fn joins(t: &Tally, started: &[Started], start_wall: f64) -> Joins {
    let into = |wall: f64| (wall - start_wall).round() as i64;
    let by_j: BTreeMap<u32, &Started> = started.iter().map(|s| (s.j, s)).collect();
    let list: Vec<Value> = t
        .joined
        .iter()
        .map(|(r, j)| {
            json!({"rank": r, "join_id": j.join_id, "epoch": j.epoch,
                   "join_ms": (j.join_ms * 1000.0).round() / 1000.0, "tries": j.tries,
                   "contact": j.contact, "at_ms": into(j.t)})
        })
        .collect();
    let epochs: BTreeSet<u64> = t.joined.values().map(|j| j.epoch).collect();
    let views: Vec<Value> = t
        .admitted
        .iter()
        .map(|(e, v)| {
            json!({"epoch": e, "ranks": v.ranks, "members": v.members, "at_ms": into(v.first),
                   "reported_by": v.reporters.len()})
        })
        .collect();
    let failures: Vec<Value> = t
        .join_failed
        .iter()
        .map(|(tag, why)| {
            let j = tag - UNJOINED;
            json!({"joiner": j, "pid": by_j.get(&j).map(|s| s.pid), "error": why})
        })
        .collect();
    let ranks: BTreeSet<u32> = t.joined.keys().copied().collect();
    let ms: Vec<f64> = t.joined.values().map(|j| j.join_ms).collect();
    let max_ms = ms.iter().copied().reduce(f64::max);
    let ok = t.joined.len() == started.len() && ranks.len() == started.len() && failures.is_empty();
    let json = json!({
        "joiners_started": started.len(),
        "joins_admitted": t.joined.len(),
        "join_view_changes": epochs.len(),
        "join_ms_max": max_ms.map(|x| (x * 1000.0).round() / 1000.0),
        "joins": list,
        "join_views": views,
        "join_failures": failures,
        "joiner_contacts": started.iter().map(|s| json!({"joiner": s.j, "contacts": s.contacts,
            "started_ms": into(s.wall)})).collect::<Vec<_>>(),
    });
    Joins {
        json,
        ok,
        views: epochs.len(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contacts_are_spread_distinct_and_few() {
        let live: Vec<u32> = (0..16).filter(|r| *r != 3).collect();
        for j in 0..32 {
            let c = contacts(j, &live);
            assert_eq!(c.len(), CONTACTS, "{c:?}");
            assert_eq!(c.iter().collect::<BTreeSet<_>>().len(), CONTACTS, "{c:?}");
            assert!(c.iter().all(|r| live.contains(r)));
        }
        let firsts: BTreeSet<u32> = (0..32).map(|j| contacts(j, &live)[0]).collect();
        assert!(firsts.len() > 5, "{firsts:?}");
        assert_eq!(contacts(0, &[4]), vec![4]);
        assert!(contacts(0, &[]).is_empty());
    }
}
