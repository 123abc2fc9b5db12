//! Failure-knowledge counters.

/// Failure-knowledge counters. Monotonic; read through [`Node::stats`](crate::Node::stats).
/// The corroboration and overload-hold counters are kept apart, with their state:
/// [`CorroborationStats`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct MembershipStats {
    /// Lineage or adoption notices naming a rank already known dead (the sender is behind).
    pub stale: u64,
    /// Lineage or adoption notices no set of deaths explains, and delivered global failure
    /// notices whose payload does not decode.
    pub inconsistent: u64,
    /// Evidence (one observer about one subject) this rank sent up the tree, its own and its
    /// descendants'.
    pub alerts_out: u64,
    /// Evidence received as the subject's coordinator (counted or not).
    pub alerts_in: u64,
    /// Evidence received for another coordinator and merged into this rank's next batch up.
    pub alerts_relayed: u64,
    /// Evidence refused: a subject or observer already removed, an observer that does not
    /// watch the subject, an old incarnation, or evidence past the relay limit.
    pub alerts_stale: u64,
    /// Ranks this coordinator removed on its observers' evidence.
    pub removed_on_evidence: u64,
    /// Decisions held back by a subject in flux.
    pub decisions_deferred: u64,
    /// Decisions refused by the majority guard (they would have removed half the members
    /// within `membership.majority_window`: this coordinator is probably the one cut off).
    pub decisions_refused_minority: u64,
    /// Removals the root flooded again: down evidence arrived about a rank it holds removed
    /// (the sender missed the decision's flood).
    pub removals_reflooded: u64,
    /// Decision frames sent (the coordinator's flood ahead of the ordered notice).
    pub removed_out: u64,
    /// Fencing notices sent to removed ranks (frames answered, and dials refused with the
    /// verdict "removed" through [`Node::fence_verdict`](crate::Node::fence_verdict)).
    pub evicted_sent: u64,
    /// Gray-timeout reports sent (a tree link down past `membership.gray_timeout`).
    pub unreachable_out: u64,
    /// Gray-timeout reports received as coordinator.
    pub unreachable_in: u64,
    /// Dials of this rank refused with the verdict "removed" ([`Node::handle_fenced`](crate::Node::handle_fenced)).
    pub fenced_dials_in: u64,
    /// Tree pings sent: a tree link carried nothing else from this rank for a while
    /// (`membership.gray_after`).
    pub tree_pings_out: u64,
    /// Tree links this rank declared gray itself: no frame from the peer for
    /// `membership.gray_after` (or the peer's probe said it hears nothing of this rank),
    /// before any link loss.
    pub gray_on_silence: u64,
}

/// Corroboration and overload-hold counters (refused dials, probes, held decisions). Read with
/// [`Node::corroboration_stats`](crate::Node::corroboration_stats); kept with the corroboration
/// state, which a rank allocates on first use (detector on: its first refused dial, report or
/// accusation; all zero before), so a node that never needs it carries none of them inline.
/// Monotonic.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CorroborationStats {
    /// Refused dials this rank reported to the subject's coordinator (detector on: a refused
    /// dial is corroborated before a removal, never a verdict on its own).
    pub refusals_out: u64,
    /// Refused-dial reports received as coordinator (its own included).
    pub refusals_in: u64,
    /// Ranks asked to dial a subject at once (a refused dial reported by one rank).
    pub probes_out: u64,
    /// Refused-dial reports refuted: the subject answered a probe.
    pub refusals_refuted: u64,
    /// Refused-dial reports dropped after `membership.corroborate_timeout`, neither
    /// corroborated nor refuted (the subject's observers decide).
    pub refusals_unconfirmed: u64,
    /// Refused-dial reports about a rank never heard from (an expected rank that has not
    /// checked in, nor been heard checking in, here at the coordinator): "not joined yet" is
    /// not dead, so no case is opened (start-up's bound decides about ranks that never come).
    pub refusals_not_joined: u64,
    /// Subjects whose removal the coordinator held because down evidence arrived against a
    /// large share of its members within `membership.overload_window` (counted once per
    /// subject and accusation).
    pub decisions_held_overload: u64,
}

/// Shrink-campaign counters. Read with [`Node::shrink_stats`](crate::Node::shrink_stats); kept
/// with the shrink state, which a rank allocates on first use (its first request, order or
/// departure), so a node that never takes part carries none of them inline. Monotonic.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ShrinkStats {
    /// Shrink campaigns this rank asked for ([`Node::shrink`](crate::Node::shrink)).
    pub campaigns_requested: u64,
    /// Campaigns this rank asked for that completed (`CampaignCompleted`).
    pub campaigns_completed: u64,
    /// Campaigns this rank asked for that failed (`CampaignFailed`).
    pub campaigns_failed: u64,
    /// Coordinator: shrink orders broadcast (each may carry several campaigns).
    pub shrink_orders: u64,
    /// Coordinator: departure notices broadcast (one view change each).
    pub left_views: u64,
    /// Coordinator: a shrink batch held back by an open join or check-in batch, or a shrink
    /// still open (counted per hold).
    pub shrinks_waited: u64,
    /// Coordinator: a join batch held back by an open shrink (counted per hold).
    pub joins_waited: u64,
    /// Shrink requests dropped: the coordinator's queue was full, or not the coordinator.
    pub shrink_requests_dropped: u64,
    /// A departing rank's link lost, dial refused, or silence reported: a departure, not a
    /// failure (no alert, no decision), counted apart from failures.
    pub departures_observed: u64,
    /// Ranks removed here by a departure notice (cause `left`).
    pub departed: u64,
    /// Own alerts and refutations suppressed while leaving.
    pub leaving_suppressed: u64,
    /// This rank entered leaving mode (a shrink order named it).
    pub leaving_entered: u64,
    /// A leaving rank acknowledged the order before its RELM sends drained (the drain bound
    /// passed).
    pub drain_timeouts: u64,
    /// A coordinator named by its own departure notice passed the coordination on to the
    /// root of the view without the targets (a planned hand-over, no failure).
    pub hand_overs: u64,
    /// Departure notices whose campaigns were all finished here and whose ranks were all
    /// removed here already (the same decision again: a new coordinator re-issued a campaign
    /// it had recorded while the old coordinator's notice was still on its way to it):
    /// applied no view and emitted no event.
    pub stale_departures: u64,
    /// A target (not the coordinator) waited for its children to close their links before
    /// leaving, instead of leaving at once: it processed its departure notice and passed it
    /// down, or lost its lifeline (its parent applied the notice) with surviving children.
    pub children_waits: u64,
}
