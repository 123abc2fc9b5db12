//! Gray links routed around, in real processes (issue #23 item 2, "Done when"): 16 nodes,
//! radix 8, the tree link 1–9 cut one way (`--cut-oneway 1-9`) or both ways (`--cut 1-9`)
//! for 12 s from 1 s, the detector on and every setting at its default (TCP's link timeout
//! 3 s). The core notices the silent tree link after `membership.gray_after` (500 ms) and both
//! its ends relay through a third rank, so nobody is removed, nothing is lost or duplicated,
//! rank 9's longest delivery gap (the report's `delivery_gap_ms`) is within 1.5 s, and the
//! report's cut checks pass (`outages[0].ok`, enforced in `pass`).
//!
//! These need nftables (root and `nft`); otherwise each is skipped with one loud line, or
//! fails under `LIFELINE_REQUIRE_NFT=1` (see `common`).
#![cfg(target_os = "linux")]

use std::process::Command;
use std::sync::Mutex;
use std::time::Instant;

use serde_json::{json, Value};

mod common;

/// One cluster at a time: the machine may have two cores.
static SERIAL: Mutex<()> = Mutex::new(());

/// Runs 16 nodes, radix 8, for 15 s with `args`; the report (the last JSON line).
fn cluster(args: &[&str]) -> Value {
    let t0 = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_lifeline"))
        .args(["cluster", "--nodes", "16", "--radix", "8"])
        .args(["--duration", "15", "--json"])
        .args(args)
        .output()
        .expect("run lifeline cluster");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let r: Value =
        serde_json::from_str(stdout.lines().last().unwrap_or("null")).unwrap_or_else(|e| {
            panic!(
                "{args:?}: {e}: {stdout}\n{}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
    eprintln!(
        "{args:?}: {:.1} s, exit {:?}: {r}",
        t0.elapsed().as_secs_f64(),
        out.status.code()
    );
    r
}

/// Nobody removed or evicted, every op and message delivered exactly once, and rank 9's
/// longest gap under `max_gap_ms`; returns that gap.
fn relayed(r: &Value, max_gap_ms: f64) -> f64 {
    assert_eq!(r["evicted"], json!([]), "{r}");
    assert_eq!(r["deaths"], json!([]), "{r}");
    assert_eq!(r["survivors"], 16, "{r}");
    assert_eq!(r["xcast_delivered_exactly_once"], true, "{r}");
    assert_eq!(r["xcast_lost"], 0, "{r}");
    assert_eq!(r["xcast_duplicated"], 0, "{r}");
    assert_eq!(r["relm_lost"], 0, "{r}");
    assert_eq!(r["relm_duplicates"], 0, "{r}");
    assert_eq!(r["outages"][0]["ok"], true, "{r}");
    assert_eq!(r["outages"][0]["checks"]["enforced"], true, "{r}");
    assert_eq!(r["pass"], true, "{r}");
    let gap = r["delivery_gap_ms"]["9"]
        .as_f64()
        .unwrap_or_else(|| panic!("no gap for rank 9: {r}"));
    assert!(gap <= max_gap_ms, "rank 9 waited {gap} ms: {r}");
    gap
}

#[test]
fn a_one_way_cut_tree_link_is_relayed_around() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if common::tool("a_one_way_cut_tree_link_is_relayed_around", common::NFT).is_none() {
        return;
    }
    let r = cluster(&["--cut-oneway", "1-9@1000+12000"]);
    let gap = relayed(&r, 1_500.0);
    eprintln!("--cut-oneway 1-9: rank 9's longest gap {gap} ms");
}

#[test]
fn a_two_way_cut_tree_link_is_relayed_around() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if common::tool("a_two_way_cut_tree_link_is_relayed_around", common::NFT).is_none() {
        return;
    }
    let r = cluster(&["--cut", "1-9@1000+12000"]);
    let gap = relayed(&r, 1_500.0);
    eprintln!("--cut 1-9: rank 9's longest gap {gap} ms");
}
