use std::collections::VecDeque;

use proptest::prelude::*;

use super::*;
use crate::tree::{Layout, RankSet, Tree};

/// The reference: `j` is a neighbour of `i` iff their distance around the ring of `m` is a
/// power of two (every ring distance is at most `m/2`, so that is the whole rule).
fn naive_indices(i: u32, m: u32) -> Vec<u32> {
    (0..m)
        .filter(|&j| {
            let d = i.abs_diff(j);
            let ring = d.min(m - d);
            j != i && ring.is_power_of_two()
        })
        .collect()
}

/// Whether the BMG of `m` stays connected without the indices in `gone`.
fn connected_without(m: u32, gone: &[u32]) -> bool {
    let mut seen = vec![false; m as usize];
    for &g in gone {
        seen[g as usize] = true;
    }
    let Some(start) = (0..m).find(|&i| !seen[i as usize]) else {
        return true;
    };
    seen[start as usize] = true;
    let mut reached = 1;
    let mut q = VecDeque::from([start]);
    while let Some(i) = q.pop_front() {
        for j in neighbour_indices(i, m) {
            if !seen[j as usize] {
                seen[j as usize] = true;
                reached += 1;
                q.push_back(j);
            }
        }
    }
    reached + gone.len() == m as usize
}

proptest! {
    #[test]
    fn indices_match_the_reference(m in 0u32..600, i in 0u32..600) {
        let got: Vec<u32> = neighbour_indices(i, m).into_vec();
        let want = if i < m { naive_indices(i, m) } else { Vec::new() };
        prop_assert_eq!(got, want);
    }

    #[test]
    fn indices_are_symmetric(m in 2u32..2000, i in 0u32..2000) {
        let i = i % m;
        for j in neighbour_indices(i, m) {
            prop_assert!(neighbour_indices(j, m).contains(&i));
        }
    }

    /// The ranks a node computes from its tree are the reference's: live ranks in order,
    /// compacted, neighbour indices mapped back to ranks.
    #[test]
    fn ranks_match_the_reference(span in 1u32..400, dead in prop::collection::vec(0u32..400, 0..80),
                                 me in 0u32..400) {
        let me = Rank(me % span);
        let dead: RankSet = dead.into_iter().filter(|&d| d < span && d != me.0).map(Rank).collect();
        let tree = Tree::with_dead(Layout::new(span, 4).unwrap(), dead.clone(), me).unwrap();
        let live: Vec<Rank> = (0..span).map(Rank).filter(|r| !dead.contains(*r)).collect();
        let i = live.iter().position(|&r| r == me).unwrap() as u32;
        prop_assert_eq!(place(&tree), Some((i, live.len() as u32)));
        let want: Vec<Rank> = naive_indices(i, live.len() as u32)
            .into_iter()
            .map(|j| live[j as usize])
            .collect();
        prop_assert_eq!(neighbours(&tree).into_vec(), want);
    }

    /// Forwarding ahead of a repair: the neighbours with `gone` dead too are those the tree
    /// gives once they are (ranks outside the span and already dead ignored; none for a rank
    /// in `gone`).
    #[test]
    fn neighbours_without_match_the_repaired_tree(span in 1u32..300,
                                                  dead in prop::collection::vec(0u32..300, 0..40),
                                                  gone in prop::collection::vec(0u32..320, 0..8),
                                                  me in 0u32..300) {
        let me = Rank(me % span);
        let dead: RankSet = dead.into_iter().filter(|&d| d < span && d != me.0).map(Rank).collect();
        let gone: Vec<Rank> = gone.into_iter().map(Rank).collect();
        let tree = Tree::with_dead(Layout::new(span, 4).unwrap(), dead.clone(), me).unwrap();
        let got = neighbours_without(&tree, &gone).into_vec();
        if gone.contains(&me) {
            prop_assert!(got.is_empty());
        } else {
            let mut after = dead.clone();
            after.extend(gone.iter().copied().filter(|r| r.0 < span));
            let repaired = Tree::with_dead(Layout::new(span, 4).unwrap(), after, me).unwrap();
            prop_assert_eq!(got, neighbours(&repaired).into_vec());
        }
    }

    /// Connectivity equals the degree: any `degree − 1` members gone leave the rest connected.
    #[test]
    fn survives_degree_minus_one_failures(m in 3u32..300, picks in prop::collection::vec(any::<u32>(), 64)) {
        let k = (degree(m) - 1) as usize;
        let mut gone: Vec<u32> = Vec::new();
        for p in picks {
            if gone.len() == k.min(m as usize - 1) {
                break;
            }
            let g = p % m;
            if !gone.contains(&g) {
                gone.push(g);
            }
        }
        prop_assert!(connected_without(m, &gone), "m {} split by {:?}", m, gone);
    }
}

#[test]
fn degree_and_diameter_16_to_4096() {
    // (m, degree, diameter); 1,024 and 4,096 are the design note's table.
    let mut rows = Vec::new();
    let mut m = 16;
    while m <= 4096 {
        for size in [m - 1, m, m + 1] {
            let (deg, diam) = (degree(size), diameter(size));
            let log = 32 - (size - 1).leading_zeros(); // ceil(log2 size)
            assert!(deg <= 2 * log, "m {size}: degree {deg}");
            assert!(deg >= 2 * log - 3, "m {size}: degree {deg}");
            assert!(diam <= log / 2 + 1, "m {size}: diameter {diam}");
            for i in [1, size / 3, size - 1] {
                assert_eq!(
                    neighbour_indices(i, size).len() as u32,
                    deg,
                    "not regular at {size}"
                );
            }
            rows.push((size, deg, diam));
        }
        m *= 2;
    }
    eprintln!("m, degree, diameter: {rows:?}");
    assert!(rows.contains(&(1024, 19, 5)));
    assert!(rows.contains(&(4096, 23, 6)));
    assert!(rows.contains(&(16, 7, 2)));
}

#[test]
fn tiny_overlays() {
    assert_eq!(
        (diameter(0), diameter(1), diameter(2), diameter(3)),
        (0, 0, 1, 1)
    );
    assert!(neighbour_indices(0, 1).is_empty());
    assert_eq!(neighbour_indices(0, 2).into_vec(), vec![1]);
    assert_eq!(neighbour_indices(1, 3).into_vec(), vec![0, 2]);
    assert_eq!(degree(4), 3);
}
