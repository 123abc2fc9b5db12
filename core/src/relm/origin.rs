//! The sending side: uid assignment, the per-destination window and byte budget, ACK release,
//! replays from the origin's copy, and the retry probe.

use std::collections::VecDeque;

use bytes::Bytes;

use super::{charge, MarkKind, Relm, RelmError, RelmEvent, RelmTimer, Uid};
use crate::machine::Ctx;
use crate::time::Instant;
use crate::tree::Rank;
use crate::wire::{RelmDataMsg, UidRange};

/// One unacknowledged message, kept by its origin until an ACK covers it.
#[derive(Debug)]
pub(super) struct OutMsg {
    pub(super) uid: Uid,
    pub(super) tag: u16,
    pub(super) payload: Bytes,
}

/// A chain this rank originates.
#[derive(Debug)]
pub(super) struct OutChain {
    /// The uid the next message gets.
    pub(super) next: Uid,
    /// Unacknowledged messages, in uid order.
    pub(super) unacked: VecDeque<OutMsg>,
    /// Last time the chain made progress (a send into an empty window, an ACK, a probe).
    pub(super) progress: Instant,
}

impl OutChain {
    /// The last uid handed out.
    pub(super) fn last_sent(&self) -> Uid {
        self.next.prev()
    }
}

impl Relm {
    /// Sends `payload` to `dst` through `next` (the node's route to it; `None`: `dst` is this
    /// rank, and the message is delivered at once).
    pub(crate) fn originate(
        &mut self,
        ctx: &mut Ctx<'_>,
        dst: Rank,
        next: Option<Rank>,
        tag: u16,
        payload: Bytes,
    ) -> Result<Uid, RelmError> {
        let me = ctx.me();
        let first = self.first;
        let now = ctx.now;
        let chain = self.out.entry(dst).or_insert_with(|| OutChain {
            next: first,
            unacked: VecDeque::new(),
            progress: now,
        });
        let bytes = charge(&payload);
        if next.is_some()
            && (chain.unacked.len() >= ctx.cfg.relm.window
                || self.out_bytes + bytes > ctx.cfg.relm.max_bytes)
        {
            return Err(RelmError::Backpressure {
                dst,
                inflight: chain.unacked.len(),
                bytes: self.out_bytes,
            });
        }
        let uid = chain.next;
        chain.next = uid.next();
        ctx.stats.relm.sent += 1;
        let Some(next) = next else {
            ctx.stats.relm.delivered += 1;
            ctx.stats.relm.acked += 1;
            ctx.event(RelmEvent::Delivered {
                src: me,
                uid,
                tag,
                payload,
            });
            ctx.event(RelmEvent::Acked { dst, upto: uid });
            return Ok(uid);
        };
        if chain.unacked.is_empty() {
            chain.progress = now;
        }
        chain.unacked.push_back(OutMsg {
            uid,
            tag,
            payload: payload.clone(),
        });
        self.out_bytes += bytes;
        let m = RelmDataMsg {
            src: me,
            dst,
            uid,
            tag,
            payload,
        };
        Self::send(ctx, next, m);
        self.arm_retry(ctx);
        Ok(uid)
    }

    pub(super) fn arm_retry(&mut self, ctx: &mut Ctx<'_>) {
        if self.retry.is_none() {
            let at = ctx.now + ctx.cfg.relm.retry;
            self.retry = Some(ctx.timers.set(RelmTimer::Retry, at));
        }
    }

    /// A cumulative ACK for my chain to `dst`.
    pub(super) fn origin_ack(&mut self, ctx: &mut Ctx<'_>, dst: Rank, upto: Uid) {
        let Some(chain) = self.out.get_mut(&dst) else {
            ctx.stats.relm.stale += 1;
            return;
        };
        let Some(front) = chain.unacked.front() else {
            ctx.stats.relm.stale += 1; // a repeated ACK: everything is confirmed already
            return;
        };
        if upto.after(chain.last_sent()) || !upto.after(front.uid.prev()) {
            ctx.stats.relm.stale += 1; // beyond anything sent, or old news
            return;
        }
        let mut released = 0u64;
        while let Some(m) = chain.unacked.front() {
            if !m.uid.at_or_before(upto) {
                break;
            }
            self.out_bytes -= charge(&m.payload);
            chain.unacked.pop_front();
            released += 1;
        }
        chain.progress = ctx.now;
        ctx.stats.relm.acked += released;
        ctx.event(RelmEvent::Acked { dst, upto });
    }

    /// A replay request reached the origin: re-send every requested message still held.
    pub(super) fn origin_replay(&mut self, ctx: &mut Ctx<'_>, dst: Rank, ranges: &[UidRange]) {
        let Some(chain) = self.out.get(&dst) else {
            ctx.stats.relm.stale += 1;
            return;
        };
        let held = chain.unacked.iter().map(|m| (m.uid, m.tag, &m.payload));
        Self::replay(ctx, (ctx.me(), dst), ranges, held);
    }

    /// Retry: every chain that made no ACK progress for `relm.retry` probes its destination
    /// (which answers with an ACK and asks for what it misses).
    pub(super) fn retry_stalled(&mut self, ctx: &mut Ctx<'_>) {
        let me = ctx.me();
        let now = ctx.now;
        let mut stalled = Vec::new();
        let mut any = false;
        for (&dst, chain) in &mut self.out {
            if chain.unacked.is_empty() {
                continue;
            }
            any = true;
            if chain.progress + ctx.cfg.relm.retry <= now {
                chain.progress = now;
                stalled.push((dst, chain.last_sent()));
            }
        }
        for (dst, hi) in stalled {
            ctx.stats.relm.retry_probes += 1;
            self.route_mark(ctx, MarkKind::Probe, (me, dst), hi);
        }
        if any {
            self.arm_retry(ctx);
        }
    }

    /// The destination died: report its unconfirmed messages as failed and release them.
    pub(super) fn fail_chain(&mut self, ctx: &mut Ctx<'_>, dst: Rank) {
        let Some(chain) = self.out.remove(&dst) else {
            return;
        };
        if let Some(front) = chain.unacked.front() {
            let count = chain.unacked.len() as u32;
            for m in &chain.unacked {
                self.out_bytes -= charge(&m.payload);
            }
            ctx.stats.relm.failed += count as u64;
            ctx.event(RelmEvent::Failed {
                dst,
                first: front.uid,
                count,
            });
        }
    }
}
