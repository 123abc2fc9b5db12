//! Lifeline's transport driver, shared by every adapter (TCP, QUIC, RDMA): one tokio task owning a
//! [`lifeline_core::Node`], generic over a [`Connector`] that does the adapter's I/O.
//!
//! The driver has no protocol logic and no socket code. It obeys the core's driving contract
//! (feed one input with `now`, drain `poll_transmit` and `poll_event` to empty, arm one timer at
//! `poll_timeout`, cap the work per wake, read control frames before data frames), executes the
//! core's link policy ([`lifeline_core::link`]: who dials, back-off, give-up, tie-break), keeps a
//! bounded send queue per peer and class with back-pressure, and reports to the application
//! through a [`Handle`] and a channel of [`Output`]s. The connector dials, listens, authenticates
//! and moves bytes; it makes no decision. So the driver is written and tested once, and every
//! adapter gets the same behaviour (the conformance suite, `lifeline-transport-conformance`,
//! checks it per adapter).
//!
//! # Slots and classes
//!
//! A link to a peer is [`Connector::SLOTS`] connections, the link policy's slots, each carrying
//! the classes [`Connector::slot_of`] maps to it: TCP has two slots (a connection per class),
//! QUIC one (a connection with a stream per class). The link is reported up to the core
//! ([`Node::handle_link_up`](lifeline_core::Node::handle_link_up)) once every slot is connected,
//! and down as soon as any connection ends.
//!
//! # Back-pressure
//!
//! Every queue is bounded; none grows without limit.
//!
//! - **Send queues** (per peer, per class) are bounded in bytes. Above
//!   [`DriverConfig::queue_soft_bytes`] the node is congested: [`Handle::command`] and
//!   [`Handle::xcast`] return [`TransportError::Backpressure`] without running the command.
//!   Frames the core produces on its own are still queued; a queue that passes
//!   [`DriverConfig::queue_hard_bytes`] closes its link ([`DownReason::Overflow`]). Reads are
//!   never paused for send-queue pressure, so two nodes sending to each other cannot deadlock.
//! - **Outputs** go through a channel of `output_buffer` entries plus a buffer in the driver.
//!   None is ever dropped: a delivered xcast or RELM message the protocol acknowledged reaches
//!   the application exactly once. While `output_buffer` outputs or more wait in the driver,
//!   it back-pressures the **data class** instead: it reads no data-class frames (so RELM
//!   windows and xcast flow control hold the senders back) and refuses commands with
//!   [`TransportError::OutputsFull`]; control frames (heartbeats, membership), timers and link
//!   changes keep running, so a node whose application reads slowly is not evicted. What they
//!   add meanwhile is bounded by the core, not by the driver: deliveries of messages the core
//!   already holds (within its RELM and xcast windows), completions and acknowledgements of
//!   the application's own in-flight messages (within the same windows), membership and view
//!   events (a few per view change) and link changes (a few per peer per dial back-off). So
//!   past the bound the buffer grows by at most those, never by the data stream; the peak is
//!   counted in `outputs_peak`, each stall in `output_stalls`.
//! - **Frames in** travel from connections to the driver through bounded channels (one per
//!   class, [`FrameIn`]), so a slow driver slows the readers and the transport's flow control
//!   pushes back on the peer.
//!
//! # Joins
//!
//! A process asking to join arrives on a connector's listener as a join connection
//! ([`Inbound::joins`], [`join`]): the driver feeds its request to the core, answers it with
//! the address book when the admission is applied, and adds every admitted joiner's address
//! to the book before any link action for it runs. [`join::run_joiner`] is the joiner's side.
//!
//! # Time
//!
//! The driver's clock is a `tokio::time::Instant` origin taken at [`spawn`]; `now` is the
//! nanoseconds since it, as [`lifeline_core::Instant`]. Create the node with `Instant::ZERO`.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod book;
pub mod bootstrap;
mod connector;
mod driver;
mod grid;
mod handle;
pub mod join;
mod queue;
mod stats;

pub use book::{AddressBook, BookDecodeError, BookError, BOOK_MAGIC};
pub use connector::{
    Accepted, Connector, DialFailure, Ended, FrameIn, FrameTx, Inbound, LinkIo, Rejection,
    MAX_BATCH,
};
pub use driver::{spawn, DriverConfig, Setup};
pub use grid::{WallGrid, GRID_PHASES};
pub use handle::{DownReason, Handle, Output, RunningNode, TransportError};
pub use join::{JoinAnswer, JoinSlot, JoinTx};
pub use queue::SendQueue;
pub use stats::{Counters, TransportStats};

#[cfg(test)]
mod tests;
