//! The revoke machine's timer keys: none.

/// Revoke timers, nested in [`TimerKey::Revoke`](crate::TimerKey::Revoke). The flood arms
/// none (remembered groups are bounded by count, not by time), so this type has no values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RevokeTimer {}
