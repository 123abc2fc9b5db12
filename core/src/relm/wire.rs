//! Reliable messaging (RELM) messages: data hop by hop toward the destination, cumulative ACKs
//! and probes coalesced per next hop, replay requests toward the source, and link updates
//! between new tree neighbours after a repair. Every uid field refuses the reserved sentinels.

use bytes::{BufMut, Bytes};

use super::Uid;
use crate::tree::Rank;
use crate::wire::{Codec, DecodeError, Limits, Reader};

fn uid(r: &mut Reader) -> Result<Uid, DecodeError> {
    Uid::new(r.u32()?).ok_or(DecodeError::Invalid("reserved uid sentinel"))
}

/// One message of one chain, hop by hop toward `dst` (an original send or a replay).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RelmDataMsg {
    /// The origin.
    pub src: Rank,
    /// The destination.
    pub dst: Rank,
    /// The message's uid in the (src, dst) chain.
    pub uid: Uid,
    /// Application tag.
    pub tag: u16,
    /// Application bytes.
    pub payload: Bytes,
}

const DATA_LEN: usize = 4 + 4 + 4 + 2 + 4;

/// The largest payload a [`RelmDataMsg`] frame within `limits.max_frame` carries (a message
/// travels as that one frame on every hop).
pub(crate) fn max_payload(limits: &Limits) -> usize {
    limits.payload_room(DATA_LEN)
}

impl Codec for RelmDataMsg {
    fn encoded_len(&self) -> usize {
        DATA_LEN + self.payload.len()
    }
    fn encode(&self, b: &mut impl BufMut) {
        b.put_u32(self.src.0);
        b.put_u32(self.dst.0);
        b.put_u32(self.uid.get());
        b.put_u16(self.tag);
        b.put_u32(self.payload.len() as u32);
        b.put_slice(&self.payload);
    }
    fn decode(r: &mut Reader, limits: &Limits) -> Result<Self, DecodeError> {
        let (src, dst, uid) = (r.rank()?, r.rank()?, uid(r)?);
        if src == dst {
            return Err(DecodeError::Invalid("relm message to its own source"));
        }
        Ok(Self {
            src,
            dst,
            uid,
            tag: r.u16()?,
            payload: r.bytes(limits.max_frame)?,
        })
    }
}

/// A chain and a uid in it: an ACK ("delivered up to and including `uid`") or a probe ("sent up
/// to and including `uid`").
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct ChainMark {
    /// The chain's source.
    pub src: Rank,
    /// The chain's destination.
    pub dst: Rank,
    /// The uid.
    pub uid: Uid,
}

const MARK_LEN: usize = 12;

fn put_marks(b: &mut impl BufMut, v: &[ChainMark]) {
    b.put_u32(v.len() as u32);
    for m in v {
        b.put_u32(m.src.0);
        b.put_u32(m.dst.0);
        b.put_u32(m.uid.get());
    }
}

fn get_marks(r: &mut Reader, limits: &Limits) -> Result<Vec<ChainMark>, DecodeError> {
    let n = r.count(MARK_LEN, limits.max_list)?;
    (0..n)
        .map(|_| {
            let (src, dst, uid) = (r.rank()?, r.rank()?, uid(r)?);
            if src == dst {
                return Err(DecodeError::Invalid("relm chain from a rank to itself"));
            }
            Ok(ChainMark { src, dst, uid })
        })
        .collect()
}

/// To the next hop: cumulative ACKs travelling toward their sources and probes travelling
/// toward their destinations, coalesced per next hop (one frame for many messages).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RelmAckMsg {
    /// Every message of the chain up to `uid` is delivered.
    pub acks: Vec<ChainMark>,
    /// The source has sent up to `uid`: the destination answers with an ACK and asks for
    /// whatever it is missing.
    pub probes: Vec<ChainMark>,
}

impl Codec for RelmAckMsg {
    fn encoded_len(&self) -> usize {
        8 + MARK_LEN * (self.acks.len() + self.probes.len())
    }
    fn encode(&self, b: &mut impl BufMut) {
        put_marks(b, &self.acks);
        put_marks(b, &self.probes);
    }
    fn decode(r: &mut Reader, limits: &Limits) -> Result<Self, DecodeError> {
        Ok(Self {
            acks: get_marks(r, limits)?,
            probes: get_marks(r, limits)?,
        })
    }
}

/// `count` consecutive uids from `first`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UidRange {
    /// The first uid.
    pub first: Uid,
    /// How many (at least 1).
    pub count: u32,
}

impl UidRange {
    /// Whether `u` lies in the range.
    pub fn contains(&self, u: Uid) -> bool {
        self.first.dist(u) < self.count as u64
    }
}

/// Toward the source: "replay these messages of the chain". The first holder on the way
/// (a relay's cache, at the latest the origin) answers and passes on what it cannot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RelmReqMsg {
    /// The chain's source.
    pub src: Rank,
    /// The chain's destination (who asks).
    pub dst: Rank,
    /// The missing uids.
    pub ranges: Vec<UidRange>,
}

impl Codec for RelmReqMsg {
    fn encoded_len(&self) -> usize {
        12 + 8 * self.ranges.len()
    }
    fn encode(&self, b: &mut impl BufMut) {
        b.put_u32(self.src.0);
        b.put_u32(self.dst.0);
        b.put_u32(self.ranges.len() as u32);
        for x in &self.ranges {
            b.put_u32(x.first.get());
            b.put_u32(x.count);
        }
    }
    fn decode(r: &mut Reader, limits: &Limits) -> Result<Self, DecodeError> {
        let (src, dst) = (r.rank()?, r.rank()?);
        if src == dst {
            return Err(DecodeError::Invalid("relm chain from a rank to itself"));
        }
        let n = r.count(8, limits.max_list)?;
        let ranges = (0..n)
            .map(|_| {
                let first = uid(r)?;
                match r.u32()? {
                    0 => Err(DecodeError::Invalid("empty uid range")),
                    count => Ok(UidRange { first, count }),
                }
            })
            .collect::<Result<_, _>>()?;
        Ok(Self { src, dst, ranges })
    }
}

/// Between tree neighbours after a repair changed the link: the sender's depth (a receiver
/// drops an update whose depth is not its own ± 1, a leftover from before a promotion), the
/// gating flags, and the sender's state for every chain routed over the link. Never data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RelmLinkMsg {
    /// The sender's depth in its current view.
    pub depth: u32,
    /// This is the sender's full update for the link (it counts for the receiver's gating);
    /// otherwise a hello that only asks for the receiver's update.
    pub full: bool,
    /// The sender has not yet received the receiver's full update since its last view change.
    pub want: bool,
    /// Chains the sender is downstream of: delivered up to `uid`.
    pub acks: Vec<ChainMark>,
    /// Chains the sender is upstream of: sent up to `uid`.
    pub probes: Vec<ChainMark>,
}

impl Codec for RelmLinkMsg {
    fn encoded_len(&self) -> usize {
        4 + 1 + 1 + 8 + MARK_LEN * (self.acks.len() + self.probes.len())
    }
    fn encode(&self, b: &mut impl BufMut) {
        b.put_u32(self.depth);
        b.put_u8(self.full as u8);
        b.put_u8(self.want as u8);
        put_marks(b, &self.acks);
        put_marks(b, &self.probes);
    }
    fn decode(r: &mut Reader, limits: &Limits) -> Result<Self, DecodeError> {
        Ok(Self {
            depth: r.u32()?,
            full: r.bool()?,
            want: r.bool()?,
            acks: get_marks(r, limits)?,
            probes: get_marks(r, limits)?,
        })
    }
}

crate::message_family! { Relm =>
    /// Reliable messaging messages (kinds 20–23).
    pub enum RelmMsg {
        /// A message, hop by hop toward its destination ([`RelmDataMsg`]).
        Data(RelmDataMsg) = 20, Data, RelmData, "relm_data";
        /// Cumulative ACKs and probes for the next hop ([`RelmAckMsg`]).
        Ack(RelmAckMsg) = 21, Control, RelmAck, "relm_ack";
        /// Replay request, hop by hop toward the source ([`RelmReqMsg`]).
        Req(RelmReqMsg) = 22, Control, RelmReq, "relm_req";
        /// Link update between new tree neighbours ([`RelmLinkMsg`]).
        Link(RelmLinkMsg) = 23, Control, RelmLink, "relm_link";
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::Message;

    fn mark(s: u32, d: u32, u: u32) -> ChainMark {
        ChainMark {
            src: Rank(s),
            dst: Rank(d),
            uid: Uid::new(u).unwrap(),
        }
    }

    #[test]
    fn round_trips_and_refusals() {
        let l = Limits::default();
        let msgs = [
            Message::Relm(RelmMsg::Data(RelmDataMsg {
                src: Rank(1),
                dst: Rank(7),
                uid: Uid::new(crate::relm::UID_MAX).unwrap(),
                tag: 9,
                payload: Bytes::from_static(b"hello"),
            })),
            Message::Relm(RelmMsg::Ack(RelmAckMsg {
                acks: vec![mark(1, 2, 3)],
                probes: vec![mark(4, 5, 6), mark(7, 8, 0)],
            })),
            Message::Relm(RelmMsg::Req(RelmReqMsg {
                src: Rank(3),
                dst: Rank(4),
                ranges: vec![UidRange {
                    first: Uid::new(5).unwrap(),
                    count: 2,
                }],
            })),
            Message::Relm(RelmMsg::Link(RelmLinkMsg {
                depth: 3,
                full: true,
                want: false,
                acks: vec![],
                probes: vec![mark(0, 9, 12)],
            })),
        ];
        for m in msgs {
            let f = m.encode();
            assert_eq!(f.len(), m.frame_len());
            assert_eq!(Message::decode(f, &l).unwrap(), m);
        }
        // A sentinel uid is refused wherever it appears.
        let mut f = Message::Relm(RelmMsg::Ack(RelmAckMsg {
            acks: vec![mark(1, 2, 3)],
            probes: vec![],
        }))
        .encode()
        .to_vec();
        let at = f.len() - 8;
        f[at..at + 4].copy_from_slice(&crate::relm::UID_NONE.to_be_bytes());
        assert!(matches!(
            Message::decode(f.into(), &l),
            Err(DecodeError::Invalid(_))
        ));
        assert!(!UidRange {
            first: Uid::new(crate::relm::UID_MAX).unwrap(),
            count: 2
        }
        .contains(Uid::new(1).unwrap()));
        assert!(UidRange {
            first: Uid::new(crate::relm::UID_MAX).unwrap(),
            count: 2
        }
        .contains(Uid::new(0).unwrap()));
    }
}
