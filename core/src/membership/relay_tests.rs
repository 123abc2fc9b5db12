//! Gray links routed around, through real nodes in the simulator (detector on): a tree link
//! cut one way or both ways for 12 s under xcast and RELM load removes nobody, every op and
//! every message is delivered exactly once everywhere, and the child's longest delivery gap
//! stays bounded; a link healed ends its relay; a child no relay reaches is removed.

use std::collections::BTreeMap;

use bytes::Bytes;

use super::{MembershipEvent, RelayedMsg};
use crate::event::Event;
use crate::relm::RelmEvent;
use crate::sim::{Fault, Observer, Sim, SimConfig, World};
use crate::time::{Duration, Instant};
use crate::tree::Rank;
use crate::wire::Message;
use crate::xcast::{XcastEvent, FIRST_APP_TAG};

/// What every rank delivered, and when; relay events.
#[derive(Default)]
pub(super) struct Log {
    /// Per rank: (when, origin, origin's seq) of each application xcast delivered.
    pub(super) xcast: BTreeMap<Rank, Vec<(Instant, Rank, u64)>>,
    /// Per destination: (src, payload) of each RELM message delivered.
    pub(super) relm: BTreeMap<Rank, Vec<(Rank, Bytes)>>,
    /// (rank, event) for relay starts and ends, and evictions.
    pub(super) membership: Vec<(Instant, Rank, MembershipEvent)>,
}

impl Observer for Log {
    fn on_event(&mut self, w: &World, rank: Rank, e: &Event) {
        match e {
            Event::Xcast(XcastEvent::Delivered {
                origin, seq, tag, ..
            }) if *tag >= FIRST_APP_TAG => {
                self.xcast
                    .entry(rank)
                    .or_default()
                    .push((w.now(), *origin, *seq));
            }
            Event::Relm(RelmEvent::Delivered { src, payload, .. }) => {
                self.relm
                    .entry(rank)
                    .or_default()
                    .push((*src, payload.clone()));
            }
            Event::Membership(m) => self.membership.push((w.now(), rank, m.clone())),
            _ => {}
        }
    }
}

impl Log {
    /// The ranks that started a relay, in order (one entry per start), and how many relays
    /// ended.
    pub(super) fn relay_starts_and_ends(&self) -> (Vec<Rank>, usize) {
        let starts = self
            .membership
            .iter()
            .filter(|(_, _, e)| matches!(e, MembershipEvent::RelayStarted { .. }))
            .map(|(_, r, _)| *r)
            .collect();
        let ends = self
            .membership
            .iter()
            .filter(|(_, _, e)| matches!(e, MembershipEvent::RelayEnded { .. }))
            .count();
        (starts, ends)
    }
}

/// `r`'s parent in its own view now.
pub(super) fn parent_of(w: &World, r: Rank) -> Rank {
    w.node(r).unwrap().tree().view().unwrap().parent().unwrap()
}

pub(super) fn ms(x: u64) -> Instant {
    Instant::ZERO + Duration::from_millis(x)
}

fn sim(span: u32, radix: u32, seed: u64) -> Sim<Log> {
    sim_with(span, radix, seed, |_| {})
}

/// A simulation with the detector on, `tweak` applied to its configuration.
pub(super) fn sim_with(
    span: u32,
    radix: u32,
    seed: u64,
    tweak: impl FnOnce(&mut SimConfig),
) -> Sim<Log> {
    let mut cfg = SimConfig::new(span, radix, seed);
    cfg.node.detect.enabled = true;
    tweak(&mut cfg);
    Sim::new(cfg, Log::default()).unwrap()
}

/// The longest time between consecutive deliveries at `r` within `[from, to]` (the bounds
/// count as deliveries).
pub(super) fn longest_gap(log: &Log, r: Rank, from: Instant, to: Instant) -> Duration {
    let mut times: Vec<Instant> = log
        .xcast
        .get(&r)
        .map(|v| v.iter().map(|(t, _, _)| *t).collect())
        .unwrap_or_default();
    times.retain(|t| *t >= from && *t <= to);
    times.insert(0, from);
    times.push(to);
    times
        .windows(2)
        .map(|w| w[1].saturating_since(w[0]))
        .max()
        .unwrap_or(Duration::ZERO)
}

/// 16 ranks, radix 8: rank 9's tree link to its parent cut (one way, child to parent; or both
/// ways) from 1 s for 12 s, under one xcast every 20 ms from a rotating origin and RELM
/// messages 0→9, 9→0 and between 9 and a sibling of its parent. Returns the run's log and the
/// child's longest delivery gap during the load. `tweak` sets the run's configuration (the
/// cut's link timeout, `membership.gray_after`).
pub(super) fn cut_tree_link_under_load(
    oneway: bool,
    seed: u64,
    tweak: impl FnOnce(&mut SimConfig),
) -> (Sim<Log>, Duration) {
    let mut s = sim_with(16, 8, seed, tweak);
    let child = Rank(9);
    let parent = parent_of(s.world(), child);
    assert_ne!(parent, Rank(0), "the cut link is below the root");
    let other = Rank(2);
    s.run_until(ms(500)).unwrap();
    s.schedule(
        ms(1_000),
        if oneway {
            Fault::CutOneWay(parent, child)
        } else {
            Fault::Cut(parent, child)
        },
    );
    s.schedule(ms(13_000), Fault::Heal);
    let mut sent_relm: Vec<(Rank, Rank, Bytes)> = Vec::new();
    let (load_from, load_to) = (600u64, 14_000u64);
    let mut k = 0u64;
    let mut t = load_from;
    while t < load_to {
        s.run_until(ms(t)).unwrap();
        let origin = Rank((k % 16) as u32);
        let payload = Bytes::from(format!("x{k}"));
        let r = s.command(origin, |n, now| n.xcast(now, FIRST_APP_TAG, payload));
        assert!(
            matches!(r, Some(Ok(_))),
            "at {t} ms {origin:?}: {r:?}; {:?}",
            s.observer().membership
        );
        if k % 5 == 0 {
            for (src, dst) in [
                (Rank(0), child),
                (child, Rank(0)),
                (child, other),
                (other, child),
            ] {
                let payload = Bytes::from(format!("r{k}-{}-{}", src.0, dst.0));
                let p = payload.clone();
                let sent = s.command(src, |n, now| n.relm_send(now, dst, FIRST_APP_TAG, p));
                if let Some(Ok(_)) = sent {
                    sent_relm.push((src, dst, payload));
                }
            }
        }
        k += 1;
        t += 20;
    }
    s.run_until(ms(17_000)).unwrap();
    let ops = k;
    // Nobody removed, nobody evicted.
    for r in 0..16 {
        let n = s.world().node(Rank(r)).unwrap();
        assert!(
            n.tree().dead().is_empty(),
            "oneway {oneway}: {r} holds {:?} dead",
            n.tree().dead()
        );
    }
    // Every op delivered exactly once at every rank.
    for r in 0..16 {
        let got = s
            .observer()
            .xcast
            .get(&Rank(r))
            .cloned()
            .unwrap_or_default();
        let mut seen: BTreeMap<(Rank, u64), u32> = BTreeMap::new();
        for (_, o, q) in &got {
            *seen.entry((*o, *q)).or_default() += 1;
        }
        assert_eq!(
            seen.len() as u64,
            ops,
            "oneway {oneway}: rank {r} missed ops"
        );
        assert!(
            seen.values().all(|&c| c == 1),
            "oneway {oneway}: rank {r} got an op twice"
        );
    }
    // Every RELM message delivered exactly once.
    let mut want: BTreeMap<Rank, Vec<(Rank, Bytes)>> = BTreeMap::new();
    for (src, dst, p) in &sent_relm {
        want.entry(*dst).or_default().push((*src, p.clone()));
    }
    assert!(sent_relm.len() > 100, "RELM load: {}", sent_relm.len());
    for (dst, mut w) in want {
        let mut got = s.observer().relm.get(&dst).cloned().unwrap_or_default();
        w.sort();
        got.sort();
        assert_eq!(got, w, "oneway {oneway}: RELM at {}", dst.0);
    }
    let gap = longest_gap(s.observer(), child, ms(load_from + 100), ms(load_to));
    (s, gap)
}

#[test]
fn a_cut_tree_link_is_relayed_around_without_loss_duplicates_or_removals() {
    for oneway in [true, false] {
        let (s, gap) = cut_tree_link_under_load(oneway, 31, |_| {});
        let net = crate::sim::NetConfig::default();
        eprintln!("oneway {oneway}: rank 9's longest gap {gap}");
        // The cut is noticed after the connection's timeout; the relay carries at once.
        assert!(
            gap <= net.cut_timeout + Duration::from_millis(300),
            "oneway {oneway}: gap {gap}"
        );
        let child = s.world().node(Rank(9)).unwrap();
        let r = child.relay_stats();
        assert!(
            r.gray_relays_started >= 1 && r.relayed_out > 0 && r.relayed_in > 0,
            "{r:?}"
        );
        // Healed: every relay ended everywhere, and each start has its end.
        let log = &s.observer().membership;
        let (starts, ends) = s.observer().relay_starts_and_ends();
        assert!(starts.len() >= 2, "both ends relayed: {log:?}");
        assert_eq!(starts.len(), ends, "{log:?}");
        let relays: u64 = (0..16)
            .map(|x| {
                s.world()
                    .node(Rank(x))
                    .unwrap()
                    .relay_stats()
                    .relayed_forwarded
            })
            .sum();
        assert!(relays > 0);
        for x in 0..16 {
            let n = s.world().node(Rank(x)).unwrap();
            assert_eq!(n.relay_stats().relay_dropped_too_big, 0);
        }
    }
}

/// A tree link cut for good while the relay carries: nobody is removed, well past the gray
/// timeout.
#[test]
fn a_relayed_link_cut_for_good_removes_nobody() {
    for oneway in [true, false] {
        let mut s = sim(64, 4, 23);
        s.run_until(ms(300)).unwrap();
        let child = Rank(5);
        let parent = parent_of(s.world(), child);
        s.apply(if oneway {
            Fault::CutOneWay(child, parent)
        } else {
            Fault::Cut(child, parent)
        });
        let gray = crate::Config::new(64, 4).membership.gray_timeout;
        s.run_until(ms(300) + gray + gray).unwrap();
        for r in 0..64 {
            let n = s.world().node(Rank(r)).unwrap();
            assert!(
                n.tree().dead().is_empty(),
                "oneway {oneway}: at {r}: {:?} dead; {:?}; relay at 5 {:?}",
                n.tree().dead(),
                s.observer().membership,
                s.world().node(child).unwrap().relay_stats()
            );
        }
        assert_eq!(
            s.world()
                .node(child)
                .unwrap()
                .stats()
                .membership
                .unreachable_out,
            0
        );
    }
}

/// Envelopes are forwarded only for their sender and only between live members; nested ones
/// and forged ones are dropped, counted; a probe is read and dropped.
#[test]
fn relays_forward_once_and_only_between_members() {
    let mut cfg = crate::Config::new(16, 4);
    cfg.detect.enabled = true;
    let mut n = crate::Node::new(cfg, Rank(0), 1, Instant::ZERO).unwrap();
    while n.poll_transmit().is_some() {}
    let env = |src: u32, dst: u32, frame: Bytes| {
        Message::from(RelayedMsg {
            src: Rank(src),
            dst: Rank(dst),
            flags: 0,
            frame,
        })
        .encode()
    };
    let now = ms(1);
    // Forwarded for its sender, to its destination, unchanged.
    let e = env(3, 7, Bytes::new());
    n.handle_frame(now, Rank(3), e.clone());
    let t = n.poll_transmit().expect("forwarded");
    assert_eq!((t.to, t.frame.clone()), (Rank(7), e));
    assert!(n.poll_transmit().is_none());
    // Not for another rank's envelope: no re-relaying.
    n.handle_frame(now, Rank(4), env(3, 7, Bytes::new()));
    // Not to or from a non-member.
    n.handle_frame(now, Rank(3), env(3, 99, Bytes::new()));
    n.handle_frame(now, Rank(3), env(3, 3, Bytes::new()));
    // Nested: dropped at the destination.
    n.handle_frame(now, Rank(3), env(3, 0, env(3, 0, Bytes::new())));
    assert!(n.poll_transmit().is_none());
    let st = n.relay_stats();
    assert_eq!(st.relayed_forwarded, 1);
    assert_eq!(st.relay_dropped_forged, 2);
    assert_eq!(st.relay_dropped_not_member, 1);
    assert_eq!(st.relay_dropped_nested, 1);
    // A relayed probe is read (counted) and dropped; a relayed garbage frame is counted by the
    // relay (the envelope is the input counted).
    n.handle_frame(now, Rank(3), env(5, 0, Bytes::new()));
    assert_eq!(n.relay_stats().relayed_in, 1);
    let before = n.stats().frames_in;
    let garbage = Bytes::from_static(&[1, 200, 0, 0, 0, 0]);
    n.handle_frame(now, Rank(3), env(5, 0, garbage));
    assert_eq!(n.stats().frames_in, before + 1);
    assert_eq!(n.relay_stats().relay_dropped_inner, 1);
    // A nested decode: a body shorter than an envelope header is refused at decode.
    let short = env(5, 0, Bytes::from_static(&[1, 2]));
    assert!(Message::decode(short, &crate::wire::Limits::default()).is_err());
}

/// The shape of rank 1608's stall on the 16-core device (2,000 processes, session 31): the
/// child hears nothing of its parent (frames parent → child stall), relays around it, and the
/// relay ends while both ends are starved (frozen 150–250 ms at a time, as on an
/// oversubscribed host: timers, answers and re-syncs run late) and ops keep coming. Every op
/// reaches the child exactly once, and after the heal the child never goes more than 1 s
/// without a delivery. Two shapes: the cut outlives the connection's timeout (both ends see a
/// link-down, the stalled frames are lost and only the re-syncs bring them back: without the
/// parent's re-polls on a child's hello this fails), and a cut the transport never notices
/// (the child goes gray on silence alone, as 1608 did; the parent's frames arrive late).
/// Passes on `main` as of session 31 (300 seeds each: longest gap after the heal 498 ms), so
/// the device stall is not this path (see the branch `stall`'s report).
#[test]
fn a_relay_ending_while_both_ends_are_starved_leaves_the_child_nothing_owed() {
    for unnoticed in [false, true] {
        for seed in 0..16u64 {
            starved_relay_ends(seed, unnoticed);
        }
    }
}

fn starved_relay_ends(seed: u64, unnoticed: bool) {
    let mut s = sim_with(16, 8, seed, |c| {
        if unnoticed {
            c.net.cut_timeout = Duration::from_secs(60);
        }
    });
    let child = Rank(9);
    let parent = parent_of(s.world(), child);
    assert_ne!(parent, Rank(0), "the relayed link is below the root");
    s.run_until(ms(500)).unwrap();
    // Both ends starved from 1 s to 8 s; the parent's frames stop reaching the child from
    // 1.5 s to 5 s (only the child notices at first: it relays), so the relay ends while the
    // parent runs late.
    let mut rng = crate::rng::Rng::new(seed);
    for r in [parent, child] {
        let mut t = ms(1_000) + Duration::from_millis(rng.below(300));
        while t < ms(8_000) {
            let stall = Duration::from_millis(150 + rng.below(101));
            s.schedule(t, Fault::Pause(r));
            s.schedule(t + stall, Fault::Resume(r));
            t = t + stall + Duration::from_millis(100 + rng.below(201));
        }
    }
    s.schedule(ms(1_500), Fault::CutOneWay(parent, child));
    s.schedule(ms(5_000), Fault::Heal);
    let (load_from, load_to) = (600u64, 9_000u64);
    let (mut k, mut i) = (0u64, 0u32);
    let mut t = load_from;
    while t < load_to {
        s.run_until(ms(t)).unwrap();
        // Origins other than the starved ranks (a frozen process takes no commands).
        let origin = Rank(i % 16);
        i += 1;
        if origin != parent && origin != child {
            let payload = Bytes::from(format!("x{k}"));
            let r = s.command(origin, |n, now| n.xcast(now, FIRST_APP_TAG, payload));
            assert!(
                matches!(r, Some(Ok(_))),
                "seed {seed} at {t} ms {origin:?}: {r:?}"
            );
            k += 1;
        }
        t += 20;
    }
    s.run_until(ms(13_000)).unwrap();
    let what = format!("seed {seed} unnoticed {unnoticed}");
    let (starts, ends) = s.observer().relay_starts_and_ends();
    assert!(
        starts.contains(&child) && ends >= 1,
        "{what}: the child relayed and the relay ended: {:?}",
        s.observer().membership
    );
    for r in 0..16 {
        let n = s.world().node(Rank(r)).unwrap();
        assert!(n.tree().dead().is_empty(), "{what}: {r} holds dead");
    }
    let got = s.observer().xcast.get(&child).cloned().unwrap_or_default();
    let mut seen: BTreeMap<(Rank, u64), u32> = BTreeMap::new();
    for (_, o, q) in &got {
        *seen.entry((*o, *q)).or_default() += 1;
    }
    assert_eq!(seen.len() as u64, k, "{what}: the child missed ops");
    assert!(seen.values().all(|&c| c == 1), "{what}: duplicates");
    let gap = longest_gap(s.observer(), child, ms(5_000), ms(load_to));
    assert!(gap <= Duration::from_millis(1_000), "{what}: gap {gap}");
}
