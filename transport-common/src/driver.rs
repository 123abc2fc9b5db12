//! The driver task: it owns the [`Node`] and is the only code that touches it.
//!
//! One wake handles one input (a dial result, an accepted connection, a batch of frames, an application command or
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
use std::time::Duration;

use bytes::Bytes;
use lifeline_core::link::{
    AcceptVerdict, AttemptId, DialOutcome, LinkAction, LinkConfig, LinkDownReason, LinkPolicy,
};
use lifeline_core::tree::Rank;
use lifeline_core::{Class, Event, Instant, LinkCause, Node, Transmit};
use tokio::sync::{mpsc, Notify};
use tokio::task::AbortHandle;
use tokio::time::Instant as Tick;
use tracing::Instrument;

use crate::book::AddressBook;
use crate::connector::{
    class_index as ci, Accepted, Connector, DialFailure, Ended, FrameIn, FrameTx, LinkIo,
    Rejection, MAX_BATCH,
};
use crate::handle::{Cmd, DownReason, Handle, Output, RunningNode, StatsHook, TransportError};
use crate::queue::SendQueue;
use crate::stats::Counters;

/// The driver's own settings (every adapter's config gives one).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct DriverConfig {
    /// Back-pressure threshold: while any per-peer send queue holds more bytes than this,
    /// application commands are refused with [`TransportError::Backpressure`]. 1 MiB by
    /// default: a short queue keeps a frame hot in cache between the core encoding it and the
    /// transport sending it, and bounds how long a new frame waits behind older ones (measured with `lifeline-bench --bin transport -- quic --size 65536`: 0.78-0.80 of raw
    /// quinn with 16 MiB, 0.91-0.95 with 1 MiB; TCP unchanged).
    pub queue_soft_bytes: usize,
    /// Hard bound of one per-peer send queue: a peer that lets its queue grow past it is not
    /// reading, and its link is closed and reported down ([`DownReason::Overflow`]).
    pub queue_hard_bytes: usize,
    /// Inputs handled per wake of the driver before it yields to other tasks.
    pub max_inputs_per_wake: usize,
    /// Outputs buffered for the application. While more than this wait, the driver stops
    /// reading data-class frames; past four times this, outputs are dropped and counted.
    pub output_buffer: usize,
    /// Whole frames buffered from connections to the driver, per traffic class (in batches of
    /// up to [`MAX_BATCH`]; at least one batch).
    pub frame_buffer: usize,
    /// Dial, back-off and give-up settings of the link policy.
    pub link: LinkConfig,
}

impl Default for DriverConfig {
    fn default() -> Self {
        Self {
            queue_soft_bytes: 1 << 20,
            queue_hard_bytes: 256 << 20,
            max_inputs_per_wake: 256,
            output_buffer: 4096,
            frame_buffer: 1024,
            link: LinkConfig::default(),
        }
    }
}

/// What [`spawn`] needs besides the node and the connector.
#[derive(Debug)]
pub struct Setup {
    /// Every rank's address, shared with the connector (which may check peers against it).
    pub book: Arc<RwLock<AddressBook>>,
    /// The driver's settings.
    pub cfg: DriverConfig,
    /// The counters, shared with the connector.
    pub counters: Arc<Counters>,
    /// The address the node listens on (reported by [`Handle::local_addr`]).
    pub local_addr: SocketAddr,
}

/// Starts driving `node` over `connector`. Must be called inside a tokio runtime; any flavour
/// works. The connector's [`listen`](Connector::listen) runs as its own task, in the node's
/// span, until the driver stops.
///
/// The node should have been created with `now = Instant::ZERO`: the driver's clock starts at
/// zero when this is called (an earlier `now` would hold protocol time back until reached).
///
/// # Panics
///
/// If `cfg.link` is invalid ([`LinkConfig::validate`]): adapters build it from their own
/// validated settings.
pub fn spawn<C: Connector>(node: Node, connector: Arc<C>, setup: Setup) -> RunningNode {
    let Setup {
        book,
        cfg,
        counters,
        local_addr,
    } = setup;
    let me = node.me();
    let (accepted_tx, accepted) = mpsc::channel(1024);
    let (reports_tx, reports) = mpsc::channel(1024);
    let batches = (cfg.frame_buffer / MAX_BATCH).max(1);
    let (control_tx, control_in) = mpsc::channel(batches);
    let (data_tx, data_in) = mpsc::channel(batches);
    let (cmds_tx, cmds) = mpsc::channel(256);
    let (out_tx, outputs) = mpsc::channel(cfg.output_buffer.max(1));
    // Every diagnostic of this node (the driver's and the listener's) is in this span.
    let span = tracing::info_span!("node", rank = me.0);
    let listener = tokio::spawn(connector.listen(accepted_tx).instrument(span.clone()));
    let frames_per_drain = frames_per_drain(node.config());
    // The driver's clock starts at zero now, which is also the origin of `startup_grace`.
    let links = LinkPolicy::new(me, C::SLOTS, cfg.link, Instant::ZERO)
        .expect("the adapter's link configuration is valid");
    let space = Arc::new(Notify::new());
    let hook = {
        let c = connector.clone();
        StatsHook(Arc::new(move |s| c.fill_stats(s)))
    };
    let driver = Driver {
        node,
        links,
        frames_per_drain,
        staged: Vec::new(),
        origin: Tick::now(),
        connector,
        cfg,
        book: book.clone(),
        counters: counters.clone(),
        frames: FrameTx {
            control: control_tx,
            data: data_tx,
        },
        reports: reports_tx,
        peers: BTreeMap::new(),
        space: space.clone(),
        next_conn: 0,
        pending: VecDeque::new(),
        out_closed: false,
        deferred_downs: Vec::new(),
        refused: BTreeSet::new(),
        view_changed: false,
        stopping: false,
        listener: listener.abort_handle(),
    };
    let task = tokio::spawn(
        driver
            .run(cmds, accepted, reports, control_in, data_in, out_tx)
            .instrument(span),
    );
    RunningNode {
        handle: Handle {
            cmds: cmds_tx,
            space,
            counters,
            extra: hook,
            book,
            me,
            local_addr,
        },
        outputs,
        task,
    }
}

/// A finished dial, reported back to the driver.
struct Dialed<T> {
    peer: Rank,
    slot: usize,
    attempt: AttemptId,
    result: Result<T, DialFailure>,
}

/// The classes, in slot-query order.
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

/// The I/O side of one peer: a send queue per class and a running connection per slot. (Its
/// dial state is the link policy's.)
#[derive(Debug)]
struct Peer {
    queues: [Arc<SendQueue>; 2],
    conns: Vec<Option<Conn>>,
}

impl Peer {
    fn new(slots: usize, space: &Arc<Notify>) -> Self {
        Self {
            queues: [
                Arc::new(SendQueue::with_space(space.clone())),
                Arc::new(SendQueue::with_space(space.clone())),
            ],
            conns: (0..slots).map(|_| None).collect(),
        }
    }

    fn close(&mut self) {
        for c in self.conns.iter_mut().filter_map(Option::take) {
            c.task.abort();
        }
    }
}

struct Driver<C: Connector> {
    node: Node,
    connector: Arc<C>,
    cfg: DriverConfig,
    book: Arc<RwLock<AddressBook>>,
    counters: Arc<Counters>,
    frames: FrameTx,
    reports: mpsc::Sender<Dialed<C::Conn>>,
    /// Dial, re-dial, give-up and tie-break decisions.
    links: LinkPolicy,
    /// Frames of one batch fed between two drains.
    frames_per_drain: usize,
    /// Frames of consecutive transmits to one peer and class, queued together.
    staged: Vec<Bytes>,
    origin: Tick,
    peers: BTreeMap<Rank, Peer>,
    /// Woken when a writer empties a send queue ([`Handle::writable`] waits on it).
    space: Arc<Notify>,
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

impl<C: Connector> Drop for Driver<C> {
    fn drop(&mut self) {
        self.listener.abort();
        for p in self.peers.values_mut() {
            p.close();
        }
    }
}

impl<C: Connector> Driver<C> {
    fn now(&self) -> Instant {
        Instant::from_nanos(u64::try_from(self.origin.elapsed().as_nanos()).unwrap_or(u64::MAX))
    }

    fn tick_of(&self, at: Instant) -> Tick {
        let far = Tick::now() + Duration::from_secs(86_400);
        self.origin
            .checked_add(Duration::from_nanos(at.as_nanos()))
            .map_or(far, |t| t.min(far))
    }

    fn alive(&self, r: Rank) -> bool {
        alive(&self.node)(r)
    }

    /// One rank's address.
    fn addr(&self, r: Rank) -> Option<SocketAddr> {
        self.book.read().unwrap_or_else(|e| e.into_inner()).get(r)
    }

    async fn run(
        mut self,
        mut cmds: mpsc::Receiver<Cmd>,
        mut accepted: mpsc::Receiver<Accepted<C::Conn>>,
        mut reports: mpsc::Receiver<Dialed<C::Conn>>,
        mut control_in: mpsc::Receiver<FrameIn>,
        mut data_in: mpsc::Receiver<FrameIn>,
        out: mpsc::Sender<Output>,
    ) {
        self.wire_up();
        self.drain();
        self.flush(&out);
        let sleep = tokio::time::sleep_until(Tick::now());
        tokio::pin!(sleep);
        let cap = self.cfg.max_inputs_per_wake.max(1);
        while !self.stopping {
            self.run_due_timers();
            self.flush(&out);
            sleep.as_mut().reset(self.next_deadline());
            let data_open = self.pending.len() < self.cfg.output_buffer;
            let mut used = 1;
            tokio::select! {
                biased;
                Some(r) = reports.recv() => self.on_dialed(r),
                Some(a) = accepted.recv() => self.on_accepted(a),
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
                    self.on_dialed(r);
                    1
                } else if let Ok(a) = accepted.try_recv() {
                    self.on_accepted(a);
                    1
                } else if let Ok(f) = control_in.try_recv() {
                    self.on_frame(f)
                } else if let Ok(c) = cmds.try_recv() {
                    self.on_cmd(c);
                    1
                } else if self.pending.len() < self.cfg.output_buffer {
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
            (None, None) => Tick::now() + Duration::from_secs(3600),
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
        if self.pending.len() >= self.cfg.output_buffer.saturating_mul(4).max(1) {
            Counters::add(&self.counters.outputs_dropped);
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
            let slot = C::slot_of(class);
            let open = self
                .peers
                .get(&to)
                .is_some_and(|p| p.conns.get(slot).is_some_and(Option::is_some));
            if open && self.staged.iter().all(|f| lifeline_core::wire::is_fence(f)) {
                let p = self.peers.get_mut(&to).expect("checked above");
                let n = self.staged.len();
                p.queues[i].push_many(self.staged.drain(..));
                Counters::add_n(&self.counters.frames_out, n);
            } else {
                self.staged.clear();
            }
            return;
        }
        let hard = self.cfg.queue_hard_bytes;
        let i = ci(class);
        let p = self
            .peers
            .entry(to)
            .or_insert_with(|| Peer::new(C::SLOTS, &self.space));
        let n = self.staged.len();
        let queued = p.queues[i].push_many(self.staged.drain(..));
        Counters::add_n(&self.counters.frames_out, n);
        if queued > hard {
            Counters::add(&self.counters.overflows);
            tracing::debug!(peer = to.0, ?class, queued, "send queue overflow");
            self.deferred_downs.push((to, DownReason::Overflow));
            return;
        }
        self.want(to);
    }

    /// Asks the link policy for every connection to `peer` (it dials those it should).
    fn want(&mut self, peer: Rank) {
        let now = self.now();
        for slot in 0..C::SLOTS {
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
                    Counters::add(&self.counters.link_ups);
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
        if slot >= C::SLOTS || self.stopping {
            return;
        }
        let Some(addr) = self.addr(peer) else {
            tracing::debug!(peer = peer.0, slot, "cannot dial: no address");
            if !self.deferred_downs.iter().any(|(r, _)| *r == peer) {
                self.deferred_downs.push((peer, DownReason::NoAddress));
            }
            return;
        };
        tracing::debug!(
            peer = peer.0,
            slot,
            %addr,
            attempt = attempt.as_u64(),
            failures,
            "dial"
        );
        Counters::add(&self.counters.dials);
        let dialing = self.connector.dial(peer, slot, addr);
        let reports = self.reports.clone();
        tokio::spawn(
            async move {
                let result = dialing.await;
                let _ = reports
                    .send(Dialed {
                        peer,
                        slot,
                        attempt,
                        result,
                    })
                    .await;
            }
            .in_current_span(),
        );
    }

    /// Runs `conn` as `peer`'s connection for `slot`, replacing (aborting) any earlier one.
    fn install(&mut self, peer: Rank, slot: usize, conn: C::Conn, accepted: bool) {
        self.next_conn += 1;
        let id = self.next_conn;
        let p = self
            .peers
            .entry(peer)
            .or_insert_with(|| Peer::new(C::SLOTS, &self.space));
        let Some(cell) = p.conns.get_mut(slot) else {
            return;
        };
        if let Some(old) = cell.take() {
            old.task.abort();
        }
        let io = LinkIo {
            peer,
            slot,
            id,
            accepted,
            queues: p.queues.clone(),
            frames: self.frames.clone(),
            counters: self.counters.clone(),
        };
        let task = tokio::spawn(self.connector.run(conn, io));
        *cell = Some(Conn {
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
        Counters::add(&self.counters.link_downs);
        let now = self.now();
        let cause = self.cause(peer, reason);
        self.node.handle_link_down(now, peer, cause);
        self.emit(Output::LinkDown {
            peer,
            at: now,
            reason,
        });
    }

    fn on_ended(&mut self, peer: Rank, slot: usize, id: u64, why: Ended) {
        let current = self
            .peers
            .get(&peer)
            .and_then(|p| p.conns.get(slot)?.as_ref())
            .is_some_and(|c| c.id == id);
        tracing::trace!(peer = peer.0, slot, ?why, current, "connection ended");
        if !current {
            return; // replaced or already closed by the driver
        }
        if let Some(cell) = self
            .peers
            .get_mut(&peer)
            .and_then(|p| p.conns.get_mut(slot))
        {
            *cell = None;
        }
        let reason = match why {
            Ended::Eof => DownReason::Closed,
            Ended::Io(k) => DownReason::Io(k),
            Ended::Malformed => DownReason::Malformed,
            Ended::Stopped => return,
        };
        let now = self.now();
        if self.links.handle_closed(now, peer, slot) {
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
    fn on_accepted(&mut self, a: Accepted<C::Conn>) {
        let Accepted { peer, slot, conn } = a;
        let verdict = if self.stopping {
            AcceptVerdict::Refuse
        } else {
            let now = self.now();
            self.links
                .handle_accepted(now, peer, slot, alive(&self.node))
        };
        tracing::debug!(peer = peer.0, slot, ?verdict, "inbound connection");
        match verdict {
            AcceptVerdict::Accept => {
                self.install(peer, slot, conn, true);
                self.apply_links();
            }
            AcceptVerdict::Duplicate => {
                Counters::add(&self.counters.duplicates);
                tokio::spawn(self.connector.reject(conn, Rejection::Duplicate));
            }
            AcceptVerdict::Refuse => {
                Counters::add(&self.counters.refused_dead);
                // A rank the coordinator removed is told so (that is how a paused or cut-off
                // rank learns its fate: nobody dials it). Shutting down: a plain refusal.
                let now = self.now();
                let removed = (!self.stopping)
                    .then(|| self.node.fence_verdict(now, peer))
                    .flatten();
                let why = match removed {
                    Some(epoch) => {
                        Counters::add(&self.counters.fenced);
                        tracing::debug!(peer = peer.0, epoch, "refused a removed rank: fenced");
                        Rejection::Removed { epoch }
                    }
                    None => Rejection::Refuse,
                };
                tokio::spawn(self.connector.reject(conn, why));
                self.drain();
            }
        }
    }

    /// A finished dial: the link policy says whether to run the connection, and schedules the
    /// re-dial or gives the peer up after a failure.
    fn on_dialed(&mut self, d: Dialed<C::Conn>) {
        let Dialed {
            peer,
            slot,
            attempt,
            result,
        } = d;
        let outcome = match &result {
            Ok(_) => DialOutcome::Connected,
            Err(f) if f.outcome == DialOutcome::Connected => DialOutcome::Failed,
            Err(f) => f.outcome,
        };
        if outcome == DialOutcome::Refused {
            self.refused.insert(peer);
        } else {
            self.refused.remove(&peer);
        }
        let now = self.now();
        if let Some(epoch) = result.as_ref().err().and_then(|f| f.removed) {
            tracing::info!(
                peer = peer.0,
                epoch,
                "this rank was removed from the cluster"
            );
            self.node.handle_fenced(now, peer, epoch);
            self.drain();
        }
        let run =
            self.links
                .handle_dial_result(now, peer, slot, attempt, outcome, alive(&self.node));
        Counters::set(
            &self.counters.dial_failures,
            self.links.stats().dial_failures,
        );
        match (run, result) {
            (true, Ok(conn)) => {
                tracing::debug!(
                    peer = peer.0,
                    slot,
                    attempt = attempt.as_u64(),
                    "dial connected"
                );
                self.install(peer, slot, conn, false);
            }
            (_, Ok(_)) => tracing::trace!(
                peer = peer.0,
                slot,
                attempt = attempt.as_u64(),
                "dial connected but not current: dropped"
            ),
            (_, Err(e)) => tracing::debug!(
                peer = peer.0,
                slot,
                attempt = attempt.as_u64(),
                ?outcome,
                error = %e.error,
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
                Counters::add_n(&self.counters.frames_in, n);
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
                slot,
                id,
                why,
            } => {
                self.on_ended(peer, slot, id, why);
                1
            }
        }
    }

    fn congested(&self) -> Option<(Rank, Class, usize)> {
        let soft = self.cfg.queue_soft_bytes;
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
                        Counters::add(&self.counters.backpressure);
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
            Cmd::Congested(reply) => {
                let _ = reply.send(self.congested().is_some());
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
        if !self.alive(t.to) || self.addr(t.to).is_none() {
            return Err(TransportError::Unreachable(t.to));
        }
        let i = ci(t.class);
        if let Some(p) = self.peers.get(&t.to) {
            let queued = p.queues[i].bytes();
            if queued + t.frame.len() > self.cfg.queue_hard_bytes {
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
