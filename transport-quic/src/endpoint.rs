//! [`QuicEndpoint`]: one UDP socket and one quinn endpoint per node, which both dials
//! ([`QuicEndpoint::dial`]) and accepts ([`QuicEndpoint::accept`]) links.

use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use lifeline_core::link::DialOutcome;
use lifeline_core::tree::Rank;
use lifeline_core::wire::Limits;
use lifeline_core::Class;
use quinn::{ConnectionError, EndpointConfig, Incoming, ReadExactError, TokioRuntime};
use socket2::{Domain, Protocol, Socket, Type};
use tokio::sync::{mpsc, Mutex, Semaphore};

use crate::book::AddressBook;
use crate::down::{CloseCode, DownReason};
use crate::frames::{FrameSink, FrameSource, LinkShared};
use crate::hello::{Hello, ACCEPTED, HELLO_LEN};
use crate::link::{QuicLink, Side, Stream};
use crate::stats::{Counters, QuicCounters, QuicStats};
use crate::{
    client_config, server_config, server_name, verify_claimed_rank, QuicConfig, RankIdentity,
    TlsError,
};
use lifeline_transport_common as common;

/// QUIC priority of the control stream's buffered bytes (data's is 0).
const CONTROL_PRIORITY: i32 = 1;

/// Why an endpoint could not be made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EndpointError {
    /// The configuration or the identity was refused.
    #[error("{0}")]
    Config(#[from] TlsError),
    /// The UDP socket could not be made, sized or bound.
    #[error("udp socket {addr}: {source}")]
    Socket {
        /// The address it was to bind.
        addr: SocketAddr,
        /// The error.
        source: io::Error,
    },
    /// Not called inside a tokio runtime (the endpoint's tasks need one).
    #[error("QuicEndpoint::bind must be called inside a tokio runtime")]
    NoRuntime,
}

/// Why a dial did not give a link. Each counts in `dial_failures`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DialError {
    /// Nothing came of it within `connect_timeout`. QUIC has no "connection refused": a port
    /// nobody listens on, a dead host and a hung peer all look like this.
    #[error("no link within {0:?}")]
    Timeout(Duration),
    /// quinn refused to start the dial (the endpoint is closed, an unusable address).
    #[error("dial: {0}")]
    Connect(#[from] quinn::ConnectError),
    /// The QUIC or TLS handshake failed: the peer's certificate is not the dialed rank's or not
    /// from the cluster CA, or the peer refused ours.
    #[error("handshake: {0}")]
    Handshake(ConnectionError),
    /// The connection was established and then closed before the acceptor's answer:
    /// [`DownReason::Duplicate`] (the peer's own dial wins the tie-break),
    /// [`DownReason::Refused`], [`DownReason::Malformed`], [`DownReason::Closed`], ...
    #[error("closed before the answer: {0}")]
    Closed(DownReason),
    /// The acceptor's answer was not [`ACCEPTED`](crate::ACCEPTED).
    #[error("malformed answer")]
    BadAnswer,
    /// The acceptor answered that this rank was removed from the cluster in `epoch`
    /// ([`CloseCode::Removed`], [`Inbound::reject_removed`]).
    #[error("this rank was removed from the cluster in epoch {epoch}")]
    Removed {
        /// The removal's epoch.
        epoch: u64,
    },
}

impl DialError {
    /// The outcome to feed the core's link policy
    /// ([`LinkPolicy::handle_dial_result`](lifeline_core::link::LinkPolicy::handle_dial_result)):
    /// [`DialOutcome::Duplicate`] for a lost tie-break, [`DialOutcome::Failed`] otherwise
    /// (never `Refused`: QUIC cannot tell a dead port from a slow one).
    pub fn outcome(&self) -> DialOutcome {
        match self {
            Self::Closed(DownReason::Duplicate) => DialOutcome::Duplicate,
            _ => DialOutcome::Failed,
        }
    }

    /// The epoch in which the acceptor says this rank was removed, if that is the answer
    /// (for [`Node::handle_fenced`](lifeline_core::Node::handle_fenced)).
    pub fn removed(&self) -> Option<u64> {
        match self {
            Self::Removed { epoch } => Some(*epoch),
            _ => None,
        }
    }

    /// The error for a connection that closed with `e` before the acceptor's answer.
    fn closed(e: &ConnectionError) -> Self {
        if let ConnectionError::ApplicationClosed(c) = e {
            if CloseCode::from_code(c.error_code) == Some(CloseCode::Removed) {
                if let Ok(b) = <[u8; 8]>::try_from(&c.reason[..]) {
                    return Self::Removed {
                        epoch: u64::from_be_bytes(b),
                    };
                }
            }
        }
        Self::Closed(DownReason::from_connection_error(e))
    }
}

/// What the acceptor found wrong with an inbound connection.
enum Refusal {
    Handshake,
    Malformed,
    WrongRank,
    WrongAddress,
}

/// Everything the endpoint's tasks share.
struct Inner {
    endpoint: quinn::Endpoint,
    id: RankIdentity,
    cfg: QuicConfig,
    limits: Limits,
    book: Option<AddressBook>,
    /// The driver's book, once [`QuicEndpoint::follow_book`] handed it over: it replaces
    /// `book` for every check from then on, so ranks a grow adds are accepted.
    shared: OnceLock<Arc<std::sync::RwLock<common::AddressBook>>>,
    counters: Arc<Counters>,
}

impl Inner {
    /// Whether addresses are checked at all (the endpoint was bound with a book).
    fn checks(&self) -> bool {
        self.book.is_some()
    }

    /// Whether some rank's endpoint is at `from` (true when addresses are not checked).
    fn known_address(&self, from: SocketAddr) -> bool {
        if let Some(b) = self.shared.get() {
            let b = b.read().unwrap_or_else(|e| e.into_inner());
            return b.iter().any(|(_, a)| a == from);
        }
        self.book.as_ref().is_none_or(|b| b.rank_at(from).is_some())
    }

    /// Whether `peer`'s endpoint is at `from` (true when addresses are not checked).
    fn address_of(&self, peer: Rank, from: SocketAddr) -> bool {
        if let Some(b) = self.shared.get() {
            let b = b.read().unwrap_or_else(|e| e.into_inner());
            return b.get(peer) == Some(from);
        }
        self.book.as_ref().is_none_or(|b| b.get(peer) == Some(from))
    }
}

/// One node's QUIC endpoint: one UDP socket (bound with socket2, `SO_RCVBUF`/`SO_SNDBUF` from
/// [`QuicConfig`]) and one quinn endpoint that both dials and accepts, with the rank's
/// mutual-TLS configurations ([`server_config`], [`client_config`]).
///
/// Guarantees: a [`QuicLink`] it returns is to a peer whose certificate chains to the cluster
/// CA and names the link's rank; an accepted one also claimed that rank on both streams and,
/// with an address book, connected from that rank's address. Every refused peer is counted
/// ([`QuicStats`]) and nothing it sent is returned.
///
/// Dropping it closes the endpoint and every link on it ([`CloseCode::Normal`]).
pub struct QuicEndpoint {
    inner: Arc<Inner>,
    inbound: Mutex<mpsc::Receiver<Inbound>>,
}

impl std::fmt::Debug for QuicEndpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QuicEndpoint")
            .field("rank", &self.inner.id.rank())
            .field("addr", &self.inner.endpoint.local_addr().ok())
            .finish_non_exhaustive()
    }
}

impl QuicEndpoint {
    /// Binds `addr` for rank `id` and starts accepting. With an address `book`, a connection
    /// from an address that is no rank's is refused before any TLS work (counted in
    /// `strangers`), and an authenticated one must come from its claimed rank's address
    /// (`wrong_address`); without one, any holder of a cluster certificate may connect.
    ///
    /// Must be called inside a tokio runtime ([`EndpointError::NoRuntime`] otherwise).
    pub fn bind(
        id: &RankIdentity,
        cfg: &QuicConfig,
        addr: SocketAddr,
        book: Option<AddressBook>,
    ) -> Result<Self, EndpointError> {
        if tokio::runtime::Handle::try_current().is_err() {
            return Err(EndpointError::NoRuntime);
        }
        let socket =
            udp_socket(addr, cfg).map_err(|source| EndpointError::Socket { addr, source })?;
        Self::start(id, cfg, socket, addr, book)
    }

    /// [`bind`](Self::bind) on a UDP socket the caller already bound (an address reserved
    /// before the address book was complete, or a socket handed down by a launcher), as the TCP
    /// adapter takes a bound listener: its buffers are sized from `cfg` and it is made
    /// non-blocking; otherwise the same guarantees and errors.
    pub fn from_socket(
        id: &RankIdentity,
        cfg: &QuicConfig,
        socket: std::net::UdpSocket,
        book: Option<AddressBook>,
    ) -> Result<Self, EndpointError> {
        if tokio::runtime::Handle::try_current().is_err() {
            return Err(EndpointError::NoRuntime);
        }
        let addr = socket
            .local_addr()
            .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)));
        let sized = || -> io::Result<()> {
            let s = socket2::SockRef::from(&socket);
            if cfg.udp_recv_buffer > 0 {
                s.set_recv_buffer_size(cfg.udp_recv_buffer)?;
            }
            if cfg.udp_send_buffer > 0 {
                s.set_send_buffer_size(cfg.udp_send_buffer)?;
            }
            socket.set_nonblocking(true)
        };
        sized().map_err(|source| EndpointError::Socket { addr, source })?;
        Self::start(id, cfg, socket, addr, book)
    }

    fn start(
        id: &RankIdentity,
        cfg: &QuicConfig,
        socket: std::net::UdpSocket,
        addr: SocketAddr,
        book: Option<AddressBook>,
    ) -> Result<Self, EndpointError> {
        let server = server_config(id, cfg)?;
        let client = client_config(id, cfg)?;
        let mut endpoint = quinn::Endpoint::new(
            EndpointConfig::default(),
            Some(server),
            socket,
            Arc::new(TokioRuntime),
        )
        .map_err(|source| EndpointError::Socket { addr, source })?;
        endpoint.set_default_client_config(client);
        let inner = Arc::new(Inner {
            endpoint,
            id: id.clone(),
            cfg: cfg.clone(),
            limits: Limits {
                max_frame: cfg.max_frame,
                ..Limits::default()
            },
            book,
            shared: OnceLock::new(),
            counters: Arc::default(),
        });
        let (tx, rx) = mpsc::channel(cfg.accept_backlog);
        tokio::spawn(accept_loop(inner.clone(), tx));
        Ok(Self {
            inner,
            inbound: Mutex::new(rx),
        })
    }

    /// This node's rank.
    pub fn rank(&self) -> Rank {
        self.inner.id.rank()
    }

    /// The bound address (the port, if 0 was asked for).
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.endpoint.local_addr()
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> QuicStats {
        self.inner.counters.snapshot()
    }

    /// A handle on the counters that outlives handing the endpoint over (to
    /// [`spawn`](crate::spawn)): each refusal reason apart, where the driver's
    /// `TransportStats` only has their sum.
    pub fn counters(&self) -> QuicCounters {
        QuicCounters(self.inner.counters.clone())
    }

    /// Dials rank `peer` at `addr`: the QUIC handshake (which fails unless `addr` holds `peer`'s
    /// certificate, [`server_name`]), then the control and data streams, each opened with this
    /// rank's [`Hello`], then the acceptor's answer. All within
    /// [`QuicConfig::connect_timeout`], else [`DialError::Timeout`]: QUIC never answers
    /// "refused", so a dial to a port nobody listens on, or to a dead host, fails only then.
    ///
    /// A peer whose own dial wins the tie-break answers [`DialError::Closed`] with
    /// [`DownReason::Duplicate`] (see [`DialError::outcome`]).
    pub async fn dial(&self, peer: Rank, addr: SocketAddr) -> Result<QuicLink, DialError> {
        let c = &self.inner.counters;
        Counters::add(&c.dials);
        let limit = self.inner.cfg.connect_timeout;
        let r = match tokio::time::timeout(limit, self.dial_inner(peer, addr)).await {
            Ok(r) => r,
            Err(_) => {
                Counters::add(&c.dial_timeouts);
                Err(DialError::Timeout(limit))
            }
        };
        if r.is_err() {
            Counters::add(&c.dial_failures);
        }
        r
    }

    async fn dial_inner(&self, peer: Rank, addr: SocketAddr) -> Result<QuicLink, DialError> {
        let inner = &self.inner;
        let name = server_name(peer, inner.id.cluster());
        let conn = inner
            .endpoint
            .connect(addr, &name)?
            .await
            .map_err(DialError::Handshake)?;
        let lost = |conn: &quinn::Connection| match conn.close_reason() {
            Some(e) => DialError::closed(&e),
            None => DialError::BadAnswer,
        };
        let open = |class| {
            let conn = &conn;
            async move {
                let (mut tx, rx) = conn.open_bi().await.map_err(|e| DialError::closed(&e))?;
                let _ = tx.set_priority(priority(class));
                let hello = Hello {
                    rank: inner.id.rank(),
                    class,
                };
                tx.write_all(&hello.encode())
                    .await
                    .map_err(|_| lost(conn))?;
                Ok::<Halves, DialError>((tx, rx))
            }
        };
        let mut control = open(Class::Control).await?;
        let data = open(Class::Data).await?;
        let mut answer = [0u8; ACCEPTED.len()];
        control
            .1
            .read_exact(&mut answer)
            .await
            .map_err(|_| lost(&conn))?;
        if answer != ACCEPTED {
            conn.close(CloseCode::Malformed.code(), CloseCode::Malformed.phrase());
            return Err(DialError::BadAnswer);
        }
        Ok(assemble(inner, conn, peer, Side::Dialed, control, data))
    }

    /// From now on, checks inbound peers against `book` (the driver's, which
    /// [`Handle::add_peers`](common::Handle::add_peers) and `grow` extend) instead of the book
    /// the endpoint was bound with; a no-op for an endpoint bound without a book (it checks no
    /// addresses) or one that follows a book already. [`spawn`](crate::spawn) calls it.
    pub fn follow_book(&self, book: Arc<std::sync::RwLock<common::AddressBook>>) {
        if self.inner.checks() {
            let _ = self.inner.shared.set(book);
        }
    }

    /// The next authenticated inbound link: its peer passed TLS, claimed its certificate's
    /// rank on both streams and, with an address book, came from that rank's address. The
    /// caller decides with [`Inbound::accept`] or [`Inbound::reject`] (the tie-break,
    /// [`keeps`](crate::keeps), or a dead rank). Refused peers are counted and never returned.
    ///
    /// `None` once the endpoint is closed. Cancel-safe.
    pub async fn accept(&self) -> Option<Inbound> {
        self.inbound.lock().await.recv().await
    }

    /// Closes every link with [`CloseCode::Normal`] and waits (briefly) until the peers were
    /// told, so they see [`DownReason::Closed`] at once instead of timing out.
    pub async fn close(&self) {
        let c = CloseCode::Normal;
        self.inner.endpoint.close(c.code(), c.phrase());
        self.inner.endpoint.wait_idle().await;
    }
}

impl Drop for QuicEndpoint {
    fn drop(&mut self) {
        let c = CloseCode::Normal;
        self.inner.endpoint.close(c.code(), c.phrase());
    }
}

/// An authenticated inbound link waiting for the acceptor's decision. Dropping it closes the
/// connection ([`CloseCode::Normal`]).
#[derive(Debug)]
pub struct Inbound {
    link: QuicLink,
    counters: Arc<Counters>,
}

impl Inbound {
    /// The peer's rank: its claim, checked against its certificate.
    pub fn peer(&self) -> Rank {
        self.link.peer()
    }

    /// The peer's address.
    pub fn remote_address(&self) -> SocketAddr {
        self.link.watch().remote_address()
    }

    /// Runs the link: answers [`ACCEPTED`](crate::ACCEPTED) on the control stream (the
    /// dialer's `dial` then returns its end).
    pub async fn accept(mut self) -> Result<QuicLink, DownReason> {
        let watch = self.link.watch();
        let sink = &mut self.link.parts_mut().control.sink;
        if sink.write_raw(&ACCEPTED).await.is_err() {
            return Err(watch.reason().unwrap_or(DownReason::Closed));
        }
        Counters::add(&self.counters.accepted);
        Ok(self.link)
    }

    /// Closes the connection with [`CloseCode::Removed`] and `epoch` as the reason bytes: the
    /// dialer's [`QuicEndpoint::dial`] fails with [`DialError::Removed`] and learns its fate.
    pub fn reject_removed(self, epoch: u64) {
        self.link
            .close_with(CloseCode::Removed, &epoch.to_be_bytes());
    }

    /// Closes the connection with `code`; [`CloseCode::Duplicate`] (the tie-break kept the
    /// pair's other connection) is counted in `duplicates`.
    pub fn reject(self, code: CloseCode) {
        if code == CloseCode::Duplicate {
            Counters::add(&self.counters.duplicates);
        }
        self.link.close(code);
    }
}

/// Both halves of one stream.
type Halves = (quinn::SendStream, quinn::RecvStream);

/// A link from a connection and its control and data streams.
fn assemble(
    inner: &Inner,
    conn: quinn::Connection,
    peer: Rank,
    side: Side,
    control: Halves,
    data: Halves,
) -> QuicLink {
    let shared = Arc::new(LinkShared {
        conn,
        peer,
        reason: OnceLock::new(),
        counters: inner.counters.clone(),
        limits: inner.limits,
    });
    let stream = |class, (tx, rx): Halves| Stream {
        sink: FrameSink::new(tx, class, shared.clone()),
        source: FrameSource::new(rx, class, shared.clone()),
    };
    let control = stream(Class::Control, control);
    let data = stream(Class::Data, data);
    QuicLink::new(side, shared, control, data)
}

/// The QUIC priority of a class's stream.
fn priority(class: Class) -> i32 {
    match class {
        Class::Control => CONTROL_PRIORITY,
        Class::Data => 0,
    }
}

/// The UDP socket: made, sized and bound with socket2, non-blocking for tokio.
fn udp_socket(addr: SocketAddr, cfg: &QuicConfig) -> io::Result<std::net::UdpSocket> {
    let s = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    if cfg.udp_recv_buffer > 0 {
        s.set_recv_buffer_size(cfg.udp_recv_buffer)?;
    }
    if cfg.udp_send_buffer > 0 {
        s.set_send_buffer_size(cfg.udp_send_buffer)?;
    }
    s.bind(&addr.into())?;
    s.set_nonblocking(true)?;
    Ok(s.into())
}

/// Takes every incoming connection: strangers are refused at once, the rest get a handshake
/// task (at most `max_handshakes` at a time) that hands authenticated links to `tx`.
async fn accept_loop(inner: Arc<Inner>, tx: mpsc::Sender<Inbound>) {
    let slots = Arc::new(Semaphore::new(inner.cfg.max_handshakes));
    while let Some(incoming) = inner.endpoint.accept().await {
        let c = &inner.counters;
        Counters::add(&c.incoming);
        let from = incoming.remote_address();
        if !inner.known_address(from) {
            tracing::debug!(%from, reason = "strangers", "inbound connection refused");
            Counters::add(&c.strangers);
            incoming.refuse();
            continue;
        }
        let Ok(permit) = slots.clone().try_acquire_owned() else {
            tracing::debug!(%from, reason = "handshakes_failed", why = "max_handshakes",
                            "inbound connection refused");
            Counters::add(&c.handshakes_failed);
            incoming.refuse();
            continue;
        };
        let (inner, tx) = (inner.clone(), tx.clone());
        tokio::spawn(async move {
            let limit = inner.cfg.connect_timeout;
            let result = tokio::time::timeout(limit, inbound(&inner, incoming)).await;
            let c = &inner.counters;
            let (counter, reason) = match result {
                Ok(Ok(link)) => {
                    let _ = tx
                        .send(Inbound {
                            link,
                            counters: inner.counters.clone(),
                        })
                        .await;
                    drop(permit);
                    return;
                }
                Ok(Err(Refusal::Handshake)) => (&c.handshakes_failed, "handshakes_failed"),
                Err(_) => (&c.handshakes_failed, "handshakes_failed (connect_timeout)"),
                Ok(Err(Refusal::Malformed)) => (&c.malformed_hellos, "malformed_hellos"),
                Ok(Err(Refusal::WrongRank)) => (&c.wrong_rank, "wrong_rank"),
                Ok(Err(Refusal::WrongAddress)) => (&c.wrong_address, "wrong_address"),
            };
            tracing::debug!(%from, reason, "inbound connection refused");
            Counters::add(counter);
            drop(permit);
        });
    }
}

/// The acceptor's side of one connection: TLS, both hellos, the rank and address checks.
/// A refused connection is closed with the matching code before this returns.
async fn inbound(inner: &Inner, incoming: Incoming) -> Result<QuicLink, Refusal> {
    let from = incoming.remote_address();
    let conn = incoming
        .accept()
        .map_err(|e| {
            tracing::debug!(%from, error = %e, "inbound: accept failed");
            Refusal::Handshake
        })?
        .await
        .map_err(|e| {
            tracing::debug!(%from, error = %e, "inbound: TLS handshake failed");
            Refusal::Handshake
        })?;
    let refuse = |why: Refusal| {
        let code = match why {
            Refusal::Malformed => CloseCode::Malformed,
            _ => CloseCode::Refused,
        };
        conn.close(code.code(), code.phrase());
        why
    };
    let mut control: Option<Halves> = None;
    let mut data: Option<Halves> = None;
    let mut claimed = None;
    for _ in 0..2 {
        let (tx, mut rx) = conn.accept_bi().await.map_err(|e| {
            tracing::debug!(%from, error = %e, "inbound: no stream for a hello");
            Refusal::Handshake
        })?;
        let mut b = [0u8; HELLO_LEN];
        match rx.read_exact(&mut b).await {
            Ok(()) => {}
            Err(ReadExactError::FinishedEarly(_)) => return Err(refuse(Refusal::Malformed)),
            Err(ReadExactError::ReadError(e)) => {
                tracing::debug!(%from, error = %e, "inbound: hello unread");
                return Err(refuse(Refusal::Handshake));
            }
        }
        let hello = Hello::decode(&b).map_err(|_| refuse(Refusal::Malformed))?;
        if claimed.is_some_and(|r| r != hello.rank) {
            return Err(refuse(Refusal::Malformed));
        }
        claimed = Some(hello.rank);
        let slot = match hello.class {
            Class::Control => &mut control,
            Class::Data => &mut data,
        };
        if slot.is_some() {
            return Err(refuse(Refusal::Malformed));
        }
        let _ = tx.set_priority(priority(hello.class));
        *slot = Some((tx, rx));
    }
    let (Some(peer), Some(control), Some(data)) = (claimed, control, data) else {
        return Err(refuse(Refusal::Malformed));
    };
    if verify_claimed_rank(&conn, peer, inner.id.cluster()).is_err() {
        return Err(refuse(Refusal::WrongRank));
    }
    if !inner.address_of(peer, from) {
        return Err(refuse(Refusal::WrongAddress));
    }
    Ok(assemble(inner, conn, peer, Side::Accepted, control, data))
}
