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
//! # Completions
//! The composite link waits on the device's completion channel: one task per node sleeps on
//! its descriptor (`AsyncFd`; `ibv_req_notify_cq` armed before every drain, so a completion
//! landing after the drain notifies again), drains the shared completion queue into the
//! channels and wakes exactly the links whose queue pairs completed something. No task polls
//! on a tick while the fabric is idle (a 100 ms sweep is the safety net for a lost
//! notification). The mock's completion channel is a real descriptor too (a socket pair,
//! notified once per arming), so the tests run the same driver; verbs without one fall back to
//! polling every `RdmaConfig::poll_interval`.
//!
//! # How rdma-sys is gated
//! The real verbs sit behind the crate feature **`verbs`** (optional dependency `rdma-sys`).
//! Without it the crate needs no RDMA library, so `cargo test --workspace` runs everywhere.
//! With it, building needs `libibverbs-dev librdmacm-dev libclang-dev` and the
//! binaries need `libibverbs1` to *start*; `.ci/run` installs those and runs
//! `cargo test -p lifeline-transport-rdma --release --features verbs`, whose hardware test
//! prints `skipped: no RDMA device (...)` where there is no device, no active port or no
//! verbs support, and fails then only when `LIFELINE_REQUIRE_RDMA=1`.
//!
//! # Unsafe code
//! Denied crate-wide. Allowed in `ibv` (every rdma-sys call) and in the one function behind
//! [`CompletionWaiter`] that registers the completion channel's descriptor with tokio
//! (`AsyncFd::register`, whose only requirement, an owned descriptor, an `OwnedFd` meets);
//! every block says why it is sound (clippy `undocumented_unsafe_blocks = "deny"`).
//!
//! # Not done yet
//! 1. Async events (`QP_FATAL`, `PORT_ERR`, `DEVICE_FATAL` from `ibv_get_async_event`) are
//!    not read: a fatal queue pair still surfaces as flushed completions (link down, `Eof`),
//!    a dead port as `RetryExceeded` within the [`QpAttrs`] bound, and the control link's
//!    heartbeats are independent of both.
//! 2. Frames of the data class accepted but not acknowledged when a queue pair fails are
//!    lost with the link, as on TCP: RELM and xcast recover them (their payload frames are
//!    data class; their ACKs, on the control class, drive the retransmission), floods are
//!    best effort. `Channel::take_unacknowledged` exists for a future resend.
//! 3. `RdmaSysVerbs`: inline sends, selective signaling; the GID is the RoCE v2 IPv4-mapped
//!    entry from sysfs when there is one.
//! 4. Conformance: the suite's child-process tests (`sigkill_link_down`,
//!    `sigstop_shorter_than_bound`, `partition_link_down`, `grow_reaches_joiner`) and
//!    `malformed_frames_closed` do not run over the mock, whose fabric lives in one process
//!    (`tests/conformance.rs` says why).
//! 5. No run on real hardware yet (none was available): `lifeline node --transport tcp+rdma`
//!    and `transport rdma --fabric hw` exist behind the cargo feature `rdma` of the CLI and
//!    bench; only the mock fabric's numbers are measured.
//! 6. Packing several small frames into one message (today each frame starts a message).
//! 7. QUIC as the control transport (today TCP only).

// Unsafe code is denied everywhere but `ibv` (the rdma-sys calls) and the descriptor
// registration behind `CompletionWaiter`; see "Unsafe code" above.
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
pub use link::{pump, spawn, CompletionWaiter, PlaneStats, RdmaConfig, RdmaConnector, RdmaNode};
pub use mock::{Fault, MockFabric, MockStats, MockVerbs};
pub use verbs::Verbs;
