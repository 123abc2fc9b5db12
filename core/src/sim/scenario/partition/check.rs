//! The quorum-view invariant checker (membership.md §5), run after every simulator step by the
//! partition scenario and the quorum views' own simulator tests (one copy):
//!
//! - S1: one view per epoch: every rank that applied epoch e holds the same removed set;
//! - S2: epochs never decrease at any rank;
//! - S3: when an epoch first appears, members holding more than half of the previous view's
//!   weight accepted it at one ballot (the acceptors' last accepted values, and the ranks that
//!   applied it, at that step);
//! - a minority side decides nothing: while a partition stands, no rank on a side without a
//!   weighted majority applies an epoch past the one it had at the cut
//!   ([`Checker::minority`], set by the scenario at each cut and cleared at each heal).

use std::collections::{BTreeMap, BTreeSet};

use crate::event::Event;
use crate::membership::quorum::{candidates, Ballot, Weights};
use crate::membership::MembershipEvent;
use crate::sim::{Observer, World};
use crate::time::Instant;
use crate::tree::{Rank, RankSet};

/// The invariant checker, and the membership events it saw.
#[derive(Default)]
pub(crate) struct Checker {
    /// Epoch → removed set, as first applied anywhere.
    pub(crate) views: BTreeMap<u64, Vec<Rank>>,
    /// Each rank's last epoch.
    pub(crate) last: BTreeMap<Rank, u64>,
    /// The side without a weighted majority while a partition stands, with each of its ranks'
    /// epoch at the cut.
    pub(crate) minority: Option<BTreeMap<Rank, u64>>,
    pub(crate) evicted: BTreeMap<Rank, Instant>,
    /// Epochs checked for S3, and the accepting weight found.
    pub(crate) backed: BTreeMap<u64, (u64, u64)>,
    /// Every value each acceptor has accepted: (epoch, ballot, removed) → acceptors.
    pub(crate) accepts: BTreeMap<(u64, Ballot, Vec<Rank>), BTreeSet<Rank>>,
}

impl Observer for Checker {
    fn on_event(&mut self, w: &World, rank: Rank, e: &Event) {
        if let Event::Membership(MembershipEvent::Evicted { .. }) = e {
            self.evicted.entry(rank).or_insert(w.now());
        }
    }

    fn check(&mut self, w: &World) -> Result<(), String> {
        for r in w.live_ranks() {
            if let Some(a) = w.node(r).and_then(|n| n.quorum_accepted()) {
                self.accepts
                    .entry((a.epoch, a.ballot, a.removed))
                    .or_default()
                    .insert(r);
            }
        }
        for r in w.live_ranks() {
            let Some(n) = w.node(r) else { continue };
            let v = n.view();
            let last = self.last.entry(r).or_insert(v.epoch);
            if v.epoch < *last {
                return Err(format!("S2: {r} went from epoch {last} to {}", v.epoch));
            }
            *last = v.epoch;
            if v.epoch == 0 {
                continue;
            }
            match self.views.get(&v.epoch) {
                Some(seen) if *seen != v.removed => {
                    return Err(format!(
                        "S1: epoch {} is {:?} at {r}, {seen:?} elsewhere",
                        v.epoch, v.removed
                    ))
                }
                Some(_) => {}
                None => {
                    self.s3(w, v.epoch, &v.removed)
                        .map_err(|e| format!("{e} (first applied at {r})"))?;
                    self.views.insert(v.epoch, v.removed.clone());
                }
            }
            if let Some(m) = &self.minority {
                if let Some(&at_cut) = m.get(&r) {
                    if v.epoch > at_cut {
                        return Err(format!(
                            "minority rank {r} applied epoch {} (had {at_cut} at the cut)",
                            v.epoch
                        ));
                    }
                }
            }
        }
        Ok(())
    }
}

impl Checker {
    /// S3 for epoch `e` (removed set `removed`), first seen at this step. An epoch before it
    /// that no rank was ever seen holding (every rank that applied it applied the next one in
    /// the same step, catching up) is reconstructed from the acceptors: the value accepted for
    /// it at one ballot by a quorum of its previous view (two such values would break S1).
    fn s3(&mut self, w: &World, e: u64, removed: &[Rank]) -> Result<(), String> {
        let seen = self.views.keys().next_back().copied().unwrap_or(0);
        for k in seen + 1..e {
            let prev = self.views.get(&(k - 1)).cloned().unwrap_or_default();
            let weights = Self::weights(w, &prev);
            let mut chosen: BTreeMap<Vec<Rank>, u64> = BTreeMap::new();
            for (value, wt) in self.backing(k, &weights) {
                if weights.is_quorum(wt) {
                    chosen.insert(value, wt);
                }
            }
            let mut values = chosen.keys();
            let (Some(delta), None) = (values.next(), values.next()) else {
                return Err(format!(
                    "S3: epoch {e} appeared before epoch {k}, for which {} values hold a quorum",
                    chosen.len()
                ));
            };
            let mut view = prev.clone();
            view.extend(delta.iter().copied());
            view.sort_unstable();
            view.dedup();
            self.backed.insert(k, (chosen[delta], weights.total()));
            self.views.insert(k, view);
        }
        let prev: Vec<Rank> = match e.checked_sub(1).and_then(|p| self.views.get(&p)) {
            Some(v) => v.clone(),
            None if e == 1 => Vec::new(),
            None => return Err(format!("S3: epoch {e} appeared before epoch {}", e - 1)),
        };
        let prev_set: RankSet = prev.iter().copied().collect();
        if let Some(r) = prev.iter().find(|r| !removed.contains(r)) {
            return Err(format!(
                "S3: epoch {e} ({removed:?}) brings back {r}, removed at epoch {}",
                e - 1
            ));
        }
        let weights = Self::weights(w, &prev);
        let delta: Vec<Rank> = removed
            .iter()
            .copied()
            .filter(|r| !prev_set.contains(*r))
            .collect();
        let best = self
            .backing(e, &weights)
            .into_iter()
            .filter(|(v, _)| *v == delta)
            .map(|(_, wt)| wt)
            .max()
            .unwrap_or(0);
        self.backed.insert(e, (best, weights.total()));
        if !weights.is_quorum(best) {
            return Err(format!(
                "S3: epoch {e} ({delta:?}) accepted by weight {best} of {}",
                weights.total()
            ));
        }
        Ok(())
    }

    /// The weights of the view that removed `prev`.
    fn weights(w: &World, prev: &[Rank]) -> Weights {
        let prev_set: RankSet = prev.iter().copied().collect();
        let span = w.span();
        let radix = w
            .live_ranks()
            .find_map(|r| w.node(r))
            .map_or(2, |n| n.tree().layout().radix());
        let root = crate::tree::Layout::new(span, radix)
            .ok()
            .and_then(|l| candidates(&l, &prev_set, 1).first().copied())
            .unwrap_or(Rank(0));
        Weights {
            root,
            members: u64::from(span) - prev.len() as u64,
        }
    }

    /// Every value ever accepted for epoch `e`, with the best weight that accepted it at one
    /// ballot.
    fn backing(&self, e: u64, weights: &Weights) -> Vec<(Vec<Rank>, u64)> {
        let mut by: BTreeMap<(&Vec<Rank>, Ballot), u64> = BTreeMap::new();
        for ((epoch, ballot, value), who) in &self.accepts {
            if *epoch == e {
                let wt: u64 = who.iter().map(|&r| weights.of(r)).sum();
                *by.entry((value, *ballot)).or_default() += wt;
            }
        }
        let mut best: BTreeMap<Vec<Rank>, u64> = BTreeMap::new();
        for ((value, _), wt) in by {
            let b = best.entry(value.clone()).or_default();
            *b = (*b).max(wt);
        }
        best.into_iter().collect()
    }
}
