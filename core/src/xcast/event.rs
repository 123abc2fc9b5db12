//! What reliable broadcast tells the application.

use bytes::Bytes;

use crate::tree::Rank;

/// What reliable broadcast tells the application. Nested in [`Event`](crate::Event).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum XcastEvent {
    /// An xcast op reached this rank: exactly once per op, in op-id order, at every survivor
    /// (the origin included).
    Delivered {
        /// Root-assigned op id.
        op: u64,
        /// The originating rank.
        origin: Rank,
        /// The origin's sequence number (as returned by [`Node::xcast`](crate::Node::xcast)).
        seq: u64,
        /// Application tag.
        tag: u16,
        /// The broadcast bytes.
        payload: Bytes,
    },
    /// At the origin: a broadcast it started is delivered at every survivor. Exactly once per
    /// broadcast.
    Completed {
        /// Root-assigned op id.
        op: u64,
        /// The origin's sequence number.
        seq: u64,
    },
    /// At the root: an application op completed everywhere (once per op per root; after a root
    /// failover the new root may report again an op whose completion the old root reported).
    RootCompleted {
        /// Op id.
        op: u64,
        /// The originating rank.
        origin: Rank,
        /// The origin's sequence number.
        seq: u64,
    },
}
