//! The simulator's fault models, each checked through real nodes.

use bytes::Bytes;

use super::scenario::flood::FloodObserver;
use super::*;
use crate::time::Duration;

fn sim(span: u32, radix: u32) -> Sim<FloodObserver> {
    let mut cfg = SimConfig::new(span, radix, 3);
    cfg.net.jitter = Duration::ZERO;
    Sim::new(cfg, FloodObserver::default()).unwrap()
}

fn ms(x: u64) -> Instant {
    Instant::ZERO + Duration::from_millis(x)
}

fn flood(s: &mut Sim<FloodObserver>, from: u32) -> u64 {
    s.command(Rank(from), |n, now| n.flood(now, Bytes::from_static(b"x")))
        .unwrap()
        .unwrap()
}

fn got(s: &Sim<FloodObserver>, origin: u32, id: u64) -> Vec<u32> {
    s.observer()
        .delivered(Rank(origin), id)
        .map(|set| set.iter().map(|r| r.0).collect())
        .unwrap_or_default()
}

fn dead_at(s: &Sim<FloodObserver>, at: u32, who: u32) -> bool {
    s.world()
        .node(Rank(at))
        .unwrap()
        .tree()
        .dead()
        .contains(Rank(who))
}

#[test]
fn crash_is_seen_by_linked_neighbours_after_the_delay() {
    let mut s = sim(9, 2);
    s.run_until(ms(1)).unwrap();
    s.apply(Fault::Crash(Rank(3)));
    s.run_until(Instant::from_nanos(1_999_999)).unwrap();
    assert!(!dead_at(&s, 1, 3) && !dead_at(&s, 7, 3));
    s.run_until(ms(2)).unwrap();
    assert!(
        dead_at(&s, 1, 3) && dead_at(&s, 7, 3),
        "parent and child notice"
    );
    assert!(!dead_at(&s, 0, 3), "a rank with no link to 3 does not");
    // 7 re-homed under 1; a flood from 0 reaches every survivor.
    let id = flood(&mut s, 0);
    s.run_until_quiet(10_000).unwrap();
    assert_eq!(got(&s, 0, id), [0, 1, 2, 4, 5, 6, 7, 8]);
}

#[test]
fn a_dial_to_a_crashed_rank_fails_after_the_delay() {
    let mut cfg = SimConfig::new(9, 2, 1);
    cfg.wire_tree = false;
    let mut s = Sim::new(cfg, FloodObserver::default()).unwrap();
    s.apply(Fault::Crash(Rank(3)));
    let id = flood(&mut s, 1);
    s.run_until_quiet(10_000).unwrap();
    assert!(dead_at(&s, 1, 3), "the failed dial reports link-down");
    assert!(
        !got(&s, 1, id).contains(&7),
        "unreliable flood: 7 was behind 3"
    );
    assert_eq!(s.world().stats().frames_lost, 1);
}

#[test]
fn one_way_cut_stalls_then_heal_delivers_in_order() {
    let mut s = sim(3, 2);
    s.apply(Fault::CutOneWay(Rank(0), Rank(1)));
    let a = flood(&mut s, 0);
    let b = flood(&mut s, 0);
    let c = flood(&mut s, 1);
    s.run_until(ms(10)).unwrap();
    assert_eq!(got(&s, 0, a), [0, 2]);
    assert_eq!(got(&s, 1, c), [0, 1, 2], "the other direction still flows");
    assert_eq!(s.world().stats().frames_stalled, 2);
    s.apply(Fault::Heal);
    s.run_until(ms(11)).unwrap();
    assert_eq!(got(&s, 0, a), [0, 1, 2]);
    assert_eq!(got(&s, 0, b), [0, 1, 2]);
}

#[test]
fn a_cut_longer_than_the_timeout_drops_the_link() {
    let mut s = sim(3, 2);
    s.apply(Fault::Cut(Rank(0), Rank(1)));
    flood(&mut s, 0);
    s.run_until(ms(499)).unwrap();
    assert!(!dead_at(&s, 0, 1));
    s.run_until(ms(501)).unwrap();
    assert!(
        dead_at(&s, 0, 1) && dead_at(&s, 1, 0),
        "both ends see link-down"
    );
    assert_eq!(
        s.world().stats().frames_lost,
        1,
        "the stalled frame died with the link"
    );
    s.apply(Fault::Heal);
    s.run_until(ms(600)).unwrap();
    assert_eq!(s.world().stats().frames_stalled, 1);
}

#[test]
fn partition_stalls_across_groups_only() {
    let mut s = sim(9, 2);
    s.apply(Fault::Partition(vec![vec![
        Rank(2),
        Rank(4),
        Rank(6),
        Rank(8),
    ]]));
    let id = flood(&mut s, 0);
    s.run_until(ms(50)).unwrap();
    assert_eq!(got(&s, 0, id), [0, 1, 3, 5, 7]);
    s.apply(Fault::Heal);
    s.run_until_quiet(100_000).unwrap();
    assert_eq!(got(&s, 0, id), (0..9).collect::<Vec<_>>());
}

#[test]
fn a_paused_node_receives_nothing_and_its_timers_fire_late() {
    let mut s = sim(3, 2);
    let id = flood(&mut s, 1); // 1 remembers the id and arms its sweep at 10 s
    s.run_until(ms(1)).unwrap();
    s.apply(Fault::Pause(Rank(2)));
    let id2 = flood(&mut s, 0);
    assert!(
        s.command(Rank(2), |_, _| ()).is_none(),
        "no commands while paused"
    );
    s.run_until(ms(15_000)).unwrap();
    assert_eq!(got(&s, 0, id2), [0, 1]);
    assert_eq!(
        s.world().node(Rank(1)).unwrap().pending_state(),
        0,
        "1's sweep ran at 10 s"
    );
    assert!(
        s.world().node(Rank(2)).unwrap().pending_state() > 0,
        "2's sweep is overdue"
    );
    s.apply(Fault::Resume(Rank(2)));
    s.run_until(ms(15_001)).unwrap();
    assert_eq!(got(&s, 0, id2), [0, 1, 2], "backlog delivered on resume");
    assert_eq!(got(&s, 1, id), [0, 1, 2]);
    s.run_until_quiet(1_000).unwrap();
    assert_eq!(s.world().node(Rank(2)).unwrap().pending_state(), 0);
}

#[test]
fn join_grows_the_span_around_holes() {
    let mut s = sim(4, 2);
    s.apply(Fault::Crash(Rank(2)));
    s.run_until(ms(5)).unwrap();
    let dead: RankSet = [Rank(2)].into_iter().collect();
    for r in [0, 1, 3] {
        s.command(Rank(r), |n, now| n.declare_dead(now, &dead).unwrap());
    }
    s.join(5).unwrap();
    let v4 = s
        .world()
        .node(Rank(4))
        .unwrap()
        .tree()
        .view()
        .unwrap()
        .clone();
    assert_eq!((v4.slot(), v4.parent()), (Rank(2), Some(Rank(0))));
    let id = flood(&mut s, 0);
    s.run_until_quiet(10_000).unwrap();
    assert_eq!(got(&s, 0, id), [0, 1, 3, 4]);
}

/// A checker that fails at a chosen step, to show the failure report.
struct FailAt(u64);
impl Observer for FailAt {
    fn check(&mut self, w: &World) -> Result<(), String> {
        if w.stats().steps == self.0 {
            return Err("planted violation".into());
        }
        Ok(())
    }
}

#[test]
fn a_failure_names_the_seed_and_the_replay_command() {
    let mut s = Sim::new(SimConfig::new(20, 2, 99), FailAt(5)).unwrap();
    s.set_replay("lifeline sim flood --ranks 20 --seed 99");
    s.command(Rank(0), |n, now| n.flood(now, Bytes::new()));
    let e = s.run_until_quiet(1000).unwrap_err();
    assert_eq!((e.seed, e.step), (99, 5));
    let text = e.to_string();
    assert!(
        text.contains("seed: 99")
            && text.contains("replay: lifeline sim flood --ranks 20 --seed 99")
    );
    let mut s = Sim::new(SimConfig::new(20, 2, 99), ()).unwrap();
    s.command(Rank(0), |n, now| n.flood(now, Bytes::new()));
    assert!(s
        .run_until_quiet(3)
        .unwrap_err()
        .reason
        .contains("not quiet"));
}

#[test]
fn retransmissions_follow_tcp_backoff() {
    let cfg = NetConfig::default();
    let mut rng = Rng::new(1);
    assert_eq!(
        net::Net::retransmissions(&cfg, &mut rng, 0),
        (0, Duration::ZERO)
    );
    // Always lost: 200, 400, 800, then 1.6 s (the cap) for the other 12 of 15.
    let (lost, delay) = net::Net::retransmissions(&cfg, &mut rng, 100);
    assert_eq!(lost, 15);
    assert_eq!(delay, Duration::from_millis(1_400 + 12 * 1_600));
    // At 25%: about a quarter of frames lost at least once, a sixteenth twice.
    let n = 20_000;
    let draws: Vec<u32> = (0..n)
        .map(|_| net::Net::retransmissions(&cfg, &mut rng, 25).0)
        .collect();
    let once = draws.iter().filter(|&&l| l >= 1).count() as f64 / n as f64;
    let twice = draws.iter().filter(|&&l| l >= 2).count() as f64 / n as f64;
    assert!((0.23..0.27).contains(&once), "{once}");
    assert!((0.05..0.075).contains(&twice), "{twice}");
}

#[test]
fn a_lossy_rank_gets_every_frame_late_and_in_order_then_clean() {
    let run = || {
        let mut s = sim(3, 2);
        s.apply(Fault::Lossy {
            rank: Rank(1),
            pct: 50,
            duration: Duration::from_millis(1_000),
        });
        let ids: Vec<u64> = (0..20).map(|_| flood(&mut s, 0)).collect();
        s.run_until(ms(1)).unwrap();
        let prompt: Vec<bool> = ids.iter().map(|&id| got(&s, 0, id).contains(&1)).collect();
        for &id in &ids {
            assert!(got(&s, 0, id).contains(&2), "the clean link is on time");
        }
        // Head-of-line: what 1 has by now is a prefix of what was sent.
        assert!(prompt.windows(2).all(|w| w[0] || !w[1]), "{prompt:?}");
        assert!(
            prompt.contains(&false),
            "half the frames are lost at least once"
        );
        s.run_until(ms(30_000)).unwrap();
        for &id in &ids {
            assert_eq!(got(&s, 0, id), [0, 1, 2], "late, never dropped");
        }
        // The loss ends with its duration.
        let late = flood(&mut s, 0);
        s.run_until(ms(30_001)).unwrap();
        assert_eq!(got(&s, 0, late), [0, 1, 2]);
        (prompt, s.world().stats().clone())
    };
    let (prompt, stats) = run();
    assert!(stats.frames_retransmitted >= 10, "{stats:?}");
    assert_eq!((prompt, stats), run(), "replays bit for bit");
}
