//! Counters: every dropped input and every bound hit is counted here, never silent.

/// Per-node counters. Monotonic; read with [`Node::stats`](crate::Node::stats).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// Frames accepted by `handle_frame` (decoded and dispatched).
    pub frames_in: u64,
    /// Frames queued for transmission.
    pub frames_out: u64,
    /// Dropped input: the envelope's kind byte names no message.
    pub dropped_unknown_kind: u64,
    /// Dropped input: the sender is a rank known dead (a stale incarnation or a late frame).
    pub dropped_stale_sender: u64,
    /// Dropped input: the sender is outside the span.
    pub dropped_unknown_peer: u64,
    /// Dropped input: the frame failed to decode (truncated, trailing bytes, bad field, version).
    pub dropped_decode_error: u64,
    /// Dropped input: the frame or a nested length is over its configured limit.
    pub dropped_over_limit: u64,
    /// Dropped output: the transmit queue was at `max_transmits`.
    pub dropped_outbox_full: u64,
    /// Dropped output: the event queue was at `max_events`.
    pub dropped_events_full: u64,
    /// Suppressed output: a frame addressed to a rank known dead (never dialled).
    pub suppressed_to_dead: u64,
    /// Timer expiries whose generation token was stale (no-ops).
    pub stale_timers: u64,
    /// `handle_timeout` calls with nothing due (no-ops).
    pub spurious_timeouts: u64,
    /// Link-down reports for non-tree (lateral) peers: never a tree repair.
    pub lateral_link_downs: u64,
    /// Dropped input: this rank is known dead (evicted) and processes nothing.
    pub dropped_self_dead: u64,
    /// Dropped input: a message names an origin outside the span, dead, or impossible (a flood
    /// or relay from this rank itself, a relay of a tag only the root broadcasts).
    pub dropped_bad_origin: u64,
    /// Lineage or adoption notices naming a rank already known dead (the sender is behind).
    pub notices_stale: u64,
    /// Lineage or adoption notices no set of deaths explains, and delivered global failure
    /// notices whose payload does not decode.
    pub notices_inconsistent: u64,
    /// Xcast frames from a rank that is not the expected neighbour, ACKs for unknown ops or
    /// rounds, and other stale protocol input.
    pub xcast_stale: u64,
    /// Relays the root had already numbered (retries).
    pub xcast_duplicate_relays: u64,
    /// Relays the root postponed (a gap in the origin's sequence, or a full window).
    pub xcast_deferred_relays: u64,
    /// Forwards for ops already done here (answered with an immediate ACK).
    pub xcast_duplicate_forwards: u64,
    /// Ops re-issued under a new id after a root failover and already delivered here.
    pub xcast_duplicate_ops: u64,
    /// Completion reports for broadcasts already reported complete.
    pub xcast_duplicate_completions: u64,
    /// Relay re-sends and completion queries made by the retry timer.
    pub xcast_retries: u64,
    /// Ops refused because their id lies far beyond any window a root could have numbered.
    pub xcast_out_of_window: u64,
    /// A forward whose id names a different op than the one held (must stay 0).
    pub xcast_conflicts: u64,
    /// Ops gathered from children during a root-failover recovery.
    pub xcast_recovered_ops: u64,
    /// Op ids a new root filled with no-ops (nobody alive held them).
    pub xcast_noop_fills: u64,
    /// Ops a late joiner adopted as complete without receiving them.
    pub xcast_adopted_as_done: u64,
    /// Flood frames for an id already delivered.
    pub flood_duplicates: u64,
    /// Flood ids forgotten early because `max_floods` was reached.
    pub flood_forgotten: u64,
    /// RELM messages this rank originated (self-sends included).
    pub relm_sent: u64,
    /// RELM messages delivered to this rank's application.
    pub relm_delivered: u64,
    /// RELM messages confirmed at this origin by ACKs.
    pub relm_acked: u64,
    /// RELM frames of every kind queued here (data, ACK/probe, request, link update).
    pub relm_frames_out: u64,
    /// RELM messages forwarded as a relay (originals and replays).
    pub relm_forwarded: u64,
    /// RELM messages re-sent in answer to a replay request (from a relay cache or the origin).
    pub relm_replays: u64,
    /// RELM replay requests sent by this rank as a destination.
    pub relm_requests: u64,
    /// RELM messages that arrived again after delivery (dropped, re-acknowledged).
    pub relm_duplicates: u64,
    /// RELM messages held because an earlier uid of their chain was missing.
    pub relm_buffered: u64,
    /// RELM messages refused because their uid lies beyond the window.
    pub relm_out_of_window: u64,
    /// RELM frames or entries that are stale or impossible here (ACKs for nothing outstanding,
    /// probes or data for a chain this rank is not on, link updates from non-neighbours).
    pub relm_stale: u64,
    /// RELM link updates sent.
    pub relm_link_updates: u64,
    /// RELM link updates refused for a depth stamp that is not this rank's ± 1, or from a rank
    /// that is not a tree neighbour.
    pub relm_link_rejected: u64,
    /// Gated link updates sent by the backstop timer instead of the gating rule.
    pub relm_gate_timeouts: u64,
    /// Probes an origin sent because a chain made no ACK progress for `relm_retry`.
    pub relm_retry_probes: u64,
    /// Relay cache entries evicted by time or count before their ACK passed.
    pub relm_cache_evicted: u64,
    /// Relay records dropped after idling for twice `relm_retry` without an ACK.
    pub relm_records_expired: u64,
    /// Same identity, different bytes (each also reported as an event).
    pub relm_collisions: u64,
    /// Messages reported failed to the application because their destination died.
    pub relm_failed: u64,
}
