//! The binomial-graph (BMG) overlay the revoke notice floods on.
//!
//! Built from one rank's current view: the live members of the span in rank order, compacted
//! (rank `r` is index `i(r) = r − #dead below r` of `m`), and index `i`'s neighbours are
//! `(i ± 2^j) mod m` for every `2^j ≤ m/2` (the rule of ULFM's reliable broadcast in Open MPI).
//! Because the indices are those of live ranks only, the ±1 neighbours skip every rank known dead by construction (ULFM's
//! ring repair). Degree is `2⌈log2 m⌉ − 1` or so (19 at 1,024, 23 at 4,096, 39 at 2^20),
//! diameter about `log2 m / 2` (5 at 1,024), and the graph's connectivity equals its degree:
//! fewer than `degree` failures not yet known cannot split it.
//!
//! Every rank computes the overlay from its own dead set: ranks whose views differ (a death
//! known here and not there yet) hold slightly different graphs. That is harmless for a flood
//! that forwards on first receipt: every edge either rank uses is between live ranks or lost
//! with a dead one, which the connectivity bound covers.

use smallvec::SmallVec;

use crate::tree::{Rank, RankSet, Tree};

/// Inline room for a rank's neighbours: the degree stays under 64 up to 2^32 members.
pub(crate) type Neighbours = SmallVec<[Rank; 48]>;

/// The neighbour indices of index `i` in a BMG of `m` members, ascending, without repeats and
/// without `i` itself: `(i ± 2^j) mod m` for every `2^j ≤ m/2`. Empty for `m ≤ 1` or `i ≥ m`.
pub fn neighbour_indices(i: u32, m: u32) -> SmallVec<[u32; 64]> {
    let mut out = SmallVec::new();
    if m <= 1 || i >= m {
        return out;
    }
    let (i, m64) = (u64::from(i), u64::from(m));
    let mut d = 1u64;
    while d <= m64 / 2 {
        out.push(((i + d) % m64) as u32);
        out.push(((i + m64 - d) % m64) as u32);
        d <<= 1;
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// The number of neighbours every index has in a BMG of `m` members (it is vertex-transitive).
pub fn degree(m: u32) -> u32 {
    neighbour_indices(0, m).len() as u32
}

/// The BMG's diameter for `m` members, in hops (a breadth-first search from index 0: the graph
/// is circulant, so every index has the same eccentricity). O(m × degree); 0 for `m ≤ 1`.
pub fn diameter(m: u32) -> u32 {
    if m <= 1 {
        return 0;
    }
    let mut dist = vec![u32::MAX; m as usize];
    dist[0] = 0;
    let mut q = std::collections::VecDeque::from([0u32]);
    let mut far = 0;
    while let Some(i) = q.pop_front() {
        let d = dist[i as usize] + 1;
        for j in neighbour_indices(i, m) {
            if dist[j as usize] == u32::MAX {
                dist[j as usize] = d;
                far = d;
                q.push_back(j);
            }
        }
    }
    far
}

/// This rank's place in the overlay of its current view: `(index, m)`. `None` when this rank
/// holds no view (it is dead).
pub(crate) fn place(tree: &Tree) -> Option<(u32, u32)> {
    tree.view()?;
    Some(place_in(tree.layout().span(), tree.dead(), tree.me()))
}

/// `me`'s place in the overlay of the members of a span of `span` ranks without `dead`.
fn place_in(span: u32, dead: &RankSet, me: Rank) -> (u32, u32) {
    (me.0 - dead.count_below(me), span - dead.len() as u32)
}

/// This rank's overlay neighbours in its current view, in rank order (empty when dead or
/// alone). One pass over the dead set's words.
pub(crate) fn neighbours(tree: &Tree) -> Neighbours {
    let mut out = Neighbours::new();
    if let Some((i, m)) = place(tree) {
        tree.dead()
            .select_absent(&neighbour_indices(i, m), &mut out);
    }
    out
}

/// This rank's overlay neighbours in the view its current one becomes once `gone` are dead
/// too (ranks outside the span or already dead in `gone` are ignored): what a rank that
/// learns removals forwards them on before it repairs, so the notice goes to the same
/// neighbours as after the repair and never to a rank it removes. Empty when this rank is
/// dead, alone, or in `gone` itself. Copies the dead set only when `gone` adds to it.
pub(crate) fn neighbours_without(tree: &Tree, gone: &[Rank]) -> Neighbours {
    let fresh = |r: &Rank| tree.layout().contains(*r) && tree.is_alive(*r);
    if !gone.iter().any(fresh) {
        return neighbours(tree);
    }
    let mut out = Neighbours::new();
    let me = tree.me();
    if tree.view().is_none() || gone.contains(&me) {
        return out;
    }
    let mut dead = tree.dead().clone();
    for &r in gone.iter().filter(|r| fresh(r)) {
        dead.insert(r);
    }
    let (i, m) = place_in(tree.layout().span(), &dead, me);
    dead.select_absent(&neighbour_indices(i, m), &mut out);
    out
}

#[cfg(test)]
mod tests;
