//! The skeleton's test protocol: a tree flood.
//!
//! A flood started at any rank is forwarded once over every tree link except the one it
//! arrived on, and delivered once per rank. On a fault-free tree it costs exactly `n - 1` frames.
//! It is deliberately unreliable (a frame lost to a dying link is not retried: reliable
//! broadcast is xcast's job) but it exercises the whole driving contract: a command, frames in
//! and out, events, a timer with a generation token, and a bound with a counted drop.

use std::collections::VecDeque;

use bytes::Bytes;
use smallvec::SmallVec;

use crate::machine::Ctx;
use crate::time::Instant;
use crate::timer::TimerToken;
use crate::tree::Rank;
use crate::vecmap::VecSet;

mod config;
mod event;
mod stats;
mod timer;
mod wire;

pub use config::FloodConfig;
pub use event::FloodEvent;
pub use stats::FloodStats;
pub use timer::FloodTimer;
pub(crate) use wire::max_payload;
pub use wire::FloodMsg;

/// Flood state of one node: ids seen recently, oldest first.
#[derive(Debug, Default)]
pub(crate) struct Flood {
    next_id: u64,
    /// (origin, id, forget at), in arrival order, so expiry order too.
    seen: VecDeque<(Rank, u64, Instant)>,
    /// The same (origin, id) pairs as `seen` (each at most once there), so the duplicate check
    /// is a lookup instead of a scan of up to `flood.max` entries. Ordered, so deterministic.
    index: VecSet<(Rank, u64)>,
    sweep: Option<TimerToken>,
}

impl Flood {
    /// Starts a flood from this rank and delivers it locally. Returns its id.
    pub(crate) fn start(&mut self, ctx: &mut Ctx<'_>, payload: Bytes) -> u64 {
        self.next_id += 1;
        let msg = FloodMsg {
            origin: ctx.me(),
            id: self.next_id,
            hops: 0,
            payload,
        };
        self.index.insert((msg.origin, msg.id));
        self.accept(ctx, None, msg);
        self.next_id
    }

    /// A flood frame from `from`.
    pub(crate) fn handle(&mut self, ctx: &mut Ctx<'_>, from: Rank, msg: FloodMsg) {
        // One search: the id is recorded here if it is new.
        if !self.index.insert((msg.origin, msg.id)) {
            ctx.stats.flood.duplicates += 1;
            return;
        }
        self.accept(ctx, Some(from), msg);
    }

    /// Remembers and delivers a new flood (already in `index`) and forwards it.
    fn accept(&mut self, ctx: &mut Ctx<'_>, from: Option<Rank>, msg: FloodMsg) {
        if self.seen.len() >= ctx.cfg.flood.max {
            self.forget_oldest();
            ctx.stats.flood.forgotten += 1;
        }
        let forget_at = ctx.now + ctx.cfg.flood.linger;
        if self.seen.capacity() == 0 {
            // Room for one (most nodes of a large cluster remember one flood at a time).
            self.seen.reserve_exact(1);
        }
        self.seen.push_back((msg.origin, msg.id, forget_at));
        debug_assert_eq!(self.index.len(), self.seen.len());
        if self.sweep.is_none() {
            self.sweep = Some(ctx.timers.set(FloodTimer::Sweep, forget_at));
        }
        // Every tree link but the one it came on; inline up to radix 8 (no allocation per frame).
        let to: SmallVec<[Rank; 8]> = match ctx.tree.view() {
            Some(v) => v
                .parent()
                .into_iter()
                .chain(v.live_children())
                .filter(|&n| Some(n) != from)
                .collect(),
            None => SmallVec::new(),
        };
        if !to.is_empty() {
            let fwd = FloodMsg {
                hops: msg.hops.saturating_add(1),
                ..msg.clone()
            };
            ctx.send_all(to, fwd);
        }
        ctx.event(FloodEvent::Delivered {
            origin: msg.origin,
            id: msg.id,
            hops: msg.hops,
            payload: msg.payload,
        });
    }

    /// The sweep timer fired: forget expired ids and re-arm for the next one.
    pub(crate) fn on_timeout(&mut self, ctx: &mut Ctx<'_>, token: TimerToken) {
        if self.sweep != Some(token) {
            ctx.stats.stale_timers += 1;
            return;
        }
        self.sweep = None;
        while self.seen.front().is_some_and(|&(_, _, at)| at <= ctx.now) {
            self.forget_oldest();
        }
        if self.seen.is_empty() {
            self.seen = VecDeque::new();
        } else if let Some(&(_, _, at)) = self.seen.front() {
            self.sweep = Some(ctx.timers.set(FloodTimer::Sweep, at));
        }
    }

    /// Forgets the oldest remembered id.
    fn forget_oldest(&mut self) {
        if let Some((o, i, _)) = self.seen.pop_front() {
            self.index.remove(&(o, i));
        }
    }
}

impl crate::machine::Machine for Flood {
    type Msg = FloodMsg;
    type Timer = FloodTimer;

    /// Remembered ids.
    fn held(&self) -> usize {
        self.seen.len()
    }

    fn new(_cfg: &crate::Config, _me: Rank) -> Self {
        Self::default()
    }

    /// Refuses a flood from a dead origin or from this rank (none comes back to its origin).
    fn admits(&self, ctx: &Ctx<'_>, msg: &FloodMsg) -> bool {
        ctx.tree.is_alive(msg.origin) && msg.origin != ctx.me()
    }

    fn on_message(&mut self, ctx: &mut Ctx<'_>, from: Rank, msg: FloodMsg) {
        self.handle(ctx, from, msg);
    }

    fn on_timer(&mut self, ctx: &mut Ctx<'_>, timer: FloodTimer, token: TimerToken) {
        match timer {
            FloodTimer::Sweep => self.on_timeout(ctx, token),
        }
    }
}
