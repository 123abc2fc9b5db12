//! [`Peers`]: the I/O side of every peer (a send queue per class, a running connection per
//! slot), routing of the core's frames into the queues, and congestion. The dial state of a
//! peer is the link policy's, not kept here.

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;
use lifeline_core::tree::Rank;
use lifeline_core::Class;
use tokio::sync::Notify;
use tokio::task::AbortHandle;

use crate::connector::class_index as ci;
use crate::queue::SendQueue;
use crate::stats::Counters;

/// The classes, in class-index order.
const CLASSES: [Class; 2] = [Class::Control, Class::Data];

/// One running connection.
#[derive(Debug)]
pub(super) struct Conn {
    /// Tells the current connection's end from a replaced one's.
    pub(super) id: u64,
    pub(super) task: AbortHandle,
}

/// One peer's send queues (control, data) and its connection per slot.
#[derive(Debug)]
pub(super) struct Peer {
    pub(super) queues: [Arc<SendQueue>; 2],
    pub(super) conns: Vec<Option<Conn>>,
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

    /// Aborts every connection.
    pub(super) fn close(&mut self) {
        for c in self.conns.iter_mut().filter_map(Option::take) {
            c.task.abort();
        }
    }
}

/// Where a run of staged frames went ([`Peers::route_staged`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Routed {
    /// Queued to a live peer: its link is wanted.
    Queued,
    /// Queued, and the queue passed the hard bound: the link must go down.
    Overflow,
    /// To a dead peer: fencing notices went out on its open connection, the rest was dropped.
    Dead,
}

/// Every peer's I/O state, and the frames staged for the next queue push.
#[derive(Debug)]
pub(super) struct Peers {
    map: BTreeMap<Rank, Peer>,
    slots: usize,
    /// Woken when a writer empties a send queue ([`Handle::writable`](crate::Handle::writable)
    /// waits on it).
    space: Arc<Notify>,
    /// Frames of consecutive transmits to one peer and class, queued together.
    staged: Vec<Bytes>,
    /// How many of `staged` are fencing notices.
    staged_fences: usize,
    hard_bytes: usize,
    counters: Arc<Counters>,
}

impl Peers {
    pub(super) fn new(
        slots: usize,
        space: Arc<Notify>,
        hard_bytes: usize,
        counters: Arc<Counters>,
    ) -> Self {
        Self {
            map: BTreeMap::new(),
            slots,
            space,
            staged: Vec::new(),
            staged_fences: 0,
            hard_bytes,
            counters,
        }
    }

    pub(super) fn contains(&self, r: Rank) -> bool {
        self.map.contains_key(&r)
    }

    /// `r`'s entry, created empty if needed.
    pub(super) fn entry(&mut self, r: Rank) -> &mut Peer {
        let (slots, space) = (self.slots, &self.space);
        self.map.entry(r).or_insert_with(|| Peer::new(slots, space))
    }

    /// Forgets `r` and aborts its connections; whether it was known.
    pub(super) fn close(&mut self, r: Rank) -> bool {
        self.map.remove(&r).map(|mut p| p.close()).is_some()
    }

    /// Aborts every connection.
    pub(super) fn close_all(&mut self) {
        for p in self.map.values_mut() {
            p.close();
        }
    }

    /// Whether the connection `id` is `r`'s current one for `slot`.
    pub(super) fn is_current(&self, r: Rank, slot: usize, id: u64) -> bool {
        self.map
            .get(&r)
            .and_then(|p| p.conns.get(slot)?.as_ref())
            .is_some_and(|c| c.id == id)
    }

    /// Forgets `r`'s connection for `slot` (it ended by itself).
    pub(super) fn clear_conn(&mut self, r: Rank, slot: usize) {
        if let Some(cell) = self.map.get_mut(&r).and_then(|p| p.conns.get_mut(slot)) {
            *cell = None;
        }
    }

    /// Stages a frame for the next [`Peers::route_staged`]; `fence`: the core queued it as a
    /// fencing notice ([`lifeline_core::Transmit::is_fence`]).
    pub(super) fn stage(&mut self, frame: Bytes, fence: bool) {
        self.staged.push(frame);
        self.staged_fences += usize::from(fence);
    }

    /// Queues the staged frames (leaving none) to `to` on `class`, carried by `slot`. Frames to
    /// a dead peer (`alive` false) are dropped, except fencing notices on a connection that is
    /// still open: only those are ever addressed to a removed rank, which learns its fate from
    /// them (it is never dialled; when it dials, the handshake answers "removed").
    pub(super) fn route_staged(
        &mut self,
        to: Rank,
        class: Class,
        slot: usize,
        alive: bool,
    ) -> Routed {
        let i = ci(class);
        let n = self.staged.len();
        let all_fences = std::mem::take(&mut self.staged_fences) == n;
        if !alive {
            let open = self
                .map
                .get(&to)
                .is_some_and(|p| p.conns.get(slot).is_some_and(Option::is_some));
            match self.map.get(&to) {
                Some(p) if open && all_fences => {
                    p.queues[i].push_many(self.staged.drain(..));
                    Counters::add_n(&self.counters.frames_out, n);
                }
                _ => self.staged.clear(),
            }
            return Routed::Dead;
        }
        let hard = self.hard_bytes;
        let (slots, space) = (self.slots, &self.space);
        let p = self
            .map
            .entry(to)
            .or_insert_with(|| Peer::new(slots, space));
        let queued = p.queues[i].push_many(self.staged.drain(..));
        Counters::add_n(&self.counters.frames_out, n);
        if queued > hard {
            Counters::add(&self.counters.overflows);
            tracing::debug!(peer = to.0, ?class, queued, "send queue overflow");
            return Routed::Overflow;
        }
        Routed::Queued
    }

    /// The first queue over `soft` bytes, as `(peer, class, bytes)`.
    pub(super) fn congested(&self, soft: usize) -> Option<(Rank, Class, usize)> {
        self.map.iter().find_map(|(r, p)| {
            (0..2).find_map(|i| {
                let b = p.queues[i].bytes();
                (b > soft).then_some((*r, CLASSES[i], b))
            })
        })
    }

    /// Bytes queued to `r` on `class` (0 for an unknown peer).
    pub(super) fn queued(&self, r: Rank, class: Class) -> usize {
        self.map.get(&r).map_or(0, |p| p.queues[ci(class)].bytes())
    }
}
