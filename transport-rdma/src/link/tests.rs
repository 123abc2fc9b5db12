//! The composite link end to end: `Node`s on the shared driver, TCP control on 127.0.0.1, the
//! data class on a seeded `MockFabric`.

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;
use lifeline_core::tree::Rank;
use lifeline_core::{Config, Event, FloodEvent, Instant, Node, RelmEvent, XcastEvent};
use lifeline_transport_common::{AddressBook, Output, TransportError};
use lifeline_transport_tcp::{ClusterKey, TcpConfig};
use tokio::net::TcpListener;

use super::{pump, spawn, RdmaConfig, RdmaNode};
use crate::mock::{Fault, MockFabric, MockVerbs};
use crate::verbs::WcStatus;

struct Cluster {
    nodes: Vec<RdmaNode<MockVerbs>>,
    fabric: MockFabric,
    pump: Option<tokio::task::JoinHandle<()>>,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if let Some(p) = self.pump.take() {
            p.abort();
        }
        for n in &self.nodes {
            n.node.task.abort();
        }
    }
}

async fn cluster(n: u32, seed: u64, tcp: TcpConfig, rdma: RdmaConfig) -> Cluster {
    let mut listeners = Vec::new();
    let mut book = AddressBook::new();
    for r in 0..n {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        book.insert(Rank(r), l.local_addr().unwrap());
        listeners.push(l);
    }
    let key = ClusterKey::from_secret(b"rdma composite link test").unwrap();
    let fabric = MockFabric::new(seed);
    let mut nodes = Vec::new();
    for (r, l) in listeners.into_iter().enumerate() {
        // The detector on: a link-down is evidence for it, not a verdict (as in the suite).
        let mut config = Config::new(n, 2);
        config.detect.enabled = true;
        let node = Node::new(config, Rank(r as u32), seed, Instant::ZERO).unwrap();
        let cfg = RdmaConfig { seed, ..rdma };
        let v = fabric.endpoint();
        nodes.push(spawn(
            node,
            book.clone(),
            key.clone(),
            tcp.clone(),
            cfg,
            v,
            l,
        ));
    }
    let pump = Some(pump(fabric.clone(), Duration::from_micros(200)));
    Cluster {
        nodes,
        fabric,
        pump,
    }
}

/// Reads every node's outputs into `seen` until `done` holds or `within` passes.
async fn watch(
    c: &mut Cluster,
    within: Duration,
    seen: &mut Vec<(usize, Output)>,
    mut done: impl FnMut(&[(usize, Output)]) -> bool,
) -> bool {
    let end = tokio::time::Instant::now() + within;
    loop {
        for (i, n) in c.nodes.iter_mut().enumerate() {
            while let Ok(o) = n.node.outputs.try_recv() {
                seen.push((i, o));
            }
        }
        if done(seen) {
            return true;
        }
        if tokio::time::Instant::now() > end {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

fn payload(i: u64) -> Bytes {
    Bytes::from(i.to_be_bytes().to_vec())
}

fn index(p: &Bytes) -> u64 {
    u64::from_be_bytes(p[..8].try_into().unwrap())
}

/// Runs `f` on node `r` until it is not refused for back-pressure (or dead: not started yet).
async fn retry<R: Send + 'static>(
    c: &Cluster,
    r: usize,
    f: impl Fn(&mut Node, Instant) -> Result<R, lifeline_core::CommandError> + Send + Clone + 'static,
) -> R {
    let mut last = String::new();
    for _ in 0..5000 {
        match c.nodes[r].node.handle.command(f.clone()).await {
            Ok(Ok(v)) => return v,
            Ok(Err(e)) => last = format!("{e:?}"),
            Err(e @ TransportError::Backpressure { .. }) => last = format!("{e:?}"),
            Err(e) => panic!("command failed: {e}"),
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    panic!("command refused for 10 s: {last}");
}

fn floods_at(seen: &[(usize, Output)], at: usize) -> BTreeMap<u64, usize> {
    let mut m = BTreeMap::new();
    for (i, o) in seen {
        if let (
            true,
            Output::Event {
                event: Event::Flood(FloodEvent::Delivered { payload, .. }),
                ..
            },
        ) = (*i == at, o)
        {
            *m.entry(index(payload)).or_insert(0) += 1;
        }
    }
    m
}

fn relm_at(seen: &[(usize, Output)], at: usize) -> Vec<u64> {
    seen.iter()
        .filter_map(|(i, o)| match o {
            Output::Event {
                event: Event::Relm(RelmEvent::Delivered { payload, .. }),
                ..
            } if *i == at => Some(index(payload)),
            _ => None,
        })
        .collect()
}

fn links(seen: &[(usize, Output)]) -> Vec<String> {
    seen.iter()
        .filter(|(_, o)| matches!(o, Output::LinkUp { .. } | Output::LinkDown { .. }))
        .map(|(i, o)| format!("{i}: {o:?}"))
        .collect()
}

fn count(seen: &[(usize, Output)], f: impl Fn(&Output) -> bool) -> usize {
    seen.iter().filter(|(_, o)| f(o)).count()
}

/// Three nodes: floods, xcasts and RELM (their payload frames are all of the data class, over
/// the queue pairs; their ACKs on TCP) each arrive exactly once; the fabric carried the data
/// with no RNR.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_exchange_exactly_once() {
    const N: u64 = 200;
    let mut c = cluster(3, 7, TcpConfig::default(), RdmaConfig::default()).await;
    for i in 0..N {
        retry(&c, 0, move |n, now| n.flood(now, payload(i))).await;
    }
    for i in 0..50 {
        retry(&c, 1, move |n, now| n.xcast(now, 100, payload(i))).await;
    }
    for i in 0..N {
        retry(&c, 1, move |n, now| {
            n.relm_send(now, Rank(2), 100, payload(i))
        })
        .await;
    }
    let mut seen = Vec::new();
    let ok = watch(&mut c, Duration::from_secs(20), &mut seen, |s| {
        floods_at(s, 1).len() as u64 == N
            && floods_at(s, 2).len() as u64 == N
            && relm_at(s, 2).len() as u64 == N
            && count(s, |o| {
                matches!(
                    o,
                    Output::Event {
                        event: Event::Xcast(XcastEvent::Delivered { .. }),
                        ..
                    }
                )
            }) >= 150
    })
    .await;
    assert!(
        ok,
        "not everything arrived: floods {} {}, relm {}, links {:?}, fabric {:?}",
        floods_at(&seen, 1).len(),
        floods_at(&seen, 2).len(),
        relm_at(&seen, 2).len(),
        links(&seen),
        c.fabric.stats()
    );
    for r in [1, 2] {
        let f = floods_at(&seen, r);
        assert!(f.values().all(|&k| k == 1), "flood duplicate at {r}");
        assert_eq!(
            f.keys().copied().collect::<Vec<_>>(),
            (0..N).collect::<Vec<_>>()
        );
    }
    assert_eq!(relm_at(&seen, 2), (0..N).collect::<Vec<_>>());
    // Each of the 3 ranks delivers each of the 50 xcasts exactly once.
    for r in 0..3 {
        let mut xs: Vec<u64> = seen
            .iter()
            .filter_map(|(i, o)| match o {
                Output::Event {
                    event: Event::Xcast(XcastEvent::Delivered { payload, .. }),
                    ..
                } if *i == r => Some(index(payload)),
                _ => None,
            })
            .collect();
        xs.sort_unstable();
        assert_eq!(xs, (0..50).collect::<Vec<_>>(), "xcasts at rank {r}");
    }
    assert_eq!(count(&seen, |o| matches!(o, Output::LinkDown { .. })), 0);
    let st = c.fabric.stats();
    assert!(
        st.delivered >= 2 * N,
        "data did not cross the fabric: {st:?}"
    );
    assert_eq!(st.rnr_naks, 0);
    for n in &c.nodes {
        assert!(n.connector.plane_stats().opened >= 1);
    }
    // Rank 2 got its floods and RELM payloads over queue pairs.
    assert!(c.nodes[2].connector.plane_stats().frames_received >= 2 * N);
}

/// Xcast and RELM payloads (4 KiB) cross the queue pairs, and nothing but the completion
/// channel moves them: the polling tick and the safety sweep are an hour, so a lost or missing
/// notification stalls the test. Receive queues of 16 make the receiver return credit dozens
/// of times, each only after a notification woke its link.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn completions_alone_move_xcast_and_relm_over_the_queue_pairs() {
    const N: u64 = 400;
    let hour = Duration::from_secs(3600);
    let mut rdma = RdmaConfig {
        poll_interval: hour,
        sweep_interval: hour,
        ..RdmaConfig::default()
    };
    rdma.channel.recv_depth = 16;
    rdma.channel.credit_threshold = 4;
    let mut c = cluster(3, 21, TcpConfig::default(), rdma).await;
    let big = |i: u64| {
        let mut v = vec![0x5a; 4096];
        v[..8].copy_from_slice(&i.to_be_bytes());
        Bytes::from(v)
    };
    let xcasts = |s: &[(usize, Output)]| {
        count(s, |o| {
            matches!(
                o,
                Output::Event {
                    event: Event::Xcast(XcastEvent::Delivered { .. }),
                    ..
                }
            )
        })
    };
    // Every link up first (one xcast reaches all three), so that no link set-up later polls
    // the completion queue on the notifications' behalf.
    let mut seen = Vec::new();
    retry(&c, 1, move |n, now| n.xcast(now, 100, big(0))).await;
    let up = watch(&mut c, Duration::from_secs(10), &mut seen, |s| {
        xcasts(s) == 3
    })
    .await;
    assert!(up, "links not up: {:?}", links(&seen));
    let before: Vec<_> = c.nodes.iter().map(|n| n.connector.plane_stats()).collect();
    for i in 1..20 {
        retry(&c, 1, move |n, now| n.xcast(now, 100, big(i))).await;
    }
    for i in 0..N {
        retry(&c, 0, move |n, now| n.relm_send(now, Rank(2), 100, big(i))).await;
    }
    let ok = watch(&mut c, Duration::from_secs(20), &mut seen, |s| {
        relm_at(s, 2).len() as u64 == N && xcasts(s) == 60
    })
    .await;
    let stats: Vec<_> = c.nodes.iter().map(|n| n.connector.plane_stats()).collect();
    assert!(
        ok,
        "stalled: relm {}, xcasts {}, links {:?}, planes {stats:#?}",
        relm_at(&seen, 2).len(),
        xcasts(&seen),
        links(&seen),
    );
    assert_eq!(relm_at(&seen, 2), (0..N).collect::<Vec<_>>());
    // Rank 2 received every RELM payload and its 19 xcasts over queue pairs, never over TCP.
    assert!(
        stats[2].frames_received - before[2].frames_received >= N + 19,
        "payloads bypassed the queue pairs: {stats:#?}"
    );
    for (s, b) in stats.iter().zip(&before) {
        assert!(
            s.cq_events > b.cq_events,
            "no completion notification: {stats:#?}"
        );
        assert_eq!(s.cq_event_errors, 0);
    }
    assert_eq!(c.fabric.stats().rnr_naks, 0);
    // What `lifeline node`'s `stats` prints under `rdma`.
    let f = stats[2].fields();
    assert!(f.contains(&("frames_received", stats[2].frames_received)));
    assert!(f.contains(&("cq_events", stats[2].cq_events)));
    assert_eq!(f.len(), 12);
}

/// A seeded run with a queue pair error injected mid-stream: the link goes down with a reset
/// (evidence, not a verdict), comes back on new queue pairs, and RELM delivers every message
/// exactly once and in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn qp_error_mid_stream_relm_exactly_once() {
    const N: u64 = 300;
    // The polling tick instead of the completion channel: the fallback path, end to end.
    let rdma = RdmaConfig {
        completion_channel: false,
        ..RdmaConfig::default()
    };
    let mut c = cluster(2, 11, TcpConfig::default(), rdma).await;
    c.fabric.inject(Fault::CompletionError {
        n: 120,
        status: WcStatus::RetryExceeded,
    });
    let mut seen = Vec::new();
    for i in 0..N {
        retry(&c, 0, move |n, now| n.flood(now, payload(i))).await;
        if c.nodes[0]
            .node
            .handle
            .command(move |n, now| n.relm_send(now, Rank(1), 100, payload(i)))
            .await
            .map_or(true, |r| r.is_err())
        {
            watch(&mut c, Duration::ZERO, &mut seen, |_| false).await;
            panic!(
                "relm {i} refused; links {:?}, fabric {:?}",
                links(&seen),
                c.fabric.stats()
            );
        }
    }
    let ok = watch(&mut c, Duration::from_secs(30), &mut seen, |s| {
        relm_at(s, 1).len() as u64 >= N
    })
    .await;
    assert!(
        ok,
        "RELM did not deliver everything: {}",
        relm_at(&seen, 1).len()
    );
    assert_eq!(relm_at(&seen, 1), (0..N).collect::<Vec<_>>());
    let floods = floods_at(&seen, 1);
    assert!(floods.values().all(|&k| k == 1), "flood duplicated");
    assert!(c.fabric.stats().errors >= 1, "the fault never fired");
    assert!(count(&seen, |o| matches!(o, Output::LinkDown { .. })) >= 1);
    assert!(count(&seen, |o| matches!(o, Output::LinkUp { .. })) >= 3);
    assert!(!seen.iter().any(|(_, o)| matches!(
        o,
        Output::Event {
            event: Event::Relm(RelmEvent::Failed { .. }),
            ..
        }
    )));
    for n in &c.nodes {
        assert!(n.connector.plane_stats().opened >= 2, "no new queue pair");
    }
}

/// The seeded run in one: a sender faster than a slow fabric (the driver's soft bound
/// refuses it: back-pressure, with the frames held between the driver and a channel bounded)
/// while two queue pair errors are injected mid-stream. RELM delivers every message exactly
/// once and in order across both reconnects; nothing is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn qp_errors_under_backpressure_relm_exactly_once() {
    const N: u64 = 600;
    let tcp = TcpConfig {
        queue_soft_bytes: 32 << 10,
        ..TcpConfig::default()
    };
    let hard = tcp.queue_hard_bytes as u64;
    let mut rdma = RdmaConfig::default();
    rdma.channel.max_queued = 64;
    let mut c = cluster(2, 29, tcp, rdma).await;
    // A slow "NIC": 16 messages per millisecond at most, stalled from the 100th message until
    // the application is refused (so back-pressure happens whatever the timing).
    c.pump.take().unwrap().abort();
    let fabric = c.fabric.clone();
    let stalled = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stall = stalled.clone();
    c.pump = Some(tokio::spawn(async move {
        loop {
            if !stall.load(std::sync::atomic::Ordering::Relaxed) {
                fabric.run(16);
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }));
    for n in [150, 450] {
        c.fabric.inject(Fault::CompletionError {
            n,
            status: WcStatus::RetryExceeded,
        });
    }
    let payload = |i: u64| {
        let mut v = vec![0xc3; 2048];
        v[..8].copy_from_slice(&i.to_be_bytes());
        Bytes::from(v)
    };
    let (mut backpressure, mut window_full) = (0u64, 0u64);
    let mut seen = Vec::new();
    for i in 0..N {
        if i == 100 {
            stalled.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        loop {
            let p = payload(i);
            match c.nodes[0]
                .node
                .handle
                .command(move |n, now| n.relm_send(now, Rank(1), 100, p))
                .await
            {
                Ok(Ok(_)) => break,
                Ok(Err(_)) => window_full += 1,
                Err(TransportError::Backpressure { .. }) => {
                    backpressure += 1;
                    stalled.store(false, std::sync::atomic::Ordering::Relaxed);
                }
                Err(e) => panic!("relm {i}: {e}"),
            }
            // Drain outputs while waiting, as an application would.
            watch(&mut c, Duration::ZERO, &mut seen, |_| false).await;
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
    let ok = watch(&mut c, Duration::from_secs(60), &mut seen, |s| {
        relm_at(s, 1).len() as u64 >= N
    })
    .await;
    let ps = c.nodes[0].connector.plane_stats();
    assert!(
        ok,
        "RELM delivered {} of {N}; links {:?}, plane {ps:?}",
        relm_at(&seen, 1).len(),
        links(&seen)
    );
    assert_eq!(relm_at(&seen, 1), (0..N).collect::<Vec<_>>());
    eprintln!(
        "{N} RELM delivered once in order; refused {backpressure} times for back-pressure, \
         {window_full} for a full window; link downs {}; plane {ps:?}; fabric {:?}",
        count(&seen, |o| matches!(o, Output::LinkDown { .. })),
        c.fabric.stats()
    );
    assert!(
        backpressure > 0,
        "never refused (window full {window_full} times): {ps:?}"
    );
    // What sits between the driver and the channel never exceeds the driver's hard bound.
    let held = ps.max_held as u64 * 2048;
    assert!(held <= hard, "held {} frames ({held} B)", ps.max_held);
    assert!(
        c.fabric.stats().errors >= 2,
        "the faults never fired: {:?}",
        c.fabric.stats()
    );
    assert!(count(&seen, |o| matches!(o, Output::LinkDown { .. })) >= 2);
    assert!(ps.opened >= 3, "not reconnected twice: {ps:?}");
    assert!(!seen.iter().any(|(_, o)| matches!(
        o,
        Output::Event {
            event: Event::Relm(RelmEvent::Failed { .. }),
            ..
        }
    )));
}

/// A fabric that stops moving: the channel answers `WouldBlock`, frames stay in the driver's
/// bounded queue, the application is refused with `Backpressure`; once the fabric moves again
/// every accepted frame arrives exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backpressure_is_bounded() {
    let tcp = TcpConfig {
        queue_soft_bytes: 16 << 10,
        queue_hard_bytes: 8 << 20,
        ..TcpConfig::default()
    };
    let mut rdma = RdmaConfig::default();
    rdma.channel.max_queued = 8;
    let mut c = cluster(2, 5, tcp, rdma).await;
    // Links up, data flowing.
    let mut seen = Vec::new();
    let mut up = false;
    for _ in 0..50 {
        // A flood is best effort: one sent before the link is up may be lost, so repeat.
        retry(&c, 0, |n, now| n.flood(now, payload(0))).await;
        if watch(&mut c, Duration::from_millis(200), &mut seen, |s| {
            floods_at(s, 1).len() == 1
        })
        .await
        {
            up = true;
            break;
        }
    }
    assert!(up, "no flood arrived: {:?}", links(&seen));
    tokio::time::sleep(Duration::from_millis(50)).await;
    watch(&mut c, Duration::ZERO, &mut seen, |_| false).await;
    c.pump.take().unwrap().abort();
    let big = |i: u64| {
        let mut v = vec![0u8; 1024];
        v[..8].copy_from_slice(&i.to_be_bytes());
        Bytes::from(v)
    };
    let mut accepted = 1u64;
    let mut refused = false;
    for i in 1..10_000u64 {
        let p = big(i);
        match c.nodes[0]
            .node
            .handle
            .command(move |n, now| n.flood(now, p))
            .await
        {
            Ok(Ok(_)) => accepted += 1,
            Err(TransportError::Backpressure { .. }) => {
                refused = true;
                break;
            }
            other => panic!("unexpected: {other:?}"),
        }
        tokio::time::sleep(Duration::from_micros(100)).await;
    }
    assert!(refused, "never refused after {accepted} frames");
    let ps = c.nodes[0].connector.plane_stats();
    assert!(ps.would_block > 0, "the channel never pushed back: {ps:?}");
    // Held frames are at most one take of a queue the soft bound keeps small.
    assert!(ps.max_held < 200, "held {} frames", ps.max_held);
    c.pump = Some(pump(c.fabric.clone(), Duration::from_micros(200)));
    let ok = watch(&mut c, Duration::from_secs(20), &mut seen, |s| {
        floods_at(s, 1).len() as u64 == accepted
    })
    .await;
    let f = floods_at(&seen, 1);
    assert!(ok, "{} of {accepted} arrived", f.len());
    assert!(f.values().all(|&k| k == 1));
    assert_eq!(count(&seen, |o| matches!(o, Output::LinkDown { .. })), 0);
}

/// Completion errors are soft evidence (a reset), closes and flushes an EOF, protocol
/// violations malformed: never anything the core reads as a verdict.
#[test]
fn causes_map_like_tcp() {
    use std::io::ErrorKind;

    use lifeline_transport_common::Ended;

    use super::ended;
    use crate::channel::DownCause;
    use crate::verbs::{VerbsError, WcOp};

    let reset = Ended::Io(ErrorKind::ConnectionReset);
    for status in [
        WcStatus::RetryExceeded,
        WcStatus::RnrRetryExceeded,
        WcStatus::Remote(9),
        WcStatus::Local(1),
    ] {
        let op = WcOp::Send;
        assert_eq!(ended(&DownCause::Completion { op, status }), reset);
    }
    assert_eq!(ended(&DownCause::Verbs(VerbsError::QueueFull)), reset);
    assert_eq!(ended(&DownCause::Flushed), Ended::Eof);
    assert_eq!(ended(&DownCause::Closed), Ended::Eof);
    assert_eq!(ended(&DownCause::Malformed("x")), Ended::Malformed);
}

/// Dials rank 0 at `target` as rank 1 on `class` with the cluster key. Rank 0's own dial to
/// rank 1 (refused at once) may be in flight: the tie-break then closes ours as a duplicate;
/// dial again.
async fn raw_dial(
    target: std::net::SocketAddr,
    key: &ClusterKey,
    class: lifeline_core::Class,
) -> tokio::net::TcpStream {
    use lifeline_transport_tcp::handshake;
    for _ in 0..100 {
        let mut t = tokio::net::TcpStream::connect(target).await.unwrap();
        match handshake::dial(&mut t, key, Rank(1), Rank(0), class).await {
            Ok(_) => return t,
            Err(e) => {
                assert!(format!("{e:?}").contains("Duplicate"), "refused: {e:?}");
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }
    panic!("always a duplicate");
}

/// Rank 0 alone, with rank 1's address closed (a raw peer plays rank 1), on a pumped fabric.
async fn lone_node(cfg: RdmaConfig) -> (Cluster, ClusterKey) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let gone = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let mut book = AddressBook::new();
    book.insert(Rank(0), l.local_addr().unwrap());
    book.insert(Rank(1), gone.local_addr().unwrap());
    drop(gone);
    let key = ClusterKey::from_secret(b"rdma composite link test").unwrap();
    let fabric = MockFabric::new(3);
    let node = Node::new(Config::new(2, 2), Rank(0), 3, Instant::ZERO).unwrap();
    let v = fabric.endpoint();
    let n0 = spawn(node, book, key.clone(), TcpConfig::default(), cfg, v, l);
    let c = Cluster {
        nodes: vec![n0],
        fabric: fabric.clone(),
        pump: Some(pump(fabric, Duration::from_micros(200))),
    };
    (c, key)
}

/// A data-slot connection with no control link to the same peer gets no queue pair: the node
/// sends no QP details, holds no channel, and closes the connection after `exchange_timeout`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_queue_pair_without_a_control_link() {
    use tokio::io::AsyncReadExt;

    let cfg = RdmaConfig {
        exchange_timeout: Duration::from_millis(400),
        ..RdmaConfig::default()
    };
    let (c, key) = lone_node(cfg).await;
    let target = c.nodes[0].node.handle.local_addr();
    let mut s = raw_dial(target, &key, lifeline_core::Class::Data).await;
    let started = tokio::time::Instant::now();
    let mut got = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut got)).await;
    assert!(
        matches!(read, Ok(Ok(0)) | Ok(Err(_))),
        "not closed: {read:?}"
    );
    assert!(
        got.is_empty(),
        "QP details sent without a control link: {got:?}"
    );
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert_eq!(c.nodes[0].connector.plane_stats().opened, 0);
    assert_eq!(c.nodes[0].connector.channels(), 0);
}

/// An authenticated peer whose data-slot connection sends a bad QP details record (wrong
/// version) is closed and counted malformed; no queue pair stays behind, and the node goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_details_record_closed_and_counted() {
    use lifeline_core::Class;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    // Rank 0 alone; rank 1's address has nothing listening, and a raw dialer plays rank 1.
    let (c, key) = lone_node(RdmaConfig::default()).await;
    let target = c.nodes[0].node.handle.local_addr();
    // The control link first (a data link waits for it), then the data slot.
    let _control = raw_dial(target, &key, Class::Control).await;
    let mut s = raw_dial(target, &key, Class::Data).await;
    // The node's record arrives first: valid.
    let mut theirs = [0u8; crate::wire::DETAILS_LEN];
    s.read_exact(&mut theirs).await.unwrap();
    assert!(crate::wire::decode(&theirs).is_ok());
    let mut bad = theirs;
    bad[0] = 9;
    s.write_all(&bad).await.unwrap();
    let mut rest = Vec::new();
    let closed = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut rest)).await;
    assert!(
        matches!(closed, Ok(Ok(0)) | Ok(Err(_))),
        "not closed: {closed:?}"
    );
    let end = tokio::time::Instant::now() + Duration::from_secs(5);
    while c.nodes[0].node.handle.stats().malformed == 0 && tokio::time::Instant::now() < end {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(c.nodes[0].node.handle.stats().malformed, 1);
    // Its channel was released (closed, drained, destroyed).
    let end = tokio::time::Instant::now() + Duration::from_secs(5);
    while c.nodes[0].connector.channels() > 0 && tokio::time::Instant::now() < end {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(c.nodes[0].connector.channels(), 0);
}
