//! The radix routing tree: layout arithmetic, one rank's repaired view, routing, deltas, the
//! persistent dead set and the joiner's snapshot.
//!
//! # Model
//!
//! Ranks `[0, span)` sit in PRRTE's strided radix tree ([`Layout`]). When ranks die, each slot
//! is re-occupied by a rule stated declaratively: *the occupant of slot `S` is the first rank in
//! the right-first pre-order of `S`'s fault-free subtree that is alive and does not occupy a
//! strict ancestor slot of `S`*. In words, a dead rank is replaced by its highest-rank living
//! descendant along the right spine, and a wholly dead subtree leaves an empty slot.
//!
//! Unlike PRRTE, a [`View`] is a **pure function** of (span, radix, dead set, me), recomputed in
//! one pass for any batch of failures and never patched, so the order in which deaths are learned
//! cannot change it (PRRTE's incremental `update_descendants` can drop a live subtree when deaths
//! arrive one at a time). [`Tree`] owns the persistent dead set and the current view, and every
//! change that alters the view yields a [`ViewDelta`].
//!
//! # Root failover
//!
//! The root is a slot, not a rank. When rank 0 dies, slot 0 is filled by the same rule: its
//! highest-rank living child takes it (or that child's highest living child, and so on). For
//! callers this means:
//!
//! - "Am I the root?" is [`View::is_root`], never `me == Rank::ROOT`. Everything serialised by the
//!   root (xcast op ids, global failure epochs) must move with the slot: the new root resumes from
//!   the state it has and re-drives what was in flight.
//! - Root failover is an ordinary [`ViewDelta`] (`promoted` at the new root; a parent change at
//!   its old siblings' subtree), so it needs no special path in consumers.
//! - If every other rank is dead, the last survivor is the root with no children; when no rank is
//!   alive there is no view at all.
//!
//! # Grow
//!
//! [`Tree::grow`] appends ranks. In a fault-free tree that only adds leaves, but with holes it
//! can change a dead slot's occupant (radix 2, span 4 with 1 dead: 3 holds slot 1; grow to 6 and
//! 5 takes slot 1, demoting 3 under it). This is reported as a [`ViewDelta`] with `demoted` set,
//! exactly like a failure repair, so in-flight traffic is re-driven.

use smallvec::SmallVec;

mod delta;
mod layout;
mod rank;
mod rank_repr;
mod reconcile;
mod snapshot;
mod view;

#[cfg(test)]
mod tests;

pub use delta::{ChildChange, ViewDelta};
pub use layout::{Layout, LayoutError, MAX_RADIX, MIN_RADIX};
pub use rank::{Iter as RankSetIter, Ranges, Rank, RankSet, RankSetParseError, MAX_SPAN};
pub use reconcile::{Reconcile, MAX_INFERRED};
pub use snapshot::{Snapshot, SnapshotError};
pub use view::{Route, View, ViewError};

/// Why a tree operation was refused. A refused call changes nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TreeError {
    /// The span or radix is illegal.
    #[error(transparent)]
    Layout(#[from] LayoutError),
    /// A rank at or above the span.
    #[error("rank {rank} is outside the tree (span {span})")]
    RankOutOfRange {
        /// The offending rank.
        rank: Rank,
        /// The tree's span.
        span: u32,
    },
    /// A grow asked for a smaller span; ranks are never reused or removed from the span.
    #[error(
        "cannot shrink the span from {from} to {to}; departures are holes, not a smaller span"
    )]
    SpanShrink {
        /// Current span.
        from: u32,
        /// Requested span.
        to: u32,
    },
}

/// How a death was learned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// Inferred locally (a lost link, a neighbour's notice, reconciliation).
    Local,
    /// Confirmed by the root's epoch-stamped global notice.
    Global,
}

/// What a link to `peer` is to this rank; see [`Tree::link_role`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkRole {
    /// The peer is my parent: losing it is a tree fault.
    Parent,
    /// The peer occupies my child slot `index`: losing it is a tree fault.
    Child(u32),
    /// Not a tree neighbour (a lateral link): losing it never triggers a tree repair.
    Lateral,
}

/// One rank's routing state: the layout, the persistent dead set, and the current view.
///
/// The dead set only grows (ranks are never reused). Every mutation recomputes the view from
/// scratch and returns the [`ViewDelta`] if the view changed, so duplicate and reordered
/// notices are idempotent: a death already known changes nothing and yields no delta.
#[derive(Clone, Debug)]
pub struct Tree {
    layout: Layout,
    me: Rank,
    dead: RankSet,
    confirmed: RankSet,
    view: Option<View>,
}

impl Tree {
    /// A fault-free tree of `span` ranks seen from `me`.
    pub fn new(span: u32, radix: u32, me: Rank) -> Result<Self, TreeError> {
        Self::with_dead(Layout::new(span, radix)?, RankSet::new(), me)
    }

    /// A tree with a known dead set (for example from a [`Snapshot`] handed to a joiner).
    /// Deaths given here count as globally confirmed.
    pub fn with_dead(layout: Layout, dead: RankSet, me: Rank) -> Result<Self, TreeError> {
        if !layout.contains(me) {
            return Err(TreeError::RankOutOfRange {
                rank: me,
                span: layout.span(),
            });
        }
        if let Some(max) = dead.max().filter(|&m| !layout.contains(m)) {
            return Err(TreeError::RankOutOfRange {
                rank: max,
                span: layout.span(),
            });
        }
        let view = View::compute(&layout, &dead, me).ok();
        Ok(Self {
            layout,
            me,
            confirmed: dead.clone(),
            dead,
            view,
        })
    }

    /// A joiner's tree from a snapshot: computes the same view as every rank holding it.
    pub fn from_snapshot(snapshot: &Snapshot, me: Rank) -> Result<Self, TreeError> {
        Self::with_dead(snapshot.layout, snapshot.dead.clone(), me)
    }

    /// The snapshot a joiner needs (span, radix, dead set).
    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            layout: self.layout,
            dead: self.dead.clone(),
        }
    }

    /// The tree shape.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// This rank.
    pub fn me(&self) -> Rank {
        self.me
    }

    /// Every rank known dead, locally inferred or globally confirmed.
    pub fn dead(&self) -> &RankSet {
        &self.dead
    }

    /// The deaths confirmed by a global notice (a subset of [`Self::dead`]).
    pub fn confirmed(&self) -> &RankSet {
        &self.confirmed
    }

    /// Whether `r` is inside the span and not known dead.
    pub fn is_alive(&self, r: Rank) -> bool {
        self.layout.contains(r) && !self.dead.contains(r)
    }

    /// The root the tree would have if `without` died too (the root itself when `without` is
    /// not the root): where evidence against `without` must go. `None` if nobody would be left.
    pub fn root_without(&self, without: Rank) -> Option<Rank> {
        view::occupant(&self.layout, &self.dead, self.layout.pos(Rank(0)), |r| {
            r == without
        })
    }

    /// This rank's ancestors, root first, in the tree it would have if `without` died too: the
    /// path evidence against `without` travels up (it never passes through `without`). Empty
    /// when this rank would be the root, or is itself dead or `without`. O(depth · radix).
    pub fn ancestors_without(&self, without: Rank) -> SmallVec<[Rank; 8]> {
        let me = self.me;
        if !self.is_alive(me) || me == without {
            return SmallVec::new();
        }
        view::ancestors_excluding(&self.layout, &self.dead, me, without)
    }

    /// The rank that would be this rank's parent if its current parent died (nothing else
    /// changing): the new parent a repair would give it, the promoted sibling for a child of
    /// the dead rank, the grandparent for the child promoted into its slot. `None` at the root,
    /// for a rank whose parent's death would make it the root, and once this rank is dead.
    /// A driver holding a link to it in advance takes the dial off the repair's path.
    pub fn standby_parent(&self) -> Option<Rank> {
        let parent = self.view.as_ref()?.parent()?;
        self.ancestors_without(parent).last().copied()
    }

    /// The current view; `None` once this rank itself is known dead.
    pub fn view(&self) -> Option<&View> {
        self.view.as_ref()
    }

    /// Records a batch of deaths and recomputes the view once.
    ///
    /// All ranks are checked before anything changes. Ranks already known dead are ignored
    /// (idempotent), except that a [`Scope::Global`] notice also marks them confirmed. Returns
    /// the delta if the view changed. Marking this rank dead leaves it without a view
    /// (`delta.self_dead()`).
    pub fn mark_dead(
        &mut self,
        ranks: &[Rank],
        scope: Scope,
    ) -> Result<Option<ViewDelta>, TreeError> {
        if let Some(&bad) = ranks.iter().find(|r| !self.layout.contains(**r)) {
            return Err(TreeError::RankOutOfRange {
                rank: bad,
                span: self.layout.span(),
            });
        }
        let mut new = 0;
        for &r in ranks {
            new += u32::from(self.dead.insert(r));
            if scope == Scope::Global {
                self.confirmed.insert(r);
            }
        }
        if new == 0 {
            return Ok(None);
        }
        Ok(self.recompute())
    }

    /// Grows the span to `new_span` (appending ranks; holes stay holes). Returns the delta if
    /// this rank's view changed, which with holes can include a demotion.
    pub fn grow(&mut self, new_span: u32) -> Result<Option<ViewDelta>, TreeError> {
        if new_span < self.layout.span() {
            return Err(TreeError::SpanShrink {
                from: self.layout.span(),
                to: new_span,
            });
        }
        self.layout = self.layout.with_span(new_span)?;
        Ok(self.recompute())
    }

    fn recompute(&mut self) -> Option<ViewDelta> {
        let new = View::compute(&self.layout, &self.dead, self.me).ok();
        let delta = ViewDelta::between(self.view.as_ref(), new.as_ref());
        self.view = new;
        delta
    }

    /// Next hop toward `dst`: [`Route::Local`] for me, [`Route::Unreachable`] for a dead or
    /// out-of-span rank (a rank known dead is never dialled) or when this rank is dead.
    /// Allocation-free; never loops when ranks share the dead set.
    pub fn route(&self, dst: Rank) -> Route {
        match &self.view {
            Some(v) => v.route(&self.layout, &self.dead, dst),
            None => Route::Unreachable,
        }
    }

    /// Whether a link to `peer` is a tree link. A tree neighbour that is also used laterally is
    /// still a tree link: its loss must trigger a repair.
    pub fn link_role(&self, peer: Rank) -> LinkRole {
        let Some(v) = &self.view else {
            return LinkRole::Lateral;
        };
        if v.parent() == Some(peer) {
            return LinkRole::Parent;
        }
        match v.children().iter().position(|c| *c == Some(peer)) {
            Some(i) => LinkRole::Child(i as u32),
            None => LinkRole::Lateral,
        }
    }

    /// Deaths inside my slot's subtree that the root has not yet confirmed, ascending: what a
    /// re-homed rank re-reports to its new parent, since that parent may not know them and an
    /// earlier upward notice may have been lost with the old parent.
    pub fn unconfirmed_in_subtree(&self) -> Vec<Rank> {
        let Some(v) = &self.view else {
            return Vec::new();
        };
        self.dead
            .iter()
            .filter(|&r| !self.confirmed.contains(r) && self.layout.in_subtree(v.slot(), r))
            .collect()
    }
}
