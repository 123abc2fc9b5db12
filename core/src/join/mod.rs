//! Joins: how a process that is not a member becomes one, as a batched view change.
//!
//! The shape is Rapid's: a contact forwards to one coordinator that batches joins into view
//! changes, with the lessons of concurrent joins through shared contacts (replies keyed by join
//! id, no locks). `docs/joins.md` has the hazards found and what is measured.
//!
//! 1. **Request.** The joiner ([`Joiner`]) sends a [`JoinRequest`] with a [`JoinId`] (its
//!    process nonce and a try number) to any member, its *contact*, over a join connection of
//!    the adapter's (it has no rank yet).
//! 2. **Forward.** The contact keeps one independent, bounded entry per join id (never
//!    blocking one join on another) and forwards the request to the coordinator (the root of
//!    the tree). A full table answers "retry" at once.
//! 3. **Admit.** The coordinator queues joins FIFO (deduplicated by nonce: a retried or
//!    duplicated join is one admission) and, `join.batch` after the first waiting one, admits
//!    up to `join.max_per_view` of them in **one** view change: an ordered, process-first xcast
//!    ([`AdmitNotice`]) under the next epoch, the same counter failure notices use. It admits
//!    only with its view settled (every notice it issued applied, every death it knows in an
//!    applied notice): a new root's notices wait for its recovery, which brings it every
//!    admission its predecessor issued, so a retry queued across the failover finds its nonce
//!    admitted and is answered with the rank it has, never given a second.
//! 4. **Apply.** Every member applies the admission in op order, giving the joiners
//!    consecutive ranks from the span its admissions made (holes stay holes): the same ranks at
//!    every member, whatever coordinator sent it. It reports
//!    [`MembershipEvent::Joined`](crate::membership::MembershipEvent::Joined) (whose addresses
//!    the adapter adds to its book), forwards the op to its children, then grows its span, so
//!    the joiners enter the tree, the detector's rings and the majority guard's count at the
//!    same point of the op order everywhere.
//! 5. **Answer.** The contact, on applying it, answers the joiner with its [`Admission`]: rank,
//!    epoch and the tree (span, radix, holes) as of that view. The joiner builds its node from
//!    it ([`Config::for_admission`](crate::Config::for_admission)) and says hello to its
//!    parent; its children already wait for it.
//!
//! Nothing is locked and nothing applies before the admission is ordered, so a failure
//! anywhere leaves only soft state with deadlines: a contact that sees no admission within
//! `join.timeout` answers "retry"; a contact that sees the root change re-forwards its waiting
//! requests to the new one; a joiner whose contact dies tries the next with back-off; a joiner
//! admitted whose answer was lost asks again and gets the same rank (every member remembers
//! recent admissions by nonce).

mod config;
mod joiner;
mod stats;
mod wire;

pub use config::JoinConfig;
pub use joiner::{
    JoinTransmit, Joiner, JoinerConfig, JoinerError, JoinerEvent, JoinerStats, TryFailure,
};
pub use stats::JoinStats;
pub use wire::{
    Admission, AdmitNotice, Admitted, JoinAnswerMsg, JoinForwardMsg, JoinId, JoinReply,
    JoinRequest, JoinVerdict, RetryReason, JOIN_MAGIC, MAX_ADDR_LEN, MAX_JOIN_MSG,
};

/// A join connection, named by the adapter: the contact's answer to the request that came on
/// it goes back on it ([`Node::poll_join_reply`](crate::Node::poll_join_reply)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct JoinConn(pub u64);
