//! `transport rdma`: the composite TCP+RDMA link's paths and raw channel baselines, between the
//! same two sides as the TCP mode and timed by the same `measure`.
//!
//! **The fabric.** By default (`--fabric mock`) every queue pair lives on one in-memory
//! [`MockFabric`]; a third thread (not side A or B, so its work is charged to neither) plays
//! the NIC: it steps the fabric until idle, then sleeps about 20 µs. These numbers are the
//! adapter's own CPU cost over an in-memory fabric, not a network's: a message "moves" by one
//! copy between two registered regions of this process. With `--fabric hw` (a binary built with
//! `--features rdma`) each endpoint is an `RdmaSysVerbs` on the first device with an ACTIVE
//! port (a loopback between two contexts of one device) and the device moves the messages; with
//! no device the bench exits 1 with `no RDMA device: ...`.
//!
//! **Adapter path**: the TCP mode's, with both nodes on `lifeline_transport_rdma::spawn`
//! (default `TcpConfig` and `RdmaConfig`, TCP control on loopback, floods on the data class,
//! so on the queue pair).
//!
//! **Raw path**: the same [`Channel`] pair (default `ChannelConfig`, opened and connected
//! in-process, no driver, no TCP): on A a loop hands `size`-byte frames to the channel (which
//! writes each as `u32 length ‖ frame`, cut into slot-sized messages) until it answers
//! `WouldBlock`, posts, and drains completions; on B a loop drains completions and takes every
//! frame. When a pass made no progress both wait as the adapter's data plane does: on the
//! completion channel ([`CompletionWaiter`]: arm, drain once more, wait until readable), or on
//! the adapter's tick (`RdmaConfig::poll_interval`) for verbs without one. So the ratio is the
//! driver's cost (queues, batching, the node task, the shared plane's lock, the watcher's
//! wake-ups) and not a different wait policy.
//!
//! **Reading the numbers.** On the mock a message moves by one in-process copy done by the
//! "NIC" thread, which shares the two cores with sides A and B and the adapter's tasks; the
//! per-side CPU per frame on stderr is the adapter's own cost. Measured on the 2-vCPU CI VM
//! (9 repetitions): 64 B, adapter 437 k frames/s against 542 k raw (ratio 0.80) and 462 k raw
//! driving the cores (0.96), adapter A/B 909/610 ns per frame; 64 KiB, 1,562 MB/s against
//! 1,913 raw (0.72) and 0.76 against raw driving the cores. Before the completion channel
//! (every task on a 1 ms tick) the same runs gave 55 k frames/s and 364 MB/s on both paths.
//!
//! **Raw path driving the same cores**: that loop with node 0's flood frames as what A sends
//! and node 1 handling what B receives, as in the TCP mode.

use std::collections::VecDeque;
use std::time::{Duration, Instant as StdInstant};

use bytes::Bytes;
use lifeline_core::tree::Rank;
use lifeline_core::{Config, Event, FloodEvent, Instant, Node};
use lifeline_transport_common::AddressBook;
use lifeline_transport_rdma::channel::{Buffers, Channel, ChannelEvent, SendError};
use lifeline_transport_rdma::verbs::{Completion, VerbsError};
use lifeline_transport_rdma::{spawn, CompletionWaiter, MockFabric, RdmaConfig, Verbs};
use lifeline_transport_tcp::{ClusterKey, TcpConfig};
use tokio::net::TcpListener;
use tokio::sync::mpsc;

use super::{adapter_path, max_frame, std_listener, Path, Side};

/// Where the queue pairs live.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Fabric {
    /// One in-process [`MockFabric`], stepped by a thread of its own.
    Mock,
    /// `RdmaSysVerbs` on the first device with an active port (feature `rdma`).
    Hw,
}

impl Fabric {
    pub(super) fn name(self) -> &'static str {
        match self {
            Self::Mock => "mock",
            Self::Hw => "hw",
        }
    }
}

/// The mock fabric's stand-in for a NIC: a thread stepping it until dropped.
pub(super) struct Pump {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Pump {
    fn start(fabric: MockFabric) -> Self {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let s = stop.clone();
        let thread = std::thread::Builder::new()
            .name("mock-fabric".into())
            .spawn(move || {
                while !s.load(std::sync::atomic::Ordering::Relaxed) {
                    if fabric.run(100_000) == 0 {
                        std::thread::sleep(Duration::from_micros(20));
                    }
                }
            })
            .unwrap();
        Self {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Pump {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The adapter, raw and raw-core paths.
pub(super) type Three = (Path, Path, Path);

/// Builds the three paths on `fabric`, and the mock's pump (keep it until the paths are
/// dropped). `Err` when the fabric cannot be had (no device, or `hw` in a binary built without
/// the feature `rdma`): the message says which.
pub(super) fn paths(
    a: &Side,
    b: &Side,
    size: usize,
    fabric: Fabric,
) -> Result<(Three, Option<Pump>), String> {
    match fabric {
        Fabric::Mock => {
            let f = MockFabric::new(7);
            // Stepping before the nodes start: setting up needs no message, sending does.
            let pump = Pump::start(f.clone());
            let paths = build(a, b, size, &mut || Ok(f.endpoint())).map_err(|e| e.to_string())?;
            Ok((paths, Some(pump)))
        }
        #[cfg(feature = "rdma")]
        Fabric::Hw => build(a, b, size, &mut || {
            lifeline_transport_rdma::RdmaSysVerbs::open(None, 4096)
        })
        .map(|p| (p, None))
        .map_err(|e| e.to_string()),
        #[cfg(not(feature = "rdma"))]
        Fabric::Hw => Err(NO_RDMA_SUPPORT.into()),
    }
}

/// `--fabric hw` in a binary built without the feature `rdma`.
#[cfg(not(feature = "rdma"))]
pub(super) const NO_RDMA_SUPPORT: &str = "--fabric hw: this transport binary was built without \
    RDMA support; rebuild it with `cargo build --release -p lifeline-bench --bin transport \
    --features rdma` (needs libibverbs-dev, librdmacm-dev and libclang-dev)";

fn build<V: Verbs + Send + 'static>(
    a: &Side,
    b: &Side,
    size: usize,
    mk: &mut dyn FnMut() -> Result<V, VerbsError>,
) -> Result<Three, VerbsError> {
    // Every endpoint first, so a missing device fails before any node starts.
    let v: [V; 6] = [mk()?, mk()?, mk()?, mk()?, mk()?, mk()?];
    let [v0, v1, r0, r1, c0, c1] = v;
    let (raw0, raw1) = pair(r0, r1, size)?;
    let (core0, core1) = pair(c0, c1, size)?;
    Ok((
        adapter(a, b, size, v0, v1),
        raw(a, b, size, raw0, raw1),
        raw_core(a, b, size, core0, core1),
    ))
}

fn rdma_config(size: usize) -> RdmaConfig {
    let mut cfg = RdmaConfig::default();
    cfg.channel.max_frame = max_frame(size);
    cfg
}

/// The composite link's two nodes, for [`adapter_path`].
fn adapter<V: Verbs + Send + 'static>(a: &Side, b: &Side, size: usize, v0: V, v1: V) -> Path {
    let (l0, l1) = (std_listener(), std_listener());
    let mut book = AddressBook::new();
    book.insert(Rank(0), l0.local_addr().unwrap());
    book.insert(Rank(1), l1.local_addr().unwrap());
    let key = ClusterKey::from_secret(b"transport bench").unwrap();
    let start = move |l: std::net::TcpListener, v: V, book: AddressBook, key: ClusterKey| {
        move |n: Node| {
            let l = TcpListener::from_std(l).unwrap();
            let cfg = rdma_config(size);
            spawn(n, book, key, TcpConfig::default(), cfg, v, l).node
        }
    };
    let s0 = start(l0, v0, book.clone(), key.clone());
    let s1 = start(l1, v1, book, key);
    adapter_path(a, b, size, s0, s1)
}

/// One end of a raw channel: the channel and its endpoint's verbs.
struct End<V> {
    ch: Channel,
    verbs: V,
    start: StdInstant,
}

impl<V: Verbs> End<V> {
    fn now(&self) -> Instant {
        Instant::from_nanos(self.start.elapsed().as_nanos() as u64)
    }

    /// Drains the completion queue into the channel; the completions handled. A link-down
    /// ends the bench (nothing here injects faults).
    fn poll(&mut self) -> usize {
        let mut buf = [Completion::EMPTY; 64];
        let now = self.now();
        let mut total = 0;
        loop {
            let n = self.verbs.poll_cq(&mut buf).unwrap();
            for c in &buf[..n] {
                self.ch.handle_completion(now, &mut self.verbs, c);
            }
            total += n;
            if n < buf.len() {
                break;
            }
        }
        if let Some(ChannelEvent::LinkDown { cause, .. }) = self.ch.poll_event() {
            panic!("raw RDMA channel down: {cause:?}");
        }
        total
    }

    /// Hands `held` to the channel until it answers `WouldBlock`, then posts.
    fn send(&mut self, held: &mut VecDeque<Bytes>) {
        while let Some(f) = held.pop_front() {
            match self.ch.send(f) {
                Ok(_) => {}
                Err(SendError::WouldBlock(f)) => {
                    held.push_front(f);
                    break;
                }
                Err(e) => panic!("raw RDMA send: {e:?}"),
            }
        }
        let now = self.now();
        self.ch.poll_transmit(now, &mut self.verbs);
    }

    /// Takes every received frame into `f`, then posts (credit returns).
    fn receive(&mut self, mut f: impl FnMut(Bytes)) -> usize {
        let now = self.now();
        let mut n = 0;
        while let Some(frame) = self.ch.poll_frame(now, &mut self.verbs) {
            f(frame);
            n += 1;
        }
        self.ch.poll_transmit(now, &mut self.verbs);
        n
    }
}

/// Two channels on `v0` and `v1`, opened and connected to each other in-process.
fn pair<V: Verbs>(mut v0: V, mut v1: V, size: usize) -> Result<(End<V>, End<V>), VerbsError> {
    let cfg = rdma_config(size).channel;
    let setup = |e: lifeline_transport_rdma::channel::SetupError| {
        VerbsError::NoDevice(format!("opening a raw channel: {e}"))
    };
    let b0 = Buffers::register(&mut v0, cfg).map_err(setup)?;
    let b1 = Buffers::register(&mut v1, cfg).map_err(setup)?;
    let mut c0 = Channel::open(&mut v0, b0, 0x1234).map_err(setup)?;
    let mut c1 = Channel::open(&mut v1, b1, 0x5678).map_err(setup)?;
    let (d0, d1) = (c0.local(&v0), c1.local(&v1));
    c0.connect(&mut v0, &d1).map_err(setup)?;
    c1.connect(&mut v1, &d0).map_err(setup)?;
    let start = StdInstant::now();
    Ok((
        End {
            ch: c0,
            verbs: v0,
            start,
        },
        End {
            ch: c1,
            verbs: v1,
            start,
        },
    ))
}

/// The adapter's idle tick, which the raw loops wait on when a pass made no progress and the
/// verbs have no completion channel.
fn tick() -> Duration {
    RdmaConfig::default().poll_interval
}

/// Waits as the adapter's data plane does when a pass made no progress: on the completion
/// channel (armed, then one more drain, so a completion after the last drain is never
/// missed), or on the tick without one.
async fn idle<V: Verbs>(end: &mut End<V>, waiter: Option<&CompletionWaiter>) {
    let Some(w) = waiter else {
        tokio::time::sleep(tick()).await;
        return;
    };
    end.verbs.arm_cq().unwrap();
    if end.poll() > 0 {
        return;
    }
    w.readable().await.unwrap();
    end.verbs.take_cq_events().unwrap();
}

/// Side A of a raw path: `next(k)` yields up to `k` frames to send; ends each repetition once
/// `frames` were produced and the channel holds none unposted.
async fn raw_send<V: Verbs>(
    mut end: End<V>,
    mut go: mpsc::Receiver<u64>,
    done: mpsc::Sender<()>,
    mut next: impl FnMut(u64, &mut VecDeque<Bytes>) -> u64,
) {
    let mut held = VecDeque::new();
    let waiter = CompletionWaiter::new(&end.verbs).unwrap();
    while let Some(frames) = go.recv().await {
        let mut made = 0u64;
        loop {
            let polled = end.poll();
            if held.is_empty() && made < frames {
                made += next(frames - made, &mut held);
            }
            let before = held.len();
            end.send(&mut held);
            // Credit-only messages from B arrive as (empty) receives.
            end.receive(drop);
            if made == frames && held.is_empty() && end.ch.queued() == 0 {
                break;
            }
            if polled == 0 && held.len() == before {
                idle(&mut end, waiter.as_ref()).await;
            }
        }
        let _ = done.send(()).await;
    }
}

/// Side B of a raw path: `take(frame)` counts what a repetition waits for.
async fn raw_receive<V: Verbs>(
    mut end: End<V>,
    mut go: mpsc::Receiver<u64>,
    done: mpsc::Sender<()>,
    mut take: impl FnMut(Instant, Bytes) -> u64,
) {
    let waiter = CompletionWaiter::new(&end.verbs).unwrap();
    while let Some(frames) = go.recv().await {
        let mut got = 0u64;
        while got < frames {
            let polled = end.poll();
            let now = end.now();
            let mut n = 0;
            end.receive(|f| n += take(now, f));
            got += n;
            if polled == 0 && n == 0 {
                idle(&mut end, waiter.as_ref()).await;
            }
        }
        let _ = done.send(()).await;
    }
}

/// The raw channel path: `size`-byte frames, no core.
fn raw<V: Verbs + Send + 'static>(a: &Side, b: &Side, size: usize, e0: End<V>, e1: End<V>) -> Path {
    let payload = Bytes::from(vec![0xab; size]);
    let batch = (256 * 1024 / size).clamp(1, 4096) as u64;
    Path::new(
        a,
        b,
        move |go, done| {
            raw_send(e0, go, done, move |left, held| {
                let k = batch.min(left);
                held.extend((0..k).map(|_| payload.clone()));
                k
            })
        },
        move |go, done| {
            raw_receive(e1, go, done, move |_, f| {
                assert_eq!(f.len(), size);
                std::hint::black_box(f);
                1
            })
        },
    )
}

/// The raw channel path driving bare nodes 0 and 1, as the TCP mode's `raw_core_path`.
fn raw_core<V: Verbs + Send + 'static>(
    a: &Side,
    b: &Side,
    size: usize,
    e0: End<V>,
    e1: End<V>,
) -> Path {
    let mut cfg = Config::new(2, 2);
    cfg.max_frame = max_frame(size);
    let node = |r| Node::new(cfg.clone(), Rank(r), 7, Instant::ZERO).unwrap();
    let (mut n0, mut n1) = (node(0), node(1));
    let payload = Bytes::from(vec![0xab; size]);
    let batch = (256 * 1024 / size).clamp(1, 4096) as u64;
    let start = StdInstant::now();
    Path::new(
        a,
        b,
        move |go, done| {
            raw_send(e0, go, done, move |left, held| {
                let now = Instant::from_nanos(start.elapsed().as_nanos() as u64);
                let k = batch.min(left);
                for _ in 0..k {
                    n0.flood(now, payload.clone()).unwrap();
                }
                while n0.poll_event().is_some() {}
                while let Some(t) = n0.poll_transmit() {
                    held.push_back(t.frame);
                }
                k
            })
        },
        move |go, done| {
            raw_receive(e1, go, done, move |now, f| {
                n1.handle_frame(now, Rank(0), f);
                let mut delivered = 0;
                while let Some(e) = n1.poll_event() {
                    delivered += u64::from(matches!(e, Event::Flood(FloodEvent::Delivered { .. })));
                }
                while n1.poll_transmit().is_some() {}
                delivered
            })
        },
    )
}
