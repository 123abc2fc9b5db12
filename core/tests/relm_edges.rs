//! RELM edge cases 20–28 of `docs/edge-cases.md` as named simulator scenarios through the
//! public API.
//!
//! Every scenario runs with zero jitter (one-way latency 50 µs, link-down 1 ms after a crash,
//! ACKs coalesced for 1 ms), triggers its faults on what the trace shows has happened (a frame
//! arrived, an ACK passed), proves from the trace or the counters that the case really occurred,
//! and then checks the common invariants ([`Harness::check`]): per chain, deliveries are exactly
//! the consecutive uids (no duplicate, no reordering); every message between survivors is
//! delivered and acknowledged; every message from a survivor to a dead rank is acknowledged or
//! reported failed; no survivor holds RELM message state once traffic settles.
//!
//! Set `LIFELINE_TRACE=1` to print each scenario's trace.
//!
//! Radix 2, n = 9: 0→{1,2}, 1→{3,5}, 2→{4,6}, 3→{7}, 4→{8}. The longest path, 7→8, is
//! 7→3→1→0→2→4→8.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

use bytes::Bytes;
use lifeline_core::relm::{Uid, UID_MAX};
use lifeline_core::sim::{Fault, Observer, Sim, SimConfig, World};
use lifeline_core::tree::Rank;
use lifeline_core::wire::{ChainMark, Message, RelmDataMsg, RelmLinkMsg, RelmMsg};
use lifeline_core::{Duration, Event, RelmEvent};

type Chain = (u32, u32);

/// Records the application's view of every chain.
#[derive(Default)]
struct Rec {
    first: Option<Uid>,
    delivered: BTreeMap<Chain, Vec<Uid>>,
    acked: BTreeMap<Chain, Uid>,
    failed: BTreeMap<Chain, Vec<(Uid, u32)>>,
    source_lost: Vec<(u32, u32, u32)>,
    collisions: Vec<(u32, u32, u32, Uid)>,
    violations: Vec<String>,
}

impl Observer for Rec {
    fn on_event(&mut self, _w: &World, rank: Rank, e: &Event) {
        let first = self.first.expect("set");
        match e {
            Event::Relm(RelmEvent::Delivered { src, uid, .. }) => {
                let d = self.delivered.entry((src.0, rank.0)).or_default();
                let expect = d.last().map_or(first, |u| u.next());
                if *uid != expect {
                    self.violations.push(format!(
                        "rank {rank} delivered ({src},{uid}), expected uid {expect}"
                    ));
                }
                d.push(*uid);
            }
            Event::Relm(RelmEvent::Acked { dst, upto }) => {
                let prev = self.acked.insert((rank.0, dst.0), *upto);
                if prev.is_some_and(|p| !upto.after(p)) {
                    self.violations
                        .push(format!("origin {rank}: ACK {upto} after {prev:?}"));
                }
            }
            Event::Relm(RelmEvent::Failed { dst, first, count }) => self
                .failed
                .entry((rank.0, dst.0))
                .or_default()
                .push((*first, *count)),
            Event::Relm(RelmEvent::SourceLost { src, discarded }) => {
                self.source_lost.push((rank.0, src.0, *discarded))
            }
            Event::Relm(RelmEvent::Collision { src, dst, uid }) => {
                self.collisions.push((rank.0, src.0, dst.0, *uid))
            }
            _ => {}
        }
    }

    fn check(&mut self, _w: &World) -> Result<(), String> {
        match self.violations.first() {
            Some(v) => Err(v.clone()),
            None => Ok(()),
        }
    }
}

struct Harness {
    sim: Sim<Rec>,
    trace: Rc<RefCell<Vec<String>>>,
    sent: Vec<(u32, u32, Uid)>,
    name: &'static str,
}

impl Harness {
    fn new(name: &'static str, span: u32, radix: u32) -> Self {
        Self::with(name, span, radix, |_| {})
    }

    fn with(name: &'static str, span: u32, radix: u32, tweak: impl FnOnce(&mut SimConfig)) -> Self {
        let mut cfg = SimConfig::new(span, radix, 7);
        cfg.net.jitter = Duration::ZERO;
        tweak(&mut cfg);
        let rec = Rec {
            first: Uid::new(cfg.node.relm.first_uid),
            ..Rec::default()
        };
        let mut sim = Sim::new(cfg, rec).expect("valid config");
        let trace = Rc::new(RefCell::new(Vec::new()));
        let sink = trace.clone();
        let print = std::env::var_os("LIFELINE_TRACE").is_some();
        sim.set_trace(move |l: &str| {
            if print {
                println!("[{name}] {l}");
            }
            sink.borrow_mut().push(l.to_owned());
        });
        Self {
            sim,
            trace,
            sent: Vec::new(),
            name,
        }
    }

    fn rec(&self) -> &Rec {
        self.sim.observer()
    }

    fn send(&mut self, src: u32, dst: u32) -> Uid {
        let payload = Bytes::from(format!("{}:{src}>{dst}#{}", self.name, self.sent.len()));
        let uid = self
            .sim
            .command(Rank(src), |n, now| n.relm_send(now, Rank(dst), 16, payload))
            .expect("source is live")
            .expect("send accepted");
        self.sent.push((src, dst, uid));
        uid
    }

    fn crash(&mut self, r: u32) {
        self.sim.apply(Fault::Crash(Rank(r)));
    }

    fn run_for(&mut self, d: Duration) {
        let t = self.sim.world().now() + d;
        if let Err(e) = self.sim.run_until(t) {
            self.dump();
            panic!("{}: {e}", self.name);
        }
    }

    /// Runs until a new trace line holds every needle (stops after the step that wrote it).
    fn run_to(&mut self, needles: &[&str]) {
        let trace = self.trace.clone();
        let mut from = trace.borrow().len();
        let hit = move |_: &World, _: &Rec| {
            let t = trace.borrow();
            let found = t[from..]
                .iter()
                .any(|l| needles.iter().all(|n| l.contains(n)));
            from = t.len();
            found
        };
        if let Err(e) = self.sim.run_until_pred(10_000_000, hit) {
            self.dump();
            panic!("{}: waiting for {needles:?}: {e}", self.name);
        }
    }

    /// Runs until every message is settled at its origin, then 3 s more for soft state.
    fn settle(&mut self) {
        let sent = self.sent.clone();
        let done = move |w: &World, r: &Rec| {
            sent.iter().all(|&(s, d, u)| {
                w.is_crashed(Rank(s))
                    || r.acked.get(&(s, d)).is_some_and(|a| u.at_or_before(*a))
                    || (w.is_crashed(Rank(d)) && r.failed.contains_key(&(s, d)))
            })
        };
        if let Err(e) = self.sim.run_until_pred(10_000_000, done) {
            self.dump();
            panic!("{}: {e}", self.name);
        }
        self.run_for(Duration::from_secs(3));
    }

    fn stats(&self, r: u32) -> &lifeline_core::Stats {
        self.sim.world().node(Rank(r)).expect("live rank").stats()
    }

    fn find(&self, needles: &[&str]) -> Option<usize> {
        self.trace
            .borrow()
            .iter()
            .position(|l| needles.iter().all(|n| l.contains(n)))
    }

    fn expect_line(&self, needles: &[&str]) -> usize {
        self.find(needles).unwrap_or_else(|| {
            self.dump();
            panic!("{}: no trace line with {needles:?}", self.name)
        })
    }

    fn dump(&self) {
        if std::env::var_os("LIFELINE_TRACE").is_none() {
            for l in self.trace.borrow().iter() {
                eprintln!("[{}] {l}", self.name);
            }
        }
    }

    fn fail(&self, msg: String) -> ! {
        self.dump();
        panic!("{}: {msg}", self.name);
    }

    /// The common invariants; returns deliveries per chain.
    fn check(&self) {
        let w = self.sim.world();
        let rec = self.rec();
        if let Some(v) = rec.violations.first() {
            self.fail(v.clone());
        }
        let crashed = w.crashed();
        for &(s, d, u) in &self.sent {
            let (sd, dd) = (crashed.contains(Rank(s)), crashed.contains(Rank(d)));
            let got = rec.delivered.get(&(s, d)).is_some_and(|v| v.contains(&u));
            let acked = rec.acked.get(&(s, d)).is_some_and(|a| u.at_or_before(*a));
            let failed = rec
                .failed
                .get(&(s, d))
                .is_some_and(|v| v.iter().any(|(f, c)| f.dist(u) < *c as u64));
            match (sd, dd) {
                (false, false) if !(got && acked) => self.fail(format!(
                    "({s}>{d}, {u}) between survivors: delivered {got}, acked {acked}"
                )),
                (false, true) if !(acked || failed) => self.fail(format!(
                    "({s}>{d}, {u}) to a dead rank neither acknowledged nor reported failed"
                )),
                (false, true) if acked && !got => {
                    self.fail(format!("({s}>{d}, {u}) acknowledged but never delivered"))
                }
                _ => {}
            }
        }
        for r in w.live_ranks() {
            let n = w.node(r).expect("live");
            if n.relm_held() != 0 || n.relm_unacked_bytes() != 0 {
                self.fail(format!(
                    "rank {r} still holds {} RELM entries ({} bytes unacknowledged)",
                    n.relm_held(),
                    n.relm_unacked_bytes()
                ));
            }
            if n.stats().relm.gate_timeouts != 0 {
                self.fail(format!("rank {r}: link-update gating needed its backstop"));
            }
            // Every case must be resolved by link updates, replays and ACKs; the origin's
            // retry probe is the safety net under them, never the mechanism.
            if n.stats().relm.retry_probes != 0 {
                self.fail(format!("rank {r} needed its retry probe"));
            }
        }
    }

    fn delivered(&self, s: u32, d: u32) -> Vec<Uid> {
        self.rec()
            .delivered
            .get(&(s, d))
            .cloned()
            .unwrap_or_default()
    }
}

fn uid(v: u32) -> Uid {
    Uid::new(v).expect("valid uid")
}

/// Edge case 20: Stable paths of 1 to 6 hops, many sources and destinations interleaved: every message
/// exactly once and in order, and the whole exchange costs about one frame per message per hop.
#[test]
fn edge20_stable_paths_interleaved_sources_and_destinations() {
    let mut h = Harness::new("edge20", 9, 2);
    // 3>7: 1 hop, 1>7: 2, 0>7: 3, 2>7: 4, 4>7: 5, 8>7: 6; and the reverse directions.
    let pairs = [
        (3, 7),
        (1, 7),
        (0, 7),
        (2, 7),
        (4, 7),
        (8, 7),
        (7, 8),
        (5, 6),
        (6, 5),
    ];
    for round in 0..40 {
        for &(s, d) in &pairs {
            h.send(s, d);
        }
        if round % 10 == 9 {
            h.run_for(Duration::from_micros(30));
        }
    }
    h.settle();
    h.check();
    for &(s, d) in &pairs {
        assert_eq!(h.delivered(s, d).len(), 40, "{s}>{d}");
    }
    let frames: u64 = (0..9).map(|r| h.stats(r).relm.frames_out).sum();
    let hops: u64 = [1, 2, 3, 4, 5, 6, 6, 4, 4].iter().sum::<u64>() * 40;
    let per = frames as f64 / hops as f64;
    assert!(per < 1.5, "{per} frames per message-hop");
    assert_eq!(h.stats(7).relm.requests, 0);
}

/// Edge case 21a: A relay dies holding the message before forwarding it (the frame to it is lost with
/// it): PRRTE strands it; here the upstream relay's link update probes the destination,
/// which asks for it, and the upstream cache replays it.
#[test]
fn edge21a_relay_dies_before_forwarding() {
    let mut h = Harness::new("edge21a", 9, 2);
    h.send(7, 8);
    h.run_to(&["deliver  1->0 RelmData src=7 dst=8"]);
    h.crash(2); // 0 has just forwarded to 2: that frame dies with 2
    h.send(7, 8);
    h.settle();
    h.expect_line(&["lost     0->2"]);
    h.check();
    assert_eq!(h.delivered(7, 8), [uid(0), uid(1)]);
    assert!(h.stats(8).relm.requests >= 1);
    assert!(h.stats(0).relm.replays >= 1, "replayed from 0's cache");
    assert_eq!(h.stats(7).relm.replays, 0, "the origin never had to");
}

/// Edge case 21b: A relay dies right after forwarding: the destination has the message; its ACK takes
/// the repaired path back to the origin.
#[test]
fn edge21b_relay_dies_after_forwarding() {
    let mut h = Harness::new("edge21b", 9, 2);
    h.send(7, 8);
    h.run_to(&["deliver  0->2 RelmData src=7 dst=8"]);
    h.crash(2);
    h.settle();
    h.check();
    assert_eq!(h.delivered(7, 8), [uid(0)]);
    let acked = h.expect_line(&["event    7 RelmAcked dst=8 upto=0"]);
    assert!(h.expect_line(&["fault    Crash(Rank(2))"]) < acked);
}

/// Edge case 21c: A relay dies while the ACK is passing back through it (the ACK is lost): the link
/// updates after the repair carry the destination's watermark back to the origin.
#[test]
fn edge21c_relay_dies_while_the_ack_passes() {
    let mut h = Harness::new("edge21c", 9, 2);
    h.send(7, 8);
    h.run_to(&["deliver  8->4 RelmAck"]);
    // 4 coalesces for 1 ms, then sends the ACK to 2; 2 dies while it is on the wire.
    h.run_for(Duration::from_micros(1_020));
    h.crash(2);
    h.settle();
    h.expect_line(&["lost     4->2"]);
    h.check();
    assert_eq!(h.delivered(7, 8), [uid(0)]);
    assert!(h.rec().acked.get(&(7, 8)) == Some(&uid(0)));
}

/// Edge case 21d: A relay dies after the ACK passed: nothing is replayed or delivered again.
#[test]
fn edge21d_relay_dies_after_the_ack() {
    let mut h = Harness::new("edge21d", 9, 2);
    h.send(7, 8);
    h.run_to(&["event    7 RelmAcked dst=8 upto=0"]);
    h.crash(2);
    h.settle();
    let replays = |h: &Harness| -> u64 {
        [0, 1, 3, 4, 5, 6, 7, 8]
            .iter()
            .map(|&r| h.stats(r).relm.replays + h.stats(r).relm.requests)
            .sum()
    };
    assert_eq!(replays(&h), 0);
    h.send(7, 8);
    h.settle();
    h.check();
    assert_eq!(h.delivered(7, 8), [uid(0), uid(1)]);
    assert_eq!(replays(&h), 0);
}

/// Edge case 22: The destination's parent dies and the destination is promoted into its slot; the
/// upstream relay's link update says "sent" for a message the destination never got. Below
/// the watermark that would be answered with an ACK; above it the destination asks, and the
/// relay's cache answers.
#[test]
fn edge22_promoted_destination_gets_sent_for_a_message_it_never_got() {
    let mut h = Harness::new("edge22", 9, 2);
    h.send(8, 7);
    h.run_to(&["deliver  0->1 RelmData src=8 dst=7"]);
    h.crash(3); // 1's forward to 3 dies with it; 7 takes slot 3 under 1
    h.settle();
    h.expect_line(&["lost     1->3"]);
    h.expect_line(&["deliver  1->7 RelmLink", "probes=[8>7@0]"]);
    h.check();
    assert_eq!(h.delivered(8, 7), [uid(0)]);
    assert_eq!(h.stats(7).relm.requests, 1);
    assert_eq!(
        h.stats(1).relm.replays,
        1,
        "the new parent's cache answered"
    );
    assert_eq!(h.stats(8).relm.replays, 0);
}

/// Edge case 23: The relays' caches lost the message (by count here, by time below) before the replay
/// request arrived: the request climbs to the origin, which always has it.
#[test]
fn edge23_evicted_caches_escalate_to_the_origin() {
    for by_time in [false, true] {
        let mut h = Harness::with("edge23", 9, 2, |c| {
            if by_time {
                c.node.relm.cache_ttl = Duration::from_nanos(1);
            } else {
                c.node.relm.cache_max = 1;
            }
        });
        h.send(8, 7);
        h.send(8, 7);
        h.run_to(&["deliver  0->1 RelmData src=8 dst=7 uid=1"]);
        h.crash(3);
        h.settle();
        h.check();
        assert_eq!(h.delivered(8, 7), [uid(0), uid(1)]);
        let evicted: u64 = [0, 1, 2, 4]
            .iter()
            .map(|&r| h.stats(r).relm.cache_evicted)
            .sum();
        assert!(evicted >= 1, "by_time={by_time}");
        assert!(
            h.stats(8).relm.replays >= 1,
            "by_time={by_time}: origin replayed"
        );
        assert!(h.find(&["deliver  4->8 RelmReq src=8 dst=7"]).is_some());
    }
}

/// Edge case 24: An ACK reaches a new relay before the upstream link update does: it is passed on toward
/// the origin as it is (PRRTE turns it into an ACK-of-ACK and the origin leaks the message).
#[test]
fn edge24_ack_reaches_a_new_relay_before_its_link_update() {
    let mut h = Harness::new("edge24", 9, 2);
    h.send(7, 8);
    h.run_to(&["deliver  1->0 RelmData src=7 dst=8"]);
    // 0 freezes after forwarding, so its link update to 2's successor comes late.
    h.sim.apply(Fault::Pause(Rank(0)));
    h.run_to(&["deliver  2->4 RelmData src=7 dst=8"]);
    h.crash(2); // 6 takes slot 2: a relay new to the chain 7>8
    h.run_to(&["deliver  4->6 RelmAck", "7>8@0"]);
    assert!(h.find(&["deliver  0->6 RelmLink"]).is_none());
    h.run_for(Duration::from_millis(5));
    h.sim.apply(Fault::Resume(Rank(0)));
    h.settle();
    h.check();
    let ack = h.expect_line(&["deliver  4->6 RelmAck", "7>8@0"]);
    let link = h.expect_line(&["deliver  0->6 RelmLink"]);
    assert!(ack < link);
    // 6 passed the ACK on as it was, before any probe could have fetched a fresh one.
    let passed = h.expect_line(&["deliver  6->0 RelmAck", "acks=[7>8@0]"]);
    if let Some(probe) = h.find(&["->8 Relm", "probes=[7>8@0]"]) {
        assert!(passed < probe, "the ACK was re-fetched by a probe");
    }
    assert_eq!(h.rec().acked.get(&(7, 8)), Some(&uid(0)));
}

/// Edge case 25: A replay arrives after the destination delivered and everyone released the message:
/// never delivered twice, answered with an ACK, and the next message is not held back.
#[test]
fn edge25_replay_after_release() {
    let mut h = Harness::new("edge25", 9, 2);
    h.send(7, 8);
    h.settle();
    let late = Message::Relm(RelmMsg::Data(RelmDataMsg {
        src: Rank(7),
        dst: Rank(8),
        uid: uid(0),
        tag: 16,
        payload: Bytes::from_static(b"late"),
    }))
    .encode();
    // At the destination, and at a relay that already released it.
    let l2 = late.clone();
    h.sim
        .command(Rank(8), |n, now| n.handle_frame(now, Rank(4), l2));
    h.sim
        .command(Rank(2), |n, now| n.handle_frame(now, Rank(0), late));
    h.send(7, 8);
    h.settle();
    h.check();
    assert_eq!(h.delivered(7, 8), [uid(0), uid(1)]);
    assert_eq!(h.stats(8).relm.duplicates, 2);
}

/// Edge case 26: Cascading promotions during a link exchange (2 dies, 6 is promoted; 6 dies while its
/// exchange runs, 4 and 8 are promoted, at every offset from "at once" to "after the first
/// exchange"): the gating releases without its backstop, nothing deadlocks, everything
/// arrives. A leftover update stamped with a depth from before a promotion is refused and
/// its content ignored.
#[test]
fn edge26_cascading_promotions_during_a_link_exchange() {
    for gap_us in [0u64, 20, 50, 80, 120, 300, 1_000, 1_030, 1_060, 1_100] {
        let mut h = Harness::new("edge26", 9, 2);
        for _ in 0..3 {
            h.send(7, 8);
            h.send(8, 7);
            h.send(5, 4);
            h.send(4, 5);
            h.send(1, 8);
        }
        h.run_for(Duration::from_micros(120));
        h.crash(2);
        h.run_to(&["linkdown 6 x 2"]);
        h.run_for(Duration::from_micros(gap_us));
        h.crash(6);
        for _ in 0..3 {
            h.send(7, 8);
            h.send(8, 7);
        }
        h.settle();
        h.check();
        assert_eq!(h.delivered(7, 8).len(), 6);
        assert_eq!(h.delivered(8, 7).len(), 6);
        let promoted = |r: u32| {
            let v = h
                .sim
                .world()
                .node(Rank(r))
                .and_then(|n| n.tree().view().cloned());
            v.map(|v| (v.slot().0, v.depth()))
        };
        assert_eq!(promoted(4), Some((2, 1)));
        assert_eq!(promoted(8), Some((4, 2)));

        // A leftover from before the promotions: 4's update as it was at depth 2, claiming 7
        // sent far more than it did. Applied, it would make 8 ask for replays.
        let stale = Message::Relm(RelmMsg::Link(RelmLinkMsg {
            depth: 2,
            full: true,
            want: true,
            acks: vec![],
            probes: vec![ChainMark {
                src: Rank(7),
                dst: Rank(8),
                uid: uid(40),
            }],
        }))
        .encode();
        let before = h.stats(8).clone();
        h.sim
            .command(Rank(8), |n, now| n.handle_frame(now, Rank(4), stale));
        h.run_for(Duration::from_millis(10));
        let after = h.stats(8);
        assert_eq!(after.relm.link_rejected, before.relm.link_rejected + 1);
        assert_eq!(after.relm.requests, before.relm.requests);
        assert_eq!(after.relm.frames_out, before.relm.frames_out);
    }
}

/// Edge case 27: The origin or the destination dies: the origin hears which messages failed, every
/// survivor's RELM state returns to empty, and chain counters for the dead go.
#[test]
fn edge27_origin_or_destination_dies() {
    // Destination dies with messages in flight.
    let mut h = Harness::new("edge27-dst", 9, 2);
    for _ in 0..10 {
        h.send(7, 8);
    }
    h.run_to(&["deliver  0->2 RelmData src=7 dst=8 uid=3"]);
    h.crash(8);
    h.settle();
    h.check();
    let failed = h.rec().failed.get(&(7, 8)).cloned().unwrap_or_default();
    assert_eq!(failed.len(), 1);
    let (first, count) = failed[0];
    let acked = h.rec().acked.get(&(7, 8)).copied();
    assert_eq!(acked.map_or(uid(0), |a| a.next()), first);
    assert_eq!(first.dist(uid(9)) + 1, count as u64);
    assert_eq!(h.stats(7).relm.failed, count as u64);
    assert_eq!(
        h.sim.world().node(Rank(7)).expect("live").relm_chains(),
        0,
        "the chain to the dead rank is gone"
    );

    // Origin dies with messages in flight.
    let mut h = Harness::new("edge27-src", 9, 2);
    for _ in 0..10 {
        h.send(7, 8);
    }
    h.run_to(&["deliver  1->0 RelmData src=7 dst=8 uid=5"]);
    h.crash(7);
    h.settle();
    h.check();
    // Frames already on the wire may still arrive; whatever does is a prefix, in order.
    let got = h.delivered(7, 8);
    assert!(got.len() >= 5, "{got:?}");
    assert_eq!(
        h.sim.world().node(Rank(8)).expect("live").relm_chains(),
        0,
        "the chain from the dead rank is gone"
    );
}

/// Edge case 28: Uids wrap across the reserved sentinels (chains start 4 below the top here), also
/// through a relay crash and replay; the same uid with different bytes is a collision,
/// reported and never delivered.
#[test]
fn edge28_uid_wrap_and_collision() {
    let top = UID_MAX - 3;
    let mut h = Harness::with("edge28", 9, 2, |c| c.node.relm.first_uid = top);
    for _ in 0..5 {
        h.send(7, 8);
    }
    h.run_to(&["deliver  1->0 RelmData src=7 dst=8 uid=0"]);
    h.crash(2);
    for _ in 0..5 {
        h.send(7, 8);
    }
    h.settle();
    h.check();
    let want: Vec<Uid> = (0..10u64).map(|i| uid(top).plus(i)).collect();
    assert_eq!(h.delivered(7, 8), want);
    assert_eq!(want[4], uid(0));
    assert_eq!(want[3], uid(UID_MAX));

    // Collision at a destination: a buffered message, then the same uid with other bytes.
    let mut h = Harness::new("edge28-collision", 9, 2);
    let frame = |u: u32, p: &'static [u8]| {
        Message::Relm(RelmMsg::Data(RelmDataMsg {
            src: Rank(3),
            dst: Rank(7),
            uid: uid(u),
            tag: 16,
            payload: Bytes::from_static(p),
        }))
        .encode()
    };
    let (a, b) = (frame(2, b"a"), frame(2, b"b"));
    h.sim
        .command(Rank(7), |n, now| n.handle_frame(now, Rank(3), a));
    h.sim
        .command(Rank(7), |n, now| n.handle_frame(now, Rank(3), b));
    h.run_for(Duration::from_millis(1));
    assert_eq!(h.rec().collisions, [(7, 3, 7, uid(2))]);
    assert_eq!(h.stats(7).relm.collisions, 1);
    assert!(h.delivered(3, 7).is_empty());
}

/// Edge case 10 (grow after failures), RELM side: with rank 1 dead, growing 4 → 6 demotes 3
/// from slot 1 to slot 3 under the new rank 5 while messages to and from 3 are in flight; the
/// delta reaches RELM (link updates with 5), nothing is lost or doubled, and the joiners send
/// and receive on fresh chains.
#[test]
fn edge10_grow_demotes_a_rank_with_messages_in_flight() {
    let mut h = Harness::new("edge10-grow", 4, 2);
    h.crash(1);
    h.run_for(Duration::from_millis(20));
    for _ in 0..20 {
        h.send(3, 2);
        h.send(2, 3);
    }
    h.run_for(Duration::from_micros(60));
    if let Err(e) = h.sim.join(6) {
        h.fail(format!("grow: {e}"));
    }
    h.run_for(Duration::from_micros(10));
    let demoted = h
        .sim
        .world()
        .node(Rank(3))
        .and_then(|n| n.tree().view().cloned())
        .map(|v| (v.slot().0, v.parent()));
    assert_eq!(demoted, Some((3, Some(Rank(5)))));
    for _ in 0..10 {
        h.send(3, 2);
        h.send(5, 3);
        h.send(4, 3);
        h.send(3, 4);
    }
    h.settle();
    h.check();
    assert_eq!(h.delivered(3, 2).len(), 30);
    assert_eq!(h.delivered(2, 3).len(), 20);
    assert_eq!(h.delivered(5, 3).len(), 10);
    assert_eq!(h.delivered(3, 4).len(), 10);
}
