//! What the heartbeat failure detector tells the application.

use crate::tree::Rank;

/// What the heartbeat failure detector tells the application. Nested in
/// [`Event`](crate::Event). Advisory: only a view decided by membership changes the active
/// set; a data plane may use these to stop waiting on a rank early.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum DetectEvent {
    /// This rank, one of `rank`'s observers, heard nothing from it for `detect.timeout`.
    Suspect {
        /// The silent rank.
        rank: Rank,
        /// The incarnation last heard from it.
        incarnation: u64,
    },
    /// A suspected rank answered with a higher incarnation: it is alive.
    Refuted {
        /// The rank.
        rank: Rank,
        /// Its new incarnation.
        incarnation: u64,
    },
    /// A suspected rank did not refute within `detect.refute`: soft evidence against it.
    Unresponsive {
        /// The rank.
        rank: Rank,
        /// The incarnation suspected.
        incarnation: u64,
    },
}
