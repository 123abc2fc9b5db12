//! The revoke machine at one node: what a command and each kind of notice do to events,
//! frames and counters.

use bytes::Bytes;

use crate::revoke::overlay::degree;
use crate::tree::{Rank, RankSet};
use crate::wire::RevokeMsg;
use crate::wire::{Limits, Message};
use crate::{CommandError, Config, Event, Instant, Node, RevokeError, RevokeEvent};

const NOW: Instant = Instant::ZERO;

fn node(span: u32, me: u32, cfg: impl FnOnce(&mut Config)) -> Node {
    let mut c = Config::new(span, 4);
    cfg(&mut c);
    let mut n = Node::new(c, Rank(me), 1, NOW).unwrap();
    drain(&mut n);
    n
}

/// Drains a node: its revoke events and the revoke notices it sent (to, message).
fn drain(n: &mut Node) -> (Vec<RevokeEvent>, Vec<(Rank, RevokeMsg)>) {
    let mut sent = Vec::new();
    while let Some(t) = n.poll_transmit() {
        if let Ok(Message::Revoke(m)) = Message::decode(t.frame, &Limits::default()) {
            assert_eq!(t.class, crate::Class::Control);
            sent.push((t.to, m));
        }
    }
    let mut events = Vec::new();
    while let Some(e) = n.poll_event() {
        if let Event::Revoke(r) = e {
            events.push(r);
        }
    }
    (events, sent)
}

fn notice(group: u64, epoch: u64, origin: u32, hops: u16) -> Bytes {
    Message::from(RevokeMsg {
        group,
        epoch,
        origin: Rank(origin),
        hops,
    })
    .encode()
}

#[test]
fn command_delivers_here_then_floods_every_neighbour() {
    let mut n = node(64, 5, |_| {});
    n.revoke(NOW, 7, 3).unwrap();
    let (events, sent) = drain(&mut n);
    let revoked = RevokeEvent::Revoked {
        group: 7,
        epoch: 3,
        origin: Rank(5),
        hops: 0,
    };
    assert_eq!(events, vec![revoked]);
    assert_eq!(sent.len() as u32, degree(64));
    assert!(sent.iter().all(|(_, m)| m.hops == 1 && m.origin == Rank(5)));
    assert_eq!(n.revoked(7), Some(3));
    assert_eq!(n.revoke_stats().started, 1);
    // Idempotent: again is a no-op; an older epoch is refused.
    n.revoke(NOW, 7, 3).unwrap();
    assert_eq!(drain(&mut n), (vec![], vec![]));
    assert_eq!(
        n.revoke(NOW, 7, 2),
        Err(CommandError::Revoke(RevokeError::Stale {
            group: 7,
            epoch: 2,
            newest: 3
        }))
    );
    assert_eq!(n.revoke_stats().started, 1);
}

#[test]
fn first_receipt_forwards_to_all_but_the_sender_then_duplicates_and_stale_drop() {
    let mut n = node(32, 0, |_| {});
    n.handle_frame(NOW, Rank(1), notice(9, 4, 20, 2));
    let (events, sent) = drain(&mut n);
    assert_eq!(
        events,
        vec![RevokeEvent::Revoked {
            group: 9,
            epoch: 4,
            origin: Rank(20),
            hops: 2
        }]
    );
    assert_eq!(
        sent.len() as u32,
        degree(32) - 1,
        "all neighbours but the sender"
    );
    assert!(sent.iter().all(|(to, m)| *to != Rank(1) && m.hops == 3));
    n.handle_frame(NOW, Rank(2), notice(9, 4, 20, 1));
    n.handle_frame(NOW, Rank(2), notice(9, 3, 20, 1));
    assert_eq!(drain(&mut n), (vec![], vec![]));
    let s = &n.revoke_stats();
    assert_eq!((s.delivered, s.duplicates, s.stale), (1, 1, 1));
    // A newer epoch of the same group is a new revoke.
    n.handle_frame(NOW, Rank(2), notice(9, 5, 20, 1));
    assert_eq!(drain(&mut n).0.len(), 1);
    assert_eq!(n.revoked(9), Some(5));
}

#[test]
fn the_oldest_group_is_forgotten_at_the_bound() {
    let mut n = node(8, 0, |c| c.revoke.max_groups = 2);
    for g in 1..=3 {
        n.revoke(NOW, g, 1).unwrap();
    }
    assert_eq!(n.revoke_stats().forgotten, 1);
    assert_eq!(
        (n.revoked(1), n.revoked(2), n.revoked(3)),
        (None, Some(1), Some(1))
    );
    // Re-revoking group 2 makes it the newest: group 3 goes next.
    n.revoke(NOW, 2, 2).unwrap();
    n.revoke(NOW, 4, 1).unwrap();
    assert_eq!((n.revoked(2), n.revoked(3)), (Some(2), None));
    let mut bad = Config::new(8, 4);
    bad.revoke.max_groups = 0;
    assert!(Node::new(bad, Rank(0), 1, NOW).is_err());
}

#[test]
fn bad_frames_are_counted_drops() {
    let mut n = node(16, 0, |_| {});
    let before = n.stats().clone();
    // Origin outside the span.
    n.handle_frame(NOW, Rank(1), notice(1, 1, 16, 0));
    // Truncated and over-long bodies.
    let f = notice(1, 1, 2, 0);
    n.handle_frame(NOW, Rank(1), f.slice(..f.len() - 1));
    let mut long = f.to_vec();
    long.push(0);
    n.handle_frame(NOW, Rank(1), Bytes::from(long));
    // From a rank known dead, and from outside the span.
    n.declare_dead(NOW, &RankSet::from_iter([Rank(3)])).unwrap();
    drain(&mut n);
    n.handle_frame(NOW, Rank(3), notice(1, 1, 2, 0));
    n.handle_frame(NOW, Rank(99), notice(1, 1, 2, 0));
    assert_eq!(drain(&mut n), (vec![], vec![]));
    let s = n.stats();
    assert_eq!(s.dropped_bad_origin - before.dropped_bad_origin, 1);
    assert_eq!(s.dropped_decode_error - before.dropped_decode_error, 2);
    assert_eq!(s.dropped_unknown_peer - before.dropped_unknown_peer, 1);
    assert!(s.dropped_stale_sender > before.dropped_stale_sender);
    assert_eq!(n.revoke_stats().delivered, 0);
    assert_eq!(n.revoked(1), None);
}

#[test]
fn dead_ranks_leave_the_overlay_and_a_dead_node_refuses() {
    let mut n = node(16, 0, |_| {});
    n.declare_dead(NOW, &RankSet::from_iter([Rank(1), Rank(2)]))
        .unwrap();
    drain(&mut n);
    n.revoke(NOW, 1, 1).unwrap();
    let (_, sent) = drain(&mut n);
    // 14 live members: rank 0 is index 0, ±1 are ranks 3 and 15 (index 13).
    assert_eq!(sent.len() as u32, degree(14));
    assert!(sent.iter().any(|(to, _)| *to == Rank(3)));
    assert!(sent.iter().all(|(to, _)| to.0 > 2));
    n.declare_dead(NOW, &RankSet::from_iter([Rank(0)])).unwrap();
    assert_eq!(n.revoke(NOW, 2, 1), Err(CommandError::Dead));
}

/// With the detector on, a notice goes to this rank's standing links only: its ring observers
/// and subjects (heartbeats keep those links up) and its tree neighbours, never the sender.
/// Fails on the overlay flood, whose ±2^k neighbours at 1,024 ranks are mostly ranks this one
/// has no link to (a flood then dials ~19 per rank: tens of thousands of connections at once).
#[test]
fn with_the_detector_on_a_notice_floods_standing_links_only() {
    let mut n = node(1024, 500, |c| c.detect.enabled = true);
    let d = Config::new(1024, 4).detect;
    let rings =
        crate::detect::rings::Rings::compute_for(n.tree(), Rank(500), d.ring_seed, d.observers);
    let view = n.tree().view().unwrap();
    let mut standing: std::collections::BTreeSet<Rank> = rings.observers.clone();
    standing.extend(rings.subjects.iter().copied());
    standing.extend(view.parent());
    standing.extend(view.live_children());
    let from = *rings.observers.iter().next().unwrap();
    standing.remove(&from);
    n.handle_frame(NOW, from, notice(7, 1, 900, 2));
    let (events, sent) = drain(&mut n);
    assert_eq!(events.len(), 1);
    let to: std::collections::BTreeSet<Rank> = sent.iter().map(|(r, _)| *r).collect();
    assert_eq!(to.len(), sent.len(), "one copy each");
    assert_eq!(to, standing);
    assert!(sent.iter().all(|(_, m)| m.hops == 3));
    assert_eq!(n.revoke_stats().forwarded, standing.len() as u64);
}
