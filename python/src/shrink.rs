//! Shrink campaigns for Python: the campaign id as one integer, the targets checked, and the
//! core's refusals as [`RunError`]s (so the Python exceptions of `py/mod.rs`).
//!
//! A campaign id is `requester << 32 | seq`, as in the C ABI (`capi/src/shrink.rs`): the
//! requesting rank and its own sequence number (1 for its first campaign); ranks are never
//! reused, so an id is unique for the cluster's life and names the campaign at every rank.

use lifeline_core::membership::{CampaignFailure, CampaignId, ShrinkError};
use lifeline_core::tree::{Rank, RankSet};

use crate::running::RunError;

/// The integer form of a campaign id: `requester << 32 | seq`.
pub fn campaign_id(id: CampaignId) -> u64 {
    (u64::from(id.requester.0) << 32) | u64::from(id.seq)
}

/// The name of a campaign failure (`timed_out`, `requester_removed`; the core's names).
pub fn failure_name(f: CampaignFailure) -> &'static str {
    f.name()
}

/// `ranks` as a target set: a rank listed twice is [`RunError::Invalid`] (nothing started).
/// Every other check is the core's ([`From<ShrinkError>`](RunError::from)).
pub fn targets(ranks: &[u32]) -> Result<RankSet, RunError> {
    let mut set = RankSet::new();
    for &r in ranks {
        if !set.insert(Rank(r)) {
            return Err(RunError::Invalid(format!(
                "shrink: rank {r} is listed twice among the targets"
            )));
        }
    }
    Ok(set)
}

impl From<ShrinkError> for RunError {
    /// `Dead` is `NotAMember`, `Leaving` is `Leaving`, `Busy` (too many campaigns open) is
    /// `Backpressure`; bad targets are `Invalid`.
    fn from(e: ShrinkError) -> Self {
        let s = e.to_string();
        match e {
            ShrinkError::Dead => Self::NotAMember(format!(
                "this rank is not a member of the cluster and takes no commands ({s})"
            )),
            ShrinkError::Leaving => Self::Leaving(s),
            ShrinkError::Busy(_) => {
                Self::Backpressure(format!("{s}: retry after one completes or fails"))
            }
            _ => Self::Invalid(format!("shrink: {s}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_pack_requester_and_seq() {
        let id = CampaignId {
            requester: Rank(5),
            seq: 2,
        };
        assert_eq!(campaign_id(id), (5 << 32) | 2);
    }

    #[test]
    fn duplicates_are_refused_and_the_rest_is_a_set() {
        assert!(matches!(targets(&[3, 4, 3]), Err(RunError::Invalid(_))));
        let t = targets(&[6, 3]).unwrap();
        assert_eq!(t.iter().map(|r| r.0).collect::<Vec<_>>(), vec![3, 6]);
        assert!(targets(&[]).unwrap().is_empty());
    }

    #[test]
    fn refusals_map_to_their_errors() {
        assert!(matches!(
            RunError::from(ShrinkError::Dead),
            RunError::NotAMember(_)
        ));
        assert!(matches!(
            RunError::from(ShrinkError::Leaving),
            RunError::Leaving(_)
        ));
        assert!(matches!(
            RunError::from(ShrinkError::Busy(1)),
            RunError::Backpressure(_)
        ));
        for e in [
            ShrinkError::Empty,
            ShrinkError::IncludesSelf,
            ShrinkError::OutOfSpan(Rank(9)),
            ShrinkError::TooMany { len: 3, max: 2 },
        ] {
            assert!(matches!(RunError::from(e), RunError::Invalid(_)));
        }
    }
}
