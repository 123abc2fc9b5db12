//! Failure knowledge: how deaths spread and how views converge (PRRTE's two phases).
//!
//! 1. **Local.** A lost tree link, a neighbour's notice or a reconciled lineage marks ranks dead
//!    and the view is recomputed at once ([`Tree::mark_dead`](crate::tree::Tree::mark_dead)).
//!    Children new in one of this rank's slots (all children after a promotion) get an
//!    adoption notice carrying their expected lineage; the parent gets a lineage notice with
//!    every death the root has not confirmed (after a parent change this doubles as a hello, so
//!    a notice lost with a dying parent is re-sent to the new one).
//! 2. **Global.** The root stamps the next epoch and broadcasts the new deaths through xcast as a
//!    process-first op, so every survivor applies the same deaths in the same op order and views
//!    converge. Duplicate and reordered notices are idempotent: the dead set only grows.
//!
//! A rank that dies together with its only tree neighbour is discovered when its new parent's
//! adoption notice cannot be delivered: the driver's bounded dial fails and reports link-down.

use bytes::Bytes;

use super::{Ctx, Node};
use crate::event::Event;
use crate::timer::{TimerKey, TimerToken};
use crate::tree::{Rank, RankSet, Reconcile, Scope, ViewDelta};
use crate::wire::{AdoptMsg, GlobalFailureMsg, LineageMsg, Message};
use crate::xcast;

impl Node {
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
        let hello_sent = self.apply_delta(delta, &fresh);
        // Deaths the root confirmed need no report; locally learned ones go up (the root
        // announces them).
        if scope == Scope::Local && !fresh.is_empty() && !hello_sent {
            self.report_deaths();
        }
    }

    /// Acts on a view change: adoption notices first (so they precede replays on each link),
    /// then the hello to a new parent, then xcast's repair, then the application event.
    /// Returns whether a lineage notice went to the parent.
    pub(super) fn apply_delta(&mut self, delta: Option<ViewDelta>, fresh: &[Rank]) -> bool {
        let Some(d) = delta else {
            // Deaths that leave this rank's view alone still end chains to and from them.
            if !fresh.is_empty() {
                self.relm.purge(&mut ctx!(self));
            }
            return false;
        };
        // Frames queued to the newly dead are dropped here, and counted like any other.
        let tree = &self.tree;
        let mut suppressed = 0;
        self.out.retain_transmits(|t| {
            let keep = tree.is_alive(t.to);
            suppressed += u64::from(!keep);
            keep
        });
        self.stats.suppressed_to_dead += suppressed;
        self.links.retain(|r| !self.tree.dead().contains(*r));
        let Some(view) = self.tree.view().cloned() else {
            self.xcast.on_view_change(&mut ctx!(self), &d);
            self.relm.on_view_change(&mut ctx!(self), &d);
            ctx!(self).event(Event::ViewChanged(d));
            return false;
        };
        let mut lineage = view.ancestors().to_vec();
        lineage.push(self.me());
        let adopted: Vec<Rank> = if d.slot_changed() {
            view.live_children().collect()
        } else {
            d.added_children().collect()
        };
        for c in adopted {
            let m = AdoptMsg {
                span: self.tree.layout().span(),
                lineage: lineage.clone(),
            };
            ctx!(self).send(c, Message::Adopt(m));
        }
        let hello = d.parent_changed() && view.parent().is_some();
        if hello {
            self.say_hello();
        }
        self.xcast.on_view_change(&mut ctx!(self), &d);
        self.relm.on_view_change(&mut ctx!(self), &d);
        if view.is_root() && d.slot_changed() {
            self.schedule_announce();
        }
        ctx!(self).event(Event::ViewChanged(d));
        hello
    }

    /// Sends every live child an adoption notice with this rank's lineage: at a joiner's start
    /// (its children may be ranks that do not know it yet: they had another parent, or knew
    /// fewer deaths than its snapshot) and after a grow (notices sent under the old span are
    /// dropped on arrival).
    pub(super) fn adopt_children(&mut self) {
        let Some(view) = self.tree.view().cloned() else {
            return;
        };
        let mut lineage = view.ancestors().to_vec();
        lineage.push(self.me());
        for c in view.live_children() {
            let m = AdoptMsg {
                span: self.tree.layout().span(),
                lineage: lineage.clone(),
            };
            ctx!(self).send(c, Message::Adopt(m));
        }
    }

    /// Sends the parent this rank's lineage and the deaths the root has not confirmed.
    pub(super) fn say_hello(&mut self) {
        let Some(view) = self.tree.view() else { return };
        let Some(parent) = view.parent() else { return };
        let max = self.cfg.max_list as usize;
        let failed: Vec<Rank> = self
            .tree
            .dead()
            .iter()
            .filter(|r| !self.tree.confirmed().contains(*r))
            .take(max)
            .collect();
        let m = LineageMsg {
            span: self.tree.layout().span(),
            lineage: view.ancestors().to_vec(),
            failed,
        };
        ctx!(self).send(parent, Message::Lineage(m));
    }

    /// New deaths: the root announces them; anyone else tells its parent.
    fn report_deaths(&mut self) {
        match self.tree.view() {
            Some(v) if v.is_root() => self.schedule_announce(),
            Some(_) => self.say_hello(),
            None => {}
        }
    }

    /// Root: announce after `notice_batch`, so deaths reported close together share one
    /// global notice (one broadcast instead of one per death).
    pub(super) fn schedule_announce(&mut self) {
        if self.announce_timer.is_none() {
            let at = self.now + self.cfg.notice_batch;
            self.announce_timer = Some(self.timers.set(TimerKey::Announce, at));
        }
    }

    /// The batching timer fired.
    pub(super) fn on_announce_timer(&mut self, token: TimerToken) {
        if self.announce_timer != Some(token) {
            self.stats.stale_timers += 1;
            return;
        }
        self.announce_timer = None;
        if self.tree.view().is_some_and(|v| v.is_root()) {
            self.announce();
        }
    }

    /// Root: broadcast every death not yet announced under the next epoch.
    fn announce(&mut self) {
        let new: Vec<Rank> = self
            .tree
            .dead()
            .iter()
            .filter(|r| !self.tree.confirmed().contains(*r) && !self.announced.contains(*r))
            .take(self.cfg.max_list as usize)
            .collect();
        if new.is_empty() {
            return;
        }
        self.announced.extend(new.iter().copied());
        self.epoch += 1;
        let m = GlobalFailureMsg {
            epoch: self.epoch,
            failed: new,
        };
        self.xcast
            .root_broadcast(&mut ctx!(self), xcast::TAG_FAILURE_NOTICE, m.to_payload());
    }

    /// A delivered global failure notice: confirm the deaths everywhere, in op order.
    pub(super) fn on_global_notice(&mut self, payload: Bytes) {
        let m = match GlobalFailureMsg::from_payload(payload, &self.limits) {
            Ok(m) => m,
            Err(_) => {
                // The frame that carried it was accepted (and counted) long ago: this is a
                // notice nothing explains, not a dropped input.
                self.stats.notices_inconsistent += 1;
                return;
            }
        };
        self.epoch = self.epoch.max(m.epoch);
        let ranks: Vec<Rank> = m
            .failed
            .iter()
            .copied()
            .filter(|&r| self.tree.layout().contains(r))
            .collect();
        let set: RankSet = ranks.iter().copied().collect();
        self.learn_deaths(&ranks, Scope::Global);
        ctx!(self).event(Event::FailureConfirmed {
            epoch: m.epoch,
            ranks: set,
        });
    }

    /// An adoption notice from a (new) parent: reconcile the lineage it says I have.
    pub(super) fn on_adopt(&mut self, from: Rank, m: AdoptMsg) {
        // An adoption notice names its sender as my parent; anything else is not one.
        if m.lineage.last() != Some(&from) {
            self.stats.notices_inconsistent += 1;
            return;
        }
        // Computed before or after a grow this rank has not matched: the same ranks sit in other
        // slots there, so the lineage says nothing about deaths here.
        if m.span != self.tree.layout().span() {
            self.stats.notices_stale += 1;
            return;
        }
        match self.tree.reconcile(&m.lineage) {
            // Nothing new: answer with a hello so the parent syncs and re-polls this rank.
            Reconcile::Agreed => {
                if self.tree.view().and_then(|v| v.parent()) == Some(from) {
                    self.say_hello();
                }
            }
            // The inferred deaths change the view or are reported up: either way a hello with
            // them goes to the parent, so none is added here.
            Reconcile::Inferred(set) => {
                let v: Vec<Rank> = set.iter().collect();
                self.learn_deaths(&v, Scope::Local);
            }
            // The sender knows fewer deaths than this rank: until it learns them it will
            // keep claiming a slot it does not have (and wait on this rank in vain), so tell
            // it what this rank knows.
            Reconcile::Stale => {
                self.stats.notices_stale += 1;
                self.tell_deaths(from);
            }
            Reconcile::Inconsistent => self.stats.notices_inconsistent += 1,
        }
    }

    /// Sends `to` every death this rank knows (a lineage notice whose lineage `to` will find
    /// stale; its `failed` list is what matters).
    fn tell_deaths(&mut self, to: Rank) {
        let Some(view) = self.tree.view() else { return };
        let max = self.cfg.max_list as usize;
        let m = LineageMsg {
            span: self.tree.layout().span(),
            lineage: view.ancestors().to_vec(),
            failed: self.tree.dead().iter().take(max).collect(),
        };
        ctx!(self).send(to, Message::Lineage(m));
    }

    /// A lineage (failure) notice from a child: learn its deaths and those its lineage implies,
    /// then answer a current child's hello with xcast watermarks and re-polls.
    pub(super) fn on_lineage(&mut self, from: Rank, m: LineageMsg) {
        let me = self.me();
        let mut deaths: Vec<Rank> = m
            .failed
            .iter()
            .copied()
            .filter(|&r| r != me && self.tree.layout().contains(r))
            .collect();
        match m.lineage.split_last() {
            // A lineage from another span (a grow one of us has not seen) is not comparable;
            // the explicit deaths above still hold.
            _ if m.span != self.tree.layout().span() => self.stats.notices_stale += 1,
            Some((&last, report)) if last == me => match self.tree.reconcile(report) {
                Reconcile::Agreed => {}
                Reconcile::Inferred(set) => deaths.extend(set.iter()),
                Reconcile::Stale => self.stats.notices_stale += 1,
                Reconcile::Inconsistent => self.stats.notices_inconsistent += 1,
            },
            _ => self.stats.notices_stale += 1,
        }
        if !deaths.is_empty() {
            self.learn_deaths(&deaths, Scope::Local);
        }
        let is_child = self
            .tree
            .view()
            .is_some_and(|v| v.live_children().any(|c| c == from));
        if is_child {
            self.xcast.on_child_hello(&mut ctx!(self), from);
        }
    }
}
