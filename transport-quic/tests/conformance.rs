//! The transport conformance suite, run on the QUIC adapter.
//!
//! The cluster's identities: one CA per test process, with certificates for ranks 0 to 7,
//! written under cargo's `CARGO_TARGET_TMPDIR` in the layout of `CertDir`; child processes get
//! the directory in `LIFELINE_QUIC_CONFORMANCE_CERTS` and load their rank's files from it, as
//! `lifeline node` would. The suite's `Spec::secret` is unused: QUIC proves ranks with
//! certificates.

use std::net::{SocketAddr, UdpSocket};
use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant as StdInstant, SystemTime};

use bytes::Bytes;
use lifeline_core::tree::Rank;
use lifeline_core::Class;
use lifeline_transport_common::{DriverConfig, RunningNode};
use lifeline_transport_conformance as suite;
use lifeline_transport_quic::{
    probe, probe_endpoint, spawn, AddressBook as QuicBook, ClusterCa, ClusterId, QuicConfig,
    QuicEndpoint, RankIdentity,
};
use suite::{Book, Intruder, RawOutcome, Spec, Transport};

const CERTS_ENV: &str = "LIFELINE_QUIC_CONFORMANCE_CERTS";
const RANKS: u32 = 8;

fn cluster() -> ClusterId {
    ClusterId::new("conformance").expect("cluster id")
}

/// The certificate directory: the parent's (made once), or the one the parent named.
fn certs() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        if let Ok(d) = std::env::var(CERTS_ENV) {
            return PathBuf::from(d);
        }
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("quic-conformance-{}", std::process::id()));
        let ca = ClusterCa::generate(cluster(), SystemTime::now() + Duration::from_secs(86_400))
            .expect("CA");
        ca.write(&dir).expect("write the CA");
        for r in 0..RANKS {
            ca.issue(Rank(r))
                .expect("issue")
                .write(&dir)
                .expect("write a rank");
        }
        dir
    })
}

fn identity(rank: Rank) -> RankIdentity {
    RankIdentity::load(certs(), rank, &cluster()).expect("load the rank's identity")
}

struct Quic;

/// A hand-driven dialer: a QUIC connection from `from` to `target` (rank `to`) with `id`'s
/// certificate, both hellos claiming `claim`, then `bytes` on `class`'s stream if the node
/// answered. Waits up to `within` for the node to close the connection.
///
/// A node closes the probe as a duplicate while its own dial to the claimed rank is in flight
/// (the lower rank's dial wins the tie-break). A real rank would accept that dial; the probe's
/// client-only endpoint leaves it unanswered until the node's handshake times out (the idle
/// timeout, 2.5 s of the suite's 3 s link timeout) and the node backs off. So a duplicate is
/// tried again, for up to `within` plus one link timeout.
#[allow(clippy::too_many_arguments)]
async fn raw_quic(
    id: &RankIdentity,
    claim: Rank,
    to: Rank,
    target: SocketAddr,
    from: SocketAddr,
    class: Class,
    bytes: &[u8],
    within: Duration,
) -> RawOutcome {
    let ep = probe_endpoint(from).expect("bind the raw dialer");
    let end = StdInstant::now() + within + Spec::new(1, 2).link_timeout;
    let o = loop {
        let o = probe(&ep, id, &cluster(), claim, to, target, class, bytes, within).await;
        if !o.duplicate || StdInstant::now() >= end {
            break o;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    RawOutcome {
        handshake_ok: o.handshake_ok,
        closed: o.closed,
    }
}

impl Transport for Quic {
    type Node = RunningNode;
    /// A bound UDP socket, which the node's endpoint takes over
    /// (`QuicEndpoint::from_socket`).
    type Endpoint = UdpSocket;

    /// QUIC's intruders: another CA's certificate, a wrong-rank claim, a rank outside the book.
    /// (No `Garbage`: a datagram that is no QUIC packet creates no state to refuse or count.)
    const INTRUDERS: &'static [Intruder] = &[
        Intruder::ForeignCa,
        Intruder::WrongRankClaim,
        Intruder::UnknownRank,
    ];

    /// A killed process sends no CONNECTION_CLOSE: its peers see the idle timeout, five sixths
    /// of `link_timeout`, restarted once by the survivor's own next keep-alive (up to
    /// `link_timeout / 6` after the kill), so the link goes down within `link_timeout`; 250 ms
    /// more for the timer and the observation.
    fn kill_bound(spec: &Spec) -> Duration {
        spec.link_timeout + Duration::from_millis(250)
    }

    async fn bind(addr: SocketAddr) -> (UdpSocket, SocketAddr) {
        let s = UdpSocket::bind(addr).expect("bind loopback");
        let a = s.local_addr().expect("local addr");
        (s, a)
    }

    async fn start(spec: &Spec, rank: Rank, book: &Book, ep: UdpSocket) -> RunningNode {
        let b = suite::address_book(book);
        let node = spec.node(rank);
        let cfg = QuicConfig::with_link_timeout(spec.link_timeout).expect("link timeout");
        let qbook = QuicBook::try_from(&b).expect("distinct addresses");
        let endpoint = QuicEndpoint::from_socket(&identity(rank), &cfg, ep, Some(qbook))
            .expect("start the endpoint");
        spawn(node, b, endpoint, DriverConfig::default()).expect("valid driver config")
    }

    fn child_command() -> Command {
        let mut c = Command::new(std::env::current_exe().expect("test binary"));
        c.args([
            "conformance_child",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CERTS_ENV, certs());
        c
    }

    /// Unused by the QUIC run (no `Garbage` intruder): a QUIC client without a certificate of
    /// the cluster, refused by the TLS handshake.
    async fn raw_unauthenticated(
        target: SocketAddr,
        _bytes: &[u8],
        within: Duration,
    ) -> RawOutcome {
        let ca = ClusterCa::generate(cluster(), SystemTime::now() + Duration::from_secs(3600))
            .expect("CA");
        let id = ca.identity(Rank(0)).expect("identity");
        let any = SocketAddr::from(([127, 0, 0, 1], 0));
        raw_quic(
            &id,
            Rank(0),
            Rank(0),
            target,
            any,
            Class::Control,
            &[],
            within,
        )
        .await
    }

    async fn raw_authenticated(
        _secret: &[u8],
        as_rank: Rank,
        to: Rank,
        target: SocketAddr,
        from: SocketAddr,
        class: Class,
        bytes: &[u8],
        within: Duration,
    ) -> RawOutcome {
        raw_quic(
            &identity(as_rank),
            as_rank,
            to,
            target,
            from,
            class,
            bytes,
            within,
        )
        .await
    }

    async fn raw_intruder(
        kind: Intruder,
        _spec: &Spec,
        to: Rank,
        target: SocketAddr,
        from: SocketAddr,
        within: Duration,
    ) -> RawOutcome {
        let forged = Bytes::from_static(b"\x01\x01\x00\x00\x00\x00");
        let any = SocketAddr::from(([127, 0, 0, 1], 0));
        match kind {
            Intruder::ForeignCa => {
                // The same cluster id and rank name, another CA: the TLS handshake fails.
                let other =
                    ClusterCa::generate(cluster(), SystemTime::now() + Duration::from_secs(3600))
                        .expect("CA");
                let id = other.identity(Rank(2)).expect("identity");
                raw_quic(
                    &id,
                    Rank(2),
                    to,
                    target,
                    from,
                    Class::Control,
                    &forged,
                    within,
                )
                .await
            }
            Intruder::WrongRankClaim => {
                // Rank 3's certificate, from rank 3's address, claiming rank 2.
                raw_quic(
                    &identity(Rank(3)),
                    Rank(2),
                    to,
                    target,
                    from,
                    Class::Data,
                    &forged,
                    within,
                )
                .await
            }
            Intruder::UnknownRank => {
                raw_quic(
                    &identity(Rank(7)),
                    Rank(7),
                    to,
                    target,
                    any,
                    Class::Data,
                    &forged,
                    within,
                )
                .await
            }
            other => panic!("not a QUIC intruder: {other:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_and_exchange() {
    suite::connect_and_exchange::<Quic>().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_link_order() {
    suite::per_link_order::<Quic>().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn control_not_starved() {
    suite::control_not_starved::<Quic>().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_link_down() {
    suite::sigkill_link_down::<Quic>().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_frames_closed() {
    suite::malformed_frames_closed::<Quic>().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unauthenticated_refused() {
    suite::unauthenticated_refused::<Quic>().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_rank_reported_down() {
    suite::unreachable_rank_reported_down::<Quic>().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigstop_shorter_than_bound() {
    suite::sigstop_shorter_than_bound::<Quic>().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grow_reaches_joiner() {
    suite::grow_reaches_joiner::<Quic>().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partition_link_down() {
    suite::partition_link_down::<Quic>().await;
}

/// Not a test: the body of the child process the suite spawns (a no-op otherwise).
#[test]
fn conformance_child() {
    suite::child_main::<Quic>();
}
