//! Gray links routed around (issue #23, item 2): while a tree link is down on soft evidence
//! with both ends alive (the `gray` map, `links.rs`), each end sends what it would send the
//! other through a relay rank, so delivery goes on and nobody is removed for a routing
//! problem.
//!
//! - **Start.** When a tree link goes gray, this end picks a relay ([`candidates`]: the
//!   ancestors of the edge nearest first, then live members by rank; both ends reach the same
//!   choice without agreeing, and either choice works). From then on the node wraps every frame
//!   to the peer into a [`RelayedMsg`] to the relay (`node/relay.rs`). A parent re-syncs the
//!   child at once (its watermarks and polls, the re-sync a child's hello asks for) and a child
//!   has already said hello (`links.rs`): frames lost with the dead connection are replayed,
//!   duplicates fall under the watermarks.
//! - **Probes.** Every [`probe_interval`] both ends send an empty envelope to the peer
//!   directly (the driver re-dials; a healed link carries it) and the same through the relay.
//!   A probe says what its sender hears of the receiver: anything lately
//!   ([`RelayedMsg::HEARD`]), something directly ([`RelayedMsg::HEARD_DIRECT`]). A rank that
//!   relays nothing to the prober answers each probe directly with the same news, flagged
//!   [`RelayedMsg::ANSWER`] (never answered: two ranks without relays do not ping-pong). A relay
//!   whose peer has not said "heard" for [`stale_after`] is replaced by the next candidate, and
//!   at once when the relay's own link goes down.
//! - **End.** Only the other end can tell that this end's direction works (a one-way loss
//!   carries one direction; a dial may connect across a cut that still eats frames): a probe
//!   saying "heard directly" ends the relay, its probes and the gray timeout, and re-syncs
//!   the child directly (a parent) or says hello (a child).
//! - **Removal.** The gray timeout reports the link only while the peer says it hears nothing
//!   of this rank either: a rank is removed for unreachability only when no relay reaches
//!   it.
//!
//! The state lives in a box made on the first gray link (or the first frame relayed for
//! others): a node that never needs it pays 8 bytes.

use std::collections::BTreeMap;

use super::{Membership, MembershipEvent, MembershipTimer, RelayedMsg};
use crate::machine::{Ctx, Effect};
use crate::time::{Duration, Instant};
use crate::tree::{LinkRole, Rank};
use crate::wire::{Codec, Message};

/// How many relay candidates a link tries in turn (then the first again).
const MAX_CANDIDATES: usize = 4;

/// Relay counters. Read with [`Node::relay_stats`](crate::Node::relay_stats); kept with the
/// relay state, which a rank allocates on first use (its first gray link, or the first
/// envelope it relays or receives), all zero before. Monotonic.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RelayStats {
    /// Frames this rank sent through a relay (wrapped: their link was gray).
    pub relayed_out: u64,
    /// Envelopes this rank forwarded as relay for others.
    pub relayed_forwarded: u64,
    /// Relayed frames (probes included) that reached this rank through a relay.
    pub relayed_in: u64,
    /// Probes sent (each goes directly and through the relay).
    pub relay_probes_out: u64,
    /// Probes answered (a peer relays to this rank, which relays nothing to it).
    pub probe_answers: u64,
    /// Frames not relayed: the envelope would pass `max_frame` (the inner frame is dropped).
    pub relay_dropped_too_big: u64,
    /// Envelopes dropped: from, for or to a rank that is not a live member here (or this rank
    /// is no member).
    pub relay_dropped_not_member: u64,
    /// Envelopes dropped: to be forwarded for a rank other than their sender (relays forward
    /// once, for the origin only), or naming the same rank as source and destination.
    pub relay_dropped_forged: u64,
    /// Envelopes dropped: the inner frame was itself an envelope (never relayed twice).
    pub relay_dropped_nested: u64,
    /// Relayed inner frames that did not decode, or that their machine refused (a frame's
    /// input counters count the envelope only).
    pub relay_dropped_inner: u64,
    /// Gray links whose relay started.
    pub gray_relays_started: u64,
    /// Relays ended: the link carries frames again, or its peer is gone.
    pub gray_relays_ended: u64,
    /// Relays replaced by the next candidate (the one in use carried nothing, or its link went
    /// down).
    pub relay_switches: u64,
}

/// One gray link's relay path.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Path {
    /// The relay in use (`None`: no candidate; frames go directly and are lost with the link).
    via: Option<Rank>,
    /// Candidates tried so far (the one in use is `tries % candidates`).
    tries: u32,
    /// When `via` was chosen.
    since: Instant,
    /// When a frame from the peer last arrived, any way.
    heard: Option<Instant>,
    /// When a frame from the peer last arrived directly.
    heard_direct: Option<Instant>,
    /// When the peer last said it hears this rank ([`RelayedMsg::HEARD`]).
    peer_hears: Option<Instant>,
}

impl Path {
    /// The news a probe to the peer carries ([`RelayedMsg`]'s flags).
    fn flags(&self, now: Instant, stale: Duration) -> u8 {
        let fresh = |t: Option<Instant>| t.is_some_and(|t| now.saturating_since(t) < stale);
        let mut f = 0;
        if fresh(self.heard) {
            f |= RelayedMsg::HEARD;
        }
        if fresh(self.heard_direct) {
            f |= RelayedMsg::HEARD_DIRECT;
        }
        f
    }
}

/// The gray links and relay state of one rank (boxed on first use).
#[derive(Debug, Default)]
pub(super) struct Relay {
    /// Tree links down on soft evidence, both ends alive, and since when (the gray timeout).
    pub(super) gray: BTreeMap<Rank, Instant>,
    /// Gray links being relayed, by peer.
    paths: BTreeMap<Rank, Path>,
    pub(super) stats: RelayStats,
}

/// How often a relayed link is probed (directly and through the relay): twice the detector
/// period.
pub(crate) fn probe_interval(cfg: &crate::Config) -> Duration {
    cfg.detect.period.saturating_mul(2)
}

/// How long a relay may carry nothing from the peer before the next candidate is tried, and
/// how recent a relayed frame must be for the relay path to count as working (five probes).
pub(crate) fn stale_after(cfg: &crate::Config) -> Duration {
    probe_interval(cfg).saturating_mul(5)
}

/// Relay candidates for the link to `peer`, best first: the ancestors of the edge (nearest
/// first), then live members by rank; never this rank, `peer`, a rank known dead or one whose
/// own link here is gray. Both ends of a parent–child edge compute the same list but for the
/// edge's own ranks; no agreement is needed, as any relay carries both ways.
fn candidates(ctx: &Ctx<'_>, is_gray: impl Fn(Rank) -> bool, peer: Rank) -> Vec<Rank> {
    let Some(view) = ctx.tree.view() else {
        return Vec::new();
    };
    let me = ctx.me();
    let usable = |r: Rank| r != me && r != peer && ctx.tree.is_alive(r) && !is_gray(r);
    let mut out: Vec<Rank> = view
        .ancestors()
        .iter()
        .rev()
        .copied()
        .filter(|&r| usable(r))
        .take(MAX_CANDIDATES)
        .collect();
    let span = ctx.tree.layout().span();
    let mut r = 0;
    while out.len() < MAX_CANDIDATES && r < span {
        let rank = Rank(r);
        if usable(rank) && !out.contains(&rank) {
            out.push(rank);
        }
        r += 1;
    }
    out
}

impl Membership {
    /// The relay state, made on first use.
    fn relay_state(&mut self) -> &mut Relay {
        self.relay.get_or_insert_with(Box::default)
    }

    /// Whether the tree link to `r` is gray.
    pub(super) fn is_gray(&self, r: Rank) -> bool {
        self.relay.as_ref().is_some_and(|x| x.gray.contains_key(&r))
    }

    /// The tree link to `r` went gray at `now`.
    pub(super) fn gray_insert(&mut self, r: Rank, now: Instant) {
        self.relay_state().gray.insert(r, now);
    }

    /// The tree link to `r` is no longer gray; returns whether it was.
    pub(super) fn gray_remove(&mut self, r: Rank) -> bool {
        self.relay
            .as_mut()
            .is_some_and(|x| x.gray.remove(&r).is_some())
    }

    /// Relay counters (zero until this rank first needed the relay state).
    pub(crate) fn relay_stats(&self) -> RelayStats {
        self.relay
            .as_ref()
            .map(|r| r.stats.clone())
            .unwrap_or_default()
    }

    /// Counters the node keeps for the relay (wrapping, forwarding, drops).
    pub(crate) fn relay_counters(&mut self) -> &mut RelayStats {
        &mut self.relay_state().stats
    }

    /// Where a frame to `to` goes instead of to `to` itself: the relay of its gray link, if
    /// one is in use.
    pub(crate) fn relay_via(&self, to: Rank) -> Option<Rank> {
        self.relay.as_ref()?.paths.get(&to)?.via
    }

    /// Whether `peer` said within [`stale_after`] that it hears this rank (the relay, or the
    /// direction still working, carries).
    pub(super) fn relay_works(&self, ctx: &Ctx<'_>, peer: Rank) -> bool {
        let Some(path) = self.relay.as_ref().and_then(|r| r.paths.get(&peer)) else {
            return false;
        };
        path.peer_hears
            .is_some_and(|h| ctx.now.saturating_since(h) < stale_after(ctx.cfg))
    }

    /// Whether the link to `peer` is relayed (its gray state is the relay's to end).
    pub(super) fn is_relayed(&self, peer: Rank) -> bool {
        self.relay
            .as_ref()
            .is_some_and(|r| r.paths.contains_key(&peer))
    }

    /// A frame from `peer` arrived directly on a relayed link: noted for the probes (only
    /// `peer` can say that this end's direction works too).
    pub(super) fn heard_direct(&mut self, ctx: &Ctx<'_>, peer: Rank) {
        if let Some(path) = self.relay.as_mut().and_then(|r| r.paths.get_mut(&peer)) {
            path.heard = Some(ctx.now);
            path.heard_direct = Some(ctx.now);
        }
    }

    /// The tree link to `peer` just went gray: relay around it, probe it, and (a parent)
    /// re-sync the child through the relay.
    pub(super) fn start_relay(&mut self, ctx: &mut Ctx<'_>, peer: Rank) {
        if self
            .relay
            .as_ref()
            .is_some_and(|r| r.paths.contains_key(&peer))
        {
            return;
        }
        let via = candidates(ctx, |r| self.is_gray(r), peer).first().copied();
        let relay = self.relay_state();
        relay.paths.insert(
            peer,
            Path {
                via,
                tries: 0,
                since: ctx.now,
                heard: None,
                heard_direct: None,
                peer_hears: None,
            },
        );
        relay.stats.gray_relays_started += 1;
        ctx.event(MembershipEvent::RelayStarted { peer, via });
        self.probe(ctx, peer);
        let at = ctx.now + probe_interval(ctx.cfg);
        ctx.timers.set(MembershipTimer::Relay(peer), at);
        // What the dead connection lost: the child's hello (`links.rs`) asks its parent for the
        // same.
        if matches!(ctx.tree.link_role(peer), LinkRole::Child(_)) {
            ctx.effect(Effect::ChildHello { from: peer });
        }
    }

    /// `peer` hears this rank directly again: the link is no longer gray, its relay ends, its
    /// probes and gray timeout stop, and the other end is re-synced directly.
    fn end_relay(&mut self, ctx: &mut Ctx<'_>, peer: Rank) {
        if !self.drop_path(ctx, peer) {
            return;
        }
        if self.gray_remove(peer) {
            ctx.timers.cancel(MembershipTimer::Gray(peer));
        }
        match ctx.tree.link_role(peer) {
            LinkRole::Child(_) => ctx.effect(Effect::ChildHello { from: peer }),
            LinkRole::Parent => self.say_hello(ctx),
            LinkRole::Lateral => {}
        }
    }

    /// Forgets the relay to `peer` (told as an event); returns whether there was one.
    fn drop_path(&mut self, ctx: &mut Ctx<'_>, peer: Rank) -> bool {
        let Some(relay) = self.relay.as_mut() else {
            return false;
        };
        if relay.paths.remove(&peer).is_none() {
            return false;
        }
        relay.stats.gray_relays_ended += 1;
        ctx.timers.cancel(MembershipTimer::Relay(peer));
        ctx.event(MembershipEvent::RelayEnded { peer });
        true
    }

    /// Relays whose link is no longer gray (its peer removed, or no longer a tree
    /// neighbour) end.
    pub(super) fn retain_relays(&mut self, ctx: &mut Ctx<'_>) {
        let Some(relay) = self.relay.as_ref() else {
            return;
        };
        let gone: Vec<Rank> = relay
            .paths
            .keys()
            .copied()
            .filter(|&p| !relay.gray.contains_key(&p))
            .collect();
        for p in gone {
            self.drop_path(ctx, p);
        }
    }

    /// A frame (or probe) from `src` arrived through a relay.
    pub(crate) fn on_relayed_in(&mut self, ctx: &mut Ctx<'_>, src: Rank) {
        self.silence_heard(ctx.now, src);
        let relay = self.relay_state();
        relay.stats.relayed_in += 1;
        if let Some(path) = relay.paths.get_mut(&src) {
            path.heard = Some(ctx.now);
        }
    }

    /// A probe from `src` (`direct`: on the link itself) with its news about this rank. On a
    /// relayed link it is the only proof that this end's direction works: "heard directly"
    /// ends the relay. Otherwise `src` relays to this rank, which answers directly with what
    /// it hears of `src`.
    pub(crate) fn on_relay_probe(&mut self, ctx: &mut Ctx<'_>, src: Rank, direct: bool, flags: u8) {
        if let Some(path) = self.relay.as_mut().and_then(|r| r.paths.get_mut(&src)) {
            if flags & RelayedMsg::HEARD != 0 {
                path.peer_hears = Some(ctx.now);
            }
            if flags & RelayedMsg::HEARD_DIRECT != 0 {
                self.end_relay(ctx, src);
            }
            return;
        }
        if flags & RelayedMsg::ANSWER != 0 {
            return; // an answer to a probe this rank no longer sends
        }
        // A tree neighbour that relays to this rank and hears nothing of it directly: this
        // end's direction is lost (a one-way loss: only the other end saw the silence). Its
        // link goes gray here too, and this end's probes carry the news from now on.
        // (Twice, a while apart, and this rank pinged it in between: see `silence.rs`.)
        if flags & RelayedMsg::HEARD_DIRECT == 0 {
            if self.silence_doubted(ctx, src) {
                ctx.stats.membership.gray_on_silence += 1;
                self.gray_on_silence(ctx, src);
                return;
            }
        } else {
            self.silence_trusted(src);
        }
        let mut flags = RelayedMsg::HEARD | RelayedMsg::ANSWER;
        if direct {
            flags |= RelayedMsg::HEARD_DIRECT;
        }
        ctx.send_direct(src, probe_frame(ctx.me(), src, flags));
        self.relay_state().stats.probe_answers += 1;
    }

    /// The link to `peer` went down: relays through it move to their next candidate.
    pub(super) fn relay_link_down(&mut self, ctx: &mut Ctx<'_>, peer: Rank) {
        let Some(relay) = self.relay.as_ref() else {
            return;
        };
        let through: Vec<Rank> = relay
            .paths
            .iter()
            .filter(|(_, p)| p.via == Some(peer))
            .map(|(&r, _)| r)
            .collect();
        for r in through {
            self.next_candidate(ctx, r);
        }
    }

    /// Moves the relay to `peer` on to its next candidate (round the list).
    fn next_candidate(&mut self, ctx: &mut Ctx<'_>, peer: Rank) {
        let list = candidates(ctx, |r| self.is_gray(r), peer);
        let relay = self.relay_state();
        let Some(path) = relay.paths.get_mut(&peer) else {
            return;
        };
        path.tries = path.tries.wrapping_add(1);
        let via = (!list.is_empty()).then(|| list[path.tries as usize % list.len()]);
        path.via = via;
        path.since = ctx.now;
        relay.stats.relay_switches += 1;
    }

    /// The probe timer of the relay to `peer`: a relay that carried nothing for
    /// [`stale_after`] (or is gone) is replaced; then both probes go, and the timer re-arms.
    pub(super) fn on_relay_timer(&mut self, ctx: &mut Ctx<'_>, peer: Rank) {
        if !self.is_gray(peer) || !ctx.tree.is_alive(peer) {
            self.drop_path(ctx, peer);
            return;
        }
        let stale = stale_after(ctx.cfg);
        let Some(path) = self.relay.as_ref().and_then(|r| r.paths.get(&peer)) else {
            return;
        };
        let quiet = path
            .peer_hears
            .is_none_or(|h| ctx.now.saturating_since(h) >= stale)
            && ctx.now.saturating_since(path.since) >= stale;
        let lost = path.via.is_none_or(|v| !ctx.tree.is_alive(v));
        if quiet || lost {
            self.next_candidate(ctx, peer);
        }
        self.probe(ctx, peer);
        let at = ctx.now + probe_interval(ctx.cfg);
        ctx.timers.set(MembershipTimer::Relay(peer), at);
    }

    /// Sends a probe to `peer` directly and through its relay.
    fn probe(&mut self, ctx: &mut Ctx<'_>, peer: Rank) {
        let stale = stale_after(ctx.cfg);
        let Some(path) = self.relay.as_ref().and_then(|r| r.paths.get(&peer)) else {
            return;
        };
        let frame = probe_frame(ctx.me(), peer, path.flags(ctx.now, stale));
        let via = path.via;
        ctx.send_direct(peer, frame.clone());
        if let Some(v) = via {
            ctx.send_direct(v, frame);
        }
        self.relay_state().stats.relay_probes_out += 1;
    }
}

/// A probe from `src` to `dst` with `flags`.
fn probe_frame(src: Rank, dst: Rank, flags: u8) -> bytes::Bytes {
    Message::from(RelayedMsg {
        src,
        dst,
        flags,
        frame: bytes::Bytes::new(),
    })
    .encode()
}

/// Whether `frame` (a whole frame) is a relay envelope.
pub(crate) fn is_relayed(frame: &[u8]) -> bool {
    frame.get(1) == Some(&crate::wire::Kind::Relayed.byte())
}

/// The envelope carrying `frame` from `src` to `dst`, or `None` when it would pass
/// `max_frame`.
pub(crate) fn wrap(
    src: Rank,
    dst: Rank,
    frame: bytes::Bytes,
    max_frame: u32,
) -> Option<bytes::Bytes> {
    let m = RelayedMsg {
        src,
        dst,
        flags: 0,
        frame,
    };
    let len = crate::wire::HEADER_LEN + m.encoded_len();
    (len <= max_frame as usize).then(|| Message::from(m).encode())
}
