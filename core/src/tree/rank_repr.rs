//! The two representations behind [`RankSet`](super::RankSet), as functions on its one `Vec<u64>`:
//! a **dense** bitset (word `i` holds ranks `64i..64i+64`) and a **run list** (sorted, disjoint,
//! non-adjacent inclusive runs, each packed `lo << 32 | hi`, so the packed values sort by `lo`).
//!
//! Every function here keeps its representation canonical: a run list never holds two runs that
//! overlap or touch, a dense vector may carry trailing zero words.

/// Packs the inclusive run `lo..=hi`.
#[inline]
pub(super) fn pack(lo: u32, hi: u32) -> u64 {
    (u64::from(lo) << 32) | u64::from(hi)
}

/// The run's first member.
#[inline]
pub(super) fn lo(run: u64) -> u32 {
    (run >> 32) as u32
}

/// The run's last member.
#[inline]
pub(super) fn hi(run: u64) -> u32 {
    run as u32
}

/// Words a dense bitset needs to hold `max`.
#[inline]
pub(super) fn words_for(max: u32) -> usize {
    (max >> 6) as usize + 1
}

// ---------------------------------------------------------------------------------------------
// Run lists.

/// Index of the first run whose `lo > r` (so the run that may hold `r` is the one before it).
#[inline]
fn after(runs: &[u64], r: u32) -> usize {
    let key = pack(r, u32::MAX);
    runs.partition_point(|&x| x <= key)
}

/// Whether `r` is in some run. O(log runs).
#[inline]
pub(super) fn runs_contains(runs: &[u64], r: u32) -> bool {
    match runs.last() {
        None => false,
        Some(&last) if hi(last) < r => false,
        Some(_) => {
            let i = after(runs, r);
            i > 0 && hi(runs[i - 1]) >= r
        }
    }
}

/// Whether every rank of `lo..=hi` is in one run.
pub(super) fn runs_contains_range(runs: &[u64], lo: u32, hi_: u32) -> bool {
    let i = after(runs, lo);
    i > 0 && hi(runs[i - 1]) >= hi_
}

/// Adds `lo..=hi` (`lo <= hi`), merging with every run it overlaps or touches; returns how
/// many ranks were new.
pub(super) fn runs_insert_range(runs: &mut Vec<u64>, lo_: u32, hi_: u32) -> u32 {
    debug_assert!(lo_ <= hi_);
    // First run that can merge: the last one starting at or before `lo`, if it reaches
    // `lo - 1`; else the first one starting after `lo`.
    let mut start = after(runs, lo_);
    if start > 0 && u64::from(hi(runs[start - 1])) + 1 >= u64::from(lo_) {
        start -= 1;
    }
    // One past the last run that can merge: every run starting at or before `hi + 1`.
    let end = if hi_ == u32::MAX {
        runs.len()
    } else {
        after(runs, hi_ + 1)
    };
    let mut new_lo = lo_;
    let mut new_hi = hi_;
    let mut covered: u64 = 0; // members of `lo..=hi` already present
    for &run in &runs[start..end.max(start)] {
        new_lo = new_lo.min(lo(run));
        new_hi = new_hi.max(hi(run));
        let a = lo(run).max(lo_);
        let b = hi(run).min(hi_);
        if a <= b {
            covered += u64::from(b - a) + 1;
        }
    }
    let added = u64::from(hi_ - lo_) + 1 - covered;
    let merged = pack(new_lo, new_hi);
    if end > start {
        runs[start] = merged;
        runs.drain(start + 1..end);
    } else {
        runs.insert(start, merged);
    }
    // `added <= 2^32`; it is 2^32 only for the whole `u32` range inserted into an empty set,
    // which the callers cannot do (ranks stop below `u32::MAX`).
    added as u32
}

/// Removes `r`; returns whether it was a member. May split a run in two.
pub(super) fn runs_remove(runs: &mut Vec<u64>, r: u32) -> bool {
    let i = after(runs, r);
    if i == 0 || hi(runs[i - 1]) < r {
        return false;
    }
    let run = runs[i - 1];
    let (a, b) = (lo(run), hi(run));
    match (a == r, b == r) {
        (true, true) => {
            runs.remove(i - 1);
        }
        (true, false) => runs[i - 1] = pack(r + 1, b),
        (false, true) => runs[i - 1] = pack(a, r - 1),
        (false, false) => {
            runs[i - 1] = pack(a, r - 1);
            runs.insert(i, pack(r + 1, b));
        }
    }
    true
}

/// Members of the run list below `r`. O(log runs + runs below `r`).
pub(super) fn runs_count_below(runs: &[u64], r: u32) -> u32 {
    let mut n = 0u32;
    for &run in &runs[..after(runs, r)] {
        if lo(run) >= r {
            break;
        }
        n += hi(run).min(r - 1) - lo(run) + 1;
    }
    n
}

/// The `k`-th non-members for each `k` of `ks` (ascending): one walk over the gaps.
pub(super) fn runs_select_absent(runs: &[u64], ks: &[u32], out: &mut impl Extend<super::Rank>) {
    let mut ks = ks.iter().copied().peekable();
    let mut base = 0u64; // non-members before `pos`
    let mut pos = 0u64; // first rank after the previous run
    for &run in runs {
        let gap = u64::from(lo(run)) - pos;
        while let Some(&k) = ks.peek().filter(|&&k| u64::from(k) < base + gap) {
            out.extend([super::Rank((pos + (u64::from(k) - base)) as u32)]);
            ks.next();
        }
        base += gap;
        pos = u64::from(hi(run)) + 1;
    }
    out.extend(ks.map(|k| super::Rank((pos + (u64::from(k) - base)) as u32)));
}

/// The union of two run lists, as a fresh run list.
pub(super) fn runs_union(a: &[u64], b: impl Iterator<Item = (u32, u32)>) -> Vec<u64> {
    let mut out: Vec<u64> = Vec::with_capacity(a.len());
    let mut push = |lo_: u32, hi_: u32| match out.last_mut() {
        Some(last) if u64::from(hi(*last)) + 1 >= u64::from(lo_) => {
            *last = pack(lo(*last), hi(*last).max(hi_));
        }
        _ => out.push(pack(lo_, hi_)),
    };
    let mut a = a.iter().map(|&r| (lo(r), hi(r))).peekable();
    let mut b = b.peekable();
    loop {
        let next = match (a.peek(), b.peek()) {
            (Some(&x), Some(&y)) if x.0 <= y.0 => a.next(),
            (Some(_), Some(_)) => b.next(),
            (Some(_), None) => a.next(),
            (None, Some(_)) => b.next(),
            (None, None) => break,
        };
        if let Some((l, h)) = next {
            push(l, h);
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Dense bitsets.

/// Maximal runs of set bits in `words`: the length the run list would have.
pub(super) fn dense_run_count(words: &[u64]) -> usize {
    let mut carry = 0u64; // the previous word's top bit, at bit 0
    let mut n = 0usize;
    for &w in words {
        // A run starts at each set bit whose lower neighbour is clear.
        n += (w & !((w << 1) | carry)).count_ones() as usize;
        carry = w >> 63;
    }
    n
}

/// The dense words as a run list.
pub(super) fn dense_to_runs(words: &[u64]) -> Vec<u64> {
    let mut out = Vec::with_capacity(dense_run_count(words));
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
                        out.push(pack(first, base + bit - 1));
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
        out.push(pack(first, (((words.len() as u64) << 6) - 1) as u32));
    }
    out
}

/// The run list as dense words (exactly enough to hold its highest member).
pub(super) fn runs_to_dense(runs: &[u64]) -> Vec<u64> {
    let mut words = vec![0u64; runs.last().map_or(0, |&r| words_for(hi(r)))];
    for &run in runs {
        dense_insert_range(&mut words, lo(run), hi(run));
    }
    words
}

/// Sets `lo..=hi` in `words` (which must cover `hi`); returns how many bits were new.
pub(super) fn dense_insert_range(words: &mut [u64], lo_: u32, hi_: u32) -> u32 {
    let mut added = 0;
    let mut r = u64::from(lo_);
    let hi_ = u64::from(hi_);
    while r <= hi_ {
        let w = (r >> 6) as usize;
        let first = (r & 63) as u32;
        let last = if (hi_ >> 6) as usize == w {
            (hi_ & 63) as u32
        } else {
            63
        };
        let mask = (u64::MAX >> (63 - last)) & (u64::MAX << first);
        added += (mask & !words[w]).count_ones();
        words[w] |= mask;
        r = ((w as u64) + 1) << 6;
    }
    added
}

/// Whether every bit of `lo..=hi` is set in `words`.
pub(super) fn dense_contains_range(words: &[u64], lo_: u32, hi_: u32) -> bool {
    let mut r = u64::from(lo_);
    let hi_ = u64::from(hi_);
    while r <= hi_ {
        let w = (r >> 6) as usize;
        let first = (r & 63) as u32;
        let last = if (hi_ >> 6) as usize == w {
            (hi_ & 63) as u32
        } else {
            63
        };
        let mask = (u64::MAX >> (63 - last)) & (u64::MAX << first);
        match words.get(w) {
            Some(&x) if x & mask == mask => {}
            _ => return false,
        }
        r = ((w as u64) + 1) << 6;
    }
    true
}
