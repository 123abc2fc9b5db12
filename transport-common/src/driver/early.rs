//! Frames that arrive from a rank past this node's span before the node knows that rank.
//!
//! A connection from a rank past the span is taken when the book holds the rank (a joiner an
//! admission not applied here yet names, or one the connector learned from its handshake: a
//! launched rank that starts late under a promoted joiner). The core reads only an adoption
//! notice from past its span (it catches up on it) and drops anything else; the driver keeps
//! what the core dropped, in arrival order, and feeds it again once the span covers its sender
//! (the admission applied, or the catch-up), so a joiner's first frames (its hello, its
//! check-ins) are not lost to the race between its dial and its admission reaching this node.
//!
//! Bounded: at most [`MAX_FRAMES`] frames and [`MAX_BYTES`] bytes held; past either, a frame
//! is dropped and counted (`early_dropped`). A sender's held frames go when its link goes down.

use std::collections::VecDeque;

use bytes::Bytes;
use lifeline_core::tree::Rank;

/// The most frames held.
pub(super) const MAX_FRAMES: usize = 1024;
/// The most bytes held.
pub(super) const MAX_BYTES: usize = 4 << 20;

/// Frames held for senders past the span, in arrival order.
#[derive(Debug, Default)]
pub(super) struct Early {
    frames: VecDeque<(Rank, Bytes)>,
    bytes: usize,
}

impl Early {
    /// Holds `frame` from `from`; `false` (nothing held) past the bounds.
    pub(super) fn hold(&mut self, from: Rank, frame: Bytes) -> bool {
        if self.frames.len() >= MAX_FRAMES || self.bytes + frame.len() > MAX_BYTES {
            return false;
        }
        self.bytes += frame.len();
        self.frames.push_back((from, frame));
        true
    }

    /// Whether frames from `from` are held.
    pub(super) fn holds(&self, from: Rank) -> bool {
        self.frames.iter().any(|(r, _)| *r == from)
    }

    /// Whether nothing is held.
    pub(super) fn is_empty(&self) -> bool {
        self.frames.is_empty()
    }

    /// Takes the held frames whose sender `covered` accepts, in arrival order.
    pub(super) fn take(&mut self, covered: impl Fn(Rank) -> bool) -> Vec<(Rank, Bytes)> {
        let mut out = Vec::new();
        let mut keep = VecDeque::with_capacity(self.frames.len());
        for (r, f) in self.frames.drain(..) {
            if covered(r) {
                self.bytes -= f.len();
                out.push((r, f));
            } else {
                keep.push_back((r, f));
            }
        }
        self.frames = keep;
        out
    }

    /// Drops what `peer` sent (its link went down); returns how many frames.
    pub(super) fn forget(&mut self, peer: Rank) -> usize {
        self.take(|r| r == peer).len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn held_in_order_bounded_and_forgotten() {
        let mut e = Early::default();
        let f = |n: usize| Bytes::from(vec![0u8; n]);
        assert!(e.hold(Rank(7), f(10)));
        assert!(e.hold(Rank(8), f(20)));
        assert!(e.hold(Rank(7), f(30)));
        assert!(e.holds(Rank(7)) && !e.holds(Rank(9)));
        let got = e.take(|r| r == Rank(7));
        assert_eq!(
            got.iter().map(|(r, b)| (r.0, b.len())).collect::<Vec<_>>(),
            [(7, 10), (7, 30)]
        );
        assert_eq!(e.forget(Rank(8)), 1);
        assert!(e.is_empty());
        // The byte bound, then the frame bound.
        assert!(!e.hold(Rank(7), f(MAX_BYTES + 1)));
        assert!(e.hold(Rank(7), f(MAX_BYTES)));
        assert!(!e.hold(Rank(7), f(1)));
        e.forget(Rank(7));
        for _ in 0..MAX_FRAMES {
            assert!(e.hold(Rank(7), f(0)));
        }
        assert!(!e.hold(Rank(7), f(0)));
    }
}
