//! The per-node step, shared by [`Net`](super::Net) and the simulator: feed one input, then drain
//! the node to empty (the driving contract's rules 2 to 4).

use bytes::Bytes;

use crate::tree::Rank;
use crate::{Event, Instant, LinkCause, Node, TimerKey, Transmit};

/// One input to a node, besides application commands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Input {
    /// A whole frame from `from` ([`Node::handle_frame`]).
    Frame {
        /// The sending rank.
        from: Rank,
        /// The frame, envelope included.
        frame: Bytes,
    },
    /// A link to this peer is up ([`Node::handle_link_up`]).
    LinkUp(Rank),
    /// The link to this peer is lost, and why ([`Node::handle_link_down`]).
    LinkDown {
        /// The peer.
        peer: Rank,
        /// The evidence.
        cause: LinkCause,
    },
    /// The timer passed ([`Node::handle_timeout`]).
    Timeout,
}

impl Input {
    /// Feeds the input to `node` at `now`.
    pub fn apply(self, node: &mut Node, now: Instant) {
        match self {
            Self::Frame { from, frame } => node.handle_frame(now, from, frame),
            Self::LinkUp(peer) => node.handle_link_up(now, peer),
            Self::LinkDown { peer, cause } => node.handle_link_down(now, peer, cause),
            Self::Timeout => node.handle_timeout(now),
        }
    }
}

/// Everything a node had queued, drained to empty, and its timer afterwards.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Outputs {
    /// Its transmits, in order.
    pub transmits: Vec<Transmit>,
    /// Its application events, in order.
    pub events: Vec<Event>,
    /// Its deadline after the drain ([`Node::poll_timeout`]).
    pub timeout: Option<(Instant, TimerKey)>,
}

/// Drains a node's transmits and events to empty and reads its timer (contract rules 3 and 4).
pub fn drain(node: &mut Node) -> Outputs {
    let transmits = std::iter::from_fn(|| node.poll_transmit()).collect();
    let events = std::iter::from_fn(|| node.poll_event()).collect();
    Outputs {
        transmits,
        events,
        timeout: node.poll_timeout(),
    }
}

/// The driving contract's step: feeds one input at `now`, then drains.
pub fn step(node: &mut Node, now: Instant, input: Input) -> Outputs {
    input.apply(node, now);
    drain(node)
}
