//! Socket tasks: they move bytes and report what happened; every decision is the driver's.
//!
//! - the listener accepts and runs one handshake task per connection;
//! - a dial task connects, sets socket options and runs the dialer's handshake;
//! - a connection task reads whole frames (header first, length checked by
//!   [`wire::frame_len`] before the body is allocated) and writes its send queue through a
//!   `BufWriter`, flushing whenever the queue is drained.

use std::collections::VecDeque;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use lifeline_core::tree::Rank;
use lifeline_core::wire::{self, Limits, HEADER_LEN};
use lifeline_core::Class;
use socket2::{SockRef, TcpKeepalive};
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader, BufWriter};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, Semaphore};

use crate::config::{AddressBook, ClusterKey, TcpConfig};
use crate::handshake::{self, HandshakeError, Verdict};
use crate::queue::SendQueue;
use crate::stats::Counters;

/// What a connection sends the driver on its class's channel: whole frames, then why it ended
/// (on the same channel, so the driver sees a link go down only after the frames before it).
#[derive(Debug)]
pub(crate) enum FrameIn {
    Frame {
        from: Rank,
        frame: Bytes,
    },
    Ended {
        peer: Rank,
        class: Class,
        id: u64,
        why: Ended,
    },
}

/// Why a connection ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ended {
    /// The peer closed it (EOF).
    Eof,
    /// A socket error (reset, `TCP_USER_TIMEOUT`, keepalive).
    Io(io::ErrorKind),
    /// A frame header was malformed or over `max_frame`.
    Malformed,
    /// The driver is gone.
    Stopped,
}

/// Lifecycle reports from socket tasks to the driver.
#[derive(Debug)]
pub(crate) enum Report {
    /// An authenticated inbound connection awaiting the driver's verdict.
    Accepted {
        peer: Rank,
        class: Class,
        stream: TcpStream,
    },
    /// A dial finished.
    Dialed {
        peer: Rank,
        class: Class,
        gen: u64,
        result: Result<TcpStream, HandshakeError>,
    },
}

/// Channels and shared state every socket task gets.
#[derive(Clone, Debug)]
pub(crate) struct Shared {
    pub(crate) me: Rank,
    pub(crate) key: Arc<ClusterKey>,
    pub(crate) book: Arc<AddressBook>,
    pub(crate) cfg: Arc<TcpConfig>,
    pub(crate) limits: Limits,
    pub(crate) counters: Arc<Counters>,
    pub(crate) reports: mpsc::Sender<Report>,
    pub(crate) control_in: mpsc::Sender<FrameIn>,
    pub(crate) data_in: mpsc::Sender<FrameIn>,
}

/// `TCP_NODELAY`, keepalive and (on Linux) `TCP_USER_TIMEOUT`, so a vanished peer surfaces as an
/// error within `link_timeout` and small control frames are never delayed by Nagle.
pub(crate) fn configure(stream: &TcpStream, cfg: &TcpConfig) -> io::Result<()> {
    stream.set_nodelay(true)?;
    let sock = SockRef::from(stream);
    let probe = (cfg.link_timeout / 3).max(Duration::from_secs(1));
    let ka = TcpKeepalive::new().with_time(probe).with_interval(probe);
    #[cfg(not(any(
        windows,
        target_os = "openbsd",
        target_os = "redox",
        target_os = "solaris"
    )))]
    let ka = ka.with_retries(3);
    sock.set_tcp_keepalive(&ka)?;
    #[cfg(any(target_os = "android", target_os = "fuchsia", target_os = "linux"))]
    sock.set_tcp_user_timeout(Some(cfg.link_timeout))?;
    Ok(())
}

/// Accepts connections forever, one handshake task each (at most `max_handshakes` at once).
pub(crate) async fn listen(listener: TcpListener, sh: Shared) {
    let slots = Arc::new(Semaphore::new(sh.cfg.max_handshakes.max(1)));
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(x) => x,
            Err(_) => {
                // EMFILE and friends: back off instead of spinning.
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        Counters::add(&sh.counters.accepted);
        let Ok(permit) = slots.clone().try_acquire_owned() else {
            Counters::add(&sh.counters.handshakes_refused);
            continue; // dropped: closed unanswered
        };
        let sh = sh.clone();
        tokio::spawn(async move {
            let _permit = permit;
            inbound(stream, peer, sh).await;
        });
    }
}

async fn inbound(mut stream: TcpStream, peer: SocketAddr, sh: Shared) {
    let hello = async {
        configure(&stream, &sh.cfg)?;
        handshake::accept(&mut stream, &sh.key, sh.me, &sh.book, peer.ip()).await
    };
    match tokio::time::timeout(sh.cfg.handshake_timeout, hello).await {
        Ok(Ok(h)) => {
            let _ = sh
                .reports
                .send(Report::Accepted {
                    peer: h.from,
                    class: h.class,
                    stream,
                })
                .await;
        }
        Ok(Err(_)) | Err(_) => Counters::add(&sh.counters.handshakes_refused),
    }
}

/// Writes a negative verdict and closes.
pub(crate) async fn reject(mut stream: TcpStream, v: Verdict) {
    let _ = tokio::time::timeout(Duration::from_secs(1), handshake::finish(&mut stream, v)).await;
}

/// Connects to `peer` for `class` and runs the dialer's handshake.
pub(crate) async fn dial(peer: Rank, addr: SocketAddr, class: Class, gen: u64, sh: Shared) {
    let attempt = async {
        let mut s = tokio::time::timeout(sh.cfg.connect_timeout, TcpStream::connect(addr))
            .await
            .map_err(|_| HandshakeError::Timeout)??;
        configure(&s, &sh.cfg)?;
        tokio::time::timeout(
            sh.cfg.handshake_timeout,
            handshake::dial(&mut s, &sh.key, sh.me, peer, class),
        )
        .await
        .map_err(|_| HandshakeError::Timeout)??;
        Ok(s)
    };
    let result = attempt.await;
    let _ = sh
        .reports
        .send(Report::Dialed {
            peer,
            class,
            gen,
            result,
        })
        .await;
}

/// Runs one installed connection until it ends, then reports why. `verdict` is the acceptor's
/// RESULT byte still to be written (`None` on the dialer's side).
pub(crate) async fn run(
    stream: TcpStream,
    peer: Rank,
    class: Class,
    id: u64,
    verdict: Option<Verdict>,
    queue: Arc<SendQueue>,
    sh: Shared,
) {
    let (rd, wr) = stream.into_split();
    let tx = match class {
        Class::Control => sh.control_in.clone(),
        Class::Data => sh.data_in.clone(),
    };
    let why = tokio::select! {
        why = read_frames(rd, peer, &sh, &tx) => why,
        why = write_frames(wr, verdict, &queue, sh.cfg.io_buffer) => why,
    };
    if why == Ended::Malformed {
        Counters::add(&sh.counters.malformed);
    }
    let _ = tx
        .send(FrameIn::Ended {
            peer,
            class,
            id,
            why,
        })
        .await;
}

fn io_end(e: &io::Error) -> Ended {
    match e.kind() {
        io::ErrorKind::UnexpectedEof => Ended::Eof,
        k => Ended::Io(k),
    }
}

async fn read_frames(
    rd: OwnedReadHalf,
    peer: Rank,
    sh: &Shared,
    tx: &mpsc::Sender<FrameIn>,
) -> Ended {
    let mut r = BufReader::with_capacity(sh.cfg.io_buffer, rd);
    loop {
        let mut hdr = [0u8; HEADER_LEN];
        if let Err(e) = r.read_exact(&mut hdr).await {
            return io_end(&e);
        }
        let len = match wire::frame_len(&hdr, &sh.limits) {
            Ok(Some(n)) => n,
            Ok(None) | Err(_) => return Ended::Malformed,
        };
        let mut frame = BytesMut::with_capacity(len);
        frame.extend_from_slice(&hdr);
        frame.resize(len, 0);
        if let Err(e) = r.read_exact(&mut frame[HEADER_LEN..]).await {
            return io_end(&e);
        }
        let f = FrameIn::Frame {
            from: peer,
            frame: frame.freeze(),
        };
        if tx.send(f).await.is_err() {
            return Ended::Stopped;
        }
    }
}

async fn write_frames(
    wr: OwnedWriteHalf,
    verdict: Option<Verdict>,
    queue: &SendQueue,
    cap: usize,
) -> Ended {
    let mut w = BufWriter::with_capacity(cap, wr);
    if let Some(v) = verdict {
        if let Err(e) = handshake::finish(&mut w, v).await {
            return io_end(&e);
        }
    }
    let mut batch = VecDeque::new();
    loop {
        queue.take(&mut batch);
        if batch.is_empty() {
            if let Err(e) = w.flush().await {
                return io_end(&e);
            }
            queue.notify.notified().await;
            continue;
        }
        for f in batch.drain(..) {
            if let Err(e) = w.write_all(&f).await {
                return io_end(&e);
            }
        }
    }
}
