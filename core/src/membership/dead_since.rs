//! When ranks were recently learned dead here: one entry per membership change, pruned past a
//! horizon (`Membership::dead_since_horizon`).
//!
//! It used to be a map from each rank to its time, about 27 bytes per removed rank at every
//! member until the next change pruned it: after a 4,096-target shrink campaign, some 110 KB at
//! each of the survivors (measured with `scale shrink`, `docs/shrink-bench.md`). A change keeps
//! its ranks only when they are few ([`EXACT`]); a larger one (a campaign's whole branch, a mass
//! failure) keeps its time alone.

use crate::time::{Duration, Instant};
use crate::tree::Rank;

/// The most ranks one change keeps by name.
const EXACT: usize = 64;

/// Recent changes' deaths, oldest first.
#[derive(Debug, Default)]
pub(super) struct DeadSince(Vec<Batch>);

/// The ranks one change marked dead, and when.
#[derive(Debug)]
struct Batch {
    at: Instant,
    /// `None`: more than [`EXACT`] ranks, not kept by name.
    ranks: Option<Box<[Rank]>>,
}

impl DeadSince {
    /// Forgets changes at least `horizon` old.
    pub(super) fn prune(&mut self, now: Instant, horizon: Duration) {
        self.0.retain(|b| now.saturating_since(b.at) < horizon);
    }

    /// The ranks one change marked dead (each rank once: a dead rank stays dead).
    pub(super) fn record(&mut self, now: Instant, fresh: &[Rank]) {
        if fresh.is_empty() {
            return;
        }
        let ranks = (fresh.len() <= EXACT).then(|| fresh.into());
        self.0.push(Batch { at: now, ranks });
    }

    /// When `r` was learned dead, if within the horizon. A rank of a change kept by time alone
    /// reads as learned at the newest such change: never earlier than the truth, so a wait
    /// measured from it (the root's grace before re-flooding a removal) can only be longer,
    /// by at most the horizon. `None`: longer ago than the horizon (or never).
    pub(super) fn learned(&self, r: Rank) -> Option<Instant> {
        let exact = self
            .0
            .iter()
            .find(|b| b.ranks.as_ref().is_some_and(|v| v.contains(&r)))
            .map(|b| b.at);
        exact.or_else(|| {
            self.0
                .iter()
                .rev()
                .find(|b| b.ranks.is_none())
                .map(|b| b.at)
        })
    }

    /// When the newest death within the horizon was learned.
    pub(super) fn newest(&self) -> Option<Instant> {
        self.0.last().map(|b| b.at)
    }

    /// Changes kept.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.0.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: u64) -> Instant {
        Instant::ZERO + Duration::from_millis(ms)
    }

    #[test]
    fn small_changes_by_name_large_ones_by_time_pruned_past_the_horizon() {
        let mut d = DeadSince::default();
        d.record(at(10), &[Rank(3), Rank(9)]);
        d.record(at(20), &[]);
        let big: Vec<Rank> = (100..100 + EXACT as u32 + 1).map(Rank).collect();
        d.record(at(30), &big);
        d.record(at(40), &[Rank(5)]);
        assert_eq!(d.len(), 3);
        assert_eq!(d.learned(Rank(9)), Some(at(10)));
        assert_eq!(d.learned(Rank(5)), Some(at(40)));
        // In the large change, or unknown: the newest large change (never earlier).
        assert_eq!(d.learned(Rank(150)), Some(at(30)));
        assert_eq!(d.newest(), Some(at(40)));
        d.prune(at(41), Duration::from_millis(10));
        assert_eq!(d.len(), 1);
        assert_eq!(d.learned(Rank(150)), None);
        assert_eq!(d.learned(Rank(9)), None);
        assert_eq!(d.learned(Rank(5)), Some(at(40)));
        d.prune(at(50), Duration::from_millis(10));
        assert_eq!((d.len(), d.newest()), (0, None));
    }
}
