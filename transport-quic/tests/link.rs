//! The link layer with real quinn endpoints on 127.0.0.1: frames, classes, refusals, the
//! tie-break and every way a link goes down.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use lifeline_core::link::DialOutcome;
use lifeline_core::tree::Rank;
use lifeline_core::wire::{FloodMsg, Message};
use lifeline_core::Class;
use lifeline_transport_quic::{
    client_config, keeps, server_name, AddressBook, CloseCode, ClusterCa, ClusterId, DialError,
    DownReason, Hello, LinkParts, QuicConfig, QuicEndpoint, QuicLink, QuicStats, SendError, Side,
    ACCEPTED, ALPN, HELLO_LEN,
};
use quinn::{ConnectionError, VarInt};

/// Bound on anything that should take milliseconds.
const LIMIT: Duration = Duration::from_secs(10);

fn cluster() -> ClusterId {
    ClusterId::new("c0ffee").unwrap()
}

fn new_ca() -> ClusterCa {
    ClusterCa::generate(cluster(), SystemTime::now() + Duration::from_secs(3600)).unwrap()
}

fn loopback() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

fn endpoint(
    ca: &ClusterCa,
    rank: u32,
    cfg: &QuicConfig,
    book: Option<AddressBook>,
) -> QuicEndpoint {
    QuicEndpoint::bind(&ca.identity(Rank(rank)).unwrap(), cfg, loopback(), book).unwrap()
}

/// A flood frame with an `n`-byte payload.
fn frame(id: u64, n: usize) -> Bytes {
    Message::Flood(FloodMsg {
        origin: Rank(9),
        id,
        hops: 0,
        payload: Bytes::from(vec![id as u8; n]),
    })
    .encode()
}

async fn within<T>(f: impl Future<Output = T>) -> T {
    tokio::time::timeout(LIMIT, f)
        .await
        .expect("within the limit")
}

/// Waits until `ep`'s counters satisfy `ok` (counters are bumped just after a refused peer is
/// closed), failing the test after the limit.
async fn eventually(ep: &QuicEndpoint, ok: impl Fn(&QuicStats) -> bool) -> QuicStats {
    within(async {
        loop {
            let s = ep.stats();
            if ok(&s) {
                return s;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
}

/// `dialer` dials `acceptor`, which accepts: (dialed end, accepted end).
async fn connect(dialer: &QuicEndpoint, acceptor: &QuicEndpoint) -> (QuicLink, QuicLink) {
    let addr = acceptor.local_addr().unwrap();
    let accept = async {
        let inbound = acceptor.accept().await.expect("endpoint open");
        assert_eq!(inbound.peer(), dialer.rank());
        inbound.accept().await.expect("accepted")
    };
    let (d, a) = within(async { tokio::join!(dialer.dial(acceptor.rank(), addr), accept) }).await;
    (d.expect("dialed"), a)
}

/// No authenticated link reaches `ep.accept()` for a while.
async fn nothing_accepted(ep: &QuicEndpoint) {
    let got = tokio::time::timeout(Duration::from_millis(200), ep.accept()).await;
    assert!(got.is_err(), "a refused peer reached accept()");
}

/// A hand-driven dialer holding rank `rank`'s certificate: connects to `addr` as rank
/// `target`, opens one stream per entry of `hellos` and writes it.
async fn raw_dial(
    ca: &ClusterCa,
    rank: u32,
    target: Rank,
    addr: SocketAddr,
    hellos: &[&[u8]],
) -> (
    quinn::Endpoint,
    quinn::Connection,
    Vec<(quinn::SendStream, quinn::RecvStream)>,
) {
    let id = ca.identity(Rank(rank)).unwrap();
    let mut ep = quinn::Endpoint::client(loopback()).unwrap();
    ep.set_default_client_config(client_config(&id, &QuicConfig::default()).unwrap());
    let conn = within(ep.connect(addr, &server_name(target, &cluster())).unwrap())
        .await
        .unwrap();
    let mut streams = Vec::new();
    for h in hellos {
        let (mut tx, rx) = conn.open_bi().await.unwrap();
        tx.write_all(h).await.unwrap();
        streams.push((tx, rx));
    }
    (ep, conn, streams)
}

/// The application code a connection was closed with by its peer.
async fn closed_with(conn: &quinn::Connection) -> VarInt {
    match within(conn.closed()).await {
        ConnectionError::ApplicationClosed(c) => c.error_code,
        e => panic!("expected an application close, got {e}"),
    }
}

fn hello(rank: u32, class: Class) -> [u8; HELLO_LEN] {
    Hello {
        rank: Rank(rank),
        class,
    }
    .encode()
}

#[tokio::test]
async fn frames_of_every_size_round_trip_in_order_on_both_classes() {
    let ca = new_ca();
    let cfg = QuicConfig::default().with_max_frame(2 << 20).unwrap();
    let (e0, e1) = (endpoint(&ca, 0, &cfg, None), endpoint(&ca, 1, &cfg, None));
    let t = Instant::now();
    let (d, a) = connect(&e1, &e0).await;
    eprintln!("connect (dial + accept, loopback): {:?}", t.elapsed());
    assert_eq!((d.peer(), d.side()), (Rank(0), Side::Dialed));
    assert_eq!((a.peer(), a.side()), (Rank(1), Side::Accepted));

    let sizes = [1, 2, 100, 1200, 8191, 8192, 8200, 65_536, 300_000, 1 << 20];
    let frames = |base: u64| -> Vec<Bytes> {
        (0..3)
            .flat_map(|_| sizes.iter())
            .enumerate()
            .map(|(i, &n)| frame(base + i as u64, n))
            .collect()
    };
    let (control, data) = (frames(0), frames(1000));
    // Both directions: dialer → acceptor, then acceptor → dialer.
    let (mut d, mut a) = (d.into_parts(), a.into_parts());
    exchange(&mut d, &mut a, &control, &data).await;
    exchange(&mut a, &mut d, &control, &data).await;
    let (s0, s1) = (e0.stats(), e1.stats());
    let n = (control.len() + data.len()) as u64;
    assert_eq!((s0.frames_in, s0.frames_out), (n, n));
    assert_eq!((s1.frames_in, s1.frames_out), (n, n));
    assert_eq!((s0.accepted, s1.dials, s1.dial_failures), (1, 1, 0));
    assert_eq!(d.watch.reason(), None);
}

/// Sends `control` and `data` from `tx` to `rx` on their classes at once; checks that both
/// arrive whole and in order.
async fn exchange(tx: &mut LinkParts, rx: &mut LinkParts, control: &[Bytes], data: &[Bytes]) {
    let send = async {
        let c = async {
            for f in control {
                tx.control.sink.send(f.clone()).await.unwrap();
            }
        };
        let mut batch = data.to_vec();
        let d = async { tx.data.sink.send_all(&mut batch).await.unwrap() };
        tokio::join!(c, d);
    };
    let recv = async {
        let mut got_c = Vec::new();
        let mut got_d = Vec::new();
        let c = async {
            while got_c.len() < control.len() {
                got_c.push(rx.control.source.recv().await.unwrap());
            }
        };
        let d = async {
            while got_d.len() < data.len() {
                got_d.push(rx.data.source.recv().await.unwrap());
            }
        };
        tokio::join!(c, d);
        (got_c, got_d)
    };
    let t = Instant::now();
    let (_, (got_c, got_d)) = within(async { tokio::join!(send, recv) }).await;
    eprintln!(
        "{} frames, {} KiB per class, both classes at once: {:?}",
        control.len(),
        control.iter().map(|f| f.len()).sum::<usize>() >> 10,
        t.elapsed()
    );
    assert!(got_c == control, "control frames differ");
    assert!(got_d == data, "data frames differ");
}

#[tokio::test]
async fn a_bad_frame_is_refused_locally_and_the_link_stays_up() {
    let ca = new_ca();
    let cfg = QuicConfig::default();
    let (e0, e1) = (endpoint(&ca, 0, &cfg, None), endpoint(&ca, 1, &cfg, None));
    let (mut d, mut a) = connect(&e1, &e0).await;
    let good = frame(1, 10);
    let mut batch = [good.clone(), good.slice(..good.len() - 1)];
    assert_eq!(
        d.send_all(Class::Data, &mut batch).await,
        Err(SendError::BadFrame { index: 1 })
    );
    let too_big = frame(2, cfg.max_frame as usize);
    assert_eq!(
        d.send(Class::Control, too_big).await,
        Err(SendError::BadFrame { index: 0 })
    );
    // Nothing of the refused batches went out; the link still works.
    d.send(Class::Control, good.clone()).await.unwrap();
    assert_eq!(within(a.recv()).await, Ok((Class::Control, good)));
    assert_eq!(e1.stats().frames_out, 1);
}

#[tokio::test]
async fn a_stalled_data_stream_does_not_block_control() {
    let ca = new_ca();
    let cfg = QuicConfig::default();
    let (e0, e1) = (endpoint(&ca, 0, &cfg, None), endpoint(&ca, 1, &cfg, None));
    let (d, a) = connect(&e1, &e0).await;
    let (mut d, mut a) = (d.into_parts(), a.into_parts());
    // The dialer pushes 64 KiB data frames; the acceptor never reads data.
    let sent = Arc::new(AtomicUsize::new(0));
    let mut data_sink = d.data.sink;
    let writer = {
        let sent = sent.clone();
        tokio::spawn(async move {
            for i in 0.. {
                if data_sink.send(frame(i, 64 << 10)).await.is_err() {
                    break;
                }
                sent.fetch_add(1, Ordering::Relaxed);
            }
        })
    };
    // Wait until the writer is stuck: no progress for 300 ms.
    let stuck_at = within(async {
        let mut last = usize::MAX;
        loop {
            tokio::time::sleep(Duration::from_millis(300)).await;
            let now = sent.load(Ordering::Relaxed);
            if now == last {
                return now;
            }
            last = now;
        }
    })
    .await;
    assert!(stuck_at > 0, "the data writer never started");
    assert!(!writer.is_finished(), "the data writer ended");
    eprintln!("data frames accepted before the writer stalled: {stuck_at} x 64 KiB");

    let t = Instant::now();
    let c = frame(7, 16);
    d.control.sink.send(c.clone()).await.unwrap();
    let got = within(a.control.source.recv()).await.unwrap();
    let lag = t.elapsed();
    eprintln!("control frame delivered past a stalled data stream in {lag:?}");
    assert_eq!(got, c);
    assert!(lag < Duration::from_millis(200), "control waited {lag:?}");
    assert_eq!(
        sent.load(Ordering::Relaxed),
        stuck_at,
        "data stayed stalled"
    );

    // Reading data again releases the writer; the frames are intact and in order.
    for i in 0..(stuck_at as u64 + 4) {
        assert_eq!(
            within(a.data.source.recv()).await.unwrap(),
            frame(i, 64 << 10)
        );
    }
    assert!(sent.load(Ordering::Relaxed) > stuck_at);
    writer.abort();
}

#[tokio::test]
async fn a_peer_claiming_another_rank_is_refused_and_counted() {
    let ca = new_ca();
    let e0 = endpoint(&ca, 0, &QuicConfig::default(), None);
    let addr = e0.local_addr().unwrap();
    // Rank 1's certificate, claiming rank 2 on both streams.
    let (c2, d2) = (hello(2, Class::Control), hello(2, Class::Data));
    let (_ep, conn, _s) = raw_dial(&ca, 1, Rank(0), addr, &[&c2, &d2]).await;
    assert_eq!(closed_with(&conn).await, CloseCode::Refused.code());
    let s = eventually(&e0, |s| s.wrong_rank == 1).await;
    assert_eq!((s.accepted, s.malformed_hellos, s.frames_in), (0, 0, 0));
    nothing_accepted(&e0).await;
}

#[tokio::test]
async fn a_peer_from_another_ca_is_refused_and_counted() {
    let ca = new_ca();
    let cfg = QuicConfig::default();
    let e0 = endpoint(&ca, 0, &cfg, None);
    // Same cluster id and rank names, another CA.
    let stranger = endpoint(&new_ca(), 1, &cfg, None);
    let r = within(stranger.dial(Rank(0), e0.local_addr().unwrap())).await;
    match r {
        // The dialer cannot verify rank 0's certificate either.
        Err(DialError::Handshake(ConnectionError::TransportError(e))) => {
            assert!(e.reason.contains("UnknownIssuer"), "{e}")
        }
        other => panic!("expected a failed handshake, got {other:?}"),
    }
    let s = eventually(&e0, |s| s.handshakes_failed == 1).await;
    assert_eq!((s.incoming, s.accepted), (1, 0));
    assert_eq!(stranger.stats().dial_failures, 1);
    nothing_accepted(&e0).await;

    // A client that trusts our CA but holds another CA's certificate: refused by the acceptor.
    let mut tls_ep = quinn::Endpoint::client(loopback()).unwrap();
    tls_ep.set_default_client_config(client_trusting(&ca));
    let connecting = tls_ep
        .connect(e0.local_addr().unwrap(), &server_name(Rank(0), &cluster()))
        .unwrap();
    // TLS 1.3: the client may finish its handshake before the server rejects its certificate.
    if let Ok(conn) = within(connecting).await {
        let e = within(conn.closed()).await;
        assert!(matches!(e, ConnectionError::ConnectionClosed(_)), "{e}");
    }
    let s = eventually(&e0, |s| s.handshakes_failed == 2).await;
    assert_eq!((s.incoming, s.accepted), (2, 0));
    nothing_accepted(&e0).await;
}

/// A client that trusts `ca` and presents rank 1's certificate from another CA.
fn client_trusting(ca: &ClusterCa) -> quinn::ClientConfig {
    use rustls::pki_types::pem::PemObject;
    let other = new_ca().issue(Rank(1)).unwrap();
    let key = rustls::pki_types::PrivateKeyDer::from_pem_slice(other.key_pem().as_bytes()).unwrap();
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca.cert_der().clone()).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .with_root_certificates(roots)
        .with_client_auth_cert(vec![other.cert_der().clone()], key)
        .unwrap();
    tls.alpn_protocols = vec![ALPN.to_vec()];
    quinn::ClientConfig::new(Arc::new(
        quinn::crypto::rustls::QuicClientConfig::try_from(tls).unwrap(),
    ))
}

#[tokio::test]
async fn malformed_hellos_are_refused_and_counted() {
    let ca = new_ca();
    let e0 = endpoint(&ca, 0, &QuicConfig::default(), None);
    let addr = e0.local_addr().unwrap();
    let d1 = hello(1, Class::Data);
    let c1 = hello(1, Class::Control);
    let d3 = hello(3, Class::Data);
    let cases: [(&str, Vec<&[u8]>); 4] = [
        ("bad version", vec![&[9, 0, 0, 0, 1, 0], &d1]),
        ("bad class", vec![&[1, 0, 0, 0, 1, 7], &d1]),
        ("two control streams", vec![&c1, &c1]),
        ("two ranks", vec![&c1, &d3]),
    ];
    for (i, (what, hellos)) in cases.iter().enumerate() {
        let (_ep, conn, _s) = raw_dial(&ca, 1, Rank(0), addr, hellos).await;
        assert_eq!(
            closed_with(&conn).await,
            CloseCode::Malformed.code(),
            "{what}"
        );
        eventually(&e0, |s| s.malformed_hellos == i as u64 + 1).await;
    }
    // A stream finished before its hello is whole.
    let (_ep, conn, mut s) = raw_dial(&ca, 1, Rank(0), addr, &[&c1[..3]]).await;
    s[0].0.finish().unwrap();
    assert_eq!(closed_with(&conn).await, CloseCode::Malformed.code());
    let s = eventually(&e0, |s| s.malformed_hellos == 5).await;
    assert_eq!((s.accepted, s.wrong_rank, s.frames_in), (0, 0, 0));
    nothing_accepted(&e0).await;
}

#[tokio::test]
async fn an_oversize_frame_header_closes_the_link_after_the_frames_before_it() {
    let ca = new_ca();
    let cfg = QuicConfig::default();
    let e0 = endpoint(&ca, 0, &cfg, None);
    let addr = e0.local_addr().unwrap();
    let (c1, d1) = (hello(1, Class::Control), hello(1, Class::Data));
    let hellos: [&[u8]; 2] = [&c1, &d1];
    let dial = raw_dial(&ca, 1, Rank(0), addr, &hellos);
    let accept = async { e0.accept().await.unwrap().accept().await.unwrap() };
    let ((_ep, conn, mut streams), mut link) = within(async { tokio::join!(dial, accept) }).await;
    let mut answer = [0u8; 2];
    streams[0].1.read_exact(&mut answer).await.unwrap();
    assert_eq!(answer, ACCEPTED);

    let good = frame(1, 100);
    // A valid header announcing max_frame + 1 bytes in all.
    let len = cfg.max_frame - 6 + 1;
    let mut bad = vec![good[0], good[1]];
    bad.extend_from_slice(&len.to_be_bytes());
    let tx = &mut streams[0].0;
    tx.write_all(&good).await.unwrap();
    tx.write_all(&bad).await.unwrap();
    assert_eq!(within(link.recv()).await, Ok((Class::Control, good)));
    assert_eq!(within(link.recv()).await, Err(DownReason::Malformed));
    assert_eq!(within(link.recv()).await, Err(DownReason::Malformed));
    assert_eq!(closed_with(&conn).await, CloseCode::Malformed.code());
    assert_eq!(within(link.watch().down()).await, DownReason::Malformed);
    let s = e0.stats();
    assert_eq!((s.malformed_frames, s.frames_in), (1, 1));
}

#[tokio::test]
async fn strangers_and_wrong_addresses_are_refused_and_counted() {
    let ca = new_ca();
    let cfg = QuicConfig::default();
    let e1 = endpoint(&ca, 1, &cfg, None);
    let e2 = endpoint(&ca, 2, &cfg, None);
    let spare = std::net::UdpSocket::bind(loopback()).unwrap();
    // The book puts rank 1 elsewhere and lists e1's address as rank 2's.
    let mut book = AddressBook::new();
    book.insert(Rank(1), spare.local_addr().unwrap()).unwrap();
    book.insert(Rank(2), e1.local_addr().unwrap()).unwrap();
    let e0 = endpoint(&ca, 0, &cfg, Some(book));
    let addr = e0.local_addr().unwrap();

    // e2's address is in no entry: refused before TLS.
    match within(e2.dial(Rank(0), addr)).await {
        Err(DialError::Handshake(ConnectionError::ConnectionClosed(c))) => {
            assert_eq!(c.error_code, quinn::TransportErrorCode::CONNECTION_REFUSED)
        }
        other => panic!("expected CONNECTION_REFUSED, got {other:?}"),
    }
    let s = eventually(&e0, |s| s.strangers == 1).await;
    assert_eq!(s.handshakes_failed, 0);

    // e1 is rank 1 (its certificate says so) but comes from rank 2's address.
    match within(e1.dial(Rank(0), addr)).await {
        Err(e @ DialError::Closed(DownReason::Refused)) => {
            assert_eq!(e.outcome(), DialOutcome::Failed)
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    let s = eventually(&e0, |s| s.wrong_address == 1).await;
    assert_eq!((s.accepted, s.wrong_rank), (0, 0));
    nothing_accepted(&e0).await;
}

/// An endpoint bound with a book refuses a rank that is not in it; once it follows the driver's
/// book ([`QuicEndpoint::follow_book`]), an entry added there (a grow) is accepted, and an
/// address still in no entry is refused as before.
#[tokio::test]
async fn a_followed_book_admits_ranks_added_later() {
    let ca = new_ca();
    let cfg = QuicConfig::default();
    let e2 = endpoint(&ca, 2, &cfg, None);
    let e3 = endpoint(&ca, 3, &cfg, None);
    let mut book = AddressBook::new();
    book.insert(Rank(1), "127.0.0.1:9".parse().unwrap())
        .unwrap();
    let e0 = endpoint(&ca, 0, &cfg, Some(book));
    let addr = e0.local_addr().unwrap();
    assert!(
        within(e2.dial(Rank(0), addr)).await.is_err(),
        "rank 2 is no rank's address yet"
    );
    eventually(&e0, |s| s.strangers == 1).await;

    let mut shared = lifeline_transport_common::AddressBook::new();
    shared.insert(Rank(1), "127.0.0.1:9".parse().unwrap());
    let shared = Arc::new(std::sync::RwLock::new(shared));
    e0.follow_book(shared.clone());
    shared
        .write()
        .unwrap()
        .insert(Rank(2), e2.local_addr().unwrap());
    let (dialed, accepted) = tokio::join!(e2.dial(Rank(0), addr), async {
        within(e0.accept())
            .await
            .expect("an inbound link")
            .accept()
            .await
    });
    assert_eq!(
        dialed.expect("rank 2 is accepted after the grow").peer(),
        Rank(0)
    );
    assert_eq!(accepted.expect("installed").peer(), Rank(2));
    assert!(
        within(e3.dial(Rank(0), addr)).await.is_err(),
        "rank 3 is still unknown"
    );
    let s = eventually(&e0, |s| s.strangers == 2).await;
    assert_eq!((s.accepted, s.wrong_address), (1, 0));
}

#[tokio::test]
async fn a_dial_to_a_dead_port_times_out_within_the_bound() {
    let ca = new_ca();
    let bound = Duration::from_millis(300);
    let cfg = QuicConfig::default().with_connect_timeout(bound).unwrap();
    let e1 = endpoint(&ca, 1, &cfg, None);
    let dead = {
        let s = std::net::UdpSocket::bind(loopback()).unwrap();
        s.local_addr().unwrap()
    };
    let t = Instant::now();
    let r = within(e1.dial(Rank(0), dead)).await;
    let took = t.elapsed();
    eprintln!("dial to a dead port failed after {took:?} (connect_timeout {bound:?})");
    match r {
        Err(e @ DialError::Timeout(b)) => {
            assert_eq!(b, bound);
            assert_eq!(e.outcome(), DialOutcome::Failed);
        }
        other => panic!("expected a timeout, got {other:?}"),
    }
    assert!(
        took >= bound && took < bound + Duration::from_millis(500),
        "{took:?}"
    );
    let s = e1.stats();
    assert_eq!((s.dials, s.dial_failures, s.dial_timeouts), (1, 1, 1));
}

#[tokio::test]
async fn a_closed_peer_is_seen_as_closed_at_once() {
    let ca = new_ca();
    let cfg = QuicConfig::default(); // link_timeout 3 s: a close must not wait for it
    let (e0, e1) = (endpoint(&ca, 0, &cfg, None), endpoint(&ca, 1, &cfg, None));
    let (d, mut a) = connect(&e1, &e0).await;
    let t = Instant::now();
    let seen = async {
        let r = a.recv().await;
        (r, t.elapsed())
    };
    // close() returns after the draining period; the peer is told at once.
    let ((r, took), ()) = within(async { tokio::join!(seen, e1.close()) }).await;
    assert_eq!(r, Err(DownReason::Closed));
    assert_eq!(within(a.watch().down()).await, DownReason::Closed);
    eprintln!("peer endpoint close seen in {took:?}");
    assert!(took < Duration::from_secs(1), "{took:?}");
    assert_eq!(d.watch().reason(), Some(DownReason::LocallyClosed));
    assert_eq!(
        DownReason::Closed.cause(),
        Some(lifeline_core::LinkCause::Closed)
    );

    // Dropping a link (no endpoint close) reads as closed too.
    let e2 = endpoint(&ca, 2, &cfg, None);
    let (d2, mut a2) = connect(&e2, &e0).await;
    drop(d2);
    assert_eq!(within(a2.recv()).await, Err(DownReason::Closed));
}

#[tokio::test]
async fn a_silent_peer_times_out_after_the_link_timeout() {
    let ca = new_ca();
    let link_timeout = Duration::from_millis(300);
    let cfg = QuicConfig::with_link_timeout(link_timeout).unwrap();
    let e0 = endpoint(&ca, 0, &cfg, None);
    let addr = e0.local_addr().unwrap();
    // Rank 1 runs on its own thread and runtime; once its link is up the thread stops (like a
    // SIGSTOP'd process: its socket stays open, nothing answers).
    let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
    let id1 = ca.identity(Rank(1)).unwrap();
    let cfg1 = cfg.clone();
    let peer = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let e1 = QuicEndpoint::bind(&id1, &cfg1, loopback(), None).unwrap();
            let link = e1.dial(Rank(0), addr).await.unwrap();
            let _ = ready_tx.send(());
            // Frozen: no task of this runtime runs while the thread sleeps.
            std::thread::sleep(link_timeout * 6);
            drop((link, e1));
        });
    });
    let inbound = within(e0.accept()).await.unwrap();
    let mut link = within(inbound.accept()).await.unwrap();
    within(ready_rx).await.unwrap();
    let t = Instant::now();
    assert_eq!(within(link.recv()).await, Err(DownReason::TimedOut));
    let took = t.elapsed();
    eprintln!("silent peer timed out after {took:?} (link_timeout {link_timeout:?})");
    assert!(
        took >= link_timeout / 2 && took < link_timeout * 3,
        "{took:?}"
    );
    assert_eq!(link.watch().reason(), Some(DownReason::TimedOut));
    assert_eq!(
        DownReason::TimedOut.cause(),
        Some(lifeline_core::LinkCause::TimedOut)
    );
    peer.join().unwrap();
}

/// Accepts one inbound link and applies the tie-break to it.
async fn decide(ep: &QuicEndpoint) -> Option<QuicLink> {
    let inbound = ep.accept().await.unwrap();
    if keeps(ep.rank(), inbound.peer(), Side::Accepted) {
        Some(inbound.accept().await.unwrap())
    } else {
        inbound.reject(CloseCode::Duplicate);
        None
    }
}

#[tokio::test]
async fn simultaneous_dials_keep_the_lower_ranks_connection() {
    let ca = new_ca();
    let cfg = QuicConfig::default();
    let (e0, e1) = (endpoint(&ca, 0, &cfg, None), endpoint(&ca, 1, &cfg, None));
    let (a0, a1) = (e0.local_addr().unwrap(), e1.local_addr().unwrap());
    let (dial0, dial1, acc0, acc1) = within(async {
        tokio::join!(
            e0.dial(Rank(1), a1),
            e1.dial(Rank(0), a0),
            decide(&e0),
            decide(&e1)
        )
    })
    .await;
    // Rank 0's dial won on both ends; rank 1's was answered "duplicate".
    let mut won = dial0.expect("rank 0's dial wins");
    match dial1 {
        Err(e @ DialError::Closed(DownReason::Duplicate)) => {
            assert_eq!(e.outcome(), DialOutcome::Duplicate)
        }
        other => panic!("expected a duplicate answer, got {other:?}"),
    }
    assert!(acc0.is_none(), "rank 0 rejects rank 1's dial");
    let mut kept = acc1.expect("rank 1 accepts rank 0's dial");
    assert_eq!((won.side(), kept.side()), (Side::Dialed, Side::Accepted));
    assert_eq!((e0.stats().duplicates, e1.stats().duplicates), (1, 0));
    // The survivor carries frames.
    won.send(Class::Control, frame(1, 5)).await.unwrap();
    assert_eq!(within(kept.recv()).await, Ok((Class::Control, frame(1, 5))));
}

/// An acceptor that refuses a removed rank tells it the epoch: the dialer's `dial` fails with
/// `DialError::Removed` (fed to the core's `handle_fenced`), a plain failure for the link
/// policy; a plain refusal carries no epoch.
#[tokio::test]
async fn a_removed_rank_is_told_its_epoch() {
    let ca = new_ca();
    let cfg = QuicConfig::default();
    let e0 = endpoint(&ca, 0, &cfg, None);
    let e1 = endpoint(&ca, 1, &cfg, None);
    let addr = e0.local_addr().unwrap();
    for (epoch, removed) in [(Some(0x0102_0304_0506_0708u64), true), (None, false)] {
        let accept = async {
            let inbound = e0.accept().await.unwrap();
            match epoch {
                Some(e) => inbound.reject_removed(e),
                None => inbound.reject(CloseCode::Refused),
            }
        };
        let (d, ()) = within(async { tokio::join!(e1.dial(Rank(0), addr), accept) }).await;
        let e = d.expect_err("refused");
        assert_eq!(e.removed(), epoch, "{e}");
        assert_eq!(e.outcome(), DialOutcome::Failed);
        assert_eq!(matches!(e, DialError::Removed { .. }), removed, "{e}");
    }
}
