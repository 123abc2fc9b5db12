//! One rank's view of the repaired tree: a pure function of (layout, dead set, me).

use smallvec::SmallVec;

use super::layout::{Layout, Pos};
use super::rank::{Rank, RankSet};

/// Why a view could not be computed for a rank.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ViewError {
    /// The rank is not below the span.
    #[error("rank {rank} is outside the tree (span {span})")]
    OutOfRange {
        /// The rank asked about.
        rank: Rank,
        /// The tree's span.
        span: u32,
    },
    /// The rank is in the dead set, so it occupies no slot.
    #[error("rank {0} is dead")]
    Dead(Rank),
}

/// Where a message for some destination goes next; see [`Tree::route`](super::Tree::route).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    /// The destination is this rank.
    Local,
    /// Hand the message to this tree neighbour (the parent or a child).
    Next(Rank),
    /// The destination is dead, outside the span, or cut off by an empty slot: there is no
    /// living rank to get closer through.
    Unreachable,
}

/// One living rank's place in the repaired tree.
///
/// Computed from scratch by [`View::compute`] under PRRTE's promotion rule, stated
/// declaratively: the occupant of slot `S` is the first rank in the right-first pre-order of `S`'s
/// fault-free subtree that is alive and does not occupy a strict ancestor slot of `S`. A living
/// rank occupies exactly one slot, always on its own base-ancestor chain (promotion only moves a
/// rank up). Because the view depends only on the *set* of dead ranks, every rank that knows the
/// same set computes mutually consistent views, whatever order the deaths were learned in: every
/// survivor's parent lists it as a child, and `depth(child) = depth(parent) + 1`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct View {
    me: Rank,
    slot: Rank,
    depth: u32,
    ancestors: SmallVec<[Rank; 8]>,
    children: Vec<Option<Rank>>,
}

impl View {
    /// Computes `me`'s view of the tree `layout` with the ranks in `dead` removed.
    ///
    /// Cost: O(radix · depth + dead ranks the pre-order walks meet); never O(span). Allocates
    /// only the child list when `me` has children (and the ancestor list past depth 8).
    pub fn compute(layout: &Layout, dead: &RankSet, me: Rank) -> Result<Self, ViewError> {
        if !layout.contains(me) {
            return Err(ViewError::OutOfRange {
                rank: me,
                span: layout.span(),
            });
        }
        if dead.contains(me) {
            return Err(ViewError::Dead(me));
        }
        let (ancestors, slot) = ancestor_walk(layout, dead, me, None);

        let n = layout.child_count_pos(slot);
        let mut children = Vec::new();
        if n > 0 {
            children.reserve_exact(n as usize);
            for j in 0..n {
                let c = layout.child_pos(slot, j);
                let occ = c
                    .and_then(|c| occupant(layout, dead, c, |x| x == me || ancestors.contains(&x)));
                children.push(occ);
            }
            while children.last() == Some(&None) {
                children.pop();
            }
            if children.is_empty() {
                children = Vec::new();
            }
        }
        Ok(Self {
            me,
            slot: Rank(slot.rank as u32),
            depth: slot.depth,
            ancestors,
            children,
        })
    }

    /// The rank this view belongs to.
    #[inline]
    pub fn me(&self) -> Rank {
        self.me
    }

    /// The slot (virtual position) this rank occupies; differs from [`Self::me`] after a
    /// promotion.
    #[inline]
    pub fn slot(&self) -> Rank {
        self.slot
    }

    /// Depth of the slot (the root slot is 0); equals `ancestors().len()`.
    #[inline]
    pub fn depth(&self) -> u32 {
        self.depth
    }

    /// Whether this rank occupies the root slot: the root is whoever fills slot 0, which is rank 0
    /// until it dies and then its successor under the same promotion rule (root failover).
    #[inline]
    pub fn is_root(&self) -> bool {
        self.depth == 0
    }

    /// Occupants of the ancestor slots, root first; the last one is the parent.
    #[inline]
    pub fn ancestors(&self) -> &[Rank] {
        &self.ancestors
    }

    /// The parent ("lifeline"): the occupant of the parent slot, `None` at the root.
    #[inline]
    pub fn parent(&self) -> Option<Rank> {
        self.ancestors.last().copied()
    }

    /// Occupants of the child slots in slot order; an empty slot inside the list is `None`,
    /// trailing empty slots are trimmed.
    #[inline]
    pub fn children(&self) -> &[Option<Rank>] {
        &self.children
    }

    /// The living children, in slot order.
    pub fn live_children(&self) -> impl Iterator<Item = Rank> + '_ {
        self.children.iter().flatten().copied()
    }

    /// Whether `r` is the parent or a child (a tree neighbour).
    pub fn is_neighbor(&self, r: Rank) -> bool {
        self.parent() == Some(r) || self.children.contains(&Some(r))
    }

    /// Next hop towards `dst`, given the dead set the view was computed from.
    ///
    /// Never loops when all ranks hold the same dead set: a hop either moves up toward the slot
    /// whose subtree holds `dst` or moves one level down, so a live `dst` is reached within
    /// `2·depth` hops. Allocation-free.
    pub fn route(&self, layout: &Layout, dead: &RankSet, dst: Rank) -> Route {
        if dst == self.me {
            return Route::Local;
        }
        if !layout.contains(dst) || dead.contains(dst) {
            return Route::Unreachable;
        }
        let up = || self.parent().map_or(Route::Unreachable, Route::Next);
        let slot = layout.pos(self.slot);
        if !Layout::pos_contains(slot, dst.0 as u64) || self.ancestors.contains(&dst) {
            return up();
        }
        if dst == self.slot {
            // The base owner of my slot is alive but not here: it cannot be (it would occupy
            // my slot), so this only happens with an inconsistent dead set.
            return Route::Unreachable;
        }
        let j = layout.subtree_index_pos(slot, dst.0 as u64) as usize;
        match self.children.get(j) {
            Some(Some(c)) => Route::Next(*c),
            _ => Route::Unreachable,
        }
    }
}

/// The occupant of slot `s`: the first rank of RFPre(`s`) that is alive and not `excluded`.
/// `me`'s ancestors, root first, with the ranks in `dead` and `without` removed (`me` alive and
/// not `without`): [`View::compute`]'s ancestor walk with one more exclusion, without copying
/// the dead set.
pub(crate) fn ancestors_excluding(
    layout: &Layout,
    dead: &RankSet,
    me: Rank,
    without: Rank,
) -> SmallVec<[Rank; 8]> {
    ancestor_walk(layout, dead, me, Some(without)).0
}

/// Walks `me`'s base chain from the root down: each slot's occupant (skipping the ancestors
/// found so far, and `without`) is an ancestor, until `me` occupies one (its slot).
fn ancestor_walk(
    layout: &Layout,
    dead: &RankSet,
    me: Rank,
    without: Option<Rank>,
) -> (SmallVec<[Rank; 8]>, Pos) {
    // Base chain of `me`, root first, `me` last.
    let mine = layout.pos(me);
    let mut chain: SmallVec<[Pos; 16]> = SmallVec::new();
    let mut cur = Some(mine);
    while let Some(p) = cur {
        chain.push(p);
        cur = layout.parent_pos(p);
    }
    chain.reverse();
    let mut ancestors: SmallVec<[Rank; 8]> = SmallVec::new();
    let mut slot = mine;
    for &s in &chain {
        // `me` lies in RFPre(s) and is not excluded, so an occupant always exists.
        let occ = occupant(layout, dead, s, |x| {
            Some(x) == without || ancestors.contains(&x)
        })
        .unwrap_or(me);
        if occ == me {
            slot = s;
            break;
        }
        ancestors.push(occ);
    }
    (ancestors, slot)
}

pub(crate) fn occupant(
    layout: &Layout,
    dead: &RankSet,
    s: Pos,
    excluded: impl Fn(Rank) -> bool,
) -> Option<Rank> {
    let mut x = s;
    loop {
        let r = Rank(x.rank as u32);
        if !dead.contains(r) && !excluded(r) {
            return Some(r);
        }
        x = layout.rfpre_next(x, s.rank)?;
    }
}
