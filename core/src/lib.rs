//! Lifeline's sans-IO protocol core.
//!
//! Pure, poll-driven state machines for a fault-tolerant control overlay: a radix routing tree
//! with batched repair ([`tree`]), reliable broadcast ([`xcast`]) and reliable point-to-point
//! messaging ([`relm`]) over it, failure knowledge ([`membership`]), a heartbeat failure
//! detector ([`detect`]), a wire codec ([`wire`]), and a [`Node`] composing the protocol
//! machines behind one driving contract. The core owns no sockets, threads, clocks or OS
//! randomness: time and a seed are parameters, and adapters (TCP, QUIC, RDMA) or the simulator
//! (`sim`, behind the `sim` feature) drive it. [`link`] is the adapters' shared, pure link
//! policy (who dials, back-off, give-up, the simultaneous-dial tie-break).
//!
//! # Layout: machines, and a node that routes
//!
//! Each protocol is a machine in its own module ([`flood`], [`membership`], [`xcast`],
//! [`relm`], [`detect`], [`revoke`]) owning its state, its message family (kind bytes and codecs), its timer
//! keys, its stats, its config section, its command errors and its events; [`Stats`],
//! [`Config`], [`Event`], [`TimerKey`], [`CommandError`] and [`wire::Message`] nest them, one
//! line per machine. A machine sees only a context (outbox, timers, counters, read-only config
//! and tree) and never another machine: it asks for work elsewhere with a typed effect (deaths
//! to repair, a hello for xcast to answer, a root broadcast, an event that must follow a repair).
//! The [`Node`] routes each input to exactly one machine (one machine table) and applies effects
//! in one documented order: deaths, then the tree's repair, then the view change to every
//! machine in table order, then deliveries.
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
//!      established or lost, with the [`LinkCause`] (refused, another incarnation, reset,
//!      timed out, closed): the evidence, not a verdict;
//!    - [`Node::handle_timeout`]`(now)` when the deadline from `poll_timeout` passes;
//!    - application commands such as [`Node::xcast`], [`Node::relm_send`], [`Node::flood`],
//!      [`Node::grow`], [`Node::revoke`] and [`Node::declare_dead`], which return `Err` only for misuse or
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
//!    dial one. The one exception is a fencing notice ([`Transmit::is_fence`]): with the
//!    detector on, a frame from a removed rank is answered with a rate-limited "you were
//!    removed"; a driver delivers it on a connection it still has and drops it otherwise.
//!
//! # Membership (heartbeat detector on)
//!
//! With `config.detect.enabled`, ranks are removed on evidence, not on one observer's verdict:
//! every rank is watched by up to K observers on pseudo-random rings ([`detect`]); a silence
//! that stands through the refutation window becomes an alert to the coordinator (the root of
//! the view without the subject), merged per subject at each hop up the tree; the coordinator removes a rank on H of its K observers'
//! alerts (hard evidence, a refused re-dial or another incarnation, still repairs locally at
//! once: [`LinkCause`]); the decision floods the tree at once and is confirmed in xcast order
//! ([`MembershipEvent::FailureConfirmed`]); a removed rank that speaks again is told
//! ([`MembershipEvent::Evicted`]) and stops. The detector is off by default until its
//! real-process path is measured.
//!
//! # A drive loop by hand
//!
//! Two nodes, frames carried by a `Vec` instead of a network, time advanced to each deadline:
//!
//! ```
//! use bytes::Bytes;
//! use lifeline_core::{tree::Rank, Config, Duration, Event, Instant, Node, XcastEvent};
//!
//! let cfg = Config::new(2, 2);
//! let mut nodes = [
//!     Node::new(cfg.clone(), Rank(0), 1, Instant::ZERO).unwrap(),
//!     Node::new(cfg, Rank(1), 2, Instant::ZERO).unwrap(),
//! ];
//! let mut now = Instant::ZERO;
//! // The driver (an adapter) reports links when it has connected them.
//! nodes[0].handle_link_up(now, Rank(1));
//! nodes[1].handle_link_up(now, Rank(0));
//!
//! // A command: rank 1 broadcasts. Then drain, deliver, arm timers, repeat until quiet.
//! let seq = nodes[1].xcast(now, 16, Bytes::from_static(b"hello")).unwrap();
//! let mut delivered = Vec::new();
//! let mut completed = false;
//! for _round in 0..100 {
//!     let mut in_flight = Vec::new();
//!     for (i, n) in nodes.iter_mut().enumerate() {
//!         while let Some(t) = n.poll_transmit() {
//!             in_flight.push((Rank(i as u32), t));
//!         }
//!         while let Some(e) = n.poll_event() {
//!             match e {
//!                 Event::Xcast(XcastEvent::Delivered { payload, .. }) => delivered.push((i, payload)),
//!                 Event::Xcast(XcastEvent::Completed { seq: s, .. }) => completed |= s == seq,
//!                 _ => {}
//!             }
//!         }
//!     }
//!     if in_flight.is_empty() {
//!         // Nothing to carry: jump to the earliest deadline, or stop when none is armed.
//!         let Some(at) = nodes.iter().filter_map(|n| n.poll_timeout()).map(|(at, _)| at).min()
//!         else { break };
//!         if completed { break }
//!         now = at.max(now + Duration::from_millis(1));
//!         for n in &mut nodes {
//!             n.handle_timeout(now);
//!         }
//!         continue;
//!     }
//!     for (from, t) in in_flight {
//!         nodes[t.to.0 as usize].handle_frame(now, from, t.frame);
//!     }
//! }
//! assert_eq!(delivered.len(), 2, "both ranks deliver once");
//! assert!(completed, "the origin hears completion");
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

/// `From<Part> for Aggregate` for each `Variant(Part)` line of an aggregate's table (events,
/// timer keys, messages): machines emit their own types and only the composer wraps them.
macro_rules! from_parts {
    ($agg:ident { $($variant:ident($part:ty)),* $(,)? }) => {
        $(
            impl From<$part> for $agg {
                fn from(part: $part) -> Self {
                    Self::$variant(part)
                }
            }
        )*
    };
}

mod config;
mod config_keys;
pub mod detect;
mod error;
mod event;
pub mod flood;
pub mod join;
pub mod link;
mod machine;
pub mod membership;
mod node;
mod outbox;
pub mod relm;
pub mod revoke;
pub mod rng;
#[cfg(feature = "sim")]
pub mod sim;
mod stats;
pub mod time;
mod timer;
mod transmit;
pub mod tree;
mod vecmap;
pub mod wire;
pub mod xcast;

pub use config::{Config, ConfigError, MAX_FRAME, MIN_FRAME};
pub use config_keys::{ConfigKeyError, CONFIG_KEYS};
pub use detect::{DetectConfig, DetectEvent, DetectStats, DetectTimer};
pub use error::CommandError;
pub use event::Event;
pub use flood::{FloodConfig, FloodEvent, FloodStats, FloodTimer};
pub use link::LinkCause;
pub use membership::{
    CampaignFailure, CampaignId, CorroborationStats, MembershipConfig, MembershipEvent,
    MembershipStats, MembershipTimer, MembershipView, RelayStats, RemovalCause, ShrinkError,
    ShrinkStats, StartupStats,
};
pub use node::Node;
pub use relm::{
    RelmConfig, RelmConfigError, RelmError, RelmEvent, RelmStats, RelmTimer, MAX_RELM_WINDOW,
};
pub use revoke::{RevokeConfig, RevokeError, RevokeEvent, RevokeStats, RevokeTimer};
pub use stats::Stats;
pub use time::{Duration, Instant};
pub use timer::{TimerKey, TimerToken};
pub use transmit::{Class, Transmit};
pub use xcast::{XcastConfig, XcastError, XcastEvent, XcastStats, XcastTimer};
