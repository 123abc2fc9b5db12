//! The link policy on virtual time: no sockets, every outcome fed by hand.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;

use super::*;
use crate::time::Duration;

const ME: Rank = Rank(5);
const LOW: Rank = Rank(2);
const HIGH: Rank = Rank(9);

fn all(_: Rank) -> bool {
    true
}

fn ms(n: u64) -> Instant {
    Instant::from_nanos(n * 1_000_000)
}

fn policy() -> LinkPolicy {
    LinkPolicy::new(ME, 2, LinkConfig::default(), Instant::ZERO).unwrap()
}

fn with(cfg: LinkConfig) -> LinkPolicy {
    LinkPolicy::new(ME, 2, cfg, Instant::ZERO).unwrap()
}

fn drain(p: &mut LinkPolicy) -> Vec<LinkAction> {
    std::iter::from_fn(|| p.poll_action()).collect()
}

/// The one action queued must be a dial of `(peer, slot)`; returns its attempt.
fn dialed(p: &mut LinkPolicy, peer: Rank, slot: usize) -> AttemptId {
    match drain(p).as_slice() {
        [LinkAction::Dial {
            peer: r,
            slot: s,
            attempt,
            ..
        }] if *r == peer && *s == slot => *attempt,
        other => panic!("expected one dial of {peer} slot {slot}, got {other:?}"),
    }
}

/// Fails the current dial of `(peer, slot)` at `now` with `outcome`; returns the re-dial time.
fn fail(p: &mut LinkPolicy, now: Instant, peer: Rank, slot: usize, a: AttemptId, o: DialOutcome) {
    assert!(!p.handle_dial_result(now, peer, slot, a, o, all));
}

/// Checks the private invariants: `redials` holds exactly the waiting slots, and no state is
/// kept for this rank or a slot count other than `slots`.
fn check(p: &LinkPolicy) {
    let mut waiting = BTreeSet::new();
    for (&r, st) in &p.peers {
        assert_ne!(r, p.me);
        assert_eq!(st.slots.len(), p.slots);
        for (i, s) in st.slots.iter().enumerate() {
            if let DialState::Waiting(at) = s.dial {
                waiting.insert((at, r, i));
                assert!(s.conn.is_none(), "a connected slot waits to re-dial");
            }
        }
        assert_eq!(st.up, st.up && st.slots.iter().all(|s| s.conn.is_some()));
    }
    assert_eq!(waiting, p.redials);
    assert_eq!(p.poll_timeout(), waiting.first().map(|w| w.0));
}

#[test]
fn config_validation() {
    assert_eq!(LinkConfig::default().validate(), Ok(()));
    let c = LinkConfig {
        dial_attempts: 0,
        ..LinkConfig::default()
    };
    assert_eq!(c.validate(), Err(LinkConfigError::Zero("dial_attempts")));
    let c = LinkConfig {
        refused_attempts: 0,
        ..LinkConfig::default()
    };
    assert_eq!(c.validate(), Err(LinkConfigError::Zero("refused_attempts")));
    let c = LinkConfig {
        backoff_initial: Duration::from_secs(2),
        ..LinkConfig::default()
    };
    assert!(matches!(c.validate(), Err(LinkConfigError::Backoff { .. })));
    assert!(LinkPolicy::new(ME, 2, c, Instant::ZERO).is_err());
    assert_eq!(
        LinkPolicy::new(ME, 0, LinkConfig::default(), Instant::ZERO).err(),
        Some(LinkConfigError::Zero("slots"))
    );
}

#[test]
fn backoff_doubles_up_to_the_cap() {
    let c = LinkConfig::default();
    assert_eq!(c.backoff(0), Duration::from_millis(50));
    assert_eq!(c.backoff(1), Duration::from_millis(50));
    assert_eq!(c.backoff(2), Duration::from_millis(100));
    assert_eq!(c.backoff(3), Duration::from_millis(200));
    assert_eq!(c.backoff(5), Duration::from_millis(800));
    assert_eq!(c.backoff(6), Duration::from_secs(1));
    assert_eq!(c.backoff(30), Duration::from_secs(1));
    assert_eq!(c.backoff(u32::MAX), Duration::from_secs(1));

    // The same sequence through the policy: each failure waits twice as long, capped.
    let mut p = with(LinkConfig {
        dial_attempts: 20,
        ..LinkConfig::default()
    });
    let mut now = Instant::ZERO;
    p.want(now, HIGH, 0, all);
    let mut a = dialed(&mut p, HIGH, 0);
    let mut waits = Vec::new();
    for n in 1..=8u32 {
        fail(&mut p, now, HIGH, 0, a, DialOutcome::Failed);
        let at = p.poll_timeout().unwrap();
        waits.push((at - now).as_millis());
        check(&p);
        // Not yet due one nanosecond early; due at the deadline.
        p.handle_timeout(Instant::from_nanos(at.as_nanos() - 1), all);
        assert!(drain(&mut p).is_empty());
        now = at;
        p.handle_timeout(now, all);
        let acts = drain(&mut p);
        let [LinkAction::Dial {
            attempt, failures, ..
        }] = acts.as_slice()
        else {
            panic!("{acts:?}")
        };
        assert_eq!(*failures, n);
        a = *attempt;
    }
    assert_eq!(waits, [50, 100, 200, 400, 800, 1000, 1000, 1000]);
    assert_eq!(p.stats().dial_failures, 8);
    assert_eq!(p.stats().dials, 9);
}

#[test]
fn gives_up_after_dial_attempts_and_starts_over() {
    let mut p = policy();
    let mut now = Instant::ZERO;
    p.want(now, HIGH, 1, all);
    let mut a = dialed(&mut p, HIGH, 1);
    for _ in 1..8 {
        fail(&mut p, now, HIGH, 1, a, DialOutcome::Failed);
        now = p.poll_timeout().unwrap();
        p.handle_timeout(now, all);
        a = dialed(&mut p, HIGH, 1);
    }
    fail(&mut p, now, HIGH, 1, a, DialOutcome::Failed);
    assert_eq!(
        drain(&mut p),
        [LinkAction::LinkDown {
            peer: HIGH,
            reason: LinkDownReason::Unreachable
        }]
    );
    assert!(!p.knows(HIGH));
    assert_eq!(p.poll_timeout(), None);
    assert_eq!(p.stats().gave_up, 1);
    assert_eq!(p.stats().dial_failures, 8);
    check(&p);
    // Wanted again, it starts over with no failures counted.
    p.want(now, HIGH, 1, all);
    assert!(matches!(
        drain(&mut p).as_slice(),
        [LinkAction::Dial { failures: 0, .. }]
    ));
}

#[test]
fn a_connection_resets_the_failures() {
    let mut p = policy();
    p.want(ms(0), HIGH, 0, all);
    let a = dialed(&mut p, HIGH, 0);
    fail(&mut p, ms(0), HIGH, 0, a, DialOutcome::Failed);
    fail_and_redial(&mut p, HIGH, 0, 3);
    p.handle_timeout(ms(10_000), all);
    let a = dialed(&mut p, HIGH, 0);
    assert!(p.handle_dial_result(ms(10_000), HIGH, 0, a, DialOutcome::Connected, all));
    assert!(p.is_connected(HIGH, 0));
    assert_eq!(p.peers[&HIGH].slots[0].failures, 0);
    check(&p);
}

/// Fails `n` more re-dials of a waiting slot, each at its deadline.
fn fail_and_redial(p: &mut LinkPolicy, peer: Rank, slot: usize, n: u32) {
    for _ in 0..n {
        let now = p.poll_timeout().unwrap();
        p.handle_timeout(now, all);
        let a = dialed(p, peer, slot);
        fail(p, now, peer, slot, a, DialOutcome::Failed);
    }
}

#[test]
fn refused_gives_up_fast_only_after_the_startup_grace() {
    // Within the grace (up to and including 10 s) a refusal is any failure: 8 attempts.
    let mut p = policy();
    p.want(ms(1_000), HIGH, 0, all);
    let mut a = dialed(&mut p, HIGH, 0);
    let mut now = ms(1_000);
    for _ in 1..8 {
        fail(&mut p, now, HIGH, 0, a, DialOutcome::Refused);
        assert!(drain(&mut p).is_empty());
        now = p.poll_timeout().unwrap();
        assert!(now < ms(10_000));
        p.handle_timeout(now, all);
        a = dialed(&mut p, HIGH, 0);
    }
    fail(&mut p, now, HIGH, 0, a, DialOutcome::Refused);
    // Within the grace a peer never connected may still be starting: the give-up is no proof
    // of death (unreachable: soft evidence), though the dial that ended it was refused.
    assert_eq!(
        drain(&mut p),
        [LinkAction::LinkDown {
            peer: HIGH,
            reason: LinkDownReason::Unreachable
        }]
    );

    // The grace is measured from the policy's creation, and a refusal exactly at its end still
    // counts as any failure: with refused_attempts = 1, only the one after it gives up.
    let mut p = LinkPolicy::new(
        ME,
        2,
        LinkConfig {
            refused_attempts: 1,
            ..LinkConfig::default()
        },
        ms(5_000),
    )
    .unwrap();
    p.want(ms(15_000), HIGH, 0, all);
    let a = dialed(&mut p, HIGH, 0);
    fail(&mut p, ms(15_000), HIGH, 0, a, DialOutcome::Refused);
    assert!(
        p.knows(HIGH),
        "a refusal at the end of the grace is any failure"
    );
    fail_and_redial_refused(&mut p, 1, |at| at);
    assert!(!p.knows(HIGH), "the first refusal after the grace gives up");

    // After the grace, three refusals in a row give up.
    let mut p = policy();
    let late = ms(10_001);
    p.want(late, HIGH, 0, all);
    let a = dialed(&mut p, HIGH, 0);
    fail(&mut p, late, HIGH, 0, a, DialOutcome::Refused);
    fail_and_redial_refused(&mut p, 1, |at| at);
    assert!(p.knows(HIGH));
    fail_and_redial_refused(&mut p, 1, |at| at);
    assert!(!p.knows(HIGH));
    assert_eq!(
        drain(&mut p),
        [LinkAction::LinkDown {
            peer: HIGH,
            reason: LinkDownReason::Refused
        }]
    );

    // Earlier plain failures count toward the refused limit; a plain failure after the grace
    // still gets `dial_attempts`.
    let mut p = policy();
    p.want(late, HIGH, 0, all);
    let a = dialed(&mut p, HIGH, 0);
    fail(&mut p, late, HIGH, 0, a, DialOutcome::Failed);
    fail_and_redial(&mut p, HIGH, 0, 1);
    assert!(p.knows(HIGH));
    fail_and_redial_refused(&mut p, 1, |at| at);
    assert!(
        !p.knows(HIGH),
        "2 failures + 1 refusal reach refused_attempts"
    );

    // refused_attempts above dial_attempts: dial_attempts wins.
    let mut p = with(LinkConfig {
        dial_attempts: 2,
        refused_attempts: 5,
        ..LinkConfig::default()
    });
    p.want(late, HIGH, 0, all);
    let a = dialed(&mut p, HIGH, 0);
    fail(&mut p, late, HIGH, 0, a, DialOutcome::Refused);
    fail_and_redial_refused(&mut p, 1, |at| at);
    assert!(!p.knows(HIGH));
}

#[test]
fn a_peer_once_connected_is_not_starting_its_refusal_counts_within_the_grace() {
    let cfg = LinkConfig {
        refused_attempts: 1,
        ..LinkConfig::default()
    };
    let mut p = with(cfg);
    // HIGH's link comes up at 1 s (both slots), then its connection ends at 2 s.
    for slot in 0..2 {
        p.want(ms(1_000), HIGH, slot, all);
        let a = dialed(&mut p, HIGH, slot);
        assert!(p.handle_dial_result(ms(1_000), HIGH, slot, a, DialOutcome::Connected, all));
    }
    assert!(p.is_up(HIGH));
    assert!(p.handle_closed(ms(2_000), HIGH, 0));
    drain(&mut p);
    // Re-dialled and refused at 2 s, well within the 10 s grace: nothing listens where a
    // process was running, so it is gone: given up at the first refusal, hard evidence.
    p.want(ms(2_000), HIGH, 0, all);
    let a = dialed(&mut p, HIGH, 0);
    fail(&mut p, ms(2_000), HIGH, 0, a, DialOutcome::Refused);
    assert_eq!(
        drain(&mut p),
        [LinkAction::LinkDown {
            peer: HIGH,
            reason: LinkDownReason::Refused
        }]
    );
    // A peer never connected, refused at the same time, may still be starting: retried.
    let mut p = with(cfg);
    p.want(ms(2_000), HIGH, 0, all);
    let a = dialed(&mut p, HIGH, 0);
    fail(&mut p, ms(2_000), HIGH, 0, a, DialOutcome::Refused);
    assert!(p.knows(HIGH) && drain(&mut p).is_empty());
    check(&p);
}

/// Refuses `n` more re-dials of HIGH slot 0, each fed at `when(deadline)`.
fn fail_and_redial_refused(p: &mut LinkPolicy, n: u32, when: impl Fn(Instant) -> Instant) {
    for _ in 0..n {
        let at = p.poll_timeout().unwrap();
        p.handle_timeout(at, all);
        let a = dialed(p, HIGH, 0);
        fail(p, when(at), HIGH, 0, a, DialOutcome::Refused);
    }
}

#[test]
fn tie_break_against_a_connection_we_dialed() {
    for (peer, verdict) in [
        (LOW, AcceptVerdict::Accept),
        (HIGH, AcceptVerdict::Duplicate),
    ] {
        let mut p = policy();
        p.want(ms(0), peer, 0, all);
        let a = dialed(&mut p, peer, 0);
        assert!(p.handle_dial_result(ms(1), peer, 0, a, DialOutcome::Connected, all));
        assert_eq!(p.handle_accepted(ms(2), peer, 0, all), verdict);
        let side = p.peers[&peer].slots[0].conn;
        match verdict {
            // The lower rank's dial wins and replaces ours.
            AcceptVerdict::Accept => assert_eq!(side, Some(Side::Accepted)),
            _ => {
                assert_eq!(side, Some(Side::Dialed));
                assert_eq!(p.stats().duplicates, 1);
            }
        }
        assert!(drain(&mut p).is_empty(), "no re-dial, no link change");
        check(&p);
    }
}

#[test]
fn tie_break_against_a_connection_we_accepted() {
    // A new dial from a peer whose connection we hold replaces it, whatever the ranks.
    for peer in [LOW, HIGH] {
        let mut p = policy();
        assert_eq!(
            p.handle_accepted(ms(0), peer, 0, all),
            AcceptVerdict::Accept
        );
        assert_eq!(
            p.handle_accepted(ms(1), peer, 0, all),
            AcceptVerdict::Accept
        );
        assert!(p.is_connected(peer, 0));
        assert!(drain(&mut p).is_empty());
    }
}

#[test]
fn tie_break_against_a_dial_in_flight() {
    // The higher rank's connection loses to our dial in flight.
    let mut p = policy();
    p.want(ms(0), HIGH, 0, all);
    let a = dialed(&mut p, HIGH, 0);
    assert_eq!(
        p.handle_accepted(ms(1), HIGH, 0, all),
        AcceptVerdict::Duplicate
    );
    assert!(!p.is_connected(HIGH, 0));
    assert!(p.handle_dial_result(ms(2), HIGH, 0, a, DialOutcome::Connected, all));

    // The lower rank's wins; our dial's failure then changes nothing (not even a count) ...
    let mut p = policy();
    p.want(ms(0), LOW, 0, all);
    let a = dialed(&mut p, LOW, 0);
    assert_eq!(p.handle_accepted(ms(1), LOW, 0, all), AcceptVerdict::Accept);
    fail(&mut p, ms(2), LOW, 0, a, DialOutcome::Duplicate);
    assert!(p.is_connected(LOW, 0));
    assert_eq!(p.poll_timeout(), None);
    assert_eq!(p.peers[&LOW].slots[0].failures, 0);
    assert_eq!(p.stats().dial_failures + p.stats().duplicate_answers, 0);
    // ... and a new want does not dial the connected slot.
    p.want(ms(3), LOW, 0, all);
    assert!(drain(&mut p).is_empty());

    // ... while its success takes over the slot (the peer accepted it after all).
    let mut p = policy();
    p.want(ms(0), LOW, 0, all);
    let a = dialed(&mut p, LOW, 0);
    assert_eq!(p.handle_accepted(ms(1), LOW, 0, all), AcceptVerdict::Accept);
    assert!(p.handle_dial_result(ms(2), LOW, 0, a, DialOutcome::Connected, all));
    assert_eq!(p.peers[&LOW].slots[0].conn, Some(Side::Dialed));
    check(&p);
}

#[test]
fn tie_break_with_nothing_in_flight_accepts_and_cancels_the_redial() {
    for peer in [LOW, HIGH] {
        // Idle: accepted.
        let mut p = policy();
        assert_eq!(
            p.handle_accepted(ms(0), peer, 1, all),
            AcceptVerdict::Accept
        );
        // Waiting to re-dial: accepted, and the re-dial is cancelled.
        p.want(ms(0), peer, 0, all);
        let a = dialed(&mut p, peer, 0);
        fail(&mut p, ms(1), peer, 0, a, DialOutcome::Failed);
        assert_eq!(p.poll_timeout(), Some(ms(51)));
        assert_eq!(
            p.handle_accepted(ms(2), peer, 0, all),
            AcceptVerdict::Accept
        );
        assert_eq!(p.poll_timeout(), None);
        check(&p);
        assert_eq!(drain(&mut p), [LinkAction::LinkUp { peer }]);
        p.handle_timeout(ms(100), all);
        assert!(
            drain(&mut p).is_empty(),
            "the cancelled re-dial never fires"
        );
        assert_eq!(p.peers[&peer].slots[0].failures, 0);
    }
}

#[test]
fn duplicate_answers_redial_after_backoff_initial_and_count_toward_attempts() {
    let mut p = policy();
    let mut now = ms(0);
    p.want(now, HIGH, 0, all);
    let mut a = dialed(&mut p, HIGH, 0);
    // A plain failure first, so the back-off would be 100 ms next: a duplicate still waits 50.
    fail(&mut p, now, HIGH, 0, a, DialOutcome::Failed);
    for n in 2..8 {
        now = p.poll_timeout().unwrap();
        p.handle_timeout(now, all);
        a = dialed(&mut p, HIGH, 0);
        fail(&mut p, now, HIGH, 0, a, DialOutcome::Duplicate);
        assert_eq!(p.poll_timeout(), Some(now + Duration::from_millis(50)));
        assert_eq!(p.peers[&HIGH].slots[0].failures, n);
    }
    assert_eq!(p.stats().dial_failures, 1);
    assert_eq!(p.stats().duplicate_answers, 6);
    // The 8th answer in a row reaches dial_attempts.
    now = p.poll_timeout().unwrap();
    p.handle_timeout(now, all);
    a = dialed(&mut p, HIGH, 0);
    fail(&mut p, now, HIGH, 0, a, DialOutcome::Duplicate);
    assert!(!p.knows(HIGH));
    assert_eq!(p.stats().gave_up, 1);
}

#[test]
fn the_dead_and_the_forgotten_are_never_dialed() {
    let dead = |r: Rank| r != HIGH;
    let mut p = policy();
    p.want(ms(0), HIGH, 0, dead);
    p.want(ms(0), ME, 0, all);
    assert!(drain(&mut p).is_empty());
    assert!(!p.knows(HIGH) && !p.knows(ME));
    assert_eq!(
        p.handle_accepted(ms(0), HIGH, 0, dead),
        AcceptVerdict::Refuse
    );
    assert_eq!(p.handle_accepted(ms(0), ME, 0, all), AcceptVerdict::Refuse);
    assert_eq!(p.stats().refused, 2);

    // A peer waiting to re-dial dies: retain_alive forgets it and reports it dead.
    p.want(ms(0), HIGH, 0, all);
    p.want(ms(0), LOW, 0, all);
    let a = dialed_any(&mut p);
    fail(&mut p, ms(0), HIGH, 0, a[0], DialOutcome::Failed);
    p.retain_alive(dead);
    assert_eq!(
        drain(&mut p),
        [LinkAction::LinkDown {
            peer: HIGH,
            reason: LinkDownReason::Dead
        }]
    );
    assert!(!p.knows(HIGH) && p.knows(LOW));
    assert_eq!(p.poll_timeout(), None);
    p.handle_timeout(ms(5_000), dead);
    assert!(drain(&mut p).is_empty());
    check(&p);

    // A waiting re-dial whose peer the predicate now rejects is not dialled (even without
    // retain_alive).
    let mut p = policy();
    p.want(ms(0), HIGH, 0, all);
    let a = dialed(&mut p, HIGH, 0);
    fail(&mut p, ms(0), HIGH, 0, a, DialOutcome::Failed);
    p.handle_timeout(ms(1_000), dead);
    assert!(drain(&mut p).is_empty());
    assert_eq!(p.poll_timeout(), None);

    // A peer that died while its dial was in flight, without a view change: the connection
    // is dropped, nothing else changes.
    let mut p = policy();
    p.want(ms(0), HIGH, 0, all);
    let a = dialed(&mut p, HIGH, 0);
    assert!(!p.handle_dial_result(ms(1), HIGH, 0, a, DialOutcome::Connected, dead));
    assert!(!p.is_connected(HIGH, 0));
    assert!(drain(&mut p).is_empty());
    assert_eq!(p.poll_timeout(), None);
    check(&p);

    // Forgotten (an overflow, no address): the in-flight dial's result is stale.
    let mut p = policy();
    p.want(ms(0), HIGH, 0, all);
    let a = dialed(&mut p, HIGH, 0);
    assert!(p.forget(HIGH));
    assert!(!p.forget(HIGH));
    assert!(!p.handle_dial_result(ms(1), HIGH, 0, a, DialOutcome::Connected, all));
    assert!(!p.handle_dial_result(ms(1), HIGH, 0, a, DialOutcome::Failed, all));
    assert!(drain(&mut p).is_empty());
    assert!(!p.knows(HIGH));
    assert_eq!(p.stats().stale_results, 2);
}

fn dialed_any(p: &mut LinkPolicy) -> Vec<AttemptId> {
    drain(p)
        .into_iter()
        .map(|a| match a {
            LinkAction::Dial { attempt, .. } => attempt,
            other => panic!("{other:?}"),
        })
        .collect()
}

#[test]
fn stale_attempts_are_ignored() {
    let mut p = policy();
    p.want(ms(0), HIGH, 0, all);
    let old = dialed(&mut p, HIGH, 0);
    fail(&mut p, ms(0), HIGH, 0, old, DialOutcome::Failed);
    // The old attempt answered again (a duplicate report) while the slot waits: ignored.
    fail(&mut p, ms(1), HIGH, 0, old, DialOutcome::Failed);
    assert_eq!(p.peers[&HIGH].slots[0].failures, 1);
    p.handle_timeout(ms(50), all);
    let new = dialed(&mut p, HIGH, 0);
    assert!(new > old);
    assert!(!p.handle_dial_result(ms(51), HIGH, 0, old, DialOutcome::Connected, all));
    assert!(!p.is_connected(HIGH, 0));
    // A result for the right attempt but the wrong slot or peer is stale too.
    assert!(!p.handle_dial_result(ms(51), HIGH, 1, new, DialOutcome::Connected, all));
    assert!(!p.handle_dial_result(ms(51), LOW, 0, new, DialOutcome::Connected, all));
    assert!(!p.handle_dial_result(ms(51), HIGH, 7, new, DialOutcome::Connected, all));
    assert_eq!(p.stats().stale_results, 5);
    assert!(p.handle_dial_result(ms(52), HIGH, 0, new, DialOutcome::Connected, all));
    check(&p);
}

#[test]
fn poll_timeout_is_the_earliest_redial() {
    let mut p = policy();
    for peer in [Rank(1), Rank(7), Rank(8)] {
        p.want(ms(0), peer, 0, all);
        p.want(ms(0), peer, 1, all);
    }
    let dials: Vec<(Rank, usize, AttemptId)> = drain(&mut p)
        .into_iter()
        .map(|a| match a {
            LinkAction::Dial {
                peer,
                slot,
                attempt,
                ..
            } => (peer, slot, attempt),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(dials.len(), 6);
    // Fail them at different times, not in rank order: 8/1 at 10 ms (due 60), 1/0 at 20 ms
    // (due 70), 7/1 at 30 ms (due 80); the others stay in flight.
    for (at, peer, slot) in [(10, Rank(8), 1), (20, Rank(1), 0), (30, Rank(7), 1)] {
        let a = dials.iter().find(|d| d.0 == peer && d.1 == slot).unwrap().2;
        fail(&mut p, ms(at), peer, slot, a, DialOutcome::Failed);
    }
    check(&p);
    assert_eq!(p.poll_timeout(), Some(ms(60)));
    p.handle_timeout(ms(65), all);
    assert_eq!(dialed(&mut p, Rank(8), 1), AttemptId(7));
    assert_eq!(p.poll_timeout(), Some(ms(70)));
    // A late wake fires every due re-dial, earliest first.
    p.handle_timeout(ms(500), all);
    let order: Vec<Rank> = drain(&mut p)
        .into_iter()
        .map(|a| match a {
            LinkAction::Dial { peer, .. } => peer,
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(order, [Rank(1), Rank(7)]);
    assert_eq!(p.poll_timeout(), None);
    check(&p);
}

#[test]
fn link_up_once_every_slot_is_connected_and_down_when_one_closes() {
    let mut p = policy();
    p.want(ms(0), HIGH, 0, all);
    p.want(ms(0), HIGH, 1, all);
    let a = dialed_any(&mut p);
    assert!(p.handle_dial_result(ms(1), HIGH, 0, a[0], DialOutcome::Connected, all));
    assert!(drain(&mut p).is_empty());
    assert!(!p.is_up(HIGH));
    assert!(p.handle_dial_result(ms(1), HIGH, 1, a[1], DialOutcome::Connected, all));
    assert_eq!(drain(&mut p), [LinkAction::LinkUp { peer: HIGH }]);
    assert!(p.is_up(HIGH));
    // A replacement connection does not report the link up again.
    assert_eq!(
        p.handle_accepted(ms(2), HIGH, 1, all),
        AcceptVerdict::Duplicate
    );
    assert_eq!(p.stats().links_up, 1);
    // One connection ends: the link is down and forgotten (the adapter reports it).
    assert!(p.handle_closed(ms(3), HIGH, 1));
    assert!(!p.knows(HIGH) && !p.is_up(HIGH));
    assert!(!p.handle_closed(ms(3), HIGH, 0));
    assert!(drain(&mut p).is_empty());
    // Up again after both reconnect.
    assert_eq!(
        p.handle_accepted(ms(4), HIGH, 0, all),
        AcceptVerdict::Accept
    );
    assert_eq!(
        p.handle_accepted(ms(4), HIGH, 1, all),
        AcceptVerdict::Accept
    );
    assert_eq!(drain(&mut p), [LinkAction::LinkUp { peer: HIGH }]);
}

#[test]
fn odd_inputs_are_harmless() {
    let mut p = policy();
    p.want(ms(0), HIGH, 2, all);
    p.want(ms(0), HIGH, usize::MAX, all);
    assert!(drain(&mut p).is_empty());
    assert!(!p.knows(HIGH));
    assert_eq!(
        p.handle_accepted(ms(0), HIGH, 2, all),
        AcceptVerdict::Refuse
    );
    assert!(!p.handle_closed(ms(0), HIGH, 9));
    assert!(!p.handle_dial_result(ms(0), HIGH, 2, AttemptId(1), DialOutcome::Connected, all));
    p.handle_timeout(ms(7), all);
    // Time going backwards is taken as the latest time seen.
    let mut p = policy();
    p.want(ms(100), HIGH, 0, all);
    let a = dialed(&mut p, HIGH, 0);
    fail(&mut p, ms(1), HIGH, 0, a, DialOutcome::Failed);
    assert_eq!(p.poll_timeout(), Some(ms(150)));
    // A back-off past the end of time saturates.
    let mut p = with(LinkConfig {
        backoff_initial: Duration::MAX,
        backoff_max: Duration::MAX,
        ..LinkConfig::default()
    });
    p.want(ms(5), HIGH, 0, all);
    let a = dialed(&mut p, HIGH, 0);
    fail(&mut p, ms(5), HIGH, 0, a, DialOutcome::Failed);
    assert_eq!(p.poll_timeout(), Some(Instant::MAX));
    p.handle_timeout(Instant::MAX, all);
    dialed(&mut p, HIGH, 0);
    check(&p);
}

// ---- random input sequences against invariants ----

#[derive(Clone, Debug)]
enum Op {
    Want(u32, usize),
    /// Feeds the result of the `n`-th outstanding dial (modulo), or of a stale attempt.
    Result(usize, DialOutcome, bool),
    Accepted(u32, usize),
    Closed(u32, usize),
    Forget(u32),
    Kill(u32),
    /// Advances time by this many ms, then fires due re-dials.
    Tick(u64),
}

fn outcome() -> impl Strategy<Value = DialOutcome> {
    prop_oneof![
        Just(DialOutcome::Connected),
        Just(DialOutcome::Refused),
        Just(DialOutcome::Failed),
        Just(DialOutcome::Duplicate),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    // Ranks 0..8 around ME = 5; slot 2 is out of range.
    prop_oneof![
        4 => (0..8u32, 0..3usize).prop_map(|(r, s)| Op::Want(r, s)),
        6 => (any::<usize>(), outcome(), prop::bool::weighted(0.1))
            .prop_map(|(n, o, stale)| Op::Result(n, o, stale)),
        2 => (0..8u32, 0..3usize).prop_map(|(r, s)| Op::Accepted(r, s)),
        1 => (0..8u32, 0..3usize).prop_map(|(r, s)| Op::Closed(r, s)),
        1 => (0..8u32).prop_map(Op::Forget),
        1 => (0..8u32).prop_map(Op::Kill),
        3 => (0..3_000u64).prop_map(Op::Tick),
    ]
}

/// What the adapter knows, kept from the actions alone.
#[derive(Default)]
struct Model {
    dead: BTreeSet<Rank>,
    /// The dial of each slot not yet answered or forgotten.
    outstanding: BTreeMap<(Rank, usize), AttemptId>,
    /// Every attempt issued, for stale answers.
    issued: Vec<(Rank, usize, AttemptId)>,
    up: BTreeSet<Rank>,
    last_attempt: Option<AttemptId>,
}

impl Model {
    fn forgotten(&mut self, peer: Rank) {
        self.outstanding.retain(|k, _| k.0 != peer);
        self.up.remove(&peer);
    }

    fn take(&mut self, p: &mut LinkPolicy) -> Result<(), TestCaseError> {
        while let Some(a) = p.poll_action() {
            match a {
                LinkAction::Dial {
                    peer,
                    slot,
                    attempt,
                    ..
                } => {
                    prop_assert!(!self.dead.contains(&peer), "dialed dead {peer}");
                    prop_assert!(peer != ME && slot < 2);
                    prop_assert!(
                        !self.outstanding.contains_key(&(peer, slot)),
                        "two dials in flight for {peer}/{slot}"
                    );
                    prop_assert!(self.last_attempt < Some(attempt));
                    self.last_attempt = Some(attempt);
                    self.outstanding.insert((peer, slot), attempt);
                    self.issued.push((peer, slot, attempt));
                }
                LinkAction::LinkUp { peer } => {
                    prop_assert!(self.up.insert(peer), "{peer} reported up twice");
                }
                LinkAction::LinkDown { peer, reason } => {
                    if reason == LinkDownReason::Dead {
                        prop_assert!(self.dead.contains(&peer));
                    }
                    self.forgotten(peer);
                }
            }
        }
        Ok(())
    }
}

fn run(ops: Vec<Op>, cfg: LinkConfig) -> Result<(), TestCaseError> {
    let mut p = LinkPolicy::new(ME, 2, cfg, Instant::ZERO).unwrap();
    let mut m = Model::default();
    let mut now = Instant::ZERO;
    for op in ops {
        let dead = m.dead.clone();
        let alive = move |r: Rank| !dead.contains(&r);
        match op {
            Op::Want(r, s) => p.want(now, Rank(r), s, &alive),
            Op::Result(n, o, stale) => {
                let pick = if stale || m.outstanding.is_empty() {
                    (!m.issued.is_empty()).then(|| m.issued[n % m.issued.len()])
                } else {
                    let (&(r, s), &a) = m.outstanding.iter().nth(n % m.outstanding.len()).unwrap();
                    Some((r, s, a))
                };
                if let Some((r, s, a)) = pick {
                    let current = m.outstanding.get(&(r, s)) == Some(&a);
                    if current {
                        m.outstanding.remove(&(r, s));
                    }
                    let run = p.handle_dial_result(now, r, s, a, o, &alive);
                    prop_assert!(!run || (current && o == DialOutcome::Connected));
                    if current && o == DialOutcome::Connected {
                        prop_assert!(run && p.is_connected(r, s));
                    }
                }
            }
            Op::Accepted(r, s) => {
                let v = p.handle_accepted(now, Rank(r), s, &alive);
                if m.dead.contains(&Rank(r)) || Rank(r) == ME || s >= 2 {
                    prop_assert_eq!(v, AcceptVerdict::Refuse);
                } else {
                    prop_assert!(v != AcceptVerdict::Refuse);
                }
                if v == AcceptVerdict::Accept {
                    prop_assert!(p.is_connected(Rank(r), s));
                }
            }
            Op::Closed(r, s) => {
                if p.handle_closed(now, Rank(r), s) {
                    m.forgotten(Rank(r));
                }
            }
            Op::Forget(r) => {
                if p.forget(Rank(r)) {
                    m.forgotten(Rank(r));
                }
            }
            Op::Kill(r) => {
                m.dead.insert(Rank(r));
                let dead = m.dead.clone();
                p.retain_alive(move |r| !dead.contains(&r));
            }
            Op::Tick(d) => {
                now += Duration::from_millis(d);
                p.handle_timeout(now, &alive);
                prop_assert!(p.poll_timeout().is_none_or(|t| t > now));
            }
        }
        m.take(&mut p)?;
        check(&p);
        // The policy's in-flight dials are exactly the model's outstanding ones.
        let mut inflight = BTreeMap::new();
        for (&r, st) in &p.peers {
            prop_assert!(!m.dead.contains(&r));
            prop_assert_eq!(st.up, m.up.contains(&r));
            for (i, s) in st.slots.iter().enumerate() {
                if let DialState::InFlight(a) = s.dial {
                    inflight.insert((r, i), a);
                }
            }
        }
        prop_assert_eq!(&inflight, &m.outstanding);
        prop_assert!(m.up.iter().all(|r| p.is_up(*r)));
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn random_inputs_keep_the_invariants(ops in prop::collection::vec(op(), 1..200)) {
        run(ops, LinkConfig::default())?;
    }

    #[test]
    fn random_inputs_with_few_attempts(
        ops in prop::collection::vec(op(), 1..200),
        dial in 1..4u32,
        refused in 1..4u32,
        grace in 0..2_000u64,
    ) {
        let cfg = LinkConfig {
            dial_attempts: dial,
            refused_attempts: refused,
            startup_grace: Duration::from_millis(grace),
            ..LinkConfig::default()
        };
        run(ops, cfg)?;
    }
}
