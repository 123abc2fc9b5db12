//! The flood machine's timer keys.

/// Flood timers, nested in [`TimerKey::Flood`](crate::TimerKey::Flood).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum FloodTimer {
    /// Forget flood ids whose linger time has passed.
    Sweep,
}
