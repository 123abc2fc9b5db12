//! Reliable broadcast (xcast) messages.

use bytes::{BufMut, Bytes};

use crate::tree::Rank;
use crate::wire::{Codec, DecodeError, Limits, Reader};

/// Origin to root, hop by hop up the tree: "please broadcast this". The root assigns the op id;
/// `(origin, seq)` lets it drop duplicates from retries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RelayMsg {
    /// The originating rank.
    pub origin: Rank,
    /// The origin's sequence number (1, 2, ...), assigned in order.
    pub seq: u64,
    /// Every broadcast of the origin up to this seq was numbered (the origin delivered it or
    /// heard it complete); below `seq`. A root with no record of them (a joiner: they completed
    /// before it joined) numbers `numbered + 1` next instead of waiting for it. 0 for the
    /// root's own notices.
    pub numbered: u64,
    /// Application tag (its class, forward-first or process-first, follows from it).
    pub tag: u16,
    /// The broadcast bytes.
    pub payload: Bytes,
}

/// Parent to child: an op, its payload, and the ACK round the child must answer with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ForwardMsg {
    /// Root-assigned op id (1, 2, ...).
    pub op: u64,
    /// ACK round chosen by the sender for this child.
    pub round: u32,
    /// The sender's subtree completion watermark.
    pub done: u64,
    /// The root's completion watermark as the sender knows it.
    pub global_done: u64,
    /// The originating rank.
    pub origin: Rank,
    /// The origin's sequence number.
    pub seq: u64,
    /// Application tag.
    pub tag: u16,
    /// The broadcast bytes.
    pub payload: Bytes,
}

/// Child to parent: "op is done in my subtree", for the given round.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AckMsg {
    /// Op id.
    pub op: u64,
    /// The round being answered.
    pub round: u32,
}

/// Parent to child: "answer op under this new round" (the child ACKs when done, or asks for
/// the payload with [`NeedMsg`] if it never saw the op).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PollMsg {
    /// Op id.
    pub op: u64,
    /// The new round.
    pub round: u32,
    /// The sender's subtree completion watermark.
    pub done: u64,
    /// The root's completion watermark as the sender knows it.
    pub global_done: u64,
}

/// Child to parent: "I never saw this op; send it".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NeedMsg {
    /// Op id.
    pub op: u64,
}

/// Parent to a child that said hello (a [`LineageMsg`](crate::wire::LineageMsg)): the parent's
/// watermarks, so a promoted or joining child learns what is already done.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SyncMsg {
    /// The sender's subtree completion watermark.
    pub done: u64,
    /// The root's completion watermark as the sender knows it.
    pub global_done: u64,
}

/// Root to origin (routed hop by hop), or origin to root (a query): op `op` carrying the
/// origin's `seq` completed, or "has it completed?".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CompleteMsg {
    /// The originating rank (the destination of a completion).
    pub origin: Rank,
    /// The origin's sequence number.
    pub seq: u64,
    /// Op id (0 in a query for an op whose id the origin never learned).
    pub op: u64,
    /// `true`: a query travelling to the root; `false`: a completion travelling to the origin.
    pub query: bool,
}

/// The op body every message carrying a broadcast ends with: origin, seq, tag and the
/// length-prefixed payload (relay, forward and recovered op share it, so it is written once).
const BODY_LEN: usize = 4 + 8 + 2 + 4;

/// A forward's body without its payload: the largest frame a broadcast's payload rides in (a
/// relay carries `8 + BODY_LEN`, a recovered op `16 + BODY_LEN`).
const FORWARD_LEN: usize = 8 + 4 + 8 + 8 + BODY_LEN;

/// The largest broadcast payload that fits `limits.max_frame` on every hop it takes (the relay,
/// each forward, a recovery report).
pub(crate) fn max_payload(limits: &Limits) -> usize {
    limits.payload_room(FORWARD_LEN)
}

fn put_body(b: &mut impl BufMut, origin: Rank, seq: u64, tag: u16, payload: &Bytes) {
    b.put_u32(origin.0);
    b.put_u64(seq);
    b.put_u16(tag);
    b.put_u32(payload.len() as u32);
    b.put_slice(payload);
}

fn get_body(r: &mut Reader, limits: &Limits) -> Result<(Rank, u64, u16, Bytes), DecodeError> {
    Ok((r.rank()?, r.u64()?, r.u16()?, r.bytes(limits.max_frame)?))
}

macro_rules! fixed_codec {
    ($t:ty, $len:expr, |$s:ident, $b:ident| $enc:block, |$r:ident| $dec:expr) => {
        impl Codec for $t {
            fn encoded_len(&self) -> usize {
                $len
            }
            fn encode(&self, $b: &mut impl BufMut) {
                let $s = self;
                $enc
            }
            fn decode($r: &mut Reader, _limits: &Limits) -> Result<Self, DecodeError> {
                Ok($dec)
            }
        }
    };
}

fixed_codec!(
    AckMsg,
    12,
    |s, b| {
        b.put_u64(s.op);
        b.put_u32(s.round);
    },
    |r| Self {
        op: r.u64()?,
        round: r.u32()?,
    }
);
fixed_codec!(
    PollMsg,
    28,
    |s, b| {
        b.put_u64(s.op);
        b.put_u32(s.round);
        b.put_u64(s.done);
        b.put_u64(s.global_done);
    },
    |r| Self {
        op: r.u64()?,
        round: r.u32()?,
        done: r.u64()?,
        global_done: r.u64()?,
    }
);
fixed_codec!(
    NeedMsg,
    8,
    |s, b| {
        b.put_u64(s.op);
    },
    |r| Self { op: r.u64()? }
);
fixed_codec!(
    SyncMsg,
    16,
    |s, b| {
        b.put_u64(s.done);
        b.put_u64(s.global_done);
    },
    |r| Self {
        done: r.u64()?,
        global_done: r.u64()?,
    }
);
fixed_codec!(
    CompleteMsg,
    21,
    |s, b| {
        b.put_u32(s.origin.0);
        b.put_u64(s.seq);
        b.put_u64(s.op);
        b.put_u8(u8::from(s.query));
    },
    |r| Self {
        origin: r.rank()?,
        seq: r.u64()?,
        op: r.u64()?,
        query: r.bool()?,
    }
);

impl Codec for RelayMsg {
    fn encoded_len(&self) -> usize {
        8 + BODY_LEN + self.payload.len()
    }
    fn encode(&self, b: &mut impl BufMut) {
        b.put_u64(self.numbered);
        put_body(b, self.origin, self.seq, self.tag, &self.payload);
    }
    fn decode(r: &mut Reader, limits: &Limits) -> Result<Self, DecodeError> {
        let numbered = r.u64()?;
        let (origin, seq, tag, payload) = get_body(r, limits)?;
        Ok(Self {
            origin,
            seq,
            numbered,
            tag,
            payload,
        })
    }
}

impl Codec for ForwardMsg {
    fn encoded_len(&self) -> usize {
        FORWARD_LEN + self.payload.len()
    }
    fn encode(&self, b: &mut impl BufMut) {
        b.put_u64(self.op);
        b.put_u32(self.round);
        b.put_u64(self.done);
        b.put_u64(self.global_done);
        put_body(b, self.origin, self.seq, self.tag, &self.payload);
    }
    fn decode(r: &mut Reader, limits: &Limits) -> Result<Self, DecodeError> {
        let (op, round, done, global_done) = (r.u64()?, r.u32()?, r.u64()?, r.u64()?);
        let (origin, seq, tag, payload) = get_body(r, limits)?;
        Ok(Self {
            op,
            round,
            done,
            global_done,
            origin,
            seq,
            tag,
            payload,
        })
    }
}

/// New root to its children, passed down the tree: "report every op above `base` you hold"
/// (root-failover recovery round `gen`). Round 0 is a root with no broadcast history asking
/// only for [`RecoverDoneMsg`]'s watermark and round: nothing is reported in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecoverMsg {
    /// Recovery round (increases with each root failover; 0: learn, report nothing).
    pub gen: u64,
    /// The new root's global watermark: only ops above it are reported.
    pub base: u64,
}

/// Child to parent during recovery: one op the child (or its subtree) holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecoveredOpMsg {
    /// Recovery round.
    pub gen: u64,
    /// Op id.
    pub op: u64,
    /// The originating rank.
    pub origin: Rank,
    /// The origin's sequence number.
    pub seq: u64,
    /// Application tag.
    pub tag: u16,
    /// The broadcast bytes.
    pub payload: Bytes,
}

/// Child to parent: "my whole subtree has reported" for recovery round `gen`, with what the
/// subtree knows that a root with no history (a joiner) or with an old round count lacks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecoverDoneMsg {
    /// Recovery round answered.
    pub gen: u64,
    /// The highest round the subtree has served. Above `gen`: the request was older than a
    /// round already served (or was round 0), so the sender reported nothing and the root asks
    /// again above this one.
    pub seen_gen: u64,
    /// The highest global watermark in the subtree (every op up to it reached every rank).
    pub global_done: u64,
}

fixed_codec!(
    RecoverMsg,
    16,
    |s, b| {
        b.put_u64(s.gen);
        b.put_u64(s.base);
    },
    |r| Self {
        gen: r.u64()?,
        base: r.u64()?,
    }
);
fixed_codec!(
    RecoverDoneMsg,
    24,
    |s, b| {
        b.put_u64(s.gen);
        b.put_u64(s.seen_gen);
        b.put_u64(s.global_done);
    },
    |r| Self {
        gen: r.u64()?,
        seen_gen: r.u64()?,
        global_done: r.u64()?,
    }
);

impl Codec for RecoveredOpMsg {
    fn encoded_len(&self) -> usize {
        8 + 8 + BODY_LEN + self.payload.len()
    }
    fn encode(&self, b: &mut impl BufMut) {
        b.put_u64(self.gen);
        b.put_u64(self.op);
        put_body(b, self.origin, self.seq, self.tag, &self.payload);
    }
    fn decode(r: &mut Reader, limits: &Limits) -> Result<Self, DecodeError> {
        let (gen, op) = (r.u64()?, r.u64()?);
        let (origin, seq, tag, payload) = get_body(r, limits)?;
        Ok(Self {
            gen,
            op,
            origin,
            seq,
            tag,
            payload,
        })
    }
}

crate::message_family! { Xcast, check = XcastMsg::check_fields =>
    /// Reliable broadcast messages (kinds 10–19).
    pub enum XcastMsg {
        /// Relay, origin to root ([`RelayMsg`]).
        Relay(RelayMsg) = 10, Data, Relay, "relay";
        /// Forward or replay, parent to child ([`ForwardMsg`]).
        Forward(ForwardMsg) = 11, Data, Forward, "forward";
        /// ACK, child to parent ([`AckMsg`]).
        Ack(AckMsg) = 12, Control, Ack, "ack";
        /// Re-poll, parent to child ([`PollMsg`]).
        Poll(PollMsg) = 13, Control, Poll, "poll";
        /// Payload request, child to parent ([`NeedMsg`]).
        Need(NeedMsg) = 14, Control, Need, "need";
        /// Watermarks, parent to child ([`SyncMsg`]).
        Sync(SyncMsg) = 15, Control, Sync, "sync";
        /// Completion report or query, routed ([`CompleteMsg`]).
        Complete(CompleteMsg) = 16, Control, Complete, "complete";
        /// Root-failover recovery request, passed down ([`RecoverMsg`]).
        Recover(RecoverMsg) = 17, Control, Recover, "recover";
        /// An op reported up during recovery ([`RecoveredOpMsg`]).
        RecoveredOp(RecoveredOpMsg) = 18, Data, RecoveredOp, "recovered_op";
        /// A subtree finished reporting ([`RecoverDoneMsg`]).
        RecoverDone(RecoverDoneMsg) = 19, Control, RecoverDone, "recover_done";
    }
}

impl XcastMsg {
    /// Checks a decoded message's counters (flood ids are opaque and unchecked).
    fn check_fields(&self) -> Result<(), DecodeError> {
        let (counters, watermarks): (&[u64], Option<(u64, u64)>) = match self {
            Self::Relay(m) if m.numbered >= m.seq.max(1) => {
                return Err(DecodeError::Invalid("relay numbered at or past its seq"));
            }
            Self::Relay(m) => (&[m.seq], None),
            Self::Forward(m) => (&[m.op, m.seq, m.done], Some((m.done, m.global_done))),
            Self::Ack(m) => (&[m.op], None),
            Self::Poll(m) => (&[m.op, m.done], Some((m.done, m.global_done))),
            Self::Need(m) => (&[m.op], None),
            Self::Sync(m) => (&[m.done], Some((m.done, m.global_done))),
            Self::Complete(m) => (&[m.seq, m.op], None),
            Self::Recover(m) => (&[m.gen, m.base], None),
            Self::RecoveredOp(m) => (&[m.gen, m.op, m.seq], None),
            Self::RecoverDone(m) => (&[m.gen, m.seen_gen, m.global_done], None),
        };
        for &c in counters {
            crate::wire::counter(c)?;
        }
        match watermarks {
            Some((done, global_done)) if global_done > done => {
                Err(DecodeError::Invalid("global watermark above done"))
            }
            _ => Ok(()),
        }
    }
}
