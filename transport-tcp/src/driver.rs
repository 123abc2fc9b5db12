//! The driver task: it owns the [`Node`] and is the only code that touches it.
//!
//! One wake handles one input (a socket report, a batch of frames, an application command or
//! a due timer), then more inputs that are already waiting, in priority order: lifecycle
//! reports, control frames, commands, data frames, until `max_inputs_per_wake` inputs (a
//! frame counts as one) were handled. After every input it drains `poll_transmit` into the
//! per-peer send queues and `poll_event` into the output buffer, and before sleeping it arms
//! one timer at the earlier of `poll_timeout` and the link policy's next re-dial.
//!
//! Whom to dial, when to re-dial or give up, and which of two simultaneous connections wins are
//! the [`LinkPolicy`]'s decisions: the driver feeds it what the sockets report and executes its
//! [`LinkAction`]s (spawn a dial, report a link up or down).
//!
//! A batch of frames (what one socket read produced) is fed with one `now`, and drained after
//! every [`Driver::frames_per_drain`] frames and at its end rather than after each frame: a
//! bound derived from the node's `max_transmits`, `max_events` and radix, so the core's
//! bounded outbox cannot fill up between two drains.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, RwLock};

use bytes::Bytes;
use lifeline_core::link::{
    AcceptVerdict, AttemptId, DialOutcome, LinkAction, LinkDownReason, LinkPolicy,
};
use lifeline_core::tree::Rank;
use lifeline_core::{Class, CommandError, Event, Instant, LinkCause, Node, Transmit};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot};
use tokio::task::{AbortHandle, JoinHandle};
use tokio::time::Instant as Tick;
use tracing::Instrument;

use crate::config::{AddressBook, ClusterKey, TcpConfig};
use crate::conn::{self, Ended, FrameIn, Report, Shared, MAX_BATCH};
use crate::handshake::{HandshakeError, Verdict};
use crate::queue::SendQueue;
use crate::stats::{Counters, TransportStats};

/// What the adapter tells the application, in order: the core's events and link changes.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Output {
    /// An event from the core.
    Event(Event),
    /// Both connections to `peer` are established and the core was told
    /// ([`Node::handle_link_up`]).
    LinkUp {
        /// The peer.
        peer: Rank,
        /// Core time of the report.
        at: Instant,
    },
    /// The link to `peer` is gone. For every reason but [`DownReason::Dead`] the core was told
    /// ([`Node::handle_link_down`]) with the evidence it is: a give-up after refused dials or
    /// a missing address is hard ([`LinkCause::Refused`]); a reset, timeout, close or overflow
    /// is not (with the core's detector off, any loss of a tree link still repairs).
    LinkDown {
        /// The peer.
        peer: Rank,
        /// Core time of the report.
        at: Instant,
        /// Why.
        reason: DownReason,
    },
}

/// Why a link went down.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum DownReason {
    /// The peer closed a connection (EOF): a process that exited or was killed.
    Closed,
    /// A socket error: a reset, or `TCP_USER_TIMEOUT` / keepalive giving up.
    Io(io::ErrorKind),
    /// The peer sent a malformed or oversized frame header; its connection was closed.
    Malformed,
    /// The link policy gave the peer up: `dial_attempts` dials in a row failed (see
    /// [`lifeline_core::link`]).
    Unreachable,
    /// The peer has no address book entry.
    NoAddress,
    /// A send queue passed `queue_hard_bytes`: the peer is not reading.
    Overflow,
    /// The core learned from others that the peer is dead; its connections were closed
    /// (the core was not told again).
    Dead,
}

impl std::fmt::Display for DownReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Closed => f.write_str("closed"),
            Self::Io(k) => write!(f, "io: {k}"),
            Self::Malformed => f.write_str("malformed"),
            Self::Unreachable => f.write_str("unreachable"),
            Self::NoAddress => f.write_str("no address"),
            Self::Overflow => f.write_str("send queue overflow"),
            Self::Dead => f.write_str("dead"),
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

type NodeFn = Box<dyn FnOnce(Result<(&mut Node, Instant), TransportError>) + Send>;

enum Cmd {
    Run { f: NodeFn, gated: bool },
    Raw(Transmit, oneshot::Sender<Result<(), TransportError>>),
    Stop,
}

/// The application's side of a running node: commands in, counters out. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Handle {
    cmds: mpsc::Sender<Cmd>,
    counters: Arc<Counters>,
    book: Arc<RwLock<AddressBook>>,
    me: Rank,
    local_addr: SocketAddr,
}

impl std::fmt::Debug for Cmd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Run { .. } => "Run",
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

    /// The address the node listens on.
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
        self.counters.snapshot()
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
    /// [`TransportError::Backpressure`] while any send queue is over `queue_soft_bytes`.
    pub async fn command<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Node, Instant) -> R + Send + 'static,
    ) -> Result<R, TransportError> {
        self.run(true, f).await
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
        let t = Transmit { to, class, frame };
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

/// A node running on TCP: the handle, the outputs to read, and the driver task.
#[derive(Debug)]
pub struct TcpNode {
    /// Commands and counters.
    pub handle: Handle,
    /// Events and link changes. Read it continuously: while more than `output_buffer` outputs
    /// wait, the node stops reading data frames.
    pub outputs: mpsc::Receiver<Output>,
    /// The driver task; it ends after [`Handle::shutdown`] or when every handle is dropped.
    pub task: JoinHandle<()>,
}

/// Starts driving `node` on `listener` (bound to this rank's address book entry). Must be called
/// inside a tokio runtime; any flavour works.
///
/// The node should have been created with `now = Instant::ZERO`: the driver's clock starts at
/// zero when this is called (an earlier `now` would hold protocol time back until reached).
pub fn spawn(
    node: Node,
    book: AddressBook,
    key: ClusterKey,
    cfg: TcpConfig,
    listener: TcpListener,
) -> TcpNode {
    let me = node.me();
    let local_addr = listener
        .local_addr()
        .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)));
    let cfg = Arc::new(cfg);
    let counters = Arc::new(Counters::default());
    let (reports_tx, reports) = mpsc::channel(1024);
    let batches = (cfg.frame_buffer / MAX_BATCH).max(1);
    let (control_tx, control_in) = mpsc::channel(batches);
    let (data_tx, data_in) = mpsc::channel(batches);
    let (cmds_tx, cmds) = mpsc::channel(256);
    let (out_tx, outputs) = mpsc::channel(cfg.output_buffer.max(1));
    let sh = Shared {
        me,
        key: Arc::new(key),
        book: Arc::new(RwLock::new(book)),
        limits: node.config().limits(),
        cfg,
        counters: counters.clone(),
        reports: reports_tx,
        control_in: control_tx,
        data_in: data_tx,
    };
    let sh_book = sh.book.clone();
    // Every diagnostic of this node (the driver's and the listener's) is in this span.
    let span = tracing::info_span!("node", rank = me.0);
    let listener =
        tokio::spawn(conn::listen(listener, sh.clone()).instrument(span.clone())).abort_handle();
    let frames_per_drain = frames_per_drain(node.config());
    // The driver's clock starts at zero now, which is also the origin of `startup_grace`.
    let links = LinkPolicy::new(me, CLASSES.len(), sh.cfg.link_config(), Instant::ZERO)
        .expect("TcpConfig::link_config is always valid");
    let driver = Driver {
        node,
        links,
        frames_per_drain,
        staged: Vec::new(),
        origin: Tick::now(),
        sh,
        peers: BTreeMap::new(),
        next_conn: 0,
        pending: VecDeque::new(),
        out_closed: false,
        deferred_downs: Vec::new(),
        refused: BTreeSet::new(),
        view_changed: false,
        stopping: false,
        listener,
    };
    let task = tokio::spawn(
        driver
            .run(cmds, reports, control_in, data_in, out_tx)
            .instrument(span),
    );
    TcpNode {
        handle: Handle {
            cmds: cmds_tx,
            counters,
            book: sh_book,
            me,
            local_addr,
        },
        outputs,
        task,
    }
}

/// The link policy's slots: one connection per traffic class, in this order.
const CLASSES: [Class; 2] = [Class::Control, Class::Data];

/// Frames fed to the core between two drains: a frame makes at most a few transmits per tree
/// neighbour (radix + 1 of them) and a few events, so a quarter of `max_transmits` over the
/// neighbours and a sixteenth of `max_events` stay far from the outbox bounds.
fn frames_per_drain(c: &lifeline_core::Config) -> usize {
    let fan = (c.radix as usize).saturating_add(1);
    (c.max_transmits / fan.saturating_mul(4))
        .min(c.max_events / 16)
        .clamp(1, MAX_BATCH)
}

fn ci(c: Class) -> usize {
    match c {
        Class::Control => 0,
        Class::Data => 1,
    }
}

/// Which ranks the link policy may link to: not this node, inside the span, not known dead.
fn alive(node: &Node) -> impl Fn(Rank) -> bool + '_ {
    let me = node.me();
    move |r| r != me && node.tree().is_alive(r)
}

#[derive(Debug)]
struct Conn {
    id: u64,
    task: AbortHandle,
}

/// The I/O side of one peer: a send queue and a running connection per class. (Its dial state
/// is the link policy's.)
#[derive(Debug)]
struct Peer {
    queues: [Arc<SendQueue>; 2],
    conns: [Option<Conn>; 2],
}

impl Peer {
    fn new() -> Self {
        Self {
            queues: Default::default(),
            conns: [None, None],
        }
    }

    fn close(&mut self) {
        for c in self.conns.iter_mut().filter_map(Option::take) {
            c.task.abort();
        }
    }
}

struct Driver {
    node: Node,
    /// Dial, re-dial, give-up and tie-break decisions.
    links: LinkPolicy,
    /// Frames of one batch fed between two drains.
    frames_per_drain: usize,
    /// Frames of consecutive transmits to one peer and class, queued together.
    staged: Vec<Bytes>,
    origin: Tick,
    sh: Shared,
    peers: BTreeMap<Rank, Peer>,
    /// The last connection id handed out (ids tell a current connection's end from a replaced
    /// one's).
    next_conn: u64,
    pending: VecDeque<Output>,
    out_closed: bool,
    deferred_downs: Vec<(Rank, DownReason)>,
    /// Peers whose last dial was refused outright (so a give-up is hard evidence).
    refused: BTreeSet<Rank>,
    view_changed: bool,
    stopping: bool,
    listener: AbortHandle,
}

impl Drop for Driver {
    fn drop(&mut self) {
        self.listener.abort();
        for p in self.peers.values_mut() {
            p.close();
        }
    }
}

impl Driver {
    fn now(&self) -> Instant {
        Instant::from_nanos(u64::try_from(self.origin.elapsed().as_nanos()).unwrap_or(u64::MAX))
    }

    fn tick_of(&self, at: Instant) -> Tick {
        let far = Tick::now() + std::time::Duration::from_secs(86_400);
        self.origin
            .checked_add(std::time::Duration::from_nanos(at.as_nanos()))
            .map_or(far, |t| t.min(far))
    }

    fn alive(&self, r: Rank) -> bool {
        alive(&self.node)(r)
    }

    async fn run(
        mut self,
        mut cmds: mpsc::Receiver<Cmd>,
        mut reports: mpsc::Receiver<Report>,
        mut control_in: mpsc::Receiver<FrameIn>,
        mut data_in: mpsc::Receiver<FrameIn>,
        out: mpsc::Sender<Output>,
    ) {
        self.wire_up();
        self.drain();
        self.flush(&out);
        let sleep = tokio::time::sleep_until(Tick::now());
        tokio::pin!(sleep);
        let cap = self.sh.cfg.max_inputs_per_wake.max(1);
        while !self.stopping {
            self.run_due_timers();
            self.flush(&out);
            sleep.as_mut().reset(self.next_deadline());
            let data_open = self.pending.len() < self.sh.cfg.output_buffer;
            let mut used = 1;
            tokio::select! {
                biased;
                Some(r) = reports.recv() => self.on_report(r),
                Some(f) = control_in.recv() => used = self.on_frame(f),
                c = cmds.recv() => match c {
                    Some(c) => self.on_cmd(c),
                    None => break,
                },
                Some(f) = data_in.recv(), if data_open => used = self.on_frame(f),
                permit = out.reserve(), if !self.pending.is_empty() && !self.out_closed => {
                    match permit {
                        Ok(p) => {
                            if let Some(o) = self.pending.pop_front() {
                                p.send(o);
                            }
                        }
                        Err(_) => self.close_outputs(),
                    }
                }
                () = &mut sleep => {}
            }
            // Work cap: more inputs that are already waiting, without sleeping in between.
            while used < cap && !self.stopping {
                used += if let Ok(r) = reports.try_recv() {
                    self.on_report(r);
                    1
                } else if let Ok(f) = control_in.try_recv() {
                    self.on_frame(f)
                } else if let Ok(c) = cmds.try_recv() {
                    self.on_cmd(c);
                    1
                } else if self.pending.len() < self.sh.cfg.output_buffer {
                    match data_in.try_recv() {
                        Ok(f) => self.on_frame(f),
                        Err(_) => break,
                    }
                } else {
                    break;
                };
            }
            self.flush(&out);
        }
        // Dropping `self` closes every connection and the listener.
    }

    /// The earlier of the core's deadline and the link policy's next re-dial.
    fn next_deadline(&self) -> Tick {
        let core = self.node.poll_timeout().map(|(at, _)| at);
        match (core, self.links.poll_timeout()) {
            (Some(a), Some(b)) => self.tick_of(a.min(b)),
            (Some(t), None) | (None, Some(t)) => self.tick_of(t),
            (None, None) => Tick::now() + std::time::Duration::from_secs(3600),
        }
    }

    fn run_due_timers(&mut self) {
        let now = self.now();
        if self.node.poll_timeout().is_some_and(|(at, _)| at <= now) {
            self.node.handle_timeout(now);
            self.drain();
        }
        if self.links.poll_timeout().is_some_and(|at| at <= now) {
            self.links.handle_timeout(now, alive(&self.node));
            self.apply_links();
            self.drain();
        }
    }

    // ---- outputs ----

    fn emit(&mut self, o: Output) {
        if self.out_closed {
            return;
        }
        if self.pending.len() >= self.sh.cfg.output_buffer.saturating_mul(4).max(1) {
            Counters::add(&self.sh.counters.outputs_dropped);
            return;
        }
        self.pending.push_back(o);
    }

    fn close_outputs(&mut self) {
        self.out_closed = true;
        self.pending.clear();
    }

    /// Moves as many pending outputs as the channel has room for, reserving that room at once.
    fn flush(&mut self, out: &mpsc::Sender<Output>) {
        if self.pending.is_empty() {
            return;
        }
        let n = self.pending.len().min(out.capacity());
        match out.try_reserve_many(n.max(1)) {
            Ok(permits) => {
                for p in permits {
                    if let Some(o) = self.pending.pop_front() {
                        p.send(o);
                    }
                }
            }
            Err(mpsc::error::TrySendError::Full(())) => {}
            Err(mpsc::error::TrySendError::Closed(())) => self.close_outputs(),
        }
    }

    /// Drains the core after an input: transmits into send queues, events into the output
    /// buffer; then the link-downs that routing decided on (each is an input, drained again),
    /// then wire-up after a view change.
    fn drain(&mut self) {
        loop {
            // Consecutive transmits to one peer and class are queued under one lock.
            let mut run: Option<(Rank, Class)> = None;
            while let Some(t) = self.node.poll_transmit() {
                if let Some((to, class)) = run.filter(|&r| r != (t.to, t.class)) {
                    self.route_staged(to, class);
                }
                run = Some((t.to, t.class));
                self.staged.push(t.frame);
            }
            if let Some((to, class)) = run {
                self.route_staged(to, class);
            }
            while let Some(e) = self.node.poll_event() {
                if let Event::ViewChanged(d) = &e {
                    tracing::debug!(
                        slot = ?d.new_slot.map(|r| r.0),
                        parent = ?d.new_parent.map(|r| r.0),
                        promoted = d.promoted,
                        "view changed"
                    );
                    self.view_changed = true;
                }
                self.emit(Output::Event(e));
            }
            if let Some((peer, why)) = self.deferred_downs.pop() {
                self.link_down(peer, why);
                continue;
            }
            if std::mem::take(&mut self.view_changed) {
                self.on_view_changed();
                continue;
            }
            break;
        }
    }

    fn route(&mut self, t: Transmit) {
        self.staged.push(t.frame);
        self.route_staged(t.to, t.class);
    }

    /// Queues the staged frames (leaving `staged` empty) to `to` on `class`.
    fn route_staged(&mut self, to: Rank, class: Class) {
        if !self.alive(to) {
            // Only a fencing notice is ever addressed to a dead rank. It goes out on a
            // connection that is still open (the removed rank's frames came in on it); a
            // removed rank is never dialled (it learns its fate when it dials: the handshake
            // answers "removed").
            let i = ci(class);
            let open = self.peers.get(&to).is_some_and(|p| p.conns[i].is_some());
            if open && self.staged.iter().all(|f| lifeline_core::wire::is_fence(f)) {
                let p = self.peers.get_mut(&to).expect("checked above");
                let n = self.staged.len();
                p.queues[i].push_many(self.staged.drain(..));
                Counters::add_n(&self.sh.counters.frames_out, n);
            } else {
                self.staged.clear();
            }
            return;
        }
        let hard = self.sh.cfg.queue_hard_bytes;
        let i = ci(class);
        let p = self.peers.entry(to).or_insert_with(Peer::new);
        let n = self.staged.len();
        let queued = p.queues[i].push_many(self.staged.drain(..));
        Counters::add_n(&self.sh.counters.frames_out, n);
        if queued > hard {
            Counters::add(&self.sh.counters.overflows);
            tracing::debug!(peer = to.0, ?class, queued, "send queue overflow");
            self.deferred_downs.push((to, DownReason::Overflow));
            return;
        }
        self.want(to);
    }

    /// Asks the link policy for every connection to `peer` (it dials those it should).
    fn want(&mut self, peer: Rank) {
        let now = self.now();
        for slot in 0..CLASSES.len() {
            self.links.want(now, peer, slot, alive(&self.node));
        }
        self.apply_links();
    }

    /// Closes links to ranks the core now knows dead, and dials the (new) parent: children dial
    /// up at wire-up and after every repair, so each tree link exists before traffic needs it
    /// and a lost one is noticed.
    fn on_view_changed(&mut self) {
        self.links.retain_alive(alive(&self.node));
        self.apply_links();
        self.wire_up();
    }

    fn wire_up(&mut self) {
        if let Some(parent) = self.node.tree().view().and_then(|v| v.parent()) {
            self.want(parent);
        }
    }

    // ---- connections ----

    /// Executes the link policy's actions, in order; every policy input is followed by a call to
    /// this. A link change is an input to the core, drained at once; a drain may route frames
    /// and so call `want`, whose own call executes the rest of the queue, still in order.
    fn apply_links(&mut self) {
        while let Some(a) = self.links.poll_action() {
            match a {
                LinkAction::Dial {
                    peer,
                    slot,
                    attempt,
                    failures,
                } => self.dial(peer, slot, attempt, failures),
                LinkAction::LinkUp { peer } => {
                    tracing::debug!(peer = peer.0, "link up");
                    Counters::add(&self.sh.counters.link_ups);
                    let now = self.now();
                    self.node.handle_link_up(now, peer);
                    self.emit(Output::LinkUp { peer, at: now });
                    self.drain();
                }
                LinkAction::LinkDown {
                    peer,
                    reason: LinkDownReason::Unreachable,
                } => {
                    self.report_down(peer, DownReason::Unreachable);
                    self.drain();
                }
                LinkAction::LinkDown {
                    peer,
                    reason: LinkDownReason::Dead,
                } => {
                    // The core knows: close, and tell only the application.
                    tracing::debug!(peer = peer.0, reason = %DownReason::Dead, "link down");
                    if let Some(mut p) = self.peers.remove(&peer) {
                        p.close();
                    }
                    let at = self.now();
                    self.emit(Output::LinkDown {
                        peer,
                        at,
                        reason: DownReason::Dead,
                    });
                }
            }
        }
    }

    /// Spawns the dial the link policy asked for. A rank without an address is reported down,
    /// deferred: this may run while the core is being drained.
    fn dial(&mut self, peer: Rank, slot: usize, attempt: AttemptId, failures: u32) {
        let Some(&class) = CLASSES.get(slot) else {
            return;
        };
        if self.stopping {
            return;
        }
        let Some(addr) = self.sh.addr(peer) else {
            tracing::debug!(peer = peer.0, ?class, "cannot dial: no address");
            if !self.deferred_downs.iter().any(|(r, _)| *r == peer) {
                self.deferred_downs.push((peer, DownReason::NoAddress));
            }
            return;
        };
        tracing::debug!(
            peer = peer.0,
            ?class,
            %addr,
            attempt = attempt.as_u64(),
            failures,
            "dial"
        );
        Counters::add(&self.sh.counters.dials);
        tokio::spawn(conn::dial(peer, addr, class, attempt, self.sh.clone()));
    }

    /// Runs `stream` as `peer`'s connection for class `i`, replacing (aborting) any earlier one.
    fn install(&mut self, peer: Rank, i: usize, stream: TcpStream, verdict: Option<Verdict>) {
        self.next_conn += 1;
        let id = self.next_conn;
        let sh = self.sh.clone();
        let p = self.peers.entry(peer).or_insert_with(Peer::new);
        if let Some(old) = p.conns[i].take() {
            old.task.abort();
        }
        let queue = p.queues[i].clone();
        let task = tokio::spawn(conn::run(stream, peer, CLASSES[i], id, verdict, queue, sh));
        p.conns[i] = Some(Conn {
            id,
            task: task.abort_handle(),
        });
    }

    /// Drops a link for a reason of the adapter's own (a send queue overflow, no address): the
    /// link policy forgets the peer and the loss is reported.
    fn link_down(&mut self, peer: Rank, reason: DownReason) {
        let known = self.links.forget(peer);
        if known || self.peers.contains_key(&peer) {
            self.report_down(peer, reason);
        }
    }

    /// The evidence a lost link is (see [`LinkCause`]): a give-up after refused dials and a
    /// missing address are hard; resets, timeouts, closes and overflows are not.
    fn cause(&mut self, peer: Rank, reason: DownReason) -> LinkCause {
        let refused = self.refused.remove(&peer);
        match reason {
            DownReason::Unreachable if refused => LinkCause::Refused,
            DownReason::NoAddress | DownReason::Dead => LinkCause::Refused,
            DownReason::Unreachable | DownReason::Overflow => LinkCause::TimedOut,
            DownReason::Io(io::ErrorKind::TimedOut) => LinkCause::TimedOut,
            DownReason::Io(_) => LinkCause::Reset,
            DownReason::Closed | DownReason::Malformed => LinkCause::Closed,
        }
    }

    /// Reports a lost link to the core (an input) and forgets the peer's connections and
    /// queues. The caller drains (directly or through `drain`'s loop).
    fn report_down(&mut self, peer: Rank, reason: DownReason) {
        tracing::debug!(peer = peer.0, %reason, "link down");
        if let Some(mut p) = self.peers.remove(&peer) {
            p.close();
        }
        Counters::add(&self.sh.counters.link_downs);
        let now = self.now();
        let cause = self.cause(peer, reason);
        self.node.handle_link_down(now, peer, cause);
        self.emit(Output::LinkDown {
            peer,
            at: now,
            reason,
        });
    }

    fn on_report(&mut self, r: Report) {
        match r {
            Report::Accepted {
                peer,
                class,
                stream,
            } => self.on_accepted(peer, ci(class), stream),
            Report::Dialed {
                peer,
                class,
                attempt,
                result,
            } => self.on_dialed(peer, ci(class), attempt, result),
        }
    }

    fn on_ended(&mut self, peer: Rank, class: Class, id: u64, why: Ended) {
        let i = ci(class);
        let current = self
            .peers
            .get(&peer)
            .and_then(|p| p.conns[i].as_ref())
            .is_some_and(|c| c.id == id);
        tracing::trace!(peer = peer.0, ?class, ?why, current, "connection ended");
        if !current {
            return; // replaced or already closed by the driver
        }
        if let Some(p) = self.peers.get_mut(&peer) {
            p.conns[i] = None;
        }
        let reason = match why {
            Ended::Eof => DownReason::Closed,
            Ended::Io(k) => DownReason::Io(k),
            Ended::Malformed => DownReason::Malformed,
            Ended::Stopped => return,
        };
        let now = self.now();
        if self.links.handle_closed(now, peer, i) {
            self.report_down(peer, reason);
            // With the core's detector on, a close or reset is not evidence by itself: one
            // re-dial settles it (refused: hard evidence, reported as such; connected: nothing).
            let settle = !matches!(reason, DownReason::Io(io::ErrorKind::TimedOut));
            if settle && self.node.config().detect.enabled && alive(&self.node)(peer) {
                self.want(peer);
            }
        }
        self.apply_links();
        self.drain();
    }

    /// An authenticated inbound connection: the link policy's tie-break decides.
    fn on_accepted(&mut self, peer: Rank, i: usize, stream: TcpStream) {
        let verdict = if self.stopping {
            AcceptVerdict::Refuse
        } else {
            let now = self.now();
            self.links.handle_accepted(now, peer, i, alive(&self.node))
        };
        tracing::debug!(peer = peer.0, class = ?CLASSES[i], ?verdict, "inbound connection");
        match verdict {
            AcceptVerdict::Accept => {
                self.install(peer, i, stream, Some(Verdict::Accept));
                self.apply_links();
            }
            AcceptVerdict::Duplicate => {
                Counters::add(&self.sh.counters.duplicates);
                tokio::spawn(conn::reject(stream, Verdict::Duplicate));
            }
            AcceptVerdict::Refuse => {
                Counters::add(&self.sh.counters.refused_dead);
                // A rank the coordinator removed is told so (that is how a paused or cut-off
                // rank learns its fate: nobody dials it). Shutting down: a plain refusal.
                let now = self.now();
                let removed = (!self.stopping)
                    .then(|| self.node.fence_verdict(now, peer))
                    .flatten();
                let verdict = match removed {
                    Some(epoch) => {
                        Counters::add(&self.sh.counters.fenced);
                        tracing::debug!(peer = peer.0, epoch, "refused a removed rank: fenced");
                        Verdict::Removed { epoch }
                    }
                    None => Verdict::Refuse,
                };
                tokio::spawn(conn::reject(stream, verdict));
                self.drain();
            }
        }
    }

    /// A finished dial: the link policy says whether to run the connection, and schedules the
    /// re-dial or gives the peer up after a failure.
    fn on_dialed(
        &mut self,
        peer: Rank,
        i: usize,
        attempt: AttemptId,
        result: Result<TcpStream, HandshakeError>,
    ) {
        let outcome = match &result {
            Ok(_) => DialOutcome::Connected,
            Err(HandshakeError::Io(e)) if e.kind() == io::ErrorKind::ConnectionRefused => {
                DialOutcome::Refused
            }
            Err(HandshakeError::Duplicate) => DialOutcome::Duplicate,
            Err(_) => DialOutcome::Failed,
        };
        if outcome == DialOutcome::Refused {
            self.refused.insert(peer);
        } else {
            self.refused.remove(&peer);
        }
        let now = self.now();
        if let Err(HandshakeError::Removed { epoch }) = &result {
            tracing::info!(
                peer = peer.0,
                epoch,
                "this rank was removed from the cluster"
            );
            self.node.handle_fenced(now, peer, *epoch);
            self.drain();
        }
        let run = self
            .links
            .handle_dial_result(now, peer, i, attempt, outcome, alive(&self.node));
        Counters::set(
            &self.sh.counters.dial_failures,
            self.links.stats().dial_failures,
        );
        match (run, result) {
            (true, Ok(stream)) => {
                tracing::debug!(peer = peer.0, class = ?CLASSES[i], attempt = attempt.as_u64(), "dial connected");
                self.install(peer, i, stream, None);
            }
            (_, Ok(_)) => tracing::trace!(
                peer = peer.0,
                class = ?CLASSES[i],
                attempt = attempt.as_u64(),
                "dial connected but not current: dropped"
            ),
            (_, Err(e)) => tracing::debug!(
                peer = peer.0,
                class = ?CLASSES[i],
                attempt = attempt.as_u64(),
                ?outcome,
                error = %e,
                "dial failed"
            ),
        }
        self.apply_links();
    }

    /// Feeds a batch of frames (one `now`: they arrived in one read) or a connection's end;
    /// returns the inputs it counts as (its frames).
    fn on_frame(&mut self, f: FrameIn) -> usize {
        match f {
            FrameIn::Frames { from, frames } => {
                let n = frames.len();
                Counters::add_n(&self.sh.counters.frames_in, n);
                let now = self.now();
                let mut fed = 0;
                for frame in frames {
                    self.node.handle_frame(now, from, frame);
                    fed += 1;
                    if fed == self.frames_per_drain {
                        self.drain();
                        fed = 0;
                    }
                }
                if fed > 0 {
                    self.drain();
                }
                n.max(1)
            }
            FrameIn::Ended {
                peer,
                class,
                id,
                why,
            } => {
                self.on_ended(peer, class, id, why);
                1
            }
        }
    }

    fn congested(&self) -> Option<(Rank, Class, usize)> {
        let soft = self.sh.cfg.queue_soft_bytes;
        self.peers.iter().find_map(|(r, p)| {
            (0..2).find_map(|i| {
                let b = p.queues[i].bytes();
                (b > soft).then_some((*r, CLASSES[i], b))
            })
        })
    }

    fn on_cmd(&mut self, c: Cmd) {
        match c {
            Cmd::Run { f, gated } => {
                if gated {
                    if let Some((peer, class, queued)) = self.congested() {
                        Counters::add(&self.sh.counters.backpressure);
                        f(Err(TransportError::Backpressure {
                            peer,
                            class,
                            queued,
                        }));
                        return;
                    }
                }
                let now = self.now();
                f(Ok((&mut self.node, now)));
                self.drain();
            }
            Cmd::Raw(t, reply) => {
                let r = self.raw(t);
                self.drain();
                let _ = reply.send(r);
            }
            Cmd::Stop => {
                tracing::debug!("stopping");
                self.stopping = true;
            }
        }
    }

    fn raw(&mut self, t: Transmit) -> Result<(), TransportError> {
        if !self.alive(t.to) || self.sh.addr(t.to).is_none() {
            return Err(TransportError::Unreachable(t.to));
        }
        let i = ci(t.class);
        if let Some(p) = self.peers.get(&t.to) {
            let queued = p.queues[i].bytes();
            if queued + t.frame.len() > self.sh.cfg.queue_hard_bytes {
                return Err(TransportError::Backpressure {
                    peer: t.to,
                    class: t.class,
                    queued,
                });
            }
        }
        self.route(t);
        Ok(())
    }
}
