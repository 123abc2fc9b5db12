//! The transport conformance suite: the behaviour every Lifeline adapter (TCP, QUIC, and
//! in part RDMA over a mock fabric) must show on loopback, written once and run by each adapter's tests.
//!
//! An adapter implements [`Transport`] (start a node on a pre-bound loopback endpoint, spawn one
//! in a child process, open raw connections) and [`TestNode`] (commands, observations,
//! counters), then calls each test function from its `tests/conformance.rs`:
//!
//! ```ignore
//! #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
//! async fn connect_and_exchange() {
//!     lifeline_transport_conformance::connect_and_exchange::<MyTransport>().await;
//! }
//! // Child processes re-run the test binary with this one test selected.
//! #[test]
//! fn conformance_child() {
//!     lifeline_transport_conformance::child_main::<MyTransport>();
//! }
//! ```
//!
//! | test | what it checks |
//! |---|---|
//! | [`connect_and_exchange`] | 4 nodes: xcasts from every origin are delivered exactly once everywhere and complete |
//! | [`per_link_order`] | floods of mixed sizes both ways over one link arrive in send order, once |
//! | [`control_not_starved`] | a control frame overtakes a 48 MiB data backlog between the same two nodes |
//! | [`sigkill_link_down`] | a node in a child process killed with SIGKILL: link-down at its neighbours within the bound ([`Transport::kill_bound`]: QUIC has no FIN/RST, so its idle timeout, within `link_timeout` plus timer slack); survivors continue |
//! | [`malformed_frames_closed`] | an authenticated peer sending a bad envelope or an oversized length is closed and counted; the node carries on |
//! | [`unauthenticated_refused`] | every [`Transport::INTRUDERS`] (TCP: garbage, a wrong key, an unknown rank; QUIC: another CA's certificate, a wrong-rank claim, an unknown rank) is refused and counted; nothing reaches the core |
//! | [`unreachable_rank_reported_down`] | a rank that never starts is reported down after bounded re-dials, and never dialed again (TCP: refused dials; QUIC, which has no "refused": dials that time out after `connect_timeout`) |
//! | [`sigstop_shorter_than_bound`] | a node paused (SIGSTOP) for a third of the bound, then resumed, loses no link and keeps working |
//! | [`grow_reaches_joiner`] | a rank started as a joiner is added to a running two-node cluster by a grow: it links up with its parent, its xcast reaches the others and a RELM message reaches it |
//! | [`partition_link_down`] | two nodes in two network namespaces; their veth goes down (no FIN, no RST): both see link-down within the bound (skipped where namespaces cannot be made) |
//!
//! Every test is bounded in time and uses only 127.0.0.1.
//!
//! **RDMA (TCP control + mock data plane)** runs the in-process tests only
//! (`transport-rdma/tests/conformance.rs`): [`connect_and_exchange`], [`per_link_order`],
//! [`control_not_starved`], [`unauthenticated_refused`], [`unreachable_rank_reported_down`].
//! Its data plane is an in-process `MockFabric`, which a child process cannot reach, so the
//! child-process tests ([`sigkill_link_down`], [`sigstop_shorter_than_bound`],
//! [`partition_link_down`], [`grow_reaches_joiner`]) wait for real verbs; and
//! [`malformed_frames_closed`] does not apply as written, since an authenticated data-slot
//! connection carries a QP details record there, not frames.
#![forbid(unsafe_code)]
#![warn(missing_docs)]
// The traits are used only from tests, awaited in place (never spawned), so their futures need
// not be `Send`.
#![allow(async_fn_in_trait)]

mod child;
mod grow;
mod process;
mod running;

pub use child::child_main;
pub use grow::grow_reaches_joiner;
pub use process::{partition_link_down, sigstop_shorter_than_bound};

use child::spawn_child;
use lifeline_core::FloodEvent;
use lifeline_core::XcastEvent;
use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant as StdInstant};

use bytes::{BufMut, Bytes, BytesMut};
use lifeline_core::tree::{Rank, RankSet};
use lifeline_core::wire::{FloodMsg, Message};
use lifeline_core::{Class, Config, Event, Instant, Node, Stats};

/// The cluster every node of a test shares.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Spec {
    /// Ranks in the cluster.
    pub span: u32,
    /// Tree radix.
    pub radix: u32,
    /// The cluster secret (the adapter derives its key from it).
    pub secret: Vec<u8>,
    /// The bound within which a lost peer must surface as link-down.
    pub link_timeout: Duration,
    /// The node joins a running cluster ([`Config::joiner`]): the others add it with a grow.
    pub joiner: bool,
}

impl Spec {
    /// `span` ranks, radix `radix`, the suite's secret, a 3 s bound, not a joiner.
    pub fn new(span: u32, radix: u32) -> Self {
        Self {
            span,
            radix,
            secret: b"lifeline conformance secret".to_vec(),
            link_timeout: Duration::from_secs(3),
            joiner: false,
        }
    }

    /// The core configuration a node of this spec runs: span, radix and the joiner flag, the
    /// rest default.
    pub fn config(&self) -> Config {
        let mut c = Config::new(self.span, self.radix);
        c.joiner = self.joiner;
        c
    }

    /// The core node `rank` of this spec runs (its [`Spec::config`], seed `rank + 1`, time
    /// zero): what every [`Transport::start`] hands its adapter.
    pub fn node(&self, rank: Rank) -> Node {
        Node::new(self.config(), rank, u64::from(rank.0) + 1, Instant::ZERO).expect("valid config")
    }
}

/// `book` as the shared driver's address book (the adapters built on `lifeline-transport-common`
/// dial by it).
pub fn address_book(book: &Book) -> lifeline_transport_common::AddressBook {
    let mut b = lifeline_transport_common::AddressBook::new();
    for (r, a) in book {
        b.insert(*r, *a);
    }
    b
}

/// Every rank's loopback address.
pub type Book = BTreeMap<Rank, SocketAddr>;

/// What a node reports: the core's events and the adapter's link changes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Observed {
    /// A core event.
    Event(Event),
    /// The link to a peer came up (reported to the core).
    LinkUp(Rank),
    /// The link to a peer went down.
    LinkDown(Rank),
}

/// The adapter counters the suite checks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Connections refused during the handshake (garbage, wrong key, unknown rank).
    pub handshakes_refused: u64,
    /// Authenticated connections closed for a malformed or oversized frame header.
    pub malformed: u64,
    /// Links reported down to the core.
    pub link_downs: u64,
    /// Connection attempts made (dials).
    pub dials: u64,
}

/// What happened to a raw connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RawOutcome {
    /// The handshake completed (always false for unauthenticated sends).
    pub handshake_ok: bool,
    /// The node closed the connection before the wait ran out.
    pub closed: bool,
}

/// A running node under test.
pub trait TestNode {
    /// Its rank.
    fn rank(&self) -> Rank;
    /// Runs an application command on the node; `Err` when the adapter refused it (e.g.
    /// back-pressure).
    async fn command<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Node, Instant) -> R + Send + 'static,
    ) -> Result<R, String>;
    /// The core's counters (never refused).
    async fn core_stats(&self) -> Stats;
    /// The next observation, if one is waiting.
    fn try_next(&mut self) -> Option<Observed>;
    /// Sends a frame to `to` on `class` as if the core had produced it.
    async fn send_raw(&self, to: Rank, class: Class, frame: Bytes) -> Result<(), String>;
    /// The adapter's counters.
    fn counters(&self) -> Counters;
    /// A grow: adds `peers`' addresses to the node's book, then grows its span to `new_span`.
    async fn grow(&self, new_span: u32, peers: &Book) -> Result<(), String>;
    /// Stops the node (its peers see the link go down).
    async fn stop(self);
}

/// An adapter under test.
pub trait Transport {
    /// Its running node.
    type Node: TestNode;
    /// A bound, not yet used local endpoint (e.g. a TCP listener).
    type Endpoint;
    /// Binds `addr` (127.0.0.1, port 0 for any); returns the endpoint and its address.
    async fn bind(addr: SocketAddr) -> (Self::Endpoint, SocketAddr);
    /// Starts `rank` on `ep`, dialing the others by `book`.
    async fn start(spec: &Spec, rank: Rank, book: &Book, ep: Self::Endpoint) -> Self::Node;
    /// A command that runs [`child_main`] in a new process (typically this test binary with
    /// only the `conformance_child` test selected). The suite adds the environment.
    fn child_command() -> Command;
    /// Connects to `target` without any handshake, writes `bytes`, and waits up to `within`
    /// for the node to close the connection.
    async fn raw_unauthenticated(target: SocketAddr, bytes: &[u8], within: Duration) -> RawOutcome;
    /// Connects to `target` (rank `to`) from `from` (`as_rank`'s address in the book, free:
    /// nothing runs there), runs the handshake as `as_rank` with `secret` (TCP: the cluster
    /// key; QUIC: `as_rank`'s certificate from the cluster CA, the secret unused) on `class`,
    /// writes `bytes` verbatim after the handshake, and waits up to `within` for the node to
    /// close it.
    #[allow(clippy::too_many_arguments)]
    async fn raw_authenticated(
        secret: &[u8],
        as_rank: Rank,
        to: Rank,
        target: SocketAddr,
        from: SocketAddr,
        class: Class,
        bytes: &[u8],
        within: Duration,
    ) -> RawOutcome;

    /// The bound within which [`sigkill_link_down`] requires a SIGKILLed peer's link-down:
    /// `spec.link_timeout` by default (TCP: the kernel sends FIN or RST at once). QUIC: a
    /// killed process sends no close, so its peers notice by the idle timeout (set so that,
    /// restarted once by their own next keep-alive, it fires within `link_timeout`), plus
    /// slack for the timer.
    fn kill_bound(spec: &Spec) -> Duration {
        spec.link_timeout
    }

    /// The intruders [`unauthenticated_refused`] tries against this adapter: each must be
    /// refused and counted in `handshakes_refused`, and nothing it sends may reach the core.
    const INTRUDERS: &'static [Intruder] = &[
        Intruder::Garbage,
        Intruder::WrongSecret,
        Intruder::UnknownRank,
    ];

    /// Runs one intruder against `target` (rank `to`) with `spec`'s secret, from `from` (a
    /// book address of a rank that is dead and runs nowhere) where the intruder needs an
    /// address the node knows. The default covers [`Intruder::Garbage`] (with
    /// [`raw_unauthenticated`](Self::raw_unauthenticated)), [`Intruder::WrongSecret`] and
    /// [`Intruder::UnknownRank`] (rank 7, with [`raw_authenticated`](Self::raw_authenticated)).
    async fn raw_intruder(
        kind: Intruder,
        spec: &Spec,
        to: Rank,
        target: SocketAddr,
        from: SocketAddr,
        within: Duration,
    ) -> RawOutcome {
        match kind {
            Intruder::Garbage => {
                let garbage =
                    b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n0123456789abcdef0123456789abcdef";
                Self::raw_unauthenticated(target, garbage, within).await
            }
            Intruder::WrongSecret => {
                let f = flood_frame(Rank(2), 77, Bytes::from_static(b"forged"));
                Self::raw_authenticated(
                    b"not the cluster secret",
                    Rank(2),
                    to,
                    target,
                    from,
                    Class::Control,
                    &f,
                    within,
                )
                .await
            }
            Intruder::UnknownRank => {
                let f = flood_frame(Rank(7), 78, Bytes::from_static(b"stranger"));
                let any = SocketAddr::from(LOOPBACK);
                let secret = &spec.secret;
                Self::raw_authenticated(secret, Rank(7), to, target, any, Class::Data, &f, within)
                    .await
            }
            other => panic!("conformance: {other:?} needs the adapter's own raw_intruder"),
        }
    }
}

/// An unauthenticated peer ([`Transport::INTRUDERS`]). Which apply depends on how the adapter
/// authenticates: TCP proves a shared key, QUIC a certificate from the cluster CA naming the
/// rank.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Intruder {
    /// Bytes that are no handshake at all (TCP). QUIC has no equivalent: a datagram that is not
    /// a QUIC packet is dropped by the stack without creating any state to refuse or count.
    Garbage,
    /// The handshake with another cluster secret (TCP).
    WrongSecret,
    /// A rank outside the address book (rank 7 from an address no rank has).
    UnknownRank,
    /// A certificate for a rank of the cluster, issued by another CA (QUIC).
    ForeignCa,
    /// A certificate from the cluster CA for one rank, claiming another in its hello (QUIC).
    WrongRankClaim,
}

// ---------------------------------------------------------------------------------------------
// helpers

const CHILD_ENV: &str = "LIFELINE_CONFORMANCE_CHILD";
const LOOPBACK: ([u8; 4], u16) = ([127, 0, 0, 1], 0);

async fn bounded<F: Future>(what: &str, limit: Duration, f: F) -> F::Output {
    match tokio::time::timeout(limit, f).await {
        Ok(v) => v,
        Err(_) => panic!("conformance: {what} did not finish within {limit:?}"),
    }
}

/// A cluster: nodes started in this process, plus addresses reserved for ranks that run
/// elsewhere (a child process, a raw test peer, or nothing at all).
struct Cluster<N> {
    nodes: Vec<N>,
    book: Book,
}

impl<N: TestNode> Cluster<N> {
    fn node(&mut self, r: u32) -> &mut N {
        self.nodes
            .iter_mut()
            .find(|n| n.rank() == Rank(r))
            .expect("rank runs in this process")
    }

    fn addr(&self, r: u32) -> SocketAddr {
        self.book[&Rank(r)]
    }

    /// Polls every node until `on` (given each observation) returns true, or `within` passes.
    async fn pump(&mut self, within: Duration, mut on: impl FnMut(Rank, Observed) -> bool) -> bool {
        let end = StdInstant::now() + within;
        loop {
            let mut any = false;
            for n in &mut self.nodes {
                while let Some(o) = n.try_next() {
                    any = true;
                    if on(n.rank(), o) {
                        return true;
                    }
                }
            }
            if StdInstant::now() >= end {
                return false;
            }
            if !any {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        }
    }

    async fn stop(self) {
        for n in self.nodes {
            n.stop().await;
        }
    }
}

/// Reserves an address for every rank of `spec`, starts `local` here and leaves the others'
/// addresses free (nothing listens there until someone binds them).
async fn cluster<T: Transport>(spec: &Spec, local: &[u32]) -> Cluster<T::Node> {
    let mut eps = BTreeMap::new();
    let mut book = Book::new();
    for r in 0..spec.span {
        let (ep, addr) = T::bind(SocketAddr::from(LOOPBACK)).await;
        book.insert(Rank(r), addr);
        if local.contains(&r) {
            eps.insert(r, ep);
        }
    }
    let mut nodes = Vec::new();
    for (r, ep) in eps {
        nodes.push(T::start(spec, Rank(r), &book, ep).await);
    }
    Cluster { nodes, book }
}

/// Runs `f` until the node accepts it (back-pressure is retried), at most `within`.
async fn retry<N: TestNode, R: Send + 'static>(
    n: &N,
    within: Duration,
    f: impl Fn(&mut Node, Instant) -> R + Send + Sync + Clone + 'static,
) -> R {
    let end = StdInstant::now() + within;
    loop {
        let g = f.clone();
        match n.command(move |node, now| g(node, now)).await {
            Ok(r) => return r,
            Err(e) if StdInstant::now() < end => {
                let _ = e;
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            Err(e) => panic!("command refused for {within:?}: {e}"),
        }
    }
}

fn flood_frame(origin: Rank, id: u64, payload: Bytes) -> Bytes {
    Message::Flood(FloodMsg {
        origin,
        id,
        hops: 0,
        payload,
    })
    .encode()
}

/// Waits until every node in `ranks` has delivered one xcast from `origin` with `payload`.
async fn xcast_reaches<N: TestNode>(
    c: &mut Cluster<N>,
    origin: u32,
    ranks: &[u32],
    within: Duration,
) {
    let payload = Bytes::from(format!("after-{origin}-{}", ranks.len()));
    let p = payload.clone();
    retry(c.node(origin), within, move |n, now| {
        n.xcast(now, 16, p.clone()).expect("xcast accepted")
    })
    .await;
    let mut got = BTreeSet::new();
    let want: BTreeSet<Rank> = ranks.iter().map(|r| Rank(*r)).collect();
    let ok = c
        .pump(within, |r, o| {
            if let Observed::Event(Event::Xcast(XcastEvent::Delivered { payload: q, .. })) = o {
                if q == payload {
                    got.insert(r);
                }
            }
            got == want
        })
        .await;
    assert!(
        ok,
        "xcast from {origin} reached only {got:?} of {want:?} within {within:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// the tests

/// Four nodes on loopback: two xcasts from every origin are delivered exactly once at every
/// node, in the same op order everywhere, and each origin sees its two complete.
pub async fn connect_and_exchange<T: Transport>() {
    bounded("connect_and_exchange", Duration::from_secs(60), async {
        let spec = Spec::new(4, 2);
        let mut c = cluster::<T>(&spec, &[0, 1, 2, 3]).await;
        for k in 0..2u32 {
            for o in 0..4u32 {
                let p = Bytes::from(format!("x{o}-{k}"));
                retry(c.node(o), Duration::from_secs(10), move |n, now| {
                    n.xcast(now, 16, p.clone()).expect("xcast accepted")
                })
                .await;
            }
        }
        let mut delivered: BTreeMap<Rank, Vec<(u64, Rank, Bytes)>> = BTreeMap::new();
        let mut completed: BTreeMap<Rank, u32> = BTreeMap::new();
        let mut check = |r: Rank, o: Observed| {
            match o {
                Observed::Event(Event::Xcast(XcastEvent::Delivered {
                    op,
                    origin,
                    payload,
                    ..
                })) => delivered.entry(r).or_default().push((op, origin, payload)),
                Observed::Event(Event::Xcast(XcastEvent::Completed { .. })) => {
                    *completed.entry(r).or_default() += 1;
                }
                _ => {}
            }
            delivered.len() == 4
                && delivered.values().all(|v| v.len() >= 8)
                && completed.values().sum::<u32>() >= 8
        };
        let done = c.pump(Duration::from_secs(30), &mut check).await;
        assert!(
            done,
            "xcasts incomplete: delivered {delivered:?}, completed {completed:?}"
        );
        // Late duplicates would show up now.
        c.pump(Duration::from_millis(300), &mut check).await;
        let first = delivered[&Rank(0)].clone();
        for (r, v) in &delivered {
            assert_eq!(v.len(), 8, "rank {r} delivered {v:?}");
            assert_eq!(v, &first, "rank {r} delivered another order than rank 0");
            let set: BTreeSet<&Bytes> = v.iter().map(|(_, _, p)| p).collect();
            assert_eq!(set.len(), 8, "rank {r} delivered a payload twice");
            for (_, origin, p) in v {
                assert!(p.starts_with(format!("x{}-", origin.0).as_bytes()));
            }
        }
        assert!(completed.values().all(|n| *n == 2), "{completed:?}");
        c.stop().await;
    })
    .await;
}

/// Two nodes flood each other with 300 frames of mixed sizes (8 B to 64 KiB) at once; each
/// side receives the other's in send order, each exactly once.
pub async fn per_link_order<T: Transport>() {
    bounded("per_link_order", Duration::from_secs(90), async {
        const N: u32 = 300;
        let spec = Spec::new(2, 2);
        let mut c = cluster::<T>(&spec, &[0, 1]).await;
        let sizes = [8usize, 1000, 64 << 10, 100];
        let mut next = [0u32; 2];
        let mut seen: [Vec<u32>; 2] = [Vec::new(), Vec::new()];
        while next != [N, N] || seen.iter().any(|s| s.len() < N as usize) {
            for o in 0..2u32 {
                let k = next[o as usize];
                if k < N {
                    let mut b = BytesMut::with_capacity(sizes[k as usize % 4]);
                    b.put_u32(k);
                    b.resize(sizes[k as usize % 4].max(4), (k % 251) as u8);
                    let p = b.freeze();
                    if let Ok(r) = c.node(o).command(move |n, now| n.flood(now, p)).await {
                        r.expect("flood accepted");
                        next[o as usize] += 1;
                    }
                }
            }
            let progressed = c
                .pump(Duration::from_millis(1), |r, o| {
                    if let Observed::Event(Event::Flood(FloodEvent::Delivered {
                        origin,
                        payload,
                        ..
                    })) = o
                    {
                        if origin != r {
                            let k = u32::from_be_bytes([
                                payload[0], payload[1], payload[2], payload[3],
                            ]);
                            assert!(
                                payload[4..].iter().all(|b| *b == (k % 251) as u8),
                                "payload {k} corrupted"
                            );
                            seen[r.0 as usize].push(k);
                        }
                    }
                    false
                })
                .await;
            let _ = progressed;
        }
        for (r, s) in seen.iter().enumerate() {
            let want: Vec<u32> = (0..N).collect();
            assert_eq!(s, &want, "rank {r} received out of order or twice");
        }
        c.stop().await;
    })
    .await;
}

/// Node 0 queues 48 MiB of data-class frames to node 1 in one command (768 floods of 64 KiB),
/// then one control-class frame: the control frame arrives while most of the data is still
/// outstanding (it did not queue behind the data).
pub async fn control_not_starved<T: Transport>() {
    bounded("control_not_starved", Duration::from_secs(120), async {
        const FRAMES: u64 = 768;
        const CONTROL_ID: u64 = 9_000_000;
        let spec = Spec::new(2, 2);
        let mut c = cluster::<T>(&spec, &[0, 1]).await;
        let up = c
            .pump(Duration::from_secs(10), |r, o| {
                r == Rank(0) && o == Observed::LinkUp(Rank(1))
            })
            .await;
        assert!(up, "link 0-1 did not come up");
        let payload = Bytes::from(vec![7u8; 64 << 10]);
        let started = StdInstant::now();
        c.node(0)
            .command(move |n, now| {
                for _ in 0..FRAMES {
                    n.flood(now, payload.clone()).expect("flood accepted");
                }
            })
            .await
            .expect("data queued");
        let f = flood_frame(Rank(0), CONTROL_ID, Bytes::from_static(b"ping"));
        c.node(0)
            .send_raw(Rank(1), Class::Control, f)
            .await
            .expect("control frame queued");
        let sent = StdInstant::now();
        let mut data_seen = 0u64;
        let mut control_at: Option<(Duration, u64)> = None;
        let done = c
            .pump(Duration::from_secs(100), |r, o| {
                if r != Rank(1) {
                    return false;
                }
                if let Observed::Event(Event::Flood(FloodEvent::Delivered { id, origin, .. })) = o {
                    if id == CONTROL_ID {
                        control_at = Some((sent.elapsed(), data_seen));
                    } else if origin == Rank(0) {
                        data_seen += 1;
                    }
                }
                data_seen == FRAMES && control_at.is_some()
            })
            .await;
        let all_data = started.elapsed();
        assert!(
            done,
            "only {data_seen} of {FRAMES} data frames and control {control_at:?}"
        );
        let (latency, before) = control_at.expect("control delivered");
        eprintln!(
            "control_not_starved: control frame after {latency:?} with {before}/{FRAMES} data \
             frames delivered before it; all 48 MiB of data after {all_data:?}"
        );
        assert!(
            before < FRAMES,
            "the control frame waited for the whole data backlog ({latency:?})"
        );
        assert!(
            latency < Duration::from_secs(2),
            "control latency {latency:?}"
        );
        c.stop().await;
    })
    .await;
}

/// A 3-rank cluster (radix 2) whose root, rank 0, runs in a child process and ranks 1 and 2
/// here; returns once both have their link to the root up.
async fn root_in_child<T: Transport>(spec: &Spec) -> (child::ChildNode, Cluster<T::Node>) {
    let mut book = Book::new();
    let mut eps = Vec::new();
    for r in 0..3u32 {
        let (ep, a) = T::bind(SocketAddr::from(LOOPBACK)).await;
        book.insert(Rank(r), a);
        if r > 0 {
            eps.push((r, ep));
        }
    }
    // Rank 0's address is free again: the child binds it.
    let child = spawn_child::<T>(spec, Rank(0), &book);
    let mut nodes = Vec::new();
    for (r, ep) in eps {
        nodes.push(T::start(spec, Rank(r), &book, ep).await);
    }
    let mut c = Cluster { nodes, book };
    let mut up = BTreeSet::new();
    let ok = c
        .pump(Duration::from_secs(20), |r, o| {
            if o == Observed::LinkUp(Rank(0)) {
                up.insert(r);
            }
            up.len() == 2
        })
        .await;
    assert!(ok, "links to the child came up only at {up:?}");
    (child, c)
}

/// The root runs in a child process; its two children run here. The child is killed with
/// SIGKILL: both children see link-down within the bound, and continue (an xcast among them
/// completes after the root failover).
pub async fn sigkill_link_down<T: Transport>() {
    bounded("sigkill_link_down", Duration::from_secs(90), async {
        let spec = Spec::new(3, 2);
        let (mut child, mut c) = root_in_child::<T>(&spec).await;
        let killed = StdInstant::now();
        child.0.kill().expect("SIGKILL the child"); // std sends SIGKILL on Unix
        let _ = child.0.wait();
        let mut seen: BTreeMap<Rank, Duration> = BTreeMap::new();
        let bound = T::kill_bound(&spec);
        let ok = c
            .pump(bound + Duration::from_secs(2), |r, o| {
                if o == Observed::LinkDown(Rank(0)) {
                    seen.entry(r).or_insert_with(|| killed.elapsed());
                }
                seen.len() == 2
            })
            .await;
        eprintln!("sigkill_link_down: link-down after {seen:?}");
        assert!(ok, "link-down seen only at {seen:?}");
        for (r, d) in &seen {
            assert!(
                *d <= bound,
                "rank {r} saw the kill after {d:?}, over the bound {bound:?}"
            );
        }
        xcast_reaches(&mut c, 1, &[1, 2], Duration::from_secs(15)).await;
        drop(child);
        c.stop().await;
    })
    .await;
}

fn header(version: u8, kind: u8, len: u32) -> Vec<u8> {
    let mut h = vec![version, kind];
    h.extend_from_slice(&len.to_be_bytes());
    h
}

async fn wait_counters<N: TestNode>(
    n: &N,
    within: Duration,
    ok: impl Fn(&Counters) -> bool,
) -> Counters {
    let end = StdInstant::now() + within;
    loop {
        let c = n.counters();
        if ok(&c) || StdInstant::now() >= end {
            return c;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Ranks 0 and 1 run here; "ranks" 2 and 3 are raw peers that hold the key. Rank 2 sends node 0
/// a well-framed frame with a garbage body (the core counts a decode error, the connection
/// stays), then a header with a bad version; rank 3 sends node 1 a header announcing a 4 GiB
/// frame. Both connections are closed and counted, nothing oversized is allocated, and nodes 0
/// and 1 still complete an xcast.
pub async fn malformed_frames_closed<T: Transport>() {
    bounded("malformed_frames_closed", Duration::from_secs(60), async {
        let spec = Spec::new(4, 2); // 0 -> {1, 2}, 1 -> {3}
        let mut c = cluster::<T>(&spec, &[0, 1]).await;
        let wait = Duration::from_secs(3);

        let mut bytes = header(1, 1, 5); // a flood frame whose body cannot decode
        bytes.extend_from_slice(&[0xff; 5]);
        bytes.extend_from_slice(&header(9, 1, 4)); // bad envelope version
        let out = T::raw_authenticated(
            &spec.secret,
            Rank(2),
            Rank(0),
            c.addr(0),
            c.addr(2),
            Class::Data,
            &bytes,
            wait,
        )
        .await;
        assert!(out.handshake_ok, "{out:?}");
        assert!(
            out.closed,
            "a bad envelope version must close the connection"
        );
        let n0 = wait_counters(c.node(0), wait, |k| k.malformed >= 1).await;
        assert_eq!(n0.malformed, 1, "{n0:?}");
        let s0 = c.node(0).core_stats().await;
        assert_eq!(
            s0.dropped_decode_error, 1,
            "the garbage body reaches the core once"
        );

        let oversized = header(1, 1, u32::MAX - 16);
        let out = T::raw_authenticated(
            &spec.secret,
            Rank(3),
            Rank(1),
            c.addr(1),
            c.addr(3),
            Class::Control,
            &oversized,
            wait,
        )
        .await;
        assert!(out.handshake_ok, "{out:?}");
        assert!(out.closed, "an oversized length must close the connection");
        let n1 = wait_counters(c.node(1), wait, |k| k.malformed >= 1).await;
        assert_eq!(n1.malformed, 1, "{n1:?}");
        let s1 = c.node(1).core_stats().await;
        assert_eq!(s1.dropped_over_limit + s1.dropped_decode_error, 0, "{s1:?}");

        xcast_reaches(&mut c, 0, &[0, 1], Duration::from_secs(20)).await;
        c.stop().await;
    })
    .await;
}

/// Every intruder of [`Transport::INTRUDERS`] (TCP: garbage bytes, a handshake with the wrong
/// key, a rank outside the address book; QUIC: another CA's certificate, a right-CA certificate
/// claiming another rank, a rank outside the address book) is refused and counted; no link
/// changes, nothing reaches either core, and the two real nodes still exchange an xcast.
///
/// Ranks 2 and 3 are in the book but declared dead and run nowhere: their addresses are the
/// ones an intruder that must pass an address check connects from.
pub async fn unauthenticated_refused<T: Transport>() {
    bounded("unauthenticated_refused", Duration::from_secs(60), async {
        let spec = Spec::new(4, 2);
        let mut c = cluster::<T>(&spec, &[0, 1]).await;
        for r in [0, 1] {
            c.node(r)
                .command(|n, now| {
                    let dead: RankSet = [Rank(2), Rank(3)].into_iter().collect();
                    n.declare_dead(now, &dead)
                })
                .await
                .expect("running")
                .expect("ranks 2 and 3 declared dead");
        }
        let up = c
            .pump(Duration::from_secs(10), |r, o| {
                r == Rank(0) && o == Observed::LinkUp(Rank(1))
            })
            .await;
        assert!(up, "link 0-1 did not come up");
        let wait = Duration::from_secs(5);
        for (i, &kind) in T::INTRUDERS.iter().enumerate() {
            let from = c.addr(2 + (i as u32 % 2));
            let out = T::raw_intruder(kind, &spec, Rank(0), c.addr(0), from, wait).await;
            assert!(
                !out.handshake_ok && out.closed,
                "{kind:?} must be refused: {out:?}"
            );
        }
        let n = T::INTRUDERS.len() as u64;
        let k = wait_counters(c.node(0), wait, |k| k.handshakes_refused >= n).await;
        assert_eq!(k.handshakes_refused, n, "{k:?}");
        assert_eq!(k.link_downs, 0, "{k:?}");
        let s = c.node(0).core_stats().await;
        assert_eq!(
            s.dropped_unknown_peer + s.dropped_decode_error + s.dropped_unknown_kind,
            0,
            "{s:?}"
        );
        xcast_reaches(&mut c, 1, &[0, 1], Duration::from_secs(10)).await;
        let mut downs = Vec::new();
        c.pump(Duration::from_millis(100), |r, o| {
            if let Observed::LinkDown(p) = o {
                downs.push((r, p));
            }
            false
        })
        .await;
        assert!(downs.is_empty(), "links went down: {downs:?}");
        c.stop().await;
    })
    .await;
}

/// Rank 2 never starts. Node 0 broadcasts; its forward to its child 2 dials, fails, re-dials
/// with back-off, and after the adapter's bounded attempts reports the link down (TCP: each
/// dial is refused at once; QUIC: each dial times out after its `connect_timeout`, since QUIC
/// has no "connection refused", so the report comes after `dial_attempts` timeouts); the core
/// repairs, the xcast completes at 0 and 1, and the dead rank is never dialed again.
pub async fn unreachable_rank_reported_down<T: Transport>() {
    bounded(
        "unreachable_rank_reported_down",
        Duration::from_secs(60),
        async {
            let spec = Spec::new(3, 2); // 0 -> {1, 2}
            let mut c = cluster::<T>(&spec, &[0, 1]).await;
            let started = StdInstant::now();
            let payload = Bytes::from_static(b"to everyone");
            let p = payload.clone();
            retry(c.node(0), Duration::from_secs(5), move |n, now| {
                n.xcast(now, 16, p.clone()).expect("xcast accepted")
            })
            .await;
            let mut down_at = None;
            let mut got = BTreeSet::new();
            let ok = c
                .pump(Duration::from_secs(30), |r, o| {
                    match o {
                        Observed::LinkDown(Rank(2)) if r == Rank(0) => {
                            down_at.get_or_insert(started.elapsed());
                        }
                        Observed::Event(Event::Xcast(XcastEvent::Delivered {
                            payload: q, ..
                        })) if q == payload => {
                            got.insert(r);
                        }
                        _ => {}
                    }
                    down_at.is_some() && got.len() == 2
                })
                .await;
            assert!(
                ok,
                "link-down of the missing rank: {down_at:?}; delivered at {got:?}"
            );
            eprintln!("unreachable_rank_reported_down: reported down after {down_at:?}");
            let dials = c.node(0).counters().dials;
            assert!(dials >= 2, "re-dialed before giving up: {dials}");
            let dead = c
                .node(0)
                .command(|n, _| !n.tree().is_alive(Rank(2)))
                .await
                .expect("inspect");
            assert!(dead, "the core presumes the unreachable child dead");
            // More traffic never dials the dead rank again.
            xcast_reaches(&mut c, 0, &[0, 1], Duration::from_secs(10)).await;
            tokio::time::sleep(Duration::from_millis(300)).await;
            assert_eq!(
                c.node(0).counters().dials,
                dials,
                "a dead rank was dialed again"
            );
            c.stop().await;
        },
    )
    .await;
}
