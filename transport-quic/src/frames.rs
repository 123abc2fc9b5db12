//! One stream of a link in each direction: [`FrameSink`] hands the core's frames to quinn
//! without copying, [`FrameSource`] splits whole frames off the stream with the core's
//! envelope ([`wire::frame_len`]), checking each header before room is made for its body.

use std::sync::{Arc, OnceLock};

use bytes::{Bytes, BytesMut};
use lifeline_core::tree::Rank;
use lifeline_core::wire::{self, Limits};
use lifeline_core::Class;
use quinn::{ReadError, RecvStream, SendStream, WriteError};

use crate::down::{CloseCode, DownReason};
use crate::stats::Counters;

/// Frames at least this long are assembled in their own buffer rather than split off the
/// shared read buffer (which a large frame held by the application would pin).
const LARGE: usize = 8 << 10;

/// The most bytes taken from quinn per read, and the shared read buffer's block size.
const READ_BLOCK: usize = 64 << 10;

/// What every part of one link shares: the connection, the first recorded reason it went down,
/// and the endpoint's counters.
#[derive(Debug)]
pub(crate) struct LinkShared {
    pub(crate) conn: quinn::Connection,
    pub(crate) peer: Rank,
    pub(crate) reason: OnceLock<DownReason>,
    pub(crate) counters: Arc<Counters>,
    pub(crate) limits: Limits,
}

impl LinkShared {
    /// Records `reason` unless one is recorded already, closes the connection (a no-op if it is
    /// closed) and returns the recorded reason: the first cause seen wins, so a read that fails
    /// because another part closed the connection reports that part's reason.
    pub(crate) fn fail(&self, reason: DownReason, code: CloseCode) -> DownReason {
        let r = *self.reason.get_or_init(|| reason);
        self.conn.close(code.code(), code.phrase());
        r
    }

    /// The reason for a lost connection, unless one is recorded.
    pub(crate) fn lost(&self, e: &quinn::ConnectionError) -> DownReason {
        *self
            .reason
            .get_or_init(|| DownReason::from_connection_error(e))
    }

    fn read_failed(&self, e: &ReadError) -> DownReason {
        match e {
            ReadError::ConnectionLost(c) => self.lost(c),
            ReadError::Reset(_) => self.fail(DownReason::Reset, CloseCode::Malformed),
            _ => self.fail(DownReason::LocallyClosed, CloseCode::Normal),
        }
    }

    fn write_failed(&self, e: &WriteError) -> DownReason {
        match e {
            WriteError::ConnectionLost(c) => self.lost(c),
            WriteError::Stopped(_) => self.fail(DownReason::Reset, CloseCode::Malformed),
            _ => self.fail(DownReason::LocallyClosed, CloseCode::Normal),
        }
    }
}

/// Why [`FrameSink::send`] sent nothing more.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SendError {
    /// The link is down; every later send fails the same way.
    #[error("link down: {0}")]
    Down(DownReason),
    /// A frame is not one whole envelope of at most `max_frame` bytes (a caller's bug):
    /// nothing of it was sent, and the link is unchanged.
    #[error("frame {index} of the batch is not one whole frame of at most max_frame bytes")]
    BadFrame {
        /// Its position in the batch.
        index: usize,
    },
}

/// The sending half of one class's stream. Frames go out in order, each handed to quinn as its
/// own `Bytes` (no copy, no allocation per frame).
#[derive(Debug)]
pub struct FrameSink {
    stream: SendStream,
    class: Class,
    shared: Arc<LinkShared>,
}

impl FrameSink {
    pub(crate) fn new(stream: SendStream, class: Class, shared: Arc<LinkShared>) -> Self {
        Self {
            stream,
            class,
            shared,
        }
    }

    /// The class this sink carries.
    pub fn class(&self) -> Class {
        self.class
    }

    /// Writes bytes that are not a frame (the acceptor's answer), before any frame.
    pub(crate) async fn write_raw(&mut self, b: &[u8]) -> Result<(), WriteError> {
        self.stream.write_all(b).await
    }

    /// Sends one frame (see [`send_all`](Self::send_all)).
    pub async fn send(&mut self, frame: Bytes) -> Result<(), SendError> {
        self.send_all(&mut [frame]).await
    }

    /// Sends whole frames in order with quinn's `write_all_chunks` (runs of frames under
    /// 4 KiB copied into one chunk, longer ones by reference): returns once quinn holds
    /// all of them (it waits while the peer's flow-control credit is spent, which is this
    /// stream's back-pressure; the other class's stream is not held up). Every frame is checked
    /// first to be exactly one envelope of at most `max_frame` bytes
    /// ([`SendError::BadFrame`], nothing sent). `frames` are left empty.
    ///
    /// Not cancel-safe: a cancelled send may have written some of the frames, so drop the link
    /// after cancelling one.
    pub async fn send_all(&mut self, frames: &mut [Bytes]) -> Result<(), SendError> {
        if let Some(&r) = self.shared.reason.get() {
            return Err(SendError::Down(r));
        }
        for (index, f) in frames.iter().enumerate() {
            if wire::frame_len(f, &self.shared.limits) != Ok(Some(f.len())) {
                return Err(SendError::BadFrame { index });
            }
        }
        let n = frames.len();
        let mut chunks = coalesce(frames);
        match self.stream.write_all_chunks(&mut chunks).await {
            Ok(()) => {
                Counters::add_n(&self.shared.counters.frames_out, n);
                Ok(())
            }
            Err(e) => Err(SendError::Down(self.shared.write_failed(&e))),
        }
    }
}

/// Frames shorter than this are copied into one chunk with their neighbours before they go to
/// quinn; longer ones go by reference. quinn's send buffer walks its chunks when it builds each
/// packet, so a queue of thousands of 64-byte chunks cost the sender about 2 µs per frame.
pub(crate) const COPY_BELOW: usize = 4096;

/// `frames` as quinn chunks: each run of frames under [`COPY_BELOW`] bytes copied into one,
/// longer frames by reference. `frames` are left empty.
fn coalesce(frames: &mut [Bytes]) -> Vec<Bytes> {
    let mut chunks = Vec::new();
    // Sized once for every small frame of the batch: growing by doubling copied each run
    // about twice more.
    let small: usize = frames
        .iter()
        .filter(|f| f.len() < COPY_BELOW)
        .map(Bytes::len)
        .sum();
    let mut run = BytesMut::with_capacity(small);
    for f in frames.iter_mut() {
        let f = std::mem::take(f);
        if f.len() < COPY_BELOW {
            run.extend_from_slice(&f);
        } else {
            if !run.is_empty() {
                chunks.push(run.split().freeze());
            }
            chunks.push(f);
        }
    }
    if !run.is_empty() {
        chunks.push(run.freeze());
    }
    chunks
}

/// The receiving half of one class's stream: whole frames, in order.
///
/// Bounded: it holds at most one partly read frame and one read block; beyond that the bytes
/// wait in quinn, whose per-stream flow control then stops the peer (of this class only).
#[derive(Debug)]
pub struct FrameSource {
    stream: RecvStream,
    class: Class,
    shared: Arc<LinkShared>,
    /// Small frames are split off this, many per allocation.
    buf: BytesMut,
    /// A large frame being assembled, with its total length.
    large: Option<(BytesMut, usize)>,
}

impl FrameSource {
    pub(crate) fn new(stream: RecvStream, class: Class, shared: Arc<LinkShared>) -> Self {
        Self {
            stream,
            class,
            shared,
            buf: BytesMut::new(),
            large: None,
        }
    }

    /// The class this source carries.
    pub fn class(&self) -> Class {
        self.class
    }

    /// The next whole frame (an envelope whose header passed [`wire::frame_len`] with the
    /// link's `max_frame`), or why the link is down. A malformed or oversize header closes the
    /// link ([`DownReason::Malformed`], counted in `malformed_frames`) before anything is
    /// allocated for its body, and nothing after it is returned; frames before it are.
    ///
    /// Cancel-safe: all progress is kept in `self`, so it can race other futures in a
    /// `select!`.
    pub async fn recv(&mut self) -> Result<Bytes, DownReason> {
        loop {
            if let Some(&r) = self.shared.reason.get() {
                return Err(r);
            }
            let want = match self.next_frame() {
                Ok(Some(f)) => {
                    Counters::add(&self.shared.counters.frames_in);
                    return Ok(f);
                }
                Ok(None) => match &self.large {
                    Some((f, n)) => n - f.len(),
                    None => READ_BLOCK,
                },
                Err(()) => {
                    Counters::add(&self.shared.counters.malformed_frames);
                    return Err(self
                        .shared
                        .fail(DownReason::Malformed, CloseCode::Malformed));
                }
            };
            // Cancel-safe: read_chunk is, and the chunk is absorbed before the next await.
            match self.stream.read_chunk(want, true).await {
                Ok(Some(chunk)) => self.absorb(&chunk.bytes),
                Ok(None) => {
                    // The peer finished the stream: it dropped the link (its connection close
                    // usually follows at once).
                    let r = match self.shared.conn.close_reason() {
                        Some(e) => self.shared.lost(&e),
                        None => self.shared.fail(DownReason::Closed, CloseCode::Normal),
                    };
                    return Err(r);
                }
                Err(e) => return Err(self.shared.read_failed(&e)),
            }
        }
    }

    /// A whole frame from what is buffered, `Ok(None)` if more bytes are needed (having made
    /// room for them), `Err` on a bad header.
    fn next_frame(&mut self) -> Result<Option<Bytes>, ()> {
        if let Some((f, n)) = &self.large {
            if f.len() < *n {
                return Ok(None);
            }
            return Ok(self.large.take().map(|(f, _)| f.freeze()));
        }
        match wire::frame_len(&self.buf, &self.shared.limits) {
            Ok(Some(n)) if self.buf.len() >= n => Ok(Some(self.buf.split_to(n).freeze())),
            Ok(Some(n)) if n >= LARGE => {
                // Its length is checked: give it its own buffer, starting with what is here.
                let mut f = BytesMut::with_capacity(n);
                f.extend_from_slice(&self.buf);
                self.buf.clear();
                self.large = Some((f, n));
                Ok(None)
            }
            Ok(_) => Ok(None),
            Err(_) => Err(()),
        }
    }

    fn absorb(&mut self, bytes: &[u8]) {
        if let Some((f, _)) = &mut self.large {
            f.extend_from_slice(bytes);
            return;
        }
        if self.buf.capacity() - self.buf.len() < bytes.len() {
            // Reuses the block in place once the frames split off it are dropped, else starts
            // a new one: one allocation serves many small frames.
            self.buf.reserve(READ_BLOCK.max(bytes.len()));
        }
        self.buf.extend_from_slice(bytes);
    }
}
