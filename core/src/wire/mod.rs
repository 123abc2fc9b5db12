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
mod codec;
mod reader;

use bytes::{BufMut, Bytes, BytesMut};

pub use bounds::{counter, MAX_COUNTER};
pub use codec::{Codec, DecodeError, Family, Kind, KindInfo, Limits};
pub use reader::Reader;

// Every machine's messages, re-exported where tools and tests have always found them.
pub use crate::flood::FloodMsg;
pub use crate::membership::{
    AdoptMsg, AlertEntry, AlertMsg, CampaignId, CheckInMsg, CheckInNotice, CorroborateMsg,
    CorroborateOp, EvictedMsg, GlobalFailureMsg, LeftNotice, LineageMsg, MembershipMsg, RelayedMsg,
    RemovedMsg, ShrinkOrder, ShrinkRequestMsg, TreePingMsg, UnreachableMsg,
};
pub use crate::relm::{
    ChainMark, RelmAckMsg, RelmDataMsg, RelmLinkMsg, RelmMsg, RelmReqMsg, UidRange,
};
pub use crate::revoke::RevokeMsg;
pub use crate::xcast::{
    AckMsg, CompleteMsg, ForwardMsg, NeedMsg, PollMsg, RecoverDoneMsg, RecoverMsg, RecoveredOpMsg,
    RelayMsg, SyncMsg, XcastMsg,
};

/// The only envelope version this build speaks.
pub const VERSION: u8 = 1;
/// Envelope header length: version, kind, body length.
pub const HEADER_LEN: usize = 6;

/// Declares a machine's message family: an enum with one variant per message, its kind bytes,
/// classes and kind constants, and `From` conversions into the family and into [`Message`]
/// (whose variant for the family is named first). `check = path` names a whole-message check
/// run after decoding (plausible counters, ...).
#[macro_export]
#[doc(hidden)]
macro_rules! message_family {
    ($top:ident $(, check = $check:path)? => $(#[$fdoc:meta])* $vis:vis enum $family:ident {
        $($(#[$doc:meta])* $variant:ident($msg:ty) = $kind:literal, $class:ident, $kconst:ident, $name:literal;)*
    }) => {
        $(#[$fdoc])*
        #[derive(Clone, Debug, PartialEq, Eq)]
        #[non_exhaustive]
        $vis enum $family {
            $($(#[$doc])* $variant($msg),)*
        }

        #[allow(non_upper_case_globals)]
        impl $crate::wire::Kind {
            $($(#[$doc])* pub const $kconst: $crate::wire::Kind = $crate::wire::Kind::new_unchecked($kind);)*
        }

        impl $crate::wire::Family for $family {
            const KINDS: &'static [$crate::wire::KindInfo] = &[
                $($crate::wire::KindInfo { byte: $kind, name: $name, class: $crate::Class::$class },)*
            ];

            fn kind_byte(&self) -> u8 {
                match self {
                    $(Self::$variant(_) => $kind,)*
                }
            }

            fn body_len(&self) -> usize {
                match self {
                    $(Self::$variant(m) => $crate::wire::Codec::encoded_len(m),)*
                }
            }

            fn encode_body(&self, b: &mut ::bytes::BytesMut) {
                match self {
                    $(Self::$variant(m) => $crate::wire::Codec::encode(m, b),)*
                }
            }

            fn decode_body(
                kind: u8,
                r: &mut $crate::wire::Reader,
                limits: &$crate::wire::Limits,
            ) -> Result<Self, $crate::wire::DecodeError> {
                match kind {
                    $($kind => Ok(Self::$variant(<$msg as $crate::wire::Codec>::decode(r, limits)?)),)*
                    other => Err($crate::wire::DecodeError::UnknownKind(other)),
                }
            }

            fn check(&self) -> Result<(), $crate::wire::DecodeError> {
                let checks: &[fn(&Self) -> Result<(), $crate::wire::DecodeError>] = &[$($check)?];
                checks.iter().try_for_each(|check| check(self))
            }
        }

        $(
            impl From<$msg> for $family {
                fn from(m: $msg) -> Self {
                    Self::$variant(m)
                }
            }

            impl From<$msg> for $crate::wire::Message {
                fn from(m: $msg) -> Self {
                    Self::$top($family::$variant(m))
                }
            }
        )*
    };
}

/// Declares a machine whose family is one message: its kind constant and the [`Family`] impl
/// (one kind byte, the message's own [`Codec`]), as [`message_family!`] does for an enum.
#[macro_export]
#[doc(hidden)]
macro_rules! single_kind_family {
    ($(#[$kdoc:meta])* $msg:ty = $kind:literal, $class:ident, $kconst:ident, $name:literal) => {
        #[allow(non_upper_case_globals)]
        impl $crate::wire::Kind {
            $(#[$kdoc])*
            pub const $kconst: $crate::wire::Kind = $crate::wire::Kind::new_unchecked($kind);
        }

        impl $crate::wire::Family for $msg {
            const KINDS: &'static [$crate::wire::KindInfo] = &[$crate::wire::KindInfo {
                byte: $kind,
                name: $name,
                class: $crate::Class::$class,
            }];

            fn kind_byte(&self) -> u8 {
                $kind
            }

            fn body_len(&self) -> usize {
                $crate::wire::Codec::encoded_len(self)
            }

            fn encode_body(&self, b: &mut ::bytes::BytesMut) {
                $crate::wire::Codec::encode(self, b);
            }

            fn decode_body(
                _kind: u8,
                r: &mut $crate::wire::Reader,
                limits: &$crate::wire::Limits,
            ) -> Result<Self, $crate::wire::DecodeError> {
                <Self as $crate::wire::Codec>::decode(r, limits)
            }
        }
    };
}

/// Declares [`Message`] from the one table of message families: one line per machine.
macro_rules! messages {
    ($($(#[$doc:meta])* $variant:ident($family:ty);)*) => {
        /// Every message Lifeline puts on the wire, by machine.
        #[derive(Clone, Debug, PartialEq, Eq)]
        #[non_exhaustive]
        pub enum Message {
            $($(#[$doc])* $variant($family),)*
        }

        from_parts!(Message { $($variant($family)),* });

        pub(super) fn info(b: u8) -> Option<&'static KindInfo> {
            None$(.or_else(|| <$family as Family>::KINDS.iter().find(|k| k.byte == b)))*
        }

        impl Message {
            /// The envelope kind.
            pub fn kind(&self) -> Kind {
                Kind(match self {
                    $(Self::$variant(m) => m.kind_byte(),)*
                })
            }

            fn body_len(&self) -> usize {
                match self {
                    $(Self::$variant(m) => m.body_len(),)*
                }
            }

            fn encode_body(&self, b: &mut BytesMut) {
                match self {
                    $(Self::$variant(m) => m.encode_body(b),)*
                }
            }

            fn check(&self) -> Result<(), DecodeError> {
                match self {
                    $(Self::$variant(m) => m.check(),)*
                }
            }

            fn decode_body(kind: Kind, r: &mut Reader, limits: &Limits) -> Result<Self, DecodeError> {
                $(
                    if <$family as Family>::owns(kind.0) {
                        return Ok(Self::$variant(<$family>::decode_body(kind.0, r, limits)?));
                    }
                )*
                Err(DecodeError::UnknownKind(kind.0))
            }
        }
    };
}

// The message table: one line per machine. Kind ranges: 1 flood, 2–3 membership, 10–19 xcast,
// 20–23 RELM, 30–31 detector, 40–43 and 49 membership, 50 revoke, 60–63 joins, check-ins and
// shrink, 70 frames relayed around gray links; next free: 44–48 agreement, 51–59 revoke,
// 64–69 elastic.
messages! {
    /// The test flood (kind 1).
    Flood(crate::flood::FloodMsg);
    /// Failure knowledge: adoption and lineage notices, alerts, eviction, decisions (kinds 2–3,
    /// 40–42).
    Membership(crate::membership::MembershipMsg);
    /// Reliable broadcast (kinds 10–19).
    Xcast(crate::xcast::XcastMsg);
    /// Reliable messaging (kinds 20–23).
    Relm(crate::relm::RelmMsg);
    /// Heartbeat failure detector (kinds 30–31).
    Detect(crate::detect::DetectMsg);
    /// The revoke flood (kind 50).
    Revoke(crate::revoke::RevokeMsg);
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
        b.put_u8(self.kind().0);
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
        msg.check()?;
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

/// The receiving side's test: whether `frame`'s kind is a fencing notice (the one frame heard
/// from a rank known dead, as its teller may be the one cut off). A sender never sniffs bytes:
/// the node flags a fencing notice when it is queued ([`Transmit::is_fence`](crate::Transmit::is_fence)).
pub fn is_fence(frame: &[u8]) -> bool {
    frame.get(1) == Some(&Kind::Evicted.byte())
}

/// The keepalive frame: envelope kind 0 with an empty body, six bytes. A stream transport
/// (TCP) writes it on a connection that has sent nothing for a while, so an idle connection
/// always carries data that TCP retransmits if lost (`TCP_USER_TIMEOUT` then means "data
/// unacknowledged for the link timeout", and one lost segment does not end the link). It is no
/// [`Message`] and names no machine: [`frame_len`] splits it off a stream like any frame,
/// [`is_keepalive`] recognises it, and the receiving transport drops it before the core. One
/// handed to [`Node::handle_frame`](crate::Node::handle_frame) anyway is dropped and counted
/// as an unknown kind ([`Message::decode`] refuses kind 0), with no other effect.
pub const KEEPALIVE: [u8; HEADER_LEN] = [VERSION, 0, 0, 0, 0, 0];

/// Whether `frame` is exactly the [`KEEPALIVE`] frame (kind 0 with any other length is not:
/// [`frame_len`] refuses it as an unknown kind).
pub fn is_keepalive(frame: &[u8]) -> bool {
    frame == KEEPALIVE
}

/// For stream adapters: the total length of the frame starting at `prefix`, once at least
/// [`HEADER_LEN`] bytes are available (`Ok(None)` before that). Refuses a bad version, an unknown
/// kind or an oversized frame from the header alone, before any buffer is grown for the body.
/// The [`KEEPALIVE`] frame is `Ok(Some(HEADER_LEN))`.
pub fn frame_len(prefix: &[u8], limits: &Limits) -> Result<Option<usize>, DecodeError> {
    if prefix.len() < HEADER_LEN {
        return Ok(None);
    }
    if is_keepalive(&prefix[..HEADER_LEN]) {
        return Ok(Some(HEADER_LEN));
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
        Message::from(FloodMsg {
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

    /// The keepalive frame is split off a stream (its six bytes, whatever follows) and refused
    /// by `Message::decode` as kind 0; kind 0 with a body is not a keepalive and is refused by
    /// `frame_len` as well.
    #[test]
    fn keepalive_splits_and_never_decodes() {
        let l = Limits::default();
        let mut s = KEEPALIVE.to_vec();
        s.extend_from_slice(&flood(vec![7]).encode());
        assert_eq!(frame_len(&s, &l), Ok(Some(HEADER_LEN)));
        assert_eq!(frame_len(&KEEPALIVE[..5], &l), Ok(None));
        assert!(is_keepalive(&s[..HEADER_LEN]) && !is_keepalive(&s));
        assert_eq!(
            Message::decode(Bytes::copy_from_slice(&KEEPALIVE), &l),
            Err(DecodeError::UnknownKind(0))
        );
        let mut long = KEEPALIVE;
        long[5] = 1;
        assert!(!is_keepalive(&long));
        assert_eq!(frame_len(&long, &l), Err(DecodeError::UnknownKind(0)));
        assert_eq!(Kind::from_u8(0), None);
    }

    proptest! {
        #[test]
        fn flood_round_trips(origin in any::<u32>(), id in any::<u64>(), hops in any::<u16>(),
                             payload in prop::collection::vec(any::<u8>(), 0..512)) {
            let m = Message::from(FloodMsg { origin: Rank(origin), id, hops, payload: payload.into() });
            let f = m.encode();
            prop_assert_eq!(f.len(), m.frame_len());
            prop_assert_eq!(Message::decode(f, &Limits::default()).unwrap(), m);
        }
    }
}
