//! `Rank` and `RankSet`: rank identifiers and a compact set of them.

use std::fmt;
use std::str::FromStr;

/// Largest supported span, `2^32 - 4` (the top values of `u32` stay free for sentinels).
pub const MAX_SPAN: u32 = u32::MAX - 3;

/// A process rank: a position in `[0, span)` of the routing tree.
///
/// Ranks are never reused: a grow appends ranks, a departure leaves a hole.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Rank(pub u32);

impl Rank {
    /// The rank of the base tree's root slot (rank 0). After a root failover the root *slot*
    /// may be occupied by another rank: use [`View::is_root`](super::View::is_root) to ask
    /// whether a rank is the root now.
    pub const ROOT: Self = Self(0);

    /// The rank as an index.
    #[inline]
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Display for Rank {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl From<u32> for Rank {
    fn from(v: u32) -> Self {
        Self(v)
    }
}

/// A set of ranks: a growable bitset with O(1) membership and ascending iteration.
///
/// Memory is one bit per rank up to the highest member ever inserted (not up to the span), so an
/// empty set allocates nothing. Iteration is always in ascending rank order, never hash order.
/// The text form is a range list such as `2,7:9` (`a:b` is the inclusive range `a..=b`; a colon,
/// not a dash, as in PRRTE's `rml_base_dead_dmns`).
#[derive(Clone, Default)]
pub struct RankSet {
    words: Vec<u64>,
    len: u32,
}

impl RankSet {
    /// An empty set.
    pub const fn new() -> Self {
        Self {
            words: Vec::new(),
            len: 0,
        }
    }

    /// Number of members.
    #[inline]
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// Whether the set has no members.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether `r` is a member. O(1).
    #[inline]
    pub fn contains(&self, r: Rank) -> bool {
        let w = (r.0 >> 6) as usize;
        match self.words.get(w) {
            Some(word) => word & (1u64 << (r.0 & 63)) != 0,
            None => false,
        }
    }

    /// Inserts `r`; returns whether it was new. Grows the bitset to cover `r`.
    pub fn insert(&mut self, r: Rank) -> bool {
        let w = (r.0 >> 6) as usize;
        if w >= self.words.len() {
            self.words.resize(w + 1, 0);
        }
        let bit = 1u64 << (r.0 & 63);
        if self.words[w] & bit != 0 {
            return false;
        }
        self.words[w] |= bit;
        self.len += 1;
        true
    }

    /// Inserts the inclusive range `lo..=hi`; returns how many were new.
    pub fn insert_range(&mut self, lo: Rank, hi: Rank) -> u32 {
        let mut added = 0;
        if lo > hi {
            return 0;
        }
        let w_hi = (hi.0 >> 6) as usize;
        if w_hi >= self.words.len() {
            self.words.resize(w_hi + 1, 0);
        }
        let mut r = lo.0 as u64;
        let hi = hi.0 as u64;
        while r <= hi {
            let w = (r >> 6) as usize;
            let first = (r & 63) as u32;
            let last = if (hi >> 6) as usize == w {
                (hi & 63) as u32
            } else {
                63
            };
            let mask = (u64::MAX >> (63 - last)) & (u64::MAX << first);
            added += (mask & !self.words[w]).count_ones();
            self.words[w] |= mask;
            r = ((w as u64) + 1) << 6;
        }
        self.len += added;
        added
    }

    /// Removes `r`; returns whether it was a member.
    pub fn remove(&mut self, r: Rank) -> bool {
        let w = (r.0 >> 6) as usize;
        let bit = 1u64 << (r.0 & 63);
        match self.words.get_mut(w) {
            Some(word) if *word & bit != 0 => {
                *word &= !bit;
                self.len -= 1;
                true
            }
            _ => false,
        }
    }

    /// Removes every member, keeping the allocation.
    pub fn clear(&mut self) {
        self.words.iter_mut().for_each(|w| *w = 0);
        self.len = 0;
    }

    /// Adds every member of `other`; returns how many were new.
    pub fn union_with(&mut self, other: &Self) -> u32 {
        if other.words.len() > self.words.len() {
            self.words.resize(other.words.len(), 0);
        }
        let mut added = 0;
        for (a, b) in self.words.iter_mut().zip(&other.words) {
            added += (b & !*a).count_ones();
            *a |= b;
        }
        self.len += added;
        added
    }

    /// Whether every member of `self` is in `other`.
    pub fn is_subset(&self, other: &Self) -> bool {
        self.words
            .iter()
            .enumerate()
            .all(|(i, w)| w & !other.words.get(i).copied().unwrap_or(0) == 0)
    }

    /// The highest member, if any.
    pub fn max(&self) -> Option<Rank> {
        let (i, w) = self
            .words
            .iter()
            .enumerate()
            .rev()
            .find(|(_, w)| **w != 0)?;
        Some(Rank((i as u32) * 64 + 63 - w.leading_zeros()))
    }

    /// How many members are below `r` (a rank query). O(r / 64).
    pub fn count_below(&self, r: Rank) -> u32 {
        let w = (r.0 >> 6) as usize;
        let full: u32 = self.words.iter().take(w).map(|x| x.count_ones()).sum();
        let part = self
            .words
            .get(w)
            .map_or(0, |x| (x & ((1u64 << (r.0 & 63)) - 1)).count_ones());
        full + part
    }

    /// The ranks that are *not* members, picked by their position among non-members: for each
    /// `k` of `ks` (ascending), the `k`-th non-member (0-based), pushed to `out` in order. One
    /// pass over the words: O(highest member / 64 + `ks.len()`). Non-members never end, so every
    /// `k` has an answer (the caller bounds it by the span).
    pub(crate) fn select_absent(&self, ks: &[u32], out: &mut impl Extend<Rank>) {
        debug_assert!(ks.windows(2).all(|p| p[0] <= p[1]));
        let mut ks = ks.iter().copied().peekable();
        // Non-members before word `w`.
        let mut base = 0u32;
        for (w, &word) in self.words.iter().enumerate() {
            let free = !word;
            let here = free.count_ones();
            while let Some(&k) = ks.peek().filter(|&&k| k < base + here) {
                let mut bits = free;
                for _ in 0..(k - base) {
                    bits &= bits - 1; // drop the lowest free bit
                }
                out.extend([Rank(w as u32 * 64 + bits.trailing_zeros())]);
                ks.next();
            }
            base += here;
        }
        let end = self.words.len() as u32 * 64;
        out.extend(ks.map(|k| Rank(end + (k - base))));
    }

    /// Members in ascending order.
    pub fn iter(&self) -> Iter<'_> {
        Iter {
            words: &self.words,
            word_index: 0,
            current: self.words.first().copied().unwrap_or(0),
        }
    }

    /// Maximal runs of consecutive members, ascending, as inclusive `(first, last)` pairs.
    pub fn ranges(&self) -> Ranges<'_> {
        Ranges {
            inner: self.iter(),
            pending: None,
        }
    }

    /// Parses the range-list text form, refusing any rank `>= span` (so a hostile string cannot
    /// make the set allocate more than `span` bits).
    pub fn parse_bounded(s: &str, span: u32) -> Result<Self, RankSetParseError> {
        let mut set = Self::new();
        let s = s.trim();
        if s.is_empty() {
            return Ok(set);
        }
        for item in s.split(',') {
            let item = item.trim();
            let (lo, hi) = match item.split_once(':') {
                Some((a, b)) => (parse_rank(a, item)?, parse_rank(b, item)?),
                None => {
                    let r = parse_rank(item, item)?;
                    (r, r)
                }
            };
            if lo > hi {
                return Err(RankSetParseError::DescendingRange(item.to_owned()));
            }
            if hi >= span {
                return Err(RankSetParseError::OutOfRange { rank: hi, span });
            }
            set.insert_range(Rank(lo), Rank(hi));
        }
        Ok(set)
    }
}

fn parse_rank(s: &str, item: &str) -> Result<u32, RankSetParseError> {
    let s = s.trim();
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(RankSetParseError::BadItem(item.to_owned()));
    }
    s.parse::<u32>()
        .map_err(|_| RankSetParseError::BadItem(item.to_owned()))
}

/// Why a range-list string was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RankSetParseError {
    /// An item is not `N` or `A:B` with decimal ranks.
    #[error("malformed rank list item {0:?} (expected N or A:B, e.g. 2,7:9)")]
    BadItem(String),
    /// A range `A:B` with `A > B`.
    #[error("descending range {0:?} (write A:B with A <= B)")]
    DescendingRange(String),
    /// A rank at or above the span.
    #[error("rank {rank} is out of range (ranks are 0..{span})")]
    OutOfRange {
        /// The offending rank.
        rank: u32,
        /// The bound it broke.
        span: u32,
    },
}

impl RankSet {
    /// The words up to the last non-zero one: the canonical content, whatever the history of
    /// inserts and removes.
    fn significant_words(&self) -> &[u64] {
        let end = self
            .words
            .iter()
            .rposition(|&w| w != 0)
            .map_or(0, |i| i + 1);
        &self.words[..end]
    }
}

impl PartialEq for RankSet {
    /// Set equality: two sets with the same members are equal however they were built.
    fn eq(&self, other: &Self) -> bool {
        self.len == other.len && self.significant_words() == other.significant_words()
    }
}

impl Eq for RankSet {}

impl std::hash::Hash for RankSet {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.significant_words().hash(state);
    }
}

impl FromStr for RankSet {
    type Err = RankSetParseError;

    /// Parses the range-list form with the largest legal span as the bound.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse_bounded(s, MAX_SPAN)
    }
}

impl fmt::Display for RankSet {
    /// The range-list text form, e.g. `2,7:9`; the empty set prints as an empty string.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (lo, hi)) in self.ranges().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            if lo == hi {
                write!(f, "{lo}")?;
            } else {
                write!(f, "{lo}:{hi}")?;
            }
        }
        Ok(())
    }
}

impl fmt::Debug for RankSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RankSet({self})")
    }
}

impl FromIterator<Rank> for RankSet {
    fn from_iter<T: IntoIterator<Item = Rank>>(iter: T) -> Self {
        let mut s = Self::new();
        s.extend(iter);
        s
    }
}

impl Extend<Rank> for RankSet {
    fn extend<T: IntoIterator<Item = Rank>>(&mut self, iter: T) {
        for r in iter {
            self.insert(r);
        }
    }
}

impl<'a> IntoIterator for &'a RankSet {
    type Item = Rank;
    type IntoIter = Iter<'a>;
    fn into_iter(self) -> Iter<'a> {
        self.iter()
    }
}

/// Ascending iterator over a [`RankSet`].
#[derive(Clone, Debug)]
pub struct Iter<'a> {
    words: &'a [u64],
    word_index: usize,
    current: u64,
}

impl Iterator for Iter<'_> {
    type Item = Rank;

    fn next(&mut self) -> Option<Rank> {
        loop {
            if self.current != 0 {
                let bit = self.current.trailing_zeros();
                self.current &= self.current - 1;
                return Some(Rank((self.word_index as u32) * 64 + bit));
            }
            self.word_index += 1;
            self.current = *self.words.get(self.word_index)?;
        }
    }
}

/// Iterator over maximal runs of a [`RankSet`]; see [`RankSet::ranges`].
#[derive(Clone, Debug)]
pub struct Ranges<'a> {
    inner: Iter<'a>,
    pending: Option<Rank>,
}

impl Iterator for Ranges<'_> {
    type Item = (Rank, Rank);

    fn next(&mut self) -> Option<(Rank, Rank)> {
        let lo = self.pending.take().or_else(|| self.inner.next())?;
        let mut hi = lo;
        for r in self.inner.by_ref() {
            if r.0 == hi.0 + 1 {
                hi = r;
            } else {
                self.pending = Some(r);
                break;
            }
        }
        Some((lo, hi))
    }
}

#[cfg(test)]
mod tests {
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
}
