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
    /// Subjects whose removal the coordinator held because down evidence arrived against a
    /// large share of its members within `membership.overload_window` (counted once per
    /// subject and accusation).
    pub decisions_held_overload: u64,
}
