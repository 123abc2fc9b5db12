//! The skeleton's test protocol: a tree flood.
//!
//! A flood started at any rank is forwarded once over every tree link except the one it
//! arrived on, and delivered once per rank. On a fault-free tree it costs exactly `n - 1` frames.
//! It is deliberately unreliable (a frame lost to a dying link is not retried: reliable
//! broadcast is xcast's job) but it exercises the whole driving contract: a command, frames in
//! and out, events, a timer with a generation token, and a bound with a counted drop.

use std::collections::VecDeque;

use bytes::Bytes;

use crate::event::Event;
use crate::node::Ctx;
use crate::outbox::Class;
use crate::time::Instant;
use crate::timer::{TimerKey, TimerToken};
use crate::tree::Rank;
use crate::wire::{FloodMsg, Message};

/// Flood state of one node: ids seen recently, oldest first.
#[derive(Debug, Default)]
pub(crate) struct Flood {
    next_id: u64,
    /// (origin, id, forget at), in arrival order, so expiry order too.
    seen: VecDeque<(Rank, u64, Instant)>,
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
        self.accept(ctx, None, msg);
        self.next_id
    }

    /// A flood frame from `from`.
    pub(crate) fn handle(&mut self, ctx: &mut Ctx<'_>, from: Rank, msg: FloodMsg) {
        if self
            .seen
            .iter()
            .any(|&(o, i, _)| o == msg.origin && i == msg.id)
        {
            ctx.stats.flood_duplicates += 1;
            return;
        }
        self.accept(ctx, Some(from), msg);
    }

    fn accept(&mut self, ctx: &mut Ctx<'_>, from: Option<Rank>, msg: FloodMsg) {
        if self.seen.len() >= ctx.cfg.max_floods {
            self.seen.pop_front();
            ctx.stats.flood_forgotten += 1;
        }
        let forget_at = ctx.now + ctx.cfg.flood_linger;
        self.seen.push_back((msg.origin, msg.id, forget_at));
        if self.sweep.is_none() {
            self.sweep = Some(ctx.timers.set(TimerKey::FloodSweep, forget_at));
        }
        let fwd = Message::Flood(FloodMsg {
            hops: msg.hops.saturating_add(1),
            ..msg.clone()
        });
        let neighbours: Vec<Rank> = match ctx.tree.view() {
            Some(v) => v.parent().into_iter().chain(v.live_children()).collect(),
            None => Vec::new(),
        };
        if neighbours.iter().any(|&n| Some(n) != from) {
            let frame = fwd.encode();
            for n in neighbours.into_iter().filter(|&n| Some(n) != from) {
                ctx.send_frame(n, Class::Data, frame.clone());
            }
        }
        ctx.event(Event::FloodDelivered {
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
            self.seen.pop_front();
        }
        if self.seen.is_empty() {
            self.seen = VecDeque::new();
        } else if let Some(&(_, _, at)) = self.seen.front() {
            self.sweep = Some(ctx.timers.set(TimerKey::FloodSweep, at));
        }
    }

    /// Remembered ids (for tests and memory accounting).
    pub(crate) fn remembered(&self) -> usize {
        self.seen.len()
    }
}
