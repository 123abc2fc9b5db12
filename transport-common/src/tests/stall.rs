//! An application that stops reading its outputs: the driver back-pressures the data class
//! (it stops reading data-class frames, so the xcast and RELM windows hold the senders back)
//! while control frames and timers keep running, and drops nothing.
//!
//! `a_stalled_application_loses_no_delivery_10s` is issue #21's Done-when for the driver: an
//! application that stops draining for 10 s under a steady stream of xcasts and RELM messages
//! loses no delivered event, receives each exactly once afterwards, and nobody is removed
//! (heartbeat detector on).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use lifeline_core::relm::Uid;
use lifeline_core::tree::Rank;
use lifeline_core::{Config, Event, RelmEvent, XcastEvent};
use tokio::sync::mpsc;

use super::cluster_with;
use crate::{DriverConfig, Handle, Output, RunningNode, TransportError};

/// The stalled application's channel, and as many outputs again waiting in the driver.
const OUTPUT_BUFFER: usize = 32;
/// The xcast and RELM windows (`xcast.max_inflight`, `relm.window`).
const WINDOW: usize = 64;
/// The rank whose application stalls (a leaf: rank 0 is the root, 1 its other child).
const STALLED: Rank = Rank(2);

/// What one sender's commands got: the accepted xcasts' seqs and RELM uids, and refusals.
#[derive(Debug, Default)]
struct Sent {
    xcasts: Vec<u64>,
    relms: Vec<Uid>,
    refused: u64,
}

/// Alternates an xcast and a RELM message to `dst` every 2 ms until `stop`.
async fn send_until(h: Handle, dst: Rank, stop: Arc<AtomicBool>) -> Sent {
    let mut sent = Sent::default();
    let mut i = 0u64;
    while !stop.load(Ordering::Relaxed) {
        i += 1;
        let payload = Bytes::from(format!("{}:{i}", h.rank().0));
        let ok = if i % 2 == 0 {
            h.xcast(16, payload).await.map(|seq| sent.xcasts.push(seq))
        } else {
            h.command(move |n, now| n.relm_send(now, dst, 16, payload))
                .await
                .and_then(|r| r.map_err(TransportError::from))
                .map(|uid| sent.relms.push(uid))
        };
        match ok {
            Ok(()) => {}
            Err(TransportError::Stopped) => panic!("rank {} stopped", h.rank()),
            Err(_) => sent.refused += 1,
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    sent
}

/// Every output of `rx` until it closes.
async fn collect(mut rx: mpsc::Receiver<Output>) -> Vec<Output> {
    let mut all = Vec::new();
    while let Some(o) = rx.recv().await {
        all.push(o);
    }
    all
}

/// How often each (origin, seq) xcast and each (source, uid) RELM message was delivered.
#[derive(Debug, Default)]
struct Delivered {
    xcasts: BTreeMap<(Rank, u64), u32>,
    relms: BTreeMap<(Rank, Uid), u32>,
    /// The seqs of this rank's own xcasts that completed, in order.
    completed: Vec<u64>,
}

impl Delivered {
    fn add(&mut self, o: &Output) {
        match o.event() {
            Some(Event::Xcast(XcastEvent::Delivered { origin, seq, .. })) => {
                *self.xcasts.entry((*origin, *seq)).or_default() += 1;
            }
            Some(Event::Relm(RelmEvent::Delivered { src, uid, .. })) => {
                *self.relms.entry((*src, *uid)).or_default() += 1;
            }
            Some(Event::Xcast(XcastEvent::Completed { seq, .. })) => self.completed.push(*seq),
            _ => {}
        }
    }

    /// Whether every xcast of `sent` and every RELM message of `sent` to `me` is here.
    fn covers(&self, me: Rank, sent: &[(Rank, Rank, Sent)]) -> bool {
        sent.iter().all(|(r, dst, s)| {
            s.xcasts.iter().all(|q| self.xcasts.contains_key(&(*r, *q)))
                && (*dst != me || s.relms.iter().all(|u| self.relms.contains_key(&(*r, *u))))
        })
    }

    /// Each xcast of `sent` and each RELM message of `sent` to `me` once, and nothing else.
    fn check_once(&self, me: Rank, sent: &[(Rank, Rank, Sent)]) {
        let dup_x: Vec<_> = self.xcasts.iter().filter(|(_, &n)| n != 1).collect();
        let dup_r: Vec<_> = self.relms.iter().filter(|(_, &n)| n != 1).collect();
        assert!(
            dup_x.is_empty() && dup_r.is_empty(),
            "at {me}: {dup_x:?} {dup_r:?}"
        );
        assert!(self.covers(me, sent), "at {me}: a message is missing");
        let xcasts: usize = sent.iter().map(|(_, _, s)| s.xcasts.len()).sum();
        let relms: usize = sent
            .iter()
            .filter(|(_, d, _)| *d == me)
            .map(|(_, _, s)| s.relms.len())
            .sum();
        assert_eq!(
            (self.xcasts.len(), self.relms.len()),
            (xcasts, relms),
            "at {me}: delivered something never accepted"
        );
    }
}

/// A removal or a lost link, which a stalled reader must never cause.
fn trouble(o: &Output) -> bool {
    matches!(o, Output::LinkDown { .. }) || matches!(o.event(), Some(Event::Membership(_)))
}

/// Three ranks, the detector on; ranks 0 and 1 send xcasts and RELM messages to rank 2 while
/// rank 2's application reads nothing for `stall`, then reads everything.
async fn stalled_application(stall: Duration) {
    let cfg = DriverConfig {
        output_buffer: OUTPUT_BUFFER,
        ..DriverConfig::default()
    };
    let nodes = cluster_with(3, &[0, 1, 2], &cfg, |c: &mut Config| {
        c.xcast.max_inflight = WINDOW;
        c.relm.window = WINDOW;
        c.detect.enabled = true;
        // The default 300 ms silence timeout, with room for a 2-core machine running other
        // tests: a stalled reader must not slow heartbeats at all, so any removal fails.
        c.detect.timeout = Duration::from_millis(1_000).into();
        c.detect.refute = Duration::from_millis(500).into();
    });
    let mut handles = Vec::new();
    let mut readers = Vec::new();
    let mut stalled_rx = None;
    for RunningNode {
        handle, outputs, ..
    } in nodes
    {
        if handle.rank() == STALLED {
            stalled_rx = Some(outputs);
        } else {
            readers.push(tokio::spawn(collect(outputs)));
        }
        handles.push(handle);
    }
    let mut rx = stalled_rx.expect("the stalled rank");
    // Every link is up before the load starts (the tree: 0-1 and 0-2).
    tokio::time::sleep(Duration::from_millis(300)).await;
    let stop = Arc::new(AtomicBool::new(false));
    // Ranks 0 and 1 send to rank 2; rank 2's application goes on sending (to rank 0) while it
    // reads nothing, so its own completions and acknowledgements arrive on control frames.
    let dst = |r: usize| if r == 2 { Rank(0) } else { STALLED };
    let senders: Vec<_> = handles
        .iter()
        .enumerate()
        .map(|(r, h)| tokio::spawn(send_until(h.clone(), dst(r), stop.clone())))
        .collect();

    // The stall: rank 2's application reads nothing.
    tokio::time::sleep(stall).await;
    let s = handles[2].stats();
    assert!(s.output_stalls >= 1, "the outputs never filled: {s:?}");
    stop.store(true, Ordering::Relaxed);
    let mut sent = Vec::new();
    for (r, t) in senders.into_iter().enumerate() {
        sent.push((Rank(r as u32), dst(r), t.await.expect("sender")));
    }
    let refused: u64 = sent.iter().map(|(_, _, s)| s.refused).sum();
    assert!(refused > 0, "the windows never pushed back: {sent:?}");

    // It reads again: every accepted message arrives, each exactly once.
    let mut got = Delivered::default();
    let mut seen = Vec::new();
    let all = tokio::time::timeout(Duration::from_secs(30), async {
        while !got.covers(STALLED, &sent) || got.completed.len() < sent[2].2.xcasts.len() {
            let o = rx.recv().await.expect("rank 2 runs");
            got.add(&o);
            seen.push(o);
        }
    })
    .await;
    // A late duplicate would come within this.
    while let Ok(Some(o)) = tokio::time::timeout(Duration::from_millis(300), rx.recv()).await {
        got.add(&o);
        seen.push(o);
    }
    assert!(
        all.is_ok(),
        "not every accepted message reached rank 2: {sent:?}, {got:?}"
    );
    got.check_once(STALLED, &sent);
    let (own, _, mine) = &sent[2];
    assert!(
        sent.iter()
            .all(|(_, _, s)| !s.xcasts.is_empty() && !s.relms.is_empty()),
        "{sent:?}"
    );
    // Rank 2's own xcasts completed, each once.
    assert_eq!(got.completed, mine.xcasts, "rank {own}'s completions");

    // Nobody was removed and no link went down, anywhere; nobody even suspected anyone: the
    // stalled rank went on reading heartbeats (control frames) too.
    for h in &handles {
        let (alive, suspicions) = h
            .inspect(|n| {
                let alive = (0..3).all(|r| n.tree().is_alive(Rank(r)));
                (alive, n.stats().detect.suspicions)
            })
            .await
            .expect("running");
        assert!(alive, "rank {} presumes someone dead", h.rank());
        assert_eq!(suspicions, 0, "rank {} suspected someone", h.rank());
    }
    let s = handles[2].stats();
    assert!(seen.iter().all(|o| !trouble(o)), "{s:?}");
    // Nothing was dropped, and what waited in the driver stayed within the windows: the data
    // stream itself was held back.
    assert!(
        s.outputs_peak as usize <= OUTPUT_BUFFER + 4 * WINDOW,
        "{s:?}"
    );
    for h in &handles {
        h.shutdown().await;
    }
    for (r, reader) in readers.into_iter().enumerate() {
        let outs = reader.await.expect("reader");
        assert!(outs.iter().all(|o| !trouble(o)), "{outs:?}");
        let mut got = Delivered::default();
        outs.iter().for_each(|o| got.add(o));
        got.check_once(Rank(r as u32), &sent);
    }
}

/// Issue #21's Done-when: a 10 s stall under load (it takes about 11 s).
#[tokio::test]
async fn a_stalled_application_loses_no_delivery_10s() {
    stalled_application(Duration::from_secs(10)).await;
}
