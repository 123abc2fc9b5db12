//! Shrink campaigns with real processes: `lifeline node` reads `shrink R[,R...]` on stdin.

use std::io::{BufRead, BufReader, Lines, Write};
use std::process::{ChildStdout, Command, Stdio};

use serde_json::Value;

mod common;

fn lifeline() -> Command {
    Command::new(env!("CARGO_BIN_EXE_lifeline"))
}

/// Kills the child if a test fails midway.
struct Guard(std::process::Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The next line of `lines` whose event is `event` (panics at the end of the output).
fn wait_for(lines: &mut Lines<BufReader<ChildStdout>>, event: &str) -> Value {
    for l in lines {
        let v: Value = serde_json::from_str(&l.unwrap()).unwrap();
        if v["event"] == event {
            return v;
        }
    }
    panic!("no {event} line");
}

/// Five members (radix 2: 0 → 1,2; 1 → 3; 2 → 4... as the layout puts them). Rank 2 asks to
/// shrink ranks 3 and 4: it prints `campaign_started` then one `campaign_completed` naming
/// both; every survivor prints one `departed` with both and no `failure_confirmed`; each
/// target prints `left` and exits 0; a broadcast afterwards reaches the survivors. A bad
/// request is answered `error`.
#[test]
fn node_shrinks_two_ranks_and_they_exit_cleanly() {
    let dir = std::env::temp_dir().join(format!("lifeline-shrink-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let n = 5;
    let ports = common::free_ports(n);
    let peers = dir.join("peers");
    let book: String = (0..n)
        .map(|r| format!("{r} 127.0.0.1:{}\n", ports[r]))
        .collect();
    std::fs::write(&peers, book).unwrap();
    let key = dir.join("key");
    std::fs::write(&key, b"shrink test secret").unwrap();
    let p = peers.to_str().unwrap();
    let mut nodes: Vec<Guard> = (0..n)
        .map(|r| {
            let mut c = lifeline();
            c.args(["node", "--radix", "2", "--exit-on-stdin-eof", "--key-file"])
                .arg(&key)
                .args(["--rank", &r.to_string(), "--peers", p])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped());
            Guard(c.spawn().unwrap())
        })
        .collect();
    let mut outs: Vec<_> = nodes
        .iter_mut()
        .map(|g| BufReader::new(g.0.stdout.take().unwrap()).lines())
        .collect();
    for o in outs.iter_mut() {
        wait_for(o, "ready");
    }
    let stdin = |nodes: &mut Vec<Guard>, r: usize, line: &str| {
        writeln!(nodes[r].0.stdin.as_mut().unwrap(), "{line}").unwrap();
    };
    stdin(&mut nodes, 2, "shrink 2");
    let e = wait_for(&mut outs[2], "error");
    assert!(e["message"].as_str().unwrap().contains("itself"), "{e}");
    stdin(&mut nodes, 2, "shrink 3,4");
    let started = wait_for(&mut outs[2], "campaign_started");
    assert_eq!(started["targets"], serde_json::json!([3, 4]), "{started}");
    // The requester applies the departure view, then reports the completion.
    let departed = wait_for(&mut outs[2], "departed");
    assert_eq!(departed["ranks"], serde_json::json!([3, 4]), "{departed}");
    let done = wait_for(&mut outs[2], "campaign_completed");
    assert_eq!(done["id"], started["id"], "{done}");
    assert_eq!(done["removed"], serde_json::json!([3, 4]), "{done}");
    for t in [3, 4] {
        let left = wait_for(&mut outs[t], "left");
        assert!(left["epoch"].as_u64().is_some(), "{left}");
        let status = nodes[t].0.wait().unwrap();
        assert_eq!(status.code(), Some(0), "target {t}");
    }
    for r in [0, 1] {
        // The departure view, before anything else names the targets.
        let mut seen = Vec::new();
        for l in outs[r].by_ref() {
            let v: Value = serde_json::from_str(&l.unwrap()).unwrap();
            assert_ne!(v["event"], "failure_confirmed", "rank {r}: {v}");
            if v["event"] == "departed" {
                seen.push(v);
                break;
            }
        }
        assert_eq!(seen[0]["ranks"], serde_json::json!([3, 4]), "rank {r}");
        assert_eq!(seen[0]["members"], 3, "rank {r}");
    }
    stdin(&mut nodes, 1, "xcast 16 after the shrink");
    for r in [0, 2] {
        let v = wait_for(&mut outs[r], "xcast_delivered");
        assert_eq!(v["payload"], "after the shrink", "rank {r}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
