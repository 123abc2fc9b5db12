//! The refute hold (`alerts.rs`, quorum views on), driven by hand at one root: a refutation
//! holds only the removals that rest on the accusers whose downs it cleared.

use std::collections::BTreeSet;

use super::tests::{evidence, ms};
use super::MembershipMsg;
use crate::time::Instant;
use crate::tree::Rank;

/// The ranks named by the removal checks (PREPAREs carrying a cut) `n` sent; drains its output.
fn checked(n: &mut crate::Node) -> BTreeSet<Rank> {
    let limits = crate::Config::new(64, 4).limits();
    let mut v = BTreeSet::new();
    while let Some(t) = n.poll_transmit() {
        if let Ok(crate::wire::Message::Membership(MembershipMsg::Prepare(m))) =
            crate::wire::Message::decode(t.frame, &limits)
        {
            v.extend(m.removed);
        }
    }
    while n.poll_event().is_some() {}
    v
}

/// Root 0 of 64 ranks with the detector and quorum views on, its start-up output drained,
/// and its detector config. Removal checks go direct (64 members would send them down the
/// tree): `checked` reads PREPAREs, and the hold, not the round's route, is what is tested.
fn quorum_root() -> (crate::Node, crate::detect::DetectConfig) {
    let mut cfg = crate::Config::new(64, 4);
    cfg.detect.enabled = true;
    cfg.membership.quorum = true;
    cfg.membership.quorum_tree_min = u32::MAX;
    let d = cfg.detect.clone();
    let mut n = crate::Node::new(cfg, Rank(0), 1, Instant::ZERO).unwrap();
    while n.poll_transmit().is_some() {}
    (n, d)
}

/// Subject `c` accused at `t` by `common` and by five of its other observers (`oc`, its
/// eight): six downs, five of them not `common`'s.
fn accuse_with_five_own(n: &mut crate::Node, t: Instant, c: Rank, oc: &[Rank], common: Rank) {
    let own: Vec<Rank> = oc
        .iter()
        .copied()
        .filter(|&o| o != common)
        .take(5)
        .collect();
    n.handle_frame(t, common, evidence(c, 0, true, &[common]));
    n.handle_frame(t, own[0], evidence(c, 0, true, &own));
}

/// Three subjects of root 0's 64-rank tree, each with eight observers (none of them rank 0
/// or another of the three), the first two with disjoint observers and the third sharing
/// one observer with the first.
fn subjects(n: &crate::Node, d: &crate::detect::DetectConfig) -> [(Rank, Vec<Rank>); 3] {
    let all: Vec<(Rank, Vec<Rank>)> = (1..64)
        .map(Rank)
        .map(|s| {
            let rings =
                crate::detect::rings::Rings::compute_for(n.tree(), s, d.ring_seed, d.observers);
            (s, rings.observers.into_iter().collect::<Vec<_>>())
        })
        .filter(|(_, o)| o.len() == 8 && !o.contains(&Rank(0)))
        .collect();
    let apart = |a: &(Rank, Vec<Rank>), b: &(Rank, Vec<Rank>)| {
        a.0 != b.0 && !a.1.contains(&b.0) && !b.1.contains(&a.0)
    };
    let shared = |a: &[Rank], b: &[Rank]| a.iter().filter(|r| b.contains(r)).count();
    for a in &all {
        for b in all
            .iter()
            .filter(|b| apart(a, b) && shared(&a.1, &b.1) == 0)
        {
            if let Some(c) = all
                .iter()
                .find(|c| apart(a, c) && apart(b, c) && shared(&a.1, &c.1) == 1)
            {
                return [a.clone(), b.clone(), c.clone()];
            }
        }
    }
    panic!("no three subjects fit");
}

/// A refutation about one subject does not hold another subject's removal whose accusers it
/// did not clear: subject A's accusers are refuted (an up about a newer incarnation clears
/// their downs), then six of B's eight observers (none of them A's) accuse B, and the root
/// asks the members about B at once. Subject C, stable only with an accuser of A's counted
/// (five of its own observers and the shared one), waits the two detector periods and is
/// then asked about. Before the hold was narrowed, A's refutation held B's removal too.
#[test]
fn a_refutation_holds_only_the_removals_resting_on_the_accusers_it_cleared() {
    let (mut n, d) = quorum_root();
    let period = d.period;
    let [(a, oa), (b, ob), (c, oc)] = subjects(&n, &d);
    let common = *oc.iter().find(|o| oa.contains(o)).unwrap();
    let mut accusers = vec![common];
    accusers.extend(oa.iter().copied().filter(|&o| o != common).take(2));
    let t = ms(1_000);
    // Two of A's observers (the one it shares with C among them) accuse it (not stable),
    // then a third reports it up at incarnation 1: both downs are refuted.
    n.handle_frame(t, accusers[0], evidence(a, 0, true, &accusers[..2]));
    n.handle_frame(t, accusers[2], evidence(a, 1, false, &accusers[2..]));
    assert!(checked(&mut n).is_empty());
    // B: six of its eight observers, none of them A's. Decided at once.
    n.handle_frame(t, ob[0], evidence(b, 0, true, &ob[..6]));
    n.handle_timeout(t);
    let asked = checked(&mut n);
    assert!(
        asked.contains(&b),
        "B held by a refutation about A: {asked:?}, {:?}",
        n.stats().membership
    );
    // C: five of its own observers and the one it shares with A, an accuser just refuted:
    // six of eight, but five without the discredited one. Held for two periods.
    accuse_with_five_own(&mut n, t, c, &oc, common);
    n.handle_timeout(t);
    assert!(
        !checked(&mut n).contains(&c),
        "C rests on a refuted accuser"
    );
    assert!(n.stats().membership.decisions_deferred >= 1);
    n.handle_timeout(t + period);
    assert!(!checked(&mut n).contains(&c), "held for two periods");
    n.handle_timeout(t + period + period);
    assert!(checked(&mut n).contains(&c), "decided when the hold ends");
}

/// An observer that withdraws its own accusation (it reports the subject up again: a lossy
/// subject's observer does, having rightly missed its heartbeats) is not held: a removal
/// that rests on it is decided at once. Subject A's accuser is the observer it shares with
/// subject C; it reports A up itself, then it and five of C's own observers accuse C.
#[test]
fn an_observer_withdrawing_its_own_accusation_holds_nothing() {
    let (mut n, d) = quorum_root();
    let [(a, oa), _, (c, oc)] = subjects(&n, &d);
    let common = *oc.iter().find(|o| oa.contains(o)).unwrap();
    let t = ms(1_000);
    n.handle_frame(t, common, evidence(a, 0, true, &[common]));
    n.handle_frame(t, common, evidence(a, 1, false, &[common]));
    accuse_with_five_own(&mut n, t, c, &oc, common);
    n.handle_timeout(t);
    let asked = checked(&mut n);
    assert!(
        asked.contains(&c),
        "C held by its own accuser's withdrawal about A: {asked:?}, {:?}",
        n.stats().membership
    );
}
