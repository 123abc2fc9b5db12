//! The transport conformance suite, run on the TCP adapter.

use std::net::SocketAddr;
use std::process::Command;
use std::time::Duration;

use lifeline_core::tree::Rank;
use lifeline_core::Class;
use lifeline_transport_conformance as suite;
use lifeline_transport_tcp::{probe, spawn, ClusterKey, TcpConfig, TcpNode};
use suite::{Book, RawOutcome, Spec, Transport};
use tokio::net::TcpListener;

struct Tcp;

fn config(spec: &Spec) -> TcpConfig {
    TcpConfig {
        link_timeout: spec.link_timeout,
        ..TcpConfig::default()
    }
}

impl Transport for Tcp {
    type Node = TcpNode;
    type Endpoint = TcpListener;

    async fn bind(addr: SocketAddr) -> (TcpListener, SocketAddr) {
        let l = TcpListener::bind(addr).await.expect("bind loopback");
        let a = l.local_addr().expect("local addr");
        (l, a)
    }

    async fn start(spec: &Spec, rank: Rank, book: &Book, ep: TcpListener) -> TcpNode {
        let b = suite::address_book(book);
        let node = spec.node(rank);
        let key = ClusterKey::from_secret(&spec.secret).expect("key");
        spawn(node, b, key, config(spec), ep)
    }

    fn child_command() -> Command {
        let mut c = Command::new(std::env::current_exe().expect("test binary"));
        c.args([
            "conformance_child",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ]);
        c
    }

    async fn raw_unauthenticated(target: SocketAddr, bytes: &[u8], within: Duration) -> RawOutcome {
        let o = probe::unauthenticated(target, bytes, within).await;
        RawOutcome {
            handshake_ok: o.handshake_ok,
            closed: o.closed,
        }
    }

    #[allow(clippy::too_many_arguments)]
    async fn raw_authenticated(
        secret: &[u8],
        as_rank: Rank,
        to: Rank,
        target: SocketAddr,
        _from: SocketAddr,
        class: Class,
        bytes: &[u8],
        within: Duration,
    ) -> RawOutcome {
        let key = ClusterKey::from_secret(secret).expect("key");
        let o = probe::authenticated(&key, as_rank, to, target, class, bytes, within).await;
        RawOutcome {
            handshake_ok: o.handshake_ok,
            closed: o.closed,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_and_exchange() {
    suite::connect_and_exchange::<Tcp>().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_link_order() {
    suite::per_link_order::<Tcp>().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn control_not_starved() {
    suite::control_not_starved::<Tcp>().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_link_down() {
    suite::sigkill_link_down::<Tcp>().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_frames_closed() {
    suite::malformed_frames_closed::<Tcp>().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unauthenticated_refused() {
    suite::unauthenticated_refused::<Tcp>().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_rank_reported_down() {
    suite::unreachable_rank_reported_down::<Tcp>().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigstop_shorter_than_bound() {
    suite::sigstop_shorter_than_bound::<Tcp>().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grow_reaches_joiner() {
    suite::grow_reaches_joiner::<Tcp>().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partition_link_down() {
    suite::partition_link_down::<Tcp>().await;
}

/// Not a test: the body of the child process `sigkill_link_down` spawns (a no-op otherwise).
#[test]
fn conformance_child() {
    suite::child_main::<Tcp>();
}
