//! Quorum views (membership.md §3.2, §3.6, §3.7): ballots, the candidate order, weighted
//! quorums and the acceptor every member runs.
//!
//! The pure parts live here and are tested on their own (`tests.rs`); the wiring into the
//! failure-knowledge machine (who prepares, who proposes, how alerts reach a candidate) is in
//! `agree.rs`.
//!
//! - **Candidates.** The candidate order of a view is the slot-0 succession: `c0` is the view's
//!   root, `c1` the root once `c0` is dead too, and so on ([`candidates`]).
//! - **Ballots.** `(round, rank)`, ordered by round then rank ([`Ballot`]); every member starts
//!   promised to [`Ballot::INITIAL`], the ballot of the initial root (rank 0).
//! - **Weights.** Members weigh 2 and the view's root 3, so an even split has a winner; a quorum
//!   is more than half the view's total weight ([`Weights`], [`Votes`]).
//! - **Acceptor.** Promises a higher ballot (reporting what it accepted), accepts a proposal at a
//!   ballot at least its promise, refuses anything lower with the ballot it promised
//!   ([`Acceptor`]).

use std::collections::BTreeSet;

use crate::tree::{Layout, Rank, RankSet};

mod agree;
mod check;
#[cfg(test)]
mod sim_tests;
mod stats;
#[cfg(test)]
mod tests;
mod tree_round;
mod vouch;
mod wire;

pub use stats::QuorumStats;
pub use tree_round::{RoundAnswer, RoundAnswersMsg, RoundBody, TreeRoundMsg};
pub use wire::{AcceptMsg, PrepareMsg, PromiseMsg, ProposeMsg};

pub(super) use agree::Quorum;

/// A Paxos ballot: `(round, rank)`, ordered by round, then rank. Two candidates never share a
/// ballot (the rank is part of it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Ballot {
    /// The round: one more than the highest the candidate has seen.
    pub round: u64,
    /// The candidate that owns this ballot.
    pub rank: Rank,
}

impl Ballot {
    /// The initial root's ballot: every member starts promised to it, so rank 0 leads from the
    /// start without a phase 1.
    pub const INITIAL: Self = Self {
        round: 0,
        rank: Rank(0),
    };

    /// The ballot `me` takes to beat every ballot it has seen (`seen`).
    pub fn next(seen: Self, me: Rank) -> Self {
        Self {
            round: seen.round.saturating_add(1),
            rank: me,
        }
    }
}

/// The candidate order of the view with dead set `dead`: the first `bound` live ranks of the
/// slot-0 succession (right-first pre-order from rank 0, dead ranks skipped). The first entry is
/// the view's root; entry `i + 1` is the root the view would have if entries `0..=i` died too.
/// O(bound + dead ranks walked over) steps.
pub fn candidates(layout: &Layout, dead: &RankSet, bound: usize) -> Vec<Rank> {
    let mut out = Vec::with_capacity(bound.min(64));
    if bound == 0 || layout.span() == 0 {
        return out;
    }
    let mut x = Some(layout.pos(Rank(0)));
    while let Some(p) = x {
        let r = Rank(p.rank as u32);
        if !dead.contains(r) {
            out.push(r);
            if out.len() == bound {
                break;
            }
        }
        x = layout.rfpre_next(p, 0);
    }
    out
}

/// The weights of one view's members: every member weighs 2, the view's root 3. Total weight
/// `2·members + 1` is odd, so two disjoint sides can never both hold more than half, and an
/// even split is won by the side holding the root.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Weights {
    /// The view's root.
    pub root: Rank,
    /// How many members the view has (the root included).
    pub members: u64,
}

impl Weights {
    /// One member's weight (3 for the root, 2 for anyone else).
    pub fn of(&self, r: Rank) -> u64 {
        if r == self.root {
            3
        } else {
            2
        }
    }

    /// The view's total weight (`2·members + 1`; 0 for an empty view).
    pub fn total(&self) -> u64 {
        if self.members == 0 {
            0
        } else {
            self.members.saturating_mul(2).saturating_add(1)
        }
    }

    /// Whether `weight` is more than half the total.
    pub fn is_quorum(&self, weight: u64) -> bool {
        self.members > 0 && weight.saturating_mul(2) > self.total()
    }
}

/// Votes (promises or accepts) collected for one ballot: each voter counted once, whatever
/// how many times it answers.
#[derive(Clone, Debug)]
pub struct Votes {
    weights: Weights,
    voters: BTreeSet<Rank>,
    weight: u64,
}

impl Votes {
    /// No votes yet, in a view weighed by `weights`.
    pub fn new(weights: Weights) -> Self {
        Self {
            weights,
            voters: BTreeSet::new(),
            weight: 0,
        }
    }

    /// Counts `voter`'s vote; returns whether it was new.
    pub fn add(&mut self, voter: Rank) -> bool {
        if !self.voters.insert(voter) {
            return false;
        }
        self.weight = self.weight.saturating_add(self.weights.of(voter));
        true
    }

    /// The weight voted so far.
    pub fn weight(&self) -> u64 {
        self.weight
    }

    /// Whether the votes hold more than half the view's weight.
    pub fn has_quorum(&self) -> bool {
        self.weights.is_quorum(self.weight)
    }

    /// The ranks that voted, ascending.
    pub fn voters(&self) -> impl Iterator<Item = Rank> + '_ {
        self.voters.iter().copied()
    }

    /// Whether `r` voted.
    pub fn has(&self, r: Rank) -> bool {
        self.voters.contains(&r)
    }
}

/// A value an acceptor accepted: the removals of one epoch, at one ballot, with the view they
/// apply to. The base makes the value a whole view (`base ∪ removed` at `epoch`), so a leader
/// that is behind on epochs and learns the value from a promise learns the decided view of
/// `epoch - 1` with it (a leader proposes epoch `e` only on its applied, decided view of
/// `e - 1`), instead of applying the delta to an older view of its own.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Accepted {
    /// The ballot it was accepted at.
    pub ballot: Ballot,
    /// The epoch the value is for.
    pub epoch: u64,
    /// The ranks the value removes, ascending.
    pub removed: Vec<Rank>,
    /// The ranks removed as of epoch `epoch - 1` at the leader that proposed it (the view the
    /// value applies to), ascending.
    pub base: Vec<Rank>,
}

impl Accepted {
    /// Which of two reported values a new leader must carry on: the higher ballot, and at one
    /// ballot the later epoch (one leader proposes epochs in order, each extending the last).
    pub fn supersedes(&self, other: &Self) -> bool {
        (self.ballot, self.epoch) > (other.ballot, other.epoch)
    }
}

/// One member's acceptor state (memory only: a dead incarnation never returns). The last
/// accepted value is kept after it is decided, so a new leader behind on epochs learns it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Acceptor {
    /// The highest ballot promised.
    pub promised: Ballot,
    /// The last value accepted for the open instance, if any.
    pub accepted: Option<Accepted>,
}

impl Default for Acceptor {
    fn default() -> Self {
        Self {
            promised: Ballot::INITIAL,
            accepted: None,
        }
    }
}

impl Acceptor {
    /// Phase 1: promises `b` if it is higher than the ballot promised so far, returning the value
    /// accepted (if any) for the leader to re-propose; refuses with the promised ballot
    /// otherwise. A repeated PREPARE of the ballot already promised is answered again (the
    /// promise was lost).
    pub fn prepare(&mut self, b: Ballot) -> Result<Option<&Accepted>, Ballot> {
        if b < self.promised {
            return Err(self.promised);
        }
        self.promised = b;
        Ok(self.accepted.as_ref())
    }

    /// Phase 2: accepts `(epoch, removed)` on the view `base` at `b` unless a higher ballot was
    /// promised (then refuses with it). Accepting also promises `b`.
    pub fn propose(
        &mut self,
        b: Ballot,
        epoch: u64,
        removed: &[Rank],
        base: &[Rank],
    ) -> Result<(), Ballot> {
        if b < self.promised {
            return Err(self.promised);
        }
        self.promised = b;
        self.accepted = Some(Accepted {
            ballot: b,
            epoch,
            removed: removed.to_vec(),
            base: base.to_vec(),
        });
        Ok(())
    }
}
