//! A `lifeline node` whose stdout nobody reads for a while (a slow supervisor, a busy
//! launcher's I/O forwarding) must not freeze: its lines go through a bounded queue to a
//! writer thread (`cli/src/node_out.rs`), its event loop and heartbeats go on.
//!
//! Three nodes on loopback (radix 2: 0-{1,2}); rank 2's stdout is left unread for at least
//! 10 s while rank 0 starts 4,000 xcasts (over 64 KiB of lines: a pipe's buffer fills after a
//! few hundred). Nobody is removed, and once rank 2's stdout is read it has delivered every
//! xcast exactly once. Before the queue, rank 2 blocked writing, stopped heartbeating and was
//! removed about 1 s in. Also: `quit` and SIGTERM end a node with a last `stopped` line.
#![cfg(target_os = "linux")]

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::time::{Duration, Instant};

use serde_json::Value;

mod common;

const XCASTS: usize = 4000;
const STALL: Duration = Duration::from_secs(10);

/// One `lifeline node`; killed on drop.
struct Node(Child);

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start(rank: u32, peers: &Path, key: &Path) -> Node {
    Node(
        Command::new(env!("CARGO_BIN_EXE_lifeline"))
            .args(["node", "--rank", &rank.to_string(), "--radix", "2"])
            .arg("--peers")
            .arg(peers)
            .arg("--key-file")
            .arg(key)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn lifeline node"),
    )
}

/// Reads `child`'s stdout on a thread of its own into `tx`, tagged with `rank`.
fn read_lines(child: &mut Child, rank: u32, tx: Sender<(u32, Value)>) {
    let out = child.stdout.take().expect("stdout");
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            let v = serde_json::from_str(&line).expect("a JSON line");
            if tx.send((rank, v)).is_err() {
                break;
            }
        }
    });
}

fn send(stdin: &mut ChildStdin, line: &str) {
    writeln!(stdin, "{line}").expect("write a command");
}

/// Lines seen so far, by rank.
#[derive(Default)]
struct Seen {
    lines: BTreeMap<u32, Vec<Value>>,
}

impl Seen {
    /// Takes one line (waiting up to `within`); a copy of it, or `None` on the timeout.
    fn take(&mut self, rx: &Receiver<(u32, Value)>, within: Duration) -> Option<(u32, Value)> {
        let (r, v) = rx.recv_timeout(within).ok()?;
        self.lines.entry(r).or_default().push(v.clone());
        Some((r, v))
    }

    fn last(&self, rank: u32) -> Option<&Value> {
        self.lines.get(&rank).and_then(|l| l.last())
    }

    fn events<'a>(&'a self, rank: u32, event: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
        self.lines
            .get(&rank)
            .into_iter()
            .flatten()
            .filter(move |v| v["event"] == event)
    }

    /// payload -> times `rank` delivered it.
    fn delivered(&self, rank: u32) -> BTreeMap<String, usize> {
        let mut n = BTreeMap::new();
        for v in self.events(rank, "xcast_delivered") {
            *n.entry(v["payload"].as_str().unwrap().to_string())
                .or_default() += 1;
        }
        n
    }

    /// Any removal anywhere: a confirmed failure, an eviction, a slot lost.
    fn removals(&self) -> Vec<&Value> {
        self.lines
            .values()
            .flatten()
            .filter(|v| {
                v["event"] == "failure_confirmed"
                    || v["event"] == "evicted"
                    || (v["event"] == "view_changed" && v["slot"].is_null())
            })
            .collect()
    }

    fn dump(&self, rank: u32) -> String {
        let l = self.lines.get(&rank).map_or(&[][..], Vec::as_slice);
        let tail = &l[l.len().saturating_sub(20)..];
        tail.iter()
            .map(Value::to_string)
            .collect::<Vec<_>>()
            .join("\n")
    }
}

fn temp_dir() -> PathBuf {
    let d = std::env::temp_dir().join(format!("lifeline-stdout-stall-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn a_node_whose_stdout_is_unread_for_10s_is_not_removed_and_loses_nothing() {
    let dir = temp_dir();
    let ports = common::free_ports(3);
    let peers = dir.join("peers");
    let book: String = (0..3)
        .map(|r| format!("{r} 127.0.0.1:{}\n", ports[r]))
        .collect();
    std::fs::write(&peers, book).unwrap();
    let key = dir.join("key");
    std::fs::write(&key, b"stdout stall test secret").unwrap();

    let mut nodes: Vec<Node> = (0..3).map(|r| start(r, &peers, &key)).collect();
    let (tx, rx) = channel();
    read_lines(&mut nodes[0].0, 0, tx.clone());
    read_lines(&mut nodes[1].0, 1, tx.clone());
    // Rank 2's stdout: not read until the stall is over.
    let mut stdin0 = nodes[0].0.stdin.take().unwrap();
    let mut seen = Seen::default();
    let ready = Instant::now() + Duration::from_secs(20);
    while seen.events(0, "link_up").count() < 2 {
        let left = ready.saturating_duration_since(Instant::now());
        assert!(seen.take(&rx, left).is_some(), "links never came up");
    }

    // 4,000 xcasts from rank 0; those refused (flow control) are sent again.
    let stall_from = Instant::now();
    let deadline = stall_from + Duration::from_secs(90);
    let mut started: BTreeSet<String> = BTreeSet::new();
    let mut asked = 0;
    let mut answered = 0;
    let mut retry: Vec<String> = Vec::new();
    let mut next = 0;
    while started.len() < XCASTS {
        assert!(
            Instant::now() < deadline,
            "only {} xcasts started",
            started.len()
        );
        // At most 200 commands unanswered at a time.
        while asked - answered < 200 && (next < XCASTS || !retry.is_empty()) {
            let payload = retry.pop().unwrap_or_else(|| {
                next += 1;
                format!("m{}", next - 1)
            });
            send(&mut stdin0, &format!("xcast 16 {payload}"));
            asked += 1;
        }
        let Some((0, v)) = seen.take(&rx, Duration::from_secs(5)) else {
            continue;
        };
        match v["event"].as_str() {
            Some("xcast_started") => {
                answered += 1;
                started.insert(v["payload"].as_str().unwrap().to_string());
            }
            Some("error") => {
                answered += 1;
                let cmd = v["command"].as_str().unwrap();
                retry.push(cmd.trim_start_matches("xcast 16 ").to_string());
                std::thread::sleep(Duration::from_millis(5));
            }
            _ => {}
        }
    }
    // Ranks 0 and 1 deliver all of them while rank 2's stdout stays unread, for 10 s at least.
    let all = Instant::now() + Duration::from_secs(90);
    while seen.delivered(0).len() < XCASTS || seen.delivered(1).len() < XCASTS {
        assert!(
            seen.take(&rx, all.saturating_duration_since(Instant::now()))
                .is_some(),
            "ranks 0 and 1 did not deliver all {XCASTS}: {} and {}",
            seen.delivered(0).len(),
            seen.delivered(1).len()
        );
    }
    while stall_from.elapsed() < STALL {
        seen.take(&rx, STALL.saturating_sub(stall_from.elapsed()));
    }
    let stalled_for = stall_from.elapsed();
    assert!(
        seen.removals().is_empty(),
        "a removal while rank 2's stdout was unread: {:?}\nrank 0:\n{}",
        seen.removals(),
        seen.dump(0)
    );

    // Now rank 2's stdout is read: every xcast, exactly once.
    read_lines(&mut nodes[2].0, 2, tx.clone());
    let drained = Instant::now() + Duration::from_secs(60);
    while seen.delivered(2).len() < XCASTS {
        assert!(
            seen.take(&rx, drained.saturating_duration_since(Instant::now()))
                .is_some(),
            "rank 2 has {} of {XCASTS} after its stdout was read again:\n{}",
            seen.delivered(2).len(),
            seen.dump(2)
        );
    }
    for r in 0..3 {
        let d = seen.delivered(r);
        assert_eq!(d.len(), XCASTS, "rank {r}");
        assert!(d.values().all(|&n| n == 1), "rank {r} delivered some twice");
        assert!(
            d.keys().all(|p| started.contains(p)),
            "rank {r} delivered an xcast never started"
        );
    }
    assert!(seen.removals().is_empty(), "{:?}", seen.removals());
    // Rank 2's `stats` counts the lines that waited for room in its stdout queue.
    let mut stdin2 = nodes[2].0.stdin.take().unwrap();
    send(&mut stdin2, "stats");
    let asked_at = Instant::now() + Duration::from_secs(20);
    let stats = loop {
        let left = asked_at.saturating_duration_since(Instant::now());
        match seen.take(&rx, left) {
            Some((2, v)) if v["event"] == "stats" => break v,
            Some(_) => {}
            None => panic!("no stats from rank 2:\n{}", seen.dump(2)),
        }
    };
    assert!(stats["stdout"]["queue_waits"].is_u64(), "{stats}");
    eprintln!(
        "rank 2's stdout unread for {stalled_for:?}; {XCASTS} xcasts exactly once everywhere; \
         stdout queue waits: {}",
        stats["stdout"]["queue_waits"]
    );

    // `quit` (rank 0) and SIGTERM (rank 2) end a node with a last `stopped` line, status 0.
    send(&mut stdin0, "quit");
    let sent = Command::new("kill")
        .args(["-TERM", &nodes[2].0.id().to_string()])
        .status()
        .expect("kill -TERM");
    assert!(sent.success());
    for r in [0, 2] {
        let st = nodes[r].0.wait().unwrap();
        assert!(st.success(), "rank {r}: {st:?}");
    }
    let end = Instant::now() + Duration::from_secs(10);
    while [0, 2]
        .iter()
        .any(|r| seen.last(*r).is_none_or(|v| v["event"] != "stopped"))
    {
        let left = end.saturating_duration_since(Instant::now());
        if seen.take(&rx, left).is_none() {
            break;
        }
    }
    for (r, reason) in [(0, "quit"), (2, "sigterm")] {
        let last = seen.last(r).unwrap();
        assert_eq!(last["event"], "stopped", "rank {r}: {last}");
        assert_eq!(last["reason"], reason, "rank {r}: {last}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
