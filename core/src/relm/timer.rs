//! The RELM machine's timer keys.

/// RELM timers, nested in [`TimerKey::Relm`](crate::TimerKey::Relm).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum RelmTimer {
    /// Send the coalesced ACKs and probes.
    Flush,
    /// Evict expired relay caches and idle relay records.
    Sweep,
    /// Probe destinations whose chains made no ACK progress.
    Retry,
    /// Send link updates still held back by gating.
    Gate,
}
