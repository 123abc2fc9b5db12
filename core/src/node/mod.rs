//! `Node`: one rank's protocol state, composing the protocol machines behind one driving
//! contract.
//!
//! See the crate documentation for the contract. The node owns every machine by value and no
//! machine's state: it routes each input to exactly one machine ([`dispatch`]: frames by their
//! message family, timers by their key) and translates machines' typed effects into other
//! machines' inputs in one place and one order ([`route`]).

use std::collections::BTreeSet;
use std::sync::Arc;

use bytes::Bytes;

use crate::config::{Config, ConfigError};
use crate::error::CommandError;
use crate::event::Event;
use crate::flood::FloodMsg;
use crate::link::LinkCause;
use crate::machine::{Ctx, Effect};
use crate::membership::RemovalCause;
use crate::outbox::{Outbox, Transmit};
use crate::relm::Uid;
use crate::rng::Rng;
use crate::stats::Stats;
use crate::time::Instant;
use crate::timer::{TimerKey, Timers};
use crate::tree::{LinkRole, Rank, RankSet, Scope, Tree, TreeError};
use crate::wire::{Limits, Message};
use crate::xcast::{self, XcastError};

mod dispatch;
#[cfg(test)]
mod footprint;
mod route;

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
            effects: &mut $node.effects,
        }
    };
}

/// Calls one machine's method with a fresh [`Ctx`], then applies the effects it pushed
/// (depth-first, in push order: see [`route`]).
macro_rules! run {
    ($node:ident, $machine:ident . $method:ident ( $($arg:expr),* $(,)? )) => {{
        let r = $node.m.$machine.$method(&mut ctx!($node), $($arg),*);
        $node.apply_effects();
        r
    }};
}
use {ctx, run};

/// Most timers run per `handle_timeout` call; the rest run on the next call.
const MAX_TIMERS_PER_CALL: usize = 4096;

/// One rank of a Lifeline overlay: a pure, poll-driven state machine.
///
/// Construct with [`Node::new`], feed inputs (`handle_*` and commands), and after every input
/// drain [`Node::poll_transmit`] and [`Node::poll_event`] until they return `None`, then arm one
/// timer at [`Node::poll_timeout`]. See the crate documentation for the full contract.
#[derive(Debug)]
pub struct Node {
    /// Shared with other nodes of the process where the caller shares it; never mutated.
    cfg: Arc<Config>,
    limits: Limits,
    now: Instant,
    rng: Rng,
    tree: Tree,
    /// Every protocol machine (the table in `dispatch.rs`).
    pub(crate) m: dispatch::Machines,
    /// Peers whose link the driver reported up (the driver's state, mirrored for inspection).
    links: BTreeSet<Rank>,
    timers: Timers,
    out: Outbox,
    stats: Stats,
    /// Effects pushed by the machine call in progress (empty between calls).
    effects: Vec<Effect>,
}

impl Node {
    /// A node for rank `me`. `seed` drives all of its randomness; `now` is the driver's
    /// current time. An invalid configuration, or a rank outside the span or listed dead, is an
    /// error. A joiner (`config.joiner`) starts with adoption notices to its children queued:
    /// drain the outputs once after construction, as after any input.
    pub fn new(config: Config, me: Rank, seed: u64, now: Instant) -> Result<Self, ConfigError> {
        Self::with_shared_config(Arc::new(config), me, seed, now)
    }

    /// [`Self::new`] with a configuration shared by many nodes of one process (a simulator's
    /// or a test's): the node keeps a reference instead of its own copy (~300 bytes a node).
    /// A configuration listing dead ranks is copied once, without them (the dead set lives in
    /// the node's [`Tree`]); one without is never copied.
    pub fn with_shared_config(
        mut config: Arc<Config>,
        me: Rank,
        seed: u64,
        now: Instant,
    ) -> Result<Self, ConfigError> {
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
        let dead = if config.dead.is_empty() {
            RankSet::default()
        } else {
            std::mem::take(&mut Arc::make_mut(&mut config).dead)
        };
        let tree = Tree::with_dead(layout, dead, me).map_err(|_| ConfigError::MeDead(me))?;
        let mut node = Self {
            m: dispatch::Machines::new(&config, me),
            limits: config.limits(),
            cfg: config,
            now,
            rng: Rng::new(seed),
            tree,
            links: BTreeSet::new(),
            timers: Timers::default(),
            out: Outbox::default(),
            stats: Stats::default(),
            effects: Vec::new(),
        };
        node.start_machines();
        Ok(node)
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
        self.dispatch_frame(from, frame);
        self.drive_xcast();
    }

    /// The driver established a link (both traffic classes) to `peer`.
    pub fn handle_link_up(&mut self, now: Instant, peer: Rank) {
        self.clamp(now);
        if !self.tree.layout().contains(peer) {
            self.stats.dropped_unknown_peer += 1;
        } else if self.tree.is_alive(peer) {
            self.links.insert(peer);
            // A late joiner says hello to its parent as soon as it can reach it.
            if self.cfg.joiner && self.tree.view().and_then(|v| v.parent()) == Some(peer) {
                run!(self, membership.say_hello());
            }
        } else {
            self.stats.dropped_stale_sender += 1;
        }
    }

    /// The driver lost the link to `peer` (reset, timeout, refused reconnect).
    ///
    /// What the loss means depends on its `cause`. With the heartbeat detector on
    /// (`detect.enabled`), only hard evidence ([`LinkCause::is_hard`]: a refused fresh dial,
    /// another incarnation) marks the peer dead at once, on a tree link or a lateral one (the
    /// tree is repaired and the parent told); a reset, timeout or close is counted in
    /// `soft_link_downs` (the peer's observers and the coordinator decide) and, for the
    /// parent's link, answered with a hello that re-establishes it and re-syncs this rank.
    /// With the detector off, any loss of a tree link repairs (the link is the only detector)
    /// and a lateral link's loss never does.
    pub fn handle_link_down(&mut self, now: Instant, peer: Rank, cause: LinkCause) {
        self.clamp(now);
        self.links.remove(&peer);
        if !self.tree.layout().contains(peer) {
            self.stats.dropped_unknown_peer += 1;
            return;
        }
        if self.tree.dead().contains(peer) {
            return; // already known: an echo of the repair
        }
        if self.cfg.detect.enabled && !cause.is_hard() {
            self.stats.soft_link_downs += 1;
            // The link is wanted back: a hello to the parent asks the driver to reconnect, and
            // once it gets through, the parent re-syncs this rank (watermarks and re-polls), so
            // broadcasts lost with the connection are delivered after the heal.
            let role = self.tree.link_role(peer);
            if role == LinkRole::Parent {
                run!(self, membership.say_hello());
            }
            // A tree link that stays down with both ends alive is a gray failure: after
            // `membership.gray_timeout` one endpoint is removed.
            if role != LinkRole::Lateral {
                run!(self, membership.on_tree_link_down(peer));
            }
            return;
        }
        match self.tree.link_role(peer) {
            // Without the detector a lateral link is no detector; with it, hard evidence is
            // true on any link: a rank sending evidence to a coordinator that is gone learns
            // it here (and tells its parent), or its evidence would go on to the dead rank.
            LinkRole::Lateral if !self.cfg.detect.enabled => self.stats.lateral_link_downs += 1,
            LinkRole::Lateral | LinkRole::Parent | LinkRole::Child(_) => {
                self.learn_deaths(&[peer], Scope::Local);
                self.drive_xcast();
            }
        }
    }

    /// `by` refused this rank's dial with the verdict "you were removed" as of `epoch` (a
    /// transport's handshake answer; see [`Self::fence_verdict`]). The same news as a fencing
    /// notice: this rank gets [`MembershipEvent::Evicted`](crate::membership::MembershipEvent::Evicted)
    /// once, and takes no more commands or frames. Heard only with the detector on (as fencing
    /// notices are); from a rank outside the span it is dropped and counted.
    pub fn handle_fenced(&mut self, now: Instant, by: Rank, epoch: u64) {
        self.clamp(now);
        if !self.tree.layout().contains(by) {
            self.stats.dropped_unknown_peer += 1;
            return;
        }
        if self.tree.view().is_none() {
            self.stats.dropped_self_dead += 1;
            return;
        }
        if !self.cfg.detect.enabled {
            self.stats.membership.stale += 1;
            return;
        }
        run!(self, membership.on_fenced(epoch));
        self.drive_xcast();
    }

    /// An authenticated dial from `peer` arrived that the link policy refuses because `peer`
    /// is dead here. Returns `Some(epoch)` when the adapter must answer "you were removed as of
    /// `epoch`" instead of a plain refusal: the detector is on, this rank is a member, and the
    /// coordinator's decision removed `peer` (confirmed, not merely inferred dead here). The
    /// dialer's adapter feeds the answer to [`Self::handle_fenced`]. This is how a removed rank
    /// that was paused or cut off learns its fate: adapters never dial a removed rank, and its
    /// old connections were closed when it was removed. Counted in `membership.evicted_sent`.
    pub fn fence_verdict(&mut self, now: Instant, peer: Rank) -> Option<u64> {
        self.clamp(now);
        if !self.tree.layout().contains(peer) {
            return None;
        }
        run!(self, membership.fence_verdict(peer))
    }

    /// The deadline from [`Self::poll_timeout`] passed. Runs every timer due at `now`; calling it
    /// early, late or twice is harmless (nothing due is a counted no-op).
    pub fn handle_timeout(&mut self, now: Instant) {
        let now = self.clamp(now);
        let mut fired = 0usize;
        // Bounded: a machine that re-arms at or before `now` cannot spin the node forever.
        while fired < MAX_TIMERS_PER_CALL {
            let Some((key, token)) = self.timers.pop_due(now) else {
                break;
            };
            fired += 1;
            self.dispatch_timer(key, token);
        }
        if fired == 0 {
            self.stats.spurious_timeouts += 1;
        }
        self.drive_xcast();
    }

    // ---- commands ----

    /// Starts a flood (the test protocol) from this rank; it is delivered here too. Returns
    /// its id.
    pub fn flood(&mut self, now: Instant, payload: Bytes) -> Result<u64, CommandError> {
        self.clamp(now);
        if self.tree.view().is_none() {
            return Err(CommandError::Dead);
        }
        let frame = Message::Flood(FloodMsg {
            origin: self.me(),
            id: 0,
            hops: 0,
            payload: Bytes::new(),
        })
        .frame_len()
            + payload.len();
        if frame > self.cfg.max_frame as usize {
            return Err(CommandError::TooLarge {
                len: payload.len(),
                max: self.cfg.max_frame,
            });
        }
        Ok(run!(self, flood.start(payload)))
    }

    /// Broadcasts `payload` to every rank (reliable xcast). Returns this rank's sequence number
    /// for it; every rank (this one included) gets [`XcastEvent::Delivered`](crate::xcast::XcastEvent::Delivered) exactly once, and
    /// this rank gets [`XcastEvent::Completed`](crate::xcast::XcastEvent::Completed) once every survivor has it. `tag` is
    /// [`xcast::TAG_WIREUP`] (process-first) or an application tag from
    /// [`xcast::FIRST_APP_TAG`] up (forward-first).
    pub fn xcast(&mut self, now: Instant, tag: u16, payload: Bytes) -> Result<u64, CommandError> {
        self.clamp(now);
        if self.tree.view().is_none() {
            return Err(CommandError::Dead);
        }
        if tag != xcast::TAG_WIREUP && tag < xcast::FIRST_APP_TAG {
            return Err(CommandError::Xcast(XcastError::ReservedTag(tag)));
        }
        let seq = run!(self, xcast.originate(tag, payload))?;
        self.drive_xcast();
        Ok(seq)
    }

    /// Sends `payload` to `dst` reliably (RELM). Returns the message's uid in the (this rank,
    /// `dst`) chain. While both ranks live, `dst` gets [`RelmEvent::Delivered`](crate::relm::RelmEvent::Delivered) exactly once,
    /// in uid order per source, however relays on the path die and the tree is rebuilt; this
    /// rank gets [`RelmEvent::Acked`](crate::relm::RelmEvent::Acked) once it is delivered, or [`RelmEvent::Failed`](crate::relm::RelmEvent::Failed) if `dst`
    /// dies first. A send to this rank itself is delivered at once.
    ///
    /// Refused (nothing queued): [`CommandError::PeerDead`] for a rank known dead,
    /// [`RelmError::Backpressure`](crate::relm::RelmError::Backpressure) past `relm_window` messages to `dst` or
    /// `relm_max_bytes` in all (retry after a `RelmAcked`), [`CommandError::TooLarge`].
    pub fn relm_send(
        &mut self,
        now: Instant,
        dst: Rank,
        tag: u16,
        payload: Bytes,
    ) -> Result<Uid, CommandError> {
        self.clamp(now);
        if self.tree.view().is_none() {
            return Err(CommandError::Dead);
        }
        let frame = crate::relm::data_frame_len(payload.len());
        if frame > self.cfg.max_frame as usize {
            return Err(CommandError::TooLarge {
                len: payload.len(),
                max: self.cfg.max_frame,
            });
        }
        run!(self, relm.originate(dst, tag, payload))
    }

    /// Grows the span to `new_span` (new ranks joined; holes stay holes): a command, applied
    /// as one repair.
    pub fn grow(&mut self, now: Instant, new_span: u32) -> Result<(), CommandError> {
        self.clamp(now);
        self.grow_span(new_span)?;
        self.drive_xcast();
        Ok(())
    }

    /// Declares `ranks` dead on the embedding runtime's word (out of band, e.g. its launcher
    /// saw them exit) and repairs once. Ranks outside the span are refused, nothing changed.
    pub fn declare_dead(&mut self, now: Instant, ranks: &RankSet) -> Result<(), CommandError> {
        self.clamp(now);
        let v: Vec<Rank> = ranks.iter().collect();
        if let Some(&bad) = v.iter().find(|r| !self.tree.layout().contains(**r)) {
            return Err(CommandError::Tree(TreeError::RankOutOfRange {
                rank: bad,
                span: self.tree.layout().span(),
            }));
        }
        self.m.membership.note_cause(&v, RemovalCause::Declared);
        self.learn_deaths(&v, Scope::Global);
        self.drive_xcast();
        Ok(())
    }

    // ---- outputs ----

    /// The next frame to send, in the order produced. Drain until `None` after every input.
    ///
    /// A frame queued to a rank that became known dead before it was drained is discarded here
    /// (counted in `suppressed_to_dead`), so no transmit is ever addressed to a rank known dead.
    #[must_use]
    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        while let Some(t) = self.out.pop_transmit() {
            if self.tree.is_alive(t.to) || t.is_fence() {
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
    pub fn poll_timeout(&self) -> Option<(Instant, TimerKey)> {
        self.timers.next()
    }

    /// Whether outputs are waiting to be drained.
    pub fn has_output(&self) -> bool {
        !self.out.is_empty()
    }

    /// Armed timers and remembered protocol state, for leak checks in tests and the simulator.
    pub fn pending_state(&self) -> usize {
        self.timers.len() + self.m.flood.remembered() + self.m.xcast.held() + self.m.relm.held()
    }

    /// RELM message-level state held here: unacknowledged and buffered messages, relay records
    /// and cached copies, coalesced marks, link-update gates. Zero once traffic has settled.
    pub fn relm_held(&self) -> usize {
        self.m.relm.held()
    }

    /// RELM chains with a counter here (per peer pair, not per message): the next uid as a
    /// source, the delivered watermark as a destination. Dropped when the peer dies.
    pub fn relm_chains(&self) -> usize {
        self.m.relm.chains()
    }

    /// RELM payload bytes this rank originated that await acknowledgement.
    pub fn relm_unacked_bytes(&self) -> usize {
        self.m.relm.out_bytes()
    }

    /// Highest xcast op id delivered here, and the global completion watermark known here.
    pub fn xcast_watermarks(&self) -> (u64, u64) {
        (self.m.xcast.delivered(), self.m.xcast.global_done())
    }

    /// The ranks that watch this one with the heartbeat detector (it heartbeats them),
    /// ascending; empty while the detector is off.
    pub fn detect_observers(&self) -> impl Iterator<Item = Rank> + '_ {
        self.m.detect.observers()
    }

    /// Highest global failure epoch seen.
    pub fn epoch(&self) -> u64 {
        self.m.membership.epoch()
    }

    /// The agreed membership view applied here: the epoch of the last global notice and the
    /// ranks removed as of it. Members that applied the same epoch hold the same view; a data
    /// plane sizes its communicator from it (see [`MembershipView`](crate::MembershipView)).
    pub fn view(&self) -> crate::MembershipView {
        self.m.membership.view(self.tree().layout().span())
    }
}
