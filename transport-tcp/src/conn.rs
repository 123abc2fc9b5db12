//! Socket tasks: they move bytes and report what happened; every decision is the driver's.
//!
//! - the listener accepts and runs one handshake task per connection;
//! - a dial task connects, sets socket options and runs the dialer's handshake;
//! - a connection task reads into one buffer, many frames per read, and splits small frames
//!   off it without copying (large ones get their own buffer, filled straight from the socket);
//!   each header's length is checked by [`wire::frame_len`] before any room is reserved for
//!   its body, and the driver gets each read's frames as one batch. It writes its send queue
//!   with one vectored write per `io_buffer` bytes: small frames copied into one buffer, large
//!   ones by reference; whatever is gathered goes out whenever the queue is drained. A writer
//!   on a link whose connections (control and data) have neither written nor read anything
//!   for [`TcpConfig::keepalive_interval`] writes the six-byte [`wire::KEEPALIVE`] frame on
//!   the control connection ([`crate::activity`]), and the reader drops (and counts) the ones
//!   it reads: see [`configure`] for why this, and not the kernel's keepalive, keeps idle
//!   links up.

use std::collections::VecDeque;
use std::io::{self, IoSlice};
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use lifeline_core::tree::Rank;
use lifeline_core::wire::{self, Limits};
use lifeline_core::Class;
use socket2::SockRef;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tracing::Instrument;

use lifeline_transport_common::{
    Accepted, AddressBook, Connector, Counters, Ended, Inbound, LinkIo, SendQueue, WallGrid,
    MAX_BATCH,
};

use crate::activity::{Activity, Links};
use crate::config::TcpConfig;
use crate::connector::TcpConnector;
use crate::handshake::{self, HandshakeError, Verdict};
use crate::key::ClusterKey;

/// What every socket task shares.
#[derive(Clone, Debug)]
pub(crate) struct Shared {
    pub(crate) me: Rank,
    pub(crate) key: Arc<ClusterKey>,
    /// Read by every accept and dial; written only by [`Handle::add_peers`](crate::Handle::add_peers).
    pub(crate) book: Arc<RwLock<AddressBook>>,
    pub(crate) cfg: Arc<TcpConfig>,
    pub(crate) limits: Limits,
    /// How many ranks past the book's given ones an authenticated HELLO may add
    /// ([`handshake::PastBook`]): `join.max_per_view × 64`, the core's own catch-up bound.
    pub(crate) past_bound: u32,
    pub(crate) counters: Arc<Counters>,
    /// Each link's activity, shared by its connections (the keepalive's clock).
    pub(crate) links: Arc<Links>,
}

impl Shared {
    /// A copy of the address book.
    pub(crate) fn book(&self) -> AddressBook {
        self.book.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// One rank's address.
    pub(crate) fn addr(&self, r: Rank) -> Option<std::net::SocketAddr> {
        self.book.read().unwrap_or_else(|e| e.into_inner()).get(r)
    }

    /// What this rank's HELLOs announce: its book's span (at least one past its own rank) and
    /// the port of its own book entry, so an acceptor whose book lacks this rank can learn it.
    pub(crate) fn listen(&self) -> handshake::Listen {
        let book = self.book.read().unwrap_or_else(|e| e.into_inner());
        handshake::Listen {
            span: book.span().max(self.me.0.saturating_add(1)),
            port: book.get(self.me).map_or(0, |a| a.port()),
        }
    }

    /// Learns the authenticated `hello`'s dialer, absent from the book, at its connection's
    /// IP and announced port (the handshake checked the bound). `false` (and nothing changes)
    /// when the rank was meanwhile given or learned at another address.
    fn learn(&self, hello: &handshake::Hello, peer_ip: IpAddr) -> bool {
        let addr = hello.listen_addr(peer_ip);
        let mut book = self.book.write().unwrap_or_else(|e| e.into_inner());
        match book.learn(hello.from, addr) {
            Ok(added) => {
                if added {
                    Counters::add(&self.counters.peers_learned);
                    tracing::debug!(rank = hello.from.0, %addr, "rank past the book learned");
                }
                true
            }
            Err(known) => {
                tracing::debug!(rank = hello.from.0, %addr, %known, "learned rank known elsewhere");
                false
            }
        }
    }
}

/// `TCP_NODELAY` and (on Linux) `TCP_USER_TIMEOUT = link_timeout`, so small control frames are
/// never delayed by Nagle and data unacknowledged for `link_timeout` ends the connection.
///
/// No kernel keepalive (`SO_KEEPALIVE`): an installed connection's writer sends the
/// [`wire::KEEPALIVE`] frame after [`TcpConfig::keepalive_interval`] without writing or
/// reading, so an idle connection carries data every `link_timeout / 6` (at least 250 ms; one
/// end sends, the other hears it; if it stops hearing, it sends its own). "Idle" is the
/// link's, both connections together, and the control connection sends ([`crate::activity`]):
/// a link whose data connection is busy, or whose control connection carries heartbeats, needs
/// none. Lost, that data is
/// retransmitted by TCP, and the user timeout ends the connection only when it stays
/// unacknowledged for `link_timeout` (the peer's host vanished, or the path is cut for that
/// long): within `link_timeout` plus one keepalive interval and one retransmission timeout. The kernel's probes did worse on
/// both counts: they are whole seconds (`max(1 s, link_timeout / 3)`), and with
/// `TCP_USER_TIMEOUT` set Linux aborts at the first unanswered probe once nothing was received
/// for `link_timeout` (`tcp_keepalive_timer`: `elapsed >= user_timeout && probes_out > 0`),
/// so with `link_timeout` ≤ 2 s one probe lost in a 500 ms blackhole ended an idle link.
/// With the frame flowing they would never fire anyway (each frame received resets their
/// clock), so they are off. Join and handshake connections are bounded by their own timeouts.
pub(crate) fn configure(stream: &TcpStream, cfg: &TcpConfig) -> io::Result<()> {
    stream.set_nodelay(true)?;
    #[cfg(any(target_os = "android", target_os = "fuchsia", target_os = "linux"))]
    SockRef::from(stream).set_tcp_user_timeout(Some(cfg.link_timeout))?;
    #[cfg(not(any(target_os = "android", target_os = "fuchsia", target_os = "linux")))]
    let _ = (SockRef::from(stream), cfg);
    Ok(())
}

/// Accepts connections forever, one handshake task each (at most `max_handshakes` at once);
/// authenticated rank connections go to `inbound.accepted`, join connections (the [join
/// preamble](crate::handshake::join)) to the driver's join path.
pub(crate) async fn listen(listener: TcpListener, sh: Shared, inbound: Inbound<TcpStream>) {
    let slots = Arc::new(Semaphore::new(sh.cfg.max_handshakes.max(1)));
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(x) => x,
            Err(e) => {
                // EMFILE and friends: back off instead of spinning.
                tracing::debug!(error = %e, "accept failed; backing off 50 ms");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        Counters::add(&sh.counters.accepted);
        let Ok(permit) = slots.clone().try_acquire_owned() else {
            Counters::add(&sh.counters.handshakes_refused);
            tracing::debug!(from = %peer, "handshake refused: too many in progress");
            continue; // dropped: closed unanswered
        };
        let sh = sh.clone();
        let inbound = Inbound {
            accepted: inbound.accepted.clone(),
            joins: inbound.joins.clone(),
        };
        tokio::spawn(accept_one(stream, peer, sh, inbound, permit).in_current_span());
    }
}

/// One inbound connection: its first four bytes say whether it is a rank's (the HELLO) or a
/// joiner's (the join preamble, [`crate::join::contact`]); anything else is refused. The
/// handshake `permit` is held until the peer is authenticated.
async fn accept_one(
    mut stream: TcpStream,
    peer: SocketAddr,
    sh: Shared,
    inbound: Inbound<TcpStream>,
    permit: OwnedSemaphorePermit,
) {
    let deadline = tokio::time::Instant::now() + sh.cfg.handshake_timeout;
    let first = async {
        configure(&stream, &sh.cfg)?;
        let mut magic = [0u8; 4];
        stream.read_exact(&mut magic).await?;
        Ok::<_, HandshakeError>(magic)
    };
    let magic = match tokio::time::timeout_at(deadline, first).await {
        Ok(Ok(m)) => m,
        Ok(Err(e)) => {
            Counters::add(&sh.counters.handshakes_refused);
            tracing::debug!(from = %peer, error = %e, "handshake refused");
            return;
        }
        Err(_) => {
            Counters::add(&sh.counters.handshakes_refused);
            tracing::debug!(from = %peer, "handshake refused: timed out");
            return;
        }
    };
    if magic == handshake::join::JOIN_MAGIC {
        crate::join::contact(stream, magic, peer, sh, inbound, deadline, permit).await;
        return;
    }
    let _permit = permit;
    let hello = async {
        // A snapshot: the lock is never held across an await.
        let book = sh.book();
        let past = handshake::PastBook {
            given: book.given_span(),
            bound: sh.past_bound,
        };
        let h = handshake::accept_after_magic(
            &mut stream,
            magic,
            &sh.key,
            sh.me,
            &book,
            past,
            peer.ip(),
        )
        .await?;
        // Authenticated: a rank past the book is learned before its connection goes on.
        if book.get(h.from).is_none() && !sh.learn(&h, peer.ip()) {
            return Err(HandshakeError::UnknownRank(h.from));
        }
        Ok(h)
    };
    match tokio::time::timeout_at(deadline, hello).await {
        Ok(Ok(h)) => {
            let slot = TcpConnector::slot_of(h.class);
            let _ = inbound
                .accepted
                .send(Accepted {
                    peer: h.from,
                    slot,
                    conn: stream,
                })
                .await;
        }
        Ok(Err(e)) => {
            Counters::add(&sh.counters.handshakes_refused);
            if matches!(e, HandshakeError::Version(_)) {
                Counters::add(&sh.counters.handshakes_old_version);
            }
            tracing::debug!(from = %peer, error = %e, "handshake refused");
        }
        Err(_) => {
            Counters::add(&sh.counters.handshakes_refused);
            tracing::debug!(from = %peer, "handshake refused: timed out");
        }
    }
}

/// Writes a negative verdict and closes.
pub(crate) async fn reject(mut stream: TcpStream, v: Verdict) {
    let _ = tokio::time::timeout(Duration::from_secs(1), handshake::finish(&mut stream, v)).await;
}

/// Connects to `peer` at `addr` for `class` and runs the dialer's handshake.
pub(crate) async fn dial(
    peer: Rank,
    addr: SocketAddr,
    class: Class,
    sh: &Shared,
) -> Result<TcpStream, HandshakeError> {
    let own = sh.addr(sh.me).map(|a| a.ip());
    let connect = connect_from(sh.cfg.bind_local.source_ip(own), addr);
    let mut s = tokio::time::timeout(sh.cfg.connect_timeout, connect)
        .await
        .map_err(|_| HandshakeError::Timeout)??;
    configure(&s, &sh.cfg)?;
    tokio::time::timeout(
        sh.cfg.handshake_timeout,
        handshake::dial_announcing(&mut s, &sh.key, sh.me, peer, class, sh.listen()),
    )
    .await
    .map_err(|_| HandshakeError::Timeout)??;
    Ok(s)
}

/// Connects to `addr`, from `local` (port 0) when given and of the same address family.
pub(crate) async fn connect_from(local: Option<IpAddr>, addr: SocketAddr) -> io::Result<TcpStream> {
    let sock = if addr.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    if let Some(ip) = local.filter(|ip| ip.is_ipv4() == addr.is_ipv4()) {
        sock.bind(SocketAddr::new(ip, 0))?;
    }
    sock.connect(addr).await
}

/// Runs one installed connection until it ends, then reports why. `verdict` is the acceptor's
/// RESULT byte still to be written (`None` on the dialer's side).
pub(crate) async fn run(stream: TcpStream, verdict: Option<Verdict>, io: LinkIo, sh: Shared) {
    let class = if io.slot == 0 {
        Class::Control
    } else {
        Class::Data
    };
    let (rd, wr) = stream.into_split();
    let queue = io.queue(class).clone();
    let link = sh.links.of(io.peer);
    let idle = Idle {
        // The control connection keeps the link up; the data connection never sends one.
        after: (class == Class::Control).then(|| sh.cfg.keepalive_interval()),
        grid: sh.cfg.timer_grid.map(|g| WallGrid::for_rank(g, sh.me.0)),
        link: &link,
        counters: &sh.counters,
    };
    let why = tokio::select! {
        why = read_frames(rd, &sh, &io, class, &link) => why,
        why = write_frames(wr, verdict, &queue, sh.cfg.io_buffer, idle) => why,
    };
    io.ended(class, why).await;
}

/// The writer's keepalive: after how long without the link writing or reading (`None`: this
/// connection sends none, its link's control connection does), the link's clock, and where
/// keepalives are counted.
#[derive(Clone, Copy)]
struct Idle<'a> {
    after: Option<Duration>,
    /// The grid the keepalive checks are rounded up to ([`TcpConfig::timer_grid`]).
    grid: Option<WallGrid>,
    link: &'a Activity,
    counters: &'a Counters,
}

fn io_end(e: &io::Error) -> Ended {
    match e.kind() {
        io::ErrorKind::UnexpectedEof => Ended::Eof,
        k => Ended::Io(k),
    }
}

/// Frames at least this long are read into their own buffer, the body straight from the
/// socket, instead of being split off the shared read buffer (which a large frame would pin
/// while the application holds it), and written by reference instead of being copied into
/// the write buffer.
const LARGE: usize = 8 << 10;

/// Reads whole frames into one buffer shared by the small frames split off it: many frames
/// per read, no allocation or copy per frame. A large frame gets its own buffer, filled with
/// what was already read and then straight from the socket; after one, the next read is kept
/// short (`LARGE` bytes: the next header and the start of its body) so a stream of large frames
/// does not land in the shared buffer. Every header is checked (version, kind, length against
/// `max_frame`) before room is reserved for its body, so a bad header costs nothing. A
/// [`wire::KEEPALIVE`] frame is counted (`keepalives_in`) and dropped: it never reaches the
/// driver or the core.
async fn read_frames(
    mut rd: OwnedReadHalf,
    sh: &Shared,
    io: &LinkIo,
    class: Class,
    heard: &Activity,
) -> Ended {
    let cap = sh.cfg.io_buffer.max(LARGE);
    let mut buf = BytesMut::with_capacity(cap);
    let mut batch = Vec::with_capacity(MAX_BATCH);
    let mut after_large = false;
    loop {
        // Split off every whole frame read so far.
        let bad = loop {
            match wire::frame_len(&buf, &sh.limits) {
                Ok(Some(n)) if buf.len() >= n => {
                    let frame = buf.split_to(n);
                    if wire::is_keepalive(&frame) {
                        Counters::add(&sh.counters.keepalives_in);
                        continue;
                    }
                    batch.push(frame.freeze());
                    if batch.len() == MAX_BATCH && !io.deliver(class, &mut batch).await {
                        return Ended::Stopped;
                    }
                    after_large = false;
                }
                Ok(Some(n)) if n >= LARGE => {
                    // Frames already read go first: this body may take a while.
                    if !batch.is_empty() && !io.deliver(class, &mut batch).await {
                        return Ended::Stopped;
                    }
                    let mut frame = BytesMut::with_capacity(n);
                    frame.extend_from_slice(&buf);
                    buf.clear();
                    while frame.len() < n {
                        let rest = n - frame.len();
                        match rd.read_buf(&mut (&mut frame).limit(rest)).await {
                            Ok(0) => return Ended::Eof,
                            Ok(_) => {}
                            Err(e) => return io_end(&e),
                        }
                    }
                    batch.push(frame.freeze());
                    after_large = true;
                }
                Ok(Some(n)) => {
                    // Room for the whole frame (its length is already checked).
                    buf.reserve(n - buf.len());
                    break false;
                }
                Ok(None) => break false,
                Err(_) => break true,
            }
        };
        // The frames before a bad header still reach the driver, as they would have one by one.
        if !batch.is_empty() && !io.deliver(class, &mut batch).await {
            return Ended::Stopped;
        }
        if bad {
            return Ended::Malformed;
        }
        if buf.capacity() - buf.len() < cap / 8 {
            // Reuses the buffer in place once the frames split off it are dropped, else starts
            // a new one; either way one allocation serves many frames.
            buf.reserve(cap);
        }
        let read = if after_large {
            rd.read_buf(&mut (&mut buf).limit(LARGE)).await
        } else {
            rd.read_buf(&mut buf).await
        };
        match read {
            Ok(0) => return Ended::Eof,
            Ok(_) => heard.touch(),
            Err(e) => return io_end(&e),
        }
    }
}

/// Most frames gathered into one vectored write.
const MAX_IOV: usize = 64;

/// Writes the send queue: small frames are copied into one `cap`-sized buffer, large ones
/// (>= `LARGE`) are gathered behind it by reference, and each `cap` bytes (or `MAX_IOV`
/// pieces) go out in one vectored write, so no frame is copied twice; whatever is gathered is
/// written whenever the queue is drained. When the link (this connection and its sibling)
/// wrote and read nothing for `idle.after`, the [`wire::KEEPALIVE`] frame is written (counted
/// in `keepalives_out`); a writer without `idle.after` sends none and sleeps until its queue
/// has frames. Reads count too: on an idle link, the first end whose interval runs out sends
/// and the other hears it in time, so one end's keepalives, not both ends', keep the link up
/// (half the frames and wake-ups: 256 processes on 2 cores feel them).
async fn write_frames(
    mut wr: OwnedWriteHalf,
    verdict: Option<Verdict>,
    queue: &SendQueue,
    cap: usize,
    idle: Idle<'_>,
) -> Ended {
    if let Some(v) = verdict {
        if let Err(e) = handshake::finish(&mut wr, v).await {
            return io_end(&e);
        }
    }
    let cap = cap.max(1);
    let mut out = Gather {
        buf: Vec::with_capacity(cap),
        large: Vec::new(),
        bytes: 0,
        link: idle.link,
    };
    let mut batch = VecDeque::new();
    loop {
        queue.take(&mut batch);
        if batch.is_empty() {
            if let Err(e) = out.write(&mut wr).await {
                return io_end(&e);
            }
            // A notification that loses the race is kept by `Notify` (and the queue is taken
            // again first thing anyway).
            let Some(after) = idle.after else {
                queue.notify.notified().await;
                continue;
            };
            let due = idle.link.last() + after;
            // On the grid, the check shares its wake-up with the node's other periodic work.
            let due = idle.grid.map_or(due, |g| g.at_or_after(due));
            tokio::select! {
                () = queue.notify.notified() => {}
                () = tokio::time::sleep_until(due) => {
                    if idle.link.last() + after > tokio::time::Instant::now() {
                        continue; // the link carried something meanwhile
                    }
                    out.buf.extend_from_slice(&wire::KEEPALIVE);
                    out.bytes += wire::KEEPALIVE.len();
                    if let Err(e) = out.write(&mut wr).await {
                        return io_end(&e);
                    }
                    Counters::add(&idle.counters.keepalives_out);
                }
            }
            continue;
        }
        for f in batch.drain(..) {
            // Small frames after large ones wait for those to go out (the buffer comes first).
            let full = if f.len() >= LARGE {
                false
            } else {
                !out.large.is_empty() || out.bytes + f.len() > cap
            };
            if full {
                if let Err(e) = out.write(&mut wr).await {
                    return io_end(&e);
                }
            }
            out.bytes += f.len();
            if f.len() >= LARGE {
                out.large.push(f);
            } else {
                out.buf.extend_from_slice(&f);
            }
            if out.bytes >= cap || out.large.len() >= MAX_IOV {
                if let Err(e) = out.write(&mut wr).await {
                    return io_end(&e);
                }
            }
        }
    }
}

/// Bytes gathered for one vectored write: the copied small frames, then large frames.
struct Gather<'a> {
    buf: Vec<u8>,
    large: Vec<Bytes>,
    bytes: usize,
    /// The link's clock (the keepalive's), touched by every write of bytes.
    link: &'a Activity,
}

impl Gather<'_> {
    async fn write(&mut self, wr: &mut OwnedWriteHalf) -> io::Result<()> {
        {
            let mut slices: Vec<IoSlice<'_>> = std::iter::once(&self.buf[..])
                .chain(self.large.iter().map(|b| &b[..]))
                .filter(|s| !s.is_empty())
                .map(IoSlice::new)
                .collect();
            let mut rest = &mut slices[..];
            while !rest.is_empty() {
                let n = wr.write_vectored(rest).await?;
                if n == 0 {
                    return Err(io::ErrorKind::WriteZero.into());
                }
                IoSlice::advance_slices(&mut rest, n);
            }
        }
        if self.bytes > 0 {
            self.link.touch();
        }
        self.buf.clear();
        self.large.clear();
        self.bytes = 0;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lifeline_core::wire::{FloodMsg, Message};
    use lifeline_transport_common::{FrameIn, FrameTx};
    use tokio::sync::mpsc;

    pub(super) fn flood(id: u64, len: usize) -> Bytes {
        Message::Flood(FloodMsg {
            origin: Rank(0),
            id,
            hops: 0,
            payload: Bytes::from(vec![id as u8; len]),
        })
        .encode()
    }

    /// A writer and a reader over loopback: frames of every size class (small ones shared
    /// off the read buffer, large ones read into their own, ones longer than the buffers)
    /// arrive whole and in order, in batches of at most `MAX_BATCH`; a bad header after them
    /// ends the connection as malformed once the frames before it were delivered.
    #[tokio::test]
    async fn frames_round_trip_in_order() {
        let mut cfg = TcpConfig {
            io_buffer: 32 << 10,
            ..TcpConfig::default()
        };
        cfg.frame_buffer = 4 * MAX_BATCH;
        let (control_in, _c) = mpsc::channel(1);
        let (data_in, mut frames_rx) = mpsc::channel(4);
        let sh = Shared {
            me: Rank(1),
            key: Arc::new(ClusterKey::from_secret(b"t").unwrap()),
            book: Arc::new(RwLock::new(AddressBook::new())),
            cfg: Arc::new(cfg),
            limits: Limits {
                max_frame: 1 << 20,
                max_list: 16,
            },
            past_bound: 0,
            counters: Arc::default(),
            links: Arc::default(),
        };
        let io = LinkIo {
            peer: Rank(0),
            slot: 1,
            id: 1,
            accepted: false,
            queues: Default::default(),
            frames: FrameTx {
                control: control_in,
                data: data_in,
            },
            counters: Arc::default(),
        };
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let (a, b) = tokio::join!(TcpStream::connect(l.local_addr().unwrap()), l.accept());
        let (_, wr) = a.unwrap().into_split();
        let (rd, _) = b.unwrap().0.into_split();

        let sizes = [1, 64, 8000, 8200, 100, 70_000, 3, 300_000, 5, 5, 40_000];
        let mut sent = Vec::new();
        for (i, &n) in sizes.iter().cycle().take(400).enumerate() {
            sent.push(flood(i as u64, n));
        }
        let queue = Arc::new(SendQueue::default());
        queue.push_many(sent.iter().cloned());
        let writer = {
            let queue = queue.clone();
            tokio::spawn(async move {
                let counters = Counters::default();
                let link = Links::default().of(Rank(1));
                let idle = Idle {
                    after: Some(Duration::from_secs(60)),
                    grid: None,
                    link: &link,
                    counters: &counters,
                };
                write_frames(wr, None, &queue, 32 << 10, idle).await
            })
        };
        let reader = tokio::spawn(async move {
            let link = sh.links.of(Rank(0));
            read_frames(rd, &sh, &io, Class::Data, &link).await
        });
        let mut got = Vec::new();
        while got.len() < sent.len() {
            match frames_rx.recv().await.unwrap() {
                FrameIn::Frames { from, frames } => {
                    assert_eq!(from, Rank(0));
                    assert!(!frames.is_empty() && frames.len() <= MAX_BATCH);
                    got.extend(frames);
                }
                FrameIn::Ended { .. } => unreachable!(),
            }
        }
        assert!(got == sent, "frames differ");

        // A header with an unknown version after one more frame: that frame, then malformed.
        let mut bad = BytesMut::from(&flood(9, 10)[..]);
        bad.extend_from_slice(&[0xff; 6]);
        queue.push_many([bad.freeze()].into_iter());
        match frames_rx.recv().await.unwrap() {
            FrameIn::Frames { frames, .. } => assert_eq!(frames, vec![flood(9, 10)]),
            FrameIn::Ended { .. } => unreachable!(),
        }
        assert_eq!(reader.await.unwrap(), Ended::Malformed);
        writer.abort();
    }
}

#[cfg(test)]
mod keepalive_tests {
    use super::tests::flood;
    use super::*;
    use std::sync::atomic::Ordering;

    /// A control connection that writes a frame every 100 ms sends no keepalive with a
    /// 300 ms interval; once it stops writing (and hears nothing) it sends one per interval.
    #[tokio::test]
    async fn a_busy_link_sends_no_keepalive() {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let (a, b) = tokio::join!(TcpStream::connect(l.local_addr().unwrap()), l.accept());
        let (_, wr) = a.unwrap().into_split();
        let _b = b.unwrap();
        let counters = Arc::new(Counters::default());
        let links = Links::default();
        let link = links.of(Rank(1));
        let queue = Arc::new(SendQueue::default());
        let writer = {
            let (queue, counters, link) = (queue.clone(), counters.clone(), link.clone());
            tokio::spawn(async move {
                let idle = Idle {
                    after: Some(Duration::from_millis(300)),
                    grid: None,
                    link: &link,
                    counters: &counters,
                };
                write_frames(wr, None, &queue, 1024, idle).await
            })
        };
        for i in 0..10 {
            queue.push_many([flood(i, 20)].into_iter());
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert_eq!(counters.keepalives_out.load(Ordering::Relaxed), 0);
        tokio::time::sleep(Duration::from_millis(1000)).await;
        let n = counters.keepalives_out.load(Ordering::Relaxed);
        assert!((2..=4).contains(&n), "{n} keepalives in 1 s idle");
        writer.abort();
    }
}
