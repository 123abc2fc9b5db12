//! Failure-knowledge messages: adoption notices down, lineage-carrying failure notices up, and
//! the root's epoch-stamped global failure notice (carried as an xcast payload).

use bytes::BufMut;

use super::quorum::{AcceptMsg, PrepareMsg, PromiseMsg, ProposeMsg, RoundAnswersMsg, TreeRoundMsg};
use super::RemovalCause;
use crate::join::{JoinAnswerMsg, JoinForwardMsg};
use crate::tree::Rank;
use crate::wire::{Codec, DecodeError, Limits, Reader};

/// Encodes a rank list: a `u32` count, then each rank as a `u32` (shared by every membership
/// message that carries ranks, agreement messages included).
pub(in crate::membership) fn put_ranks(buf: &mut impl BufMut, v: &[Rank]) {
    buf.put_u32(v.len() as u32);
    for r in v {
        buf.put_u32(r.0);
    }
}

/// Decodes a rank list written by [`put_ranks`]; the count is checked against the bytes left
/// and `limits.max_list` before anything is read.
pub(in crate::membership) fn get_ranks(
    r: &mut Reader,
    limits: &Limits,
) -> Result<Vec<Rank>, DecodeError> {
    let n = r.count(4, limits.max_list)?;
    (0..n).map(|_| r.rank()).collect()
}

/// Parent to a child that is new in one of its slots (or to every child after a promotion):
/// "your ancestors are now `lineage`" (the parent's ancestors followed by the parent).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AdoptMsg {
    /// The span the sender computed the lineage under: across a grow the same ranks sit in
    /// other slots, so a receiver with another span must not read deaths into it.
    pub span: u32,
    /// The child's expected ancestor list, root first; its last entry is the sender.
    pub lineage: Vec<Rank>,
}

impl Codec for AdoptMsg {
    fn encoded_len(&self) -> usize {
        4 + 4 + 4 * self.lineage.len()
    }
    fn encode(&self, buf: &mut impl BufMut) {
        buf.put_u32(self.span);
        put_ranks(buf, &self.lineage);
    }
    fn decode(r: &mut Reader, limits: &Limits) -> Result<Self, DecodeError> {
        Ok(Self {
            span: r.u32()?,
            lineage: get_ranks(r, limits)?,
        })
    }
}

/// Child to parent, whenever the child's parent changes or it learns new deaths: the child's
/// ancestor list (its last entry must be the receiver) and the deaths the root has not yet
/// confirmed that the child knows of. Doubles as the child's hello to a new parent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LineageMsg {
    /// The span the sender computed its lineage under (see [`AdoptMsg::span`]); the deaths
    /// in `failed` hold whatever the span.
    pub span: u32,
    /// The sender's ancestors, root first.
    pub lineage: Vec<Rank>,
    /// Deaths the sender knows and the root has not confirmed.
    pub failed: Vec<Rank>,
}

impl Codec for LineageMsg {
    fn encoded_len(&self) -> usize {
        4 + 8 + 4 * (self.lineage.len() + self.failed.len())
    }
    fn encode(&self, buf: &mut impl BufMut) {
        buf.put_u32(self.span);
        put_ranks(buf, &self.lineage);
        put_ranks(buf, &self.failed);
    }
    fn decode(r: &mut Reader, limits: &Limits) -> Result<Self, DecodeError> {
        Ok(Self {
            span: r.u32()?,
            lineage: get_ranks(r, limits)?,
            failed: get_ranks(r, limits)?,
        })
    }
}

/// The root's global failure notice, broadcast as a process-first xcast payload: every
/// survivor applies the same deaths in the same op order, and adopts the highest epoch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GlobalFailureMsg {
    /// Incremented by the root for each notice.
    pub epoch: u64,
    /// The newly confirmed deaths, ascending.
    pub failed: Vec<Rank>,
    /// Why each was removed, one per entry of `failed` (same order).
    pub causes: Vec<RemovalCause>,
}

impl Codec for GlobalFailureMsg {
    fn encoded_len(&self) -> usize {
        8 + 4 + 5 * self.failed.len()
    }
    /// The ranks, then one cause byte per rank (a missing cause is sent as
    /// [`RemovalCause::LinkLost`]).
    fn encode(&self, buf: &mut impl BufMut) {
        buf.put_u64(self.epoch);
        put_ranks(buf, &self.failed);
        for i in 0..self.failed.len() {
            let c = self
                .causes
                .get(i)
                .copied()
                .unwrap_or(RemovalCause::LinkLost);
            buf.put_u8(c.byte());
        }
    }
    fn decode(r: &mut Reader, limits: &Limits) -> Result<Self, DecodeError> {
        let epoch = crate::wire::counter(r.u64()?)?;
        let failed = get_ranks(r, limits)?;
        let causes = (0..failed.len())
            .map(|_| RemovalCause::decode(r))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            epoch,
            failed,
            causes,
        })
    }
}
/// Evidence about one subject from one or more observers, merged per hop: every observer
/// listed holds the same verdict about the same incarnation.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct AlertEntry {
    /// The rank the evidence is about.
    pub subject: Rank,
    /// The subject's incarnation the evidence is about.
    pub incarnation: u64,
    /// `true`: silent through the refutation window; `false`: it refuted.
    pub down: bool,
    /// The observers whose evidence this is (each watches the subject on one of its rings).
    pub observers: Vec<Rank>,
}

/// Detector evidence travelling up the tree to the coordinator, batched and merged per hop:
/// an observer sends its own, an interior rank forwards what its descendants sent with its
/// own, one entry per (subject, incarnation, verdict).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AlertMsg {
    /// Relays passed so far (0 from the observer); a relay drops evidence that has passed
    /// [`AlertMsg::MAX_HOPS`] (views that disagree could otherwise pass it around; the
    /// observer re-sends standing evidence every detector period).
    pub hops: u8,
    /// The evidence, one entry per (subject, incarnation, verdict).
    pub entries: Vec<AlertEntry>,
}

impl AlertMsg {
    /// Relays evidence may pass (the tree is at most 31 deep; views agree within a few).
    pub const MAX_HOPS: u8 = 32;
}

impl Codec for AlertMsg {
    fn encoded_len(&self) -> usize {
        1 + 4
            + self
                .entries
                .iter()
                .map(|e| 17 + 4 * e.observers.len())
                .sum::<usize>()
    }
    fn encode(&self, buf: &mut impl BufMut) {
        buf.put_u8(self.hops);
        buf.put_u32(self.entries.len() as u32);
        for e in &self.entries {
            buf.put_u32(e.subject.0);
            buf.put_u64(e.incarnation);
            buf.put_u8(u8::from(e.down));
            put_ranks(buf, &e.observers);
        }
    }
    fn decode(r: &mut Reader, limits: &Limits) -> Result<Self, DecodeError> {
        let hops = r.u8()?;
        let n = r.count(17, limits.max_list)?;
        let entries = (0..n)
            .map(|_| {
                Ok(AlertEntry {
                    subject: r.rank()?,
                    incarnation: crate::wire::counter(r.u64()?)?,
                    down: r.bool()?,
                    observers: get_ranks(r, limits)?,
                })
            })
            .collect::<Result<Vec<_>, DecodeError>>()?;
        Ok(Self { hops, entries })
    }
}

/// A member to a rank it knows was removed (a frame arrived from it): "you were removed as of
/// this epoch". Rate-limited per removed rank; the only frame ever sent to a removed rank.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EvictedMsg {
    /// The sender's failure epoch.
    pub epoch: u64,
}

impl Codec for EvictedMsg {
    fn encoded_len(&self) -> usize {
        8
    }
    fn encode(&self, buf: &mut impl BufMut) {
        buf.put_u64(self.epoch);
    }
    fn decode(r: &mut Reader, _limits: &Limits) -> Result<Self, DecodeError> {
        Ok(Self {
            epoch: crate::wire::counter(r.u64()?)?,
        })
    }
}

/// The coordinator's decision, flooded on the revoke flood's binomial-graph overlay ahead of the
/// ordered global notice: these ranks are removed. Each decision `(coordinator, seq)` is
/// forwarded once, on first receipt, to every overlay neighbour (of the view without these
/// ranks) but the sender, so ranks waiting on a removed one (a frozen relay, a recovery)
/// unblock at once, a rank lost mid-flood leaves nobody untold, and every rank's observer rings
/// follow the same view.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RemovedMsg {
    /// The deciding coordinator.
    pub coordinator: Rank,
    /// Its decision counter.
    pub seq: u64,
    /// Why (one decision removes ranks for one cause).
    pub cause: RemovalCause,
    /// The removed ranks, ascending.
    pub ranks: Vec<Rank>,
}

impl Codec for RemovedMsg {
    fn encoded_len(&self) -> usize {
        4 + 8 + 1 + 4 + 4 * self.ranks.len()
    }
    fn encode(&self, buf: &mut impl BufMut) {
        buf.put_u32(self.coordinator.0);
        buf.put_u64(self.seq);
        buf.put_u8(self.cause.byte());
        put_ranks(buf, &self.ranks);
    }
    fn decode(r: &mut Reader, limits: &Limits) -> Result<Self, DecodeError> {
        Ok(Self {
            coordinator: r.rank()?,
            seq: crate::wire::counter(r.u64()?)?,
            cause: RemovalCause::decode(r)?,
            ranks: get_ranks(r, limits)?,
        })
    }
}

/// An endpoint of a tree link to the coordinator: "my link to `peer` has been down for
/// `membership.gray_timeout`, and we are both alive" (the sender is the other endpoint).
/// Re-sent while it stands; the coordinator removes the edge's child, cause
/// [`RemovalCause::Unreachable`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnreachableMsg {
    /// The other endpoint of the dead link.
    pub peer: Rank,
}

impl Codec for UnreachableMsg {
    fn encoded_len(&self) -> usize {
        4
    }
    fn encode(&self, buf: &mut impl BufMut) {
        buf.put_u32(self.peer.0);
    }
    fn decode(r: &mut Reader, _limits: &Limits) -> Result<Self, DecodeError> {
        Ok(Self { peer: r.rank()? })
    }
}

/// A frame carried around a gray tree link (kind 70): `src` sends `frame` to `dst` through a
/// relay rank because their own link is down while both are alive (`relay.rs`). The relay
/// forwards the envelope unchanged, once, only for a sender that is `src` itself (never a
/// relayed envelope again) and only between live members; `dst` reads `frame` as sent by
/// `src`. An empty `frame` is a probe: sent to `dst` directly (to ask for the link back) and
/// through the relay; its `flags` say what `src` hears of `dst` ([`RelayedMsg::HEARD`],
/// [`RelayedMsg::HEARD_DIRECT`]), so each end learns whether its own direction works.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RelayedMsg {
    /// The rank whose frame this is (the relay's sender: relays never forward for others).
    pub src: Rank,
    /// The rank the frame is for.
    pub dst: Rank,
    /// A probe's news about `dst` as `src` hears it (0 on a frame that carries one).
    pub flags: u8,
    /// The whole inner frame, envelope included (empty: a probe). Never itself a relayed
    /// envelope: the receiver drops a nested one, counted.
    pub frame: bytes::Bytes,
}

impl RelayedMsg {
    /// Body bytes besides the inner frame: `src`, `dst`, `flags` and the frame's length prefix.
    pub const OVERHEAD: usize = 13;
    /// Probe flag: `src` heard from `dst` lately (directly or relayed).
    pub const HEARD: u8 = 1;
    /// Probe flag: `src` heard from `dst` directly lately: `dst`'s own direction works again.
    pub const HEARD_DIRECT: u8 = 2;
    /// Probe flag: an answer to a probe from a rank that relays nothing to `dst`; never
    /// answered itself.
    pub const ANSWER: u8 = 4;
}

impl Codec for RelayedMsg {
    fn encoded_len(&self) -> usize {
        Self::OVERHEAD + self.frame.len()
    }
    fn encode(&self, buf: &mut impl BufMut) {
        buf.put_u32(self.src.0);
        buf.put_u32(self.dst.0);
        buf.put_u8(self.flags);
        buf.put_u32(self.frame.len() as u32);
        buf.put_slice(&self.frame);
    }
    fn decode(r: &mut Reader, limits: &Limits) -> Result<Self, DecodeError> {
        let src = r.rank()?;
        let dst = r.rank()?;
        let flags = r.u8()?;
        if flags & !(Self::HEARD | Self::HEARD_DIRECT | Self::ANSWER) != 0 {
            return Err(DecodeError::Invalid("unknown relay flags"));
        }
        let frame = r.bytes(limits.max_frame)?;
        if !frame.is_empty() && frame.len() < crate::wire::HEADER_LEN {
            return Err(DecodeError::Invalid(
                "relayed frame shorter than an envelope",
            ));
        }
        Ok(Self {
            src,
            dst,
            flags,
            frame,
        })
    }
}

/// A tree ping (kind 71): sent to a tree neighbour (parent or child) over a link that carried
/// nothing else from this rank for a third of `membership.gray_after`, so that silence on a
/// tree link means loss, not idleness (`silence.rs`). No body; its arrival is its message.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TreePingMsg;

impl Codec for TreePingMsg {
    fn encoded_len(&self) -> usize {
        0
    }
    fn encode(&self, _buf: &mut impl BufMut) {}
    fn decode(_r: &mut Reader, _limits: &Limits) -> Result<Self, DecodeError> {
        Ok(Self)
    }
}

/// What a [`CorroborateMsg`] says about its subject.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CorroborateOp {
    /// Observer to the subject's coordinator: "my fresh dial to the subject was refused".
    Refused,
    /// Coordinator to a prober: "dial the subject now, and tell me if it answers" (a refusal
    /// comes back as the prober's own [`CorroborateOp::Refused`]).
    Probe,
    /// Prober (or coordinator) to the subject: "answer me".
    Ping,
    /// The subject's answer to a [`CorroborateOp::Ping`] (its subject is the sender).
    Pong,
    /// Prober to the coordinator: "the subject answered my ping" (the refusal is refuted).
    Contact,
    /// Coordinator to a rank that reported the refusal: "corroborated: the subject is dead"
    /// (the reporter marks it dead and repairs, as hard evidence always did).
    Dead,
}

impl CorroborateOp {
    /// The wire byte.
    pub const fn byte(self) -> u8 {
        match self {
            Self::Refused => 0,
            Self::Probe => 1,
            Self::Ping => 2,
            Self::Pong => 3,
            Self::Contact => 4,
            Self::Dead => 5,
        }
    }

    /// The op a wire byte names.
    pub const fn from_byte(b: u8) -> Option<Self> {
        Some(match b {
            0 => Self::Refused,
            1 => Self::Probe,
            2 => Self::Ping,
            3 => Self::Pong,
            4 => Self::Contact,
            5 => Self::Dead,
            _ => return None,
        })
    }
}

/// Corroboration of a refused dial (detector on): one rank's refused dial is reported to the
/// subject's coordinator, which asks other ranks to dial the subject at once; a second refusal
/// removes it, an answer refutes the report. Fixed size: one op byte, one rank.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CorroborateMsg {
    /// What the sender says or asks.
    pub op: CorroborateOp,
    /// The rank whose dial was refused.
    pub subject: Rank,
}

impl Codec for CorroborateMsg {
    fn encoded_len(&self) -> usize {
        1 + 4
    }
    fn encode(&self, buf: &mut impl BufMut) {
        buf.put_u8(self.op.byte());
        buf.put_u32(self.subject.0);
    }
    fn decode(r: &mut Reader, _limits: &Limits) -> Result<Self, DecodeError> {
        let op = CorroborateOp::from_byte(r.u8()?)
            .ok_or(DecodeError::Invalid("unknown corroboration op"))?;
        Ok(Self {
            op,
            subject: r.rank()?,
        })
    }
}

/// Launched ranks to the coordinator, up the tree: "we have started" (check-ins). A rank sends
/// its own to its parent, again every `membership.check_in_resend` until a check-in notice
/// applied here lists it, and at once to a new parent; a relay passes what its descendants
/// sent on to its parent after `membership.relay_batch`, merged; the coordinator puts them in
/// its next notice.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckInMsg {
    /// The span the ranks were launched with (the expected size): check-ins under another
    /// are a misconfigured launch and are refused (counted as stale).
    pub span: u32,
    /// The ranks checking in, ascending (the sender's own, its descendants').
    pub ranks: Vec<Rank>,
}

impl Codec for CheckInMsg {
    fn encoded_len(&self) -> usize {
        4 + 4 + 4 * self.ranks.len()
    }
    fn encode(&self, buf: &mut impl BufMut) {
        buf.put_u32(self.span);
        put_ranks(buf, &self.ranks);
    }
    fn decode(r: &mut Reader, limits: &Limits) -> Result<Self, DecodeError> {
        Ok(Self {
            span: r.u32()?,
            ranks: get_ranks(r, limits)?,
        })
    }
}

/// The coordinator's check-in notice, broadcast as a process-first xcast payload: these
/// launched ranks are members as of `epoch` (view 0 is formed by these notices). Every member
/// applies the same notices in the same op order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckInNotice {
    /// The view this notice makes (the coordinator's epoch counter, shared with removals and
    /// admissions).
    pub epoch: u64,
    /// The ranks checked in, ascending.
    pub ranks: Vec<Rank>,
}

impl Codec for CheckInNotice {
    fn encoded_len(&self) -> usize {
        8 + 4 + 4 * self.ranks.len()
    }
    fn encode(&self, buf: &mut impl BufMut) {
        buf.put_u64(self.epoch);
        put_ranks(buf, &self.ranks);
    }
    fn decode(r: &mut Reader, limits: &Limits) -> Result<Self, DecodeError> {
        Ok(Self {
            epoch: crate::wire::counter(r.u64()?)?,
            ranks: get_ranks(r, limits)?,
        })
    }
}

/// A shrink campaign's id: the requesting rank and its own sequence number (ranks are never
/// reused, so the pair is unique for the cluster's life).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CampaignId {
    /// The rank that asked for the shrink ([`Node::shrink`](crate::Node::shrink)).
    pub requester: Rank,
    /// The requester's sequence number (1 for its first campaign).
    pub seq: u32,
}

impl std::fmt::Display for CampaignId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.requester, self.seq)
    }
}

impl CampaignId {
    fn put(&self, buf: &mut impl BufMut) {
        buf.put_u32(self.requester.0);
        buf.put_u32(self.seq);
    }

    fn get(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(Self {
            requester: r.rank()?,
            seq: r.u32()?,
        })
    }
}

/// A requester to the coordinator (the root of its view): "remove these ranks on purpose".
/// Re-sent when the coordinator changes; the coordinator keeps one entry per campaign id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShrinkRequestMsg {
    /// The campaign.
    pub id: CampaignId,
    /// The ranks to remove, ascending.
    pub targets: Vec<Rank>,
}

impl Codec for ShrinkRequestMsg {
    fn encoded_len(&self) -> usize {
        8 + 4 + 4 * self.targets.len()
    }
    fn encode(&self, buf: &mut impl BufMut) {
        self.id.put(buf);
        put_ranks(buf, &self.targets);
    }
    fn decode(r: &mut Reader, limits: &Limits) -> Result<Self, DecodeError> {
        Ok(Self {
            id: CampaignId::get(r)?,
            targets: get_ranks(r, limits)?,
        })
    }
}

/// The coordinator's shrink order, broadcast as a **forward-first** xcast payload: every rank
/// forwards it to its children before it processes it, so the order reaches each target
/// through its own lifeline before any survivor rewires around it. Every rank records the
/// targets; a target enters leaving mode as it processes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShrinkOrder {
    /// The campaigns this order carries, each with its targets (ascending).
    pub campaigns: Vec<(CampaignId, Vec<Rank>)>,
}

impl Codec for ShrinkOrder {
    fn encoded_len(&self) -> usize {
        4 + self
            .campaigns
            .iter()
            .map(|(_, t)| 8 + 4 + 4 * t.len())
            .sum::<usize>()
    }
    fn encode(&self, buf: &mut impl BufMut) {
        buf.put_u32(self.campaigns.len() as u32);
        for (id, t) in &self.campaigns {
            id.put(buf);
            put_ranks(buf, t);
        }
    }
    fn decode(r: &mut Reader, limits: &Limits) -> Result<Self, DecodeError> {
        let n = r.count(12, limits.max_list)?;
        let campaigns = (0..n)
            .map(|_| Ok((CampaignId::get(r)?, get_ranks(r, limits)?)))
            .collect::<Result<_, DecodeError>>()?;
        Ok(Self { campaigns })
    }
}

/// The coordinator's departure notice, broadcast as a process-first xcast payload once a
/// shrink order completed: the campaigns' targets are removed as of `epoch` (cause
/// [`RemovalCause::Left`]), in one view change, at every survivor in the same op order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeftNotice {
    /// The view this notice makes.
    pub epoch: u64,
    /// The campaigns it completes.
    pub campaigns: Vec<CampaignId>,
    /// Every target of those campaigns, ascending.
    pub ranks: Vec<Rank>,
}

impl Codec for LeftNotice {
    fn encoded_len(&self) -> usize {
        8 + 4 + 8 * self.campaigns.len() + 4 + 4 * self.ranks.len()
    }
    fn encode(&self, buf: &mut impl BufMut) {
        buf.put_u64(self.epoch);
        buf.put_u32(self.campaigns.len() as u32);
        for id in &self.campaigns {
            id.put(buf);
        }
        put_ranks(buf, &self.ranks);
    }
    fn decode(r: &mut Reader, limits: &Limits) -> Result<Self, DecodeError> {
        let epoch = crate::wire::counter(r.u64()?)?;
        let n = r.count(8, limits.max_list)?;
        let campaigns = (0..n)
            .map(|_| CampaignId::get(r))
            .collect::<Result<_, DecodeError>>()?;
        Ok(Self {
            epoch,
            campaigns,
            ranks: get_ranks(r, limits)?,
        })
    }
}

crate::message_family! { Membership =>
    /// Failure-knowledge messages (kinds 2–3, 40–43, 49), agreement (44–48, 51), joins (60–61),
    /// check-ins (62), shrink requests (63), frames relayed around gray links (70) and tree
    /// pings (71).
    pub enum MembershipMsg {
        /// Adoption notice, parent to new child ([`AdoptMsg`]).
        Adopt(AdoptMsg) = 2, Control, Adopt, "adopt";
        /// Failure notice with lineage, child to parent ([`LineageMsg`]).
        Lineage(LineageMsg) = 3, Control, Lineage, "lineage";
        /// Detector evidence, observers to coordinator up the tree ([`AlertMsg`]).
        Alert(AlertMsg) = 40, Control, Alert, "alert";
        /// Fencing notice to a removed rank ([`EvictedMsg`]).
        Evicted(EvictedMsg) = 41, Control, Evicted, "evicted";
        /// The coordinator's decision, flooded on the revoke overlay ([`RemovedMsg`]).
        Removed(RemovedMsg) = 42, Control, Removed, "removed";
        /// A tree link down past the gray timeout, endpoint to coordinator ([`UnreachableMsg`]).
        Unreachable(UnreachableMsg) = 43, Control, Unreachable, "unreachable";
        /// A joiner's request, contact to coordinator ([`JoinForwardMsg`]).
        JoinForward(JoinForwardMsg) = 60, Control, JoinForward, "join-forward";
        /// The coordinator's answer to a request it did not queue ([`JoinAnswerMsg`]).
        JoinAnswer(JoinAnswerMsg) = 61, Control, JoinAnswer, "join-answer";
        /// Launched ranks' check-ins, up the tree to the coordinator ([`CheckInMsg`]).
        CheckIn(CheckInMsg) = 62, Control, CheckIn, "check-in";
        /// A shrink campaign's request, requester to coordinator ([`ShrinkRequestMsg`]).
        ShrinkRequest(ShrinkRequestMsg) = 63, Control, ShrinkRequest, "shrink-request";
        /// Corroboration of a refused dial ([`CorroborateMsg`]).
        Corroborate(CorroborateMsg) = 49, Control, Corroborate, "corroborate";
        /// A frame carried around a gray tree link through a relay rank ([`RelayedMsg`]).
        Relayed(RelayedMsg) = 70, Control, Relayed, "relayed";
        /// Keeps an idle tree link's silence meaningful ([`TreePingMsg`]).
        TreePing(TreePingMsg) = 71, Control, TreePing, "tree-ping";
        /// Phase 1, candidate to members ([`PrepareMsg`]).
        Prepare(PrepareMsg) = 44, Control, Prepare, "prepare";
        /// Phase 1 answer, member to candidate ([`PromiseMsg`]).
        Promise(PromiseMsg) = 45, Control, Promise, "promise";
        /// Phase 2, leader to members ([`ProposeMsg`]).
        Propose(ProposeMsg) = 46, Control, Propose, "propose";
        /// Phase 2 answer, member to leader ([`AcceptMsg`]).
        Accept(AcceptMsg) = 47, Control, Accept, "accept";
        /// The leader's check or phase 2, down its tree ([`TreeRoundMsg`]).
        TreeRound(TreeRoundMsg) = 48, Control, TreeRound, "tree-round";
        /// Answers to a tree round, up the tree ([`RoundAnswersMsg`]).
        RoundAnswers(RoundAnswersMsg) = 51, Control, RoundAnswers, "round-answers";
    }
}
