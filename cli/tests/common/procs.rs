//! The real-process harness of the `lifeline-cli` tests: the binary, a child killed on drop,
//! reading a node's JSON lines, and a small cluster from a peers file. Declared by each test
//! that uses it as `#[path = "common/procs.rs"] mod procs;` (next to `mod common;`), not by
//! `common/mod.rs`, which other crates' tests include too.
#![allow(dead_code)] // each test file uses its own subset

use std::io::Write;
use std::path::PathBuf;

use crate::common::free_ports;

/// The `lifeline` binary under test.
pub(crate) fn lifeline() -> std::process::Command {
    std::process::Command::new(env!("CARGO_BIN_EXE_lifeline"))
}

/// A child process killed (and reaped) when dropped, so a test failing midway leaves nothing
/// running.
pub(crate) struct Guard(pub(crate) std::process::Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A `lifeline node`'s JSON lines.
pub(crate) type Lines = std::io::Lines<std::io::BufReader<std::process::ChildStdout>>;

/// The next line of `lines` whose event is `event` (panics at the end of the output).
pub(crate) fn wait_for(lines: &mut Lines, event: &str) -> serde_json::Value {
    for l in lines {
        let v: serde_json::Value = serde_json::from_str(&l.unwrap()).unwrap();
        if v["event"] == event {
            return v;
        }
    }
    panic!("no {event} line");
}

/// `n` `lifeline node` processes (radix 2) on free loopback ports with a peers file and a
/// key file in their own temporary directory, each `ready`; stdin and stdout piped.
pub(crate) struct Nodes {
    /// The processes, by rank.
    pub(crate) nodes: Vec<Guard>,
    /// Their output, by rank, past `ready`.
    pub(crate) outs: Vec<Lines>,
    dir: PathBuf,
}

impl Nodes {
    /// Starts the nodes; `tag` names the directory (one per test).
    pub(crate) fn start(tag: &str, n: usize) -> Self {
        use std::io::BufRead;
        let dir = std::env::temp_dir().join(format!("lifeline-{tag}-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let ports = free_ports(n);
        let peers = dir.join("peers");
        let book: String = (0..n)
            .map(|r| format!("{r} 127.0.0.1:{}\n", ports[r]))
            .collect();
        std::fs::write(&peers, book).unwrap();
        let key = dir.join("key");
        std::fs::write(&key, format!("{tag} test secret")).unwrap();
        let mut nodes: Vec<Guard> = (0..n)
            .map(|r| {
                let mut c = lifeline();
                c.args(["node", "--radix", "2", "--exit-on-stdin-eof", "--key-file"])
                    .arg(&key)
                    .args(["--rank", &r.to_string(), "--peers"])
                    .arg(&peers)
                    .stdin(std::process::Stdio::piped())
                    .stdout(std::process::Stdio::piped());
                Guard(c.spawn().unwrap())
            })
            .collect();
        let mut outs: Vec<Lines> = nodes
            .iter_mut()
            .map(|g| std::io::BufReader::new(g.0.stdout.take().unwrap()).lines())
            .collect();
        for o in outs.iter_mut() {
            wait_for(o, "ready");
        }
        Self { nodes, outs, dir }
    }

    /// Writes `line` to rank `r`'s stdin.
    pub(crate) fn stdin(&mut self, r: usize, line: &str) {
        writeln!(self.nodes[r].0.stdin.as_mut().unwrap(), "{line}").unwrap();
    }
}

impl Drop for Nodes {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
