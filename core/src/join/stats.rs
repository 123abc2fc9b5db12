//! Join counters of one member.

/// What a member did for joins (as contact, as coordinator, applying admissions). Read with
/// [`Node::join_stats`](crate::Node::join_stats); kept with the join state, which a rank
/// allocates on its first join traffic (all zero before).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct JoinStats {
    /// Join requests received from joiners (as their contact).
    pub join_requests_in: u64,
    /// Join requests forwarded to the coordinator (re-forwards included).
    pub join_forwards_out: u64,
    /// Forwarded join requests received (as coordinator, or stale).
    pub join_forwards_in: u64,
    /// Waiting requests forwarded again because the coordinator changed.
    pub join_reforwards: u64,
    /// Admissions answered to joiners.
    pub join_accepts_sent: u64,
    /// "Retry" answers to joiners (busy, timed out, not a member).
    pub join_retries_sent: u64,
    /// Requests that waited past `join.timeout` here.
    pub joins_timed_out: u64,
    /// Coordinator: joins refused because its queue was full.
    pub joins_refused_busy: u64,
    /// Coordinator: joiners admitted.
    pub joins_admitted: u64,
    /// Coordinator: views that admitted joiners.
    pub join_views: u64,
    /// Coordinator: join batches put off because a view change was in flight here (a notice
    /// it issued not applied yet, as a new root's wait for its recovery, or a death in no
    /// applied notice yet).
    pub join_batches_held: u64,
    /// Admissions applied for a nonce already admitted (0 unless a coordinator admitted without
    /// knowing an earlier admission): the extra rank is never started and is removed.
    pub joins_readmitted: u64,
    /// Coordinator: retries answered with the rank their contact remembered admitting
    /// ([`JoinForwardMsg::known`](crate::join::JoinForwardMsg::known)), an admission this
    /// coordinator never applied (it joined in or after that view).
    pub joins_known_by_contact: u64,
    /// Times this rank grew its tree ahead of its admissions, on a new parent's notice
    /// computed under a larger span (it was behind: its parent had failed or had not started).
    pub spans_caught_up: u64,
    /// Join requests that did not decode.
    pub join_requests_malformed: u64,
}
