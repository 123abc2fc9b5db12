//! The xcast machine's timer keys.

/// Xcast timers, nested in [`TimerKey::Xcast`](crate::TimerKey::Xcast).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum XcastTimer {
    /// Re-send unnumbered relays and query missing completions.
    Retry,
}
