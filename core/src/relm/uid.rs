//! Message uids: a 32-bit counter per (source, destination) chain that wraps around and skips
//! the reserved sentinels at the top of the range (PRRTE's `UNKNOWN`, `NONE`, `INVALID`).
//!
//! Valid uids are `0..=UID_MAX`, so the counter cycles through `UID_MODULUS = 2^32 − 3` values.
//! Comparisons are serial-number arithmetic over that cycle: a chain never has more than
//! `relm.window` (far below `2^31`) messages between its oldest unacknowledged and its newest
//! uid, so "ahead" and "behind" are never ambiguous.

/// The largest valid uid, `2^32 − 4`.
pub const UID_MAX: u32 = u32::MAX - 3;
/// Reserved: an unknown uid (`2^32 − 1`). Never on the wire.
pub const UID_UNKNOWN: u32 = u32::MAX;
/// Reserved: "no message" (`2^32 − 2`). Never on the wire.
pub const UID_NONE: u32 = u32::MAX - 1;
/// Reserved: an invalid uid (`2^32 − 3`). Never on the wire.
pub const UID_INVALID: u32 = u32::MAX - 2;
/// How many distinct valid uids there are.
pub const UID_MODULUS: u64 = UID_MAX as u64 + 1;

/// A valid message uid within one (source, destination) chain.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Uid(u32);

impl Uid {
    /// The uid for `v`, or `None` for a reserved sentinel.
    pub const fn new(v: u32) -> Option<Self> {
        if v <= UID_MAX {
            Some(Self(v))
        } else {
            None
        }
    }

    /// The raw value.
    pub const fn get(self) -> u32 {
        self.0
    }

    /// The uid after this one (wrapping past the sentinels to 0).
    #[must_use]
    pub const fn next(self) -> Self {
        if self.0 == UID_MAX {
            Self(0)
        } else {
            Self(self.0 + 1)
        }
    }

    /// The uid before this one.
    #[must_use]
    pub const fn prev(self) -> Self {
        if self.0 == 0 {
            Self(UID_MAX)
        } else {
            Self(self.0 - 1)
        }
    }

    /// The uid `n` steps after this one.
    #[must_use]
    pub fn plus(self, n: u64) -> Self {
        Self(((self.0 as u64 + n % UID_MODULUS) % UID_MODULUS) as u32)
    }

    /// Steps from `self` forward to `to` (`0..UID_MODULUS`).
    pub fn dist(self, to: Self) -> u64 {
        (to.0 as u64 + UID_MODULUS - self.0 as u64) % UID_MODULUS
    }

    /// Whether `self` is strictly after `other` in serial order (less than half a cycle ahead).
    pub fn after(self, other: Self) -> bool {
        let d = other.dist(self);
        d != 0 && d < UID_MODULUS / 2
    }

    /// Whether `self` is at or before `other` in serial order.
    pub fn at_or_before(self, other: Self) -> bool {
        !self.after(other)
    }

    /// The later of two uids in serial order.
    #[must_use]
    pub fn later(self, other: Self) -> Self {
        if self.after(other) {
            self
        } else {
            other
        }
    }
}

impl std::fmt::Display for Uid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn wraps_past_the_sentinels() {
        let top = Uid::new(UID_MAX).unwrap();
        assert_eq!(top.next(), Uid::new(0).unwrap());
        assert_eq!(Uid::new(0).unwrap().prev(), top);
        for s in [UID_UNKNOWN, UID_NONE, UID_INVALID] {
            assert_eq!(Uid::new(s), None);
        }
        let mut u = Uid::new(UID_MAX - 2).unwrap();
        let mut seen = Vec::new();
        for _ in 0..6 {
            seen.push(u.get());
            u = u.next();
        }
        assert_eq!(seen, [UID_MAX - 2, UID_MAX - 1, UID_MAX, 0, 1, 2]);
        assert!(Uid::new(1).unwrap().after(top));
        assert!(top.at_or_before(Uid::new(0).unwrap()));
        assert_eq!(top.dist(Uid::new(2).unwrap()), 3);
        assert_eq!(top.plus(3), Uid::new(2).unwrap());
    }

    proptest! {
        #[test]
        fn add_and_dist_agree(a in 0..=UID_MAX, n in 0u64..(1 << 33)) {
            let a = Uid::new(a).unwrap();
            let b = a.plus(n);
            prop_assert_eq!(a.dist(b), n % UID_MODULUS);
            let mut c = a;
            for _ in 0..(n % 5) { c = c.next(); }
            prop_assert_eq!(a.dist(c), n % 5);
            prop_assert_eq!(c.prev().next(), c);
        }

        #[test]
        fn serial_order_is_antisymmetric(a in 0..=UID_MAX, d in 1u64..(UID_MODULUS / 2)) {
            let a = Uid::new(a).unwrap();
            let b = a.plus(d);
            prop_assert!(b.after(a));
            prop_assert!(!a.after(b));
            prop_assert_eq!(a.later(b), b);
        }
    }
}
