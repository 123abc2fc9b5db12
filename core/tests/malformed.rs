//! Malformed-input sweep through the public API (in the style of str0m's
//! `tests/malformed-packet-injection.rs`).
//!
//! Every frame here goes through both [`Message::decode`] and [`Node::handle_frame`] on a real
//! node, and every prefix of it through [`wire::frame_len`], each under `catch_unwind`. The
//! acceptance is the crate contract's rule 5: bad input gets a typed error or a counted drop,
//! never a panic, and nothing changes before a frame has decoded completely.
//!
//! The sweep is generic over [`samples`]: a new message variant is one more line there (the
//! `samples_cover_every_kind` test fails until it is added).

use std::collections::BTreeSet;
use std::panic::{catch_unwind, AssertUnwindSafe};

use bytes::Bytes;
use lifeline_core::tree::{Rank, RankSet};
use lifeline_core::wire::{
    self, DecodeError, FloodMsg, Kind, Limits, Message, HEADER_LEN, VERSION,
};
use lifeline_core::{Config, Duration, Event, Instant, Node, Stats};

// ---------------------------------------------------------------------------------------------
// Sample messages
// ---------------------------------------------------------------------------------------------

/// A valid message and the frame offsets of its nested `u32` length fields (envelope excluded).
struct Sample {
    name: &'static str,
    msg: Message,
    len_fields: Vec<usize>,
}

fn flood(name: &'static str, origin: u32, id: u64, hops: u16, payload: &[u8]) -> Sample {
    let msg = Message::Flood(FloodMsg {
        origin: Rank(origin),
        id,
        hops,
        payload: Bytes::copy_from_slice(payload),
    });
    // origin:u32 id:u64 hops:u16, then the payload's u32 length.
    let len_fields = vec![HEADER_LEN + 4 + 8 + 2];
    Sample {
        name,
        msg,
        len_fields,
    }
}

/// One valid frame (or more) per message variant. Adding a variant: add a line here.
fn samples() -> Vec<Sample> {
    vec![
        flood("flood/empty", 3, 9, 2, b""),
        flood("flood/1-byte", 0, 1, 0, b"x"),
        flood("flood/max-fields", 63, u64::MAX, u16::MAX, &[0xA5; 48]),
    ]
}

#[test]
fn samples_cover_every_kind() {
    let samples = samples();
    for b in 0..=u8::MAX {
        if let Some(kind) = Kind::from_u8(b) {
            assert!(
                samples.iter().any(|s| s.msg.kind() == kind),
                "kind byte {b} ({kind:?}) has no sample message: add one to samples()"
            );
        }
    }
    for s in &samples {
        let f = s.msg.encode();
        assert_eq!(f.len(), s.msg.frame_len(), "{}", s.name);
        assert_eq!(Kind::from_u8(f[1]), Some(s.msg.kind()), "{}", s.name);
        for &o in &s.len_fields {
            // A nested length can at most cover the rest of the frame.
            let v = read_u32(&f, o) as usize;
            assert!(
                o + 4 + v <= f.len(),
                "{}: length field at {o} is {v}",
                s.name
            );
        }
    }
    // The flood samples' length field really is the payload's.
    let s = samples
        .iter()
        .find(|s| s.name == "flood/max-fields")
        .unwrap();
    assert_eq!(read_u32(&s.msg.encode(), s.len_fields[0]), 48);
}

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

/// splitmix64: a tiny seeded generator, so the sweep is the same on every run.
struct Prng(u64);

impl Prng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

fn read_u32(f: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([f[at], f[at + 1], f[at + 2], f[at + 3]])
}

fn with_u32(f: &[u8], at: usize, v: u32) -> Vec<u8> {
    let mut g = f.to_vec();
    g[at..at + 4].copy_from_slice(&v.to_be_bytes());
    g
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// "Negative-looking" and off-by-one values for a length field whose true value is `len`.
fn length_values(len: u32) -> [u32; 7] {
    [
        0,
        1,
        len.wrapping_sub(1),
        len.wrapping_add(1),
        0x7FFF_FFFF,
        0x8000_0000,
        0xFFFF_FFFF,
    ]
}

/// What `decode` must say about a frame.
#[derive(Debug)]
enum Expect {
    /// Decodes (and re-encodes to the same bytes).
    Valid,
    /// Refused with exactly this error.
    Error(DecodeError),
    /// Refused, any error.
    AnyError,
    /// Either; a success must still re-encode to the same bytes.
    Either,
}

/// The envelope verdict for a frame whose header is intact but whose length says `said` over a
/// body of `have` bytes.
fn envelope_expect(said: u32, have: usize, limits: &Limits) -> Expect {
    let total = HEADER_LEN as u64 + u64::from(said);
    if total > u64::from(limits.max_frame) {
        Expect::Error(DecodeError::TooLong {
            len: total,
            max: u64::from(limits.max_frame),
        })
    } else if said as usize != have {
        Expect::Error(DecodeError::LengthMismatch { said, have })
    } else {
        Expect::Valid
    }
}

/// An independent statement of `frame_len`'s contract, to compare against on every prefix.
fn frame_len_reference(p: &[u8], limits: &Limits) -> Result<Option<usize>, DecodeError> {
    if p.len() < HEADER_LEN {
        return Ok(None);
    }
    if p[0] != VERSION {
        return Err(DecodeError::Version(p[0]));
    }
    if Kind::from_u8(p[1]).is_none() {
        return Err(DecodeError::UnknownKind(p[1]));
    }
    let total = HEADER_LEN as u64 + u64::from(read_u32(p, 2));
    if total > u64::from(limits.max_frame) {
        return Err(DecodeError::TooLong {
            len: total,
            max: u64::from(limits.max_frame),
        });
    }
    Ok(Some(total as usize))
}

/// The input-side counters, in a fixed order: exactly one moves per `handle_frame`.
const INPUT_COUNTERS: [&str; 6] = [
    "frames_in",
    "dropped_unknown_kind",
    "dropped_decode_error",
    "dropped_over_limit",
    "dropped_unknown_peer",
    "dropped_stale_sender",
];

fn input_counters(s: &Stats) -> [u64; 6] {
    [
        s.frames_in,
        s.dropped_unknown_kind,
        s.dropped_decode_error,
        s.dropped_over_limit,
        s.dropped_unknown_peer,
        s.dropped_stale_sender,
    ]
}

/// Which input counter a decode verdict must move (for a sender that is a live, in-span rank).
fn counter_for(r: &Result<Message, DecodeError>) -> usize {
    match r {
        Ok(_) => 0,
        Err(DecodeError::UnknownKind(_)) => 1,
        Err(DecodeError::TooLong { .. }) => 3,
        Err(_) => 2,
    }
}

// ---------------------------------------------------------------------------------------------
// The harness: one real node, fed one frame at a time, drained after every input
// ---------------------------------------------------------------------------------------------

const ME: Rank = Rank(5);
/// Rank 5 in a span-64 radix-4 tree: parent 1, children 21, 37, 53.
const NEIGHBOURS: [Rank; 4] = [Rank(1), Rank(21), Rank(37), Rank(53)];
/// Senders the sweep cycles through: parent, child, lateral peers, and (oddly) itself.
const SENDERS: [Rank; 5] = [Rank(1), Rank(21), Rank(2), Rank(63), ME];

fn sweep_node() -> Node {
    Node::new(Config::new(64, 4), ME, 1, Instant::ZERO).unwrap()
}

struct Sweep {
    node: Node,
    limits: Limits,
    now: Instant,
    fed: u64,
    /// How many frames each input counter should have seen, from `decode`'s verdicts.
    predicted: [u64; 6],
    delivered: u64,
    forwarded: u64,
}

impl Sweep {
    fn new() -> Self {
        let node = sweep_node();
        let limits = node.config().limits();
        let view = node.tree().view().unwrap();
        let mut n: Vec<Rank> = view
            .parent()
            .into_iter()
            .chain(view.live_children())
            .collect();
        n.sort();
        assert_eq!(n, NEIGHBOURS, "test assumes rank 5's neighbours");
        Self {
            node,
            limits,
            now: Instant::ZERO,
            fed: 0,
            predicted: [0; 6],
            delivered: 0,
            forwarded: 0,
        }
    }

    /// Feeds one frame through `frame_len` (every prefix), `decode`, and the node.
    fn feed(&mut self, label: &str, frame: &[u8], expect: Expect) {
        let ctx = || format!("{label}: frame {} ({} bytes)", hex(frame), frame.len());
        self.now += Duration::from_millis(1);
        let from = SENDERS[(self.fed % SENDERS.len() as u64) as usize];

        // 1. frame_len on every prefix: no panic, and exactly the header-only verdict.
        for i in 0..=frame.len() {
            let p = &frame[..i];
            let got = catch_unwind(|| wire::frame_len(p, &self.limits))
                .unwrap_or_else(|_| panic!("frame_len panicked on prefix {i} of {}", ctx()));
            assert_eq!(
                got,
                frame_len_reference(p, &self.limits),
                "frame_len on prefix {i} of {}",
                ctx()
            );
        }

        // 2. decode: no panic, the expected verdict, and a success re-encodes to the same bytes.
        let bytes = Bytes::copy_from_slice(frame);
        let decoded = catch_unwind(|| Message::decode(bytes.clone(), &self.limits))
            .unwrap_or_else(|_| panic!("Message::decode panicked on {}", ctx()));
        match (&expect, &decoded) {
            (Expect::Valid | Expect::Either, Ok(_))
            | (Expect::AnyError | Expect::Either, Err(_)) => {}
            (Expect::Error(want), Err(got)) if want == got => {}
            _ => panic!("{}: expected {expect:?}, decode gave {decoded:?}", ctx()),
        }
        if let Ok(m) = &decoded {
            assert_eq!(m.encode(), bytes, "re-encoding {}", ctx());
            assert_eq!(m.frame_len(), frame.len(), "{}", ctx());
            assert_eq!(
                wire::frame_len(frame, &self.limits),
                Ok(Some(frame.len())),
                "{}",
                ctx()
            );
        }

        // 3. The node: no panic, exactly one input counter moves, the one decode predicts.
        let before = self.node.stats().clone();
        let pending = self.node.pending_state();
        let timeout = self.node.poll_timeout();
        let now = self.now;
        let node = &mut self.node;
        catch_unwind(AssertUnwindSafe(|| node.handle_frame(now, from, bytes)))
            .unwrap_or_else(|_| panic!("Node::handle_frame panicked on {}", ctx()));
        self.fed += 1;
        let which = counter_for(&decoded);
        self.predicted[which] += 1;
        let (b, a) = (input_counters(&before), input_counters(self.node.stats()));
        for i in 0..INPUT_COUNTERS.len() {
            let moved = a[i] - b[i];
            let want = u64::from(i == which);
            assert_eq!(
                moved,
                want,
                "{} moved by {moved} for {}",
                INPUT_COUNTERS[i],
                ctx()
            );
        }

        // 4. Outputs: a refused frame changes nothing; an accepted flood is delivered once (or
        //    counted as a duplicate) and forwarded to every tree neighbour but the sender.
        let transmits: Vec<_> = std::iter::from_fn(|| self.node.poll_transmit()).collect();
        let events: Vec<_> = std::iter::from_fn(|| self.node.poll_event()).collect();
        match decoded {
            Err(_) => {
                assert!(transmits.is_empty() && events.is_empty(), "{}", ctx());
                assert_eq!(self.node.pending_state(), pending, "{}", ctx());
                assert_eq!(self.node.poll_timeout(), timeout, "{}", ctx());
                // Past the drop counters checked above, no counter moves.
                let got = self.node.stats();
                let mut want = before.clone();
                want.dropped_unknown_kind = got.dropped_unknown_kind;
                want.dropped_decode_error = got.dropped_decode_error;
                want.dropped_over_limit = got.dropped_over_limit;
                assert_eq!(got, &want, "only a drop counter may move: {}", ctx());
            }
            Ok(Message::Flood(m)) => {
                let dup = self.node.stats().flood_duplicates - before.flood_duplicates;
                if dup == 1 {
                    assert!(transmits.is_empty() && events.is_empty(), "{}", ctx());
                } else {
                    assert_eq!(dup, 0, "{}", ctx());
                    assert_eq!(
                        events,
                        vec![Event::FloodDelivered {
                            origin: m.origin,
                            id: m.id,
                            hops: m.hops,
                            payload: m.payload.clone(),
                        }],
                        "{}",
                        ctx()
                    );
                    self.delivered += 1;
                    let to: BTreeSet<Rank> = transmits.iter().map(|t| t.to).collect();
                    let want: BTreeSet<Rank> =
                        NEIGHBOURS.iter().copied().filter(|&n| n != from).collect();
                    assert_eq!(to, want, "forwarded to {}", ctx());
                    assert_eq!(transmits.len(), want.len(), "{}", ctx());
                    let fwd = Message::Flood(FloodMsg {
                        hops: m.hops.saturating_add(1),
                        ..m
                    })
                    .encode();
                    for t in &transmits {
                        assert_eq!(t.frame, fwd, "forwarded frame for {}", ctx());
                    }
                    self.forwarded += transmits.len() as u64;
                }
            }
            Ok(other) => panic!("no sweep expectations for {other:?}: extend Sweep::feed"),
        }

        // 5. Timers, as a driver would: fire what is due.
        if let Some((at, _)) = self.node.poll_timeout() {
            if at <= self.now {
                self.node.handle_timeout(self.now);
                assert!(self.node.poll_timeout().is_none_or(|(at, _)| at > self.now));
                assert!(!self.node.has_output());
            }
        }
    }

    /// Every frame fed is accounted for by exactly one counter, and the counts are the ones
    /// `decode`'s verdicts predicted.
    fn check_accounting(&self) {
        let s = self.node.stats();
        let c = input_counters(s);
        assert_eq!(c.iter().sum::<u64>(), self.fed, "counters {s:?}");
        assert_eq!(c, self.predicted, "counters {s:?}");
        assert_eq!(s.frames_in, self.delivered + s.flood_duplicates, "{s:?}");
        assert_eq!(s.frames_out, self.forwarded, "{s:?}");
        assert_eq!(s.dropped_outbox_full + s.dropped_events_full, 0, "{s:?}");
        assert_eq!(
            s.suppressed_to_dead + s.stale_timers + s.spurious_timeouts,
            0
        );
    }

    /// The node is still sound: a flood started here goes to exactly its tree neighbours, and
    /// all remembered state drains after the linger time.
    fn check_still_floods(&mut self) {
        assert!(!self.node.has_output());
        let payload = Bytes::from_static(b"after the sweep");
        let id = self.node.flood(self.now, payload.clone()).unwrap();
        assert_eq!(id, 1, "first local flood");
        let transmits: Vec<_> = std::iter::from_fn(|| self.node.poll_transmit()).collect();
        let to: Vec<Rank> = transmits.iter().map(|t| t.to).collect();
        assert_eq!(to, NEIGHBOURS, "transmits of a local flood");
        let want = Message::Flood(FloodMsg {
            origin: ME,
            id,
            hops: 1,
            payload: payload.clone(),
        })
        .encode();
        assert!(transmits.iter().all(|t| t.frame == want));
        let events: Vec<_> = std::iter::from_fn(|| self.node.poll_event()).collect();
        assert_eq!(
            events,
            vec![Event::FloodDelivered {
                origin: ME,
                id,
                hops: 0,
                payload
            }]
        );
        // Everything remembered is forgotten after the linger time.
        let later = self.now + self.node.config().flood_linger;
        assert!(self.node.pending_state() > 0);
        assert!(self.node.poll_timeout().is_some_and(|(at, _)| at <= later));
        self.node.handle_timeout(later);
        assert_eq!(self.node.pending_state(), 0);
        assert_eq!(self.node.poll_timeout(), None);
    }
}

// ---------------------------------------------------------------------------------------------
// The sweeps
// ---------------------------------------------------------------------------------------------

/// Every structured mutation of one sample's frame, with what `decode` must say about it.
fn mutations(s: &Sample, limits: &Limits) -> Vec<(String, Vec<u8>, Expect)> {
    let f = s.msg.encode().to_vec();
    let body = f.len() - HEADER_LEN;
    let mut out = vec![(format!("{}: valid", s.name), f.clone(), Expect::Valid)];

    // Truncation at every offset, as sent and with the envelope length patched to match (which
    // gets the cut body past the envelope check into the message decoder).
    for i in 0..f.len() {
        let cut = f[..i].to_vec();
        let e = if i < HEADER_LEN {
            Expect::Error(DecodeError::Truncated {
                need: HEADER_LEN,
                have: i,
            })
        } else {
            Expect::Error(DecodeError::LengthMismatch {
                said: body as u32,
                have: i - HEADER_LEN,
            })
        };
        out.push((format!("{}: truncated at {i}", s.name), cut.clone(), e));
        if i >= HEADER_LEN {
            let patched = with_u32(&cut, 2, (i - HEADER_LEN) as u32);
            out.push((
                format!("{}: truncated at {i}, envelope patched", s.name),
                patched,
                Expect::AnyError,
            ));
        }
    }

    // Every bit of every byte, one at a time.
    for i in 0..f.len() {
        for bit in 0..8 {
            let mut g = f.clone();
            g[i] ^= 1 << bit;
            let e = match i {
                0 => Expect::Error(DecodeError::Version(g[0])),
                1 => match Kind::from_u8(g[1]) {
                    None => Expect::Error(DecodeError::UnknownKind(g[1])),
                    Some(_) => Expect::Either,
                },
                2..=5 => envelope_expect(read_u32(&g, 2), body, limits),
                _ if s.len_fields.iter().any(|&o| (o..o + 4).contains(&i)) => Expect::AnyError,
                _ => Expect::Either,
            };
            out.push((format!("{}: byte {i} bit {bit} flipped", s.name), g, e));
        }
    }

    // The envelope length and every nested length: zero, one, off by one, negative-looking.
    for v in length_values(body as u32) {
        let g = with_u32(&f, 2, v);
        let e = envelope_expect(v, body, limits);
        out.push((format!("{}: envelope length {v:#x}", s.name), g, e));
    }
    for &o in &s.len_fields {
        let len = read_u32(&f, o);
        for v in length_values(len) {
            let g = with_u32(&f, o, v);
            let e = if v == len {
                Expect::Valid
            } else {
                Expect::AnyError
            };
            out.push((format!("{}: length at {o} = {v:#x}", s.name), g, e));
        }
    }

    // Trailing bytes, as sent (envelope mismatch) and with the envelope covering them.
    for k in [1usize, 2, 3, 4, 7, 8, 17, 300] {
        let mut g = f.clone();
        g.extend((0..k).map(|j| j as u8));
        out.push((
            format!("{}: {k} trailing bytes", s.name),
            g.clone(),
            Expect::Error(DecodeError::LengthMismatch {
                said: body as u32,
                have: body + k,
            }),
        ));
        let patched = with_u32(&g, 2, (body + k) as u32);
        out.push((
            format!("{}: {k} trailing bytes, envelope patched", s.name),
            patched,
            Expect::Error(DecodeError::Trailing(k)),
        ));
    }
    out
}

#[test]
fn structured_mutations_of_every_message() {
    let mut sweep = Sweep::new();
    let mut total = 0;
    for s in samples() {
        for (label, frame, expect) in mutations(&s, &sweep.limits) {
            sweep.feed(&label, &frame, expect);
            total += 1;
        }
    }
    assert!(total > 1000, "{total} frames");
    sweep.check_accounting();
    let c = input_counters(sweep.node.stats());
    // Every kind of refusal was exercised, and some mutations (payload and field bit flips)
    // were valid messages that the node accepted.
    assert!(c.iter().take(4).all(|&n| n > 0), "{c:?}");
    sweep.check_still_floods();
}

/// A random frame from one of several families, and what `decode` must say about it.
fn random_frame(rng: &mut Prng, samples: &[Sample], limits: &Limits) -> (Vec<u8>, Expect) {
    let len = rng.below(300) as usize;
    let kind_byte = |rng: &mut Prng| {
        samples[rng.below(samples.len() as u64) as usize]
            .msg
            .encode()[1]
    };
    match rng.below(6) {
        // Pure garbage.
        0 => (rng.bytes(len), Expect::Either),
        // A valid header over a random body of the announced length.
        1 => {
            let body = rng.bytes(len.saturating_sub(HEADER_LEN));
            let mut f = vec![VERSION, kind_byte(rng)];
            f.extend((body.len() as u32).to_be_bytes());
            f.extend(body);
            (f, Expect::Either)
        }
        // A valid version and kind, then an arbitrary length and body.
        2 => {
            let mut f = vec![VERSION, kind_byte(rng)];
            f.extend(rng.bytes(len));
            (f, Expect::Either)
        }
        // A valid header announcing a huge or negative-looking length.
        3 => {
            let said = [
                0x7FFF_FFFF,
                0x8000_0000,
                0xFFFF_FFFF,
                limits.max_frame,
                rng.next() as u32,
            ][rng.below(5) as usize];
            let mut f = vec![VERSION, kind_byte(rng)];
            f.extend(said.to_be_bytes());
            f.extend(rng.bytes(len.min(32)));
            (f, Expect::Either)
        }
        // A valid sample frame with a few random bytes overwritten.
        4 => {
            let mut f = samples[rng.below(samples.len() as u64) as usize]
                .msg
                .encode()
                .to_vec();
            for _ in 0..=rng.below(4) {
                let i = rng.below(f.len() as u64) as usize;
                f[i] = rng.next() as u8;
            }
            (f, Expect::Either)
        }
        // A well-formed flood with random fields (including origins outside the span).
        _ => {
            let m = Message::Flood(FloodMsg {
                origin: Rank(if rng.below(2) == 0 {
                    rng.below(64) as u32
                } else {
                    rng.next() as u32
                }),
                id: rng.below(64),
                hops: rng.next() as u16,
                payload: rng.bytes(len.saturating_sub(24)).into(),
            });
            (m.encode().to_vec(), Expect::Valid)
        }
    }
}

#[test]
fn random_garbage_frames() {
    let samples = samples();
    let mut sweep = Sweep::new();
    let mut rng = Prng(0x5EED_0F11_FE11_F00D);
    for n in 0..20_000 {
        let (frame, expect) = random_frame(&mut rng, &samples, &sweep.limits);
        sweep.feed(&format!("random #{n}"), &frame, expect);
    }
    sweep.check_accounting();
    let s = sweep.node.stats();
    // The families reach every verdict, including duplicates of the small random id space.
    assert!(input_counters(s).iter().take(4).all(|&n| n > 100), "{s:?}");
    assert!(s.flood_duplicates > 100, "{s:?}");
    sweep.check_still_floods();
}

/// `frame_len` refuses an oversized frame from its 6-byte header alone, before a body exists.
#[test]
fn frame_len_refuses_oversized_from_the_header() {
    let limits = Limits::default();
    for s in samples() {
        let f = s.msg.encode();
        for said in [
            limits.max_frame - HEADER_LEN as u32 + 1,
            0x7FFF_FFFF,
            0x8000_0000,
            0xFFFF_FFFF,
        ] {
            let h = with_u32(&f[..HEADER_LEN], 2, said);
            assert_eq!(
                wire::frame_len(&h, &limits),
                Err(DecodeError::TooLong {
                    len: HEADER_LEN as u64 + u64::from(said),
                    max: u64::from(limits.max_frame),
                }),
                "{}: {said:#x}",
                s.name
            );
        }
        // The largest legal frame is announced, not refused.
        let h = with_u32(&f[..HEADER_LEN], 2, limits.max_frame - HEADER_LEN as u32);
        assert_eq!(
            wire::frame_len(&h, &limits),
            Ok(Some(limits.max_frame as usize))
        );
        // Fewer than six bytes: not yet known.
        for i in 0..HEADER_LEN {
            assert_eq!(wire::frame_len(&f[..i], &limits), Ok(None));
        }
    }
}

/// Frames from a rank outside the span or known dead are counted drops with no other effect,
/// even when they are valid: in particular, the flood id is not remembered.
#[test]
fn frames_from_unknown_and_dead_ranks() {
    let mut node = sweep_node();
    let mut now = Instant::from_nanos(1_000_000);
    let dead: RankSet = [Rank(9)].into_iter().collect();
    node.handle_dead(now, &dead).unwrap();
    // 9 is a lateral rank for 5: its death changes nothing here.
    assert_eq!(node.poll_event(), None);
    assert_eq!(node.poll_transmit(), None);

    let mut garbage = Prng(7);
    let mut frames: Vec<Bytes> = samples().iter().map(|s| s.msg.encode()).collect();
    frames.push(Bytes::new());
    frames.push(garbage.bytes(40).into());
    frames.push(Bytes::from_static(&[VERSION, 1, 0xFF, 0xFF, 0xFF, 0xFF]));
    frames.push(Bytes::from_static(&[VERSION, 0xEE, 0, 0, 0, 0]));

    let senders = [(Rank(64), 4usize), (Rank(u32::MAX), 4), (Rank(9), 5)];
    let mut fed = 0u64;
    for f in &frames {
        for &(from, counter) in &senders {
            now += Duration::from_millis(1);
            let before = node.stats().clone();
            let pending = node.pending_state();
            let f = f.clone();
            let r = catch_unwind(AssertUnwindSafe(|| node.handle_frame(now, from, f)));
            assert!(r.is_ok(), "panic on a frame from {from}");
            fed += 1;
            let mut want = before.clone();
            match counter {
                4 => want.dropped_unknown_peer += 1,
                _ => want.dropped_stale_sender += 1,
            }
            assert_eq!(node.stats(), &want, "frame from {from}");
            assert_eq!(node.pending_state(), pending);
            assert!(!node.has_output());
            assert_eq!(node.poll_timeout(), None);
            assert_eq!(node.now(), now);
        }
    }
    let s = node.stats();
    assert_eq!(s.dropped_unknown_peer, fed / 3 * 2);
    assert_eq!(s.dropped_stale_sender, fed / 3);
    assert_eq!(s.frames_in, 0);

    // The same valid frames from a live peer are still new to the node.
    for smp in samples() {
        node.handle_frame(now, Rank(1), smp.msg.encode());
        assert!(matches!(
            node.poll_event(),
            Some(Event::FloodDelivered { .. })
        ));
        assert_eq!(node.poll_event(), None);
        while node.poll_transmit().is_some() {}
    }
    assert_eq!(node.stats().frames_in, samples().len() as u64);
    assert_eq!(node.stats().flood_duplicates, 0);
}
