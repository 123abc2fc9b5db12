//! Joins over TCP: the contact's side of a join connection (run by the listener
//! for a connection that opens with the [join preamble](crate::handshake::join)) and the
//! joiner's side ([`join`]: dial contacts, send the request, read the answer, until admitted).
//!
//! A joiner binds its listener first (its address goes in the request: members dial it as
//! soon as they apply the admission), then calls [`join`]; with the [`Joined`] it builds its
//! node (`Config::for_admission(&joined.admission)`) and starts it with [`spawn`](crate::spawn)
//! on that listener and `joined.book`.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use lifeline_transport_common::join::{run_joiner, DialError, JoinError, JoinSettings, Joined};
use lifeline_transport_common::{Counters, Inbound, JoinAnswer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::OwnedSemaphorePermit;
use tokio::time::Instant as Tick;

use crate::config::TcpConfig;
use crate::conn::{configure, connect_from, Shared};
use crate::handshake::join::{
    JoinAcceptor, JoinDialer, JOIN_CHALLENGE_LEN, JOIN_HELLO_LEN, JOIN_PROOF_LEN,
};
use crate::handshake::{stream::nonce, HandshakeError};
use crate::key::ClusterKey;

/// The contact's side of a join connection whose first four bytes (the join magic) were read:
/// the rest of the preamble and the request within `deadline` (else refused and counted in
/// `handshakes_refused`, like any unauthenticated connection), then, holding a slot of the
/// driver's join path instead of the handshake `permit`, the wait for the driver's answer
/// (bounded by [`TcpConfig::join_timeout`]; the joiner closing the connection first ends it,
/// and the driver is told), then the answer, and the close.
pub(crate) async fn contact(
    mut stream: TcpStream,
    magic: [u8; 4],
    peer: SocketAddr,
    sh: Shared,
    inbound: Inbound<TcpStream>,
    deadline: Tick,
    permit: OwnedSemaphorePermit,
) {
    let preamble = async {
        let mut raw = [0u8; JOIN_HELLO_LEN];
        raw[..4].copy_from_slice(&magic);
        stream.read_exact(&mut raw[4..]).await?;
        let (acc, ch) = JoinAcceptor::on_hello(&sh.key, &raw, nonce()?)?;
        stream.write_all(&ch).await?;
        stream.flush().await?;
        let mut proof = [0u8; JOIN_PROOF_LEN];
        stream.read_exact(&mut proof).await?;
        let len = JoinAcceptor::request_len(&proof)?;
        let mut request = vec![0u8; len];
        stream.read_exact(&mut request).await?;
        acc.on_request(&proof, &request)?;
        Ok::<_, HandshakeError>((acc, Bytes::from(request)))
    };
    let (acc, request) = match tokio::time::timeout_at(deadline, preamble).await {
        Ok(Ok(x)) => x,
        Ok(Err(e)) => {
            Counters::add(&sh.counters.handshakes_refused);
            tracing::debug!(from = %peer, error = %e, "join preamble refused");
            return;
        }
        Err(_) => {
            Counters::add(&sh.counters.handshakes_refused);
            tracing::debug!(from = %peer, "join preamble refused: timed out");
            return;
        }
    };
    drop(permit);
    // Past the bound of open join connections: closed unanswered (counted by `open`).
    let Some(mut slot) = inbound.joins.open() else {
        return;
    };
    tracing::debug!(from = %peer, "join connection");
    let (mut rd, mut wr) = stream.split();
    let ended = async {
        // The joiner sends nothing more: any byte, an EOF or an error ends the connection.
        let mut b = [0u8; 1];
        let _ = rd.read(&mut b).await;
    };
    let answer = tokio::select! {
        a = slot.request(request) => a,
        () = ended => None,
        () = tokio::time::sleep(sh.cfg.join_timeout) => None,
    };
    // Unanswered: dropping the slot tells the driver (which tells the core).
    drop(slot);
    let Some(answer) = answer else {
        return;
    };
    let bytes = answer.encode();
    let mac = acc.answer_mac(&bytes);
    let write = async {
        wr.write_all(&(bytes.len() as u32).to_be_bytes()).await?;
        wr.write_all(&bytes).await?;
        wr.write_all(&mac).await?;
        wr.flush().await?;
        wr.shutdown().await
    };
    if let Err(e) = tokio::time::timeout(sh.cfg.handshake_timeout, write)
        .await
        .unwrap_or_else(|_| Err(io::ErrorKind::TimedOut.into()))
    {
        tracing::debug!(from = %peer, error = %e, "join answer not written");
    }
}

/// The longest answer a joiner reads: a reply of at most the core's
/// [`MAX_JOIN_MSG`](lifeline_core::join::MAX_JOIN_MSG) and a book of `max_book` entries
/// (each at most 69 bytes encoded), with the framing.
fn max_answer(max_book: usize) -> usize {
    lifeline_core::join::MAX_JOIN_MSG
        .saturating_add(max_book.saturating_mul(69))
        .saturating_add(64)
}

/// One join connection, the joiner's side: connects to `contact` (from `source` when given),
/// runs the preamble, sends `request` and reads the contact's answer (its MAC checked).
pub(crate) async fn ask(
    contact: SocketAddr,
    source: Option<IpAddr>,
    request: Bytes,
    key: &ClusterKey,
    cfg: &TcpConfig,
    max_book: usize,
) -> Result<JoinAnswer, HandshakeError> {
    let mut s = tokio::time::timeout(cfg.connect_timeout, connect_from(source, contact))
        .await
        .map_err(|_| HandshakeError::Timeout)??;
    configure(&s, cfg)?;
    let mut d = JoinDialer::new(key, nonce()?);
    let preamble = async {
        s.write_all(d.hello()).await?;
        s.flush().await?;
        let mut ch = [0u8; JOIN_CHALLENGE_LEN];
        s.read_exact(&mut ch).await?;
        let proof = d.on_challenge(&ch, &request)?;
        s.write_all(&proof).await?;
        s.write_all(&request).await?;
        s.flush().await?;
        Ok::<_, HandshakeError>(())
    };
    tokio::time::timeout(cfg.handshake_timeout, preamble)
        .await
        .map_err(|_| HandshakeError::Timeout)??;
    // The contact answers when the admission is applied there (or says "retry"): no bound
    // here but the joiner's own try timeout.
    let mut len = [0u8; 4];
    s.read_exact(&mut len).await?;
    let len = u32::from_be_bytes(len) as usize;
    if len > max_answer(max_book) {
        return Err(HandshakeError::TooLong(len));
    }
    let mut body = BytesMut::zeroed(len);
    s.read_exact(&mut body).await?;
    let mut mac = [0u8; 32];
    s.read_exact(&mut mac).await?;
    d.check_answer(&body, &mac)?;
    JoinAnswer::decode(&body.freeze(), max_book).map_err(|_| HandshakeError::Garbage)
}

/// Joins a running cluster through `contacts` (members' listening addresses, tried in turn
/// with back-off; see [`run_joiner`]) as a process that listens at `addr`: already bound, and
/// the address members will dial (not an unspecified IP: see [`reachable_addr`]). Join
/// connections leave from `addr`'s IP where [`TcpConfig::bind_local`] says so, as links do.
/// `seed` draws the process's nonce: give fresh OS randomness. Returns the admission and the
/// admitting contact's address book (this process's entry included).
pub async fn join(
    contacts: &[SocketAddr],
    addr: SocketAddr,
    key: &ClusterKey,
    cfg: &TcpConfig,
    settings: &JoinSettings,
    seed: u64,
) -> Result<Joined, JoinError> {
    let source = cfg.bind_local.source_ip(Some(addr.ip()));
    // A try that hangs is given up by the joiner after `attempt_timeout`; its connection a
    // little later.
    let bound = settings.attempt_timeout + Duration::from_secs(1);
    let max_book = settings.max_book;
    run_joiner(contacts, addr, settings, seed, |contact, request| {
        let key = key.clone();
        let cfg = cfg.clone();
        async move {
            match tokio::time::timeout(bound, ask(contact, source, request, &key, &cfg, max_book))
                .await
            {
                Ok(Ok(a)) => Ok(a),
                Ok(Err(e)) => Err(Box::new(e) as DialError),
                Err(_) => Err(Box::new(HandshakeError::Timeout) as DialError),
            }
        }
    })
    .await
}

/// The address to give members for a listener bound at `bound`: itself, unless its IP is
/// unspecified (`0.0.0.0`, `::`), in which case the IP of the interface that routes toward
/// `toward` (found without sending anything), with the bound port.
pub fn reachable_addr(bound: SocketAddr, toward: SocketAddr) -> io::Result<SocketAddr> {
    if !bound.ip().is_unspecified() {
        return Ok(bound);
    }
    let any: SocketAddr = if toward.is_ipv4() {
        ([0, 0, 0, 0], 0).into()
    } else {
        (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
    };
    let probe = std::net::UdpSocket::bind(any)?;
    probe.connect(toward)?;
    Ok(SocketAddr::new(probe.local_addr()?.ip(), bound.port()))
}
