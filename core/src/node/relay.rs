//! Frames around gray links: the node's part of membership's relay (`membership/relay.rs`
//! decides which links are relayed and through whom). Outbound, a frame to a peer whose link
//! is relayed leaves wrapped in a [`RelayedMsg`] to the relay; inbound, an envelope is
//! forwarded once (this rank is the relay) or opened (this rank is its destination).

use bytes::Bytes;

use super::{ctx, run, Node};
use crate::machine::Ctx;
use crate::membership::relay;
use crate::membership::RelayedMsg;
use crate::transmit::{Class, Transmit};
use crate::tree::Rank;

impl Node {
    /// `t` as it leaves: wrapped for the relay when its link is relayed (`None`: the envelope
    /// would pass `max_frame`; dropped, counted), unchanged otherwise.
    pub(super) fn around_gray(&mut self, t: Transmit) -> Option<Transmit> {
        if !t.relayable() {
            return Some(t);
        }
        let Some(via) = self.m.membership.relay_via(t.to) else {
            return Some(t);
        };
        let me = self.tree.me();
        let stats = self.m.membership.relay_counters();
        match relay::wrap(me, t.to, t.frame, self.limits.max_frame) {
            Some(frame) => {
                stats.relayed_out += 1;
                Some(Transmit::direct(via, Class::Control, frame))
            }
            None => {
                stats.relay_dropped_too_big += 1;
                None
            }
        }
    }

    /// An envelope arrived from `from` (already heard as a frame from `from` itself).
    pub(super) fn on_relayed(&mut self, from: Rank, m: RelayedMsg) {
        let me = self.tree.me();
        let member = |r: Rank| self.tree.layout().contains(r) && self.tree.is_alive(r);
        if !member(m.src) || !member(m.dst) {
            self.m.membership.relay_counters().relay_dropped_not_member += 1;
            return;
        }
        if m.src == m.dst {
            self.m.membership.relay_counters().relay_dropped_forged += 1;
            return;
        }
        if m.dst != me {
            self.forward_relayed(from, m);
            return;
        }
        if relay::is_relayed(&m.frame) {
            self.m.membership.relay_counters().relay_dropped_nested += 1;
            return;
        }
        if m.src != from {
            run!(self, membership.on_relayed_in(m.src));
        }
        if m.frame.is_empty() {
            run!(
                self,
                membership.on_relay_probe(m.src, m.src == from, m.flags)
            );
            return;
        }
        // (An envelope with a frame sent directly, which no rank of this build sends, reads
        // the same: the envelope was the input counted, and the sender was heard.)
        self.dispatch_relayed(m.src, m.frame);
    }

    /// This rank relays `m` for `from`: once, only for its origin (a rank never forwards an
    /// envelope someone else forwarded), to the destination itself.
    fn forward_relayed(&mut self, from: Rank, m: RelayedMsg) {
        if m.src != from {
            self.m.membership.relay_counters().relay_dropped_forged += 1;
            return;
        }
        let to = m.dst;
        let frame: Bytes = crate::wire::Message::from(m).encode();
        self.m.membership.relay_counters().relayed_forwarded += 1;
        ctx!(self).send_direct(to, frame);
    }
}
