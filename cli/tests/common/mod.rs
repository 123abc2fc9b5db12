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
