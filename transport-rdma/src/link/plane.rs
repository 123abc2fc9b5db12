//! The node's data plane: one [`Verbs`] value (one port, one shared completion queue) and the
//! [`Channel`] of every data link, behind one mutex that is never held across an `.await`.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use bytes::Bytes;
use lifeline_core::Instant;
use tokio::sync::Notify;

use crate::channel::{
    Buffers, Channel, ChannelConfig, DownCause, QpDetails, SendError, SetupError,
};
use crate::verbs::{Completion, Verbs};

/// Counters of the data plane (for tests and diagnostics).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PlaneStats {
    /// Channels opened (one per data link set up, including reconnects).
    pub opened: u64,
    /// Completions for a queue pair this plane no longer knows (destroyed): dropped.
    pub unknown_completions: u64,
    /// Times a frame was held back because the channel answered `WouldBlock` (back-pressure).
    pub would_block: u64,
    /// Frames refused by the channel as too large: dropped and counted (the driver checks
    /// `max_frame` first, so this stays 0 when both are configured alike).
    pub dropped_too_large: u64,
    /// `poll_cq` calls that failed.
    pub poll_errors: u64,
    /// Most frames ever held between the driver's send queue and a channel.
    pub max_held: usize,
    /// Registered buffers reused for a new channel instead of registering new memory.
    pub buffers_reused: u64,
    /// Completion-channel notifications taken (each after a wait on the channel's descriptor).
    pub cq_events: u64,
    /// Arming or reading the completion channel failed (the sweep tick still polls).
    pub cq_event_errors: u64,
    /// Completions handled (all channels, all statuses).
    pub completions: u64,
    /// Frames handed to a channel (accepted for sending over a queue pair).
    pub frames_sent: u64,
    /// Frames received over a queue pair and handed to the driver.
    pub frames_received: u64,
}

impl PlaneStats {
    /// `(name, value)` pairs, for printing (`lifeline node`'s `stats` answer).
    pub fn fields(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("opened", self.opened),
            ("frames_sent", self.frames_sent),
            ("frames_received", self.frames_received),
            ("would_block", self.would_block),
            ("max_held", self.max_held as u64),
            ("completions", self.completions),
            ("cq_events", self.cq_events),
            ("cq_event_errors", self.cq_event_errors),
            ("poll_errors", self.poll_errors),
            ("unknown_completions", self.unknown_completions),
            ("dropped_too_large", self.dropped_too_large),
            ("buffers_reused", self.buffers_reused),
        ]
    }
}

struct Entry {
    ch: Channel,
    /// False once its link task is gone: reclaimed when drained.
    owned: bool,
    /// Wakes the link task: notified whenever a completion for this channel is handled (by
    /// whichever task drained the shared queue).
    wake: Arc<Notify>,
}

struct Inner<V> {
    verbs: V,
    cfg: ChannelConfig,
    links: BTreeMap<u32, Entry>,
    spare: Vec<Buffers>,
    stats: PlaneStats,
    rng: u64,
}

/// What one step of a link's channel produced.
#[derive(Debug, Default)]
pub(crate) struct Step {
    /// Frames received, in order.
    pub(crate) frames: Vec<Bytes>,
    /// The channel went down (once).
    pub(crate) down: Option<DownCause>,
}

/// The shared data plane of one node.
pub(crate) struct Plane<V> {
    inner: Mutex<Inner<V>>,
}

impl<V: Verbs> Plane<V> {
    pub(crate) fn new(verbs: V, cfg: ChannelConfig, seed: u64) -> Self {
        Self {
            inner: Mutex::new(Inner {
                verbs,
                cfg,
                links: BTreeMap::new(),
                spare: Vec::new(),
                stats: PlaneStats::default(),
                rng: seed ^ 0x2545_f491_4f6c_dd1d,
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner<V>> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn stats(&self) -> PlaneStats {
        self.lock().stats
    }

    /// Channels this plane holds (live ones and those still draining).
    pub(crate) fn channels(&self) -> usize {
        self.lock().links.len()
    }

    /// A waiter on the completion channel, armed: it becomes readable when the next
    /// completion arrives. `None`: the verbs have no completion channel (or it failed;
    /// counted), so the caller polls on its tick.
    pub(crate) fn waiter(&self) -> Option<super::CompletionWaiter> {
        let mut g = self.lock();
        match super::CompletionWaiter::new(&g.verbs) {
            Ok(Some(w)) if g.verbs.arm_cq().is_ok() => Some(w),
            Ok(_) => None,
            Err(_) => {
                g.stats.cq_event_errors += 1;
                None
            }
        }
    }

    /// The completion channel's descriptor became readable: takes its events, re-arms it,
    /// then drains the completion queue into the channels (waking their link tasks). Arming
    /// before polling means a completion that lands after the poll notifies again.
    pub(crate) fn on_cq_event(&self, now: Instant) {
        let mut g = self.lock();
        let inner = &mut *g;
        match inner.verbs.take_cq_events() {
            Ok(n) => inner.stats.cq_events += u64::from(n),
            Err(_) => inner.stats.cq_event_errors += 1,
        }
        if inner.verbs.arm_cq().is_err() {
            inner.stats.cq_event_errors += 1;
        }
        inner.poll(now, None);
    }

    /// Opens a new channel (queue pair in INIT, receives posted) with a fresh PSN; returns its
    /// `qpn`, the details to send to the peer, and the notifier that wakes its link task.
    pub(crate) fn open(&self) -> Result<(u32, QpDetails, Arc<Notify>), SetupError> {
        let mut g = self.lock();
        let inner = &mut *g;
        inner.poll(Instant::ZERO, None);
        let bufs = match inner.spare.pop() {
            Some(b) => {
                inner.stats.buffers_reused += 1;
                b
            }
            None => Buffers::register(&mut inner.verbs, inner.cfg)?,
        };
        // xorshift64*: a fresh 24-bit PSN per queue pair.
        inner.rng ^= inner.rng << 13;
        inner.rng ^= inner.rng >> 7;
        inner.rng ^= inner.rng << 17;
        let psn = (inner.rng.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 40) as u32;
        let ch = Channel::open(&mut inner.verbs, bufs, psn)?;
        let (qpn, local) = (ch.qpn(), ch.local(&inner.verbs));
        let wake = Arc::new(Notify::new());
        inner.links.insert(
            qpn,
            Entry {
                ch,
                owned: true,
                wake: wake.clone(),
            },
        );
        inner.stats.opened += 1;
        Ok((qpn, local, wake))
    }

    /// Connects channel `qpn` to the peer's details (RTR, RTS).
    pub(crate) fn connect(&self, qpn: u32, peer: &QpDetails) -> Result<(), SetupError> {
        let mut g = self.lock();
        let inner = &mut *g;
        let e = inner
            .links
            .get_mut(&qpn)
            .ok_or(SetupError::AlreadyConnected)?;
        e.ch.connect(&mut inner.verbs, peer)
    }

    /// Polls the shared completion queue, then moves frames of channel `qpn`: as many of
    /// `held` as the channel accepts (the rest stay in `held`, in order: back-pressure), posts
    /// what credit allows, and takes what was received.
    pub(crate) fn step(&self, now: Instant, qpn: u32, held: &mut VecDeque<Bytes>) -> Step {
        let mut g = self.lock();
        let inner = &mut *g;
        inner.stats.max_held = inner.stats.max_held.max(held.len());
        inner.poll(now, Some(qpn));
        let mut out = Step::default();
        let Some(e) = inner.links.get_mut(&qpn) else {
            out.down = Some(DownCause::Closed);
            return out;
        };
        let ch = &mut e.ch;
        while let Some(f) = held.pop_front() {
            match ch.send(f) {
                Ok(_) => inner.stats.frames_sent += 1,
                Err(SendError::TooLarge(_)) => inner.stats.dropped_too_large += 1,
                Err(SendError::WouldBlock(f)) => {
                    inner.stats.would_block += 1;
                    held.push_front(f);
                    break;
                }
                Err(SendError::Down(f) | SendError::NotConnected(f)) => {
                    held.push_front(f);
                    break;
                }
            }
        }
        ch.poll_transmit(now, &mut inner.verbs);
        while let Some(f) = ch.poll_frame(now, &mut inner.verbs) {
            out.frames.push(f);
        }
        inner.stats.frames_received += out.frames.len() as u64;
        ch.poll_transmit(now, &mut inner.verbs);
        if let Some(crate::channel::ChannelEvent::LinkDown { cause, .. }) = ch.poll_event() {
            out.down = Some(cause);
        }
        out
    }

    /// The link task of channel `qpn` is gone: take the channel down (if it is not already)
    /// and reclaim it once its flushes have returned every slot.
    pub(crate) fn release(&self, now: Instant, qpn: u32) {
        let mut g = self.lock();
        let inner = &mut *g;
        if let Some(e) = inner.links.get_mut(&qpn) {
            e.ch.close(now, &mut inner.verbs);
            e.owned = false;
        }
        inner.poll(now, None);
    }
}

impl<V: Verbs> Inner<V> {
    /// Drains the completion queue into the channels (dropping unknown `qpn`s), then reclaims
    /// released channels that have drained: their queue pairs are destroyed and their
    /// registered buffers kept for the next channel.
    fn poll(&mut self, now: Instant, stepping: Option<u32>) {
        let mut buf = [Completion::EMPTY; 64];
        let mut touched = BTreeSet::new();
        loop {
            // A failed poll leaves nothing to dispatch (counted); every channel's next post or
            // the control connection surfaces a dead device.
            let n = self.verbs.poll_cq(&mut buf).unwrap_or_else(|_| {
                self.stats.poll_errors += 1;
                0
            });
            self.stats.completions += n as u64;
            for c in &buf[..n] {
                match self.links.get_mut(&c.qpn) {
                    Some(e) => {
                        e.ch.handle_completion(now, &mut self.verbs, c);
                        touched.insert(c.qpn);
                    }
                    None => self.stats.unknown_completions += 1,
                }
            }
            if n < buf.len() {
                break;
            }
        }
        // A completion may free credit, a slot or deliver a frame: its link task must step
        // (`notify_one` keeps a permit when the task is not waiting yet), except the one
        // stepping now, which handles its own channel next.
        for qpn in touched.into_iter().filter(|q| Some(*q) != stepping) {
            if let Some(e) = self.links.get(&qpn) {
                e.wake.notify_one();
            }
        }
        let done: Vec<u32> = self
            .links
            .iter()
            .filter(|(_, e)| !e.owned && e.ch.is_drained())
            .map(|(q, _)| *q)
            .collect();
        for qpn in done {
            let Some(e) = self.links.remove(&qpn) else {
                continue;
            };
            // Events of a released channel are consequences of its release: dropped.
            match e.ch.into_buffers(&mut self.verbs) {
                Ok(b) => self.spare.push(b),
                Err(ch) => {
                    self.links.insert(
                        qpn,
                        Entry {
                            ch: *ch,
                            owned: false,
                            wake: e.wake,
                        },
                    );
                }
            }
        }
    }
}
