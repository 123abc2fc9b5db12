//! The detector through real nodes in the simulator: quiet when healthy, a frozen rank
//! suspected by its observers and only by them, a short freeze unnoticed, a frozen observer
//! accusing nobody, and refutation by a higher incarnation.

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
}

/// Drives one node by hand: its subjects heartbeat until `t`, then nothing is heard.
fn lone_node(enabled: bool) -> (crate::Node, Vec<Rank>) {
    let mut cfg = crate::Config::new(8, 2);
    cfg.detect.enabled = enabled;
    let mut n = crate::Node::new(cfg, Rank(0), 1, Instant::ZERO).unwrap();
    while n.poll_transmit().is_some() {}
    let subjects: Vec<Rank> = n.m.detect.watching.keys().copied().collect();
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
    assert_eq!(n.m.detect.incarnation, 1);
    // About another rank: stale, ignored.
    let f = crate::wire::Message::from(SuspectMsg {
        subject: Rank(3),
        incarnation: 9,
    })
    .encode();
    n.handle_frame(ms(11), observers[0], f);
    assert_eq!(n.m.detect.incarnation, 1);
    assert_eq!(n.stats().detect.stale, 1);
}
