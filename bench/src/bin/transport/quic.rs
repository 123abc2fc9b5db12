//! `transport quic`: the QUIC adapter's paths and raw quinn baselines, between the same two
//! sides as the TCP mode and timed by the same `measure`.
//!
//! **Adapter path**: the TCP mode's, with both nodes on `lifeline_transport_quic` (default
//! `QuicConfig`, identities from one `ClusterCa`, an address book).
//!
//! **Raw path**: one quinn connection between two endpoints built with the identity layer's own
//! `server_config` / `client_config` (the same mutual TLS, ALPN and transport parameters as the
//! adapter), one stream carrying `u32 length + payload` frames. The writer
//! gathers frames into `io_buffer`-sized (256 KiB) writes: small frames are copied into one
//! buffer, frames of 4 KiB or more go by reference (`write_all_chunks`), as the adapter's writer
//! does. The reader reads into one `BytesMut` and splits each frame off as its own `Bytes`,
//! checking its length against `max_frame`.
//!
//! **Raw path driving the same cores**: that stream, with node 0's flood frames written and
//! node 1 handling what is read (`wire::frame_len`), as in the TCP mode.

use std::net::SocketAddr;
use std::time::{Duration, Instant as StdInstant, SystemTime};

use bytes::{BufMut, Bytes, BytesMut};
use lifeline_core::tree::Rank;
use lifeline_core::{Config, Instant, Node};
use lifeline_transport_common::{AddressBook, DriverConfig};
use lifeline_transport_quic::{
    client_config, server_config, server_name, spawn, AddressBook as QuicBook, ClusterCa,
    ClusterId, QuicConfig, QuicEndpoint, RankIdentity,
};

use super::{adapter_path, max_frame, Path, Side};

/// Bytes gathered per write, and the reader's buffer: the TCP mode's `io_buffer`.
const CAP: usize = 256 * 1024;
/// Frames this long or longer are written by reference, not copied.
const BY_REF: usize = 4096;

fn cluster() -> ClusterId {
    ClusterId::new("bench").unwrap()
}

/// Ranks 0 and 1 of a fresh cluster CA.
fn identities() -> (RankIdentity, RankIdentity) {
    let ca =
        ClusterCa::generate(cluster(), SystemTime::now() + Duration::from_secs(86_400)).unwrap();
    (ca.identity(Rank(0)).unwrap(), ca.identity(Rank(1)).unwrap())
}

fn udp() -> std::net::UdpSocket {
    let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    s.set_nonblocking(true).unwrap();
    s
}

/// The QUIC adapter's two nodes, for [`adapter_path`].
pub(super) fn adapter(a: &Side, b: &Side, size: usize) -> Path {
    let (id0, id1) = identities();
    let (s0, s1) = (udp(), udp());
    let mut book = AddressBook::new();
    book.insert(Rank(0), s0.local_addr().unwrap());
    book.insert(Rank(1), s1.local_addr().unwrap());
    let book0 = book.clone();
    let start = |id: RankIdentity, s: std::net::UdpSocket, book: AddressBook| {
        move |n: Node| {
            let qbook = QuicBook::try_from(&book).unwrap();
            let ep =
                QuicEndpoint::from_socket(&id, &QuicConfig::default(), s, Some(qbook)).unwrap();
            spawn(n, book, ep, DriverConfig::default()).unwrap()
        }
    };
    adapter_path(a, b, size, start(id0, s0, book0), start(id1, s1, book))
}

/// Gathers length-prefixed frames into writes of about [`CAP`] bytes.
struct Gather {
    buf: BytesMut,
    chunks: Vec<Bytes>,
    pending: usize,
}

impl Gather {
    fn new() -> Self {
        Self {
            buf: BytesMut::with_capacity(CAP),
            chunks: Vec::new(),
            pending: 0,
        }
    }

    /// Queues `head` (copied) then `body` (by reference when long); writes when full.
    async fn put(&mut self, s: &mut quinn::SendStream, head: &[u8], body: &Bytes) {
        self.buf.put_slice(head);
        if body.len() >= BY_REF {
            self.chunks.push(self.buf.split().freeze());
            self.chunks.push(body.clone());
        } else {
            self.buf.put_slice(body);
        }
        self.pending += head.len() + body.len();
        if self.pending >= CAP {
            self.flush(s).await;
        }
    }

    async fn flush(&mut self, s: &mut quinn::SendStream) {
        if !self.buf.is_empty() {
            self.chunks.push(self.buf.split().freeze());
        }
        self.chunks.retain(|c| !c.is_empty());
        s.write_all_chunks(&mut self.chunks).await.unwrap();
        self.chunks.clear();
        self.pending = 0;
        if self.buf.capacity() < CAP / 2 {
            self.buf.reserve(CAP);
        }
    }
}

/// A quinn connection from side A (rank 0's identity) to side B (rank 1's): the sender gets the
/// send half of a stream, the receiver its receive half.
fn raw_with<SF, RF, S, R>(a: &Side, b: &Side, sender: S, receiver: R) -> Path
where
    S: FnOnce(
            quinn::SendStream,
            tokio::sync::mpsc::Receiver<u64>,
            tokio::sync::mpsc::Sender<()>,
        ) -> SF
        + Send
        + 'static,
    R: FnOnce(
            quinn::RecvStream,
            tokio::sync::mpsc::Receiver<u64>,
            tokio::sync::mpsc::Sender<()>,
        ) -> RF
        + Send
        + 'static,
    SF: std::future::Future<Output = ()> + Send + 'static,
    RF: std::future::Future<Output = ()> + Send + 'static,
{
    let (id0, id1) = identities();
    let cfg = QuicConfig::default();
    let server = server_config(&id1, &cfg).unwrap();
    let client = client_config(&id0, &cfg).unwrap();
    let (sa, sb) = (udp(), udp());
    let addr: SocketAddr = sb.local_addr().unwrap();
    let runtime = || std::sync::Arc::new(quinn::TokioRuntime);
    Path::new(
        a,
        b,
        move |go, done| async move {
            let ep = quinn::Endpoint::new(Default::default(), None, sa, runtime()).unwrap();
            let conn = ep
                .connect_with(client, addr, &server_name(Rank(1), &cluster()))
                .unwrap()
                .await
                .unwrap();
            // Bidirectional: the adapter's transport parameters allow no unidirectional streams.
            let (s, _unused) = conn.open_bi().await.unwrap();
            sender(s, go, done).await;
            conn.close(0u32.into(), b"done");
        },
        move |go, done| async move {
            let ep = quinn::Endpoint::new(Default::default(), Some(server), sb, runtime()).unwrap();
            let conn = ep.accept().await.unwrap().await.unwrap();
            let (_unused, r) = conn.accept_bi().await.unwrap();
            receiver(r, go, done).await;
        },
    )
}

/// The raw quinn path: `u32 length + payload` frames on one stream.
pub(super) fn raw(a: &Side, b: &Side, size: usize) -> Path {
    let max = max_frame(size) as usize;
    raw_with(
        a,
        b,
        move |mut s, mut go, done| async move {
            let payload = Bytes::from(vec![0xab; size]);
            let head = (size as u32).to_be_bytes();
            let mut g = Gather::new();
            while let Some(frames) = go.recv().await {
                for _ in 0..frames {
                    g.put(&mut s, &head, &payload).await;
                }
                g.flush(&mut s).await;
                let _ = done.send(()).await;
            }
        },
        move |rd, go, done| super::raw_receive(rd, max, CAP, go, done),
    )
}

/// The raw quinn path driving bare nodes 0 and 1, as the TCP mode's `raw_core_path`.
pub(super) fn raw_core(a: &Side, b: &Side, size: usize) -> Path {
    let mut cfg = Config::new(2, 2);
    cfg.max_frame = max_frame(size);
    let limits = cfg.limits();
    let node = |r| Node::new(cfg.clone(), Rank(r), 7, Instant::ZERO).unwrap();
    let (mut n0, n1) = (node(0), node(1));
    let batch = (256 * 1024 / size).clamp(1, 4096) as u64;
    raw_with(
        a,
        b,
        move |mut s, mut go, done| async move {
            let payload = Bytes::from(vec![0xab; size]);
            let mut g = Gather::new();
            let start = StdInstant::now();
            while let Some(frames) = go.recv().await {
                let mut sent = 0u64;
                while sent < frames {
                    let now = Instant::from_nanos(start.elapsed().as_nanos() as u64);
                    let k = batch.min(frames - sent);
                    for _ in 0..k {
                        n0.flood(now, payload.clone()).unwrap();
                    }
                    sent += k;
                    while n0.poll_event().is_some() {}
                    while let Some(t) = n0.poll_transmit() {
                        g.put(&mut s, &[], &t.frame).await;
                    }
                }
                g.flush(&mut s).await;
                let _ = done.send(()).await;
            }
        },
        move |rd, go, done| super::raw_core_receive(rd, n1, limits, CAP, go, done),
    )
}
