//! Joiners in the simulator: processes that are not members yet, each running a real
//! [`Joiner`] against real contacts over simulated join connections.
//!
//! A joiner is added with [`Sim::add_joiner`] (its start time and its contacts); its requests
//! reach the contact's node one network latency later ([`Node::handle_join_request`]), and the
//! contact's answers come back the same way. A contact that crashed (or crashes while a request
//! waits) fails the connection after [`NetConfig::link_down_delay`](super::NetConfig) as a
//! refused dial or a reset would; a paused contact holds the request like any frame.
//!
//! Once any member applies an admission, the admitted ranks get a slot in the world, *pending*
//! until the joiner's process starts: frames to it wait (as in a listening socket's backlog)
//! and its observers' timers run. The joiner starts as a [`Node`] when its answer arrives
//! ([`Config::for_admission`](crate::Config::for_admission)); a joiner that crashes before
//! leaves a pending slot the members' detectors must remove.

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;

use super::{node_seed, Observer, Sim, SimEvent, Slot, SlotState};
use crate::event::Event;
use crate::join::{JoinConn, JoinId, JoinReply, JoinVerdict, Joiner, JoinerConfig, JoinerEvent};
use crate::membership::MembershipEvent;
use crate::node::Node;
use crate::rng::Rng;
use crate::time::Instant;
use crate::tree::Rank;

/// What the simulator knows about one joiner (read by observers and scenarios).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct JoinerInfo {
    /// The members it may ask, in order.
    pub contacts: Vec<Rank>,
    /// When its process starts.
    pub start: Instant,
    /// Its nonce (set when it starts).
    pub nonce: u64,
    /// Its process crashed.
    pub crashed: bool,
    /// Requests it sent.
    pub tries: u32,
    /// The rank, epoch and time of its admission, once its answer arrived.
    pub admitted: Option<(Rank, u64, Instant)>,
    /// Answers it received that carry another joiner's nonce (must stay 0).
    pub foreign_answers: u32,
}

/// One joiner's process.
#[derive(Debug, Default)]
pub(super) struct JoinerSlot {
    pub(super) info: JoinerInfo,
    joiner: Option<Joiner>,
    wake: Option<Instant>,
}

/// An open join connection.
#[derive(Clone, Copy, Debug)]
pub(super) struct OpenConn {
    joiner: usize,
    /// The index of the contact in the joiner's list, and its rank.
    contact: u32,
    rank: u32,
    id: JoinId,
}

/// The joiners of a world and their connections.
#[derive(Debug, Default)]
pub(super) struct Joiners {
    pub(super) slots: Vec<JoinerSlot>,
    conns: BTreeMap<u64, OpenConn>,
    next_conn: u64,
}

impl super::World {
    /// Every joiner added so far, in the order added.
    pub fn joiners(&self) -> impl Iterator<Item = &JoinerInfo> + '_ {
        self.joiners.slots.iter().map(|s| &s.info)
    }

    /// Delay of a join message: the network's latency and jitter (a joiner has no rank, so its
    /// connection is not one of the network's ordered links; one message each way is).
    fn join_delay(&mut self) -> crate::time::Duration {
        let net = &self.cfg.net;
        let j = net.jitter.as_nanos();
        let extra = if j == 0 { 0 } else { self.rng.below(j) };
        crate::time::Duration::from_nanos(net.latency.as_nanos() + extra)
    }

    /// Gives every rank below `span` a slot (pending until its process starts).
    pub(super) fn ensure_slots(&mut self, span: u32) {
        while (self.slots.len() as u32) < span {
            self.slots.push(Slot {
                node: None,
                state: SlotState::Pending,
                wake: None,
                held: Vec::new(),
            });
        }
        self.net.grow(span as usize);
    }
}

impl<O: Observer> Sim<O> {
    /// Adds a joiner whose process starts at `start` and asks `contacts` in turn (at least
    /// one). Returns its index in [`World::joiners`](super::World::joiners).
    pub fn add_joiner(&mut self, start: Instant, contacts: Vec<Rank>) -> usize {
        let idx = self.world.joiners.slots.len();
        self.world.joiners.slots.push(JoinerSlot {
            info: JoinerInfo {
                contacts,
                start,
                ..JoinerInfo::default()
            },
            joiner: None,
            wake: None,
        });
        self.world.push(start, SimEvent::JoinerStart(idx));
        idx
    }

    /// Crashes joiner `idx` (and its node, if it was admitted and started).
    pub fn crash_joiner(&mut self, idx: usize) {
        let Some(s) = self.world.joiners.slots.get_mut(idx) else {
            return;
        };
        s.info.crashed = true;
        s.joiner = None;
        s.wake = None;
        let rank = s.info.admitted.map(|(r, _, _)| r);
        // Its open connections close: their contacts forget the requests.
        let closed: Vec<(u64, u32)> = self
            .world
            .joiners
            .conns
            .iter()
            .filter(|(_, c)| c.joiner == idx)
            .map(|(k, c)| (*k, c.rank))
            .collect();
        let now = self.world.now;
        for (k, r) in closed {
            self.world.joiners.conns.remove(&k);
            if let Some(n) = self
                .world
                .slots
                .get_mut(r as usize)
                .and_then(|s| s.node.as_mut())
            {
                n.handle_join_conn_closed(now, JoinConn(k));
            }
        }
        if let Some(r) = rank {
            self.crash(r.0);
        }
    }

    pub(super) fn joiner_start(&mut self, idx: usize) {
        let seed = Rng::new(self.world.cfg.seed ^ 0x4A01_4E00)
            .fork(idx as u64)
            .next_u64();
        let now = self.world.now;
        let Some(s) = self.world.joiners.slots.get_mut(idx) else {
            return;
        };
        if s.info.crashed || s.joiner.is_some() || s.info.contacts.is_empty() {
            return;
        }
        let cfg = JoinerConfig::new(
            s.info.contacts.len() as u32,
            Bytes::from(format!("joiner-{idx}")),
        );
        let Ok(j) = Joiner::new(cfg, seed, now) else {
            return;
        };
        s.info.nonce = j.nonce();
        s.joiner = Some(j);
        self.world.trace_line(|| format!("joiner   {idx} starts"));
        self.drain_joiner(idx);
    }

    pub(super) fn joiner_wake(&mut self, idx: usize) {
        let now = self.world.now;
        let Some(s) = self.world.joiners.slots.get_mut(idx) else {
            return;
        };
        if s.wake.is_none_or(|w| w > now) {
            return;
        }
        s.wake = None;
        if let Some(j) = s.joiner.as_mut() {
            j.handle_timeout(now);
        }
        self.drain_joiner(idx);
    }

    /// Sends a joiner's requests, handles its events, schedules its wake-up.
    fn drain_joiner(&mut self, idx: usize) {
        let now = self.world.now;
        let Some(s) = self.world.joiners.slots.get_mut(idx) else {
            return;
        };
        let Some(j) = s.joiner.as_mut() else { return };
        let sends: Vec<_> = std::iter::from_fn(|| j.poll_transmit()).collect();
        let events: Vec<_> = std::iter::from_fn(|| j.poll_event()).collect();
        let next = j.poll_timeout();
        let contacts = s.info.contacts.clone();
        s.info.tries += sends.len() as u32;
        for t in sends {
            let Some(&rank) = contacts.get(t.contact as usize) else {
                continue;
            };
            let conn = self.world.joiners.next_conn;
            self.world.joiners.next_conn += 1;
            self.world.joiners.conns.insert(
                conn,
                OpenConn {
                    joiner: idx,
                    contact: t.contact,
                    rank: rank.0,
                    id: t.id,
                },
            );
            self.world
                .trace_line(|| format!("joinreq  joiner {idx} -> {} ({})", rank.0, t.id));
            let crashed = self
                .world
                .slots
                .get(rank.index())
                .is_none_or(|s| s.state == SlotState::Crashed);
            if crashed {
                let at = now + self.world.cfg.net.link_down_delay;
                self.world.push(at, SimEvent::JoinConnFailed(conn));
            } else {
                let at = now + self.world.join_delay();
                self.world.push(
                    at,
                    SimEvent::JoinRequest {
                        to: rank.0,
                        conn,
                        bytes: t.bytes,
                    },
                );
            }
        }
        for e in events {
            match e {
                JoinerEvent::Admitted { id, admission } => {
                    self.world.trace_line(|| {
                        format!(
                            "admitted joiner {idx} as {} at epoch {} ({id})",
                            admission.rank.0, admission.epoch
                        )
                    });
                    self.start_admitted(idx, &admission);
                }
                JoinerEvent::Retrying { id, why, .. } => {
                    self.world
                        .trace_line(|| format!("joinretry joiner {idx} ({id}): {why:?}"));
                }
            }
        }
        if let Some(at) = next {
            let s = &mut self.world.joiners.slots[idx];
            let at = at.max(now);
            if s.wake.is_none_or(|w| at < w) {
                s.wake = Some(at);
                self.world.push(at, SimEvent::JoinerWake(idx));
            }
        }
    }

    /// A launched rank's process starts late: its node (the launch configuration) comes up in
    /// its pending slot, learns the links its neighbours opened to it, and handles what
    /// waited for it.
    pub(super) fn late_start(&mut self, r: u32) {
        let now = self.world.now;
        let rank = Rank(r);
        let cfg = self.world.cfg.node.clone();
        let seed = node_seed(self.world.cfg.seed, r);
        let Ok(node) = Node::with_shared_config(Arc::new(cfg), rank, seed, now) else {
            return;
        };
        self.world.trace_line(|| format!("start    {r}"));
        self.install(rank, node);
    }

    /// The joiner was admitted: its node starts in its (pending) slot, learns the links members
    /// already opened to it, and handles what waited for it.
    fn start_admitted(&mut self, idx: usize, admission: &crate::join::Admission) {
        let now = self.world.now;
        let rank = admission.rank;
        self.world.joiners.slots[idx].info.admitted = Some((rank, admission.epoch, now));
        self.world.ensure_slots(admission.snapshot.layout.span());
        let Ok(cfg) = self.world.cfg.node.for_admission(admission) else {
            return;
        };
        let seed = node_seed(self.world.cfg.seed, rank.0);
        let Ok(node) = Node::with_shared_config(Arc::new(cfg), rank, seed, now) else {
            return;
        };
        self.install(rank, node);
    }

    /// A node starts in `rank`'s pending slot: the links its peers opened come up, and what
    /// waited for it is handled.
    fn install(&mut self, rank: Rank, node: Node) {
        let now = self.world.now;
        let slot = &mut self.world.slots[rank.index()];
        if slot.state != SlotState::Pending {
            // Crashed before it started (or started twice): nothing to do.
            return;
        }
        slot.node = Some(node);
        slot.state = SlotState::Live;
        let held = std::mem::take(&mut slot.held);
        for p in self.world.net.peers(rank.0) {
            if let Some(n) = self.world.slots[rank.index()].node.as_mut() {
                n.handle_link_up(now, Rank(p));
            }
        }
        for ev in held {
            self.world.push(now, ev);
        }
        self.drain(rank.0);
    }

    /// A request reaches its contact.
    pub(super) fn join_request_arrives(&mut self, to: u32, conn: u64, bytes: Bytes) {
        let now = self.world.now;
        let Some(slot) = self.world.slots.get_mut(to as usize) else {
            return;
        };
        match slot.state {
            SlotState::Crashed => {
                let at = now + self.world.cfg.net.link_down_delay;
                self.world.push(at, SimEvent::JoinConnFailed(conn));
            }
            SlotState::Paused | SlotState::Pending => {
                slot.held.push(SimEvent::JoinRequest { to, conn, bytes })
            }
            SlotState::Live => {
                if !self.world.joiners.conns.contains_key(&conn) {
                    return;
                }
                if let Some(n) = slot.node.as_mut() {
                    let _ = n.handle_join_request(now, JoinConn(conn), bytes);
                }
                self.drain(to);
            }
        }
    }

    /// Sends a contact's answers back on their connections (called from the node's drain).
    pub(super) fn send_join_replies(&mut self, replies: Vec<(JoinConn, Bytes)>) {
        let now = self.world.now;
        for (conn, bytes) in replies {
            if !self.world.joiners.conns.contains_key(&conn.0) {
                continue;
            }
            let at = now + self.world.join_delay();
            self.world.push(
                at,
                SimEvent::JoinReply {
                    conn: conn.0,
                    bytes,
                },
            );
        }
    }

    /// An answer reaches its joiner (the connection closes after it).
    pub(super) fn join_reply_arrives(&mut self, conn: u64, bytes: Bytes) {
        let now = self.world.now;
        let Some(c) = self.world.joiners.conns.remove(&conn) else {
            return;
        };
        let Some(s) = self.world.joiners.slots.get_mut(c.joiner) else {
            return;
        };
        if let Ok(r) = JoinReply::decode(bytes.clone(), u32::MAX) {
            if matches!(r.verdict, JoinVerdict::Accepted(_)) && r.id.nonce != s.info.nonce {
                s.info.foreign_answers += 1;
            }
        }
        let Some(j) = s.joiner.as_mut() else { return };
        let _ = j.handle_reply(now, c.contact, bytes);
        self.drain_joiner(c.joiner);
    }

    /// A join connection failed before its answer.
    pub(super) fn join_conn_failed(&mut self, conn: u64) {
        let now = self.world.now;
        let Some(c) = self.world.joiners.conns.remove(&conn) else {
            return;
        };
        let Some(j) = self
            .world
            .joiners
            .slots
            .get_mut(c.joiner)
            .and_then(|s| s.joiner.as_mut())
        else {
            return;
        };
        j.handle_contact_failed(now, c.contact, c.id);
        self.drain_joiner(c.joiner);
    }

    /// A contact crashed: its open join connections fail.
    pub(super) fn fail_join_conns_of(&mut self, rank: u32) {
        let at = self.world.now + self.world.cfg.net.link_down_delay;
        let conns: Vec<u64> = self
            .world
            .joiners
            .conns
            .iter()
            .filter(|(_, c)| c.rank == rank)
            .map(|(k, _)| *k)
            .collect();
        for k in conns {
            self.world.push(at, SimEvent::JoinConnFailed(k));
        }
    }
}

/// The highest span an admission in `events` grows to (slots must exist before the frames the
/// same drain sends to the new ranks).
pub(super) fn admitted_span(events: &[Event]) -> Option<u32> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Membership(MembershipEvent::Joined { joiners, .. }) => {
                joiners.iter().map(|a| a.rank.0 + 1).max()
            }
            _ => None,
        })
        .max()
}
