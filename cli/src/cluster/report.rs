//! The report: the measures and the verdict (`pass`) from what the nodes printed, written as
//! one JSON line (`--json`) or as text.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{json, Value};

use super::evictions::{attribute, evictions, Gone, Outcome, Required};
use super::expect::EVICT_BOUND_MS;
use super::grow::joins;
use super::procs::exit_words;
use super::shrink::{campaigns, routes_via_holes};
use super::tally::{Tally, QUIC_REFUSALS};
use super::ClusterArgs;
use crate::node_cmd::TransportKind;
use crate::{write_stdout, CliError};

#[allow(clippy::too_many_arguments)]
pub(super) fn report(
    args: &ClusterArgs,
    t: &Tally,
    killed: &BTreeMap<u32, f64>,
    killed_at_ms: &BTreeMap<u32, u128>,
    survivors: &BTreeSet<u32>,
    attempted: u64,
    o: &Outcome,
) -> Result<(), CliError> {
    let pauses = &o.pauses;
    let (deaths, evicted) = attribute(t, killed_at_ms, o);
    // Every death is timed: the launcher's own kills from the SIGKILL, the others (an outside
    // signal, a crash) from the exit the launcher observed (its stdout closing, or the exit
    // status if that was seen first).
    let timed: BTreeMap<u32, (f64, &str)> = deaths
        .iter()
        .map(|g| match killed.get(&g.rank) {
            Some(at) => (g.rank, (*at, "sigkill")),
            None => {
                let reaped = o.start_wall + g.at_ms as f64;
                let at = t
                    .stdout_closed
                    .get(&g.rank)
                    .map_or(reaped, |c| c.min(reaped));
                (g.rank, (at, "exit_observed"))
            }
        })
        .collect();
    let detect: BTreeMap<u32, Option<(f64, u32)>> = timed
        .iter()
        .map(|(r, (at, _))| {
            (
                *r,
                t.link_down.get(r).map(|(d, by)| ((d - at).max(0.0), *by)),
            )
        })
        .collect();
    let repair: BTreeMap<u32, Option<f64>> = timed
        .iter()
        .map(|(r, (at, _))| {
            // Confirmed failed, or (a shrink target killed mid-campaign) departed.
            let m = Some(t.removed_by(*r)).filter(|m| !m.is_empty());
            let m = m.as_ref();
            let all = m.is_some_and(|m| {
                survivors
                    .iter()
                    .filter(|s| t.must_confirm(**s, *r))
                    .all(|s| m.contains_key(s))
            });
            let worst = m.and_then(|m| m.values().copied().reduce(f64::max));
            (*r, worst.filter(|_| all).map(|w| (w - at).max(0.0)))
        })
        .collect();
    let max_of = |v: Vec<Option<f64>>| -> Option<f64> {
        v.iter().try_fold(0.0f64, |m, x| x.map(|x| m.max(x)))
    };
    let detect_max = if timed.is_empty() {
        None
    } else {
        max_of(detect.values().map(|d| d.map(|x| x.0)).collect())
    };
    let repair_max = if timed.is_empty() {
        None
    } else {
        max_of(repair.values().copied().collect())
    };
    let duplicates: usize = t
        .delivered
        .values()
        .map(|d| d.values().filter(|c| **c > 1).count())
        .sum();
    // Reached some survivors but not all it had to (an op that reached only removed ranks,
    // e.g. one its removed origin delivered to itself, reached none: no finding; a joiner
    // must have the ops started after it joined, see `Tally::must_have`).
    let partial: usize = t
        .delivered
        .iter()
        .filter(|(p, d)| d.keys().any(|r| survivors.contains(r)) && !t.everywhere(survivors, p))
        .count();
    let lost: usize = t
        .started
        .iter()
        .filter(|(p, (o, _))| survivors.contains(o) && !t.everywhere(survivors, p))
        .count();
    // The joins (`--grow`): every joiner admitted, ops started after the last one (which must
    // reach the joiners too), and RELM messages to and from joiners.
    let grow = joins(t, &o.joiners, o.start_wall);
    let last_join = t.joined.values().map(|j| j.t).reduce(f64::max);
    let after_last_join =
        last_join.map_or(0, |at| t.started.values().filter(|(_, s)| *s > at).count());
    let (relm_to_joiners, relm_from_joiners) = t.relm_joiners(survivors);
    let joiners_alive = t.joined.keys().any(|r| survivors.contains(r));
    let grow_ok = o.joiners.is_empty()
        || (grow.ok
            && after_last_join > 0
            && (!joiners_alive || (relm_to_joiners > 0 && relm_from_joiners > 0)));
    let exactly_once = duplicates == 0 && partial == 0 && lost == 0;
    let startup = startup(t, survivors, args.nodes, o.launch_wall);
    // The last fault event (a kill, a SIGCONT, a network fault's start or end): every survivor
    // must deliver an op started after it.
    // Shrink campaigns (`--shrink`): each checked, and its completion is a fault event.
    let shrink = campaigns(t, &o.asked, killed, &o.exits, survivors, o.start_wall);
    let holes = routes_via_holes(t, survivors);
    let shrink_ok = args.shrinks.is_empty()
        || (shrink.ok
            && o.asked.len() == args.shrinks.len()
            && holes.is_empty()
            && t.shrink_errors.is_empty());
    let gaps = delivery_gaps(t, survivors, o.start_wall, o.work_ms);
    let last_event = killed
        .values()
        .copied()
        .chain(shrink.last_completion)
        .chain(pauses.iter().map(|p| p.wall + p.for_ms as f64))
        .chain(o.net.iter().filter_map(|f| f.applied.map(|a| a.2)))
        .chain(o.net.iter().filter_map(|f| f.removed_wall))
        .reduce(f64::max)
        .unwrap_or(0.0);
    let continued = survivors
        .iter()
        .filter(|s| {
            t.started.iter().any(|(p, (_, at))| {
                *at > last_event && t.delivered.get(p).is_some_and(|d| d.contains_key(s))
            })
        })
        .count();
    let dead: BTreeSet<u32> = deaths.iter().map(|g| g.rank).collect();
    let e = &o.expect;
    let ev = evictions(t, killed, survivors, &evicted, o);
    let outages = super::outage::outages(t, o, &dead, &evicted, args.nodes);
    // Removed but alive, and neither required nor allowed to be: a false positive. A rank
    // that died by itself (not by `--kill`) was truly lost. With the detector on, the
    // evidence is a verdict (a `failure_confirmed` naming the rank, or its eviction); a link
    // down is the loss of one link, which the detector settles. Without it, TCP's link
    // timeout is the failure detector and a link down reported for a live rank counts too.
    let evicted_ranks: BTreeSet<u32> = evicted.iter().map(|g| g.rank).collect();
    let evidence: BTreeSet<u32> = if o.detect {
        t.confirmed.keys().copied().collect()
    } else {
        t.suspected.clone()
    };
    let false_pos: Vec<u32> = evidence
        .union(&evicted_ranks)
        .copied()
        .filter(|r| !killed.contains_key(r) && !dead.contains(r) && !e.may_go(*r))
        .collect();
    let confirmed_twice = t
        .confirm_counts
        .iter()
        .filter(|((_, by), c)| survivors.contains(by) && **c > 1)
        .count();
    let live_downs: Vec<&(f64, u32, u32, String)> = t
        .link_downs
        .iter()
        .filter(|(_, _, p, _)| !dead.contains(p))
        .collect();
    let refused: u64 = t.refused.values().sum();
    // QUIC: the same reason by reason, in total and at each rank that refused any.
    let refused_by: Option<BTreeMap<&str, u64>> =
        (args.transport == TransportKind::Quic).then(|| {
            QUIC_REFUSALS
                .iter()
                .map(|k| (*k, t.refused_quic.values().map(|m| m[k]).sum()))
                .collect()
        });
    let refused_at: BTreeMap<u32, BTreeMap<&str, u64>> = t
        .refused_quic
        .iter()
        .map(|(r, m)| {
            (
                *r,
                m.iter()
                    .filter(|(_, n)| **n > 0)
                    .map(|(k, n)| (*k, *n))
                    .collect(),
            )
        })
        .filter(|(_, m): &(u32, BTreeMap<&str, u64>)| !m.is_empty())
        .collect();
    let (relm_delivered, relm_dups, relm_lost, relm_failed) = t.relm_counts(survivors);
    let detector = detector_load(&t.detect);
    let intruders = match args.transport {
        TransportKind::Tcp => 2,
        TransportKind::Quic => 3,
    };
    let (revokes, revokes_ok, revoke_lines) =
        super::revokes::summary(&o.revokes, &o.revokes_sent, &t.revoked, survivors);
    let pass = revokes_ok
        && (!args.garbage || refused >= intruders * survivors.len() as u64)
        && exactly_once
        && relm_dups == 0
        && relm_lost == 0
        && continued == survivors.len()
        && false_pos.is_empty()
        && detect_max.is_some() != timed.is_empty()
        && ev.ok()
        && confirmed_twice == 0
        && grow_ok
        && shrink_ok
        && startup.ok
        && outages.ok
        && o.settled.is_some();
    let round = |x: Option<f64>| x.map(|v| (v * 1000.0).round() / 1000.0);
    let into = |wall: f64| (wall - o.start_wall).round() as i64;
    if args.json {
        let mut v = json!({
            "nodes": args.nodes,
            "transport": match args.transport {
                TransportKind::Tcp => "tcp",
                TransportKind::Quic => "quic",
            },
            "killed": killed.keys().collect::<Vec<_>>(),
            "stopped": pauses.iter().map(|p| json!({"rank": p.rank, "at_ms": p.at_ms, "for_ms": p.for_ms})).collect::<Vec<_>>(),
            "survivors": survivors.len(),
            "detect_ms_max": round(detect_max),
            "repair_ms_max": round(repair_max),
            "xcast_ops": t.started.len(),
            "xcast_refused": t.refused_xcasts,
            "xcast_delivered_exactly_once": exactly_once,
            "xcast_duplicated": duplicates,
            "xcast_partial": partial,
            "xcast_lost": lost,
            "relm_sent": t.relm_started.len(),
            "relm_delivered": relm_delivered,
            "relm_duplicates": relm_dups,
            "relm_lost": relm_lost,
            "survivors_continued": continued,
            "false_positives": false_pos.len(),
            "refused_connections": refused,
            "relm_refused": t.relm_refused,
            "relm_failed_reported": relm_failed,
            "deaths": deaths.iter().map(|g| {
                let mut v = g.json();
                let r = g.rank;
                v["timed_from"] = json!(timed.get(&r).map(|x| x.1));
                v["detect_ms"] = json!(round(detect.get(&r).copied().flatten().map(|d| d.0)));
                v["repair_ms"] = json!(round(repair.get(&r).copied().flatten()));
                v
            }).collect::<Vec<_>>(),
            "evicted": evicted.iter().map(Gone::json).collect::<Vec<_>>(),
            "net_faults": o.net.iter().map(|f| json!({
                "flag": f.flag, "at_ms": f.applied.map(|a| a.1), "removed_ms": f.removed_ms,
                "rules": f.rules, "dropped_packets": f.dropped})).collect::<Vec<_>>(),
            "link_downs_live": live_downs.iter().map(|(at, by, p, why)| json!({
                "rank": by, "peer": p, "reason": why, "at_ms": into(*at)})).collect::<Vec<_>>(),
            "nft_table": o.table,
            "detect": o.detect,
            "expect": e.json(),
            "evictions_required": ev.required.iter().map(Required::json).collect::<Vec<_>>(),
            "evict_ms_max": ev.evict_ms_max(),
            "evict_forbidden": ev.forbidden,
            "evict_both_ends": ev.both_ends.iter().map(|(a, b)| [a, b]).collect::<Vec<_>>(),
            "resume": ev.resume.iter().map(|r| json!({"fault": r.flag, "at_ms": r.at_ms,
                "resume_ms": r.ms.map(f64::round)})).collect::<Vec<_>>(),
            "resume_ms": ev.resume_ms(),
            "confirmed_more_than_once": confirmed_twice,
            "startup": startup.json,
            "detector": detector,
            "workload_ms": o.work_ms,
            "settled_ms": o.settled,
            "pass": pass,
        });
        if !o.revokes.is_empty() {
            v["revokes"] = revokes;
        }
        if !outages.lines.is_empty() {
            v["outages"] = outages.json.clone();
            v["outages_ok"] = json!(outages.ok);
        }
        v["delivery_gap_ms_max"] = json!(gaps.values().copied().reduce(f64::max));
        v["delivery_gap_ms"] = json!(gaps);
        if !args.shrinks.is_empty() {
            v["campaigns"] = shrink.json.clone();
            v["campaigns_asked"] = json!(o.asked.len());
            v["shrink_errors"] = json!(t
                .shrink_errors
                .iter()
                .map(|(r, m)| json!({"rank": r, "message": m}))
                .collect::<Vec<_>>());
            v["routes_via_holes"] = json!(holes
                .iter()
                .map(|(r, h)| json!({"rank": r, "neighbour": h}))
                .collect::<Vec<_>>());
            v["views"] = json!(t.views);
            v["shrink_ok"] = json!(shrink_ok);
        }
        if let Some(by) = &refused_by {
            v["refused_by_reason"] = json!(by);
            v["refused_at"] = json!(refused_at);
        }
        if !o.joiners.is_empty() {
            if let (Value::Object(m), Value::Object(g)) = (&mut v, &grow.json) {
                m.extend(g.clone());
            }
            v["grow"] = json!(args.grows);
            v["xcast_ops_after_last_join"] = json!(after_last_join);
            v["relm_to_joiners"] = json!(relm_to_joiners);
            v["relm_from_joiners"] = json!(relm_from_joiners);
            v["joins_ok"] = json!(grow_ok);
        }
        write_stdout(|o| writeln!(o, "{v}"))?;
    } else {
        // Who noticed death `r` first and when every survivor confirmed it, after `from`.
        let timing = |r: u32, from: &str, out: &mut dyn std::io::Write| -> std::io::Result<()> {
            match detect.get(&r).copied().flatten() {
                Some((d, by)) => writeln!(
                    out,
                    "  rank {r}: rank {by} noticed first, {d:.1} ms after {from}"
                )?,
                None => writeln!(out, "  rank {r}: NOBODY noticed")?,
            }
            match repair.get(&r).copied().flatten() {
                Some(ms) => writeln!(
                    out,
                    "  rank {r}: confirmed dead at all {} survivors {ms:.1} ms after {from}",
                    survivors.len()
                ),
                None => writeln!(out, "  rank {r}: not confirmed dead at every survivor"),
            }
        };
        write_stdout(|out| {
            for f in &o.net {
                match (f.applied, f.removed_ms) {
                    (Some((_, a, _)), None) => writeln!(
                        out,
                        "  {}: {} nftables rules in from {a} ms into the workload to the end, \
                         {} packets dropped",
                        f.flag,
                        f.rules,
                        f.dropped.map_or("?".into(), |d| d.to_string())
                    )?,
                    (Some((_, a, _)), Some(b)) => writeln!(
                        out,
                        "  {}: {} nftables rules in from {a} to {b} ms into the workload, \
                         {} packets dropped",
                        f.flag,
                        f.rules,
                        f.dropped.map_or("?".into(), |d| d.to_string())
                    )?,
                    _ => writeln!(out, "  {}: NOT applied", f.flag)?,
                }
            }
            for r in killed.keys() {
                writeln!(
                    out,
                    "  killed rank {r} with SIGKILL {} ms into the workload",
                    killed_at_ms.get(r).copied().unwrap_or(0)
                )?;
                timing(*r, "the kill", out)?;
            }
            for g in deaths.iter().filter(|g| g.cause != "killed") {
                let r = g.rank;
                writeln!(
                    out,
                    "  rank {r} died {} ms into the workload, not by this launcher: {}; timed \
                     from the exit the launcher observed:",
                    g.at_ms,
                    exit_words(g.status)
                )?;
                timing(r, "the exit", out)?;
            }
            for g in &evicted {
                let told = match (g.told_ms, g.epoch) {
                    (Some(at), Some(e)) => format!("told at {at} ms (epoch {e})"),
                    (Some(at), None) => format!("found its slot gone at {at} ms"),
                    _ => "never told".into(),
                };
                let verdict = if e.required.contains_key(&g.rank) {
                    "evicted, as required,"
                } else if e.may_go(g.rank) {
                    "evicted (allowed)"
                } else {
                    "EVICTED (a false positive)"
                };
                writeln!(
                    out,
                    "  rank {} {verdict} {} ms into the workload (a live rank; confirmed removed \
                     by {:?}), {told}; {}",
                    g.rank,
                    g.at_ms,
                    g.confirmed_by,
                    exit_words(g.status)
                )?;
            }
            for p in pauses.iter() {
                let r = p.rank;
                let verdict = match (evicted_ranks.contains(&r), e.required.contains_key(&r)) {
                    (true, true) => "evicted, as required",
                    (false, true) => "NOT EVICTED (its eviction was required)",
                    (true, false) if e.may_go(r) => "evicted (allowed)",
                    (true, false) => "EVICTED (a false positive)",
                    (false, false) => "evicted by nobody",
                };
                writeln!(
                    out,
                    "  paused rank {r} with SIGSTOP {} ms into the workload for {} ms: {verdict}",
                    p.at_ms, p.for_ms
                )?;
            }
            for q in &ev.required {
                writeln!(
                    out,
                    "  rank {}: eviction required; {}, {}, {}",
                    q.rank,
                    q.evict_ms.map_or_else(
                        || "NOT confirmed removed at every survivor".into(),
                        |ms| format!(
                            "confirmed removed at every survivor {ms:.0} ms after its fault began \
                             (bound {EVICT_BOUND_MS} ms)"
                        )
                    ),
                    q.told_ms
                        .map_or_else(|| "NEVER told".into(), |at| format!("told at {at} ms")),
                    exit_words(q.status)
                )?;
            }
            for l in &outages.lines {
                writeln!(out, "{l}")?;
            }
            for (a, b) in &ev.both_ends {
                writeln!(out, "  BOTH ends of the cut {a}-{b} evicted")?;
            }
            for r in ev.resume.iter().filter(|r| o.detect && r.stop) {
                writeln!(
                    out,
                    "  {} ({} ms): every survivor delivered a later op {}",
                    r.flag,
                    r.at_ms,
                    r.ms.map_or_else(|| "NEVER".into(), |ms| format!("within {ms:.0} ms"))
                )?;
            }
            const SHOWN: usize = 20;
            for (at, by, p, why) in live_downs.iter().take(SHOWN) {
                writeln!(
                    out,
                    "  link down: rank {by} lost live rank {p} ({why}) {} ms into the workload",
                    into(*at)
                )?;
            }
            if live_downs.len() > SHOWN {
                writeln!(
                    out,
                    "  ... and {} more link downs",
                    live_downs.len() - SHOWN
                )?;
            }
            writeln!(
                out,
                "  xcast: {} ops started ({} refused for back-pressure, {attempted} attempted); \
                 {duplicates} duplicated, {partial} reached only some survivors, {lost} lost: {}",
                t.started.len(),
                t.refused_xcasts,
                if exactly_once {
                    "exactly once everywhere"
                } else {
                    "NOT exactly once"
                }
            )?;
            writeln!(
                out,
                "  survivors continued: {continued}/{} delivered ops started after the last fault",
                survivors.len()
            )?;
            for l in &revoke_lines {
                writeln!(out, "{l}")?;
            }
            writeln!(
                out,
                "  false positives: {} {:?}; refused connections: {refused}{}",
                false_pos.len(),
                false_pos,
                refused_by.as_ref().map_or_else(String::new, |by| {
                    let words = |m: &BTreeMap<&str, u64>| {
                        m.iter()
                            .map(|(k, n)| format!("{k} {n}"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    };
                    // Rank by rank where few refused (`--garbage` makes every node refuse:
                    // then only how many; `refused_at` in the JSON has them all).
                    let at: String = if refused_at.len() <= 4 {
                        refused_at
                            .iter()
                            .map(|(r, m)| format!("; at rank {r}: {}", words(m)))
                            .collect()
                    } else {
                        format!("; at {} ranks", refused_at.len())
                    };
                    format!(" (QUIC: {}{at})", words(by))
                })
            )?;
            writeln!(
                out,
                "  RELM: {} messages sent all-to-all ({} refused for back-pressure); {relm_delivered} \
                 delivered, {relm_dups} duplicated, {relm_lost} lost, {relm_failed} to killed ranks \
                 reported failed to their senders: {}",
                t.relm_started.len(),
                t.relm_refused,
                if relm_dups == 0 && relm_lost == 0 {
                    "exactly once, in order"
                } else {
                    "NOT exactly once"
                }
            )?;
            writeln!(out, "  start-up: {}", startup.text)?;
            if !o.joiners.is_empty() {
                let joined = &t.joined;
                writeln!(
                    out,
                    "  grow: {} of {} joiners admitted in {} view change(s) (ranks {:?}; join \
                     latency max {} ms); {after_last_join} ops started after the last join; \
                     RELM to joiners {relm_to_joiners}, from joiners {relm_from_joiners} \
                     delivered and acknowledged{}",
                    joined.len(),
                    o.joiners.len(),
                    grow.views,
                    joined.keys().collect::<Vec<_>>(),
                    joined
                        .values()
                        .map(|j| j.join_ms)
                        .reduce(f64::max)
                        .map_or("-".into(), |m| format!("{m:.1}")),
                    if t.join_failed.is_empty() {
                        String::new()
                    } else {
                        format!("; {} joiners FAILED", t.join_failed.len())
                    }
                )?;
            }
            for c in shrink.json.as_array().into_iter().flatten() {
                writeln!(
                    out,
                    "  shrink {} from rank {} at {} ms: {} completion(s) at epoch {} after {} ms; \
                     repair passes {}; {} failure verdict(s) for targets; targets {}: {}",
                    c["targets"],
                    c["requester"],
                    c["at_ms"],
                    c["completions"],
                    c["epoch"],
                    c["complete_ms"],
                    c["repair_passes"],
                    c["failure_verdicts"],
                    c["targets_exits"],
                    if c["ok"] == true { "ok" } else { "FAILED" }
                )?;
            }
            if !holes.is_empty() {
                writeln!(out, "  routes through holes (rank, neighbour): {holes:?}")?;
            }
            if o.settled.is_none() {
                writeln!(
                    out,
                    "  NOT SETTLED: ops still pending at the end of the settling time"
                )?;
            }
            if confirmed_twice > 0 {
                writeln!(
                    out,
                    "  {confirmed_twice} (rank, survivor) pairs confirmed more than once"
                )?;
            }
            writeln!(out, "{}", if pass { "PASS" } else { "FAIL" })
        })?;
    }
    if pass {
        Ok(())
    } else {
        Err(CliError::Failed("the cluster run failed its checks".into()))
    }
}

/// What the report says of start-up, and whether it went right.
struct Startup {
    ok: bool,
    json: Value,
    text: String,
}

/// Start-up from check-ins: every launched survivor printed exactly one `ready` (no rank of
/// the run fails to start, so `startup_incomplete` is a failure here), all at one epoch; how
/// many check-in notices (start-up view changes) a rank applied, and when each was ready.
fn startup(t: &Tally, survivors: &BTreeSet<u32>, nodes: u32, launch_wall: f64) -> Startup {
    let launched: Vec<u32> = survivors.iter().copied().filter(|&r| r < nodes).collect();
    let ready: Vec<u32> = launched
        .iter()
        .copied()
        .filter(|r| {
            t.startup_done
                .get(r)
                .is_some_and(|v| v.len() == 1 && v[0].2.is_empty())
        })
        .collect();
    let incomplete: BTreeSet<u32> = t
        .startup_done
        .values()
        .flatten()
        .flat_map(|(_, _, m)| m.iter().copied())
        .collect();
    let epochs: BTreeSet<u64> = t
        .startup_done
        .values()
        .flatten()
        .map(|(_, e, _)| *e)
        .collect();
    let views = t.checked_in.values().copied().max().unwrap_or(0);
    let ready_ms = t
        .startup_done
        .values()
        .flatten()
        .map(|(at, _, _)| at - launch_wall)
        .reduce(f64::max)
        .map(f64::round);
    let ok = ready.len() == launched.len() && incomplete.is_empty() && epochs.len() <= 1;
    let json = json!({
        "launched_survivors": launched.len(),
        "ready": ready.len(),
        "ready_epoch": epochs.iter().next(),
        "ready_epochs_distinct": epochs.len(),
        "never_joined": incomplete.iter().collect::<Vec<_>>(),
        "startup_view_changes": views,
        "ready_ms_max": ready_ms,
        "ok": ok,
    });
    let text = format!(
        "{} of {} launched survivors ready at epoch {:?} ({} check-in view change(s), last ready \
         {} ms after launch){}: {}",
        ready.len(),
        launched.len(),
        epochs.iter().collect::<Vec<_>>(),
        views,
        ready_ms.map_or("-".into(), |m| format!("{m}")),
        if incomplete.is_empty() {
            String::new()
        } else {
            format!(", never joined {incomplete:?}")
        },
        if ok { "ok" } else { "FAILED" }
    );
    Startup { ok, json, text }
}

/// The detector's counters summed over the ranks that printed `stats` (survivors at the end),
/// and how many of them found themselves in trouble (`health_raised`: an overloaded host's
/// timers ran late, or two observers suspected it): what a report needs to tell a slow
/// eviction on a saturated machine from a slow protocol.
fn detector_load(by_rank: &BTreeMap<u32, Value>) -> Value {
    const KEYS: [&str; 7] = [
        "suspicions",
        "refuted",
        "unresponsive",
        "self_freeze_skips",
        "self_refutations",
        "health_raised",
        "health_held",
    ];
    let mut v = serde_json::Map::new();
    for k in KEYS {
        let sum: u64 = by_rank.values().map(|d| d[k].as_u64().unwrap_or(0)).sum();
        v.insert(k.to_string(), json!(sum));
    }
    let troubled = by_rank
        .values()
        .filter(|d| d["health_raised"].as_u64().unwrap_or(0) > 0)
        .count();
    v.insert("ranks_reporting".into(), json!(by_rank.len()));
    v.insert("ranks_health_raised".into(), json!(troubled));
    Value::Object(v)
}

/// Per survivor, the longest wait between two of its consecutive deliveries of the workload's
/// ops (ms; the start and the end of the workload count as deliveries), so a survivor that
/// stalled a while and then caught up shows.
fn delivery_gaps(
    t: &Tally,
    survivors: &BTreeSet<u32>,
    start_wall: f64,
    work_ms: u64,
) -> BTreeMap<u32, f64> {
    let end = start_wall + work_ms as f64;
    survivors
        .iter()
        .map(|s| {
            let mut at: Vec<f64> = t
                .delivered_at
                .values()
                .filter_map(|m| m.get(s).copied())
                .filter(|x| *x <= end)
                .collect();
            at.push(start_wall.max(t.joined.get(s).map_or(start_wall, |j| j.t)));
            at.push(end);
            at.sort_by(f64::total_cmp);
            let gap = at.windows(2).map(|w| w[1] - w[0]).fold(0.0, f64::max);
            (*s, gap.round())
        })
        .collect()
}
