//! Read-only views of the machines' state, for tests, tools and a data plane.

use super::Node;
use crate::machine::Machine;
use crate::tree::Rank;

/// Machine inspectors: read-only views of the machines' state (leak checks, watermarks, the
/// agreed membership view).
impl Node {
    /// Armed timers and remembered protocol state, for leak checks in tests and the simulator.
    pub fn pending_state(&self) -> usize {
        self.timers.len() + self.m.held()
    }

    /// RELM message-level state held here: unacknowledged and buffered messages, relay records
    /// and cached copies, coalesced marks, link-update gates. Zero once traffic has settled.
    pub fn relm_held(&self) -> usize {
        self.m.relm.held()
    }

    /// RELM chains with a counter here (per peer pair, not per message): the next uid as a
    /// source, the delivered watermark as a destination. Dropped when the peer dies.
    pub fn relm_chains(&self) -> usize {
        self.m.relm.chains()
    }

    /// RELM payload bytes this rank originated that await acknowledgement.
    pub fn relm_unacked_bytes(&self) -> usize {
        self.m.relm.out_bytes()
    }

    /// Highest xcast op id delivered here, and the global completion watermark known here.
    pub fn xcast_watermarks(&self) -> (u64, u64) {
        (self.m.xcast.delivered(), self.m.xcast.global_done())
    }

    /// The ranks that watch this one with the heartbeat detector (it heartbeats them),
    /// ascending; empty while the detector is off.
    pub fn detect_observers(&self) -> impl Iterator<Item = Rank> + '_ {
        self.m.detect.observers()
    }

    /// Highest global failure epoch seen.
    pub fn epoch(&self) -> u64 {
        self.m.membership.epoch()
    }

    /// The agreed membership view applied here: the epoch of the last global notice and the
    /// ranks removed as of it. Members that applied the same epoch hold the same view; a data
    /// plane sizes its communicator from it (see [`MembershipView`](crate::MembershipView)).
    pub fn view(&self) -> crate::MembershipView {
        self.m.membership.view()
    }

    /// The ranks removed as of the agreed view, as the set the node keeps (what
    /// [`Self::view`] lists): for footprint measurements.
    pub fn agreed_removed(&self) -> &crate::tree::RankSet {
        self.m.membership.agreed_removed()
    }

    /// Payload bytes the xcast machine holds: ops in flight or retained until the global
    /// watermark passes them, and this rank's broadcasts awaiting completion.
    pub fn xcast_held_payload_bytes(&self) -> usize {
        self.m.xcast.held_payload_bytes()
    }

    /// The last value this rank's acceptor accepted: (ballot, epoch, removed). For the
    /// simulator's quorum checker.
    #[cfg(any(test, feature = "sim"))]
    pub(crate) fn quorum_accepted(&self) -> Option<crate::membership::quorum::Accepted> {
        self.m.membership.quorum_accepted()
    }
}
