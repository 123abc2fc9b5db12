//! [`QuicStats`]: the link layer's counters. Every refused peer and every malformed frame is
//! counted; nothing such a peer sent is ever returned as a frame.

use std::sync::atomic::{AtomicU64, Ordering};

macro_rules! counters {
    ($($(#[$doc:meta])* $name:ident,)*) => {
        /// Live counters, shared by an endpoint, its handshake tasks and its links.
        #[derive(Debug, Default)]
        pub(crate) struct Counters {
            $(pub(crate) $name: AtomicU64,)*
        }

        /// A snapshot of an endpoint's counters (each monotonic), from
        /// [`QuicEndpoint::stats`](crate::QuicEndpoint::stats).
        #[derive(Clone, Debug, Default, PartialEq, Eq)]
        #[non_exhaustive]
        pub struct QuicStats {
            $($(#[$doc])* pub $name: u64,)*
        }

        impl Counters {
            pub(crate) fn snapshot(&self) -> QuicStats {
                QuicStats {
                    $($name: self.$name.load(Ordering::Relaxed),)*
                }
            }
        }

        impl QuicStats {
            /// `(name, value)` pairs, for printing.
            pub fn fields(&self) -> Vec<(&'static str, u64)> {
                vec![$((stringify!($name), self.$name),)*]
            }
        }
    };
}

counters! {
    /// Connection attempts that reached the endpoint (before any check).
    incoming,
    /// Refused before any TLS work: the address book has no rank at the remote address.
    strangers,
    /// Connections whose TLS handshake failed (no client certificate, one from another CA,
    /// another ALPN), that did not finish their handshake and hellos within
    /// `connect_timeout`, or that arrived while `max_handshakes` were in progress.
    handshakes_failed,
    /// Authenticated peers whose hellos were malformed (bad version or class, two streams of
    /// one class, claims of two ranks, a stream finished before its hello).
    malformed_hellos,
    /// Authenticated peers that claimed a rank their certificate does not name.
    wrong_rank,
    /// Authenticated peers whose address is not their claimed rank's in the address book.
    wrong_address,
    /// Inbound links handed to [`QuicEndpoint::accept`](crate::QuicEndpoint::accept).
    accepted,
    /// Inbound links closed as [duplicates](crate::CloseCode::Duplicate) by the tie-break.
    duplicates,
    /// Dials started.
    dials,
    /// Dials that failed, timed out or were refused by the peer.
    dial_failures,
    /// Of those, dials that hit `connect_timeout` (a dead port looks like this).
    dial_timeouts,
    /// Links closed because the peer sent a malformed or oversize frame header (checked before
    /// anything is allocated for the body).
    malformed_frames,
    /// Whole frames received and returned.
    frames_in,
    /// Frames handed to quinn for sending.
    frames_out,
}

/// A shared handle on an endpoint's counters, from
/// [`QuicEndpoint::counters`](crate::QuicEndpoint::counters): it stays readable after the
/// endpoint is handed to [`spawn`](crate::spawn).
#[derive(Clone, Debug)]
pub struct QuicCounters(pub(crate) std::sync::Arc<Counters>);

impl QuicCounters {
    /// A snapshot of the counters: what [`QuicEndpoint::stats`](crate::QuicEndpoint::stats)
    /// returns.
    pub fn snapshot(&self) -> QuicStats {
        self.0.snapshot()
    }
}

impl Counters {
    pub(crate) fn add(c: &AtomicU64) {
        c.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn add_n(c: &AtomicU64, n: usize) {
        c.fetch_add(n as u64, Ordering::Relaxed);
    }
}
