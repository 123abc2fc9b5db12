//! Gray links noticed by the core (issue #23, item 2): a tree link over which nothing from the
//! peer arrived for `membership.gray_after` (500 ms by default) while the peer is a live member
//! and this rank hears others is declared gray here, as a transport's link loss on soft
//! evidence is (`links.rs`), and relayed around (`relay.rs`), long before a transport's link
//! timeout (TCP: 3 s plus its retransmission back-off) gives up on the connection.
//!
//! - **Evidence the core sees.** Transports keep idle connections up with their own keepalive
//!   frames, which never reach the core. So the core keeps its own: every third of
//!   `gray_after` each end sends a [`TreePingMsg`] to each tree neighbour it sent nothing else
//!   to for the last sixth (a heartbeat, an xcast frame, anything counts: a busy link carries
//!   no ping). A frame from the peer, direct or relayed, is what this end hears of it. On an
//!   idle link the ping comes every `gray_after` / 3, at most every `gray_after` / 2.
//! - **Both ends.** Silence is seen by the end that stops hearing. A one-way loss leaves the
//!   other end deaf to nothing: it learns from the probes of the relay the silent end starts
//!   (`relay.rs`), which say whether their sender hears this rank directly. The first probe
//!   that says "not directly" is answered with a ping sent directly at once; one that still
//!   says so at least half a probe interval later (time for the ping to arrive and be
//!   reflected) makes this end's link gray too, so both directions are relayed. One probe is
//!   no proof: a rank that was frozen finds its peers' probes queued, all written while it
//!   slept.
//! - **One link, not this rank.** While two or more of this rank's tree links have been
//!   silent for half of `gray_after`, it declares none of them gray: the trouble is probably
//!   its own (a lossy interface, an overloaded host), which a relay over the same sick
//!   interface does not mend and its re-syncs and probes make worse. The other ends, whose
//!   single link is silent, still declare theirs.
//! - **Damping.** A link that goes gray again within `membership.gray_timeout` of the last
//!   time (a lossy link: TCP's retransmissions stall it for hundreds of milliseconds at a
//!   time, then it delivers) needs twice the silence before the next time, up to 16 ×
//!   `gray_after`; a link quiet for `gray_timeout` starts again at `gray_after`. A relay costs
//!   a re-sync and probes over links that may be the sick ones.
//! - **No false gray.** A peer never heard since it became a neighbour (start-up, a fresh
//!   parent) is not judged: a link must have carried something first. A rank that heard
//!   nobody for `gray_after` is cut off or was frozen itself, not its link: it declares
//!   nothing. A watch timer that fires more than one interval late (this rank was frozen:
//!   SIGSTOP, a long pause, a starved CPU) credits the stretch it slept through to every
//!   link's silence clock, as the detector's self-freeze guard does: silence while it was
//!   awake still counts, so a rank frozen again and again (a loaded host, whose every tick may
//!   come late) declares a silent link late, never not at all. A
//!   relayed link sends no pings: its probes (`relay.rs`, every two detector periods) carry.
//!
//! Active with the detector on (`detect.enabled`: a gray link is a detector-era notion) and a
//! non-zero `gray_after`. State: one entry per tree neighbour.

use std::collections::BTreeMap;

use super::{Membership, MembershipTimer, TreePingMsg};
use crate::machine::Ctx;
use crate::time::{Duration, Instant};
use crate::tree::{LinkRole, Rank};

/// What one end knows of one tree link's traffic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Watch {
    /// When a frame from the peer last arrived (directly or through a relay), or when the
    /// watch began.
    heard: Instant,
    /// Whether anything from the peer arrived since the watch began.
    met: bool,
    /// When this rank last sent the peer a frame.
    sent: Option<Instant>,
    /// When a probe from the peer first said it does not hear this rank directly (reset by
    /// one that says it does).
    doubted: Option<Instant>,
    /// When this end last declared the link gray on silence, and how many times in a row
    /// each within `membership.gray_timeout` of the one before (the damping).
    last_gray: Option<Instant>,
    strikes: u32,
}

/// Most doublings of the silence threshold for a link that keeps going gray (16 × `gray_after`:
/// 8 s by default).
const MAX_STRIKES: u32 = 4;

/// The tree-link silence watch of one rank.
#[derive(Debug, Default)]
pub(super) struct Silence {
    /// Per tree neighbour.
    links: BTreeMap<Rank, Watch>,
    /// When a frame from anyone last arrived.
    heard_any: Option<Instant>,
    /// When the armed watch timer is due.
    due: Option<Instant>,
}

/// The watch interval (a third of `gray_after`), or `None` when core-declared gray is off.
fn interval(cfg: &crate::Config) -> Option<Duration> {
    let after = cfg.membership.gray_after;
    (cfg.detect.enabled && after > Duration::ZERO)
        .then(|| Duration::from_nanos((after.as_nanos() / 3).max(1)))
}

/// When the next watch tick is due, for one due at `at`: `at`, or with `detect.beat_grid` the
/// first heartbeat grid point at or after it (the tick then shares the heartbeat round's
/// wake-up; at most one period later).
fn watch_at(cfg: &crate::Config, at: Instant) -> Instant {
    if cfg.detect.beat_grid {
        crate::detect::grid_point_at_or_after(at, cfg.detect.period)
    } else {
        at
    }
}

impl Membership {
    /// Arms the watch timer (start-up): a no-op when core-declared gray is off.
    pub(super) fn silence_start(&mut self, ctx: &mut Ctx<'_>) {
        let Some(every) = interval(ctx.cfg) else {
            return;
        };
        let at = watch_at(ctx.cfg, ctx.now + every);
        self.silence.due = Some(at);
        ctx.timers.set(MembershipTimer::Silence, at);
    }

    /// A frame from `peer` arrived (directly, or relayed from `peer` through another rank).
    pub(super) fn silence_heard(&mut self, now: Instant, peer: Rank) {
        self.silence.heard_any = Some(now);
        if let Some(w) = self.silence.links.get_mut(&peer) {
            w.heard = now;
            w.met = true;
        }
    }

    /// This rank sent `to` a frame (directly or through a relay).
    pub(crate) fn note_sent(&mut self, now: Instant, to: Rank) {
        if let Some(w) = self.silence.links.get_mut(&to) {
            w.sent = Some(now);
        }
    }

    /// Whether this rank declares its tree link to `peer` gray on its own evidence: core-declared
    /// gray is on, `peer` is a live tree neighbour, and the link is not gray already.
    pub(super) fn silence_judges(&self, ctx: &Ctx<'_>, peer: Rank) -> bool {
        interval(ctx.cfg).is_some()
            && ctx.tree.is_alive(peer)
            && ctx.tree.link_role(peer) != LinkRole::Lateral
            && !self.is_gray(peer)
    }

    /// A probe from tree neighbour `peer`, which relays to this rank, says it hears nothing of
    /// this rank directly: whether this rank's direction is lost. The first such probe (or
    /// one after [`super::relay::stale_after`]) sends `peer` a ping directly and answers no;
    /// one at least half a probe interval after it answers yes.
    pub(super) fn silence_doubted(&mut self, ctx: &mut Ctx<'_>, peer: Rank) -> bool {
        if !self.silence_judges(ctx, peer) {
            return false;
        }
        let now = ctx.now;
        let stale = super::relay::stale_after(ctx.cfg);
        let wait = Duration::from_nanos(super::relay::probe_interval(ctx.cfg).as_nanos() / 2);
        let Some(w) = self.silence.links.get_mut(&peer) else {
            return false; // not watched yet: a fresh neighbour
        };
        match w.doubted {
            Some(t) if now.saturating_since(t) < stale => now.saturating_since(t) >= wait,
            _ => {
                w.doubted = Some(now);
                w.sent = Some(now);
                ctx.stats.membership.tree_pings_out += 1;
                ctx.send(peer, TreePingMsg);
                false
            }
        }
    }

    /// A probe from `peer` says it hears this rank directly: no doubt stands.
    pub(super) fn silence_trusted(&mut self, peer: Rank) {
        if let Some(w) = self.silence.links.get_mut(&peer) {
            w.doubted = None;
        }
    }

    /// The tree link to `peer` is declared gray here (silence, or the peer's word): relayed
    /// at once, as a link lost on soft evidence is; a child also says hello through the relay,
    /// so that its parent re-syncs it (what the silence lost is replayed).
    pub(super) fn gray_on_silence(&mut self, ctx: &mut Ctx<'_>, peer: Rank) {
        let now = ctx.now;
        let window = ctx.cfg.membership.gray_timeout;
        if let Some(w) = self.silence.links.get_mut(&peer) {
            w.doubted = None;
            w.strikes = match w.last_gray {
                Some(t) if now.saturating_since(t) < window => (w.strikes + 1).min(MAX_STRIKES),
                _ => 0,
            };
            w.last_gray = Some(now);
        }
        self.on_tree_link_down(ctx, peer);
        if ctx.tree.link_role(peer) == LinkRole::Parent {
            self.say_hello(ctx);
        }
    }

    /// The watch timer: the freeze guard, the neighbour set brought up to date, pings on idle
    /// links, silent links declared gray; then the timer re-arms.
    pub(super) fn on_silence_timer(&mut self, ctx: &mut Ctx<'_>) {
        let Some(every) = interval(ctx.cfg) else {
            self.silence.due = None;
            return;
        };
        let now = ctx.now;
        // Late by more than one interval: this rank was frozen, and the stretch it slept
        // through (since the tick was due) is nobody's silence.
        let frozen = self
            .silence
            .due
            .filter(|&d| now > d + every)
            .map(|d| now.saturating_since(d));
        let neighbours: Vec<Rank> = match ctx.tree.view() {
            Some(v) => v
                .parent()
                .into_iter()
                .chain(v.children().iter().flatten().copied())
                .filter(|&r| ctx.tree.is_alive(r))
                .collect(),
            None => Vec::new(),
        };
        let links = &mut self.silence.links;
        links.retain(|r, _| neighbours.contains(r));
        for &r in &neighbours {
            let w = links.entry(r).or_insert(Watch {
                heard: now,
                met: false,
                sent: None,
                doubted: None,
                last_gray: None,
                strikes: 0,
            });
            if let Some(credit) = frozen {
                w.heard = (w.heard + credit).min(now);
            }
        }
        if let Some(credit) = frozen {
            self.silence.heard_any = self.silence.heard_any.map(|t| (t + credit).min(now));
        }
        let after = ctx.cfg.membership.gray_after;
        let half = Duration::from_nanos(every.as_nanos() / 2);
        let hears_others = self
            .silence
            .heard_any
            .is_some_and(|t| now.saturating_since(t) < after);
        // Several tree links silent at once: the trouble is probably this rank's own (a lossy
        // interface, an overloaded host), which no relay mends (Lifeguard's reasoning).
        let silent = self
            .silence
            .links
            .iter()
            .filter(|(r, w)| {
                !self.is_relayed(**r)
                    && now.saturating_since(w.heard) >= Duration::from_nanos(after.as_nanos() / 2)
            })
            .count();
        let one_link = silent <= 1;
        for r in neighbours {
            let Some(w) = self.silence.links.get(&r).copied() else {
                continue;
            };
            if self.is_relayed(r) {
                continue; // its probes carry
            }
            let threshold = Duration::from_nanos(after.as_nanos().saturating_mul(1 << w.strikes));
            if w.met
                && hears_others
                && one_link
                && !self.is_gray(r)
                && now.saturating_since(w.heard) >= threshold
            {
                ctx.stats.membership.gray_on_silence += 1;
                self.gray_on_silence(ctx, r);
                continue;
            }
            if w.sent.is_none_or(|s| now.saturating_since(s) >= half) {
                ctx.stats.membership.tree_pings_out += 1;
                ctx.send(r, TreePingMsg);
                if let Some(w) = self.silence.links.get_mut(&r) {
                    w.sent = Some(now);
                }
            }
        }
        let at = watch_at(ctx.cfg, now + every);
        self.silence.due = Some(at);
        ctx.timers.set(MembershipTimer::Silence, at);
    }
}
