//! Shrink campaigns through real nodes in the simulator: PRRTE's validation runs (seed 000) on
//! the ten-rank radix-2 tree `0 → 1,2; 1 → 3,4; 2 → 5,6; 3 → 7,8; 4 → 9`: one completion, one
//! departure view at every survivor with the same list, no failure verdict, every target left.

use std::collections::BTreeMap;

use bytes::Bytes;

use super::{CampaignId, MembershipEvent, ShrinkError};
use crate::event::Event;
use crate::sim::{Fault, Observer, Sim, SimConfig, World};
use crate::time::{Duration, Instant};
use crate::tree::{Rank, RankSet, Scope};
use crate::CommandError;

/// Membership events per rank, the tree repairs (with `report_repairs`), and application
/// xcast deliveries per rank.
#[derive(Default)]
pub(super) struct Log(
    pub(super) BTreeMap<Rank, Vec<MembershipEvent>>,
    pub(super) BTreeMap<Rank, Vec<(RankSet, Scope)>>,
    pub(super) BTreeMap<Rank, u32>,
);

impl Observer for Log {
    fn on_event(&mut self, _w: &World, rank: Rank, e: &Event) {
        match e {
            Event::Membership(m) => self.0.entry(rank).or_default().push(m.clone()),
            Event::Repaired { ranks, scope } => {
                self.1
                    .entry(rank)
                    .or_default()
                    .push((ranks.clone(), *scope));
            }
            Event::Xcast(crate::xcast::XcastEvent::Delivered { .. }) => {
                *self.2.entry(rank).or_insert(0) += 1;
            }
            _ => {}
        }
    }
}

impl Log {
    pub(super) fn of(&self, r: u32) -> &[MembershipEvent] {
        self.0.get(&Rank(r)).map_or(&[], |v| v.as_slice())
    }

    pub(super) fn completions(&self, r: u32) -> Vec<(CampaignId, RankSet, u64)> {
        self.of(r)
            .iter()
            .filter_map(|e| match e {
                MembershipEvent::CampaignCompleted { id, removed, epoch } => {
                    Some((*id, removed.clone(), *epoch))
                }
                _ => None,
            })
            .collect()
    }

    /// (epoch, ranks) of each departure view at `r`.
    pub(super) fn departures(&self, r: u32) -> Vec<(u64, RankSet)> {
        self.of(r)
            .iter()
            .filter_map(|e| match e {
                MembershipEvent::Departed { epoch, ranks, .. } => Some((*epoch, ranks.clone())),
                _ => None,
            })
            .collect()
    }

    pub(super) fn failures(&self, r: u32) -> RankSet {
        self.of(r)
            .iter()
            .filter_map(|e| match e {
                MembershipEvent::FailureConfirmed { ranks, .. } => Some(ranks.iter()),
                _ => None,
            })
            .flatten()
            .collect()
    }

    /// The repairs at `r` that marked any of `targets` dead.
    pub(super) fn repairs_naming(&self, r: u32, targets: &RankSet) -> Vec<(RankSet, Scope)> {
        self.1
            .get(&Rank(r))
            .into_iter()
            .flatten()
            .filter(|(ranks, _)| ranks.iter().any(|x| targets.contains(x)))
            .cloned()
            .collect()
    }

    pub(super) fn left(&self, r: u32) -> usize {
        self.of(r)
            .iter()
            .filter(|e| matches!(e, MembershipEvent::Left { .. }))
            .count()
    }
}

pub(super) fn ms(x: u64) -> Instant {
    Instant::ZERO + Duration::from_millis(x)
}

pub(super) fn set(v: &[u32]) -> RankSet {
    v.iter().map(|&r| Rank(r)).collect()
}

pub(super) fn sim(detect: bool, seed: u64) -> Sim<Log> {
    let mut cfg = SimConfig::new(10, 2, seed);
    cfg.node.detect.enabled = detect;
    Sim::new(cfg, Log::default()).unwrap()
}

/// Every survivor (not a target, not crashed) saw the targets leave in exactly one departure
/// view, at one epoch shared by all, and no failure verdict about a target that did not crash.
pub(super) fn check_survivors(s: &Sim<Log>, targets: &[u32], crashed: &[u32]) {
    let t = set(targets);
    let mut epochs = Vec::new();
    for r in 0..10u32 {
        if targets.contains(&r) || crashed.contains(&r) {
            continue;
        }
        let log = s.observer();
        let deps = log.departures(r);
        assert_eq!(deps.len(), 1, "rank {r}: departures {deps:?}");
        epochs.push(deps[0].0);
        let node = s.world().node(Rank(r)).expect("a survivor runs");
        let dead: RankSet = node.tree().dead().clone();
        let expect: RankSet = t.iter().chain(crashed.iter().map(|&c| Rank(c))).collect();
        assert_eq!(dead, expect, "rank {r}: dead set");
        for x in t.iter() {
            if !crashed.contains(&x.0) {
                assert!(
                    !log.failures(r).contains(x),
                    "rank {r}: a failure verdict for departing rank {x}"
                );
            }
        }
        assert_eq!(
            node.shrink_stats().leaving_entered,
            0,
            "rank {r}: a survivor entered leaving mode"
        );
    }
    epochs.dedup();
    assert_eq!(
        epochs.len(),
        1,
        "survivors disagree on the epoch: {epochs:?}"
    );
    for &x in targets {
        if !crashed.contains(&x) {
            assert_eq!(
                s.observer().left(x),
                1,
                "target {x} left once: {:?} {:?} {:?}",
                s.observer().of(x),
                s.world().node(Rank(x)).map(|n| n.shrink_stats()),
                s.world().node(Rank(x)).map(|n| n.tree().view().is_some()),
            );
        }
    }
}

pub(super) fn run(s: &mut Sim<Log>, until: u64) {
    s.run_until(ms(until)).unwrap();
}

pub(super) fn shrink(s: &mut Sim<Log>, from: u32, targets: &[u32]) -> CampaignId {
    let t = set(targets);
    s.command(Rank(from), |n, now| n.shrink(now, &t))
        .expect("the requester runs")
        .expect("the shrink is accepted")
}

#[test]
fn single_branch_completes_once_with_one_view_and_no_failures() {
    for detect in [false, true] {
        let mut s = sim(detect, 1);
        run(&mut s, 200);
        let id = shrink(&mut s, 5, &[3, 7, 8]);
        run(&mut s, 2_000);
        let done = s.observer().completions(5);
        assert_eq!(done.len(), 1, "detect {detect}: {done:?}");
        assert_eq!(done[0].0, id);
        assert_eq!(done[0].1, set(&[3, 7, 8]));
        check_survivors(&s, &[3, 7, 8], &[]);
        // Rank 4 and 9 keep working: a broadcast and a reliable message reach everyone left.
        let seq = s.command(Rank(9), |n, now| n.xcast(now, 20, Bytes::from_static(b"x")));
        assert!(seq.unwrap().is_ok());
        run(&mut s, 2_500);
        let st = s.world().node(Rank(0)).unwrap().shrink_stats();
        assert_eq!(st.shrink_orders, 1);
        assert_eq!(st.left_views, 1);
    }
}

#[test]
fn multi_branch_completes_once() {
    let mut s = sim(false, 2);
    run(&mut s, 100);
    shrink(&mut s, 0, &[4, 6]);
    run(&mut s, 1_000);
    assert_eq!(s.observer().completions(0).len(), 1);
    check_survivors(&s, &[4, 6], &[]);
}

#[test]
fn a_target_crashing_mid_shrink_is_a_departure() {
    for seed in 0..8 {
        let mut s = sim(seed % 2 == 1, seed);
        run(&mut s, 100);
        shrink(&mut s, 1, &[4, 6]);
        s.schedule(
            ms(100) + Duration::from_micros(200 * seed),
            Fault::Crash(Rank(6)),
        );
        run(&mut s, 2_000);
        let done = s.observer().completions(1);
        assert_eq!(done.len(), 1, "seed {seed}: {done:?}");
        // Survivors agree on the dead set; 4 left cleanly.
        let mut deads = Vec::new();
        for r in [0u32, 1, 2, 3, 5, 7, 8, 9] {
            deads.push(s.world().node(Rank(r)).unwrap().tree().dead().clone());
            assert!(!s.observer().failures(r).contains(Rank(4)), "seed {seed}");
        }
        deads.dedup();
        assert_eq!(deads, vec![set(&[4, 6])], "seed {seed}");
        assert_eq!(s.observer().left(4), 1, "seed {seed}");
    }
}

#[test]
fn two_campaigns_from_two_ranks_each_complete_once() {
    let mut s = sim(false, 3);
    run(&mut s, 100);
    let a = shrink(&mut s, 5, &[4]);
    let b = shrink(&mut s, 9, &[6, 8]);
    assert_ne!(a, b);
    run(&mut s, 1_000);
    assert_eq!(s.observer().completions(5).len(), 1);
    assert_eq!(s.observer().completions(9).len(), 1);
    assert_eq!(s.observer().completions(9)[0].1, set(&[6, 8]));
    // Queued together: one view change removed all three.
    check_survivors(&s, &[4, 6, 8], &[]);
}

#[test]
fn an_already_dead_target_completes_at_once() {
    let mut s = sim(false, 4);
    run(&mut s, 100);
    s.apply(Fault::Crash(Rank(9)));
    run(&mut s, 500);
    let id = shrink(&mut s, 2, &[9]);
    run(&mut s, 600);
    let done = s.observer().completions(2);
    assert_eq!(done.len(), 1);
    assert_eq!(done[0].0, id);
    assert_eq!(
        s.world()
            .node(Rank(0))
            .unwrap()
            .shrink_stats()
            .shrink_orders,
        0
    );
}

#[test]
fn a_leaving_rank_refuses_commands_and_shrink_refuses_bad_requests() {
    let mut s = sim(false, 5);
    run(&mut s, 100);
    let t = set(&[5]);
    let refused = |s: &mut Sim<Log>, from: u32, v: &[u32]| {
        let t = set(v);
        s.command(Rank(from), |n, now| n.shrink(now, &t)).unwrap()
    };
    assert_eq!(refused(&mut s, 5, &[5]), Err(ShrinkError::IncludesSelf));
    // Naming itself with the coordinator is still naming itself.
    assert_eq!(refused(&mut s, 5, &[0, 5]), Err(ShrinkError::IncludesSelf));
    assert_eq!(
        refused(&mut s, 5, &[10]),
        Err(ShrinkError::OutOfSpan(Rank(10)))
    );
    assert_eq!(refused(&mut s, 5, &[]), Err(ShrinkError::Empty));
    // A reliable message from the target just before the order: it drains first.
    let sent = s.command(Rank(5), |n, now| {
        n.relm_send(now, Rank(9), 20, Bytes::from_static(b"last"))
    });
    assert!(sent.unwrap().is_ok());
    s.command(Rank(3), |n, now| n.shrink(now, &t))
        .unwrap()
        .unwrap();
    // The order reaches 5 quickly; then it refuses new application commands.
    let mut refused_at = None;
    for step in 0..200u64 {
        run(&mut s, 100 + step);
        let r = s.command(Rank(5), |n, now| {
            n.relm_send(now, Rank(9), 20, Bytes::from_static(b"more"))
        });
        match r {
            Some(Err(CommandError::Leaving)) => {
                refused_at = Some(step);
                break;
            }
            Some(Err(CommandError::Dead)) | None => break,
            _ => {}
        }
    }
    assert!(refused_at.is_some(), "the target never refused a command");
    run(&mut s, 1_000);
    assert_eq!(s.observer().completions(3).len(), 1);
    assert_eq!(s.observer().left(5), 1);
}

#[test]
fn a_whole_branch_and_an_interior_target_leave_in_one_view() {
    // Lifeline's radix-2 layout: 0 → 1,2; 1 → 3,5; 2 → 4,6; 3 → 7; 4 → 8; 5 → 9. Rank 2's
    // subtree {2,4,6,8} is one branch; rank 1 alone leaves children 3 and 5 that re-parent.
    for (targets, from) in [(&[2u32, 4, 6, 8][..], 9u32), (&[1][..], 8)] {
        for detect in [false, true] {
            let mut s = sim(detect, 7);
            run(&mut s, 100);
            shrink(&mut s, from, targets);
            run(&mut s, 1_500);
            assert_eq!(s.observer().completions(from).len(), 1, "{targets:?}");
            check_survivors(&s, targets, &[]);
            // Broadcasts still reach every survivor.
            s.command(Rank(from), |n, now| {
                n.xcast(now, 20, Bytes::from_static(b"y"))
            })
            .unwrap()
            .unwrap();
            run(&mut s, 1_800);
            let delivered = s.world().node(Rank(0)).unwrap().stats().xcast.clone();
            let _ = delivered;
        }
    }
}

/// `report_repairs`: a shrink is one repair pass at every survivor. The departure notice is
/// that pass (global, every target) for a whole branch (`2,4,6,8`) and for targets with no
/// surviving descendant (`3,7,8`). For `4,6`, rank 8 survives under target 4: the rank that
/// processed the notice first adopts it, and the adoption's lineage removes 4 and every other
/// departing rank (6) in one local pass; the notice then finds nothing left to repair. A target
/// that crashes mid-campaign is seen by its tree neighbours first (a local pass naming it).
#[test]
fn a_shrink_is_one_repair_pass_at_every_survivor() {
    for (targets, from) in [
        (&[2u32, 4, 6, 8][..], 9u32),
        (&[3, 7, 8][..], 5),
        (&[4, 6][..], 1),
    ] {
        for detect in [false, true] {
            let mut cfg = SimConfig::new(10, 2, 11);
            cfg.node.detect.enabled = detect;
            cfg.node.report_repairs = true;
            let mut s = Sim::new(cfg, Log::default()).unwrap();
            run(&mut s, 100);
            shrink(&mut s, from, targets);
            run(&mut s, 1_500);
            let t = set(targets);
            for r in (0..10u32).filter(|r| !targets.contains(r)) {
                let reps = s.observer().repairs_naming(r, &t);
                if r == 8 && targets == [4, 6] {
                    // Adopted by 2 past its departed parent: one local pass with both.
                    assert_eq!(reps, vec![(t.clone(), Scope::Local)], "{detect}");
                } else {
                    assert_eq!(
                        reps,
                        vec![(t.clone(), Scope::Global)],
                        "rank {r} {targets:?} {detect}"
                    );
                }
            }
        }
    }
    // Without the setting, no repair is reported.
    let mut s = sim(false, 11);
    run(&mut s, 100);
    shrink(&mut s, 1, &[4, 6]);
    run(&mut s, 1_000);
    assert!(s.observer().1.is_empty());
    // A target crashing mid-campaign.
    for seed in 0..8 {
        let mut cfg = SimConfig::new(10, 2, seed);
        cfg.node.detect.enabled = seed % 2 == 1;
        cfg.node.report_repairs = true;
        let mut s = Sim::new(cfg, Log::default()).unwrap();
        run(&mut s, 100);
        shrink(&mut s, 1, &[4, 6]);
        s.schedule(
            ms(100) + Duration::from_micros(200 * seed),
            Fault::Crash(Rank(6)),
        );
        run(&mut s, 2_000);
        let t = set(&[4, 6]);
        for r in [0u32, 1, 2, 3, 5, 7, 8, 9] {
            let reps = s.observer().repairs_naming(r, &t);
            assert!(
                !reps.is_empty() && reps.len() <= 2,
                "seed {seed} rank {r}: {reps:?}"
            );
            let named: RankSet = reps.iter().flat_map(|(x, _)| x.iter()).collect();
            assert_eq!(named, t, "seed {seed} rank {r}: {reps:?}");
        }
    }
}
