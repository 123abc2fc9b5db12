//! Lifeline's RDMA data plane: frames of the data class over one RC queue pair per peer.
//!
//! - [`verbs`]: the narrow [`Verbs`] trait, the only way this crate reaches libibverbs.
//! - [`mock`]: [`MockFabric`] / [`MockVerbs`], an in-memory fabric that enforces the RC queue
//!   pair state machine, RNR, flush-on-error and injected faults, deterministic from a seed.
//! - [`channel`]: the sans-IO data channel over the trait: registered slot pools, receives
//!   posted ahead, cumulative credits (no reliance on RNR retry), frames split into slot-sized
//!   messages and rejoined, a bounded send queue with back-pressure, and completion errors
//!   mapped to one link-down with a cause.
//! - `ibv` (feature `verbs`): `RdmaSysVerbs`, the trait over `rdma-sys` 0.3.
//!
//! # How rdma-sys is gated
//! The real verbs sit behind the crate feature **`verbs`** (optional dependency `rdma-sys`).
//! Without it the crate is pure Rust with no `unsafe`, so `cargo test --workspace` needs no
//! RDMA library. With it, building needs `libibverbs-dev librdmacm-dev libclang-dev` and the
//! binaries need `libibverbs1` to *start*; `.ci/run` installs those and runs
//! `cargo test -p lifeline-transport-rdma --release --features verbs`, whose hardware test
//! prints `skipped: no RDMA device (...)` where there is no device, no active port or no
//! verbs support, and fails then only when `LIFELINE_REQUIRE_RDMA=1`.
//!
//! # Not done yet (next sessions)
//! 1. The composite link: control on TCP/QUIC, data class on this channel; the QP details
//!    ([`channel::QpDetails`]) exchanged over the authenticated control link (a new handshake
//!    class in `transport-tcp/src/handshake.rs`, a fixed-size record codec + fuzz target);
//!    link up = control up and channel up; reconnect = new channel with a fresh PSN and the
//!    `take_unacknowledged` frames resent; a tokio driver polling the shared CQ through its
//!    completion channel fd (`AsyncFd`), dispatching by `qpn`, dropping unknown `qpn`s.
//! 2. `RdmaSysVerbs`: completion channel + `event_fd`, async events (`QP_FATAL`, `PORT_ERR`,
//!    `DEVICE_FATAL`), GID selection from sysfs (RoCE v2, IPv4-mapped), inline sends,
//!    selective signaling.
//! 3. The conformance suite (`transport-conformance`) over TCP control + mock data.
//! 4. `lifeline node --transport tcp+rdma` and the bench mode, behind a cargo feature `rdma`
//!    of the CLI and bench.
//! 5. Packing several small frames into one message (today each frame starts a message).

// Unsafe code is denied everywhere but `ibv` (the rdma-sys calls), which allows it and keeps
// every block documented (clippy `undocumented_unsafe_blocks = "deny"` in Cargo.toml).
#![deny(unsafe_code)]

pub mod channel;
pub mod link;
pub mod mock;
pub mod verbs;
pub mod wire;

#[cfg(feature = "verbs")]
#[allow(unsafe_code)]
pub mod ibv;

pub use channel::{Buffers, Channel, ChannelConfig, ChannelEvent, DownCause, QpAttrs, QpDetails};
#[cfg(feature = "verbs")]
pub use ibv::RdmaSysVerbs;
pub use link::{pump, spawn, PlaneStats, RdmaConfig, RdmaConnector, RdmaNode};
pub use mock::{Fault, MockFabric, MockStats, MockVerbs};
pub use verbs::Verbs;
