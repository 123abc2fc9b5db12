//! The shrink campaign events, flattened into `lifeline_event`.

use super::*;
use crate::shrink::{LIFELINE_CAMPAIGN_REQUESTER_REMOVED, LIFELINE_CAMPAIGN_TIMED_OUT};
use lifeline_core::membership::{CampaignFailure, CampaignId};
use lifeline_core::tree::{Rank, RankSet};

fn id(requester: u32, seq: u32) -> CampaignId {
    CampaignId {
        requester: Rank(requester),
        seq,
    }
}

/// The `len` elements at `ptr` (empty for NULL).
///
/// # Safety
/// `ptr` is NULL or points at `len` elements that outlive the slice.
unsafe fn view<'a, T>(ptr: *const T, len: usize) -> &'a [T] {
    if ptr.is_null() {
        assert_eq!(len, 0);
        return &[];
    }
    // SAFETY: the caller's guarantee.
    unsafe { std::slice::from_raw_parts(ptr, len) }
}

#[test]
fn departed_flattens_ranks_causes_and_campaigns() {
    let mut slot = EventSlot::new();
    let ranks: RankSet = [Rank(3), Rank(7)].into_iter().collect();
    slot.fill(CoreEvent::Membership(MembershipEvent::Departed {
        epoch: 6,
        ranks,
        campaigns: vec![id(1, 1), id(4, 2)],
        members: 8,
    }));
    let ev = &slot.ev;
    assert_eq!(
        (ev.kind, ev.epoch, ev.count, ev.ranks_len, ev.campaigns_len),
        (LIFELINE_EVENT_DEPARTED, 6, 8, 2, 2)
    );
    // SAFETY: the pointers are the slot's, with their lengths.
    let (r, c, k) = unsafe {
        (
            view(ev.ranks, ev.ranks_len),
            view(ev.causes, ev.ranks_len),
            view(ev.campaigns, ev.campaigns_len),
        )
    };
    assert_eq!(r, [3, 7]);
    assert_eq!(c, [LIFELINE_CAUSE_LEFT; 2]);
    assert_eq!(k, [(1 << 32) | 1, (4 << 32) | 2]);
    assert!(ev.payload.is_null() && ev.joiners.is_null());

    // The next event clears every list.
    slot.fill(CoreEvent::Membership(MembershipEvent::Left { epoch: 9 }));
    let ev = &slot.ev;
    assert_eq!((ev.kind, ev.epoch), (LIFELINE_EVENT_LEFT, 9));
    assert!(ev.ranks.is_null() && ev.causes.is_null() && ev.campaigns.is_null());
    assert_eq!((ev.ranks_len, ev.campaigns_len, ev.reason), (0, 0, 0));
}

#[test]
fn a_departure_with_no_rank_left_has_no_lists_but_its_campaigns() {
    // Every target had crashed and been removed already: the view completes the campaign only.
    let mut slot = EventSlot::new();
    slot.fill(CoreEvent::Membership(MembershipEvent::Departed {
        epoch: 2,
        ranks: RankSet::new(),
        campaigns: vec![id(2, 5)],
        members: 3,
    }));
    let ev = &slot.ev;
    assert!(ev.ranks.is_null() && ev.causes.is_null() && ev.ranks_len == 0);
    // SAFETY: the slot's pointer with its length.
    let k = unsafe { view(ev.campaigns, ev.campaigns_len) };
    assert_eq!(k, [(2 << 32) | 5]);
}

#[test]
fn campaign_outcomes_carry_the_id_and_the_requester() {
    let mut slot = EventSlot::new();
    let removed: RankSet = [Rank(4), Rank(6)].into_iter().collect();
    slot.fill(CoreEvent::Membership(MembershipEvent::CampaignCompleted {
        id: id(1, 3),
        removed,
        epoch: 11,
    }));
    let ev = &slot.ev;
    assert_eq!(
        (ev.kind, ev.rank, ev.seq, ev.epoch),
        (LIFELINE_EVENT_CAMPAIGN_COMPLETED, 1, (1 << 32) | 3, 11)
    );
    assert!(ev.causes.is_null() && ev.campaigns.is_null());
    // SAFETY: the slot's pointer with its length.
    let r = unsafe { view(ev.ranks, ev.ranks_len) };
    assert_eq!(r, [4, 6]);

    for (reason, code) in [
        (CampaignFailure::TimedOut, LIFELINE_CAMPAIGN_TIMED_OUT),
        (
            CampaignFailure::RequesterRemoved,
            LIFELINE_CAMPAIGN_REQUESTER_REMOVED,
        ),
    ] {
        slot.fill(CoreEvent::Membership(MembershipEvent::CampaignFailed {
            id: id(5, 1),
            reason,
        }));
        let ev = &slot.ev;
        assert_eq!(
            (ev.kind, ev.rank, ev.seq, ev.reason),
            (LIFELINE_EVENT_CAMPAIGN_FAILED, 5, (5 << 32) | 1, code)
        );
        assert!(ev.ranks.is_null() && ev.ranks_len == 0);
    }
}
