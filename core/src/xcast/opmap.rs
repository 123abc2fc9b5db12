//! A compact ordered map of op id to op: a sorted vector.
//!
//! A rank holds at most a window of ops (`xcast.max_inflight`), usually one or two, so a sorted
//! vector beats a B-tree (whose every leaf allocates room for eleven entries): at a million
//! simulated ranks this is most of an xcast's memory.

use std::ops::RangeFrom;

use super::Op;

/// Ops by id, ascending.
#[derive(Debug, Default)]
pub(super) struct OpMap {
    v: Vec<(u64, Op)>,
}

impl OpMap {
    fn find(&self, id: u64) -> Result<usize, usize> {
        self.v.binary_search_by_key(&id, |e| e.0)
    }

    pub(super) fn len(&self) -> usize {
        self.v.len()
    }

    pub(super) fn clear(&mut self) {
        self.v = Vec::new();
    }

    pub(super) fn contains_key(&self, id: &u64) -> bool {
        self.find(*id).is_ok()
    }

    pub(super) fn get(&self, id: &u64) -> Option<&Op> {
        self.find(*id).ok().map(|i| &self.v[i].1)
    }

    pub(super) fn get_mut(&mut self, id: &u64) -> Option<&mut Op> {
        self.find(*id).ok().map(|i| &mut self.v[i].1)
    }

    /// Inserts or replaces.
    pub(super) fn insert(&mut self, id: u64, op: Op) {
        match self.find(id) {
            Ok(i) => self.v[i].1 = op,
            Err(i) => self.v.insert(i, (id, op)),
        }
    }

    pub(super) fn get_or_insert_with(&mut self, id: u64, f: impl FnOnce() -> Op) -> &mut Op {
        let i = match self.find(id) {
            Ok(i) => i,
            Err(i) => {
                self.v.insert(i, (id, f()));
                i
            }
        };
        &mut self.v[i].1
    }

    pub(super) fn remove(&mut self, id: &u64) -> Option<Op> {
        let i = self.find(*id).ok()?;
        let (_, op) = self.v.remove(i);
        if self.v.is_empty() {
            self.v = Vec::new();
        }
        Some(op)
    }

    pub(super) fn first_key_value(&self) -> Option<(&u64, &Op)> {
        self.v.first().map(|e| (&e.0, &e.1))
    }

    pub(super) fn last_key_value(&self) -> Option<(&u64, &Op)> {
        self.v.last().map(|e| (&e.0, &e.1))
    }

    pub(super) fn keys(&self) -> impl Iterator<Item = &u64> + '_ {
        self.v.iter().map(|e| &e.0)
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = (&u64, &Op)> + '_ {
        self.v.iter().map(|e| (&e.0, &e.1))
    }

    pub(super) fn iter_mut(&mut self) -> impl Iterator<Item = (&u64, &mut Op)> + '_ {
        self.v.iter_mut().map(|e| {
            let (k, v) = e;
            (&*k, v)
        })
    }

    pub(super) fn values_mut(&mut self) -> impl Iterator<Item = &mut Op> + '_ {
        self.v.iter_mut().map(|e| &mut e.1)
    }

    pub(super) fn range(&self, r: RangeFrom<u64>) -> impl Iterator<Item = (&u64, &Op)> + '_ {
        let start = self.find(r.start).unwrap_or_else(|i| i);
        self.v[start..].iter().map(|e| (&e.0, &e.1))
    }
}
