//! The adapter's counters: every refusal, malformed connection and dropped output is counted.

use std::sync::atomic::{AtomicU64, Ordering};

macro_rules! counters {
    ($($(#[$doc:meta])* $name:ident,)*) => {
        /// Live counters, shared by the driver and its socket tasks.
        #[derive(Debug, Default)]
        pub(crate) struct Counters {
            $(pub(crate) $name: AtomicU64,)*
        }

        /// A snapshot of the adapter's counters (monotonic). The core's own counters are in
        /// [`Node::stats`](lifeline_core::Node::stats).
        #[derive(Clone, Debug, Default, PartialEq, Eq)]
        #[non_exhaustive]
        pub struct TransportStats {
            $($(#[$doc])* pub $name: u64,)*
        }

        impl Counters {
            pub(crate) fn snapshot(&self) -> TransportStats {
                TransportStats {
                    $($name: self.$name.load(Ordering::Relaxed),)*
                }
            }
        }

        impl TransportStats {
            /// `(name, value)` pairs, for printing.
            pub fn fields(&self) -> Vec<(&'static str, u64)> {
                vec![$((stringify!($name), self.$name),)*]
            }
        }
    };
}

counters! {
    /// Connections accepted by the listener (before the handshake).
    accepted,
    /// Handshakes refused: garbage, wrong key, unknown rank, wrong IP, timeout, too many at once.
    /// Nothing such a peer sent reached the core.
    handshakes_refused,
    /// Authenticated connections refused because the rank is known dead.
    refused_dead,
    /// Of those, connections answered "you were removed" (the coordinator removed the rank;
    /// this is how a paused or cut-off rank learns its fate).
    fenced,
    /// Inbound connections answered "duplicate" by the simultaneous-dial tie-break (the
    /// other connection of the pair wins; not a failure).
    duplicates,
    /// Connections closed because a frame header was malformed or over `max_frame`
    /// (checked before the body is allocated).
    malformed,
    /// Dials started.
    dials,
    /// Dials that failed (connect error, timeout or handshake failure).
    dial_failures,
    /// Links reported up to the core.
    link_ups,
    /// Links reported down to the core.
    link_downs,
    /// Links closed because a send queue passed `queue_hard_bytes`.
    overflows,
    /// Application commands refused for back-pressure.
    backpressure,
    /// Whole frames read and handed to the core.
    frames_in,
    /// Frames queued for sending.
    frames_out,
    /// Outputs dropped because the application did not read them (past 4 × `output_buffer`).
    outputs_dropped,
}

impl Counters {
    pub(crate) fn add(c: &AtomicU64) {
        c.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn add_n(c: &AtomicU64, n: usize) {
        c.fetch_add(n as u64, Ordering::Relaxed);
    }

    /// Mirrors a counter kept elsewhere (the link policy's).
    pub(crate) fn set(c: &AtomicU64, v: u64) {
        c.store(v, Ordering::Relaxed);
    }
}
