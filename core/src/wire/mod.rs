//! The wire format: one envelope, one hand-written codec per message.
//!
//! A frame is `version:u8 kind:u8 len:u32 body[len]` (big-endian). The envelope's length is
//! checked against the configured maximum frame size before anything is allocated; every nested
//! length is bounded by [`Limits`]; trailing bytes are refused; a message decodes completely into
//! a value before any state changes. Decoding untrusted bytes never panics: errors are a typed
//! [`DecodeError`].
//!
//! Stream adapters (TCP) split the byte stream with [`frame_len`], which needs only the
//! 6-byte header.

mod bounds;
mod flood;
mod reader;
mod relm;
mod tree;
mod xcast;

use bytes::{BufMut, Bytes, BytesMut};

use crate::outbox::Class;

pub use bounds::MAX_COUNTER;
pub use flood::FloodMsg;
pub use reader::Reader;
pub use relm::{ChainMark, RelmAckMsg, RelmDataMsg, RelmLinkMsg, RelmReqMsg, UidRange};
pub use tree::{AdoptMsg, GlobalFailureMsg, LineageMsg};
pub use xcast::{
    AckMsg, CompleteMsg, ForwardMsg, NeedMsg, PollMsg, RecoverDoneMsg, RecoverMsg, RecoveredOpMsg,
    RelayMsg, SyncMsg,
};

/// The only envelope version this build speaks.
pub const VERSION: u8 = 1;
/// Envelope header length: version, kind, body length.
pub const HEADER_LEN: usize = 6;

/// Size limits applied while decoding (from [`Config`](crate::Config)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Largest whole frame (header included), in bytes.
    pub max_frame: u32,
    /// Largest element count of any list inside a message.
    pub max_list: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_frame: 1 << 20,
            max_list: 1 << 16,
        }
    }
}

/// Why bytes were refused. Every variant leaves all state unchanged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// Fewer bytes than a field needs.
    #[error("truncated: need {need} more bytes, {have} left")]
    Truncated {
        /// Bytes the next field needs.
        need: usize,
        /// Bytes left.
        have: usize,
    },
    /// Bytes left after the message.
    #[error("{0} trailing bytes after the message")]
    Trailing(usize),
    /// The envelope version is not [`VERSION`].
    #[error("unsupported envelope version {0}")]
    Version(u8),
    /// The kind byte names no message.
    #[error("unknown message kind {0}")]
    UnknownKind(u8),
    /// The frame or a nested length is over its limit.
    #[error("length {len} over the limit {max}")]
    TooLong {
        /// The announced length.
        len: u64,
        /// The limit it broke.
        max: u64,
    },
    /// The envelope length disagrees with the bytes given.
    #[error("envelope says {said} body bytes, frame has {have}")]
    LengthMismatch {
        /// Body length in the header.
        said: u32,
        /// Body bytes present.
        have: usize,
    },
    /// A field holds a value the message forbids.
    #[error("invalid field: {0}")]
    Invalid(&'static str),
}

/// Declares the message kinds and the `Message` enum from one list, so the envelope's kind
/// byte, the variant and its codec can never disagree.
macro_rules! messages {
    ($($(#[$doc:meta])* $variant:ident($msg:ty) = $kind:literal, $class:ident;)*) => {
        /// Message kinds: the envelope's demultiplexing key.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        #[repr(u8)]
        #[non_exhaustive]
        pub enum Kind {
            $($(#[$doc])* $variant = $kind,)*
        }

        impl Kind {
            /// The kind for a kind byte, if any.
            pub fn from_u8(b: u8) -> Option<Self> {
                match b {
                    $($kind => Some(Self::$variant),)*
                    _ => None,
                }
            }

            /// The traffic class frames of this kind travel on.
            pub fn class(self) -> Class {
                match self {
                    $(Self::$variant => Class::$class,)*
                }
            }
        }

        /// Every message Lifeline puts on the wire.
        #[derive(Clone, Debug, PartialEq, Eq)]
        #[non_exhaustive]
        pub enum Message {
            $($(#[$doc])* $variant($msg),)*
        }

        impl Message {
            /// The envelope kind.
            pub fn kind(&self) -> Kind {
                match self {
                    $(Self::$variant(_) => Kind::$variant,)*
                }
            }

            fn body_len(&self) -> usize {
                match self {
                    $(Self::$variant(m) => m.encoded_len(),)*
                }
            }

            fn encode_body(&self, b: &mut BytesMut) {
                match self {
                    $(Self::$variant(m) => m.encode(b),)*
                }
            }

            fn decode_body(kind: Kind, r: &mut Reader, limits: &Limits) -> Result<Self, DecodeError> {
                Ok(match kind {
                    $(Kind::$variant => Self::$variant(<$msg>::decode(r, limits)?),)*
                })
            }
        }
    };
}

messages! {
    /// The skeleton's test protocol: a tree flood ([`FloodMsg`]).
    Flood(FloodMsg) = 1, Data;
    /// Adoption notice, parent to new child ([`AdoptMsg`]).
    Adopt(AdoptMsg) = 2, Control;
    /// Failure notice with lineage, child to parent ([`LineageMsg`]).
    Lineage(LineageMsg) = 3, Control;
    /// Xcast relay, origin to root ([`RelayMsg`]).
    Relay(RelayMsg) = 10, Data;
    /// Xcast forward or replay, parent to child ([`ForwardMsg`]).
    Forward(ForwardMsg) = 11, Data;
    /// Xcast ACK, child to parent ([`AckMsg`]).
    Ack(AckMsg) = 12, Control;
    /// Xcast re-poll, parent to child ([`PollMsg`]).
    Poll(PollMsg) = 13, Control;
    /// Xcast payload request, child to parent ([`NeedMsg`]).
    Need(NeedMsg) = 14, Control;
    /// Xcast watermarks, parent to child ([`SyncMsg`]).
    Sync(SyncMsg) = 15, Control;
    /// Xcast completion report or query, routed ([`CompleteMsg`]).
    Complete(CompleteMsg) = 16, Control;
    /// Root-failover recovery request, passed down ([`RecoverMsg`]).
    Recover(RecoverMsg) = 17, Control;
    /// An op reported up during recovery ([`RecoveredOpMsg`]).
    RecoveredOp(RecoveredOpMsg) = 18, Data;
    /// A subtree finished reporting ([`RecoverDoneMsg`]).
    RecoverDone(RecoverDoneMsg) = 19, Control;
    /// RELM message, hop by hop toward its destination ([`RelmDataMsg`]).
    RelmData(RelmDataMsg) = 20, Data;
    /// RELM cumulative ACKs and probes for the next hop ([`RelmAckMsg`]).
    RelmAck(RelmAckMsg) = 21, Control;
    /// RELM replay request, hop by hop toward the source ([`RelmReqMsg`]).
    RelmReq(RelmReqMsg) = 22, Control;
    /// RELM link update between new tree neighbours ([`RelmLinkMsg`]).
    RelmLink(RelmLinkMsg) = 23, Control;
}

/// A hand-written codec for one message body.
pub trait Codec: Sized {
    /// Body length in bytes.
    fn encoded_len(&self) -> usize;
    /// Writes the body.
    fn encode(&self, buf: &mut impl BufMut);
    /// Reads a body; the caller checks that nothing trails it.
    fn decode(r: &mut Reader, limits: &Limits) -> Result<Self, DecodeError>;
}

impl Message {
    /// Whole frame length (header included).
    pub fn frame_len(&self) -> usize {
        HEADER_LEN + self.body_len()
    }

    /// Encodes the whole frame, envelope included.
    pub fn encode(&self) -> Bytes {
        let body = self.body_len();
        let mut b = BytesMut::with_capacity(HEADER_LEN + body);
        b.put_u8(VERSION);
        b.put_u8(self.kind() as u8);
        b.put_u32(body as u32);
        self.encode_body(&mut b);
        b.freeze()
    }

    /// Decodes exactly one whole frame. Checks version, kind and the envelope length (against
    /// `limits.max_frame` and the bytes present) before reading the body.
    pub fn decode(frame: Bytes, limits: &Limits) -> Result<Self, DecodeError> {
        let (kind, body_len) = header(&frame, limits)?;
        let have = frame.len() - HEADER_LEN;
        if have != body_len as usize {
            return Err(DecodeError::LengthMismatch {
                said: body_len,
                have,
            });
        }
        let mut r = Reader::new(frame.slice(HEADER_LEN..));
        let msg = Self::decode_body(kind, &mut r, limits)?;
        r.finish()?;
        msg.check_counters()?;
        Ok(msg)
    }
}

fn header(buf: &[u8], limits: &Limits) -> Result<(Kind, u32), DecodeError> {
    if buf.len() < HEADER_LEN {
        return Err(DecodeError::Truncated {
            need: HEADER_LEN,
            have: buf.len(),
        });
    }
    if buf[0] != VERSION {
        return Err(DecodeError::Version(buf[0]));
    }
    let kind = Kind::from_u8(buf[1]).ok_or(DecodeError::UnknownKind(buf[1]))?;
    let len = u32::from_be_bytes([buf[2], buf[3], buf[4], buf[5]]);
    let total = HEADER_LEN as u64 + len as u64;
    if total > limits.max_frame as u64 {
        return Err(DecodeError::TooLong {
            len: total,
            max: limits.max_frame as u64,
        });
    }
    Ok((kind, len))
}

/// For stream adapters: the total length of the frame starting at `prefix`, once at least
/// [`HEADER_LEN`] bytes are available (`Ok(None)` before that). Refuses a bad version, an unknown
/// kind or an oversized frame from the header alone, before any buffer is grown for the body.
pub fn frame_len(prefix: &[u8], limits: &Limits) -> Result<Option<usize>, DecodeError> {
    if prefix.len() < HEADER_LEN {
        return Ok(None);
    }
    let (_, len) = header(prefix, limits)?;
    Ok(Some(HEADER_LEN + len as usize))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tree::Rank;
    use proptest::prelude::*;

    fn flood(payload: Vec<u8>) -> Message {
        Message::Flood(FloodMsg {
            origin: Rank(3),
            id: 9,
            hops: 2,
            payload: Bytes::from(payload),
        })
    }

    #[test]
    fn envelope_checks() {
        let l = Limits::default();
        let f = flood(vec![1, 2, 3]).encode();
        assert_eq!(frame_len(&f[..5], &l), Ok(None));
        assert_eq!(frame_len(&f, &l), Ok(Some(f.len())));
        let mut bad = f.to_vec();
        bad[0] = 2;
        assert_eq!(
            Message::decode(bad.into(), &l),
            Err(DecodeError::Version(2))
        );
        let mut bad = f.to_vec();
        bad[1] = 200;
        assert_eq!(
            Message::decode(bad.into(), &l),
            Err(DecodeError::UnknownKind(200))
        );
        let tiny = Limits { max_frame: 8, ..l };
        assert!(matches!(
            frame_len(&f, &tiny),
            Err(DecodeError::TooLong { .. })
        ));
        let mut long = f.to_vec();
        long.push(0);
        assert!(matches!(
            Message::decode(long.into(), &l),
            Err(DecodeError::LengthMismatch { .. })
        ));
    }

    proptest! {
        #[test]
        fn flood_round_trips(origin in any::<u32>(), id in any::<u64>(), hops in any::<u16>(),
                             payload in prop::collection::vec(any::<u8>(), 0..512)) {
            let m = Message::Flood(FloodMsg { origin: Rank(origin), id, hops, payload: payload.into() });
            let f = m.encode();
            prop_assert_eq!(f.len(), m.frame_len());
            prop_assert_eq!(Message::decode(f, &Limits::default()).unwrap(), m);
        }
    }
}
