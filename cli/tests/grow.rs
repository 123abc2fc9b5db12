//! Joins with real processes: `lifeline node --join` by hand, and `lifeline cluster --grow`.

use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::Value;

mod common;
#[path = "common/procs.rs"]
mod procs;

use procs::{lifeline, wait_for, Guard};

/// Two members from a peers file; a third process joins through both (the first address
/// listed is not listening: it tries the next). It prints `joined` (rank 2, the admitting
/// epoch, its join id, latency and tries) then `listening` with the grown span; the members
/// print `admitted`; an xcast from the joiner reaches a member, a RELM message from a member
/// reaches the joiner. `--join` over QUIC is a usage error; a join nobody answers ends with
/// `join_failed` and status 1.
#[test]
fn node_joins_by_hand() {
    let dir = std::env::temp_dir().join(format!("lifeline-join-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ports = common::free_ports(3);
    let peers = dir.join("peers");
    std::fs::write(
        &peers,
        format!("0 127.0.0.1:{}\n1 127.0.0.1:{}\n", ports[0], ports[1]),
    )
    .unwrap();
    let key = dir.join("key");
    std::fs::write(&key, b"join test secret").unwrap();
    let node = |extra: &[&str]| {
        let mut c = lifeline();
        c.args(["node", "--radix", "2", "--exit-on-stdin-eof", "--key-file"])
            .arg(&key)
            .args(extra)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped());
        Guard(c.spawn().unwrap())
    };
    let p = peers.to_str().unwrap();
    let mut n0 = node(&["--rank", "0", "--peers", p]);
    let mut n1 = node(&["--rank", "1", "--peers", p]);
    let mut out0 = BufReader::new(n0.0.stdout.take().unwrap()).lines();
    let mut out1 = BufReader::new(n1.0.stdout.take().unwrap()).lines();
    wait_for(&mut out1, "link_up");
    let contacts = format!("127.0.0.1:{},127.0.0.1:{}", ports[2], ports[1]);
    let mut j = node(&["--join", &contacts]);
    let mut outj = BufReader::new(j.0.stdout.take().unwrap()).lines();
    let joined = wait_for(&mut outj, "joined");
    assert_eq!(joined["rank"], 2, "{joined}");
    assert!(joined["epoch"].as_u64().unwrap() >= 1, "{joined}");
    assert!(
        joined["join_id"].as_str().unwrap().contains('.'),
        "{joined}"
    );
    assert!(joined["join_ms"].as_f64().unwrap() > 0.0, "{joined}");
    assert!(joined["tries"].as_u64().unwrap() >= 1, "{joined}");
    let listening = wait_for(&mut outj, "listening");
    assert_eq!(listening["span"], 3, "{listening}");
    let admitted = wait_for(&mut out0, "admitted");
    assert_eq!(admitted["ranks"], serde_json::json!([2]), "{admitted}");
    assert_eq!(admitted["members"], 3, "{admitted}");
    assert_eq!(admitted["epoch"], joined["epoch"], "{admitted}");
    wait_for(&mut outj, "link_up");
    writeln!(j.0.stdin.as_mut().unwrap(), "xcast 16 from the joiner").unwrap();
    let v = wait_for(&mut out0, "xcast_delivered");
    assert_eq!(
        (v["origin"].as_u64(), v["payload"].as_str()),
        (Some(2), Some("from the joiner"))
    );
    writeln!(n1.0.stdin.as_mut().unwrap(), "relm 2 16 to the joiner").unwrap();
    let v = wait_for(&mut outj, "relm_delivered");
    assert_eq!(
        (v["src"].as_u64(), v["payload"].as_str()),
        (Some(1), Some("to the joiner"))
    );
    wait_for(&mut out1, "relm_acked");

    // QUIC has no join path: a usage error (status 2) saying why.
    let out = lifeline()
        .args(["node", "--join", &contacts, "--transport", "quic"])
        .args(["--cert-dir", "/nonexistent", "--cluster", "x"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("TCP only"),
        "{out:?}"
    );
    // Nobody answers: `join_failed`, status 1.
    let out = lifeline()
        .args(["node", "--join", &format!("127.0.0.1:{}", ports[2])])
        .args(["--join-timeout-ms", "300", "--key-file"])
        .arg(&key)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let last: Value = serde_json::from_str(
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .last()
            .expect("a line"),
    )
    .unwrap();
    assert_eq!(last["event"], "join_failed", "{last}");
    assert_eq!(last["rank"], Value::Null, "{last}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `lifeline cluster --grow`: 8 members, one killed, 4 processes join 1 s into the workload
/// through 3 members each. Every joiner is admitted with a distinct rank past the span (in at
/// most 2 view changes), the report lists each join and the views that admitted them, and the
/// joiners take part in the checks: ops started after their joins reach them exactly once,
/// RELM messages to and from them are delivered and acknowledged, nobody is evicted.
#[test]
fn cluster_grows_by_four_joiners() {
    let t0 = Instant::now();
    let out = lifeline()
        .args([
            "cluster",
            "--nodes",
            "8",
            "--grow",
            "4@1000",
            "--duration",
            "3",
        ])
        .args(["--kill", "6@500", "--json"])
        .output()
        .expect("run lifeline cluster");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    assert_eq!(r["pass"], true, "{r}");
    assert_eq!(r["joiners_started"], 4, "{r}");
    assert_eq!(r["joins_admitted"], 4, "{r}");
    assert!(r["join_view_changes"].as_u64().unwrap() <= 2, "{r}");
    let joins = r["joins"].as_array().unwrap();
    let mut ranks: Vec<u64> = joins.iter().map(|j| j["rank"].as_u64().unwrap()).collect();
    ranks.sort_unstable();
    assert_eq!(ranks, vec![8, 9, 10, 11], "{r}");
    for j in joins {
        assert!(j["join_ms"].as_f64().unwrap() > 0.0, "{j}");
        assert!(j["epoch"].as_u64().unwrap() >= 1, "{j}");
        assert!(j["join_id"].as_str().unwrap().contains('.'), "{j}");
    }
    let views = r["join_views"].as_array().unwrap();
    let admitted: Vec<u64> = views
        .iter()
        .flat_map(|v| {
            v["ranks"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_u64().unwrap())
        })
        .collect();
    assert_eq!(admitted.len(), 4, "{r}");
    assert_eq!(r["join_failures"], serde_json::json!([]), "{r}");
    assert_eq!(r["survivors"], 11, "{r}");
    assert_eq!(r["xcast_delivered_exactly_once"], true, "{r}");
    assert!(r["xcast_ops_after_last_join"].as_u64().unwrap() > 20, "{r}");
    assert!(r["relm_to_joiners"].as_u64().unwrap() > 0, "{r}");
    assert!(r["relm_from_joiners"].as_u64().unwrap() > 0, "{r}");
    assert_eq!(r["relm_lost"], 0, "{r}");
    assert_eq!(r["false_positives"], 0, "{r}");
    assert_eq!(r["evicted"], serde_json::json!([]), "{r}");
    assert!(t0.elapsed() < Duration::from_secs(60));
}

/// #21: a launched rank that starts after a joiner was promoted to be its parent gets in.
/// Peers file of 6 ranks (radix 2: 2 → 4), rank 4 not started; a joiner takes rank 6 (a child
/// of 2); rank 2 is killed, so the joiner takes 2's slot and is 4's parent. When 4 starts, the
/// joiner's dials carry its span and listening port (TCP handshake version 2): rank 4's book
/// holds only the peers file's 6 ranks, and it learns rank 6 from the authenticated HELLO
/// instead of refusing it; the core then reads the joiner's adoption notice from past its span
/// and catches up (`Node::dispatch_from_past_span`). Before the fix rank 4 refused the joiner
/// (`handshakes_refused`), the joiner gave it up, and 4 was removed 12 s after its start (or
/// within 0.1 s when started right after the promotion, as here).
#[test]
fn a_late_rank_under_a_promoted_joiner_gets_in() {
    let dir = std::env::temp_dir().join(format!("lifeline-late-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let n = 6;
    let ports = common::free_ports(n);
    let peers = dir.join("peers");
    let book: String = (0..n)
        .map(|r| format!("{r} 127.0.0.1:{}\n", ports[r]))
        .collect();
    std::fs::write(&peers, book).unwrap();
    let key = dir.join("key");
    std::fs::write(&key, b"late test secret").unwrap();
    let node = |extra: &[&str]| {
        let mut c = lifeline();
        c.args(["node", "--radix", "2", "--exit-on-stdin-eof", "--key-file"])
            .arg(&key)
            .args(["--startup-timeout-ms", "60000"])
            .args(extra)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped());
        Guard(c.spawn().unwrap())
    };
    let p = peers.to_str().unwrap();
    let mut nodes: Vec<Guard> = [0, 1, 2, 3, 5]
        .iter()
        .map(|r| node(&["--rank", &r.to_string(), "--peers", p]))
        .collect();
    let mut out0 = BufReader::new(nodes[0].0.stdout.take().unwrap()).lines();
    wait_for(&mut out0, "checked_in");
    let mut j = node(&["--join", &format!("127.0.0.1:{}", ports[0])]);
    let mut outj = BufReader::new(j.0.stdout.take().unwrap()).lines();
    assert_eq!(wait_for(&mut outj, "joined")["rank"], 6);
    let _ = nodes[2].0.kill();
    let promoted = wait_for(&mut outj, "view_changed");
    assert_eq!(promoted["slot"], 2, "{promoted}");
    let mut late = node(&["--rank", "4", "--peers", p]);
    let mut out4 = BufReader::new(late.0.stdout.take().unwrap()).lines();
    // Within 10 s the late rank is in a view under the joiner, and nobody removes it.
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut parent = None;
    for l in out4.by_ref() {
        let v: Value = serde_json::from_str(&l.unwrap()).unwrap();
        assert_ne!(v["event"], "evicted", "the late rank was removed: {v}");
        if v["event"] == "view_changed" && v["parent"] == 6 {
            parent = Some(v);
            break;
        }
        assert!(Instant::now() < deadline, "no view under the joiner");
    }
    assert!(parent.is_some());
    // Past the corroboration and gray timeouts: rank 4 is still in, under the joiner, which
    // it learned from the handshake; the joiner has it as a child.
    std::thread::sleep(Duration::from_secs(5));
    writeln!(late.0.stdin.as_mut().unwrap(), "stats").unwrap();
    let stats = loop {
        let l = out4.next().expect("rank 4 prints its stats").unwrap();
        let v: Value = serde_json::from_str(&l).unwrap();
        assert_ne!(v["event"], "evicted", "the late rank was removed: {v}");
        if v["event"] == "stats" {
            break v;
        }
    };
    assert_eq!(stats["view"]["parent"], 6, "{stats}");
    assert!(
        stats["transport"]["peers_learned"].as_u64().unwrap() >= 1,
        "{stats}"
    );
    writeln!(j.0.stdin.as_mut().unwrap(), "stats").unwrap();
    let js = wait_for(&mut outj, "stats");
    assert!(
        js["view"]["children"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c == 4),
        "{js}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
