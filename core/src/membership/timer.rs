//! The failure-knowledge machine's timer keys.

/// Failure-knowledge timers, nested in [`TimerKey::Membership`](crate::TimerKey::Membership).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum MembershipTimer {
    /// Root: announce the deaths gathered since the first unannounced one.
    Announce,
    /// Send the batched evidence (own and relayed) one hop up the tree.
    Alerts,
    /// Coordinator: a subject in flux held a decision back; decide once `flux_hold` passed.
    Decide,
    /// The gray timeout of the tree link to this rank (re-armed while it stands).
    Gray(crate::tree::Rank),
    /// Probe the gray link to this rank, directly and through its relay (`relay.rs`).
    Relay(crate::tree::Rank),
    /// The tree-link silence watch: pings on idle tree links, silent ones declared gray
    /// (`silence.rs`; every third of `membership.gray_after`).
    Silence,
    /// Coordinator: admit the joins queued since the batch began.
    JoinBatch,
    /// Contact: answer the requests whose admission did not come in time.
    JoinExpiry,
    /// Coordinator: a refused dial about this rank was not corroborated or refuted in
    /// `corroborate_timeout` (or its overload hold ended): settle it.
    Corroborate(crate::tree::Rank),
    /// A launched rank: send its check-in again (no notice listed it yet).
    CheckIn,
    /// Relay: pass the check-ins gathered from descendants up to the parent.
    CheckInRelay,
    /// Coordinator: announce the check-ins heard since the batch began.
    CheckInBatch,
    /// Coordinator: `membership.startup_timeout` passed (or the re-collect window of a new
    /// coordinator): the ranks still missing are removed, cause "never joined".
    StartupDeadline,
    /// Coordinator: sequence the shrink requests queued since the batch began.
    ShrinkBatch,
    /// Requester: this campaign's bound (`membership.shrink_timeout`) passed.
    Campaign(u32),
    /// Leaving: acknowledge the order even if RELM sends have not drained.
    Drain,
    /// Leaving: the departure fallback (nobody closed this rank's lifeline in time).
    Depart,
    /// Agreement: an open phase 1 or phase 2 re-sends to the members that have not answered
    /// (or a candidate that stepped down looks at its evidence again).
    Quorum,
    /// Tree rounds (`quorum/tree_round.rs`): relayed rounds whose wait passed send their
    /// answers up; old ones are forgotten.
    Round,
}
