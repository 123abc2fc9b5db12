//! The deterministic simulator: N real [`Node`]s, one virtual clock, one seed.
//!
//! Every source of nondeterminism (latency, jitter, node seeds, fault timing chosen by a
//! scenario) is drawn from the run's seed, and the event queue is ordered by `(time, sequence)`,
//! so a run replays bit for bit: the same seed gives the same trace. The network keeps FIFO order
//! per directed link (the protocols rely on it, as on TCP), and models:
//!
//! - **crash-stop** ([`Fault::Crash`]): the node is dropped; each neighbour it had a link with sees
//!   link-down after [`NetConfig::link_down_delay`] (an adapter noticing the reset), and a later
//!   dial to it fails the same way;
//! - **cuts and partitions**, one-way or symmetric: frames stall like TCP retransmits; a heal
//!   before [`NetConfig::cut_timeout`] delivers them in order, otherwise both ends see link-down
//!   and the stalled frames are lost with the connection;
//! - **lossy ranks** ([`Fault::Lossy`]): every link to and from the rank loses each
//!   transmission of a frame with some probability, as TCP shows it: the frame arrives after a
//!   retransmission timeout ([`NetConfig::rto_min`], doubling on consecutive losses of the same
//!   frame up to [`NetConfig::rto_max`]), and later frames on the same directed link wait
//!   behind it, in order (head-of-line blocking); drawn from the run's seed like everything else;
//! - **refused dials** ([`Fault::RefuseDials`]): one rank's dials to a live rank are refused
//!   (one rank's word against a live rank);
//! - **pause-then-resume** ([`Fault::Pause`]/[`Fault::Resume`]): a frozen process receives
//!   nothing and fires no timer; on resume it processes the backlog in order and its overdue
//!   timers fire late;
//! - **joins** ([`Sim::join`]): the span grows and new nodes start from a snapshot.
//!
//! An [`Observer`] sees every application event and runs its invariant checks after every step.
//! A scenario typically runs a safety phase with faults ([`Sim::run_until`]), heals everything
//! ([`Sim::heal_all`]), then a liveness phase that must converge within a step budget
//! ([`Sim::run_until_quiet`] or [`Sim::run_until_pred`]). A failure is a [`SimFailure`] that
//! prints the seed and a one-line command replaying the run exactly. With a trace sink set, the
//! simulator writes one line per event.
//!
//! For tests that need an exact order of frames at one instant rather than a network, see the
//! zero-latency harness in [`testing`] (it shares the per-node step with this engine).

mod joiners;
mod net;
pub mod scenario;
pub mod testing;
#[cfg(test)]
mod tests;
mod trace;

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::fmt;
use std::sync::Arc;

use bytes::Bytes;

pub use joiners::JoinerInfo;
pub use net::NetConfig;
use net::{Net, Stalled};

use crate::config::Config;
use crate::event::Event;
use crate::link::LinkCause;
use crate::node::Node;
use crate::rng::Rng;
use crate::time::{Duration, Instant};
use crate::transmit::Class;
use crate::tree::{Rank, RankSet};
pub use trace::describe;
use trace::describe_event;

/// A fault a scenario applies now ([`Sim::apply`]) or schedules ([`Sim::schedule`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Crash-stop: the process is gone for good.
    Crash(Rank),
    /// Freeze the process (SIGSTOP).
    Pause(Rank),
    /// Thaw a frozen process (SIGCONT).
    Resume(Rank),
    /// Stall frames from `.0` to `.1` (one-way).
    CutOneWay(Rank, Rank),
    /// Stall frames both ways between two ranks.
    Cut(Rank, Rank),
    /// Split the ranks into groups; frames between different groups stall. Ranks not listed
    /// form one more group.
    Partition(Vec<Vec<Rank>>),
    /// Remove every cut, partition and refusal; stalled frames go out in order. Lossy ranks
    /// stay lossy.
    Heal,
    /// Dials from `from` to `to` are refused although `to` is alive (an overloaded dialer, a
    /// full accept queue at `to`: one rank's word against a live rank), until the heal. An
    /// established link between them breaks now: `from` sees a refused re-dial (hard
    /// evidence), `to` a reset. Dials from `to` to `from` still connect, and the link they make
    /// carries frames both ways.
    RefuseDials {
        /// The rank whose dials are refused.
        from: Rank,
        /// The live rank it cannot dial.
        to: Rank,
    },
    /// Every link to and from `rank` loses each transmission of a frame with probability
    /// `pct`% (clamped to 100; 0 makes them clean again) for frames sent in the next
    /// `duration`. A lost frame is retransmitted as TCP does (see [`NetConfig::rto_min`]): it
    /// arrives late, never out of order, and is never dropped.
    Lossy {
        /// The rank whose interface is lossy.
        rank: Rank,
        /// Loss probability per transmission, in percent.
        pct: u32,
        /// How long its links stay lossy.
        duration: crate::time::Duration,
    },
}

/// Everything about a run except the observer.
#[derive(Clone, Debug)]
pub struct SimConfig {
    /// The one seed of the run.
    pub seed: u64,
    /// Network timing.
    pub net: NetConfig,
    /// The node configuration template (span, radix, limits); each node gets a copy.
    pub node: Config,
    /// Establish links between every node and its tree neighbours at start, as adapters do
    /// at wire-up (so a crash is noticed by its neighbours).
    pub wire_tree: bool,
    /// Most steps one [`Sim::run_until`] may take before the run is declared a livelock.
    pub step_budget: u64,
    /// Launched ranks whose process starts late (`Some(at)`: at that time, as a launcher
    /// spreads starts) or never (`None`). Until it starts, a rank's slot holds what is sent
    /// to it (a dial retried within the start-up grace); every other rank starts at zero.
    pub late_starts: BTreeMap<Rank, Option<Instant>>,
}

impl SimConfig {
    /// Defaults for a tree of `span` ranks with `radix`.
    pub fn new(span: u32, radix: u32, seed: u64) -> Self {
        Self {
            seed,
            net: NetConfig::default(),
            node: Config::new(span, radix),
            wire_tree: true,
            step_budget: 200_000_000,
            late_starts: BTreeMap::new(),
        }
    }
}

/// Hooks for long scenario runs (every [`scenario`]): a trace sink and a progress callback.
#[derive(Default)]
pub struct Hooks {
    /// One line per event.
    pub trace: Option<TraceSink>,
    /// Called every `progress_every` steps.
    pub progress: Option<ProgressHook>,
    /// Steps between progress calls.
    pub progress_every: u64,
}

/// Sees the run: every application event, and an invariant check after every step.
pub trait Observer {
    /// An event a node emitted.
    fn on_event(&mut self, _world: &World, _rank: Rank, _event: &Event) {}
    /// Invariants that must hold after every step; an `Err` stops the run.
    fn check(&mut self, _world: &World) -> Result<(), String> {
        Ok(())
    }
}

/// An observer that checks nothing.
impl Observer for () {}

/// A run that broke an invariant or did not converge. Its `Display` names the seed and a
/// command that replays the run exactly.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SimFailure {
    /// The run's seed.
    pub seed: u64,
    /// Steps taken when it failed.
    pub step: u64,
    /// Virtual time when it failed.
    pub now: Instant,
    /// What went wrong.
    pub reason: String,
    /// A one-line command that replays this run.
    pub replay: String,
}

impl fmt::Display for SimFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "simulation failed at step {} (t={}): {}\n  seed: {}\n  replay: {}",
            self.step, self.now, self.reason, self.seed, self.replay
        )
    }
}

impl std::error::Error for SimFailure {}

/// Counters of a run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SimStats {
    /// Queue entries processed.
    pub steps: u64,
    /// Frames handed to nodes.
    pub frames_delivered: u64,
    /// Frames lost: to crashed nodes, or with a connection that timed out while cut.
    pub frames_lost: u64,
    /// Frames that stalled on a cut link.
    pub frames_stalled: u64,
    /// Transmissions lost on lossy links (each one retransmitted: the frame arrives late).
    pub frames_retransmitted: u64,
    /// Application events emitted by nodes.
    pub events: u64,
    /// Timer expiries delivered to nodes.
    pub timeouts: u64,
    /// Link-down reports delivered to nodes.
    pub link_downs: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SlotState {
    Live,
    Paused,
    Crashed,
    /// An admitted joiner whose process has not started: what reaches it waits.
    Pending,
}

#[derive(Debug)]
struct Slot {
    node: Option<Node>,
    state: SlotState,
    wake: Option<Instant>,
    held: Vec<SimEvent>,
}

#[derive(Clone, Debug)]
enum SimEvent {
    Deliver {
        to: u32,
        from: u32,
        class: Class,
        frame: Bytes,
    },
    Wake(u32),
    LinkDown {
        rank: u32,
        peer: u32,
        cause: LinkCause,
    },
    CutTimeout {
        a: u32,
        b: u32,
        gen: u64,
    },
    Fault(Fault),
    /// A grow held for a rank that was paused when it happened.
    Grow {
        rank: u32,
        span: u32,
    },
    /// A launched rank's process starts late ([`SimConfig::late_starts`]).
    Start(u32),
    /// A joiner's process starts.
    JoinerStart(usize),
    /// A joiner's timer.
    JoinerWake(usize),
    /// A join request reaches its contact on connection `conn`.
    JoinRequest {
        to: u32,
        conn: u64,
        bytes: Bytes,
    },
    /// A contact's answer reaches its joiner.
    JoinReply {
        conn: u64,
        bytes: Bytes,
    },
    /// A join connection failed (its contact is gone).
    JoinConnFailed(u64),
}

#[derive(Debug)]
struct Entry {
    at: Instant,
    seq: u64,
    ev: SimEvent,
}

impl PartialEq for Entry {
    fn eq(&self, o: &Self) -> bool {
        (self.at, self.seq) == (o.at, o.seq)
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Entry {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(o.at, o.seq))
    }
}

/// Where trace lines go.
pub type TraceSink = Box<dyn FnMut(&str)>;
/// A progress callback.
pub type ProgressHook = Box<dyn FnMut(&World)>;

/// The simulated world: nodes, network, clock and queue. Observers get read access.
pub struct World {
    cfg: SimConfig,
    now: Instant,
    rng: Rng,
    /// Loss draws of lossy links, apart from `rng` so a lossy rank leaves other links' timing
    /// as it was.
    loss_rng: Rng,
    slots: Vec<Slot>,
    queue: BinaryHeap<Reverse<Entry>>,
    seq: u64,
    net: Net,
    stats: SimStats,
    trace: Option<TraceSink>,
    replay: String,
    joiners: joiners::Joiners,
}

impl World {
    /// Virtual time.
    pub fn now(&self) -> Instant {
        self.now
    }

    /// Current span (grows with joins).
    pub fn span(&self) -> u32 {
        self.slots.len() as u32
    }

    /// The node of `rank` if it has not crashed (paused nodes included).
    pub fn node(&self, rank: Rank) -> Option<&Node> {
        self.slots.get(rank.index())?.node.as_ref()
    }

    /// Whether `rank` crashed.
    pub fn is_crashed(&self, rank: Rank) -> bool {
        self.slots
            .get(rank.index())
            .is_some_and(|s| s.state == SlotState::Crashed)
    }

    /// Whether `rank` is paused.
    pub fn is_paused(&self, rank: Rank) -> bool {
        self.slots
            .get(rank.index())
            .is_some_and(|s| s.state == SlotState::Paused)
    }

    /// Ranks that have not crashed, ascending.
    pub fn live_ranks(&self) -> impl Iterator<Item = Rank> + '_ {
        self.slots
            .iter()
            .enumerate()
            .filter(|(_, s)| s.state != SlotState::Crashed)
            .map(|(i, _)| Rank(i as u32))
    }

    /// Ranks that crashed, as a set.
    pub fn crashed(&self) -> RankSet {
        self.slots
            .iter()
            .enumerate()
            .filter(|(_, s)| s.state == SlotState::Crashed)
            .map(|(i, _)| Rank(i as u32))
            .collect()
    }

    /// Run counters.
    pub fn stats(&self) -> &SimStats {
        &self.stats
    }

    /// Entries waiting in the event queue.
    pub fn queue_len(&self) -> usize {
        self.queue.len()
    }

    /// The run's seed.
    pub fn seed(&self) -> u64 {
        self.cfg.seed
    }

    fn push(&mut self, at: Instant, ev: SimEvent) {
        self.seq += 1;
        self.queue.push(Reverse(Entry {
            at,
            seq: self.seq,
            ev,
        }));
    }

    fn trace_line(&mut self, line: impl FnOnce() -> String) {
        if let Some(sink) = self.trace.as_mut() {
            let l = format!("{:>12} {}", self.now.to_string(), line());
            sink(&l);
        }
    }
}

/// The simulator: a [`World`] and its [`Observer`].
pub struct Sim<O: Observer = ()> {
    world: World,
    obs: O,
    progress: Option<(u64, ProgressHook)>,
}

fn node_seed(run_seed: u64, rank: u32) -> u64 {
    Rng::new(run_seed ^ 0x5EED_0000_0000_0000)
        .fork(rank as u64)
        .next_u64()
}

impl<O: Observer> Sim<O> {
    /// A world of `cfg.node.span` nodes (minus `cfg.node.dead`), all live at time zero.
    pub fn new(cfg: SimConfig, obs: O) -> Result<Self, crate::ConfigError> {
        cfg.node.validate()?;
        let span = cfg.node.span;
        // One configuration for every node (a copy each would cost ~300 bytes a node).
        let shared = Arc::new(cfg.node.clone());
        let mut slots = Vec::with_capacity(span as usize);
        for r in 0..span {
            let late = cfg.late_starts.contains_key(&Rank(r));
            let node = if cfg.node.dead.contains(Rank(r)) || late {
                None
            } else {
                Some(Node::with_shared_config(
                    Arc::clone(&shared),
                    Rank(r),
                    node_seed(cfg.seed, r),
                    Instant::ZERO,
                )?)
            };
            slots.push(Slot {
                state: if node.is_some() {
                    SlotState::Live
                } else if late && !cfg.node.dead.contains(Rank(r)) {
                    SlotState::Pending
                } else {
                    SlotState::Crashed
                },
                node,
                wake: None,
                held: Vec::new(),
            });
        }
        let mut world = World {
            rng: Rng::new(cfg.seed),
            loss_rng: Rng::new(cfg.seed).fork(0x6c6f_7373),
            net: Net::with_nodes(span as usize),
            replay: format!("(seed {})", cfg.seed),
            cfg,
            now: Instant::ZERO,
            slots,
            queue: BinaryHeap::new(),
            seq: 0,
            stats: SimStats::default(),
            trace: None,
            joiners: joiners::Joiners::default(),
        };
        if world.cfg.wire_tree {
            for r in 0..span {
                wire_node(&mut world, r);
            }
        }
        let starts: Vec<(Rank, Instant)> = world
            .cfg
            .late_starts
            .iter()
            .filter_map(|(&r, at)| at.map(|at| (r, at)))
            .collect();
        for (r, at) in starts {
            world.push(at, SimEvent::Start(r.0));
        }
        let mut sim = Self {
            world,
            obs,
            progress: None,
        };
        for r in 0..span {
            sim.drain(r);
        }
        Ok(sim)
    }

    /// The world (read-only).
    pub fn world(&self) -> &World {
        &self.world
    }

    /// The observer.
    pub fn observer(&self) -> &O {
        &self.obs
    }

    /// The observer, mutably.
    pub fn observer_mut(&mut self) -> &mut O {
        &mut self.obs
    }

    /// Sets the one-line command printed with a failure to replay this run.
    pub fn set_replay(&mut self, cmd: impl Into<String>) {
        self.world.replay = cmd.into();
    }

    /// Writes one line per event to `sink`.
    pub fn set_trace(&mut self, sink: impl FnMut(&str) + 'static) {
        self.world.trace = Some(Box::new(sink));
    }

    /// Calls `f` every `every` steps (for progress bars on long runs).
    pub fn set_progress(&mut self, every: u64, f: impl FnMut(&World) + 'static) {
        self.progress = Some((every.max(1), Box::new(f)));
    }

    /// Installs a scenario's [`Hooks`] (trace sink and progress callback), if set.
    pub fn set_hooks(&mut self, hooks: Hooks) {
        if let Some(t) = hooks.trace {
            self.world.trace = Some(t);
        }
        if let Some(f) = hooks.progress {
            self.progress = Some((hooks.progress_every.max(1), f));
        }
    }

    /// Runs `f` on a live, unpaused node (an application command) and drains its outputs.
    /// Returns `None` if the node crashed or is paused.
    pub fn command<R>(&mut self, rank: Rank, f: impl FnOnce(&mut Node, Instant) -> R) -> Option<R> {
        let now = self.world.now;
        let slot = self.world.slots.get_mut(rank.index())?;
        if slot.state != SlotState::Live {
            return None;
        }
        let r = f(slot.node.as_mut()?, now);
        self.drain(rank.0);
        Some(r)
    }

    /// Schedules a fault at virtual time `at`.
    pub fn schedule(&mut self, at: Instant, fault: Fault) {
        self.world.push(at, SimEvent::Fault(fault));
    }

    /// Applies a fault now.
    pub fn apply(&mut self, fault: Fault) {
        let now = self.world.now;
        self.world.trace_line(|| format!("fault    {fault:?}"));
        match fault {
            Fault::Crash(r) => self.crash(r.0),
            Fault::Pause(r) => {
                if let Some(s) = self.world.slots.get_mut(r.index()) {
                    if s.state == SlotState::Live {
                        s.state = SlotState::Paused;
                    }
                }
            }
            Fault::Resume(r) => self.resume(r.0),
            Fault::CutOneWay(a, b) => self.cut(a.0, b.0, false),
            Fault::Cut(a, b) => self.cut(a.0, b.0, true),
            Fault::Partition(groups) => {
                for (g, members) in groups.iter().enumerate() {
                    for r in members {
                        self.world.net.set_group(r.0, g as u32 + 1);
                    }
                }
                let gen = self.world.net.cut_gen;
                let at = now + self.world.cfg.net.cut_timeout;
                // Every established link that now crosses groups times out unless healed.
                for a in 0..self.world.span() {
                    for b in self.world.net.peers(a) {
                        if a < b && self.world.net.blocked(a, b) {
                            self.world.push(at, SimEvent::CutTimeout { a, b, gen });
                        }
                    }
                }
            }
            Fault::Heal => self.heal(),
            Fault::RefuseDials { from, to } => self.refuse_dials(from.0, to.0),
            Fault::Lossy {
                rank,
                pct,
                duration,
            } => self.world.net.set_lossy(rank.0, pct, now + duration),
        }
    }

    /// Heals the network and resumes every paused node: the start of a liveness phase.
    pub fn heal_all(&mut self) {
        self.apply(Fault::Heal);
        for r in 0..self.world.span() {
            if self.world.is_paused(Rank(r)) {
                self.apply(Fault::Resume(Rank(r)));
            }
        }
    }

    /// Grows the span to `new_span`: every node learns the new span, and each new rank starts
    /// from the dead set of the lowest live rank (the snapshot a joiner receives).
    pub fn join(&mut self, new_span: u32) -> Result<(), crate::ConfigError> {
        let old = self.world.span();
        if new_span <= old {
            return Ok(());
        }
        let dead = self
            .world
            .live_ranks()
            .find_map(|r| self.world.node(r).map(|n| n.tree().dead().clone()))
            .unwrap_or_default();
        let mut cfg = self.world.cfg.node.clone();
        cfg.span = new_span;
        cfg.dead = dead;
        cfg.joiner = true;
        let now = self.world.now;
        let cfg = Arc::new(cfg);
        let mut new_nodes = Vec::new();
        for r in old..new_span {
            new_nodes.push(Node::with_shared_config(
                Arc::clone(&cfg),
                Rank(r),
                node_seed(self.world.cfg.seed, r),
                now,
            )?);
        }
        self.world.cfg.node.span = new_span;
        // The new processes exist before anyone learns of them, so the adoption notices and
        // replays the grow triggers reach them.
        self.world.net.grow(new_span as usize);
        let first_new = self.world.slots.len() as u32;
        for n in new_nodes {
            self.world.slots.push(Slot {
                node: Some(n),
                state: SlotState::Live,
                wake: None,
                held: Vec::new(),
            });
        }
        self.world
            .trace_line(|| format!("join     span {old} -> {new_span}"));
        for r in (0..first_new).map(Rank).collect::<Vec<_>>() {
            let Some(slot) = self.world.slots.get_mut(r.index()) else {
                continue;
            };
            match slot.state {
                SlotState::Crashed | SlotState::Pending => {}
                // A frozen process learns of the grow when it thaws, before its backlog.
                SlotState::Paused => slot.held.insert(
                    0,
                    SimEvent::Grow {
                        rank: r.0,
                        span: new_span,
                    },
                ),
                SlotState::Live => {
                    self.command(r, |n, now| n.grow(now, new_span));
                }
            }
        }
        for r in old..new_span {
            wire_node(&mut self.world, r);
            self.drain(r);
        }
        Ok(())
    }

    /// Processes one queue entry, then runs the observer's checks. `Ok(false)` when the queue
    /// is empty.
    pub fn step(&mut self) -> Result<bool, SimFailure> {
        let Some(Reverse(e)) = self.world.queue.pop() else {
            return Ok(false);
        };
        if e.at > self.world.now {
            self.world.now = e.at;
        }
        self.world.stats.steps += 1;
        self.process(e.ev);
        self.obs.check(&self.world).map_err(|r| self.failure(r))?;
        if let Some((every, f)) = self.progress.as_mut() {
            if self.world.stats.steps % *every == 0 {
                f(&self.world);
            }
        }
        Ok(true)
    }

    /// Runs every entry due up to `t`, then sets the clock to `t`.
    /// More than [`SimConfig::step_budget`] steps is a failure (a livelock), not a hang.
    pub fn run_until(&mut self, t: Instant) -> Result<(), SimFailure> {
        let start = self.world.stats.steps;
        while self.world.queue.peek().is_some_and(|Reverse(e)| e.at <= t) {
            self.step()?;
            if self.world.stats.steps - start > self.world.cfg.step_budget {
                return Err(self.failure(format!(
                    "livelock: more than {} steps before t={t}",
                    self.world.cfg.step_budget
                )));
            }
        }
        if t > self.world.now {
            self.world.now = t;
        }
        Ok(())
    }

    /// Runs until the queue is empty; fails if that takes more than `budget` steps.
    pub fn run_until_quiet(&mut self, budget: u64) -> Result<u64, SimFailure> {
        let start = self.world.stats.steps;
        while self.step()? {
            if self.world.stats.steps - start > budget {
                return Err(self.failure(format!("not quiet within {budget} steps")));
            }
        }
        Ok(self.world.stats.steps - start)
    }

    /// Runs until `done` holds (checked after every step); fails if the queue empties first or
    /// the budget runs out.
    pub fn run_until_pred(
        &mut self,
        budget: u64,
        mut done: impl FnMut(&World, &O) -> bool,
    ) -> Result<u64, SimFailure> {
        let start = self.world.stats.steps;
        while !done(&self.world, &self.obs) {
            if !self.step()? {
                return Err(self.failure("queue empty before convergence".into()));
            }
            if self.world.stats.steps - start > budget {
                return Err(self.failure(format!("did not converge within {budget} steps")));
            }
        }
        Ok(self.world.stats.steps - start)
    }

    /// Runs in steps of `every` of simulated time from now until `done` holds (checked after
    /// each step) or `limit` is reached; returns the time it stopped at. Checking a costly
    /// condition every few milliseconds instead of after every event.
    pub fn run_checking(
        &mut self,
        every: Duration,
        limit: Instant,
        mut done: impl FnMut(&World, &O) -> bool,
    ) -> Result<Instant, SimFailure> {
        let mut now = self.world.now;
        while now < limit && !done(&self.world, &self.obs) {
            now = (now + every).min(limit);
            self.run_until(now)?;
        }
        Ok(now)
    }

    /// A failure at the current step (for scenario-level checks).
    pub fn failure(&self, reason: String) -> SimFailure {
        SimFailure {
            seed: self.world.cfg.seed,
            step: self.world.stats.steps,
            now: self.world.now,
            reason,
            replay: self.world.replay.clone(),
        }
    }

    // ---- internals ----

    fn process(&mut self, ev: SimEvent) {
        match ev {
            SimEvent::Deliver {
                to,
                from,
                class,
                frame,
            } => {
                let Some(slot) = self.world.slots.get_mut(to as usize) else {
                    return;
                };
                match slot.state {
                    SlotState::Crashed => {
                        self.world.stats.frames_lost += 1;
                        self.world
                            .trace_line(|| format!("lost     {from}->{to} (crashed)"));
                    }
                    SlotState::Paused | SlotState::Pending => slot.held.push(SimEvent::Deliver {
                        to,
                        from,
                        class,
                        frame,
                    }),
                    SlotState::Live => {
                        self.world
                            .trace_line(|| format!("deliver  {from}->{to} {}", describe(&frame)));
                        self.world.stats.frames_delivered += 1;
                        let now = self.world.now;
                        if let Some(n) = self.world.slots[to as usize].node.as_mut() {
                            let from = Rank(from);
                            testing::Input::Frame { from, frame }.apply(n, now);
                        }
                        self.drain(to);
                    }
                }
            }
            SimEvent::Wake(r) => {
                let now = self.world.now;
                let Some(slot) = self.world.slots.get_mut(r as usize) else {
                    return;
                };
                if slot.state != SlotState::Live || slot.wake.is_none_or(|w| w > now) {
                    return;
                }
                slot.wake = None;
                let due = slot
                    .node
                    .as_ref()
                    .and_then(Node::poll_timeout)
                    .is_some_and(|(at, _)| at <= now);
                if due {
                    self.world.stats.timeouts += 1;
                    self.world.trace_line(|| format!("timeout  {r}"));
                    if let Some(n) = self.world.slots[r as usize].node.as_mut() {
                        testing::Input::Timeout.apply(n, now);
                    }
                }
                self.drain(r);
            }
            SimEvent::LinkDown { rank, peer, cause } => {
                let Some(slot) = self.world.slots.get_mut(rank as usize) else {
                    return;
                };
                match slot.state {
                    SlotState::Crashed => {}
                    SlotState::Paused | SlotState::Pending => {
                        slot.held.push(SimEvent::LinkDown { rank, peer, cause })
                    }
                    SlotState::Live => {
                        self.world.stats.link_downs += 1;
                        self.world
                            .trace_line(|| format!("linkdown {rank} x {peer}"));
                        let now = self.world.now;
                        if let Some(n) = self.world.slots[rank as usize].node.as_mut() {
                            let peer = Rank(peer);
                            testing::Input::LinkDown { peer, cause }.apply(n, now);
                        }
                        self.drain(rank);
                    }
                }
            }
            SimEvent::CutTimeout { a, b, gen } => {
                if gen != self.world.net.cut_gen
                    || !(self.world.net.blocked(a, b) || self.world.net.blocked(b, a))
                {
                    return;
                }
                if self.world.net.unlink(a, b) {
                    for k in [(a, b), (b, a)] {
                        if let Some(q) = self.world.net.stalled.remove(&k) {
                            self.world.stats.frames_lost += q.len() as u64;
                        }
                    }
                    let now = self.world.now;
                    self.world
                        .trace_line(|| format!("timeout  link {a}-{b} (cut too long)"));
                    // TCP's user timeout: soft evidence.
                    for (rank, peer) in [(a, b), (b, a)] {
                        let cause = LinkCause::TimedOut;
                        self.world
                            .push(now, SimEvent::LinkDown { rank, peer, cause });
                    }
                }
            }
            SimEvent::Fault(f) => self.apply(f),
            SimEvent::Grow { rank, span } => {
                let held = match self.world.slots.get_mut(rank as usize) {
                    Some(slot) if slot.state == SlotState::Paused => {
                        slot.held.push(SimEvent::Grow { rank, span });
                        true
                    }
                    _ => false,
                };
                if !held {
                    self.command(Rank(rank), |n, now| n.grow(now, span));
                }
            }
            SimEvent::Start(r) => self.late_start(r),
            SimEvent::JoinerStart(i) => self.joiner_start(i),
            SimEvent::JoinerWake(i) => self.joiner_wake(i),
            SimEvent::JoinRequest { to, conn, bytes } => self.join_request_arrives(to, conn, bytes),
            SimEvent::JoinReply { conn, bytes } => self.join_reply_arrives(conn, bytes),
            SimEvent::JoinConnFailed(conn) => self.join_conn_failed(conn),
        }
    }

    /// Drains a node's outputs into the network and the observer, and schedules its wake-up.
    fn drain(&mut self, r: u32) {
        let w = &mut self.world;
        let Some(node) = w.slots.get_mut(r as usize).and_then(|s| s.node.as_mut()) else {
            return;
        };
        let now = w.now;
        // The per-node step the test harness shares (`testing::drain`).
        let testing::Outputs {
            transmits: sends,
            events,
            timeout,
        } = testing::drain(node);
        let replies: Vec<_> = std::iter::from_fn(|| node.poll_join_reply()).collect();
        let next = timeout.map(|(at, _)| at.max(now));
        if let Some(span) = joiners::admitted_span(&events) {
            self.world.ensure_slots(span);
        }
        if !replies.is_empty() {
            self.send_join_replies(replies);
        }
        for t in sends {
            self.send(r, t.to.0, t.class, t.frame);
        }
        let departed: Vec<u32> = events
            .iter()
            .filter_map(|e| match e {
                Event::Membership(crate::membership::MembershipEvent::Departed {
                    ranks, ..
                }) => Some(ranks.iter().map(|t| t.0).collect::<Vec<_>>()),
                _ => None,
            })
            .flatten()
            .collect();
        for t in departed {
            self.close_departed(r, t);
        }
        let left = events.iter().any(|e| {
            matches!(
                e,
                Event::Membership(crate::membership::MembershipEvent::Left { .. })
            )
        });
        if left {
            // A target that left exits: its connections close (it stays inspectable here).
            for p in self.world.net.peers(r) {
                self.close_departed(r, p);
            }
        }
        for e in events {
            self.world.stats.events += 1;
            self.world
                .trace_line(|| format!("event    {r} {}", describe_event(&e)));
            self.obs.on_event(&self.world, Rank(r), &e);
        }
        if let Some(at) = next {
            let slot = &mut self.world.slots[r as usize];
            if slot.wake.is_none_or(|w| at < w) {
                slot.wake = Some(at);
                self.world.push(at, SimEvent::Wake(r));
            }
        }
    }

    fn send(&mut self, from: u32, to: u32, class: Class, frame: Bytes) {
        let w = &mut self.world;
        let now = w.now;
        if to as usize >= w.slots.len() {
            w.stats.frames_lost += 1;
            return;
        }
        if !w.net.linked(from, to) {
            // A dial: it succeeds unless the peer crashed or refuses this dialer, in which case
            // it fails after the delay.
            if w.slots[to as usize].state == SlotState::Crashed || w.net.refuses(from, to) {
                w.stats.frames_lost += 1;
                let at = now + w.cfg.net.link_down_delay;
                w.push(
                    at,
                    SimEvent::LinkDown {
                        rank: from,
                        peer: to,
                        cause: LinkCause::Refused,
                    },
                );
                return;
            }
            w.net.link(from, to);
            for (a, b) in [(from, to), (to, from)] {
                if let Some(n) = w.slots[a as usize].node.as_mut() {
                    n.handle_link_up(now, Rank(b));
                }
            }
        }
        if w.net.blocked(from, to) {
            w.stats.frames_stalled += 1;
            w.net
                .stalled
                .entry((from, to))
                .or_default()
                .push_back(Stalled { class, frame });
            return;
        }
        let pct = w.net.loss_pct(now, from, to);
        let (lost, extra) = if pct > 0 {
            Net::retransmissions(&w.cfg.net, &mut w.loss_rng, pct)
        } else {
            (0, crate::time::Duration::ZERO)
        };
        if lost > 0 {
            w.stats.frames_retransmitted += u64::from(lost);
            w.trace_line(|| format!("lost     {from}->{to} {lost} times: {extra} late"));
        }
        let at = w
            .net
            .arrival(&w.cfg.net, &mut w.rng, now, (from, to), extra);
        w.push(
            at,
            SimEvent::Deliver {
                to,
                from,
                class,
                frame,
            },
        );
    }

    fn crash(&mut self, r: u32) {
        let Some(slot) = self.world.slots.get_mut(r as usize) else {
            return;
        };
        if slot.state == SlotState::Crashed {
            return;
        }
        slot.state = SlotState::Crashed;
        slot.node = None;
        slot.held = Vec::new();
        slot.wake = None;
        self.fail_join_conns_of(r);
        let at = self.world.now + self.world.cfg.net.link_down_delay;
        for p in self.world.net.peers(r) {
            self.world.net.unlink(r, p);
            // A killed process on a live host: reset, and the re-dial is refused (hard).
            let cause = LinkCause::Refused;
            self.world.push(
                at,
                SimEvent::LinkDown {
                    rank: p,
                    peer: r,
                    cause,
                },
            );
        }
    }

    /// `r`'s adapter closes its link to `t` (a survivor to a departed shrink target: the active
    /// close; or a target that left, to each peer): `t` sees the connection close.
    fn close_departed(&mut self, r: u32, t: u32) {
        if !self.world.net.unlink(r, t) {
            return;
        }
        let at = self.world.now + self.world.cfg.net.link_down_delay;
        let cause = LinkCause::Closed;
        self.world.push(
            at,
            SimEvent::LinkDown {
                rank: t,
                peer: r,
                cause,
            },
        );
    }

    fn refuse_dials(&mut self, from: u32, to: u32) {
        self.world.net.refuse(from, to);
        if self.world.net.unlink(from, to) {
            let at = self.world.now + self.world.cfg.net.link_down_delay;
            for (rank, peer, cause) in
                [(from, to, LinkCause::Refused), (to, from, LinkCause::Reset)]
            {
                self.world
                    .push(at, SimEvent::LinkDown { rank, peer, cause });
            }
        }
    }

    fn resume(&mut self, r: u32) {
        let now = self.world.now;
        let Some(slot) = self.world.slots.get_mut(r as usize) else {
            return;
        };
        if slot.state != SlotState::Paused {
            return;
        }
        slot.state = SlotState::Live;
        let held = std::mem::take(&mut slot.held);
        slot.wake = None;
        for ev in held {
            self.world.push(now, ev);
        }
        // Overdue timers fire late, after the backlog queued above.
        self.drain(r);
    }

    fn cut(&mut self, a: u32, b: u32, both: bool) {
        self.world.net.cut(a, b);
        if both {
            self.world.net.cut(b, a);
        }
        if self.world.net.linked(a, b) {
            let at = self.world.now + self.world.cfg.net.cut_timeout;
            let gen = self.world.net.cut_gen;
            self.world.push(at, SimEvent::CutTimeout { a, b, gen });
        }
    }

    fn heal(&mut self) {
        let stalled = self.world.net.heal();
        for ((from, to), q) in stalled {
            for s in q {
                self.send(from, to, s.class, s.frame);
            }
        }
    }
}

/// Links `r` with its tree neighbours (both ends told), as adapters do at wire-up.
fn wire_node(w: &mut World, r: u32) {
    let now = w.now;
    let Some(view) = w.slots[r as usize]
        .node
        .as_ref()
        .and_then(|n| n.tree().view().cloned())
    else {
        return;
    };
    for p in view.parent().into_iter().chain(view.live_children()) {
        if w.slots.get(p.index()).is_some_and(|s| s.node.is_some()) && w.net.link(r, p.0) {
            for (a, b) in [(r, p.0), (p.0, r)] {
                if let Some(n) = w.slots[a as usize].node.as_mut() {
                    n.handle_link_up(now, Rank(b));
                }
            }
        }
    }
}
