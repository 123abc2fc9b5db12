//! What the faults let the cluster do to each live rank: the silence rule derived from the
//! detector's settings, the bounds on evictions and resumption, and [`Expect`] (the report's
//! `expect`): which evictions are required, allowed or forbidden.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{json, Value};

use super::faults::Faults;
use crate::nft::NetKind;

/// The core's gray timeout (`membership.gray_timeout`, the default the nodes run with): a live
/// rank whose tree link stays cut this long has one endpoint of the link removed (cause:
/// unreachable). A cut shorter than this must evict nobody.
pub(super) fn gray_timeout_ms() -> u64 {
    lifeline_core::MembershipConfig::default()
        .gray_timeout
        .as_millis()
}

/// Required evictions: confirmed at every survivor within this long of the fault's start.
pub(super) const EVICT_BOUND_MS: f64 = 600.0;

/// After a pause (`--stop`), every survivor delivers an op started after its start within
/// this long ("the rest continue within 1 s").
pub(super) const RESUME_BOUND_MS: f64 = 1000.0;

/// The silence rule, from the nodes' detector settings (the core's defaults, which
/// `lifeline node` uses: heartbeat period 100 ms, timeout 300 ms, refutation window 100 ms):
/// `(quiet, loud)` in ms. A rank silent (paused with `--stop`, or `--blackhole`d) for at most
/// `quiet` must not be evicted; for `loud` or longer it must be; in between either is correct.
///
/// - An observer suspects its subject after `timeout` of silence, and the last heartbeat it
///   heard is at most one `period` old when the silence begins, so a silence of at most
///   `timeout - period` (200 ms) is never suspected (and a suspected rank that speaks again
///   still refutes within `refute`): `quiet`.
/// - Every observer of a silent rank reports it at most `period + timeout + refute` (500 ms)
///   after the silence begins; twice that (1000 ms) leaves as long again for the alerts, the
///   coordinator's decision and its confirmation, and a rank silent that long is gone for any
///   practical purpose: `loud`.
pub(super) fn silence_rule() -> (u64, u64) {
    let d = lifeline_core::DetectConfig::default();
    let (period, timeout, refute) = (
        d.period.as_millis(),
        d.timeout.as_millis(),
        d.refute.as_millis(),
    );
    (
        timeout.saturating_sub(period),
        2 * (period + timeout + refute),
    )
}

/// A partition's two sides, `(minority, majority)`, over the ranks `0..nodes`: `side` (the set
/// as given) and the rest. The larger side is the majority; on an even split the side holding
/// rank 0 (the first view's root) wins, as with membership.md's weights (members 2, the root
/// 3: an even split has a winner).
pub(super) fn sides(side: &[u32], nodes: u32) -> (Vec<u32>, Vec<u32>) {
    let rest: Vec<u32> = (0..nodes).filter(|r| !side.contains(r)).collect();
    let weight = |s: &[u32]| 2 * s.len() + usize::from(s.contains(&0));
    if weight(side) > weight(&rest) {
        (rest, side.to_vec())
    } else {
        (side.to_vec(), rest)
    }
}

/// A fault that requires a rank's eviction.
#[derive(Clone, Copy, Debug)]
pub(super) enum Cause {
    /// [`Faults::pauses`]`[i]`.
    Stop(usize),
    /// [`Faults::net`]`[i]`.
    Net(usize),
}

/// What the faults let the cluster do to each live rank (with the detector on; without it,
/// nothing: every eviction is a false positive). A rank neither required nor allowed must not
/// be evicted: a bystander, a rank paused or blackholed for at most the quiet time of
/// [`silence_rule`], an endpoint of a cut shorter than the gray timeout.
#[derive(Debug, Default)]
pub(super) struct Expect {
    /// Rank -> the faults that require its eviction: a pause or a blackhole at least the loud
    /// time of [`silence_rule`] long.
    pub(super) required: BTreeMap<u32, Vec<Cause>>,
    /// Ranks whose eviction is allowed, not required: a rank paused or blackholed between
    /// the quiet and the loud time, the lossy rank of `--loss`, the endpoints of a cut for
    /// good (or at least the gray timeout long).
    pub(super) allowed: BTreeSet<u32>,
    /// Pairs of which at most one may be evicted: the endpoints of such a cut.
    pub(super) one_of: Vec<(u32, u32)>,
}

impl Expect {
    pub(super) fn new(faults: &Faults, detect: bool) -> Self {
        let mut e = Self::default();
        if !detect {
            return e;
        }
        let (quiet, loud) = silence_rule();
        let mut silent = |rank: u32, dur: u64, cause: Cause| {
            if dur >= loud {
                e.required.entry(rank).or_default().push(cause);
            } else if dur > quiet {
                e.allowed.insert(rank);
            }
        };
        for (i, p) in faults.pauses.iter().enumerate() {
            silent(p.rank, p.dur_ms, Cause::Stop(i));
        }
        for (i, f) in faults.net.iter().enumerate() {
            if let NetKind::Blackhole(r) = f.kind {
                silent(r, f.dur_ms.unwrap_or(u64::MAX), Cause::Net(i));
            }
        }
        for f in &faults.net {
            match f.kind {
                NetKind::Loss(r, _) => {
                    e.allowed.insert(r);
                }
                NetKind::Cut(a, b) | NetKind::CutOneway(a, b)
                    if f.dur_ms.is_none_or(|d| d >= gray_timeout_ms()) =>
                {
                    e.allowed.extend([a, b]);
                    e.one_of.push((a.min(b), a.max(b)));
                }
                // The minority side may be removed (after a heal, once cut off for the loud
                // time, it must be: the report's `outages` checks that), unless it was cut
                // off for no more than the quiet time; a majority rank never.
                NetKind::Partition(_) if f.dur_ms.is_none_or(|d| d > quiet) => {
                    let (minority, _) = sides(&f.side, faults.nodes);
                    e.allowed.extend(minority);
                }
                _ => {}
            }
        }
        let required = &e.required;
        e.allowed.retain(|r| !required.contains_key(r));
        e
    }

    /// Whether evicting `r` is required or allowed.
    pub(super) fn may_go(&self, r: u32) -> bool {
        self.required.contains_key(&r) || self.allowed.contains(&r)
    }

    pub(super) fn json(&self) -> Value {
        let (quiet, loud) = silence_rule();
        json!({
            "evict_required": self.required.keys().collect::<Vec<_>>(),
            "evict_allowed": self.allowed,
            "evict_at_most_one_of": self.one_of.iter().map(|(a, b)| [a, b]).collect::<Vec<_>>(),
            "silent_never_evicted_up_to_ms": quiet,
            "silent_evicted_from_ms": loud,
            "gray_timeout_ms": gray_timeout_ms(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::sides;

    #[test]
    fn the_larger_side_is_the_majority_and_rank_0_breaks_a_tie() {
        // The set as given may be either side.
        assert_eq!(
            sides(&[0, 1, 2, 3, 4, 5], 16),
            ((0..6).collect(), (6..16).collect())
        );
        assert_eq!(
            sides(&(6..16).collect::<Vec<_>>(), 16),
            ((0..6).collect(), (6..16).collect())
        );
        assert_eq!(sides(&[0], 16), (vec![0], (1..16).collect()));
        // 8 against 8: the side holding rank 0 (the first view's root) wins.
        assert_eq!(
            sides(&(8..16).collect::<Vec<_>>(), 16),
            ((8..16).collect(), (0..8).collect())
        );
        assert_eq!(
            sides(&(0..8).collect::<Vec<_>>(), 16).1,
            (0..8).collect::<Vec<_>>()
        );
        assert_eq!(sides(&[1], 2), (vec![1], vec![0]));
    }
}
