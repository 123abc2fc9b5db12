//! Reliable messaging counters.

/// Reliable messaging counters. Monotonic; read through [`Node::stats`](crate::Node::stats).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RelmStats {
    /// RELM messages this rank originated (self-sends included).
    pub sent: u64,
    /// RELM messages delivered to this rank's application.
    pub delivered: u64,
    /// RELM messages confirmed at this origin by ACKs.
    pub acked: u64,
    /// RELM frames of every kind queued here (data, ACK/probe, request, link update).
    pub frames_out: u64,
    /// RELM messages forwarded as a relay (originals and replays).
    pub forwarded: u64,
    /// RELM messages re-sent in answer to a replay request (from a relay cache or the origin).
    pub replays: u64,
    /// RELM replay requests sent by this rank as a destination.
    pub requests: u64,
    /// RELM messages that arrived again after delivery (dropped, re-acknowledged).
    pub duplicates: u64,
    /// RELM messages held because an earlier uid of their chain was missing.
    pub buffered: u64,
    /// RELM messages refused because their uid lies beyond the window.
    pub out_of_window: u64,
    /// RELM frames or entries that are stale or impossible here (ACKs for nothing outstanding,
    /// probes or data for a chain this rank is not on, link updates from non-neighbours).
    pub stale: u64,
    /// RELM link updates sent.
    pub link_updates: u64,
    /// RELM link updates refused for a depth stamp that is not this rank's ± 1, or from a rank
    /// that is not a tree neighbour.
    pub link_rejected: u64,
    /// Gated link updates sent by the backstop timer instead of the gating rule.
    pub gate_timeouts: u64,
    /// Probes an origin sent because a chain made no ACK progress for `relm.retry`.
    pub retry_probes: u64,
    /// Relay cache entries evicted by time or count before their ACK passed.
    pub cache_evicted: u64,
    /// Relay records dropped after idling for twice `relm.retry` without an ACK.
    pub records_expired: u64,
    /// Same identity, different bytes (each also reported as an event).
    pub collisions: u64,
    /// Messages reported failed to the application because their destination died.
    pub failed: u64,
}
