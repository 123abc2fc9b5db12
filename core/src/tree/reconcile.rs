//! Ancestry reconciliation: which deaths explain a neighbour's claim about my lineage.

use super::rank::{Rank, RankSet};
use super::view::View;
use super::Tree;

/// Verdict on a lineage report (the ancestor list a neighbour believes this rank has).
///
/// An adoption notice from a new parent carries `parent's ancestors + parent`; an upward failure
/// notice from a child carries the child's ancestors, whose last entry must be the receiver and
/// is stripped before reconciling. The report is never padded: a report of `[root]` means
/// exactly "my parent is the root".
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reconcile {
    /// The report equals my current ancestors.
    Agreed,
    /// The report is explained by these additional deaths (not yet in my dead set). The caller
    /// raises them as failures (before repairing, so its report path sees them as new) and
    /// then repairs with them.
    Inferred(RankSet),
    /// The report names a rank I already know is dead: the sender is behind me and will catch
    /// up from the global notice. Ignore it.
    Stale,
    /// No set of deaths explains the report (it is longer than my lineage can be, names me or a
    /// rank outside the tree, or needs more hypotheses than the bound).
    Inconsistent,
}

/// Upper bound on hypothesised deaths per report; keeps a hostile report cheap.
pub const MAX_INFERRED: usize = 64;

impl Tree {
    /// Reconciles `report` (a claimed ancestor list for this rank, root first) against this
    /// rank's view, hypothesising one death at a time: at the first position where my lineage
    /// and the report differ, my ancestor there must have died. Terminates after at most
    /// [`MAX_INFERRED`] hypotheses, including reports that name a root death.
    pub fn reconcile(&self, report: &[Rank]) -> Reconcile {
        let Some(view) = self.view() else {
            return Reconcile::Inconsistent;
        };
        for &r in report {
            if !self.layout().contains(r) || r == self.me() {
                return Reconcile::Inconsistent;
            }
        }
        if report.iter().any(|&r| self.dead().contains(r)) {
            return Reconcile::Stale;
        }
        if view.ancestors() == report {
            return Reconcile::Agreed;
        }
        let mut hyp_dead = self.dead().clone();
        let mut inferred = RankSet::new();
        let mut current = view.ancestors().to_vec();
        loop {
            if current.as_slice() == report {
                return Reconcile::Inferred(inferred);
            }
            let i = current
                .iter()
                .zip(report)
                .position(|(a, b)| a != b)
                .unwrap_or(current.len().min(report.len()));
            // Ancestor lists only shrink as deaths are added.
            let Some(&victim) = current.get(i) else {
                return Reconcile::Inconsistent;
            };
            if report.contains(&victim) || inferred.len() >= MAX_INFERRED {
                return Reconcile::Inconsistent;
            }
            hyp_dead.insert(victim);
            inferred.insert(victim);
            match View::compute(self.layout(), &hyp_dead, self.me()) {
                Ok(v) => current = v.ancestors().to_vec(),
                Err(_) => return Reconcile::Inconsistent,
            }
        }
    }
}
