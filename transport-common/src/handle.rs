//! What the application sees of a running node: [`Handle`] (commands in, counters out),
//! [`Output`] (events and link changes), [`DownReason`] and [`TransportError`].

use std::net::SocketAddr;
use std::sync::{Arc, RwLock};

use bytes::Bytes;
pub use lifeline_core::link::DownReason;
use lifeline_core::tree::Rank;
use lifeline_core::{Class, CommandError, Event, Instant, Node, Transmit};
use tokio::sync::{mpsc, oneshot, Notify};
use tokio::task::JoinHandle;

use crate::book::AddressBook;
use crate::stats::{Counters, TransportStats};

/// What the adapter tells the application, in order: the core's events and link changes, each
/// with the core time of the input that caused it (a frame, a timer, a command, a link change).
///
/// None is ever dropped: while the application leaves `output_buffer` outputs unread beyond
/// the channel, the driver stops reading data-class frames and refuses commands instead (see
/// the crate docs, "Back-pressure").
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Output {
    /// An event from the core.
    Event {
        /// Core time of the input that caused it (a frame's arrival, a timer, a command, a
        /// link change).
        at: Instant,
        /// The event.
        event: Event,
    },
    /// Every connection of the link to `peer` is established and the core was told
    /// ([`Node::handle_link_up`]).
    LinkUp {
        /// The peer.
        peer: Rank,
        /// Core time of the report.
        at: Instant,
    },
    /// The link to `peer` is gone. For every reason but [`DownReason::Dead`] the core was told
    /// ([`Node::handle_link_down`]) with the evidence it is ([`DownReason::cause`]): a give-up
    /// after a refused dial or a missing address is hard
    /// ([`LinkCause::Refused`](lifeline_core::LinkCause::Refused)); a reset, timeout, close or
    /// overflow is not (with the core's detector off, any loss of a tree link still repairs).
    LinkDown {
        /// The peer.
        peer: Rank,
        /// Core time of the report.
        at: Instant,
        /// Why.
        reason: DownReason,
    },
}

impl Output {
    /// Core time of the input that caused this output.
    pub fn at(&self) -> Instant {
        match self {
            Self::Event { at, .. } | Self::LinkUp { at, .. } | Self::LinkDown { at, .. } => *at,
        }
    }

    /// The core event, if this is one.
    pub fn event(&self) -> Option<&Event> {
        match self {
            Self::Event { event, .. } => Some(event),
            _ => None,
        }
    }
}

/// Why an application request was refused. A refused request changed nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TransportError {
    /// A send queue holds more than `queue_soft_bytes`: wait for it to drain and retry.
    #[error("back-pressure: {queued} bytes queued to rank {peer} ({class:?})")]
    Backpressure {
        /// The most loaded peer found.
        peer: Rank,
        /// Its traffic class.
        class: Class,
        /// Bytes queued to it.
        queued: usize,
    },
    /// The core refused the command.
    #[error(transparent)]
    Command(#[from] CommandError),
    /// The application leaves outputs unread: `waiting` of them (at least `output_buffer`)
    /// wait beyond the output channel, and the driver reads no data-class frames meanwhile.
    /// Read [`RunningNode::outputs`], then retry.
    #[error("outputs unread: {waiting} wait beyond the output channel")]
    OutputsFull {
        /// Outputs waiting beyond the channel.
        waiting: usize,
    },
    /// The rank is this node, known dead, or outside the address book.
    #[error("rank {0} cannot be sent to")]
    Unreachable(Rank),
    /// An address book entry would change: a rank's address is fixed once given (the
    /// handshake checks peers against it).
    #[error("rank {rank} is already at {known}, not {given}")]
    AddressConflict {
        /// The rank.
        rank: Rank,
        /// Its address in the book.
        known: SocketAddr,
        /// The address offered.
        given: SocketAddr,
    },
    /// The driver has stopped.
    #[error("the transport has stopped")]
    Stopped,
}

pub(crate) type NodeFn = Box<dyn FnOnce(Result<(&mut Node, Instant), TransportError>) + Send>;

pub(crate) enum Cmd {
    Run {
        f: NodeFn,
        gated: bool,
    },
    /// Whether a send queue is over `queue_soft_bytes` (what refuses gated commands).
    Congested(oneshot::Sender<bool>),
    Raw(Transmit, oneshot::Sender<Result<(), TransportError>>),
    Stop,
}

/// The application's side of a running node: commands in, counters out. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Handle {
    pub(crate) cmds: mpsc::Sender<Cmd>,
    /// Woken when a writer empties a send queue.
    pub(crate) space: Arc<Notify>,
    pub(crate) counters: Arc<Counters>,
    pub(crate) extra: StatsHook,
    pub(crate) book: Arc<RwLock<AddressBook>>,
    pub(crate) me: Rank,
    pub(crate) local_addr: SocketAddr,
}

/// The connector's own counters, added to every snapshot.
#[derive(Clone)]
pub(crate) struct StatsHook(pub(crate) Arc<dyn Fn(&mut TransportStats) + Send + Sync>);

impl std::fmt::Debug for StatsHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StatsHook")
    }
}

impl std::fmt::Debug for Cmd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Run { .. } => "Run",
            Self::Congested(..) => "Congested",
            Self::Raw(..) => "Raw",
            Self::Stop => "Stop",
        })
    }
}

impl Handle {
    /// This node's rank.
    pub fn rank(&self) -> Rank {
        self.me
    }

    /// The address the node listens on (TCP listener, QUIC endpoint).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Adds ranks to the address book of the running node (ranks that joined, before the
    /// node dials them or accepts their connections). All or nothing: an entry that would
    /// change a known rank's address refuses the whole call.
    pub fn add_peers(&self, peers: &AddressBook) -> Result<(), TransportError> {
        let mut book = self.book.write().unwrap_or_else(|e| e.into_inner());
        for (rank, given) in peers.iter() {
            match book.get(rank) {
                Some(known) if known != given => {
                    return Err(TransportError::AddressConflict { rank, known, given })
                }
                _ => {}
            }
        }
        for (rank, addr) in peers.iter() {
            book.insert(rank, addr);
        }
        Ok(())
    }

    /// A grow: adds the new ranks' addresses, then grows the node's span to `new_span`
    /// ([`Node::grow`]), so the tree links it then wants can be dialled.
    pub async fn grow(&self, new_span: u32, peers: &AddressBook) -> Result<(), TransportError> {
        self.add_peers(peers)?;
        Ok(self.command(move |n, now| n.grow(now, new_span)).await??)
    }

    /// The adapter's counters.
    pub fn stats(&self) -> TransportStats {
        let mut s = self.counters.snapshot();
        (self.extra.0)(&mut s);
        s
    }

    async fn run<R: Send + 'static>(
        &self,
        gated: bool,
        f: impl FnOnce(&mut Node, Instant) -> R + Send + 'static,
    ) -> Result<R, TransportError> {
        let (tx, rx) = oneshot::channel();
        let f: NodeFn = Box::new(move |n| {
            let _ = tx.send(n.map(|(node, now)| f(node, now)));
        });
        self.cmds
            .send(Cmd::Run { f, gated })
            .await
            .map_err(|_| TransportError::Stopped)?;
        rx.await.map_err(|_| TransportError::Stopped)?
    }

    /// Runs an application command (`xcast`, `flood`, `handle_dead`, ...) on the node with
    /// the driver's `now`, then drains its outputs. Refused with
    /// [`TransportError::Backpressure`] while any send queue is over `queue_soft_bytes`, and
    /// with [`TransportError::OutputsFull`] while the application leaves its outputs unread.
    pub async fn command<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Node, Instant) -> R + Send + 'static,
    ) -> Result<R, TransportError> {
        self.run(true, f).await
    }

    /// Waits until no send queue is over `queue_soft_bytes`, so a command would not be refused
    /// for back-pressure (another task may fill a queue again before it runs: a command can
    /// still be refused, and the caller waits again). Returns at once when nothing is
    /// congested; otherwise wakes each time a connection's writer takes its queued frames, and
    /// re-checks at least every 5 ms. [`TransportError::Stopped`] once the node is gone. It does
    /// not wait for the application's own outputs: a command refused with
    /// [`TransportError::OutputsFull`] waits for the application to read them.
    pub async fn writable(&self) -> Result<(), TransportError> {
        loop {
            let space = self.space.notified();
            tokio::pin!(space);
            // Registered before the check, so a take between the check and the wait is seen.
            space.as_mut().enable();
            let (tx, rx) = oneshot::channel();
            self.cmds
                .send(Cmd::Congested(tx))
                .await
                .map_err(|_| TransportError::Stopped)?;
            if !rx.await.map_err(|_| TransportError::Stopped)? {
                return Ok(());
            }
            let _ = tokio::time::timeout(std::time::Duration::from_millis(5), space).await;
        }
    }

    /// Reads the node (stats, tree, watermarks); never refused for back-pressure.
    pub async fn inspect<R: Send + 'static>(
        &self,
        f: impl FnOnce(&Node) -> R + Send + 'static,
    ) -> Result<R, TransportError> {
        self.run(false, move |n, _| f(n)).await
    }

    /// Reliable broadcast of `payload` under `tag` (see [`Node::xcast`]).
    pub async fn xcast(&self, tag: u16, payload: Bytes) -> Result<u64, TransportError> {
        Ok(self
            .command(move |n, now| n.xcast(now, tag, payload))
            .await??)
    }

    /// Queues a frame to `to` on `class` as if the core had produced it (for conformance tests
    /// and tools). Refused if the rank cannot be sent to or its queue would pass
    /// `queue_hard_bytes`.
    pub async fn send_raw(
        &self,
        to: Rank,
        class: Class,
        frame: Bytes,
    ) -> Result<(), TransportError> {
        let (tx, rx) = oneshot::channel();
        let t = Transmit::new(to, class, frame);
        self.cmds
            .send(Cmd::Raw(t, tx))
            .await
            .map_err(|_| TransportError::Stopped)?;
        rx.await.map_err(|_| TransportError::Stopped)?
    }

    /// Stops the driver: every connection is closed (peers see their links go down).
    pub async fn shutdown(&self) {
        let _ = self.cmds.send(Cmd::Stop).await;
    }
}

/// A running node: the handle, the outputs to read, and the driver task.
#[derive(Debug)]
pub struct RunningNode {
    /// Commands and counters.
    pub handle: Handle,
    /// Events and link changes. Read it continuously: while `output_buffer` outputs wait beyond
    /// the channel, the node stops reading data frames and refuses commands (nothing is
    /// dropped).
    pub outputs: mpsc::Receiver<Output>,
    /// The driver task; it ends after [`Handle::shutdown`] or when every handle is dropped.
    pub task: JoinHandle<()>,
}
