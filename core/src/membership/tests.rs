//! Evidence-based removal through real nodes in the simulator (detector on): a silent rank is
//! removed everywhere within the bound and nobody else is; a short pause removes nobody; a
//! long-paused rank is removed and, once resumed, learns it was evicted; the root can be
//! removed; simultaneous losses share a view change.

use std::collections::BTreeMap;

use super::{AlertEntry, AlertMsg, CorroborateMsg, CorroborateOp, MembershipEvent, MembershipMsg};
use crate::event::Event;
use crate::sim::{Fault, Observer, Sim, SimConfig, World};
use crate::time::{Duration, Instant};
use crate::tree::Rank;

/// Membership events per rank, with their time.
#[derive(Default)]
struct Log(BTreeMap<Rank, Vec<(Instant, MembershipEvent)>>);

impl Observer for Log {
    fn on_event(&mut self, w: &World, rank: Rank, e: &Event) {
        if let Event::Membership(m) = e {
            self.0.entry(rank).or_default().push((w.now(), m.clone()));
        }
    }
}

impl Log {
    fn evicted(&self, r: Rank) -> bool {
        self.0.get(&r).is_some_and(|v| {
            v.iter()
                .any(|(_, e)| matches!(e, MembershipEvent::Evicted { .. }))
        })
    }

    /// Distinct epochs of confirmation notices seen anywhere.
    fn epochs(&self) -> Vec<u64> {
        let mut v: Vec<u64> = self
            .0
            .values()
            .flatten()
            .filter_map(|(_, e)| match e {
                MembershipEvent::FailureConfirmed { epoch, .. } => Some(*epoch),
                _ => None,
            })
            .collect();
        v.sort_unstable();
        v.dedup();
        v
    }
}

fn sim(span: u32, radix: u32, seed: u64) -> Sim<Log> {
    let mut cfg = SimConfig::new(span, radix, seed);
    cfg.node.detect.enabled = true;
    Sim::new(cfg, Log::default()).unwrap()
}

pub(super) fn ms(x: u64) -> Instant {
    Instant::ZERO + Duration::from_millis(x)
}

/// Ranks `at` holds dead.
fn dead_at(s: &Sim<Log>, at: Rank) -> Vec<u32> {
    s.world()
        .node(at)
        .unwrap()
        .tree()
        .dead()
        .iter()
        .map(|r| r.0)
        .collect()
}

/// Runs in 5 ms steps until every rank in `survivors` holds `victims` dead (and nothing
/// else); returns when, or panics after `budget`.
fn until_removed(
    s: &mut Sim<Log>,
    survivors: &[Rank],
    victims: &[u32],
    budget: Duration,
) -> Instant {
    let start = s.world().now();
    loop {
        let now = s.world().now();
        if survivors.iter().all(|&r| dead_at(s, r) == victims) {
            return now;
        }
        assert!(
            now - start <= budget,
            "not removed within {budget:?}: {:?}",
            survivors
                .iter()
                .map(|&r| (r.0, dead_at(s, r)))
                .collect::<Vec<_>>()
        );
        s.run_until(now + Duration::from_millis(5)).unwrap();
    }
}

/// Cuts `child`'s link to its tree parent (`oneway`: child to parent only).
fn cut_to_parent(s: &mut Sim<Log>, child: Rank, oneway: bool) {
    let node = s.world().node(child).unwrap();
    let parent = node.tree().view().unwrap().parent().unwrap();
    s.apply(if oneway {
        Fault::CutOneWay(child, parent)
    } else {
        Fault::Cut(child, parent)
    });
}

fn others(span: u32, except: &[u32]) -> Vec<Rank> {
    (0..span)
        .filter(|r| !except.contains(r))
        .map(Rank)
        .collect()
}

#[test]
fn silent_loss_removed_everywhere_within_bound_and_nobody_else() {
    for seed in 1..=4 {
        let mut s = sim(64, 4, seed);
        // Different victims, lost at different phases of their heartbeat period.
        s.run_until(ms(500 + 23 * seed)).unwrap();
        let victim = (10 + 13 * seed as u32) % 64;
        // A host that vanishes: no reset, no link-down, its frames never answered.
        s.apply(Fault::Pause(Rank(victim)));
        let t0 = s.world().now();
        let at = until_removed(
            &mut s,
            &others(64, &[victim]),
            &[victim],
            Duration::from_millis(500),
        );
        eprintln!("seed {seed}: removed everywhere after {:?}", at - t0);
        assert!(
            at - t0 <= Duration::from_millis(500),
            "seed {seed}: {:?}",
            at - t0
        );
        // Stays that way: nobody else is removed over the next second.
        s.run_until(at + Duration::from_secs(1)).unwrap();
        for r in others(64, &[victim]) {
            assert_eq!(dead_at(&s, r), [victim], "seed {seed} at {r}");
        }
        let root = s.world().node(Rank(0)).unwrap();
        assert_eq!(root.stats().membership.removed_on_evidence, 1);
    }
}

#[test]
fn short_pause_removes_nobody() {
    let mut s = sim(64, 4, 7);
    s.run_until(ms(500)).unwrap();
    for r in [5, 0, 63] {
        let t = s.world().now();
        s.apply(Fault::Pause(Rank(r)));
        s.run_until(t + Duration::from_millis(150)).unwrap();
        s.apply(Fault::Resume(Rank(r)));
        s.run_until(t + Duration::from_millis(1_000)).unwrap();
    }
    for r in 0..64 {
        assert!(
            dead_at(&s, Rank(r)).is_empty(),
            "{r}: {:?}",
            dead_at(&s, Rank(r))
        );
    }
    assert!(s.observer().0.is_empty(), "{:?}", s.observer().0);
}

#[test]
fn long_paused_rank_is_removed_then_told_it_was_evicted() {
    let mut s = sim(64, 4, 8);
    s.run_until(ms(500)).unwrap();
    let victim = 22;
    s.apply(Fault::Pause(Rank(victim)));
    let t0 = s.world().now();
    let at = until_removed(
        &mut s,
        &others(64, &[victim]),
        &[victim],
        Duration::from_millis(600),
    );
    assert!(at - t0 <= Duration::from_millis(600));
    s.run_until(t0 + Duration::from_secs(3)).unwrap();
    assert!(!s.observer().evicted(Rank(victim)));
    s.apply(Fault::Resume(Rank(victim)));
    s.run_until(t0 + Duration::from_millis(3_500)).unwrap();
    assert!(s.observer().evicted(Rank(victim)), "told on resume");
    let n = s.world().node(Rank(victim)).unwrap();
    assert!(n.tree().view().is_none(), "it stops");
    // It takes no commands.
    let r = s.command(Rank(victim), |n, now| n.xcast(now, 16, bytes::Bytes::new()));
    assert!(matches!(r, Some(Err(crate::CommandError::Dead))), "{r:?}");
    // Nobody else was removed, and survivors still broadcast to each other.
    for r in others(64, &[victim]) {
        assert_eq!(dead_at(&s, r), [victim]);
    }
}

/// The transport path of fencing: a member answers a removed rank's dial with the verdict
/// "removed" (and only a removed rank's), and the dialer that hears it is evicted.
#[test]
fn a_removed_ranks_dial_is_answered_removed_and_the_answer_evicts_it() {
    let mut s = sim(32, 4, 3);
    s.run_until(ms(500)).unwrap();
    let victim = Rank(9);
    s.apply(Fault::Pause(victim));
    let t0 = s.world().now();
    until_removed(
        &mut s,
        &others(32, &[victim.0]),
        &[victim.0],
        Duration::from_millis(600),
    );
    s.run_until(t0 + Duration::from_millis(800)).unwrap();
    let verdict = s.command(Rank(0), |n, now| n.fence_verdict(now, victim));
    let epoch = verdict
        .flatten()
        .expect("the root answers a removed rank's dial");
    assert!(epoch >= 1);
    let live = s.command(Rank(0), |n, now| n.fence_verdict(now, Rank(5)));
    assert_eq!(live, Some(None), "a live rank's dial is not fenced");
    // Resumed, before any frame reaches it, it dials and hears the verdict.
    s.apply(Fault::Resume(victim));
    assert!(s.world().node(victim).unwrap().tree().view().is_some());
    let told = s.command(victim, |n, now| n.handle_fenced(now, Rank(0), epoch));
    assert_eq!(told, Some(()));
    let n = s.world().node(victim).unwrap();
    assert!(
        n.tree().view().is_none(),
        "the dialer told it was removed stops"
    );
    assert_eq!(n.stats().membership.fenced_dials_in, 1);
    assert!(
        s.world()
            .node(Rank(0))
            .unwrap()
            .stats()
            .membership
            .evicted_sent
            >= 1
    );
}

#[test]
fn paused_root_is_removed_and_the_tree_gets_a_new_root() {
    let mut s = sim(64, 4, 9);
    s.run_until(ms(500)).unwrap();
    s.apply(Fault::Pause(Rank(0)));
    let t0 = s.world().now();
    let at = until_removed(&mut s, &others(64, &[0]), &[0], Duration::from_millis(600));
    assert!(at - t0 <= Duration::from_millis(600));
    let roots: Vec<u32> = others(64, &[0])
        .into_iter()
        .filter(|&r| s.world().node(r).unwrap().tree().view().unwrap().is_root())
        .map(|r| r.0)
        .collect();
    assert_eq!(roots.len(), 1, "{roots:?}");
}

#[test]
fn simultaneous_silent_losses_are_removed_together() {
    let mut s = sim(128, 8, 10);
    s.run_until(ms(500)).unwrap();
    let victims = [3, 40, 77, 101];
    for v in victims {
        s.apply(Fault::Pause(Rank(v)));
    }
    until_removed(
        &mut s,
        &others(128, &victims),
        &victims,
        Duration::from_millis(800),
    );
    assert!(
        s.observer().epochs().len() <= 2,
        "{:?}",
        s.observer().epochs()
    );
}

#[test]
fn one_observer_losing_its_subject_removes_nobody() {
    let mut s = sim(64, 4, 11);
    s.run_until(ms(300)).unwrap();
    // An observer of rank 30 that is not its tree neighbour stops hearing it (one-way cut).
    let victim = Rank(30);
    let node = s.world().node(victim).unwrap();
    let observer = node
        .detect_observers()
        .find(|&o| !node.tree().view().unwrap().is_neighbor(o))
        .expect("a non-neighbour observer");
    s.apply(Fault::CutOneWay(victim, observer));
    s.run_until(ms(3_000)).unwrap();
    for r in 0..64 {
        assert!(
            dead_at(&s, Rank(r)).is_empty(),
            "{r}: {:?}",
            dead_at(&s, Rank(r))
        );
    }
    let o = s.world().node(observer).unwrap();
    assert!(o.stats().detect.unresponsive >= 1, "the observer did alert");
}

#[test]
fn tree_link_cut_for_seconds_evicts_nobody_with_the_detector_on() {
    for oneway in [false, true] {
        let mut s = sim(64, 4, 12);
        s.run_until(ms(300)).unwrap();
        let child = Rank(5);
        cut_to_parent(&mut s, child, oneway);
        // Longer than the link timeout: both ends see the link time out (soft evidence).
        s.run_until(ms(5_300)).unwrap();
        s.apply(Fault::Heal);
        s.run_until(ms(6_500)).unwrap();
        for r in 0..64 {
            assert!(
                dead_at(&s, Rank(r)).is_empty(),
                "oneway {oneway}, {r}: {:?}",
                dead_at(&s, Rank(r))
            );
        }
        let soft: u64 = (0..64)
            .map(|r| s.world().node(Rank(r)).unwrap().stats().soft_link_downs)
            .sum();
        assert!(soft >= 1, "oneway {oneway}: the cut timed the link out");
    }
}

/// Counts xcast deliveries per (rank, op).
#[derive(Default)]
struct Deliveries(BTreeMap<(Rank, u64), u32>);

impl Observer for Deliveries {
    fn on_event(&mut self, _w: &World, rank: Rank, e: &Event) {
        if let Event::Xcast(crate::xcast::XcastEvent::Delivered { op, .. }) = e {
            *self.0.entry((rank, *op)).or_default() += 1;
        }
    }
}

#[test]
fn broadcasts_across_a_cut_tree_link_resume_after_the_heal() {
    for oneway in [false, true] {
        let mut cfg = SimConfig::new(32, 4, 13);
        cfg.node.detect.enabled = true;
        let mut s = Sim::new(cfg, Deliveries::default()).unwrap();
        s.run_until(ms(300)).unwrap();
        let child = Rank(6);
        let parent = super::relay_tests::parent_of(s.world(), child);
        s.apply(if oneway {
            Fault::CutOneWay(parent, child)
        } else {
            Fault::Cut(child, parent)
        });
        let mut t = 300;
        for i in 0..20u64 {
            t += 100;
            s.run_until(ms(t)).unwrap();
            let from = Rank((i % 32) as u32);
            s.command(from, |n, now| {
                n.xcast(now, 16, bytes::Bytes::from_static(b"x"))
            })
            .unwrap()
            .unwrap();
        }
        s.run_until(ms(3_000)).unwrap();
        s.apply(Fault::Heal);
        s.run_until(ms(5_000)).unwrap();
        let d = &s.observer().0;
        for r in 0..32 {
            let got = d.keys().filter(|(rank, _)| *rank == Rank(r)).count();
            assert_eq!(got, 20, "oneway {oneway}: rank {r} delivered {got} of 20");
        }
        assert!(d.values().all(|&c| c == 1), "exactly once");
    }
}

/// A root cut off from everyone sees all its subjects fall silent; it removes none of them
/// (only evidence from another observer counts), while the rest remove it and tell it on heal.
#[test]
fn isolated_root_removes_nobody_and_is_removed_by_the_rest() {
    let mut s = sim(32, 4, 21);
    s.run_until(ms(500)).unwrap();
    s.apply(Fault::Partition(vec![vec![Rank(0)]]));
    let t0 = s.world().now();
    until_removed(&mut s, &others(32, &[0]), &[0], Duration::from_millis(800));
    s.run_until(t0 + Duration::from_secs(3)).unwrap();
    assert!(
        dead_at(&s, Rank(0)).is_empty(),
        "{:?}",
        dead_at(&s, Rank(0))
    );
    s.apply(Fault::Heal);
    s.run_until(t0 + Duration::from_millis(3_500)).unwrap();
    assert!(s.observer().evicted(Rank(0)), "told on heal");
    for r in 1..32 {
        assert!(!s.observer().evicted(Rank(r)), "{r} evicted");
        assert_eq!(dead_at(&s, Rank(r)), [0], "at {r}");
    }
}

/// A minority holding the root sees the majority fall silent: the majority guard refuses to
/// remove them, and the majority (whose coordinator is in the minority) removes nobody. After
/// the heal no rank of the majority is evicted. (The majority's alerts about the minority,
/// re-sent until the heal, may then remove minority ranks other than the root: a partition
/// with a minority is the quorum issue's; see the note on issue #11.)
#[test]
fn a_minority_holding_the_root_does_not_remove_the_majority() {
    // Quorum off (the root decides alone): the guard is all that stops it. With the quorum on
    // the majority also removes the minority (`quorum/sim_tests.rs`).
    let mut cfg = SimConfig::new(16, 2, 22);
    cfg.node.detect.enabled = true;
    cfg.node.membership.quorum = false;
    let mut s = Sim::new(cfg, Log::default()).unwrap();
    s.run_until(ms(500)).unwrap();
    // Five of sixteen: enough observers on the minority side that the root's evidence about
    // the majority becomes stable (with three, too few report for a decision to be tried).
    // Without the guard the root removes every majority rank.
    let minority: Vec<Rank> = (0..5).map(Rank).collect();
    s.apply(Fault::Partition(vec![minority]));
    let t0 = s.world().now();
    s.run_until(t0 + Duration::from_secs(3)).unwrap();
    for r in 0..16 {
        assert!(
            dead_at(&s, Rank(r)).len() * 2 < 16,
            "{r}: {:?}",
            dead_at(&s, Rank(r))
        );
    }
    let root = s.world().node(Rank(0)).unwrap();
    assert!(
        root.stats().membership.decisions_refused_minority >= 1,
        "the guard acted: {:?}",
        root.stats().membership
    );
    s.apply(Fault::Heal);
    s.run_until(t0 + Duration::from_secs(5)).unwrap();
    for r in 5..16 {
        assert!(
            !s.observer().evicted(Rank(r)),
            "{r} evicted; dead sets {:?}; {:?}",
            (0..16).map(|x| dead_at(&s, Rank(x))).collect::<Vec<_>>(),
            s.observer().0.get(&Rank(0))
        );
    }
    assert!(!s.observer().evicted(Rank(0)), "the root stays");
}

/// A tree link cut for good, both ends alive, and the child cut from every rank either end
/// would relay through too (ranks 0 to 4: the parent's ancestor, then ranks in order): after
/// `membership.gray_timeout` exactly one endpoint, the child, is removed everywhere with cause
/// "unreachable"; nobody else is. (With a relay that carries, nobody is removed:
/// `relay_tests.rs`.)
#[test]
fn tree_link_cut_for_good_removes_exactly_the_child_after_the_gray_timeout() {
    for oneway in [false, true] {
        let mut s = sim(64, 4, 23);
        s.run_until(ms(300)).unwrap();
        let child = Rank(5);
        cut_to_parent(&mut s, child, oneway);
        for relay in 0..5 {
            s.apply(if oneway {
                Fault::CutOneWay(child, Rank(relay))
            } else {
                Fault::Cut(child, Rank(relay))
            });
        }
        let gray = crate::Config::new(64, 4).membership.gray_timeout;
        s.run_until(ms(300 + gray.as_millis() - 500)).unwrap();
        for r in 0..64 {
            assert!(
                dead_at(&s, Rank(r)).is_empty(),
                "oneway {oneway}: early at {r}"
            );
        }
        s.run_until(ms(300) + gray + Duration::from_secs(2))
            .unwrap();
        for r in others(64, &[child.0]) {
            assert_eq!(dead_at(&s, r), [child.0], "oneway {oneway}: at {r}");
        }
        // The view change says why, and how many members remain.
        let seen = s
            .observer()
            .0
            .get(&Rank(0))
            .unwrap()
            .iter()
            .find_map(|(_, e)| match e {
                MembershipEvent::FailureConfirmed {
                    causes, members, ..
                } => Some((causes.clone(), *members)),
                _ => None,
            });
        let (causes, members) = seen.expect("the root confirmed the removal");
        assert_eq!(
            causes.get(&child),
            Some(&crate::membership::RemovalCause::Unreachable)
        );
        assert_eq!(members, 63);
    }
}

/// An interior rank driven by hand, with the detector on (64 ranks, radix 4): the deepest
/// ranks sit at depth 3, so evidence has relays to pass.
fn relay_node() -> crate::Node {
    let mut cfg = crate::Config::new(64, 4);
    cfg.detect.enabled = true;
    let me = (0..64)
        .map(Rank)
        .find(|&r| {
            let t = crate::tree::Tree::new(64, 4, r).unwrap();
            t.view().unwrap().ancestors().len() == 3
        })
        .unwrap();
    let mut n = crate::Node::new(cfg, me, 1, Instant::ZERO).unwrap();
    while n.poll_transmit().is_some() {}
    n
}

fn alert(hops: u8, subject: Rank, observers: &[u32]) -> bytes::Bytes {
    crate::wire::Message::from(AlertMsg {
        hops,
        entries: vec![AlertEntry {
            subject,
            incarnation: 0,
            down: true,
            observers: observers.iter().map(|&o| Rank(o)).collect(),
        }],
    })
    .encode()
}

/// The alert frames `n` sends, decoded, with their destination.
fn sent_alerts(n: &mut crate::Node) -> Vec<(Rank, AlertMsg)> {
    let limits = crate::Config::new(64, 4).limits();
    let mut v = Vec::new();
    while let Some(t) = n.poll_transmit() {
        if let Ok(crate::wire::Message::Membership(MembershipMsg::Alert(m))) =
            crate::wire::Message::decode(t.frame, &limits)
        {
            v.push((t.to, m));
        }
    }
    v
}

/// Evidence from descendants is merged per subject and goes to the parent in one frame, one
/// hop further; once the parent is itself suspected here, evidence skips it to the next
/// ancestor; evidence past the relay limit is dropped and counted.
#[test]
fn a_relay_merges_evidence_per_subject_and_skips_a_suspected_parent() {
    let mut n = relay_node();
    let me = n.me();
    let up: Vec<Rank> = n.tree().view().unwrap().ancestors().to_vec();
    let (grandparent, parent) = (up[1], up[2]);
    // A subject off this rank's path, and observers that are not on it either.
    let subject = (0..64)
        .map(Rank)
        .find(|r| *r != me && !up.contains(r))
        .unwrap();
    let t = ms(1_000);
    n.handle_frame(t, Rank(60), alert(0, subject, &[60, 61]));
    n.handle_frame(t, Rank(62), alert(2, subject, &[62]));
    n.handle_timeout(t + Duration::from_millis(10));
    let sent = sent_alerts(&mut n);
    assert_eq!(sent.len(), 1, "one frame: {sent:?}");
    let (to, m) = &sent[0];
    assert_eq!(*to, parent);
    assert_eq!(m.hops, 3, "the most relays any part passed, plus this one");
    assert_eq!(m.entries.len(), 1, "merged per subject: {m:?}");
    assert_eq!(m.entries[0].observers, [Rank(60), Rank(61), Rank(62)]);
    assert_eq!(n.stats().membership.alerts_relayed, 3);

    // Evidence against the parent goes up the tree without it (to whoever would take its
    // slot), and makes it a hop to avoid: other evidence skips it to the grandparent.
    let around = *n.tree().ancestors_without(parent).last().unwrap();
    assert_ne!(around, parent);
    let t = ms(1_100);
    n.handle_frame(t, Rank(60), alert(0, parent, &[60]));
    n.handle_frame(t, Rank(61), alert(0, subject, &[61]));
    n.handle_timeout(t + Duration::from_millis(10));
    let mut sent = sent_alerts(&mut n);
    sent.sort_by_key(|(_, m)| m.entries[0].subject == parent);
    assert_eq!(sent.len(), 2, "{sent:?}");
    assert_eq!(
        (sent[0].0, sent[0].1.entries[0].subject),
        (grandparent, subject)
    );
    assert_eq!((sent[1].0, sent[1].1.entries[0].subject), (around, parent));

    // Past the relay limit: dropped, counted.
    let stale = n.stats().membership.alerts_stale;
    n.handle_frame(
        ms(1_200),
        Rank(60),
        alert(AlertMsg::MAX_HOPS, subject, &[60]),
    );
    n.handle_timeout(ms(1_210));
    assert!(sent_alerts(&mut n).is_empty());
    assert_eq!(n.stats().membership.alerts_stale, stale + 1);
}

/// End to end: a silent rank's observers' evidence reaches the root through relays, merged
/// (fewer alert frames than pieces of evidence), and the rank is removed.
#[test]
fn evidence_travels_up_the_tree_merged() {
    let mut s = sim(64, 4, 31);
    s.run_until(ms(300)).unwrap();
    let victim = Rank(41);
    s.apply(Fault::Pause(victim));
    until_removed(
        &mut s,
        &others(64, &[victim.0]),
        &[victim.0],
        Duration::from_secs(2),
    );
    let w = s.world();
    let stat = |f: fn(&crate::membership::MembershipStats) -> u64| -> u64 {
        (0..64)
            .filter_map(|r| w.node(Rank(r)))
            .map(|n| f(&n.stats().membership))
            .sum()
    };
    assert!(stat(|m| m.alerts_relayed) > 0, "evidence passed relays");
    let root = w.node(Rank(0)).unwrap().stats();
    assert!(root.membership.alerts_in >= 2, "{:?}", root.membership);
    assert!(root.membership.removed_on_evidence == 1);
}

/// Agreed views: at every moment, members that applied the same epoch hold the same removed
/// set; at the end every survivor holds one view, whose removed set is exactly the faulty
/// ranks (a crash, a silent loss and a long pause, removed by separate decisions).
#[test]
fn members_at_the_same_epoch_hold_the_same_view() {
    let mut s = sim(64, 4, 37);
    s.run_until(ms(300)).unwrap();
    let (crashed, silent, paused) = (Rank(9), Rank(30), Rank(51));
    s.apply(Fault::Crash(crashed));
    s.schedule(ms(600), Fault::Pause(silent));
    s.schedule(ms(1_200), Fault::Pause(paused));
    s.schedule(ms(3_700), Fault::Resume(paused));
    let faulty = [crashed, silent, paused];
    let mut t = 300;
    let mut epochs_seen = BTreeMap::new();
    // Every millisecond: a decision's flood runs a few ms ahead of its notice.
    while t < 5_000 {
        t += 1;
        s.run_until(ms(t)).unwrap();
        let w = s.world();
        let mut at_epoch: BTreeMap<u64, (Rank, Vec<Rank>)> = BTreeMap::new();
        for r in others(64, &[crashed.0, silent.0, paused.0]) {
            let v = w.node(r).unwrap().view();
            assert_eq!(v.members as usize, 64 - v.removed.len());
            match at_epoch.get(&v.epoch) {
                Some((other, removed)) => {
                    assert_eq!(&v.removed, removed, "{r} and {other} at epoch {}", v.epoch)
                }
                None => {
                    at_epoch.insert(v.epoch, (r, v.removed.clone()));
                }
            }
            epochs_seen.insert(v.epoch, v.removed.len());
        }
    }
    let w = s.world();
    let views: Vec<_> = others(64, &[crashed.0, silent.0, paused.0])
        .into_iter()
        .map(|r| w.node(r).unwrap().view())
        .collect();
    assert!(views.windows(2).all(|p| p[0] == p[1]), "{views:?}");
    assert_eq!(views[0].removed, faulty.to_vec());
    assert_eq!(views[0].members, 61);
    assert!(
        epochs_seen.len() >= 3,
        "separate decisions: {epochs_seen:?}"
    );
    assert!(s.observer().evicted(paused), "the paused rank was told");
}

/// The root of 64 ranks (radix 4) driven by hand, detector on, with a subject that has eight
/// distinct observers, none of them the root, and those observers.
fn coordinator_node() -> (crate::Node, Rank, Vec<Rank>) {
    let mut cfg = crate::Config::new(64, 4);
    cfg.detect.enabled = true;
    // One node driven by hand: nobody answers its proposals (the quorum is tested in
    // `quorum/sim_tests.rs`).
    cfg.membership.quorum = false;
    let d = cfg.detect.clone();
    let mut n = crate::Node::new(cfg, Rank(0), 1, Instant::ZERO).unwrap();
    while n.poll_transmit().is_some() {}
    let (subject, observers) = watched_subject(&n, &d);
    (n, subject, observers)
}

/// A rank of `n`'s tree (64 ranks) with eight distinct observers, none of them rank 0, and
/// those observers, as `d` places them.
pub(super) fn watched_subject(
    n: &crate::Node,
    d: &crate::detect::DetectConfig,
) -> (Rank, Vec<Rank>) {
    (1..64)
        .map(Rank)
        .map(|s| {
            let rings =
                crate::detect::rings::Rings::compute_for(n.tree(), s, d.ring_seed, d.observers);
            (s, rings.observers.into_iter().collect::<Vec<_>>())
        })
        .find(|(_, o)| o.len() == 8 && !o.contains(&Rank(0)))
        .unwrap()
}

/// An encoded alert with one entry: `subject` at `incarnation`, `down` or up, by `observers`.
pub(super) fn evidence(
    subject: Rank,
    incarnation: u64,
    down: bool,
    observers: &[Rank],
) -> bytes::Bytes {
    crate::wire::Message::from(AlertMsg {
        hops: 0,
        entries: vec![AlertEntry {
            subject,
            incarnation,
            down,
            observers: observers.to_vec(),
        }],
    })
    .encode()
}

/// The decisions `n` flooded (decoded), and drains its output.
fn sent_removals(n: &mut crate::Node) -> Vec<crate::membership::RemovedMsg> {
    let limits = crate::Config::new(64, 4).limits();
    let mut v = Vec::new();
    while let Some(t) = n.poll_transmit() {
        if let Ok(crate::wire::Message::Membership(MembershipMsg::Removed(m))) =
            crate::wire::Message::decode(t.frame, &limits)
        {
            v.push(m);
        }
    }
    while n.poll_event().is_some() {}
    v
}

/// Silence counts whatever incarnation its observer last heard: a subject that refuted one
/// observer (incarnation 1) and then froze is removed on downs about incarnations 1 and 0
/// together (observers that missed the refutation have heard nothing since). A down overtaken
/// by its observer's own refutation (downs climb the tree, refutations go straight) is stale.
#[test]
fn silence_counts_across_incarnations_but_a_refutation_is_not_undone_by_an_older_down() {
    let (mut n, subject, obs) = coordinator_node();
    let t = ms(1_000);
    // The first observer's refutation arrives before its older down: the down is stale.
    n.handle_frame(t, obs[0], evidence(subject, 1, false, &obs[..1]));
    n.handle_frame(t, obs[0], evidence(subject, 0, true, &obs[..1]));
    assert_eq!(n.stats().membership.alerts_stale, 1);
    // Four observers at incarnation 1 and two still at 0: six of eight.
    n.handle_frame(t, obs[1], evidence(subject, 1, true, &obs[1..5]));
    n.handle_timeout(t);
    assert!(sent_removals(&mut n).is_empty(), "four is not enough");
    n.handle_frame(t, obs[5], evidence(subject, 0, true, &obs[5..7]));
    n.handle_timeout(t + Duration::from_millis(60));
    let removed = sent_removals(&mut n);
    assert!(!removed.is_empty(), "{:?}", n.stats().membership);
    assert!(removed.iter().all(|m| m.seq == 1 && m.ranks == [subject]));
    assert_eq!(n.stats().membership.removed_on_evidence, 1);
}

/// With the detector on, a refused dial is one rank's word: not a death here, on a lateral
/// link or a tree link, but a report to the subject's coordinator (the root). Without the
/// detector a lost tree link is the detector (a death at once) and a lateral link is none.
/// Another incarnation answering is a death at once, detector or not, on a tree link.
#[test]
fn a_refused_dial_is_reported_not_a_death_with_the_detector_on() {
    let limits = crate::Config::new(64, 4).limits();
    for enabled in [true, false] {
        let mut cfg = crate::Config::new(64, 4);
        cfg.detect.enabled = enabled;
        let me = Rank(63);
        let mut n = crate::Node::new(cfg, me, 1, Instant::ZERO).unwrap();
        while n.poll_transmit().is_some() {}
        let view = n.tree().view().unwrap().clone();
        let parent = view.parent().unwrap();
        let lateral = (1..64)
            .map(Rank)
            .find(|&r| r != me && !view.is_neighbor(r))
            .unwrap();
        n.handle_link_down(ms(10), lateral, crate::LinkCause::Refused);
        assert!(!n.tree().dead().contains(lateral), "detector {enabled}");
        n.handle_link_down(ms(11), parent, crate::LinkCause::Refused);
        assert_eq!(
            n.tree().dead().contains(parent),
            !enabled,
            "detector {enabled}: a refused parent"
        );
        let mut reports = Vec::new();
        while let Some(t) = n.poll_transmit() {
            if let Ok(crate::wire::Message::Membership(MembershipMsg::Corroborate(m))) =
                crate::wire::Message::decode(t.frame, &limits)
            {
                reports.push((t.to, m));
            }
        }
        if enabled {
            let want = [lateral, parent].map(|s| {
                (
                    Rank(0),
                    CorroborateMsg {
                        op: CorroborateOp::Refused,
                        subject: s,
                    },
                )
            });
            assert_eq!(reports, want, "both reported to the root");
            assert_eq!(n.corroboration_stats().refusals_out, 2);
            // Refused again at once: one report per `corroborate_timeout`.
            n.handle_link_down(ms(12), lateral, crate::LinkCause::Refused);
            assert_eq!(n.corroboration_stats().refusals_out, 2);
            let sibling = (0..64)
                .map(Rank)
                .find(|&r| r != me && view.is_neighbor(r) && r != parent);
            if let Some(c) = sibling {
                n.handle_link_down(ms(13), c, crate::LinkCause::Incarnation);
                assert!(n.tree().dead().contains(c), "another incarnation: at once");
            }
        } else {
            assert!(reports.is_empty());
        }
        n.handle_link_down(ms(20), Rank(62), crate::LinkCause::TimedOut);
        assert!(!n.tree().dead().contains(Rank(62)), "soft evidence never");
    }
}

fn corroborate(op: CorroborateOp, subject: Rank) -> bytes::Bytes {
    crate::wire::Message::from(CorroborateMsg { op, subject }).encode()
}

/// The corroboration messages `n` sent (decoded, with their destination), and drains its
/// output.
fn sent_corroboration(n: &mut crate::Node) -> Vec<(Rank, CorroborateMsg)> {
    let limits = crate::Config::new(64, 4).limits();
    let mut v = Vec::new();
    while let Some(t) = n.poll_transmit() {
        if let Ok(crate::wire::Message::Membership(MembershipMsg::Corroborate(m))) =
            crate::wire::Message::decode(t.frame, &limits)
        {
            v.push((t.to, m));
        }
    }
    while n.poll_event().is_some() {}
    v
}

/// The coordinator's side: one observer's refused dial opens a case (two of the subject's
/// other observers asked to dial it, the subject pinged); a second rank's refusal removes it,
/// cause "link lost"; the subject's answer refutes another case; a case neither corroborated
/// nor refuted is dropped after `corroborate_timeout`.
#[test]
fn the_coordinator_removes_on_a_second_refusal_only() {
    use CorroborateOp::*;
    let (mut n, subject, obs) = coordinator_node();
    let t = ms(1_000);
    n.handle_frame(t, obs[0], corroborate(Refused, subject));
    assert!(n.tree().is_alive(subject), "one rank's word");
    let out = sent_corroboration(&mut n);
    let probes: Vec<Rank> = out
        .iter()
        .filter(|(_, m)| m.op == Probe && m.subject == subject)
        .map(|(to, _)| *to)
        .collect();
    assert_eq!(probes.len(), 2, "{out:?}");
    assert!(probes.iter().all(|p| obs.contains(p) && *p != obs[0]));
    assert!(out.contains(&(subject, CorroborateMsg { op: Ping, subject })));
    // A probed observer's dial is refused too: dead here (announced in the next notice), and
    // both reporters told.
    n.handle_frame(t, probes[0], corroborate(Refused, subject));
    assert!(!n.tree().is_alive(subject), "two ranks' word");
    let out = sent_corroboration(&mut n);
    let told: Vec<Rank> = out
        .iter()
        .filter(|(_, m)| m.op == Dead && m.subject == subject)
        .map(|(to, _)| *to)
        .collect();
    assert_eq!(told, [obs[0].min(probes[0]), obs[0].max(probes[0])]);
    // A late reporter is told too.
    n.handle_frame(t, obs[5], corroborate(Refused, subject));
    assert_eq!(
        sent_corroboration(&mut n),
        [(obs[5], CorroborateMsg { op: Dead, subject })]
    );
    let (st, cs) = (n.stats().membership.clone(), n.corroboration_stats());
    assert_eq!(
        (cs.refusals_in, cs.probes_out, st.removed_on_evidence),
        (3, 2, 1)
    );
    // The root announces it, cause "link lost".
    n.handle_timeout(t + Duration::from_millis(5));
    let mut announced = false;
    while let Some(e) = n.poll_event() {
        if let Event::Membership(MembershipEvent::FailureConfirmed { causes, .. }) = e {
            announced = causes.get(&subject) == Some(&super::RemovalCause::LinkLost);
        }
    }
    assert!(announced);

    // Another subject: its answer to the coordinator's ping refutes the case.
    let (mut n, subject, obs) = coordinator_node();
    n.handle_frame(t, obs[0], corroborate(Refused, subject));
    sent_corroboration(&mut n);
    n.handle_frame(t, subject, corroborate(Pong, subject));
    n.handle_frame(t, obs[1], corroborate(Refused, subject));
    assert!(n.tree().is_alive(subject), "refuted, then a new case");
    assert_eq!(n.corroboration_stats().refusals_refuted, 1);
    // A prober's contact refutes it too.
    n.handle_frame(t, obs[2], corroborate(Contact, subject));
    assert_eq!(n.corroboration_stats().refusals_refuted, 2);
    // Neither: dropped after the timeout, nobody removed.
    n.handle_frame(t, obs[3], corroborate(Refused, subject));
    n.handle_timeout(t + Duration::from_millis(250));
    assert!(n.tree().is_alive(subject));
    assert_eq!(n.corroboration_stats().refusals_unconfirmed, 1);
    assert!(sent_removals(&mut n).is_empty());
}

/// Not joined yet is not dead (#21): with check-ins on, a refused dial about an expected rank
/// that never checked in (nor was heard checking in) opens no case: no probe, no ping, nobody
/// removed, counted in `refusals_not_joined`. Once its check-in is heard, a refusal about it is
/// corroborated as any other.
#[test]
fn a_refusal_about_a_rank_never_heard_from_is_no_evidence() {
    use CorroborateOp::*;
    let mut cfg = crate::Config::new(64, 4);
    cfg.detect.enabled = true;
    cfg.membership.quorum = false;
    cfg.membership.check_in = true;
    cfg.membership.startup_timeout = Duration::from_secs(60);
    let d = cfg.detect.clone();
    let mut n = crate::Node::new(cfg, Rank(0), 1, Instant::ZERO).unwrap();
    while n.poll_transmit().is_some() {}
    let (subject, obs) = watched_subject(&n, &d);
    let t = ms(1_000);
    for o in &obs[..3] {
        n.handle_frame(t, *o, corroborate(Refused, subject));
    }
    assert!(n.tree().is_alive(subject));
    assert!(sent_corroboration(&mut n).is_empty(), "no probe, no ping");
    let cs = n.corroboration_stats();
    assert_eq!((cs.refusals_in, cs.refusals_not_joined), (3, 3), "{cs:?}");
    assert!(sent_removals(&mut n).is_empty());
    // It checks in (heard at the root, not yet announced): now a refusal is evidence.
    let check_in = MembershipMsg::CheckIn(super::CheckInMsg {
        span: 64,
        ranks: vec![subject],
    });
    n.handle_frame(
        t,
        subject,
        crate::wire::Message::Membership(check_in).encode(),
    );
    n.handle_frame(t, obs[0], corroborate(Refused, subject));
    let out = sent_corroboration(&mut n);
    assert!(out.iter().any(|(_, m)| m.op == Probe), "{out:?}");
    assert_eq!(n.corroboration_stats().refusals_not_joined, 3);
}

/// The prober's side: asked to dial a subject, it pings it; the answer goes back to the
/// coordinator as a contact, a refused dial as its own refusal report (even within the report
/// interval: it was asked).
#[test]
fn a_prober_pings_and_reports_what_it_found() {
    use CorroborateOp::*;
    let mut cfg = crate::Config::new(64, 4);
    cfg.detect.enabled = true;
    let mut n = crate::Node::new(cfg, Rank(9), 1, Instant::ZERO).unwrap();
    while n.poll_transmit().is_some() {}
    let (a, b) = (Rank(30), Rank(31));
    n.handle_frame(ms(100), Rank(0), corroborate(Probe, a));
    assert_eq!(
        sent_corroboration(&mut n),
        [(
            a,
            CorroborateMsg {
                op: Ping,
                subject: a
            }
        )]
    );
    n.handle_frame(ms(101), a, corroborate(Pong, a));
    assert_eq!(
        sent_corroboration(&mut n),
        [(
            Rank(0),
            CorroborateMsg {
                op: Contact,
                subject: a
            }
        )]
    );
    n.handle_link_down(ms(102), b, crate::LinkCause::Refused);
    n.handle_frame(ms(103), Rank(0), corroborate(Probe, b));
    sent_corroboration(&mut n);
    n.handle_link_down(ms(104), b, crate::LinkCause::Refused);
    let out = sent_corroboration(&mut n);
    assert_eq!(
        out,
        [(
            Rank(0),
            CorroborateMsg {
                op: Refused,
                subject: b
            }
        )]
    );
    assert!(n.tree().is_alive(b));
    // The verdict: heard only about a subject it reported.
    n.handle_frame(ms(104), Rank(0), corroborate(Dead, a));
    assert!(n.tree().is_alive(a));
    n.handle_frame(ms(104), Rank(0), corroborate(Dead, b));
    assert!(!n.tree().is_alive(b));
    // A ping answered by its subject.
    n.handle_frame(ms(105), Rank(4), corroborate(Ping, Rank(9)));
    assert_eq!(
        sent_corroboration(&mut n),
        [(
            Rank(4),
            CorroborateMsg {
                op: Pong,
                subject: Rank(9)
            }
        )]
    );
}

/// Through the simulator, over several seeds: one rank whose dials to a live rank are refused
/// (its tree parent, one of its observers, the root, or its child) removes nobody; a killed rank (every
/// rank linked to it sees its re-dial refused) is removed everywhere within 20 ms.
#[test]
fn one_ranks_refused_dial_removes_nobody_and_a_kill_is_removed_within_20_ms() {
    for seed in 1..=4u64 {
        let mut s = sim(64, 4, seed);
        s.run_until(ms(400)).unwrap();
        let subject = Rank(5 + 11 * seed as u32);
        let n = s.world().node(subject).unwrap();
        let parent = n.tree().view().unwrap().parent().unwrap();
        let observer = n.detect_observers().find(|&o| o != parent).unwrap();
        let child = n.tree().view().unwrap().live_children().next();
        let from = match seed {
            1 => parent,
            2 => observer,
            3 => Rank(0),
            _ => child.unwrap_or(observer),
        };
        s.apply(Fault::RefuseDials { from, to: subject });
        // And the other way, on another pair: the subject cannot dial its parent.
        s.apply(Fault::RefuseDials {
            from: subject,
            to: parent,
        });
        s.run_until(ms(2_500)).unwrap();
        for r in 0..64 {
            assert!(dead_at(&s, Rank(r)).is_empty(), "seed {seed}: rank {r}");
        }
        let root = s.world().node(Rank(0)).unwrap();
        let (root, corr) = (root.stats().membership.clone(), root.corroboration_stats());
        assert!(corr.refusals_in >= 1, "seed {seed}: {corr:?}");
        assert_eq!(root.removed_on_evidence, 0);
        // A kill: hard evidence from every rank linked to it, corroborated at once.
        s.apply(Fault::Heal);
        let victim = Rank(40 + seed as u32);
        s.apply(Fault::Crash(victim));
        let t0 = s.world().now();
        let step = Duration::from_millis(1);
        let survivors = others(64, &[victim.0]);
        while !survivors.iter().all(|&r| dead_at(&s, r) == [victim.0]) {
            assert!(
                s.world().now() - t0 <= Duration::from_millis(20),
                "seed {seed}: kill not removed everywhere within 20 ms"
            );
            let now = s.world().now();
            s.run_until(now + step).unwrap();
        }
        eprintln!(
            "seed {seed}: kill removed everywhere in {:?}",
            s.world().now() - t0
        );
    }
}

/// Small views: with three members the coordinator's own dial is the second witness; with
/// two, the coordinator's own refused dial decides. A refused dial between the two others of
/// three removes nobody.
#[test]
fn small_views_corroborate_with_the_coordinators_own_dial() {
    for span in [2u32, 3] {
        let mut s = sim(span, 2, 7);
        s.run_until(ms(300)).unwrap();
        if span == 3 {
            s.apply(Fault::RefuseDials {
                from: Rank(1),
                to: Rank(2),
            });
            s.run_until(ms(1_300)).unwrap();
            assert!((0..3).all(|r| dead_at(&s, Rank(r)).is_empty()), "refuted");
            s.apply(Fault::Heal);
        }
        let victim = Rank(span - 1);
        s.apply(Fault::Crash(victim));
        let t0 = s.world().now();
        let at = until_removed(
            &mut s,
            &others(span, &[victim.0]),
            &[victim.0],
            Duration::from_millis(20),
        );
        assert!(at - t0 <= Duration::from_millis(20), "span {span}");
    }
}

/// The overload hold: refused dials reported against more than a quarter of the members (17
/// of 64) within the window, then corroborated, are held, counted once each; one refuted
/// meanwhile is never removed; the rest, still standing at the end of the window, are removed.
/// Below the share (16), nothing is held.
#[test]
fn the_coordinator_holds_decisions_against_a_quarter_of_its_members() {
    use CorroborateOp::*;
    for count in [16u32, 17] {
        let (mut n, _, _) = coordinator_node();
        let t = ms(1_000);
        let subjects: Vec<Rank> = (1..=count).map(Rank).collect();
        for &s in &subjects {
            n.handle_frame(t, Rank(40), corroborate(Refused, s));
        }
        for &s in &subjects {
            n.handle_frame(t, Rank(41), corroborate(Refused, s));
        }
        sent_corroboration(&mut n);
        let st = n.stats().membership.clone();
        let held = n.corroboration_stats().decisions_held_overload;
        if count == 16 {
            assert_eq!((st.removed_on_evidence, held), (16, 0));
            continue;
        }
        assert_eq!((st.removed_on_evidence, held), (0, 17));
        // A held subject answers: refuted, never removed.
        let refuted = subjects[16];
        n.handle_frame(
            t + Duration::from_millis(100),
            refuted,
            corroborate(Pong, refuted),
        );
        n.handle_timeout(t + Duration::from_millis(300));
        assert_eq!(n.stats().membership.removed_on_evidence, 0, "still held");
        n.handle_timeout(t + Duration::from_millis(500));
        let (st, cs) = (n.stats().membership.clone(), n.corroboration_stats());
        assert_eq!(st.removed_on_evidence, 16, "{st:?}");
        assert_eq!(cs.decisions_held_overload, 17, "{cs:?}");
        assert!(n.tree().is_alive(refuted));
        assert!(subjects[..16].iter().all(|&s| !n.tree().is_alive(s)));
    }
}

/// `dead_since` keeps the recent deaths only: after ten crashes 2.5 s apart every survivor
/// holds at most the last one's entry (the whole dead set used to stay there for ever, about
/// 40 B per removed rank at every member), while every survivor has all ten dead.
#[test]
fn learning_times_of_old_deaths_are_not_kept() {
    let mut s = sim(64, 4, 11);
    s.run_until(ms(300)).unwrap();
    let crashed: Vec<u32> = (0..10).map(|i| 5 + 5 * i).collect();
    for (i, &r) in crashed.iter().enumerate() {
        s.schedule(ms(400 + 2_500 * i as u64), Fault::Crash(Rank(r)));
    }
    s.run_until(ms(400 + 2_500 * 10)).unwrap();
    for r in others(64, &crashed) {
        assert_eq!(dead_at(&s, r), crashed, "rank {r}");
        let m = &s.world().node(r).unwrap().m.membership;
        assert!(m.dead_since.len() <= 1, "rank {r}: {:?}", m.dead_since);
    }
}
