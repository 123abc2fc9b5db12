//! A link's activity, for its keepalive: when either of its two connections (control and
//! data, one per slot) last read or wrote bytes.
//!
//! The keepalive exists so that an idle link has data in flight, which TCP's user timeout
//! turns into a link-down when the peer's host vanishes or the path is cut (see
//! [`crate::conn::configure`]). Any connection of a link ending takes the whole link down
//! ([`lifeline_core::link::LinkPolicy::handle_closed`]), so one connection's traffic covers
//! both: the link needs a keepalive only when *neither* connection carried anything for the
//! keepalive interval, and then on one connection only (the control one, which every link
//! has). Before this, each connection kept its own clock, so a link carrying heartbeats on
//! its control connection kept its idle data connection up with keepalives of its own, and
//! each connection's writer woke every interval (256 processes on 2 cores feel it:
//! `bench/idle/README.md`).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use lifeline_core::tree::Rank;
use tokio::time::{Duration, Instant};

/// When a link last read and last wrote bytes (nanoseconds since `base`), shared by the
/// readers and writers of its connections.
#[derive(Debug)]
pub(crate) struct Activity {
    base: Instant,
    nanos: AtomicU64,
}

impl Activity {
    fn new() -> Self {
        Self {
            base: Instant::now(),
            nanos: AtomicU64::new(0),
        }
    }

    /// Records that bytes were read or written just now (or a connection started: a fresh
    /// connection is as good as traffic).
    pub(crate) fn touch(&self) {
        let n = self.base.elapsed().as_nanos().min(u128::from(u64::MAX)) as u64;
        self.nanos.fetch_max(n, Ordering::Relaxed);
    }

    /// When the link last read or wrote bytes (or a connection of it started).
    pub(crate) fn last(&self) -> Instant {
        self.base + Duration::from_nanos(self.nanos.load(Ordering::Relaxed))
    }
}

/// Each peer's [`Activity`], held by the connections to that peer (an entry lives as long as
/// one of them, so the map is bounded by the connections open).
#[derive(Debug, Default)]
pub(crate) struct Links {
    by_peer: Mutex<BTreeMap<Rank, Weak<Activity>>>,
}

impl Links {
    /// The activity of the link to `peer`, shared with its other connection if that one is
    /// open; a new connection counts as activity.
    pub(crate) fn of(&self, peer: Rank) -> Arc<Activity> {
        let mut map = self.by_peer.lock().unwrap_or_else(|e| e.into_inner());
        let a = match map.get(&peer).and_then(Weak::upgrade) {
            Some(a) => a,
            None => {
                // Entries of links whose connections all ended go first.
                map.retain(|_, w| w.strong_count() > 0);
                let a = Arc::new(Activity::new());
                map.insert(peer, Arc::downgrade(&a));
                a
            }
        };
        a.touch();
        a
    }

    /// Links with at least one connection open (for tests).
    #[cfg(test)]
    pub(crate) fn open(&self) -> usize {
        let map = self.by_peer.lock().unwrap_or_else(|e| e.into_inner());
        map.values().filter(|w| w.strong_count() > 0).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both connections of a link share one clock; a link whose connections all ended leaves
    /// no entry once another link opens.
    #[test]
    fn one_clock_per_link() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let _g = rt.enter();
        let links = Links::default();
        let control = links.of(Rank(3));
        let started = control.last();
        std::thread::sleep(std::time::Duration::from_millis(5));
        let data = links.of(Rank(3));
        assert_eq!(
            control.last(),
            data.last(),
            "one clock for both connections"
        );
        assert!(
            control.last() > started,
            "the second connection's start counts"
        );
        let before = data.last();
        std::thread::sleep(std::time::Duration::from_millis(5));
        data.touch();
        assert!(
            control.last() > before,
            "the data connection's traffic counts for both"
        );
        let other = links.of(Rank(4));
        assert_eq!(links.open(), 2);
        drop((control, data));
        let _again = links.of(Rank(5));
        assert_eq!(links.open(), 2);
        assert_eq!(
            links.by_peer.lock().unwrap().len(),
            2,
            "rank 3's entry was removed"
        );
        drop(other);
    }
}
