//! What the flood test protocol tells the application.

use bytes::Bytes;

use crate::tree::Rank;

/// What the flood test protocol tells the application. Nested in [`Event`](crate::Event).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum FloodEvent {
    /// A flood (the skeleton's test protocol) reached this rank, exactly once per (origin, id)
    /// while the id is remembered.
    Delivered {
        /// Who started it.
        origin: Rank,
        /// Its per-origin id.
        id: u64,
        /// Tree links it crossed to get here.
        hops: u16,
        /// The application bytes.
        payload: Bytes,
    },
}
