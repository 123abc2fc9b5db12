//! Detector messages: heartbeats on the control class, and the notice that tells a suspected
//! rank to refute.

use bytes::BufMut;

use crate::tree::Rank;
use crate::wire::{Codec, DecodeError, Limits, Reader};

/// Subject to observer, every `detect.period`: "I am alive as this incarnation".
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeartbeatMsg {
    /// The sender's incarnation (raised to refute a suspicion).
    pub incarnation: u64,
    /// The sender's heartbeat counter.
    pub seq: u64,
}

/// Observer to subject: "I suspect you as this incarnation"; the subject refutes by raising its
/// incarnation and heartbeating at once.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SuspectMsg {
    /// The suspected rank (the receiver).
    pub subject: Rank,
    /// The incarnation suspected.
    pub incarnation: u64,
}

impl Codec for HeartbeatMsg {
    fn encoded_len(&self) -> usize {
        16
    }
    fn encode(&self, b: &mut impl BufMut) {
        b.put_u64(self.incarnation);
        b.put_u64(self.seq);
    }
    fn decode(r: &mut Reader, _limits: &Limits) -> Result<Self, DecodeError> {
        Ok(Self {
            incarnation: crate::wire::counter(r.u64()?)?,
            seq: crate::wire::counter(r.u64()?)?,
        })
    }
}

impl Codec for SuspectMsg {
    fn encoded_len(&self) -> usize {
        12
    }
    fn encode(&self, b: &mut impl BufMut) {
        b.put_u32(self.subject.0);
        b.put_u64(self.incarnation);
    }
    fn decode(r: &mut Reader, _limits: &Limits) -> Result<Self, DecodeError> {
        Ok(Self {
            subject: r.rank()?,
            incarnation: crate::wire::counter(r.u64()?)?,
        })
    }
}

crate::message_family! { Detect =>
    /// Heartbeat failure-detector messages (kinds 30–31).
    pub enum DetectMsg {
        /// Heartbeat, subject to observer ([`HeartbeatMsg`]).
        Heartbeat(HeartbeatMsg) = 30, Control, Heartbeat, "heartbeat";
        /// Suspicion notice, observer to subject ([`SuspectMsg`]).
        Suspect(SuspectMsg) = 31, Control, Suspect, "suspect";
    }
}
