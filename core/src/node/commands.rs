//! Commands: what the application asks of a node. Each clamps `now`; a refused command
//! changes nothing and says why ([`CommandError`]).

use bytes::Bytes;

use super::{ctx, run, Node};
use crate::error::CommandError;
use crate::machine::Ctx;
use crate::membership::{CampaignId, ShrinkError};
use crate::relm::Uid;
use crate::time::Instant;
use crate::tree::{Rank, RankSet, Route, TreeError};

/// Commands: start a flood, a broadcast or a reliable message; grow the span; declare ranks
/// dead on the runtime's word.
impl Node {
    /// Starts a flood (the test protocol) from this rank; it is delivered here too. Returns
    /// its id.
    pub fn flood(&mut self, now: Instant, payload: Bytes) -> Result<u64, CommandError> {
        self.clamp(now);
        self.admit(payload.len(), crate::flood::max_payload(&self.limits))?;
        Ok(run!(self, flood.start(payload)))
    }

    /// Broadcasts `payload` to every rank (reliable xcast). Returns this rank's sequence number
    /// for it; every rank (this one included) gets [`XcastEvent::Delivered`](crate::xcast::XcastEvent::Delivered) exactly once, and
    /// this rank gets [`XcastEvent::Completed`](crate::xcast::XcastEvent::Completed) once every survivor has it. `tag` is
    /// [`xcast::TAG_WIREUP`](crate::xcast::TAG_WIREUP) (process-first) or an application tag
    /// from [`xcast::FIRST_APP_TAG`](crate::xcast::FIRST_APP_TAG) up (forward-first); another
    /// is refused ([`XcastError::ReservedTag`](crate::xcast::XcastError::ReservedTag)).
    pub fn xcast(&mut self, now: Instant, tag: u16, payload: Bytes) -> Result<u64, CommandError> {
        self.clamp(now);
        self.admit(payload.len(), crate::xcast::max_payload(&self.limits))?;
        let seq = run!(self, xcast.originate(tag, payload))?;
        self.drive_xcast();
        Ok(seq)
    }

    /// Sends `payload` to `dst` reliably (RELM). Returns the message's uid in the (this rank,
    /// `dst`) chain. While both ranks live, `dst` gets [`RelmEvent::Delivered`](crate::relm::RelmEvent::Delivered) exactly once,
    /// in uid order per source, however relays on the path die and the tree is rebuilt; this
    /// rank gets [`RelmEvent::Acked`](crate::relm::RelmEvent::Acked) once it is delivered, or [`RelmEvent::Failed`](crate::relm::RelmEvent::Failed) if `dst`
    /// dies first. A send to this rank itself is delivered at once.
    ///
    /// Refused (nothing queued): [`CommandError::PeerDead`] for a rank known dead,
    /// [`CommandError::Unreachable`] for a live rank no route reaches now,
    /// [`RelmError::Backpressure`](crate::relm::RelmError::Backpressure) past `relm.window`
    /// messages to `dst` or `relm.max_bytes` in all (retry after a `RelmAcked`),
    /// [`CommandError::TooLarge`].
    pub fn relm_send(
        &mut self,
        now: Instant,
        dst: Rank,
        tag: u16,
        payload: Bytes,
    ) -> Result<Uid, CommandError> {
        self.clamp(now);
        self.admit(payload.len(), crate::relm::max_payload(&self.limits))?;
        let next = match self.tree.route(dst) {
            Route::Local => None,
            Route::Next(n) => Some(n),
            Route::Unreachable if !self.tree.layout().contains(dst) || !self.tree.is_alive(dst) => {
                return Err(CommandError::PeerDead(dst))
            }
            Route::Unreachable => return Err(CommandError::Unreachable(dst)),
        };
        Ok(run!(self, relm.originate(dst, next, tag, payload))?)
    }

    /// The checks every payload-carrying command makes first, in one place: this rank is a
    /// member, and the payload fits the largest frame the machine will put it in
    /// (`max_payload`, derived from the machine's codec and the node's [`Limits`]).
    fn admit(&self, len: usize, max_payload: usize) -> Result<(), CommandError> {
        if self.tree.view().is_none() {
            return Err(CommandError::Dead);
        }
        if self.m.membership.is_leaving() {
            return Err(CommandError::Leaving);
        }
        if len > max_payload {
            return Err(CommandError::TooLarge {
                len,
                max: self.cfg.max_frame,
            });
        }
        Ok(())
    }

    /// Grows the span to `new_span` (new ranks joined; holes stay holes): a command, applied
    /// as one repair.
    pub fn grow(&mut self, now: Instant, new_span: u32) -> Result<(), CommandError> {
        self.clamp(now);
        self.grow_span(new_span)?;
        // Ranks granted out of band are members: later admissions number past them.
        self.m.membership.note_granted_span(new_span);
        self.drive_xcast();
        Ok(())
    }

    /// Starts a shrink campaign removing `targets` on purpose (see
    /// [`membership`](crate::membership) and `membership/shrink.rs`): sent to the coordinator,
    /// which orders it through xcast; the targets drain and leave
    /// ([`MembershipEvent::Left`](crate::membership::MembershipEvent::Left)), every member
    /// removes them in one view change
    /// ([`MembershipEvent::Departed`](crate::membership::MembershipEvent::Departed)), and this
    /// rank gets [`MembershipEvent::CampaignCompleted`](crate::membership::MembershipEvent::CampaignCompleted)
    /// once, or [`MembershipEvent::CampaignFailed`](crate::membership::MembershipEvent::CampaignFailed)
    /// after `membership.shrink_timeout`. Targets already dead are allowed (they count as
    /// departed). Refused, nothing changed: see [`ShrinkError`].
    pub fn shrink(&mut self, now: Instant, targets: &RankSet) -> Result<CampaignId, ShrinkError> {
        self.clamp(now);
        let id = run!(self, membership.request_shrink(targets))?;
        self.drive_xcast();
        Ok(id)
    }

    /// Revokes `group` as of `epoch` (ULFM's `MPIX_Comm_revoke`; see [`crate::revoke`]): this
    /// rank gets [`RevokeEvent::Revoked`](crate::revoke::RevokeEvent::Revoked) at once, and
    /// a notice floods the binomial-graph overlay of its current view so that every live rank
    /// gets the event once, despite up to degree − 1 ranks dying during the flood. Idempotent:
    /// a (group, epoch) already revoked here is `Ok` and does nothing. Refused, nothing
    /// changed: [`CommandError::Dead`] on an evicted rank, [`RevokeError::Stale`](crate::revoke::RevokeError::Stale)
    /// when a newer epoch of the group is already revoked here. Allowed while leaving (a
    /// leaving rank is still a member and forwards notices).
    pub fn revoke(&mut self, now: Instant, group: u64, epoch: u64) -> Result<(), CommandError> {
        self.clamp(now);
        if self.tree.view().is_none() {
            return Err(CommandError::Dead);
        }
        Ok(run!(self, revoke.start(group, epoch))?)
    }

    /// The newest epoch of `group` revoked at this rank, if any (and still remembered: see
    /// [`RevokeConfig::max_groups`](crate::revoke::RevokeConfig::max_groups)).
    pub fn revoked(&self, group: u64) -> Option<u64> {
        self.m.revoke.revoked(group)
    }

    /// Revoke counters (kept with the revoke state, which a rank makes on first use: all zero
    /// before).
    pub fn revoke_stats(&self) -> crate::revoke::RevokeStats {
        self.m.revoke.stats()
    }

    /// Declares `ranks` dead on the embedding runtime's word (out of band, e.g. its launcher
    /// saw them exit) and repairs once. Ranks outside the span are refused, nothing changed.
    pub fn declare_dead(&mut self, now: Instant, ranks: &RankSet) -> Result<(), CommandError> {
        self.clamp(now);
        let v: Vec<Rank> = ranks.iter().collect();
        if let Some(&bad) = v.iter().find(|r| !self.tree.layout().contains(**r)) {
            return Err(CommandError::Tree(TreeError::RankOutOfRange {
                rank: bad,
                span: self.tree.layout().span(),
            }));
        }
        run!(self, membership.on_declared(v));
        self.drive_xcast();
        Ok(())
    }
}
