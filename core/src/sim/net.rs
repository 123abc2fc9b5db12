//! The simulated network: per-link FIFO timing, links, cuts, partitions and lossy ranks.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use bytes::Bytes;
use smallvec::SmallVec;

use crate::rng::Rng;
use crate::time::{Duration, Instant};
use crate::transmit::Class;

/// Network parameters, all drawn deterministically from the run's seed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NetConfig {
    /// Base one-way latency of every frame.
    pub latency: Duration,
    /// Extra uniform delay in `[0, jitter]` per frame (FIFO order per link is still kept).
    pub jitter: Duration,
    /// After a crash, how long until each linked neighbour sees link-down (an adapter noticing
    /// a reset), and how long a dial to a dead rank takes to fail.
    pub link_down_delay: Duration,
    /// How long a cut link stalls frames before both ends see link-down and the stalled frames
    /// are lost with the connection (TCP_USER_TIMEOUT). A heal sooner delivers them in order.
    pub cut_timeout: Duration,
    /// Retransmission timeout of a frame lost on a lossy link ([`Fault::Lossy`]): a lost
    /// frame arrives this long after it was sent (Linux's `TCP_RTO_MIN`; the links' round trip
    /// is far below it, so the RTO sits at its floor).
    ///
    /// [`Fault::Lossy`]: super::Fault::Lossy
    pub rto_min: Duration,
    /// The retransmission timeout doubles on each consecutive loss of the same frame, up to
    /// this. Far below Linux's 120 s `TCP_RTO_MAX`: the adapters' `TCP_USER_TIMEOUT` (3 s)
    /// would reset such a connection long before; the simulator delays, it never resets, a
    /// lossy link.
    pub rto_max: Duration,
    /// Most retransmissions of one frame (Linux's `tcp_retries2`); the last one always
    /// arrives, so even a link lossy at 100% delivers, late and in order.
    pub max_retransmits: u32,
}

impl Default for NetConfig {
    fn default() -> Self {
        Self {
            latency: Duration::from_micros(50),
            jitter: Duration::from_micros(20),
            link_down_delay: Duration::from_millis(1),
            cut_timeout: Duration::from_millis(500),
            rto_min: Duration::from_millis(200),
            rto_max: Duration::from_millis(1_600),
            max_retransmits: 15,
        }
    }
}

/// A frame stalled on a cut link.
#[derive(Clone, Debug)]
pub(crate) struct Stalled {
    pub(crate) class: Class,
    pub(crate) frame: Bytes,
}

/// Link bookkeeping. Links are undirected connections established on first use (a dial);
/// arrival times are tracked per direction so delivery on each is FIFO.
#[derive(Debug, Default)]
pub(crate) struct Net {
    /// Per directed link, the arrival time of the last frame sent on it.
    last_arrival: BTreeMap<(u32, u32), Instant>,
    /// Established links per node (both ends record the peer).
    adj: Vec<SmallVec<[u32; 4]>>,
    /// Directed cuts: frames from .0 to .1 stall.
    cuts: BTreeSet<(u32, u32)>,
    /// Partition group per node (absent: group 0); frames across groups stall.
    groups: BTreeMap<u32, u32>,
    /// Frames stalled per directed link, in send order.
    pub(crate) stalled: BTreeMap<(u32, u32), VecDeque<Stalled>>,
    /// Generation per cut, so a timeout for a cut since healed is ignored.
    pub(crate) cut_gen: u64,
    /// Lossy ranks: every link to and from the rank loses each frame (each transmission of
    /// it) with this percentage, for frames sent before this time.
    lossy: BTreeMap<u32, (u32, Instant)>,
    /// Directed refusals: dials from .0 to .1 are refused although .1 is alive (an overloaded
    /// dialer, a full accept queue); dials the other way succeed.
    refused: BTreeSet<(u32, u32)>,
}

impl Net {
    pub(crate) fn with_nodes(n: usize) -> Self {
        Self {
            adj: vec![SmallVec::new(); n],
            ..Self::default()
        }
    }

    pub(crate) fn grow(&mut self, n: usize) {
        if self.adj.len() < n {
            self.adj.resize(n, SmallVec::new());
        }
    }

    pub(crate) fn linked(&self, a: u32, b: u32) -> bool {
        self.adj.get(a as usize).is_some_and(|v| v.contains(&b))
    }

    /// Records an established link; returns whether it is new.
    pub(crate) fn link(&mut self, a: u32, b: u32) -> bool {
        if self.linked(a, b) {
            return false;
        }
        self.adj[a as usize].push(b);
        self.adj[b as usize].push(a);
        true
    }

    /// Forgets a link (both directions' FIFO state too); returns whether it existed.
    pub(crate) fn unlink(&mut self, a: u32, b: u32) -> bool {
        if !self.linked(a, b) {
            return false;
        }
        self.adj[a as usize].retain(|x| *x != b);
        self.adj[b as usize].retain(|x| *x != a);
        self.last_arrival.remove(&(a, b));
        self.last_arrival.remove(&(b, a));
        true
    }

    /// Peers linked to `a`.
    pub(crate) fn peers(&self, a: u32) -> SmallVec<[u32; 4]> {
        self.adj.get(a as usize).cloned().unwrap_or_default()
    }

    /// Whether frames from `a` to `b` are currently blocked.
    pub(crate) fn blocked(&self, a: u32, b: u32) -> bool {
        self.cuts.contains(&(a, b))
            || self.groups.get(&a).copied().unwrap_or(0)
                != self.groups.get(&b).copied().unwrap_or(0)
    }

    /// Makes every link to and from `r` lossy at `pct` percent (clamped to 100; 0 makes it
    /// clean) for frames sent before `until`.
    pub(crate) fn set_lossy(&mut self, r: u32, pct: u32, until: Instant) {
        if pct == 0 {
            self.lossy.remove(&r);
        } else {
            self.lossy.insert(r, (pct.min(100), until));
        }
    }

    /// The loss percentage of a frame sent at `now` from `a` to `b`: the higher of its ends'.
    pub(crate) fn loss_pct(&self, now: Instant, a: u32, b: u32) -> u32 {
        [a, b]
            .iter()
            .filter_map(|r| self.lossy.get(r))
            .filter(|(_, until)| now < *until)
            .map(|(pct, _)| *pct)
            .max()
            .unwrap_or(0)
    }

    /// How many transmissions of one frame are lost at `pct` percent, and the delay they add:
    /// TCP's retransmission timeout, from `rto_min`, doubling on each consecutive loss up to
    /// `rto_max`, at most `max_retransmits` times.
    pub(crate) fn retransmissions(cfg: &NetConfig, rng: &mut Rng, pct: u32) -> (u32, Duration) {
        let (mut lost, mut delay, mut rto) = (0u32, Duration::ZERO, cfg.rto_min);
        while lost < cfg.max_retransmits && rng.below(100) < u64::from(pct) {
            lost += 1;
            delay = delay + rto;
            rto = rto.saturating_mul(2).min(cfg.rto_max);
        }
        (lost, delay)
    }

    /// Arrival time of a frame sent now from `a` to `b`: latency, jitter and `extra` (its
    /// retransmissions), never before the previous frame on the same directed link (so later
    /// frames wait behind a lost one, in order: TCP's head-of-line blocking).
    pub(crate) fn arrival(
        &mut self,
        cfg: &NetConfig,
        rng: &mut Rng,
        now: Instant,
        (a, b): (u32, u32),
        extra: Duration,
    ) -> Instant {
        let jitter = Duration::from_nanos(rng.below(cfg.jitter.as_nanos() + 1));
        let mut at = now + cfg.latency + jitter + extra;
        let last = self.last_arrival.entry((a, b)).or_insert(Instant::ZERO);
        if at < *last {
            at = *last;
        }
        *last = at;
        at
    }

    /// Dials from `a` to `b` are refused from now on (until the heal).
    pub(crate) fn refuse(&mut self, a: u32, b: u32) {
        self.refused.insert((a, b));
    }

    /// Whether a dial from `a` to `b` is refused while `b` is alive.
    pub(crate) fn refuses(&self, a: u32, b: u32) -> bool {
        self.refused.contains(&(a, b))
    }

    pub(crate) fn cut(&mut self, a: u32, b: u32) {
        self.cuts.insert((a, b));
    }

    pub(crate) fn set_group(&mut self, a: u32, g: u32) {
        if g == 0 {
            self.groups.remove(&a);
        } else {
            self.groups.insert(a, g);
        }
    }

    /// Removes every cut, partition and refusal; returns the stalled frames to re-send, per
    /// link, in order.
    pub(crate) fn heal(&mut self) -> BTreeMap<(u32, u32), VecDeque<Stalled>> {
        self.cuts.clear();
        self.refused.clear();
        self.groups.clear();
        self.cut_gen += 1;
        std::mem::take(&mut self.stalled)
    }
}
