//! Unit tests of the pure agreement parts: candidate order, ballots, weights, votes, acceptor.

use super::*;
use crate::tree::{Layout, Rank, RankSet, Tree};

fn set(v: &[u32]) -> RankSet {
    v.iter().map(|&r| Rank(r)).collect()
}

/// The candidate order is the slot-0 succession: entry i+1 is the root of the view with
/// entries 0..=i dead too (checked against the tree's own rule for many spans and dead sets).
#[test]
fn candidates_follow_the_slot_zero_succession() {
    let mut rng = crate::rng::Rng::new(7);
    for &(span, radix) in &[(16, 8), (9, 2), (64, 4), (100, 3), (1, 2), (300, 16)] {
        let layout = Layout::new(span, radix).unwrap();
        for _ in 0..20 {
            let mut dead = RankSet::new();
            for r in 0..span {
                if rng.below(4) == 0 {
                    dead.insert(Rank(r));
                }
            }
            let bound = 6;
            let c = candidates(&layout, &dead, bound);
            let live = span as usize - dead.len();
            assert_eq!(c.len(), bound.min(live), "span {span} radix {radix}");
            let mut d = dead.clone();
            for &ci in &c {
                assert!(!dead.contains(ci));
                // ci is the root of the view with d dead.
                let me = (0..span).map(Rank).find(|r| !d.contains(*r)).unwrap();
                let t = Tree::with_dead(layout, d.clone(), me).unwrap();
                let root = t.root_without(Rank(u32::MAX)).unwrap();
                assert_eq!(root, ci, "span {span} radix {radix} dead {d:?}");
                d.insert(ci);
            }
        }
    }
}

#[test]
fn candidates_respect_the_bound_and_skip_the_dead() {
    let layout = Layout::new(16, 8).unwrap();
    assert!(candidates(&layout, &RankSet::new(), 0).is_empty());
    let all = candidates(&layout, &RankSet::new(), 100);
    assert_eq!(all.len(), 16);
    assert_eq!(all[0], Rank(0));
    let mut sorted = all.clone();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(sorted.len(), 16, "every rank once");
    let dead = set(&[0, all[1].0]);
    let c = candidates(&layout, &dead, 3);
    assert_eq!(c, vec![all[2], all[3], all[4]]);
}

#[test]
fn ballots_order_by_round_then_rank() {
    let a = Ballot {
        round: 1,
        rank: Rank(9),
    };
    let b = Ballot {
        round: 2,
        rank: Rank(1),
    };
    assert!(a < b);
    assert!(Ballot::INITIAL < a);
    let n = Ballot::next(b, Rank(4));
    assert_eq!(
        n,
        Ballot {
            round: 3,
            rank: Rank(4)
        }
    );
    assert!(n > b);
    let tie = Ballot {
        round: 3,
        rank: Rank(5),
    };
    assert!(tie > n, "same round: the higher rank wins");
}

fn side_weight(w: &Weights, side: impl IntoIterator<Item = u32>) -> u64 {
    let mut v = Votes::new(*w);
    for r in side {
        v.add(Rank(r));
    }
    v.weight()
}

/// An even split has exactly one winner: the side holding the root.
#[test]
fn an_even_split_is_won_by_the_side_with_the_root() {
    let w = Weights {
        root: Rank(0),
        members: 16,
    };
    assert_eq!(w.total(), 33);
    let with_root = side_weight(&w, 0..8);
    let without = side_weight(&w, 8..16);
    assert_eq!((with_root, without), (17, 16));
    assert!(w.is_quorum(with_root));
    assert!(!w.is_quorum(without));
}

/// 6 of 16 holding the root lose to the 10 others.
#[test]
fn a_minority_holding_the_root_loses() {
    let w = Weights {
        root: Rank(0),
        members: 16,
    };
    let minority = side_weight(&w, 0..6);
    let majority = side_weight(&w, 6..16);
    assert_eq!((minority, majority), (13, 20));
    assert!(!w.is_quorum(minority));
    assert!(w.is_quorum(majority));
    // Never both sides, whatever the split.
    for k in 0..=16 {
        let a = side_weight(&w, 0..k);
        let b = side_weight(&w, k..16);
        assert_eq!(a + b, w.total());
        assert!(
            w.is_quorum(a) != w.is_quorum(b),
            "split at {k}: exactly one side"
        );
    }
    let empty = Weights {
        root: Rank(0),
        members: 0,
    };
    assert!(!empty.is_quorum(0));
}

#[test]
fn votes_count_each_voter_once() {
    let w = Weights {
        root: Rank(0),
        members: 3,
    };
    let mut v = Votes::new(w);
    assert!(v.add(Rank(1)));
    assert!(!v.add(Rank(1)));
    assert_eq!(v.weight(), 2);
    assert!(!v.has_quorum(), "2 of 7");
    assert!(v.add(Rank(2)));
    assert!(v.has_quorum(), "4 of 7");
    assert!(v.has(Rank(2)) && !v.has(Rank(0)));
    assert_eq!(v.voters().collect::<Vec<_>>(), vec![Rank(1), Rank(2)]);
}

#[test]
fn the_acceptor_promises_higher_and_refuses_lower() {
    let mut a = Acceptor::default();
    assert_eq!(a.promised, Ballot::INITIAL);
    // The initial root proposes without a phase 1.
    assert_eq!(a.propose(Ballot::INITIAL, 1, &[Rank(3)], &[]), Ok(()));
    let b1 = Ballot {
        round: 1,
        rank: Rank(8),
    };
    let got = a.prepare(b1).unwrap().cloned();
    assert_eq!(
        got,
        Some(Accepted {
            ballot: Ballot::INITIAL,
            epoch: 1,
            removed: vec![Rank(3)],
            base: vec![],
        }),
        "a promise reports the value accepted"
    );
    // The old root's proposals are refused with the promised ballot.
    assert_eq!(
        a.propose(Ballot::INITIAL, 2, &[Rank(9)], &[Rank(3)]),
        Err(b1)
    );
    assert_eq!(a.prepare(Ballot::INITIAL).err(), Some(b1));
    // The same ballot again (a lost promise) is answered again.
    assert!(a.prepare(b1).is_ok());
    assert_eq!(a.propose(b1, 2, &[Rank(0)], &[Rank(3)]), Ok(()));
    assert_eq!(a.accepted.as_ref().map(|x| x.epoch), Some(2));
    // The value keeps the view it applies to: epoch 2 is {3} ∪ {0}.
    assert_eq!(
        a.accepted.as_ref().map(|x| x.base.clone()),
        Some(vec![Rank(3)])
    );
}

/// A new leader carries on the value of the highest ballot, and at one ballot the later epoch
/// (the leader of that ballot proposed it after deciding the earlier one).
#[test]
fn the_reported_value_to_carry_on_is_the_highest_ballot_then_the_latest_epoch() {
    let b = |round, rank| Ballot {
        round,
        rank: Rank(rank),
    };
    let v = |ballot, epoch| Accepted {
        ballot,
        epoch,
        removed: vec![Rank(12)],
        base: vec![],
    };
    assert!(v(b(1, 3), 2).supersedes(&v(b(1, 3), 1)));
    assert!(!v(b(1, 3), 1).supersedes(&v(b(1, 3), 2)));
    assert!(v(b(2, 0), 1).supersedes(&v(b(1, 3), 5)));
    assert!(!v(b(1, 3), 2).supersedes(&v(b(1, 3), 2)));
}

#[test]
fn quorum_backups_are_validated() {
    let mut c = crate::membership::MembershipConfig::default();
    assert!(
        !c.quorum,
        "off by default in the core (the CLI turns it on)"
    );
    assert!(c.validate().is_ok());
    c.quorum_backups = 0;
    assert!(c.validate().is_err());
    c.quorum_backups = 65;
    assert!(c.validate().is_err());
    c.quorum_backups = 64;
    assert!(c.validate().is_ok());
}

/// Node-level: the removal fast path under quorum (`removed_at_root_*`, `removal_from_*`).
mod fast_path {
    use crate::membership::{AlertEntry, AlertMsg, MembershipMsg, RemovalCause, RemovedMsg};
    use crate::time::{Duration, Instant};
    use crate::tree::Rank;
    use crate::wire::Message;

    use super::super::{
        AcceptMsg, Ballot, PrepareMsg, PromiseMsg, ProposeMsg, RoundBody, TreeRoundMsg,
    };

    fn ms(x: u64) -> Instant {
        Instant::ZERO + Duration::from_millis(x)
    }

    fn cfg() -> crate::Config {
        let mut cfg = crate::Config::new(64, 4);
        cfg.detect.enabled = true;
        cfg.membership.quorum = true;
        cfg
    }

    /// Drains `n`'s frames, decoded.
    fn sent(n: &mut crate::Node) -> Vec<(Rank, Message)> {
        let limits = cfg().limits();
        let mut v = Vec::new();
        while let Some(t) = n.poll_transmit() {
            if let Ok(m) = Message::decode(t.frame, &limits) {
                v.push((t.to, m));
            }
        }
        while n.poll_event().is_some() {}
        v
    }

    fn removals(v: &[(Rank, Message)]) -> usize {
        v.iter()
            .filter(|(_, m)| matches!(m, Message::Membership(MembershipMsg::Removed(_))))
            .count()
    }

    /// The root's removal check for `subject` (sent on stable evidence), and an answer to it
    /// from a member that vouches for `vouched`.
    fn check_answer(subject: Rank, vouched: &[Rank]) -> Vec<u8> {
        Message::from(PromiseMsg {
            ballot: Ballot::INITIAL,
            ok: vouched.is_empty(),
            promised: Ballot::INITIAL,
            accepted: None,
            downs: Vec::new(),
            vouched: vouched.to_vec(),
            checked: vec![subject],
        })
        .encode()
        .to_vec()
    }

    /// One alert in which every one of `obs` says `subject` (incarnation 0) is down.
    fn stable_alert(subject: Rank, obs: &[Rank]) -> bytes::Bytes {
        Message::from(AlertMsg {
            hops: 0,
            entries: vec![AlertEntry {
                subject,
                incarnation: 0,
                down: true,
                observers: obs.to_vec(),
            }],
        })
        .encode()
    }

    /// Stable evidence against a subject of the root `n` (rank 0 of 64), from its observers at
    /// 1 s: returns the subject and what the root sent.
    fn accuse(n: &mut crate::Node) -> (Rank, Vec<(Rank, Message)>) {
        let d = cfg().detect;
        let (subject, obs) = crate::membership::tests::watched_subject(n, &d);
        let alert = stable_alert(subject, &obs);
        n.handle_frame(ms(1_000), obs[0], alert);
        n.handle_timeout(ms(1_060));
        (subject, sent(n))
    }

    /// The root removes a subject on stable evidence only once members holding more than half
    /// the view's weight answered its removal check (a PREPARE at its own ballot naming the
    /// subject) without vouching for it; it floods nothing until the epoch that carries it is
    /// accepted by more than half the weight (a root cut off with a minority gets neither),
    /// then floods the decision.
    #[test]
    fn removed_at_root_is_flooded_only_after_its_accept_quorum() {
        let mut n = crate::Node::new(cfg(), Rank(0), 1, Instant::ZERO).unwrap();
        let _ = sent(&mut n);
        let (subject, out) = accuse(&mut n);
        let check = out
            .iter()
            .find_map(|(_, m)| match m {
                Message::Membership(MembershipMsg::TreeRound(TreeRoundMsg {
                    body: RoundBody::Check(p),
                    ..
                })) => Some(p.clone()),
                _ => None,
            })
            .expect("a removal check, down the tree");
        assert_eq!(
            (check.ballot, check.removed.clone()),
            (Ballot::INITIAL, vec![subject])
        );
        assert!(
            !n.tree().dead().contains(subject),
            "removed before the check"
        );
        // 64 members (the subject still one): total 129; the root (3) and 31 members (62).
        let voters: Vec<Rank> = (1..64).map(Rank).filter(|&r| r != subject).collect();
        for &r in &voters[..30] {
            n.handle_frame(ms(1_061), r, check_answer(subject, &[]).into());
        }
        assert!(
            !n.tree().dead().contains(subject),
            "removed short of a quorum"
        );
        n.handle_frame(ms(1_062), voters[30], check_answer(subject, &[]).into());
        // The announce batch (`membership.notice_batch`) runs the proposal.
        n.handle_timeout(ms(1_065));
        let out = sent(&mut n);
        assert!(n.tree().dead().contains(subject), "removed locally");
        assert_eq!(removals(&out), 0, "flooded before any accept");
        let proposal = out
            .iter()
            .find_map(|(_, m)| match m {
                Message::Membership(MembershipMsg::TreeRound(TreeRoundMsg {
                    body: RoundBody::Propose(p),
                    ..
                })) => Some(p.clone()),
                _ => None,
            })
            .expect("a PROPOSE, down the tree");
        assert_eq!(proposal.removed, [subject]);
        // 63 members left: total weight 2·63+1 = 127; the root (3) and 30 members (60) make
        // 63, not a quorum; one more makes 65.
        let accept = |p: &ProposeMsg| {
            Message::from(AcceptMsg {
                ballot: p.ballot,
                epoch: p.epoch,
                ok: true,
                promised: p.ballot,
            })
            .encode()
        };
        for &r in &voters[..30] {
            n.handle_frame(ms(1_070), r, accept(&proposal));
        }
        assert_eq!(removals(&sent(&mut n)), 0, "flooded short of a quorum");
        assert_eq!(n.quorum_stats().removals_held, 1);
        n.handle_frame(ms(1_071), voters[30], accept(&proposal));
        assert!(removals(&sent(&mut n)) > 0, "not flooded at the quorum");
    }

    /// A slow check whose answers are still coming in is not thrown away: the subject's
    /// evidence, re-sent past two detector periods (the standing alert every period), used to
    /// restart the check with the root's own vote alone, so rounds slower than two periods (a
    /// saturated host) never completed. Here the quorum's last answer comes 250 ms after the
    /// check went out, after the evidence came again, and the subject is removed.
    #[test]
    fn a_slow_check_whose_answers_keep_coming_is_not_restarted() {
        let mut n = crate::Node::new(cfg(), Rank(0), 1, Instant::ZERO).unwrap();
        let _ = sent(&mut n);
        let (subject, obs) = {
            let d = cfg().detect;
            crate::membership::tests::watched_subject(&n, &d)
        };
        let alert = || stable_alert(subject, &obs);
        n.handle_frame(ms(1_000), obs[0], alert());
        n.handle_timeout(ms(1_060));
        let _ = sent(&mut n);
        let expired = n.quorum_stats().checks_expired;
        let voters: Vec<Rank> = (1..64).map(Rank).filter(|&r| r != subject).collect();
        // 30 answers trickle in over 240 ms (one every 8 ms): short of the quorum (31).
        for (i, &r) in voters[..30].iter().enumerate() {
            let at = 1_070 + 8 * i as u64;
            n.handle_frame(ms(at), r, check_answer(subject, &[]).into());
            n.handle_timeout(ms(at));
        }
        // The standing evidence again, 250 ms after the check went out.
        n.handle_frame(ms(1_310), obs[1], alert());
        n.handle_timeout(ms(1_310));
        assert!(
            !n.tree().dead().contains(subject),
            "removed short of a quorum"
        );
        n.handle_frame(ms(1_312), voters[30], check_answer(subject, &[]).into());
        n.handle_timeout(ms(1_320));
        assert_eq!(
            n.quorum_stats().checks_expired,
            expired,
            "the slow check restarted"
        );
        assert!(
            n.tree().dead().contains(subject),
            "not removed at the quorum"
        );
    }

    /// One member that vouches for the subject (heard it directly within two detector
    /// periods) keeps it: the check completes with nothing removed or proposed, and the
    /// subject's evidence is dropped.
    #[test]
    fn a_subject_one_member_vouches_for_is_kept() {
        let mut n = crate::Node::new(cfg(), Rank(0), 1, Instant::ZERO).unwrap();
        let _ = sent(&mut n);
        let (subject, _) = accuse(&mut n);
        let voters: Vec<Rank> = (1..64).map(Rank).filter(|&r| r != subject).collect();
        n.handle_frame(
            ms(1_061),
            voters[0],
            check_answer(subject, &[subject]).into(),
        );
        for &r in &voters[1..40] {
            n.handle_frame(ms(1_062), r, check_answer(subject, &[]).into());
        }
        let out = sent(&mut n);
        assert!(!n.tree().dead().contains(subject), "a vouched rank removed");
        assert!(
            !out.iter().any(|(_, m)| matches!(
                m,
                Message::Membership(MembershipMsg::Propose(_) | MembershipMsg::TreeRound(_))
            )),
            "proposed"
        );
        assert_eq!(n.quorum_stats().vouched_kept, 1);
    }

    /// A member answers a removal check from the leader it promised: with a refusal naming
    /// the ranks of the check it heard directly within two detector periods, with a promise
    /// otherwise.
    #[test]
    fn an_acceptor_vouches_for_a_rank_it_hears() {
        let me = Rank(5);
        let heard = Rank(40);
        let silent = Rank(41);
        let mut n = crate::Node::new(cfg(), me, 1, Instant::ZERO).unwrap();
        let _ = sent(&mut n);
        let ping = Message::from(MembershipMsg::TreePing(crate::membership::TreePingMsg)).encode();
        n.handle_frame(ms(1_000), heard, ping);
        let _ = sent(&mut n);
        let check = Message::from(PrepareMsg {
            ballot: Ballot::INITIAL,
            epoch: 0,
            removed: vec![heard, silent],
        })
        .encode();
        n.handle_frame(ms(1_100), Rank(0), check.clone());
        let answer = |v: Vec<(Rank, Message)>| {
            v.into_iter().find_map(|(to, m)| match m {
                Message::Membership(MembershipMsg::Promise(p)) if to == Rank(0) => Some(p),
                _ => None,
            })
        };
        let a = answer(sent(&mut n)).expect("an answer");
        assert!(!a.ok);
        assert_eq!(a.vouched, [heard]);
        assert_eq!(a.checked, [heard, silent]);
        // Two detector periods later it no longer vouches.
        n.handle_frame(ms(1_300), Rank(0), check);
        let a = answer(sent(&mut n)).expect("an answer");
        assert!(a.ok && a.vouched.is_empty(), "{a:?}");
    }

    /// A member that promised an elected candidate's ballot ignores (and counts) removals
    /// flooded by the root it replaced; without that promise the same decision is applied.
    #[test]
    fn removal_from_a_deposed_root_is_ignored_after_a_promise() {
        let me = Rank(1);
        for promised in [false, true] {
            let mut n = crate::Node::new(cfg(), me, 1, Instant::ZERO).unwrap();
            let _ = sent(&mut n);
            assert_eq!(n.tree().view().unwrap().parent(), Some(Rank(0)));
            let candidate = Rank(16);
            let victim = Rank(40);
            if promised {
                let p = Message::from(PrepareMsg {
                    ballot: Ballot {
                        round: 1,
                        rank: candidate,
                    },
                    epoch: 0,
                    removed: vec![Rank(0)],
                })
                .encode();
                n.handle_frame(ms(100), candidate, p);
                let _ = sent(&mut n);
            }
            let r = Message::from(RemovedMsg {
                coordinator: Rank(0),
                seq: 1,
                cause: RemovalCause::Unresponsive,
                ranks: vec![victim],
            })
            .encode();
            n.handle_frame(ms(200), Rank(0), r);
            let _ = sent(&mut n);
            assert_eq!(
                n.tree().dead().contains(victim),
                !promised,
                "promised {promised}"
            );
            assert_eq!(
                n.quorum_stats().removals_ignored,
                u64::from(promised),
                "promised {promised}"
            );
        }
    }
}
