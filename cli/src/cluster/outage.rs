//! The report's `outages`: what each cut (`--cut`, `--cut-oneway`) and each partition
//! (`--partition`) did to the ranks it cut off and to the others, measured from the nodes'
//! lines, and (partitions) whether the outcome the membership design promises happened.
//!
//! For every such fault that went in: every healthy rank's longest delivery gap from the cut
//! to the end of the workload or the rank's exit (`gap_ms`: a rank cut off shows its silence,
//! however it ends), the ranks removed since the cut (when, by whom, when told, how they
//! exited) and those removed after the heal, and the time from the heal until every remaining
//! rank delivered an op started after it (`resume_after_heal_ms`).
//!
//! A cut (`--cut`, `--cut-oneway`) gets `checks` and `ok` (issue #23 item 2): nobody removed
//! since the cut and every healthy rank's longest gap within [`CUT_GAP_MS`]; the run's `pass`
//! needs them when the detector ran and cuts were its only faults.
//!
//! A partition also gets its two sides ([`sides`](super::expect::sides): minority and
//! majority by member count, an even split won by the side holding rank 0), each with:
//! `continued` (an xcast started by a member after the cut delivered at every healthy member,
//! and a RELM message between two members delivered, both before the heal; a side of one
//! rank has no RELM pair: `relm_continued` is `null` there), `resume_ms` (from
//! the cut until the first op started after it was delivered at every healthy member of the
//! side; per rank, its own first such delivery), `decided` (the view changes its members
//! reported between the cut and the heal; `decided_after_heal`: from the heal on, so whose
//! view the removals after a heal were), `removed`, `gap_ms`, and `crossed` (ops delivered
//! across the cut while it was in: a harness failure if not 0). Its `checks` are the issue's
//! "Done when": the majority continued within [`MAJORITY_RESUME_MS`], the minority decided
//! nothing, no majority rank was removed, and (once healed, after a cut of at least the
//! silence rule's loud time: 1 s) every minority rank was told it was removed and exited with
//! status 3; `ok` needs them all and no crossing, and the run's `pass` needs every
//! partition's `ok`. A partition of at most 1 s may be waited out: the majority's resumption
//! through the heal counts.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{json, Value};

use super::evictions::{Gone, Outcome};
use super::expect::{sides, silence_rule};
use super::faults::NetFault;
use super::procs::exit_fields;
use super::tally::Tally;
use crate::nft::NetKind;

/// Issue #23 item 2: while one tree link is cut (one way or both), every rank's longest
/// delivery gap stays within this (ms): the link is noticed gray within
/// `membership.gray_after` and relayed around.
pub(super) const CUT_GAP_MS: f64 = 1500.0;

/// A cut's checks (`--cut`, `--cut-oneway`), added to its JSON as `checks` and `ok`: nobody
/// removed since the cut, and every healthy rank's longest gap within [`CUT_GAP_MS`]. They
/// decide the run's `pass` (`enforced`) when the detector ran and the run's only faults were
/// cuts (a kill, a pause or another network fault makes gaps and removals of its own; then the
/// checks are reported, not enforced). Returns whether the run may pass on this cut.
fn cut_checks(
    w: &Window<'_>,
    v: &mut Value,
    lines: &mut Vec<String>,
    worst: Option<(u32, f64)>,
    nobody_removed: bool,
) -> bool {
    let only_cuts = w.o.detect
        && w.dead.is_empty()
        && w.o.asked_pauses.is_empty()
        && w.o
            .net
            .iter()
            .all(|f| matches!(f.kind, NetKind::Cut(..) | NetKind::CutOneway(..)));
    let gap_ok = worst.is_none_or(|(_, g)| g <= CUT_GAP_MS);
    let ok = nobody_removed && gap_ok;
    v["checks"] = json!({
        "nobody_removed": nobody_removed,
        "gap_within_ms": CUT_GAP_MS,
        "gap_ok": gap_ok,
        "enforced": only_cuts,
    });
    v["ok"] = json!(ok);
    lines.push(format!(
        "    checks{}: nobody removed {nobody_removed}, every gap within {CUT_GAP_MS} ms {gap_ok}",
        if only_cuts {
            ""
        } else {
            " (not enforced: other faults)"
        }
    ));
    ok || !only_cuts
}

/// A partition's majority must deliver, at every healthy member, an op started after the cut
/// within this long of it (issue #23: "continues within 1 s of the cut").
pub(super) const MAJORITY_RESUME_MS: f64 = 1000.0;

/// Every outage measured, its text lines, and whether every partition met its checks.
pub(super) struct Outages {
    pub(super) json: Value,
    pub(super) lines: Vec<String>,
    /// Every partition's `ok`, and every enforced cut's (true without either).
    pub(super) ok: bool,
}

/// The fault's window and the run's facts an outage is measured from.
struct Window<'a> {
    t: &'a Tally,
    o: &'a Outcome,
    /// Wall times: the rules in; the heal (the launcher asked nft to take them out; `None`
    /// for a fault that lasts to the end); the end of the workload.
    cut: f64,
    heal: Option<f64>,
    end: f64,
    /// Ranks killed or that exited by themselves: not healthy.
    dead: &'a BTreeSet<u32>,
}

impl Window<'_> {
    fn into(&self, wall: f64) -> i64 {
        (wall - self.o.start_wall).round() as i64
    }

    /// The end of the cut as far as deliveries go: the heal, or the end of the workload.
    fn until(&self) -> f64 {
        self.heal.unwrap_or(self.end)
    }

    /// Wall time rank `r` exited (as the launcher saw it), if it did.
    fn exit_wall(&self, r: u32) -> Option<f64> {
        self.o
            .exits
            .get(&r)
            .map(|e| self.o.start_wall + e.at_ms as f64)
    }

    /// Rank `r`'s longest wait between deliveries from the cut to the end of the workload
    /// (or its exit, if earlier); the cut and that end count as deliveries.
    fn gap(&self, r: u32) -> f64 {
        let stop = self.exit_wall(r).map_or(self.end, |x| x.min(self.end));
        let mut at: Vec<f64> = self
            .t
            .delivered_at
            .values()
            .filter_map(|m| m.get(&r).copied())
            .filter(|x| *x > self.cut && *x <= stop)
            .collect();
        at.push(self.cut);
        at.push(stop.max(self.cut));
        at.sort_by(f64::total_cmp);
        at.windows(2)
            .map(|w| w[1] - w[0])
            .fold(0.0, f64::max)
            .round()
    }

    /// Rank `r`'s first delivery of an op started after `from`, in ms after `from`.
    fn first_after(&self, r: u32, from: f64) -> Option<f64> {
        self.t
            .started
            .iter()
            .filter(|(_, (_, at))| *at > from)
            .filter_map(|(p, _)| self.t.delivered_at.get(p).and_then(|d| d.get(&r)))
            .map(|x| x - from)
            .reduce(f64::min)
    }

    /// From `from` until the first op started after it was delivered at every rank of
    /// `members` (ms), if one was; `None` also when `members` is empty.
    fn resume(&self, members: &[u32], from: f64) -> Option<f64> {
        if members.is_empty() {
            return None;
        }
        self.t
            .started
            .iter()
            .filter(|(_, (_, at))| *at > from)
            .filter_map(|(p, _)| {
                let d = self.t.delivered_at.get(p)?;
                members
                    .iter()
                    .map(|m| d.get(m).copied())
                    .try_fold(f64::MIN, |w, x| x.map(|x| w.max(x)))
            })
            .map(|last| last - from)
            .reduce(f64::min)
            .map(f64::round)
    }

    /// The evicted ranks among `ranks` removed since the cut, as JSON, with whether each
    /// removal came after the heal.
    fn removed(&self, evicted: &[Gone], ranks: &BTreeSet<u32>) -> Vec<Value> {
        let cut_ms = self.into(self.cut);
        let heal_ms = self.heal.map(|h| self.into(h));
        evicted
            .iter()
            .filter(|g| ranks.contains(&g.rank) && g.at_ms >= cut_ms)
            .map(|g| {
                let (status, signal) = exit_fields(g.status);
                json!({"rank": g.rank, "at_ms": g.at_ms, "told_ms": g.told_ms,
                       "confirmed_by": g.confirmed_by, "status": status, "signal": signal,
                       "after_heal": heal_ms.is_some_and(|h| g.at_ms >= h)})
            })
            .collect()
    }
}

/// The outages of the run's cuts and partitions.
pub(super) fn outages(
    t: &Tally,
    o: &Outcome,
    dead: &BTreeSet<u32>,
    evicted: &[Gone],
    nodes: u32,
) -> Outages {
    let mut all = Vec::new();
    let mut lines = Vec::new();
    let mut ok = true;
    for f in &o.net {
        let Some((_, _, cut)) = f.applied else {
            continue;
        };
        if !matches!(
            f.kind,
            NetKind::Cut(..) | NetKind::CutOneway(..) | NetKind::Partition(_)
        ) {
            continue;
        }
        let w = Window {
            t,
            o,
            cut,
            heal: f.healing_wall,
            end: o.start_wall + o.work_ms as f64,
            dead,
        };
        let (v, l, part_ok) = outage(&w, f, evicted, nodes);
        ok &= part_ok;
        all.push(v);
        lines.extend(l);
    }
    Outages {
        json: Value::Array(all),
        lines,
        ok,
    }
}

/// One outage: its JSON, its text lines, and (a partition) whether its checks held.
fn outage(
    w: &Window<'_>,
    f: &NetFault,
    evicted: &[Gone],
    nodes: u32,
) -> (Value, Vec<String>, bool) {
    let healthy: BTreeSet<u32> = (0..nodes).filter(|r| !w.dead.contains(r)).collect();
    let gaps: BTreeMap<u32, f64> = healthy.iter().map(|r| (*r, w.gap(*r))).collect();
    let worst = gaps
        .iter()
        .max_by(|a, b| a.1.total_cmp(b.1))
        .map(|(r, g)| (*r, *g));
    let removed = w.removed(evicted, &healthy);
    let removed_after_heal: Vec<&Value> =
        removed.iter().filter(|v| v["after_heal"] == true).collect();
    let gone: BTreeSet<u32> = evicted.iter().map(|g| g.rank).collect();
    let remaining: Vec<u32> = healthy
        .iter()
        .copied()
        .filter(|r| !gone.contains(r))
        .collect();
    let after_heal = w.heal.and_then(|h| w.resume(&remaining, h));
    let mut v = json!({
        "fault": f.flag,
        "at_ms": w.into(w.cut),
        "healed_ms": w.heal.map(|h| w.into(h)),
        "cut_wall_ms": w.cut,
        "healed_wall_ms": w.heal,
        "gap_ms": gaps,
        "gap_ms_max": worst.map(|x| x.1),
        "gap_ms_max_rank": worst.map(|x| x.0),
        "removed": removed,
        "removed_after_heal": removed_after_heal.iter().map(|v| &v["rank"]).collect::<Vec<_>>(),
        "resume_after_heal_ms": after_heal,
    });
    let mut lines = vec![format!(
        "  {}: longest delivery gap {} ms (rank {}) from the cut on; removed since the cut: {:?} \
         ({} after the heal); after the heal every remaining rank delivered a later op {}",
        f.flag,
        worst.map_or("-".into(), |x| x.1.to_string()),
        worst.map_or("-".into(), |x| x.0.to_string()),
        removed.iter().map(|v| &v["rank"]).collect::<Vec<_>>(),
        removed_after_heal.len(),
        match (w.heal, after_heal) {
            (None, _) => "(never healed)".to_string(),
            (Some(_), Some(ms)) => format!("within {ms} ms"),
            (Some(_), None) => "NEVER".to_string(),
        }
    )];
    let NetKind::Partition(_) = f.kind else {
        let ok = cut_checks(w, &mut v, &mut lines, worst, removed.is_empty());
        return (v, lines, ok);
    };
    let (minority, majority) = sides(&f.side, nodes);
    let side_of = |r: u32| minority.contains(&r);
    let crossed = crossed(w, &side_of);
    let min = side(w, "minority", &minority, evicted, &side_of);
    let maj = side(w, "majority", &majority, evicted, &side_of);
    let healthy_minority: Vec<u32> = minority
        .iter()
        .copied()
        .filter(|r| !w.dead.contains(r))
        .collect();
    // Within 1 s of the cut; a partition that lasted longer must be gone on through (xcast
    // and RELM during the cut), a shorter one may be waited out.
    let lasted = w.until() - w.cut;
    let majority_within = maj.resume_ms.is_some_and(|ms| ms <= MAJORITY_RESUME_MS)
        && (maj.continued || lasted <= MAJORITY_RESUME_MS);
    let minority_decided_nothing = min.decided.is_empty();
    let no_majority_removed = maj.removed.is_empty();
    // Only a healed partition can tell its minority, and only one that silenced it long
    // enough that it must go (the silence rule's loud time, as for a pause or a blackhole);
    // otherwise not asked (`null`).
    let (_, loud) = silence_rule();
    let told = w.heal.filter(|h| h - w.cut >= loud as f64).map(|_| {
        healthy_minority.iter().all(|r| {
            evicted.iter().any(|g| {
                g.rank == *r
                    && g.told_ms.is_some()
                    && g.status.and_then(|s| s.code()) == Some(i32::from(crate::EXIT_EVICTED))
            })
        })
    });
    let ok = majority_within
        && minority_decided_nothing
        && no_majority_removed
        && told != Some(false)
        && crossed.0 == 0
        && crossed.1 == 0;
    v["sides"] = json!([min.json, maj.json]);
    v["crossed"] = json!({"xcast": crossed.0, "relm": crossed.1});
    v["checks"] = json!({
        "majority_continued_within_1s": majority_within,
        "minority_decided_nothing": minority_decided_nothing,
        "no_majority_rank_removed": no_majority_removed,
        "minority_told_and_exited_3": told,
        "ok": ok,
    });
    for s in [&min, &maj] {
        lines.push(format!(
            "    {} {:?}: {}; resume {}; decided {}; removed {:?}; longest gap {} ms",
            s.role,
            s.ranks,
            if s.continued {
                "continued (xcast and RELM among its members during the cut)"
            } else {
                "did NOT continue during the cut"
            },
            match s.resume_ms {
                None => "never".to_string(),
                Some(ms) if w.cut + ms < w.until() => format!("{ms} ms after the cut"),
                Some(ms) => format!("{ms} ms after the cut (after the heal)"),
            },
            if s.decided.is_empty() {
                "nothing".to_string()
            } else {
                format!("{} view(s)", s.decided.len())
            },
            s.removed.iter().map(|v| &v["rank"]).collect::<Vec<_>>(),
            s.gap_max.map_or("-".into(), |g| g.to_string())
        ));
    }
    lines.push(format!(
        "    checks: majority continued within 1 s {majority_within}, minority decided nothing \
         {minority_decided_nothing}, no majority rank removed {no_majority_removed}, minority \
         told and exited 3 {}; ops across the cut {}+{}: {}",
        told.map_or("n/a (never healed)".into(), |x| x.to_string()),
        crossed.0,
        crossed.1,
        if ok { "ok" } else { "FAILED" }
    ));
    (v, lines, ok)
}

/// One side of a partition, measured.
struct Side {
    role: &'static str,
    ranks: Vec<u32>,
    continued: bool,
    resume_ms: Option<f64>,
    decided: Vec<Value>,
    removed: Vec<Value>,
    gap_max: Option<f64>,
    json: Value,
}

/// Side `ranks` of a partition (`minority(r)`: whether `r` is on the minority side).
fn side(
    w: &Window<'_>,
    role: &'static str,
    ranks: &[u32],
    evicted: &[Gone],
    minority: &dyn Fn(u32) -> bool,
) -> Side {
    let t = w.t;
    let healthy: Vec<u32> = ranks
        .iter()
        .copied()
        .filter(|r| !w.dead.contains(r))
        .collect();
    let mine = |r: u32| minority(r) == (role == "minority");
    let (cut, until) = (w.cut, w.until());
    // An xcast started by a member during the cut, delivered at every healthy member before
    // the heal.
    let xcast = t.started.iter().any(|(p, (origin, at))| {
        mine(*origin)
            && *at > cut
            && *at < until
            && t.delivered_at
                .get(p)
                .is_some_and(|d| healthy.iter().all(|m| d.get(m).is_some_and(|x| *x < until)))
    });
    // A RELM message between two members, started during the cut and delivered before the
    // heal (`None`: a side of one healthy rank has no pair to send between).
    let relm = (healthy.len() > 1).then(|| {
        t.relm_started.iter().any(|(p, (src, dst, _))| {
            mine(*src)
                && mine(*dst)
                && t.relm_started_at
                    .get(p)
                    .is_some_and(|at| *at > cut && *at < until)
                && t.relm_delivered_at.get(p).is_some_and(|x| *x < until)
        })
    });
    let resume_ms = w.resume(&healthy, cut);
    let by_rank: BTreeMap<u32, Option<f64>> = healthy
        .iter()
        .map(|r| (*r, w.first_after(*r, cut).map(f64::round)))
        .collect();
    let decided = decided_in(w, &mine, cut, until);
    // After the heal: who decided the removals that followed (the view changes its members
    // reported from the heal to the end of the run).
    let decided_after = w.heal.map(|h| decided_in(w, &mine, h, f64::INFINITY));
    let set: BTreeSet<u32> = healthy.iter().copied().collect();
    let removed = w.removed(evicted, &set);
    let gone: BTreeSet<u32> = evicted.iter().map(|g| g.rank).collect();
    let remaining: Vec<u32> = healthy
        .iter()
        .copied()
        .filter(|r| !gone.contains(r))
        .collect();
    let after_heal = w.heal.and_then(|h| w.resume(&remaining, h));
    let gaps: BTreeMap<u32, f64> = healthy.iter().map(|r| (*r, w.gap(*r))).collect();
    let gap_max = gaps.values().copied().reduce(f64::max);
    let continued = xcast && relm != Some(false);
    let json = json!({
        "role": role,
        "ranks": ranks,
        "continued": continued,
        "xcast_continued": xcast,
        "relm_continued": relm,
        "resume_ms": resume_ms,
        "resumed_during_cut": resume_ms.is_some_and(|ms| cut + ms < until),
        "resume_ms_by_rank": by_rank,
        "decided": decided,
        "decided_after_heal": decided_after,
        "removed": removed,
        "remaining": remaining,
        "resume_after_heal_ms": after_heal,
        "gap_ms_max": gap_max,
    });
    Side {
        role,
        ranks: ranks.to_vec(),
        continued,
        resume_ms,
        decided,
        removed,
        gap_max,
        json,
    }
}

/// The views the ranks `mine` reported decided between `from` and `to` (wall times), one
/// entry per (event, epoch): when first reported, by whom, and the ranks it named.
fn decided_in(w: &Window<'_>, mine: &dyn Fn(u32) -> bool, from: f64, to: f64) -> Vec<Value> {
    // (event, epoch) -> (first report, reporters, ranks named).
    type Seen<'a> = BTreeMap<(&'a str, u64), (f64, BTreeSet<u32>, Vec<u32>)>;
    let mut seen: Seen<'_> = BTreeMap::new();
    for d in
        w.t.decisions
            .iter()
            .filter(|d| mine(d.by) && d.t > from && d.t < to)
    {
        let e = seen
            .entry((d.kind, d.epoch))
            .or_insert_with(|| (d.t, BTreeSet::new(), d.ranks.clone()));
        e.0 = e.0.min(d.t);
        e.1.insert(d.by);
    }
    seen.into_iter()
        .map(|((kind, epoch), (first, by, named))| {
            json!({"event": kind, "epoch": epoch, "ranks": named, "first_ms": w.into(first),
                   "reported_by": by})
        })
        .collect()
}

/// Ops delivered across the cut while it was in: `(xcasts, RELM messages)` started on one
/// side after the cut and delivered on the other before the heal. Every packet between the
/// sides is dropped, so anything but `(0, 0)` means the rules did not hold.
fn crossed(w: &Window<'_>, minority: &dyn Fn(u32) -> bool) -> (usize, usize) {
    let t = w.t;
    let (cut, until) = (w.cut, w.until());
    let xcast = t
        .started
        .iter()
        .filter(|(_, (_, at))| *at > cut && *at < until)
        .filter(|(p, (origin, _))| {
            t.delivered_at.get(*p).is_some_and(|d| {
                d.iter()
                    .any(|(r, x)| minority(*r) != minority(*origin) && *x < until)
            })
        })
        .count();
    let relm = t
        .relm_started
        .iter()
        .filter(|(p, (src, dst, _))| {
            minority(*src) != minority(*dst)
                && t.relm_started_at
                    .get(*p)
                    .is_some_and(|at| *at > cut && *at < until)
                && t.relm_delivered_at.get(*p).is_some_and(|x| *x < until)
        })
        .count();
    (xcast, relm)
}
