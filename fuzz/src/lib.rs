//! Fuzz target bodies for Lifeline's core, shared by the libFuzzer entry points in
//! `fuzz_targets/` (built by `cargo fuzz` with `--features libfuzzer`) and by this crate's
//! replay tests, which run them over seeded inputs under plain `cargo test`.
//!
//! ```sh
//! cargo install cargo-fuzz --locked
//! cargo fuzz run --features libfuzzer --sanitizer none node -- -max_total_time=60
//! cargo +nightly fuzz run --features libfuzzer decode -- -max_total_time=60   # with ASan
//! ```
//!
//! Each body panics on a violated property; anything else is a pass.
//!
//! - [`decode`]: any bytes: decoding never panics, and what decodes re-encodes to exactly the
//!   same bytes (one encoding per message, so no two peers can disagree about a frame).
//! - [`node`]: one interior node of a 16-rank tree fed a structured stream of hostile inputs
//!   (frames with a correct envelope and arbitrary bodies from any rank in or out of the
//!   span, raw bytes, link changes, deaths, time, RELM sends and broadcasts), driven by the
//!   core's test harness (`lifeline_core::sim::testing::Net`): it never panics, never
//!   addresses a transmit to itself, a dead rank or a rank outside the span, and never emits a
//!   frame it would itself refuse or on the wrong class.
//! - [`tcp_handshake`]: the TCP transport's handshake steps fed arbitrary HELLO, CHALLENGE,
//!   PROOF and RESULT bytes never panic; garbage never authenticates (no PROOF or HELLO from
//!   bytes that do not hold the key passes); an honest exchange always does; a RESULT decodes to
//!   a verdict whose encoding decodes to the same verdict.
//! - [`qp_details`]: any bytes as the RDMA link's QP details record
//!   (`lifeline_transport_rdma::wire`): decoding never panics, and what decodes re-encodes to
//!   exactly the same bytes.
//! - [`relm_sim`]: the RELM simulator scenario with fuzzer-chosen shape, load, crash rate and
//!   seed: exactly once, in order, nothing lost, unreported or leaked.

use arbitrary::{Arbitrary, Unstructured};
use bytes::Bytes;
use lifeline_core::sim::scenario::relm::{check_report, run_relm, RelmParams};
use lifeline_core::sim::testing::Net;
use lifeline_core::sim::Hooks;
use lifeline_core::time::Duration;
use lifeline_core::tree::{Rank, RankSet};
use lifeline_core::wire::{frame_len, Kind, Limits, Message, HEADER_LEN, VERSION};
use lifeline_core::LinkCause;
use lifeline_core::{Config, Instant, Node};

/// Any bytes as one frame: no panic; a decoded frame re-encodes to the same bytes.
pub fn decode(data: &[u8]) {
    let limits = Limits {
        max_frame: 1 << 16,
        max_list: 64,
    };
    let header = frame_len(data, &limits);
    if let Ok(m) = Message::decode(Bytes::copy_from_slice(data), &limits) {
        assert_eq!(&m.encode()[..], data, "{m:?} has a second encoding");
        assert_eq!(m.frame_len(), data.len());
        assert_eq!(header, Ok(Some(data.len())));
    }
}

/// Any bytes as a QP details record: no panic; a decoded record re-encodes to the same bytes.
pub fn qp_details(data: &[u8]) {
    use lifeline_transport_rdma::wire;
    if let Ok(d) = wire::decode(data) {
        assert_eq!(&wire::encode(&d)[..], data, "{d:?} has a second encoding");
    }
}

/// A well-formed message with fuzzer-chosen fields (small numbers, so uids, op ids and
/// ranks land near the live state and exercise more than the refusal paths).
#[derive(Arbitrary, Debug)]
enum Msg {
    RelmData {
        src: u8,
        dst: u8,
        uid: u8,
        tag: u16,
        len: u8,
    },
    RelmAck {
        acks: Vec<(u8, u8, u8)>,
        probes: Vec<(u8, u8, u8)>,
    },
    RelmReq {
        src: u8,
        dst: u8,
        ranges: Vec<(u8, u8)>,
    },
    RelmLink {
        depth: u8,
        full: bool,
        want: bool,
        acks: Vec<(u8, u8, u8)>,
        probes: Vec<(u8, u8, u8)>,
    },
    Adopt {
        span: bool,
        lineage: Vec<u8>,
    },
    Lineage {
        span: bool,
        lineage: Vec<u8>,
        failed: Vec<u8>,
    },
    Relay {
        origin: u8,
        seq: u8,
        tag: u16,
        len: u8,
    },
    Forward {
        op: u8,
        round: u8,
        done: u8,
        gdone: u8,
        origin: u8,
        seq: u8,
        tag: u16,
        len: u8,
    },
    Ack {
        op: u8,
        round: u8,
    },
    Poll {
        op: u8,
        round: u8,
        done: u8,
        gdone: u8,
    },
    Need {
        op: u8,
    },
    Sync {
        done: u8,
        gdone: u8,
    },
    Complete {
        origin: u8,
        seq: u8,
        op: u8,
        query: bool,
    },
    Flood {
        origin: u8,
        id: u8,
        hops: u8,
        len: u8,
    },
}

impl Msg {
    /// The frame (fields over what a message allows are clamped by the codec's own checks:
    /// such a frame is refused and counted like any other).
    fn encode(self) -> Bytes {
        use lifeline_core::relm::Uid;
        use lifeline_core::wire::*;
        let r = |x: u8| Rank(u32::from(x) % (SPAN + 2));
        let uid = |x: u8| Uid::new(u32::from(x)).expect("small uids are valid");
        let marks = |v: Vec<(u8, u8, u8)>| {
            v.into_iter()
                .map(|(s, d, u)| ChainMark {
                    src: r(s),
                    dst: r(d),
                    uid: uid(u),
                })
                .collect()
        };
        let bytes = |len: u8| Bytes::from(vec![0x5a; len as usize]);
        let ranks = |v: Vec<u8>| v.into_iter().map(r).collect();
        let done = |d: u8, g: u8| (u64::from(d.max(g)), u64::from(g));
        let m = match self {
            Self::RelmData {
                src,
                dst,
                uid: u,
                tag,
                len,
            } => Message::Relm(RelmMsg::Data(RelmDataMsg {
                src: r(src),
                dst: r(dst),
                uid: uid(u),
                tag,
                payload: bytes(len),
            })),
            Self::RelmAck { acks, probes } => Message::Relm(RelmMsg::Ack(RelmAckMsg {
                acks: marks(acks),
                probes: marks(probes),
            })),
            Self::RelmReq { src, dst, ranges } => Message::Relm(RelmMsg::Req(RelmReqMsg {
                src: r(src),
                dst: r(dst),
                ranges: ranges
                    .into_iter()
                    .map(|(f, c)| UidRange {
                        first: uid(f),
                        count: u32::from(c).max(1),
                    })
                    .collect(),
            })),
            Self::RelmLink {
                depth,
                full,
                want,
                acks,
                probes,
            } => Message::Relm(RelmMsg::Link(RelmLinkMsg {
                depth: u32::from(depth % 6),
                full,
                want,
                acks: marks(acks),
                probes: marks(probes),
            })),
            Self::Adopt { span, lineage } => Message::Membership(MembershipMsg::Adopt(AdoptMsg {
                span: if span { SPAN } else { SPAN + 1 },
                lineage: ranks(lineage),
            })),
            Self::Lineage {
                span,
                lineage,
                failed,
            } => Message::Membership(MembershipMsg::Lineage(LineageMsg {
                span: if span { SPAN } else { SPAN + 1 },
                lineage: ranks(lineage),
                failed: ranks(failed),
            })),
            Self::Relay {
                origin,
                seq,
                tag,
                len,
            } => Message::Xcast(XcastMsg::Relay(RelayMsg {
                origin: r(origin),
                seq: u64::from(seq),
                numbered: 0,
                tag,
                payload: bytes(len),
            })),
            Self::Forward {
                op,
                round,
                done: d,
                gdone: g,
                origin,
                seq,
                tag,
                len,
            } => {
                let (done, global_done) = done(d, g);
                Message::Xcast(XcastMsg::Forward(ForwardMsg {
                    op: u64::from(op),
                    round: u32::from(round),
                    done,
                    global_done,
                    origin: r(origin),
                    seq: u64::from(seq),
                    tag,
                    payload: bytes(len),
                }))
            }
            Self::Ack { op, round } => Message::Xcast(XcastMsg::Ack(AckMsg {
                op: u64::from(op),
                round: u32::from(round),
            })),
            Self::Poll {
                op,
                round,
                done: d,
                gdone: g,
            } => {
                let (done, global_done) = done(d, g);
                Message::Xcast(XcastMsg::Poll(PollMsg {
                    op: u64::from(op),
                    round: u32::from(round),
                    done,
                    global_done,
                }))
            }
            Self::Need { op } => Message::Xcast(XcastMsg::Need(NeedMsg { op: u64::from(op) })),
            Self::Sync { done: d, gdone: g } => {
                let (done, global_done) = done(d, g);
                Message::Xcast(XcastMsg::Sync(SyncMsg { done, global_done }))
            }
            Self::Complete {
                origin,
                seq,
                op,
                query,
            } => Message::Xcast(XcastMsg::Complete(CompleteMsg {
                origin: r(origin),
                seq: u64::from(seq),
                op: u64::from(op),
                query,
            })),
            Self::Flood {
                origin,
                id,
                hops,
                len,
            } => Message::Flood(FloodMsg {
                origin: r(origin),
                id: u64::from(id),
                hops: u16::from(hops),
                payload: bytes(len),
            }),
        };
        m.encode()
    }
}

/// One input to the node under test.
#[derive(Arbitrary, Debug)]
enum Step {
    /// A well-formed message from `from`.
    Msg {
        from: u8,
        msg: Msg,
    },
    /// A frame with a correct envelope (version, kind, length) around arbitrary body bytes; the
    /// kind byte is [`frame_kind`]`(kind)`, a kind of the message table or an unknown one.
    Frame {
        from: u8,
        kind: u8,
        body: Vec<u8>,
    },
    /// Arbitrary bytes as a frame.
    Raw {
        from: u8,
        bytes: Vec<u8>,
    },
    LinkUp {
        peer: u8,
    },
    LinkDown {
        peer: u8,
    },
    Dead {
        rank: u8,
    },
    Advance {
        micros: u16,
    },
    Relm {
        dst: u8,
        tag: u16,
        len: u8,
    },
    Xcast {
        tag: u16,
        len: u8,
    },
}

const SPAN: u32 = 16;
const ME: Rank = Rank(5);

/// The kind byte of a `Step::Frame` for the fuzzer's byte `b`, from the one message table
/// ([`Kind::all`]), so a new machine's kinds are fuzzed with no edit here. The mapping keeps
/// committed corpora meaning what they meant: `b % 32`, as before, whenever that names a kind
/// or `b < 32` (so unknown kind bytes still reach the node); the other bytes, which used to name
/// an unknown kind, index the table instead, which reaches every kind wherever its byte lies.
pub fn frame_kind(b: u8) -> u8 {
    let raw = b % 32;
    if b < 32 || Kind::from_u8(raw).is_some() {
        return raw;
    }
    let kinds: Vec<Kind> = Kind::all().collect();
    kinds[usize::from(b) % kinds.len()].byte()
}

/// One interior node under a structured stream of hostile inputs.
pub fn node(data: &[u8]) {
    let mut u = Unstructured::new(data);
    let Ok(steps) = u.arbitrary::<Vec<Step>>() else {
        return;
    };
    let mut cfg = Config::new(SPAN, 2);
    cfg.max_frame = 4096;
    cfg.max_list = 32;
    // The node alone in the test harness: it is drained after every step, and every transmit is
    // checked there (never to itself, to a rank it knows dead or to one outside the span, never a
    // frame it would itself refuse, always on its kind's class); what it sends goes nowhere.
    let node = Node::new(cfg, ME, 1, Instant::ZERO).expect("valid config");
    let mut net = Net::from_nodes([node])
        .record_frames(false)
        .record_events(false);
    let rank = |r: u8| Rank(u32::from(r) % (SPAN + 2)); // two ranks outside the span
    for step in steps {
        match step {
            Step::Msg { from, msg } => net.feed(ME, rank(from), msg.encode()),
            Step::Frame { from, kind, body } => {
                let mut f = Vec::with_capacity(HEADER_LEN + body.len());
                f.push(VERSION);
                f.push(frame_kind(kind));
                f.extend_from_slice(&(body.len() as u32).to_be_bytes());
                f.extend_from_slice(&body);
                net.feed(ME, rank(from), f);
            }
            Step::Raw { from, bytes } => net.feed(ME, rank(from), bytes),
            Step::LinkUp { peer } => net.link_up(ME, rank(peer)),
            Step::LinkDown { peer } => net.link_down(ME, rank(peer), LinkCause::Refused),
            Step::Dead { rank: r } => {
                let set: RankSet = [rank(r)].into_iter().collect();
                net.command(ME, |n, now| {
                    let _ = n.declare_dead(now, &set);
                });
            }
            Step::Advance { micros } => {
                net.set_now(net.now() + Duration::from_micros(u64::from(micros) * 16));
                net.fire_due();
            }
            Step::Relm { dst, tag, len } => net.command(ME, |n, now| {
                let _ = n.relm_send(now, rank(dst), tag, Bytes::from(vec![7; len as usize]));
            }),
            Step::Xcast { tag, len } => net.command(ME, |n, now| {
                let _ = n.xcast(now, tag, Bytes::from(vec![9; len as usize]));
            }),
        }
        net.pump();
    }
}

/// Fuzzer-chosen RELM scenario parameters.
#[derive(Arbitrary, Debug)]
struct Shape {
    ranks: u8,
    radix: u8,
    messages: u16,
    crash_pct: u8,
    seed: u64,
    burst: bool,
}

/// The RELM scenario with a fuzzer-chosen shape: every invariant holds.
pub fn relm_sim(data: &[u8]) {
    let Ok(s) = Unstructured::new(data).arbitrary::<Shape>() else {
        return;
    };
    let p = RelmParams {
        ranks: 2 + u32::from(s.ranks % 48),
        radix: 2 + u32::from(s.radix % 7),
        messages: 1 + u32::from(s.messages % 300),
        crash: f64::from(s.crash_pct % 31) / 100.0,
        seed: s.seed,
        burst: s.burst,
    };
    match run_relm(&p, Hooks::default()) {
        Ok(r) => {
            if let Err(e) = check_report(&r) {
                panic!("{e}\nreplay: {}", p.replay_command());
            }
        }
        Err(e) => panic!("{e}"),
    }
}

/// The TCP handshake's sans-IO steps under arbitrary bytes (see the crate docs).
pub fn tcp_handshake(data: &[u8]) {
    use lifeline_core::Class;
    use lifeline_transport_tcp::handshake::{
        decode_verdict, Acceptor, Dialer, CHALLENGE_LEN, HELLO_LEN,
    };
    use lifeline_transport_tcp::ClusterKey;

    let key = ClusterKey::from_secret(b"fuzz cluster").expect("non-empty secret");
    let take = |at: usize, n: usize| -> Vec<u8> {
        (0..n)
            .map(|i| data.get(at + i).copied().unwrap_or(0))
            .collect()
    };
    let me = Rank(u32::from(data.first().copied().unwrap_or(1) % 8));
    let hello: [u8; HELLO_LEN] = take(1, HELLO_LEN).try_into().expect("sized");
    let challenge: [u8; CHALLENGE_LEN] = take(1 + HELLO_LEN, CHALLENGE_LEN)
        .try_into()
        .expect("sized");
    let proof: [u8; 32] = take(1 + HELLO_LEN + CHALLENGE_LEN, 32)
        .try_into()
        .expect("sized");
    let nonce: [u8; 32] = take(0, 32).try_into().expect("sized");

    // An acceptor given arbitrary bytes as HELLO and PROOF: a PROOF not made with the key
    // never passes (it would take forging keyed BLAKE3).
    if let Ok((acc, ch)) = Acceptor::on_hello(&key, me, &hello, nonce, |_| Ok(())) {
        assert_eq!(&ch[..4], b"LLT1");
        assert!(acc.on_proof(&proof).is_err(), "a forged proof passed");
    }
    // A dialer given an arbitrary CHALLENGE: one not made with the key never gets a PROOF.
    let d = Dialer::new(&key, Rank(0), me, Class::Data, nonce);
    assert!(
        d.on_challenge(&challenge).is_err(),
        "a forged challenge passed"
    );
    // An honest exchange with fuzzer-chosen ranks, class and nonces always succeeds.
    if me != Rank(7) {
        let class = if nonce[0] & 1 == 0 {
            Class::Control
        } else {
            Class::Data
        };
        let d = Dialer::new(&key, Rank(7), me, class, nonce);
        let (acc, ch) =
            Acceptor::on_hello(&key, me, d.hello(), proof, |_| Ok(())).expect("an honest hello");
        let p = d.on_challenge(&ch).expect("an honest challenge");
        let h = acc.on_proof(&p).expect("an honest proof");
        assert_eq!((h.from, h.to, h.class), (Rank(7), me, class));
    }
    // Any RESULT bytes: a verdict uses no more bytes than given, and its encoding decodes to
    // the same verdict.
    if let Some((v, n)) = decode_verdict(data) {
        assert!(n <= data.len());
        let (b, m) = v.encode();
        assert_eq!(decode_verdict(&b[..m]), Some((v, m)));
    }
}
