//! What the `lifeline-cli` tests share: whether a system tool they need (and root, where it
//! needs root) is here, and free loopback ports.
//!
//! A test that cannot run here prints ONE line to the terminal (not captured by the test
//! harness, so it shows under a plain `cargo test`), `SKIPPED <test>: needs <what> (Debian
//! package <pkg>) ...`, and passes; unless its variable (`LIFELINE_REQUIRE_NFT`,
//! `LIFELINE_REQUIRE_NETNS`, `LIFELINE_REQUIRE_MPIRUN`) is `1`, which `.ci/run` sets once it has
//! installed the package: then the same line is a failure, so CI cannot skip what it installed.
//! The way `transport-rdma/tests/hardware.rs` treats a missing RDMA device.
#![allow(dead_code)] // each test file uses its own subset

use std::io::Write;
use std::path::PathBuf;

/// A system tool some tests need.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Tool {
    /// The binary's name, looked for on `PATH`, then in `/usr/sbin` and `/sbin`.
    pub(crate) binary: &'static str,
    /// The Debian package that installs it.
    pub(crate) package: &'static str,
    /// Whether the tests need root as well (nftables rules, network namespaces).
    pub(crate) root: bool,
    /// The variable that turns a skip into a failure.
    pub(crate) require_var: &'static str,
}

/// `nft`, for the network-fault tests of `lifeline cluster` (root).
pub(crate) const NFT: Tool = Tool {
    binary: "nft",
    package: "nftables",
    root: true,
    require_var: "LIFELINE_REQUIRE_NFT",
};

/// `ip` with network namespaces, for the `--bootstrap env` namespace tests (root).
pub(crate) const NETNS: Tool = Tool {
    binary: "ip",
    package: "iproute2",
    root: true,
    require_var: "LIFELINE_REQUIRE_NETNS",
};

/// Open MPI's `mpirun`, for the launcher test.
pub(crate) const MPIRUN: Tool = Tool {
    binary: "mpirun",
    package: "openmpi-bin",
    root: false,
    require_var: "LIFELINE_REQUIRE_MPIRUN",
};

/// The effective uid, from `/proc/self/status` (`Uid: real effective saved fs`).
pub(crate) fn euid() -> Option<u32> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("Uid:"))?;
    line.split_whitespace().nth(2)?.parse().ok()
}

/// Where `binary` is: on `PATH`, else in `/usr/sbin` or `/sbin` (often not on a user's `PATH`).
pub(crate) fn find(binary: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin"].map(PathBuf::from))
        .map(|d| d.join(binary))
        .find(|p| p.is_file())
}

/// Whether the skip of `tool` is a failure here (its variable is `1`).
pub(crate) fn required(tool: Tool) -> bool {
    std::env::var(tool.require_var).is_ok_and(|v| v == "1")
}

/// The tool's path when `test` can run here. Otherwise one loud line, and `None` (the test
/// returns, skipped), or a panic when the tool's variable is `1`.
pub(crate) fn tool(test: &str, tool: Tool) -> Option<PathBuf> {
    let found = find(tool.binary);
    let why = match (tool.root, euid(), &found) {
        (true, uid, _) if uid != Some(0) => {
            format!("needs root for `{}` (effective uid {uid:?})", tool.binary)
        }
        (_, _, None) => format!(
            "needs `{}`: install the Debian package {} (`.ci/run` does, as root)",
            tool.binary, tool.package
        ),
        _ => return found,
    };
    skip(test, tool, &why);
    None
}

/// Skips `test` for `why` (one loud line), or fails it when the tool's variable is `1`.
pub(crate) fn skip(test: &str, tool: Tool, why: &str) {
    if required(tool) {
        panic!("{test}: {why}, and {}=1 forbids skipping", tool.require_var);
    }
    // Straight to the terminal (the harness captures only the print macros), in one write so
    // that parallel tests do not cut the line.
    let line = format!(
        "SKIPPED {test}: {why} (set {}=1 to make this a failure)\n",
        tool.require_var
    );
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}

/// `n` loopback ports that were free a moment ago (bound to `127.0.0.1:0`, then released).
pub(crate) fn free_ports(n: usize) -> Vec<u16> {
    let held: Vec<std::net::TcpListener> = (0..n)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0"))
        .collect();
    held.iter()
        .map(|l| l.local_addr().expect("local address").port())
        .collect()
}

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
