//! Vouching (Rapid's multi-observer rule, issue #23 item 2: "remove a rank for unreachability
//! only when no member can reach it"). With quorum views on, a rank that heard a frame from a
//! peer directly (on the link itself, not through a relay) within the last two detector
//! periods vouches for it: the peer is alive and reaches this rank now, whatever its observers
//! say.
//!
//! - **A coordinator** (the root, or a candidate) does not decide the removal of a subject it
//!   vouches for (`alerts.rs`): on the side of a one-way cut that hears everyone, the deaf
//!   side's accusations of live ranks (made stable by the implicit reporters) reached the root,
//!   which heard those ranks itself and removed them (the sweep's seed 213).
//! - **An acceptor** (`agree.rs`, `on_prepare`; not promising is always safe in Paxos) refuses
//!   a leader's removal check naming the ranks of its cut it vouches for, and refuses a
//!   candidate that means to remove the leader it promised while it still hears that leader:
//!   a candidate on the deaf side, whose PREPARE queued behind the cut, is not elected at the
//!   heal by acceptors that hear that leader. A candidate's PREPARE is not otherwise refused
//!   for vouched ranks (that stalled duels whose first candidate is lossy: docs/partitions.md,
//!   "Vouching").
//!
//! Why two periods: a subject's observers get its heartbeat every period, and its tree
//! neighbours a frame at least every `membership.gray_after / 2`; a rank that stopped (crash,
//! SIGSTOP) is accused only after `detect.timeout + detect.refute` (400 ms by default) of
//! silence, so nobody has heard it for at least that long when its removal is decided: real
//! failures are not vouched for. A killed rank's links are reset at once, and its hard
//! evidence (`corroborate.rs`) never passes through here.

use crate::machine::Ctx;
use crate::membership::Membership;
use crate::time::Duration;
use crate::tree::Rank;

impl Membership {
    /// A frame from `peer` arrived on the link itself (quorum views on): noted for vouching.
    pub(in crate::membership) fn note_heard(&mut self, ctx: &Ctx<'_>, peer: Rank) {
        if !Self::quorum_on(ctx) || !ctx.cfg.detect.enabled {
            return;
        }
        let now = ctx.now;
        self.quorum_mut(ctx.me()).heard.insert(peer, now);
    }

    /// How long a direct frame vouches for its sender: two detector periods.
    fn vouch_window(ctx: &Ctx<'_>) -> Duration {
        Duration::from_nanos(ctx.cfg.detect.period.as_nanos().saturating_mul(2))
    }

    /// Whether this rank heard `subject` directly within the vouch window (quorum views on).
    pub(in crate::membership) fn vouches(&self, ctx: &Ctx<'_>, subject: Rank) -> bool {
        let Some(q) = self.quorum.as_ref() else {
            return false;
        };
        q.heard
            .get(&subject)
            .is_some_and(|&t| ctx.now.saturating_since(t) < Self::vouch_window(ctx))
    }

    /// Forgets what was heard from ranks no longer alive.
    pub(in crate::membership) fn forget_heard(&mut self, alive: impl Fn(Rank) -> bool) {
        if let Some(q) = self.quorum.as_mut() {
            q.heard.retain(|r, _| alive(*r));
        }
    }
}
