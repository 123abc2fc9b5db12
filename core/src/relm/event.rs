//! What reliable messaging tells the application.

use bytes::Bytes;

use super::Uid;
use crate::tree::Rank;

/// What reliable messaging tells the application. Nested in [`Event`](crate::Event).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RelmEvent {
    /// A reliable message reached this rank (its destination): exactly once, in uid order per
    /// source, while both ends live.
    Delivered {
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
    Acked {
        /// The destination.
        dst: Rank,
        /// The highest uid now confirmed.
        upto: Uid,
    },
    /// At the origin: `dst` died with `count` messages (uids `first`, `first.next()`, ... in
    /// chain order) not confirmed delivered. They may or may not have been delivered before the
    /// death; their memory is released everywhere.
    Failed {
        /// The dead destination.
        dst: Rank,
        /// The first unconfirmed uid.
        first: Uid,
        /// How many consecutive uids from `first`.
        count: u32,
    },
    /// At a destination: `src` died; `discarded` messages from it that arrived out of order
    /// (after a gap that can no longer be filled) were dropped undelivered.
    SourceLost {
        /// The dead source.
        src: Rank,
        /// Messages dropped.
        discarded: u32,
    },
    /// A peer sent the same message identity with different bytes: a protocol violation the
    /// embedder should treat as fatal for the cluster (the frame was dropped).
    Collision {
        /// The chain's source.
        src: Rank,
        /// The chain's destination.
        dst: Rank,
        /// The uid.
        uid: Uid,
    },
}
