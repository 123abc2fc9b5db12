//! `transport`: a transport adapter's frame throughput between two nodes on loopback, against a
//! raw tokio length-prefixed baseline measured in the same run (issue #6).
//!
//! ```sh
//! cargo run --release -p lifeline-bench --bin transport -- quic --size 65536
//! cargo run --release -p lifeline-bench --bin transport -- tcp --size 64
//! cargo run --release -p lifeline-bench --bin transport -- tcp --size 65536 --reps 15
//! cargo run --release -p lifeline-bench --bin transport -- rdma --size 64
//! ```
//!
//! **`quic`**: the same experiment on the QUIC adapter, against raw quinn (one connection with
//! the identity layer's TLS configs, the same frames on one stream) and raw quinn driving the
//! same cores; see `transport/quic.rs`. The JSON line has the same keys. It chose the driver's
//! default `queue_soft_bytes` of 1 MiB (`DriverConfig` in `transport-common/src/driver/mod.rs`):
//! `quic --size 65536` measured 0.78-0.80 of raw quinn with 16 MiB and 0.91-0.95 with 1 MiB
//! (TCP unchanged), since a short queue keeps a frame hot in cache between the core encoding it
//! and the transport sending it.
//!
//! **`rdma`**: the composite TCP+RDMA link (`lifeline_transport_rdma::spawn`, floods on one RC
//! queue pair) against the same `Channel` pair driven by a bare loop, and that loop driving
//! the same cores; see `transport/rdma.rs`. By default over the in-memory **mock** fabric
//! (`--fabric mock`, no RDMA library needed): the numbers are the adapter's own CPU cost, not a
//! network's. `--fabric hw` (a binary built with `--features rdma`) runs on the first RDMA
//! device with an active port and exits 1 with `no RDMA device: ...` where there is none. The
//! JSON line adds `"fabric"`.
//!
//! **Two sides.** Each side is one OS thread running a single-threaded tokio runtime, as a
//! `lifeline node` process does: side A holds the sender, side B the receiver. (One shared
//! multi-thread runtime let work stealing place the sender's and receiver's tasks on one vCPU
//! or two at random, and a wake across vCPUs costs tens of microseconds in this VM, so the
//! per-repetition ratio swung between 0.4 and 2.8.)
//!
//! **Adapter path** (the whole stack): on A, node 0's application floods `size`-byte payloads
//! in commands of up to 256 KiB (the core encodes each into a frame) and node 0's adapter
//! queues and writes them on the data connection; on B, node 1's adapter splits them off the
//! byte stream, its core decodes and de-duplicates them, and its application receives one
//! `Event::Flood(FloodEvent::Delivered { .. })` per frame (reading outputs with `recv_many`, as a throughput-minded
//! application would). Both nodes use the default `TcpConfig` and the default core `Config`
//! (only `max_frame` is raised to fit the payload); node 0's own outputs (its local
//! deliveries) are read and dropped by a task on A.
//!
//! **Raw path** (the baseline): one TCP connection with `TCP_NODELAY`; on A the writer puts
//! `u32 length + payload` through a `BufWriter` of the adapter's `io_buffer` (256 KiB) and
//! flushes at the end; on B the reader reads into one `BytesMut` of the same capacity, many
//! frames per read, checks each length against the same `max_frame` and splits each frame off
//! as its own `Bytes` (`split_to` + `freeze`, no copy or allocation per frame). That is the
//! best plain tokio framing we know, so the ratio is the adapter's real cost, not a
//! strawman's.
//!
//! **Raw path driving the same cores** (context for the adapter's own cost): the raw loop
//! above, but node 0's flood frames are what it writes and node 1 handles what it reads, so
//! both sides of `ratio_vs_raw_core` pay the core's per-frame work and the ratio isolates the
//! adapter (handshake, two classes, queues, back-pressure, the driver's batching).
//!
//! **Measurement**: both paths are set up once (nodes linked, the raw connection open) and each
//! runs one untimed warm-up round; then `--reps` repetitions each time both paths back to back,
//! alternating which goes first. A repetition is timed from the moment both sides are told to
//! start until the receiver has every frame. Per-repetition lines go to stderr, with each side's
//! median CPU time per frame on each path (from the side thread's schedstat: it shows which
//! side limits the rate, and is steadier than wall time when the machine is shared) and the
//! rate of the core alone (both nodes' protocol work on one thread, no I/O); the last stdout
//! line is JSON: the median rate of each path and the median of the per-repetition ratios
//! (pairing cancels load that drifts between repetitions on a shared machine):
//! `{"size","adapter_mb_s","raw_mb_s","ratio","adapter_msgs_s","raw_msgs_s","raw_core_msgs_s",
//! "ratio_vs_raw_core"}` (MB/s of payload, ratio = adapter rate / raw rate).
//!
//! **Reading the numbers on a 2-vCPU VM.** At 64 KiB a run settles in one of two modes: when
//! the kernel keeps the two side threads on one vCPU (`taskset -c 0` forces it) the adapter
//! gets about 0.5-0.7 of raw; when they run on different vCPUs it gets 0.9-2.5x raw (its
//! writer gathers large frames by reference and its reader reads large bodies straight into
//! their own buffers). On one vCPU the sender's extra cost is mostly page faults: the core
//! encodes every frame into a fresh 64 KiB allocation, and glibc returns the memory each time
//! the send queue drains (`GLIBC_TUNABLES=glibc.malloc.trim_threshold=4000000000` halves the
//! sender's CPU per frame). At 64 B the core's own work per frame (about 330 ns for both
//! nodes, the "core alone" line) bounds the ratio to roughly 0.1 against a raw path that
//! spends about 20 ns per frame per side.

use lifeline_core::FloodEvent;
use std::process::ExitCode;
use std::time::{Duration, Instant as StdInstant};

use bytes::{Buf, Bytes, BytesMut};
use lifeline_bench::args::Flags;
use lifeline_bench::report::{json_line, median};
use lifeline_bench::CliError;
use lifeline_core::tree::Rank;
use lifeline_core::{Config, Event, Instant, Node};
use lifeline_transport_common::RunningNode;
use lifeline_transport_tcp::{spawn, AddressBook, ClusterKey, Output, TcpConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufWriter};
use tokio::net::{TcpListener, TcpStream};
use tokio::runtime::Handle as Rt;
use tokio::sync::{mpsc, oneshot};

#[path = "transport/quic.rs"]
mod quic;
#[path = "transport/rdma.rs"]
mod rdma;

const USAGE: &str = "\
usage: transport tcp|quic|rdma --size BYTES [--frames N] [--reps N] [--fabric mock|hw]

  --size     payload bytes per frame (required; e.g. 64 or 65536)
  --fabric   rdma only: `mock` (default; in-memory, measures the adapter's own CPU cost) or
             `hw` (the first RDMA device; needs a binary built with --features rdma)
  --frames   frames per repetition (default: 256 MiB of payload, between 1,000 and 1,000,000)
  --reps     timed repetitions, each running both paths (default 9)

Last stdout line: {\"size\",\"adapter_mb_s\",\"raw_mb_s\",\"ratio\",\"adapter_msgs_s\",\"raw_msgs_s\",
\"raw_core_msgs_s\",\"ratio_vs_raw_core\"} (rdma adds \"fabric\")";

/// Largest payload accepted: the core's largest frame less room for the envelope.
const MAX_SIZE: usize = (lifeline_core::MAX_FRAME as usize) - 1024;

/// The adapter under test.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// TCP against raw tokio TCP.
    Tcp,
    /// QUIC against raw quinn.
    Quic,
    /// The composite TCP+RDMA link against its raw `Channel` pair, on this fabric.
    Rdma(rdma::Fabric),
}

struct Params {
    mode: Mode,
    size: usize,
    frames: u64,
    reps: usize,
}

fn parse(args: &[String]) -> Result<Params, CliError> {
    let Some((sub, rest)) = args.split_first() else {
        return Err(CliError::Usage(
            "no transport given (tcp, quic or rdma)".into(),
        ));
    };
    if sub == "-h" || sub == "--help" {
        return Err(CliError::Help);
    }
    let f = Flags::parse(rest, &["size", "frames", "reps", "fabric"])?;
    let fabric: String = f.get("fabric", Some("mock".into()))?;
    let mode = match (sub.as_str(), fabric.as_str()) {
        ("rdma", "mock") => Mode::Rdma(rdma::Fabric::Mock),
        ("rdma", "hw") => Mode::Rdma(rdma::Fabric::Hw),
        ("rdma", other) => {
            return Err(CliError::Usage(format!(
                "unknown --fabric {other:?} (mock or hw)"
            )))
        }
        (_, "mock") if args.iter().all(|a| a != "--fabric") => match sub.as_str() {
            "tcp" => Mode::Tcp,
            "quic" => Mode::Quic,
            _ => {
                return Err(CliError::Usage(format!(
                    "unknown transport {sub:?} (tcp, quic or rdma)"
                )))
            }
        },
        _ => return Err(CliError::Usage("--fabric is for rdma only".into())),
    };
    let size: usize = f.get("size", None)?;
    if size == 0 || size > MAX_SIZE {
        return Err(CliError::Usage(format!("--size must be 1..={MAX_SIZE}")));
    }
    let default_frames = ((256usize << 20) / size).clamp(1000, 1_000_000) as u64;
    let frames: u64 = f.get("frames", Some(default_frames))?;
    let reps: usize = f.get("reps", Some(9))?;
    if frames == 0 || reps == 0 {
        return Err(CliError::Usage(
            "--frames and --reps must be positive".into(),
        ));
    }
    Ok(Params {
        mode,
        size,
        frames,
        reps,
    })
}

fn max_frame(size: usize) -> u32 {
    u32::try_from((size + 1024).max(1 << 20)).unwrap_or(lifeline_core::MAX_FRAME)
}

// ---- the two sides ----

/// One side: a thread running a single-threaded runtime until told to stop.
struct Side {
    rt: Rt,
    /// The thread's `/proc/self/task/TID/schedstat` (Linux), for its CPU time.
    schedstat: Option<std::path::PathBuf>,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Side {
    fn new(name: &str) -> Self {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let handle = rt.handle().clone();
        let (stop, stopped) = oneshot::channel::<()>();
        let (me_tx, me) = std::sync::mpsc::channel();
        let thread = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                // "PID/task/TID"
                let _ = me_tx.send(std::fs::read_link("/proc/thread-self").ok());
                rt.block_on(async {
                    let _ = stopped.await;
                });
            })
            .unwrap();
        let schedstat = me
            .recv()
            .ok()
            .flatten()
            .map(|t| std::path::Path::new("/proc").join(t).join("schedstat"));
        Self {
            rt: handle,
            schedstat,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    /// Nanoseconds this side's thread has run on a CPU (user and system), if known.
    fn cpu_ns(&self) -> Option<u64> {
        let text = std::fs::read_to_string(self.schedstat.as_ref()?).ok()?;
        text.split_whitespace().next()?.parse().ok()
    }
}

impl Drop for Side {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A task on each side, driven one repetition at a time: `go` tells both to start on `n`
/// frames, `done` says the receiver has them all (the sender's own end is awaited after).
struct Path {
    send_go: mpsc::Sender<u64>,
    send_done: mpsc::Receiver<()>,
    recv_go: mpsc::Sender<u64>,
    recv_done: mpsc::Receiver<()>,
}

impl Path {
    fn new<S, R, SF, RF>(a: &Side, b: &Side, sender: S, receiver: R) -> Self
    where
        S: FnOnce(mpsc::Receiver<u64>, mpsc::Sender<()>) -> SF,
        R: FnOnce(mpsc::Receiver<u64>, mpsc::Sender<()>) -> RF,
        SF: std::future::Future<Output = ()> + Send + 'static,
        RF: std::future::Future<Output = ()> + Send + 'static,
    {
        let (send_go, sgo) = mpsc::channel(1);
        let (sdone, send_done) = mpsc::channel(1);
        let (recv_go, rgo) = mpsc::channel(1);
        let (rdone, recv_done) = mpsc::channel(1);
        a.rt.spawn(sender(sgo, sdone));
        b.rt.spawn(receiver(rgo, rdone));
        Self {
            send_go,
            send_done,
            recv_go,
            recv_done,
        }
    }

    /// One repetition: its time, and each side's CPU time per frame in ns (NaN if unknown).
    fn run(&mut self, frames: u64, a: &Side, b: &Side) -> (Duration, [f64; 2]) {
        let cpu0 = [a.cpu_ns(), b.cpu_ns()];
        let start = StdInstant::now();
        self.recv_go.blocking_send(frames).unwrap();
        self.send_go.blocking_send(frames).unwrap();
        self.recv_done.blocking_recv().expect("receiver stopped");
        let took = start.elapsed();
        self.send_done.blocking_recv().expect("sender stopped");
        let cpu1 = [a.cpu_ns(), b.cpu_ns()];
        let per_frame = |i: usize| match (cpu0[i], cpu1[i]) {
            (Some(x), Some(y)) => y.saturating_sub(x) as f64 / frames as f64,
            _ => f64::NAN,
        };
        (took, [per_frame(0), per_frame(1)])
    }
}

fn std_listener() -> std::net::TcpListener {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.set_nonblocking(true).unwrap();
    l
}

// ---- the adapter path ----

/// The TCP adapter's two nodes, for [`adapter_path`].
fn tcp_adapter_path(a: &Side, b: &Side, size: usize) -> Path {
    let (l0, l1) = (std_listener(), std_listener());
    let mut book = AddressBook::new();
    book.insert(Rank(0), l0.local_addr().unwrap());
    book.insert(Rank(1), l1.local_addr().unwrap());
    let key = ClusterKey::from_secret(b"bench").unwrap();
    let (book0, key0) = (book.clone(), key.clone());
    adapter_path(
        a,
        b,
        size,
        move |n0| {
            spawn(
                n0,
                book0,
                key0,
                TcpConfig::default(),
                TcpListener::from_std(l0).unwrap(),
            )
        },
        move |n1| {
            spawn(
                n1,
                book,
                key,
                TcpConfig::default(),
                TcpListener::from_std(l1).unwrap(),
            )
        },
    )
}

/// Node 0 on side A floods, node 1 on side B delivers; `start0` and `start1` start each node
/// on its adapter (called on its side's runtime).
fn adapter_path<S0, S1>(a: &Side, b: &Side, size: usize, start0: S0, start1: S1) -> Path
where
    S0: FnOnce(Node) -> RunningNode + Send + 'static,
    S1: FnOnce(Node) -> RunningNode + Send + 'static,
{
    let mut cfg = Config::new(2, 2);
    cfg.max_frame = max_frame(size);
    let node = |r| Node::new(cfg.clone(), Rank(r), 7, Instant::ZERO).unwrap();
    let (n0, n1) = (node(0), node(1));
    let payload = Bytes::from(vec![0xab; size]);
    let batch = (256 * 1024 / size).clamp(1, 4096) as u64;
    let (ready_tx, ready) = oneshot::channel();
    let path = Path::new(
        a,
        b,
        move |mut go, done| async move {
            let mut n0 = start0(n0);
            // Node 0's application: its own deliveries are read and dropped.
            tokio::spawn(async move {
                let mut buf = Vec::with_capacity(1024);
                while n0.outputs.recv_many(&mut buf, 1024).await > 0 {
                    buf.clear();
                }
            });
            let h = n0.handle;
            while let Some(frames) = go.recv().await {
                let mut sent = 0u64;
                while sent < frames {
                    let k = batch.min(frames - sent);
                    let p = payload.clone();
                    let r = h
                        .command(move |n, now| {
                            for _ in 0..k {
                                n.flood(now, p.clone()).unwrap();
                            }
                        })
                        .await;
                    match r {
                        Ok(()) => sent += k,
                        // Back-pressure: a send queue is over its soft bound; wait until the
                        // writers drained it, as a throughput-minded application would.
                        Err(_) => h.writable().await.expect("node 0 running"),
                    }
                }
                let _ = done.send(()).await;
            }
            h.shutdown().await;
        },
        move |mut go, done| async move {
            let mut n1 = start1(n1);
            while let Some(o) = n1.outputs.recv().await {
                if matches!(o, Output::LinkUp { .. }) {
                    break;
                }
            }
            let _ = ready_tx.send(());
            let mut buf = Vec::with_capacity(1024);
            while let Some(frames) = go.recv().await {
                let mut got = 0u64;
                while got < frames {
                    assert!(
                        n1.outputs.recv_many(&mut buf, 1024).await > 0,
                        "node 1 stopped"
                    );
                    for o in buf.drain(..) {
                        if let Output::Event {
                            event: Event::Flood(FloodEvent::Delivered { payload, .. }),
                            ..
                        } = o
                        {
                            assert_eq!(payload.len(), size);
                            got += 1;
                        }
                    }
                }
                let _ = done.send(()).await;
            }
            n1.handle.shutdown().await;
        },
    );
    ready.blocking_recv().expect("nodes never linked");
    path
}

// ---- the raw path ----

/// One raw connection: the writer on side A, the reader on side B.
fn raw_path(a: &Side, b: &Side, size: usize) -> Path {
    let cap = TcpConfig::default().io_buffer;
    let max = max_frame(size) as usize;
    let l = std_listener();
    let addr = l.local_addr().unwrap();
    Path::new(
        a,
        b,
        move |mut go, done| async move {
            let s = TcpStream::connect(addr).await.unwrap();
            s.set_nodelay(true).unwrap();
            let payload = vec![0xab; size];
            let mut w = BufWriter::with_capacity(cap, s);
            while let Some(frames) = go.recv().await {
                for _ in 0..frames {
                    w.write_u32(size as u32).await.unwrap();
                    w.write_all(&payload).await.unwrap();
                }
                w.flush().await.unwrap();
                let _ = done.send(()).await;
            }
        },
        move |go, done| async move {
            let l = TcpListener::from_std(l).unwrap();
            let (rd, _) = l.accept().await.unwrap();
            rd.set_nodelay(true).unwrap();
            raw_receive(rd, max, cap, go, done).await;
        },
    )
}

// ---- the raw path driving the same cores ----

/// The same protocol work as the adapter path, driven by the simplest tokio loop: one
/// connection, no handshake, no second class, no queues. On A a bare node 0 floods in batches
/// and its frames (already length-prefixed by the envelope) go through a `BufWriter`; on B the
/// reader splits frames off one `BytesMut` with `wire::frame_len` and hands each to a bare
/// node 1, counting its `FloodDelivered` events. Adapter / this = what the adapter itself
/// costs, with the core's per-frame work on both sides of the ratio.
fn raw_core_path(a: &Side, b: &Side, size: usize) -> Path {
    let cap = TcpConfig::default().io_buffer;
    let l = std_listener();
    let addr = l.local_addr().unwrap();
    let mut cfg = Config::new(2, 2);
    cfg.max_frame = max_frame(size);
    let limits = cfg.limits();
    let node = |r| Node::new(cfg.clone(), Rank(r), 7, Instant::ZERO).unwrap();
    let (mut n0, n1) = (node(0), node(1));
    let batch = (256 * 1024 / size).clamp(1, 4096) as u64;
    Path::new(
        a,
        b,
        move |mut go, done| async move {
            let s = TcpStream::connect(addr).await.unwrap();
            s.set_nodelay(true).unwrap();
            let payload = Bytes::from(vec![0xab; size]);
            let mut w = BufWriter::with_capacity(cap, s);
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
                        w.write_all(&t.frame).await.unwrap();
                    }
                }
                w.flush().await.unwrap();
                let _ = done.send(()).await;
            }
        },
        move |go, done| async move {
            let l = TcpListener::from_std(l).unwrap();
            let (rd, _) = l.accept().await.unwrap();
            rd.set_nodelay(true).unwrap();
            raw_core_receive(rd, n1, limits, cap, go, done).await;
        },
    )
}

/// The raw paths' reader: `u32 length + payload` frames read into one `BytesMut` of `cap`
/// bytes, many per read, each length checked against `max` and each frame split off as its own
/// `Bytes` (no copy or allocation per frame); `done` after each round of `go` frames.
async fn raw_receive(
    mut rd: impl tokio::io::AsyncRead + Unpin,
    max: usize,
    cap: usize,
    mut go: mpsc::Receiver<u64>,
    done: mpsc::Sender<()>,
) {
    let mut buf = BytesMut::with_capacity(cap);
    while let Some(frames) = go.recv().await {
        let mut got = 0u64;
        while got < frames {
            while buf.len() >= 4 && got < frames {
                let len = u32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize;
                assert!(len <= max, "raw frame over max_frame");
                if buf.len() < 4 + len {
                    buf.reserve(4 + len - buf.len());
                    break;
                }
                let mut frame = buf.split_to(4 + len).freeze();
                frame.advance(4);
                std::hint::black_box(frame);
                got += 1;
            }
            if got == frames {
                break;
            }
            if buf.capacity() - buf.len() < cap / 8 {
                buf.reserve(cap);
            }
            assert!(
                rd.read_buf(&mut buf).await.unwrap() > 0,
                "raw stream closed"
            );
        }
        let _ = done.send(()).await;
    }
}

/// The receiving side of a raw path driving the core (TCP and QUIC modes alike): splits whole
/// frames off `rd` with `wire::frame_len` into one `BytesMut` (growing it by `cap`), hands each
/// to the bare node `n1`, and answers each batch of `go` once that many floods were delivered.
async fn raw_core_receive(
    mut rd: impl tokio::io::AsyncRead + Unpin,
    mut n1: Node,
    limits: lifeline_core::wire::Limits,
    cap: usize,
    mut go: mpsc::Receiver<u64>,
    done: mpsc::Sender<()>,
) {
    let mut buf = BytesMut::with_capacity(cap);
    let start = StdInstant::now();
    while let Some(frames) = go.recv().await {
        let mut got = 0u64;
        while got < frames {
            let now = Instant::from_nanos(start.elapsed().as_nanos() as u64);
            while let Some(len) = lifeline_core::wire::frame_len(&buf, &limits).unwrap() {
                if buf.len() < len {
                    buf.reserve(len - buf.len());
                    break;
                }
                n1.handle_frame(now, Rank(0), buf.split_to(len).freeze());
            }
            while let Some(e) = n1.poll_event() {
                got += u64::from(matches!(e, Event::Flood(FloodEvent::Delivered { .. })));
            }
            while n1.poll_transmit().is_some() {}
            if got >= frames {
                break;
            }
            if buf.capacity() - buf.len() < cap / 8 {
                buf.reserve(cap);
            }
            assert!(
                rd.read_buf(&mut buf).await.unwrap() > 0,
                "raw stream closed"
            );
        }
        let _ = done.send(()).await;
    }
}

// ---- the core alone ----

/// The protocol work of the adapter path without any I/O, on one thread: node 0 floods
/// (encodes), node 1 handles each frame (decodes, de-duplicates, delivers), both drained in
/// batches as the driver does. Its rate bounds what any adapter can reach on one core; printed
/// to stderr for context, not part of the JSON.
fn core_only(size: usize, frames: u64) -> f64 {
    let mut cfg = Config::new(2, 2);
    cfg.max_frame = max_frame(size);
    let mut n0 = Node::new(cfg.clone(), Rank(0), 7, Instant::ZERO).unwrap();
    let mut n1 = Node::new(cfg, Rank(1), 7, Instant::ZERO).unwrap();
    let payload = Bytes::from(vec![0xab; size]);
    let mut delivered = 0u64;
    let start = StdInstant::now();
    let mut sent = 0u64;
    while sent < frames {
        let now = Instant::from_nanos(u64::try_from(start.elapsed().as_nanos()).unwrap());
        let k = 64.min(frames - sent);
        for _ in 0..k {
            n0.flood(now, payload.clone()).unwrap();
        }
        sent += k;
        while n0.poll_event().is_some() {}
        while let Some(t) = n0.poll_transmit() {
            n1.handle_frame(now, Rank(0), t.frame);
        }
        while let Some(e) = n1.poll_event() {
            delivered += u64::from(matches!(e, Event::Flood(FloodEvent::Delivered { .. })));
        }
        while n1.poll_transmit().is_some() {}
    }
    assert_eq!(delivered, frames, "the core lost floods");
    frames as f64 / start.elapsed().as_secs_f64()
}

// ---- the experiment ----

/// Runs the experiment; its JSON line, or why the paths could not be set up (no RDMA device).
fn measure(p: &Params) -> Result<String, String> {
    let (a, b) = (Side::new("side-a"), Side::new("side-b"));
    // The RDMA mode's mock fabric pump: kept until the paths are gone.
    let mut rdma_pump = None;
    let (mut adapter, mut raw, mut raw_core) = match p.mode {
        Mode::Quic => (
            quic::adapter(&a, &b, p.size),
            quic::raw(&a, &b, p.size),
            quic::raw_core(&a, &b, p.size),
        ),
        Mode::Tcp => (
            tcp_adapter_path(&a, &b, p.size),
            raw_path(&a, &b, p.size),
            raw_core_path(&a, &b, p.size),
        ),
        Mode::Rdma(fabric) => {
            if fabric == rdma::Fabric::Mock {
                eprintln!(
                    "fabric: MOCK (in-memory, in-process): these numbers are the adapter's own \
                     CPU cost over an in-memory fabric, not a network"
                );
            }
            let (paths, pump) = rdma::paths(&a, &b, p.size, fabric)?;
            rdma_pump = pump;
            paths
        }
    };
    let warm = (p.frames / 4).max(1);
    adapter.run(warm, &a, &b);
    raw.run(warm, &a, &b);
    raw_core.run(warm, &a, &b);
    let (mut rc_rates, mut rc_ratios) = (Vec::new(), Vec::new());
    let (mut a_rates, mut r_rates, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    // CPU ns per frame: [adapter side A, adapter side B, raw side A, raw side B, raw core side
    // A, raw core side B].
    let mut cpu: [Vec<f64>; 6] = Default::default();
    for rep in 0..p.reps {
        let ((ta, ca), (tr, cr)) = if rep % 2 == 0 {
            let x = adapter.run(p.frames, &a, &b);
            (x, raw.run(p.frames, &a, &b))
        } else {
            let y = raw.run(p.frames, &a, &b);
            (adapter.run(p.frames, &a, &b), y)
        };
        let (a_rate, r_rate) = (
            p.frames as f64 / ta.as_secs_f64(),
            p.frames as f64 / tr.as_secs_f64(),
        );
        let (trc, crc) = raw_core.run(p.frames, &a, &b);
        for (v, c) in cpu
            .iter_mut()
            .zip([ca[0], ca[1], cr[0], cr[1], crc[0], crc[1]])
        {
            v.push(c);
        }
        let rc_rate = p.frames as f64 / trc.as_secs_f64();
        eprintln!(
            "rep {rep}: adapter {a_rate:.0} msgs/s, raw {r_rate:.0} msgs/s, ratio {:.3}; \
             raw driving the same cores {rc_rate:.0} msgs/s, ratio {:.3}",
            a_rate / r_rate,
            a_rate / rc_rate
        );
        rc_rates.push(rc_rate);
        rc_ratios.push(a_rate / rc_rate);
        a_rates.push(a_rate);
        r_rates.push(r_rate);
        ratios.push(a_rate / r_rate);
    }
    // Closing the go channels ends the tasks (the nodes shut down); then the sides stop.
    drop((adapter, raw, raw_core));
    drop(rdma_pump);
    drop((a, b));
    let (a_msgs, r_msgs, ratio) = (
        median(&mut a_rates),
        median(&mut r_rates),
        median(&mut ratios),
    );
    let [ca, cb, ra, rb, rca, rcb] = cpu.map(|mut v| median(&mut v));
    eprintln!(
        "CPU per frame (medians): adapter side A {ca:.0} ns, side B {cb:.0} ns; \
         raw side A {ra:.0} ns, side B {rb:.0} ns; raw driving the cores side A {rca:.0} ns, \
         side B {rcb:.0} ns"
    );
    let mb = |msgs: f64| (msgs * p.size as f64 / 1e6 * 10.0).round() / 10.0;
    let mut fields = vec![
        ("size", p.size.into()),
        ("adapter_mb_s", mb(a_msgs).into()),
        ("raw_mb_s", mb(r_msgs).into()),
        ("ratio", ((ratio * 1000.0).round() / 1000.0).into()),
        ("adapter_msgs_s", (a_msgs.round() as u64).into()),
        ("raw_msgs_s", (r_msgs.round() as u64).into()),
        (
            "raw_core_msgs_s",
            (median(&mut rc_rates).round() as u64).into(),
        ),
        (
            "ratio_vs_raw_core",
            ((median(&mut rc_ratios) * 1000.0).round() / 1000.0).into(),
        ),
    ];
    if let Mode::Rdma(fabric) = p.mode {
        fields.push(("fabric", fabric.name().into()));
    }
    Ok(json_line(&fields))
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let p = match parse(&args) {
        Ok(p) => p,
        Err(CliError::Help) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("error: {e}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let line = match measure(&p) {
        Ok(line) => line,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    eprintln!(
        "core alone (no I/O, one thread): {:.0} msgs/s",
        core_only(p.size, p.frames)
    );
    eprintln!(
        "{} frames of {} B per repetition, {} repetitions",
        p.frames, p.size, p.reps
    );
    println!("{line}");
    ExitCode::SUCCESS
}
