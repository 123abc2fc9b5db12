//! One timer structure for the whole node, keyed by `(deadline, key)` with generation tokens.

use std::collections::BTreeMap;

use crate::time::Instant;

use crate::detect::DetectTimer;
use crate::flood::FloodTimer;
use crate::membership::MembershipTimer;
use crate::relm::RelmTimer;
use crate::revoke::RevokeTimer;
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
    /// The revoke flood (arms none).
    Revoke(RevokeTimer);
}

/// The generation a timer was armed with. A machine that keeps the token can tell a current
/// expiry from a stale one (re-armed or cancelled since): stale expiries are no-ops.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TimerToken(u64);

/// Up to this many armed timers live in one sorted vector (a few dozen bytes a node: most
/// nodes of a large simulated cluster arm one or two); past it they move to two ordered maps
/// (O(log n) per operation for a rank with many per-peer timers).
const SMALL: usize = 32;
/// A large table moves back to the vector once it has shrunk to this many.
const SHRINK: usize = SMALL / 4;

/// Deadlines ordered by `(deadline, key)`; re-arming or cancelling a key is O(log n) once
/// the table is large, a short scan while it is small. Which representation holds the
/// timers is invisible: the order, tokens and results are the same (a property test checks
/// both against a reference model).
#[derive(Debug)]
pub(crate) struct Timers<K = TimerKey> {
    store: Store<K>,
    next_gen: u64,
}

#[derive(Debug)]
enum Store<K> {
    /// Sorted by `(deadline, key)`, latest first: the earliest pops from the end. Freed when
    /// it empties, so an idle node holds no timer memory.
    Small(Vec<(Instant, K, TimerToken)>),
    Large {
        queue: BTreeMap<(Instant, K), TimerToken>,
        by_key: BTreeMap<K, (Instant, TimerToken)>,
    },
}

impl<K> Default for Timers<K> {
    fn default() -> Self {
        Self {
            store: Store::Small(Vec::new()),
            next_gen: 0,
        }
    }
}

impl<K: Ord + Copy> Timers<K> {
    /// Arms `key` at `at`, replacing any earlier deadline for it.
    pub(crate) fn set(&mut self, key: impl Into<K>, at: Instant) -> TimerToken {
        let key = key.into();
        self.remove(key);
        self.next_gen += 1;
        let token = TimerToken(self.next_gen);
        if let Store::Small(v) = &self.store {
            if v.len() >= SMALL {
                self.grow();
            }
        }
        match &mut self.store {
            Store::Small(v) => {
                if v.capacity() == 0 {
                    // Most nodes hold one timer at a time: room for one, not Vec's minimum four.
                    v.reserve_exact(1);
                }
                // Latest first: the position after every entry later than (at, key).
                let i = v.partition_point(|&(a, k, _)| (a, k) > (at, key));
                v.insert(i, (at, key, token));
            }
            Store::Large { queue, by_key } => {
                queue.insert((at, key), token);
                by_key.insert(key, (at, token));
            }
        }
        token
    }

    /// Disarms `key`; returns whether it was armed.
    pub(crate) fn cancel(&mut self, key: impl Into<K>) -> bool {
        let found = self.remove(key.into());
        if found {
            self.settle();
        }
        found
    }

    /// Removes `key`'s entry, leaving the representation as it is (a re-arm inserts at once:
    /// settling first would free and reallocate a lone timer's vector on every re-arm).
    fn remove(&mut self, key: K) -> bool {
        match &mut self.store {
            Store::Small(v) => match v.iter().position(|e| e.1 == key) {
                Some(i) => {
                    v.remove(i);
                    true
                }
                None => false,
            },
            Store::Large { queue, by_key } => match by_key.remove(&key) {
                Some((at, _)) => queue.remove(&(at, key)).is_some(),
                None => false,
            },
        }
    }

    /// The earliest deadline and its key.
    pub(crate) fn next(&self) -> Option<(Instant, K)> {
        match &self.store {
            Store::Small(v) => v.last().map(|&(at, key, _)| (at, key)),
            Store::Large { queue, .. } => queue.keys().next().copied(),
        }
    }

    /// Removes and returns one timer due at `now`, earliest first.
    pub(crate) fn pop_due(&mut self, now: Instant) -> Option<(K, TimerToken)> {
        let (at, key) = self.next()?;
        if at > now {
            return None;
        }
        let popped = match &mut self.store {
            Store::Small(v) => v.pop().map(|(_, key, token)| (key, token)),
            Store::Large { queue, by_key } => {
                by_key.remove(&key);
                queue.remove(&(at, key)).map(|token| (key, token))
            }
        };
        self.settle();
        popped
    }

    /// Number of armed timers.
    pub(crate) fn len(&self) -> usize {
        match &self.store {
            Store::Small(v) => v.len(),
            Store::Large { by_key, .. } => by_key.len(),
        }
    }

    /// Moves a full vector into the maps.
    fn grow(&mut self) {
        if let Store::Small(v) = &mut self.store {
            let v = std::mem::take(v);
            let by_key = v.iter().map(|&(at, k, t)| (k, (at, t))).collect();
            let queue = v.into_iter().map(|(at, k, t)| ((at, k), t)).collect();
            self.store = Store::Large { queue, by_key };
        }
    }

    /// After a removal: an empty vector gives its memory back, a shrunken table goes back to
    /// the vector.
    fn settle(&mut self) {
        match &mut self.store {
            Store::Small(v) if v.is_empty() => *v = Vec::new(),
            Store::Small(_) => {}
            Store::Large { queue, .. } if queue.len() <= SHRINK => {
                let v = std::mem::take(queue)
                    .into_iter()
                    .rev()
                    .map(|((at, k), t)| (at, k, t))
                    .collect();
                self.store = Store::Small(v);
            }
            Store::Large { .. } => {}
        }
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

    /// Both representations against a reference model: same tokens, same order, same
    /// results, across the vector/map switch in both directions.
    mod model {
        use std::collections::BTreeMap;

        use proptest::prelude::*;

        use super::*;

        #[derive(Clone, Debug)]
        enum Op {
            Set(u8, u16),
            Cancel(u8),
            Pop(u16),
        }

        fn op() -> impl Strategy<Value = Op> {
            prop_oneof![
                3 => (any::<u8>(), 0u16..500).prop_map(|(k, at)| Op::Set(k % 80, at)),
                1 => any::<u8>().prop_map(|k| Op::Cancel(k % 80)),
                1 => (0u16..500).prop_map(Op::Pop),
            ]
        }

        proptest! {
            #[test]
            fn matches_ordered_maps(ops in proptest::collection::vec(op(), 1..400)) {
                let mut t: Timers<u8> = Timers::default();
                let mut by_key: BTreeMap<u8, (Instant, TimerToken)> = BTreeMap::new();
                for o in ops {
                    match o {
                        Op::Set(k, at) => {
                            let at = Instant::from_nanos(u64::from(at));
                            let tok = t.set(k, at);
                            by_key.insert(k, (at, tok));
                        }
                        Op::Cancel(k) => {
                            prop_assert_eq!(t.cancel(k), by_key.remove(&k).is_some());
                        }
                        Op::Pop(now) => {
                            let now = Instant::from_nanos(u64::from(now));
                            let want = by_key
                                .iter()
                                .map(|(&k, &(at, tok))| (at, k, tok))
                                .min()
                                .filter(|&(at, _, _)| at <= now);
                            if let Some((_, k, _)) = want {
                                by_key.remove(&k);
                            }
                            prop_assert_eq!(t.pop_due(now), want.map(|(_, k, tok)| (k, tok)));
                        }
                    }
                    prop_assert_eq!(t.len(), by_key.len());
                    let next = by_key.iter().map(|(&k, &(at, _))| (at, k)).min();
                    prop_assert_eq!(t.next(), next);
                }
            }
        }
    }
}
