//! `--shrink R,R@MS[/FROM]`: shrink campaigns asked of a running cluster, and what the report
//! says of each.
//!
//! MS milliseconds into the workload the launcher writes `shrink R,R` to the requester's stdin
//! (`lifeline node`'s command): FROM when given, else a live rank that is no target of any
//! campaign asked for at that moment and not yet a requester at that moment (ascending from
//! rank 1, then rank 0), so campaigns asked together come from different ranks.
//!
//! Per campaign the report gives the requester's `campaign_started` (its id), the completions
//! it printed for that id (`completions`: must be 1), the epoch and the time from the request to
//! the completion (`complete_ms`), `campaign_failed` reasons, the repair passes at each survivor
//! that was a member when it was asked (`repair_passes`: `repaired` lines naming any of its
//! targets; must be 1 at every survivor unless a target crashed), failure verdicts naming a
//! target that did not crash (`failure_verdicts`: `failure_confirmed` lines at any rank; must
//! be 0; those naming a crashed target are `failure_verdicts_crashed`), the `departed` views
//! that named it at the survivors (`departed_epochs`: one epoch, seen by every such survivor:
//! `survivors_agree`; `departed_seen`: each such survivor's epochs), and each target's end (`targets`: exit status or signal, whether it
//! printed `left`, whether it crashed: killed by `--kill` before it printed `left`, or ended
//! by a signal without leaving). A target that did not crash must print `left` and exit 0, or
//! be killed by a `--kill` due after its `left` (still closing its links) (`targets_ok`). `xcasts_across` and
//! `relm_across` count the workload's xcasts and RELM messages in flight across it: started
//! before its completion, delivered (an xcast at its last survivor) after its request.
//!
//! `--burst N@MS` starts N more xcasts and N more RELM messages at once MS milliseconds into
//! the workload (the next N ops of the workload's rotation, in one tick, written before any
//! shrink request due in that tick): with the MS of a `--shrink`, they are in flight while the
//! campaign runs.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{json, Value};

use super::procs::{exit_fields, Exit, Procs};
use super::tally::Tally;
use super::ClusterArgs;
use crate::node_cmd::wall_ms;
use crate::CliError;

/// How long the workload goes on past the last `--shrink`: the campaign completes, the targets
/// leave, and survivors deliver ops started after it.
pub(super) const SHRINK_TAIL_MS: u64 = 2500;

/// Parses every `--burst N@MS` (N in 1..=10000): (MS, N), in time order.
pub(super) fn parse_bursts(args: &ClusterArgs) -> Result<Vec<(u64, u32)>, CliError> {
    let mut out = Vec::new();
    for b in &args.bursts {
        let bad = || CliError::Usage(format!("--burst {b}: expected N@MS, N in 1..=10000"));
        let (n, at) = b.split_once('@').ok_or_else(bad)?;
        let n: u32 = n.parse().map_err(|_| bad())?;
        let at: u64 = at.parse().map_err(|_| bad())?;
        if !(1..=10_000).contains(&n) {
            return Err(bad());
        }
        out.push((at, n));
    }
    out.sort_unstable();
    Ok(out)
}

/// One `--shrink` as asked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Shrink {
    pub(super) targets: Vec<u32>,
    pub(super) at_ms: u64,
    /// The requester asked for (`/FROM`).
    pub(super) from: Option<u32>,
}

/// Parses every `--shrink R,R@MS[/FROM]`, in time order (targets distinct, within the
/// cluster). FROM may be a target: the node accepts that of the coordinator only (a planned
/// hand-over) and refuses any other rank (`shrink_errors`).
pub(super) fn parse_shrinks(args: &ClusterArgs) -> Result<Vec<Shrink>, CliError> {
    let mut out = Vec::new();
    for s in &args.shrinks {
        let bad = |why: &str| CliError::Usage(format!("--shrink {s}: {why}"));
        let (list, rest) = s
            .split_once('@')
            .ok_or_else(|| bad("expected R[,R...]@MS[/FROM]"))?;
        let (at, from) = match rest.split_once('/') {
            Some((at, f)) => (at, Some(f.parse::<u32>().map_err(|_| bad("bad FROM"))?)),
            None => (rest, None),
        };
        let at_ms: u64 = at.parse().map_err(|_| bad("bad MS"))?;
        let targets: Vec<u32> = list
            .split(',')
            .map(|r| r.trim().parse::<u32>())
            .collect::<Result<_, _>>()
            .map_err(|_| bad("bad rank"))?;
        let distinct: BTreeSet<u32> = targets.iter().copied().collect();
        if targets.is_empty() || distinct.len() != targets.len() {
            return Err(bad("the targets must be distinct, at least one"));
        }
        if let Some(r) = targets
            .iter()
            .chain(from.iter())
            .find(|r| **r >= args.nodes)
        {
            return Err(bad(&format!("rank {r} is outside 0..{}", args.nodes)));
        }
        out.push(Shrink {
            targets,
            at_ms,
            from,
        });
    }
    out.sort_by_key(|s| s.at_ms);
    Ok(out)
}

/// A campaign as asked of a node.
#[derive(Clone, Debug)]
pub(super) struct Asked {
    pub(super) targets: Vec<u32>,
    pub(super) requester: u32,
    /// Ms into the workload and wall time of the request.
    pub(super) at_ms: u64,
    pub(super) wall: f64,
}

/// Picks the requester of `all[i]` among the ranks `0..n` not `gone`, not a target of any
/// campaign asked at the same moment, not already picked (`used`) for that moment.
pub(super) fn requester(
    all: &[Shrink],
    i: usize,
    n: u32,
    gone: &BTreeSet<u32>,
    used: &BTreeSet<u32>,
) -> Option<u32> {
    let s = &all[i];
    if let Some(f) = s.from {
        return Some(f);
    }
    let busy: BTreeSet<u32> = all
        .iter()
        .filter(|o| o.at_ms == s.at_ms)
        .flat_map(|o| o.targets.iter().copied())
        .collect();
    (1..n)
        .chain([0])
        .find(|r| !gone.contains(r) && !busy.contains(r) && !used.contains(r))
}

/// Sends campaign `s` to `requester` now.
pub(super) async fn ask(procs: &mut Procs, s: &Shrink, requester: u32, at_ms: u64) -> Asked {
    let list: Vec<String> = s.targets.iter().map(ToString::to_string).collect();
    procs
        .send(requester, &format!("shrink {}\n", list.join(",")))
        .await;
    tracing::debug!(requester, targets = ?s.targets, "shrink asked");
    Asked {
        targets: s.targets.clone(),
        requester,
        at_ms,
        wall: wall_ms(),
    }
}

/// What the report says of the campaigns.
pub(super) struct Campaigns {
    pub(super) json: Value,
    pub(super) ok: bool,
    /// Wall time of the last completion seen (a fault event for `survivors_continued`).
    pub(super) last_completion: Option<f64>,
}

/// The campaigns' report (see the module doc) from the nodes' lines, the kills and the exits.
pub(super) fn campaigns(
    t: &Tally,
    asked: &[Asked],
    killed: &BTreeMap<u32, f64>,
    exits: &BTreeMap<u32, Exit>,
    survivors: &BTreeSet<u32>,
    start_wall: f64,
) -> Campaigns {
    let mut all_ok = true;
    let mut last_completion: Option<f64> = None;
    let mut used: BTreeMap<u32, usize> = BTreeMap::new();
    let mut list = Vec::new();
    for a in asked {
        let targets: BTreeSet<u32> = a.targets.iter().copied().collect();
        // The requester's `campaign_started` lines for these targets, in order; the k-th
        // campaign it was asked for with the same targets is the k-th line.
        let k = used.entry(a.requester).or_default();
        let started = t
            .campaign_started
            .get(&a.requester)
            .and_then(|v| v.iter().filter(|(_, _, tg)| *tg == a.targets).nth(*k));
        *k += 1;
        let id = started.map(|(_, id, _)| id.clone());
        let done: Vec<&super::tally::Completed> = t
            .campaign_completed
            .get(&a.requester)
            .into_iter()
            .flatten()
            .filter(|(_, i, _, _)| Some(i) == id.as_ref())
            .collect();
        let failed: Vec<&String> = t
            .campaign_failed
            .get(&a.requester)
            .into_iter()
            .flatten()
            .filter(|(i, _)| Some(i) == id.as_ref())
            .map(|(_, why)| why)
            .collect();
        let first_done = done.first().map(|d| d.0);
        // The workload's ops in flight across it: started before its completion (or the
        // end, when it never completed) and delivered (last survivor for an xcast, the
        // destination for a RELM message) after its request, or never.
        let before_done = |at: f64| first_done.is_none_or(|d| at <= d);
        let xcasts_across = t
            .started
            .iter()
            .filter(|(p, (_, at))| {
                before_done(*at)
                    && t.delivered_at.get(*p).is_none_or(|m| {
                        let last = m
                            .iter()
                            .filter(|(r, _)| survivors.contains(r))
                            .map(|(_, d)| *d)
                            .fold(0.0, f64::max);
                        last >= a.wall
                    })
            })
            .count();
        let relm_across = t
            .relm_started_at
            .iter()
            .filter(|(p, at)| {
                before_done(**at) && t.relm_delivered_at.get(*p).is_none_or(|d| *d >= a.wall)
            })
            .count();
        if let Some(d) = first_done {
            last_completion = Some(last_completion.map_or(d, |l| l.max(d)));
        }
        let crashed: BTreeSet<u32> = targets
            .iter()
            .copied()
            .filter(|r| {
                // Killed before it printed `left`, or ended by a signal without leaving (a
                // kill after its `left` ends a target that left: not a crash).
                let left = t.left.get(r);
                killed.get(r).is_some_and(|k| left.is_none_or(|l| k < l))
                    || (left.is_none() && exits.get(r).is_some_and(|e| e.status.code().is_none()))
            })
            .collect();
        // Survivors that were members when it was asked.
        let members: Vec<u32> = survivors
            .iter()
            .copied()
            .filter(|s| t.member_at(*s, a.wall))
            .collect();
        let passes: BTreeMap<u32, usize> = members
            .iter()
            .map(|s| {
                let n = t
                    .repaired
                    .get(s)
                    .into_iter()
                    .flatten()
                    .filter(|(_, ranks, _)| ranks.iter().any(|r| targets.contains(r)))
                    .count();
                (*s, n)
            })
            .collect();
        let passes_ok = passes
            .values()
            .all(|n| *n == 1 || (!crashed.is_empty() && *n >= 1));
        let verdicts = |set: &BTreeSet<u32>| -> u32 {
            t.confirm_counts
                .iter()
                .filter(|((r, _), _)| set.contains(r))
                .map(|(_, c)| *c)
                .sum()
        };
        let clean: BTreeSet<u32> = targets.difference(&crashed).copied().collect();
        let failure_verdicts = verdicts(&clean);
        // The `departed` views naming this campaign at the member survivors.
        let mut epochs = BTreeSet::new();
        let mut agree = id.is_some();
        let mut seen_by = BTreeMap::new();
        for s in &members {
            let seen: Vec<u64> = t
                .departed
                .get(s)
                .into_iter()
                .flatten()
                .filter(|(_, _, _, ids)| id.as_ref().is_some_and(|i| ids.contains(i)))
                .map(|(_, e, _, _)| *e)
                .collect();
            agree &= seen.len() == 1;
            seen_by.insert(*s, seen.clone());
            epochs.extend(seen);
        }
        agree &= epochs.len() == 1;
        let target_list: Vec<Value> = a
            .targets
            .iter()
            .map(|r| {
                let (status, signal) = exit_fields(exits.get(r).map(|e| e.status));
                json!({"rank": r, "status": status, "signal": signal,
                       "left": t.left.contains_key(r), "crashed": crashed.contains(r),
                       "killed": killed.contains_key(r)})
            })
            .collect();
        // A clean target printed `left` and exited 0, or was still on its way out (closing
        // its links) when a `--kill` due after its `left` reached it: it had left by then.
        let targets_ok = clean.iter().all(|r| {
            let left = t.left.get(r);
            left.is_some()
                && (exits.get(r).is_some_and(|e| e.status.success())
                    || killed.get(r).zip(left).is_some_and(|(k, l)| k >= l))
        });
        let ok = done.len() == 1
            && failed.is_empty()
            && passes_ok
            && failure_verdicts == 0
            && agree
            && targets_ok;
        all_ok &= ok;
        list.push(json!({
            "targets": a.targets,
            "requester": a.requester,
            "at_ms": a.at_ms,
            "id": id,
            "campaign_started": started.is_some(),
            "completions": done.len(),
            "epoch": done.first().map(|d| d.3),
            "removed": done.first().map(|d| d.2.clone()),
            "complete_ms": first_done.map(|d| ((d - a.wall) * 10.0).round() / 10.0),
            "completed_at_ms": first_done.map(|d| (d - start_wall).round() as i64),
            "failed": failed,
            "xcasts_across": xcasts_across,
            "relm_across": relm_across,
            "repair_passes": passes,
            "repair_passes_ok": passes_ok,
            "failure_verdicts": failure_verdicts,
            "failure_verdicts_crashed": verdicts(&crashed),
            "departed_epochs": epochs,
            "survivors_agree": agree,
            "departed_seen": seen_by,
            "targets_exits": target_list,
            "crashed": crashed,
            "targets_ok": targets_ok,
            "ok": ok,
        }));
    }
    Campaigns {
        json: json!(list),
        ok: all_ok,
        last_completion,
    }
}

/// Survivors whose final tree view (their `stats` line) routes through a rank that is not a
/// survivor: a parent or child that left or died. Survivors that printed no view are listed
/// too (`None`): nothing shows they route around the holes.
pub(super) fn routes_via_holes(t: &Tally, survivors: &BTreeSet<u32>) -> Vec<(u32, Option<u32>)> {
    let mut bad = Vec::new();
    for s in survivors {
        let Some(v) = t.views.get(s) else {
            bad.push((*s, None));
            continue;
        };
        let parent = v["parent"].as_u64().map(|p| p as u32);
        let children = v["children"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| c.as_u64().map(|c| c as u32));
        for r in parent.into_iter().chain(children) {
            if !survivors.contains(&r) {
                bad.push((*s, Some(r)));
            }
        }
    }
    bad
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(targets: &[u32], at_ms: u64, from: Option<u32>) -> Shrink {
        Shrink {
            targets: targets.to_vec(),
            at_ms,
            from,
        }
    }

    #[test]
    fn requesters_differ_for_campaigns_asked_together() {
        let all = [
            sh(&[1, 3], 2000, None),
            sh(&[4], 2000, None),
            sh(&[5], 3000, Some(7)),
        ];
        let gone = BTreeSet::new();
        let mut used = BTreeSet::new();
        let a = requester(&all, 0, 10, &gone, &used).unwrap();
        assert_eq!(
            a, 2,
            "1 and 3 are targets, 4 a target of the other campaign"
        );
        used.insert(a);
        assert_eq!(requester(&all, 1, 10, &gone, &used), Some(5));
        assert_eq!(requester(&all, 2, 10, &gone, &BTreeSet::new()), Some(7));
        let gone: BTreeSet<u32> = (1..10).collect();
        assert_eq!(requester(&all, 0, 10, &gone, &BTreeSet::new()), Some(0));
    }
}
