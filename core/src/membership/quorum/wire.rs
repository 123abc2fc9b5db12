//! Agreement messages (control class, kinds 44–47): PREPARE and PROMISE (phase 1), PROPOSE and
//! ACCEPT (phase 2), sent directly between a candidate or leader and the members of its view.
//! The leader's removal check and phase 2 normally go down its tree instead, in the tree round
//! messages of `tree_round.rs` (kinds 48 and 51), which carry these messages' content.

use bytes::BufMut;

use super::{Accepted, Ballot};
use crate::membership::wire::{get_ranks, put_ranks};
use crate::tree::Rank;
use crate::wire::{Codec, DecodeError, Limits, Reader};

pub(super) fn put_ballot(buf: &mut impl BufMut, b: Ballot) {
    buf.put_u64(b.round);
    buf.put_u32(b.rank.0);
}

pub(super) fn get_ballot(r: &mut Reader) -> Result<Ballot, DecodeError> {
    Ok(Ballot {
        round: crate::wire::counter(r.u64()?)?,
        rank: r.rank()?,
    })
}

/// The `(ballot, epoch, ranks)` triple PREPARE, PROPOSE and a promise's accepted value share:
/// 12 + 8 + 4 + 4·n bytes.
fn triple_len(removed: &[Rank]) -> usize {
    12 + 8 + 4 + 4 * removed.len()
}

fn put_triple(buf: &mut impl BufMut, b: Ballot, epoch: u64, removed: &[Rank]) {
    put_ballot(buf, b);
    buf.put_u64(epoch);
    put_ranks(buf, removed);
}

fn get_triple(r: &mut Reader, limits: &Limits) -> Result<(Ballot, u64, Vec<Rank>), DecodeError> {
    Ok((
        get_ballot(r)?,
        crate::wire::counter(r.u64()?)?,
        get_ranks(r, limits)?,
    ))
}

/// Candidate to the members of its view: "promise me `ballot`; I mean to remove `removed`"
/// (every candidate ahead of it, and whatever else its evidence holds stable).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PrepareMsg {
    /// The candidate's ballot (its rank is the ballot's).
    pub ballot: Ballot,
    /// The candidate's agreed epoch (the instance it prepares is the next one).
    pub epoch: u64,
    /// The tentative cut, ascending.
    pub removed: Vec<Rank>,
}

impl Codec for PrepareMsg {
    fn encoded_len(&self) -> usize {
        triple_len(&self.removed)
    }
    fn encode(&self, buf: &mut impl BufMut) {
        put_triple(buf, self.ballot, self.epoch, &self.removed);
    }
    fn decode(r: &mut Reader, limits: &Limits) -> Result<Self, DecodeError> {
        let (ballot, epoch, removed) = get_triple(r, limits)?;
        Ok(Self {
            ballot,
            epoch,
            removed,
        })
    }
}

/// A member's answer to a PREPARE: a promise (with the value it accepted, if any, on the view
/// it applies to, and the
/// subjects of its own standing down evidence) or a refusal naming the ballot it promised.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PromiseMsg {
    /// The ballot answered.
    pub ballot: Ballot,
    /// Whether it was promised (`false`: refused, see `promised`).
    pub ok: bool,
    /// The highest ballot the member has promised (the answered one when `ok`).
    pub promised: Ballot,
    /// The value the member accepted and has not seen decided, if any.
    pub accepted: Option<Accepted>,
    /// The subjects of the member's own standing down evidence, with the incarnation each is
    /// about: the leader counts them as that observer's alerts.
    pub downs: Vec<(Rank, u64)>,
    /// The ranks of the PREPARE's cut this member heard directly within two detector periods
    /// (it vouches for them: `membership/quorum/vouch.rs`), ascending. Non-empty only in a
    /// refusal (`ok` false): one that answers a leader's removal check, or one to a candidate
    /// that means to remove the leader this member promised and still hears (that leader).
    pub vouched: Vec<Rank>,
    /// The PREPARE's cut, echoed when it answers a leader's removal check (the leader counts
    /// the answer for those ranks), ascending; empty otherwise.
    pub checked: Vec<Rank>,
}

impl PromiseMsg {
    /// A refusal of `ballot`: no accepted value and no evidence, naming the ballot this member
    /// promised and the ranks it vouches for (`checked`: the cut echoed, for a removal check).
    pub(crate) fn refusal(
        ballot: Ballot,
        promised: Ballot,
        vouched: Vec<Rank>,
        checked: Vec<Rank>,
    ) -> Self {
        Self {
            ballot,
            ok: false,
            promised,
            accepted: None,
            downs: Vec::new(),
            vouched,
            checked,
        }
    }
}

impl Codec for PromiseMsg {
    fn encoded_len(&self) -> usize {
        12 + 1
            + 12
            + 1
            + self
                .accepted
                .as_ref()
                .map_or(0, |a| triple_len(&a.removed) + 4 + 4 * a.base.len())
            + 4
            + 12 * self.downs.len()
            + 4
            + 4 * self.vouched.len()
            + 4
            + 4 * self.checked.len()
    }
    fn encode(&self, buf: &mut impl BufMut) {
        put_ballot(buf, self.ballot);
        buf.put_u8(u8::from(self.ok));
        put_ballot(buf, self.promised);
        match &self.accepted {
            None => buf.put_u8(0),
            Some(a) => {
                buf.put_u8(1);
                put_triple(buf, a.ballot, a.epoch, &a.removed);
                put_ranks(buf, &a.base);
            }
        }
        buf.put_u32(self.downs.len() as u32);
        for &(s, inc) in &self.downs {
            buf.put_u32(s.0);
            buf.put_u64(inc);
        }
        put_ranks(buf, &self.vouched);
        put_ranks(buf, &self.checked);
    }
    fn decode(r: &mut Reader, limits: &Limits) -> Result<Self, DecodeError> {
        let ballot = get_ballot(r)?;
        let ok = r.bool()?;
        let promised = get_ballot(r)?;
        let accepted = if r.bool()? {
            let (ballot, epoch, removed) = get_triple(r, limits)?;
            Some(Accepted {
                ballot,
                epoch,
                removed,
                base: get_ranks(r, limits)?,
            })
        } else {
            None
        };
        let n = r.count(12, limits.max_list)?;
        let downs = (0..n)
            .map(|_| Ok((r.rank()?, crate::wire::counter(r.u64()?)?)))
            .collect::<Result<Vec<_>, DecodeError>>()?;
        let vouched = get_ranks(r, limits)?;
        let checked = get_ranks(r, limits)?;
        Ok(Self {
            ballot,
            ok,
            promised,
            accepted,
            downs,
            vouched,
            checked,
        })
    }
}

/// Leader to the members of its view: "accept that epoch `epoch` removes `removed` from the
/// view `base`" (the leader's agreed view of epoch `epoch - 1`, kept with the accepted value so
/// a later leader behind on epochs learns it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProposeMsg {
    /// The leader's ballot.
    pub ballot: Ballot,
    /// The epoch proposed (one past the leader's agreed epoch).
    pub epoch: u64,
    /// The ranks the epoch removes, ascending.
    pub removed: Vec<Rank>,
    /// The ranks removed as of epoch `epoch - 1` at the leader, ascending.
    pub base: Vec<Rank>,
}

impl Codec for ProposeMsg {
    fn encoded_len(&self) -> usize {
        triple_len(&self.removed) + 4 + 4 * self.base.len()
    }
    fn encode(&self, buf: &mut impl BufMut) {
        put_triple(buf, self.ballot, self.epoch, &self.removed);
        put_ranks(buf, &self.base);
    }
    fn decode(r: &mut Reader, limits: &Limits) -> Result<Self, DecodeError> {
        let (ballot, epoch, removed) = get_triple(r, limits)?;
        Ok(Self {
            ballot,
            epoch,
            removed,
            base: get_ranks(r, limits)?,
        })
    }
}

/// A member's answer to a PROPOSE: accepted, or refused naming the higher ballot it promised.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AcceptMsg {
    /// The ballot answered.
    pub ballot: Ballot,
    /// The epoch answered.
    pub epoch: u64,
    /// Whether it was accepted (`false`: refused, see `promised`).
    pub ok: bool,
    /// The highest ballot the member has promised.
    pub promised: Ballot,
}

impl Codec for AcceptMsg {
    fn encoded_len(&self) -> usize {
        12 + 8 + 1 + 12
    }
    fn encode(&self, buf: &mut impl BufMut) {
        put_ballot(buf, self.ballot);
        buf.put_u64(self.epoch);
        buf.put_u8(u8::from(self.ok));
        put_ballot(buf, self.promised);
    }
    fn decode(r: &mut Reader, _limits: &Limits) -> Result<Self, DecodeError> {
        Ok(Self {
            ballot: get_ballot(r)?,
            epoch: crate::wire::counter(r.u64()?)?,
            ok: r.bool()?,
            promised: get_ballot(r)?,
        })
    }
}
