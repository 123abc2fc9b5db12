//! What a protocol machine may touch and emit: the shared plumbing every machine depends on
//! (never on `node`).
//!
//! A machine (flood, membership, xcast, relm, ...) owns its state, wire messages, timer keys,
//! stats, config section, command errors and events in its own directory. While it handles one
//! input it sees a [`Ctx`]: the current time, read-only configuration and tree, the node's one
//! outbox, one timer table and the counters. It never calls another machine; when something
//! must happen elsewhere it pushes an [`Effect`], and the node applies effects in one
//! documented order (see `node/route.rs`).

use bytes::Bytes;

use crate::config::Config;
use crate::event::Event;
use crate::outbox::{Class, Outbox, Transmit};
use crate::stats::Stats;
use crate::time::Instant;
use crate::timer::Timers;
use crate::tree::{Rank, Scope, Tree, ViewDelta};
use crate::wire::Message;

/// A request from one machine for work outside it, applied by the node after the machine's
/// handler returns, in the order pushed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Effect {
    /// These ranks are dead (`Scope::Local`: learned here, to be reported up; `Global`:
    /// confirmed by the root). The node marks them, repairs the tree once and fans the
    /// resulting `ViewDelta` out to every machine.
    Deaths { ranks: Vec<Rank>, scope: Scope },
    /// A lineage notice (a hello) from `from` was handled: if `from` is a live child, xcast
    /// answers it with watermarks and re-polls.
    ChildHello { from: Rank },
    /// Root: broadcast an internal, process-first op (a global failure notice).
    RootBroadcast { tag: u16, payload: Bytes },
    /// Detector evidence about `subject` (as of `incarnation`), for the coordinator: `down`
    /// when it stood through the refutation window (re-sent while it stands), `!down` when the
    /// subject refuted.
    Alert {
        subject: Rank,
        incarnation: u64,
        down: bool,
    },
    /// The detector's sample of the cluster changed: of the `watching` subjects this rank
    /// observes (chosen on pseudo-random rings), `suspected` are silent now. Membership's
    /// coordinator refuses to decide while most of its sample is silent (it is probably the one
    /// cut off).
    Reachability { suspected: u32, watching: u32 },
    /// Flood a coordinator's decision to the tree neighbours (after the repair it caused),
    /// except the one it came from.
    FloodRemoved {
        m: crate::membership::RemovedMsg,
        except: Option<Rank>,
    },
    /// An application event that must follow the effects pushed before it (e.g. a failure
    /// confirmation after the repair it caused).
    Event(Event),
}

/// What a machine may touch while handling one input: read-only context, the outbox, the
/// timers, the counters and the effect queue. Never another machine.
pub(crate) struct Ctx<'a> {
    pub(crate) now: Instant,
    pub(crate) cfg: &'a Config,
    pub(crate) tree: &'a Tree,
    pub(crate) out: &'a mut Outbox,
    pub(crate) timers: &'a mut Timers,
    pub(crate) stats: &'a mut Stats,
    pub(crate) effects: &'a mut Vec<Effect>,
}

impl Ctx<'_> {
    /// This rank.
    pub(crate) fn me(&self) -> Rank {
        self.tree.me()
    }

    /// Queues a frame; a rank known dead is never dialled, and a full queue is counted.
    pub(crate) fn send_frame(&mut self, to: Rank, class: Class, frame: Bytes) {
        if !self.tree.is_alive(to) {
            self.stats.suppressed_to_dead += 1;
            return;
        }
        self.push(to, class, frame);
    }

    /// Queues a frame without the liveness check, counting it or the full queue.
    fn push(&mut self, to: Rank, class: Class, frame: Bytes) {
        if self
            .out
            .push_transmit(Transmit { to, class, frame }, self.cfg.max_transmits)
        {
            self.stats.frames_out += 1;
        } else {
            self.stats.dropped_outbox_full += 1;
        }
    }

    /// Queues a fencing notice to a removed rank: the one frame ever addressed to a rank known
    /// dead (the node's dead-rank filters let it through by its kind).
    pub(crate) fn send_fence(&mut self, to: Rank, m: crate::membership::EvictedMsg) {
        let frame = Message::from(m).encode();
        self.push(to, Class::Control, frame);
    }

    /// Queues a message on its kind's traffic class.
    pub(crate) fn send(&mut self, to: Rank, m: impl Into<Message>) {
        let m = m.into();
        let class = m.kind().class();
        self.send_frame(to, class, m.encode());
    }

    /// Queues an application event (a full queue is counted).
    pub(crate) fn event(&mut self, e: impl Into<Event>) {
        if !self.out.push_event(e.into(), self.cfg.max_events) {
            self.stats.dropped_events_full += 1;
        }
    }

    /// Asks the node for work outside this machine (applied after the handler returns).
    pub(crate) fn effect(&mut self, e: Effect) {
        self.effects.push(e);
    }
}

/// The verbs every protocol machine has. The node's router calls them: a decoded frame of the
/// machine's family goes to [`Machine::admits`] then [`Machine::on_message`], a due timer of
/// the machine's keys to [`Machine::on_timer`], a repaired view to [`Machine::on_view_change`]
/// (machines in the router table's order).
pub(crate) trait Machine {
    /// The machine's message family (its part of the one message table).
    type Msg;
    /// The machine's timer keys (its part of the one timer table).
    type Timer;

    /// A fresh machine for rank `me` (the configuration is already validated).
    fn new(cfg: &Config, me: Rank) -> Self
    where
        Self: Sized;

    /// Once, right after the node is built (before any input): arm start-up timers, send
    /// start-up frames.
    fn on_start(&mut self, ctx: &mut Ctx<'_>) {
        let _ = ctx;
    }

    /// The tree view changed (called in the router's table order, after the repair).
    fn on_view_change(&mut self, ctx: &mut Ctx<'_>, d: &ViewDelta) {
        let _ = (ctx, d);
    }

    /// The set of live ranks changed (deaths or a grow), whether or not this rank's view did
    /// (called after any view change, in table order).
    fn on_members_change(&mut self, ctx: &mut Ctx<'_>) {
        let _ = ctx;
    }

    /// Whether a decoded message is plausible from any peer (an origin it cannot have is
    /// refused and counted in `dropped_bad_origin` before anything changes).
    fn admits(&self, ctx: &Ctx<'_>, msg: &Self::Msg) -> bool {
        let _ = (ctx, msg);
        true
    }

    /// One decoded, admitted message from `from`.
    fn on_message(&mut self, ctx: &mut Ctx<'_>, from: Rank, msg: Self::Msg);

    /// One of this machine's timers fired (`token` tells a current expiry from a stale one).
    fn on_timer(&mut self, ctx: &mut Ctx<'_>, timer: Self::Timer, token: crate::timer::TimerToken);
}
