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

/// Checks a decoded message with its machine's [`Machine::admits`], counts it, and hands it to
/// [`Machine::on_message`] (then the node applies the machine's effects).
macro_rules! deliver {
    ($node:ident, $machine:ident, $from:expr, $msg:expr) => {{
        if !$node.m.$machine.admits(&ctx!($node), &$msg) {
            $node.stats.dropped_bad_origin += 1;
            return;
        }
        $node.stats.frames_in += 1;
        run!($node, $machine.on_message($from, $msg))
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
            /// A decoded message, to the machine that owns its family.
            fn dispatch_message(&mut self, from: Rank, msg: Message) {
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
    pub(super) fn dispatch_frame(&mut self, from: Rank, frame: Bytes) {
        if !self.tree.layout().contains(from) {
            self.stats.dropped_unknown_peer += 1;
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
        self.catch_up_span(from, &msg);
        self.dispatch_message(from, msg);
    }
}
