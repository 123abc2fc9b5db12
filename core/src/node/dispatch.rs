//! The router: every input goes to exactly one machine. The machine table below is the one
//! place a machine is registered with the node: one line names its message family and timer
//! variant (they share the name), its field and its type; the router, start-up and the
//! view-change fan-out are generated from it, in table order.

use bytes::Bytes;

use super::{ctx, run, Node};
use crate::config::Config;
use crate::link::LinkCause;
use crate::machine::{Ctx, Machine, MembersChange};
use crate::timer::{TimerKey, TimerToken};
use crate::tree::{Rank, ViewDelta};
use crate::wire::{DecodeError, Message};

/// Checks a decoded message with its machine's [`Machine::admits`] and hands it to
/// [`Machine::on_message`] (then the node applies the machine's effects); `false` when the
/// machine refused it (the caller counts either way).
macro_rules! deliver {
    ($node:ident, $machine:ident, $from:expr, $msg:expr) => {{
        if !$node.m.$machine.admits(&ctx!($node), &$msg) {
            false
        } else {
            run!($node, $machine.on_message($from, $msg));
            true
        }
    }};
}

/// Generates the node's machine set and its routing from the machine table.
macro_rules! machines {
    ($($(#[$doc:meta])* $variant:ident => $field:ident: $ty:ty,)*) => {
        /// Every protocol machine of one node, owned by value, in table order.
        #[derive(Debug)]
        pub(crate) struct Machines {
            $($(#[$doc])* pub(crate) $field: $ty,)*
        }

        impl Machines {
            pub(super) fn new(cfg: &Config, me: Rank) -> Self {
                Self {
                    $($field: <$ty as Machine>::new(cfg, me),)*
                }
            }

            /// Protocol state every machine holds ([`Machine::held`]), summed.
            pub(super) fn held(&self) -> usize {
                0 $(+ self.$field.held())*
            }
        }

        impl Node {
            /// A decoded message, to the machine that owns its family; `false` when that
            /// machine's [`Machine::admits`] refused it (nothing changed).
            fn dispatch_message(&mut self, from: Rank, msg: Message) -> bool {
                match msg {
                    $(Message::$variant(m) => deliver!(self, $field, from, m),)*
                }
            }

            /// One due timer, to the machine that owns its key.
            pub(super) fn dispatch_timer(&mut self, key: TimerKey, token: TimerToken) {
                match key {
                    $(TimerKey::$variant(t) => run!(self, $field.on_timer(t, token)),)*
                }
            }

            /// Every machine's start-up, in table order.
            pub(super) fn start_machines(&mut self) {
                $(run!(self, $field.on_start());)*
            }

            /// A change of the live set, to every machine in table order, then (once every
            /// machine has seen it) its completed repair, in table order.
            pub(super) fn members_change_to_machines(&mut self, change: &MembersChange<'_>) {
                $(run!(self, $field.on_members_change(change));)*
                $(run!(self, $field.on_repaired(change));)*
            }

            /// A link up, to every machine in table order.
            pub(super) fn link_up_to_machines(&mut self, peer: Rank) {
                $(run!(self, $field.on_link_up(peer));)*
            }

            /// A link down, to every machine in table order.
            pub(super) fn link_down_to_machines(&mut self, peer: Rank, cause: LinkCause) {
                $(run!(self, $field.on_link_down(peer, cause));)*
            }

            /// A frame from `peer` decoded, to every machine in table order.
            fn frame_from_to_machines(&mut self, peer: Rank) {
                $(run!(self, $field.on_frame_from(peer));)*
            }

            /// A delivered internal xcast op, to the machine whose [`Machine::XCAST_TAGS`] hold
            /// its tag (the tag table); `Err(payload)` when no machine takes it (an application
            /// op).
            pub(super) fn xcast_to_machines(&mut self, tag: u16, payload: Bytes) -> Result<(), Bytes> {
                $(
                    if <$ty as Machine>::XCAST_TAGS.contains(&tag) {
                        run!(self, $field.on_xcast(tag, payload));
                        return Ok(());
                    }
                )*
                Err(payload)
            }

            /// Root: an internal op completed everywhere, to the machine whose
            /// [`Machine::XCAST_TAGS`] hold its tag.
            pub(super) fn xcast_done_to_machines(&mut self, tag: u16, payload: Bytes) {
                $(
                    if <$ty as Machine>::XCAST_TAGS.contains(&tag) {
                        run!(self, $field.on_xcast_done(tag, payload));
                        return;
                    }
                )*
            }

            /// A repaired view, to every machine in table order.
            pub(super) fn view_change_to_machines(&mut self, d: &ViewDelta) {
                $(run!(self, $field.on_view_change(d));)*
            }
        }
    };
}

// The machine table. Order matters for the view-change fan-out: membership's adoption notices
// and hello precede xcast's replays on each link, and RELM's link updates come last.
machines! {
    /// The flood test protocol.
    Flood => flood: crate::flood::Flood,
    /// Failure knowledge (notices, the root's global failure notice).
    Membership => membership: crate::membership::Membership,
    /// Reliable broadcast.
    Xcast => xcast: crate::xcast::Xcast,
    /// Reliable messaging.
    Relm => relm: crate::relm::Relm,
    /// Heartbeat failure detector.
    Detect => detect: crate::detect::Detector,
    /// The revoke flood.
    Revoke => revoke: crate::revoke::Revoke,
}

impl Node {
    /// An adoption notice computed under a larger span from a rank that is not this rank's
    /// parent (a new parent): this rank is behind on admissions. They reach it through its parent, which a grow may have made a
    /// joiner that is not running yet (or one that failed before it started); until this rank
    /// holds the larger span it cannot read its new parent's lineage, so it would never learn
    /// that its parent is gone. The tree grows first, so the notice's lineage is reconciled
    /// and the tree repaired; the admissions themselves (their events, the ranks they give)
    /// follow in op order. Not believed past `join.max_per_view` × 64 ranks ahead, or where the
    /// tree would grow deeper than `max_list` (lineages must stay within the frame limits).
    fn catch_up_span(&mut self, from: Rank, msg: &Message) {
        use crate::membership::MembershipMsg;
        // Only a parent's notice: a child's hello under a larger span (a joiner that started
        // before this rank applied its admission) waits for the admission, which brings the
        // joiner's address with it.
        let Message::Membership(MembershipMsg::Adopt(m)) = msg else {
            return;
        };
        // From this rank's parent, the admission is on its way on the same link (it was
        // forwarded before the grow): no need to run ahead of it.
        if self.tree.view().and_then(|v| v.parent()) == Some(from) {
            return;
        }
        let span = m.span;
        let now = self.tree.layout().span();
        let bound = u64::from(self.cfg.join.max_per_view) * 64;
        if span <= now || u64::from(span - now) > bound {
            return;
        }
        let Ok(layout) = self.tree.layout().with_span(span) else {
            return;
        };
        if layout.max_depth() >= self.cfg.max_list {
            return;
        }
        if self.grow_span(span).is_ok() {
            self.m.membership.count_caught_up();
        }
    }

    /// One whole frame: peer checks, decode, the machine's admission check, then the machine.
    /// Nothing changes before the frame has decoded completely; every refusal is counted.
    ///
    /// A frame from a rank past this rank's span is dropped and counted, except a new parent's
    /// adoption notice that [`Self::catch_up_span`] believes: a launched rank that starts late
    /// holds the launcher's span while joiners were admitted past it, and the rank a grow put
    /// in its parent's slot may be one of them (`sim elastic --ranks 512 --radix 16 --seed 2007
    /// --joins 128 --contacts 3 --skew-ms 3000 --contact-crashes 2 --crash-coordinator
    /// --joiner-crashes 2 --starved 3 --launch-skew-ms 3000`: rank 280 started at 2.3 s under
    /// joiner 536, dropped its every frame, and the new root's recovery waited on it forever).
    pub(super) fn dispatch_frame(&mut self, from: Rank, frame: Bytes) {
        if !self.tree.layout().contains(from) {
            self.dispatch_from_past_span(from, frame);
            return;
        }
        // A removed rank's frame: membership decides whether it is heard (see
        // `Membership::hears_removed`).
        if self.tree.dead().contains(from) && !run!(self, membership.hears_removed(from, &frame)) {
            return;
        }
        let msg = match Message::decode(frame, &self.limits) {
            Ok(m) => m,
            Err(e) => {
                match e {
                    DecodeError::UnknownKind(_) => self.stats.dropped_unknown_kind += 1,
                    DecodeError::TooLong { .. } => self.stats.dropped_over_limit += 1,
                    _ => self.stats.dropped_decode_error += 1,
                }
                return;
            }
        };
        if self.tree.view().is_none() {
            self.stats.dropped_self_dead += 1;
            return;
        }
        self.frame_from_to_machines(from);
        if let Message::Membership(crate::membership::MembershipMsg::Relayed(m)) = msg {
            // The envelope is the input counted; what becomes of it is the relay's to count.
            self.stats.frames_in += 1;
            self.on_relayed(from, m);
            return;
        }
        self.catch_up_span(from, &msg);
        if self.dispatch_message(from, msg) {
            self.stats.frames_in += 1;
        } else {
            self.stats.dropped_bad_origin += 1;
        }
    }

    /// A frame `src` sent through a relay (the envelope came from another rank): decoded and
    /// dispatched as `src`'s, but not heard on the link to `src`, which stays gray (only the
    /// detector takes it as a sign of life). The envelope was the input counted; an inner
    /// frame that does not decode, or that its machine refuses, is counted in the relay's
    /// `relay_dropped_inner`.
    pub(super) fn dispatch_relayed(&mut self, src: Rank, frame: Bytes) {
        let Ok(msg) = Message::decode(frame, &self.limits) else {
            self.m.membership.relay_counters().relay_dropped_inner += 1;
            return;
        };
        run!(self, detect.on_frame_from(src));
        self.catch_up_span(src, &msg);
        if !self.dispatch_message(src, msg) {
            self.m.membership.relay_counters().relay_dropped_inner += 1;
        }
    }

    /// A frame from `from`, past this rank's span: only an adoption notice under a span that
    /// holds `from` is read, and only if catching up on it makes `from` a rank of the span;
    /// then the frame goes the usual way. Anything else is dropped and counted
    /// (`dropped_unknown_peer`), nothing changed.
    fn dispatch_from_past_span(&mut self, from: Rank, frame: Bytes) {
        use crate::membership::MembershipMsg;
        let adopt_span = match Message::decode(frame.clone(), &self.limits) {
            Ok(Message::Membership(MembershipMsg::Adopt(m))) if from.0 < m.span => Some(m),
            _ => None,
        };
        let Some(m) = adopt_span.filter(|_| self.tree.view().is_some()) else {
            self.stats.dropped_unknown_peer += 1;
            return;
        };
        self.catch_up_span(from, &Message::Membership(MembershipMsg::Adopt(m)));
        if !self.tree.layout().contains(from) {
            self.stats.dropped_unknown_peer += 1;
            return;
        }
        self.dispatch_frame(from, frame);
    }
}

#[cfg(test)]
mod tests {
    use crate::config::Config;
    use crate::membership::{AdoptMsg, MembershipMsg};
    use crate::time::Instant;
    use crate::tree::{Rank, Tree};
    use crate::wire::{FloodMsg, Message};
    use crate::Node;
    use bytes::Bytes;

    /// Rank 5 of a launch of 16 (radix 4) that started after 8 joiners were admitted.
    fn late_starter() -> Node {
        Node::new(Config::new(16, 4), Rank(5), 1, Instant::ZERO).unwrap()
    }

    /// The adoption notice `from` sends rank 5 in a tree of `span` ranks.
    fn adopt(from: u32, span: u32) -> Bytes {
        let tree = Tree::new(span, 4, Rank(from)).unwrap();
        let mut lineage = tree.view().unwrap().ancestors().to_vec();
        lineage.push(Rank(from));
        Message::Membership(MembershipMsg::Adopt(AdoptMsg { span, lineage })).encode()
    }

    #[test]
    fn a_new_parent_past_the_span_is_believed_and_anything_else_from_there_dropped() {
        let mut n = late_starter();
        let now = Instant::ZERO;
        // Anything but an adoption notice from past the span: dropped, counted, nothing grown.
        let flood = Message::Flood(FloodMsg {
            origin: Rank(20),
            id: 1,
            hops: 0,
            payload: Bytes::from_static(b"x"),
        });
        n.handle_frame(now, Rank(20), flood.encode());
        assert_eq!(n.stats().dropped_unknown_peer, 1);
        // An adoption notice under a span that does not hold its sender, or garbage.
        n.handle_frame(now, Rank(30), adopt(30, 31).slice(..5));
        n.handle_frame(now, Rank(30), {
            let m = AdoptMsg {
                span: 24,
                lineage: vec![Rank(0), Rank(30)],
            };
            Message::Membership(MembershipMsg::Adopt(m)).encode()
        });
        assert_eq!(n.stats().dropped_unknown_peer, 3);
        assert_eq!(n.tree().layout().span(), 16);
        assert_eq!(n.join_stats().spans_caught_up, 0);
        // Past the catch-up bound (join.max_per_view x 64 ranks ahead): not believed.
        let far = 16 + 1024 * 64 + 1;
        n.handle_frame(now, Rank(far - 1), adopt(far - 1, far));
        assert_eq!(n.stats().dropped_unknown_peer, 4);
        assert_eq!(n.tree().layout().span(), 16);
        // Joiner 20's notice under span 24: the tree grows to it, and the notice goes on to
        // membership (read, or refused there as any notice would be).
        let read = |n: &Node| n.stats().frames_in + n.stats().dropped_bad_origin;
        let before = read(&n);
        n.handle_frame(now, Rank(20), adopt(20, 24));
        assert_eq!(n.tree().layout().span(), 24);
        assert_eq!(n.join_stats().spans_caught_up, 1);
        assert_eq!(n.stats().dropped_unknown_peer, 4);
        assert_eq!(read(&n), before + 1);
    }
}
