//! Observer rings: who watches whom.
//!
//! Ring `k` orders the live ranks by a hash of `(ring_seed, k, rank)`; a rank's observers are
//! its predecessors on the K rings, its subjects its successors. The hash decorrelates
//! observers from rank numbering (and so from racks and hosts numbered in order), and every
//! rank computes the same rings from the same live set, with no communication.
//!
//! Computing one rank's rings costs O(K · live ranks) hashes, and every rank needs its own
//! after every change of the live set. [`LiveRings`] keeps them across changes: a change that
//! only removes ranks recomputes just the rings on which this rank's predecessor or successor
//! was removed (removing any other rank moves neither neighbour), so at thousands of ranks a
//! death costs its own 2K neighbours a recomputation and everyone else nothing. Ranks added
//! (joiners admitted, a wider span) are compared with the two neighbours on each ring, O(K)
//! hashes per added rank instead of O(K · live ranks) per view change: forming 65,536 ranks
//! from joins no longer costs every rank a full recomputation per admitting view.

use std::collections::BTreeSet;

use crate::tree::{Rank, RankSet, Tree};

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

/// The live ranks of `tree`, ascending.
fn live(tree: &Tree) -> Vec<Rank> {
    (0..tree.layout().span())
        .map(Rank)
        .filter(|&r| tree.is_alive(r))
        .collect()
}

/// A key as one 96-bit number in a u128: distances wrap modulo 2^128, which orders them as
/// modulo 2^96 would (no two keys are 2^96 or more apart).
fn wide((h, r): (u64, u32)) -> u128 {
    u128::from(h) << 32 | u128::from(r)
}

/// `me`'s (predecessor, successor) on ring `ring` among `live` (`me` need not be in it);
/// `None` when nobody else is live.
///
/// Keys are distinct (the rank is part of the key). The successor is the smallest key above
/// mine, wrapping to the smallest overall; the predecessor the largest key below mine,
/// wrapping to the largest overall. Both at once: a key's distance above mine, modulo the key
/// space, orders those above mine first, then those below, each by key; the successor is the
/// nearest and the predecessor the farthest.
fn neighbours(live: &[Rank], me: Rank, seed: u64, ring: u32) -> Option<(Rank, Rank)> {
    let mine = wide(key(seed, ring, me));
    let (mut near, mut far) = (u128::MAX, 0u128);
    for &r in live {
        if r == me {
            continue;
        }
        let d = wide(key(seed, ring, r)).wrapping_sub(mine);
        near = near.min(d);
        far = far.max(d);
    }
    // The rank is the low 32 bits of the key, and adding mine back gives the key.
    let rank = |d: u128| Rank(d.wrapping_add(mine) as u32);
    (far != 0).then(|| (rank(far), rank(near)))
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
    #[cfg(test)]
    pub(crate) fn compute(tree: &Tree, seed: u64, k: u32) -> Self {
        Self::compute_for(tree, tree.me(), seed, k)
    }

    /// The rings for any live rank `me` (a coordinator computes a subject's expected observers).
    /// O(k · live ranks); empty when `me` is dead or alone.
    pub(crate) fn compute_for(tree: &Tree, me: Rank, seed: u64, k: u32) -> Self {
        let live = live(tree);
        if live.len() < 2 || !tree.is_alive(me) {
            return Self::default();
        }
        Self::from_neighbours((0..k).filter_map(|ring| neighbours(&live, me, seed, ring)))
    }

    fn from_neighbours(n: impl IntoIterator<Item = (Rank, Rank)>) -> Self {
        let mut rings = Self::default();
        for (pred, succ) in n {
            rings.observers.insert(pred);
            rings.subjects.insert(succ);
        }
        rings
    }
}

/// What a [`LiveRings`] was computed for.
#[derive(Debug, Clone)]
struct Basis {
    /// The rank the rings are for (a node given a new rank recomputes everything).
    me: Rank,
    seed: u64,
    k: u32,
    span: u32,
    /// The tree's dead set then (within the span).
    dead: RankSet,
}

/// `tree.me()`'s rings, kept up to date across changes of the live set (the detector's own
/// rings; always equal to [`Rings::compute_for`] for the tree last given to [`Self::update`]).
///
/// When the live set only shrank, a ring on which this rank's predecessor and successor both
/// survived is unchanged: the predecessor was the largest key below mine (or the largest
/// overall) among a superset, so it still is, and likewise the successor. Only rings that lost
/// one of the two are recomputed. Ranks added (a larger span, a rank no longer dead) replace a
/// kept neighbour only where their key is nearer or farther; a smaller span, new parameters or
/// another `me` recompute every ring.
#[derive(Debug, Default, Clone)]
pub(crate) struct LiveRings {
    rings: Rings,
    /// Per ring, this rank's (predecessor, successor); empty when it has none (dead, or alone).
    per_ring: Vec<(Rank, Rank)>,
    /// `None` until the first update, and after [`Self::clear`].
    basis: Option<Basis>,
    /// Rings recomputed so far (each costs O(live ranks) hashes).
    pub(crate) rings_computed: u64,
}

impl LiveRings {
    /// The current rings.
    pub(crate) fn get(&self) -> &Rings {
        &self.rings
    }

    /// No rings (this rank is dead); the next update recomputes everything.
    pub(crate) fn clear(&mut self) {
        self.rings = Rings::default();
        self.per_ring.clear();
        self.basis = None;
    }

    /// Brings the rings up to date with `tree`'s live set: `Rings::compute(tree, seed, k)`.
    pub(crate) fn update(&mut self, tree: &Tree, seed: u64, k: u32) {
        let me = tree.me();
        let span = tree.layout().span();
        let prev = self.basis.replace(Basis {
            me,
            seed,
            k,
            span,
            dead: tree.dead().clone(),
        });
        if !tree.is_alive(me) {
            self.rings = Rings::default();
            self.per_ring.clear();
            return;
        }
        let kept = prev.filter(|b| {
            b.me == me
                && b.seed == seed
                && b.k == k
                && b.span <= span
                && self.per_ring.len() == k as usize
        });
        let Some(before) = kept else {
            let live = live(tree);
            self.per_ring.clear();
            if live.len() >= 2 {
                for ring in 0..k {
                    self.rings_computed += 1;
                    if let Some(n) = neighbours(&live, me, seed, ring) {
                        self.per_ring.push(n);
                    }
                }
            }
            self.rings = Rings::from_neighbours(self.per_ring.iter().copied());
            return;
        };
        // Ranks live now that were not then: revived within the old span, or past it.
        let added: Vec<Rank> = before
            .dead
            .iter()
            .filter(|&r| r.0 < before.span && tree.is_alive(r))
            .chain((before.span..span).map(Rank).filter(|&r| tree.is_alive(r)))
            .collect();
        // Rings that lost this rank's predecessor or successor: recomputed over today's live
        // ranks (the added ones included).
        let stale: Vec<u32> = (0..k)
            .filter(|&ring| {
                let (pred, succ) = self.per_ring[ring as usize];
                !tree.is_alive(pred) || !tree.is_alive(succ)
            })
            .collect();
        if stale.is_empty() && added.is_empty() {
            return;
        }
        if !stale.is_empty() {
            let live = live(tree);
            for &ring in &stale {
                self.rings_computed += 1;
                match neighbours(&live, me, seed, ring) {
                    Some(n) => self.per_ring[ring as usize] = n,
                    None => {
                        // Nobody else is left: no ring has neighbours.
                        self.rings = Rings::default();
                        self.per_ring.clear();
                        return;
                    }
                }
            }
        }
        // The other rings kept both neighbours, the extremes among the survivors (a subset of
        // the ranks they were computed over); an added rank replaces one only where it is
        // nearer (successor) or farther (predecessor): O(added) per ring, not O(live ranks).
        if !added.is_empty() {
            for ring in (0..k).filter(|r| stale.binary_search(r).is_err()) {
                let (pred, succ) = &mut self.per_ring[ring as usize];
                let mine = wide(key(seed, ring, me));
                let dist = |r: Rank| wide(key(seed, ring, r)).wrapping_sub(mine);
                let (mut near, mut far) = (dist(*succ), dist(*pred));
                for &r in added.iter().filter(|&&r| r != me) {
                    let d = dist(r);
                    if d < near {
                        (near, *succ) = (d, r);
                    }
                    if d > far {
                        (far, *pred) = (d, r);
                    }
                }
            }
        }
        self.rings = Rings::from_neighbours(self.per_ring.iter().copied());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Rng;
    use crate::tree::Layout;
    use proptest::prelude::*;

    fn tree(span: u32, me: u32, dead: &[u32]) -> Tree {
        let dead: RankSet = dead.iter().map(|&r| Rank(r)).collect();
        Tree::with_dead(Layout::new(span, 4).unwrap(), dead, Rank(me)).unwrap()
    }

    /// The definition, independently: sort the live ranks by key on each ring and take the
    /// neighbours on either side of `me` (wrapping).
    fn by_sorting(tree: &Tree, me: Rank, seed: u64, k: u32) -> Rings {
        let live = live(tree);
        let mut rings = Rings::default();
        if live.len() < 2 || !tree.is_alive(me) {
            return rings;
        }
        for ring in 0..k {
            let mut order: Vec<(u64, u32)> = live.iter().map(|&r| key(seed, ring, r)).collect();
            order.sort_unstable();
            let at = order.iter().position(|kr| kr.1 == me.0).unwrap();
            let n = order.len();
            rings.observers.insert(Rank(order[(at + n - 1) % n].1));
            rings.subjects.insert(Rank(order[(at + 1) % n].1));
        }
        rings
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

    /// A death that is none of my neighbours recomputes nothing; one of them, only its rings.
    #[test]
    fn a_far_death_recomputes_no_ring() {
        let (span, seed, k) = (512, 3, 8);
        let mut live = LiveRings::default();
        live.update(&tree(span, 0, &[]), seed, k);
        assert_eq!(live.rings_computed, 8);
        let mine: Vec<(Rank, Rank)> = live.per_ring.clone();
        let far = (1..span)
            .find(|&r| !mine.iter().any(|&(p, s)| p.0 == r || s.0 == r))
            .unwrap();
        let t = tree(span, 0, &[far]);
        live.update(&t, seed, k);
        assert_eq!(live.rings_computed, 8, "rank {far} is on no ring of mine");
        let (pred0, _) = mine[0];
        let t = tree(span, 0, &[far, pred0.0]);
        live.update(&t, seed, k);
        let hit = mine
            .iter()
            .filter(|&&(p, s)| p == pred0 || s == pred0)
            .count() as u64;
        assert_eq!(live.rings_computed, 8 + hit);
        assert_eq!(*live.get(), Rings::compute(&t, seed, k));
        // A rank back (a new tree without a death) recomputes no ring: it is compared with
        // the neighbours kept.
        live.update(&tree(span, 0, &[far]), seed, k);
        assert_eq!(live.rings_computed, 8 + hit);
        assert_eq!(*live.get(), Rings::compute(&tree(span, 0, &[far]), seed, k));
        // Joiners past the span, one of them a neighbour of mine on some ring: no ring
        // recomputed either.
        let t = tree(span + 64, 0, &[far]);
        live.update(&t, seed, k);
        assert_eq!(live.rings_computed, 8 + hit);
        assert_eq!(*live.get(), Rings::compute(&t, seed, k));
        assert_ne!(*live.get(), Rings::compute(&tree(span, 0, &[far]), seed, k));
        // A smaller span recomputes every ring.
        live.update(&tree(span, 0, &[]), seed, k);
        assert_eq!(live.rings_computed, 16 + hit);
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

        /// `compute_for` is the definition.
        #[test]
        fn compute_for_matches_sorting(
            span in 1u32..200,
            me in 0u32..200,
            k in 0u32..10,
            seed in any::<u64>(),
            dead in proptest::collection::vec(0u32..200, 0..190),
        ) {
            let me = me % span;
            let dead: Vec<u32> = dead.into_iter().map(|r| r % span).collect();
            let t = tree(span, me, &dead);
            for r in [me, 0, span - 1] {
                prop_assert_eq!(
                    Rings::compute_for(&t, Rank(r), seed, k),
                    by_sorting(&t, Rank(r), seed, k)
                );
            }
        }

        /// Kept across random death sequences (with an occasional grow, revival, or a change
        /// of parameters), the rings always equal a full recomputation.
        #[test]
        fn incremental_equals_full_recompute(
            span in 2u32..300,
            me in 0u32..300,
            k in 1u32..10,
            seed in any::<u64>(),
            script in any::<u64>(),
        ) {
            let mut me = Rank(me % span);
            let mut rng = Rng::new(script);
            let mut span = span;
            let mut dead = RankSet::new();
            let mut seed = seed;
            let mut kept = LiveRings::default();
            let mut partial = 0;
            for step in 0..60 {
                match rng.below(20) {
                    // A new span (joiners).
                    0 => span += 1 + rng.below(8) as u32,
                    // Joiners and a death in one change.
                    3 => {
                        span += 1 + rng.below(8) as u32;
                        if let Some(&(p, _)) = kept.per_ring.first() {
                            if p != me {
                                dead.insert(p);
                            }
                        }
                    }
                    // A dead rank back and another rank dead in one change.
                    4 => {
                        if let Some(r) = dead.iter().find(|&r| r != me) {
                            dead.remove(r);
                        }
                        let r = Rank(rng.below(u64::from(span)) as u32);
                        if r != me {
                            dead.insert(r);
                        }
                    }
                    // A dead rank back (a tree rebuilt from an older snapshot).
                    1 => {
                        if let Some(r) = dead.iter().nth(rng.below(dead.len() as u64 + 1) as usize) {
                            dead.remove(r);
                        }
                    }
                    2 => seed ^= 1,
                    // A smaller span (a view rolled back to fewer ranks): a full recompute.
                    5 if span > me.0 + 2 => {
                        span -= 1 + rng.below(u64::from(span - me.0 - 2).min(8)) as u32;
                        dead = dead.iter().filter(|r| r.0 < span).collect();
                    }
                    // This node is given another rank (a rejoin): a full recompute.
                    6 => me = Rank(rng.below(u64::from(span)) as u32),
                    // Deaths, sometimes several at once, sometimes this rank's neighbours.
                    _ => {
                        for _ in 0..=rng.below(3) {
                            let r = if rng.below(2) == 0 && !kept.per_ring.is_empty() {
                                let (p, s) = kept.per_ring[rng.below(kept.per_ring.len() as u64) as usize];
                                if rng.below(2) == 0 { p } else { s }
                            } else {
                                Rank(rng.below(u64::from(span)) as u32)
                            };
                            // This rank dies rarely: that ends the interesting part.
                            if r != me || rng.below(8) == 0 {
                                dead.insert(r);
                            }
                        }
                    }
                }
                let t = Tree::with_dead(Layout::new(span, 4).unwrap(), dead.clone(), me).unwrap();
                let before = kept.rings_computed;
                kept.update(&t, seed, k);
                let spent = kept.rings_computed - before;
                if spent < u64::from(k) {
                    partial += 1;
                }
                prop_assert_eq!(
                    kept.get(),
                    &Rings::compute_for(&t, me, seed, k),
                    "step {}: span {}, dead {}", step, span, dead
                );
            }
            // The incremental path was taken (not every update a full recomputation).
            prop_assert!(partial > 0);
        }
    }
}
