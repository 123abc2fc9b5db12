//! `lifeline node --bootstrap env` under Open MPI's real `mpirun` (Debian's `openmpi-bin`),
//! started exactly as README.md documents it, with the cluster key in the environment and
//! nothing unset:
//!
//! ```text
//! mpirun --allow-run-as-root --oversubscribe --enable-recovery -np 8 \
//!   lifeline node --bootstrap env --rendezvous 127.0.0.1:PORT
//! ```
//!
//! Open MPI 4.1 sets `OMPI_COMM_WORLD_RANK/SIZE` and also `PMIX_RANK` without a PMIx size: the
//! complete Open MPI entry must win. The 8 ranks form one cluster, an xcast (sent on rank 0's
//! stdin, which `mpirun` forwards) reaches all 8 exactly once, a SIGKILL of rank 5 is confirmed
//! by the 7 others (`--enable-recovery` keeps `mpirun` from killing the job), and a later xcast
//! reaches the 7 exactly once.
//!
//! Needs `mpirun`: otherwise skipped with one loud line, or a failure under
//! `LIFELINE_REQUIRE_MPIRUN=1` (set by `.ci/run`, which installs openmpi-bin; see `common`).
#![cfg(target_os = "linux")]

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::{Duration, Instant};

use serde_json::Value;

mod common;

const NP: u64 = 8;
const KILLED: u64 = 5;

/// `mpirun` and its ranks; on drop, SIGTERM to `mpirun` (it forwards it to the ranks, which
/// print `stopped` and exit), then SIGKILL to every rank still there and to `mpirun`.
struct Job {
    mpirun: Child,
    stdin: Option<ChildStdin>,
    pids: Vec<u64>,
}

fn kill(sig: &str, pid: u64) -> bool {
    Command::new("kill")
        .args([sig, &pid.to_string()])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn alive(pid: u64) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

impl Drop for Job {
    fn drop(&mut self) {
        drop(self.stdin.take());
        kill("-TERM", u64::from(self.mpirun.id()));
        let end = Instant::now() + Duration::from_secs(10);
        while Instant::now() < end && matches!(self.mpirun.try_wait(), Ok(None)) {
            std::thread::sleep(Duration::from_millis(50));
        }
        for &p in &self.pids {
            if alive(p) {
                kill("-KILL", p);
            }
        }
        let _ = self.mpirun.kill();
        let _ = self.mpirun.wait();
    }
}

impl Job {
    fn send(&mut self, line: &str) {
        let s = self.stdin.as_mut().expect("mpirun's stdin");
        writeln!(s, "{line}").expect("write to rank 0 through mpirun");
        s.flush().unwrap();
    }
}

/// Receives lines until `done(log)` holds or `within` passes; panics with the log then.
fn until(
    rx: &Receiver<Value>,
    log: &mut Vec<Value>,
    within: Duration,
    what: &str,
    done: impl Fn(&[Value]) -> bool,
) {
    let end = Instant::now() + within;
    while !done(log) {
        let left = end.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(v) => log.push(v),
            Err(_) => panic!("{what}: not within {within:?}; lines:\n{}", dump(log)),
        }
    }
}

fn dump(log: &[Value]) -> String {
    log.iter()
        .map(Value::to_string)
        .collect::<Vec<_>>()
        .join("\n")
}

fn events<'a>(log: &'a [Value], event: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
    log.iter().filter(move |v| v["event"] == event)
}

/// How many times each rank delivered the xcast with `payload`.
fn deliveries(log: &[Value], payload: &str) -> HashMap<u64, usize> {
    let mut n = HashMap::new();
    for v in events(log, "xcast_delivered").filter(|v| v["payload"] == payload) {
        *n.entry(v["rank"].as_u64().unwrap()).or_default() += 1;
    }
    n
}

#[test]
fn eight_ranks_under_mpirun_form_survive_a_kill_and_keep_delivering() {
    const TEST: &str = "eight_ranks_under_mpirun_form_survive_a_kill_and_keep_delivering";
    let Some(mpirun) = common::tool(TEST, common::MPIRUN) else {
        return;
    };
    let port = common::free_ports(1)[0];
    let rendezvous = format!("127.0.0.1:{port}");
    let mut child = Command::new(mpirun)
        .args([
            "--allow-run-as-root",
            "--oversubscribe",
            "--enable-recovery",
        ])
        .args(["-np", &NP.to_string()])
        .arg(env!("CARGO_BIN_EXE_lifeline"))
        .args(["node", "--bootstrap", "env", "--rendezvous", &rendezvous])
        .args(["--bootstrap-timeout-ms", "20000"])
        .env("LIFELINE_CLUSTER_KEY", "mpirun test secret")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn mpirun");
    let out = child.stdout.take().unwrap();
    let err = child.stderr.take().unwrap();
    let stdin = child.stdin.take();
    let mut job = Job {
        mpirun: child,
        stdin,
        pids: Vec::new(),
    };
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            // mpirun may add lines of its own; the nodes' are JSON.
            if let Ok(v) = serde_json::from_str::<Value>(&line) {
                if tx.send(v).is_err() {
                    break;
                }
            } else {
                eprintln!("mpirun stdout: {line}");
            }
        }
    });
    std::thread::spawn(move || {
        for line in BufReader::new(err).lines().map_while(Result::ok) {
            eprintln!("mpirun stderr: {line}");
        }
    });
    let mut log = Vec::new();
    let t0 = Instant::now();

    // 8 ranks bootstrap under Open MPI (the complete OMPI entry, not the partial PMIx one).
    until(&rx, &mut log, Duration::from_secs(30), "8 listening", |l| {
        events(l, "listening").count() as u64 == NP
    });
    eprintln!("8 ranks listening after {:?}", t0.elapsed());
    for b in events(&log, "bootstrap") {
        assert_eq!(b["launcher"], "ompi", "{b}");
        assert_eq!(b["size"], NP, "{b}");
    }
    assert_eq!(
        events(&log, "bootstrap").count() as u64,
        NP,
        "{}",
        dump(&log)
    );
    let mut pids = HashMap::new();
    for v in events(&log, "listening") {
        pids.insert(v["rank"].as_u64().unwrap(), v["pid"].as_u64().unwrap());
    }
    assert_eq!(pids.len() as u64, NP, "{}", dump(&log));
    job.pids = pids.values().copied().collect();

    // An xcast from rank 0 reaches all 8, once each.
    job.send("xcast 16 first");
    until(&rx, &mut log, Duration::from_secs(20), "xcast at 8", |l| {
        deliveries(l, "first").len() as u64 == NP
    });

    // SIGKILL rank 5: the 7 others confirm it.
    assert!(kill("-KILL", pids[&KILLED]), "kill -KILL rank {KILLED}");
    let killed_at = Instant::now();
    let confirmed = |l: &[Value]| -> Vec<u64> {
        let mut r: Vec<u64> = events(l, "failure_confirmed")
            .filter(|v| {
                v["ranks"]
                    .as_array()
                    .is_some_and(|a| a.iter().any(|x| *x == KILLED))
            })
            .map(|v| v["rank"].as_u64().unwrap())
            .collect();
        r.sort_unstable();
        r.dedup();
        r
    };
    until(
        &rx,
        &mut log,
        Duration::from_secs(20),
        "kill confirmed by 7",
        |l| confirmed(l).len() as u64 == NP - 1,
    );
    eprintln!(
        "rank {KILLED} confirmed dead at the 7 within {:?}",
        killed_at.elapsed()
    );
    assert!(!confirmed(&log).contains(&KILLED));
    assert!(
        matches!(job.mpirun.try_wait(), Ok(None)),
        "mpirun ended after one rank died (--enable-recovery): {}",
        dump(&log)
    );

    // A later xcast reaches the 7 survivors.
    job.send("xcast 16 after");
    until(&rx, &mut log, Duration::from_secs(20), "xcast at 7", |l| {
        deliveries(l, "after").len() as u64 == NP - 1
    });
    // Let duplicates, if any, show up, then check exactly once everywhere.
    std::thread::sleep(Duration::from_millis(300));
    while let Ok(v) = rx.try_recv() {
        log.push(v);
    }
    let first = deliveries(&log, "first");
    let after = deliveries(&log, "after");
    assert!(first.values().all(|&n| n == 1), "{first:?}");
    assert!(after.values().all(|&n| n == 1), "{after:?}");
    assert!(!after.contains_key(&KILLED), "{after:?}");
    assert!(events(&log, "evicted").next().is_none(), "{}", dump(&log));

    // `quit` on rank 0: its last line is `stopped`.
    job.send("quit");
    until(
        &rx,
        &mut log,
        Duration::from_secs(10),
        "rank 0 stopped",
        |l| events(l, "stopped").any(|v| v["rank"] == 0),
    );
    let last0 = log.iter().rev().find(|v| v["rank"] == 0).unwrap();
    assert_eq!(last0["event"], "stopped", "{last0}");
    assert_eq!(last0["reason"], "quit", "{last0}");
}
