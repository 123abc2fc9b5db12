//! Unit and property tests of `RankSet` (both representations) against a `BTreeSet` model.

use super::*;

fn set(v: &[u32]) -> RankSet {
    v.iter().map(|&r| Rank(r)).collect()
}

#[test]
fn insert_remove_contains_len() {
    let mut s = RankSet::new();
    assert!(s.is_empty());
    assert!(s.insert(Rank(5)));
    assert!(!s.insert(Rank(5)));
    assert!(s.insert(Rank(200)));
    assert!(s.contains(Rank(5)) && s.contains(Rank(200)) && !s.contains(Rank(6)));
    assert!(!s.contains(Rank(100_000)));
    assert_eq!(s.len(), 2);
    assert!(s.remove(Rank(5)));
    assert!(!s.remove(Rank(5)));
    assert!(!s.remove(Rank(1 << 30)));
    assert_eq!(s.len(), 1);
    assert_eq!(s.max(), Some(Rank(200)));
}

#[test]
fn text_form_round_trip() {
    let s = set(&[2, 7, 8, 9, 63, 64, 65, 1000]);
    assert_eq!(s.to_string(), "2,7:9,63:65,1000");
    assert_eq!("2,7:9,63:65,1000".parse::<RankSet>().unwrap(), s);
    assert_eq!("".parse::<RankSet>().unwrap(), RankSet::new());
    assert_eq!(RankSet::new().to_string(), "");
    assert!(" 9:7 "
        .parse::<RankSet>()
        .unwrap_err()
        .to_string()
        .contains("descending"));
}

#[test]
fn text_form_rejects_malformed() {
    for bad in [
        "x",
        "1,,2",
        "1:",
        ":3",
        "-1",
        "1-3",
        "4294967296",
        "1:2:3",
        "+1",
    ] {
        assert!(bad.parse::<RankSet>().is_err(), "{bad:?} accepted");
    }
    assert_eq!(
        RankSet::parse_bounded("3,9", 9),
        Err(RankSetParseError::OutOfRange { rank: 9, span: 9 })
    );
    assert!(matches!(
        "5:3".parse::<RankSet>(),
        Err(RankSetParseError::DescendingRange(_))
    ));
}

#[test]
fn insert_range_counts_new_members() {
    let mut s = set(&[3, 70]);
    assert_eq!(s.insert_range(Rank(0), Rank(130)), 129);
    assert_eq!(s.len(), 131);
    assert_eq!(s.to_string(), "0:130");
    assert_eq!(s.insert_range(Rank(5), Rank(4)), 0);
}

#[test]
fn equality_ignores_history() {
    let mut a = set(&[5, 200]);
    a.remove(Rank(200));
    assert_eq!(a, set(&[5]));
    let mut b = set(&[1000]);
    b.clear();
    assert_eq!(b, RankSet::new());
    let h = |s: &RankSet| {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        s.hash(&mut h);
        h.finish()
    };
    assert_eq!(h(&a), h(&set(&[5])));
    assert_ne!(a, set(&[6]));
}

#[test]
fn union_and_subset() {
    let mut a = set(&[1, 2, 300]);
    let b = set(&[2, 3, 1000]);
    assert_eq!(a.union_with(&b), 2);
    assert_eq!(a.len(), 5);
    assert!(b.is_subset(&a));
    assert!(!a.is_subset(&b));
    assert!(RankSet::new().is_subset(&b));
}

mod model {
    //! `RankSet` against a `BTreeSet<u32>` reference model, over operation sequences that
    //! drive it through both representations (small dense clusters, long runs near 2^20,
    //! scattered ranks up to 2^22).

    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;
    use std::hash::{Hash, Hasher};

    #[derive(Clone, Debug)]
    enum Op {
        Insert(u32),
        InsertRange(u32, u32),
        Remove(u32),
        Clear,
        Union(Vec<(u32, u32)>),
        /// `n` ranks `lo, lo + step, ..` one by one (a subtree layer block of the strided tree).
        Strided(u32, u32, u32),
    }

    fn rank() -> impl Strategy<Value = u32> {
        prop_oneof![
            4 => 0u32..300,
            3 => 1_044_000u32..1_048_576,
            1 => 0u32..(1 << 22),
        ]
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            6 => rank().prop_map(Op::Insert),
            3 => (rank(), 0u32..300).prop_map(|(lo, n)| Op::InsertRange(lo, lo + n)),
            2 => rank().prop_map(Op::Remove),
            1 => Just(Op::Clear),
            2 => prop::collection::vec((rank(), 0u32..70), 0..12)
                .prop_map(|v| Op::Union(v.into_iter().map(|(lo, n)| (lo, lo + n)).collect())),
            3 => (rank(), prop_oneof![Just(2u32), Just(64), 1u32..70_000], 1u32..40)
                .prop_map(|(lo, step, n)| Op::Strided(lo, step, n)),
        ]
    }

    fn runs_of(m: &BTreeSet<u32>) -> Vec<(Rank, Rank)> {
        let mut out: Vec<(Rank, Rank)> = Vec::new();
        for &r in m {
            match out.last_mut() {
                Some((_, hi)) if hi.0 + 1 == r => hi.0 = r,
                _ => out.push((Rank(r), Rank(r))),
            }
        }
        out
    }

    fn hash(s: &RankSet) -> u64 {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        s.hash(&mut h);
        h.finish()
    }

    /// The `k`-th non-member of the model, for each `k` of `ks` (ascending).
    fn absent(m: &BTreeSet<u32>, ks: &[u32]) -> Vec<Rank> {
        let mut out = Vec::new();
        let (mut r, mut seen) = (0u32, 0u32);
        for &k in ks {
            loop {
                if !m.contains(&r) {
                    if seen == k {
                        out.push(Rank(r));
                        break;
                    }
                    seen += 1;
                }
                r += 1;
            }
        }
        out
    }

    fn check(s: &RankSet, m: &BTreeSet<u32>, probes: &[u32]) {
        assert_eq!(s.len(), m.len());
        assert_eq!(s.is_empty(), m.is_empty());
        assert!(s.iter().map(|r| r.0).eq(m.iter().copied()));
        assert_eq!(s.ranges().collect::<Vec<_>>(), runs_of(m));
        assert_eq!(s.max().map(|r| r.0), m.last().copied());
        for &p in probes.iter().chain(m.iter().take(64)) {
            for q in [p.saturating_sub(1), p, p.saturating_add(1)] {
                assert_eq!(s.contains(Rank(q)), m.contains(&q), "contains({q})");
                assert_eq!(
                    s.count_below(Rank(q)) as usize,
                    m.range(..q).count(),
                    "count_below({q})"
                );
            }
        }
        let mut ks: Vec<u32> = probes.iter().map(|p| p % 2_000).collect();
        ks.sort_unstable();
        let mut got = Vec::new();
        s.select_absent(&ks, &mut got);
        assert_eq!(got, absent(m, &ks));
        // The same members built another way (ascending inserts: a run list until it is
        // larger than the bitset) are equal, hash alike and print alike.
        let rebuilt: RankSet = m.iter().map(|&r| Rank(r)).collect();
        assert_eq!(*s, rebuilt);
        assert_eq!(hash(s), hash(&rebuilt));
        assert!(s.is_subset(&rebuilt) && rebuilt.is_subset(s));
        assert_eq!(s.to_string().parse::<RankSet>().unwrap(), *s);
        // Representation invariant: a progression list never takes more words than the
        // bitset, and its ranges are ascending and disjoint.
        if !s.dense {
            assert!(m.is_empty() || s.data.len() <= repr::words_for(*m.last().unwrap()));
            for w in s.data.windows(2) {
                assert!(repr::hi(w[0]) < repr::Ap::unpack(w[1]).lo, "{:?}", s.data);
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

        #[test]
        fn rank_set_matches_btreeset(
            ops in prop::collection::vec(op(), 1..80),
            probes in prop::collection::vec(rank(), 8),
        ) {
            let mut s = RankSet::new();
            let mut m = BTreeSet::new();
            for op in ops {
                match op {
                    Op::Insert(r) => {
                        prop_assert_eq!(s.insert(Rank(r)), m.insert(r));
                    }
                    Op::InsertRange(lo, hi) => {
                        let new = (lo..=hi).filter(|r| m.insert(*r)).count() as u32;
                        prop_assert_eq!(s.insert_range(Rank(lo), Rank(hi)), new);
                    }
                    Op::Remove(r) => {
                        prop_assert_eq!(s.remove(Rank(r)), m.remove(&r));
                    }
                    Op::Strided(lo, step, n) => {
                        for k in 0..n {
                            let r = lo.saturating_add(k.saturating_mul(step));
                            prop_assert_eq!(s.insert(Rank(r)), m.insert(r));
                        }
                    }
                    Op::Clear => {
                        s.clear();
                        m.clear();
                    }
                    Op::Union(ranges) => {
                        let mut other = RankSet::new();
                        let mut om = BTreeSet::new();
                        for (lo, hi) in ranges {
                            other.insert_range(Rank(lo), Rank(hi));
                            om.extend(lo..=hi);
                        }
                        let sub = other.is_subset(&s);
                        prop_assert_eq!(sub, om.is_subset(&m));
                        let new = om.difference(&m).count() as u32;
                        prop_assert_eq!(s.union_with(&other), new);
                        m.extend(om);
                    }
                }
                check(&s, &m, &probes);
            }
        }
    }

    /// The targets of `scale shrink --ranks 1048576 --radix 64 --branch 4096`: the 16 first
    /// child subtrees of rank 1, 4,096 ranks with no two consecutive (the tree is strided).
    fn strided_branch() -> Vec<u32> {
        let l = crate::tree::Layout::new(1 << 20, 64).unwrap();
        let roots: Vec<Rank> = (0..16).map(|j| l.child(Rank(1), j).unwrap()).collect();
        (0..1u32 << 20)
            .filter(|&r| roots.iter().any(|&t| l.in_subtree(t, Rank(r))))
            .collect()
    }

    #[test]
    fn a_shrink_near_two_to_the_twenty_costs_progressions_not_a_bitset() {
        let targets = strided_branch();
        assert_eq!(targets.len(), 4_096);
        assert!(
            targets.windows(2).all(|w| w[1] > w[0] + 1),
            "no two consecutive"
        );
        // Ascending (the campaign's one notice) and in a random order (the per-death path).
        let mut order = targets.clone();
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for i in (1..order.len()).rev() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            order.swap(i, (x % (i as u64 + 1)) as usize);
        }
        for seq in [&targets, &order] {
            // One by one (the per-death path's notices): a few times the greedy list at most.
            let mut one_by_one = RankSet::new();
            for &r in seq.iter() {
                assert!(one_by_one.insert(Rank(r)));
            }
            assert!(!one_by_one.dense);
            assert!(
                one_by_one.heap_bytes() <= 32 * 1_024,
                "{} B",
                one_by_one.heap_bytes()
            );
            // As a batch (collect, union: the campaign's one notice).
            let s: RankSet = seq.iter().map(|&r| Rank(r)).collect();
            assert_eq!(s, one_by_one);
            let mut u = RankSet::new();
            u.union_with(&one_by_one);
            assert!(u.heap_bytes() <= 8 * 1_024, "union: {} B", u.heap_bytes());
            assert_eq!(s.len(), 4_096);
            assert!(!s.dense);
            assert!(s.iter().map(|r| r.0).eq(targets.iter().copied()));
            // The dense bitset would be 128 KiB; a few hundred progressions instead.
            assert!(s.heap_bytes() <= 8 * 1_024, "{} B", s.heap_bytes());
        }
        // Scattered small deaths first (dense), then a long run far up: back to a list.
        let mut t: RankSet = (0..2_000u32)
            .filter(|r| r % 3 != 0 && r % 7 != 0)
            .map(Rank)
            .collect();
        assert!(t.dense);
        let n = t.len();
        t.insert_range(Rank(1_040_000), Rank(1_044_095));
        assert!(!t.dense, "turned back into a list at the jump");
        assert_eq!(t.len(), n + 4_096);
        assert!(t.heap_bytes() < 16 * 1_024, "{} B", t.heap_bytes());
    }
}
