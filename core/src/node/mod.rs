//! `Node`: one rank's protocol state, composing the sub-machines behind one driving contract.
//!
//! See the crate documentation for the contract. Internally the node owns every sub-machine by
//! value; they never call each other. An input goes to exactly one machine (frames are
//! demultiplexed by the envelope's kind), and the node translates between machines: a link-down
//! on a tree link becomes a tree repair, the repair's [`ViewDelta`] becomes adoption and failure
//! notices ([`notices`]) and xcast replays, and a delivered global failure notice becomes a
//! repair again.

use std::collections::BTreeSet;

use bytes::Bytes;

use crate::config::{Config, ConfigError};
use crate::event::Event;
use crate::flood::Flood;
use crate::outbox::{Class, Outbox, Transmit};
use crate::relm::{Relm, Uid};
use crate::rng::Rng;
use crate::stats::Stats;
use crate::time::Instant;
use crate::timer::{TimerKey, TimerReason, Timers};
use crate::tree::{LinkRole, Rank, RankSet, Scope, Tree, TreeError};
use crate::wire::{DecodeError, Limits, Message};
use crate::xcast::{self, Xcast};

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
    /// Too many broadcasts from this rank await completion (`xcast_max_inflight` ops or
    /// `xcast_max_bytes` payload bytes): retry after a completion event. Nothing was queued.
    #[error(
        "{ops} broadcasts ({bytes} bytes) already await completion; retry after one completes"
    )]
    Backpressure {
        /// Broadcasts awaiting completion.
        ops: usize,
        /// Their payload bytes.
        bytes: usize,
    },
    /// The tag is reserved for Lifeline's own broadcasts.
    #[error("xcast tag {0} is reserved (use tag 1 for wire-up or 16 and above)")]
    ReservedTag(u16),
    /// The destination is known dead (or outside the span): nothing was queued.
    #[error("rank {0} is dead or outside the span")]
    PeerDead(Rank),
    /// The destination is alive but no route reaches it now (cut off behind an empty slot).
    #[error("no route to rank {0}")]
    Unreachable(Rank),
    /// `relm_window` messages to this destination, or `relm_max_bytes` payload bytes in all,
    /// await acknowledgement: retry after an [`Event::RelmAcked`]. Nothing was queued.
    #[error(
        "{inflight} messages to rank {dst} ({bytes} bytes in all) await acknowledgement; retry after an ACK"
    )]
    RelmBackpressure {
        /// The destination.
        dst: Rank,
        /// Unacknowledged messages to it.
        inflight: usize,
        /// Unacknowledged payload bytes to all destinations.
        bytes: usize,
    },
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

    /// Queues a message on its kind's traffic class.
    pub(crate) fn send(&mut self, to: Rank, m: Message) {
        let class = m.kind().class();
        self.send_frame(to, class, m.encode());
    }

    pub(crate) fn event(&mut self, e: Event) {
        if !self.out.push_event(e, self.cfg.max_events) {
            self.stats.dropped_events_full += 1;
        }
    }
}

/// RELM data body bytes besides the payload: src, dst, uid, tag, payload length.
const RELM_DATA_OVERHEAD: usize = 4 + 4 + 4 + 2 + 4;

/// Most timers run per `handle_timeout` call; the rest run on the next call.
const MAX_TIMERS_PER_CALL: usize = 4096;

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

mod notices;

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
    xcast: Xcast,
    relm: Relm,
    /// Highest global failure epoch seen (the root's counter when this rank is the root).
    epoch: u64,
    /// Root: deaths already put in a global notice.
    announced: RankSet,
    /// Root: the pending batch of deaths to announce.
    announce_timer: Option<crate::timer::TimerToken>,
    links: BTreeSet<Rank>,
    timers: Timers,
    out: Outbox,
    stats: Stats,
}

impl Node {
    /// A node for rank `me`. `seed` drives all of its randomness; `now` is the driver's
    /// current time. An invalid configuration, or a rank outside the span or listed dead, is an
    /// error. A joiner (`config.joiner`) starts with adoption notices to its children queued:
    /// drain the outputs once after construction, as after any input.
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
        let config_joiner = config.joiner;
        let first_uid = config.relm_first_uid;
        let tree = Tree::with_dead(layout, dead, me).map_err(|_| ConfigError::MeDead(me))?;
        let mut node = Self {
            limits: config.limits(),
            cfg: config,
            now,
            rng: Rng::new(seed),
            tree,
            flood: Flood::default(),
            xcast: Xcast::new(config_joiner),
            relm: Relm::new(first_uid),
            epoch: 0,
            announced: RankSet::new(),
            announce_timer: None,
            links: BTreeSet::new(),
            timers: Timers::default(),
            out: Outbox::default(),
            stats: Stats::default(),
        };
        if config_joiner {
            node.adopt_children();
        }
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
        if self.tree.view().is_none() {
            self.stats.dropped_self_dead += 1;
            return;
        }
        if self.bad_origin(&msg) {
            self.stats.dropped_bad_origin += 1;
            return;
        }
        self.stats.frames_in += 1;
        match msg {
            Message::Flood(m) => self.flood.handle(&mut ctx!(self), from, m),
            Message::Adopt(m) => self.on_adopt(from, m),
            Message::Lineage(m) => self.on_lineage(from, m),
            Message::Relay(m) => self.xcast.relay(&mut ctx!(self), m),
            Message::Forward(m) => self.xcast.on_forward(&mut ctx!(self), from, m),
            Message::Ack(m) => self.xcast.on_ack(&mut ctx!(self), from, m),
            Message::Poll(m) => self.xcast.on_poll(&mut ctx!(self), from, m),
            Message::Need(m) => self.xcast.on_need(&mut ctx!(self), from, m),
            Message::Sync(m) => self.xcast.on_sync(&mut ctx!(self), from, m),
            Message::Recover(m) => self.xcast.on_recover(&mut ctx!(self), from, m),
            Message::RecoveredOp(m) => self.xcast.on_recovered_op(&mut ctx!(self), from, m),
            Message::RecoverDone(m) => self.xcast.on_recover_done(&mut ctx!(self), from, m),
            Message::Complete(m) => self.xcast.on_complete(&mut ctx!(self), from, m),
            Message::RelmData(m) => self.relm.on_data(&mut ctx!(self), from, m),
            Message::RelmAck(m) => self.relm.on_ack_frame(&mut ctx!(self), from, m),
            Message::RelmReq(m) => self.relm.on_req(&mut ctx!(self), m),
            Message::RelmLink(m) => self.relm.on_link(&mut ctx!(self), from, m),
        }
        self.drive_xcast();
    }

    /// Whether a decoded message names an origin it cannot have (counted in
    /// `dropped_bad_origin`, checked before anything changes): any origin outside the span; a
    /// flood or relay from a dead origin or from this rank (neither ever comes back to its
    /// origin); a relay of a tag only the root broadcasts (a forged global failure notice would
    /// make the root evict anyone, itself included); a reliable message from a dead source
    /// or from this rank itself.
    fn bad_origin(&self, msg: &Message) -> bool {
        let live_other = |r: Rank| self.tree.is_alive(r) && r != self.me();
        match msg {
            Message::Flood(m) => !live_other(m.origin),
            Message::Relay(m) => {
                !live_other(m.origin)
                    || (m.tag != xcast::TAG_WIREUP && m.tag < xcast::FIRST_APP_TAG)
            }
            Message::Forward(m) => !self.tree.layout().contains(m.origin),
            Message::RecoveredOp(m) => !self.tree.layout().contains(m.origin),
            Message::Complete(m) => !self.tree.layout().contains(m.origin),
            // A message from a dead source is purged, never delivered; none comes back home.
            Message::RelmData(m) => !live_other(m.src) || !self.tree.layout().contains(m.dst),
            _ => false,
        }
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
                self.say_hello();
            }
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
        if self.tree.dead().contains(peer) {
            return; // already known: an echo of the repair
        }
        match self.tree.link_role(peer) {
            LinkRole::Lateral => self.stats.lateral_link_downs += 1,
            LinkRole::Parent | LinkRole::Child(_) => {
                self.learn_deaths(&[peer], Scope::Local);
                self.drive_xcast();
            }
        }
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
            match key {
                TimerKey::FloodSweep => self.flood.on_timeout(&mut ctx!(self), token),
                TimerKey::XcastRetry => self.xcast.on_retry(&mut ctx!(self), token),
                TimerKey::Announce => self.on_announce_timer(token),
                TimerKey::RelmFlush => self.relm.on_flush_timer(&mut ctx!(self), token),
                TimerKey::RelmSweep => self.relm.on_sweep_timer(&mut ctx!(self), token),
                TimerKey::RelmRetry => self.relm.on_retry_timer(&mut ctx!(self), token),
                TimerKey::RelmGate => self.relm.on_gate_timer(&mut ctx!(self), token),
            }
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
        let frame = Message::Flood(crate::wire::FloodMsg {
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
        Ok(self.flood.start(&mut ctx!(self), payload))
    }

    /// Broadcasts `payload` to every rank (reliable xcast). Returns this rank's sequence number
    /// for it; every rank (this one included) gets [`Event::XcastDelivered`] exactly once, and
    /// this rank gets [`Event::XcastCompleted`] once every survivor has it. `tag` is
    /// [`xcast::TAG_WIREUP`] (process-first) or an application tag from
    /// [`xcast::FIRST_APP_TAG`] up (forward-first).
    pub fn xcast(&mut self, now: Instant, tag: u16, payload: Bytes) -> Result<u64, CommandError> {
        self.clamp(now);
        if self.tree.view().is_none() {
            return Err(CommandError::Dead);
        }
        if tag != xcast::TAG_WIREUP && tag < xcast::FIRST_APP_TAG {
            return Err(CommandError::ReservedTag(tag));
        }
        let seq = self.xcast.originate(&mut ctx!(self), tag, payload)?;
        self.drive_xcast();
        Ok(seq)
    }

    /// Sends `payload` to `dst` reliably (RELM). Returns the message's uid in the (this rank,
    /// `dst`) chain. While both ranks live, `dst` gets [`Event::RelmDelivered`] exactly once,
    /// in uid order per source, however relays on the path die and the tree is rebuilt; this
    /// rank gets [`Event::RelmAcked`] once it is delivered, or [`Event::RelmFailed`] if `dst`
    /// dies first. A send to this rank itself is delivered at once.
    ///
    /// Refused (nothing queued): [`CommandError::PeerDead`] for a rank known dead,
    /// [`CommandError::RelmBackpressure`] past `relm_window` messages to `dst` or
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
        let frame = crate::wire::HEADER_LEN + RELM_DATA_OVERHEAD + payload.len();
        if frame > self.cfg.max_frame as usize {
            return Err(CommandError::TooLarge {
                len: payload.len(),
                max: self.cfg.max_frame,
            });
        }
        self.relm.originate(&mut ctx!(self), dst, tag, payload)
    }

    /// Grows the span to `new_span` (new ranks joined; holes stay holes).
    pub fn handle_grow(&mut self, now: Instant, new_span: u32) -> Result<(), CommandError> {
        self.clamp(now);
        let old_span = self.tree.layout().span();
        let delta = self.tree.grow(new_span)?;
        let hello_sent = self.apply_delta(delta, &[]);
        if self.tree.layout().span() != old_span {
            // Notices still in flight from before the grow carry the old span and are
            // dropped by their receivers: send every neighbour this rank's lineage anew.
            self.adopt_children();
            if !hello_sent {
                self.say_hello();
            }
        }
        self.drive_xcast();
        Ok(())
    }

    /// Records deaths learned out of band (e.g. from the embedding runtime) and repairs once.
    pub fn handle_dead(&mut self, now: Instant, ranks: &RankSet) -> Result<(), CommandError> {
        self.clamp(now);
        let v: Vec<Rank> = ranks.iter().collect();
        if let Some(&bad) = v.iter().find(|r| !self.tree.layout().contains(**r)) {
            return Err(CommandError::Tree(TreeError::RankOutOfRange {
                rank: bad,
                span: self.tree.layout().span(),
            }));
        }
        self.learn_deaths(&v, Scope::Global);
        self.drive_xcast();
        Ok(())
    }

    /// Delivers every xcast op that is next in order: internal notices act on the tree, the rest
    /// become application events.
    fn drive_xcast(&mut self) {
        while let Some(d) = self.xcast.next_delivery(&mut ctx!(self)) {
            if d.tag == xcast::TAG_FAILURE_NOTICE {
                self.on_global_notice(d.payload);
            } else if d.tag == xcast::TAG_NOOP {
                // A hole filled by a new root: nothing to deliver.
            } else {
                ctx!(self).event(Event::XcastDelivered {
                    op: d.op,
                    origin: d.origin,
                    seq: d.seq,
                    tag: d.tag,
                    payload: d.payload,
                });
            }
            self.xcast.processed(&mut ctx!(self), d.op);
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
        self.timers.len() + self.flood.remembered() + self.xcast.held() + self.relm.held()
    }

    /// RELM message-level state held here: unacknowledged and buffered messages, relay records
    /// and cached copies, coalesced marks, link-update gates. Zero once traffic has settled.
    pub fn relm_held(&self) -> usize {
        self.relm.held()
    }

    /// RELM chains with a counter here (per peer pair, not per message): the next uid as a
    /// source, the delivered watermark as a destination. Dropped when the peer dies.
    pub fn relm_chains(&self) -> usize {
        self.relm.chains()
    }

    /// RELM payload bytes this rank originated that await acknowledgement.
    pub fn relm_unacked_bytes(&self) -> usize {
        self.relm.out_bytes()
    }

    /// Highest xcast op id delivered here, and the global completion watermark known here.
    pub fn xcast_watermarks(&self) -> (u64, u64) {
        (self.xcast.delivered(), self.xcast.global_done())
    }

    /// Highest global failure epoch seen.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }
}
