//! `Rank` and `RankSet`: rank identifiers and a compact set of them (a progression list or a
//! dense bitset, whichever is smaller: `rank_repr.rs`).

use std::fmt;
use std::str::FromStr;

use super::rank_repr as repr;

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

/// A set of ranks with O(1) or O(log runs) membership and ascending iteration.
///
/// Two representations, picked by size: a **progression list** (sorted arithmetic
/// progressions with disjoint ranges, 8 bytes each: a run of consecutive ranks is one, and so
/// is each layer block of a subtree of the strided tree) or a **dense bitset** (one bit per
/// rank up to the highest member). A set starts as a progression list and turns dense when the
/// list would take more memory than the bitset; a dense set turns back into a list when it
/// grows past a power of two of words and the list would then take at most half the bitset.
/// So as a set grows its heap stays near the smaller representation (removals never change
/// it): the 4,096 targets of a shrink draining 16 subtrees near rank 2^20 cost a few hundred
/// progressions, not 128 KiB, and an empty set allocates nothing. `contains` is one word read
/// on a dense set and a binary search over the progressions otherwise.
/// Iteration is always in ascending rank order, never hash order; equality and hashing are by
/// members, whatever the representation. The text form is a range list such as `2,7:9`
/// (`a:b` is the inclusive range `a..=b`; a colon, not a dash, as in PRRTE's
/// `rml_base_dead_dmns`).
#[derive(Clone)]
pub struct RankSet {
    /// Dense words, or packed progressions (`rank_repr`), per `dense`.
    data: Vec<u64>,
    len: u32,
    dense: bool,
    /// A progression list is rebuilt (defragmented) when it reaches `2^(rebuilt + 1)`
    /// progressions, `rebuilt` being the log2 of its length at the last rebuild: O(1)
    /// amortized per insert. Fits in the padding (the set stays 32 bytes).
    rebuilt: u8,
}

/// No rebuild below `2^(MIN_REBUILD_LOG + 1)` progressions.
const MIN_REBUILD_LOG: u8 = 4;

impl Default for RankSet {
    fn default() -> Self {
        Self::new()
    }
}

impl RankSet {
    /// An empty set.
    pub const fn new() -> Self {
        Self {
            data: Vec::new(),
            len: 0,
            dense: false,
            rebuilt: MIN_REBUILD_LOG,
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

    /// Bytes of heap the set holds now (its allocation's capacity): what it adds to a node's
    /// footprint beyond its inline size.
    pub fn heap_bytes(&self) -> usize {
        self.data.capacity() * std::mem::size_of::<u64>()
    }

    /// Whether `r` is a member: O(1) on a dense set, O(log progressions) on a list.
    #[inline]
    pub fn contains(&self, r: Rank) -> bool {
        if self.dense {
            let w = (r.0 >> 6) as usize;
            match self.data.get(w) {
                Some(word) => word & (1u64 << (r.0 & 63)) != 0,
                None => false,
            }
        } else {
            repr::aps_contains(&self.data, r.0)
        }
    }

    /// Whether every rank of `lo..=hi` is a member (`true` when `lo > hi`).
    pub fn contains_range(&self, lo: Rank, hi: Rank) -> bool {
        if lo > hi {
            return true;
        }
        if self.dense {
            repr::dense_contains_range(&self.data, lo.0, hi.0)
        } else {
            repr::aps_contains_range(&self.data, lo.0, hi.0)
        }
    }

    /// Before a dense set grows to `need` words: turns it into a progression list instead
    /// (returning `true`) when it crosses a power of two of words and the list, one more
    /// counted for the insert to come, would take at most half the words. Checked only at powers of two, so a
    /// set growing one word at a time pays O(words) only O(log words) times.
    fn dense_to_list_before_growing(&mut self, need: usize) -> bool {
        debug_assert!(self.dense && need > self.data.len());
        let have = self.data.len();
        if have != 0 && need.next_power_of_two() <= have.next_power_of_two() {
            return false;
        }
        let aps = repr::dense_to_aps(&self.data);
        if (aps.len() + 1) * 2 > need {
            return false;
        }
        self.data = aps;
        self.dense = false;
        self.mark_rebuilt();
        true
    }

    /// The list was just built greedily: the next rebuild is at twice its length.
    fn mark_rebuilt(&mut self) {
        let log = usize::BITS - 1 - self.data.len().max(1).leading_zeros();
        self.rebuilt = (log as u8).max(MIN_REBUILD_LOG);
    }

    /// After a progression list changed: turns it dense when it takes more words than the
    /// bitset would.
    fn settle_list(&mut self) {
        debug_assert!(!self.dense);
        if self.data.len() >> (self.rebuilt + 1) != 0 {
            self.data = repr::aps_rebuild(&self.data);
            self.mark_rebuilt();
        }
        let Some(&last) = self.data.last() else {
            return;
        };
        if self.data.len() > repr::words_for(repr::hi(last)) {
            self.data = repr::aps_to_dense(&self.data);
            self.dense = true;
        }
    }

    /// Inserts `r`; returns whether it was new.
    pub fn insert(&mut self, r: Rank) -> bool {
        self.insert_range(r, r) == 1
    }

    /// Inserts the inclusive range `lo..=hi`; returns how many were new.
    pub fn insert_range(&mut self, lo: Rank, hi: Rank) -> u32 {
        if lo > hi {
            return 0;
        }
        if self.dense {
            let need = repr::words_for(hi.0);
            if need <= self.data.len() || !self.dense_to_list_before_growing(need) {
                if need > self.data.len() {
                    self.data.resize(need, 0);
                }
                let added = repr::dense_insert_range(&mut self.data, lo.0, hi.0);
                self.len += added;
                return added;
            }
        }
        let added = repr::aps_insert_range(&mut self.data, lo.0, hi.0);
        self.len += added;
        self.settle_list();
        added
    }

    /// Removes `r`; returns whether it was a member.
    pub fn remove(&mut self, r: Rank) -> bool {
        if !self.dense {
            let removed = repr::aps_remove(&mut self.data, r.0);
            if removed {
                self.len -= 1;
                self.settle_list();
            }
            return removed;
        }
        let w = (r.0 >> 6) as usize;
        let bit = 1u64 << (r.0 & 63);
        match self.data.get_mut(w) {
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
        self.data.clear();
        self.dense = false;
        self.rebuilt = MIN_REBUILD_LOG;
        self.len = 0;
    }

    /// Adds every member of `other`; returns how many were new.
    pub fn union_with(&mut self, other: &Self) -> u32 {
        if self.dense && other.dense {
            let need = other.significant_words().len();
            if need <= self.data.len() || !self.dense_to_list_before_growing(need) {
                if need > self.data.len() {
                    self.data.resize(need, 0);
                }
                let mut added = 0;
                for (a, b) in self.data.iter_mut().zip(&other.data) {
                    added += (b & !*a).count_ones();
                    *a |= b;
                }
                self.len += added;
                return added;
            }
        }
        // A progression list, or a dense set meeting a progression list: range by range
        // (`insert_range` handles growth and a change of representation), then one rebuild.
        let added = other
            .ranges()
            .map(|(lo, hi)| self.insert_range(lo, hi))
            .sum();
        self.compact();
        added
    }

    /// After a batch of inserts: rebuilds a progression list greedily (O(progressions)), so
    /// a set built from a batch in any order is as compact as one built in ascending order.
    fn compact(&mut self) {
        if !self.dense && self.data.len() > 1 << MIN_REBUILD_LOG {
            self.data = repr::aps_rebuild(&self.data);
            self.mark_rebuilt();
        }
    }

    /// Whether every member of `self` is in `other`.
    pub fn is_subset(&self, other: &Self) -> bool {
        if self.len > other.len {
            return false;
        }
        if self.dense && other.dense {
            return self
                .data
                .iter()
                .enumerate()
                .all(|(i, w)| w & !other.data.get(i).copied().unwrap_or(0) == 0);
        }
        self.ranges().all(|(lo, hi)| other.contains_range(lo, hi))
    }

    /// The highest member, if any.
    pub fn max(&self) -> Option<Rank> {
        if !self.dense {
            return self.data.last().map(|&r| Rank(repr::hi(r)));
        }
        let (i, w) = self.data.iter().enumerate().rev().find(|(_, w)| **w != 0)?;
        Some(Rank((i as u32) * 64 + 63 - w.leading_zeros()))
    }

    /// How many members are below `r` (a rank query): O(r / 64) dense, O(progressions) otherwise.
    pub fn count_below(&self, r: Rank) -> u32 {
        if !self.dense {
            return repr::aps_count_below(&self.data, r.0);
        }
        let w = (r.0 >> 6) as usize;
        let full: u32 = self.data.iter().take(w).map(|x| x.count_ones()).sum();
        let part = self
            .data
            .get(w)
            .map_or(0, |x| (x & ((1u64 << (r.0 & 63)) - 1)).count_ones());
        full + part
    }

    /// The ranks that are *not* members, picked by their position among non-members: for each
    /// `k` of `ks` (ascending), the `k`-th non-member (0-based), pushed to `out` in order. One
    /// pass over the words or the runs: O(words or members + `ks.len()`). Non-members never end, so
    /// every `k` has an answer (the caller bounds it by the span).
    pub(crate) fn select_absent(&self, ks: &[u32], out: &mut impl Extend<Rank>) {
        debug_assert!(ks.windows(2).all(|p| p[0] <= p[1]));
        if !self.dense {
            let runs = self.ranges().map(|(lo, hi)| (lo.0, hi.0));
            repr::select_absent_in_runs(runs, ks, out);
            return;
        }
        let mut ks = ks.iter().copied().peekable();
        // Non-members before word `w`.
        let mut base = 0u32;
        for (w, &word) in self.data.iter().enumerate() {
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
        let end = self.data.len() as u32 * 64;
        out.extend(ks.map(|k| Rank(end + (k - base))));
    }

    /// Members in ascending order.
    pub fn iter(&self) -> Iter<'_> {
        Iter {
            inner: if self.dense {
                IterInner::Dense {
                    words: &self.data,
                    word_index: 0,
                    current: self.data.first().copied().unwrap_or(0),
                }
            } else {
                IterInner::Aps {
                    aps: &self.data,
                    index: 0,
                    k: 0,
                }
            },
        }
    }

    /// Maximal runs of consecutive members, ascending, as inclusive `(first, last)` pairs.
    pub fn ranges(&self) -> Ranges<'_> {
        Ranges {
            pieces: if self.dense {
                Pieces::Dense(self.iter())
            } else {
                Pieces::Aps {
                    aps: &self.data,
                    index: 0,
                    k: 0,
                }
            },
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
        set.compact();
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
    /// The dense words up to the last non-zero one: the canonical content of a dense set,
    /// whatever the history of inserts and removes.
    fn significant_words(&self) -> &[u64] {
        debug_assert!(self.dense);
        let end = self.data.iter().rposition(|&w| w != 0).map_or(0, |i| i + 1);
        &self.data[..end]
    }
}

impl PartialEq for RankSet {
    /// Set equality: two sets with the same members are equal however they were built and
    /// whichever representation each has.
    fn eq(&self, other: &Self) -> bool {
        if self.len != other.len {
            return false;
        }
        match (self.dense, other.dense) {
            (true, true) => self.significant_words() == other.significant_words(),
            // The same progressions are the same members; other lists may still be equal
            // (a progression list depends on insertion order).
            (false, false) if self.data == other.data => true,
            _ => self.ranges().eq(other.ranges()),
        }
    }
}

impl Eq for RankSet {}

impl std::hash::Hash for RankSet {
    /// Hashes the maximal runs, so equal sets hash alike in either representation.
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.len.hash(state);
        for (lo, hi) in self.ranges() {
            lo.0.hash(state);
            hi.0.hash(state);
        }
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
        self.compact();
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
    inner: IterInner<'a>,
}

#[derive(Clone, Debug)]
enum IterInner<'a> {
    Dense {
        words: &'a [u64],
        word_index: usize,
        current: u64,
    },
    Aps {
        aps: &'a [u64],
        index: usize,
        /// The next member's position in `aps[index]`.
        k: u32,
    },
}

impl Iterator for Iter<'_> {
    type Item = Rank;

    fn next(&mut self) -> Option<Rank> {
        match &mut self.inner {
            IterInner::Dense {
                words,
                word_index,
                current,
            } => loop {
                if *current != 0 {
                    let bit = current.trailing_zeros();
                    *current &= *current - 1;
                    return Some(Rank((*word_index as u32) * 64 + bit));
                }
                *word_index += 1;
                *current = *words.get(*word_index)?;
            },
            IterInner::Aps { aps, index, k } => {
                let ap = repr::Ap::unpack(*aps.get(*index)?);
                let r = ap.lo + *k * ap.step;
                *k += 1;
                if *k == ap.cnt {
                    *k = 0;
                    *index += 1;
                }
                Some(Rank(r))
            }
        }
    }
}

/// Iterator over maximal runs of a [`RankSet`]; see [`RankSet::ranges`].
#[derive(Clone, Debug)]
pub struct Ranges<'a> {
    pieces: Pieces<'a>,
    pending: Option<(u32, u32)>,
}

/// Ascending runs of members, not necessarily maximal: single members of a dense set, whole
/// step-1 progressions, single members of other progressions.
#[derive(Clone, Debug)]
enum Pieces<'a> {
    Dense(Iter<'a>),
    Aps {
        aps: &'a [u64],
        index: usize,
        k: u32,
    },
}

impl Iterator for Pieces<'_> {
    type Item = (u32, u32);

    fn next(&mut self) -> Option<(u32, u32)> {
        match self {
            Pieces::Dense(it) => it.next().map(|r| (r.0, r.0)),
            Pieces::Aps { aps, index, k } => {
                let ap = repr::Ap::unpack(*aps.get(*index)?);
                if ap.step == 1 {
                    *index += 1;
                    return Some((ap.lo, ap.hi()));
                }
                let r = ap.lo + *k * ap.step;
                *k += 1;
                if *k == ap.cnt {
                    *k = 0;
                    *index += 1;
                }
                Some((r, r))
            }
        }
    }
}

impl Iterator for Ranges<'_> {
    type Item = (Rank, Rank);

    fn next(&mut self) -> Option<(Rank, Rank)> {
        let (lo, mut hi) = self.pending.take().or_else(|| self.pieces.next())?;
        for (a, b) in self.pieces.by_ref() {
            if u64::from(a) == u64::from(hi) + 1 {
                hi = b;
            } else {
                self.pending = Some((a, b));
                break;
            }
        }
        Some((Rank(lo), Rank(hi)))
    }
}

#[cfg(test)]
#[path = "rank_tests.rs"]
mod tests;
