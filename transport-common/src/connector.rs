//! The [`Connector`] trait: everything an adapter does that is not the driver's (dial, listen
//! and authenticate, move bytes), and the values it exchanges with the driver.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use lifeline_core::link::DialOutcome;
use lifeline_core::tree::Rank;
use lifeline_core::Class;
use tokio::sync::mpsc;

use crate::join::JoinTx;
use crate::queue::SendQueue;
use crate::stats::{Counters, TransportStats};

/// Most frames in one [`FrameIn::Frames`] batch. The class channels hold
/// `frame_buffer / MAX_BATCH` batches (at least one), so at most about `frame_buffer` frames
/// wait for the driver per class.
pub const MAX_BATCH: usize = 64;

/// What a running connection sends the driver on a class's channel ([`LinkIo::frames`]):
/// batches of whole frames in arrival order (at most [`MAX_BATCH`] each), then why it ended
/// (on the channel of the slot's first class, after the frames before it, so the driver sees a
/// link go down only after them).
#[derive(Debug)]
pub enum FrameIn {
    /// Whole frames from `from`, fed to the core with one `now`.
    Frames {
        /// The peer, as authenticated by the connector.
        from: Rank,
        /// The frames, each one whole envelope checked with
        /// [`lifeline_core::wire::frame_len`].
        frames: Vec<Bytes>,
    },
    /// The connection [`LinkIo::id`] of `peer`'s `slot` ended.
    Ended {
        /// The peer.
        peer: Rank,
        /// The link policy slot the connection filled.
        slot: usize,
        /// [`LinkIo::id`]: tells a current connection's end from a replaced one's.
        id: u64,
        /// Why.
        why: Ended,
    },
}

/// Why a connection ended, as evidence for the core ([`LinkCause`](lifeline_core::LinkCause)):
/// an EOF or a close is [`Closed`](lifeline_core::LinkCause::Closed), `Io(TimedOut)` is
/// [`TimedOut`](lifeline_core::LinkCause::TimedOut), any other `Io` is
/// [`Reset`](lifeline_core::LinkCause::Reset).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ended {
    /// The peer closed it (EOF, or an orderly close).
    Eof,
    /// A transport error: a reset, or a timeout (`io::ErrorKind::TimedOut`: `TCP_USER_TIMEOUT`,
    /// keepalive, a QUIC idle timeout).
    Io(io::ErrorKind),
    /// A frame header was malformed or over `max_frame`.
    Malformed,
    /// The driver is gone (its channels are closed); nothing is reported.
    Stopped,
}

/// The frame channels into the driver, one per class. Control is read before data.
#[derive(Clone, Debug)]
pub struct FrameTx {
    /// Control-class frames.
    pub control: mpsc::Sender<FrameIn>,
    /// Data-class frames.
    pub data: mpsc::Sender<FrameIn>,
}

impl FrameTx {
    /// The channel of `class`.
    pub fn of(&self, class: Class) -> &mpsc::Sender<FrameIn> {
        match class {
            Class::Control => &self.control,
            Class::Data => &self.data,
        }
    }
}

/// What an installed connection runs with ([`Connector::run`]): its identity, the send queues of
/// the classes it carries, the frame channels into the driver and the counters.
#[derive(Debug)]
pub struct LinkIo {
    /// The peer.
    pub peer: Rank,
    /// The link policy slot it fills.
    pub slot: usize,
    /// Unique per connection installed by one driver; report it back in [`FrameIn::Ended`].
    pub id: u64,
    /// Whether this side accepted it (the connector may still owe the peer its answer).
    pub accepted: bool,
    /// The send queues of the control and data classes (index 0 and 1). A connection writes
    /// the queues of the classes its slot carries ([`Connector::slot_of`]) and must not touch
    /// the others.
    pub queues: [Arc<SendQueue>; 2],
    /// Where frames go.
    pub frames: FrameTx,
    /// The adapter's counters.
    pub counters: Arc<Counters>,
}

impl LinkIo {
    /// The send queue of `class`.
    pub fn queue(&self, class: Class) -> &Arc<SendQueue> {
        &self.queues[class_index(class)]
    }

    /// Hands a batch of frames to the driver (leaving `batch` empty with its capacity); false if
    /// the driver is gone.
    pub async fn deliver(&self, class: Class, batch: &mut Vec<Bytes>) -> bool {
        let frames = std::mem::replace(batch, Vec::with_capacity(MAX_BATCH));
        let from = self.peer;
        self.frames
            .of(class)
            .send(FrameIn::Frames { from, frames })
            .await
            .is_ok()
    }

    /// Reports the connection's end on `class`'s channel (after every frame sent on it).
    pub async fn ended(&self, class: Class, why: Ended) {
        if why == Ended::Malformed {
            Counters::add(&self.counters.malformed);
        }
        let (peer, slot, id) = (self.peer, self.slot, self.id);
        let _ = self
            .frames
            .of(class)
            .send(FrameIn::Ended {
                peer,
                slot,
                id,
                why,
            })
            .await;
    }
}

/// The index of a class among the two (control 0, data 1).
pub(crate) fn class_index(c: Class) -> usize {
    match c {
        Class::Control => 0,
        Class::Data => 1,
    }
}

/// An authenticated inbound connection, awaiting the driver's verdict.
#[derive(Debug)]
pub struct Accepted<T> {
    /// The peer's rank, as authenticated.
    pub peer: Rank,
    /// The link policy slot it is for.
    pub slot: usize,
    /// The connection.
    pub conn: T,
}

/// Where a connector's listener hands what it accepted ([`Connector::listen`]): authenticated
/// rank connections to the driver's tie-break, and authenticated join connections (a process
/// that is not a member yet asking to join, see [`crate::join`]) to the driver's join path.
#[derive(Debug)]
pub struct Inbound<T> {
    /// Authenticated connections of ranks.
    pub accepted: mpsc::Sender<Accepted<T>>,
    /// Join connections: [`JoinTx::open`] once one is authenticated (refused past the
    /// driver's bound). A transport without a join path ignores it.
    pub joins: JoinTx,
}

/// How the driver turns down an inbound connection ([`Connector::reject`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rejection {
    /// This side's own connection for the slot wins the tie-break (not a failure).
    Duplicate,
    /// The peer is dead, this rank, outside the span, or the node is stopping.
    Refuse,
    /// The coordinator removed the peer from the cluster in `epoch`: tell it so (that is how a
    /// paused or cut-off rank learns its fate).
    Removed {
        /// The removal's epoch ([`Node::fence_verdict`](lifeline_core::Node::fence_verdict)).
        epoch: u64,
    },
}

/// Why a dial gave no connection.
#[derive(Debug)]
pub struct DialFailure {
    /// What to feed the link policy ([`DialOutcome::Refused`] only for a refusal that proves
    /// nothing listens, e.g. TCP's `ECONNREFUSED`; never [`DialOutcome::Connected`]).
    pub outcome: DialOutcome,
    /// The peer answered that this rank was removed from the cluster in this epoch.
    pub removed: Option<u64>,
    /// The error, for diagnostics.
    pub error: Box<dyn std::error::Error + Send + Sync>,
}

impl DialFailure {
    /// A failure counted like any other ([`DialOutcome::Failed`]).
    pub fn failed(error: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        Self {
            outcome: DialOutcome::Failed,
            removed: None,
            error: error.into(),
        }
    }
}

/// The I/O half of an adapter, which the shared driver runs: it dials, listens and
/// authenticates, and moves the bytes of installed connections; every decision (whom to dial,
/// the tie-break, what the core is told) is the driver's.
///
/// A *link* to a peer is [`SLOTS`](Self::SLOTS) connections, the link policy's slots
/// ([`lifeline_core::link`]); each slot carries one or more classes ([`slot_of`](Self::slot_of)).
/// TCP has two slots, one connection per class; QUIC has one, a connection carrying both
/// classes on two streams.
///
/// Guarantees the driver relies on: a connection handed over ([`Accepted`], a successful
/// [`dial`](Self::dial)) is authenticated as its peer; [`run`](Self::run) sends only whole,
/// header-checked frames and ends with exactly one [`FrameIn::Ended`] unless the driver is gone
/// or it was aborted; nothing a refused peer sent reaches the driver.
pub trait Connector: Send + Sync + 'static {
    /// An authenticated connection not yet running.
    type Conn: Send + 'static;

    /// Connections per link (the link policy's slots).
    const SLOTS: usize;

    /// The slot that carries `class` (below [`SLOTS`](Self::SLOTS)).
    fn slot_of(class: Class) -> usize;

    /// Connects to `peer` at `addr` for `slot`, authenticated both ways.
    fn dial(
        self: &Arc<Self>,
        peer: Rank,
        slot: usize,
        addr: SocketAddr,
    ) -> impl Future<Output = Result<Self::Conn, DialFailure>> + Send + 'static;

    /// Accepts and authenticates inbound connections forever, handing each rank connection to
    /// `inbound.accepted` and each join connection's request to `inbound.joins` (refusing and
    /// counting the rest). Runs as its own task; aborted when the driver stops.
    fn listen(
        self: &Arc<Self>,
        inbound: Inbound<Self::Conn>,
    ) -> impl Future<Output = ()> + Send + 'static;

    /// Runs an installed connection until it ends: writes the send queues of its slot's
    /// classes, delivers the frames it reads ([`LinkIo::deliver`]), then reports its end
    /// ([`LinkIo::ended`]). Aborted when the driver replaces or closes it.
    fn run(
        self: &Arc<Self>,
        conn: Self::Conn,
        io: LinkIo,
    ) -> impl Future<Output = ()> + Send + 'static;

    /// Turns down an inbound connection, telling the peer why where the protocol can.
    fn reject(
        self: &Arc<Self>,
        conn: Self::Conn,
        why: Rejection,
    ) -> impl Future<Output = ()> + Send + 'static;

    /// Adds counters only the connector keeps to a snapshot ([`Handle::stats`](crate::Handle::stats)).
    fn fill_stats(&self, stats: &mut TransportStats) {
        let _ = stats;
    }
}
