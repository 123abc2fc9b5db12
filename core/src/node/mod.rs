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
use crate::event::Event;
use crate::link::LinkCause;
use crate::machine::{Ctx, Effect};
use crate::outbox::Outbox;
use crate::rng::Rng;
use crate::stats::Stats;
use crate::time::Instant;
use crate::timer::{TimerKey, Timers};
use crate::transmit::Transmit;
use crate::tree::{Rank, RankSet, Tree};
use crate::wire::Limits;

mod commands;
mod dispatch;
#[cfg(test)]
mod footprint;
mod inspect;
mod relay;
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
    /// A span an admission being delivered grows to, applied once its op is forwarded.
    pending_grow: u32,
    /// The op being delivered put this rank in leaving mode (`Effect::Leaving`).
    leaving_hold: bool,
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
        // The machines see the configuration's holes (membership's agreed view starts with
        // them) before the tree takes them over.
        let m = dispatch::Machines::new(&config, me);
        let dead = if config.dead.is_empty() {
            RankSet::default()
        } else {
            std::mem::take(&mut Arc::make_mut(&mut config).dead)
        };
        let tree = Tree::with_dead(layout, dead, me).map_err(|_| ConfigError::MeDead(me))?;
        let mut node = Self {
            m,
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
            pending_grow: 0,
            leaving_hold: false,
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

    /// The rank a transport should hold a link to in advance: the parent a repair would give
    /// this rank if its current parent died ([`Tree::standby_parent`]). With that link up, the
    /// repair after a parent's loss sends its adoption notices over links that already exist
    /// instead of opening new connections on a loaded machine (the promoted child's link to
    /// its new parent, the orphans' links to the promoted sibling). `None` while that rank has
    /// not checked in (no link is opened to a rank that may not have started: a dial to it
    /// would only be refused) and while this rank is leaving in a shrink campaign.
    pub fn standby_parent(&self) -> Option<Rank> {
        if self.m.membership.is_leaving() {
            return None;
        }
        self.tree
            .standby_parent()
            .filter(|&r| !self.m.membership.is_pending(r))
    }

    /// The counters. Join and corroboration counters are kept apart, with their state (boxed
    /// on first use): [`Self::join_stats`], [`Self::corroboration_stats`].
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
}

/// Inputs: what the driver saw (a frame, a link up or down, a fencing verdict, a deadline).
/// Each clamps `now`, changes nothing on a peer's mistake but a counter, and never errors.
impl Node {
    /// One whole frame received from `from`. Frames from ranks outside the span or known dead,
    /// frames over `max_frame`, and frames that fail to decode are dropped and counted, except
    /// a new parent's adoption notice from past the span, which grows the span to the one it
    /// was sent under (within `join.max_per_view` × 64 ranks) before it is read: this rank
    /// missed admissions. Nothing changes before a frame has decoded completely. Never panics, never returns an error: a
    /// peer's mistake is not the application's.
    pub fn handle_frame(&mut self, now: Instant, from: Rank, frame: Bytes) {
        self.clamp(now);
        self.dispatch_frame(from, frame);
        self.drive_xcast();
    }

    /// The driver established a link (both traffic classes) to `peer`: kept in the link set
    /// and told to every machine (a late joiner says hello to its parent as soon as it can
    /// reach it). A peer outside the span or known dead is dropped and counted.
    pub fn handle_link_up(&mut self, now: Instant, peer: Rank) {
        self.clamp(now);
        if !self.tree.layout().contains(peer) {
            self.stats.dropped_unknown_peer += 1;
        } else if self.tree.is_alive(peer) {
            self.links.insert(peer);
            self.link_up_to_machines(peer);
        } else {
            self.stats.dropped_stale_sender += 1;
        }
    }

    /// The driver lost the link to `peer` (reset, timeout, refused reconnect).
    ///
    /// What the loss means depends on its `cause`, and is membership's policy. With the
    /// heartbeat detector on (`detect.enabled`), only hard evidence ([`LinkCause::is_hard`]: a
    /// refused fresh dial, another incarnation) marks the peer dead at once, on a tree link or
    /// a lateral one (the tree is repaired and the parent told); a reset, timeout or close is
    /// counted in `soft_link_downs` (the peer's observers and the coordinator decide) and, for
    /// the parent's link, answered with a hello that re-establishes it and re-syncs this rank.
    /// With the detector off, any loss of a tree link repairs (the link is the only detector)
    /// and a lateral link's loss never does (counted in `lateral_link_downs`).
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
        self.link_down_to_machines(peer, cause);
        self.drive_xcast();
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

    /// A joiner's request ([`JoinRequest`](crate::join::JoinRequest) bytes) arrived on the
    /// adapter's join connection `conn`: this rank is its contact (see [`crate::join`]). The
    /// answer comes out of [`Self::poll_join_reply`] for `conn`, at once (already admitted,
    /// busy, not a member) or when the admission is applied here (or after `join.timeout`:
    /// "retry"). Bytes that do not decode are an error, counted in
    /// [`JoinStats::join_requests_malformed`](crate::join::JoinStats) (close the connection).
    pub fn handle_join_request(
        &mut self,
        now: Instant,
        conn: crate::join::JoinConn,
        bytes: Bytes,
    ) -> Result<(), crate::wire::DecodeError> {
        self.clamp(now);
        let req = match crate::join::JoinRequest::decode(bytes) {
            Ok(r) => r,
            Err(e) => {
                self.m.membership.count_malformed_join();
                return Err(e);
            }
        };
        run!(self, membership.on_join_request(conn, req));
        self.drive_xcast();
        Ok(())
    }

    /// The adapter's join connection `conn` closed: requests waiting on it are forgotten (a
    /// joiner admitted meanwhile asks again and gets its rank).
    pub fn handle_join_conn_closed(&mut self, now: Instant, conn: crate::join::JoinConn) {
        self.clamp(now);
        run!(self, membership.on_join_conn_closed(conn));
    }

    /// This rank's join counters (as contact, coordinator, and member applying admissions).
    pub fn join_stats(&self) -> crate::join::JoinStats {
        self.m.membership.join_stats()
    }

    /// Start-up counters (`membership.check_in`): check-ins sent and received, the
    /// coordinator's check-in notices, ranks removed because they never checked in. Zero
    /// without start-up state: check-ins off, or a joiner admitted after start-up.
    pub fn startup_stats(&self) -> crate::membership::StartupStats {
        self.m.membership.startup_stats()
    }

    /// Shrink-campaign counters (campaigns asked for, completed, failed; orders and departure
    /// views as coordinator; departures observed; leaving mode). Kept with the shrink state,
    /// which a rank makes on first use: all zero before.
    pub fn shrink_stats(&self) -> crate::membership::ShrinkStats {
        self.m.membership.shrink_stats()
    }

    /// Relay counters: frames sent around gray links, envelopes forwarded for others, relays
    /// started and ended, and every envelope dropped, by reason. Kept with the relay state,
    /// which a rank makes on first use: all zero before.
    pub fn relay_stats(&self) -> crate::membership::RelayStats {
        self.m.membership.relay_stats()
    }

    /// This rank's corroboration and overload-hold counters (refused dials reported, received
    /// and probed; cases refuted or dropped; decisions held). Kept with the corroboration state,
    /// which a rank makes on first use: all zero before.
    pub fn corroboration_stats(&self) -> crate::membership::CorroborationStats {
        self.m.membership.corroboration_stats()
    }

    /// Quorum agreement counters (ballots, phases, quorums; zero until this rank's first
    /// agreement traffic).
    pub fn quorum_stats(&self) -> crate::membership::quorum::QuorumStats {
        self.m.membership.quorum_stats()
    }

    /// The next answer to a joiner: write the bytes on the join connection and close it once
    /// written (one answer per request).
    pub fn poll_join_reply(&mut self) -> Option<(crate::join::JoinConn, Bytes)> {
        let (conn, reply) = self.m.membership.poll_join_reply()?;
        Some((conn, reply.encode()))
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
}

/// Outputs: drain [`Node::poll_transmit`] and [`Node::poll_event`] to empty after every input,
/// then arm one timer at [`Node::poll_timeout`].
impl Node {
    /// The next frame to send, in the order produced. Drain until `None` after every input.
    ///
    /// A frame to a tree neighbour whose link is gray (down while both ends are alive) leaves
    /// as a relay envelope to the relay rank instead (see [`Self::relay_stats`]); one that the
    /// envelope would make too big for `max_frame` is dropped and counted.
    ///
    /// A frame queued to a rank that became known dead before it was drained is discarded here
    /// (counted in `suppressed_to_dead`), so no transmit is ever addressed to a rank known dead.
    #[must_use]
    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        while let Some(t) = self.out.pop_transmit() {
            if !self.tree.is_alive(t.to) && !t.is_fence() {
                self.stats.suppressed_to_dead += 1;
                continue;
            }
            // Tree-link silence (`membership/silence.rs`): a link that carries frames needs no ping.
            self.m.membership.note_sent(self.now, t.to);
            if let Some(t) = self.around_gray(t) {
                return Some(t);
            }
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
}
