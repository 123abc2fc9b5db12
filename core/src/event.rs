//! What the node tells the application: one variant per machine, plus the node's own view
//! changes.

use crate::detect::DetectEvent;
use crate::flood::FloodEvent;
use crate::membership::MembershipEvent;
use crate::relm::RelmEvent;
use crate::revoke::RevokeEvent;
use crate::tree::{RankSet, Scope, ViewDelta};
use crate::xcast::XcastEvent;

/// Declares [`Event`] from one line per machine, with `From` conversions from each machine's
/// event type.
macro_rules! events {
    ($($(#[$doc:meta])* $variant:ident($ty:ty);)*) => {
        /// An application-visible event, drained with [`Node::poll_event`](crate::Node::poll_event).
        #[derive(Clone, Debug, PartialEq, Eq)]
        #[non_exhaustive]
        pub enum Event {
            $($(#[$doc])* $variant($ty),)*
            /// This rank's tree view changed (a repair, a grow, root failover, or its own death).
            ViewChanged(ViewDelta),
            /// One tree repair here (only with
            /// [`Config::report_repairs`](crate::Config::report_repairs)): a batch of deaths
            /// that marked `ranks` dead (none of them dead here before) and recomputed this
            /// rank's view once, whether or not the view changed (a
            /// [`Event::ViewChanged`] follows when it did). Exactly one per batch: a shrink
            /// campaign's departure notice is one, as is each lost link or inferred death.
            Repaired {
                /// The ranks this repair marked dead, newly.
                ranks: RankSet,
                /// How they were learned: a local inference, or the root's notice.
                scope: Scope,
            },
        }

        from_parts!(Event { $($variant($ty)),* });
    };
}

events! {
    /// The flood test protocol.
    Flood(FloodEvent);
    /// Failure knowledge.
    Membership(MembershipEvent);
    /// Reliable broadcast.
    Xcast(XcastEvent);
    /// Reliable messaging.
    Relm(RelmEvent);
    /// Heartbeat failure detector (advisory).
    Detect(DetectEvent);
    /// The revoke flood.
    Revoke(RevokeEvent);
}
