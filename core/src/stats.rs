//! Counters: every dropped input and every bound hit is counted here, never silent.
//!
//! Node-level counters (frames in and out, drops before a frame reaches a machine, timers) sit
//! at the top; each machine's own counters are nested (`stats.relm.replays`).

use crate::detect::DetectStats;
use crate::flood::FloodStats;
use crate::membership::MembershipStats;
use crate::relm::RelmStats;
use crate::xcast::XcastStats;

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
    /// Link-down reports with soft evidence only (reset, timeout, close) while the detector
    /// runs: never a repair.
    pub soft_link_downs: u64,
    /// Dropped input: this rank is known dead (evicted) and processes nothing.
    pub dropped_self_dead: u64,
    /// Dropped input: a message names an origin outside the span, dead, or impossible (a flood
    /// or relay from this rank itself, a relay of a tag only the root broadcasts).
    pub dropped_bad_origin: u64,
    /// The flood test protocol.
    pub flood: FloodStats,
    /// Failure knowledge (adoption and lineage notices, global notices).
    pub membership: MembershipStats,
    /// Reliable broadcast.
    pub xcast: XcastStats,
    /// Reliable messaging.
    pub relm: RelmStats,
    /// Heartbeat failure detector.
    pub detect: DetectStats,
}
