//! The removal flood's duplicate filter: which decisions of one coordinator were seen here.
//!
//! A decision (`RemovedMsg`) is numbered by its coordinator (`seq`, from 1). On the tree every
//! rank had one path from the coordinator and got its decisions in order, so "the highest seq
//! seen" was the whole filter. The flood now rides the revoke overlay (many paths of different
//! lengths), so two decisions made close together can arrive in either order: the filter keeps
//! the highest seq seen and which of the [`WINDOW`] below it were seen (an anti-replay window),
//! and takes a lower one still unseen as new. A decision more than [`WINDOW`] behind the
//! highest is dropped as old; the ordered global notice still carries its ranks.

/// How many decisions below the highest one seen are still told apart.
pub(super) const WINDOW: u64 = 64;

/// One coordinator's decisions seen here (16 bytes).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Seen {
    /// The highest seq seen (0: none).
    top: u64,
    /// Bit `i` set: decision `top - i` was seen (bit 0 is `top`).
    mask: u64,
}

impl Seen {
    /// Records decision `seq`; whether it was new here (a duplicate, seq 0, or one older than
    /// the window is not).
    pub(super) fn note(&mut self, seq: u64) -> bool {
        if seq == 0 {
            return false;
        }
        if seq > self.top {
            let shift = seq - self.top;
            self.mask = if shift >= WINDOW {
                0
            } else {
                self.mask << shift
            };
            self.mask |= 1;
            self.top = seq;
            return true;
        }
        let back = self.top - seq;
        if back >= WINDOW {
            return false;
        }
        let bit = 1u64 << back;
        let new = self.mask & bit == 0;
        self.mask |= bit;
        new
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_order_each_once() {
        let mut s = Seen::default();
        for q in 1..200 {
            assert!(s.note(q));
            assert!(!s.note(q));
        }
        assert!(!s.note(0));
    }

    /// The overlay's reordering: a later decision first, the earlier one still new once.
    #[test]
    fn out_of_order_within_the_window() {
        let mut s = Seen::default();
        assert!(s.note(5));
        assert!(s.note(3));
        assert!(!s.note(3));
        assert!(s.note(4));
        assert!(!s.note(5));
        assert!(s.note(70));
        assert!(s.note(7), "63 behind: still in the window");
        assert!(!s.note(6), "64 behind: older than the window");
        assert!(!s.note(5));
    }

    #[test]
    fn a_jump_past_the_window_forgets_the_old_bits() {
        let mut s = Seen::default();
        assert!(s.note(1));
        assert!(s.note(1_000));
        assert!(!s.note(1));
        assert!(s.note(999));
        assert!(!s.note(1_000));
    }
}
