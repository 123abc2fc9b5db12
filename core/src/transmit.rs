//! What the node hands an adapter to send: a frame, its destination and its traffic class.

use bytes::Bytes;

use crate::tree::Rank;

/// Traffic class: adapters carry control frames on a channel bulk data cannot starve (a
/// separate connection, QUIC stream or queue pair).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Class {
    /// Heartbeats, membership, failure notices, ACKs: small and latency-critical.
    Control,
    /// Application payloads.
    Data,
}

/// One frame for the adapter to send.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transmit {
    /// Destination rank (a tree neighbour or a lateral peer); never a rank known dead, but for
    /// a fencing notice ([`Self::is_fence`]).
    pub to: Rank,
    /// Which channel to use.
    pub class: Class,
    /// A whole frame, envelope included.
    pub frame: Bytes,
    /// Queued as a fencing notice (flagged when queued, never read back from the frame).
    fence: bool,
    /// Queued to go to `to` itself, never through a relay around a gray link (a relay
    /// envelope: a probe, or one being forwarded).
    direct: bool,
}

impl Transmit {
    /// An ordinary frame to `to` on `class` (not a fencing notice).
    pub fn new(to: Rank, class: Class, frame: Bytes) -> Self {
        Self {
            to,
            class,
            frame,
            fence: false,
            direct: false,
        }
    }

    /// A frame that goes to `to` itself even while the link to `to` is gray (relay envelopes:
    /// they are never wrapped again).
    pub(crate) fn direct(to: Rank, class: Class, frame: Bytes) -> Self {
        Self {
            direct: true,
            ..Self::new(to, class, frame)
        }
    }

    /// A fencing notice to the removed rank `to`: the one frame ever addressed to a rank known
    /// dead.
    pub(crate) fn fence(to: Rank, class: Class, frame: Bytes) -> Self {
        Self {
            fence: true,
            ..Self::new(to, class, frame)
        }
    }

    /// Whether this is a fencing notice to a removed rank (the only frame ever addressed to a
    /// rank known dead; an adapter delivers it if it still can, and drops it otherwise). The
    /// node sets the flag when the notice is queued.
    pub fn is_fence(&self) -> bool {
        self.fence
    }

    /// Whether the node may send this frame through a relay when the link to `to` is gray
    /// (every frame but fencing notices and relay envelopes).
    pub(crate) fn relayable(&self) -> bool {
        !self.fence && !self.direct
    }
}
