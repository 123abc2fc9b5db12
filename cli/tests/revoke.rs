//! The revoke flood with real processes: `lifeline node`'s stdin `revoke GROUP [EPOCH]` and
//! `lifeline cluster --revoke R@MS`.

use serde_json::{json, Value};

mod common;
#[path = "common/procs.rs"]
mod procs;

use procs::{lifeline, wait_for, Nodes};

/// Six nodes. Rank 1 revokes group 7 at epoch 3: it answers `revoke_started`, and every rank
/// (rank 1 included) prints `revoked` naming the group, the epoch and the origin, with
/// `now_ms`. Again is a no-op (no second `revoked` anywhere: the counters say one delivery
/// each); an older epoch and a bad command are answered `error`.
#[test]
fn node_revoke_reaches_every_rank_once() {
    let n = 6;
    let mut c = Nodes::start("revoke", n);
    c.stdin(1, "revoke 7 3");
    let started = wait_for(&mut c.outs[1], "revoke_started");
    assert_eq!(
        (&started["group"], &started["epoch"]),
        (&json!(7), &json!(3))
    );
    for (r, o) in c.outs.iter_mut().enumerate() {
        let v = wait_for(o, "revoked");
        assert_eq!(v["rank"], r, "{v}");
        assert_eq!(
            (&v["group"], &v["epoch"], &v["origin"]),
            (&json!(7), &json!(3), &json!(1)),
            "{v}"
        );
        assert!(v["now_ms"].as_f64().is_some(), "{v}");
        assert_eq!(v["hops"].as_u64() == Some(0), r == 1, "{v}");
    }
    c.stdin(1, "revoke 7 3");
    wait_for(&mut c.outs[1], "revoke_started");
    c.stdin(1, "revoke 7 2");
    let e = wait_for(&mut c.outs[1], "error");
    assert!(
        e["message"].as_str().unwrap().contains("already revoked"),
        "{e}"
    );
    c.stdin(2, "revoke seven");
    let e = wait_for(&mut c.outs[2], "error");
    assert!(e["message"].as_str().unwrap().contains("usage"), "{e}");
    // Without an epoch: the current view's.
    c.stdin(4, "revoke 8");
    let started = wait_for(&mut c.outs[4], "revoke_started");
    assert_eq!(started["group"], 8, "{started}");
    for o in c.outs.iter_mut() {
        let v = wait_for(o, "revoked");
        assert_eq!((&v["group"], &v["origin"]), (&json!(8), &json!(4)), "{v}");
    }
    for r in 0..n {
        c.stdin(r, "stats");
    }
    for o in c.outs.iter_mut() {
        let s = wait_for(o, "stats");
        assert_eq!(s["revoke"]["delivered"], 2, "{s}");
    }
}

/// A `--json` run's report, after checking it passed (exit status 0; its output on failure).
fn report(args: &[&str]) -> Value {
    let out = lifeline()
        .arg("cluster")
        .args(args)
        .arg("--json")
        .output()
        .expect("run lifeline cluster");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(stdout.lines().last().expect("a report")).expect("JSON")
}

/// 16 nodes: one revoke in quiet, and one at the instant two ranks are killed. Each reaches
/// every survivor exactly once (none missing), and the report gives every rank's latency.
#[test]
fn cluster_revokes_reach_every_survivor_despite_kills() {
    let r = report(&[
        "--nodes",
        "16",
        "--duration",
        "2.5",
        "--revoke",
        "5@500",
        "--revoke",
        "9@1500",
        "--kill",
        "3@1500",
        "--kill",
        "7@1500",
    ]);
    assert_eq!(r["pass"], true, "{r}");
    assert_eq!(r["survivors"], 14, "{r}");
    let revokes = r["revokes"].as_array().expect("revokes");
    assert_eq!(revokes.len(), 2, "{r}");
    for (v, (origin, reached_min)) in revokes.iter().zip([(5, 16), (9, 14)]) {
        assert_eq!(v["origin"], origin, "{v}");
        assert_eq!(v["ok"], true, "{v}");
        assert_eq!(v["missing_survivors"], json!([]), "{v}");
        assert_eq!(v["delivered_twice"], json!([]), "{v}");
        assert!(v["reached"].as_u64().unwrap() >= reached_min, "{v}");
        let max = v["latency_ms_max"].as_f64().expect("latency");
        assert!(max < 1000.0, "{v}");
        // The flood alone (from the origin's own delivery) is part of the whole latency.
        let flood = v["flood_ms_max"].as_f64().expect("flood time");
        let at_origin = v["origin_latency_ms"].as_f64().expect("origin latency");
        assert!((max - at_origin - flood).abs() < 0.01, "{v}");
        // Every rank that got it has its latency, the origin's included.
        let lat = v["latency_ms"].as_object().unwrap();
        assert_eq!(lat.len() as u64, v["reached"].as_u64().unwrap(), "{v}");
        assert!(lat.contains_key(&origin.to_string()), "{v}");
        assert!(lat.values().all(|l| l.as_f64().unwrap() >= 0.0), "{v}");
    }
}

/// A malformed `--revoke` is a usage error before anything starts.
#[test]
fn cluster_refuses_a_bad_revoke_flag() {
    for bad in ["5", "x@10", "16@10"] {
        let out = lifeline()
            .args(["cluster", "--nodes", "16", "--revoke", bad, "--json"])
            .output()
            .unwrap();
        assert!(!out.status.success(), "--revoke {bad} accepted");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("--revoke"), "{err}");
    }
}

/// `lifeline sim revoke`: fault-free at 1,024 ranks with no jitter the farthest rank is the
/// overlay's diameter (5 hops) away and the flood costs d + (m − 1)(d − 1) notices; with
/// faults, every seed passes; a trace takes one seed.
#[test]
fn sim_revoke_reports_the_overlay() {
    let out = lifeline()
        .args(["sim", "revoke", "--ranks", "1024", "--exact", "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (&v["degree"], &v["diameter"]),
        (&json!(19), &json!(5)),
        "{v}"
    );
    assert_eq!(
        (&v["hops_max"], &v["survivors"]),
        (&json!(5), &json!(1024)),
        "{v}"
    );
    assert_eq!(v["notices"], 19 + 1023 * 18, "{v}");
    let out = lifeline()
        .args([
            "sim", "revoke", "--ranks", "300", "--faults", "--seeds", "5", "--json",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 5);
    for v in &lines {
        assert_eq!(v["pass"], true, "{v}");
        let lost = ["removed", "undetected", "crashed_during"]
            .iter()
            .map(|k| v[*k].as_u64().unwrap())
            .sum::<u64>();
        assert_eq!(v["survivors"].as_u64().unwrap(), 300 - lost, "{v}");
    }
    let out = lifeline()
        .args(["sim", "revoke", "--seeds", "2", "--trace"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}
