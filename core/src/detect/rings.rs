//! Observer rings: who watches whom.
//!
//! Ring `k` orders the live ranks by a hash of `(ring_seed, k, rank)`; a rank's observers are
//! its predecessors on the K rings, its subjects its successors. The hash decorrelates
//! observers from rank numbering (and so from racks and hosts numbered in order), and every
//! rank computes the same rings from the same live set, with no communication.

use std::collections::BTreeSet;

use crate::tree::{Rank, Tree};

/// SplitMix64's finaliser: a fixed, well-mixed 64-bit hash.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn key(seed: u64, ring: u32, r: Rank) -> (u64, u32) {
    let h = mix(seed ^ mix(u64::from(ring) << 32 | u64::from(r.0)));
    (h, r.0)
}

/// This rank's observers and subjects on `k` rings over the tree's live ranks.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Rings {
    /// Ranks that watch this one (it heartbeats them).
    pub(crate) observers: BTreeSet<Rank>,
    /// Ranks this one watches.
    pub(crate) subjects: BTreeSet<Rank>,
}

impl Rings {
    /// The rings for `tree.me()` over the live ranks of `tree`. O(k · live ranks).
    pub(crate) fn compute(tree: &Tree, seed: u64, k: u32) -> Self {
        Self::compute_for(tree, tree.me(), seed, k)
    }

    /// The rings for any live rank `me` (a coordinator computes a subject's expected observers).
    pub(crate) fn compute_for(tree: &Tree, me: Rank, seed: u64, k: u32) -> Self {
        let live: Vec<Rank> = (0..tree.layout().span())
            .map(Rank)
            .filter(|&r| tree.is_alive(r))
            .collect();
        let mut rings = Self::default();
        if live.len() < 2 || !tree.is_alive(me) {
            return rings;
        }
        for ring in 0..k {
            let mine = key(seed, ring, me);
            // Successor: the smallest key above mine (wrapping to the smallest overall);
            // predecessor: the largest key below mine (wrapping to the largest overall).
            let (mut succ, mut min, mut pred, mut max) = (None, None, None, None);
            for &r in live.iter().filter(|&&r| r != me) {
                let kr = key(seed, ring, r);
                let better = |best: Option<((u64, u32), Rank)>, want_less: bool| match best {
                    None => true,
                    Some((b, _)) => (kr < b) == want_less,
                };
                if kr > mine && better(succ, true) {
                    succ = Some((kr, r));
                }
                if kr < mine && better(pred, false) {
                    pred = Some((kr, r));
                }
                if better(min, true) {
                    min = Some((kr, r));
                }
                if better(max, false) {
                    max = Some((kr, r));
                }
            }
            if let Some((_, s)) = succ.or(min) {
                rings.subjects.insert(s);
            }
            if let Some((_, o)) = pred.or(max) {
                rings.observers.insert(o);
            }
        }
        rings
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tree::{Layout, RankSet};

    fn tree(span: u32, me: u32, dead: &[u32]) -> Tree {
        let dead: RankSet = dead.iter().map(|&r| Rank(r)).collect();
        Tree::with_dead(Layout::new(span, 4).unwrap(), dead, Rank(me)).unwrap()
    }

    #[test]
    fn observers_and_subjects_are_mutual_and_bounded() {
        let span = 64;
        let all: Vec<Rings> = (0..span)
            .map(|me| Rings::compute(&tree(span, me, &[]), 7, 8))
            .collect();
        for (me, r) in all.iter().enumerate() {
            let me = Rank(me as u32);
            assert!(!r.observers.is_empty() && r.observers.len() <= 8);
            assert!(!r.observers.contains(&me) && !r.subjects.contains(&me));
            // Every observer of me has me as a subject, and the reverse.
            for o in &r.observers {
                assert!(all[o.0 as usize].subjects.contains(&me), "{o} watches {me}");
            }
            for s in &r.subjects {
                assert!(all[s.0 as usize].observers.contains(&me));
            }
        }
        // Decorrelated from numbering: rank 10's observers are not just its neighbours.
        assert!(all[10].observers.iter().any(|o| o.0.abs_diff(10) > 2));
    }

    #[test]
    fn small_and_degenerate_views() {
        let r = Rings::compute(&tree(3, 0, &[]), 1, 8);
        assert_eq!(r.observers.len(), 2, "only two others exist");
        assert!(Rings::compute(&tree(2, 0, &[1]), 1, 8).observers.is_empty());
        // The dead are never observers or subjects.
        let r = Rings::compute(&tree(16, 0, &[5, 6]), 1, 8);
        assert!(!r.observers.contains(&Rank(5)) && !r.subjects.contains(&Rank(6)));
    }
}
