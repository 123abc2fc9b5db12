//! Link policy: which connections a transport adapter dials, when it re-dials, when it gives a
//! peer up, and which of two simultaneous connections between a pair wins.
//!
//! [`LinkPolicy`] is a pure, sans-IO machine shared by every adapter (TCP, QUIC, RDMA): it owns
//! no sockets, tasks or clocks. The adapter feeds it what happened with its current `now`, drains
//! [`LinkPolicy::poll_action`] after every input and executes each [`LinkAction`] (start a dial,
//! tell the core a link is up or down), and arms one timer at [`LinkPolicy::poll_timeout`],
//! calling [`LinkPolicy::handle_timeout`] when it passes. The adapter keeps only I/O: sockets,
//! tasks, send queues and the address book.
//!
//! # The model
//!
//! A *link* to a peer is `slots` connections, one per channel (the TCP adapter has two: control
//! and data traffic). Each `(peer, slot)` is connected, dialing, waiting to re-dial, or idle.
//! The link is up ([`LinkAction::LinkUp`]) once every slot is connected, and reported once until
//! the peer's state is forgotten.
//!
//! # The rules
//!
//! - **Who dials**: a slot is dialled when the adapter [wants](LinkPolicy::want) it (the core
//!   sends to the peer, or the peer is the tree parent, dialled at start and after every repair)
//!   unless it is connected, a dial is in flight, or a re-dial is waiting. A rank the `alive`
//!   predicate rejects (this rank, a rank the core knows dead, a rank outside the span) is never
//!   dialled or accepted, and [`LinkPolicy::retain_alive`] forgets it.
//! - **Back-off**: a failed dial is retried after `backoff_initial`, doubling per consecutive
//!   failure up to `backoff_max` ([`LinkConfig::backoff`]); a connection resets the count.
//! - **Give-up**: after `dial_attempts` consecutive failures of one slot the peer is given up:
//!   its state is forgotten and [`LinkDownReason::Unreachable`] is reported, or
//!   [`LinkDownReason::Refused`] when the dial that gave up was refused outright (which is how
//!   the core learns of a rank that died with its only neighbour, or never started; the policy
//!   is the one keeper of "refused", and [`DownReason::cause`] says what each is worth as
//!   evidence). A [refused](DialOutcome::Refused) dial to a peer whose link was up before (a
//!   process that was running and is gone), or to any peer once the policy has run for
//!   `startup_grace`, gives up after `min(refused_attempts, dial_attempts)` instead, so a
//!   repair that points at another dead rank is not held up; a peer never connected may still
//!   be starting, and its refusals count as ordinary failures within the grace.
//! - **Tie-break** (simultaneous dials, per slot): the connection dialled by the lower rank
//!   wins, and the other side is answered [duplicate](AcceptVerdict::Duplicate). A dialer told
//!   "duplicate" re-dials after `backoff_initial` unless the peer's connection arrives first
//!   (it usually does, and cancels the re-dial); the answer counts toward `dial_attempts` but is
//!   not a dial failure. A new dial from a peer whose connection we accepted earlier replaces
//!   that connection (the peer lost it).
//! - **Lost connections**: when a connection of a link ends, the whole link is down and the
//!   peer's state is forgotten ([`LinkPolicy::handle_closed`]); the next
//!   [`want`](LinkPolicy::want) starts over with no failures counted.
//!
//! Iteration is over ordered maps, so the same inputs give the same actions, in the same order.

mod cause;
mod config;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt;

pub use cause::{DownReason, LinkCause};
pub use config::{LinkConfig, LinkConfigError};

use crate::time::Instant;
use crate::tree::Rank;

/// One dial's identity, unique within a [`LinkPolicy`] and increasing with each dial. A result
/// fed back with an attempt that is no longer the slot's current one is ignored, so a late
/// answer from a superseded or forgotten dial can never change anything.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AttemptId(u64);

impl AttemptId {
    /// The id as a number (for logs and wire-free bookkeeping).
    pub const fn as_u64(self) -> u64 {
        self.0
    }
}

impl fmt::Display for AttemptId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{}", self.0)
    }
}

/// How a dial ended, as the adapter saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DialOutcome {
    /// The connection is established and the peer accepted it.
    Connected,
    /// The peer's host refused the connection outright (`ECONNREFUSED`: it is up and nothing
    /// listens, so the process is gone).
    Refused,
    /// Any other failure: a connect error or timeout, a failed handshake, a refusal by the peer.
    Failed,
    /// The peer answered that its own connection for this slot wins the tie-break (not a
    /// failure).
    Duplicate,
}

/// What to do with an inbound connection ([`LinkPolicy::handle_accepted`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AcceptVerdict {
    /// Run it: it is now the slot's connection, replacing any the adapter held for that slot.
    Accept,
    /// Answer "duplicate" and close it: this side's connection for the slot wins.
    Duplicate,
    /// Refuse and close it: the peer is dead, this rank, outside the span, or the slot does not
    /// exist.
    Refuse,
}

/// Why the policy reports a link down.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LinkDownReason {
    /// A slot's dials failed `dial_attempts` times in a row, the last one not refused outright
    /// (a timeout, a failed handshake) or refused by a peer that may still be starting (never
    /// connected, within `startup_grace`). The adapter tells the core: soft evidence
    /// ([`LinkCause::TimedOut`]).
    Unreachable,
    /// A slot's dials failed `refused_attempts` (at most `dial_attempts`) times in a row, the
    /// last one [refused](DialOutcome::Refused) outright by a peer that is not starting (its
    /// link was up before, or `startup_grace` is over): nothing listens at its address. The
    /// adapter tells the core: hard evidence ([`LinkCause::Refused`]).
    Refused,
    /// The `alive` predicate of [`LinkPolicy::retain_alive`] rejected the peer: the core already
    /// knows it dead, so the adapter need not tell it again.
    Dead,
}

impl fmt::Display for LinkDownReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Unreachable => "unreachable",
            Self::Refused => "refused",
            Self::Dead => "dead",
        })
    }
}

/// What the adapter must do, in order ([`LinkPolicy::poll_action`]). Deliberately exhaustive:
/// a new action must be handled by every adapter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LinkAction {
    /// Dial `peer` for `slot` and feed the outcome back with `attempt`
    /// ([`LinkPolicy::handle_dial_result`]). Never issued while an earlier dial of the same slot
    /// is still current, nor for a rank the `alive` predicate rejected.
    Dial {
        /// The peer.
        peer: Rank,
        /// The slot (channel index, below [`LinkPolicy::slots`]).
        slot: usize,
        /// Feed the result back with this.
        attempt: AttemptId,
        /// Consecutive failed dials of this slot before this one (0 for a first dial).
        failures: u32,
    },
    /// Every slot of the link to `peer` is connected: tell the core
    /// ([`Node::handle_link_up`](crate::Node::handle_link_up)). Issued once per link, until the
    /// peer's state is forgotten.
    LinkUp {
        /// The peer.
        peer: Rank,
    },
    /// The policy gave the link to `peer` up and forgot its state: close every connection to it
    /// and report it (see [`LinkDownReason`] for whether the core must be told).
    LinkDown {
        /// The peer.
        peer: Rank,
        /// Why.
        reason: LinkDownReason,
    },
}

/// The policy's counters (monotonic).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct LinkStats {
    /// Dials issued ([`LinkAction::Dial`]).
    pub dials: u64,
    /// Dials that failed ([`DialOutcome::Refused`] or [`DialOutcome::Failed`]) while they were
    /// current and the slot had no other connection: the failures that count toward back-off.
    pub dial_failures: u64,
    /// Current dials answered [`DialOutcome::Duplicate`] while the slot had no connection yet.
    pub duplicate_answers: u64,
    /// Inbound connections answered [`AcceptVerdict::Duplicate`].
    pub duplicates: u64,
    /// Inbound connections answered [`AcceptVerdict::Refuse`].
    pub refused: u64,
    /// Dial results ignored: an attempt no longer current, or a peer already forgotten.
    pub stale_results: u64,
    /// Links reported up ([`LinkAction::LinkUp`]).
    pub links_up: u64,
    /// Peers given up ([`LinkDownReason::Unreachable`] or [`LinkDownReason::Refused`]).
    pub gave_up: u64,
}

/// Which side dialled a slot's connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Side {
    Dialed,
    Accepted,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum DialState {
    Idle,
    InFlight(AttemptId),
    /// A re-dial is due at this instant (also in `LinkPolicy::redials`).
    Waiting(Instant),
}

#[derive(Clone, Copy, Debug)]
struct SlotState {
    conn: Option<Side>,
    dial: DialState,
    /// Consecutive failed (or "duplicate") dials since the last connection.
    failures: u32,
}

impl SlotState {
    const NEW: Self = Self {
        conn: None,
        dial: DialState::Idle,
        failures: 0,
    };
}

#[derive(Clone, Debug)]
struct PeerState {
    slots: Vec<SlotState>,
    up: bool,
}

/// The link policy of one node: dial, re-dial, give-up and tie-break decisions for every peer
/// and slot. See the [module docs](self) for the rules and the driving contract.
///
/// Inputs never panic and never fail: a slot out of range, an unknown peer or a stale attempt is
/// ignored (or refused). A `now` earlier than one already seen is taken as the latest.
#[derive(Clone, Debug)]
pub struct LinkPolicy {
    me: Rank,
    slots: usize,
    cfg: LinkConfig,
    start: Instant,
    latest: Instant,
    peers: BTreeMap<Rank, PeerState>,
    /// Peers whose link was up at least once (kept while they are alive): their refused dial
    /// is not a peer still starting.
    met: BTreeSet<Rank>,
    /// Every `Waiting` slot as `(due, peer, slot)`, earliest first.
    redials: BTreeSet<(Instant, Rank, usize)>,
    next_attempt: u64,
    actions: VecDeque<LinkAction>,
    stats: LinkStats,
}

impl LinkPolicy {
    /// A policy for rank `me` with `slots` connections per link, created at `now` (the origin
    /// of `startup_grace`). Refuses an invalid `cfg` or zero slots.
    pub fn new(
        me: Rank,
        slots: usize,
        cfg: LinkConfig,
        now: Instant,
    ) -> Result<Self, LinkConfigError> {
        cfg.validate()?;
        if slots == 0 {
            return Err(LinkConfigError::Zero("slots"));
        }
        Ok(Self {
            me,
            slots,
            cfg,
            start: now,
            latest: now,
            peers: BTreeMap::new(),
            met: BTreeSet::new(),
            redials: BTreeSet::new(),
            next_attempt: 0,
            actions: VecDeque::new(),
            stats: LinkStats::default(),
        })
    }

    /// This node's rank (the tie-break compares it with the peer's).
    pub fn me(&self) -> Rank {
        self.me
    }

    /// Connections per link.
    pub fn slots(&self) -> usize {
        self.slots
    }

    /// The configuration.
    pub fn config(&self) -> &LinkConfig {
        &self.cfg
    }

    /// The counters.
    pub fn stats(&self) -> &LinkStats {
        &self.stats
    }

    /// Whether the link to `peer` was reported up (every slot connected) and not forgotten since.
    pub fn is_up(&self, peer: Rank) -> bool {
        self.peers.get(&peer).is_some_and(|p| p.up)
    }

    /// Whether `peer`'s `slot` has a connection.
    pub fn is_connected(&self, peer: Rank, slot: usize) -> bool {
        self.slot(peer, slot).is_some_and(|s| s.conn.is_some())
    }

    /// Whether the policy holds any state for `peer` (a connection, a dial, a waiting re-dial,
    /// or a slot it was asked for).
    pub fn knows(&self, peer: Rank) -> bool {
        self.peers.contains_key(&peer)
    }

    // ---- inputs ----

    /// The adapter needs `peer`'s `slot` (the core sends to the peer, or it is the tree parent):
    /// a dial starts unless the slot is connected, a dial is in flight, or a re-dial is waiting.
    /// Nothing happens for a rank `alive` rejects, for this rank, or for a slot out of range.
    pub fn want(&mut self, now: Instant, peer: Rank, slot: usize, alive: impl Fn(Rank) -> bool) {
        self.clamp(now);
        if slot >= self.slots || !self.linkable(peer, &alive) {
            return;
        }
        self.peer_mut(peer);
        self.ensure(peer, slot);
    }

    /// An authenticated inbound connection from `peer` for `slot`: the tie-break's verdict.
    ///
    /// - refused if `alive` rejects the peer (or it is this rank, or the slot is out of range);
    /// - if the slot holds a connection this side dialled, the peer's wins only if the peer is
    ///   the lower rank; one the peer dialled earlier is replaced (the peer lost it);
    /// - if this side's dial for the slot is in flight, the peer's wins only if the peer is the
    ///   lower rank (the in-flight dial's result is still awaited);
    /// - otherwise it is accepted, and a waiting re-dial is cancelled.
    ///
    /// [`AcceptVerdict::Accept`] makes it the slot's connection (failures reset; may queue
    /// [`LinkAction::LinkUp`]).
    pub fn handle_accepted(
        &mut self,
        now: Instant,
        peer: Rank,
        slot: usize,
        alive: impl Fn(Rank) -> bool,
    ) -> AcceptVerdict {
        self.clamp(now);
        if slot >= self.slots || !self.linkable(peer, &alive) {
            self.stats.refused += 1;
            return AcceptVerdict::Refuse;
        }
        let me = self.me;
        let s = self.peer_mut(peer).slots[slot];
        let accept = match (s.conn, s.dial) {
            (Some(Side::Dialed), _) | (None, DialState::InFlight(_)) => peer < me,
            (Some(Side::Accepted), _) | (None, _) => true,
        };
        if !accept {
            self.stats.duplicates += 1;
            return AcceptVerdict::Duplicate;
        }
        if let DialState::Waiting(_) = s.dial {
            self.set_dial(peer, slot, DialState::Idle);
        }
        self.install(peer, slot, Side::Accepted);
        AcceptVerdict::Accept
    }

    /// The outcome of the dial `attempt` of `peer`'s `slot`. Returns whether the adapter must
    /// run the connection: true only for [`DialOutcome::Connected`] of the slot's current
    /// attempt to a peer `alive` still accepts, which then is the slot's connection (replacing
    /// any the adapter held for it; failures reset; may queue [`LinkAction::LinkUp`]). On false
    /// the adapter drops whatever the dial produced.
    ///
    /// A result for an attempt that is not current (superseded, or its peer forgotten) is
    /// ignored. A failure of a slot that meanwhile got the peer's connection changes nothing.
    /// Otherwise a failure counts: a re-dial is scheduled after [`LinkConfig::backoff`] (after
    /// `backoff_initial` for [`DialOutcome::Duplicate`]), or, at the attempt limit, the peer is
    /// forgotten and [`LinkDownReason::Refused`] (this dial was refused by a peer that is not
    /// starting) or [`LinkDownReason::Unreachable`] (otherwise) queued.
    #[must_use = "a connected dial must be run or dropped"]
    pub fn handle_dial_result(
        &mut self,
        now: Instant,
        peer: Rank,
        slot: usize,
        attempt: AttemptId,
        outcome: DialOutcome,
        alive: impl Fn(Rank) -> bool,
    ) -> bool {
        let now = self.clamp(now);
        let current = self
            .slot(peer, slot)
            .is_some_and(|s| s.dial == DialState::InFlight(attempt));
        if !current {
            self.stats.stale_results += 1;
            return false;
        }
        self.set_dial(peer, slot, DialState::Idle);
        let delay = match outcome {
            DialOutcome::Connected => {
                // A peer that died since the dial started (without a view change that would
                // have forgotten it) gets no connection.
                if !self.linkable(peer, &alive) {
                    return false;
                }
                self.install(peer, slot, Side::Dialed);
                return true;
            }
            _ if self.is_connected(peer, slot) => return false, // the peer's own dial won
            DialOutcome::Duplicate => {
                // Counted once, by the acceptor that answered "duplicate".
                self.stats.duplicate_answers += 1;
                self.cfg.backoff_initial
            }
            DialOutcome::Refused | DialOutcome::Failed => {
                self.stats.dial_failures += 1;
                let failures = self.slot(peer, slot).map_or(0, |s| s.failures);
                self.cfg.backoff(failures.saturating_add(1))
            }
        };
        // A refusal from a peer that may still be starting is an ordinary failure, and a
        // give-up after it is no proof of death (reported unreachable, soft).
        let counted_refusal = outcome == DialOutcome::Refused
            && self
                .cfg
                .refusal_counts(self.met.contains(&peer), now.saturating_since(self.start));
        let limit = self.cfg.attempts(counted_refusal);
        let p = self.peer_mut(peer);
        let failures = p.slots[slot].failures.saturating_add(1);
        p.slots[slot].failures = failures;
        if failures >= limit {
            self.forget(peer);
            self.stats.gave_up += 1;
            let reason = if counted_refusal {
                LinkDownReason::Refused
            } else {
                LinkDownReason::Unreachable
            };
            self.actions
                .push_back(LinkAction::LinkDown { peer, reason });
        } else {
            self.set_dial(peer, slot, DialState::Waiting(now + delay));
        }
        false
    }

    /// The connection of `peer`'s `slot` ended (EOF, reset, timeout, a malformed frame). Returns
    /// whether the link is now down: then the peer's state is forgotten, and the adapter closes
    /// its other connections and reports the loss with its own reason (nothing is queued). False
    /// if the peer was not known.
    pub fn handle_closed(&mut self, now: Instant, peer: Rank, slot: usize) -> bool {
        self.clamp(now);
        let _ = slot; // any connection of a link takes the whole link down
        self.forget(peer)
    }

    /// Forgets everything about `peer` (its connections, dial and failures): the adapter drops
    /// the link for a reason of its own (a send queue overflow, no address) and reports it
    /// itself; nothing is queued. Returns whether anything was known. A result of a dial in
    /// flight is ignored from now on.
    pub fn forget(&mut self, peer: Rank) -> bool {
        let Some(p) = self.peers.remove(&peer) else {
            return false;
        };
        for (i, s) in p.slots.iter().enumerate() {
            if let DialState::Waiting(at) = s.dial {
                self.redials.remove(&(at, peer, i));
            }
        }
        true
    }

    /// Forgets every peer `alive` rejects (call it whenever the core's view changes, e.g. after
    /// [`Event::ViewChanged`](crate::Event::ViewChanged)), queueing
    /// [`LinkDownReason::Dead`] for each, in rank order.
    pub fn retain_alive(&mut self, alive: impl Fn(Rank) -> bool) {
        let dead: Vec<Rank> = self
            .peers
            .keys()
            .copied()
            .filter(|&r| !self.linkable(r, &alive))
            .collect();
        self.met.retain(|&r| r != self.me && alive(r));
        for peer in dead {
            self.forget(peer);
            self.actions.push_back(LinkAction::LinkDown {
                peer,
                reason: LinkDownReason::Dead,
            });
        }
    }

    /// Re-dials every slot whose back-off has passed at `now` (in `(due, peer, slot)` order),
    /// except for peers `alive` now rejects. Spurious or late calls are harmless.
    pub fn handle_timeout(&mut self, now: Instant, alive: impl Fn(Rank) -> bool) {
        let now = self.clamp(now);
        while let Some(&(at, peer, slot)) = self.redials.first() {
            if at > now {
                break;
            }
            self.set_dial(peer, slot, DialState::Idle);
            if self.linkable(peer, &alive) {
                self.ensure(peer, slot);
            }
        }
    }

    // ---- outputs ----

    /// The next action, in the order decided. Drain it to empty after every input.
    pub fn poll_action(&mut self) -> Option<LinkAction> {
        self.actions.pop_front()
    }

    /// The earliest waiting re-dial: call [`handle_timeout`](Self::handle_timeout) then. `None`
    /// when nothing waits. Re-read it after every input.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.redials.first().map(|&(at, _, _)| at)
    }

    // ---- internals ----

    fn clamp(&mut self, now: Instant) -> Instant {
        self.latest = self.latest.max(now);
        self.latest
    }

    fn linkable(&self, peer: Rank, alive: &impl Fn(Rank) -> bool) -> bool {
        peer != self.me && alive(peer)
    }

    fn slot(&self, peer: Rank, slot: usize) -> Option<&SlotState> {
        self.peers.get(&peer).and_then(|p| p.slots.get(slot))
    }

    fn peer_mut(&mut self, peer: Rank) -> &mut PeerState {
        let slots = self.slots;
        self.peers.entry(peer).or_insert_with(|| PeerState {
            slots: vec![SlotState::NEW; slots],
            up: false,
        })
    }

    /// Sets a known slot's dial state, keeping `redials` in step.
    fn set_dial(&mut self, peer: Rank, slot: usize, dial: DialState) {
        let Some(s) = self
            .peers
            .get_mut(&peer)
            .and_then(|p| p.slots.get_mut(slot))
        else {
            return;
        };
        if let DialState::Waiting(at) = s.dial {
            self.redials.remove(&(at, peer, slot));
        }
        if let DialState::Waiting(at) = dial {
            self.redials.insert((at, peer, slot));
        }
        s.dial = dial;
    }

    /// Dials a known slot unless it is connected, dialing or waiting.
    fn ensure(&mut self, peer: Rank, slot: usize) {
        let Some(&s) = self.slot(peer, slot) else {
            return;
        };
        if s.conn.is_some() || s.dial != DialState::Idle {
            return;
        }
        self.next_attempt += 1;
        let attempt = AttemptId(self.next_attempt);
        self.set_dial(peer, slot, DialState::InFlight(attempt));
        self.stats.dials += 1;
        self.actions.push_back(LinkAction::Dial {
            peer,
            slot,
            attempt,
            failures: s.failures,
        });
    }

    /// Makes `side`'s connection the slot's one; reports the link up once every slot has one.
    fn install(&mut self, peer: Rank, slot: usize, side: Side) {
        let p = self.peer_mut(peer);
        p.slots[slot].conn = Some(side);
        p.slots[slot].failures = 0;
        if !p.up && p.slots.iter().all(|s| s.conn.is_some()) {
            p.up = true;
            self.met.insert(peer);
            self.stats.links_up += 1;
            self.actions.push_back(LinkAction::LinkUp { peer });
        }
    }
}
