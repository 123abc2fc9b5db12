//! The test protocol's one message.

use bytes::{BufMut, Bytes};

use super::{Codec, DecodeError, Limits, Reader};
use crate::tree::Rank;

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

impl Codec for FloodMsg {
    fn encoded_len(&self) -> usize {
        4 + 8 + 2 + 4 + self.payload.len()
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
