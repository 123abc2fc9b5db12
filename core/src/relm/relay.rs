//! The relay side: forwarding, the bounded replay cache, per-chain records (what was sent and
//! acknowledged through here), and replay requests climbing toward the source.
//!
//! Records and cached copies are soft state: correctness rests on the origin's copy and the
//! destination's watermark. A cached copy goes when an ACK covers it, after `relm.cache_ttl`,
//! or when `relm.cache_max` newer copies arrive; a record goes when an ACK covers everything it
//! saw sent, when the path no longer crosses this rank, or after idling twice `relm.retry`.

use std::collections::{BTreeMap, VecDeque};

use bytes::Bytes;

use super::{Chain, MarkKind, Relm, RelmEvent, RelmMsg, RelmTimer, Uid};
use crate::machine::Ctx;
use crate::time::{Duration, Instant};
use crate::timer::TimerToken;
use crate::tree::Rank;
use crate::wire::{RelmDataMsg, RelmReqMsg, UidRange};

/// A forwarded message's copy.
#[derive(Debug)]
pub(super) struct Cached {
    seq: u64,
    uid: Uid,
    tag: u16,
    payload: Bytes,
}

/// What this rank knows of a chain it relays.
#[derive(Debug)]
pub(super) struct Relayed {
    /// Highest uid seen sent through here (forwarded, or claimed by a probe).
    pub(super) sent_hi: Option<Uid>,
    /// Highest uid an ACK through here confirmed.
    pub(super) acked: Option<Uid>,
    /// Copies, in insertion order (ascending `seq`).
    cache: VecDeque<Cached>,
    /// Last activity.
    touched: Instant,
}

impl Relayed {
    fn new(now: Instant) -> Self {
        Self {
            sent_hi: None,
            acked: None,
            cache: VecDeque::new(),
            touched: now,
        }
    }

    /// Nothing outstanding: every uid seen sent is acknowledged and nothing is cached.
    fn settled(&self) -> bool {
        self.cache.is_empty()
            && match (self.sent_hi, self.acked) {
                (None, _) => true,
                (Some(s), Some(a)) => s.at_or_before(a),
                (Some(_), None) => false,
            }
    }
}

/// Insertion order of every cached copy, for eviction by age and by count.
#[derive(Debug, Default)]
pub(super) struct CacheFifo {
    order: VecDeque<(Instant, Chain, u64)>,
    cached: usize,
    next_seq: u64,
}

impl CacheFifo {
    pub(super) fn cached(&self) -> usize {
        self.cached
    }
}

impl Relm {
    /// A message passing through: forward it toward its destination, keeping a copy.
    pub(super) fn relay_data(&mut self, ctx: &mut Ctx<'_>, from: Rank, m: RelmDataMsg) {
        let Some(next) = Self::next_hop(ctx, m.dst) else {
            ctx.stats.relm.stale += 1; // destination dead or cut off: its origin is told
            return;
        };
        if next == from {
            ctx.stats.relm.stale += 1; // views disagree; the origin's probe will sort it out
            return;
        }
        let chain = (m.src, m.dst);
        let rec = record(&mut self.relayed, chain, ctx.now);
        if rec.acked.is_some_and(|a| m.uid.at_or_before(a)) {
            // Already delivered: a late replay. Tell the sender instead of forwarding.
            let a = rec.acked.expect("checked");
            self.route_mark(ctx, MarkKind::Ack, chain, a);
            return;
        }
        rec.sent_hi = Some(rec.sent_hi.map_or(m.uid, |s| s.later(m.uid)));
        if ctx.cfg.relm.cache_max > 0 {
            let in_order = rec.cache.back().is_none_or(|c| m.uid.after(c.uid));
            let existing = if in_order {
                None
            } else {
                rec.cache.iter().find(|c| c.uid == m.uid)
            };
            match existing {
                Some(c) if c.tag != m.tag || c.payload != m.payload => {
                    ctx.stats.relm.collisions += 1;
                    ctx.event(RelmEvent::Collision {
                        src: m.src,
                        dst: m.dst,
                        uid: m.uid,
                    });
                    return;
                }
                Some(_) => {}
                None => {
                    let seq = self.fifo.next_seq;
                    self.fifo.next_seq += 1;
                    let c = Cached {
                        seq,
                        uid: m.uid,
                        tag: m.tag,
                        payload: m.payload.clone(),
                    };
                    // Appended in `seq` order (replays too), for the eviction lookup.
                    rec.cache.push_back(c);
                    self.fifo.order.push_back((ctx.now, chain, seq));
                    self.fifo.cached += 1;
                    if self.fifo.cached > ctx.cfg.relm.cache_max {
                        self.evict_oldest(ctx);
                    }
                }
            }
        }
        self.arm_sweep(ctx);
        ctx.stats.relm.forwarded += 1;
        Self::send(ctx, next, m);
    }

    /// An ACK passing through toward the source: release copies it covers, pass it on once.
    pub(super) fn relay_ack(&mut self, ctx: &mut Ctx<'_>, chain: Chain, upto: Uid) {
        if let Some(rec) = self.relayed.get_mut(&chain) {
            if rec.acked.is_some_and(|a| upto.at_or_before(a)) {
                return; // already passed on
            }
            let acked_before = rec.acked;
            rec.acked = Some(upto);
            rec.touched = ctx.now;
            let before = rec.cache.len();
            rec.cache.retain(|c| !c.uid.at_or_before(upto));
            let released = before - rec.cache.len();
            self.fifo.cached -= released;
            // An ACK that frees a quarter of a window goes on at once (after the frame that
            // carried it), so a fast sender never waits on every hop's coalescing delay.
            let freed = acked_before.map_or(released as u64, |a| a.dist(upto));
            if freed >= (ctx.cfg.relm.window as u64 / 4).max(1) {
                self.urgent = true;
            }
            if rec.settled() {
                self.relayed.remove(&chain);
            }
            self.fifo_compact();
        }
        self.route_mark(ctx, MarkKind::Ack, chain, upto);
    }

    /// A probe passing through toward the destination. Already acknowledged here: answer with
    /// the ACK at once (PRRTE would strand it). Otherwise note it and pass it on.
    pub(super) fn relay_probe(&mut self, ctx: &mut Ctx<'_>, from: Rank, chain: Chain, hi: Uid) {
        match Self::next_hop(ctx, chain.1) {
            Some(n) if n != from => {}
            _ => {
                ctx.stats.relm.stale += 1;
                return;
            }
        }
        let rec = record(&mut self.relayed, chain, ctx.now);
        if let Some(a) = rec.acked.filter(|a| hi.at_or_before(*a)) {
            if rec.settled() {
                self.relayed.remove(&chain);
            }
            self.route_mark(ctx, MarkKind::Ack, chain, a);
            return;
        }
        rec.sent_hi = Some(rec.sent_hi.map_or(hi, |s| s.later(hi)));
        self.arm_sweep(ctx);
        self.route_mark(ctx, MarkKind::Probe, chain, hi);
    }

    /// A replay request from downstream: answer from the origin's copy or this relay's cache,
    /// and pass on upstream whatever is not here.
    pub(crate) fn on_req(&mut self, ctx: &mut Ctx<'_>, m: RelmReqMsg) {
        let me = ctx.me();
        if m.src == me {
            self.origin_replay(ctx, m.dst, &m.ranges);
            return;
        }
        if m.dst == me {
            ctx.stats.relm.stale += 1;
            return;
        }
        let chain = (m.src, m.dst);
        let covered = match self.relayed.get(&chain) {
            Some(rec) => Self::replay(
                ctx,
                chain,
                &m.ranges,
                rec.cache.iter().map(|c| (c.uid, c.tag, &c.payload)),
            ),
            None => Vec::new(),
        };
        let mut rest = subtract(&m.ranges, &covered);
        if rest.is_empty() {
            return;
        }
        // Splitting around what was answered here can add ranges: keep the request within one
        // frame (the first ones; the destination asks again for the rest once these arrive).
        rest.truncate(super::ranges_per_frame(ctx));
        if let Some(up) = Self::next_hop(ctx, m.src) {
            let fwd = RelmReqMsg {
                src: m.src,
                dst: m.dst,
                ranges: rest,
            };
            Self::send(ctx, up, fwd);
        }
    }

    /// Re-sends toward the chain's destination every held message (uid, tag, payload) that
    /// `ranges` asks for; returns their uids.
    pub(super) fn replay<'a>(
        ctx: &mut Ctx<'_>,
        (src, dst): Chain,
        ranges: &[UidRange],
        held: impl Iterator<Item = (Uid, u16, &'a Bytes)>,
    ) -> Vec<Uid> {
        let Some(next) = Self::next_hop(ctx, dst) else {
            return Vec::new();
        };
        let mut frames = Vec::new();
        let mut uids = Vec::new();
        for (uid, tag, payload) in held.filter(|(u, _, _)| ranges.iter().any(|r| r.contains(*u))) {
            uids.push(uid);
            frames.push(RelmMsg::Data(RelmDataMsg {
                src,
                dst,
                uid,
                tag,
                payload: payload.clone(),
            }));
        }
        ctx.stats.relm.replays += frames.len() as u64;
        for f in frames {
            Self::send(ctx, next, f);
        }
        uids
    }

    fn arm_sweep(&mut self, ctx: &mut Ctx<'_>) {
        if self.sweep.is_none() {
            let half = Duration::from_nanos((ctx.cfg.relm.cache_ttl.as_nanos() / 2).max(1_000_000));
            self.sweep = Some(ctx.timers.set(RelmTimer::Sweep, ctx.now + half));
        }
    }

    /// The sweep timer fired: evict expired copies and idle records.
    pub(crate) fn on_sweep_timer(&mut self, ctx: &mut Ctx<'_>, token: TimerToken) {
        if self.sweep != Some(token) {
            ctx.stats.stale_timers += 1;
            return;
        }
        self.sweep = None;
        let now = ctx.now;
        let ttl = ctx.cfg.relm.cache_ttl;
        while let Some(&(at, _, _)) = self.fifo.order.front() {
            if at + ttl > now {
                break;
            }
            self.evict_oldest(ctx);
        }
        let idle = ctx.cfg.relm.retry + ctx.cfg.relm.retry;
        let mut expired = 0;
        self.relayed.retain(|_, r| {
            let keep = !r.cache.is_empty() || r.touched + idle > now;
            expired += u64::from(!keep);
            keep
        });
        ctx.stats.relm.records_expired += expired;
        if !self.relayed.is_empty() {
            self.arm_sweep(ctx);
        }
    }

    /// Evicts the oldest cached copy still present.
    fn evict_oldest(&mut self, ctx: &mut Ctx<'_>) {
        while let Some((_, chain, seq)) = self.fifo.order.pop_front() {
            let Some(rec) = self.relayed.get_mut(&chain) else {
                continue;
            };
            let Ok(i) = rec.cache.binary_search_by_key(&seq, |c| c.seq) else {
                continue;
            };
            rec.cache.remove(i);
            self.fifo.cached -= 1;
            ctx.stats.relm.cache_evicted += 1;
            if rec.settled() {
                self.relayed.remove(&chain);
            }
            return;
        }
    }

    /// Drops stale eviction entries once nothing is cached.
    pub(super) fn fifo_compact(&mut self) {
        if self.fifo.cached == 0 {
            self.fifo.order.clear();
        }
    }

    /// Drops every record and copy `drop` selects.
    pub(super) fn purge_relayed(&mut self, mut drop: impl FnMut(Chain) -> bool) {
        let mut freed = 0;
        self.relayed.retain(|&k, r| {
            let d = drop(k);
            if d {
                freed += r.cache.len();
            }
            !d
        });
        self.fifo.cached -= freed;
        self.fifo_compact();
    }
}

/// The record of `chain`, created if new, marked active at `now`.
fn record(relayed: &mut BTreeMap<Chain, Relayed>, chain: Chain, now: Instant) -> &mut Relayed {
    let rec = relayed.entry(chain).or_insert_with(|| Relayed::new(now));
    rec.touched = now;
    rec
}

/// `ranges` without the uids in `covered`.
fn subtract(ranges: &[UidRange], covered: &[Uid]) -> Vec<UidRange> {
    let mut out = Vec::new();
    for r in ranges {
        let mut offs: Vec<u64> = covered
            .iter()
            .map(|&u| r.first.dist(u))
            .filter(|&d| d < r.count as u64)
            .collect();
        offs.sort_unstable();
        offs.dedup();
        let mut start = 0u64;
        for o in offs.into_iter().chain(std::iter::once(r.count as u64)) {
            if o > start {
                out.push(UidRange {
                    first: r.first.plus(start),
                    count: (o - start) as u32,
                });
            }
            start = o + 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subtract_splits_ranges() {
        let u = |v| Uid::new(v).unwrap();
        let r = [UidRange {
            first: u(crate::relm::UID_MAX - 1),
            count: 6,
        }];
        // The range is MAX-1, MAX, 0, 1, 2, 3; remove MAX and 2.
        let rest = subtract(&r, &[u(crate::relm::UID_MAX), u(2), u(99)]);
        assert_eq!(
            rest,
            vec![
                UidRange {
                    first: u(crate::relm::UID_MAX - 1),
                    count: 1
                },
                UidRange {
                    first: u(0),
                    count: 2
                },
                UidRange {
                    first: u(3),
                    count: 1
                },
            ]
        );
        assert!(subtract(&r, &[]).len() == 1);
    }
}
