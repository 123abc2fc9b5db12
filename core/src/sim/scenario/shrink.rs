//! The shrink scenario: shrink campaigns requested at random times from random members, joins
//! (grows) through real contacts, and crashes (targets among them), with xcast and RELM load
//! running across it all, against an oracle checked after every step.
//!
//! Ranks are split once, from the seed: **stable** members (rank 0, the coordinator, among
//! them) that request campaigns, serve as contacts and carry the load; a **target pool** the
//! campaigns draw from (1–3 targets each, each rank at most once); **victims** that crash at a
//! random time. Some victims are targets: a target crashing while it leaves. In a quarter of
//! the seeds ([`targets_root`]) rank 0 is in the pool too, the first campaign's
//! first target: the coordinator hands over to its successor and leaves (it never crashes).
//!
//! The oracle:
//! - every campaign completes exactly once at its requester (never fails: the coordinator
//!   never crashes, and when it is a target it hands over), naming exactly its targets;
//! - no campaign is open past `membership.shrink_timeout`;
//! - a departure view names only targets of the campaigns it completes, and no rank departs
//!   twice at one member;
//! - no failure verdict names a rank that did not crash (a departing rank's departure is not a
//!   failure), and only targets leave (`Left`), each once;
//! - nothing lost or duplicated among survivors: no xcast op or RELM message is delivered
//!   twice anywhere; at the end every load broadcast reached every stable launched member
//!   exactly once, every RELM message between stable members was delivered once, and a final
//!   xcast reaches every live member (joiners included) once;
//! - at the end every survivor holds the same dead set: exactly the targets and the crashed.

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;

use crate::event::Event;
use crate::membership::{CampaignId, MembershipEvent};
use crate::relm::RelmEvent;
use crate::rng::Rng;
use crate::sim::{Fault, Hooks, Observer, Sim, SimConfig, SimFailure, World};
use crate::time::{Duration, Instant};
use crate::tree::{Rank, RankSet};
use crate::xcast::XcastEvent;

/// The shape of one shrink run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShrinkParams {
    /// Members at the start.
    pub ranks: u32,
    /// Tree radix.
    pub radix: u32,
    /// The run's one seed.
    pub seed: u64,
    /// Shrink campaigns requested.
    pub campaigns: u32,
    /// Joiners (grows).
    pub joins: u32,
    /// Members that crash (some of them targets).
    pub crashes: u32,
    /// The heartbeat detector on.
    pub detect: bool,
    /// Campaigns, joins and crashes are spread over this many ms.
    pub window_ms: u64,
}

impl ShrinkParams {
    /// `campaigns` campaigns over 1.5 s, no joins, no crashes, detector off.
    pub fn new(ranks: u32, radix: u32, seed: u64, campaigns: u32) -> Self {
        Self {
            ranks,
            radix,
            seed,
            campaigns,
            joins: 0,
            crashes: 0,
            detect: false,
            window_ms: 1_500,
        }
    }

    /// A shape drawn from `seed`: members in `16..=max`, 1 to 6 campaigns, up to 4 joins, up
    /// to 2 crashes, the detector on in half the runs, a window of 300 ms to 2 s.
    pub fn varied(radix: u32, seed: u64, max: u32) -> Self {
        let mut rng = Rng::new(seed).fork(0x7368_726b);
        let max = max.max(16);
        let ranks = 16 + rng.below(u64::from(max - 15)) as u32;
        let mut p = Self::new(ranks, radix, seed, 1 + rng.below(6) as u32);
        p.joins = rng.below(5) as u32;
        p.crashes = rng.below(3) as u32;
        p.detect = rng.chance(0.5);
        p.window_ms = 300 + rng.below(1_700);
        p
    }

    /// The command line that replays this run.
    pub fn replay_command(&self) -> String {
        format!(
            "cargo run --release -p lifeline-cli -- sim shrink --ranks {} --radix {} --seed {} --campaigns {} --joins {} --crashes {} --window-ms {} {}--trace",
            self.ranks,
            self.radix,
            self.seed,
            self.campaigns,
            self.joins,
            self.crashes,
            self.window_ms,
            if self.detect { "--detect " } else { "" },
        )
    }
}

/// What one shrink run measured.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ShrinkReport {
    /// Campaigns requested (and accepted).
    pub campaigns: u32,
    /// Campaigns completed (each exactly once).
    pub completed: u32,
    /// Campaigns that failed (must be 0).
    pub failed: u32,
    /// Targets in all campaigns.
    pub targets: u32,
    /// Targets that left (`Left`).
    pub left: u32,
    /// Per campaign: ms from its request to its completion.
    pub completion_ms: Vec<f64>,
    /// Departure views the coordinator broadcast.
    pub left_views: u64,
    /// Joiners admitted.
    pub joins_admitted: u32,
    /// Oracle violations (must be empty).
    pub violations: Vec<String>,
}

/// One campaign as the oracle knows it.
#[derive(Debug)]
struct Campaign {
    targets: RankSet,
    at: Instant,
    completed: u32,
    done_at: Option<Instant>,
    failed: bool,
}

/// The payload of the xcast sent once everything settled.
const FINAL: &[u8] = b"after shrinks";

/// The oracle's running state.
#[derive(Default)]
struct Oracle {
    campaigns: BTreeMap<CampaignId, Campaign>,
    /// Ranks that crash (ever).
    crashed: RankSet,
    /// Every campaign's targets.
    targets: RankSet,
    /// Ranks each member saw depart.
    departed: BTreeMap<Rank, RankSet>,
    /// Rank -> the campaigns its departure views named (each view is applied once).
    departure_views: BTreeMap<Rank, BTreeSet<CampaignId>>,
    left: BTreeMap<Rank, u32>,
    xcast_got: BTreeMap<(Rank, Rank, u64), u32>,
    relm_got: BTreeMap<(Rank, Rank, u32), u32>,
    final_got: BTreeMap<Rank, u32>,
    bound: Duration,
    violations: Vec<String>,
}

impl Oracle {
    fn violation(&mut self, v: String) {
        if self.violations.len() < 20 {
            self.violations.push(v);
        }
    }
}

impl Observer for Oracle {
    fn on_event(&mut self, w: &World, rank: Rank, e: &Event) {
        let now = w.now();
        match e {
            Event::Membership(MembershipEvent::CampaignCompleted { id, removed, .. }) => {
                let Some(c) = self.campaigns.get_mut(id) else {
                    self.violation(format!("rank {rank}: completion of unknown campaign {id}"));
                    return;
                };
                c.completed += 1;
                c.done_at.get_or_insert(now);
                let (n, same) = (c.completed, *removed == c.targets);
                if id.requester != rank || n > 1 || !same {
                    self.violation(format!(
                        "rank {rank}: campaign {id} completed ({n} times), removed {removed:?}"
                    ));
                }
            }
            Event::Membership(MembershipEvent::CampaignFailed { id, reason }) => {
                if let Some(c) = self.campaigns.get_mut(id) {
                    c.failed = true;
                }
                self.violation(format!("rank {rank}: campaign {id} failed: {reason:?}"));
            }
            Event::Membership(MembershipEvent::Departed {
                ranks, campaigns, ..
            }) => {
                let allowed: RankSet = campaigns
                    .iter()
                    .filter_map(|id| self.campaigns.get(id))
                    .flat_map(|c| c.targets.iter())
                    .collect();
                for id in campaigns {
                    if !self.departure_views.entry(rank).or_default().insert(*id) {
                        self.violation(format!(
                            "rank {rank}: campaign {id}'s departure view again"
                        ));
                    }
                }
                for x in ranks.iter() {
                    let again = !self.departed.entry(rank).or_default().insert(x);
                    if again || !allowed.contains(x) {
                        self.violation(format!("rank {rank}: departure of {x} (again: {again})"));
                    }
                }
            }
            Event::Membership(MembershipEvent::FailureConfirmed { ranks, .. }) => {
                for x in ranks.iter() {
                    if !self.crashed.contains(x) {
                        let departing = self.targets.contains(x);
                        self.violation(format!(
                            "rank {rank}: failure verdict for {x}, which did not crash (a target: {departing})"
                        ));
                    }
                }
            }
            Event::Membership(MembershipEvent::Left { .. }) => {
                *self.left.entry(rank).or_insert(0) += 1;
                if !self.targets.contains(rank) {
                    self.violation(format!("rank {rank} left without being a target"));
                }
            }
            Event::Membership(MembershipEvent::Evicted { .. }) => {
                self.violation(format!("rank {rank} evicted"));
            }
            Event::Xcast(XcastEvent::Delivered {
                origin,
                seq,
                payload,
                ..
            }) => {
                if payload.as_ref() == FINAL {
                    *self.final_got.entry(rank).or_insert(0) += 1;
                }
                let n = self.xcast_got.entry((rank, *origin, *seq)).or_insert(0);
                *n += 1;
                if *n > 1 {
                    self.violation(format!("rank {rank}: xcast {origin}/{seq} delivered twice"));
                }
            }
            Event::Relm(RelmEvent::Delivered { src, uid, .. }) => {
                let n = self.relm_got.entry((rank, *src, uid.get())).or_insert(0);
                *n += 1;
                if *n > 1 {
                    self.violation(format!("rank {rank}: relm {src}/{uid:?} delivered twice"));
                }
            }
            _ => {}
        }
    }

    fn check(&mut self, w: &World) -> Result<(), String> {
        let late: Vec<CampaignId> = self
            .campaigns
            .iter()
            .filter(|(_, c)| c.done_at.is_none() && !c.failed && w.now() > c.at + self.bound)
            .map(|(id, _)| *id)
            .collect();
        for id in late {
            if let Some(c) = self.campaigns.get_mut(&id) {
                c.failed = true;
            }
            self.violation(format!("campaign {id} open past its bound"));
        }
        Ok(())
    }
}

/// One planned action.
#[derive(Debug, Clone)]
enum Plan {
    Shrink { from: Rank, targets: RankSet },
    Xcast(Rank),
    Relm(Rank, Rank),
}

/// Whether this run targets rank 0 (the coordinator): a quarter of the seeds, joins or not,
/// drawn from the seed alone so a replay does the same.
pub fn targets_root(p: &ShrinkParams) -> bool {
    p.campaigns > 0 && Rng::new(p.seed).fork(0x726f_6f74).chance(0.25)
}

/// Runs the shrink scenario; a [`SimFailure`] only for an invalid shape or a stuck run (the
/// oracle's verdicts are in [`ShrinkReport::violations`]).
pub fn run_shrink(p: &ShrinkParams, hooks: Hooks) -> Result<ShrinkReport, SimFailure> {
    let fail = |reason: String| SimFailure {
        seed: p.seed,
        step: 0,
        now: Instant::ZERO,
        reason,
        replay: p.replay_command(),
    };
    let pool_size = (p.campaigns * 3).min(p.ranks / 4);
    if p.ranks < 8 || pool_size + p.crashes + 2 > p.ranks / 2 {
        return Err(fail(format!(
            "{} ranks cannot host {} campaigns and {} crashes (keep them under half)",
            p.ranks, p.campaigns, p.crashes
        )));
    }
    let mut cfg = SimConfig::new(p.ranks, p.radix, p.seed);
    cfg.node.detect.enabled = p.detect;
    let bound = cfg.node.membership.shrink_timeout;
    let mut sim = Sim::new(cfg, Oracle::default()).map_err(|e| fail(format!("{e}")))?;
    sim.set_replay(p.replay_command());
    sim.set_hooks(hooks);
    sim.observer_mut().bound = bound;
    let mut rng = Rng::new(p.seed).fork(0x7368_7231);
    // Ranks but 0 in a seeded order: the target pool, then victims, the rest stable.
    let mut order: Vec<Rank> = (1..p.ranks).map(Rank).collect();
    for i in (1..order.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        order.swap(i, j);
    }
    let mut pool: Vec<Rank> = order[..pool_size as usize].to_vec();
    let mut outside: Vec<Rank> = order[pool_size as usize..].to_vec();
    // In a quarter of the seeds rank 0, the coordinator, is the first campaign's first target
    // (the planned hand-over); its own fork, so every other draw is the same either way.
    let root_targeted = targets_root(p);
    if root_targeted {
        outside.insert(0, std::mem::replace(&mut pool[0], Rank(0)));
    }
    // Victims: half (rounded down) from the pool (targets crashing), the rest from outside.
    // Never rank 0: a coordinator crashing while it hands over may fail the campaign, and this
    // oracle wants every campaign completed.
    let mut victims: Vec<Rank> = Vec::new();
    let from_pool = (p.crashes / 2) as usize;
    victims.extend(pool.iter().rev().filter(|r| r.0 != 0).take(from_pool));
    let missing = p.crashes as usize - victims.len();
    victims.extend(outside.iter().take(missing));
    let stable: Vec<Rank> = (!root_targeted)
        .then_some(Rank(0))
        .into_iter()
        .chain(outside.iter().copied().filter(|r| !victims.contains(r)))
        .collect();
    let warm = Instant::ZERO + Duration::from_millis(200);
    let window = p.window_ms.max(1);
    let at = |rng: &mut Rng| warm + Duration::from_millis(rng.below(window));
    let pick = |rng: &mut Rng, from: &[Rank]| from[rng.below(from.len() as u64) as usize];
    // The plan: campaigns over the pool, load every ~20 ms.
    let mut plan: Vec<(Instant, Plan)> = Vec::new();
    let mut left_in_pool = pool.clone();
    for _ in 0..p.campaigns {
        if left_in_pool.is_empty() {
            break;
        }
        let n = (1 + rng.below(3) as usize).min(left_in_pool.len());
        let targets: RankSet = left_in_pool.drain(..n).collect();
        let from = pick(&mut rng, &stable);
        plan.push((at(&mut rng), Plan::Shrink { from, targets }));
    }
    let mut t = warm;
    let end = warm + Duration::from_millis(window);
    while t < end {
        plan.push((t, Plan::Xcast(pick(&mut rng, &stable))));
        let (a, b) = (pick(&mut rng, &stable), pick(&mut rng, &stable));
        if a != b {
            plan.push((t, Plan::Relm(a, b)));
        }
        t += Duration::from_millis(10 + rng.below(20));
    }
    plan.sort_by_key(|(t, _)| *t);
    for &v in &victims {
        sim.observer_mut().crashed.insert(v);
        sim.schedule(at(&mut rng), Fault::Crash(v));
    }
    for _ in 0..p.joins {
        let contacts = vec![pick(&mut rng, &stable), pick(&mut rng, &stable)];
        sim.add_joiner(at(&mut rng), contacts);
    }
    let mut xcasts: Vec<(Rank, u64)> = Vec::new();
    let mut relms: Vec<(Rank, Rank, u32)> = Vec::new();
    for (when, action) in plan {
        sim.run_until(when)?;
        match action {
            Plan::Shrink { from, targets } => {
                let r = sim.command(from, |n, now| n.shrink(now, &targets));
                if let Some(Ok(id)) = r {
                    let o = sim.observer_mut();
                    o.targets.extend(targets.iter());
                    let c = Campaign {
                        targets,
                        at: when,
                        completed: 0,
                        done_at: None,
                        failed: false,
                    };
                    o.campaigns.insert(id, c);
                }
            }
            Plan::Xcast(o) => {
                let r = sim.command(o, |n, now| {
                    n.xcast(
                        now,
                        crate::xcast::FIRST_APP_TAG,
                        Bytes::from_static(b"load"),
                    )
                });
                if let Some(Ok(seq)) = r {
                    xcasts.push((o, seq));
                }
            }
            Plan::Relm(a, b) => {
                let r = sim.command(a, |n, now| {
                    n.relm_send(now, b, 20, Bytes::from_static(b"load"))
                });
                if let Some(Ok(uid)) = r {
                    relms.push((a, b, uid.get()));
                }
            }
        }
    }
    let settle = end + Duration::from_secs(4);
    sim.run_until(settle)?;
    // The final xcast's origin: a stable member (rank 0 unless it left).
    let origin = stable[0];
    let sent = sim.command(origin, |n, now| {
        n.xcast(now, crate::xcast::FIRST_APP_TAG, Bytes::from_static(FINAL))
    });
    let final_sent = matches!(sent, Some(Ok(_)));
    sim.run_until(settle + Duration::from_secs(2))?;

    let w = sim.world();
    let obs = sim.observer();
    let mut report = ShrinkReport {
        campaigns: obs.campaigns.len() as u32,
        violations: obs.violations.clone(),
        // Every coordinator's: rank 0's, and its successor's after a hand-over (a rank that
        // left keeps its node in the world; only crashed ranks are skipped).
        left_views: w
            .live_ranks()
            .filter_map(|r| w.node(r))
            .map(|n| n.shrink_stats().left_views)
            .sum::<u64>(),
        ..Default::default()
    };
    let mut v = Vec::new();
    for (id, c) in &obs.campaigns {
        report.targets += c.targets.len() as u32;
        match (c.completed, c.done_at) {
            (1, Some(d)) => {
                report.completed += 1;
                report
                    .completion_ms
                    .push(d.saturating_since(c.at).as_millis_f64());
            }
            _ if c.failed => report.failed += 1,
            (n, _) => v.push(format!("campaign {id} completed {n} times")),
        }
        for x in c.targets.iter() {
            let left = obs.left.get(&x).copied().unwrap_or(0);
            if !obs.crashed.contains(x) && left != 1 {
                v.push(format!("target {x} left {left} times"));
            }
        }
    }
    report.left = obs.left.values().sum();
    report.joins_admitted = w.joiners().filter(|j| j.admitted.is_some()).count() as u32;
    for (i, j) in w.joiners().enumerate() {
        if j.admitted.is_none() {
            v.push(format!("joiner {i} not admitted"));
        }
    }
    // Survivors: live nodes with a view.
    let live: Vec<Rank> = w
        .live_ranks()
        .filter(|&r| w.node(r).is_some_and(|n| n.tree().view().is_some()))
        .collect();
    let expect: RankSet = obs.targets.iter().chain(obs.crashed.iter()).collect();
    for &r in &live {
        let Some(n) = w.node(r) else { continue };
        let dead: RankSet = n.tree().dead().iter().filter(|x| x.0 < p.ranks).collect();
        if dead != expect {
            v.push(format!("rank {r}: dead {dead:?}, expected {expect:?}"));
        }
        if final_sent && obs.final_got.get(&r).copied() != Some(1) {
            v.push(format!(
                "rank {r}: the final xcast {:?} times",
                obs.final_got.get(&r)
            ));
        }
    }
    for &r in stable.iter() {
        for &(o, seq) in &xcasts {
            if obs.xcast_got.get(&(r, o, seq)).copied() != Some(1) {
                v.push(format!("rank {r}: load xcast {o}/{seq} not delivered once"));
            }
        }
    }
    for &(a, b, uid) in &relms {
        if obs.relm_got.get(&(b, a, uid)).copied() != Some(1) {
            v.push(format!("relm {a}->{b} uid {uid} not delivered once"));
        }
    }
    v.truncate(20);
    report.violations.extend(v);
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(p: &ShrinkParams) -> ShrinkReport {
        let r = run_shrink(p, Hooks::default()).unwrap();
        assert!(
            r.violations.is_empty(),
            "{:?}\nreplay: {}",
            r.violations,
            p.replay_command()
        );
        r
    }

    #[test]
    fn campaigns_under_load_complete_once() {
        let r = check(&ShrinkParams::new(32, 4, 1, 4));
        assert_eq!(r.completed, r.campaigns);
        assert_eq!(r.left, r.targets);
    }

    #[test]
    fn campaigns_with_joins_and_crashes() {
        for seed in 0..6 {
            let mut p = ShrinkParams::new(48, 4, seed, 4);
            p.joins = 3;
            p.crashes = 2;
            p.detect = seed % 2 == 0;
            check(&p);
        }
    }

    /// The coordinator hands over while a joiner is admitted into the root slot: the old root
    /// (demoted under the joiner, unsynced until the joiner syncs it) adopts the joiner's
    /// contact, whose copy of the admission from its old parent is dropped once it
    /// re-parented. Without the adopter's copies (`Xcast::copy_to_adopted`) the contact
    /// lacked the admission for 2.1 s, could not answer its joiner, and the joiner got failure
    /// verdicts and was never admitted.
    #[test]
    fn a_hand_over_under_a_joiner_in_the_root_slot() {
        let mut p = ShrinkParams::new(33, 4, 153, 6);
        p.joins = 4;
        p.crashes = 2;
        p.window_ms = 1654;
        p.detect = true;
        assert!(targets_root(&p));
        let r = check(&p);
        assert_eq!(r.joins_admitted, 4);
        assert_eq!(r.completed, r.campaigns);
    }

    /// The same run: joiner 0's contact (12) re-forwards its request to the new root, joiner
    /// 36, which was admitted by the same notice and holds it in its snapshot (it reaches 36
    /// after the request). 36 ranks the held admission from its snapshot's span and answers
    /// the contact with rank 36 at epoch 9, as for any admitted nonce; before, it dropped the
    /// request (its held nonces had no ranks) and never answered, and before that admitted it
    /// again as 37.
    #[test]
    fn a_joiner_coordinator_answers_a_request_its_snapshot_admitted_with_its_rank() {
        use std::cell::RefCell;
        use std::rc::Rc;

        let mut p = ShrinkParams::new(33, 4, 153, 6);
        p.joins = 4;
        p.crashes = 2;
        p.window_ms = 1654;
        p.detect = true;
        let lines = Rc::new(RefCell::new(Vec::new()));
        let sink = lines.clone();
        let hooks = Hooks {
            trace: Some(Box::new(move |l: &str| {
                if l.contains("JoinAnswer") {
                    sink.borrow_mut().push(l.to_string());
                }
            })),
            ..Hooks::default()
        };
        let r = run_shrink(&p, hooks).unwrap();
        assert!(r.violations.is_empty(), "{:?}", r.violations);
        assert_eq!(r.joins_admitted, 4);
        let answers = lines.borrow();
        assert!(
            answers
                .iter()
                .any(|l| l.contains("36->12") && l.contains("Some((Rank(36), 9))")),
            "no answer from 36 to 12 with rank 36: {answers:?}"
        );
    }

    /// A joiner admitted after targets departed becomes the coordinator (the old one handed
    /// over, or its successor crashed). Its admission's holes, departed ranks among them, are
    /// in its agreed view from the start: no rank reports them failed (before, the joiner
    /// re-announced them as failures, and the joiners reported them failed).
    #[test]
    fn a_joiner_turned_coordinator_reports_no_departure_as_a_failure() {
        for (seed, campaigns, joins, window_ms) in [(1244, 2, 2, 1456), (1237, 3, 1, 393)] {
            let mut p = ShrinkParams::new(16, 4, seed, campaigns);
            p.joins = joins;
            p.crashes = 2;
            p.window_ms = window_ms;
            p.detect = true;
            assert!(targets_root(&p));
            let r = check(&p);
            assert_eq!(r.joins_admitted, joins);
        }
    }

    /// Shapes drawn from the seed; `lifeline sim shrink --vary --seeds 1000` is the long form.
    #[test]
    fn varied_runs_hold_the_oracle() {
        let seeds = if cfg!(debug_assertions) { 60 } else { 1_000 };
        for seed in 0..seeds {
            check(&ShrinkParams::varied(4, seed, 64));
        }
    }
}
