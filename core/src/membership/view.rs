//! The agreed view: what the coordinator's ordered notices have made of the member set.

use crate::tree::{Rank, RankSet};

/// The membership view this rank has applied: every member that applied the root's global
/// notices up to [`MembershipView::epoch`] holds the same one (the notices travel in xcast
/// order, process-first). Deaths known here but not yet in a notice (a tree link lost, a
/// decision's flood ahead of its notice) are not part of it. Read through
/// [`Node::view`](crate::Node::view).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct MembershipView {
    /// The epoch of the last notice applied (0: none yet).
    pub epoch: u64,
    /// Ranks ever in the cluster (`0..span`).
    pub span: u32,
    /// Ranks removed as of `epoch`, ascending.
    pub removed: Vec<Rank>,
    /// Members as of `epoch`: `span` minus `removed`.
    pub members: u32,
}

/// The part of [`MembershipView`] the machine keeps (the span comes from the tree).
#[derive(Debug, Default)]
pub(super) struct Agreed {
    pub(super) epoch: u64,
    pub(super) removed: RankSet,
}

impl Agreed {
    /// Applies one delivered notice (notices arrive in op order; an older epoch changes
    /// nothing it has not already).
    pub(super) fn apply(&mut self, epoch: u64, ranks: &[Rank]) {
        self.epoch = self.epoch.max(epoch);
        for &r in ranks {
            self.removed.insert(r);
        }
    }

    pub(super) fn view(&self, span: u32) -> MembershipView {
        let removed: Vec<Rank> = self.removed.iter().filter(|r| r.0 < span).collect();
        MembershipView {
            epoch: self.epoch,
            span,
            members: span.saturating_sub(removed.len() as u32),
            removed,
        }
    }
}
