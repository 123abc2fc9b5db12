//! What the node tells the application.

use bytes::Bytes;

use crate::relm::Uid;
use crate::tree::{Rank, RankSet, ViewDelta};

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
    /// An xcast op reached this rank: exactly once per op, in op-id order, at every survivor
    /// (the origin included).
    XcastDelivered {
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
    XcastCompleted {
        /// Root-assigned op id.
        op: u64,
        /// The origin's sequence number.
        seq: u64,
    },
    /// At the root: an application op completed everywhere (once per op per root; after a root
    /// failover the new root may report again an op whose completion the old root reported).
    XcastRootCompleted {
        /// Op id.
        op: u64,
        /// The originating rank.
        origin: Rank,
        /// The origin's sequence number.
        seq: u64,
    },
    /// The root's global failure notice: these ranks are dead, as of this epoch, at every
    /// survivor in the same op order.
    FailureConfirmed {
        /// The root's failure epoch.
        epoch: u64,
        /// Newly confirmed dead ranks.
        ranks: RankSet,
    },
    /// A reliable message reached this rank (its destination): exactly once, in uid order per
    /// source, while both ends live.
    RelmDelivered {
        /// The sending rank.
        src: Rank,
        /// The message's uid in the (src, this rank) chain.
        uid: Uid,
        /// Application tag.
        tag: u16,
        /// Application bytes.
        payload: Bytes,
    },
    /// At the origin: every message to `dst` up to and including `upto` is delivered there
    /// (cumulative; each uid is covered by exactly one such event). Window space is free again.
    RelmAcked {
        /// The destination.
        dst: Rank,
        /// The highest uid now confirmed.
        upto: Uid,
    },
    /// At the origin: `dst` died with `count` messages (uids `first`, `first.next()`, ... in
    /// chain order) not confirmed delivered. They may or may not have been delivered before the
    /// death; their memory is released everywhere.
    RelmFailed {
        /// The dead destination.
        dst: Rank,
        /// The first unconfirmed uid.
        first: Uid,
        /// How many consecutive uids from `first`.
        count: u32,
    },
    /// At a destination: `src` died; `discarded` messages from it that arrived out of order
    /// (after a gap that can no longer be filled) were dropped undelivered.
    RelmSourceLost {
        /// The dead source.
        src: Rank,
        /// Messages dropped.
        discarded: u32,
    },
    /// A peer sent the same message identity with different bytes: a protocol violation the
    /// embedder should treat as fatal for the cluster (the frame was dropped).
    RelmCollision {
        /// The chain's source.
        src: Rank,
        /// The chain's destination.
        dst: Rank,
        /// The uid.
        uid: Uid,
    },
    /// This rank's tree view changed (a repair, a grow, root failover, or its own death).
    ViewChanged(ViewDelta),
}
