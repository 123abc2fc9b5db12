//! The node's single bounded outbox of transmits and application events.

use std::collections::VecDeque;

use crate::event::Event;
use crate::transmit::Transmit;

/// Bounded FIFO queues; pushing past a bound drops and reports `false` so the caller counts it.
/// A queue drained to empty gives its memory back: an idle node holds no queue memory (a
/// simulated cluster of 2^20 nodes would otherwise keep ~450 bytes a node of drained queues).
#[derive(Debug, Default)]
pub(crate) struct Outbox {
    transmits: VecDeque<Transmit>,
    events: VecDeque<Event>,
}

impl Outbox {
    pub(crate) fn push_transmit(&mut self, t: Transmit, cap: usize) -> bool {
        if self.transmits.len() >= cap {
            return false;
        }
        self.transmits.push_back(t);
        true
    }

    pub(crate) fn push_event(&mut self, e: Event, cap: usize) -> bool {
        if self.events.len() >= cap {
            return false;
        }
        self.events.push_back(e);
        true
    }

    pub(crate) fn pop_transmit(&mut self) -> Option<Transmit> {
        let t = self.transmits.pop_front();
        if self.transmits.is_empty() {
            self.transmits = VecDeque::new();
        }
        t
    }

    pub(crate) fn pop_event(&mut self) -> Option<Event> {
        let e = self.events.pop_front();
        if self.events.is_empty() {
            self.events = VecDeque::new();
        }
        e
    }

    /// Drops queued transmits `keep` refuses (e.g. to ranks that just became known dead).
    pub(crate) fn retain_transmits(&mut self, keep: impl FnMut(&Transmit) -> bool) {
        self.transmits.retain(keep);
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.transmits.is_empty() && self.events.is_empty()
    }
}
