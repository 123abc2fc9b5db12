//! Xcast through real nodes in the simulator: the basic contract.

use bytes::Bytes;

use super::{XcastError, XcastEvent};
use crate::event::Event;
use crate::sim::{Fault, Observer, Sim, SimConfig, World};
use crate::time::{Duration, Instant};
use crate::tree::Rank;

/// Records deliveries and completions.
#[derive(Default)]
struct Log {
    /// (rank, op, origin, seq)
    delivered: Vec<(u32, u64, u32, u64)>,
    /// (rank, op, seq)
    completed: Vec<(u32, u64, u64)>,
    root_completed: Vec<(u32, u64)>,
}

impl Observer for Log {
    fn on_event(&mut self, _w: &World, rank: Rank, e: &Event) {
        match e {
            Event::Xcast(XcastEvent::Delivered {
                op, origin, seq, ..
            }) => self.delivered.push((rank.0, *op, origin.0, *seq)),
            Event::Xcast(XcastEvent::Completed { op, seq }) => {
                self.completed.push((rank.0, *op, *seq))
            }
            Event::Xcast(XcastEvent::RootCompleted { op, .. }) => {
                self.root_completed.push((rank.0, *op))
            }
            _ => {}
        }
    }
}

fn sim(span: u32, radix: u32, seed: u64) -> Sim<Log> {
    Sim::new(SimConfig::new(span, radix, seed), Log::default()).unwrap()
}

fn xcast(s: &mut Sim<Log>, from: u32, tag: u16) -> u64 {
    s.command(Rank(from), |n, now| {
        n.xcast(now, tag, Bytes::from_static(b"op"))
    })
    .unwrap()
    .unwrap()
}

fn ms(x: u64) -> Instant {
    Instant::ZERO + Duration::from_millis(x)
}

#[test]
fn root_op_costs_two_frames_per_edge_and_completes_once() {
    for (n, k) in [(2, 2), (9, 2), (100, 3), (300, 64)] {
        let mut s = sim(n, k, 1);
        let seq = xcast(&mut s, 0, 16);
        s.run_until_quiet(100_000).unwrap();
        assert_eq!(
            s.world().stats().frames_delivered,
            2 * (n as u64 - 1),
            "n={n}"
        );
        let mut ranks: Vec<u32> = s.observer().delivered.iter().map(|d| d.0).collect();
        ranks.sort_unstable();
        assert_eq!(ranks, (0..n).collect::<Vec<_>>());
        assert_eq!(s.observer().completed, [(0, 1, seq)]);
        assert_eq!(s.observer().root_completed, [(0, 1)]);
        // The root holds nothing; the others keep the last op's payload (for root failover)
        // until the global watermark reaches them on the next forward.
        assert_eq!(s.world().node(Rank(0)).unwrap().pending_state(), 0);
        for r in 1..n {
            assert_eq!(
                s.world().node(Rank(r)).unwrap().pending_state(),
                1,
                "rank {r}"
            );
        }
        let seq2 = xcast(&mut s, 0, 16);
        s.run_until_quiet(100_000).unwrap();
        assert_eq!(seq2, seq + 1);
        for r in 1..n {
            let (delivered, gdone) = s.world().node(Rank(r)).unwrap().xcast_watermarks();
            assert_eq!((delivered, gdone), (2, 1), "rank {r}");
            assert_eq!(
                s.world().node(Rank(r)).unwrap().pending_state(),
                1,
                "op 1 released at {r}"
            );
        }
    }
}

#[test]
fn any_rank_originates_and_the_origin_hears_completion() {
    let mut s = sim(40, 3, 2);
    let a = xcast(&mut s, 39, 16);
    let b = xcast(&mut s, 17, 20);
    let c = xcast(&mut s, 39, 16);
    s.run_until_quiet(100_000).unwrap();
    let log = s.observer();
    for r in 0..40 {
        let mine: Vec<(u64, u32, u64)> = log
            .delivered
            .iter()
            .filter(|d| d.0 == r)
            .map(|d| (d.1, d.2, d.3))
            .collect();
        assert_eq!(mine.len(), 3, "rank {r}");
        assert!(
            mine.windows(2).all(|w| w[0].0 < w[1].0),
            "in op order at {r}"
        );
        assert!(mine.iter().any(|m| m.1 == 39 && m.2 == a));
        assert!(mine.iter().any(|m| m.1 == 17 && m.2 == b));
        assert!(mine.iter().any(|m| m.1 == 39 && m.2 == c));
    }
    let mut done: Vec<(u32, u64)> = log.completed.iter().map(|c| (c.0, c.2)).collect();
    done.sort_unstable();
    assert_eq!(done, [(17, b), (39, a), (39, c)]);
}

#[test]
fn reserved_tags_and_backpressure_are_errors() {
    let mut s = sim(3, 2, 3);
    let r = s
        .command(Rank(1), |n, now| n.xcast(now, 0, Bytes::new()))
        .unwrap();
    assert!(matches!(
        r,
        Err(crate::CommandError::Xcast(XcastError::ReservedTag(0)))
    ));
    let mut cfg = SimConfig::new(3, 2, 3);
    cfg.node.xcast.max_inflight = 2;
    let mut s = Sim::new(cfg, Log::default()).unwrap();
    xcast(&mut s, 1, 16);
    xcast(&mut s, 1, 16);
    let r = s
        .command(Rank(1), |n, now| n.xcast(now, 16, Bytes::new()))
        .unwrap();
    assert!(matches!(
        r,
        Err(crate::CommandError::Xcast(XcastError::Backpressure {
            ops: 2,
            ..
        }))
    ));
    s.run_until_quiet(10_000).unwrap();
    assert!(s
        .command(Rank(1), |n, now| n.xcast(now, 16, Bytes::new()))
        .unwrap()
        .is_ok());
}

#[test]
fn interior_crash_mid_stream_delivers_once_everywhere() {
    let mut s = sim(15, 2, 4);
    let mut seqs = Vec::new();
    for i in 0..5 {
        seqs.push(xcast(&mut s, 14 - i, 16));
        s.run_until(Instant::from_nanos(30_000 * (i as u64 + 1)))
            .unwrap();
        if i == 1 {
            s.apply(Fault::Crash(Rank(1)));
        }
    }
    s.run_until(ms(2_000)).unwrap();
    let log = s.observer();
    for r in (0..15).filter(|&r| r != 1) {
        let mine: Vec<u64> = log
            .delivered
            .iter()
            .filter(|d| d.0 == r)
            .map(|d| d.1)
            .collect();
        assert!(
            mine.windows(2).all(|w| w[0] < w[1]),
            "order at {r}: {mine:?}"
        );
        let origins: Vec<(u32, u64)> = log
            .delivered
            .iter()
            .filter(|d| d.0 == r)
            .map(|d| (d.2, d.3))
            .collect();
        for i in 0..5u32 {
            let count = origins.iter().filter(|o| o.0 == 14 - i).count();
            assert_eq!(
                count,
                1,
                "rank {r} delivered origin {}'s op {count} times",
                14 - i
            );
        }
    }
    let mut done: Vec<u32> = log.completed.iter().map(|c| c.0).collect();
    done.sort_unstable();
    assert_eq!(
        done,
        [10, 11, 12, 13, 14],
        "every origin hears completion once"
    );
    for r in (0..15).filter(|&r| r != 1) {
        let n = s.world().node(Rank(r)).unwrap();
        assert!(n.tree().dead().contains(Rank(1)), "rank {r} learned of 1");
    }
}
