//! `Node`: one rank's protocol state, composing the sub-machines behind one driving contract.
//!
//! See the crate documentation for the contract. Internally the node owns every sub-machine by
//! value; they never call each other. An input goes to exactly one machine (frames are
//! demultiplexed by the envelope's kind), and the node translates between machines: a link-down
//! on a tree link becomes a tree repair, and the repair's [`ViewDelta`] is handed on.

use std::collections::BTreeSet;

use bytes::Bytes;

use crate::config::{Config, ConfigError};
use crate::event::Event;
use crate::flood::Flood;
use crate::outbox::{Class, Outbox, Transmit};
use crate::rng::Rng;
use crate::stats::Stats;
use crate::time::Instant;
use crate::timer::{TimerReason, Timers};
use crate::tree::{LinkRole, Rank, RankSet, Scope, Tree, TreeError, ViewDelta};
use crate::wire::{DecodeError, Limits, Message};

/// Why an application command was refused. A refused command changes nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CommandError {
    /// This rank is known dead (evicted); it must stop.
    #[error("this rank is dead and takes no commands")]
    Dead,
    /// The payload would make a frame over `max_frame`.
    #[error("payload of {len} bytes makes a frame over max_frame {max}")]
    TooLarge {
        /// Payload bytes.
        len: usize,
        /// The configured limit.
        max: u32,
    },
    /// A tree operation was refused.
    #[error(transparent)]
    Tree(#[from] TreeError),
}

/// What a sub-machine may touch while handling one input: read-only context, the outbox, the
/// timers and the counters. Never another machine.
pub(crate) struct Ctx<'a> {
    pub(crate) now: Instant,
    pub(crate) cfg: &'a Config,
    pub(crate) tree: &'a Tree,
    pub(crate) out: &'a mut Outbox,
    pub(crate) timers: &'a mut Timers,
    pub(crate) stats: &'a mut Stats,
}

impl Ctx<'_> {
    pub(crate) fn me(&self) -> Rank {
        self.tree.me()
    }

    /// Queues a frame; a rank known dead is never dialled, and a full queue is counted.
    pub(crate) fn send_frame(&mut self, to: Rank, class: Class, frame: Bytes) {
        if !self.tree.is_alive(to) {
            self.stats.suppressed_to_dead += 1;
            return;
        }
        if self
            .out
            .push_transmit(Transmit { to, class, frame }, self.cfg.max_transmits)
        {
            self.stats.frames_out += 1;
        } else {
            self.stats.dropped_outbox_full += 1;
        }
    }

    pub(crate) fn event(&mut self, e: Event) {
        if !self.out.push_event(e, self.cfg.max_events) {
            self.stats.dropped_events_full += 1;
        }
    }
}

/// Builds a [`Ctx`] from the node's shared parts, leaving the machines free to borrow mutably.
macro_rules! ctx {
    ($node:ident) => {
        Ctx {
            now: $node.now,
            cfg: &$node.cfg,
            tree: &$node.tree,
            out: &mut $node.out,
            timers: &mut $node.timers,
            stats: &mut $node.stats,
        }
    };
}

/// One rank of a Lifeline overlay: a pure, poll-driven state machine.
///
/// Construct with [`Node::new`], feed inputs (`handle_*` and commands), and after every input
/// drain [`Node::poll_transmit`] and [`Node::poll_event`] until they return `None`, then arm one
/// timer at [`Node::poll_timeout`]. See the crate documentation for the full contract.
#[derive(Debug)]
pub struct Node {
    cfg: Config,
    limits: Limits,
    now: Instant,
    rng: Rng,
    tree: Tree,
    flood: Flood,
    links: BTreeSet<Rank>,
    timers: Timers,
    out: Outbox,
    stats: Stats,
}

impl Node {
    /// A node for rank `me`. `seed` drives all of its randomness; `now` is the driver's
    /// current time. An invalid configuration, or a rank outside the span or listed dead, is an
    /// error.
    pub fn new(mut config: Config, me: Rank, seed: u64, now: Instant) -> Result<Self, ConfigError> {
        let layout = config.validate()?;
        if !layout.contains(me) {
            return Err(ConfigError::MeOutOfRange {
                rank: me,
                span: config.span,
            });
        }
        if config.dead.contains(me) {
            return Err(ConfigError::MeDead(me));
        }
        let dead = std::mem::take(&mut config.dead);
        let tree = Tree::with_dead(layout, dead, me).map_err(|_| ConfigError::MeDead(me))?;
        Ok(Self {
            limits: config.limits(),
            cfg: config,
            now,
            rng: Rng::new(seed),
            tree,
            flood: Flood::default(),
            links: BTreeSet::new(),
            timers: Timers::default(),
            out: Outbox::default(),
            stats: Stats::default(),
        })
    }

    /// This node's rank.
    pub fn me(&self) -> Rank {
        self.tree.me()
    }

    /// The routing tree (dead set and current view).
    pub fn tree(&self) -> &Tree {
        &self.tree
    }

    /// The counters.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// The latest time the node has seen (inputs with an earlier `now` are clamped to it).
    pub fn now(&self) -> Instant {
        self.now
    }

    /// Peers whose link the driver reported up and not since down, ascending.
    pub fn links(&self) -> impl Iterator<Item = Rank> + '_ {
        self.links.iter().copied()
    }

    /// The configuration (its `dead` field is empty: the dead set lives in [`Self::tree`]).
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// A value from the node's seeded generator (for drivers that need node-scoped randomness
    /// in tests; sub-machines fork their own).
    pub fn random_u64(&mut self) -> u64 {
        self.rng.next_u64()
    }

    fn clamp(&mut self, now: Instant) -> Instant {
        if now > self.now {
            self.now = now;
        }
        self.now
    }

    // ---- inputs ----

    /// One whole frame received from `from`. Frames from ranks outside the span or known dead,
    /// frames over `max_frame`, and frames that fail to decode are dropped and counted; nothing
    /// changes before a frame has decoded completely. Never panics, never returns an error: a
    /// peer's mistake is not the application's.
    pub fn handle_frame(&mut self, now: Instant, from: Rank, frame: Bytes) {
        self.clamp(now);
        if !self.tree.layout().contains(from) {
            self.stats.dropped_unknown_peer += 1;
            return;
        }
        if self.tree.dead().contains(from) {
            self.stats.dropped_stale_sender += 1;
            return;
        }
        let msg = match Message::decode(frame, &self.limits) {
            Ok(m) => m,
            Err(e) => {
                match e {
                    DecodeError::UnknownKind(_) => self.stats.dropped_unknown_kind += 1,
                    DecodeError::TooLong { .. } => self.stats.dropped_over_limit += 1,
                    _ => self.stats.dropped_decode_error += 1,
                }
                return;
            }
        };
        self.stats.frames_in += 1;
        match msg {
            Message::Flood(m) => {
                self.flood.handle(&mut ctx!(self), from, m);
            }
        }
    }

    /// The driver established a link (both traffic classes) to `peer`.
    pub fn handle_link_up(&mut self, now: Instant, peer: Rank) {
        self.clamp(now);
        if !self.tree.layout().contains(peer) {
            self.stats.dropped_unknown_peer += 1;
        } else if self.tree.is_alive(peer) {
            self.links.insert(peer);
        } else {
            self.stats.dropped_stale_sender += 1;
        }
    }

    /// The driver lost the link to `peer` (reset, timeout, refused reconnect). A lost tree link
    /// means the peer is presumed dead and the tree is repaired at once; a lateral link's loss
    /// never triggers a repair.
    pub fn handle_link_down(&mut self, now: Instant, peer: Rank) {
        self.clamp(now);
        self.links.remove(&peer);
        if !self.tree.layout().contains(peer) {
            self.stats.dropped_unknown_peer += 1;
            return;
        }
        match self.tree.link_role(peer) {
            LinkRole::Lateral => self.stats.lateral_link_downs += 1,
            LinkRole::Parent | LinkRole::Child(_) => self.mark_dead(&[peer], Scope::Local),
        }
    }

    /// The deadline from [`Self::poll_timeout`] passed. Runs every timer due at `now`; calling it
    /// early, late or twice is harmless (nothing due is a counted no-op).
    pub fn handle_timeout(&mut self, now: Instant) {
        let now = self.clamp(now);
        let mut fired = false;
        while let Some((key, token)) = self.timers.pop_due(now) {
            fired = true;
            match key.reason() {
                TimerReason::Flood => {
                    self.flood.on_timeout(&mut ctx!(self), token);
                }
            }
        }
        if !fired {
            self.stats.spurious_timeouts += 1;
        }
    }

    // ---- commands ----

    /// Starts a flood (the test protocol) from this rank; it is delivered here too. Returns
    /// its id.
    pub fn flood(&mut self, now: Instant, payload: Bytes) -> Result<u64, CommandError> {
        self.clamp(now);
        if self.tree.view().is_none() {
            return Err(CommandError::Dead);
        }
        let frame = 6 + 18 + payload.len();
        if frame > self.cfg.max_frame as usize {
            return Err(CommandError::TooLarge {
                len: payload.len(),
                max: self.cfg.max_frame,
            });
        }
        Ok(self.flood.start(&mut ctx!(self), payload))
    }

    /// Grows the span to `new_span` (new ranks joined; holes stay holes).
    pub fn handle_grow(&mut self, now: Instant, new_span: u32) -> Result<(), CommandError> {
        self.clamp(now);
        let delta = self.tree.grow(new_span)?;
        self.on_view_change(delta);
        Ok(())
    }

    /// Records deaths learned out of band (e.g. from the embedding runtime) and repairs once.
    pub fn handle_dead(&mut self, now: Instant, ranks: &RankSet) -> Result<(), CommandError> {
        self.clamp(now);
        let v: Vec<Rank> = ranks.iter().collect();
        let delta = self.tree.mark_dead(&v, Scope::Global)?;
        self.on_view_change(delta);
        Ok(())
    }

    fn mark_dead(&mut self, ranks: &[Rank], scope: Scope) {
        match self.tree.mark_dead(ranks, scope) {
            Ok(delta) => self.on_view_change(delta),
            Err(_) => self.stats.dropped_unknown_peer += 1,
        }
    }

    fn on_view_change(&mut self, delta: Option<ViewDelta>) {
        if let Some(d) = delta {
            for r in self
                .tree
                .dead()
                .iter()
                .filter(|r| self.links.contains(r))
                .collect::<Vec<_>>()
            {
                self.links.remove(&r);
            }
            ctx!(self).event(Event::ViewChanged(d));
        }
    }

    // ---- outputs ----

    /// The next frame to send, in the order produced. Drain until `None` after every input.
    ///
    /// A frame queued to a rank that became known dead before it was drained is discarded here
    /// (counted in `suppressed_to_dead`), so no transmit is ever addressed to a rank known dead.
    #[must_use]
    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        while let Some(t) = self.out.pop_transmit() {
            if self.tree.is_alive(t.to) {
                return Some(t);
            }
            self.stats.suppressed_to_dead += 1;
        }
        None
    }

    /// The next application event. Drain until `None` after every input.
    #[must_use]
    pub fn poll_event(&mut self) -> Option<Event> {
        self.out.pop_event()
    }

    /// The earliest deadline at which [`Self::handle_timeout`] must be called, and the machine
    /// that asked for it; `None` when nothing is armed.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<(Instant, TimerReason)> {
        self.timers.next().map(|(at, k)| (at, k.reason()))
    }

    /// Whether outputs are waiting to be drained.
    pub fn has_output(&self) -> bool {
        !self.out.is_empty()
    }

    /// Armed timers and remembered protocol state, for leak checks in tests and the simulator.
    pub fn pending_state(&self) -> usize {
        self.timers.len() + self.flood.remembered()
    }
}
