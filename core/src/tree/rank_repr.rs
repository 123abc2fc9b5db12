//! The two representations behind [`RankSet`](super::RankSet), as functions on its one `Vec<u64>`:
//! a **dense** bitset (word `i` holds ranks `64i..64i+64`) and a **progression list**: sorted
//! arithmetic progressions `lo, lo + step, .., lo + (cnt - 1)·step`, each packed in a `u64` as
//! `lo << 32 | (cnt - 1) << 16 | (step - 1)` (so the packed values sort by `lo`; `cnt` and
//! `step` are `1..=65536`; a progression of one member has step 1).
//!
//! A progression covers the ranks `lo..=hi` (`hi` its last member) and the list keeps those
//! ranges disjoint and ascending, so the one progression that may hold `r` is found by a binary
//! search on `lo`. A run of consecutive ranks is a progression of step 1; a subtree of the
//! strided radix tree (`layout.rs`: one residue class per layer) is one progression per block
//! of its layer, so a shrink draining whole subtrees costs a few hundred progressions, not one
//! entry per rank. The list is not canonical (it depends on insertion order): equality compares
//! members, not progressions.

/// Largest member count and step of one progression.
pub(super) const MAX_CNT: u64 = 1 << 16;

/// One progression, unpacked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Ap {
    pub(super) lo: u32,
    pub(super) cnt: u32,
    pub(super) step: u32,
}

impl Ap {
    /// The progression `lo, lo + step, ..` of `cnt` members (step 1 when `cnt == 1`).
    #[inline]
    pub(super) fn new(lo: u32, cnt: u32, step: u32) -> Self {
        debug_assert!(cnt >= 1 && u64::from(cnt) <= MAX_CNT && step >= 1);
        Self {
            lo,
            cnt,
            step: if cnt == 1 { 1 } else { step },
        }
    }

    #[inline]
    pub(super) fn unpack(x: u64) -> Self {
        Self {
            lo: (x >> 32) as u32,
            cnt: ((x >> 16) & 0xffff) as u32 + 1,
            step: (x & 0xffff) as u32 + 1,
        }
    }

    #[inline]
    pub(super) fn pack(self) -> u64 {
        (u64::from(self.lo) << 32) | (u64::from(self.cnt - 1) << 16) | u64::from(self.step - 1)
    }

    /// The last member.
    #[inline]
    pub(super) fn hi(self) -> u32 {
        self.lo + (self.cnt - 1) * self.step
    }

    /// Whether `r` (with `lo <= r`) is a member.
    #[inline]
    fn holds(self, r: u32) -> bool {
        let d = r - self.lo;
        if self.step & (self.step - 1) == 0 {
            d & (self.step - 1) == 0 && d >> self.step.trailing_zeros() < self.cnt
        } else {
            d % self.step == 0 && d / self.step < self.cnt
        }
    }

    /// Members below `r`.
    #[inline]
    fn count_below(self, r: u32) -> u32 {
        if r <= self.lo {
            0
        } else {
            (r - self.lo).div_ceil(self.step).min(self.cnt)
        }
    }

    /// The members below `r`, or `None` if there are none.
    fn below(self, r: u32) -> Option<Self> {
        let n = self.count_below(r);
        (n > 0).then(|| Self::new(self.lo, n, self.step))
    }

    /// The members above `r`, or `None` if there are none.
    fn above(self, r: u32) -> Option<Self> {
        let n = self.count_below(r.saturating_add(1)) + u32::from(r == u32::MAX);
        (n < self.cnt).then(|| Self::new(self.lo + n * self.step, self.cnt - n, self.step))
    }
}

/// Words a dense bitset needs to hold `max`.
#[inline]
pub(super) fn words_for(max: u32) -> usize {
    (max >> 6) as usize + 1
}

/// The last member of the packed progression.
#[inline]
pub(super) fn hi(x: u64) -> u32 {
    Ap::unpack(x).hi()
}

/// Index of the first progression whose `lo > r` (the one that may hold `r` is before it).
#[inline]
fn after(aps: &[u64], r: u32) -> usize {
    let key = (u64::from(r) << 32) | 0xffff_ffff;
    aps.partition_point(|&x| x <= key)
}

/// The progression holding `r` and its index, if `r` is a member. O(log progressions).
#[inline]
fn holding(aps: &[u64], r: u32) -> Option<(usize, Ap)> {
    let i = after(aps, r).checked_sub(1)?;
    let ap = Ap::unpack(aps[i]);
    ap.holds(r).then_some((i, ap))
}

/// Whether `r` is a member. O(log progressions).
#[inline]
pub(super) fn aps_contains(aps: &[u64], r: u32) -> bool {
    holding(aps, r).is_some()
}

/// Whether every rank of `lo..=hi` is a member (`lo <= hi`).
pub(super) fn aps_contains_range(aps: &[u64], lo: u32, hi_: u32) -> bool {
    let mut r = lo;
    loop {
        let Some((_, ap)) = holding(aps, r) else {
            return false;
        };
        // A step-1 progression covers through its end; any other holds no neighbour of `r`.
        let end = if ap.step == 1 { ap.hi() } else { r };
        if end >= hi_ {
            return true;
        }
        r = end + 1;
    }
}

/// Joins `a` and the progression right after it into one, if one progression holds both.
/// Two lone ranks join at any gap only when `any_gap` (the greedy builder, which sees ranks in
/// ascending order); inserts join them only when consecutive, so a rank inserted in a random
/// order does not pair with whatever neighbour it happens to have (the rebuild pairs them).
fn join(a: Ap, b: Ap, any_gap: bool) -> Option<Ap> {
    let gap = b.lo - a.hi();
    let fits = u64::from(a.cnt) + u64::from(b.cnt) <= MAX_CNT;
    if !fits || u64::from(gap) > MAX_CNT {
        return None;
    }
    match (a.cnt, b.cnt) {
        (1, 1) if any_gap || gap == 1 => Some(Ap::new(a.lo, 2, gap)),
        (1, 1) => None,
        (1, _) if gap == b.step => Some(Ap::new(a.lo, b.cnt + 1, gap)),
        (_, 1) if gap == a.step => Some(Ap::new(a.lo, a.cnt + 1, gap)),
        _ if a.step == b.step && gap == a.step => Some(Ap::new(a.lo, a.cnt + b.cnt, gap)),
        _ => None,
    }
}

/// Appends `ap` (above every member of `out`) to a progression list, joining it to the last
/// progression when one holds both: the greedy builder.
pub(super) fn push(out: &mut Vec<u64>, ap: Ap) {
    push_with(out, ap, true);
}

/// [`push`], joining lone ranks at any gap only when `any_gap`.
fn push_with(out: &mut Vec<u64>, ap: Ap, any_gap: bool) {
    if let Some(last) = out.last_mut() {
        if let Some(j) = join(Ap::unpack(*last), ap, any_gap) {
            *last = j.pack();
            return;
        }
    }
    out.push(ap.pack());
}

/// Appends the run `lo..=hi` as step-1 progressions of at most [`MAX_CNT`] members.
fn push_run(out: &mut Vec<u64>, lo: u32, hi_: u32, any_gap: bool) {
    let mut r = u64::from(lo);
    while r <= u64::from(hi_) {
        let n = (u64::from(hi_) - r + 1).min(MAX_CNT);
        push_with(out, Ap::new(r as u32, n as u32, 1), any_gap);
        r += n;
    }
}

/// Adds `lo..=hi` (`lo <= hi`); returns how many ranks were new. The progressions whose range
/// meets `lo..=hi` are replaced by their members below `lo`, the run, and their members above
/// `hi` (each part one progression), then neighbours are joined where one progression holds
/// both. O(log progressions + progressions met + the shift of the vector).
pub(super) fn aps_insert_range(aps: &mut Vec<u64>, lo: u32, hi_: u32) -> u32 {
    debug_assert!(lo <= hi_);
    let i0 = aps.partition_point(|&x| hi(x) < lo);
    let i1 = after(aps, hi_);
    let mut covered = 0u64;
    let mut left = None;
    let mut right = None;
    for (n, &x) in aps[i0..i1.max(i0)].iter().enumerate() {
        let ap = Ap::unpack(x);
        let inside = u64::from(ap.count_below(hi_.saturating_add(1)))
            + u64::from(hi_ == u32::MAX && ap.holds(u32::MAX))
            - u64::from(ap.count_below(lo));
        covered += inside;
        if n == 0 {
            left = ap.below(lo);
        }
        if i0 + n + 1 == i1 {
            right = ap.above(hi_);
        }
    }
    let mut mid = Vec::with_capacity(4);
    if let Some(l) = left {
        mid.push(l.pack());
    }
    push_run(&mut mid, lo, hi_, false);
    if let Some(r) = right {
        push_with(&mut mid, r, false);
    }
    let end = i0 + mid.len();
    aps.splice(i0..i1.max(i0), mid);
    // Join across the splice's two edges (right edge first, so indices stay valid).
    for j in [end, i0] {
        if j > 0 && j < aps.len() {
            if let Some(joined) = join(Ap::unpack(aps[j - 1]), Ap::unpack(aps[j]), false) {
                aps[j - 1] = joined.pack();
                aps.remove(j);
            }
        }
    }
    (u64::from(hi_ - lo) + 1 - covered) as u32
}

/// The same members as a fresh greedy list (what inserting them in ascending order builds):
/// inserts in a random order can leave a list fragmented (a lone rank joins whatever
/// neighbour it lines up with, and a later rank inside that progression splits it).
pub(super) fn aps_rebuild(aps: &[u64]) -> Vec<u64> {
    let mut out = Vec::with_capacity(aps.len() / 2 + 1);
    for &x in aps {
        let ap = Ap::unpack(x);
        if ap.step == 1 {
            push_piece(&mut out, ap.lo, ap.hi());
        } else {
            for k in 0..ap.cnt {
                push(&mut out, Ap::new(ap.lo + k * ap.step, 1, 1));
            }
        }
    }
    out.shrink_to_fit();
    out
}

/// Removes `r`; returns whether it was a member. May split a progression in two.
pub(super) fn aps_remove(aps: &mut Vec<u64>, r: u32) -> bool {
    let Some((i, ap)) = holding(aps, r) else {
        return false;
    };
    let parts: Vec<u64> = [ap.below(r), ap.above(r)]
        .into_iter()
        .flatten()
        .map(Ap::pack)
        .collect();
    aps.splice(i..=i, parts);
    true
}

/// Members below `r`. O(progressions below `r`).
pub(super) fn aps_count_below(aps: &[u64], r: u32) -> u32 {
    aps[..after(aps, r)]
        .iter()
        .map(|&x| Ap::unpack(x).count_below(r))
        .sum()
}

/// The `k`-th non-members for each `k` of `ks` (ascending), from the set's maximal runs.
pub(super) fn select_absent_in_runs(
    runs: impl Iterator<Item = (u32, u32)>,
    ks: &[u32],
    out: &mut impl Extend<super::Rank>,
) {
    let mut ks = ks.iter().copied().peekable();
    let mut base = 0u64; // non-members before `pos`
    let mut pos = 0u64; // first rank after the previous run
    for (lo, hi_) in runs {
        let gap = u64::from(lo) - pos;
        while let Some(&k) = ks.peek().filter(|&&k| u64::from(k) < base + gap) {
            out.extend([super::Rank((pos + (u64::from(k) - base)) as u32)]);
            ks.next();
        }
        base += gap;
        pos = u64::from(hi_) + 1;
    }
    out.extend(ks.map(|k| super::Rank((pos + (u64::from(k) - base)) as u32)));
}

// ---------------------------------------------------------------------------------------------
// Dense bitsets.

/// The dense words as a progression list (greedy: each maximal run of two or more ranks a
/// step-1 progression, lone ranks joined into progressions where they line up).
pub(super) fn dense_to_aps(words: &[u64]) -> Vec<u64> {
    let mut out = Vec::new();
    let mut open: Option<u32> = None; // first member of the run being read
    for (i, &w) in words.iter().enumerate() {
        let base = (i as u32) << 6;
        let mut bit = 0u32;
        while bit < 64 {
            let rest = w >> bit; // zeros shift in at the top
            match open {
                Some(first) => {
                    bit += rest.trailing_ones();
                    if bit < 64 {
                        push_piece(&mut out, first, base + bit - 1);
                        open = None;
                    }
                }
                None => {
                    bit += rest.trailing_zeros().min(64 - bit);
                    if bit < 64 {
                        open = Some(base + bit);
                    }
                }
            }
        }
    }
    if let Some(first) = open {
        push_piece(&mut out, first, (((words.len() as u64) << 6) - 1) as u32);
    }
    out
}

/// Appends a maximal run: a lone rank through the greedy joiner, a longer run as step 1.
fn push_piece(out: &mut Vec<u64>, lo: u32, hi_: u32) {
    if lo == hi_ {
        push(out, Ap::new(lo, 1, 1));
    } else {
        push_run(out, lo, hi_, true);
    }
}

/// The progression list as dense words (exactly enough to hold its highest member).
pub(super) fn aps_to_dense(aps: &[u64]) -> Vec<u64> {
    let mut words = vec![0u64; aps.last().map_or(0, |&x| words_for(hi(x)))];
    for &x in aps {
        let ap = Ap::unpack(x);
        if ap.step == 1 {
            dense_insert_range(&mut words, ap.lo, ap.hi());
        } else {
            for k in 0..ap.cnt {
                let r = ap.lo + k * ap.step;
                words[(r >> 6) as usize] |= 1u64 << (r & 63);
            }
        }
    }
    words
}

/// The words `lo..=hi` touches, each with the mask of its bits in the range, in order.
fn word_masks(lo_: u32, hi_: u32) -> impl Iterator<Item = (usize, u64)> {
    let (lo_, hi_) = (u64::from(lo_), u64::from(hi_));
    let (first_w, last_w) = ((lo_ >> 6) as usize, (hi_ >> 6) as usize);
    (first_w..=last_w)
        .filter(move |_| lo_ <= hi_)
        .map(move |w| {
            let first = if w == first_w { (lo_ & 63) as u32 } else { 0 };
            let last = if w == last_w { (hi_ & 63) as u32 } else { 63 };
            (w, (u64::MAX >> (63 - last)) & (u64::MAX << first))
        })
}

/// Sets `lo..=hi` in `words` (which must cover `hi`); returns how many bits were new.
pub(super) fn dense_insert_range(words: &mut [u64], lo_: u32, hi_: u32) -> u32 {
    let mut added = 0;
    for (w, mask) in word_masks(lo_, hi_) {
        added += (mask & !words[w]).count_ones();
        words[w] |= mask;
    }
    added
}

/// Whether every bit of `lo..=hi` is set in `words`.
pub(super) fn dense_contains_range(words: &[u64], lo_: u32, hi_: u32) -> bool {
    word_masks(lo_, hi_).all(|(w, mask)| words.get(w).is_some_and(|&x| x & mask == mask))
}
