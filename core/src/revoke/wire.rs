//! The revoke flood's one message.

use bytes::BufMut;

use crate::tree::Rank;
use crate::wire::{Codec, DecodeError, Limits, Reader};

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

// The revoke machine's family is its one message (kind 50, control class: a "stop now" notice
// must not queue behind application data).
crate::single_kind_family!(
    /// A revoke notice ([`RevokeMsg`]).
    RevokeMsg = 50, Control, Revoke, "revoke"
);
