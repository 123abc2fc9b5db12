//! [`Solo`]: one node driven alone, for single-node sweeps of hostile input.

use std::panic::{catch_unwind, AssertUnwindSafe};

use super::{drain, transmit_fault, Outputs};
use crate::{Duration, Instant, Node};

/// One node driven alone by the driving contract: each [`Solo::step`] moves the clock on by a
/// fixed tick, feeds one input, and drains the node to empty, checking every transmit as
/// [`Net::check_transmits`](super::Net::check_transmits) does (never to itself, never to a rank
/// it knows dead or outside its span, a frame its own limits decode, on its kind's class;
/// [`Solo::check_decode`]). A panic in the input, or a failed check, is raised naming the
/// context and the step.
///
/// ```
/// use bytes::Bytes;
/// use lifeline_core::sim::testing::Solo;
/// use lifeline_core::tree::Rank;
/// use lifeline_core::{Config, Duration, Instant, Node};
///
/// let node = Node::new(Config::new(3, 2), Rank(2), 1, Instant::ZERO).unwrap();
/// let mut solo = Solo::new(node, Duration::from_millis(300)).context("a hostile frame");
/// let out = solo.step("an xcast", |n, now| {
///     n.xcast(now, 16, Bytes::from_static(b"a")).unwrap();
/// });
/// assert_eq!(out.transmits.len(), 1, "relayed to the parent");
/// ```
#[derive(Debug)]
pub struct Solo {
    node: Node,
    now: Instant,
    tick: Duration,
    context: String,
    decode: bool,
}

impl Solo {
    /// Drives `node` from its current time, `tick` further on each step.
    pub fn new(node: Node, tick: Duration) -> Self {
        Self {
            now: node.now(),
            node,
            tick,
            context: String::new(),
            decode: true,
        }
    }

    /// Whether each transmit must be a frame the node's own limits decode, on its kind's class
    /// (default on). A sweep of forged counters turns it off: a node that adopted a forged
    /// counter just below the wire's bound may count past it, and its peers refuse that frame
    /// as a counted decode error.
    pub fn check_decode(mut self, on: bool) -> Self {
        self.decode = on;
        self
    }

    /// Names what the test sweeps (the hostile input) in every panic.
    pub fn context(mut self, context: impl Into<String>) -> Self {
        self.context = context.into();
        self
    }

    /// The node.
    pub fn node(&self) -> &Node {
        &self.node
    }

    /// The clock: the time of the last step.
    pub fn now(&self) -> Instant {
        self.now
    }

    /// Moves the clock on by the tick, feeds `input` at the new time, then drains the node,
    /// checking each transmit. Returns what the node queued.
    pub fn step(&mut self, what: &str, input: impl FnOnce(&mut Node, Instant)) -> Outputs {
        self.now += self.tick;
        let (node, now) = (&mut self.node, self.now);
        if catch_unwind(AssertUnwindSafe(|| input(node, now))).is_err() {
            panic!("panic: {}, {what}", self.context);
        }
        let out = drain(&mut self.node);
        for t in &out.transmits {
            if let Some(fault) = transmit_fault(&self.node, t, self.decode) {
                panic!("{fault}: {}, {what}", self.context);
            }
        }
        out
    }
}
