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
use crate::link::LinkCause;
use crate::outbox::Outbox;
use crate::stats::Stats;
use crate::time::Instant;
use crate::timer::Timers;
use crate::transmit::{Class, Transmit};
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
    /// An admission grows the span to `new_span`: once the op carrying it has gone on to this
    /// rank's children, the node grows its tree and tells every machine, as for
    /// [`Node::grow`](crate::Node::grow).
    Grow { new_span: u32 },
    /// Root: an internal op completed everywhere (the xcast completion hook); the node hands
    /// it to the machine that registered its tag ([`Machine::on_xcast_done`]).
    XcastDone { tag: u16, payload: Bytes },
    /// This rank entered leaving mode while processing the xcast op being delivered: the node
    /// holds this rank's acknowledgement of that op until its RELM sends drained, and the
    /// detector stops refuting.
    Leaving,
    /// An application event that must follow the effects pushed before it (e.g. a failure
    /// confirmation after the repair it caused).
    Event(Event),
    /// Flood `msg` to this rank's standing neighbours in the view its current one becomes once
    /// `gone` are dead too, except `except` (the rank it came from). The node picks them
    /// ([`Node`](crate::Node)'s `standing_neighbours`): the detector's ring neighbours, whose
    /// links its heartbeats keep up, and the tree neighbours, so a flood dials nobody; the
    /// binomial-graph overlay (`revoke/overlay.rs`) while the detector is off. `count` names
    /// the counter the frames sent add to.
    Flood {
        msg: crate::wire::Message,
        gone: Vec<Rank>,
        except: Option<Rank>,
        count: FloodCount,
    },
}

/// Which machine's counter a [`Effect::Flood`]'s frames add to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FloodCount {
    /// `membership.removed_out` (a removal decision).
    Removed,
    /// `revoke.forwarded` (a revoke notice).
    Revoke,
}

/// How the set of live ranks changed: what [`Machine::on_members_change`] and
/// [`Machine::on_repaired`] are told.
#[derive(Clone, Copy, Debug)]
pub(crate) struct MembersChange<'a> {
    /// Ranks newly known dead (empty for a grow).
    pub(crate) fresh: &'a [Rank],
    /// How they are known: learned here (`Local`, to be reported up) or confirmed by the root
    /// (`Global`).
    pub(crate) scope: Scope,
    /// The span grew (new ranks joined).
    pub(crate) grown: bool,
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
        self.push(Transmit::new(to, class, frame));
    }

    /// Queues a transmit, counting it or the full queue.
    fn push(&mut self, t: Transmit) {
        if self.out.push_transmit(t, self.cfg.max_transmits) {
            self.stats.frames_out += 1;
        } else {
            self.stats.dropped_outbox_full += 1;
        }
    }

    /// Queues a fencing notice to a removed rank: the one frame ever addressed to a rank known
    /// dead, flagged as such ([`Transmit::is_fence`]) so the node's dead-rank filters and the
    /// adapter let it through. Skips the liveness check; a full queue is counted.
    pub(crate) fn send_fence(&mut self, to: Rank, m: impl Into<Message>) {
        let m = m.into();
        let class = m.kind().class();
        self.push(Transmit::fence(to, class, m.encode()));
    }

    /// Queues a relay envelope to live `to` itself, never through a relay (see
    /// [`Transmit::direct`]).
    pub(crate) fn send_direct(&mut self, to: Rank, frame: Bytes) {
        if !self.tree.is_alive(to) {
            self.stats.suppressed_to_dead += 1;
            return;
        }
        self.push(Transmit::direct(to, Class::Control, frame));
    }

    /// Queues a message on its kind's traffic class.
    pub(crate) fn send(&mut self, to: Rank, m: impl Into<Message>) {
        let m = m.into();
        let class = m.kind().class();
        self.send_frame(to, class, m.encode());
    }

    /// Queues one message to each of `to` (encoded once), on its kind's traffic class.
    pub(crate) fn send_all(&mut self, to: impl IntoIterator<Item = Rank>, m: impl Into<Message>) {
        let m = m.into();
        let class = m.kind().class();
        let frame = m.encode();
        for r in to {
            self.send_frame(r, class, frame.clone());
        }
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
    /// (called after any view change, in table order): forget what the change made moot.
    fn on_members_change(&mut self, ctx: &mut Ctx<'_>, change: &MembersChange<'_>) {
        let _ = (ctx, change);
    }

    /// The repair of one members change is complete: every machine has seen
    /// [`Machine::on_members_change`] and the effects it pushed were applied (called in table
    /// order). What depends on the whole repair goes here: reporting deaths up the tree,
    /// passing on the decision that caused them.
    fn on_repaired(&mut self, ctx: &mut Ctx<'_>, change: &MembersChange<'_>) {
        let _ = (ctx, change);
    }

    /// The driver established a link to `peer` (a live rank of the span).
    fn on_link_up(&mut self, ctx: &mut Ctx<'_>, peer: Rank) {
        let _ = (ctx, peer);
    }

    /// The driver lost the link to `peer` (a rank of the span not known dead), on the evidence
    /// `cause`. What the loss means (a death, a gray link, nothing) is the machine's policy.
    fn on_link_down(&mut self, ctx: &mut Ctx<'_>, peer: Rank, cause: LinkCause) {
        let _ = (ctx, peer, cause);
    }

    /// A frame from `peer` decoded (before it goes to its machine): the link works.
    fn on_frame_from(&mut self, ctx: &mut Ctx<'_>, peer: Rank) {
        let _ = (ctx, peer);
    }

    /// The internal xcast tags this machine takes (below
    /// [`FIRST_APP_TAG`](crate::xcast::FIRST_APP_TAG)): a delivered op with one of them goes to
    /// [`Machine::on_xcast`] instead of the application (the node's tag table).
    const XCAST_TAGS: &'static [u16] = &[];

    /// A delivered xcast op with one of [`Machine::XCAST_TAGS`], in op order.
    fn on_xcast(&mut self, ctx: &mut Ctx<'_>, tag: u16, payload: Bytes) {
        let _ = (ctx, tag, payload);
    }

    /// Root only: an op with one of [`Machine::XCAST_TAGS`] completed everywhere (every
    /// survivor processed it and every rank acknowledged it).
    fn on_xcast_done(&mut self, ctx: &mut Ctx<'_>, tag: u16, payload: Bytes) {
        let _ = (ctx, tag, payload);
    }

    /// Whether a decoded message is plausible from any peer (an origin it cannot have is
    /// refused and counted in `dropped_bad_origin` before anything changes).
    fn admits(&self, ctx: &Ctx<'_>, msg: &Self::Msg) -> bool {
        let _ = (ctx, msg);
        true
    }

    /// One decoded, admitted message from `from`.
    fn on_message(&mut self, ctx: &mut Ctx<'_>, from: Rank, msg: Self::Msg);

    /// Protocol state this machine holds that traffic must eventually release (messages in
    /// flight, remembered ids, relay records), for leak checks: the node's
    /// [`pending_state`](crate::Node::pending_state) sums it over the machine table. Zero by
    /// default (state that lives as long as a peer, such as per-peer counters, is not counted).
    fn held(&self) -> usize {
        0
    }

    /// One of this machine's timers fired (`token` tells a current expiry from a stale one).
    fn on_timer(&mut self, ctx: &mut Ctx<'_>, timer: Self::Timer, token: crate::timer::TimerToken);
}
