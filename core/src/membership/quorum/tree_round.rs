//! Tree-aggregated rounds (membership.md §3.5): the leader's phase 2 (PROPOSE) and its removal
//! check (`check.rs`) go down the tree and come back merged, instead of one frame to and one
//! from every member at the leader.
//!
//! Why (issue #21, `docs/startup.md` "Measured (session 30)"): 256 processes on 2 cores. A
//! direct round is about 250 frames out of and 250 into one process (and a new connection to
//! every member it has no link to), while every process gets a few per cent of a core: the
//! kill's phase 2 alone took seconds. Down the tree each process handles at most its
//! children's frames plus two.
//!
//! - **Down.** The leader sends [`TreeRoundMsg`] (its PROPOSE, or its check's PREPARE, and a
//!   round number of its own) to its children in the tree of its view *without the round's
//!   ranks* (the ranks the value removes or the check asks about: their subtrees are adopted
//!   there, as the repair will adopt them). Each member answers it as its acceptor answers the
//!   direct message (the same code: [`Membership::prepare_reply`],
//!   [`Membership::propose_reply`]), forwards it to its own children in that tree, and waits
//!   for their answers.
//! - **Up.** A member sends its parent (the rank that sent it the round) one
//!   [`RoundAnswersMsg`]: its own answer and every answer its children sent, once every child
//!   answered or a wait of 20 ms per tree level below it passed (a frozen child does not hold
//!   its siblings' answers). An answer that arrives after that goes up on its own at once: a
//!   late subtree is late, never lost. Nothing is summed: every answer names its member, and
//!   the leader counts each member once (`Votes`), so a subtree answered twice (two copies of
//!   a round through members whose views differ) is never double-counted.
//! - **The leader** turns each answer back into the member's PROMISE or ACCEPT and counts it as
//!   if it had come directly (`on_check_answer`, `on_accept`): quorums, refusals, vetoes and
//!   stepping down are unchanged. Its re-send timer (two detector periods) sends the round
//!   down the tree again, and every second re-send straight to the members that have not
//!   answered (a relay lost mid-round).
//! - **Trust.** A relay reports the answers it received, as a relay of alerts reports their
//!   observers (crash and omission faults, authenticated links: no member invents another's
//!   answer). What a member answers does not depend on the path.
//! - **Bounded.** A member keeps at most [`MAX_RELAYS`] open rounds (the oldest dropped,
//!   counted) and forgets each four detector periods after it came; the leader remembers its
//!   last [`MAX_SENT`] rounds (an answer to an older one is stale). A round is forwarded once
//!   per member: a second copy is answered (own answer only) but not forwarded, so differing
//!   views cannot make a loop.
//!
//! Phase 1 of a candidate (an election) stays direct: it happens on failover, when the tree is
//! what is in question.

use std::collections::{BTreeMap, BTreeSet};

use bytes::BufMut;

use super::{AcceptMsg, Ballot, PrepareMsg, PromiseMsg, ProposeMsg};
use crate::machine::Ctx;
use crate::membership::wire::{get_ranks, put_ranks};
use crate::membership::{Membership, MembershipTimer};
use crate::time::{Duration, Instant};
use crate::tree::{Rank, RankSet, View};
use crate::wire::{Codec, DecodeError, Limits, Reader};

/// Open rounds a member relays at once (the oldest is dropped past this).
pub(super) const MAX_RELAYS: usize = 16;

/// Rounds the leader remembers (answers to older ones are stale).
pub(super) const MAX_SENT: usize = 16;

/// What a tree round asks: the leader's removal check, or its phase 2.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RoundBody {
    /// A removal check: a PREPARE at the ballot the leader leads with, naming the ranks it
    /// means to remove (`check.rs`).
    Check(PrepareMsg),
    /// Phase 2.
    Propose(ProposeMsg),
}

impl RoundBody {
    /// The leader's ballot.
    pub fn ballot(&self) -> Ballot {
        match self {
            Self::Check(m) => m.ballot,
            Self::Propose(m) => m.ballot,
        }
    }

    /// The ranks the round is about (left out of its tree).
    pub fn ranks(&self) -> &[Rank] {
        match self {
            Self::Check(m) => &m.removed,
            Self::Propose(m) => &m.removed,
        }
    }
}

/// Leader to its children, and each member to its own (control class, kind 48): a round of
/// the leader's, answered up the same tree ([`RoundAnswersMsg`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TreeRoundMsg {
    /// The leader's round number (one per send down the tree: a re-send is a new round).
    pub round: u64,
    /// What it asks.
    pub body: RoundBody,
}

impl Codec for TreeRoundMsg {
    fn encoded_len(&self) -> usize {
        8 + 1
            + match &self.body {
                RoundBody::Check(m) => m.encoded_len(),
                RoundBody::Propose(m) => m.encoded_len(),
            }
    }
    fn encode(&self, buf: &mut impl BufMut) {
        buf.put_u64(self.round);
        match &self.body {
            RoundBody::Check(m) => {
                buf.put_u8(0);
                m.encode(buf);
            }
            RoundBody::Propose(m) => {
                buf.put_u8(1);
                m.encode(buf);
            }
        }
    }
    fn decode(r: &mut Reader, limits: &Limits) -> Result<Self, DecodeError> {
        let round = crate::wire::counter(r.u64()?)?;
        let body = match r.u8()? {
            0 => RoundBody::Check(PrepareMsg::decode(r, limits)?),
            1 => RoundBody::Propose(ProposeMsg::decode(r, limits)?),
            _ => return Err(DecodeError::Invalid("tree round kind")),
        };
        Ok(Self { round, body })
    }
}

/// One member's answer to a tree round, as its direct PROMISE or ACCEPT would have said it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RoundAnswer {
    /// The member that answered.
    pub rank: Rank,
    /// Promised (a check) or accepted (phase 2); `false`: refused, see `promised`.
    pub ok: bool,
    /// The highest ballot the member promised.
    pub promised: Ballot,
    /// A check: whether the member took it as one (it had promised the leader's ballot: its
    /// answer counts for the check's ranks, as a direct promise's echoed `checked`).
    pub checked: bool,
    /// A check: the ranks of it the member vouches for (a refusal), ascending.
    pub vouched: Vec<Rank>,
}

/// Answers to a tree round, member to the rank that sent it the round (control class, kind
/// 51): its own and those of its subtree (all at once, or late ones as they come).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RoundAnswersMsg {
    /// The leader's ballot.
    pub ballot: Ballot,
    /// The leader's round number.
    pub round: u64,
    /// One per member, in no particular order.
    pub answers: Vec<RoundAnswer>,
}

impl Codec for RoundAnswersMsg {
    fn encoded_len(&self) -> usize {
        12 + 8
            + 4
            + self
                .answers
                .iter()
                .map(|a| 4 + 1 + 12 + 1 + 4 + 4 * a.vouched.len())
                .sum::<usize>()
    }
    fn encode(&self, buf: &mut impl BufMut) {
        super::wire::put_ballot(buf, self.ballot);
        buf.put_u64(self.round);
        buf.put_u32(self.answers.len() as u32);
        for a in &self.answers {
            buf.put_u32(a.rank.0);
            buf.put_u8(u8::from(a.ok));
            super::wire::put_ballot(buf, a.promised);
            buf.put_u8(u8::from(a.checked));
            put_ranks(buf, &a.vouched);
        }
    }
    fn decode(r: &mut Reader, limits: &Limits) -> Result<Self, DecodeError> {
        let ballot = super::wire::get_ballot(r)?;
        let round = crate::wire::counter(r.u64()?)?;
        let n = r.count(4 + 1 + 12 + 1 + 4, limits.max_list)?;
        let answers = (0..n)
            .map(|_| {
                Ok(RoundAnswer {
                    rank: r.rank()?,
                    ok: r.bool()?,
                    promised: super::wire::get_ballot(r)?,
                    checked: r.bool()?,
                    vouched: get_ranks(r, limits)?,
                })
            })
            .collect::<Result<Vec<_>, DecodeError>>()?;
        Ok(Self {
            ballot,
            round,
            answers,
        })
    }
}

/// A round the leader sent down its tree: what its answers mean.
#[derive(Debug)]
pub(super) struct Sent {
    ballot: Ballot,
    /// Phase 2's epoch, or `None` for a check.
    epoch: Option<u64>,
    /// A check's ranks (what a promise echoing it counts for).
    checked: Vec<Rank>,
}

/// A round a member relays: where its answers go, and what it still waits for.
#[derive(Debug)]
pub(super) struct Relay {
    /// The rank that sent the round here (answers go back to it).
    parent: Rank,
    /// Children that have not answered.
    waiting: BTreeSet<Rank>,
    /// Answers gathered and not sent up yet.
    answers: Vec<RoundAnswer>,
    /// Whether the first batch went up (later answers go up as they come).
    sent: bool,
    /// When the first batch goes up whatever is missing.
    due: Instant,
    /// When the round is forgotten.
    expires: Instant,
}

/// Tree-round state of one rank: the leader's sent rounds, a member's relayed ones.
#[derive(Debug, Default)]
pub(super) struct Rounds {
    /// Leader: the next round number.
    next: u64,
    /// Leader: the last [`MAX_SENT`] rounds sent, by number.
    sent: BTreeMap<u64, Sent>,
    /// Leader: re-sends of the open phase so far (every second one goes straight to the
    /// members that have not answered).
    pub(super) resends: u64,
    /// Member: open relayed rounds, by (leader's ballot, round).
    relays: BTreeMap<(Ballot, u64), Relay>,
    /// Member: whether the relay timer is armed (one timer for every relayed round).
    timer_at: Option<Instant>,
}

/// The children of `me` in the tree of `ctx`'s view without `without` (empty if `me` is not
/// in that tree).
fn children_without(ctx: &Ctx<'_>, without: &[Rank]) -> (bool, Vec<Rank>) {
    let layout = ctx.tree.layout();
    let mut dead: RankSet = ctx.tree.dead().clone();
    for &r in without {
        if layout.contains(r) {
            dead.insert(r);
        }
    }
    match View::compute(layout, &dead, ctx.me()) {
        Ok(v) => (v.is_root(), v.live_children().collect()),
        Err(_) => (false, Vec::new()),
    }
}

/// Sends `answers` to `to` in as few [`RoundAnswersMsg`] as the list and frame bounds allow
/// (`max_list` answers, and a quarter of `max_frame` of them, per frame).
fn send_answers(
    ctx: &mut Ctx<'_>,
    to: Rank,
    ballot: Ballot,
    round: u64,
    mut answers: Vec<RoundAnswer>,
) {
    let max_list = (ctx.cfg.max_list as usize).max(1);
    let max_bytes = (ctx.cfg.max_frame as usize / 4).max(64);
    while !answers.is_empty() {
        let (mut n, mut bytes) = (0, 0);
        for a in &answers {
            let len = 4 + 1 + 12 + 1 + 4 + 4 * a.vouched.len();
            if n == max_list || (n > 0 && bytes + len > max_bytes) {
                break;
            }
            n += 1;
            bytes += len;
        }
        let rest = answers.split_off(n);
        ctx.send(
            to,
            RoundAnswersMsg {
                ballot,
                round,
                answers,
            },
        );
        answers = rest;
    }
}

impl Membership {
    /// Leader: sends `body` down its tree (the view without the round's ranks), or straight
    /// to `to` if this rank is not that tree's root (an elected candidate before its repair)
    /// or the view has fewer than `membership.quorum_tree_min` members. Returns whether it
    /// went down the tree.
    pub(super) fn send_round(&mut self, ctx: &mut Ctx<'_>, body: RoundBody, to: Vec<Rank>) -> bool {
        let (root, children) = children_without(ctx, body.ranks());
        let min = u64::from(ctx.cfg.membership.quorum_tree_min);
        if !root || self.prior_weights(ctx).members < min {
            match body {
                RoundBody::Check(m) => ctx.send_all(to, m),
                RoundBody::Propose(m) => ctx.send_all(to, m),
            }
            return false;
        }
        let me = ctx.me();
        let q = self.quorum_mut(me);
        q.rounds.next += 1;
        let round = q.rounds.next;
        let (epoch, checked) = match &body {
            RoundBody::Check(m) => (None, m.removed.clone()),
            RoundBody::Propose(m) => (Some(m.epoch), Vec::new()),
        };
        q.rounds.sent.insert(
            round,
            Sent {
                ballot: body.ballot(),
                epoch,
                checked,
            },
        );
        while q.rounds.sent.len() > MAX_SENT {
            q.rounds.sent.pop_first();
        }
        q.stats.tree_rounds += 1;
        ctx.send_all(children, TreeRoundMsg { round, body });
        true
    }

    /// Member: a leader's tree round from `from` (the leader, or the member above this one in
    /// the round's tree). Answered as the direct message would be, forwarded to this rank's
    /// children in the round's tree, and the answers gathered for `from`.
    pub(in crate::membership) fn on_tree_round(
        &mut self,
        ctx: &mut Ctx<'_>,
        from: Rank,
        m: TreeRoundMsg,
    ) {
        let me = ctx.me();
        let ballot = m.body.ballot();
        let leader = ballot.rank;
        if leader == me || m.body.ranks().contains(&me) {
            self.quorum_mut(me).stats.stale += 1;
            return;
        }
        if from == me {
            self.quorum_mut(me).stats.stale += 1;
            return;
        }
        let key = (ballot, m.round);
        let again = self
            .quorum
            .as_ref()
            .is_some_and(|q| q.rounds.relays.contains_key(&key));
        let own = match &m.body {
            RoundBody::Check(p) => {
                self.prepare_reply(ctx, leader, p.clone())
                    .map(|a| RoundAnswer {
                        rank: me,
                        ok: a.ok,
                        promised: a.promised,
                        checked: !a.checked.is_empty(),
                        vouched: a.vouched,
                    })
            }
            RoundBody::Propose(p) => self.propose_reply(ctx, leader, p).map(|a| RoundAnswer {
                rank: me,
                ok: a.ok,
                promised: a.promised,
                checked: false,
                vouched: Vec::new(),
            }),
        };
        let (_, children) = children_without(ctx, m.body.ranks());
        let children: Vec<Rank> = children
            .into_iter()
            .filter(|&c| c != leader && c != from)
            .collect();
        if again || children.is_empty() {
            // A leaf, or a second copy (views differ): this rank's own answer, nothing
            // forwarded.
            if let Some(a) = own {
                send_answers(ctx, from, ballot, m.round, vec![a]);
            }
            return;
        }
        // 20 ms per tree level below this rank (at least one).
        let levels = ctx
            .tree
            .layout()
            .max_depth()
            .saturating_sub(ctx.tree.view().map_or(0, View::depth))
            .max(1);
        let due = ctx.now + Duration::from_millis(20 * u64::from(levels));
        let expires =
            ctx.now + Duration::from_nanos(ctx.cfg.detect.period.as_nanos().saturating_mul(4));
        let q = self.quorum_mut(me);
        q.stats.rounds_relayed += 1;
        q.rounds.relays.insert(
            key,
            Relay {
                parent: from,
                waiting: children.iter().copied().collect(),
                answers: own.into_iter().collect(),
                sent: false,
                due,
                expires,
            },
        );
        while q.rounds.relays.len() > MAX_RELAYS {
            q.rounds.relays.pop_first();
            q.stats.rounds_dropped += 1;
        }
        ctx.send_all(children, m);
        self.arm_round_timer(ctx, due);
    }

    /// Answers to a tree round: the leader counts them; a relay passes them up (with its own
    /// first batch, or at once if that went already).
    pub(in crate::membership) fn on_round_answers(
        &mut self,
        ctx: &mut Ctx<'_>,
        from: Rank,
        m: RoundAnswersMsg,
    ) {
        let me = ctx.me();
        if m.ballot.rank == me {
            self.count_round_answers(ctx, m);
            return;
        }
        let q = self.quorum_mut(me);
        let Some(r) = q.rounds.relays.get_mut(&(m.ballot, m.round)) else {
            q.stats.stale += 1;
            return;
        };
        r.waiting.remove(&from);
        r.answers.extend(m.answers);
        if r.sent || r.waiting.is_empty() {
            r.sent = true;
            let parent = r.parent;
            let answers = std::mem::take(&mut r.answers);
            send_answers(ctx, parent, m.ballot, m.round, answers);
        }
    }

    /// Leader: each answer counted as the member's own PROMISE (a check) or ACCEPT.
    fn count_round_answers(&mut self, ctx: &mut Ctx<'_>, m: RoundAnswersMsg) {
        let me = ctx.me();
        let q = self.quorum_mut(me);
        let Some(sent) = q.rounds.sent.get(&m.round).filter(|s| s.ballot == m.ballot) else {
            q.stats.stale += 1;
            return;
        };
        let (epoch, checked) = (sent.epoch, sent.checked.clone());
        for a in m.answers {
            if a.rank == me || !ctx.tree.layout().contains(a.rank) {
                continue;
            }
            match epoch {
                Some(epoch) => self.on_accept(
                    ctx,
                    a.rank,
                    AcceptMsg {
                        ballot: m.ballot,
                        epoch,
                        ok: a.ok,
                        promised: a.promised,
                    },
                ),
                None => {
                    let p = PromiseMsg {
                        ballot: m.ballot,
                        ok: a.ok,
                        promised: a.promised,
                        accepted: None,
                        downs: Vec::new(),
                        vouched: a.vouched,
                        checked: if a.checked {
                            checked.clone()
                        } else {
                            Vec::new()
                        },
                    };
                    if !self.on_check_answer(ctx, a.rank, &p) {
                        self.quorum_mut(me).stats.stale += 1;
                    }
                }
            }
        }
    }

    fn arm_round_timer(&mut self, ctx: &mut Ctx<'_>, at: Instant) {
        let me = ctx.me();
        let q = self.quorum_mut(me);
        if q.rounds.timer_at.is_some_and(|t| t <= at) {
            return;
        }
        q.rounds.timer_at = Some(at);
        ctx.timers.set(MembershipTimer::Round, at);
    }

    /// The relay timer: rounds whose wait passed send what they have up; rounds past their
    /// life are forgotten.
    pub(in crate::membership) fn on_round_timer(&mut self, ctx: &mut Ctx<'_>) {
        let me = ctx.me();
        let now = ctx.now;
        let q = self.quorum_mut(me);
        if q.rounds.timer_at.is_some_and(|t| t > now) {
            // An earlier timer of a re-armed schedule: the later one is still set.
            return;
        }
        q.rounds.timer_at = None;
        q.rounds.relays.retain(|_, r| now < r.expires);
        let mut out = Vec::new();
        let mut next: Option<Instant> = None;
        for (&(ballot, round), r) in q.rounds.relays.iter_mut() {
            if !r.sent && r.due <= now {
                r.sent = true;
                let answers = std::mem::take(&mut r.answers);
                if !answers.is_empty() {
                    out.push((r.parent, ballot, round, answers));
                }
            }
            let at = if r.sent { r.expires } else { r.due };
            next = Some(next.map_or(at, |n: Instant| n.min(at)));
        }
        for (to, ballot, round, answers) in out {
            send_answers(ctx, to, ballot, round, answers);
        }
        if let Some(at) = next {
            self.arm_round_timer(ctx, at);
        }
    }
}
