//! Small ordered maps and sets as one sorted vector: for per-node state that usually holds
//! one to a few entries (xcast's ops in flight and per-origin watermarks, recently seen flood
//! ids). A `BTreeMap` leaf allocates room for eleven entries (~200 bytes) for its first one;
//! these allocate room for exactly one, then grow as a `Vec` does, and give the memory back
//! when emptied: at a million simulated ranks this is most of an xcast's memory. Lookups are
//! binary searches; inserts and removals shift the tail (cheap for the windows of ops and the
//! per-origin entries these hold). Iteration is in key order, as a `BTreeMap`'s.

use std::ops::RangeFrom;

/// An ordered map over a sorted vector.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct VecMap<K, V>(Vec<(K, V)>);

impl<K, V> Default for VecMap<K, V> {
    fn default() -> Self {
        Self(Vec::new())
    }
}

impl<K: Ord, V> VecMap<K, V> {
    fn find(&self, k: &K) -> Result<usize, usize> {
        self.0.binary_search_by(|(e, _)| e.cmp(k))
    }

    fn insert_at(&mut self, i: usize, k: K, v: V) {
        if self.0.capacity() == 0 {
            self.0.reserve_exact(1);
        }
        self.0.insert(i, (k, v));
    }

    /// The value of `k`.
    pub(crate) fn get(&self, k: &K) -> Option<&V> {
        self.find(k).ok().map(|i| &self.0[i].1)
    }

    /// The value of `k`, mutably.
    pub(crate) fn get_mut(&mut self, k: &K) -> Option<&mut V> {
        self.find(k).ok().map(|i| &mut self.0[i].1)
    }

    /// Whether `k` has a value.
    pub(crate) fn contains_key(&self, k: &K) -> bool {
        self.find(k).is_ok()
    }

    /// Removes everything and gives the memory back.
    pub(crate) fn clear(&mut self) {
        self.0 = Vec::new();
    }

    /// The value of `k`, inserted as `f()` first if absent.
    pub(crate) fn get_or_insert_with(&mut self, k: K, f: impl FnOnce() -> V) -> &mut V {
        let i = match self.find(&k) {
            Ok(i) => i,
            Err(i) => {
                self.insert_at(i, k, f());
                i
            }
        };
        &mut self.0[i].1
    }

    /// The entry with the smallest key.
    pub(crate) fn first_key_value(&self) -> Option<(&K, &V)> {
        self.0.first().map(|(k, v)| (k, v))
    }

    /// The entry with the largest key.
    pub(crate) fn last_key_value(&self) -> Option<(&K, &V)> {
        self.0.last().map(|(k, v)| (k, v))
    }

    /// Keys, ascending.
    pub(crate) fn keys(&self) -> impl Iterator<Item = &K> + '_ {
        self.0.iter().map(|(k, _)| k)
    }

    /// Entries, ascending by key.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&K, &V)> + '_ {
        self.0.iter().map(|(k, v)| (k, v))
    }

    /// Entries with mutable values, ascending by key.
    pub(crate) fn iter_mut(&mut self) -> impl Iterator<Item = (&K, &mut V)> + '_ {
        self.0.iter_mut().map(|(k, v)| (&*k, v))
    }

    /// Values, mutably, ascending by key.
    pub(crate) fn values_mut(&mut self) -> impl Iterator<Item = &mut V> + '_ {
        self.0.iter_mut().map(|(_, v)| v)
    }

    /// Entries with a key at or above `r.start`, ascending.
    pub(crate) fn range(&self, r: RangeFrom<K>) -> impl Iterator<Item = (&K, &V)> + '_ {
        let start = self.find(&r.start).unwrap_or_else(|i| i);
        self.0[start..].iter().map(|(k, v)| (k, v))
    }

    /// Sets `k` to `v`; returns the value it replaced.
    pub(crate) fn insert(&mut self, k: K, v: V) -> Option<V> {
        match self.find(&k) {
            Ok(i) => Some(std::mem::replace(&mut self.0[i].1, v)),
            Err(i) => {
                self.insert_at(i, k, v);
                None
            }
        }
    }

    /// The value of `k`, inserted as `v` first if absent (`BTreeMap::entry(k).or_insert(v)`).
    pub(crate) fn or_insert(&mut self, k: K, v: V) -> &mut V {
        self.get_or_insert_with(k, || v)
    }

    /// Removes `k`; returns its value. An emptied map gives its memory back.
    pub(crate) fn remove(&mut self, k: &K) -> Option<V> {
        let i = self.find(k).ok()?;
        let (_, v) = self.0.remove(i);
        if self.0.is_empty() {
            self.0 = Vec::new();
        }
        Some(v)
    }

    /// Number of entries.
    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }
}

/// An ordered set over a sorted vector.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct VecSet<K>(VecMap<K, ()>);

impl<K> Default for VecSet<K> {
    fn default() -> Self {
        Self(VecMap::default())
    }
}

impl<K: Ord> VecSet<K> {
    /// Adds `k`; whether it was absent.
    pub(crate) fn insert(&mut self, k: K) -> bool {
        self.0.insert(k, ()).is_none()
    }

    /// Removes `k`; whether it was present.
    pub(crate) fn remove(&mut self, k: &K) -> bool {
        self.0.remove(k).is_some()
    }

    /// Number of entries.
    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;

    use super::*;

    proptest! {
        /// The same answers as a `BTreeMap` under any mix of operations.
        #[test]
        fn matches_btreemap(ops in proptest::collection::vec((0u8..4, 0u8..40, any::<u16>()), 1..300)) {
            let mut m: VecMap<u8, u16> = VecMap::default();
            let mut s: VecSet<u8> = VecSet::default();
            let mut r: BTreeMap<u8, u16> = BTreeMap::new();
            for (op, k, v) in ops {
                match op {
                    0 => {
                        prop_assert_eq!(s.insert(k), !r.contains_key(&k));
                        prop_assert_eq!(m.insert(k, v), r.insert(k, v));
                    }
                    1 => {
                        prop_assert_eq!(s.remove(&k), r.contains_key(&k));
                        prop_assert_eq!(m.remove(&k), r.remove(&k));
                    }
                    2 => {
                        *m.or_insert(k, v) += 1;
                        *r.entry(k).or_insert(v) += 1;
                        s.insert(k);
                    }
                    _ => prop_assert_eq!(m.get(&k), r.get(&k)),
                }
                prop_assert_eq!(m.len(), r.len());
                prop_assert_eq!(s.len(), r.len());
                prop_assert!(m.keys().eq(r.keys()));
                prop_assert!(m.range(k..).eq(r.range(k..)));
                prop_assert_eq!(m.first_key_value(), r.first_key_value());
                prop_assert_eq!(m.last_key_value(), r.last_key_value());
            }
        }
    }
}
