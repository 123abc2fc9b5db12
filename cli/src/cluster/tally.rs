//! Reading what the nodes print: [`Tally`] counts every JSON line (listening, link ups and
//! downs, confirmations, evictions, xcasts, RELM messages, stats) and answers whether the run
//! has settled and who was removed when.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

/// The QUIC endpoint's refusal counters (`lifeline_transport_quic::QuicStats`), whose sum
/// is the adapter's `handshakes_refused`.
pub(super) const QUIC_REFUSALS: [&str; 5] = [
    "strangers",
    "handshakes_failed",
    "malformed_hellos",
    "wrong_rank",
    "wrong_address",
];

/// A joiner's `joined` line.
#[derive(Clone, Debug)]
pub(super) struct Join {
    /// Wall time of the line (ms since the Unix epoch).
    pub(super) t: f64,
    pub(super) epoch: u64,
    pub(super) join_id: String,
    pub(super) join_ms: f64,
    pub(super) tries: u64,
    pub(super) contact: String,
}

/// A view that admitted joiners, as the members reported it (`admitted` lines).
#[derive(Clone, Debug, Default)]
pub(super) struct AdmitView {
    pub(super) ranks: BTreeSet<u32>,
    pub(super) members: u64,
    /// Wall time of the first report.
    pub(super) first: f64,
    pub(super) reporters: BTreeSet<u32>,
}

/// A `campaign_completed` line: wall time, campaign id, ranks removed, epoch.
pub(super) type Completed = (f64, String, Vec<u32>, u64);

/// A `departed` line: wall time, epoch, ranks, campaign ids.
pub(super) type DepartedLine = (f64, u64, Vec<u32>, Vec<String>);

/// One view change a rank reported: a decision of the membership protocol, wherever it was
/// taken.
#[derive(Clone, Debug)]
pub(super) struct Decision {
    /// Wall time of the line (ms since the Unix epoch).
    pub(super) t: f64,
    /// The rank that printed it.
    pub(super) by: u32,
    /// The line's event: `failure_confirmed`, `departed` or `admitted`.
    pub(super) kind: &'static str,
    pub(super) epoch: u64,
    /// The ranks it removed or admitted.
    pub(super) ranks: Vec<u32>,
}

/// What the nodes reported, and when.
#[derive(Default)]
pub(super) struct Tally {
    pub(super) listening: BTreeSet<u32>,
    pub(super) link_ups: u64,
    /// payload -> origin and the wall time the origin started it.
    pub(super) started: BTreeMap<String, (u32, f64)>,
    pub(super) refused_xcasts: u64,
    /// rank -> xcast commands answered (started or refused).
    pub(super) answers: BTreeMap<u32, u64>,
    /// payload -> rank -> deliveries.
    pub(super) delivered: BTreeMap<String, BTreeMap<u32, u32>>,
    /// payload -> rank -> wall time of its first delivery there.
    pub(super) delivered_at: BTreeMap<String, BTreeMap<u32, f64>>,
    /// (confirmed rank, reporter) -> `failure_confirmed` lines of the reporter naming it.
    pub(super) confirm_counts: BTreeMap<(u32, u32), u32>,
    /// peer -> (first link-down wall time, rank that saw it).
    pub(super) link_down: BTreeMap<u32, (f64, u32)>,
    /// dead rank -> survivor -> wall time of its failure_confirmed.
    pub(super) confirmed: BTreeMap<u32, BTreeMap<u32, f64>>,
    /// ranks reported lost by anyone.
    pub(super) suspected: BTreeSet<u32>,
    /// rank -> handshakes refused (from `stats`).
    pub(super) refused: BTreeMap<u32, u64>,
    /// rank -> its heartbeat detector's counters (the `detect` object of `stats`).
    pub(super) detect: BTreeMap<u32, serde_json::Value>,
    /// QUIC: rank -> its endpoint's refusals, reason by reason ([`QUIC_REFUSALS`], from the
    /// `quic` counters of `stats`).
    pub(super) refused_quic: BTreeMap<u32, BTreeMap<&'static str, u64>>,
    /// Wall time (ms since the Unix epoch) the run was declared over and the nodes were told
    /// to quit: what a line stamped from then on reports (links going down, views decided
    /// as ranks leave) is no finding. Compared with each line's own `t_ms`, not with the
    /// moment the launcher reads it: on a saturated host the launcher reads seconds behind
    /// the nodes (2,000 nodes on 16 cores: 20 s and more), and a line stamped during the
    /// workload still counts when it is read after the quit.
    pub(super) closing_at: Option<f64>,
    /// rank -> wall time its stdout closed (it exited), as the launcher observed it.
    pub(super) stdout_closed: BTreeMap<u32, f64>,
    /// rank -> wall time of its `evicted` line and the epoch it names.
    pub(super) evicted: BTreeMap<u32, (f64, Option<u64>)>,
    /// Every link down stamped before the close (`closing_at`): (wall time, rank, peer,
    /// reason).
    pub(super) link_downs: Vec<(f64, u32, u32, String)>,
    /// RELM payload -> (src, dst, uid).
    pub(super) relm_started: BTreeMap<String, (u32, u32, u32)>,
    /// RELM payload -> wall time its sender reported it started.
    pub(super) relm_started_at: BTreeMap<String, f64>,
    /// RELM payload -> wall time of its first delivery.
    pub(super) relm_delivered_at: BTreeMap<String, f64>,
    pub(super) relm_refused: u64,
    /// RELM payload -> ranks that delivered it (one entry per delivery).
    pub(super) relm_delivered: BTreeMap<String, Vec<u32>>,
    /// (src, dst) -> highest uid acknowledged at src.
    pub(super) relm_acked: BTreeMap<(u32, u32), u32>,
    /// (src, dst) -> uid ranges reported failed at src.
    pub(super) relm_failed: BTreeMap<(u32, u32), Vec<(u32, u32)>>,
    /// Joiners admitted: rank -> its `joined` line.
    pub(super) joined: BTreeMap<u32, Join>,
    /// Joiners that gave up: their `UNJOINED` tag -> the error.
    pub(super) join_failed: BTreeMap<u32, String>,
    /// Epoch -> the view that admitted joiners, from the members' `admitted` lines.
    pub(super) admitted: BTreeMap<u64, AdmitView>,
    /// Start-up: rank -> its `ready` or `startup_incomplete` lines (wall time, epoch, the
    /// ranks named missing: empty for `ready`).
    pub(super) startup_done: BTreeMap<u32, Vec<(f64, u64, Vec<u32>)>>,
    /// Start-up: rank -> `checked_in` lines (check-in notices it applied: start-up views).
    pub(super) checked_in: BTreeMap<u32, u32>,
    /// Every `revoked` line (`--revoke`).
    pub(super) revoked: super::revokes::Seen,
    /// Shrink: requester -> its `campaign_started` lines (wall time, id, targets).
    pub(super) campaign_started: BTreeMap<u32, Vec<(f64, String, Vec<u32>)>>,
    /// Shrink: requester -> its `campaign_completed` lines (wall time, id, removed, epoch).
    pub(super) campaign_completed: BTreeMap<u32, Vec<Completed>>,
    /// Shrink: requester -> its `campaign_failed` lines (id, reason).
    pub(super) campaign_failed: BTreeMap<u32, Vec<(String, String)>>,
    /// Shrink: requests refused with an `error` line (rank, message).
    pub(super) shrink_errors: Vec<(u32, String)>,
    /// Shrink: rank -> its `departed` lines (wall time, epoch, ranks, campaign ids).
    pub(super) departed: BTreeMap<u32, Vec<DepartedLine>>,
    /// Shrink: target -> wall time of its `left` line.
    pub(super) left: BTreeMap<u32, f64>,
    /// rank -> its `repaired` lines (wall time, ranks newly dead, scope).
    pub(super) repaired: BTreeMap<u32, Vec<(f64, Vec<u32>, String)>>,
    /// Every view a rank reported decided while the run went on (`failure_confirmed`,
    /// `departed`, `admitted` lines), in the order read: what a side of a partition decided.
    pub(super) decisions: Vec<Decision>,
    /// rank -> its tree view in its last `stats` line (slot, parent, children).
    pub(super) views: BTreeMap<u32, Value>,
    /// `--lines FILE`: every node line, tagged with its rank, as it was read.
    pub(super) dump: Option<std::io::BufWriter<std::fs::File>>,
}

/// The ranks of a JSON array (others skipped).
fn ranks(v: &Value) -> Vec<u32> {
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r.as_u64().map(|r| r as u32))
        .collect()
}

impl Tally {
    pub(super) fn take(&mut self, rank: u32, v: &Value) {
        if let Some(d) = self.dump.as_mut() {
            use std::io::Write;
            let _ = writeln!(d, "{rank} {v}");
        }
        let t = v["t_ms"].as_f64().unwrap_or(0.0);
        let u = |k: &str| v[k].as_u64().map(|x| x as u32);
        if rank >= super::procs::UNJOINED {
            // A joiner before its admission: only its failure counts.
            if v["event"] == "join_failed" {
                let why = v["error"].as_str().unwrap_or("").to_string();
                self.join_failed.insert(rank, why);
            }
            return;
        }
        let event = v["event"].as_str().unwrap_or("");
        let closed = self.closing_at.is_some_and(|c| t >= c);
        if !closed {
            let kind = match event {
                "failure_confirmed" => Some("failure_confirmed"),
                "departed" => Some("departed"),
                "admitted" => Some("admitted"),
                _ => None,
            };
            if let (Some(kind), Some(epoch)) = (kind, v["epoch"].as_u64()) {
                self.decisions.push(Decision {
                    t,
                    by: rank,
                    kind,
                    epoch,
                    ranks: ranks(&v["ranks"]),
                });
            }
        }
        match event {
            "joined" => {
                self.joined.insert(
                    rank,
                    Join {
                        t,
                        epoch: v["epoch"].as_u64().unwrap_or(0),
                        join_id: v["join_id"].as_str().unwrap_or("").to_string(),
                        join_ms: v["join_ms"].as_f64().unwrap_or(f64::NAN),
                        tries: v["tries"].as_u64().unwrap_or(0),
                        contact: v["contact"].as_str().unwrap_or("").to_string(),
                    },
                );
            }
            "admitted" => {
                if let Some(epoch) = v["epoch"].as_u64() {
                    let a = self.admitted.entry(epoch).or_insert_with(|| AdmitView {
                        first: t,
                        ..AdmitView::default()
                    });
                    a.first = a.first.min(t);
                    a.members = v["members"].as_u64().unwrap_or(0);
                    a.reporters.insert(rank);
                    for r in v["ranks"].as_array().into_iter().flatten() {
                        if let Some(r) = r.as_u64() {
                            a.ranks.insert(r as u32);
                        }
                    }
                }
            }
            "listening" => {
                self.listening.insert(rank);
            }
            "revoked" => self.revoked.take(rank, t, v),
            "checked_in" => *self.checked_in.entry(rank).or_default() += 1,
            "ready" | "startup_incomplete" => {
                let missing = v["missing"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|r| r.as_u64().map(|r| r as u32))
                    .collect();
                let epoch = v["epoch"].as_u64().unwrap_or(0);
                self.startup_done
                    .entry(rank)
                    .or_default()
                    .push((t, epoch, missing));
            }
            "link_up" => self.link_ups += 1,
            super::procs::STDOUT_CLOSED => {
                self.stdout_closed.entry(rank).or_insert(t);
            }
            "evicted" => {
                self.evicted.entry(rank).or_insert((t, v["epoch"].as_u64()));
            }
            "link_down" | "failure_confirmed" if closed => {}
            "link_down" => {
                if let Some(p) = u("peer") {
                    let why = v["reason"].as_str().unwrap_or("").to_string();
                    self.link_downs.push((t, rank, p, why));
                    if v["reason"] != "dead" {
                        self.suspected.insert(p);
                    }
                    let e = self.link_down.entry(p).or_insert((t, rank));
                    if t < e.0 {
                        *e = (t, rank);
                    }
                }
            }
            "failure_confirmed" => {
                for r in v["ranks"].as_array().into_iter().flatten() {
                    if let Some(r) = r.as_u64() {
                        self.suspected.insert(r as u32);
                        *self.confirm_counts.entry((r as u32, rank)).or_default() += 1;
                        self.confirmed
                            .entry(r as u32)
                            .or_default()
                            .entry(rank)
                            .or_insert(t);
                    }
                }
            }
            "xcast_started" => {
                *self.answers.entry(rank).or_default() += 1;
                if let Some(p) = v["payload"].as_str() {
                    self.started.insert(p.to_string(), (rank, t));
                }
            }
            "xcast_delivered" => {
                if let Some(p) = v["payload"].as_str() {
                    *self
                        .delivered
                        .entry(p.to_string())
                        .or_default()
                        .entry(rank)
                        .or_default() += 1;
                    self.delivered_at
                        .entry(p.to_string())
                        .or_default()
                        .entry(rank)
                        .or_insert(t);
                }
            }
            "relm_started" => {
                *self.answers.entry(rank).or_default() += 1;
                if let (Some(p), Some(d), Some(uid)) = (v["payload"].as_str(), u("dst"), u("uid")) {
                    self.relm_started.insert(p.to_string(), (rank, d, uid));
                    self.relm_started_at.insert(p.to_string(), t);
                }
            }
            "relm_delivered" => {
                if let Some(p) = v["payload"].as_str() {
                    self.relm_delivered_at.entry(p.to_string()).or_insert(t);
                    self.relm_delivered
                        .entry(p.to_string())
                        .or_default()
                        .push(rank);
                }
            }
            "relm_acked" => {
                if let (Some(d), Some(upto)) = (u("dst"), u("upto")) {
                    let a = self.relm_acked.entry((rank, d)).or_insert(upto);
                    *a = (*a).max(upto);
                }
            }
            "relm_failed" => {
                if let (Some(d), Some(first), Some(count)) = (u("dst"), u("first"), u("count")) {
                    self.relm_failed
                        .entry((rank, d))
                        .or_default()
                        .push((first, count));
                }
            }
            "error"
                if v["command"]
                    .as_str()
                    .is_some_and(|c| c.starts_with("shrink")) =>
            {
                let why = v["message"].as_str().unwrap_or("").to_string();
                self.shrink_errors.push((rank, why));
            }
            "campaign_started" => {
                let id = v["id"].as_str().unwrap_or("").to_string();
                self.campaign_started
                    .entry(rank)
                    .or_default()
                    .push((t, id, ranks(&v["targets"])));
            }
            "campaign_completed" => {
                let id = v["id"].as_str().unwrap_or("").to_string();
                let epoch = v["epoch"].as_u64().unwrap_or(0);
                self.campaign_completed.entry(rank).or_default().push((
                    t,
                    id,
                    ranks(&v["removed"]),
                    epoch,
                ));
            }
            "campaign_failed" => {
                let id = v["id"].as_str().unwrap_or("").to_string();
                let why = v["reason"].as_str().unwrap_or("").to_string();
                self.campaign_failed
                    .entry(rank)
                    .or_default()
                    .push((id, why));
            }
            "departed" => {
                let ids = v["campaigns"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|c| c.as_str().map(str::to_string))
                    .collect();
                let epoch = v["epoch"].as_u64().unwrap_or(0);
                self.departed
                    .entry(rank)
                    .or_default()
                    .push((t, epoch, ranks(&v["ranks"]), ids));
            }
            "left" => {
                self.left.entry(rank).or_insert(t);
            }
            "repaired" => {
                let scope = v["scope"].as_str().unwrap_or("").to_string();
                self.repaired
                    .entry(rank)
                    .or_default()
                    .push((t, ranks(&v["ranks"]), scope));
            }
            "error" => {
                *self.answers.entry(rank).or_default() += 1;
                if v["command"].as_str().is_some_and(|c| c.starts_with("relm")) {
                    self.relm_refused += 1;
                } else {
                    self.refused_xcasts += 1;
                }
            }
            "stats" => {
                if v["view"].is_object() {
                    self.views.insert(rank, v["view"].clone());
                }
                let n = v["transport"]["handshakes_refused"].as_u64().unwrap_or(0);
                self.refused.insert(rank, n);
                if v["detect"].is_object() {
                    self.detect.insert(rank, v["detect"].clone());
                }
                if v["quic"].is_object() {
                    let by = QUIC_REFUSALS
                        .iter()
                        .map(|k| (*k, v["quic"][*k].as_u64().unwrap_or(0)))
                        .collect();
                    self.refused_quic.insert(rank, by);
                }
            }
            _ => {}
        }
    }

    /// Ranks a shrink removed: named by some rank's `departed` line, or that printed `left`.
    pub(super) fn departed_ranks(&self) -> BTreeSet<u32> {
        self.departed
            .values()
            .flatten()
            .flat_map(|(_, _, r, _)| r.iter().copied())
            .chain(self.left.keys().copied())
            .collect()
    }

    /// Survivor -> wall time it removed `r`: its `failure_confirmed` or its `departed` line
    /// naming `r` (a target killed mid-campaign is removed as a departure), the earlier.
    pub(super) fn removed_by(&self, r: u32) -> BTreeMap<u32, f64> {
        let mut m = self.confirmed.get(&r).cloned().unwrap_or_default();
        for (by, lines) in &self.departed {
            for (at, _, ranks, _) in lines {
                if ranks.contains(&r) {
                    let e = m.entry(*by).or_insert(*at);
                    *e = e.min(*at);
                }
            }
        }
        m
    }

    /// Whether op `p` must reach survivor `s`: always for a rank started from the peers file;
    /// for a joiner, when the op started after its `joined` line (earlier ops it adopts as
    /// complete; one whose start nobody reported, never).
    pub(super) fn must_have(&self, s: u32, p: &str) -> bool {
        match self.joined.get(&s) {
            None => true,
            Some(j) => self.started.get(p).is_some_and(|(_, at)| *at > j.t),
        }
    }

    /// Whether op `p` reached every survivor it must reach.
    pub(super) fn everywhere(&self, survivors: &BTreeSet<u32>, p: &str) -> bool {
        self.delivered.get(p).is_some_and(|d| {
            survivors
                .iter()
                .filter(|s| self.must_have(**s, p))
                .all(|s| d.contains_key(s))
        })
    }

    /// Whether survivor `s` must confirm the removal of `r`: a rank started from the peers
    /// file always; a joiner when it joined before the removal's first confirmation anywhere
    /// (a later one was admitted with `r` already a hole).
    pub(super) fn must_confirm(&self, s: u32, r: u32) -> bool {
        match self.joined.get(&s) {
            None => true,
            Some(j) => self
                .confirmed
                .get(&r)
                .and_then(|m| m.values().copied().reduce(f64::min))
                .is_some_and(|first| j.t < first),
        }
    }

    /// Whether survivor `s` was a member at wall time `at` (a joiner: joined before it).
    pub(super) fn member_at(&self, s: u32, at: f64) -> bool {
        self.joined.get(&s).is_none_or(|j| j.t < at)
    }

    /// Every survivor answered every command sent to it, every op that must reach every
    /// survivor has, and nothing reached only some.
    pub(super) fn settled(&self, survivors: &BTreeSet<u32>, sent: &BTreeMap<u32, u64>) -> bool {
        let answered = survivors.iter().all(|s| {
            self.answers.get(s).copied().unwrap_or(0) >= sent.get(s).copied().unwrap_or(0)
        });
        let everywhere = |p: &str| self.everywhere(survivors, p);
        // Delivered at some survivor: then it must be at all of them.
        let somewhere = |p: &str| {
            self.delivered
                .get(p)
                .is_some_and(|d| d.keys().any(|r| survivors.contains(r)))
        };
        answered
            && self.relm_settled(survivors)
            && self
                .started
                .iter()
                .all(|(p, (o, _))| !survivors.contains(o) || everywhere(p))
            && self
                .delivered
                .keys()
                .all(|p| !somewhere(p) || everywhere(p))
    }
}

impl Tally {
    /// When each rank was removed from the cluster (wall time): told `evicted`, or named by a
    /// `failure_confirmed` of a rank not itself removed by then (killed ranks included). What a
    /// rank reports after it was removed is no evidence against others: a paused rank resumes
    /// with a stale view, a fenced one loses its links.
    pub(super) fn removed_at(&self) -> BTreeMap<u32, f64> {
        // (wall time, rank, reporter: `None` for its own `evicted` line), in time order.
        let mut seen: Vec<(f64, u32, Option<u32>)> = self
            .evicted
            .iter()
            .map(|(r, (t, _))| (*t, *r, None))
            .chain(
                self.confirmed
                    .iter()
                    .flat_map(|(r, m)| m.iter().map(|(by, t)| (*t, *r, Some(*by)))),
            )
            .collect();
        seen.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut removed = BTreeMap::new();
        for (t, r, by) in seen {
            if by.is_some_and(|by| removed.contains_key(&by)) {
                continue;
            }
            removed.entry(r).or_insert(t);
        }
        removed
    }

    /// Drops every `failure_confirmed` a rank printed after it was removed (see
    /// [`Tally::removed_at`]), and recomputes what was derived from them and from link downs,
    /// leaving out the link downs it reported after its removal (still listed in the report's
    /// `link_downs_live`).
    pub(super) fn drop_reports_of_the_removed(&mut self) {
        let removed = self.removed_at();
        let counts = |by: u32, t: f64| removed.get(&by).is_none_or(|at| t < *at);
        for m in self.confirmed.values_mut() {
            m.retain(|by, t| counts(*by, *t));
        }
        self.confirmed.retain(|_, m| !m.is_empty());
        self.link_down.clear();
        self.suspected = self.confirmed.keys().copied().collect();
        let valid = self
            .link_downs
            .iter()
            .filter(|(t, by, _, _)| counts(*by, *t));
        for (t, by, p, why) in valid {
            if why != "dead" {
                self.suspected.insert(*p);
            }
            let e = self.link_down.entry(*p).or_insert((*t, *by));
            if *t < e.0 {
                *e = (*t, *by);
            }
        }
    }

    /// Whether the RELM message `(src, dst, uid)` was acknowledged at its sender.
    pub(super) fn relm_is_acked(&self, src: u32, dst: u32, uid: u32) -> bool {
        self.relm_acked.get(&(src, dst)).is_some_and(|a| uid <= *a)
    }

    /// Whether it was reported failed at its sender.
    pub(super) fn relm_is_failed(&self, src: u32, dst: u32, uid: u32) -> bool {
        self.relm_failed
            .get(&(src, dst))
            .is_some_and(|v| v.iter().any(|(f, c)| uid >= *f && uid - *f < *c))
    }

    /// Every RELM message from a survivor is settled: delivered and acknowledged when its
    /// destination survived, acknowledged or reported failed when it was killed.
    pub(super) fn relm_settled(&self, survivors: &BTreeSet<u32>) -> bool {
        self.relm_started.iter().all(|(p, &(s, d, uid))| {
            !survivors.contains(&s)
                || if survivors.contains(&d) {
                    self.relm_delivered.get(p).is_some_and(|v| v.contains(&d))
                        && self.relm_is_acked(s, d, uid)
                } else {
                    self.relm_is_acked(s, d, uid) || self.relm_is_failed(s, d, uid)
                }
        })
    }

    /// RELM messages to joiners and from joiners (both ends survivors) that were delivered
    /// and acknowledged: `(to, from)`.
    pub(super) fn relm_joiners(&self, survivors: &BTreeSet<u32>) -> (usize, usize) {
        let ok = |p: &str, s: u32, d: u32, uid: u32| {
            survivors.contains(&s)
                && survivors.contains(&d)
                && self.relm_delivered.get(p).is_some_and(|v| v.contains(&d))
                && self.relm_is_acked(s, d, uid)
        };
        let (mut to, mut from) = (0, 0);
        for (p, &(s, d, uid)) in &self.relm_started {
            if ok(p, s, d, uid) {
                to += usize::from(self.joined.contains_key(&d));
                from += usize::from(self.joined.contains_key(&s));
            }
        }
        (to, from)
    }

    /// (delivered, duplicates, lost, failed_reported).
    pub(super) fn relm_counts(&self, survivors: &BTreeSet<u32>) -> (usize, usize, usize, usize) {
        let (mut delivered, mut dups, mut lost, mut failed) = (0, 0, 0, 0);
        for (p, &(s, d, uid)) in &self.relm_started {
            let at = self.relm_delivered.get(p).map_or(&[][..], |v| &v[..]);
            let here = at.iter().filter(|r| **r == d).count();
            delivered += usize::from(here > 0);
            dups += here.saturating_sub(1) + at.iter().filter(|r| **r != d).count();
            if survivors.contains(&s) && survivors.contains(&d) {
                lost += usize::from(here == 0 || !self.relm_is_acked(s, d, uid));
            } else if survivors.contains(&s)
                && !self.relm_is_acked(s, d, uid)
                && self.relm_is_failed(s, d, uid)
            {
                failed += 1;
            }
        }
        // Deliveries of payloads nobody reported sending (a sender killed before answering).
        dups += self
            .relm_delivered
            .iter()
            .filter(|(p, _)| !self.relm_started.contains_key(*p))
            .map(|(_, v)| v.len().saturating_sub(1))
            .sum::<usize>();
        (delivered, dups, lost, failed)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::Tally;

    /// The 2,000-node run on the 16-core device: every survivor printed `failure_confirmed
    /// [3]` within 2 s of the kill, but the launcher read those lines 20 s late, after it had
    /// told the nodes to quit, and dropped them as closing noise (`detect_ms` and `repair_ms`
    /// null). Whether a line is closing noise is decided by its stamp.
    #[test]
    fn lines_stamped_before_the_close_count_however_late_they_are_read() {
        let mut t = Tally {
            closing_at: Some(2_000.0),
            ..Tally::default()
        };
        // Stamped during the run, read after the close.
        t.take(
            7,
            &json!({"event": "link_down", "peer": 3, "reason": "closed", "t_ms": 1_500.0}),
        );
        t.take(
            8,
            &json!({"event": "failure_confirmed", "epoch": 9, "ranks": [3], "t_ms": 1_600.0}),
        );
        // Stamped after the close: the nodes quitting.
        t.take(
            9,
            &json!({"event": "link_down", "peer": 4, "reason": "closed", "t_ms": 2_000.0}),
        );
        t.take(
            9,
            &json!({"event": "failure_confirmed", "epoch": 10, "ranks": [4], "t_ms": 2_100.0}),
        );
        assert_eq!(t.link_down.get(&3), Some(&(1_500.0, 7)));
        assert_eq!(t.link_downs.len(), 1);
        assert!(!t.link_down.contains_key(&4));
        assert_eq!(
            t.confirmed.get(&3).and_then(|m| m.get(&8)).copied(),
            Some(1_600.0)
        );
        assert!(!t.confirmed.contains_key(&4));
        assert_eq!(t.decisions.len(), 1);
        assert_eq!(t.decisions[0].ranks, vec![3]);
        assert_eq!(t.suspected.iter().copied().collect::<Vec<_>>(), vec![3]);
    }
}
