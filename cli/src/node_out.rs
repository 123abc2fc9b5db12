//! `lifeline node`'s stdout, off the protocol path: every JSON line goes through a bounded
//! queue to a writer thread, so a supervisor that reads slowly (or not at all for a while)
//! never stops the node's event loop, and with it the driver's heartbeats.
//!
//! The queue holds [`QUEUE_LINES`] lines. What happens when it is full: nothing is dropped.
//! The node's event loop waits for room (an `await`, so the runtime and the transport's driver
//! keep running: heartbeats, acknowledgements, link upkeep go on). While it waits it does not
//! take the driver's outputs, so the driver's output buffer fills and the driver back-pressures
//! the data class (`DriverConfig::output_buffer` in `transport-common/src/driver.rs`: it stops
//! reading data-class frames, so xcast flow control and RELM windows push back on the senders)
//! while the control class keeps flowing; what the driver does with control-class outputs past
//! its own hard bound is the driver's policy. Each wait is counted (`stats` answers
//! `stdout.queue_waits`). No line is thrown away here: once the reader reads again, every line
//! comes out, in order, exactly once.
//!
//! A closed stdout (the reader went away) ends the process quietly (status 0), as before.
//! At the end the node waits up to [`FLUSH_BOUND`] for the queue to drain, so its last line
//! (`stopped`, or `evicted`) is out before it exits.

use std::io::Write;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use lifeline_core::Instant;
use serde_json::{json, Value};
use tokio::sync::mpsc;

use crate::node_cmd::wall_ms;

/// The most lines queued for stdout (about 10–20 MiB of typical lines).
pub(crate) const QUEUE_LINES: usize = 1 << 16;

/// How long the node waits at exit for its queued lines to be written.
pub(crate) const FLUSH_BOUND: Duration = Duration::from_secs(10);

/// The rank of a node that has none yet (a joiner before its admission): printed as `null`.
const NO_RANK: u32 = u32::MAX;

/// Prints the node's JSON lines through the queue.
pub(crate) struct Printer {
    rank: AtomicU32,
    tx: mpsc::Sender<String>,
    waits: Arc<AtomicU64>,
}

/// The writer thread's end: [`Writer::finish`] waits for it to drain the queue.
pub(crate) struct Writer {
    done: std::sync::mpsc::Receiver<()>,
}

/// Starts the writer thread for rank `rank`'s lines (`None`: a joiner, whose rank comes with
/// its admission, [`Printer::set_rank`]).
pub(crate) fn start(rank: Option<u32>) -> std::io::Result<(Printer, Writer)> {
    let (tx, rx) = mpsc::channel(QUEUE_LINES);
    let (done_tx, done) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("lifeline-stdout".into())
        .spawn(move || {
            write_all(rx);
            let _ = done_tx.send(());
        })?;
    let printer = Printer {
        rank: AtomicU32::new(rank.unwrap_or(NO_RANK)),
        tx,
        waits: Arc::default(),
    };
    Ok((printer, Writer { done }))
}

/// How long the writer thread rests after each write before it looks at the queue again:
/// lines queued meanwhile go out together, in one write, a little later (their `t_ms` was
/// stamped when they were queued). Without the rest every line woke the writer thread and
/// cost a write and a wake-up of the reader (50 lines a second per node under `lifeline
/// cluster`'s workload: 200 futex calls a second per node, and 12,800 writes a second into
/// the launcher at 256 nodes); with it, at most 1 s / `WRITE_REST` writes a second.
pub(crate) const WRITE_REST: Duration = Duration::from_millis(50);

/// The writer thread: every line in order; whatever is queued is written in one go, then the
/// thread rests [`WRITE_REST`] (so a line waits at most that long, plus the write).
fn write_all(mut rx: mpsc::Receiver<String>) {
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::with_capacity(64 << 10, stdout.lock());
    while let Some(first) = rx.blocking_recv() {
        let mut next = Some(first);
        while let Some(line) = next {
            if out
                .write_all(line.as_bytes())
                .and_then(|()| out.write_all(b"\n"))
                .is_err()
            {
                std::process::exit(0);
            }
            next = rx.try_recv().ok();
        }
        if out.flush().is_err() {
            std::process::exit(0);
        }
        if !rx.is_closed() {
            std::thread::sleep(WRITE_REST);
        }
    }
}

impl Printer {
    /// This node's rank (`None` before a joiner's admission).
    pub(crate) fn rank(&self) -> Option<u32> {
        Some(self.rank.load(Ordering::Relaxed)).filter(|r| *r != NO_RANK)
    }

    /// The rank a joiner was admitted as: every later line carries it.
    pub(crate) fn set_rank(&self, rank: u32) {
        self.rank.store(rank, Ordering::Relaxed);
    }

    /// Queues one JSON line (`event`, `rank`, `t_ms`: wall clock, `now_ms`: the protocol
    /// clock, and `fields`); waits for room when the queue is full, never drops it.
    pub(crate) async fn line(&self, now: Instant, event: &str, mut fields: Value) {
        if let Value::Object(m) = &mut fields {
            m.insert("event".into(), json!(event));
            m.insert("rank".into(), json!(self.rank()));
            m.insert("t_ms".into(), json!(wall_ms()));
            m.insert("now_ms".into(), json!(now.as_nanos() as f64 / 1e6));
        }
        match self.tx.try_send(fields.to_string()) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(line)) => {
                self.waits.fetch_add(1, Ordering::Relaxed);
                // The writer thread ended only if stdout failed, and then it exits the process.
                let _ = self.tx.send(line).await;
            }
            Err(mpsc::error::TrySendError::Closed(_)) => {}
        }
    }

    /// How many lines had to wait for room in the queue.
    pub(crate) fn waits(&self) -> u64 {
        self.waits.load(Ordering::Relaxed)
    }
}

impl Writer {
    /// Waits (up to [`FLUSH_BOUND`]) until every queued line is written; the [`Printer`] must
    /// be gone (dropped) by then, which closes the queue.
    pub(crate) fn finish(self) {
        let _ = self.done.recv_timeout(FLUSH_BOUND);
    }
}
