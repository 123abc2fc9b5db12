//! Start-up from check-ins through real nodes in the simulator (detector on): with start skew
//! every rank checks in and every member gets one `Ready` at the same epoch and nobody is
//! removed; ranks that never start (the root among them) are removed once, cause "never
//! joined", and every member gets one `StartupIncomplete` naming exactly them; more never
//! started than the majority guard would allow is still decided.

use std::collections::BTreeMap;

use super::{MembershipEvent, RemovalCause};
use crate::event::Event;
use crate::sim::{Fault, Observer, Sim, SimConfig, World};
use crate::time::{Duration, Instant};
use crate::tree::{Rank, RankSet};

/// Membership events per rank.
#[derive(Default)]
struct Log(BTreeMap<Rank, Vec<(Instant, MembershipEvent)>>);

impl Observer for Log {
    fn on_event(&mut self, w: &World, rank: Rank, e: &Event) {
        if let Event::Membership(m) = e {
            self.0.entry(rank).or_default().push((w.now(), m.clone()));
        }
    }
}

/// What one rank saw of start-up.
#[derive(Debug, Default, PartialEq, Eq)]
struct Seen {
    /// Ranks listed by its `CheckedIn` events (each once at most).
    checked_in: RankSet,
    /// `CheckedIn` events listing a rank twice.
    repeats: u32,
    /// (epoch, members, missing) of each `Ready` / `StartupIncomplete`.
    done: Vec<(u64, u32, Option<RankSet>)>,
    /// Removed ranks and their causes.
    removed: BTreeMap<Rank, RemovalCause>,
}

impl Log {
    fn seen(&self, r: Rank) -> Seen {
        let mut s = Seen::default();
        for (_, e) in self.0.get(&r).into_iter().flatten() {
            match e {
                MembershipEvent::CheckedIn { ranks, .. } => {
                    for x in ranks.iter() {
                        if !s.checked_in.insert(x) {
                            s.repeats += 1;
                        }
                    }
                }
                MembershipEvent::Ready { epoch, members } => s.done.push((*epoch, *members, None)),
                MembershipEvent::StartupIncomplete {
                    epoch,
                    missing,
                    members,
                } => s.done.push((*epoch, *members, Some(missing.clone()))),
                MembershipEvent::FailureConfirmed { causes, .. } => {
                    s.removed.extend(causes.iter().map(|(r, c)| (*r, *c)));
                }
                _ => {}
            }
        }
        s
    }
}

fn ms(x: u64) -> Instant {
    Instant::ZERO + Duration::from_millis(x)
}

/// `span` ranks, each started at a time drawn in `[0, skew_ms)` (as a launcher spreads
/// starts); `absent` ranks never start. Check-ins on, the detector on, both bounds
/// `timeout_ms`.
fn sim(
    span: u32,
    radix: u32,
    seed: u64,
    timeout_ms: u64,
    skew_ms: u64,
    absent: &[u32],
) -> Sim<Log> {
    let mut cfg = SimConfig::new(span, radix, seed);
    cfg.node.detect.enabled = true;
    cfg.node.detect.startup_grace = Duration::from_millis(timeout_ms);
    cfg.node.membership.check_in = true;
    cfg.node.membership.startup_timeout = Duration::from_millis(timeout_ms);
    let mut rng = crate::rng::Rng::new(seed ^ 0x5ce3);
    for r in 0..span {
        let at = rng.next_u64() % skew_ms.max(1);
        if absent.contains(&r) {
            cfg.late_starts.insert(Rank(r), None);
        } else if at > 0 {
            cfg.late_starts.insert(Rank(r), Some(ms(at)));
        }
    }
    Sim::new(cfg, Log::default()).unwrap()
}

/// Checks every live rank's start-up: one completion each, all at the same epoch, with the
/// members and missing set expected; nobody removed but `absent` (cause never joined).
fn check(s: &Sim<Log>, span: u32, absent: &[u32]) {
    let missing: RankSet = absent.iter().map(|&r| Rank(r)).collect();
    let members = span - absent.len() as u32;
    let mut epochs = Vec::new();
    let started: Vec<Rank> = s
        .world()
        .live_ranks()
        .filter(|&r| s.world().node(r).is_some())
        .collect();
    assert_eq!(started.len() as u32, members);
    for &r in &started {
        let seen = s.observer().seen(r);
        assert_eq!(seen.repeats, 0, "rank {r}: a rank checked in twice");
        assert_eq!(
            seen.done.len(),
            1,
            "rank {r}: start-up completions {seen:?}"
        );
        let (epoch, m, miss) = seen.done[0].clone();
        assert_eq!(m, members, "rank {r}: members at completion");
        if absent.is_empty() {
            assert_eq!(miss, None, "rank {r}: {seen:?}");
        } else {
            assert_eq!(miss.as_ref(), Some(&missing), "rank {r}: {seen:?}");
        }
        let removed: RankSet = seen.removed.keys().copied().collect();
        assert_eq!(removed, missing, "rank {r}: removed {:?}", seen.removed);
        assert!(
            seen.removed
                .values()
                .all(|c| *c == RemovalCause::NeverJoined),
            "rank {r}: {:?}",
            seen.removed
        );
        epochs.push(epoch);
        // Every live rank is in some notice this rank applied (no joiner here).
        for &x in &started {
            assert!(
                seen.checked_in.contains(x),
                "rank {r} never saw {x} check in"
            );
        }
    }
    epochs.dedup();
    assert_eq!(epochs.len(), 1, "completion epochs differ: {epochs:?}");
}

#[test]
fn with_start_skew_every_rank_checks_in_and_every_member_is_ready_once() {
    for seed in 0..6 {
        let span = 64;
        let mut s = sim(span, 4, seed, 5_000, 2_000, &[]);
        s.run_until(ms(4_000)).unwrap();
        check(&s, span, &[]);
        let views = s
            .world()
            .node(Rank(0))
            .unwrap()
            .startup_stats()
            .check_in_views;
        assert!(
            (1..=60).contains(&views),
            "seed {seed}: {views} start-up views"
        );
    }
}

#[test]
fn ranks_that_never_start_are_never_joined_not_dead() {
    for seed in 0..4 {
        let span = 48;
        let absent = [5, 17, 40];
        let mut s = sim(span, 4, seed, 2_000, 1_000, &absent);
        s.run_until(ms(6_000)).unwrap();
        check(&s, span, &absent);
    }
}

#[test]
fn a_root_that_never_starts_is_never_joined_and_the_next_root_completes_start_up() {
    for seed in 0..4 {
        let span = 32;
        let absent = [0];
        let mut s = sim(span, 4, seed, 2_000, 500, &absent);
        s.run_until(ms(8_000)).unwrap();
        check(&s, span, &absent);
    }
}

/// The majority guard counts members, not expected ranks: most of the launch never starting
/// is a start-up decision the coordinator still makes.
#[test]
fn more_than_half_never_starting_still_completes() {
    let span = 16;
    let absent: Vec<u32> = (6..16).collect();
    let mut s = sim(span, 4, 7, 2_000, 300, &absent);
    s.run_until(ms(8_000)).unwrap();
    check(&s, span, &absent);
}

/// A crash after check-in is a failure as before (cause from the evidence), and start-up is
/// still `Ready` (every expected rank checked in).
#[test]
fn a_crash_after_check_in_is_a_failure_and_start_up_is_ready() {
    let span = 32;
    let mut s = sim(span, 4, 3, 3_000, 1, &[]);
    s.run_until(ms(1_000)).unwrap();
    s.apply(Fault::Crash(Rank(9)));
    s.run_until(ms(4_000)).unwrap();
    for r in s.world().live_ranks() {
        let seen = s.observer().seen(r);
        assert_eq!(seen.done, vec![(seen.done[0].0, span, None)], "rank {r}");
        assert_eq!(seen.removed.len(), 1, "rank {r}: {:?}", seen.removed);
        assert_ne!(seen.removed[&Rank(9)], RemovalCause::NeverJoined);
    }
}

/// Ranks below ranks that never start check in through them once they are removed: a chain
/// of two missing interior ranks (1 and its child 3, radix 2) takes two rounds of the bound,
/// and every live rank below them is ready, none removed.
#[test]
fn live_ranks_below_ranks_that_never_start_are_not_removed() {
    for seed in 0..3 {
        let span = 32;
        let absent = [1, 3];
        let mut s = sim(span, 2, seed, 1_500, 400, &absent);
        s.run_until(ms(8_000)).unwrap();
        check(&s, span, &absent);
    }
}

/// A grow can move the root slot to a joiner while start-up runs: radix 2, span 9, ranks 7 and
/// 8 start late; 0, 2 and 6 crash one after the other and 4 holds the root (6's right child
/// slot is past the span); two joiners are admitted through 4, and 10, a child of dead 6, takes
/// the root.
/// The joiner got start-up from its admission: it hears 7's and 8's check-ins, broadcasts the
/// notice, and every live launched rank is ready once, at one epoch. (It used to drop the
/// check-ins as a coordinator without start-up state, and every broadcast stalled under it.)
#[test]
fn a_joiner_the_grow_makes_the_coordinator_completes_start_up() {
    let mut cfg = SimConfig::new(9, 2, 5);
    cfg.node.detect.enabled = true;
    cfg.node.detect.startup_grace = Duration::from_millis(8_000);
    cfg.node.membership.check_in = true;
    cfg.node.membership.startup_timeout = Duration::from_millis(8_000);
    for r in [7, 8] {
        cfg.late_starts.insert(Rank(r), Some(ms(4_000)));
    }
    let mut s = Sim::new(cfg, Log::default()).unwrap();
    for (r, at) in [(0, 300), (2, 1_000), (6, 1_700)] {
        s.run_until(ms(at)).unwrap();
        s.apply(Fault::Crash(Rank(r)));
    }
    s.run_until(ms(2_500)).unwrap();
    let root_of = |s: &Sim<Log>, r: u32| {
        let v = s
            .world()
            .node(Rank(r))
            .unwrap()
            .tree()
            .view()
            .unwrap()
            .clone();
        v.ancestors().first().copied().unwrap_or(Rank(r))
    };
    assert_eq!(root_of(&s, 1), Rank(4), "4 holds the root slot");
    // Broadcasts wait for 7 and 8 (the new roots' recovery rounds go through them), so the
    // admission is numbered once they start, with their check-ins on their way to 4.
    s.add_joiner(ms(2_600), vec![Rank(4)]);
    s.add_joiner(ms(2_600), vec![Rank(4)]);
    s.run_until(ms(7_000)).unwrap();
    assert_eq!(root_of(&s, 1), Rank(10), "joiner 10 holds the root slot");
    let joiner = s.world().node(Rank(10)).unwrap().startup_stats();
    assert!(
        joiner.check_in_views >= 1,
        "10 broadcast a notice: {joiner:?}"
    );
    let mut epochs = Vec::new();
    for r in [1, 3, 4, 5, 7, 8].map(Rank) {
        let seen = s.observer().seen(r);
        assert_eq!(
            seen.done.len(),
            1,
            "rank {r}: start-up completions {seen:?}"
        );
        assert_eq!(seen.done[0].2, None, "rank {r}: {seen:?}");
        let removed: RankSet = seen.removed.keys().copied().collect();
        assert_eq!(
            removed,
            [0, 2, 6].map(Rank).into_iter().collect(),
            "rank {r}"
        );
        epochs.push(seen.done[0].0);
    }
    epochs.dedup();
    assert_eq!(epochs.len(), 1, "completion epochs differ: {epochs:?}");
    for r in [9, 10].map(Rank) {
        assert!(
            s.observer().seen(r).done.is_empty(),
            "joiner {r} reports no start-up"
        );
    }
}

/// A rank never holds a standby link to a rank that has not checked in (it may never start: a
/// dial would only be refused); once start-up is over, its standby parent is the tree's.
#[test]
fn the_standby_parent_is_never_a_rank_not_checked_in() {
    let span = 48;
    let absent = [1, 5, 17];
    let mut s = sim(span, 4, 3, 2_000, 1_000, &absent);
    let mut held_back = 0;
    for t in [200, 600, 1_200] {
        s.run_until(ms(t)).unwrap();
        for r in s.world().live_ranks().collect::<Vec<_>>() {
            let Some(node) = s.world().node(r) else {
                continue;
            };
            let standby = node.standby_parent();
            assert!(
                standby.is_none_or(|x| !absent.contains(&x.0)),
                "rank {r} at {t} ms: standby {standby:?} has not started"
            );
            if standby.is_none() && node.tree().standby_parent().is_some() {
                held_back += 1;
            }
        }
    }
    assert!(held_back > 0, "no standby was held back during start-up");
    s.run_until(ms(6_000)).unwrap();
    check(&s, span, &absent);
    for r in s.world().live_ranks().collect::<Vec<_>>() {
        if let Some(node) = s.world().node(r) {
            assert_eq!(
                node.standby_parent(),
                node.tree().standby_parent(),
                "rank {r}"
            );
        }
    }
}
