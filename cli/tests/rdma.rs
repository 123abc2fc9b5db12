//! `lifeline node --transport tcp+rdma`: refused with a usage error (status 2) by a binary
//! built without the feature `rdma`; with it, the node either runs on the first RDMA device
//! with an active port or, where there is none, exits with status 1 and `no RDMA device: ...`
//! (never a panic). `LIFELINE_REQUIRE_RDMA=1` (machines that do have RDMA) turns the latter
//! into a failure.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A peers file of one rank on a free loopback port, and its directory (removed on drop).
struct Peers {
    dir: std::path::PathBuf,
}

impl Peers {
    fn new(test: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("lifeline-rdma-{test}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        std::fs::write(dir.join("peers"), format!("0 127.0.0.1:{port}\n")).unwrap();
        Self { dir }
    }

    fn file(&self) -> std::path::PathBuf {
        self.dir.join("peers")
    }
}

impl Drop for Peers {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Runs a one-rank `lifeline node --transport tcp+rdma` with stdin closed and
/// `--exit-on-stdin-eof` (so a node that does start stops by itself); kills it after 30 s.
/// Returns (exit code, stdout, stderr).
fn node_tcp_rdma(test: &str) -> (Option<i32>, String, String) {
    let peers = Peers::new(test);
    let mut child = Command::new(env!("CARGO_BIN_EXE_lifeline"))
        .args(["node", "--rank", "0", "--transport", "tcp+rdma", "--peers"])
        .arg(peers.file())
        .arg("--exit-on-stdin-eof")
        .env("LIFELINE_CLUSTER_KEY", "rdma cli test")
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let end = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > end {
            let _ = child.kill();
            panic!("lifeline node --transport tcp+rdma did not exit within 30 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let (mut out, mut err) = (String::new(), String::new());
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    (status.code(), out, err)
}

#[test]
fn help_lists_tcp_rdma() {
    let out = Command::new(env!("CARGO_BIN_EXE_lifeline"))
        .args(["node", "--help"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(
        help.contains("tcp+rdma"),
        "--help does not name tcp+rdma:\n{help}"
    );
    assert!(
        help.contains("--features rdma"),
        "--help does not say how:\n{help}"
    );
}

#[cfg(not(feature = "rdma"))]
#[test]
fn tcp_rdma_without_the_feature_is_a_usage_error() {
    let (code, out, err) = node_tcp_rdma("nofeature");
    assert_eq!(code, Some(2), "stdout: {out}\nstderr: {err}");
    assert!(
        err.contains("built without RDMA support") && err.contains("--features rdma"),
        "stderr: {err}"
    );
    assert!(!err.contains("panicked"), "stderr: {err}");
    // Refused before anything started.
    assert!(!out.contains("listening"), "stdout: {out}");
}

#[cfg(feature = "rdma")]
#[test]
fn tcp_rdma_with_the_feature_runs_or_names_the_missing_device() {
    let require = std::env::var("LIFELINE_REQUIRE_RDMA").is_ok_and(|v| v == "1");
    let (code, out, err) = node_tcp_rdma("feature");
    assert!(!err.contains("panicked"), "stderr: {err}");
    match code {
        Some(0) => assert!(
            out.contains("\"listening\""),
            "stdout: {out}\nstderr: {err}"
        ),
        Some(1) if !require => {
            assert!(err.contains("no RDMA device: "), "stderr: {err}");
            assert!(!out.contains("listening"), "stdout: {out}");
            println!("skipped the run: {}", err.trim());
        }
        c => panic!("exit {c:?} (LIFELINE_REQUIRE_RDMA={require})\nstdout: {out}\nstderr: {err}"),
    }
}
