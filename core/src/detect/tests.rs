//! The detector through real nodes in the simulator: quiet when healthy, a frozen rank
//! suspected by its observers and only by them, a short freeze unnoticed, a frozen observer
//! accusing nobody, refutation by a higher incarnation, a standing suspicion's notice sent
//! again, and local health awareness (a sick observer puts off its accusations).

use std::collections::BTreeMap;

use super::*;
use crate::event::Event;
use crate::sim::{Fault, Observer, Sim, SimConfig, World};
use crate::time::Duration;

/// Detector events per observing rank.
#[derive(Default)]
struct Log(BTreeMap<Rank, Vec<DetectEvent>>);

impl Observer for Log {
    fn on_event(&mut self, _w: &World, rank: Rank, e: &Event) {
        if let Event::Detect(d) = e {
            self.0.entry(rank).or_default().push(d.clone());
        }
    }
}

impl Log {
    fn suspected_by(&self, subject: Rank) -> Vec<Rank> {
        self.0
            .iter()
            .filter(|(_, es)| {
                es.iter()
                    .any(|e| matches!(e, DetectEvent::Suspect { rank, .. } if *rank == subject))
            })
            .map(|(r, _)| *r)
            .collect()
    }

    fn count(&self, f: impl Fn(&DetectEvent) -> bool) -> usize {
        self.0.values().flatten().filter(|e| f(e)).count()
    }
}

fn sim(span: u32, seed: u64) -> Sim<Log> {
    let mut cfg = SimConfig::new(span, 4, seed);
    cfg.node.detect.enabled = true;
    Sim::new(cfg, Log::default()).unwrap()
}

fn ms(x: u64) -> Instant {
    Instant::ZERO + Duration::from_millis(x)
}

fn observers_of(s: &Sim<Log>, r: Rank) -> Vec<Rank> {
    s.world().node(r).unwrap().detect_observers().collect()
}

#[test]
fn healthy_cluster_is_quiet_and_heartbeats_flow() {
    let mut s = sim(32, 1);
    s.run_until(ms(2_000)).unwrap();
    assert_eq!(s.observer().0.len(), 0, "{:?}", s.observer().0);
    let n = s.world().node(Rank(5)).unwrap();
    let st = &n.stats().detect;
    // About 20 rounds to each of up to 8 observers.
    assert!(st.heartbeats_out >= 19 * 4, "{st:?}");
    assert!(st.heartbeats_in >= 19 * 4, "{st:?}");
    assert_eq!(n.detect_observers().count(), 8);
}

#[test]
fn frozen_rank_is_suspected_by_its_observers_only_then_unresponsive() {
    let mut s = sim(32, 2);
    s.run_until(ms(500)).unwrap();
    let victim = Rank(9);
    let obs = observers_of(&s, victim);
    s.apply(Fault::Pause(victim));
    s.run_until(ms(1_500)).unwrap();
    assert_eq!(
        s.observer().suspected_by(victim),
        obs,
        "exactly its observers"
    );
    let unresponsive = s
        .observer()
        .count(|e| matches!(e, DetectEvent::Unresponsive { rank, .. } if *rank == victim));
    assert_eq!(unresponsive, obs.len());
    // Nobody else is suspected, and the frozen rank accused nobody.
    assert_eq!(
        s.observer()
            .count(|e| matches!(e, DetectEvent::Suspect { rank, .. } if *rank != victim)),
        0
    );
}

#[test]
fn short_freeze_goes_unnoticed_and_a_frozen_observer_accuses_nobody() {
    let mut s = sim(32, 3);
    s.run_until(ms(500)).unwrap();
    s.apply(Fault::Pause(Rank(4)));
    s.run_until(ms(650)).unwrap();
    s.apply(Fault::Resume(Rank(4)));
    s.run_until(ms(1_500)).unwrap();
    assert_eq!(
        s.observer().0.len(),
        0,
        "150 ms < timeout: {:?}",
        s.observer().0
    );
    // A long freeze: others suspect rank 4, but rank 4's own late timers accuse nobody.
    s.apply(Fault::Pause(Rank(4)));
    s.run_until(ms(3_000)).unwrap();
    s.apply(Fault::Resume(Rank(4)));
    s.run_until(ms(4_000)).unwrap();
    assert!(
        !s.observer().0.contains_key(&Rank(4)),
        "{:?}",
        s.observer().0
    );
    let n = s.world().node(Rank(4)).unwrap();
    assert!(
        n.stats().detect.self_freeze_skips > 0,
        "{:?}",
        n.stats().detect
    );
    // Its observers saw it refute with a higher incarnation after it resumed.
    let refuted = s
        .observer()
        .count(|e| matches!(e, DetectEvent::Refuted { rank, incarnation } if *rank == Rank(4) && *incarnation >= 1));
    assert_eq!(refuted, observers_of(&s, Rank(4)).len());
}

#[test]
fn disabled_detector_sends_and_arms_nothing() {
    let mut cfg = SimConfig::new(16, 4, 4);
    cfg.node.detect.enabled = false;
    let mut s = Sim::new(cfg, Log::default()).unwrap();
    s.run_until(ms(1_000)).unwrap();
    for r in 0..16 {
        let n = s.world().node(Rank(r)).unwrap();
        assert_eq!(n.stats().detect, DetectStats::default());
        assert_eq!(n.detect_observers().count(), 0);
    }
}

#[test]
fn invalid_detector_config_is_refused() {
    let mut c = crate::Config::new(8, 2);
    c.detect.timeout = c.detect.period;
    assert!(matches!(c.validate(), Err(crate::ConfigError::Invalid(_))));
    let mut c = crate::Config::new(8, 2);
    c.detect.observers = 0;
    assert_eq!(
        c.validate(),
        Err(crate::ConfigError::Zero("detect.observers"))
    );
    let mut c = crate::Config::new(8, 2);
    c.detect.observers = MAX_OBSERVERS + 1;
    assert!(c.validate().is_err());
    let mut c = crate::Config::new(8, 2);
    c.detect.health_max = 0;
    assert_eq!(
        c.validate(),
        Err(crate::ConfigError::Zero("detect.health_max"))
    );
    c.detect.health_max = MAX_HEALTH_MULTIPLIER + 1;
    assert!(matches!(c.validate(), Err(crate::ConfigError::Invalid(_))));
    let mut c = crate::Config::new(8, 2);
    c.detect.health_recover = 0;
    assert_eq!(
        c.validate(),
        Err(crate::ConfigError::Zero("detect.health_recover"))
    );
}

/// Drives one node by hand: its subjects heartbeat until `t`, then nothing is heard.
fn lone_node(enabled: bool) -> (crate::Node, Vec<Rank>) {
    let mut cfg = crate::Config::new(8, 2);
    cfg.detect.enabled = enabled;
    let mut n = crate::Node::new(cfg, Rank(0), 1, Instant::ZERO).unwrap();
    while n.poll_transmit().is_some() {}
    let subjects: Vec<Rank> = n.m.detect.running().watching.keys().copied().collect();
    (n, subjects)
}

fn beat(n: &mut crate::Node, from: Rank, at: Instant, incarnation: u64) {
    let f = crate::wire::Message::from(HeartbeatMsg {
        incarnation,
        seq: 1,
    })
    .encode();
    n.handle_frame(at, from, f);
}

fn detect_events(n: &mut crate::Node) -> Vec<DetectEvent> {
    let mut v = Vec::new();
    while let Some(e) = n.poll_event() {
        if let Event::Detect(d) = e {
            v.push(d);
        }
    }
    while n.poll_transmit().is_some() {}
    v
}

#[test]
fn a_late_timeout_call_means_this_rank_was_frozen_and_accuses_nobody() {
    let (mut n, subjects) = lone_node(true);
    assert!(!subjects.is_empty());
    for &s in &subjects {
        beat(&mut n, s, ms(50), 0);
    }
    // The driver's next call comes 5 s late: every deadline passed while this rank slept.
    n.handle_timeout(ms(5_000));
    assert_eq!(detect_events(&mut n), vec![]);
    assert!(n.stats().detect.self_freeze_skips > 0);
    // A timely silence afterwards is an accusation, once per subject, then unresponsive.
    let mut t = 5_000;
    while t < 5_600 {
        t += 10;
        n.handle_timeout(ms(t));
    }
    let ev = detect_events(&mut n);
    let suspects = ev
        .iter()
        .filter(|e| matches!(e, DetectEvent::Suspect { .. }))
        .count();
    let unresp = ev
        .iter()
        .filter(|e| matches!(e, DetectEvent::Unresponsive { .. }))
        .count();
    assert_eq!(
        (suspects, unresp),
        (subjects.len(), subjects.len()),
        "{ev:?}"
    );
}

/// A starved host: the driver runs this rank for 150 ms, then not at all for 200 ms, again
/// and again, so one heartbeat round in each cycle fires more than a period late (a freeze).
/// Its subjects went silent at 50 ms. The silence it was awake for still adds up: it accuses
/// each of them (suspect, then unresponsive) within 2 s. Before the freeze credit, every late
/// round restarted every silence timeout from zero and it accused nobody, ever: a loaded
/// observer of a partitioned rank never reported it, and the failover waited on the others.
#[test]
fn an_observer_frozen_again_and_again_still_accuses_a_silent_subject() {
    let (mut n, subjects) = lone_node(true);
    assert!(!subjects.is_empty());
    for &s in &subjects {
        beat(&mut n, s, ms(50), 0);
    }
    let awake = |t: u64| t % 350 < 150;
    let mut ev = Vec::new();
    let mut t = 50;
    while t < 2_050 {
        t += 10;
        if awake(t) {
            n.handle_timeout(ms(t));
            ev.extend(detect_events(&mut n));
        }
    }
    let st = &n.stats().detect;
    assert!(st.self_freeze_skips >= 4, "the cycles were freezes: {st:?}");
    let count = |f: fn(&DetectEvent) -> bool| ev.iter().filter(|e| f(e)).count();
    assert_eq!(
        (
            count(|e| matches!(e, DetectEvent::Suspect { .. })),
            count(|e| matches!(e, DetectEvent::Unresponsive { .. }))
        ),
        (subjects.len(), subjects.len()),
        "{ev:?} {st:?}"
    );
}

#[test]
fn only_a_higher_incarnation_refutes() {
    let (mut n, subjects) = lone_node(true);
    let s = subjects[0];
    let mut t = 0;
    while t < 350 {
        t += 10;
        for &o in &subjects[1..] {
            beat(&mut n, o, ms(t), 0);
        }
        n.handle_timeout(ms(t));
    }
    let ev = detect_events(&mut n);
    assert_eq!(
        ev,
        vec![DetectEvent::Suspect {
            rank: s,
            incarnation: 0
        }]
    );
    beat(&mut n, s, ms(t), 0);
    assert_eq!(
        detect_events(&mut n),
        vec![],
        "a stale heartbeat refutes nothing"
    );
    beat(&mut n, s, ms(t), 1);
    assert_eq!(
        detect_events(&mut n),
        vec![DetectEvent::Refuted {
            rank: s,
            incarnation: 1
        }]
    );
}

#[test]
fn a_suspicion_of_this_rank_raises_its_incarnation_and_heartbeats_at_once() {
    let (mut n, _) = lone_node(true);
    let observers: Vec<Rank> = n.detect_observers().collect();
    let f = crate::wire::Message::from(SuspectMsg {
        subject: Rank(0),
        incarnation: 0,
    })
    .encode();
    n.handle_frame(ms(10), observers[0], f);
    let mut to = Vec::new();
    while let Some(t) = n.poll_transmit() {
        to.push(t.to);
    }
    assert_eq!(to, observers, "one refuting heartbeat to each observer");
    assert_eq!(n.m.detect.running().incarnation, 1);
    // About another rank: stale, ignored.
    let f = crate::wire::Message::from(SuspectMsg {
        subject: Rank(3),
        incarnation: 9,
    })
    .encode();
    n.handle_frame(ms(11), observers[0], f);
    assert_eq!(n.m.detect.running().incarnation, 1);
    assert_eq!(n.stats().detect.stale, 1);
}

fn suspect_me(n: &mut crate::Node, from: Rank, at: Instant, incarnation: u64) {
    let f = crate::wire::Message::from(SuspectMsg {
        subject: n.me(),
        incarnation,
    })
    .encode();
    n.handle_frame(at, from, f);
}

/// Every subject but `silent` heartbeats every 10 ms from `from` (exclusive) to `to`
/// (inclusive), with the node's timers run at each step; returns the detector events.
fn drive(
    n: &mut crate::Node,
    subjects: &[Rank],
    silent: Option<Rank>,
    from: u64,
    to: u64,
) -> Vec<DetectEvent> {
    let mut ev = Vec::new();
    let mut t = from;
    while t < to {
        t += 10;
        for &s in subjects.iter().filter(|&&s| Some(s) != silent) {
            beat(n, s, ms(t), 0);
        }
        n.handle_timeout(ms(t));
        ev.extend(detect_events(n));
    }
    ev
}

fn first_suspicion(ev: &[DetectEvent]) -> Option<usize> {
    ev.iter()
        .position(|e| matches!(e, DetectEvent::Suspect { .. }))
}

#[test]
fn two_observers_suspecting_this_rank_raise_its_health_score_once_per_round() {
    let (mut n, _) = lone_node(true);
    let obs: Vec<Rank> = n.detect_observers().collect();
    suspect_me(&mut n, obs[0], ms(10), 0);
    assert_eq!(
        n.m.detect.running().health_score(),
        0,
        "one observer alone is no evidence"
    );
    suspect_me(&mut n, obs[0], ms(15), 1);
    assert_eq!(
        n.m.detect.running().health_score(),
        0,
        "nor is the same one again"
    );
    suspect_me(&mut n, obs[1], ms(20), 1);
    assert_eq!(
        n.m.detect.running().health_score(),
        1,
        "a second observer corroborates"
    );
    suspect_me(&mut n, obs[2], ms(30), 2);
    assert_eq!(
        n.m.detect.running().health_score(),
        1,
        "one point per round"
    );
    // The next round (beat at 100 ms), again corroborated: another point.
    n.handle_timeout(ms(100));
    suspect_me(&mut n, obs[3], ms(110), 3);
    assert_eq!(n.m.detect.running().health_score(), 2);
    // Suspicions further apart than the timeout corroborate nothing.
    let (mut n, _) = lone_node(true);
    suspect_me(&mut n, obs[0], ms(10), 0);
    suspect_me(&mut n, obs[1], ms(400), 1);
    assert_eq!(n.m.detect.running().health_score(), 0);
    // Nor does a rank that does not watch this one.
    let stranger = (1..8).map(Rank).find(|r| !obs.contains(r));
    if let Some(x) = stranger {
        suspect_me(&mut n, x, ms(410), 2);
        assert_eq!(n.m.detect.running().health_score(), 0);
    }
}

#[test]
fn a_sick_observer_waits_longer_before_suspecting_even_a_timer_already_armed() {
    let (mut n, subjects) = lone_node(true);
    let obs: Vec<Rank> = n.detect_observers().collect();
    let s = subjects[0];
    // Heard from everyone at 10 ms: their silence timers are armed for 310 ms.
    let _ = drive(&mut n, &subjects, None, 0, 10);
    suspect_me(&mut n, obs[0], ms(15), 0);
    suspect_me(&mut n, obs[1], ms(16), 1);
    assert_eq!(n.m.detect.running().health_score(), 1);
    // s goes silent: with the multiplier 2 it is suspected 600 ms after it was last heard.
    let ev = drive(&mut n, &subjects, Some(s), 10, 590);
    assert_eq!(first_suspicion(&ev), None, "{ev:?}");
    assert!(n.stats().detect.health_held >= 1);
    let ev = drive(&mut n, &subjects, Some(s), 590, 620);
    assert_eq!(
        ev,
        vec![DetectEvent::Suspect {
            rank: s,
            incarnation: 0
        }]
    );
    // ... and the refutation window is doubled too: unresponsive 200 ms later, not 100.
    let ev = drive(&mut n, &subjects, Some(s), 620, 780);
    assert_eq!(ev, vec![]);
    let ev = drive(&mut n, &subjects, Some(s), 780, 830);
    assert_eq!(
        ev,
        vec![DetectEvent::Unresponsive {
            rank: s,
            incarnation: 0
        }]
    );
}

#[test]
fn the_health_score_recovers_after_healthy_rounds_and_is_capped() {
    let mut cfg = crate::Config::new(8, 2);
    cfg.detect.enabled = true;
    cfg.detect.health_max = 3;
    let mut n = crate::Node::new(cfg, Rank(0), 1, Instant::ZERO).unwrap();
    while n.poll_transmit().is_some() {}
    let subjects: Vec<Rank> = n.m.detect.running().watching.keys().copied().collect();
    let obs: Vec<Rank> = n.detect_observers().collect();
    // Five rounds of corroborated suspicion: capped at health_max - 1.
    for round in 0..5u64 {
        let t = round * 100 + 50;
        let _ = drive(&mut n, &subjects, None, t.saturating_sub(50), t);
        suspect_me(&mut n, obs[0], ms(t), 2 * round);
        suspect_me(&mut n, obs[1], ms(t + 1), 2 * round + 1);
    }
    assert_eq!(n.m.detect.running().health_score(), 2);
    assert_eq!(n.stats().detect.health_raised, 2);
    // Ten healthy rounds (beats at 610..=1510 ms) lower it by one; ten more bring it to zero.
    let _ = drive(&mut n, &subjects, None, 450, 1_500);
    assert_eq!(n.m.detect.running().health_score(), 2);
    let _ = drive(&mut n, &subjects, None, 1_500, 1_520);
    assert_eq!(n.m.detect.running().health_score(), 1);
    let _ = drive(&mut n, &subjects, None, 1_520, 2_520);
    assert_eq!(n.m.detect.running().health_score(), 0);
    assert_eq!(n.stats().detect.health_lowered, 2);
}

#[test]
fn heartbeat_rounds_late_twice_in_a_row_raise_the_health_score() {
    let (mut n, _) = lone_node(true);
    // The first round is due at 100 ms: 70 ms late (a blip, not a freeze)...
    n.handle_timeout(ms(170));
    assert_eq!(n.m.detect.running().health_score(), 0);
    // ... and the next one (due at 270 ms) late again.
    n.handle_timeout(ms(340));
    assert_eq!(n.m.detect.running().health_score(), 1);
    assert_eq!(n.stats().detect.health_raised, 1);
}

#[test]
fn a_standing_suspicion_sends_its_notice_again_every_period() {
    let (mut n, subjects) = lone_node(true);
    let s = subjects[0];
    let mut notices = 0;
    let mut t = 0;
    while t < 800 {
        t += 10;
        for &o in &subjects[1..] {
            beat(&mut n, o, ms(t), 0);
        }
        n.handle_timeout(ms(t));
        while n.poll_event().is_some() {}
        while let Some(x) = n.poll_transmit() {
            if x.to == s && crate::sim::describe(&x.frame).contains("Suspect") {
                notices += 1;
            }
        }
    }
    // Suspected at 300 ms, unresponsive at 400 ms, then every 100 ms: 500, 600, 700, 800.
    assert_eq!(notices, 5);
    assert_eq!(n.stats().detect.suspects_resent, 4);
    // The subject, hearing one at last, refutes: the suspicion is lifted.
    beat(&mut n, s, ms(810), 1);
    let ev = detect_events(&mut n);
    assert_eq!(
        ev,
        vec![DetectEvent::Refuted {
            rank: s,
            incarnation: 1
        }]
    );
}

/// Accusations (`Unresponsive`) made by `lossy` in a 32-rank cluster where its links lose 30%
/// of transmissions for 20 s, with the health multiplier capped at `health_max`; the
/// heartbeats it sent (its rounds in the view); every rank's `health_raised`.
fn lossy_observer_accusations(health_max: u32, lossy: Rank) -> (u64, u64, Vec<u64>) {
    let mut cfg = SimConfig::new(32, 4, 11);
    cfg.node.detect.enabled = true;
    cfg.node.detect.health_max = health_max;
    // The detector's own accusations are measured: the relays that core-declared gray links
    // start around the lossy rank's stalled tree links (membership/silence.rs) change its
    // traffic, hence which frames the single seed's loss hits, and so the handful of
    // accusations counted here (3 against a bound of 2 with them on).
    cfg.node.membership.gray_after = Duration::ZERO;
    let mut s = Sim::new(cfg, Log::default()).unwrap();
    s.run_until(ms(500)).unwrap();
    s.apply(Fault::Lossy {
        rank: lossy,
        pct: 30,
        duration: Duration::from_millis(20_000),
    });
    s.run_until(ms(20_500)).unwrap();
    let accusations = s.observer().0.get(&lossy).map_or(0, |es| {
        es.iter()
            .filter(|e| matches!(e, DetectEvent::Unresponsive { .. }))
            .count() as u64
    });
    // Until it is removed (it may be: a gray failure), it heartbeats every round.
    let rounds = s.world().node(lossy).unwrap().stats().detect.heartbeats_out;
    let raised = (0..32)
        .map(|r| {
            s.world()
                .node(Rank(r))
                .unwrap()
                .stats()
                .detect
                .health_raised
        })
        .collect();
    (accusations, rounds, raised)
}

#[test]
fn a_lossy_observer_knows_it_is_sick_and_accuses_far_less() {
    let lossy = Rank(7);
    let (aware, aware_rounds, raised) = lossy_observer_accusations(8, lossy);
    let (unaware, unaware_rounds, _) = lossy_observer_accusations(1, lossy);
    // Per round in the view (about 10 times fewer; without awareness it is also removed
    // sooner).
    assert!(
        aware * unaware_rounds * 4 <= unaware * aware_rounds,
        "{aware} accusations in {aware_rounds} heartbeats with awareness, {unaware} in \
         {unaware_rounds} without"
    );
    // Only the lossy rank found evidence against itself.
    assert!(raised[lossy.index()] > 0, "{raised:?}");
    for (r, &x) in raised.iter().enumerate() {
        assert!(r == lossy.index() || x == 0, "rank {r}: {raised:?}");
    }
}

/// A subject never heard from is not suspected within the start-up grace (it may not have
/// started yet), and is once the grace is over; a subject heard once is watched as usual
/// even within the grace.
#[test]
fn a_subject_never_heard_from_is_not_suspected_within_the_startup_grace() {
    let mut cfg = crate::Config::new(8, 2);
    cfg.detect.enabled = true;
    cfg.detect.startup_grace = crate::Duration::from_millis(2_000);
    let mut n = crate::Node::new(cfg, Rank(0), 1, Instant::ZERO).unwrap();
    while n.poll_transmit().is_some() {}
    let subjects: Vec<Rank> = n.m.detect.running().watching.keys().copied().collect();
    assert!(subjects.len() >= 2, "{subjects:?}");
    let (heard, never) = (subjects[0], subjects[1]);
    let mut suspected_at = BTreeMap::new();
    let mut t = 0;
    while t < 3_000 {
        t += 10;
        // `heard` beats until 500 ms, then falls silent; `never` is never heard from;
        // the others beat throughout.
        for &s in &subjects {
            if s != never && (s != heard || t <= 500) {
                beat(&mut n, s, ms(t), 0);
            }
        }
        n.handle_timeout(ms(t));
        for e in detect_events(&mut n) {
            if let DetectEvent::Suspect { rank, .. } = e {
                suspected_at.entry(rank).or_insert(t);
            }
        }
    }
    let heard_at = suspected_at[&heard];
    assert!(
        (800..=900).contains(&heard_at),
        "heard once: suspected at {heard_at} ms"
    );
    let never_at = suspected_at[&never];
    assert!(
        (2_000..=2_100).contains(&never_at),
        "never heard: suspected at {never_at} ms"
    );
    assert_eq!(suspected_at.len(), 2, "{suspected_at:?}");
    assert!(n.stats().detect.startup_holds >= 1);
}

/// `detect.beat_grid`: rounds at multiples of the period from `Instant::ZERO`, whenever the
/// node started and however late the last round fired; without it, one period after each.
#[test]
fn beat_grid_puts_every_round_on_a_multiple_of_the_period() {
    let due = |grid: bool| {
        let mut cfg = crate::Config::new(8, 2);
        cfg.detect.enabled = true;
        cfg.detect.beat_grid = grid;
        let mut n = crate::Node::new(cfg, Rank(0), 1, ms(37)).unwrap();
        while n.poll_transmit().is_some() {}
        let mut v = vec![n.m.detect.running().beat_due];
        // The first round fires 37 ms late, the next on time.
        let first = v[0].unwrap();
        n.handle_timeout(first + Duration::from_millis(37));
        v.push(n.m.detect.running().beat_due);
        let second = v[1].unwrap();
        n.handle_timeout(second);
        v.push(n.m.detect.running().beat_due);
        v
    };
    assert_eq!(due(true), vec![Some(ms(100)), Some(ms(200)), Some(ms(300))]);
    assert_eq!(
        due(false),
        vec![Some(ms(137)), Some(ms(274)), Some(ms(374))]
    );
}
