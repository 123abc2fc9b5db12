//! Shrink campaigns (`lifeline_node_shrink`): removing ranks on purpose, as one collective
//! event (the core's `Node::shrink`, `core/src/membership/shrink.rs`).
//!
//! A campaign id is one `uint64_t`: the requesting rank in the high 32 bits, that rank's own
//! sequence number (1 for its first campaign) in the low 32 bits. Ranks are never reused, so an
//! id is unique for the cluster's life, and the same number names the campaign at every rank
//! (`LIFELINE_EVENT_DEPARTED`'s `campaigns`, `LIFELINE_EVENT_CAMPAIGN_COMPLETED`'s `seq`).

use lifeline_core::membership::CampaignId;
use lifeline_core::tree::{Rank, RankSet};

use crate::node::{enter_mut, now, put, Node};
use crate::result::*;

/// `LIFELINE_EVENT_CAMPAIGN_FAILED` reason: `membership_shrink_timeout_ns` passed without the
/// campaign's completion (the coordinator was lost and its successor did not finish it in
/// time, or the order could not complete).
pub const LIFELINE_CAMPAIGN_TIMED_OUT: u32 = 1;
/// `LIFELINE_EVENT_CAMPAIGN_FAILED` reason: this rank (the requester) was removed, or left,
/// before the campaign completed.
pub const LIFELINE_CAMPAIGN_REQUESTER_REMOVED: u32 = 2;

/// The C form of a campaign id: `requester << 32 | seq`.
pub(crate) fn campaign_id(id: CampaignId) -> u64 {
    (u64::from(id.requester.0) << 32) | u64::from(id.seq)
}

/// The `LIFELINE_CAMPAIGN_*` reason of a failure (0 for a reason this version does not know).
pub(crate) fn failure_reason(f: lifeline_core::membership::CampaignFailure) -> u32 {
    use lifeline_core::membership::CampaignFailure as F;
    match f {
        F::TimedOut => LIFELINE_CAMPAIGN_TIMED_OUT,
        F::RequesterRemoved => LIFELINE_CAMPAIGN_REQUESTER_REMOVED,
        _ => 0,
    }
}

/// Starts a shrink campaign removing `targets[0..n]` on purpose. On `LIFELINE_OK`, `*campaign`
/// is its id (see below) and the campaign runs: the request goes to the coordinator, which
/// orders it through the tree; each target enters leaving mode (its commands return
/// `LIFELINE_ERR_LEAVING`), drains its reliable sends, and leaves (`LIFELINE_EVENT_LEFT`: exit
/// cleanly); every member removes the targets in one view change (`LIFELINE_EVENT_DEPARTED`,
/// the same list everywhere, not a failure), and this rank gets exactly one
/// `LIFELINE_EVENT_CAMPAIGN_COMPLETED`, or one `LIFELINE_EVENT_CAMPAIGN_FAILED` after
/// `membership_shrink_timeout_ns`. Targets already dead (or holes) inside the span are allowed:
/// they count as departed.
///
/// A campaign id is `(uint64_t)requester << 32 | seq`: this rank, and its own sequence number
/// (1 for its first campaign); the same number names it at every rank.
///
/// Refusals change nothing and leave `*campaign` unwritten. The arguments are checked first:
/// `LIFELINE_ERR_NULL` (`campaign` NULL, or `targets` NULL with `n` > 0),
/// `LIFELINE_ERR_TOO_MANY_TARGETS` (`n` over the config key `max_list`: checked before
/// `targets` is read), `LIFELINE_ERR_DUPLICATE_TARGET` (a rank listed twice); then the core's:
/// `LIFELINE_ERR_DEAD` (not a member), `LIFELINE_ERR_LEAVING` (this rank is itself a target),
/// `LIFELINE_ERR_NO_TARGETS` (`n` is 0), `LIFELINE_ERR_RANK_OUT_OF_RANGE` (a target at or above
/// the span), `LIFELINE_ERR_TARGET_SELF` (a rank not the coordinator named itself),
/// `LIFELINE_ERR_SHRINK_BUSY` (`membership_shrink_max_pending` campaigns of this rank open).
///
/// # Safety
/// `node` is NULL or a live node used by one thread at a time; `targets` is NULL or points to
/// `n` readable `uint32_t` (it is not read when `n` is over `max_list`); `campaign` is NULL or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn lifeline_node_shrink(
    node: *mut Node,
    now_ns: u64,
    targets: *const u32,
    n: usize,
    campaign: *mut u64,
) -> LifelineResult {
    if campaign.is_null() || (targets.is_null() && n != 0) {
        return LIFELINE_ERR_NULL;
    }
    // SAFETY: the caller guarantees `node` is NULL or a live node used by one thread at a time.
    enter_mut(
        unsafe { node.as_mut() },
        LIFELINE_ERR_NULL,
        LIFELINE_ERR_PANIC,
        |nd| {
            if n > nd.inner.config().max_list as usize {
                return LIFELINE_ERR_TOO_MANY_TARGETS;
            }
            let list: &[u32] = if n == 0 {
                &[]
            } else {
                // SAFETY: non-NULL with `n` readable elements (the caller's guarantee).
                unsafe { std::slice::from_raw_parts(targets, n) }
            };
            let mut set = RankSet::new();
            for &r in list {
                if !set.insert(Rank(r)) {
                    return LIFELINE_ERR_DUPLICATE_TARGET;
                }
            }
            match nd.inner.shrink(now(now_ns), &set) {
                Ok(id) => {
                    // SAFETY: `campaign` is non-NULL and writable (checked above).
                    unsafe { put(campaign, campaign_id(id)) };
                    LIFELINE_OK
                }
                Err(e) => LifelineResult::from(&e),
            }
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use lifeline_core::membership::CampaignFailure;

    #[test]
    fn a_campaign_id_packs_requester_and_seq() {
        let id = CampaignId {
            requester: Rank(7),
            seq: 3,
        };
        assert_eq!(campaign_id(id), (7 << 32) | 3);
        let top = CampaignId {
            requester: Rank(u32::MAX - 1),
            seq: u32::MAX,
        };
        assert_eq!(campaign_id(top) >> 32, u64::from(u32::MAX - 1));
        assert_eq!(campaign_id(top) & 0xffff_ffff, u64::from(u32::MAX));
    }

    #[test]
    fn failure_reasons_are_distinct_and_non_zero() {
        let a = failure_reason(CampaignFailure::TimedOut);
        let b = failure_reason(CampaignFailure::RequesterRemoved);
        assert_eq!(
            (a, b),
            (
                LIFELINE_CAMPAIGN_TIMED_OUT,
                LIFELINE_CAMPAIGN_REQUESTER_REMOVED
            )
        );
        assert!(a != 0 && b != 0 && a != b);
    }
}
