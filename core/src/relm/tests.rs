//! Unit tests of RELM through the node's public surface, driving a few nodes in the test harness
//! ([`Net`]) or by hand; the destination's ordering is checked against a reference model with
//! proptest.

use bytes::Bytes;
use proptest::prelude::*;

use super::{RelmError, RelmEvent, RelmMsg, Uid, UID_MAX};
use crate::sim::testing::{Net, Schedule};
use crate::time::{Duration, Instant};
use crate::tree::{Rank, RankSet};
use crate::wire::{Message, RelmDataMsg};
use crate::{CommandError, Config, Event, Node};

fn nodes(span: u32, radix: u32, tweak: impl Fn(&mut Config)) -> Vec<Node> {
    let mut cfg = Config::new(span, radix);
    tweak(&mut cfg);
    (0..span)
        .map(|r| Node::new(cfg.clone(), Rank(r), 11 + r as u64, Instant::ZERO).expect("valid"))
        .collect()
}

/// The nodes in the test harness, in the order these tests were written against: passes over
/// the ranks where each fires its timer if due, is drained, and hands each transmit straight to
/// its destination, until a pass moves no frame ([`Schedule::RankPasses`]).
fn net(span: u32, radix: u32, tweak: impl Fn(&mut Config)) -> Net {
    Net::from_nodes(nodes(span, radix, tweak)).schedule(Schedule::RankPasses)
}

fn data(src: u32, dst: u32, uid: u32, payload: &'static [u8]) -> Bytes {
    Message::Relm(RelmMsg::Data(RelmDataMsg {
        src: Rank(src),
        dst: Rank(dst),
        uid: Uid::new(uid).expect("valid"),
        tag: 16,
        payload: Bytes::from_static(payload),
    }))
    .encode()
}

fn at_ms(ms: u64) -> Instant {
    Instant::ZERO + Duration::from_millis(ms)
}

#[test]
fn window_and_byte_budget_push_back_until_acked() {
    let mut net = net(2, 2, |c| {
        c.relm.window = 4;
        c.relm.max_bytes = 1000;
    });
    let p = Bytes::from_static(b"0123456789");
    for i in 0..4 {
        assert_eq!(
            net.node_mut(0).relm_send(at_ms(0), Rank(1), 16, p.clone()),
            Ok(Uid::new(i).unwrap())
        );
    }
    assert_eq!(
        net.node_mut(0).relm_send(at_ms(0), Rank(1), 16, p.clone()),
        Err(CommandError::Relm(RelmError::Backpressure {
            dst: Rank(1),
            inflight: 4,
            bytes: 40
        }))
    );
    // Delivered, then acknowledged after the coalescing delay: the window opens again.
    net.run_until(at_ms(2));
    let ev = net.take_events();
    assert_eq!(
        ev.iter()
            .filter(|e| matches!(e.1, Event::Relm(RelmEvent::Delivered { .. })))
            .count(),
        4
    );
    assert!(ev.contains(&(
        Rank(0),
        Event::Relm(RelmEvent::Acked {
            dst: Rank(1),
            upto: Uid::new(3).unwrap()
        })
    )));
    assert_eq!(net.node(0).relm_unacked_bytes(), 0);
    assert!(net
        .node_mut(0)
        .relm_send(at_ms(2), Rank(1), 16, p.clone())
        .is_ok());
    // The byte budget: 990 more bytes do not fit next to the 10 in flight.
    let big = Bytes::from(vec![0u8; 991]);
    assert!(matches!(
        net.node_mut(0).relm_send(at_ms(2), Rank(1), 16, big),
        Err(CommandError::Relm(RelmError::Backpressure {
            bytes: 10,
            ..
        }))
    ));
    assert_eq!(
        net.node(0).stats().relm.sent,
        5,
        "a refused send changes nothing"
    );
}

#[test]
fn refusals_and_self_sends() {
    let mut cfg = Config::new(4, 2);
    cfg.dead = [Rank(3)].into_iter().collect::<RankSet>();
    let mut ns: Vec<Node> = (0..3)
        .map(|r| Node::new(cfg.clone(), Rank(r), 1, Instant::ZERO).expect("valid"))
        .collect();
    let p = Bytes::from_static(b"x");
    assert_eq!(
        ns[0].relm_send(at_ms(0), Rank(3), 1, p.clone()),
        Err(CommandError::PeerDead(Rank(3)))
    );
    assert_eq!(
        ns[0].relm_send(at_ms(0), Rank(9), 1, p.clone()),
        Err(CommandError::PeerDead(Rank(9)))
    );
    let huge = Bytes::from(vec![0u8; 1 << 20]);
    assert!(matches!(
        ns[0].relm_send(at_ms(0), Rank(1), 1, huge),
        Err(CommandError::TooLarge { .. })
    ));
    // To itself: delivered and acknowledged at once, nothing on the wire.
    let uid = ns[2].relm_send(at_ms(0), Rank(2), 7, p.clone()).unwrap();
    assert!(ns[2].poll_transmit().is_none());
    assert_eq!(
        ns[2].poll_event(),
        Some(Event::Relm(RelmEvent::Delivered {
            src: Rank(2),
            uid,
            tag: 7,
            payload: p
        }))
    );
    assert_eq!(
        ns[2].poll_event(),
        Some(Event::Relm(RelmEvent::Acked {
            dst: Rank(2),
            upto: uid
        }))
    );
    assert_eq!(ns[2].relm_held(), 0);
}

#[test]
fn relay_cache_is_bounded_by_count_and_time() {
    // 0 -> {1, 2}: 1 relays 3 -> 2 (3 is 1's child).
    let mut ns = nodes(4, 2, |c| {
        c.relm.cache_max = 3;
        c.relm.cache_ttl = Duration::from_millis(10);
    });
    assert_eq!(
        ns[1].tree().route(Rank(2)),
        crate::tree::Route::Next(Rank(0))
    );
    for i in 0..10 {
        ns[1].handle_frame(at_ms(0), Rank(3), data(3, 2, i, b"abc"));
    }
    assert_eq!(ns[1].stats().relm.forwarded, 10);
    assert_eq!(ns[1].stats().relm.cache_evicted, 7);
    assert_eq!(ns[1].relm_held(), 1 + 3, "one record and three copies");
    while ns[1].poll_transmit().is_some() {}
    // Time: the copies go after the TTL, the record after idling twice relm_retry.
    ns[1].handle_timeout(at_ms(20));
    assert_eq!(ns[1].stats().relm.cache_evicted, 10);
    assert_eq!(ns[1].relm_held(), 1);
    let mut t = 20;
    while ns[1].relm_held() > 0 && t < 10_000 {
        t += 100;
        ns[1].handle_timeout(at_ms(t));
    }
    assert_eq!(ns[1].relm_held(), 0);
    assert_eq!(ns[1].stats().relm.records_expired, 1);
    assert!(ns[1].poll_timeout().is_none(), "no timer left armed");
}

#[test]
fn an_ack_releases_the_relay_and_the_origin() {
    let mut net = net(4, 2, |_| {});
    for _ in 0..5 {
        net.node_mut(3)
            .relm_send(at_ms(0), Rank(2), 16, Bytes::from_static(b"hi"))
            .unwrap();
    }
    net.pump();
    net.clear_events();
    assert!(net.node(1).relm_held() > 0, "1 relays and caches");
    net.run_until(at_ms(5));
    let ev = net.take_events();
    assert!(ev
        .iter()
        .any(|e| matches!(e.1, Event::Relm(RelmEvent::Acked { .. }))));
    for (_, n) in net.nodes() {
        assert_eq!(n.relm_held(), 0, "rank {}", n.me());
    }
    // One coalesced ACK frame per hop for the five messages, plus the data.
    let frames: u64 = net.total(|s| s.relm.frames_out);
    assert_eq!(frames, 5 * 3 + 3);
}

#[test]
fn acks_that_free_much_of_a_window_skip_the_coalescing_delay() {
    // 3 -> 1 -> 0 -> 2: with a window of 8, eight messages delivered at once are acknowledged
    // at once by the destination and passed on at once by each relay: no timer needed.
    let mut net = net(4, 2, |c| c.relm.window = 8);
    for _ in 0..8 {
        net.node_mut(3)
            .relm_send(at_ms(0), Rank(2), 16, Bytes::from_static(b"w"))
            .unwrap();
    }
    net.pump();
    let ev = net.take_events();
    assert!(ev.contains(&(
        Rank(3),
        Event::Relm(RelmEvent::Acked {
            dst: Rank(2),
            upto: Uid::new(7).unwrap()
        })
    )));
    assert!(net
        .node_mut(3)
        .relm_send(at_ms(0), Rank(2), 16, Bytes::from_static(b"w"))
        .is_ok());
}

proptest! {
    /// The destination against a reference model: whatever order and duplication the uids
    /// arrive in (within the window, across the wrap), it delivers exactly the longest
    /// consecutive run from the chain's first uid, each once, in order, with its own bytes,
    /// and holds exactly the distinct uids above the gap.
    #[test]
    fn destination_matches_the_reference_model(
        arrivals in prop::collection::vec(0u32..24, 0..60),
        base_near_top in any::<bool>(),
    ) {
        let first = if base_near_top { UID_MAX - 5 } else { 0 };
        let mut ns = nodes(2, 2, |c| c.relm.first_uid = first);
        let base = Uid::new(first).unwrap();
        let payloads: Vec<Bytes> = (0..24).map(|i| Bytes::from(format!("m{i}"))).collect();
        for &k in &arrivals {
            let m = Message::Relm(RelmMsg::Data(RelmDataMsg {
                src: Rank(0),
                dst: Rank(1),
                uid: base.plus(k as u64),
                tag: 16,
                payload: payloads[k as usize].clone(),
            }));
            ns[1].handle_frame(at_ms(0), Rank(0), m.encode());
        }
        let mut got = Vec::new();
        while let Some(e) = ns[1].poll_event() {
            if let Event::Relm(RelmEvent::Delivered { src, uid, payload, .. }) = e {
                prop_assert_eq!(src, Rank(0));
                got.push((uid, payload));
            }
        }
        // The model.
        let seen: std::collections::BTreeSet<u32> = arrivals.iter().copied().collect();
        let run = (0..).take_while(|k| seen.contains(k)).count() as u32;
        let want: Vec<(Uid, Bytes)> =
            (0..run).map(|k| (base.plus(k as u64), payloads[k as usize].clone())).collect();
        prop_assert_eq!(got, want);
        let above = seen.iter().filter(|&&k| k > run).count();
        // Held: the buffered uids, plus the coalesced ACK waiting for its timer.
        prop_assert_eq!(ns[1].relm_held(), above + usize::from(run > 0));
    }
}
