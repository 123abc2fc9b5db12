//! The revoke flood's one message.

use bytes::{BufMut, BytesMut};

use crate::tree::Rank;
use crate::wire::{Codec, DecodeError, Family, KindInfo, Limits, Reader};

/// A revoke notice: `group` is revoked as of `epoch`, on `origin`'s word. Forwarded unchanged
/// (but for `hops`) to every overlay neighbour on first receipt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RevokeMsg {
    /// The application's group (communicator) id.
    pub group: u64,
    /// The revoked epoch of the group.
    pub epoch: u64,
    /// The rank that started the revoke.
    pub origin: Rank,
    /// Overlay hops crossed so far.
    pub hops: u16,
}

/// A notice's body: group, epoch, origin, hops.
const BODY_LEN: usize = 8 + 8 + 4 + 2;

impl Codec for RevokeMsg {
    fn encoded_len(&self) -> usize {
        BODY_LEN
    }

    fn encode(&self, buf: &mut impl BufMut) {
        buf.put_u64(self.group);
        buf.put_u64(self.epoch);
        buf.put_u32(self.origin.0);
        buf.put_u16(self.hops);
    }

    fn decode(r: &mut Reader, _limits: &Limits) -> Result<Self, DecodeError> {
        Ok(Self {
            group: r.u64()?,
            epoch: r.u64()?,
            origin: r.rank()?,
            hops: r.u16()?,
        })
    }
}

#[allow(non_upper_case_globals)]
impl crate::wire::Kind {
    /// A revoke notice ([`RevokeMsg`]).
    pub const Revoke: Self = Self::new_unchecked(50);
}

/// The revoke machine's family is its one message (kind 50, control class: a "stop now" notice
/// must not queue behind application data).
impl Family for RevokeMsg {
    const KINDS: &'static [KindInfo] = &[KindInfo {
        byte: 50,
        name: "revoke",
        class: crate::Class::Control,
    }];

    fn kind_byte(&self) -> u8 {
        50
    }

    fn body_len(&self) -> usize {
        self.encoded_len()
    }

    fn encode_body(&self, b: &mut BytesMut) {
        self.encode(b);
    }

    fn decode_body(_kind: u8, r: &mut Reader, limits: &Limits) -> Result<Self, DecodeError> {
        Self::decode(r, limits)
    }
}
