//! Core-owned time: a monotonic [`Instant`] in nanoseconds and a [`Duration`].
//!
//! The core never reads a clock. Adapters convert their runtime's monotonic clock into an
//! [`Instant`] (nanoseconds since any fixed origin they choose) and pass it into every
//! `handle_*` call; the simulator passes virtual time. Arithmetic saturates instead of
//! panicking, so no input value can crash the core.

use std::fmt;
use std::ops::{Add, AddAssign, Sub};

/// A point in monotonic time, in nanoseconds since an origin chosen by the driver.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Instant(u64);

/// A span of time in nanoseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Duration(u64);

impl Instant {
    /// The origin.
    pub const ZERO: Self = Self(0);
    /// The farthest representable instant ("never").
    pub const MAX: Self = Self(u64::MAX);

    /// An instant `nanos` after the origin.
    pub const fn from_nanos(nanos: u64) -> Self {
        Self(nanos)
    }

    /// Nanoseconds since the origin.
    pub const fn as_nanos(self) -> u64 {
        self.0
    }

    /// `self - earlier`, or zero if `earlier` is later.
    pub fn saturating_since(self, earlier: Self) -> Duration {
        Duration(self.0.saturating_sub(earlier.0))
    }
}

impl Duration {
    /// Zero.
    pub const ZERO: Self = Self(0);
    /// The longest representable duration.
    pub const MAX: Self = Self(u64::MAX);

    /// From nanoseconds.
    pub const fn from_nanos(n: u64) -> Self {
        Self(n)
    }
    /// From microseconds (saturating).
    pub const fn from_micros(us: u64) -> Self {
        Self(us.saturating_mul(1_000))
    }
    /// From milliseconds (saturating).
    pub const fn from_millis(ms: u64) -> Self {
        Self(ms.saturating_mul(1_000_000))
    }
    /// From seconds (saturating).
    pub const fn from_secs(s: u64) -> Self {
        Self(s.saturating_mul(1_000_000_000))
    }
    /// In nanoseconds.
    pub const fn as_nanos(self) -> u64 {
        self.0
    }
    /// In whole milliseconds.
    pub const fn as_millis(self) -> u64 {
        self.0 / 1_000_000
    }
    /// In fractional milliseconds.
    pub fn as_millis_f64(self) -> f64 {
        self.0 as f64 / 1e6
    }
    /// Saturating multiplication.
    pub const fn saturating_mul(self, k: u64) -> Self {
        Self(self.0.saturating_mul(k))
    }
}

impl From<std::time::Duration> for Duration {
    fn from(d: std::time::Duration) -> Self {
        Self(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
    }
}

impl From<Duration> for std::time::Duration {
    fn from(d: Duration) -> Self {
        Self::from_nanos(d.0)
    }
}

impl Add<Duration> for Instant {
    type Output = Self;
    fn add(self, d: Duration) -> Self {
        Self(self.0.saturating_add(d.0))
    }
}

impl AddAssign<Duration> for Instant {
    fn add_assign(&mut self, d: Duration) {
        *self = *self + d;
    }
}

impl Sub for Instant {
    type Output = Duration;
    /// Saturating: an earlier `self` gives zero.
    fn sub(self, rhs: Self) -> Duration {
        self.saturating_since(rhs)
    }
}

impl Add for Duration {
    type Output = Self;
    fn add(self, d: Self) -> Self {
        Self(self.0.saturating_add(d.0))
    }
}

impl fmt::Display for Instant {
    /// Milliseconds with microsecond precision, e.g. `12.345ms`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}.{:03}ms",
            self.0 / 1_000_000,
            (self.0 / 1_000) % 1_000
        )
    }
}

impl fmt::Display for Duration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}.{:03}ms",
            self.0 / 1_000_000,
            (self.0 / 1_000) % 1_000
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_saturates() {
        assert_eq!(Instant::MAX + Duration::from_secs(1), Instant::MAX);
        assert_eq!(Instant::ZERO - Instant::from_nanos(5), Duration::ZERO);
        assert_eq!(Duration::from_secs(u64::MAX), Duration::MAX);
        assert_eq!(Instant::from_nanos(1_234_567).to_string(), "1.234ms");
        let d: Duration = std::time::Duration::from_millis(3).into();
        assert_eq!(d, Duration::from_millis(3));
    }
}
