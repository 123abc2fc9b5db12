//! Root-failover recovery: the new root gathers every op any survivor still holds before it
//! numbers anything new, so op ids stay unique and every op some survivor delivered reaches all.
//!
//! The new root sends [`RecoverMsg`] to its children; each rank reports every op above the base
//! it holds ([`RecoveredOpMsg`]), passes the request to its own children, relays up the ops they
//! report that it lacked, and answers [`RecoverDoneMsg`] once its whole subtree has. The root
//! then fills any op id nobody holds with a no-op (its op died with every rank that had it),
//! re-drives everything above its watermark in id order, and resumes numbering after the
//! highest id recovered. A view change during recovery updates the set of children waited for;
//! a root failover during recovery starts a new round with a higher `gen`.
//!
//! A grow can put a joiner in the root slot (the slot rule prefers the highest living
//! descendant, and joiners have the highest ranks), and a joiner can be promoted there by a
//! failover before any parent synced it: such a root has no broadcast history (no watermark, no
//! round count), and a joiner synced later knows only the rounds run since it joined. Every
//! [`RecoverDoneMsg`] therefore carries the highest round and global watermark its subtree
//! knows, and a rank asked under round 0 or under a round older than one it served reports
//! nothing and answers with them at once. A root with no history asks round 0 first and takes
//! the watermark as its own (everything up to it reached every rank before it joined); a root
//! whose round turns out old asks again above the highest round seen.

use smallvec::SmallVec;

use super::{is_process_first, Op, Xcast, TAG_NOOP};
use crate::machine::Ctx;
use crate::tree::Rank;
use crate::wire::{RecoverDoneMsg, RecoverMsg, RecoveredOpMsg};

/// An in-progress recovery round at one rank.
#[derive(Debug)]
pub(super) struct Recovery {
    gen: u64,
    /// Children that have not finished reporting.
    waiting: SmallVec<[Rank; 4]>,
    /// The highest round and global watermark the children that finished know.
    seen_gen: u64,
    global_done: u64,
}

impl Xcast {
    /// Whether this rank is the root still gathering ops (it numbers nothing meanwhile).
    pub(super) fn root_recovering(&self, ctx: &Ctx<'_>) -> bool {
        self.recovery.is_some() && ctx.tree.view().is_some_and(|v| v.is_root())
    }

    /// This rank just became the root: start a recovery round (round 0 first for a root with
    /// no broadcast history: a joiner no parent has synced).
    pub(super) fn begin_root_recovery(&mut self, ctx: &mut Ctx<'_>) {
        if self.joiner {
            self.start_round(ctx, 0);
            return;
        }
        self.recovery_gen += 1;
        let gen = self.recovery_gen;
        self.start_round(ctx, gen);
    }

    /// Sends the request to every child and waits for them (finishing at once without any).
    fn start_round(&mut self, ctx: &mut Ctx<'_>, gen: u64) {
        let children: SmallVec<[Rank; 4]> = match ctx.tree.view() {
            Some(v) => v.live_children().collect(),
            None => return,
        };
        let base = self.global_done;
        for &c in &children {
            ctx.send(c, RecoverMsg { gen, base });
        }
        self.recovery = Some(Recovery {
            gen,
            waiting: children,
            seen_gen: 0,
            global_done: 0,
        });
        self.maybe_finish(ctx);
    }

    /// A recovery request from the parent: report what I hold, then ask my children. Round 0,
    /// or a round older than one this rank served, is answered at once with what this rank
    /// knows (its parent has no history, or missed rounds).
    pub(crate) fn on_recover(&mut self, ctx: &mut Ctx<'_>, from: Rank, m: RecoverMsg) {
        if !self.check_parent(ctx, from) {
            return;
        }
        if m.gen == 0 || m.gen < self.recovery_gen {
            let done = RecoverDoneMsg {
                gen: m.gen,
                seen_gen: self.recovery_gen,
                global_done: self.global_done,
            };
            ctx.send(from, done);
            return;
        }
        self.recovery_gen = m.gen;
        let held: Vec<RecoveredOpMsg> = self
            .ops
            .range(m.base + 1..)
            .map(|(&id, o)| RecoveredOpMsg {
                gen: m.gen,
                op: id,
                origin: o.origin,
                seq: o.seq,
                tag: o.tag,
                payload: o.payload.clone(),
            })
            .collect();
        for r in held {
            ctx.send(from, r);
        }
        self.start_round(ctx, m.gen);
    }

    /// An op reported by a child: keep it if new, and pass it up.
    pub(crate) fn on_recovered_op(&mut self, ctx: &mut Ctx<'_>, from: Rank, m: RecoveredOpMsg) {
        if !self.waiting_on(from, m.gen) {
            ctx.stats.xcast.stale += 1;
            return;
        }
        if !self.in_window(ctx, m.op) {
            return;
        }
        if self.ops.contains_key(&m.op) || m.op <= self.global_done {
            return;
        }
        self.learn_seq(m.origin, m.seq);
        self.max_seen = self.max_seen.max(m.op);
        self.ops.insert(
            m.op,
            Op::new(
                m.origin,
                m.seq,
                m.tag,
                m.payload.clone(),
                m.op <= self.delivered,
            ),
        );
        ctx.stats.xcast.recovered_ops += 1;
        if let Some(parent) = ctx.tree.view().and_then(|v| v.parent()) {
            ctx.send(parent, m);
        }
    }

    /// A child's subtree has reported.
    pub(crate) fn on_recover_done(&mut self, ctx: &mut Ctx<'_>, from: Rank, m: RecoverDoneMsg) {
        if !self.waiting_on(from, m.gen) {
            ctx.stats.xcast.stale += 1;
            return;
        }
        if let Some(r) = self.recovery.as_mut() {
            r.waiting.retain(|c| *c != from);
            r.seen_gen = r.seen_gen.max(m.seen_gen);
            r.global_done = r.global_done.max(m.global_done);
        }
        self.maybe_finish(ctx);
    }

    /// A child said hello while this rank waits on it: a request sent before the child knew
    /// this rank as its parent was ignored, so it is asked again.
    pub(super) fn recovery_hello(&mut self, ctx: &mut Ctx<'_>, child: Rank) {
        if let Some(r) = self
            .recovery
            .as_ref()
            .filter(|r| r.waiting.contains(&child))
        {
            let m = RecoverMsg {
                gen: r.gen,
                base: self.global_done,
            };
            ctx.send(child, m);
        }
    }

    fn waiting_on(&self, child: Rank, gen: u64) -> bool {
        self.recovery
            .as_ref()
            .is_some_and(|r| r.gen == gen && r.waiting.contains(&child))
    }

    /// The view changed during a round: wait for new children too, not for lost ones; a rank
    /// whose parent changed abandons its round (its new parent asks again if it must).
    pub(super) fn recovery_view_change(&mut self, ctx: &mut Ctx<'_>, parent_changed: bool) {
        let Some(r) = self.recovery.as_mut() else {
            return;
        };
        let is_root = ctx.tree.view().is_some_and(|v| v.is_root());
        if parent_changed && !is_root {
            self.recovery = None;
            return;
        }
        let children: SmallVec<[Rank; 4]> = match ctx.tree.view() {
            Some(v) => v.live_children().collect(),
            None => return,
        };
        r.waiting.retain(|c| children.contains(c));
        let (gen, base) = (r.gen, self.global_done);
        let fresh: SmallVec<[Rank; 4]> = children
            .iter()
            .copied()
            .filter(|c| !r.waiting.contains(c))
            .collect();
        // A child new in its slot has not been asked; one that was asked and stays keeps its place.
        for c in fresh {
            if let Some(r) = self.recovery.as_mut() {
                r.waiting.push(c);
            }
            ctx.send(c, RecoverMsg { gen, base });
        }
        self.maybe_finish(ctx);
    }

    fn maybe_finish(&mut self, ctx: &mut Ctx<'_>) {
        let Some(r) = self.recovery.as_ref() else {
            return;
        };
        if !r.waiting.is_empty() {
            return;
        }
        let gen = r.gen;
        let seen_gen = r.seen_gen.max(self.recovery_gen);
        let global_done = r.global_done.max(self.global_done);
        self.recovery = None;
        match ctx.tree.view().and_then(|v| v.parent()) {
            Some(parent) => ctx.send(
                parent,
                RecoverDoneMsg {
                    gen,
                    seen_gen,
                    global_done,
                },
            ),
            None if gen == 0 || seen_gen > gen => self.recover_again(ctx, seen_gen, global_done),
            None => self.finish_root_recovery(ctx),
        }
    }

    /// Root: its round was round 0 (it had no history) or older than one its subtree served.
    /// A root with no history takes the subtree's watermark as its own; then it asks again,
    /// above the highest round seen.
    fn recover_again(&mut self, ctx: &mut Ctx<'_>, seen_gen: u64, global_done: u64) {
        if self.joiner {
            self.global_done = self.global_done.max(global_done);
            self.adopt_watermark(ctx, global_done);
        }
        self.recovery_gen = self.recovery_gen.max(seen_gen);
        self.begin_root_recovery(ctx);
    }

    /// Root: fill holes with no-ops, re-drive everything above the watermark, resume numbering.
    fn finish_root_recovery(&mut self, ctx: &mut Ctx<'_>) {
        let w = ctx.cfg.xcast.max_inflight as u64;
        let top = self
            .ops
            .last_key_value()
            .map_or(0, |(&id, _)| id)
            .max(self.max_seen)
            .min(self.done.saturating_add(4 * w + 16));
        let me = ctx.me();
        for id in self.done + 1..=top {
            self.ops.get_or_insert_with(id, || {
                ctx.stats.xcast.noop_fills += 1;
                Op::new(me, 0, TAG_NOOP, bytes::Bytes::new(), false)
            });
        }
        self.max_seen = top;
        let ids: Vec<u64> = self.ops.range(self.done + 1..).map(|(&id, _)| id).collect();
        for id in ids {
            if self
                .ops
                .get(&id)
                .is_some_and(|o| o.processed || !is_process_first(o.tag))
            {
                self.forward(ctx, id);
            }
        }
        for m in std::mem::take(&mut self.deferred_notices) {
            self.number(ctx, m);
        }
        self.resend_relays(ctx);
        self.settle(ctx);
    }
}
