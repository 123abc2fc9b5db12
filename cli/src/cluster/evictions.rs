//! Who left and why: the run's [`Outcome`], the attribution of every rank that left
//! ([`attribute`]: killed, exited by itself, or evicted) and the check of the evictions
//! against [`Expect`] with the survivors' resumption after each fault ([`evictions`]).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{json, Value};

use super::drive::Paused;
use super::expect::{Cause, Expect, EVICT_BOUND_MS, RESUME_BOUND_MS};
use super::faults::{NetFault, Pause};
use super::grow::Started;
use super::procs::{exit_fields, Exit, UNJOINED};
use super::tally::Tally;

/// What the report adds to the kills and pauses: exits, network faults, the table.
pub(super) struct Outcome {
    /// Wall time (ms since the Unix epoch) of the workload's start.
    pub(super) start_wall: f64,
    /// Wall time (ms since the Unix epoch) the nodes were launched.
    pub(super) launch_wall: f64,
    pub(super) exits: BTreeMap<u32, Exit>,
    pub(super) net: Vec<NetFault>,
    pub(super) table: Option<String>,
    /// The pauses as they happened, and as asked.
    pub(super) pauses: Vec<Paused>,
    pub(super) asked_pauses: Vec<Pause>,
    pub(super) expect: Expect,
    /// Whether the nodes ran the heartbeat detector.
    pub(super) detect: bool,
    /// How long the workload ran (ms).
    pub(super) work_ms: u64,
    /// The joiners started (`--grow`).
    pub(super) joiners: Vec<Started>,
    /// The shrink campaigns asked (`--shrink`).
    pub(super) asked: Vec<super::shrink::Asked>,
    /// When every survivor had answered every command, every op was settled and every
    /// required confirmation and eviction was in, ms into the workload; `None`: not within the
    /// settling time (a hang).
    pub(super) settled: Option<u64>,
    /// The `--revoke`s as asked, and when each command was written (flag index -> wall time).
    pub(super) revokes: Vec<super::revokes::Asked>,
    pub(super) revokes_sent: BTreeMap<usize, f64>,
}

/// How a rank left the cluster before the end.
#[derive(Debug)]
pub(super) struct Gone {
    pub(super) rank: u32,
    /// `killed` (by `--kill`), `exited` (by itself), `evicted` (a live rank removed).
    pub(super) cause: &'static str,
    /// Ms into the workload: the kill, the exit, or (evicted) the first `failure_confirmed`
    /// naming it or its own `evicted` line, whichever came first.
    pub(super) at_ms: i64,
    /// Evicted: when it printed `evicted` (it was told), ms into the workload.
    pub(super) told_ms: Option<i64>,
    /// Its exit status, if it exited before the end.
    pub(super) status: Option<std::process::ExitStatus>,
    /// Evicted and told: the epoch it was told.
    pub(super) epoch: Option<u64>,
    /// Evicted: the ranks whose `failure_confirmed` named it (after a partition each side may
    /// confirm the other: this says whose view it is).
    pub(super) confirmed_by: Vec<u32>,
}

impl Gone {
    pub(super) fn json(&self) -> Value {
        let (status, signal) = exit_fields(self.status);
        let mut v = json!({"rank": self.rank, "at_ms": self.at_ms, "status": status,
                           "signal": signal});
        if self.cause == "evicted" {
            v["told_ms"] = json!(self.told_ms);
            v["epoch"] = json!(self.epoch);
            v["confirmed_by"] = json!(self.confirmed_by);
        } else {
            v["cause"] = json!(self.cause);
        }
        v
    }
}

/// Attributes every rank that left: `(deaths, evicted)`. A rank killed by `--kill` is a death
/// whatever it printed. A rank that exited without being told it was evicted (no `evicted`
/// line, a status other than 3) died by itself, e.g. an outside tester's SIGKILL. A live rank
/// that a `failure_confirmed` named, or that was told it was evicted, is evicted, whether it
/// then exited or is still running.
pub(super) fn attribute(
    t: &Tally,
    killed_at_ms: &BTreeMap<u32, u128>,
    o: &Outcome,
) -> (Vec<Gone>, Vec<Gone>) {
    let into = |wall: f64| (wall - o.start_wall).round() as i64;
    let evicted_status = Some(i32::from(crate::EXIT_EVICTED));
    let mut deaths = Vec::new();
    let mut evicted = Vec::new();
    let ranks: BTreeSet<u32> = killed_at_ms
        .keys()
        .chain(o.exits.keys())
        .chain(t.evicted.keys())
        .chain(t.confirmed.keys())
        .copied()
        // A joiner that exited before its admission never was a rank (its `join_failed` is
        // the report's `join_failures`).
        .filter(|r| *r < UNJOINED)
        // A shrink target that left (printed `left`) departed: neither a death nor an
        // eviction (the report's `campaigns` checks how it exited); one killed mid-campaign
        // is still a death.
        .filter(|r| killed_at_ms.contains_key(r) || !t.left.contains_key(r))
        .collect();
    for r in ranks {
        let exit = o.exits.get(&r);
        let status = exit.map(|e| e.status);
        let told = t.evicted.get(&r);
        if let Some(at) = killed_at_ms.get(&r) {
            deaths.push(Gone {
                rank: r,
                cause: "killed",
                at_ms: i64::try_from(*at).unwrap_or(i64::MAX),
                told_ms: None,
                status,
                epoch: None,
                confirmed_by: Vec::new(),
            });
        } else if let (Some(e), None) = (exit, told) {
            if e.status.code() != evicted_status {
                deaths.push(Gone {
                    rank: r,
                    cause: "exited",
                    at_ms: e.at_ms,
                    told_ms: None,
                    status,
                    epoch: None,
                    confirmed_by: Vec::new(),
                });
                continue;
            }
        }
        if killed_at_ms.contains_key(&r) {
            continue;
        }
        let confirmed = t
            .confirmed
            .get(&r)
            .and_then(|m| m.values().copied().reduce(f64::min));
        let first = [confirmed, told.map(|x| x.0)]
            .into_iter()
            .flatten()
            .reduce(f64::min);
        let at_ms = first.map_or_else(|| exit.map_or(0, |e| e.at_ms), into);
        evicted.push(Gone {
            rank: r,
            cause: "evicted",
            at_ms,
            told_ms: told.map(|x| into(x.0)),
            status,
            epoch: told.and_then(|x| x.1),
            confirmed_by: t
                .confirmed
                .get(&r)
                .map(|m| m.keys().copied().collect())
                .unwrap_or_default(),
        });
    }
    (deaths, evicted)
}

/// One eviction the faults required, and how it went.
pub(super) struct Required {
    pub(super) rank: u32,
    /// Ms from the start of its fault until every survivor confirmed it removed (`None`: not
    /// at every survivor).
    pub(super) evict_ms: Option<f64>,
    /// Ms from the start of its fault until the first survivor, and half the survivors,
    /// confirmed it removed (detection vs. dissemination).
    pub(super) first_ms: Option<f64>,
    pub(super) median_ms: Option<f64>,
    /// When it printed `evicted`, ms into the workload.
    pub(super) told_ms: Option<i64>,
    pub(super) status: Option<std::process::ExitStatus>,
}

impl Required {
    /// Confirmed at every survivor within [`EVICT_BOUND_MS`], told, and exited with status 3
    /// (`evicted`).
    pub(super) fn ok(&self) -> bool {
        self.evict_ms.is_some_and(|ms| ms <= EVICT_BOUND_MS)
            && self.told_ms.is_some()
            && self.status.and_then(|s| s.code()) == Some(i32::from(crate::EXIT_EVICTED))
    }

    pub(super) fn json(&self) -> Value {
        let (status, signal) = exit_fields(self.status);
        json!({"rank": self.rank, "evict_ms": self.evict_ms.map(|x| x.round()),
               "first_confirm_ms": self.first_ms.map(|x| x.round()),
               "median_confirm_ms": self.median_ms.map(|x| x.round()),
               "told_ms": self.told_ms, "status": status, "signal": signal, "ok": self.ok()})
    }
}

/// One fault's start and how long until every survivor delivered an op started after it.
pub(super) struct Resume {
    pub(super) flag: String,
    /// The fault's start, ms into the workload.
    pub(super) at_ms: i64,
    /// A pause (`--stop`): [`RESUME_BOUND_MS`] applies.
    pub(super) stop: bool,
    /// `None`: some survivor delivered no op started after it.
    pub(super) ms: Option<f64>,
}

/// The evictions checked against [`Expect`], and the resumption after each fault.
pub(super) struct Evictions {
    pub(super) required: Vec<Required>,
    /// Evicted ranks whose eviction was neither required nor allowed.
    pub(super) forbidden: Vec<u32>,
    /// Both endpoints of a cut for good evicted.
    pub(super) both_ends: Vec<(u32, u32)>,
    pub(super) resume: Vec<Resume>,
    /// With the detector on, the pauses' resumption is checked.
    pub(super) detect: bool,
}

impl Evictions {
    pub(super) fn ok(&self) -> bool {
        self.required.iter().all(Required::ok)
            && self.forbidden.is_empty()
            && self.both_ends.is_empty()
            && (!self.detect
                || self
                    .resume
                    .iter()
                    .filter(|r| r.stop)
                    .all(|r| r.ms.is_some_and(|ms| ms <= RESUME_BOUND_MS)))
    }

    /// The worst of `xs`; `None` if there are none or one is missing.
    pub(super) fn worst(xs: impl Iterator<Item = Option<f64>>) -> Option<f64> {
        let mut any = false;
        let m = xs
            .inspect(|_| any = true)
            .try_fold(0.0f64, |m, x| x.map(|x| m.max(x)));
        m.filter(|_| any).map(f64::round)
    }

    pub(super) fn evict_ms_max(&self) -> Option<f64> {
        Self::worst(self.required.iter().map(|r| r.evict_ms))
    }

    /// The slowest resumption after a pause.
    pub(super) fn resume_ms(&self) -> Option<f64> {
        Self::worst(self.resume.iter().filter(|r| r.stop).map(|r| r.ms))
    }
}

/// Checks every eviction against the expectations and measures how the survivors resumed
/// after each fault.
pub(super) fn evictions(
    t: &Tally,
    killed: &BTreeMap<u32, f64>,
    survivors: &BTreeSet<u32>,
    evicted: &[Gone],
    o: &Outcome,
) -> Evictions {
    let e = &o.expect;
    let into = |wall: f64| (wall - o.start_wall).round() as i64;
    // The wall time each fault requiring an eviction started.
    let started = |c: &Cause| match *c {
        Cause::Stop(i) => o.pauses.iter().find(|p| p.asked == i).map(|p| p.wall),
        Cause::Net(i) => o.net[i].applied.map(|a| a.2),
    };
    let required = e
        .required
        .iter()
        .map(|(r, causes)| {
            let from = causes.iter().filter_map(started).reduce(f64::min);
            let m = t.confirmed.get(r);
            let everywhere = m.is_some_and(|m| {
                survivors
                    .iter()
                    .filter(|s| t.must_confirm(**s, *r))
                    .all(|s| m.contains_key(s))
            });
            let last = m.and_then(|m| {
                survivors
                    .iter()
                    .filter_map(|s| m.get(s))
                    .copied()
                    .reduce(f64::max)
            });
            let mut at: Vec<f64> = m
                .map(|m| survivors.iter().filter_map(|s| m.get(s)).copied().collect())
                .unwrap_or_default();
            at.sort_by(f64::total_cmp);
            let since = |x: Option<&f64>| from.zip(x).map(|(f, x)| (x - f).max(0.0));
            let g = evicted.iter().find(|g| g.rank == *r);
            Required {
                rank: *r,
                first_ms: since(at.first()),
                median_ms: since(at.get(at.len() / 2)),
                evict_ms: match (from, last) {
                    (Some(from), Some(last)) if everywhere => Some((last - from).max(0.0)),
                    _ => None,
                },
                told_ms: g.and_then(|g| g.told_ms),
                status: g.and_then(|g| g.status),
            }
        })
        .collect();
    let gone: BTreeSet<u32> = evicted.iter().map(|g| g.rank).collect();
    let forbidden = gone.iter().copied().filter(|r| !e.may_go(*r)).collect();
    let both_ends = e
        .one_of
        .iter()
        .copied()
        .filter(|(a, b)| gone.contains(a) && gone.contains(b))
        .collect();
    // Until every survivor delivered an op started after `from` (wall time).
    let resumed = |from: f64| -> Option<f64> {
        let mut worst = 0.0f64;
        // A joiner admitted after the fault began has nothing to resume.
        for s in survivors.iter().filter(|s| t.member_at(**s, from)) {
            let first = t
                .started
                .iter()
                .filter(|(_, (_, at))| *at > from)
                .filter_map(|(p, _)| t.delivered_at.get(p).and_then(|d| d.get(s)))
                .copied()
                .reduce(f64::min)?;
            worst = worst.max(first - from);
        }
        Some(worst)
    };
    let mut resume: Vec<Resume> = Vec::new();
    for (r, wall) in killed {
        resume.push(Resume {
            flag: format!("--kill {r}@{}", into(*wall)),
            at_ms: into(*wall),
            stop: false,
            ms: resumed(*wall),
        });
    }
    for p in &o.pauses {
        let asked = o.asked_pauses.get(p.asked);
        resume.push(Resume {
            flag: asked.map_or_else(
                || format!("--stop {}", p.rank),
                |a| format!("--stop {}@{}+{}", a.rank, a.at_ms, a.dur_ms),
            ),
            at_ms: into(p.wall),
            stop: true,
            ms: resumed(p.wall),
        });
    }
    for f in &o.net {
        if let Some((_, _, wall)) = f.applied {
            resume.push(Resume {
                flag: f.flag.clone(),
                at_ms: into(wall),
                stop: false,
                ms: resumed(wall),
            });
        }
    }
    resume.sort_by_key(|r| r.at_ms);
    Evictions {
        required,
        forbidden,
        both_ends,
        resume,
        detect: o.detect,
    }
}
