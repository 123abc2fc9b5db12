//! Lifeline's TCP transport: a thin tokio driver of one [`lifeline_core::Node`].
//!
//! The adapter has no protocol logic. The driver is the shared one
//! ([`lifeline_transport_common`], also run by the QUIC adapter); this crate is its TCP
//! connector: dial, listen, handshake, socket options, framed reads and gathered writes. One
//! driver task owns the node and obeys the core's
//! driving contract (feed one input with `now`, drain `poll_transmit` and `poll_event` to empty,
//! arm one timer at `poll_timeout`, cap the work per wake); socket tasks only move bytes and
//! report what happened to the driver, which makes every decision.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use lifeline_core::{tree::Rank, Config, Instant, Node};
//! use lifeline_transport_tcp::{spawn, AddressBook, ClusterKey, Output, TcpConfig};
//!
//! let book = AddressBook::parse("0 127.0.0.1:7000\n1 127.0.0.1:7001\n")?;
//! let me = Rank(0);
//! let node = Node::new(Config::new(book.span(), 2), me, 42, Instant::ZERO)?;
//! let listener = tokio::net::TcpListener::bind(book.get(me).unwrap()).await?;
//! let key = ClusterKey::from_file("cluster.key")?;
//! let mut tcp = spawn(node, book, key, TcpConfig::default(), listener);
//! tcp.handle.xcast(16, "hello".into()).await?;
//! while let Some(out) = tcp.outputs.recv().await {
//!     if let Output::Event { event: e, .. } = out { println!("{e:?}"); }
//! }
//! # Ok(()) }
//! ```
//!
//! # Connections
//!
//! Each pair of ranks that talks holds **two TCP connections, one per traffic class**
//! ([`Class::Control`](lifeline_core::Class) and `Data`), each with its own send queue and
//! writer, so control frames never queue behind bulk data; the driver also reads control frames
//! before data frames. The link is reported up to the core when both are established, and down
//! as soon as either ends (EOF, reset, `TCP_USER_TIMEOUT`, a malformed frame).
//!
//! - **Framing** is the core's envelope: the reader reads into one `io_buffer`-sized buffer,
//!   many frames per read, asks [`lifeline_core::wire::frame_len`] for each frame's length (a
//!   bad version, unknown kind or a frame over `max_frame` closes the connection before room
//!   is reserved for it) and splits whole frames off without copying; the driver gets each
//!   read's frames as one batch. (A frame's `Bytes`, and so a delivered payload, shares its read
//!   buffer: holding one keeps that buffer's allocation alive.) Writers gather small frames into
//!   one buffer, write large ones straight from their `Bytes`, and write out whatever is
//!   buffered whenever their queue is drained.
//! - **Socket options** (socket2): `TCP_NODELAY`; `TCP_USER_TIMEOUT = link_timeout` (3 s by
//!   default, Linux); no kernel keepalive. A killed process on a live host is seen at once (the
//!   kernel sends FIN/RST); a vanished host or a cut cable within about `link_timeout` plus one
//!   keepalive interval and one retransmission timeout. A hung process whose kernel still ACKs is *not* detected by TCP: that
//!   is the core's heartbeat detector's job.
//! - **Keepalive frames**: a connection's writer that has neither written nor read anything
//!   for [`TcpConfig::keepalive_interval`] (`link_timeout / 6`, at least 250 ms:
//!   [`KEEPALIVE_FLOOR`], whose figures are on that method) writes the six-byte
//!   [`lifeline_core::wire::KEEPALIVE`] frame, and readers drop the ones they read before the
//!   driver ([`TransportStats::keepalives_out`], `keepalives_in`). An idle link so always has
//!   data in flight: a segment lost to a blip shorter than `link_timeout` is retransmitted, and
//!   the user timeout fires only after `link_timeout` without an acknowledgement. The kernel's
//!   keepalive, used before, let one lost probe end an idle link once nothing had been received
//!   for `link_timeout` (Linux aborts at the first unanswered probe past the user timeout;
//!   probes are whole seconds): a 500 ms blackhole ended idle links at `link_timeout` 1 s
//!   (`tests/idle_link.rs`; the reasoning is on `conn::configure`).
//! - **Who dials** is decided by the core's link policy, [`lifeline_core::link`] (shared with
//!   the other transports); the driver only feeds it socket results and executes its actions,
//!   with the two classes as its two slots and [`TcpConfig::link_config`] as its configuration.
//!   A node dials its tree parent at start and after every repair, and any peer the core sends
//!   to that it has no connection for. It never dials a rank the core knows dead. A failed dial
//!   is retried with exponential back-off (`backoff_initial` doubling up to `backoff_max`);
//!   after `dial_attempts` failures in a row the link is reported down, which is how the core
//!   learns of a rank that died with its only neighbour (or never started). Once the node has
//!   run for `startup_grace`, a dial refused outright (`ECONNREFUSED`: the host is up and
//!   nothing listens, so the process is gone) is given up after `refused_attempts` (3: about
//!   150 ms) instead, so a repair that points at another dead rank is not held up.
//!   Simultaneous dials between a pair are resolved per class: the connection dialed by the
//!   lower rank wins and the other is answered "duplicate" (not a failure).
//! - **Source address**: a dial binds to the node's own address-book IP (port 0) before
//!   connecting when [`TcpConfig::bind_local`] says so ([`BindLocal`]; by default when that IP
//!   is a loopback address), so nodes sharing a host on distinct loopback addresses
//!   (`127.0.1.R`) connect from their own addresses: the peer's handshake check holds, and
//!   every packet of a rank pair carries both ranks' addresses (a firewall rule can match
//!   one pair).
//! - **Handshake** before any frame: both sides prove the cluster key by MAC over fresh nonces,
//!   the claimed rank must be in the address book and connect from its IP, and the class is
//!   declared ([`handshake`]). A peer that fails is refused and counted
//!   ([`TransportStats::handshakes_refused`]); nothing it sent reaches the core. The HELLO
//!   (version 2) announces the dialer's span and listening port: a rank past the book's given
//!   ranks that proves the key, within `join.max_per_view × 64` ranks of them and below its
//!   announced span, is accepted and its address learned ([`handshake::PastBook`],
//!   [`TransportStats::peers_learned`]): a launched rank that starts late thus lets in the
//!   joiner a grow made its parent.
//!
//! # Joins
//!
//! A process that is not a member yet joins through any member's listener: a connection that
//! opens with the [join preamble](handshake::join) (cluster key proved both ways, request and
//! answer covered by the MACs) carries one join request to the shared driver, which answers
//! when the coordinator's admission is applied there, with the address book. The joiner's
//! side is [`join::join`]: bind the listener first, join, then build the node with
//! `Config::for_admission` and [`spawn`] it on that listener with the book it got. Members add
//! each admitted joiner's address to their book themselves, before they dial it.
//!
//! # The address book
//!
//! [`AddressBook`] maps every rank to the `SocketAddr` it listens on, and the embedder supplies
//! it: a runtime that already exchanges endpoints (PMIx `put`/`fence`/`get`, a launcher's
//! rendezvous file, a Kubernetes headless service) builds it with [`AddressBook::insert`];
//! `lifeline node` reads a peers file ([`AddressBook::parse`]: one `rank addr` per line). The node
//! listens on its own entry (the embedder binds the listener and passes it to [`spawn`], so
//! port 0 and pre-bound sockets work). Ranks are never reused, so an entry never changes.
//!
//! # Back-pressure
//!
//! Every queue is bounded; none grows without limit.
//!
//! - **Send queues** (per peer, per class) are bounded in bytes. Above `queue_soft_bytes` the
//!   node is congested: [`Handle::command`] and [`Handle::xcast`] return
//!   [`TransportError::Backpressure`] (naming the peer and its queued bytes) without running the
//!   command, and the application retries later. Frames the core produces on its own (forwarding,
//!   retries) are still queued, since the core's own windows (`xcast_max_inflight`,
//!   `xcast_max_bytes`) already bound them; a queue that still passes `queue_hard_bytes` means
//!   the peer is not reading, and its link is closed and reported down
//!   ([`DownReason::Overflow`]). Socket reads are never paused for send-queue pressure, so two
//!   nodes sending to each other cannot deadlock.
//! - **Outputs** to the application go through a channel of `output_buffer` entries plus a
//!   buffer in the driver, and none is ever dropped. While `output_buffer` outputs wait in the
//!   driver, it stops reading data frames (TCP flow control, the RELM windows and xcast flow
//!   control then slow the senders) and refuses commands
//!   ([`TransportError::OutputsFull`]); control frames, timers and link changes still run.
//! - **Frames in** travel from socket readers to the driver through bounded channels (one per
//!   class), so a slow driver slows the readers and TCP flow control pushes back on the peer.
//!
//! # Diagnostics
//!
//! The adapter emits [`tracing`](https://docs.rs/tracing) events, all inside one
//! `node{rank = R}` span per node (the driver task and the listener): at `debug`, dials (peer,
//! class, address, attempt, earlier failures), dial results, inbound connections with the
//! tie-break's verdict, refused handshakes with the reason, link ups, link downs with their
//! [`DownReason`], send queue overflows and view changes; at `trace`, every connection's end
//! and stale dial results. Nothing is recorded unless the embedder installs a subscriber, and
//! with none installed the events cost next to nothing (the socket tasks that move frames are
//! not instrumented at all). The core itself does no logging.
//!
//! # Time
//!
//! The driver's clock is a `tokio::time::Instant` origin taken at [`spawn`]; `now` is the
//! nanoseconds since it, as [`lifeline_core::Instant`]. Create the node with `Instant::ZERO`.
//!
//! # Without the runtime
//!
//! With `default-features = false` (no `runtime` feature) the crate is the wire protocol alone,
//! without tokio or sockets: [`ClusterKey`] and the handshake's sans-IO steps
//! ([`handshake::Dialer`], [`handshake::Acceptor`], [`handshake::decode_verdict`]). An embedder
//! that owns its sockets (the C ABI's example daemon) speaks the same handshake as `lifeline
//! node` with them and interoperates with it.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

#[cfg(feature = "runtime")]
mod activity;
#[cfg(feature = "runtime")]
mod config;
#[cfg(feature = "runtime")]
mod conn;
#[cfg(feature = "runtime")]
mod connector;
pub mod handshake;
#[cfg(feature = "runtime")]
pub mod join;
mod key;
#[cfg(feature = "runtime")]
pub mod probe;

#[cfg(feature = "runtime")]
pub use config::{BindLocal, TcpConfig, KEEPALIVE_FLOOR};
#[cfg(feature = "runtime")]
pub use connector::{connector, spawn, TcpConnector, TcpNode};
pub use key::{ClusterKey, KeyError};
/// The joiner side's types ([`join::join`]).
#[cfg(feature = "runtime")]
pub use lifeline_transport_common::join::{JoinError, JoinSettings, Joined};
/// The shared driver's types, re-exported: the TCP adapter runs
/// [`lifeline_transport_common`]'s driver with its own connector.
#[cfg(feature = "runtime")]
pub use lifeline_transport_common::{
    AddressBook, BookError, DownReason, Handle, JoinAnswer, Output, TransportError, TransportStats,
};
