//! Criterion benchmarks of RELM's per-message cost at one [`Node`], through the public driving
//! contract (feed one input, drain `poll_transmit` and `poll_event` to empty, fire the timer
//! when `poll_timeout` is due). Each iteration is one 64-byte message; the reported time is ns
//! per message.
//!
//! The tree is 7 ranks, radix 2 (three levels: `0 → {1, 2}`, `1 → {3, 5}`, `2 → {4, 6}`), and
//! the chain is 3 → 4, whose path is `3 → 1 → 0 → 2 → 4`:
//!
//! - `relm/relay`: rank 1 gets pre-encoded `RelmData` frames from 3 with consecutive uids and
//!   forwards each to 0, keeping a cached copy; every [`ACK_EVERY`] messages a cumulative
//!   `RelmAck` comes back from 0, releasing the copies and travelling on toward 3 (coalesced
//!   until the flush timer). Virtual time advances 1 us per message, so the flush, sweep and
//!   every other timer fire as they would under a steady 1 M messages/s stream.
//! - `relm/destination`: rank 4 gets the frames from 2 (its parent), delivers each (one
//!   `RelmDelivered` event) and acknowledges cumulatively.
//! - `relm/origin`: rank 3 sends with [`Node::relm_send`] (its window kept open by the same
//!   periodic cumulative ACK from 1).
//!
//! Frames and ACKs are encoded outside the timed loop, in chunks; uids keep increasing across
//! samples, so every frame is new to the node. Measurement times are short so the whole file
//! runs in well under 30 s.

use lifeline_core::wire::RelmMsg;
use std::hint::black_box;
use std::time::{Duration as WallDuration, Instant as WallClock};

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use lifeline_core::relm::Uid;
use lifeline_core::tree::{Rank, Route};
use lifeline_core::wire::{ChainMark, Message, RelmAckMsg, RelmDataMsg};
use lifeline_core::{Config, Duration, Instant, Node};

const SPAN: u32 = 7;
const RADIX: u32 = 2;
const SRC: Rank = Rank(3);
const RELAY: Rank = Rank(1);
const DST: Rank = Rank(4);
const PAYLOAD_LEN: usize = 64;
const TAG: u16 = 16;
/// A cumulative ACK comes back every this many messages.
const ACK_EVERY: u32 = 64;
/// Messages encoded ahead of one timed stretch.
const CHUNK: u64 = 4096;
/// Virtual time per message.
const STEP: Duration = Duration::from_micros(1);

fn node(me: Rank) -> Node {
    Node::new(Config::new(SPAN, RADIX), me, u64::from(me.0), Instant::ZERO)
        .expect("a valid configuration")
}

fn next_hop(n: &Node, to: Rank) -> Rank {
    match n.tree().route(to) {
        Route::Next(r) => r,
        other => panic!("{} has no next hop to {to}: {other:?}", n.me()),
    }
}

/// One input of a pre-encoded stream.
enum Input {
    /// A frame from this peer.
    Frame(Rank, Bytes),
    /// `relm_send` of the payload to this destination.
    Send(Rank),
}

/// A node under test, its position in the chain, and the driver's clock.
struct Rig {
    node: Node,
    now: Instant,
    /// The uid the next message gets.
    next_uid: Uid,
    payload: Bytes,
    /// Messages fed so far.
    fed: u64,
    transmits: u64,
    events: u64,
}

impl Rig {
    fn new(me: Rank) -> Self {
        let mut rig = Self {
            node: node(me),
            now: Instant::ZERO,
            next_uid: Uid::new(Config::new(SPAN, RADIX).relm.first_uid).expect("a valid uid"),
            payload: Bytes::from(vec![0xA5; PAYLOAD_LEN]),
            fed: 0,
            transmits: 0,
            events: 0,
        };
        rig.drain();
        rig
    }

    /// Drains every output, then fires the timer if it is due (and drains again).
    #[inline]
    fn drain(&mut self) {
        loop {
            while let Some(t) = self.node.poll_transmit() {
                black_box(&t);
                self.transmits += 1;
            }
            while let Some(e) = self.node.poll_event() {
                black_box(&e);
                self.events += 1;
            }
            match self.node.poll_timeout() {
                Some((at, _)) if at <= self.now => self.node.handle_timeout(self.now),
                _ => return,
            }
        }
    }

    /// The data frame of the chain's next uid (`src` to `dst`), and the uid.
    fn data(&mut self, src: Rank, dst: Rank) -> (Uid, Bytes) {
        let uid = self.next_uid;
        self.next_uid = uid.next();
        let m = Message::Relm(RelmMsg::Data(RelmDataMsg {
            src,
            dst,
            uid,
            tag: TAG,
            payload: self.payload.clone(),
        }));
        (uid, m.encode())
    }

    /// Feeds one stretch, timed.
    fn feed(&mut self, inputs: Vec<Input>) -> WallDuration {
        let t = WallClock::now();
        for input in inputs {
            self.now += STEP;
            match input {
                Input::Frame(from, f) => self.node.handle_frame(self.now, from, f),
                Input::Send(dst) => {
                    let uid = self
                        .node
                        .relm_send(self.now, dst, TAG, self.payload.clone())
                        .expect("the window stays open");
                    black_box(uid);
                }
            }
            self.drain();
        }
        t.elapsed()
    }
}

fn ack(src: Rank, dst: Rank, uid: Uid) -> Bytes {
    Message::Relm(RelmMsg::Ack(RelmAckMsg {
        acks: vec![ChainMark { src, dst, uid }],
        probes: Vec::new(),
    }))
    .encode()
}

/// Runs `iters` messages through `rig`, encoding each chunk with `chunk` before timing it.
fn run(rig: &mut Rig, iters: u64, chunk: &dyn Fn(&mut Rig, u64) -> Vec<Input>) -> WallDuration {
    let mut total = WallDuration::ZERO;
    let mut left = iters;
    while left > 0 {
        let n = left.min(CHUNK);
        let inputs = chunk(rig, n);
        total += rig.feed(inputs);
        rig.fed += n;
        left -= n;
    }
    total
}

/// The chain's routes: 3 → 1 → 0 → 2 → 4, so rank 1 relays.
fn check_routes() -> (Rank, Rank, Rank) {
    let (src, relay, dst) = (node(SRC), node(RELAY), node(DST));
    assert_eq!(
        next_hop(&src, DST),
        RELAY,
        "the source sends through the relay"
    );
    let downstream = next_hop(&relay, DST);
    assert_ne!(downstream, SRC, "the relay forwards away from the source");
    assert_ne!(
        downstream, DST,
        "the relay is not the destination's neighbour"
    );
    assert_eq!(next_hop(&relay, SRC), SRC, "ACKs go back to the source");
    let upstream = next_hop(&dst, SRC);
    assert_ne!(upstream, RELAY);
    // The whole path, hop by hop.
    let mut path = vec![SRC];
    let mut at = SRC;
    while at != DST {
        at = next_hop(&node(at), DST);
        path.push(at);
    }
    assert_eq!(path, [SRC, RELAY, downstream, upstream, DST]);
    (downstream, upstream, next_hop(&src, DST))
}

fn relm(c: &mut Criterion) {
    let (downstream, upstream, first_hop) = check_routes();
    let mut g = c.benchmark_group("relm");
    g.throughput(Throughput::Elements(1));

    // (a) The relay: forward, cache, release on the cumulative ACK, pass the ACK on.
    let mut relay = Rig::new(RELAY);
    let relay_chunk = move |rig: &mut Rig, n: u64| {
        let mut v = Vec::with_capacity(n as usize + n as usize / ACK_EVERY as usize + 1);
        for _ in 0..n {
            let (uid, f) = rig.data(SRC, DST);
            v.push(Input::Frame(SRC, f));
            if uid.get() % ACK_EVERY == ACK_EVERY - 1 {
                v.push(Input::Frame(downstream, ack(SRC, DST, uid)));
            }
        }
        v
    };
    // Setup check: the relay really relays (one RelmData to the next hop per message) and the
    // ACKs keep its cache bounded.
    let before = relay.node.stats().clone();
    run(&mut relay, 1000, &relay_chunk);
    let s = relay.node.stats();
    assert_eq!(s.relm.forwarded - before.relm.forwarded, 1000, "{s:?}");
    assert_eq!(s.relm.delivered, 0);
    assert!(
        relay.node.relm_held() <= 2 * ACK_EVERY as usize + 4,
        "{s:?}"
    );
    g.bench_function("relay", |b| {
        b.iter_custom(|iters| run(&mut relay, iters, &relay_chunk))
    });
    assert!(
        relay.node.relm_held() <= 2 * ACK_EVERY as usize + 4,
        "the relay's cache grew: {}",
        relay.node.relm_held()
    );
    assert_eq!(relay.node.stats().dropped_outbox_full, 0);

    // (b) The destination: deliver in order, acknowledge cumulatively.
    let mut dest = Rig::new(DST);
    let dest_chunk = move |rig: &mut Rig, n: u64| {
        (0..n)
            .map(|_| Input::Frame(upstream, rig.data(SRC, DST).1))
            .collect()
    };
    run(&mut dest, 1000, &dest_chunk);
    assert_eq!(dest.node.stats().relm.delivered, 1000);
    assert_eq!(dest.events, 1000, "one RelmDelivered per message");
    g.bench_function("destination", |b| {
        b.iter_custom(|iters| run(&mut dest, iters, &dest_chunk))
    });
    assert_eq!(dest.node.stats().relm.delivered, dest.fed);
    // Nothing buffered out of order: at most the one coalesced ACK awaiting the flush timer.
    assert!(dest.node.relm_held() <= 1, "{}", dest.node.relm_held());

    // (c) The origin: relm_send, kept open by the periodic cumulative ACK from the first hop.
    let mut origin = Rig::new(SRC);
    let origin_chunk = move |rig: &mut Rig, n: u64| {
        let mut v = Vec::with_capacity(n as usize + n as usize / ACK_EVERY as usize + 1);
        for _ in 0..n {
            let uid = rig.next_uid;
            rig.next_uid = uid.next();
            v.push(Input::Send(DST));
            if uid.get() % ACK_EVERY == ACK_EVERY - 1 {
                v.push(Input::Frame(first_hop, ack(SRC, DST, uid)));
            }
        }
        v
    };
    run(&mut origin, 1000, &origin_chunk);
    assert_eq!(origin.node.stats().relm.sent, 1000);
    let acked = std::iter::from_fn(|| origin.node.poll_event()).count();
    assert_eq!(acked, 0, "drained");
    g.bench_function("origin", |b| {
        b.iter_custom(|iters| run(&mut origin, iters, &origin_chunk))
    });
    assert!(origin.node.relm_unacked_bytes() <= (ACK_EVERY as usize + 1) * PAYLOAD_LEN);
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(20)
        .warm_up_time(WallDuration::from_millis(500))
        .measurement_time(WallDuration::from_secs(3));
    targets = relm
}
criterion_main!(benches);
