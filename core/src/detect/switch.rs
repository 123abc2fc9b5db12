//! The detector as a node holds it: absent unless `detect.enabled`, so a node that does not
//! run it (the core's default, every large simulated cluster) pays 8 bytes instead of the
//! detector's state (~240 bytes inline plus its rings and per-subject maps).

use bytes::Bytes;

use super::{Detect, DetectMsg, DetectTimer};
use crate::link::LinkCause;
use crate::machine::{Ctx, Machine, MembersChange};
use crate::timer::TimerToken;
use crate::tree::{Rank, ViewDelta};

/// [`Detect`] when `detect.enabled`, nothing otherwise. Off, it sends nothing, arms nothing and
/// counts every detector message it receives as stale (a peer that runs the detector while
/// this rank does not: a configuration mismatch, visible in `stats.detect.stale`).
#[derive(Debug)]
pub(crate) struct Detector(Option<Box<Detect>>);

impl Detector {
    /// This rank's observers (it heartbeats them), ascending; none when the detector is off.
    pub(crate) fn observers(&self) -> impl Iterator<Item = Rank> + '_ {
        self.0.iter().flat_map(|d| d.observers())
    }

    /// This rank's subjects (it watches them), ascending; none when the detector is off.
    pub(crate) fn subjects(&self) -> impl Iterator<Item = Rank> + '_ {
        self.0.iter().flat_map(|d| d.subjects())
    }

    /// This rank entered leaving mode (a shrink target): it stops refuting suspicions.
    pub(crate) fn set_leaving(&mut self) {
        if let Some(d) = &mut self.0 {
            d.leaving = true;
        }
    }

    /// The running detector (tests inspect its state).
    #[cfg(test)]
    pub(crate) fn running(&self) -> &Detect {
        self.0.as_deref().expect("the detector is on")
    }
}

/// Every verb goes to the running detector (all of them, so an override `Detect` adds is never
/// skipped here); off, each is a no-op except [`Machine::on_message`], which counts.
impl Machine for Detector {
    type Msg = DetectMsg;
    type Timer = DetectTimer;
    const XCAST_TAGS: &'static [u16] = Detect::XCAST_TAGS;

    fn new(cfg: &crate::Config, me: Rank) -> Self {
        Self(cfg.detect.enabled.then(|| Box::new(Detect::new(cfg, me))))
    }

    fn on_start(&mut self, ctx: &mut Ctx<'_>) {
        if let Some(d) = &mut self.0 {
            d.on_start(ctx);
        }
    }

    fn on_view_change(&mut self, ctx: &mut Ctx<'_>, delta: &ViewDelta) {
        if let Some(d) = &mut self.0 {
            d.on_view_change(ctx, delta);
        }
    }

    fn on_members_change(&mut self, ctx: &mut Ctx<'_>, change: &MembersChange<'_>) {
        if let Some(d) = &mut self.0 {
            d.on_members_change(ctx, change);
        }
    }

    fn on_repaired(&mut self, ctx: &mut Ctx<'_>, change: &MembersChange<'_>) {
        if let Some(d) = &mut self.0 {
            d.on_repaired(ctx, change);
        }
    }

    fn on_link_up(&mut self, ctx: &mut Ctx<'_>, peer: Rank) {
        if let Some(d) = &mut self.0 {
            d.on_link_up(ctx, peer);
        }
    }

    fn on_link_down(&mut self, ctx: &mut Ctx<'_>, peer: Rank, cause: LinkCause) {
        if let Some(d) = &mut self.0 {
            d.on_link_down(ctx, peer, cause);
        }
    }

    fn on_frame_from(&mut self, ctx: &mut Ctx<'_>, peer: Rank) {
        if let Some(d) = &mut self.0 {
            d.on_frame_from(ctx, peer);
        }
    }

    fn on_xcast(&mut self, ctx: &mut Ctx<'_>, tag: u16, payload: Bytes) {
        if let Some(d) = &mut self.0 {
            d.on_xcast(ctx, tag, payload);
        }
    }

    fn admits(&self, ctx: &Ctx<'_>, msg: &DetectMsg) -> bool {
        self.0.as_ref().is_none_or(|d| d.admits(ctx, msg))
    }

    fn on_message(&mut self, ctx: &mut Ctx<'_>, from: Rank, msg: DetectMsg) {
        match &mut self.0 {
            Some(d) => d.on_message(ctx, from, msg),
            None => ctx.stats.detect.stale += 1,
        }
    }

    fn held(&self) -> usize {
        self.0.as_ref().map_or(0, |d| d.held())
    }

    fn on_timer(&mut self, ctx: &mut Ctx<'_>, timer: DetectTimer, token: TimerToken) {
        if let Some(d) = &mut self.0 {
            d.on_timer(ctx, timer, token);
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::tree::Rank;
    use crate::{Config, Instant, Node};

    #[test]
    fn off_costs_a_pointer_and_counts_what_it_hears() {
        assert_eq!(std::mem::size_of::<super::Detector>(), 8);
        let mut cfg = Config::new(4, 2);
        let off = Node::new(cfg.clone(), Rank(1), 1, Instant::ZERO).unwrap();
        assert!(off.m.detect.0.is_none());
        assert_eq!(off.m.detect.observers().count(), 0);
        cfg.detect.enabled = true;
        let on = Node::new(cfg, Rank(1), 1, Instant::ZERO).unwrap();
        assert!(on.m.detect.observers().count() > 0);
    }
}
