//! Lifeline's sans-IO protocol core.
//!
//! Pure, poll-driven state machines for a fault-tolerant control overlay: a radix routing tree
//! with batched repair ([`tree`]), reliable broadcast ([`xcast`]) and reliable point-to-point
//! messaging ([`relm`]) over it, a wire codec ([`wire`]), and a [`Node`] composing the protocol
//! machines behind one driving contract. The core owns no sockets, threads, clocks or OS
//! randomness: time and a seed are parameters, and adapters (TCP, QUIC, RDMA) or the simulator
//! (`sim`, behind the `sim` feature) drive it.
//!
//! # The driving contract
//!
//! A driver (a transport adapter, the simulator, a test) owns one [`Node`] and obeys these rules;
//! given them, the node never blocks, never panics on any input, and produces bit-for-bit the same
//! outputs for the same seed and inputs.
//!
//! 1. **Construct** with [`Node::new`]`(config, me, seed, now)`. An invalid [`Config`] is an
//!    error, not a panic. `seed` drives every random choice the node makes. Drain the outputs
//!    once right away (a joiner starts with adoption notices for its children queued).
//! 2. **Feed one input at a time**, each with the driver's current monotonic time `now`
//!    ([`Instant`], nanoseconds since an origin the driver picks):
//!    - [`Node::handle_frame`]`(now, from, frame)` for each whole frame received (stream
//!      transports split frames with [`wire::frame_len`]);
//!    - [`Node::handle_link_up`] / [`Node::handle_link_down`] when a link to a peer is
//!      established or lost (reset, timeout, failed reconnect);
//!    - [`Node::handle_timeout`]`(now)` when the deadline from `poll_timeout` passes;
//!    - application commands such as [`Node::xcast`], [`Node::relm_send`], [`Node::flood`],
//!      [`Node::grow`] and [`Node::declare_dead`], which return `Err` only for misuse or
//!      back-pressure (never for a peer's fault).
//!
//!    A `now` earlier than one already seen is clamped to the latest, so a non-monotonic clock
//!    cannot move protocol time backwards.
//! 3. **Drain after every input**: call [`Node::poll_transmit`] until `None` and send each
//!    [`Transmit`] on the channel of its [`Class`] (control frames must not queue behind data);
//!    call [`Node::poll_event`] until `None` and hand each [`Event`] to the application. Outputs
//!    are bounded by `max_transmits` / `max_events`; a driver that does not drain loses output
//!    (counted in [`Stats`]), so drain to empty every time.
//! 4. **Arm one timer** at [`Node::poll_timeout`] (re-read it after every input, since any input
//!    may move it). When it passes, call `handle_timeout(now)`. A spurious or late call is
//!    harmless: timers not yet due stay armed, stale ones are ignored by generation token, and a
//!    call with nothing due is a counted no-op.
//! 5. Inputs from peers never return errors: malformed frames, unknown kinds, oversized lengths,
//!    and frames from ranks outside the span or known dead are dropped and counted in
//!    [`Node::stats`]. Nothing changes before a frame has decoded completely.
//! 6. The node never asks to send to a rank it knows is dead, so a driver need not (and must not)
//!    dial one.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod config;
pub mod detect;
mod error;
mod event;
pub mod flood;
pub mod link;
mod machine;
pub mod membership;
mod node;
mod outbox;
pub mod relm;
pub mod rng;
#[cfg(feature = "sim")]
pub mod sim;
mod stats;
pub mod time;
mod timer;
pub mod tree;
pub mod wire;
pub mod xcast;

pub use config::{Config, ConfigError, MAX_FRAME, MIN_FRAME};
pub use detect::{DetectConfig, DetectEvent, DetectStats, DetectTimer};
pub use error::CommandError;
pub use event::Event;
pub use flood::{FloodConfig, FloodEvent, FloodStats, FloodTimer};
pub use membership::{MembershipConfig, MembershipEvent, MembershipStats, MembershipTimer};
pub use node::Node;
pub use outbox::{Class, Transmit};
pub use relm::{
    RelmConfig, RelmConfigError, RelmError, RelmEvent, RelmStats, RelmTimer, MAX_RELM_WINDOW,
};
pub use stats::Stats;
pub use time::{Duration, Instant};
pub use timer::{TimerKey, TimerToken};
pub use xcast::{XcastConfig, XcastError, XcastEvent, XcastStats, XcastTimer};
