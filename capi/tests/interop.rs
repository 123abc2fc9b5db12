//! C daemons and `lifeline node` processes in one cluster over TCP: `examples/daemon.c`
//! (compiled against the header and the static library) runs ranks 0 and 2, the Rust
//! `lifeline node` ranks 1 and 3, on 127.0.0.x addresses. Xcasts and reliable messages cross
//! C↔Rust links both ways and are delivered exactly once; after rank 2 is SIGKILLed the survivors
//! confirm its failure and keep delivering exactly once. A second cluster of five runs a shrink
//! campaign a C daemon asks for, removing a Rust node and a C daemon.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde_json::Value;

const MANIFEST: &str = env!("CARGO_MANIFEST_DIR");
mod common;

use common::{profile_dir, static_lib};

/// Compiles `examples/daemon.c` with warnings as errors, once per test run: the tests run in
/// parallel, and one test's compiler rewriting the executable while another starts it fails
/// with "text file busy".
fn build_daemon() -> PathBuf {
    static DAEMON: OnceLock<PathBuf> = OnceLock::new();
    DAEMON.get_or_init(compile_daemon).clone()
}

fn compile_daemon() -> PathBuf {
    let dir = profile_dir().join("c_api").join("interop");
    std::fs::create_dir_all(&dir).unwrap();
    let exe = dir.join("daemon");
    let out = common::compiler(false, 1)
        .args(["-std=c11", "-Wall", "-Wextra", "-pedantic", "-Werror", "-g"])
        .arg("-I")
        .arg(Path::new(MANIFEST).join("include"))
        .arg(Path::new(MANIFEST).join("examples/daemon.c"))
        .arg(static_lib())
        .args(["-lpthread", "-ldl", "-lm"])
        .arg("-o")
        .arg(&exe)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "compiling daemon.c failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    exe
}

/// The `lifeline` binary of this profile: `cargo test --workspace` builds it (cli has tests);
/// otherwise it is built here.
fn lifeline_bin() -> PathBuf {
    let dir = profile_dir();
    let bin = dir.join("lifeline");
    if !bin.is_file() {
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let mut cmd = Command::new(cargo);
        cmd.args(["build", "-p", "lifeline-cli", "--bin", "lifeline"]);
        if dir.file_name().is_some_and(|n| n == "release") {
            cmd.arg("--release");
        }
        let st = cmd.current_dir(MANIFEST).status().unwrap();
        assert!(
            st.success() && bin.is_file(),
            "building the lifeline binary"
        );
    }
    bin
}

/// One rank's process: its JSON lines collected by a reader thread; killed on drop.
struct Proc {
    rank: u32,
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Arc<Mutex<Vec<Value>>>,
}

impl Proc {
    fn start(rank: u32, exe: &Path, extra: &[&str], peers: &Path) -> Self {
        let mut child = Command::new(exe)
            .args(extra)
            .args(["--rank", &rank.to_string(), "--peers"])
            .arg(peers)
            .args(["--radix", "2", "--exit-on-stdin-eof"])
            .env("LIFELINE_CLUSTER_KEY", "interop-secret")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let lines = Arc::new(Mutex::new(Vec::new()));
        let out = child.stdout.take().unwrap();
        let sink = lines.clone();
        std::thread::spawn(move || {
            for l in BufReader::new(out).lines().map_while(Result::ok) {
                if let Ok(v) = serde_json::from_str::<Value>(&l) {
                    sink.lock().unwrap().push(v);
                } else {
                    eprintln!("rank {rank}: not JSON: {l}");
                }
            }
        });
        Self {
            rank,
            stdin: child.stdin.take(),
            child,
            lines,
        }
    }

    fn send(&mut self, cmd: &str) {
        let s = self.stdin.as_mut().unwrap();
        writeln!(s, "{cmd}").unwrap();
        s.flush().unwrap();
    }

    /// How many lines match `f`.
    fn count(&self, f: impl Fn(&Value) -> bool) -> usize {
        self.lines.lock().unwrap().iter().filter(|v| f(v)).count()
    }

    fn dump(&self) -> String {
        let l = self.lines.lock().unwrap();
        l.iter().map(|v| format!("  {v}\n")).collect()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn is(v: &Value, event: &str) -> bool {
    v["event"] == event
}

fn xcast_of(payload: &'static str) -> impl Fn(&Value) -> bool {
    move |v| is(v, "xcast_delivered") && v["payload"] == payload
}

fn relm_of(src: u32, payload: &'static str) -> impl Fn(&Value) -> bool {
    move |v| is(v, "relm_delivered") && v["payload"] == payload && v["src"] == src
}

/// Waits until `ok` holds (panics with every process's output after `secs`).
fn wait(procs: &[&Proc], what: &str, secs: u64, ok: impl Fn() -> bool) {
    let end = Instant::now() + Duration::from_secs(secs);
    while !ok() {
        if Instant::now() > end {
            let dump: String = procs
                .iter()
                .map(|p| format!("rank {}:\n{}", p.rank, p.dump()))
                .collect();
            panic!("timed out waiting for {what}\n{dump}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Free ports on 127.0.0.(2+r).
fn peers_file(dir: &Path, n: u32) -> PathBuf {
    let mut text = String::new();
    for r in 0..n {
        let ip = format!("127.0.0.{}", 2 + r);
        let l = std::net::TcpListener::bind(format!("{ip}:0")).unwrap();
        text.push_str(&format!("{r} {}\n", l.local_addr().unwrap()));
    }
    let p = dir.join("peers");
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn c_daemons_and_rust_nodes_form_one_cluster() {
    let daemon = build_daemon();
    let rust = lifeline_bin();
    let dir = profile_dir().join("c_api").join("interop");
    let peers = peers_file(&dir, 4);
    let node_args = ["node"];
    let mut p0 = Proc::start(0, &daemon, &[], &peers);
    let mut p1 = Proc::start(1, &rust, &node_args, &peers);
    let mut p2 = Proc::start(2, &daemon, &[], &peers);
    let mut p3 = Proc::start(3, &rust, &node_args, &peers);

    // Xcast from the C root until the cluster is wired (every rank delivers it).
    p0.send("xcast 16 from-c0");
    {
        let all = [&p0, &p1, &p2, &p3];
        wait(&all, "xcast from-c0 everywhere", 30, || {
            all.iter().all(|p| p.count(xcast_of("from-c0")) >= 1)
        });
    }
    p1.send("xcast 17 from-rust1");
    p0.send("relm 3 20 c0-to-rust3");
    p3.send("relm 2 21 rust3-to-c2");
    p2.send("relm 1 22 c2-to-rust1");
    {
        let all = [&p0, &p1, &p2, &p3];
        wait(&all, "xcast from-rust1 and the RELMs", 20, || {
            all.iter().all(|p| p.count(xcast_of("from-rust1")) >= 1)
                && p3.count(relm_of(0, "c0-to-rust3")) >= 1
                && p2.count(relm_of(3, "rust3-to-c2")) >= 1
                && p1.count(relm_of(2, "c2-to-rust1")) >= 1
                && p0.count(|v| is(v, "relm_acked") && v["dst"] == 3) >= 1
                && p3.count(|v| is(v, "relm_acked") && v["dst"] == 2) >= 1
        });
        std::thread::sleep(Duration::from_millis(500)); // room for a duplicate to show
        for p in all {
            for x in ["from-c0", "from-rust1"] {
                assert_eq!(
                    p.count(xcast_of(x)),
                    1,
                    "rank {} got {x}:\n{}",
                    p.rank,
                    p.dump()
                );
            }
        }
        assert_eq!(p3.count(relm_of(0, "c0-to-rust3")), 1);
        assert_eq!(p2.count(relm_of(3, "rust3-to-c2")), 1);
        assert_eq!(p1.count(relm_of(2, "c2-to-rust1")), 1);
        // C↔Rust links came up in both directions of the handshake.
        assert!(p0.count(|v| is(v, "link_up")) >= 1 && p2.count(|v| is(v, "link_up")) >= 1);
    }

    // Rank 2 (a C daemon, not the root) dies.
    p2.child.kill().unwrap();
    p2.child.wait().unwrap();
    let survivors = [&p0, &p1, &p3];
    let confirmed = |p: &Proc| {
        p.count(|v| {
            is(v, "failure_confirmed")
                && v["ranks"]
                    .as_array()
                    .is_some_and(|r| r.iter().any(|x| x == 2))
        })
    };
    wait(&survivors, "rank 2's failure confirmed", 30, || {
        survivors.iter().all(|p| confirmed(p) >= 1)
    });
    p3.send("xcast 18 after-kill");
    p1.send("relm 0 23 rust1-to-c0");
    p0.send("relm 3 24 c0-to-rust3-again");
    let survivors = [&p0, &p1, &p3];
    wait(&survivors, "xcast after-kill and the RELMs", 20, || {
        survivors
            .iter()
            .all(|p| p.count(xcast_of("after-kill")) >= 1)
            && p0.count(relm_of(1, "rust1-to-c0")) >= 1
            && p3.count(relm_of(0, "c0-to-rust3-again")) >= 1
    });
    std::thread::sleep(Duration::from_millis(500));
    for p in survivors {
        assert_eq!(
            p.count(xcast_of("after-kill")),
            1,
            "rank {}:\n{}",
            p.rank,
            p.dump()
        );
        assert_eq!(confirmed(p), 1, "rank {}:\n{}", p.rank, p.dump());
    }
    assert_eq!(p0.count(relm_of(1, "rust1-to-c0")), 1);
    assert_eq!(p3.count(relm_of(0, "c0-to-rust3-again")), 1);

    // A clean shutdown on quit.
    p0.send("quit");
    let end = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(st) = p0.child.try_wait().unwrap() {
            assert!(st.success(), "the C daemon exited with {st}");
            break;
        }
        assert!(Instant::now() < end, "the C daemon did not quit");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits up to `secs` for `p` to exit; its status.
fn exit_status(p: &mut Proc, secs: u64) -> std::process::ExitStatus {
    let end = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(st) = p.child.try_wait().unwrap() {
            return st;
        }
        assert!(
            Instant::now() < end,
            "rank {} did not exit:\n{}",
            p.rank,
            p.dump()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_c_daemon_shrinks_a_rust_node_and_a_c_daemon_away() {
    let daemon = build_daemon();
    let rust = lifeline_bin();
    let dir = profile_dir().join("c_api").join("interop-shrink");
    std::fs::create_dir_all(&dir).unwrap();
    let peers = peers_file(&dir, 5);
    // The C daemon starts without check-ins (the C ABI's default): the Rust nodes agree.
    let node_args = ["node", "--no-check-in"];
    let mut procs = [
        Proc::start(0, &daemon, &[], &peers),
        Proc::start(1, &rust, &node_args, &peers),
        Proc::start(2, &daemon, &[], &peers),
        Proc::start(3, &rust, &node_args, &peers),
        Proc::start(4, &daemon, &[], &peers),
    ];
    procs[0].send("xcast 16 wired");
    {
        let all: Vec<&Proc> = procs.iter().collect();
        wait(&all, "xcast wired everywhere", 30, || {
            all.iter().all(|p| p.count(xcast_of("wired")) >= 1)
        });
    }

    // Rank 2 (a C daemon, not the coordinator) removes rank 3 (Rust) and rank 4 (C).
    procs[2].send("shrink 3,4");
    let completed = |p: &Proc| p.count(|v| is(v, "campaign_completed") && v["id"] == "2.1");
    let departed = |p: &Proc| {
        p.count(|v| {
            is(v, "departed")
                && v["ranks"] == serde_json::json!([3, 4])
                && v["campaigns"] == serde_json::json!(["2.1"])
        })
    };
    {
        let all: Vec<&Proc> = procs.iter().collect();
        wait(&all, "the campaign's completion and departures", 30, || {
            completed(&procs[2]) >= 1 && procs[..3].iter().all(|p| departed(p) >= 1)
        });
    }
    for r in [3, 4] {
        let st = exit_status(&mut procs[r], 20);
        assert!(
            st.success(),
            "target {r} exited with {st}:\n{}",
            procs[r].dump()
        );
        assert_eq!(
            procs[r].count(|v| is(v, "left")),
            1,
            "rank {r}:\n{}",
            procs[r].dump()
        );
    }
    assert_eq!(
        procs[2].count(|v| is(v, "campaign_started") && v["id"] == "2.1"),
        1,
        "{}",
        procs[2].dump()
    );

    // The survivors go on: an xcast from the Rust node reaches the three of them once.
    procs[1].send("xcast 17 after-shrink");
    {
        let survivors: Vec<&Proc> = procs[..3].iter().collect();
        wait(&survivors, "xcast after-shrink", 20, || {
            survivors
                .iter()
                .all(|p| p.count(xcast_of("after-shrink")) >= 1)
        });
    }
    std::thread::sleep(Duration::from_millis(500)); // room for a duplicate to show
    for p in &procs[..3] {
        assert_eq!(
            completed(p),
            usize::from(p.rank == 2),
            "rank {}:\n{}",
            p.rank,
            p.dump()
        );
        assert_eq!(departed(p), 1, "rank {}:\n{}", p.rank, p.dump());
        assert_eq!(
            p.count(xcast_of("after-shrink")),
            1,
            "rank {}:\n{}",
            p.rank,
            p.dump()
        );
        assert_eq!(
            p.count(|v| is(v, "failure_confirmed") || is(v, "left")),
            0,
            "rank {}:\n{}",
            p.rank,
            p.dump()
        );
    }
}
