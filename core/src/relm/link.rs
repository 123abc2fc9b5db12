//! After a repair: purge what died or left this rank's paths, then exchange link updates with
//! changed neighbours (`docs/edge-cases.md`, "What Lifeline changes in RELM").
//!
//! - **Purge.** Chains to a dead destination are reported failed at their origin and dropped;
//!   chains from a dead source are dropped at the destination (buffered messages reported);
//!   relay records for dead ends, or for paths that no longer cross this rank, go.
//! - **Link updates** carry this rank's depth, its ACK watermarks for chains it is downstream
//!   of on that link, and "sent up to" probes for chains it is upstream of. Never data.
//! - **Depth stamp.** A receiver drops an update whose depth is not its own − 1 (from its
//!   parent) or + 1 (from a child): a leftover from before a promotion.
//! - **Gating.** A rank whose slot changed (promoted, demoted) treats every link as new: it
//!   says hello (asking for updates) and sends its own full update to a link only once every
//!   other link has reported, or to all once every link has (the echo rule; it terminates on a
//!   tree because leaves and unpromoted neighbours answer without waiting). A rank whose slot
//!   did not change sends at once to the links whose occupant changed. An update that asks
//!   (`want`) is answered with one's own if it was already sent (the first may have been
//!   dropped by a receiver whose view lagged). A backstop timer releases anything still held
//!   after `relm.gate_timeout`.

use std::collections::BTreeMap;

use super::{marks_per_frame, split_marks, Chain, Relm, RelmEvent, RelmTimer, Uid};
use crate::machine::{Ctx, Machine};
use crate::timer::TimerToken;
use crate::tree::{Rank, Tree, ViewDelta};
use crate::wire::{ChainMark, RelmLinkMsg};

/// The link-update exchange with one neighbour since this rank's last view change.
#[derive(Debug, Default)]
pub(super) struct Gate {
    /// Its full update arrived.
    pub(super) got: bool,
    /// Mine went out (or, empty and not asked for, was not needed).
    pub(super) sent: bool,
    /// The neighbour asked for mine (`want`) while gating held it: it goes out even if empty.
    pub(super) asked: bool,
    /// Marks for this link gathered while mine is held back; they go with it.
    pub(super) acks: BTreeMap<Chain, Uid>,
    pub(super) probes: BTreeMap<Chain, Uid>,
}

impl Relm {
    /// Acts on a view change: purge, then start link updates.
    pub(crate) fn view_changed(&mut self, ctx: &mut Ctx<'_>, d: &ViewDelta) {
        self.purge(ctx);
        let Some(view) = ctx.tree.view().cloned() else {
            return;
        };
        // Links to exchange updates with.
        let hello = |ctx: &mut Ctx<'_>, to: Rank| {
            let m = RelmLinkMsg {
                depth: view.depth(),
                full: false,
                want: true,
                acks: Vec::new(),
                probes: Vec::new(),
            };
            ctx.stats.relm.link_updates += 1;
            Self::send(ctx, to, m);
        };
        let neighbours: Vec<Rank> = view
            .parent()
            .into_iter()
            .chain(view.live_children())
            .collect();
        // A rank that holds no RELM state has nothing to gather before it speaks: it skips the
        // exchange (what its neighbours tell it still flows through at once).
        let active = self.held() > 0;
        if d.slot_changed() {
            for &n in &neighbours {
                let g = self.gates.entry(n).or_default();
                g.got = !active;
                g.sent = false;
                if active {
                    hello(ctx, n);
                }
            }
        } else {
            let gating = self.gates.values().any(|g| !g.got);
            let mut changed: Vec<Rank> = d.added_children().collect();
            if d.parent_changed() {
                changed.extend(view.parent());
            }
            for n in changed {
                let g = self.gates.entry(n).or_default();
                g.got = !gating;
                g.sent = false;
                if gating {
                    hello(ctx, n);
                }
            }
        }
        self.try_send_pending(ctx);
    }

    /// Newly known deaths (with or without a view change): chains to a dead destination are
    /// reported failed and dropped, chains from a dead source dropped, relay state for dead
    /// ends or for paths that no longer cross this rank dropped.
    pub(crate) fn purge(&mut self, ctx: &mut Ctx<'_>) {
        let Some(view) = ctx.tree.view().cloned() else {
            self.clear(ctx);
            return;
        };
        // Purge: dead destinations (reported), dead sources, dead or departed relay paths.
        for dst in dead_keys(ctx.tree, &self.out) {
            self.fail_chain(ctx, dst);
        }
        for src in dead_keys(ctx.tree, &self.inbound) {
            let chain = self.inbound.remove(&src).expect("listed");
            let discarded = chain.discard();
            if discarded > 0 {
                ctx.event(RelmEvent::SourceLost { src, discarded });
            }
        }
        // A replay request in flight may have died with a relay: ask again on the next probe.
        for c in self.inbound.values_mut() {
            c.forget_request();
        }
        let tree = ctx.tree;
        self.purge_relayed(|(s, d)| {
            let (up, down) = (Self::hop(tree, s), Self::hop(tree, d));
            up.is_none() || down.is_none() || up == down
        });
        let alive = |(s, d): &Chain| tree.is_alive(*s) && tree.is_alive(*d);
        self.acks.retain(|c, _| alive(c));
        self.probes.retain(|c, _| alive(c));
        self.gates.retain(|r, _| view.is_neighbor(*r));
        for g in self.gates.values_mut() {
            g.acks.retain(|c, _| alive(c));
            g.probes.retain(|c, _| alive(c));
        }
    }

    fn hop(tree: &crate::tree::Tree, r: Rank) -> Option<Rank> {
        match tree.route(r) {
            crate::tree::Route::Next(n) => Some(n),
            _ => None,
        }
    }

    /// A link update (or hello) from `from`.
    pub(crate) fn on_link(&mut self, ctx: &mut Ctx<'_>, from: Rank, m: RelmLinkMsg) {
        let Some(view) = ctx.tree.view() else { return };
        let depth = view.depth();
        let expected = if view.parent() == Some(from) {
            depth.checked_sub(1)
        } else if view.live_children().any(|c| c == from) {
            depth.checked_add(1)
        } else {
            None
        };
        if expected != Some(m.depth) {
            ctx.stats.relm.link_rejected += 1;
            return;
        }
        for a in m.acks {
            self.ack_in(ctx, (a.src, a.dst), a.uid);
        }
        for p in m.probes {
            self.probe_in(ctx, from, (p.src, p.dst), p.uid);
        }
        if m.full {
            if let Some(g) = self.gates.get_mut(&from) {
                g.got = true;
            }
        }
        if m.want {
            match self.gates.get_mut(&from) {
                Some(g) if !g.sent => g.asked = true, // goes out when gating allows
                _ => self.send_full(ctx, from, true),
            }
        }
        self.try_send_pending(ctx);
        if std::mem::take(&mut self.urgent) {
            self.flush_marks(ctx);
        }
    }

    /// Sends `to` this rank's full update for that link: ACK watermarks for chains it is
    /// downstream of over the link, "sent up to" for chains it is upstream of, and whatever
    /// was gathered for the link while the update was held. An empty update nobody asked for
    /// (and that asks for nothing) is not sent: RELM adds no traffic to a repair where it has
    /// nothing in flight. `force` sends it anyway (a reply to `want`).
    fn send_full(&mut self, ctx: &mut Ctx<'_>, to: Rank, force: bool) {
        let Some(depth) = ctx.tree.view().map(|v| v.depth()) else {
            return;
        };
        let me = ctx.me();
        let via = |ctx: &Ctx<'_>, r: Rank| Self::next_hop(ctx, r) == Some(to);
        let mut acks: BTreeMap<Chain, Uid> = BTreeMap::new();
        let mut probes: BTreeMap<Chain, Uid> = BTreeMap::new();
        for (&src, c) in &self.inbound {
            if c.delivered_any() && via(ctx, src) {
                acks.insert((src, me), c.delivered);
            }
        }
        for (&dst, c) in &self.out {
            if !c.unacked.is_empty() && via(ctx, dst) {
                probes.insert((me, dst), c.last_sent());
            }
        }
        for (&(s, d), r) in &self.relayed {
            if let Some(a) = r.acked.filter(|_| via(ctx, s)) {
                super::merge_mark(&mut acks, (s, d), a);
            }
            let open = r
                .sent_hi
                .filter(|s| !r.acked.is_some_and(|a| s.at_or_before(a)));
            if let Some(h) = open.filter(|_| via(ctx, d)) {
                super::merge_mark(&mut probes, (s, d), h);
            }
        }
        let (want, asked) = match self.gates.get_mut(&to) {
            Some(g) => {
                g.sent = true;
                for (c, u) in std::mem::take(&mut g.acks) {
                    super::merge_mark(&mut acks, c, u);
                }
                for (c, u) in std::mem::take(&mut g.probes) {
                    super::merge_mark(&mut probes, c, u);
                }
                (!g.got, g.asked)
            }
            None => (false, false),
        };
        if acks.is_empty() && probes.is_empty() && !want && !asked && !force {
            return;
        }
        let marks = |m: BTreeMap<Chain, Uid>| -> Vec<ChainMark> {
            m.into_iter()
                .map(|((src, dst), uid)| ChainMark { src, dst, uid })
                .collect()
        };
        let frames = split_marks(marks(acks), marks(probes), marks_per_frame(ctx));
        let last = frames.len() - 1;
        for (i, (acks, probes)) in frames.into_iter().enumerate() {
            let m = RelmLinkMsg {
                depth,
                full: i == last,
                want,
                acks,
                probes,
            };
            ctx.stats.relm.link_updates += 1;
            Self::send(ctx, to, m);
        }
    }

    /// The gating rule: with more than one link yet to report, wait; with exactly one, send
    /// that link its update; with none, send every update still held.
    fn try_send_pending(&mut self, ctx: &mut Ctx<'_>) {
        let missing: Vec<Rank> = self
            .gates
            .iter()
            .filter(|(_, g)| !g.got)
            .map(|(&r, _)| r)
            .collect();
        let held: Vec<Rank> = self
            .gates
            .iter()
            .filter(|(_, g)| !g.sent)
            .map(|(&r, _)| r)
            .collect();
        match missing.len() {
            _ if held.is_empty() => {}
            0 => {
                for r in held {
                    self.send_full(ctx, r, false);
                }
            }
            1 if held.contains(&missing[0]) => self.send_full(ctx, missing[0], false),
            _ => {}
        }
        if self.gates.values().all(|g| g.sent) {
            self.gates.clear();
            if self.gate_timer.take().is_some() {
                ctx.timers.cancel(RelmTimer::Gate);
            }
        } else if self.gate_timer.is_none() {
            let at = ctx.now + ctx.cfg.relm.gate_timeout;
            self.gate_timer = Some(ctx.timers.set(RelmTimer::Gate, at));
        }
    }

    /// The gating backstop fired: send everything still held.
    pub(crate) fn on_gate_timer(&mut self, ctx: &mut Ctx<'_>, token: TimerToken) {
        if self.gate_timer != Some(token) {
            ctx.stats.stale_timers += 1;
            return;
        }
        self.gate_timer = None;
        let held: Vec<Rank> = self
            .gates
            .iter()
            .filter(|(_, g)| !g.sent)
            .map(|(&r, _)| r)
            .collect();
        ctx.stats.relm.gate_timeouts += held.len() as u64;
        for r in held {
            self.send_full(ctx, r, false);
        }
        self.try_send_pending(ctx);
    }
}

/// The ranks keying `map` that are known dead.
fn dead_keys<V>(tree: &Tree, map: &BTreeMap<Rank, V>) -> Vec<Rank> {
    map.keys().copied().filter(|&r| !tree.is_alive(r)).collect()
}
