//! The detector's timer keys: one heartbeat timer, and per-subject typed timers.

use crate::tree::Rank;

/// Detector timers, nested in [`TimerKey::Detect`](crate::TimerKey::Detect). Per-subject keys
/// carry the rank, so re-arming one subject's deadline never disturbs another's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum DetectTimer {
    /// Send the next round of heartbeats.
    Beat,
    /// The subject has been silent for `detect.timeout`.
    Silent(Rank),
    /// The subject's refutation window ended.
    Refute(Rank),
}
