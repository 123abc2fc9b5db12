//! What the node tells the application.

use bytes::Bytes;

use crate::tree::{Rank, ViewDelta};

/// An application-visible event, drained with [`Node::poll_event`](crate::Node::poll_event).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Event {
    /// A flood (the skeleton's test protocol) reached this rank, exactly once per (origin, id)
    /// while the id is remembered.
    FloodDelivered {
        /// Who started it.
        origin: Rank,
        /// Its per-origin id.
        id: u64,
        /// Tree links it crossed to get here.
        hops: u16,
        /// The application bytes.
        payload: Bytes,
    },
    /// This rank's tree view changed (a repair, a grow, root failover, or its own death).
    ViewChanged(ViewDelta),
}
