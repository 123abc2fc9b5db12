//! A fault-free subtree as a list of residue classes, one per layer, so its members can be
//! counted, indexed and enumerated without walking the tree.
//!
//! The subtree of `r` at depth `d` is `{x >= r : (x - L_d) mod k^d == r - L_d}`: in each layer
//! `e >= d` (ranks `[L_e, L_{e+1})`) its members are `L_e + (r - L_d) + i·k^d` for `i >= 0`.

use lifeline_core::tree::{Layout, Rank};

/// One layer's members: `first + i·stride` for `i` in `0..count`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Class {
    first: u64,
    count: u64,
}

/// The members of one fault-free subtree, layer by layer (the root is member 0).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Subtree {
    root: Rank,
    stride: u64,
    layers: Vec<Class>,
    len: u64,
}

impl Subtree {
    /// The fault-free subtree of `root` in `layout`. Requires `root < span`.
    pub fn new(layout: &Layout, root: Rank) -> Self {
        assert!(
            layout.contains(root),
            "subtree root {root} outside the span"
        );
        let k = u64::from(layout.radix());
        let span = u64::from(layout.span());
        // L_d and W_d = k^d of the root's layer. Every L_e visited below is < span <= 2^32 and
        // W_e <= k·L_e + 1 <= 2^42, so nothing here overflows a u64.
        let (mut start, mut width) = (0u64, 1u64);
        for _ in 0..layout.depth(root) {
            start += width;
            width *= k;
        }
        let stride = width;
        let off = u64::from(root.0) - start;
        let mut layers = Vec::new();
        let mut len = 0;
        while start < span {
            let end = (start + width).min(span);
            let first = start + off;
            if first >= end {
                break; // deeper layers start even later relative to the span
            }
            let count = (end - first).div_ceil(stride);
            layers.push(Class { first, count });
            len += count;
            start += width;
            width *= k;
        }
        Self {
            root,
            stride,
            layers,
            len,
        }
    }

    /// The subtree's root.
    pub fn root(&self) -> Rank {
        self.root
    }

    /// Number of members, the root included (equals [`Layout::subtree_len`]).
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Always false: a subtree holds at least its root.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The `i`-th member in layer order (member 0 is the root). Requires `i < len`. O(depth).
    pub fn nth(&self, mut i: u64) -> Rank {
        for c in &self.layers {
            if i < c.count {
                return Rank((c.first + i * self.stride) as u32);
            }
            i -= c.count;
        }
        panic!("member index out of range (subtree of {} ranks)", self.len);
    }

    /// Every member, layer by layer (ascending within a layer, and layers ascend).
    pub fn iter(&self) -> impl Iterator<Item = Rank> + '_ {
        self.layers
            .iter()
            .flat_map(move |c| (0..c.count).map(move |i| Rank((c.first + i * self.stride) as u32)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_layout_membership() {
        for (span, k) in [(1, 2), (9, 2), (100, 4), (200, 3), (300, 64), (4000, 5)] {
            let l = Layout::new(span, k).unwrap();
            for r in 0..span {
                let s = Subtree::new(&l, Rank(r));
                let members: Vec<_> = s.iter().collect();
                let brute: Vec<_> = (0..span)
                    .map(Rank)
                    .filter(|&t| l.in_subtree(Rank(r), t))
                    .collect();
                assert_eq!(members, brute, "span={span} k={k} r={r}");
                assert_eq!(s.len(), l.subtree_len(Rank(r)));
                assert_eq!(s.nth(0), Rank(r));
                for (i, m) in members.iter().enumerate() {
                    assert_eq!(s.nth(i as u64), *m);
                }
            }
        }
    }

    #[test]
    fn large_spans_agree_with_subtree_len() {
        let l = Layout::new(1 << 24, 64).unwrap();
        for r in [0, 1, 65, 4161, 266_305, (1 << 24) - 1] {
            assert_eq!(Subtree::new(&l, Rank(r)).len(), l.subtree_len(Rank(r)));
        }
    }
}
