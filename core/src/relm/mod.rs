//! RELM: exactly-once, in-order reliable messaging per (source, destination) over the repairing
//! tree.
//!
//! A message is identified by its chain (source, destination) and a [`Uid`] the source assigns
//! consecutively per chain. It travels hop by hop along [`Tree::route`](crate::tree::Tree::route);
//! each relay keeps a bounded copy (by time and count) for replays. The destination keeps one
//! watermark per source (the last uid delivered) and an out-of-order buffer above it, so
//! "unknown" is never ambiguous: a uid at or below the watermark is done (answered with an ACK,
//! never delivered twice), a uid above it is missing (asked for). ACKs are cumulative, travel
//! back toward the source hop by hop releasing the relays' copies on the way, and are coalesced
//! per next hop with probes for `relm.ack_delay`, so under load one small control frame answers
//! many messages. There is no ACK-of-ACK: the destination never needs a release.
//!
//! After a repair every rank purges chains whose source or destination died (the origin reports
//! its unconfirmed messages as failed) and relay state for paths it left, then exchanges link
//! updates with its changed neighbours: depth-stamped, gated on a promoted rank by PRRTE's
//! echo rule (send to a link once every other link has reported), never carrying data. An
//! update's probes ("sent up to u") reach the destination, which answers with its watermark
//! and a replay request; the request climbs toward the source and the first holder (a relay's
//! cache, at the latest the origin, which keeps every message until it is acknowledged)
//! answers. An origin whose chain makes no ACK progress for `relm.retry` probes again: the
//! end-to-end safety net under everything else.
//!
//! Sub-modules: `origin` (sending side), `dest` (delivery side), `relay` (caches, records,
//! replays), `link` (purge, link updates, gating).

mod config;
mod dest;
mod error;
mod event;
mod link;
mod origin;
mod relay;
mod stats;
#[cfg(test)]
mod tests;
mod timer;
mod uid;
mod wire;

use std::collections::BTreeMap;

use bytes::Bytes;

use crate::machine::Ctx;
use crate::timer::TimerToken;
use crate::tree::{Rank, Route};
use crate::wire::HEADER_LEN;

pub use config::{RelmConfig, RelmConfigError, MAX_RELM_WINDOW};
pub use error::RelmError;
pub use event::RelmEvent;
pub use stats::RelmStats;
pub use timer::RelmTimer;
pub use uid::{Uid, UID_INVALID, UID_MAX, UID_MODULUS, UID_NONE, UID_UNKNOWN};
pub(crate) use wire::max_payload;
pub use wire::{ChainMark, RelmAckMsg, RelmDataMsg, RelmLinkMsg, RelmMsg, RelmReqMsg, UidRange};

use dest::InChain;
use link::Gate;
use origin::OutChain;
use relay::{CacheFifo, Relayed};

/// A chain: (source, destination).
type Chain = (Rank, Rank);

/// One rank's RELM state: the chains it originates, the chains it receives, what it relays,
/// coalesced control marks, and link-update gates.
#[derive(Debug)]
pub(crate) struct Relm {
    first: Uid,
    out: BTreeMap<Rank, OutChain>,
    out_bytes: usize,
    inbound: BTreeMap<Rank, InChain>,
    relayed: BTreeMap<Chain, Relayed>,
    fifo: CacheFifo,
    /// Coalesced ACKs (toward sources) and probes (toward destinations).
    acks: BTreeMap<Chain, Uid>,
    probes: BTreeMap<Chain, Uid>,
    /// Messages delivered here since the last flush (a large backlog flushes at once).
    unflushed: usize,
    /// An ACK passing through freed much of a window: flush after the current frame.
    urgent: bool,
    flush: Option<TimerToken>,
    sweep: Option<TimerToken>,
    retry: Option<TimerToken>,
    gates: BTreeMap<Rank, Gate>,
    gate_timer: Option<TimerToken>,
}

/// Which kind of mark is being routed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum MarkKind {
    Ack,
    Probe,
}

impl Relm {
    pub(crate) fn new(first_uid: u32) -> Self {
        Self {
            first: Uid::new(first_uid).unwrap_or(Uid::new(0).expect("0 is a valid uid")),
            out: BTreeMap::new(),
            out_bytes: 0,
            inbound: BTreeMap::new(),
            relayed: BTreeMap::new(),
            fifo: CacheFifo::default(),
            acks: BTreeMap::new(),
            probes: BTreeMap::new(),
            unflushed: 0,
            urgent: false,
            flush: None,
            sweep: None,
            retry: None,
            gates: BTreeMap::new(),
            gate_timer: None,
        }
    }

    /// Chains with a counter here (a next uid as source, a watermark as destination). These
    /// are per-peer sequence state, not messages; they go when the peer dies.
    pub(crate) fn chains(&self) -> usize {
        self.out.len() + self.inbound.len()
    }

    /// Messages this rank originated that are not acknowledged yet.
    pub(crate) fn unacked(&self) -> usize {
        self.out.values().map(|c| c.unacked.len()).sum()
    }

    /// Unacknowledged payload bytes this rank originated.
    pub(crate) fn out_bytes(&self) -> usize {
        self.out_bytes
    }

    /// Queues a RELM frame to `to` (every RELM frame is counted once here).
    fn send(ctx: &mut Ctx<'_>, to: Rank, m: impl Into<RelmMsg>) {
        ctx.stats.relm.frames_out += 1;
        ctx.send(to, m.into());
    }

    /// The next hop for `r`, if there is one other than this rank.
    fn next_hop(ctx: &Ctx<'_>, r: Rank) -> Option<Rank> {
        match ctx.tree.route(r) {
            Route::Next(n) => Some(n),
            _ => None,
        }
    }

    /// Routes a mark one hop: ACKs toward the chain's source, probes toward its destination.
    /// A mark for a link whose update gating still holds back joins that update; otherwise it
    /// is coalesced until the flush timer.
    fn route_mark(&mut self, ctx: &mut Ctx<'_>, kind: MarkKind, chain: Chain, uid: Uid) {
        let toward = match kind {
            MarkKind::Ack => chain.0,
            MarkKind::Probe => chain.1,
        };
        let Some(next) = Self::next_hop(ctx, toward) else {
            return;
        };
        let slot = match self.gates.get_mut(&next) {
            Some(g) if !g.sent => match kind {
                MarkKind::Ack => &mut g.acks,
                MarkKind::Probe => &mut g.probes,
            },
            _ => {
                self.arm_flush(ctx);
                match kind {
                    MarkKind::Ack => &mut self.acks,
                    MarkKind::Probe => &mut self.probes,
                }
            }
        };
        merge_mark(slot, chain, uid);
    }

    fn arm_flush(&mut self, ctx: &mut Ctx<'_>) {
        if self.flush.is_none() {
            let at = ctx.now + ctx.cfg.relm.ack_delay;
            self.flush = Some(ctx.timers.set(RelmTimer::Flush, at));
        }
    }

    /// The flush timer fired.
    pub(crate) fn on_flush_timer(&mut self, ctx: &mut Ctx<'_>, token: TimerToken) {
        if self.flush != Some(token) {
            ctx.stats.stale_timers += 1;
            return;
        }
        self.flush = None;
        self.flush_marks(ctx);
    }

    /// Sends every coalesced mark now: one frame per next hop (more only when a frame would
    /// exceed `max_frame` or `max_list`).
    fn flush_marks(&mut self, ctx: &mut Ctx<'_>) {
        if self.flush.take().is_some() {
            ctx.timers.cancel(RelmTimer::Flush);
        }
        self.unflushed = 0;
        let mut per_hop: BTreeMap<Rank, RelmAckMsg> = BTreeMap::new();
        for ((src, dst), uid) in std::mem::take(&mut self.acks) {
            if let Some(n) = Self::next_hop(ctx, src) {
                let m = per_hop.entry(n).or_default();
                m.acks.push(ChainMark { src, dst, uid });
            }
        }
        for ((src, dst), uid) in std::mem::take(&mut self.probes) {
            if let Some(n) = Self::next_hop(ctx, dst) {
                let m = per_hop.entry(n).or_default();
                m.probes.push(ChainMark { src, dst, uid });
            }
        }
        let cap = marks_per_frame(ctx);
        for (to, m) in per_hop {
            for (acks, probes) in split_marks(m.acks, m.probes, cap) {
                Self::send(ctx, to, RelmMsg::Ack(RelmAckMsg { acks, probes }));
            }
        }
    }

    /// A data frame from `from`: deliver it here, or relay it.
    pub(crate) fn on_data(&mut self, ctx: &mut Ctx<'_>, from: Rank, m: RelmDataMsg) {
        let me = ctx.me();
        if m.dst == me {
            self.dest_data(ctx, m);
        } else if m.src == me {
            ctx.stats.relm.stale += 1; // my own message came back: views disagree
        } else {
            self.relay_data(ctx, from, m);
        }
    }

    /// An ACK/probe frame from `from`.
    pub(crate) fn on_ack_frame(&mut self, ctx: &mut Ctx<'_>, from: Rank, m: RelmAckMsg) {
        for a in m.acks {
            self.ack_in(ctx, (a.src, a.dst), a.uid);
        }
        for p in m.probes {
            self.probe_in(ctx, from, (p.src, p.dst), p.uid);
        }
        if std::mem::take(&mut self.urgent) {
            self.flush_marks(ctx);
        }
    }

    /// A cumulative ACK for `chain` reached this rank from downstream.
    fn ack_in(&mut self, ctx: &mut Ctx<'_>, chain: Chain, upto: Uid) {
        let me = ctx.me();
        if chain.0 == me {
            self.origin_ack(ctx, chain.1, upto);
        } else if chain.1 == me {
            ctx.stats.relm.stale += 1;
        } else {
            self.relay_ack(ctx, chain, upto);
        }
    }

    /// A probe ("the source sent up to `hi`") for `chain` reached this rank from upstream.
    fn probe_in(&mut self, ctx: &mut Ctx<'_>, from: Rank, chain: Chain, hi: Uid) {
        let me = ctx.me();
        if chain.1 == me {
            self.dest_probe(ctx, chain.0, hi);
        } else if chain.0 == me {
            ctx.stats.relm.stale += 1;
        } else {
            self.relay_probe(ctx, from, chain, hi);
        }
    }

    /// The retry timer fired.
    pub(crate) fn on_retry_timer(&mut self, ctx: &mut Ctx<'_>, token: TimerToken) {
        if self.retry != Some(token) {
            ctx.stats.stale_timers += 1;
            return;
        }
        self.retry = None;
        self.retry_stalled(ctx);
    }

    /// Forgets everything (this rank is dead).
    fn clear(&mut self, ctx: &mut Ctx<'_>) {
        *self = Self::new(self.first.get());
        for k in [
            RelmTimer::Flush,
            RelmTimer::Sweep,
            RelmTimer::Retry,
            RelmTimer::Gate,
        ] {
            ctx.timers.cancel(k);
        }
    }
}

/// Keeps the later uid for a chain.
fn merge_mark(map: &mut BTreeMap<Chain, Uid>, chain: Chain, uid: Uid) {
    map.entry(chain)
        .and_modify(|u| *u = u.later(uid))
        .or_insert(uid);
}

/// How many 12-byte marks fit in one ACK or link frame under the configured limits.
fn marks_per_frame(ctx: &Ctx<'_>) -> usize {
    let by_frame = (ctx.cfg.max_frame as usize).saturating_sub(HEADER_LEN + 16) / 12;
    by_frame.min(ctx.cfg.max_list as usize).max(1)
}

/// How many uid ranges fit in one replay request under the configured limits.
fn ranges_per_frame(ctx: &Ctx<'_>) -> usize {
    let by_frame = (ctx.cfg.max_frame as usize).saturating_sub(HEADER_LEN + 12) / 8;
    by_frame.min(ctx.cfg.max_list as usize).max(1)
}

/// Splits marks into frames of at most `cap` marks in all, acks first.
fn split_marks(
    acks: Vec<ChainMark>,
    probes: Vec<ChainMark>,
    cap: usize,
) -> Vec<(Vec<ChainMark>, Vec<ChainMark>)> {
    let mut frames = Vec::new();
    let mut cur: (Vec<ChainMark>, Vec<ChainMark>) = (Vec::new(), Vec::new());
    for a in acks {
        if cur.0.len() + cur.1.len() == cap {
            frames.push(std::mem::take(&mut cur));
        }
        cur.0.push(a);
    }
    for p in probes {
        if cur.0.len() + cur.1.len() == cap {
            frames.push(std::mem::take(&mut cur));
        }
        cur.1.push(p);
    }
    if !cur.0.is_empty() || !cur.1.is_empty() || frames.is_empty() {
        frames.push(cur);
    }
    frames
}

/// Bytes an application payload is charged against `relm.max_bytes`.
fn charge(payload: &Bytes) -> usize {
    payload.len()
}

impl crate::machine::Machine for Relm {
    type Msg = RelmMsg;
    type Timer = RelmTimer;

    /// Message-level state still held: unacknowledged messages, buffered messages, relay
    /// records and cached copies, coalesced marks and link gates. Zero once quiescent.
    fn held(&self) -> usize {
        self.out.values().map(|c| c.unacked.len()).sum::<usize>()
            + self.inbound.values().map(|c| c.held()).sum::<usize>()
            + self.relayed.len()
            + self.fifo.cached()
            + self.acks.len()
            + self.probes.len()
            + self.gates.len()
    }

    fn new(cfg: &crate::Config, _me: Rank) -> Self {
        Self::new(cfg.relm.first_uid)
    }

    fn on_view_change(&mut self, ctx: &mut Ctx<'_>, d: &crate::tree::ViewDelta) {
        self.view_changed(ctx, d);
    }

    /// Refuses data from a dead source or from this rank itself (a message from a dead source
    /// is purged, never delivered; none comes back home) and data to a rank outside the span.
    fn admits(&self, ctx: &Ctx<'_>, msg: &RelmMsg) -> bool {
        match msg {
            RelmMsg::Data(m) => {
                ctx.tree.is_alive(m.src) && m.src != ctx.me() && ctx.tree.layout().contains(m.dst)
            }
            _ => true,
        }
    }

    fn on_message(&mut self, ctx: &mut Ctx<'_>, from: Rank, msg: RelmMsg) {
        match msg {
            RelmMsg::Data(m) => self.on_data(ctx, from, m),
            RelmMsg::Ack(m) => self.on_ack_frame(ctx, from, m),
            RelmMsg::Req(m) => self.on_req(ctx, m),
            RelmMsg::Link(m) => self.on_link(ctx, from, m),
        }
    }

    fn on_timer(&mut self, ctx: &mut Ctx<'_>, timer: RelmTimer, token: TimerToken) {
        match timer {
            RelmTimer::Flush => self.on_flush_timer(ctx, token),
            RelmTimer::Sweep => self.on_sweep_timer(ctx, token),
            RelmTimer::Retry => self.on_retry_timer(ctx, token),
            RelmTimer::Gate => self.on_gate_timer(ctx, token),
        }
    }
}
