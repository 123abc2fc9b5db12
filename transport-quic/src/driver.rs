//! The QUIC adapter: the shared driver ([`lifeline_transport_common`]) run over a
//! [`QuicEndpoint`] by [`QuicConnector`]; [`spawn`] starts it.
//!
//! **One connection per peer, one link-policy slot.** A [`QuicLink`] carries both classes (a
//! control and a data stream, opened and checked together by [`QuicEndpoint::dial`]), so the
//! connector declares a single slot that carries both classes: the link is up when that
//! connection is, down when it ends, and the link policy's tie-break ([`keeps`](crate::keeps)'s
//! rule: the lower rank's dial wins) decides between two simultaneous connections as it does
//! per class for TCP. Each class still has its own send queue in the driver and its own stream
//! (own flow control) on the wire, and the driver still reads control before data.
//!
//! **No "refused".** A dial to a port nobody listens on is never answered: it fails after
//! [`QuicConfig::connect_timeout`](crate::QuicConfig) as
//! [`DialOutcome::Failed`](lifeline_core::link::DialOutcome::Failed), never `Refused`, so a dead rank is given up after `dial_attempts` dials with
//! back-off (the TCP adapter's `refused_attempts` shortcut does not apply).

use std::future::Future;
use std::net::SocketAddr;
use std::pin::pin;
use std::sync::{Arc, RwLock};
use std::task::Poll;

use bytes::Bytes;
use lifeline_core::link::LinkConfigError;
use lifeline_core::tree::Rank;
use lifeline_core::{Class, Node};
use lifeline_transport_common::{
    self as common, Accepted, Connector, Counters, DialFailure, DriverConfig, Ended, LinkIo,
    Rejection, RunningNode, SendQueue, Setup, TransportStats, MAX_BATCH,
};

use crate::down::{CloseCode, DownReason};
use crate::endpoint::{DialError, Inbound, QuicEndpoint};
use crate::frames::{FrameSink, FrameSource, SendError};
use crate::link::QuicLink;

/// A connection handed between the connector and the driver: a dialed link, or an inbound one
/// still awaiting its answer.
#[derive(Debug)]
pub enum QuicConn {
    /// This side dialed it; the peer accepted it.
    Dialed(QuicLink),
    /// The peer dialed it; [`Inbound::accept`] runs when the driver installs it.
    Inbound(Inbound),
}

/// The QUIC connector: one slot per link, carrying both classes over one [`QuicLink`].
#[derive(Debug)]
pub struct QuicConnector {
    endpoint: Arc<QuicEndpoint>,
}

impl QuicConnector {
    /// A connector dialing and accepting on `endpoint`.
    pub fn new(endpoint: Arc<QuicEndpoint>) -> Self {
        Self { endpoint }
    }
}

/// The driver's cause for a link that went down for `r` (see [`Ended`]): the same evidence as
/// [`DownReason::cause`] for every reason that has one (an idle timeout is
/// `Io(TimedOut)`, a reset or failure `Io(ConnectionReset)`, a close or refusal `Eof`); a
/// duplicate or a local close (no cause: this side's own doing) ends the connection as a close.
pub fn ended(r: DownReason) -> Ended {
    match r {
        DownReason::TimedOut => Ended::Io(std::io::ErrorKind::TimedOut),
        DownReason::Reset | DownReason::Failed => Ended::Io(std::io::ErrorKind::ConnectionReset),
        DownReason::Malformed => Ended::Malformed,
        _ => Ended::Eof,
    }
}

/// The link policy's outcome and the fence epoch of a failed dial.
fn failure(e: DialError) -> DialFailure {
    DialFailure {
        outcome: e.outcome(),
        removed: e.removed(),
        error: Box::new(e),
    }
}

impl Connector for QuicConnector {
    type Conn = QuicConn;

    const SLOTS: usize = 1;

    fn slot_of(_class: Class) -> usize {
        0
    }

    fn dial(
        self: &Arc<Self>,
        peer: Rank,
        _slot: usize,
        addr: SocketAddr,
    ) -> impl Future<Output = Result<QuicConn, DialFailure>> + Send + 'static {
        let ep = self.endpoint.clone();
        async move {
            ep.dial(peer, addr)
                .await
                .map(QuicConn::Dialed)
                .map_err(failure)
        }
    }

    /// Rank connections only: QUIC has no join path (a joiner holds no rank certificate;
    /// `inbound.joins` is unused and the driver never sees a join request).
    fn listen(
        self: &Arc<Self>,
        inbound: common::Inbound<QuicConn>,
    ) -> impl Future<Output = ()> + Send + 'static {
        let ep = self.endpoint.clone();
        let accepted = inbound.accepted;
        async move {
            while let Some(inbound) = ep.accept().await {
                let a = Accepted {
                    peer: inbound.peer(),
                    slot: 0,
                    conn: QuicConn::Inbound(inbound),
                };
                if accepted.send(a).await.is_err() {
                    return;
                }
            }
        }
    }

    fn run(
        self: &Arc<Self>,
        conn: QuicConn,
        io: LinkIo,
    ) -> impl Future<Output = ()> + Send + 'static {
        run(conn, io)
    }

    fn reject(
        self: &Arc<Self>,
        conn: QuicConn,
        why: Rejection,
    ) -> impl Future<Output = ()> + Send + 'static {
        let link = match conn {
            QuicConn::Inbound(i) => {
                match why {
                    Rejection::Duplicate => i.reject(CloseCode::Duplicate),
                    Rejection::Refuse => i.reject(CloseCode::Refused),
                    Rejection::Removed { epoch } => i.reject_removed(epoch),
                }
                None
            }
            QuicConn::Dialed(l) => Some(l),
        };
        async move {
            if let Some(l) = link {
                l.close(CloseCode::Normal);
            }
        }
    }

    fn fill_stats(&self, s: &mut TransportStats) {
        let q = self.endpoint.stats();
        s.accepted += q.incoming;
        s.handshakes_refused +=
            q.strangers + q.handshakes_failed + q.malformed_hellos + q.wrong_rank + q.wrong_address;
    }
}

/// Runs one installed link: answers an inbound one, then a reader and a writer per class until
/// the first of them ends; the link is closed and its end reported (on the channel of the
/// class whose reader ended, so after the frames it delivered; on control's for a writer).
async fn run(conn: QuicConn, io: LinkIo) {
    let link = match conn {
        QuicConn::Dialed(l) => l,
        QuicConn::Inbound(i) => match i.accept().await {
            Ok(l) => l,
            Err(r) => return io.ended(Class::Control, ended(r)).await,
        },
    };
    let parts = link.into_parts();
    let (mut cs, mut ds) = (parts.control, parts.data);
    let (cq, dq) = (
        io.queue(Class::Control).clone(),
        io.queue(Class::Data).clone(),
    );
    // A reader's end goes on its own class's channel, after the frames it delivered; a
    // writer's on control's.
    let (class, why) = tokio::select! {
        biased;
        r = read(&mut cs.source, &io, Class::Control) => (Class::Control, r),
        r = read(&mut ds.source, &io, Class::Data) => (Class::Data, r),
        r = write(&mut cs.sink, &cq) => (Class::Control, r),
        r = write(&mut ds.sink, &dq) => (Class::Control, r),
    };
    parts.watch.close(CloseCode::Normal);
    io.ended(class, why).await;
}

/// The next frame if one is ready now, without waiting.
async fn ready(src: &mut FrameSource) -> Option<Result<Bytes, DownReason>> {
    let mut f = pin!(src.recv());
    std::future::poll_fn(|cx| match f.as_mut().poll(cx) {
        Poll::Ready(r) => Poll::Ready(Some(r)),
        Poll::Pending => Poll::Ready(None),
    })
    .await
}

/// Delivers frames in batches: one awaited, then those already buffered (at most
/// [`MAX_BATCH`]). `FrameSource::recv` is cancel-safe, so an unready poll loses nothing.
async fn read(src: &mut FrameSource, io: &LinkIo, class: Class) -> Ended {
    let mut batch = Vec::with_capacity(MAX_BATCH);
    loop {
        let mut end = match src.recv().await {
            Ok(f) => {
                batch.push(f);
                None
            }
            Err(r) => Some(r),
        };
        while end.is_none() && batch.len() < MAX_BATCH {
            match ready(src).await {
                Some(Ok(f)) => batch.push(f),
                Some(Err(r)) => end = Some(r),
                None => break,
            }
        }
        if !batch.is_empty() && !io.deliver(class, &mut batch).await {
            return Ended::Stopped;
        }
        if let Some(r) = end {
            return ended(r);
        }
    }
}

/// Writes a class's send queue, everything queued in one `send_all` (small frames coalesced,
/// large ones by reference). A frame that is
/// not one whole envelope of at most `max_frame` bytes (the core never makes one) is dropped.
async fn write(sink: &mut FrameSink, queue: &SendQueue) -> Ended {
    let mut taken = std::collections::VecDeque::new();
    loop {
        queue.take(&mut taken);
        if taken.is_empty() {
            queue.notify.notified().await;
            continue;
        }
        let mut frames: Vec<Bytes> = taken.drain(..).collect();
        loop {
            match sink.send_all(&mut frames).await {
                Ok(()) => break,
                Err(SendError::BadFrame { index }) => {
                    frames.remove(index);
                }
                Err(SendError::Down(r)) => return ended(r),
            }
        }
    }
}

/// Starts driving `node` over `endpoint` (bound to this rank's address book entry with
/// [`QuicEndpoint::bind`]), with the shared driver's settings `cfg`. Must be called inside a
/// tokio runtime; any flavour works. Returns the same [`RunningNode`] as the TCP adapter's
/// `spawn`: the handle, the outputs and the driver task.
///
/// The node should have been created with `now = Instant::ZERO`. `book` is what the driver
/// dials by ([`Handle::add_peers`](common::Handle::add_peers) and `grow` extend it); an endpoint
/// bound with an address book checks inbound peers against this one from now on
/// ([`QuicEndpoint::follow_book`]), so ranks a grow adds are accepted as well as dialled.
///
/// Errors: `cfg.link` is invalid ([`LinkConfig::validate`](lifeline_core::link::LinkConfig::validate));
/// nothing was started.
pub fn spawn(
    node: Node,
    book: common::AddressBook,
    endpoint: QuicEndpoint,
    cfg: DriverConfig,
) -> Result<RunningNode, LinkConfigError> {
    cfg.link.validate()?;
    let local_addr = endpoint
        .local_addr()
        .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)));
    let book = Arc::new(RwLock::new(book));
    endpoint.follow_book(book.clone());
    let setup = Setup {
        book,
        cfg,
        counters: Arc::new(Counters::default()),
        local_addr,
    };
    let connector = Arc::new(QuicConnector::new(Arc::new(endpoint)));
    Ok(common::spawn(node, connector, setup))
}

#[cfg(test)]
mod tests {
    use super::*;
    use lifeline_core::link::DialOutcome;
    use lifeline_core::LinkCause;

    /// The driver's cause for every reason agrees with [`DownReason::cause`] wherever that has
    /// one.
    #[test]
    fn ends_carry_the_link_layers_evidence() {
        use DownReason as D;
        let driver_cause = |e: Ended| match e {
            Ended::Io(std::io::ErrorKind::TimedOut) => LinkCause::TimedOut,
            Ended::Io(_) => LinkCause::Reset,
            Ended::Eof | Ended::Malformed | Ended::Stopped => LinkCause::Closed,
        };
        for r in [
            D::TimedOut,
            D::Closed,
            D::Duplicate,
            D::Malformed,
            D::Refused,
            D::Reset,
            D::LocallyClosed,
            D::Failed,
        ] {
            if let Some(c) = r.cause() {
                assert_eq!(driver_cause(ended(r)), c, "{r}");
            }
        }
        assert_eq!(ended(D::Malformed), Ended::Malformed);
        assert_eq!(DialOutcome::Failed, DialError::BadAnswer.outcome());
    }
}
