//! `transport`: a transport adapter's frame throughput between two nodes on loopback, against a
//! raw tokio length-prefixed baseline measured in the same run (issue #6).
//!
//! ```sh
//! cargo run --release -p lifeline-bench --bin transport -- tcp --size 64
//! cargo run --release -p lifeline-bench --bin transport -- tcp --size 65536 --reps 9
//! ```
//!
//! **Adapter path** (the whole stack): node 0's application floods `size`-byte payloads in
//! commands of up to 256 KiB (the core encodes each into a frame), node 0's adapter queues and
//! writes them on the data connection, node 1's adapter splits them off the byte stream, its
//! core decodes and de-duplicates them, and its application receives one
//! `Event::FloodDelivered` per frame (it reads outputs with `recv_many`, as a throughput-minded
//! application would). Both nodes use the default `TcpConfig` and the default core `Config`
//! (only `max_frame` is raised to fit the payload); node 0's own outputs (its local deliveries)
//! are read and discarded by another task.
//!
//! **Raw path** (the baseline): one TCP connection with `TCP_NODELAY`, the writer puts
//! `u32 length + payload` through a `BufWriter` of the adapter's `io_buffer` (256 KiB) and
//! flushes at the end; the reader reads into one `BytesMut` of the same capacity, many frames
//! per read, checks each length against the same `max_frame` and splits each frame off as its
//! own `Bytes` (`split_to` + `freeze`, no copy, no allocation per frame). That is the best plain
//! tokio framing we know, so the ratio is the adapter's real cost, not a strawman's.
//!
//! **Measurement**: both paths are set up once (nodes linked, the raw connection open) and each
//! runs one untimed warm-up round; then `--reps` repetitions each time both paths back to back,
//! alternating which goes first. Each repetition gives one adapter time, one raw time and
//! their ratio. Per-repetition lines go to stderr; the last stdout line is JSON: the median
//! rates of each path and the median of the per-repetition ratios (pairing cancels load that
//! drifts between repetitions on a shared machine):
//! `{"size","adapter_mb_s","raw_mb_s","ratio","adapter_msgs_s","raw_msgs_s"}` (MB/s of payload,
//! ratio = adapter rate / raw rate).

use std::process::ExitCode;
use std::time::{Duration, Instant as StdInstant};

use bytes::{Buf, Bytes, BytesMut};
use lifeline_bench::args::Flags;
use lifeline_bench::report::{json_line, median};
use lifeline_bench::CliError;
use lifeline_core::tree::Rank;
use lifeline_core::{Config, Event, Instant, Node};
use lifeline_transport_tcp::{spawn, AddressBook, ClusterKey, Handle, Output, TcpConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufWriter};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

const USAGE: &str = "\
usage: transport tcp --size BYTES [--frames N] [--reps N] [--threads N]

  --size     payload bytes per frame (required; e.g. 64 or 65536)
  --frames   frames per repetition (default: 256 MiB of payload, between 1,000 and 1,000,000)
  --reps     timed repetitions, each running both paths (default 7)
  --threads  tokio worker threads (default 2)

Last stdout line: {\"size\",\"adapter_mb_s\",\"raw_mb_s\",\"ratio\",\"adapter_msgs_s\",\"raw_msgs_s\"}";

/// Largest payload accepted: the core's largest frame less room for the envelope.
const MAX_SIZE: usize = (lifeline_core::MAX_FRAME as usize) - 1024;

struct Params {
    size: usize,
    frames: u64,
    reps: usize,
    threads: usize,
}

fn parse(args: &[String]) -> Result<Params, CliError> {
    let Some((sub, rest)) = args.split_first() else {
        return Err(CliError::Usage("no transport given (tcp)".into()));
    };
    if sub == "-h" || sub == "--help" {
        return Err(CliError::Help);
    }
    if sub != "tcp" {
        return Err(CliError::Usage(format!(
            "unknown transport {sub:?} (only tcp so far)"
        )));
    }
    let f = Flags::parse(rest, &["size", "frames", "reps", "threads"])?;
    let size: usize = f.get("size", None)?;
    if size == 0 || size > MAX_SIZE {
        return Err(CliError::Usage(format!("--size must be 1..={MAX_SIZE}")));
    }
    let default_frames = ((256usize << 20) / size).clamp(1000, 1_000_000) as u64;
    let frames: u64 = f.get("frames", Some(default_frames))?;
    let reps: usize = f.get("reps", Some(7))?;
    let threads: usize = f.get("threads", Some(2))?;
    if frames == 0 || reps == 0 || threads == 0 {
        return Err(CliError::Usage(
            "--frames, --reps and --threads must be positive".into(),
        ));
    }
    Ok(Params {
        size,
        frames,
        reps,
        threads,
    })
}

fn max_frame(size: usize) -> u32 {
    u32::try_from((size + 1024).max(1 << 20)).unwrap_or(lifeline_core::MAX_FRAME)
}

// ---- the adapter path ----

/// Two linked TCP nodes; node 1's application side is read here.
struct AdapterPair {
    sender: Handle,
    handles: [Handle; 2],
    outputs: mpsc::Receiver<Output>,
    payload: Bytes,
    batch: u64,
    got: Vec<Output>,
}

impl AdapterPair {
    async fn new(size: usize) -> Self {
        let l0 = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let l1 = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mut book = AddressBook::new();
        book.insert(Rank(0), l0.local_addr().unwrap());
        book.insert(Rank(1), l1.local_addr().unwrap());
        let key = ClusterKey::from_secret(b"bench").unwrap();
        let mut cfg = Config::new(2, 2);
        cfg.max_frame = max_frame(size);
        let node = |r| Node::new(cfg.clone(), Rank(r), 7, Instant::ZERO).unwrap();
        let mut n0 = spawn(node(0), book.clone(), key.clone(), TcpConfig::default(), l0);
        let mut n1 = spawn(node(1), book, key, TcpConfig::default(), l1);
        while let Some(o) = n1.outputs.recv().await {
            if matches!(o, Output::LinkUp { .. }) {
                break;
            }
        }
        // Node 0's application: its own deliveries are read and dropped.
        tokio::spawn(async move {
            let mut buf = Vec::with_capacity(1024);
            while n0.outputs.recv_many(&mut buf, 1024).await > 0 {
                buf.clear();
            }
        });
        Self {
            sender: n0.handle.clone(),
            handles: [n0.handle, n1.handle],
            outputs: n1.outputs,
            payload: Bytes::from(vec![0xab; size]),
            batch: (256 * 1024 / size).clamp(1, 4096) as u64,
            got: Vec::with_capacity(1024),
        }
    }

    /// Floods `frames` payloads from node 0 and waits until node 1 delivered them all.
    async fn run(&mut self, frames: u64) -> Duration {
        let start = StdInstant::now();
        let (h, payload, batch) = (self.sender.clone(), self.payload.clone(), self.batch);
        let sender = tokio::spawn(async move {
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
                    // Back-pressure: the send queue is over its soft bound.
                    Err(_) => tokio::time::sleep(Duration::from_micros(200)).await,
                }
            }
        });
        let mut got = 0u64;
        while got < frames {
            if self.outputs.recv_many(&mut self.got, 1024).await == 0 {
                panic!("node 1 stopped");
            }
            for o in self.got.drain(..) {
                if let Output::Event(Event::FloodDelivered { payload, .. }) = o {
                    debug_assert_eq!(payload.len(), self.payload.len());
                    got += 1;
                }
            }
        }
        let took = start.elapsed();
        sender.await.unwrap();
        took
    }

    async fn shutdown(self) {
        for h in &self.handles {
            h.shutdown().await;
        }
    }
}

// ---- the raw path ----

/// One raw connection: a writer task that writes `n` frames per request, and the reader.
struct RawPair {
    requests: mpsc::Sender<u64>,
    written: mpsc::Receiver<()>,
    reader: RawReader,
}

struct RawReader {
    rd: OwnedReadHalf,
    buf: BytesMut,
    cap: usize,
    max: usize,
}

impl RawReader {
    /// Reads until `frames` whole frames were split off.
    async fn read(&mut self, frames: u64) {
        let mut got = 0u64;
        while got < frames {
            while self.buf.len() >= 4 {
                let len = u32::from_be_bytes([self.buf[0], self.buf[1], self.buf[2], self.buf[3]])
                    as usize;
                assert!(len <= self.max, "raw frame over max_frame");
                if self.buf.len() < 4 + len {
                    self.buf.reserve(4 + len);
                    break;
                }
                let mut frame = self.buf.split_to(4 + len).freeze();
                frame.advance(4);
                std::hint::black_box(frame);
                got += 1;
            }
            if got == frames {
                break;
            }
            if self.buf.capacity() == self.buf.len() {
                self.buf.reserve(self.cap);
            }
            let n = self.rd.read_buf(&mut self.buf).await.unwrap();
            assert!(n > 0, "raw connection closed");
        }
    }
}

async fn raw_writer(
    wr: OwnedWriteHalf,
    size: usize,
    cap: usize,
    mut requests: mpsc::Receiver<u64>,
    written: mpsc::Sender<()>,
) {
    let payload = vec![0xab; size];
    let mut w = BufWriter::with_capacity(cap, wr);
    while let Some(n) = requests.recv().await {
        for _ in 0..n {
            w.write_u32(size as u32).await.unwrap();
            w.write_all(&payload).await.unwrap();
        }
        w.flush().await.unwrap();
        let _ = written.send(()).await;
    }
}

impl RawPair {
    async fn new(size: usize) -> Self {
        let cap = TcpConfig::default().io_buffer;
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let (dialed, accepted) = tokio::join!(TcpStream::connect(addr), l.accept());
        let (a, b) = (dialed.unwrap(), accepted.unwrap().0);
        a.set_nodelay(true).unwrap();
        b.set_nodelay(true).unwrap();
        let (rd, _) = b.into_split();
        let (_, wr) = a.into_split();
        let (req_tx, req_rx) = mpsc::channel(1);
        let (done_tx, done_rx) = mpsc::channel(1);
        tokio::spawn(raw_writer(wr, size, cap, req_rx, done_tx));
        Self {
            requests: req_tx,
            written: done_rx,
            reader: RawReader {
                rd,
                buf: BytesMut::with_capacity(cap),
                cap,
                max: max_frame(size) as usize,
            },
        }
    }

    async fn run(&mut self, frames: u64) -> Duration {
        let start = StdInstant::now();
        self.requests.send(frames).await.unwrap();
        self.reader.read(frames).await;
        let took = start.elapsed();
        self.written.recv().await.unwrap();
        took
    }
}

// ---- the experiment ----

async fn measure(p: &Params) -> String {
    let mut adapter = AdapterPair::new(p.size).await;
    let mut raw = RawPair::new(p.size).await;
    let warm = (p.frames / 4).max(1);
    adapter.run(warm).await;
    raw.run(warm).await;
    let (mut a_rates, mut r_rates, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    for rep in 0..p.reps {
        let (a, r) = if rep % 2 == 0 {
            let a = adapter.run(p.frames).await;
            (a, raw.run(p.frames).await)
        } else {
            let r = raw.run(p.frames).await;
            (adapter.run(p.frames).await, r)
        };
        let (a_rate, r_rate) = (
            p.frames as f64 / a.as_secs_f64(),
            p.frames as f64 / r.as_secs_f64(),
        );
        eprintln!(
            "rep {rep}: adapter {:.0} msgs/s, raw {:.0} msgs/s, ratio {:.3}",
            a_rate,
            r_rate,
            a_rate / r_rate
        );
        a_rates.push(a_rate);
        r_rates.push(r_rate);
        ratios.push(a_rate / r_rate);
    }
    adapter.shutdown().await;
    let (a_msgs, r_msgs, ratio) = (
        median(&mut a_rates),
        median(&mut r_rates),
        median(&mut ratios),
    );
    let mb = |msgs: f64| (msgs * p.size as f64 / 1e6 * 10.0).round() / 10.0;
    json_line(&[
        ("size", p.size.into()),
        ("adapter_mb_s", mb(a_msgs).into()),
        ("raw_mb_s", mb(r_msgs).into()),
        ("ratio", ((ratio * 1000.0).round() / 1000.0).into()),
        ("adapter_msgs_s", (a_msgs.round() as u64).into()),
        ("raw_msgs_s", (r_msgs.round() as u64).into()),
    ])
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
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(p.threads)
        .enable_all()
        .build()
        .unwrap();
    let line = rt.block_on(measure(&p));
    eprintln!(
        "{} frames of {} B per repetition, {} repetitions",
        p.frames, p.size, p.reps
    );
    println!("{line}");
    ExitCode::SUCCESS
}
