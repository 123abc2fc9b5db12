//! One timer structure for the whole node, keyed by `(deadline, key)` with generation tokens.

use std::collections::BTreeMap;

use crate::time::Instant;

use crate::detect::DetectTimer;
use crate::flood::FloodTimer;
use crate::membership::MembershipTimer;
use crate::relm::RelmTimer;
use crate::xcast::XcastTimer;

/// Declares [`TimerKey`] from one line per machine, with `From` conversions from each machine's
/// timer type (so a machine arms its own keys: `ctx.timers.set(XTimer::Y, at)`).
macro_rules! timer_keys {
    ($($(#[$doc:meta])* $variant:ident($ty:ty);)*) => {
        /// A timer's identity: at most one deadline per key is armed at a time. The timer table:
        /// one line per machine, each machine's keys nested (a key may carry a peer, e.g. a
        /// per-rank suspicion timer). [`Node::poll_timeout`](crate::Node::poll_timeout) returns
        /// the key of the earliest deadline, so its outer variant says which machine asked.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        #[non_exhaustive]
        pub enum TimerKey {
            $($(#[$doc])* $variant($ty),)*
        }

        from_parts!(TimerKey { $($variant($ty)),* });
    };
}

timer_keys! {
    /// The flood test protocol.
    Flood(FloodTimer);
    /// Failure knowledge.
    Membership(MembershipTimer);
    /// Reliable broadcast.
    Xcast(XcastTimer);
    /// Reliable messaging.
    Relm(RelmTimer);
    /// Heartbeat failure detector.
    Detect(DetectTimer);
}

/// The generation a timer was armed with. A machine that keeps the token can tell a current
/// expiry from a stale one (re-armed or cancelled since): stale expiries are no-ops.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TimerToken(u64);

/// Deadlines ordered by `(deadline, key)`; re-arming or cancelling a key is O(log n).
#[derive(Debug)]
pub(crate) struct Timers<K = TimerKey> {
    queue: BTreeMap<(Instant, K), TimerToken>,
    by_key: BTreeMap<K, (Instant, TimerToken)>,
    next_gen: u64,
}

impl<K> Default for Timers<K> {
    fn default() -> Self {
        Self {
            queue: BTreeMap::new(),
            by_key: BTreeMap::new(),
            next_gen: 0,
        }
    }
}

impl<K: Ord + Copy> Timers<K> {
    /// Arms `key` at `at`, replacing any earlier deadline for it.
    pub(crate) fn set(&mut self, key: impl Into<K>, at: Instant) -> TimerToken {
        let key = key.into();
        self.cancel(key);
        self.next_gen += 1;
        let token = TimerToken(self.next_gen);
        self.queue.insert((at, key), token);
        self.by_key.insert(key, (at, token));
        token
    }

    /// Disarms `key`; returns whether it was armed.
    pub(crate) fn cancel(&mut self, key: impl Into<K>) -> bool {
        let key = key.into();
        match self.by_key.remove(&key) {
            Some((at, _)) => self.queue.remove(&(at, key)).is_some(),
            None => false,
        }
    }

    /// The earliest deadline and its key.
    pub(crate) fn next(&self) -> Option<(Instant, K)> {
        self.queue.keys().next().copied()
    }

    /// Removes and returns one timer due at `now`, earliest first.
    pub(crate) fn pop_due(&mut self, now: Instant) -> Option<(K, TimerToken)> {
        let (&(at, key), _) = self.queue.iter().next()?;
        if at > now {
            return None;
        }
        let token = self.queue.remove(&(at, key))?;
        self.by_key.remove(&key);
        Some((key, token))
    }

    /// Number of armed timers.
    pub(crate) fn len(&self) -> usize {
        self.by_key.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rearm_cancel_and_order() {
        let mut t: Timers<u32> = Timers::default();
        let a = t.set(1u32, Instant::from_nanos(50));
        t.set(2u32, Instant::from_nanos(20));
        let b = t.set(1u32, Instant::from_nanos(10));
        assert_ne!(a, b);
        assert_eq!(t.len(), 2);
        assert_eq!(t.next(), Some((Instant::from_nanos(10), 1)));
        assert_eq!(t.pop_due(Instant::from_nanos(5)), None);
        assert_eq!(t.pop_due(Instant::from_nanos(100)), Some((1, b)));
        assert!(t.cancel(2u32));
        assert!(!t.cancel(2u32));
        assert_eq!(t.pop_due(Instant::MAX), None);
        assert_eq!(t.len(), 0);
    }
}
