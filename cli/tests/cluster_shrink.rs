//! `lifeline cluster --shrink`: PRRTE's shrink validation runs (seed 000, issue #22) on real
//! processes, 10 nodes, radix 2, each a few seconds.
//!
//! Layout: the issue quotes PRRTE's radix-2 tree `0 → 1,2; 1 → 3,4; 2 → 5,6; 3 → 7,8`, but
//! Lifeline's layout (`core/src/tree/layout.rs`, PRRTE's strided arithmetic) at span 10 radix 2
//! is `0 → 1,2; 1 → 3,5; 2 → 4,6; 3 → 7; 4 → 8; 5 → 9` (`lifeline tree --ranks 10 --radix 2`).
//! So the literal `3,7,8` is not one branch here (7 hangs under 3, 8 under 4); `2,4,6,8`
//! is the whole subtree under rank 2, a true single-branch multi-daemon shrink. Both run.
//!
//! Every test asserts on the report's fields, not only `pass`. The runs are serialised (one
//! cluster at a time): ten nodes per run on a couple of busy cores is load enough.

use std::process::Command;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::Value;

mod common;

/// One cluster at a time.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Runs `lifeline cluster --nodes 10 --radix 2 --json` with `extra`; returns the report (the
/// last line) and whether the command succeeded.
fn cluster(extra: &[&str]) -> (Value, bool) {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let t0 = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_lifeline"))
        .args(["cluster", "--nodes", "10", "--radix", "2", "--json"])
        .args(extra)
        .output()
        .expect("run lifeline cluster");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let last = stdout
        .lines()
        .last()
        .unwrap_or_else(|| panic!("no report: {}", String::from_utf8_lossy(&out.stderr)));
    let r: Value = serde_json::from_str(last).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    assert!(
        t0.elapsed() < Duration::from_secs(60),
        "{extra:?} took {:?}",
        t0.elapsed()
    );
    (r, out.status.success())
}

fn nums(v: &Value) -> Vec<u64> {
    v.as_array()
        .unwrap_or_else(|| panic!("not an array: {v}"))
        .iter()
        .map(|x| x.as_u64().unwrap())
        .collect()
}

/// Campaign `c` of the report completed cleanly: started, one completion naming exactly
/// `targets`, one repair pass at every survivor (`survivors` of them), no failure verdict for a
/// target, one departure view every survivor agrees on, every target printed `left` and exited 0.
fn clean_campaign(r: &Value, c: &Value, targets: &[u64], survivors: usize) {
    assert_eq!(nums(&c["targets"]), targets, "{c}");
    assert_eq!(c["campaign_started"], true, "{c}");
    assert_eq!(c["completions"], 1, "{c}");
    let mut removed = nums(&c["removed"]);
    removed.sort_unstable();
    let mut want = targets.to_vec();
    want.sort_unstable();
    assert_eq!(removed, want, "{c}");
    assert!(c["epoch"].as_u64().unwrap() >= 1, "{c}");
    assert!(c["complete_ms"].as_f64().unwrap() > 0.0, "{c}");
    assert_eq!(c["failed"], serde_json::json!([]), "{c}");
    let passes = c["repair_passes"].as_object().unwrap();
    assert_eq!(passes.len(), survivors, "a pass count per survivor: {c}");
    for (rank, n) in passes {
        assert_eq!(n, 1, "rank {rank}'s repair passes: {c}");
    }
    assert_eq!(c["failure_verdicts"], 0, "{c}");
    assert_eq!(nums(&c["departed_epochs"]).len(), 1, "{c}");
    assert_eq!(c["survivors_agree"], true, "{c}");
    for t in c["targets_exits"].as_array().unwrap() {
        assert_eq!(t["status"], 0, "{t} in {r}");
        assert_eq!(t["left"], true, "{t}");
        assert_eq!(t["crashed"], false, "{t}");
    }
    assert_eq!(c["ok"], true, "{c}");
}

/// The workload went on across the shrink among the survivors: every xcast and RELM message
/// between survivors exactly once, every survivor delivered ops started after the last
/// completion, nobody was evicted or suspected falsely, no route goes through a hole.
fn workload_held(r: &Value, survivors: u64) {
    assert_eq!(r["survivors"], survivors, "{r}");
    assert_eq!(r["xcast_delivered_exactly_once"], true, "{r}");
    assert_eq!(r["xcast_duplicated"], 0, "{r}");
    assert_eq!(r["xcast_lost"], 0, "{r}");
    assert_eq!(r["xcast_partial"], 0, "{r}");
    assert_eq!(r["relm_duplicates"], 0, "{r}");
    assert_eq!(r["relm_lost"], 0, "{r}");
    assert_eq!(r["survivors_continued"], survivors, "{r}");
    assert_eq!(r["false_positives"], 0, "{r}");
    assert_eq!(r["evicted"], serde_json::json!([]), "{r}");
    assert_eq!(r["routes_via_holes"], serde_json::json!([]), "{r}");
    assert_eq!(r["shrink_errors"], serde_json::json!([]), "{r}");
    assert!(r["settled_ms"].as_u64().is_some(), "{r}");
    assert!(r["delivery_gap_ms_max"].as_f64().is_some(), "{r}");
}

/// Single branch, the literal command: `--shrink 3,7,8@2000` (here 3 and 7 are one
/// branch under rank 1, 8 a leaf under rank 4).
#[test]
fn single_branch_3_7_8() {
    let (r, ok) = cluster(&["--shrink", "3,7,8@2000", "--duration", "3"]);
    let cs = r["campaigns"].as_array().unwrap();
    assert_eq!(cs.len(), 1, "{r}");
    clean_campaign(&r, &cs[0], &[3, 7, 8], 7);
    workload_held(&r, 7);
    assert!(r["xcast_ops"].as_u64().unwrap() > 100, "{r}");
    assert_eq!(r["pass"], true, "{r}");
    assert!(ok);
}

/// Single branch, Lifeline's layout: `--shrink 2,4,6,8@2000` removes rank 2's whole subtree
/// (an interior daemon and everything under it).
#[test]
fn single_branch_2_4_6_8() {
    let (r, ok) = cluster(&["--shrink", "2,4,6,8@2000", "--duration", "3"]);
    let cs = r["campaigns"].as_array().unwrap();
    assert_eq!(cs.len(), 1, "{r}");
    clean_campaign(&r, &cs[0], &[2, 4, 6, 8], 6);
    workload_held(&r, 6);
    assert_eq!(r["pass"], true, "{r}");
    assert!(ok);
}

/// Multi-branch: `--shrink 4,6@2000` (both under rank 2; 8, 4's child, survives and is
/// re-parented: its new parent's adoption removes 4 and 6 in its one repair pass).
#[test]
fn multi_branch_4_6() {
    let (r, ok) = cluster(&["--shrink", "4,6@2000", "--duration", "3"]);
    let cs = r["campaigns"].as_array().unwrap();
    assert_eq!(cs.len(), 1, "{r}");
    clean_campaign(&r, &cs[0], &[4, 6], 8);
    workload_held(&r, 8);
    assert_eq!(r["pass"], true, "{r}");
    assert!(ok);
}

/// Crash during shrink, two ways. The literal `--shrink 4,6@2000 --kill 6@2010`: on
/// loopback a campaign completes in a few ms, so here the SIGKILL usually finds 6 already left
/// (exit 0): one completion, the survivors agree, and 6 counts as crashed only if the kill came
/// before its `left`. Then `--kill 6@2000`, sent right after the request in the same tick (the
/// launcher asks for shrinks before it injects the faults due with them): 6 dies while the
/// campaign runs. One completion; the survivors agree on one departure view; 4 leaves cleanly
/// with no failure verdict; 6 is a crashed target that every survivor removed (its `deaths`
/// entry has a repair time; whether by the departure notice or a failure notice is the
/// report's `failure_verdicts_crashed`).
#[test]
fn crash_during_shrink() {
    for kill in ["6@2010", "6@2000"] {
        let (r, ok) = cluster(&[
            "--shrink",
            "4,6@2000",
            "--kill",
            kill,
            "--rate",
            "200",
            "--duration",
            "3",
        ]);
        let c = &r["campaigns"][0];
        assert_eq!(c["completions"], 1, "{kill}: {r}");
        assert_eq!(c["survivors_agree"], true, "{kill}: {r}");
        assert_eq!(c["failure_verdicts"], 0, "{kill}: {r}");
        let exits = c["targets_exits"].as_array().unwrap();
        assert_eq!(exits[0]["rank"], 4, "{r}");
        assert_eq!(exits[0]["left"], true, "{r}");
        assert_eq!(exits[0]["status"], 0, "{r}");
        assert_eq!(exits[1]["killed"], true, "{r}");
        if kill == "6@2000" {
            assert_eq!(nums(&c["crashed"]), [6], "{r}");
        }
        for (rank, n) in c["repair_passes"].as_object().unwrap() {
            let n = n.as_u64().unwrap();
            assert!((1..=2).contains(&n), "{kill}: rank {rank}: {n} passes: {c}");
        }
        let deaths = r["deaths"].as_array().unwrap();
        assert_eq!(deaths.len(), 1, "{r}");
        assert_eq!(deaths[0]["rank"], 6, "{r}");
        assert!(deaths[0]["repair_ms"].as_f64().is_some(), "{kill}: {r}");
        workload_held(&r, 8);
        assert_eq!(r["pass"], true, "{kill}: {r}");
        assert!(ok);
    }
}

/// Load across a shrink: a burst of 45 xcasts and 45 RELM messages in the tick of the request
/// (`--burst 45@2000`), on top of the workload at 100 a second: at least 40 of each are in
/// flight across the campaign (started before its completion, delivered after its request:
/// `xcasts_across` / `relm_across`), and every one between survivors is delivered exactly once.
#[test]
fn load_across_a_shrink() {
    let (r, ok) = cluster(&[
        "--shrink",
        "2,4,6,8@2000",
        "--burst",
        "45@2000",
        "--rate",
        "100",
        "--duration",
        "3",
    ]);
    let c = &r["campaigns"][0];
    clean_campaign(&r, c, &[2, 4, 6, 8], 6);
    assert!(c["xcasts_across"].as_u64().unwrap() >= 40, "{c}");
    assert!(c["relm_across"].as_u64().unwrap() >= 40, "{c}");
    workload_held(&r, 6);
    assert_eq!(r["pass"], true, "{r}");
    assert!(ok);
}

/// Re-grow after the single-branch shrink: `--shrink 2,4,6,8@2000 --grow 3@5000`. The joiners
/// get fresh ranks (10, 11, 12: past the span, not the holes 2, 4, 6, 8), every survivor's
/// final tree view (parent and children) avoids the holes, xcasts reach the joiners.
#[test]
fn regrow_after_shrink() {
    let (r, ok) = cluster(&["--shrink", "2,4,6,8@2000", "--grow", "3@5000"]);
    let c = &r["campaigns"][0];
    clean_campaign(&r, c, &[2, 4, 6, 8], 6);
    let mut ranks: Vec<u64> = r["joins"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["rank"].as_u64().unwrap())
        .collect();
    ranks.sort_unstable();
    assert_eq!(ranks, [10, 11, 12], "{r}");
    let views = r["views"].as_object().unwrap();
    assert_eq!(views.len(), 9, "every survivor's view: {r}");
    for (rank, v) in views {
        let near: Vec<u64> = v["parent"]
            .as_u64()
            .into_iter()
            .chain(nums(&v["children"]))
            .collect();
        for h in [2, 4, 6, 8] {
            assert!(
                !near.contains(&h),
                "rank {rank} routes through hole {h}: {v}"
            );
        }
    }
    assert!(r["xcast_ops_after_last_join"].as_u64().unwrap() > 20, "{r}");
    assert!(r["relm_to_joiners"].as_u64().unwrap() > 0, "{r}");
    workload_held(&r, 9);
    assert_eq!(r["pass"], true, "{r}");
    assert!(ok);
}

/// Two campaigns at once from two ranks: `--shrink 3,7@2000 --shrink 6@2000` are asked of
/// ranks 1 and 2; each completes exactly once at its requester.
#[test]
fn two_campaigns_at_once() {
    let (r, ok) = cluster(&[
        "--shrink",
        "3,7@2000",
        "--shrink",
        "6@2000",
        "--duration",
        "3",
    ]);
    let cs = r["campaigns"].as_array().unwrap();
    assert_eq!(cs.len(), 2, "{r}");
    assert_eq!(cs[0]["requester"], 1, "{r}");
    assert_eq!(cs[1]["requester"], 2, "{r}");
    assert_ne!(cs[0]["id"], cs[1]["id"], "{r}");
    clean_campaign(&r, &cs[0], &[3, 7], 7);
    clean_campaign(&r, &cs[1], &[6], 7);
    workload_held(&r, 7);
    assert_eq!(r["pass"], true, "{r}");
    assert!(ok);
}

/// A planned hand-over: campaigns naming rank 0, the coordinator. `--shrink 0@2000` (asked of
/// rank 1), `0,3@2000` (the coordinator and a leaf under the next root) and `0@2000/0` (the
/// coordinator asks for its own departure and is told of the completion before it leaves): one
/// completion, no failure verdict, one repair pass and one departure view at every survivor,
/// rank 0 prints `left` and exits 0, and the workload's xcasts started after the completion
/// reach every survivor (the next root numbers them).
#[test]
fn coordinator_hand_over() {
    for (shrink, targets, survivors) in [
        ("0@2000", &[0u64][..], 9u64),
        ("0,3@2000", &[0, 3][..], 8),
        ("0@2000/0", &[0][..], 9),
    ] {
        let (r, ok) = cluster(&["--shrink", shrink, "--duration", "3"]);
        let cs = r["campaigns"].as_array().unwrap();
        assert_eq!(cs.len(), 1, "{shrink}: {r}");
        clean_campaign(&r, &cs[0], targets, survivors as usize);
        // `survivors_continued`: every survivor delivered an op started after the completion.
        workload_held(&r, survivors);
        assert_eq!(r["pass"], true, "{shrink}: {r}");
        assert!(ok, "{shrink}");
    }
}
