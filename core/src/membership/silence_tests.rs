//! Gray links noticed by the core (`silence.rs`), through real nodes in the simulator: a tree
//! link cut one way or both ways while its connection never times out (a 60 s link timeout) is
//! relayed within about `membership.gray_after`, and the child's delivery gap stays near it;
//! without core-declared gray the same cut stalls the child for the whole cut; fault-free runs
//! never declare a link gray; idle tree links carry pings at the documented rate.

use super::relay_tests::{cut_tree_link_under_load, ms, parent_of, sim_with};
use super::MembershipEvent;
use crate::sim::Fault;
use crate::time::Duration;
use crate::tree::Rank;
use crate::xcast::FIRST_APP_TAG;

/// The link timeout of these runs: far past the cut, so only the core can notice it.
const LONG: Duration = Duration::from_secs(60);

#[test]
fn a_silent_tree_link_is_relayed_within_gray_after_when_the_transport_never_notices() {
    for oneway in [true, false] {
        let (s, gap) = cut_tree_link_under_load(oneway, 31, |c| c.net.cut_timeout = LONG);
        eprintln!("oneway {oneway}: rank 9's longest gap {gap}");
        assert!(gap <= Duration::from_secs(1), "oneway {oneway}: gap {gap}");
        let child = s.world().node(Rank(9)).unwrap();
        let parent = child.tree().view().unwrap().parent().unwrap();
        // No link went down: the core saw the silence, at both ends.
        for r in [Rank(9), parent] {
            let n = s.world().node(r).unwrap();
            assert_eq!(n.stats().soft_link_downs, 0, "oneway {oneway}: at {r:?}");
            assert!(
                n.stats().membership.gray_on_silence >= 1,
                "oneway {oneway}: {r:?} never declared the link gray"
            );
        }
        // Both ends relayed; every relay ended after the heal.
        let log = &s.observer().membership;
        let (starts, ends) = s.observer().relay_starts_and_ends();
        assert!(
            starts.contains(&Rank(9)) && starts.contains(&parent),
            "oneway {oneway}: {log:?}"
        );
        assert_eq!(starts.len(), ends, "oneway {oneway}: {log:?}");
        // The first start came within gray_after (plus a watch interval) of the cut at 1 s.
        let first = log
            .iter()
            .find(|(_, _, e)| matches!(e, MembershipEvent::RelayStarted { .. }))
            .map(|(t, _, _)| *t)
            .unwrap();
        assert!(
            first <= ms(1_000 + 500 + 200),
            "oneway {oneway}: first relay at {first}"
        );
    }
}

/// The control: the same cuts with core-declared gray off stall the child far longer (the
/// link never times out), so the test above measures `silence.rs`.
#[test]
fn without_core_declared_gray_the_same_cut_stalls_the_child() {
    for oneway in [true, false] {
        let (_, gap) = cut_tree_link_under_load(oneway, 31, |c| {
            c.net.cut_timeout = LONG;
            c.node.membership.gray_after = Duration::ZERO;
        });
        eprintln!("gray_after off, oneway {oneway}: rank 9's longest gap {gap}");
        assert!(gap > Duration::from_secs(5), "oneway {oneway}: gap {gap}");
    }
}

/// Fault-free runs, idle and loaded, over many seeds: no link is ever declared gray, no relay
/// starts, and idle tree links do carry pings.
#[test]
fn fault_free_runs_never_declare_a_link_gray() {
    let seeds: u64 = std::env::var("LIFELINE_GRAY_SEEDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(40);
    for seed in 0..seeds {
        let (span, radix) = if seed % 2 == 0 { (16, 8) } else { (64, 4) };
        let mut s = sim_with(span, radix, 1_000 + seed, |c| {
            c.net.jitter = Duration::from_millis(2);
        });
        // Idle for 3 s, then an xcast every 50 ms for 2 s, then idle again.
        s.run_until(ms(3_000)).unwrap();
        let mut t = 3_000;
        let mut k = 0u32;
        while t < 6_000 {
            s.run_until(ms(t)).unwrap();
            let origin = Rank(k % span);
            let _ = s.command(origin, |n, now| {
                n.xcast(now, FIRST_APP_TAG, bytes::Bytes::from_static(b"x"))
            });
            k += 1;
            t += 50;
        }
        s.run_until(ms(8_000)).unwrap();
        let log = &s.observer().membership;
        assert!(
            !log.iter()
                .any(|(_, _, e)| matches!(e, MembershipEvent::RelayStarted { .. })),
            "seed {seed}: a relay started: {log:?}"
        );
        let mut pings = 0;
        for r in 0..span {
            let n = s.world().node(Rank(r)).unwrap();
            assert_eq!(n.stats().membership.gray_on_silence, 0, "seed {seed} {r}");
            assert!(n.tree().dead().is_empty(), "seed {seed}: {r}");
            pings += n.stats().membership.tree_pings_out;
        }
        assert!(pings > 0, "seed {seed}: no tree pings");
    }
}

/// A starved host: rank 9 runs 100 ms, then not at all for 400 ms, again and again, while
/// its parent's frames stop reaching it (the transport never notices; the parent, hearing 9,
/// relays nothing). Every watch tick fires more than an interval late (a freeze: the awake
/// window is shorter than the interval), yet the silence it was awake for still adds up: it
/// declares the link gray itself; starved the same way without the cut, it declares nothing.
/// Before the freeze credit every late tick gave every link a fresh start and a loaded rank
/// never declared a silent link.
#[test]
fn a_rank_frozen_again_and_again_still_declares_a_silent_link() {
    for cut in [false, true] {
        let mut s = sim_with(16, 8, 5, |c| c.net.cut_timeout = LONG);
        s.run_until(ms(1_000)).unwrap();
        let child = Rank(9);
        let parent = parent_of(s.world(), child);
        if cut {
            // The parent's frames stop reaching 9 (9's still reach it): only 9 can notice.
            s.apply(Fault::CutOneWay(parent, child));
        }
        let mut t = 1_000;
        while t < 6_000 {
            s.run_until(ms(t + 100)).unwrap();
            s.apply(Fault::Pause(child));
            s.run_until(ms(t + 500)).unwrap();
            s.apply(Fault::Resume(child));
            t += 500;
        }
        let st = &s.world().node(child).unwrap().stats().membership;
        // Starved without a cut: nothing declared (the freezes are its own).
        assert_eq!(st.gray_on_silence >= 1, cut, "cut {cut}: {st:?}");
    }
}

/// A rank frozen (SIGSTOP) for 200 ms, within the silence rule's quiet time, while
/// `gray_after` is 150 ms: its neighbours relay around it while it sleeps and end their relays
/// once it answers; on waking it declares nothing itself (its silence was its own, not its
/// links'); nobody is removed.
#[test]
fn a_frozen_rank_declares_nothing_on_waking() {
    for seed in 0..8 {
        let mut s = sim_with(16, 4, 7 + seed, |c| {
            c.node.membership.gray_after = Duration::from_millis(150);
        });
        s.run_until(ms(1_000)).unwrap();
        s.apply(Fault::Pause(Rank(5)));
        s.run_until(ms(1_200)).unwrap();
        s.apply(Fault::Resume(Rank(5)));
        s.run_until(ms(6_000)).unwrap();
        let n = s.world().node(Rank(5)).unwrap();
        assert_eq!(n.stats().membership.gray_on_silence, 0, "seed {seed}");
        for r in 0..16 {
            let n = s.world().node(Rank(r)).unwrap();
            assert!(
                n.tree().dead().is_empty(),
                "seed {seed}: {r}: {:?}",
                n.tree().dead()
            );
        }
        let log = &s.observer().membership;
        let (starts, ends) = s.observer().relay_starts_and_ends();
        assert_eq!(starts.len(), ends, "seed {seed}: {log:?}");
    }
}

/// Idle frames per node and second, with and without the tree pings, at 16 and 256 ranks
/// (printed: the figure in docs/gray-links.md). The pings stay within their bound: at most
/// one per tree link direction per watch interval (a third of `gray_after`).
#[test]
fn idle_tree_pings_cost() {
    for (span, radix) in [(16u32, 8u32), (256, 8)] {
        let mut rates = Vec::new();
        for gray_after in [Duration::from_millis(500), Duration::ZERO] {
            let mut s = sim_with(span, radix, 5, |c| {
                c.node.membership.gray_after = gray_after
            });
            s.run_until(ms(2_000)).unwrap();
            let count = |s: &crate::sim::Sim<_>| -> (u64, u64) {
                (0..span)
                    .map(|r| {
                        let st = s.world().node(Rank(r)).unwrap().stats();
                        (st.frames_out, st.membership.tree_pings_out)
                    })
                    .fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1))
            };
            let (f0, p0) = count(&s);
            s.run_until(ms(12_000)).unwrap();
            let (f1, p1) = count(&s);
            let per = |x: u64| x as f64 / 10.0 / f64::from(span);
            eprintln!(
                "{span} ranks idle, gray_after {gray_after}: {:.1} frames/s per node, {:.1} tree pings/s per node",
                per(f1 - f0),
                per(p1 - p0)
            );
            // Tree links: span − 1, two directions, at most one ping each per watch interval
            // (6 per second at 500 ms), over 10 s, plus one interval's worth at the edges.
            let directions = 2 * u64::from(span - 1);
            let bound = directions * 6 * 10 + directions;
            assert!(p1 - p0 <= bound, "{} pings", p1 - p0);
            rates.push(per(f1 - f0));
            if gray_after == Duration::ZERO {
                assert_eq!(p1, 0);
            }
        }
        assert!(rates[0] >= rates[1]);
    }
}

/// What a relay costs while it carries an idle link: frames per second over the whole
/// cluster (16 ranks, radix 8), the tree link 1–9 cut both ways (the transport never notices)
/// against the same 10 s without the cut (printed: the figure in docs/gray-links.md). Each end
/// probes every two detector periods, directly and through the relay, and the relay forwards;
/// the link's pings stop. Bounded by 40 frames/s.
#[test]
fn relay_probe_cost() {
    let mut rates = Vec::new();
    for cut in [false, true] {
        let mut s = sim_with(16, 8, 9, |c| c.net.cut_timeout = LONG);
        s.run_until(ms(1_000)).unwrap();
        let parent = parent_of(s.world(), Rank(9));
        if cut {
            s.apply(Fault::Cut(parent, Rank(9)));
        }
        s.run_until(ms(2_000)).unwrap();
        let frames = |s: &crate::sim::Sim<_>| -> u64 {
            (0..16)
                .map(|r| s.world().node(Rank(r)).unwrap().stats().frames_out)
                .sum()
        };
        let f0 = frames(&s);
        s.run_until(ms(12_000)).unwrap();
        let f1 = frames(&s);
        let relayed = s.world().node(Rank(9)).unwrap().relay_stats();
        assert_eq!(cut, relayed.gray_relays_started > 0, "{relayed:?}");
        rates.push((f1 - f0) as f64 / 10.0);
    }
    let extra = rates[1] - rates[0];
    eprintln!(
        "16 ranks idle: {:.1} frames/s in all, {:.1} with one relayed link: {extra:.1} more",
        rates[0], rates[1]
    );
    assert!(extra > 0.0 && extra <= 40.0, "{rates:?}");
}
