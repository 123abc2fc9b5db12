//! The relay events (gray tree links routed around), flattened into `lifeline_event`.

use super::*;
use lifeline_core::tree::Rank;

#[test]
fn relay_started_names_the_peer_and_the_relay() {
    let mut slot = EventSlot::new();
    slot.fill(CoreEvent::Membership(MembershipEvent::RelayStarted {
        peer: Rank(9),
        via: Some(Rank(0)),
    }));
    let ev = &slot.ev;
    assert_eq!(
        (ev.kind, ev.rank, ev.peer),
        (LIFELINE_EVENT_RELAY_STARTED, 9, 0)
    );
    assert!(ev.ranks.is_null() && ev.payload.is_null() && ev.causes.is_null());
    assert_eq!((ev.epoch, ev.seq, ev.count), (0, 0, 0));
    // No candidate: the relay is `LIFELINE_NO_RANK`.
    slot.fill(CoreEvent::Membership(MembershipEvent::RelayStarted {
        peer: Rank(3),
        via: None,
    }));
    assert_eq!(
        (slot.ev.kind, slot.ev.rank, slot.ev.peer),
        (LIFELINE_EVENT_RELAY_STARTED, 3, LIFELINE_NO_RANK)
    );
}

#[test]
fn relay_ended_names_the_peer() {
    let mut slot = EventSlot::new();
    slot.fill(CoreEvent::Membership(MembershipEvent::RelayEnded {
        peer: Rank(9),
    }));
    let ev = &slot.ev;
    assert_eq!(
        (ev.kind, ev.rank, ev.peer),
        (LIFELINE_EVENT_RELAY_ENDED, 9, LIFELINE_NO_RANK)
    );
    // The kinds are distinct from every earlier one (appended).
    const { assert!(LIFELINE_EVENT_RELAY_STARTED > LIFELINE_EVENT_REVOKED) };
    const { assert!(LIFELINE_EVENT_RELAY_ENDED == LIFELINE_EVENT_RELAY_STARTED + 1) };
}
