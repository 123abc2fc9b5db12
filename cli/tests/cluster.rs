//! End-to-end tests of `lifeline node` and `lifeline cluster`: real processes on loopback.
//! (Network faults, which need nftables and root, are in `faults.rs`.)

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

mod common;
#[path = "common/procs.rs"]
mod procs;

use procs::{lifeline, Guard};

/// A `--json` run's lines, after checking it passed (exit status 0; its output on failure).
fn passed(out: &std::process::Output) -> Vec<Value> {
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON line"))
        .collect()
}

fn pid_alive(pid: u64) -> bool {
    // A zombie (state Z) has exited; anything else is still running.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| {
            s.rsplit(')')
                .next()
                .is_some_and(|rest| !rest.trim_start().starts_with('Z'))
        })
        .unwrap_or(false)
}

/// Without the heartbeat detector (`--no-detect`), TCP's link timeout is the only failure
/// detector: a 0.5 s pause goes unnoticed and evicts nobody. (With the detector, a 0.5 s
/// pause is between its quiet and loud times: either outcome is correct; see
/// `detector_faults.rs`.)
#[test]
fn cluster_survives_a_kill_a_pause_and_intruders() {
    let out = lifeline()
        .args([
            "cluster",
            "--nodes",
            "5",
            "--radix",
            "2",
            "--duration",
            "1.5",
        ])
        .args([
            "--kill",
            "1@300",
            "--stop",
            "3@200+500",
            "--garbage",
            "--no-detect",
            "--json",
        ])
        .output()
        .expect("run lifeline cluster");
    let lines = passed(&out);
    assert_eq!(lines.len(), 2, "{lines:?}");
    let nodes = lines[0]["nodes"].as_array().expect("nodes");
    assert_eq!(nodes.len(), 5);
    // Each rank on its own loopback address (Linux).
    assert!(nodes[3]["addr"].as_str().unwrap().starts_with("127.0.1.4:"));
    let r = &lines[1];
    assert_eq!(r["detect"], false, "{r}");
    assert_eq!(r["killed"], serde_json::json!([1]));
    assert_eq!(r["survivors"], 4);
    assert_eq!(r["survivors_continued"], 4);
    assert_eq!(r["xcast_delivered_exactly_once"], true);
    assert_eq!(r["false_positives"], 0, "a 0.5 s pause evicts nobody: {r}");
    assert_eq!(r["stopped"][0]["rank"], 3);
    // Garbage and a wrong-key handshake at each of the 4 survivors, all refused.
    assert!(r["refused_connections"].as_u64().unwrap() >= 8, "{r}");
    assert!(r["stopped"][0]["for_ms"].as_u64().unwrap() >= 500, "{r}");
    assert!(r["xcast_ops"].as_u64().unwrap() > 20, "{r}");
    // Every exit attributed: the kill is a death, nobody was evicted.
    assert_eq!(r["deaths"][0]["rank"], 1, "{r}");
    assert_eq!(r["deaths"][0]["cause"], "killed", "{r}");
    assert_eq!(r["deaths"][0]["signal"], "SIGKILL", "{r}");
    assert_eq!(r["evicted"], serde_json::json!([]), "{r}");
    assert_eq!(r["nft_table"], Value::Null, "{r}");
    let detect = r["detect_ms_max"].as_f64().expect("detected");
    assert!(detect < 1000.0, "{r}");
    // All-to-all RELM alongside the xcasts: every message between survivors exactly once.
    assert!(r["relm_sent"].as_u64().unwrap() > 20, "{r}");
    assert_eq!(r["relm_lost"], 0, "{r}");
    assert_eq!(r["relm_duplicates"], 0, "{r}");
    assert!(r["relm_delivered"].as_u64().unwrap() >= r["relm_sent"].as_u64().unwrap() - 5);
    for n in nodes {
        let pid = n["pid"].as_u64().unwrap();
        assert!(!pid_alive(pid), "node pid {pid} outlived the cluster");
    }
}

/// With the heartbeat detector on, a close is not evidence by itself: the re-dial it triggers
/// is refused (the process is gone), and that hard evidence repairs at once, as without the
/// detector. A 150 ms pause is shorter than the detector's timeout: nobody is evicted.
/// (`--detect` is the default, still accepted.)
#[test]
fn cluster_with_the_detector_confirms_a_kill_on_hard_evidence() {
    let out = lifeline()
        .args([
            "cluster",
            "--nodes",
            "6",
            "--radix",
            "2",
            "--duration",
            "1.5",
        ])
        .args([
            "--kill",
            "1@300",
            "--stop",
            "3@200+150",
            "--detect",
            "--json",
        ])
        .output()
        .expect("run lifeline cluster");
    let r = passed(&out).pop().expect("a report");
    assert_eq!(r["detect"], true, "{r}");
    assert_eq!(r["killed"], serde_json::json!([1]), "{r}");
    assert_eq!(r["survivors"], 5, "{r}");
    assert_eq!(r["false_positives"], 0, "{r}");
    assert_eq!(r["evicted"], serde_json::json!([]), "{r}");
    assert_eq!(r["xcast_delivered_exactly_once"], true, "{r}");
    // Hard evidence, not the detector's timeout (which alone would take about 400 ms).
    let repair = r["repair_ms_max"].as_f64().expect("repaired");
    assert!(repair < 100.0, "repaired everywhere after {repair} ms: {r}");
}

#[test]
fn cluster_cleans_up_on_ctrl_c() {
    let child = lifeline()
        .args(["cluster", "--nodes", "3", "--duration", "60", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("run lifeline cluster");
    let mut g = Guard(child);
    let mut first = String::new();
    BufReader::new(g.0.stdout.take().unwrap())
        .read_line(&mut first)
        .expect("first line");
    let v: Value = serde_json::from_str(&first).expect("nodes line");
    let pids: Vec<u64> = v["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["pid"].as_u64().unwrap())
        .collect();
    assert_eq!(pids.len(), 3);
    assert!(pids.iter().all(|p| pid_alive(*p)));
    let sent = Command::new("kill")
        .args(["-INT", &g.0.id().to_string()])
        .status()
        .expect("kill -INT");
    assert!(sent.success());
    let end = Instant::now() + Duration::from_secs(15);
    while g.0.try_wait().unwrap().is_none() {
        assert!(Instant::now() < end, "cluster did not stop on SIGINT");
        std::thread::sleep(Duration::from_millis(20));
    }
    let end = Instant::now() + Duration::from_secs(5);
    while pids.iter().any(|p| pid_alive(*p)) {
        assert!(Instant::now() < end, "nodes outlived the cluster: {pids:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn node_takes_commands_and_refuses_bad_input() {
    let dir = std::env::temp_dir().join(format!("lifeline-node-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ports = common::free_ports(2);
    let peers = dir.join("peers");
    std::fs::write(
        &peers,
        format!(
            "# test\n0 127.0.0.1:{}\n1 127.0.0.1:{}\n",
            ports[0], ports[1]
        ),
    )
    .unwrap();
    let key = dir.join("key");
    std::fs::write(&key, b"node test secret").unwrap();

    // Usage errors exit 2.
    let out = lifeline()
        .args(["node", "--rank", "5", "--peers"])
        .arg(&peers)
        .arg("--key-file")
        .arg(&key)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let out = lifeline()
        .args(["node", "--rank", "0", "--peers"])
        .arg(&peers)
        .env_remove("LIFELINE_CLUSTER_KEY")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");

    let start = |r: &str| {
        Guard(
            lifeline()
                .args([
                    "node",
                    "--rank",
                    r,
                    "--radix",
                    "2",
                    "--exit-on-stdin-eof",
                    "--peers",
                ])
                .arg(&peers)
                .arg("--key-file")
                .arg(&key)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .unwrap(),
        )
    };
    let mut n0 = start("0");
    let mut n1 = start("1");
    let mut out1 = BufReader::new(n1.0.stdout.take().unwrap()).lines();
    let mut out0 = BufReader::new(n0.0.stdout.take().unwrap()).lines();
    let wait_for = |lines: &mut dyn Iterator<Item = std::io::Result<String>>, event: &str| {
        for l in lines {
            let v: Value = serde_json::from_str(&l.unwrap()).unwrap();
            if v["event"] == event {
                return v;
            }
        }
        panic!("no {event} line");
    };
    wait_for(&mut out1, "link_up");
    writeln!(n1.0.stdin.as_mut().unwrap(), "xcast 16 hello there").unwrap();
    let v = wait_for(&mut out0, "xcast_delivered");
    assert_eq!(v["payload"], "hello there");
    assert_eq!(v["origin"], 1);
    assert_eq!(v["rank"], 0);
    writeln!(n1.0.stdin.as_mut().unwrap(), "stats").unwrap();
    let v = wait_for(&mut out1, "stats");
    assert_eq!(v["transport"]["link_ups"], 1);
    // Closing stdin stops the node.
    drop(n1.0.stdin.take());
    let end = Instant::now() + Duration::from_secs(10);
    while n1.0.try_wait().unwrap().is_none() {
        assert!(Instant::now() < end, "node did not stop on stdin EOF");
        std::thread::sleep(Duration::from_millis(20));
    }
    // Its neighbour sees the link go down.
    let v = wait_for(&mut out0, "link_down");
    assert_eq!(v["peer"], 1);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A rank killed by someone else than the launcher (an outside tester's SIGKILL) is attributed
/// as a death by itself, with its signal; it is no false positive and the survivors go on. It
/// is timed like the launcher's own kills, from the exit the launcher observed: rank 1 is
/// interior (radix 2: 0-{1,2}, 1-{3}), and `detect_ms_max` and `repair_ms_max` are numbers.
#[test]
fn cluster_attributes_an_outside_kill() {
    let child = lifeline()
        .args([
            "cluster",
            "--nodes",
            "4",
            "--radix",
            "2",
            "--duration",
            "2.5",
        ])
        .arg("--json")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("run lifeline cluster");
    let mut g = Guard(child);
    let mut lines = BufReader::new(g.0.stdout.take().unwrap()).lines();
    let first: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    let pid = first["nodes"][1]["pid"].as_u64().unwrap();
    // The workload starts 1.5 s after the nodes (their start-up grace); kill halfway through.
    std::thread::sleep(Duration::from_millis(2500));
    let sent = Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()
        .expect("kill -KILL");
    assert!(sent.success());
    let last = lines.last().expect("report").unwrap();
    let r: Value = serde_json::from_str(&last).unwrap();
    assert_eq!(r["killed"], serde_json::json!([]), "{r}");
    let deaths = r["deaths"].as_array().unwrap();
    assert_eq!(deaths.len(), 1, "{r}");
    assert_eq!(deaths[0]["rank"], 1, "{r}");
    assert_eq!(deaths[0]["cause"], "exited", "{r}");
    assert_eq!(deaths[0]["signal"], "SIGKILL", "{r}");
    assert_eq!(deaths[0]["timed_from"], "exit_observed", "{r}");
    let (detect, repair) = (&deaths[0]["detect_ms"], &deaths[0]["repair_ms"]);
    assert!(detect.is_f64() && repair.is_f64(), "{r}");
    assert_eq!(r["detect_ms_max"], *detect, "{r}");
    assert_eq!(r["repair_ms_max"], *repair, "{r}");
    // The survivors confirm a SIGKILL (a refused re-dial) in milliseconds.
    assert!(repair.as_f64().unwrap() < 1000.0, "{r}");
    assert_eq!(r["evicted"], serde_json::json!([]), "{r}");
    assert_eq!(r["false_positives"], 0, "{r}");
    assert_eq!(r["survivors"], 3, "{r}");
    assert_eq!(r["survivors_continued"], 3, "{r}");
    assert_eq!(r["xcast_delivered_exactly_once"], true, "{r}");
    assert_eq!(r["relm_lost"], 0, "{r}");
    assert_eq!(r["relm_duplicates"], 0, "{r}");
    assert_eq!(r["pass"], true, "{r}");
    assert!(g.0.wait().unwrap().success(), "{r}");
}

/// Malformed fault flags are usage errors (exit 2), and network faults without nftables fail
/// before any node starts.
#[test]
fn cluster_refuses_bad_fault_flags() {
    for bad in [
        ["--cut", "1-1@0+10"],
        ["--cut", "1-3@0+10"],
        ["--cut", "1@0+10"],
        ["--cut-oneway", "0-1@10"],
        ["--blackhole", "1@x+10"],
        ["--loss", "1:0@0+10"],
        ["--loss", "1:101@0+10"],
        ["--loss", "1@0+10"],
        ["--blackhole", "1@0+forever"],
        ["--loss", "1:5@0+forever"],
        ["--cut", "1-2@0+never"],
    ] {
        let out = lifeline()
            .args(["cluster", "--nodes", "3"])
            .args(bad)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{bad:?}: {err}");
        assert!(
            err.contains(bad[0]) && err.contains(bad[1]),
            "{bad:?}: {err}"
        );
    }
    let out = lifeline()
        .args(["cluster", "--nodes", "3", "--blackhole", "1@0+10", "--json"])
        .env("LIFELINE_NFT", "/nonexistent/nft")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("nftables"), "{err}");
    assert!(out.stdout.is_empty(), "no node may start: {out:?}");
}

/// The same launcher on QUIC: the cluster CA and one certificate per rank are generated into
/// the run's directory, each node proves its rank with its certificate, and a SIGKILLed rank
/// is noticed and repaired around while every xcast between survivors is delivered once.
#[test]
fn cluster_on_quic_survives_a_kill() {
    let out = lifeline()
        .args(["cluster", "--nodes", "4", "--duration", "2"])
        .args(["--transport", "quic", "--kill", "1", "--json"])
        .output()
        .expect("run lifeline cluster");
    let lines = passed(&out);
    assert_eq!(lines.len(), 2, "{lines:?}");
    let r = &lines[1];
    assert_eq!(r["transport"], "quic", "{r}");
    assert_eq!(r["pass"], true, "{r}");
    assert_eq!(r["killed"], serde_json::json!([1]), "{r}");
    assert_eq!(r["survivors"], 3, "{r}");
    assert_eq!(r["survivors_continued"], 3, "{r}");
    assert_eq!(r["xcast_delivered_exactly_once"], true, "{r}");
    assert_eq!(r["false_positives"], 0, "{r}");
    assert!(
        r["repair_ms_max"].as_f64().is_some(),
        "the kill was repaired: {r}"
    );
    // Network faults on QUIC (their rules match UDP) need root: see
    // `quic_blackhole_evicts_the_rank_and_tells_it_on_heal` in `detector_faults.rs`.
}

#[test]
fn cluster_on_quic_refuses_intruders() {
    let out = lifeline()
        .args(["cluster", "--nodes", "4", "--duration", "2"])
        .args(["--transport", "quic", "--kill", "1", "--garbage", "--json"])
        .output()
        .expect("run lifeline cluster");
    let r = passed(&out).pop().expect("a report");
    assert_eq!(r["transport"], "quic", "{r}");
    assert_eq!(r["pass"], true, "{r}");
    assert_eq!(r["survivors_continued"], 3, "{r}");
    assert_eq!(r["xcast_delivered_exactly_once"], true, "{r}");
    assert_eq!(r["false_positives"], 0, "{r}");
    // Three refused clients at each of the three survivors.
    let refused = r["refused_connections"]
        .as_u64()
        .expect("refused_connections");
    assert!(refused >= 9, "{r}");
}
