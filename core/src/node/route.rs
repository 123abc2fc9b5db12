//! Translation between machines, in one place and one order.
//!
//! Machines never call each other; they push [`Effect`]s, applied here depth-first in push
//! order (an effect's own consequences before the next effect). The fixed order:
//!
//! 1. **Deaths** ([`Effect::Deaths`], a lost tree link, a declared death): the tree marks them
//!    and recomputes the view once (a batched repair).
//! 2. **Tree**: queued frames to the newly dead are dropped; the node's link set forgets them.
//! 3. **`ViewDelta` fan-out**, in this order: membership (adoption notices, then the hello to a
//!    new parent, so both precede replays on each link), xcast (replays, re-polls, recovery),
//!    RELM (purges, link updates), then the application's [`Event::ViewChanged`]. Deaths that
//!    leave the view alone still purge RELM chains to and from them.
//! 4. **Members**: any change of the live set (deaths, with or without a view change; a grow)
//!    goes to every machine in table order as a [`MembersChange`] (the detector's rings depend
//!    on it), with the effects each pushes applied before the next.
//! 5. **Repaired**: then every machine's `on_repaired`, in table order. Membership reports
//!    deaths learned locally up (the root schedules its announcement) unless the view change
//!    already told the parent, adopts its children and says hello after a grow, and passes on
//!    the coordinator's decision that caused the repair.
//! 6. **Deliveries** ([`Node::drive_xcast`], after every input): each xcast op next in order
//!    goes to the machine that registered its tag (membership's global failure notice, which
//!    pushes its deaths and then its confirmation event; xcast's no-op) or becomes an
//!    application event.

use std::collections::BTreeSet;

use super::{ctx, run, Node};
use crate::event::Event;
use crate::machine::{Ctx, Effect, FloodCount, MembersChange};
use crate::tree::{Rank, Scope, ViewDelta};
use crate::xcast::XcastEvent;
use crate::CommandError;

impl Node {
    /// Applies the effects the last machine call pushed, depth-first in push order.
    pub(super) fn apply_effects(&mut self) {
        if self.effects.is_empty() {
            return;
        }
        let effects = std::mem::take(&mut self.effects);
        for e in effects {
            self.apply(e);
        }
    }

    fn apply(&mut self, e: Effect) {
        match e {
            Effect::Deaths { ranks, scope } => self.learn_deaths(&ranks, scope),
            Effect::ChildHello { from } => {
                let is_child = self
                    .tree
                    .view()
                    .is_some_and(|v| v.live_children().any(|c| c == from));
                if is_child {
                    run!(self, xcast.on_child_hello(from));
                }
            }
            Effect::RootBroadcast { tag, payload } => {
                run!(self, xcast.root_broadcast(tag, payload));
            }
            Effect::Alert {
                subject,
                incarnation,
                down,
            } => run!(self, membership.on_local_alert(subject, incarnation, down)),
            Effect::Reachability {
                suspected,
                watching,
            } => run!(self, membership.on_reachability(suspected, watching)),
            // Applied once the op that caused it is forwarded (see `drive_xcast`).
            Effect::Grow { new_span } => {
                self.pending_grow = self.pending_grow.max(new_span);
            }
            Effect::XcastDone { tag, payload } => self.xcast_done_to_machines(tag, payload),
            // Taken by `drive_xcast` for the op being delivered.
            Effect::Leaving => {
                self.leaving_hold = true;
                self.m.detect.set_leaving();
            }
            Effect::Event(e) => ctx!(self).event(e),
            Effect::Flood {
                msg,
                gone,
                except,
                count,
            } => {
                let mut to = self.standing_neighbours(&gone);
                to.retain(|r| Some(*r) != except);
                let n = to.len() as u64;
                match count {
                    FloodCount::Removed => self.stats.membership.removed_out += n,
                    FloodCount::Revoke => self.m.revoke.count_forwarded(n),
                }
                ctx!(self).send_all(to, msg);
            }
        }
    }

    /// The ranks a flood goes to from here in the view the current one becomes once `gone`
    /// are dead too, ascending, never this rank or a rank dead or in `gone`: the detector's
    /// ring neighbours (observers and subjects: heartbeats keep their links up, and the K rings
    /// are K cycles through every live rank, so they alone connect the members) and this
    /// rank's tree parent and children (the links the tree keeps up). With the detector off
    /// (no rings) the binomial-graph overlay of that view (`revoke/overlay.rs`), whose links a
    /// flood may have to dial. Empty when this rank is dead or in `gone`.
    pub(super) fn standing_neighbours(&self, gone: &[Rank]) -> Vec<Rank> {
        let me = self.tree.me();
        let Some(v) = self.tree.view().filter(|_| !gone.contains(&me)) else {
            return Vec::new();
        };
        let mut to: BTreeSet<Rank> = self
            .m
            .detect
            .observers()
            .chain(self.m.detect.subjects())
            .collect();
        if to.is_empty() {
            return crate::revoke::overlay::neighbours_without(&self.tree, gone).into_vec();
        }
        to.extend(v.parent());
        to.extend(v.live_children());
        to.into_iter()
            .filter(|&r| r != me && self.tree.is_alive(r) && !gone.contains(&r))
            .collect()
    }

    /// Marks `ranks` dead (ignoring ones already known), repairs once, and spreads the news.
    pub(super) fn learn_deaths(&mut self, ranks: &[Rank], scope: Scope) {
        let fresh: Vec<Rank> = ranks
            .iter()
            .copied()
            .filter(|&r| self.tree.is_alive(r))
            .collect();
        let delta = match self.tree.mark_dead(ranks, scope) {
            Ok(d) => d,
            Err(_) => {
                self.stats.dropped_unknown_peer += 1;
                return;
            }
        };
        if self.cfg.report_repairs && !fresh.is_empty() {
            let ranks = fresh.iter().copied().collect();
            ctx!(self).event(Event::Repaired { ranks, scope });
        }
        self.fan_out(delta, &fresh);
        if !fresh.is_empty() {
            self.members_change_to_machines(&MembersChange {
                fresh: &fresh,
                scope,
                grown: false,
            });
        }
    }

    /// Steps 2 and 3 of the order above.
    fn fan_out(&mut self, delta: Option<ViewDelta>, fresh: &[Rank]) {
        let Some(d) = delta else {
            // Deaths that leave this rank's view alone still end chains to and from them.
            if !fresh.is_empty() {
                run!(self, relm.purge());
            }
            return;
        };
        // Frames queued to the newly dead are dropped here, and counted like any other.
        let tree = &self.tree;
        let mut suppressed = 0;
        self.out.retain_transmits(|t| {
            let keep = tree.is_alive(t.to) || t.is_fence();
            suppressed += u64::from(!keep);
            keep
        });
        self.stats.suppressed_to_dead += suppressed;
        self.links.retain(|r| !self.tree.dead().contains(*r));
        self.view_change_to_machines(&d);
        ctx!(self).event(Event::ViewChanged(d));
    }

    /// Grows the tree's span and fans the change out; after a real change every neighbour gets
    /// this rank's lineage anew (notices in flight from before the grow carry the old span and
    /// are dropped by their receivers).
    pub(super) fn grow_span(&mut self, new_span: u32) -> Result<(), CommandError> {
        let old_span = self.tree.layout().span();
        let delta = self.tree.grow(new_span)?;
        self.fan_out(delta, &[]);
        if self.tree.layout().span() != old_span {
            self.members_change_to_machines(&MembersChange {
                fresh: &[],
                scope: Scope::Global,
                grown: true,
            });
        }
        Ok(())
    }

    /// Delivers every xcast op that is next in order: an internal tag goes to the machine that
    /// registered it (the tag table, [`Machine::XCAST_TAGS`](crate::machine::Machine::XCAST_TAGS)),
    /// the rest become application events.
    pub(super) fn drive_xcast(&mut self) {
        while let Some(d) = run!(self, xcast.next_delivery()) {
            let delivered = self.xcast_to_machines(d.tag, d.payload);
            if std::mem::take(&mut self.leaving_hold) {
                // A shrink order named this rank: its acknowledgement means "drained".
                self.m.xcast.hold(d.op);
            }
            if let Err(payload) = delivered {
                ctx!(self).event(XcastEvent::Delivered {
                    op: d.op,
                    origin: d.origin,
                    seq: d.seq,
                    tag: d.tag,
                    payload,
                });
            }
            run!(self, xcast.processed(d.op));
            self.apply_pending_grow();
        }
        self.drive_drain();
    }

    /// A leaving rank acknowledges the shrink order once its own RELM sends are all
    /// acknowledged, or once the drain bound passed.
    fn drive_drain(&mut self) {
        if !self.m.xcast.holding() || !self.m.membership.awaits_drain() {
            return;
        }
        if self.m.relm.unacked() == 0 || self.m.membership.drain_expired() {
            run!(self, membership.on_drained());
            run!(self, xcast.release_hold());
        }
    }

    /// Applies a grow an admission asked for, after its op went on to this rank's children
    /// in the tree *before* the grow: the ranks it admits may move into dead slots and
    /// re-parent this rank's children under a joiner that has not started (or under a
    /// rank that has not applied the admission yet), so the admission travels the tree every
    /// member still agrees on; each rank then grows, and the new parents adopt their
    /// children.
    fn apply_pending_grow(&mut self) {
        let new_span = std::mem::take(&mut self.pending_grow);
        if new_span > self.tree.layout().span() && self.grow_span(new_span).is_err() {
            self.stats.membership.inconsistent += 1;
        }
    }
}
