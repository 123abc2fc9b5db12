//! Join wire formats.
//!
//! Two kinds of bytes travel for a join:
//!
//! - **Joiner ↔ contact** ([`JoinRequest`], [`JoinReply`]): the joiner has no rank yet, so
//!   these are not envelopes of the message table. An adapter carries them on a connection of
//!   its own (the TCP adapter: a connection to the contact's listening address that opens with
//!   a join preamble) and hands them to [`Node::handle_join_request`](crate::Node::handle_join_request)
//!   and [`Joiner::handle_reply`](super::Joiner::handle_reply). Each starts with [`JOIN_MAGIC`]
//!   and a kind byte; decoding never panics and never allocates past the caller's limits.
//! - **Among members** ([`JoinForwardMsg`], [`JoinAnswerMsg`]: membership messages) and the
//!   coordinator's admission ([`AdmitNotice`], an xcast payload delivered in op order).
//!
//! Every reply echoes the request's [`JoinId`]: a joiner never takes another joiner's answer,
//! and a contact keeps one entry per join id (seed 003: replies for two joiners mixed up).

use std::fmt;

use bytes::{BufMut, Bytes, BytesMut};

use crate::membership::StartupView;
use crate::time::Duration;
use crate::tree::{Rank, RankSet, Snapshot};
use crate::wire::{Codec, DecodeError, Limits, Reader};

/// First four bytes of every joiner ↔ contact message (`"LLJ1"`).
pub const JOIN_MAGIC: u32 = u32::from_be_bytes(*b"LLJ1");

/// Longest contact address a joiner may give (the adapter's own encoding, opaque to the core:
/// the TCP adapter sends `host:port` as text).
pub const MAX_ADDR_LEN: u32 = 256;

/// Largest joiner ↔ contact message the core decodes: a reply carries a tree snapshot whose
/// dead set is a list of ranges, bounded by this.
pub const MAX_JOIN_MSG: usize = 1 << 20;

/// Identifies one join request: the joiner process's incarnation nonce (random, fixed for the
/// process's life: a rejoin after a restart is a new nonce, so a new rank) and the request's
/// sequence number (raised on each retry). The coordinator admits a nonce once; a retried or
/// duplicated request with the same nonce gets the same rank.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct JoinId {
    /// The joiner process's incarnation nonce.
    pub nonce: u64,
    /// The request's sequence number (1 for the first try).
    pub seq: u32,
}

impl fmt::Display for JoinId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:016x}.{}", self.nonce, self.seq)
    }
}

impl JoinId {
    fn put(&self, buf: &mut impl BufMut) {
        buf.put_u64(self.nonce);
        buf.put_u32(self.seq);
    }

    fn get(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(Self {
            nonce: r.u64()?,
            seq: r.u32()?,
        })
    }
}

const KIND_REQUEST: u8 = 1;
const KIND_ACCEPTED: u8 = 2;
const KIND_RETRY: u8 = 3;

/// Joiner to contact: "admit me". `addr` is where members reach the joiner once admitted (the
/// adapter's encoding, at most [`MAX_ADDR_LEN`] bytes); it travels in the admission to every
/// member, whose adapter adds it to its address book.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JoinRequest {
    /// This try's id.
    pub id: JoinId,
    /// The joiner's listening address, as its adapter encodes it.
    pub addr: Bytes,
}

impl JoinRequest {
    /// The request as bytes.
    pub fn encode(&self) -> Bytes {
        let mut b = BytesMut::with_capacity(4 + 1 + 12 + 4 + self.addr.len());
        b.put_u32(JOIN_MAGIC);
        b.put_u8(KIND_REQUEST);
        self.id.put(&mut b);
        b.put_u32(self.addr.len() as u32);
        b.put_slice(&self.addr);
        b.freeze()
    }

    /// Decodes a whole request; anything else (another magic, kind, an address over
    /// [`MAX_ADDR_LEN`], trailing bytes) is an error.
    pub fn decode(bytes: Bytes) -> Result<Self, DecodeError> {
        let mut r = header(bytes, KIND_REQUEST)?;
        let id = JoinId::get(&mut r)?;
        let addr = r.bytes(MAX_ADDR_LEN)?;
        r.finish()?;
        Ok(Self { id, addr })
    }
}

/// Why a contact asks a joiner to try again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RetryReason {
    /// The contact's or the coordinator's join queue is full.
    Busy,
    /// No admission within `join.timeout` (the coordinator may have failed; the joiner tries
    /// again, through another contact if it has one).
    TimedOut,
    /// The contact is not a member (it was removed or is stopping).
    NotMember,
}

impl RetryReason {
    fn byte(self) -> u8 {
        match self {
            Self::Busy => 1,
            Self::TimedOut => 2,
            Self::NotMember => 3,
        }
    }

    fn from_byte(b: u8) -> Result<Self, DecodeError> {
        Ok(match b {
            1 => Self::Busy,
            2 => Self::TimedOut,
            3 => Self::NotMember,
            _ => return Err(DecodeError::Invalid("join retry reason")),
        })
    }

    /// A short name (`busy`, `timed-out`, `not-member`).
    pub fn name(self) -> &'static str {
        match self {
            Self::Busy => "busy",
            Self::TimedOut => "timed-out",
            Self::NotMember => "not-member",
        }
    }
}

/// What a joiner needs to start as a member: its rank, the view that admitted it, and the tree
/// (span, radix, holes) as of that view, so its first tree is everyone's (PRRTE #2641: a
/// joiner that computed its tree without the holes waited on a dead parent).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Admission {
    /// The joiner's rank (past the span before the admission; never reused).
    pub rank: Rank,
    /// The epoch of the view that admitted it.
    pub epoch: u64,
    /// The epoch of the view the snapshot is (`epoch` or later: a contact that answers after
    /// applying later views answers with its tree as of them). The joiner applies only
    /// notices past it, so a later admission already in its snapshot is not applied twice.
    pub view_epoch: u64,
    /// The tree as of `view_epoch` (its span includes every rank admitted by then).
    pub snapshot: Snapshot,
    /// Start-up from check-ins as of `view_epoch`, while it runs (`None` once it is over, or
    /// without check-ins): a grow can make the joiner the coordinator, which then carries it
    /// on.
    pub startup: Option<StartupView>,
}

/// Contact to joiner: the answer to one [`JoinRequest`], echoing its id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JoinReply {
    /// The request it answers.
    pub id: JoinId,
    /// Admitted, or try again.
    pub verdict: JoinVerdict,
}

/// A contact's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JoinVerdict {
    /// Admitted (also the answer to a retry of a join already admitted).
    Accepted(Admission),
    /// Not admitted (yet): try again after at least `after`.
    Retry {
        /// Why.
        reason: RetryReason,
        /// The contact's suggested back-off.
        after: Duration,
    },
}

impl JoinReply {
    /// The reply as bytes.
    pub fn encode(&self) -> Bytes {
        let mut b = BytesMut::new();
        b.put_u32(JOIN_MAGIC);
        match &self.verdict {
            JoinVerdict::Accepted(a) => {
                b.put_u8(KIND_ACCEPTED);
                self.id.put(&mut b);
                b.put_u32(a.rank.0);
                b.put_u64(a.epoch);
                b.put_u64(a.view_epoch);
                let snap = a.snapshot.to_bytes();
                b.put_u32(snap.len() as u32);
                b.put_slice(&snap);
                put_startup(&mut b, a.startup.as_ref());
            }
            JoinVerdict::Retry { reason, after } => {
                b.put_u8(KIND_RETRY);
                self.id.put(&mut b);
                b.put_u8(reason.byte());
                b.put_u64(after.as_nanos());
            }
        }
        b.freeze()
    }

    /// Decodes a whole reply. `max_span` bounds the snapshot (see
    /// [`Snapshot::decode`](crate::tree::Snapshot::decode)); an admitted rank outside the
    /// snapshot's span or listed dead in it is refused.
    pub fn decode(bytes: Bytes, max_span: u32) -> Result<Self, DecodeError> {
        let Some(&kind) = bytes.get(4) else {
            return Err(DecodeError::Truncated {
                need: 5,
                have: bytes.len(),
            });
        };
        let mut r = header(bytes, kind)?;
        let id = JoinId::get(&mut r)?;
        let verdict = match kind {
            KIND_ACCEPTED => {
                let rank = r.rank()?;
                let epoch = crate::wire::counter(r.u64()?)?;
                let view_epoch = crate::wire::counter(r.u64()?)?;
                if view_epoch < epoch {
                    return Err(DecodeError::Invalid(
                        "join snapshot older than the admission",
                    ));
                }
                let snap = r.bytes(MAX_JOIN_MSG as u32)?;
                let snapshot = Snapshot::decode(&snap, max_span)
                    .map_err(|_| DecodeError::Invalid("join snapshot"))?;
                if !snapshot.layout.contains(rank) || snapshot.dead.contains(rank) {
                    return Err(DecodeError::Invalid("admitted rank outside the snapshot"));
                }
                let startup = get_startup(&mut r, snapshot.layout.span())?;
                JoinVerdict::Accepted(Admission {
                    rank,
                    epoch,
                    view_epoch,
                    snapshot,
                    startup,
                })
            }
            KIND_RETRY => JoinVerdict::Retry {
                reason: RetryReason::from_byte(r.u8()?)?,
                after: Duration::from_nanos(r.u64()?),
            },
            _ => return Err(DecodeError::UnknownKind(kind)),
        };
        r.finish()?;
        Ok(Self { id, verdict })
    }
}

/// `0`, or `1 expected:u32 nranges:u32 (lo:u32 hi:u32)*` (the pending ranks, inclusive,
/// ascending and canonical, as a snapshot's dead set).
fn put_startup(b: &mut BytesMut, startup: Option<&StartupView>) {
    let Some(v) = startup else {
        b.put_u8(0);
        return;
    };
    b.put_u8(1);
    b.put_u32(v.expected);
    b.put_u32(v.pending.ranges().count() as u32);
    for (lo, hi) in v.pending.ranges() {
        b.put_u32(lo.0);
        b.put_u32(hi.0);
    }
}

/// Decodes [`put_startup`]'s bytes: the expected span within the snapshot's, the ranges below
/// it and canonical.
fn get_startup(r: &mut Reader, span: u32) -> Result<Option<StartupView>, DecodeError> {
    if !r.bool()? {
        return Ok(None);
    }
    let expected = r.u32()?;
    if expected == 0 || expected > span {
        return Err(DecodeError::Invalid("join start-up span"));
    }
    let n = r.count(8, expected)?;
    let mut pending = RankSet::new();
    let mut next: u64 = 0;
    for _ in 0..n {
        let (lo, hi) = (r.u32()?, r.u32()?);
        if u64::from(lo) < next || lo > hi || hi >= expected {
            return Err(DecodeError::Invalid("join start-up ranges"));
        }
        pending.insert_range(Rank(lo), Rank(hi));
        next = u64::from(hi) + 2;
    }
    Ok(Some(StartupView { expected, pending }))
}

/// Checks the magic and the kind byte; returns a reader past them.
fn header(bytes: Bytes, kind: u8) -> Result<Reader, DecodeError> {
    if bytes.len() > MAX_JOIN_MSG {
        return Err(DecodeError::TooLong {
            len: bytes.len() as u64,
            max: MAX_JOIN_MSG as u64,
        });
    }
    let mut r = Reader::new(bytes);
    if r.u32()? != JOIN_MAGIC {
        return Err(DecodeError::Invalid("join magic"));
    }
    let k = r.u8()?;
    if k != kind {
        return Err(DecodeError::UnknownKind(k));
    }
    Ok(r)
}

/// Contact to coordinator: a joiner's request (the contact keeps the joiner's connection and
/// answers it when the admission is delivered, or after `join.timeout`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JoinForwardMsg {
    /// The request's id.
    pub id: JoinId,
    /// The joiner's address (opaque, at most [`MAX_ADDR_LEN`] bytes).
    pub addr: Bytes,
    /// The admission the contact remembers for this nonce (rank, admitting epoch), if any: a
    /// joiner retrying after its answer was lost. A coordinator that was itself admitted in or
    /// after that view (a joiner the grow put in the root slot) never applied that admission's
    /// notice and so does not remember it: it answers with this rank instead of admitting the
    /// nonce a second time.
    pub known: Option<(Rank, u64)>,
}

impl Codec for JoinForwardMsg {
    fn encoded_len(&self) -> usize {
        12 + 4 + self.addr.len() + 1 + 12
    }
    fn encode(&self, buf: &mut impl BufMut) {
        self.id.put(buf);
        buf.put_u32(self.addr.len() as u32);
        buf.put_slice(&self.addr);
        // As in `JoinAnswerMsg`: a flag, then the rank and epoch (zeros when absent).
        let (flag, rank, epoch) = match self.known {
            Some((rank, epoch)) => (1, rank.0, epoch),
            None => (0, 0, 0),
        };
        buf.put_u8(flag);
        buf.put_u32(rank);
        buf.put_u64(epoch);
    }
    fn decode(r: &mut Reader, _limits: &Limits) -> Result<Self, DecodeError> {
        let id = JoinId::get(r)?;
        let addr = r.bytes(MAX_ADDR_LEN)?;
        let some = r.bool()?;
        let rank = r.rank()?;
        let epoch = crate::wire::counter(r.u64()?)?;
        if !some && (rank.0 != 0 || epoch != 0) {
            // One encoding per message: "none" carries zeros.
            return Err(DecodeError::Invalid(
                "join forward: no admission with a rank",
            ));
        }
        Ok(Self {
            id,
            addr,
            known: some.then_some((rank, epoch)),
        })
    }
}

/// Coordinator to contact, for a forwarded request it does not queue: the joiner was admitted
/// already (`rank` and `epoch`: the contact answers with the current tree), or the queue is
/// full (`rank` is `None`: the contact tells the joiner to retry).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JoinAnswerMsg {
    /// The request answered.
    pub id: JoinId,
    /// The rank the nonce was admitted as, and the admitting epoch; `None`: busy.
    pub admitted: Option<(Rank, u64)>,
}

impl Codec for JoinAnswerMsg {
    fn encoded_len(&self) -> usize {
        12 + 1 + 12
    }
    fn encode(&self, buf: &mut impl BufMut) {
        self.id.put(buf);
        match self.admitted {
            Some((rank, epoch)) => {
                buf.put_u8(1);
                buf.put_u32(rank.0);
                buf.put_u64(epoch);
            }
            None => {
                buf.put_u8(0);
                buf.put_u32(0);
                buf.put_u64(0);
            }
        }
    }
    fn decode(r: &mut Reader, _limits: &Limits) -> Result<Self, DecodeError> {
        let id = JoinId::get(r)?;
        let some = r.bool()?;
        let rank = r.rank()?;
        let epoch = crate::wire::counter(r.u64()?)?;
        if !some && (rank.0 != 0 || epoch != 0) {
            // One encoding per message: "busy" carries zeros.
            return Err(DecodeError::Invalid("join answer: busy with a rank"));
        }
        Ok(Self {
            id,
            admitted: some.then_some((rank, epoch)),
        })
    }
}

/// One admitted joiner, as the admission carries it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Admitted {
    /// Its rank.
    pub rank: Rank,
    /// The request that admitted it.
    pub id: JoinId,
    /// Its address (opaque: the adapter's encoding).
    pub addr: Bytes,
}

/// The coordinator's admission, broadcast as a process-first xcast payload: one view change
/// admitting these joiners, in this order, as of `epoch`.
///
/// The ranks are not in the notice: every member gives the joiners consecutive ranks from its
/// span when it applies the notice. Members apply notices in the same op order (a new root's
/// recovery included), so they all give the same ranks, and a coordinator that fails over
/// cannot hand out a rank its predecessor's admission, still in flight, will also give.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AdmitNotice {
    /// The view's epoch (the same counter as failure notices').
    pub epoch: u64,
    /// The joiners, in rank order.
    pub joiners: Vec<(JoinId, Bytes)>,
}

impl AdmitNotice {
    /// The joiners with their ranks, applied at span `first`.
    pub fn admitted(&self, first: Rank) -> impl Iterator<Item = Admitted> + '_ {
        self.joiners
            .iter()
            .enumerate()
            .map(move |(i, (id, addr))| Admitted {
                rank: Rank(first.0.saturating_add(i as u32)),
                id: *id,
                addr: addr.clone(),
            })
    }
}

impl Codec for AdmitNotice {
    fn encoded_len(&self) -> usize {
        8 + 4
            + 4
            + self
                .joiners
                .iter()
                .map(|(_, a)| 12 + 4 + a.len())
                .sum::<usize>()
    }
    fn encode(&self, buf: &mut impl BufMut) {
        buf.put_u64(self.epoch);
        buf.put_u32(self.joiners.len() as u32);
        for (id, addr) in &self.joiners {
            id.put(buf);
            buf.put_u32(addr.len() as u32);
            buf.put_slice(addr);
        }
    }
    fn decode(r: &mut Reader, limits: &Limits) -> Result<Self, DecodeError> {
        let epoch = crate::wire::counter(r.u64()?)?;
        let n = r.count(16, limits.max_list)?;
        let joiners = (0..n)
            .map(|_| Ok((JoinId::get(r)?, r.bytes(MAX_ADDR_LEN)?)))
            .collect::<Result<Vec<_>, DecodeError>>()?;
        Ok(Self { epoch, joiners })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tree::{Layout, RankSet};

    fn id() -> JoinId {
        JoinId { nonce: 7, seq: 2 }
    }

    #[test]
    fn round_trips() {
        let req = JoinRequest {
            id: id(),
            addr: Bytes::from_static(b"127.0.0.1:7000"),
        };
        assert_eq!(JoinRequest::decode(req.encode()), Ok(req));
        let dead: RankSet = [Rank(1)].into_iter().collect();
        let mut acc = JoinReply {
            id: id(),
            verdict: JoinVerdict::Accepted(Admission {
                rank: Rank(4),
                epoch: 3,
                view_epoch: 3,
                snapshot: Snapshot {
                    layout: Layout::new(5, 2).unwrap(),
                    dead,
                },
                startup: None,
            }),
        };
        assert_eq!(JoinReply::decode(acc.encode(), 100), Ok(acc.clone()));
        if let JoinVerdict::Accepted(a) = &mut acc.verdict {
            a.startup = Some(StartupView {
                expected: 4,
                pending: [Rank(0), Rank(2), Rank(3)].into_iter().collect(),
            });
        }
        assert_eq!(JoinReply::decode(acc.encode(), 100), Ok(acc));
        let retry = JoinReply {
            id: id(),
            verdict: JoinVerdict::Retry {
                reason: RetryReason::Busy,
                after: Duration::from_millis(40),
            },
        };
        assert_eq!(JoinReply::decode(retry.encode(), 100), Ok(retry));
        let notice = AdmitNotice {
            epoch: 9,
            joiners: vec![(id(), Bytes::from_static(b"a")), (id(), Bytes::new())],
        };
        let lim = Limits::default();
        assert_eq!(
            AdmitNotice::from_payload(notice.to_payload(), &lim),
            Ok(notice.clone())
        );
        let ranks: Vec<Rank> = notice.admitted(Rank(16)).map(|a| a.rank).collect();
        assert_eq!(ranks, [Rank(16), Rank(17)]);
    }

    /// A forward with and without the contact's remembered admission round-trips; "none" with
    /// a rank or an epoch is a second encoding of it, refused.
    #[test]
    fn a_forward_carries_the_admission_its_contact_remembers() {
        let lim = Limits::default();
        let decode = |b: Bytes| JoinForwardMsg::decode(&mut Reader::new(b), &lim);
        for known in [None, Some((Rank(43), 11))] {
            let m = JoinForwardMsg {
                id: id(),
                addr: Bytes::from_static(b"joiner-0"),
                known,
            };
            let mut buf = Vec::new();
            m.encode(&mut buf);
            assert_eq!(buf.len(), m.encoded_len());
            assert_eq!(decode(Bytes::from(buf)), Ok(m));
        }
        let m = JoinForwardMsg {
            id: id(),
            addr: Bytes::new(),
            known: Some((Rank(3), 0)),
        };
        let mut buf = Vec::new();
        m.encode(&mut buf);
        buf[12 + 4] = 0;
        assert_eq!(
            decode(Bytes::from(buf)),
            Err(DecodeError::Invalid(
                "join forward: no admission with a rank"
            ))
        );
    }

    /// Every prefix, every single-byte change and some trailing bytes of each message decode
    /// to an error or to a message, never a panic; an admitted rank the snapshot does not hold
    /// and an oversized address are refused.
    #[test]
    fn malformed_bytes_are_errors() {
        let req = JoinRequest {
            id: id(),
            addr: Bytes::from_static(b"127.0.0.1:7000"),
        }
        .encode();
        let acc = JoinReply {
            id: id(),
            verdict: JoinVerdict::Accepted(Admission {
                rank: Rank(4),
                epoch: 3,
                view_epoch: 3,
                snapshot: Snapshot {
                    layout: Layout::new(5, 2).unwrap(),
                    dead: RankSet::new(),
                },
                startup: Some(StartupView {
                    expected: 4,
                    pending: [Rank(0), Rank(2), Rank(3)].into_iter().collect(),
                }),
            }),
        }
        .encode();
        for msg in [&req, &acc] {
            for cut in 0..msg.len() {
                let b = msg.slice(..cut);
                assert!(JoinRequest::decode(b.clone()).is_err());
                assert!(JoinReply::decode(b, 100).is_err());
            }
            for i in 0..msg.len() {
                for x in [0x01u8, 0x80, 0xff] {
                    let mut v = msg.to_vec();
                    v[i] ^= x;
                    let _ = JoinRequest::decode(Bytes::from(v.clone()));
                    let _ = JoinReply::decode(Bytes::from(v), 100);
                }
            }
            let mut v = msg.to_vec();
            v.push(0);
            assert!(JoinRequest::decode(Bytes::from(v.clone())).is_err());
            assert!(JoinReply::decode(Bytes::from(v), 100).is_err());
        }
        // Rank 9 in a span of 5.
        let mut v = acc.to_vec();
        v[4 + 1 + 12..4 + 1 + 12 + 4].copy_from_slice(&9u32.to_be_bytes());
        assert_eq!(
            JoinReply::decode(Bytes::from(v), 100),
            Err(DecodeError::Invalid("admitted rank outside the snapshot"))
        );
        // Start-up past the snapshot's span, or pending ranges out of order, overlapping,
        // adjacent (not canonical) or past the expected span.
        let reply = |expected: u32, ranges: &[(u32, u32)]| {
            let mut v = acc.slice(..acc.len() - (1 + 4 + 4 + 8 * 2)).to_vec();
            v.push(1);
            v.extend_from_slice(&expected.to_be_bytes());
            v.extend_from_slice(&(ranges.len() as u32).to_be_bytes());
            for &(lo, hi) in ranges {
                v.extend_from_slice(&lo.to_be_bytes());
                v.extend_from_slice(&hi.to_be_bytes());
            }
            JoinReply::decode(Bytes::from(v), 100)
        };
        assert!(reply(4, &[(0, 0), (2, 3)]).is_ok());
        for (expected, ranges) in [
            (6, &[(0, 0)][..]),
            (0, &[][..]),
            (4, &[(2, 3), (0, 0)][..]),
            (4, &[(0, 2), (2, 3)][..]),
            (4, &[(0, 0), (1, 1)][..]),
            (4, &[(3, 2)][..]),
            (4, &[(0, 4)][..]),
        ] {
            assert_eq!(
                reply(expected, ranges).map(|_| ()),
                Err(DecodeError::Invalid(if expected == 4 {
                    "join start-up ranges"
                } else {
                    "join start-up span"
                })),
                "{expected} {ranges:?}"
            );
        }
        let long = JoinRequest {
            id: id(),
            addr: Bytes::from(vec![b'x'; MAX_ADDR_LEN as usize + 1]),
        };
        assert!(matches!(
            JoinRequest::decode(long.encode()),
            Err(DecodeError::TooLong { .. })
        ));
    }
}
