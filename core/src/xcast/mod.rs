//! Reliable broadcast (xcast): any rank originates, the root serialises, every rank delivers each
//! op exactly once in op-id order, ACKs roll up the tree, and completion fires once at the root
//! and is reported to the originator.
//!
//! # Protocol
//!
//! - **Relay.** The origin sends `(origin, seq, tag, payload)` up the tree to the root and keeps
//!   it until completion, retrying on a timer; the root assigns the next op id to the next seq of
//!   each origin and drops duplicates, so a relay lost with a dying rank is simply sent again.
//! - **Forward and ACK.** A rank forwards an op to each current child under a per-child *round*
//!   and records the expected `(child, round)` pairs: a set removed **by identity**, so a child
//!   lost twice is never discounted twice and a stale ACK (old round, old child) counts for
//!   nothing. A rank is done with an op when it processed it and every expected child ACKed;
//!   ops finish in id order, giving a contiguous `done` watermark, and the rank ACKs its parent
//!   with the round the parent gave it.
//! - **Tag classes.** Failure notices and wire-up (tags below [`FIRST_APP_TAG`] except as noted)
//!   are *process-first*: processed, then forwarded, so children adopted by the processing get
//!   them. Everything else is *forward-first*, keeping the pipeline moving.
//! - **Repair in mid-broadcast** (`Xcast::view_changed`): a new child gets a replay of every
//!   op in flight; a removed child leaves the expected sets; a rank whose parent changed sends
//!   its new parent a hello (the node's lineage notice) and the parent answers with its
//!   watermarks and re-polls every op that child owes it under a fresh round (a child that never
//!   saw the op asks for it). A **promoted** rank's old `done` covered only its old subtree, so
//!   it drops back to the global watermark and holds every forward until its new parent syncs it
//!   (the parent's replays come in op order): it then re-drives ops it had finished through its
//!   new subtree without delivering them again locally. Children it adopts meanwhile get a
//!   copy of every op it holds above its watermark at once (`Xcast::copy_to_adopted`): the copy
//!   their old parent forwarded is dropped once they re-parented, and the sync may wait on them.
//! - **Late joiners** (ranks added by a grow) adopt everything up to their parent's `done` as
//!   complete, then receive the rest as replays. A joiner in the root slot (a grow can move the
//!   root to it) has no parent: it recovers as a new root does, after learning the global
//!   watermark and the latest recovery round from its children (see `recovery.rs`), and adopts
//!   everything up to that watermark as complete.
//! - **Completion.** The root's contiguous `done` is the global watermark; it travels down on
//!   forwards and polls. Completion of an op is an event at the root and a routed
//!   [`CompleteMsg`] to the origin, which the origin de-duplicates, so it observes completion of
//!   each of its ops exactly once; lost reports are recovered by the origin's periodic query.
//!
//! # Root failover
//!
//! Every rank keeps each op's payload until the global watermark passes it. When the root dies
//! the new root (the first living rank of the old root's right spine) resumes numbering after the
//! highest op id it has seen and re-drives every op above the global watermark through its new
//! subtree; ranks that already have an op ACK it at once, so nobody delivers twice. Origins whose
//! ops the old root never broadcast re-relay them; ops are de-duplicated per `(origin, seq)` at
//! delivery, so an op re-issued under a new id is still delivered once. What an originator
//! observes: each op it originated is delivered once at every survivor and its completion is
//! reported to it once. Total order across the failover relies on the new root having seen every
//! op any survivor saw, which holds when a dying root's frames already handed to the network are
//! delivered (as TCP delivers buffered data after a process is killed); the simulator delivers
//! in-flight frames after a crash.

use std::collections::BTreeMap;

use bytes::Bytes;
use smallvec::SmallVec;

use crate::machine::Ctx;
use crate::timer::TimerToken;
use crate::tree::{Rank, Route, ViewDelta};
use crate::vecmap::VecMap;

mod config;
mod error;
mod event;
mod recovery;
mod stats;
mod timer;
mod wire;

pub use config::XcastConfig;
pub use error::XcastError;
pub use event::XcastEvent;
pub use stats::XcastStats;
pub use timer::XcastTimer;
pub(crate) use wire::max_payload;
pub use wire::{
    AckMsg, CompleteMsg, ForwardMsg, NeedMsg, PollMsg, RecoverDoneMsg, RecoverMsg, RecoveredOpMsg,
    RelayMsg, SyncMsg, XcastMsg,
};
#[cfg(test)]
mod tests;

/// Tag of the root's global failure notice (internal, process-first).
pub const TAG_FAILURE_NOTICE: u16 = 0;
/// Tag of wire-up broadcasts (process-first; applications may use it).
pub const TAG_WIREUP: u16 = 1;
/// Tag of the no-op a new root puts in place of an op that died with every rank holding it
/// (internal; delivers nothing).
pub const TAG_NOOP: u16 = 2;
/// Tag of the coordinator's admission of joiners (internal, process-first, in op order: the
/// payload is a [`crate::join::AdmitNotice`]).
pub const TAG_JOIN_NOTICE: u16 = 3;
/// Tag of the coordinator's check-in notice at start-up (internal, process-first, in op order:
/// the payload is a [`crate::membership::CheckInNotice`]).
pub const TAG_CHECK_IN_NOTICE: u16 = 4;
/// Tag of the coordinator's shrink order (internal, **forward-first**: it reaches each target
/// through its own lifeline before anyone rewires; the payload is a
/// [`crate::membership::ShrinkOrder`]).
pub const TAG_SHRINK_ORDER: u16 = 5;
/// Tag of the coordinator's departure notice (internal, process-first: the payload is a
/// [`crate::membership::LeftNotice`]).
pub const TAG_LEFT_NOTICE: u16 = 6;
/// Tags from here up are application tags (forward-first).
pub const FIRST_APP_TAG: u16 = 16;

/// Whether ops with `tag` are processed before being forwarded.
pub fn is_process_first(tag: u16) -> bool {
    tag < FIRST_APP_TAG && tag != TAG_SHRINK_ORDER
}

/// Internal tags whose completion at the root is handed back to the machine that broadcast
/// them (`Effect::XcastDone`).
fn reports_done(tag: u16) -> bool {
    matches!(
        tag,
        TAG_JOIN_NOTICE | TAG_CHECK_IN_NOTICE | TAG_SHRINK_ORDER | TAG_LEFT_NOTICE
    )
}

/// One op a rank has received and not yet seen complete everywhere.
#[derive(Debug)]
struct Op {
    origin: Rank,
    seq: u64,
    tag: u16,
    payload: Bytes,
    /// Delivered locally (or skipped as a duplicate of an earlier delivery).
    processed: bool,
    /// Forwarded to the current children (under `expected`).
    forwarded: bool,
    /// The round my current parent asked me to ACK with; `None` until it told me.
    ack: Option<u32>,
    /// My last round number for this op.
    round: u32,
    /// Children that still owe me an ACK, with the round they must answer.
    expected: SmallVec<[(Rank, u32); 4]>,
}

impl Op {
    fn new(origin: Rank, seq: u64, tag: u16, payload: Bytes, processed: bool) -> Self {
        Self {
            origin,
            seq,
            tag,
            payload,
            processed,
            forwarded: false,
            ack: None,
            round: 0,
            expected: SmallVec::new(),
        }
    }

    /// The forward of this op (id `id`) under its current round, with the sender's
    /// watermarks.
    fn forward(&self, id: u64, done: u64, global_done: u64) -> ForwardMsg {
        ForwardMsg {
            op: id,
            round: self.round,
            done,
            global_done,
            origin: self.origin,
            seq: self.seq,
            tag: self.tag,
            payload: self.payload.clone(),
        }
    }
}

/// A broadcast this rank originated, kept until its completion is reported.
#[derive(Debug)]
struct Pending {
    tag: u16,
    payload: Bytes,
    op: Option<u64>,
}

/// A delivery the node must act on: an internal notice or an application event.
#[derive(Debug)]
pub(crate) struct Delivery {
    pub(crate) op: u64,
    pub(crate) origin: Rank,
    pub(crate) seq: u64,
    pub(crate) tag: u16,
    pub(crate) payload: Bytes,
}

/// Per-rank xcast state.
#[derive(Debug, Default)]
pub(crate) struct Xcast {
    /// Added by a grow and without a broadcast history yet: adopts the parent's watermark on
    /// first contact (or, in the root slot, its children's, see `recovery.rs`). Delivers
    /// nothing meanwhile.
    joiner: bool,
    /// Watermarks are trustworthy (false while a promoted rank or a joiner waits for its parent).
    unsynced: bool,
    /// Highest op id processed locally, contiguous.
    delivered: u64,
    /// Highest op id done in my subtree, contiguous.
    done: u64,
    /// The root's `done` as I know it: every rank has every op up to here.
    global_done: u64,
    /// Highest op id seen (the next root resumes after it).
    max_seen: u64,
    ops: VecMap<u64, Op>,
    /// Per origin: highest seq delivered here (exactly-once across re-issue).
    delivered_seq: VecMap<Rank, u64>,
    /// Per origin: highest seq seen in any op (the root's duplicate filter).
    assigned_seq: VecMap<Rank, u64>,
    /// Per origin: highest seq known complete everywhere (answers completion queries).
    completed_seq: VecMap<Rank, u64>,
    my_seq: u64,
    pending: BTreeMap<u64, Pending>,
    pending_bytes: usize,
    retry: Option<TimerToken>,
    /// Highest recovery round seen.
    recovery_gen: u64,
    /// The recovery round in progress here, if any.
    recovery: Option<recovery::Recovery>,
    /// Root notices raised during recovery, numbered when it ends.
    deferred_notices: Vec<RelayMsg>,
    /// An op processed here whose acknowledgement waits (a leaving rank draining its RELM
    /// sends): nothing at or past it is done here until it is released (0: none; op ids
    /// start at 1).
    hold: u64,
}

impl Xcast {
    /// State for a rank present from the start (`joiner == false`) or added by a grow.
    pub(crate) fn new(joiner: bool) -> Self {
        Self {
            joiner,
            unsynced: joiner,
            ..Self::default()
        }
    }

    /// Payload bytes of the ops held (in flight, or retained until the global watermark
    /// passes them) and of this rank's broadcasts awaiting completion: for footprint figures.
    pub(crate) fn held_payload_bytes(&self) -> usize {
        self.ops.iter().map(|(_, o)| o.payload.len()).sum::<usize>()
            + self
                .pending
                .values()
                .map(|p| p.payload.len())
                .sum::<usize>()
    }

    /// Highest op id delivered locally.
    pub(crate) fn delivered(&self) -> u64 {
        self.delivered
    }

    /// The global completion watermark as this rank knows it.
    pub(crate) fn global_done(&self) -> u64 {
        self.global_done
    }

    // ------------------------------------------------------------------ origin side

    /// Starts a broadcast from this rank. Returns the origin's sequence number, which the
    /// delivery and completion events carry.
    pub(crate) fn originate(
        &mut self,
        ctx: &mut Ctx<'_>,
        tag: u16,
        payload: Bytes,
    ) -> Result<u64, XcastError> {
        if tag != TAG_WIREUP && tag < FIRST_APP_TAG {
            return Err(XcastError::ReservedTag(tag));
        }
        if self.pending.len() >= ctx.cfg.xcast.max_inflight
            || self.pending_bytes + payload.len() > ctx.cfg.xcast.max_bytes
        {
            return Err(XcastError::Backpressure {
                ops: self.pending.len(),
                bytes: self.pending_bytes,
            });
        }
        self.my_seq += 1;
        let seq = self.my_seq;
        self.pending_bytes += payload.len();
        self.pending.insert(
            seq,
            Pending {
                tag,
                payload: payload.clone(),
                op: None,
            },
        );
        self.arm_retry(ctx);
        let numbered = self.numbered();
        self.relay(
            ctx,
            RelayMsg {
                origin: ctx.me(),
                seq,
                numbered,
                tag,
                payload,
            },
        );
        Ok(seq)
    }

    /// Every broadcast of this origin up to the returned seq was numbered: it heard it complete
    /// (no longer pending) or delivered it (its op id known here).
    fn numbered(&self) -> u64 {
        self.pending
            .iter()
            .find(|(_, p)| p.op.is_none())
            .map_or(self.my_seq, |(&seq, _)| seq - 1)
    }

    /// Root only: broadcasts an internal notice. Notices are idempotent, so they carry seq 0
    /// and skip the per-origin duplicate filter (and never wait behind the root's own relays).
    /// While a new root is still recovering, notices wait and are numbered after every op
    /// recovered.
    pub(crate) fn root_broadcast(&mut self, ctx: &mut Ctx<'_>, tag: u16, payload: Bytes) {
        let m = RelayMsg {
            origin: ctx.me(),
            seq: 0,
            numbered: 0,
            tag,
            payload,
        };
        if self.root_recovering(ctx) {
            self.deferred_notices.push(m);
        } else {
            self.number(ctx, m);
        }
    }

    fn arm_retry(&mut self, ctx: &mut Ctx<'_>) {
        if self.retry.is_none() && !self.pending.is_empty() {
            self.retry = Some(
                ctx.timers
                    .set(XcastTimer::Retry, ctx.now + ctx.cfg.xcast.retry),
            );
        }
    }

    /// The retry timer: re-relay ops the root has not numbered, query completion of the rest.
    pub(crate) fn on_retry(&mut self, ctx: &mut Ctx<'_>, token: TimerToken) {
        if self.retry != Some(token) {
            ctx.stats.stale_timers += 1;
            return;
        }
        self.retry = None;
        ctx.stats.xcast.retries += self.pending.len() as u64;
        self.resend_relays(ctx);
        let me = ctx.me();
        let queries: Vec<CompleteMsg> = self
            .pending
            .iter()
            .filter_map(|(&seq, p)| {
                p.op.map(|op| CompleteMsg {
                    origin: me,
                    seq,
                    op,
                    query: true,
                })
            })
            .collect();
        for q in queries {
            self.on_complete(ctx, me, q);
        }
        self.arm_retry(ctx);
    }

    /// Re-sends every broadcast the root has not numbered yet (duplicates are dropped there).
    pub(super) fn resend_relays(&mut self, ctx: &mut Ctx<'_>) {
        let me = ctx.me();
        let numbered = self.numbered();
        let work: Vec<RelayMsg> = self
            .pending
            .iter()
            .filter(|(_, p)| p.op.is_none())
            .map(|(&seq, p)| RelayMsg {
                origin: me,
                seq,
                numbered,
                tag: p.tag,
                payload: p.payload.clone(),
            })
            .collect();
        for m in work {
            self.relay(ctx, m);
        }
    }

    /// A relay, from a child or from this rank: pass it up, or number it at the root.
    pub(crate) fn relay(&mut self, ctx: &mut Ctx<'_>, m: RelayMsg) {
        let Some(view) = ctx.tree.view() else { return };
        if let Some(parent) = view.parent() {
            ctx.send(parent, m);
            return;
        }
        if m.seq == 0 {
            ctx.stats.xcast.stale += 1; // seq 0 is the root's own notices, never relayed
            return;
        }
        // Root: number it.
        let last = self.assigned_seq.get(&m.origin).copied().unwrap_or(0);
        if m.seq <= last {
            ctx.stats.xcast.duplicate_relays += 1;
            if self
                .completed_seq
                .get(&m.origin)
                .is_some_and(|&c| c >= m.seq)
            {
                self.report_completion(ctx, m.origin, m.seq, 0);
            }
            return;
        }
        // The origin's earlier broadcasts up to `numbered` were numbered, whether or not this
        // root saw them (a joiner does not: they completed before it joined).
        let last = last.max(m.numbered);
        if m.seq != last + 1
            || self.max_seen.saturating_sub(self.done) >= ctx.cfg.xcast.max_inflight as u64
            || self.root_recovering(ctx)
        {
            // A gap (an earlier seq is still on its way) or a full window: the origin retries.
            ctx.stats.xcast.deferred_relays += 1;
            return;
        }
        self.assigned_seq.insert(m.origin, m.seq);
        self.number(ctx, m);
    }

    /// Root: gives `m` the next op id and starts it.
    pub(super) fn number(&mut self, ctx: &mut Ctx<'_>, m: RelayMsg) {
        self.max_seen += 1;
        let id = self.max_seen;
        self.ops
            .insert(id, Op::new(m.origin, m.seq, m.tag, m.payload, false));
        if !is_process_first(m.tag) {
            self.forward(ctx, id);
        }
    }

    // ------------------------------------------------------------------ tree side

    /// Forwards op `id` to every current child under a fresh round (no-op while unsynced).
    pub(super) fn forward(&mut self, ctx: &mut Ctx<'_>, id: u64) {
        if self.unsynced || self.root_recovering(ctx) {
            return;
        }
        let children: SmallVec<[Rank; 8]> = match ctx.tree.view() {
            Some(v) => v.live_children().collect(),
            None => return,
        };
        let (done, global_done) = (self.done, self.global_done);
        let Some(op) = self.ops.get_mut(&id) else {
            return;
        };
        op.round = op.round.wrapping_add(1);
        op.forwarded = true;
        op.expected.clear();
        let round = op.round;
        for c in children {
            op.expected.push((c, round));
            ctx.send(c, op.forward(id, done, global_done));
        }
    }

    /// Sends op `id` to one child under a fresh round and expects its ACK.
    fn forward_to(&mut self, ctx: &mut Ctx<'_>, id: u64, child: Rank) {
        if self.unsynced || self.root_recovering(ctx) {
            return;
        }
        let (done, global_done) = (self.done, self.global_done);
        let Some(op) = self.ops.get_mut(&id) else {
            return;
        };
        op.round = op.round.wrapping_add(1);
        let round = op.round;
        op.expected.retain(|(c, _)| *c != child);
        op.expected.push((child, round));
        ctx.send(child, op.forward(id, done, global_done));
    }

    /// Adopts the parent's watermarks (from a forward, poll or sync).
    fn sync(&mut self, ctx: &mut Ctx<'_>, parent_done: u64, global_done: u64) {
        if global_done > self.global_done {
            self.global_done = global_done;
        }
        if self.joiner && self.unsynced {
            self.adopt_watermark(ctx, parent_done);
        }
        if parent_done > self.done {
            self.done = parent_done;
        }
        self.max_seen = self.max_seen.max(self.done);
        if self.unsynced {
            self.unsynced = false;
            let ids: Vec<u64> = self.ops.keys().copied().collect();
            for id in ids {
                let fwd = self
                    .ops
                    .get(&id)
                    .is_some_and(|o| !o.forwarded && (o.processed || !is_process_first(o.tag)));
                if id > self.done && fwd {
                    self.forward(ctx, id);
                }
            }
        }
        self.settle(ctx);
    }

    /// A late joiner's first watermark (its parent's `done`, or in the root slot its children's
    /// global watermark): everything up to it completed without this rank, which now has a
    /// history.
    pub(super) fn adopt_watermark(&mut self, ctx: &mut Ctx<'_>, done: u64) {
        if self.delivered == 0 {
            self.delivered = done;
            ctx.stats.xcast.adopted_as_done += done;
        }
        self.done = self.done.max(done);
        self.max_seen = self.max_seen.max(self.done);
        self.joiner = false;
    }

    /// Whether op id `id` lies in the window any legitimate root could have numbered: the
    /// root never runs more than `xcast.max_inflight` ops ahead of the watermarks, so an id far
    /// beyond them is a corrupt or hostile frame (refused before it can cost memory or time).
    pub(super) fn in_window(&self, ctx: &mut Ctx<'_>, id: u64) -> bool {
        let w = ctx.cfg.xcast.max_inflight as u64;
        let ok = id > 0 && id <= self.done.max(self.global_done).saturating_add(4 * w + 16);
        if !ok {
            ctx.stats.xcast.out_of_window += 1;
        }
        ok
    }

    /// A forward (or replay) from `from`.
    pub(crate) fn on_forward(&mut self, ctx: &mut Ctx<'_>, from: Rank, m: ForwardMsg) {
        if !self.check_parent(ctx, from) || !self.in_window(ctx, m.op) {
            return;
        }
        self.sync(ctx, m.done, m.global_done);
        self.learn_seq(m.origin, m.seq);
        self.max_seen = self.max_seen.max(m.op);
        let done = m.op <= self.done;
        if let Some(op) = self.ops.get_mut(&m.op) {
            if (op.origin, op.seq, op.tag) != (m.origin, m.seq, m.tag) {
                // Two ops under one id: a broken invariant, never expected. Counted so the
                // simulator's checkers can fail on it.
                ctx.stats.xcast.conflicts += 1;
            }
            op.ack = Some(m.round);
            let replay = !op.forwarded && !done && (op.processed || !is_process_first(op.tag));
            if done {
                self.ack(ctx, m.op, m.round);
            } else if replay {
                self.forward(ctx, m.op);
            }
        } else if m.op <= self.done {
            ctx.stats.xcast.duplicate_forwards += 1;
            self.ack(ctx, m.op, m.round);
        } else {
            let mut op = Op::new(m.origin, m.seq, m.tag, m.payload, m.op <= self.delivered);
            op.ack = Some(m.round);
            self.ops.insert(m.op, op);
            let first = self
                .ops
                .get(&m.op)
                .is_some_and(|o| o.processed || !is_process_first(o.tag));
            if first {
                self.forward(ctx, m.op);
            }
        }
        self.settle(ctx);
    }

    /// A re-poll from the parent.
    pub(crate) fn on_poll(&mut self, ctx: &mut Ctx<'_>, from: Rank, m: PollMsg) {
        if !self.check_parent(ctx, from) {
            return;
        }
        self.sync(ctx, m.done, m.global_done);
        let done = m.op <= self.done;
        match self.ops.get_mut(&m.op) {
            Some(op) => {
                op.ack = Some(m.round);
                if done {
                    self.ack(ctx, m.op, m.round);
                }
            }
            None if m.op <= self.done => self.ack(ctx, m.op, m.round),
            None => ctx.send(from, NeedMsg { op: m.op }),
        }
        self.settle(ctx);
    }

    /// The parent's watermarks, in answer to this rank's hello.
    pub(crate) fn on_sync(&mut self, ctx: &mut Ctx<'_>, from: Rank, m: SyncMsg) {
        if self.check_parent(ctx, from) {
            self.sync(ctx, m.done, m.global_done);
        }
    }

    /// A child asks for an op it never saw.
    pub(crate) fn on_need(&mut self, ctx: &mut Ctx<'_>, from: Rank, m: NeedMsg) {
        let owed = self
            .ops
            .get(&m.op)
            .is_some_and(|o| m.op > self.done && o.expected.iter().any(|(c, _)| *c == from));
        if owed {
            self.forward_to(ctx, m.op, from);
        } else {
            ctx.stats.xcast.stale += 1;
        }
    }

    /// An ACK from a child: counts only if `(child, round)` is expected.
    pub(crate) fn on_ack(&mut self, ctx: &mut Ctx<'_>, from: Rank, m: AckMsg) {
        let Some(op) = self.ops.get_mut(&m.op) else {
            ctx.stats.xcast.stale += 1;
            return;
        };
        let before = op.expected.len();
        op.expected.retain(|e| *e != (from, m.round));
        if op.expected.len() == before {
            ctx.stats.xcast.stale += 1;
            return;
        }
        self.settle(ctx);
    }

    /// A child whose parent is now this rank said hello: send watermarks and re-poll what it
    /// owes under fresh rounds.
    pub(crate) fn on_child_hello(&mut self, ctx: &mut Ctx<'_>, child: Rank) {
        let sync = SyncMsg {
            done: self.done,
            global_done: self.global_done,
        };
        self.recovery_hello(ctx, child);
        if self.unsynced || self.joiner {
            // The child hears from us once our own parent has synced us (at the root: once we
            // learned the watermark from our children): a joiner child would adopt ours.
            return;
        }
        ctx.send(child, sync);
        let owed: Vec<u64> = self
            .ops
            .iter()
            .filter(|(&id, o)| id > self.done && o.expected.iter().any(|(c, _)| *c == child))
            .map(|(&id, _)| id)
            .collect();
        for id in owed {
            let Some(op) = self.ops.get_mut(&id) else {
                continue;
            };
            op.round = op.round.wrapping_add(1);
            let round = op.round;
            for e in op.expected.iter_mut().filter(|e| e.0 == child) {
                e.1 = round;
            }
            ctx.send(
                child,
                PollMsg {
                    op: id,
                    round,
                    done: self.done,
                    global_done: self.global_done,
                },
            );
        }
    }

    /// The tree view changed (after adoption notices were queued, so they precede replays).
    pub(crate) fn view_changed(&mut self, ctx: &mut Ctx<'_>, d: &ViewDelta) {
        let Some(view) = ctx.tree.view() else {
            self.ops.clear();
            self.pending.clear();
            self.pending_bytes = 0;
            return;
        };
        let is_root = view.is_root();
        if d.slot_changed() {
            // My old `done` covered my old subtree only.
            self.done = self.global_done;
            for (&id, op) in self.ops.iter_mut() {
                if id > self.done {
                    op.forwarded = false;
                    op.ack = None;
                    op.expected.clear();
                }
            }
            if is_root {
                // Root failover: gather what survivors hold before numbering anything.
                self.unsynced = false;
                self.recovery = None;
                self.begin_root_recovery(ctx);
            } else {
                self.unsynced = true;
                self.recovery = None;
                let added: SmallVec<[Rank; 4]> = d.added_children().collect();
                self.copy_to_adopted(ctx, &added);
            }
        } else {
            if d.parent_changed() {
                for op in self.ops.values_mut() {
                    op.ack = None;
                }
            }
            self.recovery_view_change(ctx, d.parent_changed());
            let removed: SmallVec<[Rank; 4]> = d.removed_children().collect();
            let added: SmallVec<[Rank; 4]> = d.added_children().collect();
            let ids: Vec<u64> = self.ops.keys().copied().collect();
            for id in ids {
                let Some(op) = self.ops.get_mut(&id) else {
                    continue;
                };
                if id <= self.done || !op.forwarded {
                    continue;
                }
                op.expected.retain(|(c, _)| !removed.contains(c));
                for &c in &added {
                    if !self.unsynced {
                        self.forward_to(ctx, id, c);
                    }
                }
            }
            self.copy_to_adopted(ctx, &added);
        }
        if d.ancestors_changed || d.slot_changed() {
            // The path to the root changed: a relay may have died with a relay rank.
            self.resend_relays(ctx);
        }
        self.settle(ctx);
    }

    /// An unsynced rank with a history (its slot changed: it holds every forward until its
    /// new parent syncs it) that adopts children sends each a copy of every op it holds above
    /// its `done` and could forward (processed, or forward-first), in op order, under a fresh
    /// round. An adopted child left its old parent, and the copy that parent forwarded may
    /// arrive after the child re-parented and be dropped; the sync this rank waits for may in
    /// turn wait on that child: a joiner the grow put in the new parent's slot starts only once
    /// its contact applied the admission, and the contact may be the child (`sim shrink --ranks
    /// 33 --radix 4 --seed 153 --campaigns 6 --joins 4 --crashes 2 --window-ms 1654 --detect`:
    /// the contact lacked the admission for 2.1 s and its joiner was declared unresponsive).
    ///
    /// The ops stay unforwarded and nothing is expected of the copies: the sync re-drives each
    /// through every child under a newer round, so the copies' ACKs count for nothing, and a
    /// child that already holds an op only acknowledges it (each op is delivered once). A
    /// joiner without history, or a rank already synced (it replays through `forward_to`),
    /// sends none.
    fn copy_to_adopted(&mut self, ctx: &mut Ctx<'_>, added: &[Rank]) {
        if added.is_empty() || !self.unsynced || self.joiner {
            return;
        }
        let (done, global_done) = (self.done, self.global_done);
        for (&id, op) in self.ops.iter_mut() {
            if id <= done || (!op.processed && is_process_first(op.tag)) {
                continue;
            }
            op.round = op.round.wrapping_add(1);
            for &c in added {
                ctx.send(c, op.forward(id, done, global_done));
            }
        }
    }

    pub(super) fn check_parent(&self, ctx: &mut Ctx<'_>, from: Rank) -> bool {
        let ok = ctx.tree.view().and_then(|v| v.parent()) == Some(from);
        if !ok {
            ctx.stats.xcast.stale += 1;
        }
        ok
    }

    pub(super) fn learn_seq(&mut self, origin: Rank, seq: u64) {
        if seq == 0 {
            return;
        }
        let e = self.assigned_seq.or_insert(origin, 0);
        *e = (*e).max(seq);
    }

    fn ack(&mut self, ctx: &mut Ctx<'_>, op: u64, round: u32) {
        if let Some(parent) = ctx.tree.view().and_then(|v| v.parent()) {
            ctx.send(parent, AckMsg { op, round });
        }
    }

    /// The next op to process locally, in op-id order (the node handles it, then calls
    /// [`Self::processed`]).
    pub(crate) fn next_delivery(&mut self, ctx: &mut Ctx<'_>) -> Option<Delivery> {
        if self.joiner {
            return None;
        }
        loop {
            let id = self.delivered + 1;
            let op = self.ops.get_mut(&id)?;
            if op.processed {
                self.delivered = id;
                continue;
            }
            op.processed = true;
            self.delivered = id;
            if op.seq != 0 {
                let seen = self.delivered_seq.get(&op.origin).copied().unwrap_or(0);
                if op.seq <= seen {
                    ctx.stats.xcast.duplicate_ops += 1;
                    continue;
                }
                self.delivered_seq.insert(op.origin, op.seq);
            }
            if op.origin == ctx.me() {
                if let Some(p) = self.pending.get_mut(&op.seq) {
                    p.op = Some(id);
                }
            }
            return Some(Delivery {
                op: id,
                origin: op.origin,
                seq: op.seq,
                tag: op.tag,
                payload: op.payload.clone(),
            });
        }
    }

    /// The node finished processing `id`: forward a process-first op now, and settle.
    pub(crate) fn processed(&mut self, ctx: &mut Ctx<'_>, id: u64) {
        let fwd = id > self.done && self.ops.get(&id).is_some_and(|o| !o.forwarded);
        if fwd {
            self.forward(ctx, id);
        }
        self.settle(ctx);
    }

    /// Holds this rank's acknowledgement of op `id` (and so of every later op) until
    /// [`Self::release_hold`].
    pub(crate) fn hold(&mut self, id: u64) {
        self.hold = id;
    }

    /// Whether an acknowledgement is held.
    pub(crate) fn holding(&self) -> bool {
        self.hold != 0
    }

    /// Releases the held acknowledgement and finishes what it held back.
    pub(crate) fn release_hold(&mut self, ctx: &mut Ctx<'_>) {
        if std::mem::take(&mut self.hold) != 0 {
            self.settle(ctx);
        }
    }

    /// Finishes every op that is ready, in id order; prunes ops the global watermark passed.
    pub(super) fn settle(&mut self, ctx: &mut Ctx<'_>) {
        if self.unsynced || self.root_recovering(ctx) {
            return;
        }
        let is_root = ctx.tree.view().is_some_and(|v| v.is_root());
        let has_children = ctx
            .tree
            .view()
            .is_some_and(|v| v.live_children().next().is_some());
        loop {
            let id = self.done + 1;
            let Some(op) = self.ops.get_mut(&id) else {
                break;
            };
            if !op.processed {
                break;
            }
            if !op.forwarded && has_children {
                break;
            }
            if !op.expected.is_empty() || self.hold == id {
                break;
            }
            self.done = id;
            let (origin, seq, ack) = (op.origin, op.seq, op.ack);
            if is_root {
                self.global_done = id;
                self.on_globally_done(ctx, id, origin, seq);
            } else if let Some(round) = ack {
                self.ack(ctx, id, round);
            }
        }
        // Prune what every rank has.
        while let Some((&id, _)) = self.ops.first_key_value() {
            if id > self.global_done || id > self.done {
                break;
            }
            if let Some(op) = self.ops.remove(&id) {
                let c = self.completed_seq.or_insert(op.origin, 0);
                *c = (*c).max(op.seq);
            }
        }
    }

    /// Root: op `id` is complete everywhere.
    fn on_globally_done(&mut self, ctx: &mut Ctx<'_>, id: u64, origin: Rank, seq: u64) {
        let c = self.completed_seq.or_insert(origin, 0);
        *c = (*c).max(seq);
        let tag = self.ops.get(&id).map_or(TAG_FAILURE_NOTICE, |o| o.tag);
        if reports_done(tag) {
            if let Some(op) = self.ops.get(&id) {
                let payload = op.payload.clone();
                ctx.effect(crate::machine::Effect::XcastDone { tag, payload });
            }
        }
        if tag >= FIRST_APP_TAG || tag == TAG_WIREUP {
            ctx.event(XcastEvent::RootCompleted {
                op: id,
                origin,
                seq,
            });
            self.report_completion(ctx, origin, seq, id);
        }
    }

    fn report_completion(&mut self, ctx: &mut Ctx<'_>, origin: Rank, seq: u64, op: u64) {
        let m = CompleteMsg {
            origin,
            seq,
            op,
            query: false,
        };
        let me = ctx.me();
        self.on_complete(ctx, me, m);
    }

    /// A completion report travelling to its origin, or a query travelling to the root.
    pub(crate) fn on_complete(&mut self, ctx: &mut Ctx<'_>, _from: Rank, m: CompleteMsg) {
        let Some(view) = ctx.tree.view() else { return };
        let me = ctx.me();
        if m.query {
            match view.parent() {
                Some(p) => ctx.send(p, m),
                None => {
                    // Complete by this root's record, or because the op id the origin
                    // delivered it under is below the watermark (a root that joined after the
                    // op completed has no record of it).
                    let complete = self
                        .completed_seq
                        .get(&m.origin)
                        .is_some_and(|&c| c >= m.seq)
                        || (m.op != 0 && m.op <= self.global_done);
                    if complete {
                        self.report_completion(ctx, m.origin, m.seq, m.op);
                    }
                }
            }
            return;
        }
        if m.origin != me {
            match ctx.tree.route(m.origin) {
                Route::Next(hop) => ctx.send(hop, m),
                _ => ctx.stats.xcast.stale += 1,
            }
            return;
        }
        match self.pending.remove(&m.seq) {
            Some(p) => {
                self.pending_bytes -= p.payload.len();
                let op = if m.op != 0 { m.op } else { p.op.unwrap_or(0) };
                ctx.event(XcastEvent::Completed { op, seq: m.seq });
            }
            None => ctx.stats.xcast.duplicate_completions += 1,
        }
    }
}

impl crate::machine::Machine for Xcast {
    type Msg = XcastMsg;
    type Timer = XcastTimer;

    /// The no-op a new root puts in place of an op that died with every rank holding it: a
    /// hole filled, nothing to deliver (the default `on_xcast` does nothing).
    const XCAST_TAGS: &'static [u16] = &[TAG_NOOP];

    /// Ops held (in flight or retained) and broadcasts awaiting completion.
    fn held(&self) -> usize {
        self.ops.len() + self.pending.len()
    }

    fn new(cfg: &crate::Config, _me: Rank) -> Self {
        Self::new(cfg.joiner)
    }

    /// A joiner that starts in the root slot (the grow that admitted it moved the root there)
    /// has no parent to sync it: it recovers as a new root, learning the watermark first.
    fn on_start(&mut self, ctx: &mut Ctx<'_>) {
        if self.joiner && ctx.tree.view().is_some_and(|v| v.is_root()) {
            self.unsynced = false;
            self.begin_root_recovery(ctx);
        }
    }

    fn on_view_change(&mut self, ctx: &mut Ctx<'_>, d: &ViewDelta) {
        self.view_changed(ctx, d);
    }

    /// Refuses a relay from a dead origin or from this rank (none comes back to its origin), a
    /// relay of a tag only the root broadcasts (a forged global failure notice would make the
    /// root evict anyone, itself included), and any origin outside the span.
    fn admits(&self, ctx: &Ctx<'_>, msg: &XcastMsg) -> bool {
        let in_span = |r: Rank| ctx.tree.layout().contains(r);
        match msg {
            XcastMsg::Relay(m) => {
                ctx.tree.is_alive(m.origin)
                    && m.origin != ctx.me()
                    && (m.tag == TAG_WIREUP || m.tag >= FIRST_APP_TAG)
            }
            XcastMsg::Forward(m) => in_span(m.origin),
            XcastMsg::RecoveredOp(m) => in_span(m.origin),
            XcastMsg::Complete(m) => in_span(m.origin),
            _ => true,
        }
    }

    fn on_message(&mut self, ctx: &mut Ctx<'_>, from: Rank, msg: XcastMsg) {
        match msg {
            XcastMsg::Relay(m) => self.relay(ctx, m),
            XcastMsg::Forward(m) => self.on_forward(ctx, from, m),
            XcastMsg::Ack(m) => self.on_ack(ctx, from, m),
            XcastMsg::Poll(m) => self.on_poll(ctx, from, m),
            XcastMsg::Need(m) => self.on_need(ctx, from, m),
            XcastMsg::Sync(m) => self.on_sync(ctx, from, m),
            XcastMsg::Complete(m) => self.on_complete(ctx, from, m),
            XcastMsg::Recover(m) => self.on_recover(ctx, from, m),
            XcastMsg::RecoveredOp(m) => self.on_recovered_op(ctx, from, m),
            XcastMsg::RecoverDone(m) => self.on_recover_done(ctx, from, m),
        }
    }

    fn on_timer(&mut self, ctx: &mut Ctx<'_>, timer: XcastTimer, token: TimerToken) {
        match timer {
            XcastTimer::Retry => self.on_retry(ctx, token),
        }
    }
}
