//! The test protocol's one message.

use bytes::{BufMut, Bytes};

use crate::tree::Rank;
use crate::wire::{Codec, DecodeError, Limits, Reader};

/// A tree flood: forwarded once over every tree link except the one it arrived on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FloodMsg {
    /// The rank that started the flood.
    pub origin: Rank,
    /// Per-origin flood id.
    pub id: u64,
    /// Tree links crossed so far.
    pub hops: u16,
    /// Application bytes (bounded by the frame limit).
    pub payload: Bytes,
}

/// A flood's body without its payload.
const HEAD_LEN: usize = 4 + 8 + 2 + 4;

/// The largest flood payload whose frame fits `limits.max_frame` (it is forwarded unchanged but
/// for its hop count).
pub(crate) fn max_payload(limits: &Limits) -> usize {
    limits.payload_room(HEAD_LEN)
}

impl Codec for FloodMsg {
    fn encoded_len(&self) -> usize {
        HEAD_LEN + self.payload.len()
    }

    fn encode(&self, buf: &mut impl BufMut) {
        buf.put_u32(self.origin.0);
        buf.put_u64(self.id);
        buf.put_u16(self.hops);
        buf.put_u32(self.payload.len() as u32);
        buf.put_slice(&self.payload);
    }

    fn decode(r: &mut Reader, limits: &Limits) -> Result<Self, DecodeError> {
        Ok(Self {
            origin: r.rank()?,
            id: r.u64()?,
            hops: r.u16()?,
            payload: r.bytes(limits.max_frame)?,
        })
    }
}

// The flood machine's family is its one message (kind 1, data class).
crate::single_kind_family!(
    /// The test flood ([`FloodMsg`]).
    FloodMsg = 1, Data, Flood, "flood"
);
