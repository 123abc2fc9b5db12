//! Failure-knowledge counters.

/// Failure-knowledge counters. Monotonic; read through [`Node::stats`](crate::Node::stats).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct MembershipStats {
    /// Lineage or adoption notices naming a rank already known dead (the sender is behind).
    pub stale: u64,
    /// Lineage or adoption notices no set of deaths explains, and delivered global failure
    /// notices whose payload does not decode.
    pub inconsistent: u64,
}
