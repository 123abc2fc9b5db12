//! Network faults in real `lifeline cluster` runs: real processes, real nftables rules
//! (`--cut`, `--cut-oneway`, `--blackhole`, `--loss`), with the heartbeat detector off
//! (`--no-detect`: TCP's link timeout is the only failure detector). The same faults with the
//! detector on (the default) are in `detector_faults.rs`.
//!
//! These need the `nft` binary (Debian's nftables) and root; otherwise each is skipped with one
//! loud line, or fails under `LIFELINE_REQUIRE_NFT=1` (set by `.ci/run`, which installs
//! nftables; see `common`). They run one at a time (a 6-node
//! cluster each, on loopback).
//!
//! The cluster: 6 ranks, radix 2, so the tree is 0-{1,2}, 1-{3,5}, 2-{4}; nodes give a silent
//! peer up after `--link-timeout-ms 1000`.
//!
//! What today's core does with a live rank whose tree link stays cut past the link timeout is
//! a known gap (issue "Membership I"): the TCP link timeout presumes it dead, the root confirms
//! it, and it is never told (it keeps running, evicted and unaware). Those runs fail their
//! checks today; the tests below assert only what holds (the faults are applied and removed,
//! the link timeout reports the link down, the run ends, nothing is duplicated, the table is
//! gone), not the verdict.
#![cfg(target_os = "linux")]

use std::path::PathBuf;
use std::process::Command;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::Value;

mod common;

/// One cluster at a time: the machine may have two cores.
static SERIAL: Mutex<()> = Mutex::new(());

/// The `nft` binary, found by `can_run`.
fn nft() -> PathBuf {
    common::find("nft").expect("nft (checked by can_run)")
}

/// Whether these tests can run: root and `nft` (see `common`).
fn can_run(test: &str) -> bool {
    common::tool(test, common::NFT).is_some()
}

struct Run {
    report: Value,
    nodes: Vec<Value>,
    ok: bool,
    took: Duration,
}

/// Runs `lifeline cluster` on 6 nodes with `faults` and a 1 s link timeout; its report and
/// how long it took.
fn cluster(faults: &[&str]) -> Run {
    cluster_with(faults, 1000)
}

/// [`cluster`] with a link timeout of `link_timeout_ms`.
fn cluster_with(faults: &[&str], link_timeout_ms: u64) -> Run {
    let t0 = Instant::now();
    let timeout = link_timeout_ms.to_string();
    let out = Command::new(env!("CARGO_BIN_EXE_lifeline"))
        .args(["cluster", "--nodes", "6", "--radix", "2", "--duration", "2"])
        .args(["--link-timeout-ms", &timeout, "--no-detect", "--json"])
        .args(faults)
        .output()
        .expect("run lifeline cluster");
    let took = t0.elapsed();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON line"))
        .collect();
    assert_eq!(
        lines.len(),
        2,
        "{faults:?}: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run = Run {
        nodes: lines[0]["nodes"].as_array().unwrap().clone(),
        report: lines[1].clone(),
        ok: out.status.success(),
        took,
    };
    eprintln!(
        "{faults:?}: {:.1} s, pass {}: {}",
        took.as_secs_f64(),
        run.ok,
        run.report
    );
    run
}

/// What every run must show: it ended (bounded: the 2 s workload, the last fault, then at
/// most link timeout + 10 s of settling), the report's verdict is the exit status, every fault
/// went in no earlier than asked and stayed at least its duration, its table is gone, and no
/// node outlived the launcher.
fn common(run: &Run, windows: &[(u64, u64)]) {
    let r = &run.report;
    assert!(run.took < Duration::from_secs(40), "took {:?}", run.took);
    assert_eq!(r["pass"] == true, run.ok, "{r}");
    let faults = r["net_faults"].as_array().unwrap();
    assert_eq!(faults.len(), windows.len(), "{r}");
    for (f, (at, dur)) in faults.iter().zip(windows) {
        let (a, b) = (
            f["at_ms"].as_u64().unwrap(),
            f["removed_ms"].as_u64().unwrap(),
        );
        assert!(a >= *at && a < at + 1000, "{f}");
        assert!(b >= a + dur && b < a + dur + 1000, "{f}");
        assert!(f["rules"].as_u64().unwrap() >= 2, "{f}");
    }
    let table = r["nft_table"].as_str().expect("a table was used");
    assert!(table.starts_with("lifeline_"), "{r}");
    let tables = tables();
    assert!(
        !tables
            .lines()
            .any(|l| l.trim() == format!("table inet {table}")),
        "{table} outlived the run: {tables}"
    );
    for n in &run.nodes {
        let pid = n["pid"].as_u64().unwrap();
        assert!(!alive(pid), "node pid {pid} outlived the cluster");
    }
}

/// Whether process `pid` runs (a zombie, state Z, has exited).
fn alive(pid: u64) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|s| !s.rsplit(')').next().unwrap_or("").trim().starts_with('Z'))
}

/// A passing run: nothing lost, nothing duplicated, nobody suspected or evicted.
fn clean(r: &Value) {
    assert_eq!(r["pass"], true, "{r}");
    assert_eq!(r["xcast_delivered_exactly_once"], true, "{r}");
    assert_eq!(r["xcast_duplicated"], 0, "{r}");
    assert_eq!(r["xcast_lost"], 0, "{r}");
    assert_eq!(r["relm_lost"], 0, "{r}");
    assert_eq!(r["relm_duplicates"], 0, "{r}");
    assert_eq!(r["false_positives"], 0, "{r}");
    assert_eq!(r["survivors"], 6, "{r}");
    assert_eq!(r["deaths"], serde_json::json!([]), "{r}");
    assert_eq!(r["evicted"], serde_json::json!([]), "{r}");
    assert!(r["xcast_ops"].as_u64().unwrap() >= 90, "{r}");
}

/// The link downs `rank` reported for `peer` during the run.
fn downs(r: &Value, rank: u64, peer: u64) -> Vec<&Value> {
    r["link_downs_live"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["rank"] == rank && d["peer"] == peer)
        .collect()
}

fn dropped(r: &Value, i: usize) -> u64 {
    r["net_faults"][i]["dropped_packets"].as_u64().unwrap()
}

/// Ranks 3 and 4 are not tree neighbours: cutting them both ways for longer than the link
/// timeout disturbs nobody, as does a one-way cut of the tree link 1 -> 3 shorter than it (TCP
/// retransmits once it ends).
#[test]
fn cut_of_a_non_tree_pair_and_a_short_oneway_cut() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !can_run("cut_of_a_non_tree_pair_and_a_short_oneway_cut") {
        return;
    }
    let run = cluster(&["--cut", "3-4@300+1500", "--cut-oneway", "1-3@400+500"]);
    common(&run, &[(300, 1500), (400, 500)]);
    clean(&run.report);
    // The one-way cut of a busy tree link did drop packets (its counters).
    assert!(dropped(&run.report, 1) > 0, "{}", run.report);
    assert_eq!(run.report["link_downs_live"], serde_json::json!([]));
}

/// The tree link 1-3 cut both ways past the link timeout: both ends see it time out.
#[test]
fn cut_of_a_tree_link() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !can_run("cut_of_a_tree_link") {
        return;
    }
    let run = cluster(&["--cut", "1-3@300+2000"]);
    common(&run, &[(300, 2000)]);
    let r = &run.report;
    assert!(dropped(r, 0) > 0, "{r}");
    // The TCP link timeout (1 s here, plus a keepalive probe) ends the link at both ends,
    // while the cut is still in place.
    for (a, b) in [(1, 3), (3, 1)] {
        let d = downs(r, a, b);
        assert!(
            d.iter()
                .any(|d| d["reason"] == "io: timed out" && d["at_ms"].as_i64().unwrap() > 1000),
            "{a} lost {b}: {r}"
        );
    }
    assert_eq!(r["relm_duplicates"], 0, "{r}");
    assert_eq!(r["xcast_duplicated"], 0, "{r}");
    assert_eq!(r["deaths"], serde_json::json!([]), "{r}");
    // Gap (issue "Membership I"): with the detector off, the cut presumes a live rank dead
    // (rank 1 or 3 is confirmed dead and never told), so the run fails today: not asserted.
}

/// Rank 4 (a leaf under 2) blackholed for less than the link timeout: nothing is lost; past
/// it: the link timeout reports the tree link 2-4 down at both ends.
#[test]
fn blackhole() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !can_run("blackhole") {
        return;
    }
    let run = cluster(&["--blackhole", "4@300+500"]);
    common(&run, &[(300, 500)]);
    clean(&run.report);
    assert!(dropped(&run.report, 0) > 0, "{}", run.report);
    assert_eq!(run.report["link_downs_live"], serde_json::json!([]));

    let run = cluster(&["--blackhole", "4@300+1500"]);
    common(&run, &[(300, 1500)]);
    let r = &run.report;
    assert!(dropped(r, 0) > 0, "{r}");
    for (a, b) in [(2, 4), (4, 2)] {
        let d = downs(r, a, b);
        assert!(
            d.iter()
                .any(|d| d["reason"] == "io: timed out" && d["at_ms"].as_i64().unwrap() > 1000),
            "{a} lost {b}: {r}"
        );
    }
    assert_eq!(r["relm_duplicates"], 0, "{r}");
    assert_eq!(r["xcast_duplicated"], 0, "{r}");
    assert_eq!(r["deaths"], serde_json::json!([]), "{r}");
    // Gap (issue "Membership I"): rank 4 is confirmed dead while alive and never told (with
    // the detector off nothing fences it), so the run fails today: not asserted.
}

/// 30 % of rank 1's packets (an inner rank: parent of 3 and 5) dropped for a second: TCP
/// retransmits and nothing is lost. The link timeout is 3 s here, not 1 s: a segment lost three
/// times running (retransmitted after 200, 400 and 800 ms, the first try inside the window) is
/// unacknowledged for up to 1.4 s, and `TCP_USER_TIMEOUT` would rightly abort a 1 s link (CI saw
/// it once: rank 1-2 timed out at 1,530 ms). The window can hold no longer chain, so 3 s leaves
/// a margin for RTOs above 200 ms.
#[test]
fn loss() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !can_run("loss") {
        return;
    }
    let run = cluster_with(&["--loss", "1:30@300+1000"], 3000);
    common(&run, &[(300, 1000)]);
    clean(&run.report);
    assert!(dropped(&run.report, 0) > 0, "{}", run.report);
}

fn tables() -> String {
    let out = Command::new(nft())
        .args(["list", "tables"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// SIGTERM (and Ctrl-C, the same path) in the middle of a fault deletes the run's table,
/// with the rule still in it, and stops every node.
#[test]
fn sigterm_deletes_the_table() {
    use std::io::{BufRead, BufReader};
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !can_run("sigterm_deletes_the_table") {
        return;
    }
    let mut child = Command::new(env!("CARGO_BIN_EXE_lifeline"))
        .args(["cluster", "--nodes", "3", "--duration", "60", "--json"])
        .args(["--blackhole", "2@0+60000"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("run lifeline cluster");
    let table = format!("table inet lifeline_{}", child.id());
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .expect("nodes line");
    let v: Value = serde_json::from_str(&first).expect("nodes line");
    let pids: Vec<u64> = v["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["pid"].as_u64().unwrap())
        .collect();
    // The workload (and the blackhole) starts after the nodes' 1.5 s start-up grace.
    let end = Instant::now() + Duration::from_secs(10);
    let rule = loop {
        let out = Command::new(nft())
            .args(["list", "table", "inet", &table["table inet ".len()..]])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        if text.contains("drop") || Instant::now() > end {
            break text;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(rule.contains("drop"), "the blackhole never went in: {rule}");
    let sent = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill -TERM");
    assert!(sent.success());
    let end = Instant::now() + Duration::from_secs(15);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > end {
            let _ = child.kill();
            panic!("cluster did not stop on SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        !tables().lines().any(|l| l.trim() == table),
        "{table} outlived SIGTERM"
    );
    let end = Instant::now() + Duration::from_secs(5);
    while pids.iter().any(|p| alive(*p)) {
        assert!(Instant::now() < end, "nodes outlived the cluster: {pids:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}
