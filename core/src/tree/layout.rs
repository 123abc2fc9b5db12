//! The fault-free radix tree: exact integer arithmetic over PRRTE's strided layout.
//!
//! Depth `d` holds ranks `[L_d, L_{d+1})` with `L_d = (k^d - 1)/(k - 1)` and width `W_d = k^d`.
//! The children of `r` at depth `d` are `r + j·W_d` for `j = 1..=k` (slot index `j - 1`), so
//! siblings are strided, not adjacent: radix 2, span 9 is `0→{1,2}, 1→{3,5}, 2→{4,6}, 3→{7},
//! 4→{8}`. The subtree of `r` is one residue class per deeper layer, so membership is one modulo.
//! Appending ranks only appends leaves: a fault-free grow never re-parents a rank.

use super::rank::{Rank, MAX_SPAN};

/// Smallest supported radix.
pub const MIN_RADIX: u32 = 2;
/// Largest supported radix.
pub const MAX_RADIX: u32 = 1024;

/// Why a span or radix was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LayoutError {
    /// The radix is outside `2..=1024`.
    #[error("radix {0} is out of range (2..=1024)")]
    Radix(u32),
    /// The span is outside `1..=2^32-4`.
    #[error("span {0} is out of range (1..=4294967292)")]
    Span(u64),
}

/// The shape of the fault-free tree: a span of ranks `[0, span)` and a radix.
///
/// Eight bytes; every query is exact integer arithmetic costing O(depth) at most.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Layout {
    span: u32,
    radix: u32,
}

/// A rank with its layer coordinates, so moving to a parent or a child is O(1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Pos {
    pub(crate) rank: u64,
    pub(crate) depth: u32,
    /// `L_depth`: the first rank of this layer.
    pub(crate) start: u64,
    /// `W_depth = radix^depth`.
    pub(crate) width: u64,
}

impl Layout {
    /// A layout, or an error if `span` or `radix` is out of range.
    pub fn new(span: u32, radix: u32) -> Result<Self, LayoutError> {
        if !(MIN_RADIX..=MAX_RADIX).contains(&radix) {
            return Err(LayoutError::Radix(radix));
        }
        if span == 0 || span > MAX_SPAN {
            return Err(LayoutError::Span(span as u64));
        }
        Ok(Self { span, radix })
    }

    /// Number of rank positions, including holes.
    #[inline]
    pub fn span(&self) -> u32 {
        self.span
    }

    /// Maximum children per rank.
    #[inline]
    pub fn radix(&self) -> u32 {
        self.radix
    }

    /// Whether `r < span`.
    #[inline]
    pub fn contains(&self, r: Rank) -> bool {
        r.0 < self.span
    }

    /// The same radix with another span (a grow or, for tests, a shrink of the span).
    pub fn with_span(&self, span: u32) -> Result<Self, LayoutError> {
        Self::new(span, self.radix)
    }

    /// Coordinates of `r`. Requires `r < span`.
    #[inline]
    pub(crate) fn pos(&self, r: Rank) -> Pos {
        let r = r.0 as u64;
        let k = self.radix as u64;
        let (mut start, mut width, mut depth) = (0u64, 1u64, 0u32);
        while start + width <= r {
            start += width;
            width *= k;
            depth += 1;
        }
        Pos {
            rank: r,
            depth,
            start,
            width,
        }
    }

    /// Depth of `r` in the fault-free tree (root is 0). Requires `r < span`.
    pub fn depth(&self, r: Rank) -> u32 {
        self.pos(r).depth
    }

    /// Depth of the deepest rank, `depth(span - 1)`.
    pub fn max_depth(&self) -> u32 {
        self.depth(Rank(self.span - 1))
    }

    /// Fault-free parent of `r`; `None` for the root. Requires `r < span`.
    pub fn parent(&self, r: Rank) -> Option<Rank> {
        self.parent_pos(self.pos(r)).map(|p| Rank(p.rank as u32))
    }

    /// Number of fault-free children of `r`. Requires `r < span`.
    pub fn child_count(&self, r: Rank) -> u32 {
        self.child_count_pos(self.pos(r))
    }

    /// The child of `r` in slot `index` (0-based, in increasing rank order), if it exists.
    pub fn child(&self, r: Rank, index: u32) -> Option<Rank> {
        self.child_pos(self.pos(r), index)
            .map(|p| Rank(p.rank as u32))
    }

    /// Fault-free children of `r` in slot order (increasing rank).
    pub fn children(&self, r: Rank) -> impl Iterator<Item = Rank> + '_ {
        let p = self.pos(r);
        (0..self.child_count_pos(p)).map(move |j| Rank((p.rank + (j as u64 + 1) * p.width) as u32))
    }

    /// Base ancestors of `r`, root first (length = depth of `r`).
    pub fn ancestors(&self, r: Rank) -> impl Iterator<Item = Rank> {
        let p = self.pos(r);
        let k = self.radix as u64;
        // Walk up collecting, then yield root first: depth <= 31, so a fixed array suffices.
        let mut chain = [0u32; 32];
        let mut n = 0usize;
        let mut cur = p;
        while cur.depth > 0 {
            let pw = cur.width / k;
            let pstart = cur.start - pw;
            let prank = pstart + (cur.rank - cur.start) % pw;
            chain[n] = prank as u32;
            n += 1;
            cur = Pos {
                rank: prank,
                depth: cur.depth - 1,
                start: pstart,
                width: pw,
            };
        }
        (0..n).rev().map(move |i| Rank(chain[i]))
    }

    /// Whether `t` lies in the fault-free subtree rooted at `root` (inclusive). O(depth).
    pub fn in_subtree(&self, root: Rank, t: Rank) -> bool {
        if !self.contains(root) || !self.contains(t) {
            return false;
        }
        Self::pos_contains(self.pos(root), t.0 as u64)
    }

    /// Which child slot of `root` contains `t`, if `t` is in `root`'s strict subtree.
    pub fn subtree_index(&self, root: Rank, t: Rank) -> Option<u32> {
        if !self.contains(root) || !self.contains(t) || t == root {
            return None;
        }
        let p = self.pos(root);
        if !Self::pos_contains(p, t.0 as u64) {
            return None;
        }
        Some(self.subtree_index_pos(p, t.0 as u64))
    }

    /// Number of ranks in the fault-free subtree of `root` (itself included). O(depth).
    pub fn subtree_len(&self, root: Rank) -> u64 {
        let p = self.pos(root);
        let k = self.radix as u64;
        let span = self.span as u64;
        let off = p.rank - p.start;
        // In layer e >= d, members are L_e + off + i·W_d (i >= 0) below min(L_{e+1}, span).
        let (mut start, mut layer_width, mut total) = (p.start, p.width, 0u64);
        while start < span {
            let end = (start + layer_width).min(span);
            let first = start + off;
            if first < end {
                total += (end - first).div_ceil(p.width);
            }
            start += layer_width;
            layer_width *= k;
        }
        total
    }

    // ---- Pos-level primitives (crate-internal, O(1)) ----

    #[inline]
    pub(crate) fn parent_pos(&self, p: Pos) -> Option<Pos> {
        if p.depth == 0 {
            return None;
        }
        let pw = p.width / self.radix as u64;
        let pstart = p.start - pw;
        Some(Pos {
            rank: pstart + (p.rank - p.start) % pw,
            depth: p.depth - 1,
            start: pstart,
            width: pw,
        })
    }

    #[inline]
    pub(crate) fn child_count_pos(&self, p: Pos) -> u32 {
        let span = self.span as u64;
        if p.rank + p.width >= span {
            return 0;
        }
        ((span - 1 - p.rank) / p.width).min(self.radix as u64) as u32
    }

    #[inline]
    pub(crate) fn child_pos(&self, p: Pos, index: u32) -> Option<Pos> {
        if index >= self.radix {
            return None;
        }
        let c = p.rank + (index as u64 + 1) * p.width;
        (c < self.span as u64).then(|| Pos {
            rank: c,
            depth: p.depth + 1,
            start: p.start + p.width,
            width: p.width * self.radix as u64,
        })
    }

    /// Slot index of `p` under its parent `parent`.
    #[inline]
    pub(crate) fn slot_index_pos(parent: Pos, p: Pos) -> u32 {
        ((p.rank - parent.rank) / parent.width - 1) as u32
    }

    #[inline]
    pub(crate) fn pos_contains(p: Pos, t: u64) -> bool {
        t >= p.rank && (t - p.start) % p.width == p.rank - p.start
    }

    /// Requires `t` in the strict subtree of `p`.
    #[inline]
    pub(crate) fn subtree_index_pos(&self, p: Pos, t: u64) -> u32 {
        let next_start = p.start + p.width;
        let next_width = p.width * self.radix as u64;
        (((t - next_start) % next_width) / p.width) as u32
    }

    /// The successor of `x` in the right-first pre-order of the fault-free subtree rooted at
    /// `root` (which must contain `x`): highest child first, then the next lower sibling of the
    /// nearest ancestor that has one. `None` at the end of the subtree.
    #[inline]
    pub(crate) fn rfpre_next(&self, x: Pos, root: u64) -> Option<Pos> {
        let n = self.child_count_pos(x);
        if n > 0 {
            return self.child_pos(x, n - 1);
        }
        self.rfpre_skip(x, root)
    }

    /// Like [`Self::rfpre_next`] but skipping the subtree of `x`.
    #[inline]
    pub(crate) fn rfpre_skip(&self, mut x: Pos, root: u64) -> Option<Pos> {
        while x.rank != root {
            let p = self.parent_pos(x)?;
            let j = Self::slot_index_pos(p, x);
            if j > 0 {
                return self.child_pos(p, j - 1);
            }
            x = p;
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lay(span: u32, radix: u32) -> Layout {
        Layout::new(span, radix).unwrap()
    }

    #[test]
    fn prrte_layout_radix2_n9() {
        let l = lay(9, 2);
        let kids = |r| l.children(Rank(r)).map(|c| c.0).collect::<Vec<_>>();
        assert_eq!(kids(0), [1, 2]);
        assert_eq!(kids(1), [3, 5]);
        assert_eq!(kids(2), [4, 6]);
        assert_eq!(kids(3), [7]);
        assert_eq!(kids(4), [8]);
        for leaf in 5..9 {
            assert_eq!(kids(leaf), Vec::<u32>::new());
        }
        assert_eq!(l.parent(Rank(8)), Some(Rank(4)));
        assert_eq!(l.parent(Rank(0)), None);
        assert_eq!(l.depth(Rank(7)), 3);
        assert_eq!(
            l.ancestors(Rank(7)).collect::<Vec<_>>(),
            [Rank(0), Rank(1), Rank(3)]
        );
        assert_eq!(l.subtree_index(Rank(1), Rank(7)), Some(0));
        assert_eq!(l.subtree_index(Rank(1), Rank(5)), Some(1));
        assert_eq!(l.subtree_index(Rank(1), Rank(1)), None);
        assert_eq!(l.subtree_index(Rank(1), Rank(8)), None);
        assert!(l.in_subtree(Rank(1), Rank(7)) && !l.in_subtree(Rank(1), Rank(8)));
        assert_eq!(l.subtree_len(Rank(1)), 4);
        assert_eq!(l.subtree_len(Rank(0)), 9);
        assert_eq!(l.max_depth(), 3);
    }

    #[test]
    fn refuses_bad_shape() {
        assert_eq!(Layout::new(9, 1), Err(LayoutError::Radix(1)));
        assert_eq!(Layout::new(9, 1025), Err(LayoutError::Radix(1025)));
        assert_eq!(Layout::new(0, 2), Err(LayoutError::Span(0)));
        assert_eq!(
            Layout::new(u32::MAX, 2),
            Err(LayoutError::Span(u32::MAX as u64))
        );
        assert!(Layout::new(MAX_SPAN, 2).is_ok());
        assert!(Layout::new(MAX_SPAN, 1024).is_ok());
    }

    #[test]
    fn extreme_spans_have_exact_depths() {
        let l = lay(MAX_SPAN, 2);
        assert_eq!(l.max_depth(), 31);
        assert_eq!(l.parent(Rank(MAX_SPAN - 1)).map(|p| l.depth(p)), Some(30));
        let l = lay(MAX_SPAN, 1024);
        let last = Rank(MAX_SPAN - 1);
        assert_eq!(l.max_depth(), 4);
        let mut cur = last;
        while let Some(p) = l.parent(cur) {
            assert!(l.children(p).any(|c| c == cur));
            cur = p;
        }
        assert_eq!(cur, Rank(0));
    }

    /// Every rank has exactly one parent that lists it, and a right-first pre-order walk from the
    /// root visits each of the `span` ranks exactly once (PRRTE's `>= n` bug, edge case 1).
    #[test]
    fn shape_is_a_tree_at_radix_boundaries() {
        for k in [2u32, 3, 4, 8, 64] {
            let mut spans = vec![1, 2, k, k + 1, k * k, k * k + 1, 64, 65, 63];
            spans.retain(|&n| n >= 1);
            for n in spans {
                let l = lay(n, k);
                for r in 1..n {
                    let p = l.parent(Rank(r)).unwrap();
                    assert_eq!(l.children(p).filter(|&c| c == Rank(r)).count(), 1);
                    assert_eq!(l.depth(Rank(r)), l.depth(p) + 1);
                }
                let mut seen = vec![false; n as usize];
                let mut x = Some(l.pos(Rank(0)));
                let mut count = 0;
                while let Some(p) = x {
                    assert!(!seen[p.rank as usize], "k={k} n={n} revisit {}", p.rank);
                    seen[p.rank as usize] = true;
                    count += 1;
                    x = l.rfpre_next(p, 0);
                }
                assert_eq!(count, n, "k={k} n={n}");
                let total: u64 = l.subtree_len(Rank(0));
                assert_eq!(total, n as u64);
            }
        }
    }

    #[test]
    fn subtree_len_matches_walk() {
        for k in [2u32, 3, 5] {
            let l = lay(200, k);
            for r in 0..200 {
                let p = l.pos(Rank(r));
                let mut x = Some(p);
                let mut c = 0;
                while let Some(q) = x {
                    c += 1;
                    x = l.rfpre_next(q, p.rank);
                }
                assert_eq!(l.subtree_len(Rank(r)), c, "k={k} r={r}");
                let direct = (0..200).filter(|&t| l.in_subtree(Rank(r), Rank(t))).count();
                assert_eq!(direct as u64, c);
            }
        }
    }
}
