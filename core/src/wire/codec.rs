//! The codec vocabulary every message family uses: size [`Limits`], [`DecodeError`], the
//! [`Kind`] byte and what the one table knows about it, and the [`Family`] / [`Codec`] traits.
//! A leaf: it names no machine and no aggregate (the table itself is in `wire/mod.rs`).

use bytes::{BufMut, Bytes, BytesMut};

use super::{info, Reader, HEADER_LEN};
use crate::transmit::Class;

/// Size limits applied while decoding (from [`Config`](crate::Config)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Largest whole frame (header included), in bytes.
    pub max_frame: u32,
    /// Largest element count of any list inside a message.
    pub max_list: u32,
}

impl Limits {
    /// The most payload bytes a frame can carry whose body holds `overhead` other bytes (the
    /// rest of its message): what a machine's `max_payload` derives from its codec.
    pub fn payload_room(&self, overhead: usize) -> usize {
        (self.max_frame as usize).saturating_sub(HEADER_LEN + overhead)
    }
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
    /// The envelope version is not [`VERSION`](super::VERSION).
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

/// What the one message table knows about a kind byte: its name and traffic class.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KindInfo {
    /// The envelope's kind byte.
    pub byte: u8,
    /// A short name for traces and tools (`"relm_ack"`).
    pub name: &'static str,
    /// The traffic class frames of this kind travel on.
    pub class: Class,
}

/// A message kind: the envelope's demultiplexing key. Only bytes some machine's message family
/// owns are kinds ([`Kind::from_u8`]); each family also names its kinds as associated
/// constants (`Kind::Flood`, `Kind::RelmAck`, ...).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Kind(pub(super) u8);

impl Kind {
    /// The kind for a kind byte, if a message family owns it.
    pub fn from_u8(b: u8) -> Option<Self> {
        info(b).map(|_| Self(b))
    }

    /// The kind byte.
    pub fn byte(self) -> u8 {
        self.0
    }

    /// The kind's short name.
    pub fn name(self) -> &'static str {
        info(self.0).map_or("?", |i| i.name)
    }

    /// The traffic class frames of this kind travel on.
    pub fn class(self) -> Class {
        info(self.0).map_or(Class::Control, |i| i.class)
    }

    /// Every kind, in kind-byte order (the malformed sweep and the fuzz targets iterate this).
    pub fn all() -> impl Iterator<Item = Self> {
        (0..=u8::MAX).filter_map(Self::from_u8)
    }

    /// A kind constant for a family's table (used by [`message_family!`]).
    #[doc(hidden)]
    pub const fn new_unchecked(b: u8) -> Self {
        Self(b)
    }
}

/// A machine's message family: the kind bytes it owns and a codec per kind. Declared with
/// [`message_family!`](crate::message_family) (or by hand for a single message) and registered by one line in
/// [`Message`](super::Message)'s table.
pub trait Family: Sized {
    /// The kinds this family owns.
    const KINDS: &'static [KindInfo];
    /// This message's kind byte.
    fn kind_byte(&self) -> u8;
    /// Body length in bytes.
    fn body_len(&self) -> usize;
    /// Writes the body.
    fn encode_body(&self, b: &mut BytesMut);
    /// Reads the body of a frame of kind byte `kind` (one of [`Self::KINDS`]).
    fn decode_body(kind: u8, r: &mut Reader, limits: &Limits) -> Result<Self, DecodeError>;
    /// Whole-message checks after decoding (plausible counters, ...).
    fn check(&self) -> Result<(), DecodeError> {
        Ok(())
    }
    /// Whether `b` is one of this family's kind bytes.
    fn owns(b: u8) -> bool {
        Self::KINDS.iter().any(|k| k.byte == b)
    }
}

/// A hand-written codec for one message body.
pub trait Codec: Sized {
    /// Body length in bytes.
    fn encoded_len(&self) -> usize;
    /// Writes the body.
    fn encode(&self, buf: &mut impl BufMut);
    /// Reads a body; the caller checks that nothing trails it.
    fn decode(r: &mut Reader, limits: &Limits) -> Result<Self, DecodeError>;

    /// The body alone as bytes: what an internal xcast op carries (a global failure notice,
    /// an admission).
    fn to_payload(&self) -> Bytes {
        let mut b = BytesMut::with_capacity(self.encoded_len());
        self.encode(&mut b);
        b.freeze()
    }

    /// Decodes a whole payload: anything left after the body is an error.
    fn from_payload(payload: Bytes, limits: &Limits) -> Result<Self, DecodeError> {
        let mut r = Reader::new(payload);
        let m = Self::decode(&mut r, limits)?;
        r.finish()?;
        Ok(m)
    }
}
