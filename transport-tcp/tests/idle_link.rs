//! An idle link survives packet loss shorter than the link timeout, and still goes down when
//! the loss lasts (issue #21).
//!
//! Two real nodes (ranks 0 and 1, a tree link, the heartbeat detector off: the link's loss
//! would be a death) on their own loopback addresses, `link_timeout` 1 s, nothing sent by the
//! application. An nftables rule drops every packet between the two addresses, both ways, four
//! times for 500 ms, 1.75 s apart. The rule is on the *input* hook: a silent loss, as in a
//! network (a drop on the output hook fails the sender's transmit with `EPERM`, which Linux
//! handles with its zero-window probe timer, whose `TCP_USER_TIMEOUT` clock is not reset by
//! the next acknowledgement: a second such blackhole then ends a connection that was idle when
//! it began, on a 6.18 kernel). The link must stay up: the writer's keepalive frame keeps data
//! in flight on an idle connection, which TCP retransmits after the blackhole. Before the fix
//! the kernel's 1 s keepalive probes fell into at least two of the blackholes, and a lost probe
//! ended the link at the next probe. Then a blackhole that lasts: both ends must report the
//! link down within `link_timeout`, one keepalive interval, one retransmission timeout and
//! some slack (the kernel's keepalive no longer does this for them).
//!
//! Needs the `nft` binary and root; otherwise skipped with one loud line, or failed under
//! `LIFELINE_REQUIRE_NFT=1` (set by `.ci/run`, which installs nftables).
#![cfg(target_os = "linux")]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use lifeline_core::tree::Rank;
use lifeline_core::{Config, Instant, Node};
use lifeline_transport_tcp::{spawn, AddressBook, ClusterKey, Output, TcpConfig, TcpNode};
use tokio::net::TcpListener;
use tokio::time::Instant as Tick;

// The shared skip-or-fail rules for tests that need system tools.
#[path = "../../cli/tests/common/mod.rs"]
mod common;

const A: &str = "127.0.1.41";
const B: &str = "127.0.1.42";

/// This test's nftables table: one output chain; deleted when dropped.
struct Table {
    nft: PathBuf,
    name: String,
}

impl Table {
    fn new(nft: &Path) -> Self {
        let t = Self {
            nft: nft.to_path_buf(),
            name: format!("lifeline_idle_{}", std::process::id()),
        };
        t.run(&["add", "table", "inet", &t.name]);
        let hook = "{ type filter hook input priority 0; }";
        t.run(&["add", "chain", "inet", &t.name, "out", hook]);
        t
    }

    fn run(&self, args: &[&str]) -> String {
        let out = Command::new(&self.nft)
            .args(args)
            .output()
            .expect("run nft");
        assert!(
            out.status.success(),
            "nft {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Drops every packet between `A` and `B`, both ways (one nft command).
    fn blackhole(&self) {
        let rule = |s: &str, d: &str| {
            format!(
                "add rule inet {} out ip saddr {s} ip daddr {d} counter drop",
                self.name
            )
        };
        self.run(&[&format!("{}; {}", rule(A, B), rule(B, A))]);
    }

    /// Removes the rules (one nft command); returns the packets they dropped.
    fn heal(&self) -> u64 {
        let chain = format!("chain inet {} out", self.name);
        let listing = self.run(&[&format!("list {chain}; flush {chain}")]);
        listing
            .split_whitespace()
            .collect::<Vec<_>>()
            .windows(2)
            .filter(|w| w[0] == "packets")
            .map(|w| w[1].parse::<u64>().expect("a packet count"))
            .sum()
    }
}

impl Drop for Table {
    fn drop(&mut self) {
        let _ = Command::new(&self.nft)
            .args(["delete", "table", "inet", &self.name])
            .output();
    }
}

/// Ranks 0 (at `A`) and 1 (at `B`), `link_timeout` 1 s, detector off.
async fn pair() -> (TcpNode, TcpNode) {
    let l0 = TcpListener::bind((A, 0)).await.unwrap();
    let l1 = TcpListener::bind((B, 0)).await.unwrap();
    let mut book = AddressBook::new();
    book.insert(Rank(0), l0.local_addr().unwrap());
    book.insert(Rank(1), l1.local_addr().unwrap());
    let key = ClusterKey::from_secret(b"idle").unwrap();
    let cfg = TcpConfig {
        link_timeout: Duration::from_secs(1),
        ..TcpConfig::default()
    };
    let node = |r| Node::new(Config::new(2, 2), Rank(r), 1, Instant::ZERO).unwrap();
    let n0 = spawn(node(0), book.clone(), key.clone(), cfg.clone(), l0);
    let n1 = spawn(node(1), book, key, cfg, l1);
    (n0, n1)
}

/// Waits for `n`'s link to `peer` to come up.
async fn link_up(n: &mut TcpNode, peer: Rank) {
    tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match n.outputs.recv().await {
                Some(Output::LinkUp { peer: p, .. }) if p == peer => break,
                Some(Output::LinkDown {
                    peer: p, reason, ..
                }) if p == peer => {
                    panic!("link to {p:?} down before it came up: {reason:?}")
                }
                Some(_) => {}
                None => panic!("node stopped"),
            }
        }
    })
    .await
    .expect("the link comes up");
}

/// Every link down `n` reported so far (its outputs drained).
fn downs(n: &mut TcpNode) -> Vec<String> {
    let mut v = Vec::new();
    while let Ok(o) = n.outputs.try_recv() {
        if let Output::LinkDown { peer, reason, .. } = o {
            v.push(format!("{peer:?} {reason:?}"));
        }
    }
    v
}

/// How long after `t0` `n` reported a link down.
async fn gone(n: &mut TcpNode, t0: Tick) -> Duration {
    loop {
        match n.outputs.recv().await {
            Some(Output::LinkDown { peer, .. }) if peer.0 < 2 => break t0.elapsed(),
            Some(_) => {}
            None => panic!("node stopped"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_link_survives_short_blackholes_and_not_a_lasting_one() {
    let test = "an_idle_link_survives_short_blackholes_and_not_a_lasting_one";
    let Some(nft) = common::tool(test, common::NFT) else {
        return;
    };
    let table = Table::new(&nft);
    let (mut n0, mut n1) = pair().await;
    link_up(&mut n1, Rank(0)).await;
    link_up(&mut n0, Rank(1)).await;
    // Idle past the link timeout first: the case that used to fail.
    tokio::time::sleep(Duration::from_millis(1500)).await;

    let mut dropped = 0;
    for round in 0..4 {
        let t = Tick::now();
        table.blackhole();
        tokio::time::sleep_until(t + Duration::from_millis(500)).await;
        let d = table.heal();
        let took = t.elapsed();
        dropped += d;
        // 1.75 s a round: the kernel's 1 s keepalive probes (before the fix) fell into a
        // blackhole in at least two of the four rounds, whatever their phase.
        tokio::time::sleep_until(t + Duration::from_millis(1750)).await;
        let (d0, d1) = (downs(&mut n0), downs(&mut n1));
        eprintln!("blackhole {round}: at most {took:?}, {d} packets dropped; downs {d0:?} {d1:?}");
        assert!(
            d0.is_empty() && d1.is_empty(),
            "blackhole {round} of 500 ms ended the idle link: rank 0 {d0:?}, rank 1 {d1:?}"
        );
    }
    // The rules did drop traffic: keepalive frames (or their retransmissions) each time.
    assert!(dropped >= 4, "only {dropped} packets dropped");
    let (s0, s1) = (n0.handle.stats(), n1.handle.stats());
    eprintln!("rank 0 {s0:?}\nrank 1 {s1:?}");
    // 8.5 s idle at one keepalive per 250 ms per connection (the floor; two connections, one
    // end of each sends): ~68 in all.
    let out = s0.keepalives_out + s1.keepalives_out;
    assert!(out >= 40, "{out} keepalives");
    // Read at the other end (but for those in flight as the counters were read).
    assert!(
        s0.keepalives_in + s1.keepalives_in + 4 >= out,
        "{s0:?} {s1:?}"
    );
    for s in [&s0, &s1] {
        assert_eq!((s.link_ups, s.link_downs), (1, 0), "{s:?}");
    }

    // A blackhole that lasts: both ends give the link up, bounded by the link timeout plus
    // one keepalive interval (data in flight unacknowledged for the link timeout), plus slack
    // for a loaded machine.
    let t0 = Tick::now();
    table.blackhole();
    let limit = Duration::from_millis(2500);
    let (g0, g1) = tokio::join!(
        tokio::time::timeout(limit, gone(&mut n0, t0)),
        tokio::time::timeout(limit, gone(&mut n1, t0))
    );
    eprintln!("lasting blackhole: link down after {g0:?} (rank 0), {g1:?} (rank 1)");
    let (g0, g1) = (
        g0.expect("rank 0 sees the link down"),
        g1.expect("rank 1 too"),
    );
    assert!(g0 >= Duration::from_millis(600) && g1 >= Duration::from_millis(600));
    table.heal();
    n0.handle.shutdown().await;
    n1.handle.shutdown().await;
}
