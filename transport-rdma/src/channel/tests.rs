//! Channel tests over the mock fabric.

use bytes::Bytes;
use lifeline_core::Instant;
use proptest::prelude::*;

use super::*;
use crate::mock::{Fault, MockFabric, MockVerbs};
use crate::verbs::Completion;

pub(super) struct Side {
    pub(super) verbs: MockVerbs,
    pub(super) ch: Channel,
    pub(super) got: Vec<Bytes>,
    pub(super) events: Vec<ChannelEvent>,
}

pub(super) struct Pair {
    pub(super) fabric: MockFabric,
    pub(super) a: Side,
    pub(super) b: Side,
}

fn open(fabric: &MockFabric, cfg: ChannelConfig, psn: u32) -> Side {
    let mut verbs = fabric.endpoint();
    let bufs = Buffers::register(&mut verbs, cfg).unwrap();
    let ch = Channel::open(&mut verbs, bufs, psn).unwrap();
    Side {
        verbs,
        ch,
        got: Vec::new(),
        events: Vec::new(),
    }
}

fn connect(a: &mut Side, b: &mut Side) {
    let (da, db) = (a.ch.local(&a.verbs), b.ch.local(&b.verbs));
    a.ch.connect(&mut a.verbs, &db).unwrap();
    b.ch.connect(&mut b.verbs, &da).unwrap();
}

impl Side {
    /// Completions in, frames and events out, then transmit. Returns whether anything moved.
    pub(super) fn pump(&mut self, now: Instant, take_frames: bool) -> bool {
        let mut buf = [Completion::EMPTY; 16];
        let mut moved = false;
        loop {
            let n = self.verbs.poll_cq(&mut buf).unwrap();
            if n == 0 {
                break;
            }
            moved = true;
            for c in &buf[..n] {
                self.ch.handle_completion(now, &mut self.verbs, c);
            }
        }
        if take_frames {
            while let Some(f) = self.ch.poll_frame(now, &mut self.verbs) {
                self.got.push(f);
                moved = true;
            }
        }
        while let Some(e) = self.ch.poll_event() {
            self.events.push(e);
        }
        let before = self.ch.stats().messages_sent;
        self.ch.poll_transmit(now, &mut self.verbs);
        moved | (self.ch.stats().messages_sent != before)
    }
}

impl Pair {
    pub(super) fn new(seed: u64, cfg: ChannelConfig) -> Self {
        Self::with(seed, cfg, cfg)
    }

    pub(super) fn with(seed: u64, ca: ChannelConfig, cb: ChannelConfig) -> Self {
        let fabric = MockFabric::new(seed);
        let mut a = open(&fabric, ca, 1);
        let mut b = open(&fabric, cb, 2);
        connect(&mut a, &mut b);
        Self { fabric, a, b }
    }

    /// Runs until nothing moves (bounded), checking at every step that no send can meet an
    /// empty receive queue.
    pub(super) fn drive(&mut self) {
        for _ in 0..100_000 {
            let now = Instant::ZERO;
            let mut moved = self.a.pump(now, true);
            moved |= self.b.pump(now, true);
            moved |= self.fabric.step();
            if !moved {
                return;
            }
        }
        panic!("did not settle");
    }

    /// Tears both sides down, drains them and opens a fresh connected pair on the same
    /// fabric and buffers.
    pub(super) fn reconnect(&mut self) {
        let now = Instant::ZERO;
        for s in [&mut self.a, &mut self.b] {
            s.ch.close(now, &mut s.verbs);
        }
        self.drive();
        let mut fresh = Vec::new();
        for (s, psn) in [(&mut self.a, 7), (&mut self.b, 8)] {
            let ch = std::mem::replace(&mut s.ch, placeholder(&self.fabric));
            let bufs = ch.into_buffers(&mut s.verbs).expect("drained after close");
            fresh.push(Channel::open(&mut s.verbs, bufs, psn).unwrap());
        }
        self.b.ch = fresh.pop().unwrap();
        self.a.ch = fresh.pop().unwrap();
        connect(&mut self.a, &mut self.b);
    }
}

fn placeholder(fabric: &MockFabric) -> Channel {
    let mut v = fabric.endpoint();
    let bufs = Buffers::register(&mut v, small()).unwrap();
    Channel::open(&mut v, bufs, 0).unwrap()
}

pub(super) fn small() -> ChannelConfig {
    ChannelConfig {
        buf_size: 64,
        recv_depth: 8,
        send_depth: 8,
        credit_reserve: 2,
        credit_threshold: 3,
        max_queued: 64,
        max_delivered: 64,
        max_frame: 4096,
        ..Default::default()
    }
}

fn frame(seq: u32, len: usize) -> Bytes {
    let mut v: Vec<u8> = (0..len)
        .map(|i| (i as u32).wrapping_mul(31).wrapping_add(seq) as u8)
        .collect();
    if len >= 4 {
        v[..4].copy_from_slice(&seq.to_be_bytes());
    }
    Bytes::from(v)
}

#[test]
fn frames_of_every_size_round_trip_in_order_both_ways() {
    let sizes = [
        1usize, 2, 59, 60, 61, 63, 64, 65, 120, 128, 200, 1000, 4096, 0,
    ];
    let mut p = Pair::new(1, small());
    let mut sent = Vec::new();
    for (i, &len) in sizes.iter().enumerate() {
        let f = frame(i as u32, len);
        p.a.ch.send(f.clone()).unwrap();
        p.b.ch.send(f.clone()).unwrap();
        sent.push(f);
        p.drive();
    }
    assert_eq!(p.b.got, sent);
    assert_eq!(p.a.got, sent);
    assert_eq!(p.fabric.stats().rnr_naks, 0);
    assert_eq!(p.fabric.stats().errors, 0);
    assert!(p.a.events.is_empty() && p.b.events.is_empty());
    assert_eq!(p.a.ch.stats().frames_acked, sizes.len() as u64);
}

#[test]
fn sender_stops_exactly_at_the_receivers_posted_count() {
    let cfg = small();
    let mut p = Pair::new(2, cfg);
    for i in 0..30 {
        p.a.ch.send(frame(i, 10)).unwrap();
    }
    p.a.ch.poll_transmit(Instant::ZERO, &mut p.a.verbs);
    // Data may use everything but the reserve; nothing more goes out before credit returns.
    assert_eq!(
        p.a.ch.stats().messages_sent,
        u64::from(cfg.recv_depth - cfg.credit_reserve)
    );
    assert_eq!(p.a.ch.credit(), cfg.credit_reserve);
    assert_eq!(p.fabric.posted_recvs(p.b.ch.qpn()), cfg.recv_depth as usize);
    p.a.ch.poll_transmit(Instant::ZERO, &mut p.a.verbs);
    assert_eq!(
        p.a.ch.stats().messages_sent,
        u64::from(cfg.recv_depth - cfg.credit_reserve)
    );
    // One-way traffic: credit comes back only through credit-only messages.
    p.drive();
    assert_eq!(p.b.got.len(), 30);
    assert!(p.b.ch.stats().credit_messages > 0);
    assert_eq!(p.fabric.stats().rnr_naks, 0);
}

#[test]
fn a_receiver_that_stops_taking_frames_stalls_the_sender_without_rnr() {
    let cfg = ChannelConfig {
        max_delivered: 2,
        ..small()
    };
    let mut p = Pair::new(3, cfg);
    for i in 0..20 {
        p.a.ch.send(frame(i, 10)).unwrap();
    }
    for _ in 0..1000 {
        p.a.pump(Instant::ZERO, true);
        p.b.pump(Instant::ZERO, false);
        p.fabric.step();
    }
    // b holds its slots: a ran out of credit instead of b's queue growing or an RNR.
    assert_eq!(p.fabric.stats().rnr_naks, 0);
    assert!(p.a.ch.queued() > 0, "a must be stalled");
    assert!(p.b.ch.stats().frames_received <= u64::from(cfg.recv_depth) + 2);
    p.drive();
    assert_eq!(p.b.got.len(), 20);
    assert_eq!(p.fabric.stats().rnr_naks, 0);
}

#[test]
fn a_full_send_queue_is_back_pressure_not_growth() {
    let cfg = ChannelConfig {
        max_queued: 4,
        send_depth: 2,
        ..small()
    };
    let mut p = Pair::new(4, cfg);
    for i in 0..4 {
        p.a.ch.send(frame(i, 100)).unwrap();
    }
    let f = frame(9, 100);
    assert_eq!(p.a.ch.send(f.clone()), Err(SendError::WouldBlock(f)));
    assert_eq!(p.a.ch.queued(), 4);
    assert_eq!(p.a.ch.stats().would_block, 1);
    p.a.ch.poll_transmit(Instant::ZERO, &mut p.a.verbs);
    // Two slots only: two messages in flight, the rest waits.
    assert_eq!(p.a.ch.stats().messages_sent, 2);
    p.drive();
    assert_eq!(p.b.got.len(), 4);
    p.a.ch.send(frame(5, 1)).unwrap();
    assert_eq!(
        p.a.ch.send(Bytes::from(vec![0; 5000])),
        Err(SendError::TooLarge(5000))
    );
}

#[test]
fn a_send_error_mid_stream_is_one_link_down_and_flushes_are_not_failures() {
    let mut p = Pair::new(5, small());
    p.fabric.inject(Fault::CompletionError {
        n: 5,
        status: WcStatus::RetryExceeded,
    });
    for i in 0..20 {
        p.a.ch.send(frame(i, 100)).unwrap();
    }
    p.drive();
    assert!(
        matches!(
            p.a.events.as_slice(),
            [ChannelEvent::LinkDown {
                cause: DownCause::Completion {
                    op: WcOp::Send,
                    status: WcStatus::RetryExceeded
                },
                ..
            }]
        ),
        "{:?}",
        p.a.events
    );
    assert!(p.a.ch.stats().flushes_after_down > 0);
    assert!(p.a.ch.is_drained());
    // The resend list: exactly the frames after the acknowledged prefix, in order.
    let acked = p.a.ch.stats().frames_acked;
    let rest: Vec<u64> =
        p.a.ch
            .take_unacknowledged()
            .iter()
            .map(|(id, _)| id.0)
            .collect();
    assert_eq!(rest, (acked..20).collect::<Vec<u64>>());
    assert!(acked > 0 && acked < 20, "the fault hit mid-stream: {acked}");
    assert_eq!(
        p.b.got.len() as u64,
        acked,
        "b got exactly the acknowledged frames"
    );
    assert!(matches!(p.a.ch.send(frame(0, 1)), Err(SendError::Down(_))));
}

#[test]
fn an_unexplained_flush_is_one_link_down() {
    let mut p = Pair::new(6, small());
    p.fabric.fail_qp(p.b.ch.qpn());
    p.drive();
    assert!(matches!(
        p.b.events.as_slice(),
        [ChannelEvent::LinkDown {
            cause: DownCause::Flushed,
            ..
        }]
    ));
    assert_eq!(
        p.b.ch.stats().flushes_after_down,
        u64::from(small().recv_depth) - 1
    );
}

#[test]
fn a_frame_longer_than_the_receivers_max_frame_is_malformed() {
    let cb = ChannelConfig {
        max_frame: 100,
        ..small()
    };
    let mut p = Pair::with(7, small(), cb);
    p.a.ch.send(frame(1, 500)).unwrap();
    p.drive();
    assert!(matches!(
        p.b.events.as_slice(),
        [ChannelEvent::LinkDown {
            cause: DownCause::Malformed(_),
            ..
        }]
    ));
    assert!(p.b.got.is_empty());
}

/// Simulates RELM above the channel: frames carry a sequence number; after a failure the
/// unacknowledged ones are resent on a new channel and the receiver drops duplicates.
fn run_with_fault(seed: u64, sizes: &[usize], fault: Option<u64>) -> (Vec<u32>, Pair) {
    let mut p = Pair::new(seed, small());
    if let Some(n) = fault {
        p.fabric.inject(Fault::CompletionError {
            n,
            status: WcStatus::RetryExceeded,
        });
    }
    let mut pending: VecDeque<Bytes> = sizes
        .iter()
        .enumerate()
        .map(|(i, &l)| frame(i as u32, l.max(4)))
        .collect();
    let mut delivered = Vec::new();
    let mut next_expected = 0u32;
    for _round in 0..4 {
        while let Some(f) = pending.pop_front() {
            match p.a.ch.send(f) {
                Ok(_) => {}
                Err(SendError::WouldBlock(f)) => {
                    pending.push_front(f);
                    p.drive();
                }
                Err(SendError::Down(f)) => {
                    pending.push_front(f);
                    break;
                }
                Err(e) => panic!("{e:?}"),
            }
        }
        p.drive();
        for f in p.b.got.drain(..) {
            let seq = u32::from_be_bytes([f[0], f[1], f[2], f[3]]);
            if seq == next_expected {
                delivered.push(seq);
                next_expected += 1;
            } else {
                assert!(
                    seq < next_expected,
                    "gap: got {seq}, expected {next_expected}"
                );
            }
        }
        if p.a.ch.is_up() && p.b.ch.is_up() {
            break;
        }
        // The composite link: a link-down on either side tears the pair down (a side with no
        // credit cannot notice a dead peer through the data plane; the control link does).
        p.a.ch.close(Instant::ZERO, &mut p.a.verbs);
        let mut resend: VecDeque<Bytes> =
            p.a.ch
                .take_unacknowledged()
                .into_iter()
                .map(|(_, f)| f)
                .collect();
        resend.extend(pending.drain(..));
        pending = resend;
        p.reconnect();
    }
    (delivered, p)
}

#[test]
fn after_a_qp_error_and_reconnect_no_frame_is_lost_or_duplicated() {
    let sizes: Vec<usize> = (0..40).map(|i| 4 + (i * 37) % 300).collect();
    let (delivered, p) = run_with_fault(9, &sizes, Some(12));
    assert_eq!(delivered, (0..40).collect::<Vec<u32>>());
    assert_eq!(p.fabric.stats().rnr_naks, 0);
    assert!(p.a.ch.is_up() && p.a.ch.qpn() != 0);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn random_sizes_and_faults_match_the_reference_model(
        seed in any::<u64>(),
        sizes in proptest::collection::vec(0usize..400, 1..40),
        fault in proptest::option::of(1u64..60),
    ) {
        let (delivered, p) = run_with_fault(seed, &sizes, fault);
        // Reference model: an ordered, exactly-once stream of every frame sent.
        prop_assert_eq!(delivered, (0..sizes.len() as u32).collect::<Vec<u32>>());
        prop_assert_eq!(p.fabric.stats().rnr_naks, 0);
    }
}

#[test]
fn two_way_traffic_with_both_sides_out_of_data_credit_completes() {
    let cfg = ChannelConfig {
        recv_depth: 4,
        credit_reserve: 2,
        credit_threshold: 2,
        ..small()
    };
    for seed in 0..20 {
        let mut p = Pair::new(seed, cfg);
        for i in 0..50 {
            p.a.ch.send(frame(i, 150)).unwrap();
            p.b.ch.send(frame(i, 150)).unwrap();
        }
        p.drive();
        assert_eq!((p.a.got.len(), p.b.got.len()), (50, 50), "seed {seed}");
        assert_eq!(p.fabric.stats().rnr_naks, 0);
    }
}

#[test]
fn misuse_and_bad_peer_details_are_errors() {
    let fabric = MockFabric::new(0);
    let mut s = open(&fabric, small(), 1);
    let f = Bytes::from_static(b"x");
    assert_eq!(s.ch.send(f.clone()), Err(SendError::NotConnected(f)));
    let mut peer = s.ch.local(&s.verbs);
    peer.recv_depth = 2; // not above our credit reserve
    assert!(matches!(
        s.ch.connect(&mut s.verbs, &peer),
        Err(SetupError::Peer(_))
    ));
    peer.recv_depth = 8;
    peer.qpn = 1 << 24;
    assert!(matches!(
        s.ch.connect(&mut s.verbs, &peer),
        Err(SetupError::Peer(_))
    ));
    let bad = ChannelConfig {
        buf_size: 1,
        ..small()
    };
    assert!(matches!(
        Buffers::register(&mut s.verbs, bad),
        Err(SetupError::Config(_))
    ));
    // Not down: the buffers cannot be taken back yet.
    let ch = std::mem::replace(&mut s.ch, placeholder(&fabric));
    assert!(ch.into_buffers(&mut s.verbs).is_err());
}
