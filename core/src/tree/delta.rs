//! `ViewDelta`: what changed between two views of the same rank.

use super::rank::Rank;
use super::view::View;

/// One child slot whose occupant changed, by slot index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChildChange {
    /// Child slot index (0-based, slot order).
    pub index: u32,
    /// Occupant before (`None`: empty or absent).
    pub old: Option<Rank>,
    /// Occupant after (`None`: empty or absent).
    pub new: Option<Rank>,
}

/// The structural difference between a rank's old and new view.
///
/// Produced for *any* view change: failures, a grow that moves a rank into a dead slot (the
/// re-parent hazard of a grow with holes shows up as `demoted`), root failover, and this rank's
/// own death (`new_slot == None`). Consumers that keep per-child or per-parent state (xcast
/// rounds, RELM links) react to it; a delta with nothing changed is never produced.
///
/// When the slot moved (`promoted` or `demoted`), child indices refer to different slots before
/// and after, so every current child must be treated as new (PRRTE's advice, kept here).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ViewDelta {
    /// Slot before; `None` if the rank had no view (it was dead or outside the span).
    pub old_slot: Option<Rank>,
    /// Slot after; `None` if the rank is now dead.
    pub new_slot: Option<Rank>,
    /// The slot moved up (to a shallower depth).
    pub promoted: bool,
    /// The slot moved down (only a grow with holes can do this).
    pub demoted: bool,
    /// Parent before.
    pub old_parent: Option<Rank>,
    /// Parent after.
    pub new_parent: Option<Rank>,
    /// Whether the ancestor list changed (a deeper ancestor can change while the parent stays).
    pub ancestors_changed: bool,
    /// Child slots whose occupant changed, in index order.
    pub child_changes: Vec<ChildChange>,
}

impl ViewDelta {
    /// The delta from `old` to `new`, or `None` when nothing changed.
    pub fn between(old: Option<&View>, new: Option<&View>) -> Option<Self> {
        if old == new {
            return None;
        }
        let slot = |v: Option<&View>| v.map(View::slot);
        let depth = |v: Option<&View>| v.map(View::depth);
        let (od, nd) = (depth(old), depth(new));
        let (promoted, demoted) = match (od, nd) {
            (Some(a), Some(b)) => (b < a, b > a),
            _ => (false, false),
        };
        let empty: &[Option<Rank>] = &[];
        let oc = old.map_or(empty, View::children);
        let nc = new.map_or(empty, View::children);
        let child_changes = (0..oc.len().max(nc.len()))
            .filter_map(|i| {
                let o = oc.get(i).copied().flatten();
                let n = nc.get(i).copied().flatten();
                (o != n || slot(old) != slot(new)).then_some(ChildChange {
                    index: i as u32,
                    old: o,
                    new: n,
                })
            })
            .filter(|c| c.old.is_some() || c.new.is_some())
            .collect();
        Some(Self {
            old_slot: slot(old),
            new_slot: slot(new),
            promoted,
            demoted,
            old_parent: old.and_then(View::parent),
            new_parent: new.and_then(View::parent),
            ancestors_changed: old.map(View::ancestors) != new.map(View::ancestors),
            child_changes,
        })
    }

    /// Whether the parent changed.
    pub fn parent_changed(&self) -> bool {
        self.old_parent != self.new_parent
    }

    /// Whether the slot changed (promotion, demotion, or death).
    pub fn slot_changed(&self) -> bool {
        self.old_slot != self.new_slot
    }

    /// Whether this rank is dead after the change.
    pub fn self_dead(&self) -> bool {
        self.new_slot.is_none()
    }

    /// Ranks that are children after the change but were not before, in slot order.
    pub fn added_children(&self) -> impl Iterator<Item = Rank> + '_ {
        let old: Vec<Rank> = self.child_changes.iter().filter_map(|c| c.old).collect();
        self.child_changes
            .iter()
            .filter_map(|c| c.new)
            .filter(move |r| !old.contains(r))
    }

    /// Ranks that were children before the change and are not after, in slot order.
    pub fn removed_children(&self) -> impl Iterator<Item = Rank> + '_ {
        let new: Vec<Rank> = self.child_changes.iter().filter_map(|c| c.new).collect();
        self.child_changes
            .iter()
            .filter_map(|c| c.old)
            .filter(move |r| !new.contains(r))
    }
}
