//! The adapter's counters: every refusal, malformed connection and output stall is counted.
//! The driver counts links, dials, frames and back-pressure; the connector counts what only it
//! sees (accepts, refused handshakes, malformed frames).

use std::sync::atomic::{AtomicU64, Ordering};

macro_rules! counters {
    ($($(#[$doc:meta])* $name:ident,)*) => {
        /// Live counters, shared by the driver and its connector's tasks (which count their
        /// own refusals and malformed frames with [`Counters::add`]). Each field is the live
        /// form of the [`TransportStats`] field of the same name.
        #[derive(Debug, Default)]
        pub struct Counters {
            $($(#[$doc])* pub $name: AtomicU64,)*
        }

        /// A snapshot of the adapter's counters (monotonic). The core's own counters are in
        /// [`Node::stats`](lifeline_core::Node::stats).
        #[derive(Clone, Debug, Default, PartialEq, Eq)]
        #[non_exhaustive]
        pub struct TransportStats {
            $($(#[$doc])* pub $name: u64,)*
        }

        impl Counters {
            /// A snapshot of every counter.
            pub fn snapshot(&self) -> TransportStats {
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
    /// Connections accepted by the listener (before the handshake; QUIC: connection attempts
    /// that reached the endpoint).
    accepted,
    /// Handshakes refused: garbage, wrong key, unknown rank, wrong IP, timeout, too many at once
    /// (TCP); a stranger's address, a failed TLS handshake (no certificate, another CA), a
    /// malformed hello, a claim of a rank the certificate does not name, a wrong address
    /// (QUIC). Nothing such a peer sent reached the core.
    handshakes_refused,
    /// Of those, TCP HELLOs of another handshake version (an older or newer build): refused
    /// at their version byte.
    handshakes_old_version,
    /// Ranks past the address book learned from an authenticated HELLO (TCP: the dialer's
    /// announced listening port at its connection's IP; see `AddressBook::learn`).
    peers_learned,
    /// Frames from a rank past this node's span that the core could not read yet (a joiner
    /// whose admission is not applied here yet), held to be fed again once the span covers
    /// their sender.
    early_held,
    /// Such frames dropped: past the driver's bound on held frames (1,024 frames, 4 MiB).
    early_dropped,
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
    /// Application commands refused for back-pressure (a congested send queue, or unread
    /// outputs).
    backpressure,
    /// Whole frames read and handed to the core.
    frames_in,
    /// Keepalive frames written on connections that had written nothing for a keepalive
    /// interval (TCP: `lifeline_core::wire::KEEPALIVE` after `link_timeout / 6`; not in
    /// `frames_out`).
    keepalives_out,
    /// Keepalive frames read, and dropped before the core (not in `frames_in`).
    keepalives_in,
    /// Frames queued for sending.
    frames_out,
    /// Times the application's outputs became full (`output_buffer` waiting beyond the
    /// channel): the driver then stops reading data-class frames until they are read.
    output_stalls,
    /// The most outputs that ever waited beyond the channel (none is ever dropped).
    outputs_peak,
    /// Join connections authenticated and given a slot (a process that is not a member yet
    /// asking to join; see [`crate::join`]). An unauthenticated one (garbage, a wrong key, too
    /// slow) is counted in `handshakes_refused` instead.
    join_conns,
    /// Authenticated join connections refused: past the bound of open ones
    /// (`max_join_conns`), or a request the core could not decode.
    joins_refused,
    /// Answers written to joiners ("admitted" or "retry").
    join_answers,
    /// Of those, admissions (each with the contact's address book).
    join_accepts,
    /// Join connections the joiner closed (or that timed out) before their answer; the core
    /// forgot their requests.
    join_closed_early,
    /// Joiners' addresses added to the address book when a view admitted them (not counted
    /// when already there: a joiner's own view, which it also delivers).
    joiner_addrs_added,
    /// Joiners' addresses refused: not `ip:port` text, or a rank already known at another
    /// address (logged; the rank stays unreachable from here).
    joiner_addrs_refused,
}

impl Counters {
    /// Adds one.
    pub fn add(c: &AtomicU64) {
        c.fetch_add(1, Ordering::Relaxed);
    }

    /// Adds `n`.
    pub fn add_n(c: &AtomicU64, n: usize) {
        c.fetch_add(n as u64, Ordering::Relaxed);
    }

    /// Raises a high-water mark to `v`.
    pub fn max(c: &AtomicU64, v: usize) {
        c.fetch_max(v as u64, Ordering::Relaxed);
    }

    /// Mirrors a counter kept elsewhere (the link policy's).
    pub fn set(c: &AtomicU64, v: u64) {
        c.store(v, Ordering::Relaxed);
    }
}
