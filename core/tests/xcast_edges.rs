//! Xcast edge cases 12–19 and failure-knowledge case 9 of `docs/edge-cases.md`, plus root
//! failover, as named simulator scenarios through the public API.
//!
//! Every scenario runs on a small tree with zero jitter, so the interleaving is exact (one-way
//! latency 50 µs, link-down 1 ms after a crash or a failed dial), schedules its faults at chosen
//! virtual times, proves from the trace or the counters that the case really happened, and then
//! checks the common invariants ([`Harness::check`]).
//!
//! Set `LIFELINE_TRACE=1` to print each scenario's trace.
//!
//! Radix 2, n = 9: 0→{1,2}, 1→{3,5}, 2→{4,6}, 3→{7}, 4→{8}.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

use bytes::Bytes;
use lifeline_core::sim::{Fault, Observer, Sim, SimConfig, World};
use lifeline_core::tree::{Rank, RankSet};
use lifeline_core::wire::{MembershipMsg, XcastMsg};
use lifeline_core::{Duration, Event, Instant, LinkCause, MembershipEvent, XcastEvent};

// ---------------------------------------------------------------------------------------------
// Harness
// ---------------------------------------------------------------------------------------------

fn us(x: u64) -> Instant {
    Instant::ZERO + Duration::from_micros(x)
}

/// One delivery: (rank, op, origin, seq, tag, time).
type Delivery = (u32, u64, u32, u64, u16, Instant);

/// Records everything the invariants need.
#[derive(Default)]
struct Rec {
    delivered: Vec<Delivery>,
    /// (origin, op, seq, time)
    completed: Vec<(u32, u64, u64, Instant)>,
    /// (root, op, origin, seq, time)
    root_completed: Vec<(u32, u64, u32, u64, Instant)>,
    /// (rank, epoch, ranks)
    confirmed: Vec<(u32, u64, RankSet)>,
    last_op: BTreeMap<u32, u64>,
    violations: Vec<String>,
}

impl Observer for Rec {
    fn on_event(&mut self, w: &World, rank: Rank, e: &Event) {
        let now = w.now();
        match e {
            Event::Xcast(XcastEvent::Delivered {
                op,
                origin,
                seq,
                tag,
                ..
            }) => {
                let last = self.last_op.entry(rank.0).or_insert(0);
                if *op <= *last {
                    self.violations
                        .push(format!("rank {rank} delivered op {op} after op {last}"));
                }
                *last = (*last).max(*op);
                self.delivered
                    .push((rank.0, *op, origin.0, *seq, *tag, now));
            }
            Event::Xcast(XcastEvent::Completed { op, seq }) => {
                self.completed.push((rank.0, *op, *seq, now))
            }
            Event::Xcast(XcastEvent::RootCompleted { op, origin, seq }) => {
                let root = w
                    .node(rank)
                    .and_then(|n| n.tree().view())
                    .is_some_and(|v| v.is_root());
                if !root {
                    self.violations.push(format!(
                        "rank {rank} (not the root) fired XcastRootCompleted"
                    ));
                }
                self.root_completed.push((rank.0, *op, origin.0, *seq, now));
            }
            Event::Membership(MembershipEvent::FailureConfirmed { epoch, ranks, .. }) => {
                self.confirmed.push((rank.0, *epoch, ranks.clone()))
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

impl Rec {
    /// Ops delivered at `rank`, in delivery order: (op, origin, seq).
    fn at(&self, rank: u32) -> Vec<(u64, u32, u64)> {
        self.delivered
            .iter()
            .filter(|d| d.0 == rank)
            .map(|d| (d.1, d.2, d.3))
            .collect()
    }

    /// When `rank` delivered (origin, seq), if it did.
    fn delivered_at(&self, rank: u32, origin: u32, seq: u64) -> Option<Instant> {
        self.delivered
            .iter()
            .find(|d| d.0 == rank && d.2 == origin && d.3 == seq)
            .map(|d| d.5)
    }

    /// Root completions of (origin, seq): (root, op, time).
    fn root_completions(&self, origin: u32, seq: u64) -> Vec<(u32, u64, Instant)> {
        self.root_completed
            .iter()
            .filter(|c| c.2 == origin && c.3 == seq)
            .map(|c| (c.0, c.1, c.4))
            .collect()
    }
}

/// A simulator with a recorded trace and the list of broadcasts started.
struct Harness {
    sim: Sim<Rec>,
    trace: Rc<RefCell<Vec<String>>>,
    /// (origin, seq, time started)
    issued: Vec<(u32, u64, Instant)>,
    /// Ranks added by [`Harness::join`] and when: they owe only the ops started after it.
    joined: Option<(u32, Instant)>,
    name: &'static str,
}

impl Harness {
    fn new(name: &'static str, span: u32, radix: u32) -> Self {
        Self::with(name, span, radix, |_| {})
    }

    /// A harness with zero jitter, after `tweak` adjusted the configuration.
    fn with(name: &'static str, span: u32, radix: u32, tweak: impl FnOnce(&mut SimConfig)) -> Self {
        let mut cfg = SimConfig::new(span, radix, 7);
        cfg.net.jitter = Duration::ZERO;
        tweak(&mut cfg);
        let mut sim = Sim::new(cfg, Rec::default()).expect("valid config");
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
            issued: Vec::new(),
            joined: None,
            name,
        }
    }

    fn rec(&self) -> &Rec {
        self.sim.observer()
    }

    /// Starts a broadcast at `origin` now; returns its seq.
    fn xcast(&mut self, origin: u32, tag: u16) -> u64 {
        let payload = Bytes::from(format!("{}-{origin}", self.name).into_bytes());
        let seq = self
            .sim
            .command(Rank(origin), |n, now| n.xcast(now, tag, payload))
            .expect("origin is live")
            .expect("xcast accepted");
        let now = self.sim.world().now();
        self.issued.push((origin, seq, now));
        seq
    }

    fn run(&mut self, t: Instant) {
        if let Err(e) = self.sim.run_until(t) {
            self.dump();
            panic!("{}: {e}", self.name);
        }
    }

    fn quiet(&mut self) {
        if let Err(e) = self.sim.run_until_quiet(200_000) {
            self.dump();
            panic!("{}: {e}", self.name);
        }
    }

    /// Grows the span to `span` now (the new ranks are joiners).
    fn join(&mut self, span: u32) {
        let old = self.sim.world().span();
        self.sim.join(span).expect("grow");
        if self.joined.is_none() {
            self.joined = Some((old, self.sim.world().now()));
        }
    }

    fn crash(&mut self, r: u32) {
        self.sim.apply(Fault::Crash(Rank(r)));
    }

    /// Virtual time now, in microseconds.
    fn time_now(&self) -> u64 {
        self.sim.world().now().as_nanos() / 1_000
    }

    fn stats(&self, r: u32) -> &lifeline_core::Stats {
        self.sim.world().node(Rank(r)).expect("live rank").stats()
    }

    /// Index of the first trace line containing every needle.
    fn find(&self, needles: &[&str]) -> Option<usize> {
        self.trace
            .borrow()
            .iter()
            .position(|l| needles.iter().all(|n| l.contains(n)))
    }

    /// Number of trace lines containing every needle.
    fn count(&self, needles: &[&str]) -> usize {
        self.trace
            .borrow()
            .iter()
            .filter(|l| needles.iter().all(|n| l.contains(n)))
            .count()
    }

    /// Index of the first matching trace line; panics (with the trace) when there is none.
    fn expect_line(&self, needles: &[&str]) -> usize {
        match self.find(needles) {
            Some(i) => i,
            None => {
                self.dump();
                panic!("{}: no trace line with {needles:?}", self.name)
            }
        }
    }

    /// Asserts that the first line matching `a` comes before the first matching `b`.
    fn expect_before(&self, a: &[&str], b: &[&str]) {
        let (i, j) = (self.expect_line(a), self.expect_line(b));
        if i >= j {
            self.dump();
            panic!(
                "{}: expected {a:?} (line {i}) before {b:?} (line {j})",
                self.name
            );
        }
    }

    /// Virtual time of trace line `i`, in microseconds.
    fn time_us(&self, i: usize) -> u64 {
        let l = self.trace.borrow()[i].clone();
        let t = l.trim_start().split("ms").next().unwrap_or_default();
        let (ms, frac) = t.split_once('.').unwrap_or((t, "0"));
        ms.parse::<u64>().unwrap_or(0) * 1_000 + frac.parse::<u64>().unwrap_or(0)
    }

    /// The live rank that is the root now.
    fn root(&self) -> u32 {
        let w = self.sim.world();
        w.live_ranks()
            .find(|&r| {
                w.node(r)
                    .and_then(|n| n.tree().view())
                    .is_some_and(|v| v.is_root())
            })
            .expect("a live root")
            .0
    }

    fn dump(&self) {
        if std::env::var_os("LIFELINE_TRACE").is_none() {
            for l in self.trace.borrow().iter() {
                eprintln!("[{}] {l}", self.name);
            }
        }
    }

    /// The common invariants (after the run has settled):
    /// - every survivor delivered every op of a surviving origin exactly once, and an op of a
    ///   crashed origin at every survivor or at none (a rank that joined owes only the ops
    ///   started after it joined: it adopts the earlier ones as done);
    /// - every rank delivered in strictly increasing op id (checked on every step by [`Rec`]);
    /// - every surviving origin heard completion of each of its broadcasts exactly once, and not
    ///   before the last survivor delivered it;
    /// - a root fired `XcastRootCompleted` at most once per op, some root fired it for every op
    ///   of a surviving origin, and never before every survivor delivered it (`single_root`:
    ///   exactly once, at rank 0);
    /// - every survivor's dead set is the crashed set; no rank saw two ops under one id.
    fn check(&self, single_root: bool) {
        let w = self.sim.world();
        let rec = self.rec();
        let crashed = w.crashed();
        let survivors: Vec<u32> = w.live_ranks().map(|r| r.0).collect();
        let fail = |msg: String| -> ! {
            self.dump();
            panic!("{} (seed {}): {msg}", self.name, w.seed());
        };
        if let Some(v) = rec.violations.first() {
            fail(v.clone());
        }
        // Every op anyone delivered: (origin, seq).
        let mut keys: Vec<(u32, u64)> = rec.delivered.iter().map(|d| (d.2, d.3)).collect();
        keys.extend(self.issued.iter().map(|i| (i.0, i.1)));
        keys.sort_unstable();
        keys.dedup();
        for &(origin, seq) in &keys {
            let origin_alive = !crashed.contains(Rank(origin));
            let started = self
                .issued
                .iter()
                .find(|i| (i.0, i.1) == (origin, seq))
                .map(|i| i.2);
            let owed: Vec<u32> = match self.joined {
                Some((first, at)) if started.is_none_or(|s| s < at) => {
                    survivors.iter().copied().filter(|&r| r < first).collect()
                }
                _ => survivors.clone(),
            };
            let mut at = 0;
            for &r in &owed {
                let n = rec
                    .delivered
                    .iter()
                    .filter(|d| d.0 == r && d.2 == origin && d.3 == seq)
                    .count();
                if n > 1 {
                    fail(format!("rank {r} delivered ({origin},{seq}) {n} times"));
                }
                at += n;
            }
            for &r in survivors.iter().filter(|r| !owed.contains(r)) {
                let n = rec
                    .delivered
                    .iter()
                    .filter(|d| d.0 == r && d.2 == origin && d.3 == seq)
                    .count();
                if n > 1 {
                    fail(format!("joiner {r} delivered ({origin},{seq}) {n} times"));
                }
            }
            if (origin_alive && at != owed.len()) || (at != 0 && at != owed.len()) {
                fail(format!(
                    "({origin},{seq}) reached {at} of {} survivors",
                    owed.len()
                ));
            }
            let last = owed
                .iter()
                .filter_map(|&r| rec.delivered_at(r, origin, seq))
                .max();
            if origin_alive {
                let c: Vec<&(u32, u64, u64, Instant)> = rec
                    .completed
                    .iter()
                    .filter(|c| c.0 == origin && c.2 == seq)
                    .collect();
                if c.len() != 1 {
                    fail(format!(
                        "origin {origin} heard completion of seq {seq} {} times",
                        c.len()
                    ));
                }
                if last.is_some_and(|t| t > c[0].3) {
                    fail(format!(
                        "({origin},{seq}) completed at {} before its last delivery at {last:?}",
                        c[0].3
                    ));
                }
            }
            let roots = rec.root_completions(origin, seq);
            let mut by_root: BTreeMap<u32, usize> = BTreeMap::new();
            for &(root, _, t) in &roots {
                *by_root.entry(root).or_default() += 1;
                if last.is_some_and(|l| l > t) {
                    fail(format!(
                        "root {root} completed ({origin},{seq}) at {t} before its last delivery \
                         at {last:?}"
                    ));
                }
            }
            if let Some((root, n)) = by_root.iter().find(|(_, &n)| n > 1) {
                fail(format!("root {root} completed ({origin},{seq}) {n} times"));
            }
            let must_complete = origin_alive || at > 0;
            if must_complete && roots.is_empty() {
                fail(format!("no root completed ({origin},{seq})"));
            }
            if single_root
                && ((must_complete && roots.len() != 1) || roots.iter().any(|r| r.0 != 0))
            {
                fail(format!(
                    "({origin},{seq}) root completions {roots:?}, expected one at rank 0"
                ));
            }
        }
        for &r in &survivors {
            let n = w.node(Rank(r)).expect("survivor");
            if n.stats().xcast.conflicts != 0 {
                fail(format!("rank {r} saw two ops under one id"));
            }
            if n.tree().dead() != &crashed {
                fail(format!(
                    "rank {r} believes dead {{{}}} but crashed {{{crashed}}}",
                    n.tree().dead()
                ));
            }
        }
    }
}

/// An application tag (forward-first).
const APP: u16 = 16;

// ---------------------------------------------------------------------------------------------
// 12. A child dies before the forward, after the forward but before its ACK, after its ACK but
//     before the parent finishes.
// ---------------------------------------------------------------------------------------------

/// Rank 3 (child of 1, parent of 7) crashes at 20 µs; the root's op reaches 1 at 50 µs, so 1's
/// forward to 3 is a failed dial and 3 never sees the op. 1 repairs when the crash is noticed
/// (1 ms), promotes 7 into slot 3 and replays the op to it.
#[test]
fn edge_12_child_dies_before_forward() {
    let mut h = Harness::new("edge12a", 9, 2);
    h.xcast(0, APP);
    h.run(us(20));
    h.crash(3);
    h.quiet();
    // 3 died before its parent even had the op, so the forward to it never arrived.
    h.expect_before(
        &["fault    Crash(Rank(3))"],
        &["deliver  0->1 Forward op=1"],
    );
    assert_eq!(h.count(&["deliver  1->3"]), 0, "3 got nothing");
    assert!(h.rec().at(3).is_empty());
    // The orphan 7 got the op as a replay from its adoptive parent, after the repair.
    h.expect_before(&["linkdown 1 x 3"], &["deliver  1->7 Forward op=1 round=2"]);
    h.expect_before(
        &["deliver  1->7 Forward op=1 round=2"],
        &["event    0 XcastRootCompleted op=1"],
    );
    h.check(true);
}

/// 3 receives the forward at 100 µs and passes it to 7, then crashes at 120 µs: 7 delivers, but
/// its ACK (sent at 150 µs) finds 3 dead and 3 never ACKs 1. 1 promotes 7 and replays; 7 has
/// the op already and must not deliver it again.
#[test]
fn edge_12_child_dies_after_forward_before_ack() {
    let mut h = Harness::new("edge12b", 9, 2);
    h.xcast(0, APP);
    h.run(us(120));
    h.crash(3);
    h.quiet();
    h.expect_before(
        &["deliver  1->3 Forward op=1"],
        &["fault    Crash(Rank(3))"],
    );
    assert_eq!(h.rec().at(3).len(), 1, "3 delivered before dying");
    // 3's forward was on the wire when it died, and 7's ACK to it was lost.
    h.expect_before(
        &["fault    Crash(Rank(3))"],
        &["deliver  3->7 Forward op=1"],
    );
    assert_eq!(h.count(&["deliver  7->3"]), 0, "7's ACK never reached 3");
    assert_eq!(h.count(&["deliver  3->1 Ack"]), 0, "3 never ACKed");
    // The replay reached 7, which ACKed it without delivering again (checked below).
    h.expect_before(&["linkdown 1 x 3"], &["deliver  1->7 Forward op=1 round=2"]);
    h.expect_before(
        &["deliver  7->1 Ack(AckMsg { op: 1"],
        &["event    0 XcastRootCompleted op=1"],
    );
    assert_eq!(h.rec().at(7).len(), 1);
    h.check(true);
}

/// Two variants.
///
/// 1. Leaf 5 ACKs 1 at 150 µs and crashes at 160 µs, while 1 still waits for 3 (whose ACK comes
///    at 250 µs): 1 finishes on 3's ACK; 5's ACK still counts.
/// 2. Interior 3 ACKs 1 at 250 µs and crashes at 260 µs while 1 still waits for 5 (whose ACK is
///    stalled by a one-way cut 5→1). 1 promotes 7 into slot 3 and replays to it; 7 ACKs without
///    re-delivering; when the cut heals, 5's ACK arrives and 1 finishes, so the root completes
///    exactly once and only after the repair.
#[test]
fn edge_12_child_dies_after_ack_before_parent_finishes() {
    // Variant 1.
    let mut h = Harness::new("edge12c1", 9, 2);
    h.xcast(0, APP);
    h.run(us(160));
    h.crash(5);
    h.quiet();
    h.expect_before(
        &["deliver  5->1 Ack(AckMsg { op: 1"],
        &["fault    Crash(Rank(5))"],
    );
    h.expect_before(
        &["fault    Crash(Rank(5))"],
        &["deliver  3->1 Ack(AckMsg { op: 1"],
    );
    h.expect_before(
        &["deliver  3->1 Ack(AckMsg { op: 1"],
        &["deliver  1->0 Ack(AckMsg { op: 1"],
    );
    h.check(true);

    // Variant 2.
    let mut h = Harness::new("edge12c2", 9, 2);
    h.sim.apply(Fault::CutOneWay(Rank(5), Rank(1)));
    h.xcast(0, APP);
    h.run(us(260));
    h.crash(3);
    h.run(us(5_000));
    h.sim.apply(Fault::Heal);
    h.quiet();
    h.expect_before(
        &["deliver  3->1 Ack(AckMsg { op: 1"],
        &["fault    Crash(Rank(3))"],
    );
    // 1 had not finished when 3 died: it ACKs the root only after the repair and the heal.
    h.expect_before(
        &["fault    Crash(Rank(3))"],
        &["deliver  1->0 Ack(AckMsg { op: 1"],
    );
    h.expect_before(&["linkdown 1 x 3"], &["deliver  1->7 Forward op=1 round=2"]);
    h.expect_before(
        &["deliver  7->1 Ack(AckMsg { op: 1"],
        &["event    0 XcastRootCompleted op=1"],
    );
    h.expect_before(
        &["deliver  5->1 Ack(AckMsg { op: 1"],
        &["event    0 XcastRootCompleted op=1"],
    );
    assert_eq!(
        h.rec().at(7).len(),
        1,
        "7 delivered once despite the replay"
    );
    h.check(true);
}

// ---------------------------------------------------------------------------------------------
// 13. A promoted rank had completed op N: its parent's replay re-drives N through the new
//     subtree without re-delivering locally, and N+1 does not overtake N.
// ---------------------------------------------------------------------------------------------

/// A one-way cut 1→3 keeps ops 1 and 2 from 3 (and 7), while leaf 5 delivers and ACKs both.
/// Rank 1 then crashes: 5 is promoted into slot 1 and adopts 3. The root replays 1 and 2 to 5,
/// which must forward them to 3 in order (1 before 2) without delivering them again itself.
#[test]
fn edge_13_promoted_rank_redrives_completed_op_without_redelivery() {
    let mut h = Harness::new("edge13", 9, 2);
    h.sim.apply(Fault::CutOneWay(Rank(1), Rank(3)));
    h.xcast(0, APP);
    h.run(us(10));
    h.xcast(0, APP);
    h.run(us(200));
    // 5 completed both ops as a leaf; 3 has neither.
    h.expect_line(&["deliver  5->1 Ack(AckMsg { op: 2"]);
    assert_eq!(h.rec().at(5).len(), 2);
    assert!(h.rec().at(3).is_empty() && h.rec().at(7).is_empty());
    h.crash(1);
    h.quiet();
    // 5 was promoted and re-drove both ops to its new child 3, N before N+1.
    h.expect_line(&["event    5 ViewChanged slot=Some(5)->Some(1)"]);
    h.expect_before(
        &["deliver  5->3 Forward op=1"],
        &["deliver  5->3 Forward op=2"],
    );
    h.expect_before(
        &["deliver  0->5 Forward op=1"],
        &["deliver  5->3 Forward op=1"],
    );
    assert_eq!(
        h.rec().at(5).iter().map(|d| d.0).collect::<Vec<_>>(),
        [1, 2],
        "5 did not deliver again"
    );
    for r in [3, 7] {
        assert_eq!(
            h.rec().at(r).iter().map(|d| d.0).collect::<Vec<_>>(),
            [1, 2],
            "rank {r}"
        );
    }
    h.check(true);

    // Variant (PRRTE's): 3 already had both ops when 1 died. 5 re-drives them anyway (it cannot
    // know), and 3 ACKs without delivering again.
    let mut h = Harness::new("edge13b", 9, 2);
    h.xcast(0, APP);
    h.run(us(10));
    h.xcast(0, APP);
    h.run(us(120));
    h.crash(1);
    h.quiet();
    h.expect_before(
        &["deliver  1->3 Forward op=2"],
        &["fault    Crash(Rank(1))"],
    );
    h.expect_before(
        &["deliver  5->3 Forward op=1"],
        &["deliver  5->3 Forward op=2"],
    );
    for r in [3, 5, 7] {
        assert_eq!(
            h.rec().at(r).iter().map(|d| d.0).collect::<Vec<_>>(),
            [1, 2],
            "rank {r}"
        );
    }
    h.check(true);
}

// ---------------------------------------------------------------------------------------------
// 14. Back-to-back ops while a fault reshapes the tree mid-stream.
// ---------------------------------------------------------------------------------------------

/// Ops from 7, 5, 0, 8, 6, 7, 4, ... every 20 µs; rank 1 (parent of 3 and 5, on the relay path
/// of 7 and 5) crashes at 100 µs, in the middle of the stream, and the stream goes on through
/// the repair (two more ops start between the link-down and the global notice). Every rank delivers in op order, the root completes in op order, and every origin
/// hears of each op once.
#[test]
fn edge_14_back_to_back_ops_with_fault_midstream_stay_in_order() {
    let mut h = Harness::new("edge14", 9, 2);
    h.sim.schedule(us(100), Fault::Crash(Rank(1)));
    let origins = [7, 5, 0, 8, 6, 7, 4, 2, 5, 7, 0];
    for (i, &o) in origins.iter().enumerate() {
        h.run(us(20 * i as u64));
        h.xcast(o, APP + (i % 3) as u16);
    }
    assert!(
        h.issued.iter().filter(|i| i.2 > us(100)).count() >= 5,
        "the stream went on"
    );
    h.expect_line(&["lost     3->1 (crashed)"]); // 7's relay died with 1
                                                 // More ops while the repair is under way (after the link-down, before the notice).
    h.run(us(1_150));
    h.xcast(7, APP);
    h.xcast(3, APP);
    h.quiet();
    let crash = h.expect_line(&["fault    Crash(Rank(1))"]);
    // The fault landed mid-stream: ops were numbered before it and completed after it.
    let first_fwd = h.expect_line(&["deliver  0->", "Forward op=1 "]);
    assert!(first_fwd < crash);
    let first_done = h.expect_line(&["XcastRootCompleted op=1 "]);
    assert!(first_done > crash, "op 1 was still in flight at the crash");
    // Root completions come in op order.
    let ops: Vec<u64> = h.rec().root_completed.iter().map(|c| c.1).collect();
    assert!(ops.windows(2).all(|w| w[0] < w[1]), "root order {ops:?}");
    assert_eq!(ops.len(), h.issued.len());
    // Every survivor delivered the same ops in the same order.
    let reference: Vec<u64> = h.rec().at(0).iter().map(|d| d.0).collect();
    for r in h.sim.world().live_ranks() {
        let mine: Vec<u64> = h.rec().at(r.0).iter().map(|d| d.0).collect();
        assert_eq!(mine, reference, "rank {r}");
    }
    h.check(true);
}

// ---------------------------------------------------------------------------------------------
// 15. Process-first ops reach newly adopted orphans; forward-first ops reach children that are
//     about to re-home.
// ---------------------------------------------------------------------------------------------

/// Part 1 (process-first). Without wire-up links, rank 4 dies silently at t=0: neither its
/// parent 2 nor its child 8 holds a socket to it. The root learns of the death first (a report
/// injected at the root models an out-of-band source; the simulator's uniform link-down delay
/// cannot make the root learn before 2 otherwise) and broadcasts the global failure notice. 2
/// processes the notice *before* forwarding it: it repairs, adopts 8, and forwards the notice to
/// 8 and 6, never to 4 (no dial to 4, so no link-down for it). A wire-up op after it reaches all.
///
/// Part 2 (forward-first). k=2, n=4 with 1 dead: 3 sits in slot 1 under the root. A grow to 6
/// demotes 3 under the new rank 5 while an app op is in flight (before 3 got it, and after 3
/// ACKed it): 3 still delivers it exactly once, from its new parent.
#[test]
fn edge_15_process_first_reaches_adopted_orphans() {
    use lifeline_core::wire::{LineageMsg, Message};
    let mut h = Harness::with("edge15a", 9, 2, |c| c.wire_tree = false);
    h.crash(4);
    h.run(us(100));
    let report = Message::Membership(MembershipMsg::Lineage(LineageMsg {
        span: 9,
        lineage: vec![Rank(0)],
        failed: vec![Rank(4)],
    }))
    .encode();
    h.sim
        .command(Rank(0), |n, now| n.handle_frame(now, Rank(2), report))
        .expect("root live");
    h.run(us(10_000));
    h.xcast(8, lifeline_core::xcast::TAG_WIREUP);
    h.quiet();
    // 2 learned from the notice itself: it never dialled 4.
    assert_eq!(h.count(&["linkdown 2 x 4"]), 0, "2 never sent to 4");
    assert_eq!(h.count(&["deliver  2->4"]), 0);
    h.expect_before(
        &["deliver  0->2 Forward op=1", "tag=0"],
        &["event    2 FailureConfirmed"],
    );
    // The adoption notice precedes the notice's forward on the 2->8 link.
    h.expect_before(
        &["deliver  2->8 Adopt"],
        &["deliver  2->8 Forward op=1", "tag=0"],
    );
    for r in h.sim.world().live_ranks() {
        let got: Vec<&(u32, u64, RankSet)> =
            h.rec().confirmed.iter().filter(|c| c.0 == r.0).collect();
        assert_eq!(got.len(), 1, "rank {r} confirmations {got:?}");
        assert!(got[0].2.contains(Rank(4)));
    }
    h.check(true);

    for join_at in [20, 60] {
        let name = if join_at == 20 { "edge15b" } else { "edge15c" };
        let mut h = Harness::with(name, 4, 2, |c| {
            c.node.dead.insert(Rank(1));
        });
        assert_eq!(
            h.sim
                .world()
                .node(Rank(3))
                .and_then(|n| n.tree().view())
                .map(|v| v.slot()),
            Some(Rank(1))
        );
        h.xcast(0, APP);
        h.run(us(join_at));
        h.join(6);
        let parent = |h: &Harness| {
            h.sim
                .world()
                .node(Rank(3))
                .and_then(|n| n.tree().view())
                .and_then(|v| v.parent())
        };
        assert_eq!(parent(&h), Some(Rank(5)), "3 re-homed under 5");
        h.quiet();
        if join_at == 20 {
            assert_eq!(h.count(&["deliver  0->3 Forward op=1"]), 1);
            assert!(h.rec().delivered_at(3, 0, 1).is_some());
            h.expect_before(&["join"], &["deliver  0->3 Forward op=1"]);
        } else {
            h.expect_before(&["deliver  0->3 Forward op=1"], &["join"]);
        }
        // Either way 3 gets (or is re-driven) the op by its new parent, and delivers it once.
        h.expect_line(&["deliver  5->3 Forward op=1"]);
        assert_eq!(h.rec().at(3).len(), 1, "{name}: 3 delivered once");
        // The original ranks all delivered op 1; the new ones may have adopted it as done.
        for r in [0, 2, 3] {
            assert_eq!(h.rec().at(r).len(), 1, "{name}: rank {r}");
        }
        assert_eq!(h.rec().root_completed.len(), 1, "{name}");
        assert_eq!(h.rec().completed.len(), 1, "{name}");
        for r in [4, 5] {
            let n = h.sim.world().node(Rank(r)).expect("joiner");
            let adopted = n.stats().xcast.adopted_as_done;
            assert_eq!(
                adopted + h.rec().at(r).len() as u64,
                1,
                "{name}: joiner {r} neither adopted nor delivered op 1 exactly once"
            );
        }
        h.xcast(4, APP);
        h.quiet();
        for r in h.sim.world().live_ranks() {
            assert!(
                h.rec().delivered_at(r.0, 4, 1).is_some(),
                "{name}: rank {r}"
            );
        }
        h.check(true);
    }
}

// ---------------------------------------------------------------------------------------------
// 16. Stale ACKs are ignored; a re-poll of an op the child never saw gets it replayed.
// ---------------------------------------------------------------------------------------------

/// White-box frames fed to real nodes in the simulator (the exact states are hard to provoke
/// with faults alone).
///
/// 1. At 60 µs, before 1's forward of op 1 reaches 3 (100 µs), 3 gets a re-poll for op 1 from
///    1: it has never seen it, so it asks (Need) and 1 replays under a new round.
/// 2. At 120 µs 1 gets an ACK for op 1 from 3 under the superseded round, ACKs from ranks that
///    are not its children (2 and 7) and an ACK for an op it never had, and a Need from 5 (which
///    already ACKed): all are counted stale and change nothing, so 1 still waits for 3's ACK
///    under the current round before finishing.
#[test]
fn edge_16_stale_ack_ignored_and_repoll_of_unseen_op_replays() {
    use lifeline_core::wire::{AckMsg, Message, NeedMsg, PollMsg};
    let mut h = Harness::new("edge16", 9, 2);
    h.xcast(0, APP);
    h.run(us(60));
    let poll = Message::Xcast(XcastMsg::Poll(PollMsg {
        op: 1,
        round: 1,
        done: 0,
        global_done: 0,
    }))
    .encode();
    h.sim
        .command(Rank(3), |n, now| n.handle_frame(now, Rank(1), poll))
        .expect("3 live");
    h.run(us(120));
    let before = h.stats(1).xcast.stale;
    let ack = |op, round| Message::Xcast(XcastMsg::Ack(AckMsg { op, round })).encode();
    for (from, frame) in [
        (3, ack(1, 1)), // superseded round
        (2, ack(1, 2)), // not a child
        (7, ack(1, 2)), // not a child (a grandchild)
        (3, ack(9, 1)), // an op 1 never had
    ] {
        h.sim
            .command(Rank(1), |n, now| n.handle_frame(now, Rank(from), frame))
            .expect("1 live");
    }
    h.run(us(160));
    let need = Message::Xcast(XcastMsg::Need(NeedMsg { op: 1 })).encode();
    h.sim
        .command(Rank(1), |n, now| n.handle_frame(now, Rank(5), need))
        .expect("1 live");
    assert_eq!(
        h.stats(1).xcast.stale - before,
        5,
        "every forged frame is stale"
    );
    h.quiet();
    // The re-poll of an unseen op made 3 ask, and 1 replayed it under round 2.
    h.expect_before(
        &["deliver  3->1 Need(NeedMsg { op: 1 })"],
        &["deliver  1->3 Forward op=1 round=2"],
    );
    // 1 finished only on 3's ACK under the current round.
    h.expect_before(
        &["deliver  3->1 Ack(AckMsg { op: 1, round: 2 })"],
        &["deliver  1->0 Ack(AckMsg { op: 1"],
    );
    assert_eq!(h.count(&["deliver  1->5 Forward"]), 1, "no replay to 5");
    assert_eq!(
        h.rec().at(3).len(),
        1,
        "3 delivered once despite two forwards"
    );
    assert_eq!(
        h.count(&["deliver  3->7 Forward op=1"]),
        1,
        "3 forwarded once"
    );
    h.check(true);
}

// ---------------------------------------------------------------------------------------------
// 17. Late joiners and unreachable not-yet-joined ranks.
// ---------------------------------------------------------------------------------------------

/// Ops 1–3 complete on n=9; op 4 is in flight when the span grows to 13 (ranks 9–12 join); rank
/// 12 crashes at once (it never comes up), so forwards to it fail. Joiners adopt every op their
/// parent had finished as done, deliver the rest exactly once in order, and the root completes
/// every op, including one a joiner originates.
#[test]
fn edge_17_late_joiner_adopts_earlier_ops_and_root_completes() {
    let mut h = Harness::new("edge17", 9, 2);
    for i in 0..3 {
        h.xcast([0, 7, 8][i], APP);
        h.run(us(30 * (i as u64 + 1)));
    }
    h.quiet();
    assert_eq!(h.rec().root_completed.len(), 3);
    let t = h.sim.world().now();
    h.xcast(5, APP);
    h.run(t + Duration::from_micros(120));
    h.join(13);
    h.crash(12);
    let t = h.sim.world().now();
    h.run(t + Duration::from_micros(40));
    h.xcast(10, APP);
    h.xcast(0, APP);
    h.quiet();
    // 12 never came up: its parent's forwards to it failed (dials after the crash notice), and
    // the ops completed only once the parent had given up on it.
    assert!(h.count(&["linkdown 4 x 12"]) >= 2, "forwards to 12 failed");
    h.expect_before(&["linkdown 4 x 12"], &["XcastRootCompleted op=4 "]);
    let total = h.rec().root_completed.len() as u64;
    assert_eq!(total, 6);
    for r in 9..12 {
        let n = h.sim.world().node(Rank(r)).expect("joiner");
        let adopted = n.stats().xcast.adopted_as_done;
        let mine: Vec<u64> = h.rec().at(r).iter().map(|d| d.0).collect();
        assert_eq!(adopted, 3, "joiner {r} adopted ops 1-3 as done");
        assert_eq!(
            mine,
            (adopted + 1..=total).collect::<Vec<_>>(),
            "joiner {r} (adopted {adopted})"
        );
        assert!(n.tree().dead().contains(Rank(12)));
    }
    // The original ranks delivered everything; the joiners' own op reached everyone.
    for r in (0..9).map(Rank) {
        assert_eq!(h.rec().at(r.0).len() as u64, total, "rank {r}");
    }
    let c: Vec<_> = h.rec().completed.iter().filter(|c| c.0 == 10).collect();
    assert_eq!(c.len(), 1, "the joiner heard its completion once");
    h.check(true);
}

// ---------------------------------------------------------------------------------------------
// 18. Completion fires once at the root and is reported once to a non-root origin.
// ---------------------------------------------------------------------------------------------

/// Three variants, all from non-root origins.
///
/// 1. The relay dies on the way: 7's relay reaches 3 after 3 crashed (40 µs). 7 is promoted and
///    re-sends the relay to its new parent; the op completes once.
/// 2. The relay is duplicated: 1 passes 3's relay to the root and crashes (70 µs). 3's parent
///    changes before the op reaches it, so it re-sends through 5; the root drops the duplicate
///    (`xcast_duplicate_relays`), and the op still completes once at the root and is reported
///    once to 3.
/// 3. The completion report is lost: 8's op completes at the root at 450 µs; the report goes
///    0→2→4→8 and 4 crashes (520 µs) just before the report reaches it. 8's retry timer asks the
///    root again and hears of the completion exactly once.
#[test]
fn edge_18_completion_once_at_root_and_reported_to_non_root_origin() {
    // Variant 1.
    let mut h = Harness::new("edge18a", 9, 2);
    h.xcast(7, APP);
    h.run(us(40));
    h.crash(3);
    h.quiet();
    h.expect_line(&["lost     7->3 (crashed)"]);
    h.expect_before(&["linkdown 7 x 3"], &["deliver  7->1 Relay origin=7 seq=1"]);
    assert_eq!(h.rec().root_completed.len(), 1);
    h.check(true);

    // Variant 2.
    let mut h = Harness::new("edge18b", 9, 2);
    h.xcast(3, APP);
    h.run(us(70));
    h.crash(1);
    h.quiet();
    h.expect_before(
        &["fault    Crash(Rank(1))"],
        &["deliver  1->0 Relay origin=3 seq=1"],
    );
    // 3 re-sent before the op reached it, through its new parent 5.
    h.expect_before(
        &["deliver  3->5 Relay origin=3 seq=1"],
        &["event    3 XcastDelivered"],
    );
    h.expect_line(&["deliver  5->0 Relay origin=3 seq=1"]);
    assert!(h.stats(0).xcast.duplicate_relays >= 1);
    assert_eq!(h.rec().root_completed.len(), 1);
    h.check(true);

    // Variant 3.
    let mut h = Harness::new("edge18c", 9, 2);
    h.xcast(8, APP);
    h.run(us(520));
    h.crash(4);
    h.quiet();
    let done = h.expect_line(&["event    0 XcastRootCompleted op=1"]);
    let crash = h.expect_line(&["fault    Crash(Rank(4))"]);
    assert!(done < crash, "the root completed before 4 died");
    h.expect_before(&["deliver  0->2 Complete"], &["fault    Crash(Rank(4))"]);
    h.expect_line(&["lost     2->4 (crashed)"]);
    assert!(h.stats(8).xcast.retries >= 1, "8 asked again");
    h.expect_before(&["timeout  8"], &["event    8 XcastCompleted"]);
    assert_eq!(h.rec().root_completed.len(), 1);
    h.check(true);
}

// ---------------------------------------------------------------------------------------------
// 19. A forward queued before a repair to a child now dead never double-discounts.
// ---------------------------------------------------------------------------------------------

/// In the simulator: 3 crashes at 20 µs; 1 forwards op 1 to it at 50 µs, a dial that fails.
/// 1 therefore hears of 3's death twice: the crash notice (1.02 ms, which repairs and replays
/// to 7) and the failed forward (1.05 ms), which arrives after the repair and before 7's ACK.
/// A counter would be decremented twice and finish the op without 7; the expected set must
/// not. 5 ACKed long before, so 7 is the only child still owed.
///
/// White-box, on one node: 1 gets op 1 and, before its transmits are drained, loses 3: the
/// queued forward to 3 is never sent, 7 gets a replay, and neither a repeated link-down for 3
/// nor 5's ACK lets 1 ACK its parent before 7 ACKs.
#[test]
fn edge_19_forward_queued_to_dying_child_never_double_discounts() {
    let mut h = Harness::new("edge19", 9, 2);
    h.xcast(0, APP);
    h.run(us(20));
    h.crash(3);
    h.quiet();
    assert_eq!(
        h.count(&["linkdown 1 x 3"]),
        2,
        "crash notice and failed forward"
    );
    let second = h
        .trace
        .borrow()
        .iter()
        .enumerate()
        .filter(|(_, l)| l.contains("linkdown 1 x 3"))
        .nth(1)
        .map(|(i, _)| i)
        .expect("two");
    let ack7 = h.expect_line(&["deliver  7->1 Ack(AckMsg { op: 1"]);
    let up = h.expect_line(&["deliver  1->0 Ack(AckMsg { op: 1"]);
    assert!(second < ack7, "the echo came while 7's ACK was still owed");
    assert!(ack7 < up, "1 finished only after 7 ACKed");
    h.expect_before(&["deliver  5->1 Ack(AckMsg { op: 1"], &["linkdown 1 x 3"]);
    h.check(true);

    white_box_queued_forward_to_dead_child();
}

fn white_box_queued_forward_to_dead_child() {
    use lifeline_core::wire::{AckMsg, ForwardMsg, Message};
    use lifeline_core::{Config, Node, Transmit};
    let cfg = Config::new(9, 2);
    let limits = cfg.limits();
    let mut n = Node::new(cfg, Rank(1), 1, Instant::ZERO).expect("node");
    let drain = |n: &mut Node| -> Vec<(u32, Message)> {
        std::iter::from_fn(|| n.poll_transmit())
            .map(|t: Transmit| (t.to.0, Message::decode(t.frame, &limits).expect("decodes")))
            .collect()
    };
    let t = us(10);
    for p in [0, 3, 5] {
        n.handle_link_up(t, Rank(p));
    }
    let _ = drain(&mut n);
    let fwd = Message::Xcast(XcastMsg::Forward(ForwardMsg {
        op: 1,
        round: 1,
        done: 0,
        global_done: 0,
        origin: Rank(0),
        seq: 1,
        tag: APP,
        payload: Bytes::from_static(b"x"),
    }))
    .encode();
    n.handle_frame(t, Rank(0), fwd);
    // Not drained: forwards to 3 and 5 are queued. Now 3's link goes, twice.
    n.handle_link_down(t, Rank(3), LinkCause::Refused);
    n.handle_link_down(t, Rank(3), LinkCause::Refused);
    let out = drain(&mut n);
    assert!(
        out.iter().all(|(to, _)| *to != 3),
        "nothing goes to 3: {out:?}"
    );
    let round7 = out
        .iter()
        .find_map(|(to, m)| match m {
            Message::Xcast(XcastMsg::Forward(f)) if *to == 7 && f.op == 1 => Some(f.round),
            _ => None,
        })
        .expect("replay to the adopted 7");
    let round5 = out
        .iter()
        .find_map(|(to, m)| match m {
            Message::Xcast(XcastMsg::Forward(f)) if *to == 5 && f.op == 1 => Some(f.round),
            _ => None,
        })
        .expect("forward to 5");
    let acks_up = |out: &[(u32, Message)]| {
        out.iter()
            .filter(|(to, m)| {
                *to == 0 && matches!(m, Message::Xcast(XcastMsg::Ack(a)) if a.op == 1)
            })
            .count()
    };
    let ack = |round| Message::Xcast(XcastMsg::Ack(AckMsg { op: 1, round })).encode();
    n.handle_frame(us(20), Rank(5), ack(round5));
    n.handle_link_down(us(20), Rank(3), LinkCause::Refused); // a late echo of the failed forward
    let out = drain(&mut n);
    assert_eq!(acks_up(&out), 0, "5 alone does not finish the op: {out:?}");
    n.handle_frame(us(30), Rank(7), ack(round7));
    let out = drain(&mut n);
    assert_eq!(acks_up(&out), 1, "7's ACK finishes it: {out:?}");
}

// ---------------------------------------------------------------------------------------------
// 9. Silent co-failure: discovered by a bounded dial.
// ---------------------------------------------------------------------------------------------

/// 3 and its only child 7 crash together at 60 µs, with an op in flight. Nobody but 3 held a
/// socket to 7, so no crash notice names 7. 1 notices 3 (1.06 ms), promotes 7 into slot 3 and
/// sends it an adoption notice and a replay: those dials fail after the bounded link-down delay,
/// which is how 7's death is discovered, by 1 alone. Everything then converges and goes quiet (no retry
/// loop).
#[test]
fn edge_09_silent_cofailure_discovered_by_bounded_dial() {
    let mut h = Harness::new("edge09", 9, 2);
    h.xcast(0, APP);
    h.run(us(60));
    h.crash(3);
    h.crash(7);
    h.quiet();
    // 7's death is discovered by 1 alone (its failed dials: the adoption notice and the
    // replay), after 1 learned of 3; no crash notice names 7.
    assert!(h.count(&["linkdown 1 x 7"]) >= 1);
    assert_eq!(h.count(&["linkdown", "x 7"]), h.count(&["linkdown 1 x 7"]));
    let found = h.expect_line(&["linkdown 1 x 7"]);
    h.expect_before(&["linkdown 1 x 3"], &["linkdown 1 x 7"]);
    // Bounded: crash + two link-down delays (the notice of 3, then the failed dial to 7).
    let t = h.time_us(found);
    assert!(t <= 60 + 2 * 1_000 + 100, "discovered at {t} µs");
    // The global notice names both.
    for r in h.sim.world().live_ranks() {
        let mut all = RankSet::new();
        for c in h.rec().confirmed.iter().filter(|c| c.0 == r.0) {
            all.extend(c.2.iter());
        }
        assert!(
            all.contains(Rank(3)) && all.contains(Rank(7)),
            "rank {r}: {all}"
        );
    }
    assert_eq!(h.rec().at(7).len(), 0);
    h.check(true);
}

// ---------------------------------------------------------------------------------------------
// Root failover.
// ---------------------------------------------------------------------------------------------

/// A one-way cut 0→2 keeps ops from the root's right half. Op 1 (from 0) and op 2 (from 7) reach
/// 1's subtree only; then 0 crashes (210 µs) and 2 (its highest child) becomes the root. 2 must
/// recover both ops from 1's subtree before numbering anything, re-drive them through its own
/// subtree, and number 8's op (relayed during the failover) after them. Every survivor
/// delivers everything once, in order; 7 and 8 hear of their completions once.
#[test]
fn root_crash_midstream_new_root_recovers_and_redrives() {
    let mut h = Harness::new("rootfail", 9, 2);
    h.sim.apply(Fault::CutOneWay(Rank(0), Rank(2)));
    h.xcast(0, APP);
    h.xcast(7, APP);
    h.run(us(210));
    h.expect_line(&["deliver  0->1 Forward op=2"]);
    assert!(h.rec().at(2).is_empty());
    h.crash(0);
    h.run(us(300));
    h.xcast(8, APP);
    h.quiet();
    assert_eq!(h.root(), 2);
    assert!(
        h.stats(2).xcast.recovered_ops >= 2,
        "2 recovered ops 1 and 2"
    );
    h.expect_before(&["deliver  2->1 Recover"], &["deliver  1->2 RecoveredOp"]);
    let seqs: Vec<(u32, u64)> = h.rec().at(6).iter().map(|d| (d.1, d.2)).collect();
    assert_eq!(seqs, [(0, 1), (7, 1), (8, 1)], "ops in order at 6");
    for (origin, seq) in [(7, 1), (8, 1)] {
        assert_eq!(h.rec().root_completions(origin, seq).len(), 1);
        assert_eq!(h.rec().root_completions(origin, seq)[0].0, 2);
    }
    h.check(false);
}

/// 0 and 2, the root and its successor, crash together with ops in flight; the next living rank
/// of the root's right spine (6) takes over after discovering 2's death too. Ops already
/// numbered and ops relayed during the failover all reach every survivor once, in order.
#[test]
fn root_and_its_successor_crash_together() {
    let mut h = Harness::new("rootpair", 9, 2);
    h.xcast(0, APP);
    h.xcast(7, APP);
    h.run(us(20));
    h.xcast(8, APP);
    h.run(us(40));
    h.xcast(5, APP);
    h.run(us(210));
    h.crash(0);
    h.crash(2);
    h.run(us(300));
    h.xcast(3, APP);
    h.quiet();
    assert_eq!(h.root(), 6);
    // Ops 1-4 were numbered by 0 and in flight when it died; 6 recovered them from survivors.
    h.expect_before(&["fault    Crash(Rank(0))"], &["XcastRootCompleted op=1 "]);
    assert!(h.stats(6).xcast.recovered_ops >= 1);
    // 6 held no socket to 0: it found the root dead when its hello to 0 failed to dial.
    h.expect_before(&["linkdown 6 x 2"], &["linkdown 6 x 0"]);
    let t = h.sim.world().now();
    h.xcast(1, APP);
    h.run(t + Duration::from_millis(1));
    h.quiet();
    for r in h.sim.world().live_ranks() {
        assert_eq!(h.rec().at(r.0).len(), 6, "rank {r}: {:?}", h.rec().at(r.0));
    }
    h.check(false);
}

/// A grow can move the root slot to a joiner (the rule fills a dead slot with its highest living
/// descendant, and joiners have the highest ranks). Radix 2, n = 5: 0 crashes (2 takes the root,
/// recovery round 1), then 2 (4 takes it, round 2); an op is in flight at 4 when the span grows
/// to 7 and 6, a child of dead 2, becomes the root above 4. The joiner has no broadcast history:
/// it learns the watermark and the latest round from its children, recovers the op in flight,
/// and numbers the next ops after it. (It used to wait for a parent's sync it could never get,
/// and its round 1 was ignored by children that had seen round 2: every broadcast stalled.)
#[test]
fn a_grow_that_moves_the_root_to_a_joiner_keeps_broadcasts_going() {
    let mut h = Harness::new("joinroot", 5, 2);
    h.crash(0);
    h.run(us(2_000));
    h.xcast(1, APP);
    h.quiet();
    assert_eq!(h.root(), 2);
    h.crash(2);
    h.run(us(h.time_now() + 2_000));
    h.xcast(3, APP);
    h.quiet();
    assert_eq!(h.root(), 4);
    // An op numbered by 4 and still on its way when the grow moves the root.
    h.xcast(1, APP);
    h.run(us(h.time_now() + 60));
    h.join(7);
    assert_eq!(h.root(), 6, "the grow put joiner 6 in the root slot");
    h.run(us(h.time_now() + 100));
    for o in [1, 3, 4, 5, 6] {
        h.xcast(o, APP);
    }
    h.quiet();
    assert!(
        h.stats(6).xcast.recovered_ops >= 1,
        "6 recovered the op in flight"
    );
    for r in [1, 3, 4] {
        assert_eq!(h.rec().at(r).len(), 8, "rank {r}: {:?}", h.rec().at(r));
    }
    // The joiners owe the five ops started after the grow (`check` counts them exactly once);
    // 6 adopted what 4 had completed.
    for r in [5, 6] {
        assert!(h.rec().at(r).len() >= 5, "joiner {r}: {:?}", h.rec().at(r));
    }
    assert!(h.stats(6).xcast.adopted_as_done >= 3);
    h.check(false);
}

/// A joiner that becomes the root by a failover long after it joined knows only the recovery
/// rounds run since: radix 2, n = 15, 0 then 2 crash (rounds 1 and 2; 6 is the root), 22 joins
/// under 14, then 6 and 14 crash together and 22 takes the root. Its first round (1) is below
/// what its children have seen: they say so, and it asks again above it.
#[test]
fn a_joiner_promoted_to_the_root_later_asks_above_the_rounds_it_missed() {
    let mut h = Harness::new("joinerfailover", 15, 2);
    h.crash(0);
    h.run(us(2_000));
    h.crash(2);
    h.run(us(4_000));
    h.xcast(1, APP);
    h.quiet();
    assert_eq!(h.root(), 6);
    h.join(23);
    let t = h.time_now();
    h.run(us(t + 1_000));
    h.xcast(22, APP);
    h.quiet();
    h.crash(6);
    h.crash(14);
    h.run(us(h.time_now() + 2_000));
    h.xcast(1, APP);
    h.xcast(22, APP);
    h.quiet();
    assert_eq!(h.root(), 22);
    for r in h.sim.world().live_ranks().filter(|r| r.0 < 15) {
        assert_eq!(h.rec().at(r.0).len(), 4, "rank {r}: {:?}", h.rec().at(r.0));
    }
    h.check(false);
}

// ---------------------------------------------------------------------------------------------
// Sweeps and known problems.
// ---------------------------------------------------------------------------------------------

/// The named cases at every crash time: five back-to-back ops from 0, 7, 8, 5 and 3, then a
/// crash set (a leaf, an interior rank, a parent with its child, the root, the root with its
/// successor, two siblings, ...) at each 10 µs step from 0 to 690 µs, so each crash lands before,
/// between and after every forward and ACK of the stream; one more op after the repair. Every
/// run must satisfy the common invariants.
#[test]
fn crash_time_sweep_keeps_every_invariant() {
    let victims: [&[u32]; 15] = [
        &[1],
        &[2],
        &[3],
        &[4],
        &[5],
        &[0],
        &[1, 3],
        &[3, 7],
        &[0, 2],
        &[0, 1],
        &[2, 6],
        &[1, 5],
        &[4, 8],
        &[0, 2, 6],
        &[1, 2],
    ];
    for v in victims {
        for t in (0..700).step_by(10) {
            let mut h = Harness::new("sweep", 9, 2);
            for (i, o) in [0, 7, 8, 5, 3].into_iter().enumerate() {
                h.run(us(15 * i as u64));
                h.xcast(o, APP);
            }
            h.run(us(t));
            for &x in v {
                h.crash(x);
            }
            h.run(us(t + 1_500));
            let last = h.sim.world().live_ranks().last().expect("a survivor").0;
            h.xcast(last, APP);
            h.quiet();
            h.trace.borrow_mut().clear(); // keep failure output to the failing run
            h.check(!v.contains(&0));
        }
    }
}

/// A rank paused across a join learns of the grow when it thaws (before its backlog); had it
/// kept the old span it would drop forwards from new origins (`dropped_bad_origin`, no ACK) and
/// wedge every later op (a bug this test caught in the simulator's `join`).
#[test]
fn join_while_a_rank_is_paused_still_completes() {
    let mut h = Harness::new("joinpause", 9, 2);
    h.sim.apply(Fault::Pause(Rank(3)));
    h.run(us(10));
    h.join(11);
    h.run(us(1_000));
    h.sim.apply(Fault::Resume(Rank(3)));
    h.run(us(2_000));
    h.xcast(10, APP);
    h.run(us(1_000_000));
    let n3 = h.sim.world().node(Rank(3)).expect("live");
    let (span, dropped) = (n3.tree().layout().span(), n3.stats().dropped_bad_origin);
    h.check(true);
    assert_eq!((span, dropped), (11, 0), "3 learned of the grow");
}
