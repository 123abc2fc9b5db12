//! The one test harness: a [`Net`] of real [`Node`]s joined by perfect, zero-latency links on
//! virtual time, driven exactly as the crate's driving contract says (one input at a time, drain
//! after every input, one timer per node). Modelled on quinn-proto's test `Pair` (with its
//! `drive_bounded`) and quiche's `Pipe`; the contract tests, the malformed-input sweep, the RELM
//! unit tests and the `node` fuzz target all drive nodes through it.
//!
//! ```
//! use bytes::Bytes;
//! use lifeline_core::sim::testing::Net;
//! use lifeline_core::{Config, Duration, Instant};
//!
//! let mut net = Net::new(&Config::new(9, 2), 0..9);
//! net.command(8, |n, now| n.flood(now, Bytes::from_static(b"hi"))).unwrap();
//! net.drive();
//! assert_eq!(net.log().len(), 8, "one frame over every tree edge");
//! assert_eq!(net.take_events_by_rank().len(), 9, "delivered everywhere");
//! net.run_until(Instant::ZERO + Duration::from_secs(60)); // the flood state lingers, then goes
//! assert!(net.nodes().all(|(_, n)| n.pending_state() == 0));
//! ```
//!
//! # Driving
//!
//! - [`Net::pump`] delivers every queued frame (and whatever the deliveries make the nodes send)
//!   until nothing is queued; it fires no timer.
//! - [`Net::fire_due`] fires, once, every node whose deadline is at or before the clock.
//! - [`Net::drive`] pumps and fires due timers until the net is quiescent at the current time.
//! - [`Net::run_until`] pumps, then repeatedly moves the clock to the earliest deadline not past
//!   `t`, fires it and pumps again; the clock ends at `t`.
//!
//! Every driving call is bounded ([`Net::step_bound`]): more deliveries and timer firings at one
//! virtual instant than the bound is a livelock, a bug, and panics with a clear message instead
//! of hanging.
//!
//! # Order
//!
//! Under [`Schedule::Fifo`] (the default) every transmit joins one global FIFO queue when its
//! sender is drained, so delivery is FIFO per link and across the whole net: a frame is handed to
//! its destination, the destination is drained to the back of the queue, then the next frame
//! goes. Pumping first drains every node in rank order (picking up what tests did to nodes
//! directly), and timers fire in rank order. [`Schedule::RankPasses`] keeps the order of the RELM
//! unit tests' original loop: passes over the nodes in rank order, where each node fires its timer
//! if due, is drained, and has each transmit handed straight to its destination; passes repeat
//! until one moves no frame.
//!
//! # Checks, logs and interception
//!
//! With [`Net::check_transmits`] on (the default), every transmit is checked when its sender is
//! drained: never to the sender itself, never to a rank the sender knows dead or outside its span,
//! always a frame the sender's own limits decode, on its kind's [`Class`]. [`Net::catch_panics`]
//! names the node and input in a panic, and [`Net::set_context`] adds the test's own context (the
//! input being swept) to every panic the harness raises. Every frame the net carries is logged as
//! a [`Frame`] ([`Net::log`]) and every event with its rank ([`Net::events`]); both can be
//! switched off for long fuzz runs. A filter ([`Net::set_filter`]) drops frames before delivery;
//! [`Net::send`] queues any frame (hostile ones included) as if its sender had sent it,
//! [`Net::feed`] hands raw bytes to a node at once, [`Net::crash`] removes a node (frames to it
//! are then lost, [`Net::lost`]) and [`Net::link_down`] reports a lost link.
//!
//! # Why the simulator's engine is separate
//!
//! [`Sim`](super::Sim) and [`Net`] share the per-node step ([`Input::apply`] then [`drain`]);
//! the engines around it differ on purpose. The simulator models a network: latency and jitter
//! drawn from the seed, a time-ordered event queue, link establishment on first use, crash-stop
//! with delayed link-down, cuts, partitions, pauses and joins, and an observer checking
//! invariants after every step. The harness is a test fixture with zero latency: what a test
//! asserts is an exact order of frames at one instant, direct access to every node between
//! inputs, and frames injected, dropped or fed by hand, none of which a latency-driven event
//! queue can give without changing every simulator trace (which must replay bit for bit).

use std::collections::{BTreeMap, VecDeque};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use bytes::Bytes;

use crate::tree::Rank;
use crate::wire::{Kind, Message};
use crate::{Class, Config, Duration, Event, Instant, LinkCause, Node, Stats, Transmit};

mod solo;
mod step;

pub use solo::Solo;
pub use step::{drain, step, Input, Outputs};

// ---------------------------------------------------------------------------------------------
// The network
// ---------------------------------------------------------------------------------------------

/// A frame the net carries: who sent it to whom, on which class.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    /// The sender.
    pub from: Rank,
    /// The destination.
    pub to: Rank,
    /// The channel it travels on.
    pub class: Class,
    /// The whole frame, envelope included.
    pub frame: Bytes,
}

impl Frame {
    /// A transmit of `from` as a frame on the net.
    pub fn new(from: Rank, t: Transmit) -> Self {
        Self {
            from,
            to: t.to,
            class: t.class,
            frame: t.frame,
        }
    }

    /// Raw bytes from `from` to `to` (the class is its kind's, or control if it names none).
    pub fn raw(from: Rank, to: Rank, frame: impl Into<Bytes>) -> Self {
        let frame = frame.into();
        let class = frame
            .get(1)
            .and_then(|&b| Kind::from_u8(b))
            .map_or(Class::Control, Kind::class);
        Self {
            from,
            to,
            class,
            frame,
        }
    }

    /// The kind its envelope names, if its kind byte is a known kind.
    pub fn kind(&self) -> Option<Kind> {
        self.frame.get(1).and_then(|&b| Kind::from_u8(b))
    }
}

/// The order a [`Net`] delivers frames and fires timers in (see the module docs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Schedule {
    /// One global FIFO queue in send order; the destination is drained after every delivery;
    /// timers fire (in rank order) only when the queue is empty.
    #[default]
    Fifo,
    /// Passes over the nodes in rank order: each fires its timer if due, is drained, and has its
    /// transmits handed straight to their destinations; until a pass moves no frame.
    RankPasses,
}

/// A frame filter: `false` drops the frame.
pub type Filter = Box<dyn FnMut(&Frame) -> bool>;
/// A context for the harness's panics.
pub type Context = Box<dyn Fn() -> String>;

/// Nodes joined by perfect in-order links on virtual time (see the module docs).
pub struct Net {
    nodes: BTreeMap<Rank, Node>,
    now: Instant,
    queue: VecDeque<Frame>,
    log: Vec<Frame>,
    events: Vec<(Rank, Event)>,
    lost: u64,
    dropped: u64,
    /// Steps (deliveries and timer firings) at the current instant in the current call.
    steps: u64,
    schedule: Schedule,
    check: bool,
    strict: bool,
    catch: bool,
    record_frames: bool,
    record_events: bool,
    bound: u64,
    filter: Option<Filter>,
    context: Option<Context>,
}

impl std::fmt::Debug for Net {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Net")
            .field("ranks", &self.nodes.keys().collect::<Vec<_>>())
            .field("now", &self.now)
            .field("queued", &self.queue.len())
            .field("lost", &self.lost)
            .field("dropped", &self.dropped)
            .field("schedule", &self.schedule)
            .finish_non_exhaustive()
    }
}

impl Net {
    /// The default [`Net::step_bound`].
    pub const DEFAULT_STEP_BOUND: u64 = 1_000_000;

    /// One node per rank in `ranks`, each seeded with its rank, constructed at time zero; ranks
    /// left out (and ranks outside the span) have no node: frames to them are lost.
    pub fn new(config: &Config, ranks: impl IntoIterator<Item = u32>) -> Self {
        let shared = Arc::new(config.clone());
        Self::from_nodes(ranks.into_iter().map(|r| {
            Node::with_shared_config(Arc::clone(&shared), Rank(r), u64::from(r), Instant::ZERO)
                .unwrap_or_else(|e| panic!("Net::new: rank {r}: {e}"))
        }))
    }

    /// A net of the given nodes (keyed by [`Node::me`]), with the clock at zero.
    pub fn from_nodes(nodes: impl IntoIterator<Item = Node>) -> Self {
        let mut map = BTreeMap::new();
        for n in nodes {
            let r = n.me();
            assert!(map.insert(r, n).is_none(), "Net: two nodes for rank {r}");
        }
        Self {
            nodes: map,
            now: Instant::ZERO,
            queue: VecDeque::new(),
            log: Vec::new(),
            events: Vec::new(),
            lost: 0,
            dropped: 0,
            steps: 0,
            schedule: Schedule::Fifo,
            check: true,
            strict: false,
            catch: false,
            record_frames: true,
            record_events: true,
            bound: Self::DEFAULT_STEP_BOUND,
            filter: None,
            context: None,
        }
    }

    // ---- options ----

    /// The delivery order (default [`Schedule::Fifo`]).
    pub fn schedule(mut self, s: Schedule) -> Self {
        self.schedule = s;
        self
    }

    /// Whether every transmit is checked when its sender is drained (default on): not to the
    /// sender, not to a rank it knows dead or outside its span, decodable under its own limits,
    /// on its kind's class.
    pub fn check_transmits(mut self, on: bool) -> Self {
        self.check = on;
        self
    }

    /// Whether [`Net::run_until`] panics on a deadline earlier than the clock (a timer a test
    /// left armed while moving the clock past it with [`Net::set_now`]). Default off: a late
    /// timer fires at the current time.
    pub fn strict_deadlines(mut self, on: bool) -> Self {
        self.strict = on;
        self
    }

    /// Whether a node's panic on an input is caught and re-raised naming the node, the input
    /// and the context (default off: the panic propagates as it is).
    pub fn catch_panics(mut self, on: bool) -> Self {
        self.catch = on;
        self
    }

    /// Most deliveries and timer firings one driving call may take at one virtual instant
    /// before it panics as a livelock (default [`Net::DEFAULT_STEP_BOUND`]).
    pub fn step_bound(mut self, steps: u64) -> Self {
        self.bound = steps;
        self
    }

    /// Whether carried frames are logged (default on).
    pub fn record_frames(mut self, on: bool) -> Self {
        self.record_frames = on;
        self
    }

    /// Whether events are recorded (default on; off, they are drained and discarded).
    pub fn record_events(mut self, on: bool) -> Self {
        self.record_events = on;
        self
    }

    /// Context appended to every panic the harness raises (evaluated only then).
    pub fn set_context(&mut self, f: impl Fn() -> String + 'static) {
        self.context = Some(Box::new(f));
    }

    /// Removes the context.
    pub fn clear_context(&mut self) {
        self.context = None;
    }

    /// Runs `keep` on every frame before delivery; a frame it refuses is dropped (counted in
    /// [`Net::dropped`], not logged).
    pub fn set_filter(&mut self, keep: impl FnMut(&Frame) -> bool + 'static) {
        self.filter = Some(Box::new(keep));
    }

    /// Removes the filter.
    pub fn clear_filter(&mut self) {
        self.filter = None;
    }

    // ---- clock and nodes ----

    /// Virtual time.
    pub fn now(&self) -> Instant {
        self.now
    }

    /// Moves the clock to `t` without firing anything. Panics if `t` is before the clock.
    pub fn set_now(&mut self, t: Instant) {
        if t < self.now {
            self.fail(format!("the clock went back from {} to {t}", self.now));
        }
        self.advance(t);
    }

    /// The node of rank `r`; panics if there is none.
    pub fn node(&self, r: impl Into<Rank>) -> &Node {
        let r = r.into();
        self.nodes
            .get(&r)
            .unwrap_or_else(|| panic!("Net: no node {r}"))
    }

    /// The node of rank `r`, mutably (inputs and commands given this way are drained by the
    /// next driving call); panics if there is none.
    pub fn node_mut(&mut self, r: impl Into<Rank>) -> &mut Node {
        let r = r.into();
        self.nodes
            .get_mut(&r)
            .unwrap_or_else(|| panic!("Net: no node {r}"))
    }

    /// The node of rank `r`, if the net has one.
    pub fn get(&self, r: impl Into<Rank>) -> Option<&Node> {
        self.nodes.get(&r.into())
    }

    /// Every node, by rank.
    pub fn nodes(&self) -> impl Iterator<Item = (Rank, &Node)> + '_ {
        self.nodes.iter().map(|(&r, n)| (r, n))
    }

    /// Every node mutably, by rank.
    pub fn nodes_mut(&mut self) -> impl Iterator<Item = (Rank, &mut Node)> + '_ {
        self.nodes.iter_mut().map(|(&r, n)| (r, n))
    }

    /// The ranks with a node, ascending.
    pub fn ranks(&self) -> Vec<Rank> {
        self.nodes.keys().copied().collect()
    }

    /// A counter summed over every node.
    pub fn total(&self, f: impl Fn(&Stats) -> u64) -> u64 {
        self.nodes.values().map(|n| f(n.stats())).sum()
    }

    /// The earliest deadline of any node.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.nodes
            .values()
            .filter_map(|n| n.poll_timeout())
            .map(|(at, _)| at)
            .min()
    }

    /// Crash-stop: removes the node of `r` and returns it; frames to it are lost from now on.
    /// Its neighbours learn nothing until a test reports the link down ([`Net::link_down`]).
    pub fn crash(&mut self, r: impl Into<Rank>) -> Option<Node> {
        self.nodes.remove(&r.into())
    }

    /// Adds a node (a joiner, or a node built by hand); returns any node it replaced.
    pub fn insert(&mut self, node: Node) -> Option<Node> {
        self.nodes.insert(node.me(), node)
    }

    // ---- inputs ----

    /// Runs `f` on node `r` with the clock (an application command), then drains the node.
    pub fn command<R>(&mut self, r: impl Into<Rank>, f: impl FnOnce(&mut Node, Instant) -> R) -> R {
        let r = r.into();
        let now = self.now;
        let out = f(self.node_mut(r), now);
        self.drain_node(r);
        out
    }

    /// Feeds one input to node `r` now, then drains it.
    pub fn input(&mut self, r: impl Into<Rank>, input: Input) {
        self.command(r, |n, now| input.apply(n, now));
    }

    /// Hands raw bytes from `from` to node `to` now (no queue), then drains it.
    pub fn feed(&mut self, to: impl Into<Rank>, from: impl Into<Rank>, frame: impl Into<Bytes>) {
        let from = from.into();
        self.input(
            to,
            Input::Frame {
                from,
                frame: frame.into(),
            },
        );
    }

    /// Node `r` learns that its link to `peer` is up.
    pub fn link_up(&mut self, r: impl Into<Rank>, peer: impl Into<Rank>) {
        self.input(r, Input::LinkUp(peer.into()));
    }

    /// Node `r` learns that its link to `peer` is lost, and why.
    pub fn link_down(&mut self, r: impl Into<Rank>, peer: impl Into<Rank>, cause: LinkCause) {
        let peer = peer.into();
        self.input(r, Input::LinkDown { peer, cause });
    }

    /// Queues a frame as if its sender had sent it (unchecked: hostile frames welcome); it is
    /// delivered in order by the next driving call.
    pub fn send(&mut self, f: Frame) {
        self.queue.push_back(f);
    }

    /// Frames queued and not yet delivered.
    pub fn queued(&self) -> usize {
        self.queue.len()
    }

    // ---- driving ----

    /// Delivers every queued frame, and whatever the deliveries make the nodes send, until
    /// nothing is queued (under [`Schedule::RankPasses`], the passes also fire due timers).
    pub fn pump(&mut self) {
        self.steps = 0;
        self.pump_inner();
    }

    /// Fires, once and in rank order, every node whose deadline is at or before the clock, and
    /// drains it; returns whether any fired.
    pub fn fire_due(&mut self) -> bool {
        self.steps = 0;
        self.fire_due_inner()
    }

    /// Pumps and fires due timers until the net is quiescent at the current time.
    pub fn drive(&mut self) {
        self.steps = 0;
        loop {
            self.pump_inner();
            if !self.fire_due_inner() {
                return;
            }
        }
    }

    /// Pumps, then repeatedly moves the clock to the earliest deadline not past `until`, fires
    /// what is due and pumps again. The clock ends at `until` (or later, if it already was).
    pub fn run_until(&mut self, until: Instant) {
        self.steps = 0;
        loop {
            self.pump_inner();
            let Some(at) = self.next_deadline().filter(|&at| at <= until) else {
                break;
            };
            if self.strict && at < self.now {
                self.fail(format!(
                    "a deadline in the past was left armed ({at}, the clock is at {})",
                    self.now
                ));
            }
            self.advance(at);
            if self.schedule == Schedule::Fifo {
                self.fire_due_inner();
            }
        }
        self.advance(until);
    }

    /// [`Net::run_until`] the clock plus `d`.
    pub fn run_for(&mut self, d: Duration) {
        self.run_until(self.now + d);
    }

    // ---- what happened ----

    /// Every frame carried so far (or since the last clear), in delivery order.
    pub fn log(&self) -> &[Frame] {
        &self.log
    }

    /// Takes the frame log.
    pub fn take_log(&mut self) -> Vec<Frame> {
        std::mem::take(&mut self.log)
    }

    /// Clears the frame log.
    pub fn clear_log(&mut self) {
        self.log.clear();
    }

    /// Every event recorded so far, with its rank, in the order the nodes were drained.
    pub fn events(&self) -> &[(Rank, Event)] {
        &self.events
    }

    /// Takes the recorded events.
    pub fn take_events(&mut self) -> Vec<(Rank, Event)> {
        std::mem::take(&mut self.events)
    }

    /// Takes the recorded events grouped by rank (ranks with none are absent).
    pub fn take_events_by_rank(&mut self) -> BTreeMap<Rank, Vec<Event>> {
        let mut by: BTreeMap<Rank, Vec<Event>> = BTreeMap::new();
        for (r, e) in self.take_events() {
            by.entry(r).or_default().push(e);
        }
        by
    }

    /// Takes the recorded events of rank `r`, leaving the others.
    pub fn take_events_of(&mut self, r: impl Into<Rank>) -> Vec<Event> {
        let r = r.into();
        let (mine, rest) = self.take_events().into_iter().partition(|(x, _)| *x == r);
        self.events = rest;
        mine.into_iter().map(|(_, e)| e).collect()
    }

    /// Clears the recorded events.
    pub fn clear_events(&mut self) {
        self.events.clear();
    }

    /// Frames addressed to a rank with no node.
    pub fn lost(&self) -> u64 {
        self.lost
    }

    /// Frames the filter dropped.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    // ---- internals ----

    fn fail(&self, msg: String) -> ! {
        match &self.context {
            Some(ctx) => panic!("{msg}; {}", ctx()),
            None => panic!("{msg}"),
        }
    }

    fn advance(&mut self, t: Instant) {
        if t > self.now {
            self.now = t;
            self.steps = 0;
        }
    }

    fn tick(&mut self) {
        self.steps += 1;
        if self.steps > self.bound {
            self.fail(format!(
                "livelock: more than {} deliveries and timer firings at t={} without the net \
                 settling",
                self.bound, self.now
            ));
        }
    }

    fn pump_inner(&mut self) {
        match self.schedule {
            Schedule::Fifo => {
                for r in self.ranks() {
                    self.drain_node(r);
                }
                while let Some(f) = self.queue.pop_front() {
                    if let Some(to) = self.deliver(f) {
                        self.drain_node(to);
                    }
                }
            }
            Schedule::RankPasses => {
                while let Some(f) = self.queue.pop_front() {
                    self.deliver(f);
                }
                loop {
                    let mut moved = false;
                    for r in self.ranks() {
                        self.fire(r);
                        for t in self.take_outputs(r) {
                            moved = true;
                            self.deliver(Frame::new(r, t));
                        }
                    }
                    if !moved {
                        break;
                    }
                }
            }
        }
    }

    fn fire_due_inner(&mut self) -> bool {
        let mut any = false;
        for r in self.ranks() {
            if self.fire(r) {
                any = true;
                self.drain_node(r);
            }
        }
        any
    }

    /// Fires node `r`'s timer at the clock if it is due; returns whether it was.
    fn fire(&mut self, r: Rank) -> bool {
        let now = self.now;
        let due = self
            .nodes
            .get(&r)
            .and_then(Node::poll_timeout)
            .is_some_and(|(at, _)| at <= now);
        if !due {
            return false;
        }
        self.tick();
        let catch = self.catch;
        let Some(node) = self.nodes.get_mut(&r) else {
            return false;
        };
        if catch {
            if catch_unwind(AssertUnwindSafe(|| node.handle_timeout(now))).is_err() {
                self.fail(format!("{r} panicked on a timeout at {now}"));
            }
        } else {
            node.handle_timeout(now);
        }
        true
    }

    /// Hands one frame to its destination (filter, log, loss); returns the destination if it
    /// took the frame.
    fn deliver(&mut self, f: Frame) -> Option<Rank> {
        self.tick();
        if let Some(keep) = self.filter.as_mut() {
            if !keep(&f) {
                self.dropped += 1;
                return None;
            }
        }
        if self.record_frames {
            self.log.push(f.clone());
        }
        let (now, catch, from, to) = (self.now, self.catch, f.from, f.to);
        let kind = f.kind();
        let Some(node) = self.nodes.get_mut(&to) else {
            self.lost += 1;
            return None;
        };
        if catch {
            if catch_unwind(AssertUnwindSafe(|| node.handle_frame(now, from, f.frame))).is_err() {
                self.fail(format!(
                    "{to} panicked on a {} frame from {from}",
                    kind.map_or("?", Kind::name)
                ));
            }
        } else {
            node.handle_frame(now, from, f.frame);
        }
        Some(to)
    }

    /// Drains node `r` (checking its transmits, recording its events); returns its transmits.
    fn take_outputs(&mut self, r: Rank) -> Vec<Transmit> {
        let Some(node) = self.nodes.get_mut(&r) else {
            return Vec::new();
        };
        let out = drain(node);
        if self.check {
            let node = &self.nodes[&r];
            for t in &out.transmits {
                self.check_transmit(node, t);
            }
        }
        if self.record_events {
            self.events.extend(out.events.into_iter().map(|e| (r, e)));
        }
        out.transmits
    }

    /// Drains node `r` into the queue.
    fn drain_node(&mut self, r: Rank) {
        for t in self.take_outputs(r) {
            self.queue.push_back(Frame::new(r, t));
        }
    }

    fn check_transmit(&self, node: &Node, t: &Transmit) {
        if let Some(fault) = transmit_fault(node, t, true) {
            self.fail(fault);
        }
    }
}

/// What is wrong with a transmit `node` queued, if anything: sent to itself, to a rank it knows
/// dead or outside its span, or (with `decode` on) a frame its own limits do not decode or on
/// another class than its kind's (the checks of [`Net::check_transmits`] and [`Solo`]).
fn transmit_fault(node: &Node, t: &Transmit, decode: bool) -> Option<String> {
    let from = node.me();
    if t.to == from {
        return Some(format!("{from} sent to itself"));
    }
    if !node.tree().is_alive(t.to) {
        return Some(format!(
            "{from} sent to {}, which it knows dead or outside the span",
            t.to
        ));
    }
    if !decode {
        return None;
    }
    match Message::decode(t.frame.clone(), &node.config().limits()) {
        Err(e) => Some(format!(
            "{from} sent an undecodable frame to {} ({e}): {:?}",
            t.to, t.frame
        )),
        Ok(m) if m.kind().class() != t.class => Some(format!(
            "{from} sent a {} frame on the {:?} class: {m:?}",
            m.kind().name(),
            t.class
        )),
        Ok(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: u64) -> Instant {
        Instant::ZERO + Duration::from_secs(s)
    }

    fn flood(net: &mut Net, from: u32) {
        net.command(from, |n, now| n.flood(now, Bytes::from_static(b"f")))
            .unwrap();
    }

    #[test]
    fn fifo_delivers_in_send_order_and_records_everything() {
        // 0 -> {1, 2}, 1 -> {3, 5}, 2 -> {4, 6}, 3 -> {7}, 4 -> {8}.
        let mut net = Net::new(&Config::new(9, 2), 0..9);
        flood(&mut net, 8);
        assert_eq!(net.queued(), 1, "a command drains its node at once");
        net.pump();
        let hops: Vec<(u32, u32)> = net.log().iter().map(|f| (f.from.0, f.to.0)).collect();
        assert_eq!(
            hops,
            [
                (8, 4),
                (4, 2),
                (2, 0),
                (2, 6),
                (0, 1),
                (1, 3),
                (1, 5),
                (3, 7)
            ]
        );
        assert!(net.log().iter().all(|f| f.kind() == Some(Kind::Flood)));
        assert!(net.log().iter().all(|f| f.class == Class::Data));
        assert_eq!(net.events().len(), 9);
        assert_eq!(net.take_events_of(8).len(), 1);
        assert_eq!(net.events().len(), 8);
        let by = net.take_events_by_rank();
        assert_eq!(by.len(), 8);
        assert!(!by.contains_key(&Rank(8)));
        assert!(net.take_events().is_empty());
        // The sweep timer fires a linger later, and the clock ends where it was asked to.
        assert_eq!(net.next_deadline(), Some(secs(10)));
        net.run_until(secs(9));
        assert!(net.nodes().all(|(_, n)| n.pending_state() == 2));
        net.run_for(Duration::from_secs(20));
        assert_eq!(net.now(), secs(29));
        assert!(net.nodes().all(|(_, n)| n.pending_state() == 0));
        assert_eq!(net.next_deadline(), None);
    }

    #[test]
    fn rank_passes_hand_frames_straight_on() {
        let order = |schedule| {
            let mut net = Net::new(&Config::new(9, 2), 0..9).schedule(schedule);
            for r in [6, 3] {
                net.node_mut(r).flood(Instant::ZERO, Bytes::new()).unwrap();
            }
            net.pump();
            assert_eq!(net.take_events_by_rank().len(), 9);
            let hops: Vec<(u32, u32)> = net.log().iter().map(|f| (f.from.0, f.to.0)).collect();
            hops
        };
        // Two floods, from 3 and 6 (given to the nodes directly, so drained by the pump).
        // FIFO: one queue in send order, each receiver drained right after its delivery.
        let fifo = [
            (3, 1),
            (3, 7),
            (6, 2),
            (1, 0),
            (1, 5),
            (2, 0),
            (2, 4),
            (0, 2),
            (0, 1),
            (4, 8),
            (2, 4),
            (2, 6),
            (1, 3),
            (1, 5),
            (4, 8),
            (3, 7),
        ];
        assert_eq!(order(Schedule::Fifo), fifo);
        // Passes: in each pass, every rank in turn hands its transmits straight on.
        let passes = [
            (3, 1),
            (3, 7),
            (6, 2),
            (1, 0),
            (1, 5),
            (2, 0),
            (2, 4),
            (4, 8),
            (0, 2),
            (0, 1),
            (1, 3),
            (1, 5),
            (2, 4),
            (2, 6),
            (3, 7),
            (4, 8),
        ];
        assert_eq!(order(Schedule::RankPasses), passes);
    }

    #[test]
    fn filter_drops_and_crash_loses() {
        let mut net = Net::new(&Config::new(9, 2), 0..9);
        net.set_filter(|f| f.to != Rank(6));
        assert!(net.crash(3).is_some());
        flood(&mut net, 8);
        net.pump();
        assert_eq!(net.dropped(), 1, "2 -> 6");
        assert_eq!(net.lost(), 1, "1 -> 3");
        // 3 never forwards to 7; the frame to 3 is logged, the one to 6 is not.
        assert_eq!(net.log().len(), 6);
        assert!(net.get(3).is_none());
        // 1 learns that 3 is gone: it adopts 7 and tells 0.
        net.clear_log();
        net.link_down(1, 3, LinkCause::Refused);
        net.pump();
        assert!(net.node(1).tree().dead().contains(Rank(3)));
        let to: Vec<u32> = net.log().iter().map(|f| f.to.0).collect();
        assert!(to.contains(&7) && to.contains(&0), "{to:?}");
        // Raw bytes fed to a node are counted drops, and a queued hostile frame too.
        let before = net.node(0).stats().dropped_decode_error;
        net.feed(0, 1, Bytes::from_static(&[1, 1, 0, 0, 0, 0]));
        net.send(Frame::raw(Rank(1), Rank(0), vec![1, 2, 0, 0, 0, 0]));
        net.pump();
        assert_eq!(net.node(0).stats().dropped_decode_error, before + 2);
    }

    #[test]
    #[should_panic(expected = "livelock: more than 3 deliveries and timer firings at t=")]
    fn more_steps_than_the_bound_is_a_livelock() {
        let mut net = Net::new(&Config::new(9, 2), 0..9).step_bound(3);
        net.set_context(|| "flooding from 8".into());
        flood(&mut net, 8);
        net.drive();
    }

    #[test]
    #[should_panic(expected = "a deadline in the past was left armed")]
    fn strict_deadlines_refuse_a_timer_left_behind() {
        let mut net = Net::new(&Config::new(3, 2), 0..3).strict_deadlines(true);
        flood(&mut net, 0);
        net.pump();
        net.set_now(secs(11));
        net.run_until(secs(12));
    }

    #[test]
    fn lenient_deadlines_fire_late() {
        let mut net = Net::new(&Config::new(3, 2), 0..3);
        flood(&mut net, 0);
        net.pump();
        net.set_now(secs(11));
        assert!(net.fire_due());
        assert!(!net.fire_due());
        assert!(net.nodes().all(|(_, n)| n.pending_state() == 0));
    }

    #[test]
    #[should_panic(expected = "the clock went back")]
    fn the_clock_never_goes_back() {
        let mut net = Net::new(&Config::new(3, 2), 0..3);
        net.set_now(secs(2));
        net.set_now(secs(1));
    }

    #[test]
    fn step_is_input_then_drain() {
        let mut n = Node::new(Config::new(3, 2), Rank(1), 1, Instant::ZERO).unwrap();
        let frame = Message::Flood(crate::wire::FloodMsg {
            origin: Rank(2),
            id: 1,
            hops: 1,
            payload: Bytes::new(),
        })
        .encode();
        let out = step(
            &mut n,
            secs(1),
            Input::Frame {
                from: Rank(0),
                frame,
            },
        );
        assert!(out.transmits.is_empty(), "a leaf forwards nothing");
        assert_eq!(out.events.len(), 1);
        assert_eq!(out.timeout.map(|t| t.0), Some(secs(11)));
        assert_eq!(
            drain(&mut n),
            Outputs {
                timeout: out.timeout,
                ..Outputs::default()
            }
        );
    }
}
