//! Start-up from check-ins through the C entry points (`membership_check_in`): a few nodes over
//! an in-memory FIFO network in virtual time (1 ms steps), driven only by `lifeline_*` calls.
//! Every member reports `LIFELINE_EVENT_CHECKED_IN` and exactly one `LIFELINE_EVENT_READY`, all
//! at the same epoch and members; a rank that never starts is named by
//! `LIFELINE_EVENT_STARTUP_INCOMPLETE` at every other rank after the start-up timeout.

use std::collections::{BTreeSet, VecDeque};
use std::ptr::{null, null_mut};

use crate::config::{lifeline_config_free, lifeline_config_new, lifeline_config_set};
use crate::event::*;
use crate::node::{
    lifeline_node_free, lifeline_node_handle_frame, lifeline_node_handle_link_up,
    lifeline_node_handle_timeout, lifeline_node_max_frame, lifeline_node_new,
    lifeline_node_poll_event, lifeline_node_poll_timeout, lifeline_node_poll_transmit, Transmit,
};
use crate::query::{lifeline_node_stats, lifeline_node_view, lifeline_node_view_removed};
use crate::result::*;
use crate::{Config, Node, Stats, LIFELINE_NEVER};

const MS: u64 = 1_000_000;

/// One event as a C program would read it: kind, epoch, count, ranks, causes.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Seen {
    kind: u32,
    epoch: u64,
    count: u64,
    ranks: Vec<u32>,
    causes: Option<Vec<u8>>,
}

/// When each rank's process starts: at a time, or never.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Start {
    At(u64),
    Never,
}

struct Cluster {
    cfg: *mut Config,
    starts: Vec<Start>,
    nodes: Vec<*mut Node>,
    /// Frames in flight: (from, to, bytes). A frame to a rank not started yet waits for it (its
    /// launcher has it coming); one to a rank that never starts is lost.
    net: VecDeque<(u32, u32, Vec<u8>)>,
    seen: Vec<Vec<Seen>>,
    now: u64,
    buf: Vec<u8>,
}

impl Cluster {
    /// A cluster of `starts.len()` ranks (radix 2) with check-ins on (unless `!check_in`) and a
    /// start-up timeout of `timeout_ms`; the ranks that start at 0 are made now.
    fn new(starts: &[Start], timeout_ms: u64, check_in: bool) -> Self {
        let span = starts.len() as u32;
        let cfg = lifeline_config_new(span, 2);
        for (key, v) in [
            (c"membership_check_in", u64::from(check_in)),
            (c"membership_check_in_batch_ns", 5 * MS),
            (c"membership_check_in_resend_ns", 40 * MS),
            (c"membership_startup_timeout_ns", timeout_ms * MS),
            (c"xcast_retry_ns", 20 * MS),
        ] {
            // SAFETY: a live config and a NUL-terminated key.
            let r = unsafe { lifeline_config_set(cfg, key.as_ptr(), v) };
            assert_eq!(r, LIFELINE_OK, "{key:?}");
        }
        let mut c = Self {
            cfg,
            starts: starts.to_vec(),
            nodes: vec![null_mut(); starts.len()],
            net: VecDeque::new(),
            seen: vec![Vec::new(); starts.len()],
            now: 0,
            buf: Vec::new(),
        };
        c.start_due();
        c
    }

    fn started(&self, r: u32) -> bool {
        !self.nodes[r as usize].is_null()
    }

    /// Makes the nodes whose start time has come, and brings their links up with the nodes
    /// already there (both ends).
    fn start_due(&mut self) {
        for r in 0..self.nodes.len() as u32 {
            if self.started(r) || self.starts[r as usize] == Start::Never {
                continue;
            }
            if self.starts[r as usize] != Start::At(self.now / MS) {
                continue;
            }
            let mut n = null_mut();
            // SAFETY: a live config and a writable out-pointer.
            let res =
                unsafe { lifeline_node_new(self.cfg, r, 100 + u64::from(r), self.now, &mut n) };
            assert_eq!(res, LIFELINE_OK);
            self.nodes[r as usize] = n;
            if self.buf.is_empty() {
                // SAFETY: a live node.
                self.buf = vec![0; unsafe { lifeline_node_max_frame(n) }];
            }
            for p in 0..self.nodes.len() as u32 {
                if p != r && self.started(p) {
                    // SAFETY: live nodes, used by this thread only.
                    unsafe {
                        assert_eq!(lifeline_node_handle_link_up(n, self.now, p), LIFELINE_OK);
                        assert_eq!(
                            lifeline_node_handle_link_up(self.nodes[p as usize], self.now, r),
                            LIFELINE_OK
                        );
                    }
                }
            }
        }
        for r in 0..self.nodes.len() as u32 {
            self.drain(r);
        }
    }

    /// Drains rank `r`'s transmits onto the network and its events into `seen`.
    fn drain(&mut self, r: u32) {
        let n = self.nodes[r as usize];
        if n.is_null() {
            return;
        }
        let mut t = Transmit::default();
        loop {
            // SAFETY: a live node, `buf` of its length, a writable descriptor.
            let res = unsafe {
                lifeline_node_poll_transmit(n, self.buf.as_mut_ptr(), self.buf.len(), &mut t)
            };
            if res == LIFELINE_DONE {
                break;
            }
            assert_eq!(res, LIFELINE_OK);
            assert!(t.to != r && (t.to as usize) < self.nodes.len());
            self.net.push_back((r, t.to, self.buf[..t.len].to_vec()));
        }
        let mut ev: *const Event = null();
        // SAFETY: a live node and a writable pointer; the event is copied before the next call.
        while unsafe { lifeline_node_poll_event(n, &mut ev) } == LIFELINE_OK {
            // SAFETY: `ev` points to the node's current event; `ranks` (and `causes` when not
            // NULL) to `ranks_len` elements.
            let e = unsafe { &*ev };
            let ranks = if e.ranks_len == 0 {
                assert!(e.ranks.is_null() && e.causes.is_null());
                Vec::new()
            } else {
                // SAFETY: as above.
                unsafe { std::slice::from_raw_parts(e.ranks, e.ranks_len) }.to_vec()
            };
            let causes = (!e.causes.is_null()).then(|| {
                // SAFETY: as above.
                unsafe { std::slice::from_raw_parts(e.causes, e.ranks_len) }.to_vec()
            });
            self.seen[r as usize].push(Seen {
                kind: e.kind,
                epoch: e.epoch,
                count: e.count,
                ranks,
                causes,
            });
        }
    }

    /// One millisecond: start who is due, deliver what is in flight, fire due timers, drain.
    fn step(&mut self) {
        self.now += MS;
        self.start_due();
        for _ in 0..self.net.len() {
            let (from, to, bytes) = self.net.pop_front().unwrap();
            match self.starts[to as usize] {
                Start::Never => continue,
                Start::At(_) if !self.started(to) => {
                    self.net.push_back((from, to, bytes));
                    continue;
                }
                Start::At(_) => {}
            }
            let n = self.nodes[to as usize];
            // SAFETY: a live node and readable bytes.
            let res = unsafe {
                lifeline_node_handle_frame(n, self.now, from, bytes.as_ptr(), bytes.len())
            };
            assert_eq!(res, LIFELINE_OK);
            self.drain(to);
        }
        for r in 0..self.nodes.len() as u32 {
            let n = self.nodes[r as usize];
            if n.is_null() {
                continue;
            }
            // SAFETY: a live node.
            let at = unsafe { lifeline_node_poll_timeout(n) };
            if at != LIFELINE_NEVER && at <= self.now {
                // SAFETY: a live node.
                let res = unsafe { lifeline_node_handle_timeout(n, self.now) };
                assert_eq!(res, LIFELINE_OK);
            }
            self.drain(r);
        }
    }

    /// Steps until every started rank has seen an event of `kind`, then `extra_ms` more (late
    /// duplicates would show); fails after `max_ms`.
    fn run_until_all(&mut self, kind: u32, max_ms: u64, extra_ms: u64) {
        let all = |c: &Self| {
            (0..c.nodes.len() as u32)
                .filter(|&r| c.starts[r as usize] != Start::Never)
                .all(|r| c.started(r) && c.seen[r as usize].iter().any(|e| e.kind == kind))
        };
        while !all(self) {
            assert!(
                self.now < max_ms * MS,
                "not every rank saw event {kind} within {max_ms} ms: {:?}",
                self.seen
            );
            self.step();
        }
        for _ in 0..extra_ms {
            self.step();
        }
    }

    fn of_kind(&self, r: u32, kind: u32) -> Vec<Seen> {
        self.seen[r as usize]
            .iter()
            .filter(|e| e.kind == kind)
            .cloned()
            .collect()
    }

    fn stats(&self, r: u32) -> Stats {
        let mut s = Stats::default();
        // SAFETY: a live node and a writable struct of that size.
        let res =
            unsafe { lifeline_node_stats(self.nodes[r as usize], &mut s, size_of::<Stats>()) };
        assert_eq!(res, LIFELINE_OK);
        s
    }

    /// The agreed view at `r`: (epoch, members, removed).
    fn view(&self, r: u32) -> (u64, u32, Vec<u32>) {
        let n = self.nodes[r as usize];
        let (mut epoch, mut members) = (0, 0);
        let mut removed = vec![0u32; self.nodes.len()];
        let mut len = 0;
        // SAFETY: a live node, writable outputs, `removed` of its length.
        unsafe {
            assert_eq!(lifeline_node_view(n, &mut epoch, &mut members), LIFELINE_OK);
            assert_eq!(
                lifeline_node_view_removed(n, removed.as_mut_ptr(), removed.len(), &mut len),
                LIFELINE_OK
            );
        }
        removed.truncate(len);
        (epoch, members, removed)
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        // SAFETY: each handle is NULL or live, freed once here.
        unsafe {
            for &n in &self.nodes {
                lifeline_node_free(n);
            }
            lifeline_config_free(self.cfg);
        }
    }
}

/// Four ranks, one of them started 30 ms late: every rank sees every rank check in (each once),
/// then exactly one `READY`, at the same epoch everywhere, with all four members; nothing is
/// removed.
#[test]
fn every_rank_checks_in_and_every_member_is_ready_once() {
    let starts = [Start::At(0), Start::At(0), Start::At(0), Start::At(30)];
    let mut c = Cluster::new(&starts, 2_000, true);
    c.run_until_all(LIFELINE_EVENT_READY, 1_000, 200);
    let mut epochs = BTreeSet::new();
    for r in 0..4 {
        let ready = c.of_kind(r, LIFELINE_EVENT_READY);
        assert_eq!(ready.len(), 1, "rank {r}: {:?}", c.seen[r as usize]);
        let ready = &ready[0];
        assert_eq!(ready.count, 4, "rank {r}: members at READY");
        assert!(ready.ranks.is_empty() && ready.causes.is_none());
        epochs.insert(ready.epoch);
        let checked_in = c.of_kind(r, LIFELINE_EVENT_CHECKED_IN);
        assert!(!checked_in.is_empty(), "rank {r}");
        let mut all: Vec<u32> = Vec::new();
        for e in &checked_in {
            assert!(e.causes.is_none(), "rank {r}: {e:?}");
            assert!(e.epoch >= 1 && e.epoch <= ready.epoch, "rank {r}: {e:?}");
            assert!(e.ranks.windows(2).all(|w| w[0] < w[1]), "rank {r}: {e:?}");
            all.extend(&e.ranks);
        }
        all.sort_unstable();
        assert_eq!(all, [0, 1, 2, 3], "rank {r}: each rank checks in once");
        // Rank 3 started after the first batch: a second notice admitted it.
        assert!(checked_in.len() >= 2, "rank {r}: {checked_in:?}");
        // The last notice makes everyone a member.
        assert_eq!(checked_in.last().unwrap().count, 4, "rank {r}");
        assert!(
            c.of_kind(r, LIFELINE_EVENT_STARTUP_INCOMPLETE).is_empty()
                && c.of_kind(r, LIFELINE_EVENT_FAILURE_CONFIRMED).is_empty(),
            "rank {r}: {:?}",
            c.seen[r as usize]
        );
        let (epoch, members, removed) = c.view(r);
        assert_eq!((epoch, members), (ready.epoch, 4), "rank {r}");
        assert!(removed.is_empty());
        let s = c.stats(r);
        assert!(s.startup_check_ins_out >= 1, "rank {r}: {s:?}");
        assert_eq!(
            s.startup_check_in_notices,
            checked_in.len() as u64,
            "rank {r}: {s:?}"
        );
        assert_eq!(s.startup_never_joined_removed, 0);
    }
    assert_eq!(epochs.len(), 1, "READY epochs differ: {epochs:?}");
    // Rank 0 is the coordinator: it heard every check-in and broadcast every notice.
    let s = c.stats(0);
    assert!(s.startup_check_ins_in >= 3, "{s:?}");
    assert_eq!(
        s.startup_check_in_views,
        c.of_kind(0, LIFELINE_EVENT_CHECKED_IN).len() as u64
    );
}

/// Four ranks, rank 3 never starts, a start-up timeout of 300 ms: the three others check in and
/// each reports one `STARTUP_INCOMPLETE` naming rank 3 (cause never joined), at the same epoch,
/// with three members; rank 3 is removed from the view by a view change whose cause is never
/// joined.
#[test]
fn a_rank_that_never_starts_is_named_by_startup_incomplete() {
    let starts = [Start::At(0), Start::At(0), Start::At(0), Start::Never];
    let mut c = Cluster::new(&starts, 300, true);
    c.run_until_all(LIFELINE_EVENT_STARTUP_INCOMPLETE, 2_000, 200);
    assert!(
        c.now >= 300 * MS,
        "start-up completed before its timeout ({} ms)",
        c.now / MS
    );
    let mut epochs = BTreeSet::new();
    for r in 0..3 {
        let inc = c.of_kind(r, LIFELINE_EVENT_STARTUP_INCOMPLETE);
        assert_eq!(inc.len(), 1, "rank {r}: {:?}", c.seen[r as usize]);
        let inc = &inc[0];
        assert_eq!(inc.ranks, [3], "rank {r}: missing");
        assert_eq!(
            inc.causes.as_deref(),
            Some([LIFELINE_CAUSE_NEVER_JOINED].as_slice()),
            "rank {r}"
        );
        assert_eq!(inc.count, 3, "rank {r}: members");
        epochs.insert(inc.epoch);
        assert!(
            c.of_kind(r, LIFELINE_EVENT_READY).is_empty(),
            "rank {r}: READY as well: {:?}",
            c.seen[r as usize]
        );
        let mut checked_in: Vec<u32> = c
            .of_kind(r, LIFELINE_EVENT_CHECKED_IN)
            .iter()
            .flat_map(|e| e.ranks.clone())
            .collect();
        checked_in.sort_unstable();
        assert_eq!(checked_in, [0, 1, 2], "rank {r}");
        // The removal itself is a view change, cause never joined (not a failure), at the
        // same epoch, polled before the start-up's end.
        let removals = c.of_kind(r, LIFELINE_EVENT_FAILURE_CONFIRMED);
        assert_eq!(removals.len(), 1, "rank {r}: {removals:?}");
        assert_eq!(
            (
                removals[0].epoch,
                removals[0].count,
                removals[0].ranks.as_slice()
            ),
            (inc.epoch, 3, [3].as_slice()),
            "rank {r}"
        );
        assert_eq!(removals[0].causes, inc.causes, "rank {r}");
        let pos = |k| c.seen[r as usize].iter().position(|e| e.kind == k);
        assert!(
            pos(LIFELINE_EVENT_FAILURE_CONFIRMED) < pos(LIFELINE_EVENT_STARTUP_INCOMPLETE),
            "rank {r}: {:?}",
            c.seen[r as usize]
        );
        let (epoch, members, removed) = c.view(r);
        assert_eq!((epoch, members), (inc.epoch, 3), "rank {r}");
        assert_eq!(removed, [3], "rank {r}");
    }
    assert_eq!(
        epochs.len(),
        1,
        "STARTUP_INCOMPLETE epochs differ: {epochs:?}"
    );
    assert_eq!(c.stats(0).startup_never_joined_removed, 1);
}

/// With check-ins off (the default) there are no start-up events and no start-up counters.
#[test]
fn check_ins_off_report_no_start_up() {
    let starts = [Start::At(0), Start::At(0), Start::At(0)];
    let mut c = Cluster::new(&starts, 300, false);
    for _ in 0..500 {
        c.step();
    }
    for r in 0..3 {
        assert!(
            c.seen[r as usize].iter().all(|e| ![
                LIFELINE_EVENT_CHECKED_IN,
                LIFELINE_EVENT_READY,
                LIFELINE_EVENT_STARTUP_INCOMPLETE
            ]
            .contains(&e.kind)),
            "rank {r}: {:?}",
            c.seen[r as usize]
        );
        let s = c.stats(r);
        assert_eq!(
            (s.startup_check_ins_out, s.startup_check_in_notices),
            (0, 0),
            "rank {r}"
        );
        assert_eq!(c.view(r), (0, 3, Vec::new()));
    }
}
