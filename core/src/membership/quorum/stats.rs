//! Agreement counters.

/// Agreement counters (ballots, phases, quorums), read with
/// [`Node::quorum_stats`](crate::Node::quorum_stats). Kept with the agreement state, which a
/// rank allocates on its first agreement traffic (all zero before), so a node carries none of
/// them inline. Monotonic.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct QuorumStats {
    /// Phase 1 rounds this rank started as an eligible candidate (or as a root without a
    /// ballot).
    pub prepares_started: u64,
    /// Phase 1 rounds that reached a promise quorum (this rank became leader).
    pub elected: u64,
    /// Promises given (PREPAREs answered with a promise).
    pub promises_given: u64,
    /// PREPAREs and PROPOSEs refused for a lower ballot than the one promised.
    pub refused: u64,
    /// Phase 2 rounds started (one per epoch proposed, not per re-send).
    pub proposals: u64,
    /// Phase 2 rounds that reached an accept quorum (the epoch was decided and announced).
    pub decided: u64,
    /// Phase 1 or phase 2 rounds that timed out short of a quorum (re-tried while this rank
    /// still leads or is eligible).
    pub proposals_without_quorum: u64,
    /// Proposals accepted here.
    pub accepted: u64,
    /// Times this rank stopped leading or preparing: a higher ballot was seen.
    pub stepped_down: u64,
    /// Decisions or answers ignored: from a ballot lower than the one promised here, or for a
    /// round that is no longer open.
    pub stale: u64,
    /// Evidence about a candidate sent straight to the candidates behind it.
    pub candidate_alerts_out: u64,
    /// Removal decisions this root made and held back from the flood until a phase 2 covering
    /// their ranks reached an accept quorum (a root without one floods nothing).
    pub removals_held: u64,
    /// Held removal decisions dropped unflooded: this root stepped down first.
    pub removals_dropped: u64,
    /// Removal decisions received from a coordinator other than the leader whose ballot this
    /// rank promised after an election (a deposed or cut-off root): ignored.
    pub removals_ignored: u64,
    /// Elections won behind on epochs: the promises reported a value for a later epoch than
    /// the next one here, and this rank applied the decided view that value was proposed on
    /// before it led (ERA's re-collect).
    pub caught_up: u64,
    /// Removal checks answered with a refusal naming ranks of the check this one heard
    /// directly within two detector periods (it vouches for them: `membership/quorum/vouch.rs`).
    pub vetoed: u64,
    /// Removal checks this leader started (`membership/quorum/check.rs`).
    pub checks: u64,
    /// Ranks a removal check kept: some member vouched for them.
    pub vouched_kept: u64,
    /// Removal checks dropped unfinished because they were two detector periods old when new
    /// stable subjects came (their answers were discarded and the check sent again).
    pub checks_expired: u64,
    /// The longest a removal check took from its first send to its answers (µs).
    pub check_us_max: u64,
    /// The longest a phase 2 took from PROPOSE to its accept quorum (µs).
    pub phase2_us_max: u64,
    /// Rounds this leader sent down its tree (a check or a phase 2; a re-send is a new one).
    pub tree_rounds: u64,
    /// Tree rounds this member forwarded to its children and gathered answers for.
    pub rounds_relayed: u64,
    /// Relayed rounds dropped unfinished: more than `MAX_RELAYS` (16) were open at once.
    pub rounds_dropped: u64,
}
