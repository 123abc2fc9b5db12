//! `lifeline node --bootstrap env` on network namespaces: each "host" is a namespace on one
//! Linux bridge, each node started on its own with only a launcher's variables (Slurm, Open
//! MPI, torchrun) and the key in its environment, in a shuffled order with small random delays.
//! The nodes must find each other through rank 0's rendezvous and form one cluster; a missing
//! rank must be named by every started process within the bootstrap timeout.
//!
//! Needs root and `ip` (Debian's iproute2): otherwise skipped with one loud line, or a failure
//! under `LIFELINE_REQUIRE_NETNS=1` (set by `.ci/run`; see `common`). Every namespace
//! (and the veth pairs and bridge inside them) is created by the test, uses 10.233.N.0/24
//! addresses that exist only inside them, and is deleted on every path, as are the child
//! processes (Drop guards).

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::Value;

mod common;

/// One namespace cluster at a time: the machine may have two cores.
static SERIAL: Mutex<()> = Mutex::new(());

const KEY: &str = "bootstrap test secret";

fn ip(args: &[&str]) -> bool {
    Command::new("ip")
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// `n` namespaces `PREFIXi`, each with `eth0` at `10.233.NET.(i+1)/24`, on a bridge in a
/// namespace of its own; all deleted on drop.
struct Hosts {
    names: Vec<String>,
    net: u32,
}

impl Hosts {
    /// `None` (with the reason printed) when the test cannot run here.
    fn new(test: &str, n: usize, id: u32) -> Option<Self> {
        common::tool(test, common::NETNS)?;
        let tag = std::process::id() % 10_000;
        let prefix = format!("llb{tag}t{id}");
        let bridge = format!("{prefix}br");
        if !ip(&["netns", "add", &bridge]) {
            common::skip(test, common::NETNS, "cannot create a network namespace");
            return None;
        }
        let mut hosts = Self {
            names: vec![bridge.clone()],
            net: 10 + (tag * 2 + id) % 240,
        };
        let ok = ip(&["-n", &bridge, "link", "add", "br0", "type", "bridge"])
            && ip(&["-n", &bridge, "link", "set", "br0", "up"]);
        assert!(ok, "{test}: cannot create the bridge");
        for i in 0..n {
            let ns = format!("{prefix}n{i}");
            assert!(ip(&["netns", "add", &ns]), "{test}: netns add {ns}");
            hosts.names.push(ns.clone());
            let v = format!("v{i}");
            let addr = format!("{}/24", hosts.addr(i));
            let ok = ip(&[
                "-n", &bridge, "link", "add", &v, "type", "veth", "peer", "name", "eth0", "netns",
                &ns,
            ]) && ip(&["-n", &bridge, "link", "set", &v, "master", "br0"])
                && ip(&["-n", &bridge, "link", "set", &v, "up"])
                && ip(&["-n", &ns, "addr", "add", &addr, "dev", "eth0"])
                && ip(&["-n", &ns, "link", "set", "eth0", "up"])
                && ip(&["-n", &ns, "link", "set", "lo", "up"]);
            assert!(ok, "{test}: cannot wire {ns} to the bridge");
        }
        Some(hosts)
    }

    fn addr(&self, i: usize) -> String {
        format!("10.233.{}.{}", self.net, i + 1)
    }

    fn ns(&self, i: usize) -> &str {
        &self.names[i + 1]
    }
}

impl Drop for Hosts {
    fn drop(&mut self) {
        for ns in &self.names {
            let _ = ip(&["netns", "del", ns]);
        }
    }
}

/// One `lifeline node` in a namespace; killed on drop.
struct Proc {
    rank: usize,
    child: Child,
    started: Instant,
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The launcher variables rank `r` of `size` gets: torchrun for r % 3 == 0, Slurm for 1, Open
/// MPI for 2. Only torchrun's carry the rendezvous (MASTER_ADDR/MASTER_PORT); the others get
/// `--rendezvous`.
fn launcher_env(
    r: usize,
    size: usize,
    master: &str,
) -> (Vec<(String, String)>, Option<String>, &'static str) {
    let (rs, ss) = (r.to_string(), size.to_string());
    let port = "29400";
    match r % 3 {
        0 => (
            vec![
                ("RANK".into(), rs),
                ("WORLD_SIZE".into(), ss),
                ("MASTER_ADDR".into(), master.into()),
                ("MASTER_PORT".into(), port.into()),
            ],
            None,
            "torchrun",
        ),
        1 => (
            vec![("SLURM_PROCID".into(), rs), ("SLURM_NTASKS".into(), ss)],
            Some(format!("{master}:{port}")),
            "slurm",
        ),
        _ => (
            vec![
                ("OMPI_COMM_WORLD_RANK".into(), rs),
                ("OMPI_COMM_WORLD_SIZE".into(), ss),
            ],
            Some(format!("{master}:{port}")),
            "ompi",
        ),
    }
}

/// A small deterministic generator for the start order and delays (printed, to replay).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
}

/// Starts ranks `0..started` of a job of `size` in shuffled order with 0-150 ms delays; each
/// stdout line goes to the returned channel as (rank, JSON).
fn start(
    hosts: &Hosts,
    started: usize,
    size: usize,
    timeout_ms: u64,
    seed: u64,
) -> (Vec<Proc>, Receiver<(usize, Value)>) {
    let mut order: Vec<usize> = (0..started).collect();
    let mut rng = Rng(seed);
    for i in (1..order.len()).rev() {
        order.swap(i, rng.next() as usize % (i + 1));
    }
    eprintln!("start order {order:?} (seed {seed})");
    let (tx, rx) = channel();
    let mut procs = Vec::new();
    let master = hosts.addr(0);
    for r in order {
        std::thread::sleep(Duration::from_millis(rng.next() % 150));
        let (vars, rendezvous, _) = launcher_env(r, size, &master);
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", hosts.ns(r), env!("CARGO_BIN_EXE_lifeline")])
            .args([
                "node",
                "--bootstrap",
                "env",
                "--radix",
                "2",
                "--exit-on-stdin-eof",
            ])
            .args(["--bootstrap-timeout-ms", &timeout_ms.to_string()]);
        if let Some(rv) = rendezvous {
            cmd.args(["--rendezvous", &rv]);
        }
        let mut child = cmd
            .env_clear()
            .envs(vars)
            .env("LIFELINE_CLUSTER_KEY", KEY)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn ip netns exec lifeline");
        let out = child.stdout.take().expect("stdout");
        let tx = tx.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                match serde_json::from_str(&line) {
                    Ok(v) => {
                        if tx.send((r, v)).is_err() {
                            break;
                        }
                    }
                    Err(_) => panic!("rank {r}: not a JSON line: {line}"),
                }
            }
        });
        procs.push(Proc {
            rank: r,
            child,
            started: Instant::now(),
        });
    }
    procs.sort_by_key(|p| p.rank);
    (procs, rx)
}

/// Reads lines into `log` until `done(log)` holds; panics naming `what` at the deadline.
fn until(
    rx: &Receiver<(usize, Value)>,
    log: &mut Vec<(usize, Value)>,
    within: Duration,
    what: &str,
    done: impl Fn(&[(usize, Value)]) -> bool,
) {
    let end = Instant::now() + within;
    while !done(log) {
        let left = end.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(x) => log.push(x),
            Err(_) => panic!(
                "{what}: not within {within:?}; lines so far:\n{}",
                dump(log)
            ),
        }
    }
}

fn dump(log: &[(usize, Value)]) -> String {
    log.iter().map(|(r, v)| format!("{r}: {v}\n")).collect()
}

/// How many times each rank delivered the xcast with `payload`.
fn deliveries(log: &[(usize, Value)], payload: &str) -> HashMap<usize, usize> {
    let mut m = HashMap::new();
    for (r, v) in log {
        if v["event"] == "xcast_delivered" && v["payload"] == payload {
            *m.entry(*r).or_default() += 1;
        }
    }
    m
}

fn xcast(p: &mut Proc, payload: &str) {
    writeln!(p.child.stdin.as_mut().expect("stdin"), "xcast 16 {payload}").expect("write xcast");
}

#[test]
fn eight_hosts_bootstrap_into_one_cluster_and_survive_a_kill() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let test = "eight_hosts_bootstrap_into_one_cluster_and_survive_a_kill";
    let Some(hosts) = Hosts::new(test, 8, 0) else {
        return;
    };
    let seed = u64::from(std::process::id()) ^ 0x5eed;
    let t0 = Instant::now();
    let (mut procs, rx) = start(&hosts, 8, 8, 20_000, seed);
    let mut log = Vec::new();
    until(
        &rx,
        &mut log,
        Duration::from_secs(25),
        "bootstrap and listening at all 8",
        |l| (0..8).all(|r| l.iter().any(|(x, v)| *x == r && v["event"] == "listening")),
    );
    let formed = t0.elapsed();
    let mut ms = Vec::new();
    for r in 0..8 {
        let lines: Vec<&Value> = log
            .iter()
            .filter(|(x, _)| *x == r)
            .map(|(_, v)| v)
            .collect();
        let b = lines[0];
        assert_eq!(b["event"], "bootstrap", "rank {r}: first line {b}");
        assert_eq!(b["rank"], r, "{b}");
        assert_eq!(b["size"], 8, "{b}");
        assert_eq!(b["launcher"], launcher_env(r, 8, "").2, "{b}");
        assert_eq!(
            b["addr"].as_str().unwrap().rsplit_once(':').unwrap().0,
            hosts.addr(r),
            "{b}"
        );
        assert_eq!(lines[1]["event"], "listening", "rank {r}");
        ms.push(b["ms"].as_f64().unwrap());
    }
    let rank0 = log
        .iter()
        .find(|(r, v)| *r == 0 && v["event"] == "bootstrap")
        .unwrap();
    assert_eq!(rank0.1["refused"], 0, "{}", rank0.1);
    eprintln!(
        "{test}: all 8 listening {formed:?} after the first start; bootstrap ms per rank {ms:?}"
    );

    until(
        &rx,
        &mut log,
        Duration::from_secs(15),
        "a link_up at every node",
        |l| (0..8).all(|r| l.iter().any(|(x, v)| *x == r && v["event"] == "link_up")),
    );
    // An xcast from rank 3 reaches all 8 exactly once. Retried while the tree is still
    // being linked (an `error` answer), at most for 10 s.
    let t = Instant::now();
    let sent = loop {
        xcast(&mut procs[3], "hello-all");
        let n = log.len();
        until(
            &rx,
            &mut log,
            Duration::from_secs(5),
            "an answer to xcast",
            |l| {
                l[n..].iter().any(|(r, v)| {
                    *r == 3 && (v["event"] == "xcast_started" || v["event"] == "error")
                })
            },
        );
        if log[n..]
            .iter()
            .any(|(r, v)| *r == 3 && v["event"] == "xcast_started")
        {
            break Instant::now();
        }
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "xcast refused:\n{}",
            dump(&log)
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    until(
        &rx,
        &mut log,
        Duration::from_secs(10),
        "hello-all at all 8",
        |l| deliveries(l, "hello-all").len() == 8,
    );
    let reached = sent.elapsed();
    // Any duplicate would arrive soon after.
    let settle = Instant::now() + Duration::from_millis(500);
    while let Ok(x) = rx.recv_timeout(settle.saturating_duration_since(Instant::now())) {
        log.push(x);
    }
    let d = deliveries(&log, "hello-all");
    assert!(d.values().all(|&n| n == 1), "not exactly once: {d:?}");
    eprintln!("{test}: xcast from rank 3 reached all 8 in {reached:?}");

    // SIGKILL rank 5; the 7 survivors confirm its failure.
    let killed = 5;
    let k = Instant::now();
    procs[killed].child.kill().expect("SIGKILL rank 5");
    let _ = procs[killed].child.wait();
    let survivors: Vec<usize> = (0..8).filter(|r| *r != killed).collect();
    let confirmed = |l: &[(usize, Value)], r: usize| {
        l.iter().any(|(x, v)| {
            *x == r
                && v["event"] == "failure_confirmed"
                && v["ranks"]
                    .as_array()
                    .is_some_and(|a| a.iter().any(|x| x == killed))
        })
    };
    until(
        &rx,
        &mut log,
        Duration::from_secs(15),
        "failure_confirmed for rank 5 at the 7 survivors",
        |l| survivors.iter().all(|&r| confirmed(l, r)),
    );
    let confirm = k.elapsed();
    // A later xcast (from rank 0) reaches the 7 survivors exactly once.
    xcast(&mut procs[0], "after-kill");
    until(
        &rx,
        &mut log,
        Duration::from_secs(10),
        "after-kill at the 7 survivors",
        |l| {
            let d = deliveries(l, "after-kill");
            survivors.iter().all(|r| d.contains_key(r))
        },
    );
    let settle = Instant::now() + Duration::from_millis(500);
    while let Ok(x) = rx.recv_timeout(settle.saturating_duration_since(Instant::now())) {
        log.push(x);
    }
    let d = deliveries(&log, "after-kill");
    assert_eq!(d.len(), 7, "{d:?}");
    assert!(d.values().all(|&n| n == 1), "not exactly once: {d:?}");
    eprintln!("{test}: rank 5 confirmed failed at all 7 survivors {confirm:?} after its SIGKILL");
    drop(procs);
    drop(hosts);
}

#[test]
fn a_rank_that_never_starts_is_named_by_every_process() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let test = "a_rank_that_never_starts_is_named_by_every_process";
    let Some(hosts) = Hosts::new(test, 4, 1) else {
        return;
    };
    let timeout_ms = 2000;
    // The bound on each process: the timeout, the registrants' 2 s answer grace, slack.
    let bound = Duration::from_millis(timeout_ms) + Duration::from_secs(2) + Duration::from_secs(2);
    let (mut procs, rx) = start(&hosts, 4, 5, timeout_ms, u64::from(std::process::id()));
    let mut took = Vec::new();
    for p in &mut procs {
        let status = loop {
            if let Some(s) = p.child.try_wait().expect("try_wait") {
                break s;
            }
            assert!(
                p.started.elapsed() < bound,
                "rank {} still running after {bound:?}",
                p.rank
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        took.push((p.rank, p.started.elapsed()));
        let mut err = String::new();
        let _ = std::io::Read::read_to_string(p.child.stderr.as_mut().expect("stderr"), &mut err);
        assert_eq!(status.code(), Some(1), "rank {}: {status:?} {err}", p.rank);
        assert!(
            err.contains("rank(s) 4 never registered (4 of 5 did)"),
            "rank {}: {err}",
            p.rank
        );
    }
    let mut log = Vec::new();
    while let Ok(x) = rx.recv_timeout(Duration::from_millis(200)) {
        log.push(x);
    }
    for r in 0..4 {
        let f = log
            .iter()
            .find(|(x, v)| *x == r && v["event"] == "bootstrap_failed")
            .unwrap_or_else(|| panic!("rank {r}: no bootstrap_failed:\n{}", dump(&log)));
        assert_eq!(f.1["missing"], serde_json::json!([4]), "{}", f.1);
        assert!(
            !log.iter()
                .any(|(x, v)| *x == r && v["event"] == "listening"),
            "rank {r} listened"
        );
    }
    eprintln!(
        "{test}: exit after (rank, time) {took:?} (timeout {timeout_ms} ms, bound {bound:?})"
    );
    drop(procs);
    drop(hosts);
}
