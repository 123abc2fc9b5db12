//! The delivery side: one watermark per source, an out-of-order buffer above it, ACKs, and
//! replay requests for what a probe says was sent but never arrived.

use std::collections::BTreeMap;

use bytes::Bytes;

use super::{MarkKind, Relm, RelmEvent, Uid, UID_MODULUS};
use crate::machine::Ctx;
use crate::time::{Duration, Instant};
use crate::tree::Rank;
use crate::wire::{RelmDataMsg, RelmReqMsg, UidRange};

/// A message held above a gap.
#[derive(Debug)]
pub(super) struct Held {
    uid: Uid,
    tag: u16,
    payload: Bytes,
}

/// A chain this rank receives.
#[derive(Debug)]
pub(super) struct InChain {
    /// The last uid delivered (the first uid's predecessor before any delivery). Everything at
    /// or before it is done: never delivered again, always answered with an ACK.
    pub(super) delivered: Uid,
    /// Messages delivered so far: positions key the buffer (`delivered` is position `pos`).
    pos: u64,
    /// Messages above a gap, by position.
    ooo: BTreeMap<u64, Held>,
    /// The last uid of the outstanding request, and when it went: for half of `relm.retry`
    /// later probes only raise `probed` (the probes of one repair arrive together and ask
    /// once; a request lost on the way is asked again by the next probe after that).
    requested: Option<(Uid, Instant)>,
    /// The highest uid a probe said was sent, while above the watermark: once the last
    /// request is answered, what is still missing below it is asked for at once.
    probed: Option<Uid>,
}

impl InChain {
    fn new(first: Uid) -> Self {
        Self {
            delivered: first.prev(),
            pos: 0,
            ooo: BTreeMap::new(),
            requested: None,
            probed: None,
        }
    }

    /// Forgets the last request (after a death: it may have been lost on the way).
    pub(super) fn forget_request(&mut self) {
        self.requested = None;
    }

    /// Whether anything was delivered yet.
    pub(super) fn delivered_any(&self) -> bool {
        self.pos > 0
    }

    /// Buffered messages.
    pub(super) fn held(&self) -> usize {
        self.ooo.len()
    }

    /// Buffered messages, dropped (the source died).
    pub(super) fn discard(self) -> u32 {
        self.ooo.len() as u32
    }
}

impl Relm {
    /// A message for this rank.
    pub(super) fn dest_data(&mut self, ctx: &mut Ctx<'_>, m: RelmDataMsg) {
        let me = ctx.me();
        let first = self.first;
        let chain = self
            .inbound
            .entry(m.src)
            .or_insert_with(|| InChain::new(first));
        let d = chain.delivered.dist(m.uid);
        if d == 0 || d >= UID_MODULUS / 2 {
            ctx.stats.relm.duplicates += 1;
            let w = chain.delivered;
            self.route_mark(ctx, MarkKind::Ack, (m.src, me), w);
            return;
        }
        if d > ctx.cfg.relm.window as u64 {
            ctx.stats.relm.out_of_window += 1;
            return;
        }
        if d > 1 {
            match chain.ooo.get(&(chain.pos + d)) {
                Some(h) if h.tag != m.tag || h.payload != m.payload => {
                    ctx.stats.relm.collisions += 1;
                    ctx.event(RelmEvent::Collision {
                        src: m.src,
                        dst: me,
                        uid: m.uid,
                    });
                }
                Some(_) => ctx.stats.relm.duplicates += 1,
                None => {
                    ctx.stats.relm.buffered += 1;
                    chain.ooo.insert(
                        chain.pos + d,
                        Held {
                            uid: m.uid,
                            tag: m.tag,
                            payload: m.payload,
                        },
                    );
                }
            }
            return;
        }
        let src = m.src;
        let mut next = Some(Held {
            uid: m.uid,
            tag: m.tag,
            payload: m.payload,
        });
        let mut delivered = 0usize;
        while let Some(h) = next {
            chain.pos += 1;
            chain.delivered = h.uid;
            delivered += 1;
            ctx.event(RelmEvent::Delivered {
                src,
                uid: h.uid,
                tag: h.tag,
                payload: h.payload,
            });
            next = chain.ooo.remove(&(chain.pos + 1));
        }
        let mut ask_more = None;
        if chain
            .requested
            .is_some_and(|(r, _)| r.at_or_before(chain.delivered))
        {
            chain.requested = None;
            // A request capped at one frame's worth of ranges is answered: ask for the rest.
            ask_more = chain.probed.filter(|p| p.after(chain.delivered));
        }
        if chain
            .probed
            .is_some_and(|p| p.at_or_before(chain.delivered))
        {
            chain.probed = None;
        }
        ctx.stats.relm.delivered += delivered as u64;
        let w = chain.delivered;
        self.route_mark(ctx, MarkKind::Ack, (src, me), w);
        // A long backlog of unacknowledged deliveries is acknowledged at once, so a sender's
        // window never waits on the coalescing delay.
        self.unflushed += delivered;
        if self.unflushed >= (ctx.cfg.relm.window / 4).max(1) {
            self.flush_marks(ctx);
        }
        if let Some(hi) = ask_more {
            self.dest_probe(ctx, src, hi);
        }
    }

    /// A probe for a chain to this rank: acknowledge what is done and ask for what is missing.
    pub(super) fn dest_probe(&mut self, ctx: &mut Ctx<'_>, src: Rank, hi: Uid) {
        let me = ctx.me();
        if !ctx.tree.is_alive(src) {
            ctx.stats.relm.stale += 1;
            return;
        }
        let first = self.first;
        let chain = self
            .inbound
            .entry(src)
            .or_insert_with(|| InChain::new(first));
        let (w, any) = (chain.delivered, chain.pos > 0);
        if any || hi.at_or_before(w) {
            self.route_mark(ctx, MarkKind::Ack, (src, me), w);
        }
        if hi.at_or_before(w) {
            return;
        }
        let chain = self.inbound.get_mut(&src).expect("inserted above");
        let span = w.dist(hi);
        if span > ctx.cfg.relm.window as u64 {
            ctx.stats.relm.out_of_window += 1;
            return;
        }
        chain.probed = Some(chain.probed.map_or(hi, |p| p.later(hi)));
        let now = ctx.now;
        if chain.requested.is_some_and(|(_, at)| {
            now < at + Duration::from_nanos(ctx.cfg.relm.retry.as_nanos() / 2)
        }) {
            return;
        }
        // The missing positions in (w, hi], as ranges, skipping what is buffered.
        let mut ranges: Vec<UidRange> = Vec::new();
        // What one request frame can carry; the rest is asked for after those arrive.
        let max = super::ranges_per_frame(ctx);
        let mut gap_start: Option<u64> = None;
        let mut last = w;
        for off in 1..=span + 1 {
            let have = off <= span && chain.ooo.contains_key(&(chain.pos + off));
            let missing = off <= span && !have;
            match (missing, gap_start) {
                (true, None) => gap_start = Some(off),
                (false, Some(s)) => {
                    ranges.push(UidRange {
                        first: w.plus(s),
                        count: (off - s) as u32,
                    });
                    last = w.plus(off - 1);
                    gap_start = None;
                    if ranges.len() == max {
                        break;
                    }
                }
                _ => {}
            }
        }
        if ranges.is_empty() {
            return;
        }
        chain.requested = Some((last, now));
        if let Some(next) = Self::next_hop(ctx, src) {
            ctx.stats.relm.requests += 1;
            let m = RelmReqMsg {
                src,
                dst: me,
                ranges,
            };
            Self::send(ctx, next, m);
        }
    }
}
