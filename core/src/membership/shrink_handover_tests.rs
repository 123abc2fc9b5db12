//! Shrink campaigns naming the coordinator (the planned hand-over), through real nodes in the
//! simulator on the ten-rank radix-2 tree `0 → 1,2; 1 → 3,5; 2 → 4,6; 3 → 7; 4 → 8; 5 → 9`:
//! one completion at the requester, one departure view and one repair pass at every survivor,
//! no failure verdict, no failure notice, every target (the old coordinator among them) left,
//! exactly one survivor in the root slot, and broadcasts after it reach every survivor.

use bytes::Bytes;

use super::shrink_tests::{check_survivors, ms, run, set, shrink, Log};
use crate::sim::{Fault, Sim, SimConfig};
use crate::time::Duration;
use crate::tree::Rank;

fn sim(detect: bool, seed: u64) -> Sim<Log> {
    let mut cfg = SimConfig::new(10, 2, seed);
    cfg.node.detect.enabled = detect;
    cfg.node.report_repairs = true;
    Sim::new(cfg, Log::default()).unwrap()
}

fn survivors(targets: &[u32]) -> Vec<u32> {
    (0..10u32).filter(|r| !targets.contains(r)).collect()
}

/// After a hand-over: one root among the survivors, no failure anywhere, one repair naming the
/// targets at every survivor, and an xcast from a survivor reaches all of them once.
fn check_hand_over(s: &mut Sim<Log>, targets: &[u32], label: &str) {
    check_survivors(s, targets, &[]);
    let alive = survivors(targets);
    let t = set(targets);
    let roots: Vec<u32> = alive
        .iter()
        .copied()
        .filter(|&r| {
            s.world()
                .node(Rank(r))
                .and_then(|n| n.tree().view().map(|v| v.is_root()))
                .unwrap_or(false)
        })
        .collect();
    assert_eq!(roots.len(), 1, "{label}: roots {roots:?}");
    for &r in &alive {
        assert!(
            s.observer().failures(r).is_empty(),
            "{label}: rank {r} confirmed failures {:?}",
            s.observer().failures(r)
        );
        let reps = s.observer().repairs_naming(r, &t);
        assert_eq!(reps.len(), 1, "{label}: rank {r} repairs {reps:?}");
        assert_eq!(reps[0].0, t, "{label}: rank {r} repairs {reps:?}");
        let n = s.world().node(Rank(r)).unwrap();
        let m = &n.stats().membership;
        assert_eq!(
            (m.removed_on_evidence, m.alerts_out),
            (0, 0),
            "{label}: rank {r} alerted or decided a removal"
        );
    }
    let st = s.world().node(Rank(0)).unwrap().shrink_stats();
    assert_eq!(st.hand_overs, 1, "{label}: {st:?}");
    // Broadcasts after the hand-over reach every survivor once, from a leaf and from the root.
    let before: Vec<u32> = alive
        .iter()
        .map(|r| s.observer().2.get(&Rank(*r)).copied().unwrap_or(0))
        .collect();
    let now = s.world().now();
    let leaf = *alive.last().unwrap();
    for from in [leaf, roots[0]] {
        s.command(Rank(from), |n, now| {
            n.xcast(now, 20, Bytes::from_static(b"after"))
        })
        .expect("a survivor runs")
        .expect("a survivor broadcasts");
    }
    s.run_until(now + Duration::from_millis(500)).unwrap();
    for (i, &r) in alive.iter().enumerate() {
        let got = s.observer().2.get(&Rank(r)).copied().unwrap_or(0);
        assert_eq!(got, before[i] + 2, "{label}: rank {r} xcast deliveries");
    }
}

#[test]
fn a_campaign_naming_the_coordinator_hands_over_without_a_failure() {
    // The coordinator alone, the coordinator with a leaf, the coordinator with the next root
    // (1) and its child; the requester a survivor, or the coordinator itself (a target).
    let cases: [(&[u32], u32); 6] = [
        (&[0], 5),
        (&[0, 3], 9),
        (&[0, 3], 1),
        (&[0, 1, 3], 8),
        (&[0], 0),
        (&[0, 3], 0),
    ];
    for (targets, from) in cases {
        for (detect, seed) in [false, true]
            .into_iter()
            .flat_map(|d| (21..25).map(move |x| (d, x)))
        {
            let label = format!("{targets:?} from {from}, detect {detect}, seed {seed}");
            let mut s = sim(detect, seed);
            run(&mut s, 200);
            let id = shrink(&mut s, from, targets);
            run(&mut s, 2_000);
            let done = s.observer().completions(from);
            assert_eq!(done.len(), 1, "{label}: {done:?}");
            assert_eq!(done[0].0, id, "{label}");
            assert_eq!(done[0].1, set(targets), "{label}");
            check_hand_over(&mut s, targets, &label);
        }
    }
}

/// A campaign naming the coordinator and one naming another rank, requested together from two
/// survivors: both complete once, in one view change.
#[test]
fn a_hand_over_shares_its_view_with_another_campaign() {
    for detect in [false, true] {
        let mut s = sim(detect, 22);
        run(&mut s, 200);
        shrink(&mut s, 5, &[0]);
        shrink(&mut s, 9, &[6]);
        run(&mut s, 2_000);
        assert_eq!(s.observer().completions(5).len(), 1);
        assert_eq!(s.observer().completions(9).len(), 1);
        check_hand_over(&mut s, &[0, 6], &format!("detect {detect}"));
    }
}

/// A campaign requested after the hand-over goes to the new coordinator and completes.
#[test]
fn the_new_coordinator_takes_the_next_campaign() {
    let mut s = sim(false, 23);
    run(&mut s, 200);
    shrink(&mut s, 5, &[0]);
    run(&mut s, 1_000);
    assert_eq!(s.observer().completions(5).len(), 1);
    shrink(&mut s, 9, &[6]);
    run(&mut s, 2_000);
    assert_eq!(s.observer().completions(9).len(), 1);
    for r in survivors(&[0, 6]) {
        let deps = s.observer().departures(r);
        assert_eq!(deps.len(), 2, "rank {r}: {deps:?}");
        assert!(s.observer().failures(r).is_empty(), "rank {r}");
    }
}

/// The old coordinator crashes at points spread over the hand-over: the campaign completes or
/// fails with a typed reason within its bound, exactly once, and the survivors agree on the
/// dead set.
#[test]
fn the_coordinator_crashing_mid_hand_over_is_bounded() {
    // When the hand-over happens without a crash (µs after the request), stepping 50 µs.
    let hand_over_us = |detect: bool, seed: u64| {
        let mut s = sim(detect, seed);
        run(&mut s, 100);
        shrink(&mut s, 5, &[0, 3]);
        let mut t = ms(100);
        for step in 1..=400u64 {
            t = ms(100) + Duration::from_micros(50 * step);
            s.run_until(t).unwrap();
            if s.world().node(Rank(0)).unwrap().shrink_stats().hand_overs == 1 {
                break;
            }
        }
        t.saturating_since(ms(100)).as_nanos() / 1_000
    };
    // (crashed before its hand-over, after it)
    let mut outcomes = (0, 0);
    for seed in 0..16u64 {
        let detect = seed % 2 == 1;
        // Crashes from 1.6 ms before the hand-over to 1.4 ms after it, 200 µs apart.
        let at = (hand_over_us(detect, seed) + 200 * (seed % 16)).saturating_sub(1_600);
        let mut s = sim(detect, seed);
        run(&mut s, 100);
        shrink(&mut s, 5, &[0, 3]);
        s.schedule(ms(100) + Duration::from_micros(at), Fault::Crash(Rank(0)));
        // The campaign's bound: `membership.shrink_timeout`, 10 s by default.
        let bound = 100 + 10_000;
        run(&mut s, bound + 500);
        let log = s.observer();
        let ended = log.completions(5).len()
            + log
                .of(5)
                .iter()
                .filter(|e| matches!(e, super::MembershipEvent::CampaignFailed { .. }))
                .count();
        assert_eq!(ended, 1, "seed {seed}: {:?}", log.of(5));
        let mut deads = Vec::new();
        for r in survivors(&[0, 3]) {
            deads.push(s.world().node(Rank(r)).unwrap().tree().dead().clone());
            assert!(
                !log.failures(r).contains(Rank(3)),
                "seed {seed}: rank {r} a failure verdict for 3"
            );
        }
        deads.dedup();
        assert_eq!(deads, vec![set(&[0, 3])], "seed {seed}");
        assert_eq!(log.left(3), 1, "seed {seed}");
        let reps = log.repairs_naming(4, &set(&[0, 3]));
        assert!(!reps.is_empty() && reps.len() <= 2, "seed {seed}: {reps:?}");
        // A successor that broadcast a departure notice itself: 0 crashed before handing over.
        let reissued = survivors(&[0, 3]).into_iter().any(|r| {
            s.world()
                .node(Rank(r))
                .is_some_and(|n| n.shrink_stats().left_views > 0)
        });
        if reissued {
            outcomes.0 += 1;
        } else {
            outcomes.1 += 1;
        }
    }
    // The crash times cover both sides of the hand-over.
    assert!(outcomes.0 > 0 && outcomes.1 > 0, "{outcomes:?}");
}

/// The next root learns of the hand-over before the departure notice reaches it (`lifeline
/// cluster --shrink 0@2000/0` on real processes: rank 1 applied the notice and sent rank 2, its
/// new parent and the next root, a hello implying rank 0 gone; rank 2 repaired locally, became
/// the coordinator, and re-issued the campaign it had recorded from the order while the old
/// root's notice was still on its way: every survivor applied the same departure view twice).
/// Frames from 0 to 2 and from 2 to 1 stall for 100 ms from points spread over the campaign
/// (one-way: 2's acknowledgements still reach 0, 1's hello reaches 2), so the notice may reach
/// 2 only through its recovery round as the next root, which waits on 1 meanwhile: one
/// departure view, one repair, one completion everywhere.
#[test]
fn the_next_root_hearing_of_the_hand_over_first_applies_it_once() {
    let mut raced = 0;
    for (detect, seed) in [false, true]
        .into_iter()
        .flat_map(|d| (31..35).map(move |x| (d, x)))
    {
        for step in 0..24u64 {
            let label = format!("detect {detect}, seed {seed}, cut {}µs", 100 * step);
            let mut s = sim(detect, seed);
            run(&mut s, 200);
            let id = shrink(&mut s, 0, &[0]);
            for (a, b) in [(0, 2), (2, 1)] {
                s.schedule(
                    ms(200) + Duration::from_micros(100 * step),
                    Fault::CutOneWay(Rank(a), Rank(b)),
                );
            }
            s.schedule(ms(300) + Duration::from_micros(100 * step), Fault::Heal);
            run(&mut s, 2_500);
            let done = s.observer().completions(0);
            assert_eq!(done.len(), 1, "{label}: {done:?} {:?}", s.observer().of(0));
            assert_eq!(done[0].0, id, "{label}");
            check_hand_over(&mut s, &[0], &label);
            let stale: u64 = survivors(&[0])
                .into_iter()
                .map(|r| {
                    s.world()
                        .node(Rank(r))
                        .unwrap()
                        .shrink_stats()
                        .stale_departures
                })
                .sum();
            if stale > 0 {
                // Rank 2 re-issued the campaign: its notice reached every survivor, stale.
                assert_eq!(stale, 9, "{label}");
                raced += 1;
            }
        }
    }
    // Some cut times made the next root re-issue the campaign (the race the test is for).
    assert!(raced > 0, "no run raced the notice");
}

/// A target's child hears of its departure before the notice reaches it (`lifeline cluster
/// --shrink 0,3@2000` on real processes under load: target 3 left at once, once it lost its
/// lifeline or processed the notice; its child 7 saw the link close, repaired around 3 alone,
/// and repaired again for 0 when the notice reached it through its new parent, whose dial was
/// slower than 3's close). Frames to the child from every rank but its target parent stall for
/// 100 ms from points spread over the campaign. Targets `{0, 3}` (the child 7; 3 loses its
/// lifeline when 1 applies the notice) and `{0, 1}` (the child 5; target 1 processes its own
/// notice, which the old coordinator passed down): a target with children keeps its links until each child closed them (each applied
/// the notice; one it processed itself it passes down first), so the child still applies the
/// departure as its one repair.
#[test]
fn a_target_s_child_hearing_of_its_departure_first_repairs_once() {
    // (targets, child, its target parent)
    let cases: [(&[u32], u32, u32); 2] = [(&[0, 3], 7, 3), (&[0, 1], 5, 1)];
    for (targets, child, parent) in cases {
        let mut waited = 0;
        for (detect, seed) in [false, true]
            .into_iter()
            .flat_map(|d| (41..45).map(move |x| (d, x)))
        {
            for step in 0..12u64 {
                let label = format!(
                    "{targets:?}, detect {detect}, seed {seed}, cut {}µs",
                    200 * step
                );
                let mut s = sim(detect, seed);
                run(&mut s, 200);
                let id = shrink(&mut s, 9, targets);
                let at = ms(200) + Duration::from_micros(200 * step);
                for r in (0..10u32).filter(|&r| r != parent && r != child) {
                    s.schedule(at, Fault::CutOneWay(Rank(r), Rank(child)));
                }
                s.schedule(at + Duration::from_millis(100), Fault::Heal);
                run(&mut s, 2_500);
                let done = s.observer().completions(9);
                assert_eq!(done.len(), 1, "{label}: {done:?}");
                assert_eq!(done[0].0, id, "{label}");
                assert_eq!(done[0].1, set(targets), "{label}");
                check_survivors(&s, targets, &[]);
                for r in survivors(targets) {
                    let reps = s.observer().repairs_naming(r, &set(targets));
                    assert_eq!(reps.len(), 1, "{label}: rank {r} repairs {reps:?}");
                }
                waited += s
                    .world()
                    .node(Rank(parent))
                    .unwrap()
                    .shrink_stats()
                    .children_waits;
            }
        }
        // The child's target parent waited for it (the race the test is for).
        assert!(waited > 0, "{targets:?}: no run raced the notice");
    }
}
