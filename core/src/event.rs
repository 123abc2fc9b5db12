//! What the node tells the application: one variant per machine, plus the node's own view
//! changes.

use crate::detect::DetectEvent;
use crate::flood::FloodEvent;
use crate::membership::MembershipEvent;
use crate::relm::RelmEvent;
use crate::revoke::RevokeEvent;
use crate::tree::ViewDelta;
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
