//! The driver task: it owns the [`Node`] and is the only code that touches it.
//!
//! The loop has the shape of quinn's `ConnectionDriver::poll`: take one input, run the work it
//! left to its end, then take the next. [`Inputs::next`] is the one place that says which input
//! comes first (lifecycle reports, control frames, commands, data frames, room in the output
//! channel, a due timer); the driver waits on it for the first input of a wake, then takes
//! the inputs that are already waiting, in the same order, until `max_inputs_per_wake` were
//! handled (a frame counts as one), and before sleeping arms one timer at the earlier of
//! `poll_timeout` and the link policy's next re-dial.
//!
//! After every input, [`Driver::settle`] runs one work loop: drain the core (`poll_transmit`
//! into the per-peer send queues, `poll_event` into the outputs), then execute one queued link
//! action ([`LinkAction`](lifeline_core::link::LinkAction): a dial, a link up or down, each possibly a core input) or one link
//! down the driver decided itself (a send-queue overflow, a rank without an address), and
//! drain again, until the core, the link policy and the driver's own queue are all empty.
//! Nothing re-enters: routing a frame only asks the link policy for the peer (a policy input
//! that queues actions), and a view change only tells the policy.
//!
//! Whom to dial, when to re-dial or give up (and whether the give-up followed a refused dial),
//! and which of two simultaneous connections wins are the [`LinkPolicy`]'s decisions; what a
//! lost link is worth as evidence is [`DownReason::cause`]. The driver feeds the policy what the
//! sockets report and executes its actions.
//!
//! A batch of frames (what one socket read produced) is fed with one `now`, and drained after
//! every [`Driver::frames_per_drain`] frames and at its end rather than after each frame: a
//! bound derived from the node's `max_transmits`, `max_events` and radix, so the core's
//! bounded outbox cannot fill up between two drains.
//!
//! Every output carries the core time of the input that caused it (the `at` of
//! [`Output::Event`], [`Output::LinkUp`] and [`Output::LinkDown`]).
//!
//! Join connections (a process asking to join through this member, [`crate::join`]) are the
//! business of [`joins`]: their requests are core inputs, their answers leave at the end of
//! every drain, and an admission's joiners enter the address book during the drain that
//! reports it, before any link action for them runs.

mod early;
mod joins;
mod links;
mod outputs;
mod peers;

use std::collections::VecDeque;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, RwLock};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use bytes::Bytes;
use lifeline_core::link::{AttemptId, DownReason, LinkConfig, LinkPolicy};
use lifeline_core::tree::Rank;
use lifeline_core::{Class, Event, Instant, MembershipEvent, Node, Transmit};
use tokio::sync::{mpsc, Notify};
use tokio::task::AbortHandle;
use tokio::time::{Instant as Tick, Sleep};
use tracing::Instrument;

use self::joins::JoinConns;
use self::outputs::Outputs;
use self::peers::{Peers, Routed};
use crate::book::AddressBook;
use crate::connector::{Accepted, Connector, DialFailure, FrameIn, FrameTx, Inbound, MAX_BATCH};
use crate::grid::WallGrid;
use crate::handle::{Cmd, Handle, Output, RunningNode, StatsHook, TransportError};
use crate::join::{JoinIn, JoinTx};
use crate::stats::Counters;

/// The driver's own settings (every adapter's config gives one).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct DriverConfig {
    /// Back-pressure threshold: while any per-peer send queue holds more bytes than this,
    /// application commands are refused with [`TransportError::Backpressure`]. 1 MiB by
    /// default: a short queue keeps a frame hot in cache between the core encoding it and the
    /// transport sending it, and bounds how long a new frame waits behind older ones (the
    /// measurement is in `bench/src/bin/transport.rs`).
    pub queue_soft_bytes: usize,
    /// Hard bound of one per-peer send queue: a peer that lets its queue grow past it is not
    /// reading, and its link is closed and reported down ([`DownReason::Overflow`]).
    pub queue_hard_bytes: usize,
    /// Inputs handled per wake of the driver before it yields to other tasks.
    pub max_inputs_per_wake: usize,
    /// Outputs buffered for the application: the channel's capacity, and the count of further
    /// outputs the driver holds before it stops reading data-class frames and refuses commands
    /// ([`TransportError::OutputsFull`]) until the application reads. Outputs are never dropped.
    pub output_buffer: usize,
    /// Whole frames buffered from connections to the driver, per traffic class (in batches of
    /// up to [`MAX_BATCH`]; at least one batch).
    pub frame_buffer: usize,
    /// Dial, back-off and give-up settings of the link policy.
    pub link: LinkConfig,
    /// Join connections (processes asking to join through this member) open at once, each
    /// waiting for its answer (up to the core's `join.timeout`); past it the connector refuses
    /// them (counted in `joins_refused`) and the joiner asks another contact.
    pub max_join_conns: usize,
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
            max_join_conns: 256,
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
    let (control_tx, control) = mpsc::channel(batches);
    let (data_tx, data) = mpsc::channel(batches);
    let (cmds_tx, cmds) = mpsc::channel(256);
    let (out_tx, outputs) = mpsc::channel(cfg.output_buffer.max(1));
    // Two messages at most per open join connection (its request, its early end).
    let max_joins = cfg.max_join_conns.max(1);
    let (joins_tx, joins) = mpsc::channel(2 * max_joins);
    let inbound = Inbound {
        accepted: accepted_tx,
        joins: JoinTx::new(joins_tx, max_joins, counters.clone()),
    };
    // Every diagnostic of this node (the driver's and the listener's) is in this span.
    let span = tracing::info_span!("node", rank = me.0);
    let listener = tokio::spawn(connector.listen(inbound).instrument(span.clone()));
    let frames_per_drain = frames_per_drain(node.config());
    // The driver's clock starts at zero now, which is also the origin of `startup_grace`.
    let links = LinkPolicy::new(me, C::SLOTS, cfg.link, Instant::ZERO)
        .expect("the adapter's link configuration is valid");
    let space = Arc::new(Notify::new());
    let hook = {
        let c = connector.clone();
        StatsHook(Arc::new(move |s| c.fill_stats(s)))
    };
    let origin = clock_origin(node.config(), me);
    let driver = Driver {
        node,
        links,
        frames_per_drain,
        origin,
        at: Instant::ZERO,
        connector,
        peers: Peers::new(
            C::SLOTS,
            space.clone(),
            cfg.queue_hard_bytes,
            counters.clone(),
        ),
        outputs: Outputs::new(cfg.output_buffer, counters.clone()),
        joins: JoinConns::default(),
        cfg,
        book: book.clone(),
        counters: counters.clone(),
        frames: FrameTx {
            control: control_tx,
            data: data_tx,
        },
        reports: reports_tx,
        next_conn: 0,
        downs: VecDeque::new(),
        early: early::Early::default(),
        stopping: false,
        listener: listener.abort_handle(),
    };
    let inputs = Inputs {
        reports,
        accepted,
        joins,
        control,
        cmds,
        data,
    };
    let task = tokio::spawn(driver.run(inputs, out_tx).instrument(span));
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

/// Frames fed to the core between two drains: a frame makes at most a few transmits per tree
/// neighbour (radix + 1 of them) and a few events, so a quarter of `max_transmits` over the
/// neighbours and a sixteenth of `max_events` stay far from the outbox bounds.
fn frames_per_drain(c: &lifeline_core::Config) -> usize {
    let fan = (c.radix as usize).saturating_add(1);
    (c.max_transmits / fan.saturating_mul(4))
        .min(c.max_events / 16)
        .clamp(1, MAX_BATCH)
}

/// The driver's clock origin (the core's `Instant::ZERO`): now, or, with the detector's
/// `beat_grid`, the last instant before now at which the wall clock was a multiple of the
/// heartbeat period, shifted by this rank's phase ([`WallGrid::for_rank`]). The core's grid points then fall on the same wall-clock
/// instants in every process of a host (of a cluster, with synchronised clocks), so an
/// observer's subjects heartbeat together and it reads them in one wake-up. The core clock
/// then starts at less than one period instead of zero, which only moves time forward.
fn clock_origin(cfg: &lifeline_core::Config, me: Rank) -> Tick {
    if cfg.detect.enabled && cfg.detect.beat_grid {
        WallGrid::for_rank(cfg.detect.period.into(), me.0).origin()
    } else {
        Tick::now()
    }
}

/// Which ranks the link policy may link to: not this node, inside the span, not known dead.
fn alive(node: &Node) -> impl Fn(Rank) -> bool + '_ {
    let me = node.me();
    move |r| r != me && node.tree().is_alive(r)
}

/// Polls `f` once: its output if it is ready now, `None` if it would wait. (What it registered
/// to be woken is replaced by the next real wait, which polls every source again.)
fn ready_now<F: Future>(f: F) -> Option<F::Output> {
    let mut f = std::pin::pin!(f);
    match f.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(v) => Some(v),
        Poll::Pending => None,
    }
}

/// The driver's input channels.
struct Inputs<C: Connector> {
    reports: mpsc::Receiver<Dialed<C::Conn>>,
    accepted: mpsc::Receiver<Accepted<C::Conn>>,
    joins: mpsc::Receiver<JoinIn>,
    control: mpsc::Receiver<FrameIn>,
    cmds: mpsc::Receiver<Cmd>,
    data: mpsc::Receiver<FrameIn>,
}

/// One input of the driver.
enum Input<'o, C: Connector> {
    Dialed(Dialed<C::Conn>),
    Accepted(Accepted<C::Conn>),
    Join(JoinIn),
    Frames(FrameIn),
    Cmd(Cmd),
    /// Every handle is gone.
    CmdsClosed,
    /// Room for one output in the application's channel (or its receiver is gone).
    Room(Result<mpsc::Permit<'o, Output>, mpsc::error::SendError<()>>),
    /// The armed deadline passed.
    Timer,
}

impl<C: Connector> Inputs<C> {
    /// The next input, in priority order (the only place the order is written): a finished
    /// dial, an accepted connection, a join connection's request or end, control frames, a
    /// command, data frames (only while the
    /// application's outputs are not `full`), room in the output channel (only while outputs
    /// are `waiting`), the timer.
    async fn next<'o>(
        &mut self,
        out: &'o mpsc::Sender<Output>,
        timer: Pin<&mut Sleep>,
        full: bool,
        waiting: bool,
    ) -> Input<'o, C> {
        tokio::select! {
            biased;
            Some(r) = self.reports.recv() => Input::Dialed(r),
            Some(a) = self.accepted.recv() => Input::Accepted(a),
            Some(j) = self.joins.recv() => Input::Join(j),
            Some(f) = self.control.recv() => Input::Frames(f),
            c = self.cmds.recv() => c.map_or(Input::CmdsClosed, Input::Cmd),
            Some(f) = self.data.recv(), if !full => Input::Frames(f),
            p = out.reserve(), if waiting => Input::Room(p),
            () = timer => Input::Timer,
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
    origin: Tick,
    /// The core time of the last input fed to the core: the time of every output its drain
    /// yields.
    at: Instant,
    peers: Peers,
    outputs: Outputs,
    /// Join connections waiting for their answer.
    joins: JoinConns,
    /// Links to drop for a reason of the driver's own, once the core is drained.
    downs: VecDeque<(Rank, DownReason)>,
    /// Frames from ranks past the span that the core dropped, fed again once it covers them.
    early: early::Early,
    /// The last connection id handed out (ids tell a current connection's end from a replaced
    /// one's).
    next_conn: u64,
    stopping: bool,
    listener: AbortHandle,
}

impl<C: Connector> Drop for Driver<C> {
    fn drop(&mut self) {
        self.listener.abort();
        self.peers.close_all();
    }
}

impl<C: Connector> Driver<C> {
    fn now(&self) -> Instant {
        Instant::from_nanos(u64::try_from(self.origin.elapsed().as_nanos()).unwrap_or(u64::MAX))
    }

    /// `now`, as the time of a core input (and so of the outputs its drain yields).
    fn input_now(&mut self) -> Instant {
        self.at = self.now();
        self.at
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

    async fn run(mut self, mut inputs: Inputs<C>, out: mpsc::Sender<Output>) {
        self.wire_up();
        self.settle();
        self.outputs.flush(&out);
        let timer = tokio::time::sleep_until(Tick::now());
        tokio::pin!(timer);
        let cap = self.cfg.max_inputs_per_wake.max(1);
        while !self.stopping {
            self.run_due_timers();
            self.outputs.flush(&out);
            timer.as_mut().reset(self.next_deadline());
            let (full, waiting) = (self.outputs.full(), self.outputs.waiting());
            let first = inputs.next(&out, timer.as_mut(), full, waiting).await;
            let mut used = self.handle(first);
            // Work cap: more inputs that are already waiting, without sleeping in between.
            while used < cap && !self.stopping {
                let (full, waiting) = (self.outputs.full(), self.outputs.waiting());
                match ready_now(inputs.next(&out, timer.as_mut(), full, waiting)) {
                    // A due timer ends the wake: the loop's head runs it.
                    None | Some(Input::Timer) => break,
                    Some(i) => used += self.handle(i),
                }
            }
            self.outputs.flush(&out);
        }
        // Dropping `self` closes every connection and the listener.
    }

    /// Handles one input and the work it left; returns the inputs it counts as (a batch of
    /// frames: its frames).
    fn handle(&mut self, input: Input<'_, C>) -> usize {
        let used = match input {
            Input::Dialed(d) => {
                self.on_dialed(d);
                1
            }
            Input::Accepted(a) => {
                self.on_accepted(a);
                1
            }
            Input::Join(j) => {
                self.on_join(j);
                1
            }
            Input::Frames(f) => self.on_frame(f),
            Input::Cmd(c) => {
                self.on_cmd(c);
                1
            }
            Input::CmdsClosed => {
                self.stopping = true;
                1
            }
            Input::Room(p) => {
                self.outputs.send_one(p);
                1
            }
            Input::Timer => {
                self.run_due_timers();
                1
            }
        };
        self.settle();
        used
    }

    /// The work loop after an input: drains the core, then executes one link action or one
    /// queued link down (either may be a core input), and again, until the core, the link
    /// policy and the down queue are all empty. Each step is an input to one machine followed
    /// by a drain; nothing recurses.
    fn settle(&mut self) {
        loop {
            self.drain_core();
            if let Some(a) = self.links.poll_action() {
                self.execute(a);
            } else if let Some((peer, why)) = self.downs.pop_front() {
                self.link_down(peer, why);
            } else if !self.replay_early(None) {
                return;
            }
        }
    }

    /// Feeds the held frames (all, or `only` this sender's) whose sender the span now covers;
    /// returns whether any was fed.
    fn replay_early(&mut self, only: Option<Rank>) -> bool {
        if self.early.is_empty() {
            return false;
        }
        let layout = *self.node.tree().layout();
        let ready = self
            .early
            .take(|r| layout.contains(r) && only.is_none_or(|o| o == r));
        if ready.is_empty() {
            return false;
        }
        let now = self.input_now();
        for (from, frame) in ready {
            self.node.handle_frame(now, from, frame);
        }
        true
    }

    /// Feeds one frame from `from`; one the core dropped because `from` is past its span is
    /// held (bounded) for [`Self::replay_early`].
    fn feed_frame(&mut self, now: Instant, from: Rank, frame: Bytes) {
        if self.node.tree().layout().contains(from) {
            if self.early.holds(from) {
                self.replay_early(Some(from));
            }
            self.node.handle_frame(now, from, frame);
            return;
        }
        self.node.handle_frame(now, from, frame.clone());
        if self.node.tree().layout().contains(from) {
            return; // caught up on it (an adoption notice): dispatched
        }
        if self.early.hold(from, frame) {
            Counters::add(&self.counters.early_held);
        } else {
            Counters::add(&self.counters.early_dropped);
        }
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
            let now = self.input_now();
            self.node.handle_timeout(now);
            self.settle();
        }
        if self.links.poll_timeout().is_some_and(|at| at <= now) {
            self.links.handle_timeout(now, alive(&self.node));
            self.settle();
        }
    }

    /// Drains the core after an input: transmits into send queues (asking the link policy for
    /// each peer sent to), events into the outputs, stamped with the input's time (an
    /// admission's joiners into the address book on the way), then the answers to joiners; a
    /// view change is told to the link policy. No link action runs here: the work loop
    /// ([`Self::settle`]) executes them once the drain is done, so a dial to a rank admitted in
    /// this drain finds its address.
    fn drain_core(&mut self) {
        // Consecutive transmits to one peer and class are queued under one lock.
        let mut run: Option<(Rank, Class)> = None;
        while let Some(t) = self.node.poll_transmit() {
            if let Some((to, class)) = run.filter(|&r| r != (t.to, t.class)) {
                self.route_staged(to, class);
            }
            run = Some((t.to, t.class));
            let fence = t.is_fence();
            self.peers.stage(t.frame, fence);
        }
        if let Some((to, class)) = run {
            self.route_staged(to, class);
        }
        let mut view_changed = false;
        while let Some(event) = self.node.poll_event() {
            if let Event::ViewChanged(d) = &event {
                tracing::debug!(
                    slot = ?d.new_slot.map(|r| r.0),
                    parent = ?d.new_parent.map(|r| r.0),
                    promoted = d.promoted,
                    "view changed"
                );
                view_changed = true;
            }
            if let Event::Membership(MembershipEvent::Joined { epoch, joiners, .. }) = &event {
                self.add_joiners(*epoch, joiners);
            }
            // Ranks checked in: a standby parent that has started may be dialled now
            // (`links.rs`, `wire_up`).
            if let Event::Membership(MembershipEvent::CheckedIn { .. }) = &event {
                view_changed = true;
            }
            self.outputs.push(Output::Event { at: self.at, event });
        }
        self.answer_joins();
        if view_changed {
            self.on_view_changed();
        }
    }

    /// Queues the staged frames to `to` on `class`; a live peer's link is wanted, an
    /// overflowing one queued to go down.
    fn route_staged(&mut self, to: Rank, class: Class) {
        let alive = self.alive(to);
        match self.peers.route_staged(to, class, C::slot_of(class), alive) {
            Routed::Queued => self.want(to),
            Routed::Overflow => self.queue_down(to, DownReason::Overflow),
            Routed::Dead => {}
        }
    }

    /// Feeds a batch of frames (one `now`: they arrived in one read) or a connection's end;
    /// returns the inputs it counts as (its frames).
    fn on_frame(&mut self, f: FrameIn) -> usize {
        match f {
            FrameIn::Frames { from, frames } => {
                let n = frames.len();
                Counters::add_n(&self.counters.frames_in, n);
                let now = self.input_now();
                for (i, frame) in frames.into_iter().enumerate() {
                    if i > 0 && i % self.frames_per_drain == 0 {
                        self.drain_core();
                    }
                    self.feed_frame(now, from, frame);
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

    /// Why a gated command must wait: a congested send queue, or outputs the application does
    /// not read.
    fn refusal(&self) -> Option<TransportError> {
        if let Some((peer, class, queued)) = self.peers.congested(self.cfg.queue_soft_bytes) {
            Counters::add(&self.counters.backpressure);
            return Some(TransportError::Backpressure {
                peer,
                class,
                queued,
            });
        }
        self.outputs.full().then(|| {
            Counters::add(&self.counters.backpressure);
            TransportError::OutputsFull {
                waiting: self.outputs.len(),
            }
        })
    }

    fn on_cmd(&mut self, c: Cmd) {
        match c {
            Cmd::Run { f, gated } => {
                if let Some(e) = gated.then(|| self.refusal()).flatten() {
                    f(Err(e));
                    return;
                }
                let now = self.input_now();
                f(Ok((&mut self.node, now)));
            }
            Cmd::Congested(reply) => {
                let congested = self.peers.congested(self.cfg.queue_soft_bytes);
                let _ = reply.send(congested.is_some());
            }
            Cmd::Raw(t, reply) => {
                let _ = reply.send(self.raw(t));
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
        let queued = self.peers.queued(t.to, t.class);
        if queued + t.frame.len() > self.cfg.queue_hard_bytes {
            return Err(TransportError::Backpressure {
                peer: t.to,
                class: t.class,
                queued,
            });
        }
        let fence = t.is_fence();
        self.peers.stage(t.frame, fence);
        self.route_staged(t.to, t.class);
        Ok(())
    }
}
