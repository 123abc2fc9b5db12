//! The transport conformance suite on the composite link: TCP control on 127.0.0.1, the data
//! class on queue pairs of one in-process [`MockFabric`] shared by every node of this test
//! binary (queue pair numbers are fabric-wide, so concurrent tests do not meet), stepped by
//! one pump thread.
//!
//! Run here: the in-process tests. Not run: the tests that start nodes in child processes
//! (`sigkill_link_down`, `sigstop_shorter_than_bound`, `partition_link_down`,
//! `grow_reaches_joiner`'s children): a child cannot reach an in-process mock fabric, so they
//! wait for real verbs (stated in the suite's docs). `malformed_frames_closed` is not run
//! either: on this link an authenticated data-slot connection carries a QP details record,
//! not frames (its malformed input is refused by `wire::decode`, tested in the crate).

use std::net::SocketAddr;
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use lifeline_core::tree::Rank;
use lifeline_core::Class;
use lifeline_transport_common::RunningNode;
use lifeline_transport_conformance as suite;
use lifeline_transport_rdma::{spawn, MockFabric, RdmaConfig};
use lifeline_transport_tcp::{probe, ClusterKey, TcpConfig};
use suite::{Book, RawOutcome, Spec, Transport};
use tokio::net::TcpListener;

struct Rdma;

/// The tests of this binary run one at a time: they share one fabric and its pump thread, and
/// `control_not_starved`'s 48 MiB through the mock would otherwise starve the others' timing
/// bounds on a small machine.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The fabric of this test binary and its pump thread (started once, runs until exit).
fn fabric() -> &'static MockFabric {
    static F: OnceLock<MockFabric> = OnceLock::new();
    F.get_or_init(|| {
        let f = MockFabric::new(42);
        let pumped = f.clone();
        std::thread::spawn(move || loop {
            pumped.run(100_000);
            std::thread::sleep(Duration::from_micros(100));
        });
        f
    })
}

impl Transport for Rdma {
    type Node = RunningNode;
    type Endpoint = TcpListener;

    async fn bind(addr: SocketAddr) -> (TcpListener, SocketAddr) {
        let l = TcpListener::bind(addr).await.expect("bind loopback");
        let a = l.local_addr().expect("local addr");
        (l, a)
    }

    async fn start(spec: &Spec, rank: Rank, book: &Book, ep: TcpListener) -> RunningNode {
        let b = suite::address_book(book);
        let node = spec.node(rank);
        let key = ClusterKey::from_secret(&spec.secret).expect("key");
        let tcp = TcpConfig {
            link_timeout: spec.link_timeout,
            ..TcpConfig::default()
        };
        let verbs = fabric().endpoint();
        spawn(node, b, key, tcp, RdmaConfig::default(), verbs, ep).node
    }

    fn child_command() -> Command {
        // Only the suite's child-process tests call this, and none is run here (module docs).
        panic!("child processes cannot share the in-process mock fabric")
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
    let _one = SERIAL.lock().await;
    suite::connect_and_exchange::<Rdma>().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_link_order() {
    let _one = SERIAL.lock().await;
    suite::per_link_order::<Rdma>().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn control_not_starved() {
    let _one = SERIAL.lock().await;
    suite::control_not_starved::<Rdma>().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unauthenticated_refused() {
    let _one = SERIAL.lock().await;
    suite::unauthenticated_refused::<Rdma>().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_rank_reported_down() {
    let _one = SERIAL.lock().await;
    suite::unreachable_rank_reported_down::<Rdma>().await;
}
