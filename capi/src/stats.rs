//! `lifeline_stats`: the node's counters, flattened, for a caller-allocated struct.

use lifeline_core::Stats as CoreStats;

/// The node's monotonic counters (the core's `Stats`, flattened: machine sections are
/// prefixed). Fields are only ever appended; `lifeline_node_stats` takes the caller's
/// `sizeof(lifeline_stats)` and writes no more than that, so a program built against an older
/// header keeps working.
#[repr(C)]
#[derive(Clone, Debug, Default, PartialEq, Eq)]
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
    /// Link-down reports with soft evidence only (reset, timeout, close) while the detector runs:
    /// never a repair.
    pub soft_link_downs: u64,
    /// Dropped input: this rank is known dead (evicted) and processes nothing.
    pub dropped_self_dead: u64,
    /// Dropped input: a message names an origin outside the span, dead, or impossible (a flood or
    /// relay from this rank itself, a relay of a tag only the root broadcasts).
    pub dropped_bad_origin: u64,
    /// (flood) Flood frames for an id already delivered.
    pub flood_duplicates: u64,
    /// (flood) Flood ids forgotten early because `flood_max` was reached.
    pub flood_forgotten: u64,
    /// (membership) Lineage or adoption notices naming a rank already known dead (the sender is
    /// behind).
    pub membership_stale: u64,
    /// (membership) Lineage or adoption notices no set of deaths explains, and delivered global
    /// failure notices whose payload does not decode.
    pub membership_inconsistent: u64,
    /// (membership) Evidence (one observer about one subject) this rank sent up the tree, its own
    /// and its descendants'.
    pub membership_alerts_out: u64,
    /// (membership) Evidence received as the subject's coordinator (counted or not).
    pub membership_alerts_in: u64,
    /// (membership) Evidence received for another coordinator and merged into this rank's next
    /// batch up.
    pub membership_alerts_relayed: u64,
    /// (membership) Evidence refused: a subject or observer already removed, an observer that does
    /// not watch the subject, an old incarnation, or evidence past the relay limit.
    pub membership_alerts_stale: u64,
    /// (membership) Ranks this coordinator removed on its observers' evidence.
    pub membership_removed_on_evidence: u64,
    /// (membership) Decisions held back by a subject in flux.
    pub membership_decisions_deferred: u64,
    /// (membership) Decisions refused by the majority guard (they would have removed half the
    /// members within `membership.majority_window`: this coordinator is probably the one cut off).
    pub membership_decisions_refused_minority: u64,
    /// (membership) Removals the root flooded again: down evidence arrived about a rank it holds
    /// removed (the sender missed the decision's flood).
    pub membership_removals_reflooded: u64,
    /// (membership) Decision frames sent (the coordinator's flood ahead of the ordered notice).
    pub membership_removed_out: u64,
    /// (membership) Fencing notices sent to removed ranks (frames answered, and dials refused with
    /// the verdict "removed" through `lifeline_node_fence_verdict`).
    pub membership_evicted_sent: u64,
    /// (membership) Gray-timeout reports sent (a tree link down past `membership.gray_timeout`).
    pub membership_unreachable_out: u64,
    /// (membership) Gray-timeout reports received as coordinator.
    pub membership_unreachable_in: u64,
    /// (membership) Dials of this rank refused with the verdict "removed"
    /// (`lifeline_node_handle_fenced`).
    pub membership_fenced_dials_in: u64,
    /// (membership) Refused dials this rank reported to the subject's coordinator (detector on:
    /// a refused dial is corroborated before a removal, never a verdict on its own).
    pub membership_refusals_out: u64,
    /// (membership) Refused-dial reports received as coordinator (its own included).
    pub membership_refusals_in: u64,
    /// (membership) Ranks asked to dial a subject at once (a refused dial reported by one rank).
    pub membership_probes_out: u64,
    /// (membership) Refused-dial reports refuted: the subject answered a probe.
    pub membership_refusals_refuted: u64,
    /// (membership) Refused-dial reports dropped after `membership.corroborate_timeout`, neither
    /// corroborated nor refuted (the subject's observers decide).
    pub membership_refusals_unconfirmed: u64,
    /// (membership) Subjects whose removal the coordinator held because down evidence arrived
    /// against a large share of its members within `membership.overload_window`.
    pub membership_decisions_held_overload: u64,
    /// (xcast) Xcast frames from a rank that is not the expected neighbour, ACKs for unknown ops
    /// or rounds, and other stale protocol input.
    pub xcast_stale: u64,
    /// (xcast) Relays the root had already numbered (retries).
    pub xcast_duplicate_relays: u64,
    /// (xcast) Relays the root postponed (a gap in the origin's sequence, or a full window).
    pub xcast_deferred_relays: u64,
    /// (xcast) Forwards for ops already done here (answered with an immediate ACK).
    pub xcast_duplicate_forwards: u64,
    /// (xcast) Ops re-issued under a new id after a root failover and already delivered here.
    pub xcast_duplicate_ops: u64,
    /// (xcast) Completion reports for broadcasts already reported complete.
    pub xcast_duplicate_completions: u64,
    /// (xcast) Relay re-sends and completion queries made by the retry timer.
    pub xcast_retries: u64,
    /// (xcast) Ops refused because their id lies far beyond any window a root could have numbered.
    pub xcast_out_of_window: u64,
    /// (xcast) A forward whose id names a different op than the one held (must stay 0).
    pub xcast_conflicts: u64,
    /// (xcast) Ops gathered from children during a root-failover recovery.
    pub xcast_recovered_ops: u64,
    /// (xcast) Op ids a new root filled with no-ops (nobody alive held them).
    pub xcast_noop_fills: u64,
    /// (xcast) Ops a late joiner adopted as complete without receiving them.
    pub xcast_adopted_as_done: u64,
    /// (relm) RELM messages this rank originated (self-sends included).
    pub relm_sent: u64,
    /// (relm) RELM messages delivered to this rank's application.
    pub relm_delivered: u64,
    /// (relm) RELM messages confirmed at this origin by ACKs.
    pub relm_acked: u64,
    /// (relm) RELM frames of every kind queued here (data, ACK/probe, request, link update).
    pub relm_frames_out: u64,
    /// (relm) RELM messages forwarded as a relay (originals and replays).
    pub relm_forwarded: u64,
    /// (relm) RELM messages re-sent in answer to a replay request (from a relay cache or the
    /// origin).
    pub relm_replays: u64,
    /// (relm) RELM replay requests sent by this rank as a destination.
    pub relm_requests: u64,
    /// (relm) RELM messages that arrived again after delivery (dropped, re-acknowledged).
    pub relm_duplicates: u64,
    /// (relm) RELM messages held because an earlier uid of their chain was missing.
    pub relm_buffered: u64,
    /// (relm) RELM messages refused because their uid lies beyond the window.
    pub relm_out_of_window: u64,
    /// (relm) RELM frames or entries that are stale or impossible here (ACKs for nothing
    /// outstanding, probes or data for a chain this rank is not on, link updates from
    /// non-neighbours).
    pub relm_stale: u64,
    /// (relm) RELM link updates sent.
    pub relm_link_updates: u64,
    /// (relm) RELM link updates refused for a depth stamp that is not this rank's ± 1, or from a
    /// rank that is not a tree neighbour.
    pub relm_link_rejected: u64,
    /// (relm) Gated link updates sent by the backstop timer instead of the gating rule.
    pub relm_gate_timeouts: u64,
    /// (relm) Probes an origin sent because a chain made no ACK progress for `relm_retry_ns`.
    pub relm_retry_probes: u64,
    /// (relm) Relay cache entries evicted by time or count before their ACK passed.
    pub relm_cache_evicted: u64,
    /// (relm) Relay records dropped after idling for twice `relm_retry_ns` without an ACK.
    pub relm_records_expired: u64,
    /// (relm) Same identity, different bytes (each also reported as an event).
    pub relm_collisions: u64,
    /// (relm) Messages reported failed to the application because their destination died.
    pub relm_failed: u64,
    /// (detect) Heartbeats sent to this rank's observers (refutations included).
    pub detect_heartbeats_out: u64,
    /// (detect) Heartbeats received from this rank's subjects.
    pub detect_heartbeats_in: u64,
    /// (detect) Subjects this rank began to suspect (silent for `detect.timeout`).
    pub detect_suspicions: u64,
    /// (detect) Suspicions lifted by a heartbeat with a higher incarnation.
    pub detect_refuted: u64,
    /// (detect) Suspicions that stood for the whole refutation window (soft evidence).
    pub detect_unresponsive: u64,
    /// (detect) Standing alerts sent again (every period until the subject's fate is decided).
    pub detect_alerts_resent: u64,
    /// (detect) Accusations withheld because this rank's own timers ran late (it was frozen).
    pub detect_self_freeze_skips: u64,
    /// (detect) Times this rank raised its incarnation to refute a suspicion of itself.
    pub detect_self_refutations: u64,
    /// (detect) Suspicion notices sent again to a subject whose suspicion stands (the first may
    /// have been lost with a connection; a subject that never hears it cannot refute).
    pub detect_suspects_resent: u64,
    /// (detect) Points added to the local health score (evidence of this rank's own trouble: two
    /// observers suspecting it at about the same time, or its heartbeat timer firing late).
    pub detect_health_raised: u64,
    /// (detect) Points removed from the local health score (after `detect.health_recover` healthy
    /// rounds each).
    pub detect_health_lowered: u64,
    /// (detect) Silence timeouts and refutation windows extended because the local health score
    /// rose after they were armed (accusations a sick observer put off).
    pub detect_health_held: u64,
    /// (detect) Heartbeats or suspicion notices from ranks this rank does not watch or is not
    /// watched by, or about another rank (dropped).
    pub detect_stale: u64,
    /// (detect) Silence timers held because the subject was never heard from and the start-up
    /// grace (`detect_startup_grace_ns`) was not over.
    pub detect_startup_holds: u64,
    /// (join) Join requests received from joiners (as their contact).
    pub join_requests_in: u64,
    /// (join) Join requests forwarded to the coordinator (re-forwards included).
    pub join_forwards_out: u64,
    /// (join) Forwarded join requests received (as coordinator, or stale).
    pub join_forwards_in: u64,
    /// (join) Waiting requests forwarded again because the coordinator changed.
    pub join_reforwards: u64,
    /// (join) Admissions answered to joiners (`lifeline_node_poll_join_reply`).
    pub join_accepts_sent: u64,
    /// (join) "Retry" answers to joiners (busy, timed out, not a member).
    pub join_retries_sent: u64,
    /// (join) Requests that waited past `join_timeout_ns` here.
    pub joins_timed_out: u64,
    /// (join) Coordinator: joins refused because its queue was full.
    pub joins_refused_busy: u64,
    /// (join) Coordinator: joiners admitted.
    pub joins_admitted: u64,
    /// (join) Coordinator: views that admitted joiners.
    pub join_views: u64,
    /// (join) Join requests that did not decode (`lifeline_node_handle_join_request` answered
    /// `LIFELINE_ERR_MALFORMED`).
    pub join_requests_malformed: u64,
    /// (start-up) Check-ins this rank sent (its own, re-sends included; `membership_check_in`).
    pub startup_check_ins_out: u64,
    /// (start-up) Check-ins received (as coordinator, or stale: see `startup_check_ins_stale`).
    pub startup_check_ins_in: u64,
    /// (start-up) Check-ins refused: this rank is not the coordinator, the sender is already in,
    /// or it was launched with another span.
    pub startup_check_ins_stale: u64,
    /// (start-up) Check-in notices this rank broadcast as coordinator (start-up view changes).
    pub startup_check_in_views: u64,
    /// (start-up) Check-in notices applied here.
    pub startup_check_in_notices: u64,
    /// (start-up) Ranks this coordinator removed at `membership_startup_timeout_ns` because
    /// they never checked in (`LIFELINE_CAUSE_NEVER_JOINED`).
    pub startup_never_joined_removed: u64,
    /// (shrink) Shrink campaigns this rank asked for (`lifeline_node_shrink`).
    pub shrink_campaigns_requested: u64,
    /// (shrink) Campaigns this rank asked for that completed
    /// (`LIFELINE_EVENT_CAMPAIGN_COMPLETED`).
    pub shrink_campaigns_completed: u64,
    /// (shrink) Campaigns this rank asked for that failed (`LIFELINE_EVENT_CAMPAIGN_FAILED`).
    pub shrink_campaigns_failed: u64,
    /// (shrink) Coordinator: shrink orders broadcast (each may carry several campaigns).
    pub shrink_orders: u64,
    /// (shrink) Coordinator: departure notices broadcast (one view change each).
    pub shrink_left_views: u64,
    /// (shrink) Coordinator: a shrink batch held back by an open join or check-in batch, or a
    /// shrink still open (counted per hold).
    pub shrink_batches_waited: u64,
    /// (shrink) Coordinator: a join batch held back by an open shrink (counted per hold).
    pub shrink_joins_waited: u64,
    /// (shrink) Shrink requests dropped: the coordinator's queue was full, or this rank is not the
    /// coordinator.
    pub shrink_requests_dropped: u64,
    /// (shrink) A departing rank's link lost, dial refused or silence reported: a departure, not a
    /// failure (no alert, no decision), counted apart from failures.
    pub shrink_departures_observed: u64,
    /// (shrink) Ranks removed here by a departure notice (`LIFELINE_CAUSE_LEFT`).
    pub shrink_departed: u64,
    /// (shrink) Own alerts and refutations suppressed while leaving.
    pub shrink_leaving_suppressed: u64,
    /// (shrink) This rank entered leaving mode (a shrink order named it).
    pub shrink_leaving_entered: u64,
    /// (shrink) A leaving rank acknowledged the order before its reliable sends drained (the drain
    /// bound passed).
    pub shrink_drain_timeouts: u64,
    /// (revoke) Revokes this rank started (new (group, epoch) pairs to `lifeline_node_revoke`).
    pub revoke_started: u64,
    /// (revoke) `LIFELINE_EVENT_REVOKED` events emitted (this rank's own revokes included).
    pub revoke_delivered: u64,
    /// (revoke) Notices forwarded to overlay neighbours.
    pub revoke_forwarded: u64,
    /// (revoke) Notices for a (group, epoch) already revoked here: dropped.
    pub revoke_duplicates: u64,
    /// (revoke) Notices for an epoch older than the newest revoked here for the group: dropped.
    pub revoke_stale: u64,
    /// (revoke) Groups forgotten because `revoke_max_groups` was reached (oldest first).
    pub revoke_forgotten: u64,
    /// (membership) Refused-dial reports about a rank never heard from (an expected rank that has
    /// not checked in): not joined yet is not dead, no case opened (start-up's bound decides).
    pub membership_refusals_not_joined: u64,
    /// (join) Coordinator: retries answered with the rank their contact remembered admitting, an
    /// admission this coordinator never applied (it was admitted in or after that view).
    pub joins_known_by_contact: u64,
}

impl Stats {
    /// Every counter of `node`: its `Stats`, its join, corroboration, start-up, shrink and
    /// revoke counters (kept apart in the core, with their state).
    pub(crate) fn of(node: &lifeline_core::Node) -> Self {
        let j = node.join_stats();
        let c = node.corroboration_stats();
        let st = node.startup_stats();
        let sh = node.shrink_stats();
        let rv = node.revoke_stats();
        Self {
            shrink_campaigns_requested: sh.campaigns_requested,
            shrink_campaigns_completed: sh.campaigns_completed,
            shrink_campaigns_failed: sh.campaigns_failed,
            shrink_orders: sh.shrink_orders,
            shrink_left_views: sh.left_views,
            shrink_batches_waited: sh.shrinks_waited,
            shrink_joins_waited: sh.joins_waited,
            shrink_requests_dropped: sh.shrink_requests_dropped,
            shrink_departures_observed: sh.departures_observed,
            shrink_departed: sh.departed,
            shrink_leaving_suppressed: sh.leaving_suppressed,
            shrink_leaving_entered: sh.leaving_entered,
            shrink_drain_timeouts: sh.drain_timeouts,

            revoke_started: rv.started,
            revoke_delivered: rv.delivered,
            revoke_forwarded: rv.forwarded,
            revoke_duplicates: rv.duplicates,
            revoke_stale: rv.stale,
            revoke_forgotten: rv.forgotten,

            startup_check_ins_out: st.check_ins_out,
            startup_check_ins_in: st.check_ins_in,
            startup_check_ins_stale: st.check_ins_stale,
            startup_check_in_views: st.check_in_views,
            startup_check_in_notices: st.check_in_notices,
            startup_never_joined_removed: st.never_joined_removed,
            membership_refusals_out: c.refusals_out,
            membership_refusals_in: c.refusals_in,
            membership_probes_out: c.probes_out,
            membership_refusals_refuted: c.refusals_refuted,
            membership_refusals_unconfirmed: c.refusals_unconfirmed,
            membership_decisions_held_overload: c.decisions_held_overload,
            membership_refusals_not_joined: c.refusals_not_joined,
            joins_known_by_contact: j.joins_known_by_contact,
            join_requests_in: j.join_requests_in,
            join_forwards_out: j.join_forwards_out,
            join_forwards_in: j.join_forwards_in,
            join_reforwards: j.join_reforwards,
            join_accepts_sent: j.join_accepts_sent,
            join_retries_sent: j.join_retries_sent,
            joins_timed_out: j.joins_timed_out,
            joins_refused_busy: j.joins_refused_busy,
            joins_admitted: j.joins_admitted,
            join_views: j.join_views,
            join_requests_malformed: j.join_requests_malformed,
            ..Self::from(node.stats())
        }
    }
}

impl From<&CoreStats> for Stats {
    fn from(s: &CoreStats) -> Self {
        Self {
            frames_in: s.frames_in,
            frames_out: s.frames_out,
            dropped_unknown_kind: s.dropped_unknown_kind,
            dropped_stale_sender: s.dropped_stale_sender,
            dropped_unknown_peer: s.dropped_unknown_peer,
            dropped_decode_error: s.dropped_decode_error,
            dropped_over_limit: s.dropped_over_limit,
            dropped_outbox_full: s.dropped_outbox_full,
            dropped_events_full: s.dropped_events_full,
            suppressed_to_dead: s.suppressed_to_dead,
            stale_timers: s.stale_timers,
            spurious_timeouts: s.spurious_timeouts,
            lateral_link_downs: s.lateral_link_downs,
            soft_link_downs: s.soft_link_downs,
            dropped_self_dead: s.dropped_self_dead,
            dropped_bad_origin: s.dropped_bad_origin,
            flood_duplicates: s.flood.duplicates,
            flood_forgotten: s.flood.forgotten,
            membership_stale: s.membership.stale,
            membership_inconsistent: s.membership.inconsistent,
            membership_alerts_out: s.membership.alerts_out,
            membership_alerts_in: s.membership.alerts_in,
            membership_alerts_relayed: s.membership.alerts_relayed,
            membership_alerts_stale: s.membership.alerts_stale,
            membership_removed_on_evidence: s.membership.removed_on_evidence,
            membership_decisions_deferred: s.membership.decisions_deferred,
            membership_decisions_refused_minority: s.membership.decisions_refused_minority,
            membership_removals_reflooded: s.membership.removals_reflooded,
            membership_removed_out: s.membership.removed_out,
            membership_evicted_sent: s.membership.evicted_sent,
            membership_unreachable_out: s.membership.unreachable_out,
            membership_unreachable_in: s.membership.unreachable_in,
            membership_fenced_dials_in: s.membership.fenced_dials_in,
            xcast_stale: s.xcast.stale,
            xcast_duplicate_relays: s.xcast.duplicate_relays,
            xcast_deferred_relays: s.xcast.deferred_relays,
            xcast_duplicate_forwards: s.xcast.duplicate_forwards,
            xcast_duplicate_ops: s.xcast.duplicate_ops,
            xcast_duplicate_completions: s.xcast.duplicate_completions,
            xcast_retries: s.xcast.retries,
            xcast_out_of_window: s.xcast.out_of_window,
            xcast_conflicts: s.xcast.conflicts,
            xcast_recovered_ops: s.xcast.recovered_ops,
            xcast_noop_fills: s.xcast.noop_fills,
            xcast_adopted_as_done: s.xcast.adopted_as_done,
            relm_sent: s.relm.sent,
            relm_delivered: s.relm.delivered,
            relm_acked: s.relm.acked,
            relm_frames_out: s.relm.frames_out,
            relm_forwarded: s.relm.forwarded,
            relm_replays: s.relm.replays,
            relm_requests: s.relm.requests,
            relm_duplicates: s.relm.duplicates,
            relm_buffered: s.relm.buffered,
            relm_out_of_window: s.relm.out_of_window,
            relm_stale: s.relm.stale,
            relm_link_updates: s.relm.link_updates,
            relm_link_rejected: s.relm.link_rejected,
            relm_gate_timeouts: s.relm.gate_timeouts,
            relm_retry_probes: s.relm.retry_probes,
            relm_cache_evicted: s.relm.cache_evicted,
            relm_records_expired: s.relm.records_expired,
            relm_collisions: s.relm.collisions,
            relm_failed: s.relm.failed,
            detect_heartbeats_out: s.detect.heartbeats_out,
            detect_heartbeats_in: s.detect.heartbeats_in,
            detect_suspicions: s.detect.suspicions,
            detect_refuted: s.detect.refuted,
            detect_unresponsive: s.detect.unresponsive,
            detect_alerts_resent: s.detect.alerts_resent,
            detect_self_freeze_skips: s.detect.self_freeze_skips,
            detect_self_refutations: s.detect.self_refutations,
            detect_suspects_resent: s.detect.suspects_resent,
            detect_health_raised: s.detect.health_raised,
            detect_health_lowered: s.detect.health_lowered,
            detect_health_held: s.detect.health_held,
            detect_stale: s.detect.stale,
            detect_startup_holds: s.detect.startup_holds,
            // The join, corroboration and start-up counters live apart in the core: `Stats::of`
            // adds them.
            ..Self::default()
        }
    }
}
