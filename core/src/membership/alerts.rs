//! Soft evidence: alerts up the tree (batched, merged per hop, skipping suspected hops) and
//! the coordinator's tally and decision (H of K observers, subjects in flux held, the majority
//! guard).

use std::collections::{BTreeMap, BTreeSet};

use super::{AlertEntry, AlertMsg, Membership, MembershipTimer, Pending, RemovalCause, Reports};
use crate::detect::rings::Rings;
use crate::machine::Ctx;
use crate::time::{Duration, Instant};
use crate::timer::TimerToken;
use crate::tree::Rank;

impl Membership {
    /// Detector evidence from this rank: up the tree to the coordinator (the root of the view
    /// without the subject), batched for `membership.alert_batch`; counted here if this rank
    /// is it.
    pub(crate) fn on_local_alert(
        &mut self,
        ctx: &mut Ctx<'_>,
        subject: Rank,
        incarnation: u64,
        down: bool,
    ) {
        if !ctx.tree.is_alive(subject) || ctx.tree.view().is_none() {
            return;
        }
        if self.is_leaving() {
            self.s().stats.leaving_suppressed += 1;
            return;
        }
        if down && self.is_departing(subject) {
            // Already departed: silence is its departure, not a failure.
            self.s().stats.departures_observed += 1;
            return;
        }
        let me = ctx.me();
        let sends = match self.own.get(&subject) {
            Some(&(i, d, n)) if (i, d) == (incarnation, down) => n.saturating_add(1),
            _ => 0,
        };
        self.own.insert(subject, (incarnation, down, sends));
        // Evidence goes up the tree the first time, merged with its neighbours'. Still standing
        // a period later (the detector re-sends it), it goes straight to the coordinator: the
        // path may hold a relay frozen before anyone suspects it. A refutation always goes
        // straight: it is sent once, and a down report it fails to clear would stand.
        let skip = if down && sends == 0 { 0 } else { u8::MAX };
        let pending = Pending {
            incarnation,
            down,
            hops: 0,
            skip,
        };
        if Self::quorum_on(ctx) {
            self.send_to_backups(ctx, subject, pending);
        }
        if ctx.tree.root_without(subject) == Some(me) {
            self.tally(ctx, me, subject, pending);
            self.decide(ctx);
            return;
        }
        self.queue(ctx, subject, me, pending);
    }

    /// Holds one observer's evidence for the next batch up the tree (a later verdict about the
    /// same or a newer incarnation replaces an earlier one).
    fn queue(&mut self, ctx: &mut Ctx<'_>, subject: Rank, observer: Rank, p: Pending) {
        if p.down {
            self.suspects.insert(subject, ctx.now);
        } else {
            self.suspects.remove(&subject);
        }
        let slot = self.outgoing.entry((subject, observer)).or_insert(p);
        if p.incarnation >= slot.incarnation {
            *slot = Pending {
                hops: slot.hops.max(p.hops),
                ..p
            };
        }
        // Every hop holds evidence for `alert_batch` (zero by default: sent in this turn,
        // merged with whatever else this turn produced).
        let at = ctx.now + ctx.cfg.membership.alert_batch;
        if self.alert_timer.is_none_or(|(_, due)| at < due) {
            let key = MembershipTimer::Alerts;
            self.alert_timer = Some((ctx.timers.set(key, at), at));
        }
    }

    /// The batch timer fired: evidence goes to the next hop up the tree of the view without
    /// its subject, merged per (next hop, subject, incarnation, verdict). Evidence this rank
    /// now coordinates is counted here.
    pub(super) fn on_alert_timer(&mut self, ctx: &mut Ctx<'_>, token: TimerToken) {
        if self.alert_timer.is_none_or(|(t, _)| t != token) {
            ctx.stats.stale_timers += 1;
            return;
        }
        self.alert_timer = None;
        if ctx.tree.view().is_none() {
            self.outgoing.clear();
            return;
        }
        let me = ctx.me();
        type Merged = BTreeMap<(Rank, u64, bool), Vec<Rank>>;
        let mut by_hop: BTreeMap<Rank, (u8, Merged)> = BTreeMap::new();
        let mut hop_of: BTreeMap<(Rank, u8), Option<Rank>> = BTreeMap::new();
        let mut tallied = false;
        for ((subject, observer), p) in std::mem::take(&mut self.outgoing) {
            if !ctx.tree.is_alive(subject) || !ctx.tree.is_alive(observer) {
                continue;
            }
            let hop = *hop_of
                .entry((subject, p.skip))
                .or_insert_with(|| self.next_hop(ctx, subject, p.skip));
            match hop {
                None => {}
                Some(h) if h == me => {
                    self.tally(ctx, observer, subject, p);
                    tallied = true;
                }
                Some(h) => {
                    let (hops, merged) = by_hop.entry(h).or_default();
                    *hops = (*hops).max(p.hops);
                    merged
                        .entry((subject, p.incarnation, p.down))
                        .or_default()
                        .push(observer);
                }
            }
        }
        if tallied {
            self.decide(ctx);
        }
        let max = (ctx.cfg.max_list as usize).max(1);
        for (to, (hops, merged)) in by_hop {
            let mut entries = Vec::new();
            for ((subject, incarnation, down), observers) in merged {
                ctx.stats.membership.alerts_out += observers.len() as u64;
                for chunk in observers.chunks(max) {
                    entries.push(AlertEntry {
                        subject,
                        incarnation,
                        down,
                        observers: chunk.to_vec(),
                    });
                }
            }
            for chunk in entries.chunks(max) {
                ctx.send(
                    to,
                    AlertMsg {
                        hops,
                        entries: chunk.to_vec(),
                    },
                );
            }
        }
    }

    /// Where evidence about `subject` goes next: this rank's nearest ancestor in the tree
    /// without the subject that is not itself suspected here (subject of down evidence seen
    /// within three detector periods) and whose tree link is not down, passing over `skip`
    /// more of them, up to the coordinator (the top ancestor) itself; this rank when it is the
    /// coordinator; `None` when nobody would be left.
    fn next_hop(&self, ctx: &Ctx<'_>, subject: Rank, skip: u8) -> Option<Rank> {
        let coordinator = ctx.tree.root_without(subject)?;
        let me = ctx.me();
        if coordinator == me {
            return Some(me);
        }
        let fresh = Duration::from_nanos(ctx.cfg.detect.period.as_nanos().saturating_mul(3));
        let avoided = |r: Rank| {
            self.is_gray(r) || self.suspects.get(&r).is_some_and(|&t| ctx.now < t + fresh)
        };
        let up = ctx.tree.ancestors_without(subject);
        let hop = up
            .iter()
            .rev()
            .copied()
            .filter(|&a| a == coordinator || !avoided(a))
            .nth(usize::from(skip));
        Some(hop.unwrap_or(coordinator))
    }

    /// Evidence from a descendant (or a rank that skipped a suspected hop): counted here if this
    /// rank coordinates its subject, else merged into the next batch up.
    pub(super) fn on_alert_msg(&mut self, ctx: &mut Ctx<'_>, _from: Rank, m: AlertMsg) {
        let me = ctx.me();
        let mut tallied = false;
        for e in m.entries {
            let n = e.observers.len() as u64;
            if e.down && !ctx.tree.is_alive(e.subject) {
                self.missed_removal(ctx, e.subject);
            }
            let pending = Pending {
                incarnation: e.incarnation,
                down: e.down,
                hops: m.hops.saturating_add(1),
                skip: 0,
            };
            // Evidence sent straight to a backup candidate is counted there (quorum on).
            let backup = m.hops == AlertMsg::MAX_HOPS
                && Self::quorum_on(ctx)
                && Self::is_backup_for(ctx, e.subject);
            match ctx.tree.root_without(e.subject) {
                Some(c) if c == me || backup => {
                    ctx.stats.membership.alerts_in += n;
                    for o in e.observers {
                        self.tally(ctx, o, e.subject, pending);
                    }
                    tallied = true;
                }
                Some(_) if m.hops < AlertMsg::MAX_HOPS && ctx.tree.is_alive(e.subject) => {
                    ctx.stats.membership.alerts_relayed += n;
                    for o in e.observers {
                        self.queue(ctx, e.subject, o, pending);
                    }
                }
                // Passed too many relays, or about a rank removed since: the observer re-sends
                // while its evidence stands.
                _ => ctx.stats.membership.alerts_stale += n,
            }
        }
        if tallied {
            self.decide(ctx);
        }
    }

    /// Down evidence about a rank already dead here: whoever sent it missed the removal (a
    /// decision's flood can be lost with the coordinator that made it, and a rank waiting on a
    /// frozen child it still counts alive can hold up the new root's recovery, and with it
    /// every notice). The root floods the removal again as its own decision, at most once per
    /// ten detector periods per rank, and not within two periods of learning the death
    /// (evidence sent before it was in flight).
    fn missed_removal(&mut self, ctx: &mut Ctx<'_>, subject: Rank) {
        if !ctx.tree.view().is_some_and(|v| v.is_root()) || !ctx.tree.layout().contains(subject) {
            return;
        }
        // Quorum on: only a removal an agreed epoch carries is flooded again (an undecided
        // one waits for its accept quorum, `quorum/agree.rs`).
        if Self::quorum_on(ctx) && !self.agreed.removed.contains(subject) {
            return;
        }
        // No entry: learned dead longer ago than `dead_since` keeps (past the grace).
        let period = ctx.cfg.detect.period.as_nanos();
        if let Some(since) = self.dead_since.learned(subject) {
            if ctx.now < since + Duration::from_nanos(period.saturating_mul(2)) {
                return;
            }
        }
        let every = Duration::from_nanos(period.saturating_mul(10));
        if self
            .reflooded
            .get(&subject)
            .is_some_and(|&t| ctx.now < t + every)
        {
            return;
        }
        self.reflooded.insert(subject, ctx.now);
        ctx.stats.membership.removals_reflooded += 1;
        self.decisions += 1;
        let cause = self
            .causes
            .get(&subject)
            .copied()
            .unwrap_or(RemovalCause::Unresponsive);
        let m = super::RemovedMsg {
            coordinator: ctx.me(),
            seq: self.decisions,
            cause,
            ranks: vec![subject],
        };
        self.note_decision(m.coordinator, m.seq);
        // The rank is already dead here: the overlay is that of the current view.
        self.flood_removed(ctx, m, None);
    }

    /// Coordinator: records one observer's evidence about one subject.
    pub(super) fn tally(&mut self, ctx: &mut Ctx<'_>, observer: Rank, subject: Rank, p: Pending) {
        if p.down && self.is_departing(subject) {
            // The already-departed guard: a departing rank's silence decides nothing.
            self.s().stats.departures_observed += 1;
            return;
        }
        if !ctx.tree.is_alive(subject) || !ctx.tree.is_alive(observer) {
            ctx.stats.membership.alerts_stale += 1;
            return;
        }
        if !self.observers_of(ctx, subject).contains(&observer) {
            ctx.stats.membership.alerts_stale += 1;
            return;
        }
        let supersede = Self::quorum_on(ctx);
        let me = ctx.me();
        let r = self.reports.entry(subject).or_insert_with(|| Reports {
            latest: BTreeMap::new(),
            first: ctx.now,
            last: ctx.now,
            supersede,
        });
        let before = r.accusers();
        if !r.record(ctx.now, observer, p.incarnation, p.down) {
            ctx.stats.membership.alerts_stale += 1;
        } else if p.down {
            self.accuse(ctx.now, subject);
        } else if Self::quorum_on(ctx) {
            // A suspicion refuted: the accusers whose downs this up cleared are held
            // (`refute_hold`), but for a remote observer withdrawing its own down: it only
            // says it hears the subject again, as a lossy subject's observer does, having
            // rightly missed its heartbeats (the swarm's seeds 306, 421, 468: a paused rank's
            // removal held 130-150 ms behind such an observer). This coordinator's own
            // withdrawn down is held: at a heal the deaf side's coordinator hears the other
            // side first itself (seed 653: exempting it too, its candidate prepared against
            // the live root 100 us after the heal).
            let after = r.accusers();
            let cleared: Vec<Rank> = before
                .difference(&after)
                .copied()
                .filter(|&a| a != observer || a == me)
                .collect();
            self.discredit(ctx, &cleared);
        }
    }

    /// Starts the refute hold of each of `accusers` (their downs about one subject were just
    /// refuted), unless one of theirs started within the last three holds (an accuser whose
    /// accusations keep being refuted, a lossy rank's observer, must not hold every decision
    /// it takes part in: a hold is followed by two holds' time free of one). Entries older
    /// than three holds are dropped.
    fn discredit(&mut self, ctx: &Ctx<'_>, accusers: &[Rank]) {
        if accusers.is_empty() {
            return;
        }
        let hold = Self::refute_hold_len(ctx);
        let c = self.corr();
        c.discredited
            .retain(|_, &mut t| ctx.now < t + hold + hold + hold);
        for &a in accusers {
            c.discredited.entry(a).or_insert(ctx.now);
        }
    }

    /// The subject's expected observers in the current live set (cached until it changes).
    pub(super) fn observers_of(&mut self, ctx: &Ctx<'_>, subject: Rank) -> &BTreeSet<Rank> {
        self.observers.entry(subject).or_insert_with(|| {
            let d = &ctx.cfg.detect;
            Rings::compute_for(ctx.tree, subject, d.ring_seed, d.observers).observers
        })
    }

    /// Arms the decide timer for `at`, unless it already fires no later.
    fn arm_decide(&mut self, ctx: &mut Ctx<'_>, at: Instant) {
        if self.decide_timer.is_some_and(|(_, due)| due <= at) {
            return;
        }
        self.decide_timer = Some((ctx.timers.set(MembershipTimer::Decide, at), at));
    }

    /// Coordinator: removes every stable subject in one decision, unless one is in flux (then
    /// waits, at most until the newest in flux has stood for `membership.flux_hold`: its other
    /// observers' alerts, sent at about the same time, are then in).
    pub(super) fn decide(&mut self, ctx: &mut Ctx<'_>) {
        let (mut stable, hold) = self.stable_now(ctx, &BTreeSet::new());
        // The refute hold: a subject stable only on the word of accusers just discredited
        // waits; the others are decided now.
        let refute = self.refute_hold(ctx, &mut stable);
        if let Some(at) = refute {
            self.arm_decide(ctx, at);
        }
        // Quorum on: a subject this coordinator hears itself is not removed (`quorum/vouch.rs`).
        if Self::quorum_on(ctx) {
            stable.retain(|&s| !self.vouches(ctx, s));
        }
        // The overload hold (`corroborate.rs`): evidence against a large share of the members
        // at once waits until it has stood for the window.
        self.release_unaccused();
        let mut released: Option<Instant> = None;
        for s in stable.clone() {
            if let Some(at) = self.overload_holds(ctx, s) {
                stable.retain(|&x| x != s);
                released = Some(released.map_or(at, |t: Instant| t.min(at)));
            }
        }
        if let Some(at) = released {
            self.arm_decide(ctx, at);
        }
        if stable.is_empty() {
            if refute.is_some() {
                ctx.stats.membership.decisions_deferred += 1;
            }
            return;
        }
        if let Some(release) = hold {
            ctx.stats.membership.decisions_deferred += 1;
            self.arm_decide(ctx, release);
            return;
        }
        if refute.is_some() {
            ctx.stats.membership.decisions_deferred += 1;
        }
        // Every subject with a standing report counts against the guard, not only the stable
        // ones: a partition's silence reaches the coordinator a few subjects at a time.
        // Ranks not checked in yet are not members: removing them costs the majority nothing.
        //
        // The guard comes before a candidate's phase 1 too (issue #23, the partition sweep's
        // wrongful removals): a candidate on the deaf side of a one-way cut hears none of the
        // others, its side's observers accuse them all (each accused observer then counts as
        // an implicit reporter of the next), and its PREPARE still reaches the acceptors that
        // it cannot hear. They promised, their promises queued behind the cut, and at the heal
        // the candidate was elected and removed the live root it could not hear (seed 653).
        // A candidate whose evidence stands against half the members is the one cut off: it
        // does not run for leader. A real failure does not trip it (a crashed root is one
        // subject; a partition's majority side accuses only the other side), so failover is
        // as fast as before. A candidate is held to this count half of the guard only, not
        // to its reachability sample as the root is: on a slim majority side a candidate
        // whose sampled subjects happen to be mostly on the other side would never take over
        // (with the sample applied the sweep lost 20 of 496 majority decisions at 32 ranks).
        let candidate = Self::quorum_on(ctx) && !ctx.tree.view().is_some_and(|v| v.is_root());
        let standing = self.standing();
        // A root with quorum views on is held to the count alone too: it removes nothing
        // before its removal check has answers from more than half the weight (`quorum/
        // check.rs`), which a root cut off with a minority never gets, so its reachability
        // sample (most of it silent on a slim majority side whose sample fell on the other
        // side: the sweep's seeds 13 and 16) no longer needs to stop it.
        let passes = if candidate || Self::quorum_on(ctx) {
            self.keeps_majority(ctx, standing)
        } else {
            self.majority_stays(ctx, standing)
        };
        if !passes {
            ctx.stats.membership.decisions_refused_minority += 1;
            if candidate {
                // Evidence that grew past half while this candidate's phase 1 was open (a
                // deaf side's silence arrives a few subjects at a time): its PREPARE, queued
                // behind the cut at the acceptors it cannot hear, must not elect it at the
                // heal.
                self.abandon_prepare();
            }
            return;
        }
        // Quorum on, not the root: a candidate behind a lost root starts phase 1 when its
        // evidence holds every candidate ahead of it; it removes nothing on its own.
        if candidate {
            self.consider_candidacy(ctx, &stable);
            return;
        }
        // Quorum on: removed once the members say nobody hears them (`quorum/check.rs`).
        if Self::quorum_on(ctx) {
            self.check_removal(ctx, stable);
            return;
        }
        for s in &stable {
            self.reports.remove(s);
        }
        self.remove(ctx, stable, RemovalCause::Unresponsive);
    }

    /// The refute hold (quorum views on): takes out of `stable` every subject that is stable
    /// only on the evidence of discredited accusers (observers whose down about some subject
    /// an up cleared here within the last two detector periods, `discredit`), counted
    /// without their downs both as reporters and in making other observers implicit
    /// reporters; returns when the last such hold ends, if it took any out.
    ///
    /// A refutation says the evidence of its time was wrong, and at a heal it is the first of
    /// many: every subject the other side suspected refutes within about one heartbeat
    /// period, and their ups arrive in whatever order. Without the hold a coordinator acted
    /// in between on what was not yet refuted (seed 653: the deaf side's candidate, its own
    /// suspicions of four ranks refuted first, found the accusation of the root still
    /// standing, alone under the guard now, and ran phase 1 against it 100 us after the
    /// heal). An up about a newer incarnation clears every older down about its subject, so
    /// the first refutation at a heal discredits all of the deaf side's observers of that
    /// subject, which are the accusers of the other subjects too. Two periods let the rest
    /// arrive.
    ///
    /// Only what a refutation discredits waits: a subject whose accusers include none just
    /// refuted (or enough others) is decided at once, and a remote observer reporting a
    /// subject up again withdraws its own down without being held (`tally`). Before, any refutation held every
    /// decision for two periods, and in the membership swarm with quorum views on a lossy
    /// rank's refutations held the removal of ranks that had really stopped (seed 24: a paused
    /// rank removed 200 ms late, behind an up about the lossy rank). A real failure refutes
    /// nothing, so a crashed or hung rank is decided as fast as before unless its own
    /// observers were just proved wrong about another rank. Without quorum views
    /// (membership I) nothing is held: a root elected at a heal, the case the hold is for,
    /// does not exist there.
    fn refute_hold(&mut self, ctx: &Ctx<'_>, stable: &mut Vec<Rank>) -> Option<Instant> {
        if stable.is_empty() {
            return None;
        }
        let hold = Self::refute_hold_len(ctx);
        let c = self.corroboration.as_ref()?;
        let running: BTreeSet<Rank> = c
            .discredited
            .iter()
            .filter(|&(_, &t)| ctx.now < t + hold)
            .map(|(&a, _)| a)
            .collect();
        let until = c
            .discredited
            .values()
            .map(|&t| t + hold)
            .filter(|&end| ctx.now < end)
            .max()?;
        let credited = self.stable_now(ctx, &running).0;
        let before = stable.len();
        stable.retain(|s| credited.contains(s));
        (stable.len() < before).then_some(until)
    }

    /// How long the refute hold lasts: two detector periods.
    fn refute_hold_len(ctx: &Ctx<'_>) -> Duration {
        Duration::from_nanos(ctx.cfg.detect.period.as_nanos().saturating_mul(2))
    }

    /// Subjects with standing down evidence here (ranks not checked in yet excepted): what
    /// the majority guard counts.
    fn standing(&self) -> usize {
        self.reports
            .iter()
            .filter(|(s, r)| r.downs() > 0 && !self.is_pending(**s))
            .count()
    }

    /// The subjects whose evidence is stable now (H of K, implicit reporters counted), for a
    /// candidate just elected to remove with its cut; none when the evidence stands against
    /// half the members (the count half of the majority guard, as for its candidacy).
    ///
    /// Elected at a heal, a candidate holds the evidence both sides gathered against each
    /// other while the cut stood (its own observers', and the promisers' standing downs that
    /// arrived with their promises): stale, since everyone is heard again, but not yet
    /// refuted. Removed here at once, it cut the new leader off from every other rank (seed
    /// 524: 26 of 27 dead in its tree, its frames to them suppressed, and the others then
    /// removed it as silent). Under the guard it removes only its cut; what is really gone
    /// is decided by the ordinary path once the refutations have cleared the rest.
    pub(super) fn stable_subjects(&mut self, ctx: &mut Ctx<'_>) -> Vec<Rank> {
        let standing = self.standing();
        if !self.keeps_majority(ctx, standing) {
            ctx.stats.membership.decisions_refused_minority += 1;
            return Vec::new();
        }
        let mut stable = self.stable_now(ctx, &BTreeSet::new()).0;
        // Held subjects are left to the ordinary path once the hold ends.
        if let Some(at) = self.refute_hold(ctx, &mut stable) {
            ctx.stats.membership.decisions_deferred += 1;
            self.arm_decide(ctx, at);
        }
        stable.retain(|&s| !self.vouches(ctx, s));
        stable
    }

    /// Stable subjects, and until when a subject in flux holds the decision back; the downs of
    /// the observers in `ignore` are not counted.
    fn stable_now(
        &mut self,
        ctx: &Ctx<'_>,
        ignore: &BTreeSet<Rank>,
    ) -> (Vec<Rank>, Option<Instant>) {
        let k = ctx.cfg.detect.observers.max(1) as usize;
        let h_cfg = ctx.cfg.membership.stable_reports as usize;
        let l_cfg = ctx.cfg.membership.flux_reports as usize;
        // Refutations only (no down standing) are kept a while, so a down they overtook is
        // still recognised as stale, then dropped: the table holds what stands.
        let keep = Duration::from_nanos(ctx.cfg.detect.period.as_nanos().saturating_mul(10));
        self.reports
            .retain(|_, r| r.downs() > 0 || ctx.now < r.last + keep);
        let subjects: Vec<Rank> = self.reports.keys().copied().collect();
        for &s in &subjects {
            self.observers_of(ctx, s);
        }
        // Implicit reporters: expected observers that are themselves in flux or stable (they
        // probably failed with the subject); one report against an observer is not enough.
        let failing = |o: &Rank| {
            self.reports
                .get(o)
                .is_some_and(|ro| ro.downs_except(ignore) >= l_cfg.max(2))
        };
        let mut stable = Vec::new();
        let mut hold: Option<Instant> = None;
        for (&s, r) in &self.reports {
            let Some(expected) = self.observers.get(&s) else {
                continue;
            };
            let k_eff = expected.len();
            if k_eff == 0 {
                continue;
            }
            // H scaled to the observers this view has; never one observer alone once three
            // ranks exist.
            let h = if k_eff >= k {
                h_cfg
            } else {
                h_cfg.saturating_mul(k_eff).div_ceil(k).max(2)
            }
            .min(k_eff);
            let l = l_cfg.min(h);
            if r.downs_except(ignore) == 0 {
                continue;
            }
            // Only evidence that reached the coordinator from another observer counts: a
            // coordinator cut off from everyone sees all its subjects silent, and must not
            // remove them on its own word.
            if !r
                .latest
                .iter()
                .any(|(&o, &(_, d))| d && o != ctx.me() && !ignore.contains(&o))
            {
                continue;
            }
            let count = expected
                .iter()
                .filter(|&&o| (r.is_down(o) && !ignore.contains(&o)) || failing(&o))
                .count();
            if count >= h {
                stable.push(s);
            } else if count >= l && ctx.now < r.first + ctx.cfg.membership.flux_hold {
                let until = r.first + ctx.cfg.membership.flux_hold;
                hold = Some(hold.map_or(until, |t: Instant| t.max(until)));
            }
        }
        (stable, hold)
    }
}
