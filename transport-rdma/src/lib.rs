//! Lifeline's RDMA data plane: frames of the data class over one RC queue pair per peer.
//!
//! - [`verbs`]: the narrow [`Verbs`] trait, the only way this crate reaches libibverbs.
//! - [`mock`]: [`MockFabric`] / [`MockVerbs`], an in-memory fabric that enforces the RC queue
//!   pair state machine, RNR, flush-on-error and injected faults, deterministic from a seed.
//! - [`channel`]: the sans-IO data channel over the trait: registered slot pools, receives
//!   posted ahead, cumulative credits (no reliance on RNR retry), frames split into slot-sized
//!   messages and rejoined, a bounded send queue with back-pressure, and completion errors
//!   mapped to one link-down with a cause.
//! - [`wire`]: the fixed-size [`QpDetails`] record exchanged over the authenticated control
//!   connection (fuzz target `qp_details` in `fuzz/`).
//! - [`link`]: the composite link, [`RdmaConnector`] for the shared driver
//!   (`lifeline-transport-common`): control class on TCP (transport-tcp's connector and
//!   handshake), data class on one RC queue pair per peer, set up after the authenticated
//!   TCP handshake; [`spawn`] starts a node on it, [`pump`] steps a [`MockFabric`].
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
//! 1. The completion driver for real verbs: today each data link's task polls the shared CQ
//!    on a tick (`RdmaConfig::poll_interval`, 1 ms) or when the driver queues frames; a
//!    device wants the completion channel's fd under `AsyncFd` (`ibv_req_notify_cq`), and
//!    async events (`QP_FATAL`, `PORT_ERR`, `DEVICE_FATAL`) mapped to link-down.
//! 2. Resending `take_unacknowledged` frames on the new channel: today data-class frames
//!    accepted but not acknowledged are lost with the link, as on TCP (RELM, on the control
//!    class, retransmits and is exactly-once; floods are best effort).
//! 3. `RdmaSysVerbs`: completion channel + `event_fd`, GID selection from sysfs (RoCE v2,
//!    IPv4-mapped), inline sends, selective signaling; a hardware run of the composite link.
//! 4. Conformance: the suite's child-process tests (`sigkill_link_down`,
//!    `sigstop_shorter_than_bound`, `partition_link_down`, `grow_reaches_joiner`) and
//!    `malformed_frames_closed` do not run over the mock (`tests/conformance.rs` says why).
//! 5. A hardware run of `lifeline node --transport tcp+rdma` and of `transport rdma --fabric
//!    hw` (both exist behind the cargo feature `rdma` of the CLI and bench; only the mock
//!    fabric's bench numbers are measured so far).
//! 6. Packing several small frames into one message (today each frame starts a message).
//! 7. QUIC as the control transport (today TCP only).

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
