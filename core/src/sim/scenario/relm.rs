//! The RELM scenario: a heavy all-to-all stream of reliable messages while relays crash, checked
//! message by message against the application's view (what was sent, delivered, acknowledged
//! and reported failed) and for leaks once traffic settles.

use std::collections::BTreeMap;

use bytes::Bytes;

use crate::event::Event;
use crate::relm::{RelmError, RelmEvent, Uid};
use crate::rng::Rng;
use crate::sim::{Fault, Hooks, Observer, Sim, SimConfig, SimFailure, World};
use crate::time::{Duration, Instant};
use crate::tree::{Rank, RankSet, Route};
use crate::CommandError;

/// Parameters of a RELM run.
#[derive(Clone, Debug, PartialEq)]
pub struct RelmParams {
    /// Number of ranks.
    pub ranks: u32,
    /// Tree radix.
    pub radix: u32,
    /// Messages to send (all-to-all: each from a live rank to another live rank).
    pub messages: u32,
    /// Fraction of ranks to crash while the stream runs (0 for none; at most 0.5). With
    /// crashes, the run also freezes two ranks for a few milliseconds (SIGSTOP, then SIGCONT)
    /// and stalls two links for a few milliseconds (healed before the link timeout), so
    /// frames arrive late and in bursts as on a loaded network.
    pub crash: f64,
    /// The run's seed.
    pub seed: u64,
    /// Send everything at once (every message in flight together) instead of spreading the
    /// stream over time.
    pub burst: bool,
}

impl RelmParams {
    /// The command that replays this run exactly.
    pub fn replay_command(&self) -> String {
        format!(
            "cargo run --release -p lifeline-cli -- sim relm --ranks {} --radix {} --messages {} --crash {} --seed {}{} --trace",
            self.ranks,
            self.radix,
            self.messages,
            self.crash,
            self.seed,
            if self.burst { " --burst" } else { "" }
        )
    }
}

/// What a RELM run measured.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RelmReport {
    /// Ranks at the start.
    pub ranks: u32,
    /// Messages accepted by `relm_send`.
    pub messages: u64,
    /// Ranks crashed.
    pub crashed: u32,
    /// Deliveries (every one, duplicates included).
    pub delivered: u64,
    /// Deliveries of a message already delivered.
    pub duplicates: u64,
    /// Deliveries that were not the successor of the chain's previous delivery.
    pub out_of_order: u64,
    /// Messages between two survivors never delivered, or delivered but never acknowledged.
    pub lost: u64,
    /// Messages to a rank that died, reported to their (surviving) origin as failed.
    pub failed_reported: u64,
    /// Messages to a dead rank whose surviving origin heard neither an ACK nor a failure.
    pub unreported: u64,
    /// RELM frames of every kind (data included) per delivered message per hop of its path.
    pub ctl_frames_per_msg_hop: f64,
    /// RELM message-level state left on survivors after the run settled.
    pub leaked_entries: u64,
    /// Replays served (relay caches and origins).
    pub replays: u64,
    /// Origin retry probes (the end-to-end safety net).
    pub retry_probes: u64,
    /// Gated link updates released by the backstop timer.
    pub gate_timeouts: u64,
    /// Virtual time at the end, in nanoseconds.
    pub virtual_ns: u64,
    /// Simulator steps.
    pub events: u64,
}

type Chain = (Rank, Rank);

/// Invariant checker: per chain, deliveries are the consecutive uids from the first (so no
/// duplicate and no reordering), ACKs are cumulative and never run ahead of deliveries.
#[derive(Debug, Default)]
pub struct RelmObserver {
    first: Option<Uid>,
    /// chain -> uids delivered, in delivery order
    delivered: BTreeMap<Chain, Vec<Uid>>,
    /// chain -> highest uid acknowledged at the origin
    acked: BTreeMap<Chain, Uid>,
    /// chain -> failed ranges reported at the origin
    failed: BTreeMap<Chain, Vec<(Uid, u32)>>,
    duplicates: u64,
    out_of_order: u64,
    collisions: u64,
    violations: Vec<String>,
}

impl RelmObserver {
    fn violation(&mut self, v: String) {
        if self.violations.len() < 8 {
            self.violations.push(v);
        }
    }
}

impl Observer for RelmObserver {
    fn on_event(&mut self, _w: &World, rank: Rank, e: &Event) {
        let first = self.first.expect("set before the run");
        match e {
            Event::Relm(RelmEvent::Delivered { src, uid, .. }) => {
                let d = self.delivered.entry((*src, rank)).or_default();
                let expect = d.last().map_or(first, |u| u.next());
                let dup = d.contains(uid);
                d.push(*uid);
                if *uid != expect {
                    if dup {
                        self.duplicates += 1;
                        self.violation(format!("rank {rank} delivered ({src},{uid}) twice"));
                    } else {
                        self.out_of_order += 1;
                        self.violation(format!(
                            "rank {rank} delivered ({src},{uid}) but expected uid {expect}"
                        ));
                    }
                }
            }
            Event::Relm(RelmEvent::Acked { dst, upto }) => {
                let chain = (rank, *dst);
                let prev = self.acked.get(&chain).copied().unwrap_or(first.prev());
                if !upto.after(prev) {
                    self.violation(format!("origin {rank}: ACK to {upto} after ACK to {prev}"));
                }
                self.acked.insert(chain, *upto);
            }
            Event::Relm(RelmEvent::Failed { dst, first, count }) => {
                self.failed
                    .entry((rank, *dst))
                    .or_default()
                    .push((*first, *count));
            }
            Event::Relm(RelmEvent::Collision { .. }) => self.collisions += 1,
            _ => {}
        }
    }

    fn check(&mut self, _w: &World) -> Result<(), String> {
        match self.violations.first() {
            Some(v) => Err(v.clone()),
            None => Ok(()),
        }
    }
}

/// Hops from `src` to `dst` along the routes the live nodes hold now.
fn hops(w: &World, src: Rank, dst: Rank) -> u64 {
    let mut at = src;
    let mut n = 0;
    while at != dst && n < 256 {
        match w.node(at).map(|x| x.tree().route(dst)) {
            Some(Route::Next(r)) => at = r,
            _ => break,
        }
        n += 1;
    }
    n
}

/// Runs the RELM scenario and checks every invariant; a violation is a [`SimFailure`] naming
/// the seed and the replay command.
pub fn run_relm(p: &RelmParams, hooks: Hooks) -> Result<RelmReport, SimFailure> {
    let fail = |reason: String| SimFailure {
        seed: p.seed,
        step: 0,
        now: Instant::ZERO,
        reason,
        replay: p.replay_command(),
    };
    if !(0.0..=0.5).contains(&p.crash) {
        return Err(fail(format!(
            "crash fraction {} is outside 0..=0.5",
            p.crash
        )));
    }
    if p.ranks < 2 {
        return Err(fail("RELM needs at least 2 ranks".into()));
    }
    let cfg = SimConfig::new(p.ranks, p.radix, p.seed);
    let first = Uid::new(cfg.node.relm.first_uid).expect("validated");
    let obs = RelmObserver {
        first: Some(first),
        ..Default::default()
    };
    let mut sim = Sim::new(cfg, obs).map_err(|e| fail(format!("invalid configuration: {e}")))?;
    sim.set_replay(p.replay_command());
    sim.set_hooks(hooks);
    let mut rng = Rng::new(p.seed).fork(0x4e11);
    let gap = if p.burst {
        Duration::from_nanos(0)
    } else {
        Duration::from_micros(5)
    };
    let window = Instant::ZERO + Duration::from_micros(5).saturating_mul(p.messages as u64);

    // Crashes: random ranks (relays, ends, sometimes the root) at random times in the stream.
    // A positive fraction crashes at least one rank.
    let want = ((p.ranks as f64 * p.crash).round() as u32)
        .max(u32::from(p.crash > 0.0))
        .min(p.ranks - 2);
    let mut doomed = RankSet::new();
    while (doomed.len() as u32) < want {
        let r = Rank(rng.below(p.ranks as u64) as u32);
        if doomed.insert(r) {
            let at = Instant::from_nanos(rng.below(window.as_nanos().max(1) + 1));
            sim.schedule(at, Fault::Crash(r));
        }
    }
    // Stalls: pauses and short cuts among ranks that do not crash.
    if want > 0 {
        let spared: Vec<Rank> = (0..p.ranks)
            .map(Rank)
            .filter(|r| !doomed.contains(*r))
            .collect();
        let pick = |rng: &mut Rng| spared[rng.below(spared.len() as u64) as usize];
        let start = |rng: &mut Rng| Instant::from_nanos(rng.below(window.as_nanos().max(1) + 1));
        let lasting = |rng: &mut Rng| Duration::from_micros(100 + rng.below(5_000));
        for _ in 0..2 {
            let (r, at) = (pick(&mut rng), start(&mut rng));
            sim.schedule(at, Fault::Pause(r));
            sim.schedule(at + lasting(&mut rng), Fault::Resume(r));
        }
        let mut last_heal = Instant::ZERO;
        for _ in 0..2 {
            let (a, b, at) = (pick(&mut rng), pick(&mut rng), start(&mut rng));
            if a != b {
                sim.schedule(at, Fault::Cut(a, b));
                last_heal = last_heal.max(at + lasting(&mut rng));
            }
        }
        if last_heal > Instant::ZERO {
            sim.schedule(last_heal, Fault::Heal);
        }
    }

    // A grow in the middle of some runs with crashes: one to four ranks join (from the
    // snapshot), existing views change (some ranks are demoted under the newcomers), and the
    // newcomers send and receive like everyone else.
    let join_at = (want > 0 && rng.chance(0.3)).then(|| {
        (
            rng.below(p.messages as u64) as usize,
            1 + rng.below(4) as u32,
        )
    });
    let mut joined = false;

    // The stream.
    let mut sent: Vec<(Rank, Rank, Uid)> = Vec::new();
    let mut path_hops: BTreeMap<(Rank, Rank), u64> = BTreeMap::new();
    let mut next = Instant::ZERO;
    let mut spins = 0u64;
    while (sent.len() as u32) < p.messages {
        if !p.burst || spins % 1024 == 0 {
            sim.run_until(next)?;
        }
        if let Some((_, k)) = join_at.filter(|&(at, _)| !joined && sent.len() >= at) {
            joined = true;
            let span = sim.world().span() + k;
            sim.join(span)
                .map_err(|e| fail(format!("join to {span}: {e}")))?;
        }
        let live: Vec<Rank> = sim.world().live_ranks().collect();
        if live.len() < 2 {
            break;
        }
        let src = live[rng.below(live.len() as u64) as usize];
        let mut dst = live[rng.below(live.len() as u64) as usize];
        if dst == src {
            dst = live[(live.iter().position(|&r| r == src).expect("live") + 1) % live.len()];
        }
        let payload = Bytes::from(format!("{src}>{dst}#{}", sent.len()).into_bytes());
        let h = hops(sim.world(), src, dst);
        match sim.command(src, |n, now| n.relm_send(now, dst, 16, payload)) {
            Some(Ok(uid)) => {
                sent.push((src, dst, uid));
                *path_hops.entry((src, dst)).or_default() = h;
            }
            Some(Err(CommandError::Relm(RelmError::Backpressure { .. }))) => {
                sim.run_until(sim.world().now() + Duration::from_micros(100))?;
            }
            Some(Err(CommandError::PeerDead(_) | CommandError::Unreachable(_))) => {}
            Some(Err(e)) => return Err(sim.failure(format!("relm_send refused: {e}"))),
            None => {}
        }
        next = sim.world().now() + gap;
        spins += 1;
        if spins > 100 * p.messages as u64 + 1000 {
            return Err(sim.failure("could not send the messages".into()));
        }
    }

    // Liveness: every message between survivors is acknowledged; every message from a
    // survivor to a dead rank is acknowledged or reported failed.
    let budget = 2_000_000_000u64
        .min((2000 * p.ranks as u64).saturating_mul(p.messages as u64 / 8 + 64) + 10_000_000);
    // Settling is monotonic (ACKs only grow, crashes and failure reports stay), so a cursor
    // over the sent messages checks each one until it settles, not every message every step.
    let mut cursor = 0usize;
    let settled = |w: &World, o: &RelmObserver| {
        while let Some(&(s, d, uid)) = sent.get(cursor) {
            let done = w.is_crashed(s)
                || o.acked.get(&(s, d)).is_some_and(|a| uid.at_or_before(*a))
                || (w.is_crashed(d) && o.failed.contains_key(&(s, d)));
            if !done {
                return false;
            }
            cursor += 1;
        }
        true
    };
    sim.run_until_pred(budget, settled)?;
    // Let soft state (relay records and caches, coalesced marks) drain.
    let settle = sim.world().now() + Duration::from_secs(3);
    sim.run_until(settle)?;

    let w = sim.world();
    let o = sim.observer();
    let crashed = w.crashed();
    let mut lost = 0u64;
    let mut failed_reported = 0u64;
    let mut unreported = 0u64;
    let mut delivered_hops = 0u64;
    let mut set: BTreeMap<Chain, Vec<Uid>> = BTreeMap::new();
    for &(s, d, uid) in &sent {
        set.entry((s, d)).or_default().push(uid);
    }
    for (&(s, d), uids) in &set {
        let got = o.delivered.get(&(s, d)).map_or(&[][..], |v| &v[..]);
        let got_set: std::collections::BTreeSet<Uid> = got.iter().copied().collect();
        delivered_hops += got.len() as u64 * path_hops.get(&(s, d)).copied().unwrap_or(1);
        let (sd, dd) = (crashed.contains(s), crashed.contains(d));
        for &uid in uids {
            let acked = o.acked.get(&(s, d)).is_some_and(|a| uid.at_or_before(*a));
            let failed = o
                .failed
                .get(&(s, d))
                .is_some_and(|v| v.iter().any(|(f, c)| f.dist(uid) < *c as u64));
            match (sd, dd) {
                (false, false) => {
                    if !got_set.contains(&uid) || !acked || failed {
                        lost += 1;
                    }
                }
                (false, true) => {
                    if failed && !acked {
                        failed_reported += 1;
                    } else if !acked {
                        unreported += 1;
                    }
                    if acked && !got_set.contains(&uid) {
                        lost += 1; // an ACK for a message never delivered
                    }
                }
                (true, _) => {}
            }
        }
    }
    let mut frames = 0u64;
    let mut replays = 0u64;
    let mut retry_probes = 0u64;
    let mut gate_timeouts = 0u64;
    let mut leaked = 0u64;
    for r in 0..w.span() {
        let Some(n) = w.node(Rank(r)) else { continue };
        let st = n.stats();
        frames += st.relm.frames_out;
        replays += st.relm.replays;
        retry_probes += st.relm.retry_probes;
        gate_timeouts += st.relm.gate_timeouts;
        if !crashed.contains(Rank(r)) {
            leaked += n.relm_held() as u64;
            if n.relm_unacked_bytes() != 0 {
                leaked += 1;
            }
        }
    }
    let delivered: u64 = o.delivered.values().map(|v| v.len() as u64).sum();
    Ok(RelmReport {
        ranks: p.ranks,
        messages: sent.len() as u64,
        crashed: crashed.len() as u32,
        delivered,
        duplicates: o.duplicates,
        out_of_order: o.out_of_order,
        lost,
        failed_reported,
        unreported,
        ctl_frames_per_msg_hop: if delivered_hops == 0 {
            0.0
        } else {
            frames as f64 / delivered_hops as f64
        },
        leaked_entries: leaked,
        replays,
        retry_probes,
        gate_timeouts,
        virtual_ns: w.now().as_nanos(),
        events: w.stats().steps,
    })
}

/// Checks a report's invariants: nothing duplicated, reordered, lost, unreported or leaked.
pub fn check_report(r: &RelmReport) -> Result<(), String> {
    if r.duplicates + r.out_of_order + r.lost + r.unreported + r.leaked_entries != 0 {
        return Err(format!("invariants broken: {r:?}"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(ranks: u32, radix: u32, messages: u32, crash: f64, seed: u64) -> RelmParams {
        RelmParams {
            ranks,
            radix,
            messages,
            crash,
            seed,
            burst: false,
        }
    }

    fn run(p: &RelmParams) -> RelmReport {
        let r = run_relm(p, Hooks::default()).unwrap_or_else(|e| panic!("{e}"));
        if let Err(e) = check_report(&r) {
            panic!("{e}\nreplay: {}", p.replay_command());
        }
        r
    }

    #[test]
    fn failure_free_stream_is_exactly_once_and_cheap() {
        let r = run(&params(64, 4, 2000, 0.0, 1));
        assert_eq!(r.delivered, 2000);
        assert_eq!(r.retry_probes, 0);
        assert!(r.ctl_frames_per_msg_hop < 1.5, "{r:?}");
    }

    #[test]
    fn relay_crashes_over_many_seeds() {
        for seed in 0..40 {
            run(&params(40, 3, 400, 0.05, seed));
        }
    }

    /// The load point: 10,000 messages in flight together among 256 ranks.
    #[test]
    fn ten_thousand_in_flight_among_256_ranks() {
        let p = RelmParams {
            burst: true,
            ..params(256, 4, 10_000, 0.0, 7)
        };
        let r = run(&p);
        assert_eq!(r.delivered, 10_000);
        assert!(r.ctl_frames_per_msg_hop <= 1.5, "{r:?}");
    }

    /// The swarm: shapes, loads and crash rates drawn from the seed, every seed with at least
    /// one crash under load. `LIFELINE_SEEDS` sets the count (CI runs 1,000 in release).
    #[test]
    fn swarm_of_seeds() {
        let n: u64 = std::env::var("LIFELINE_SEEDS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(if cfg!(debug_assertions) { 60 } else { 1000 });
        for seed in 0..n {
            let mut rng = Rng::new(seed).fork(0x5eed);
            let p = RelmParams {
                ranks: 3 + rng.below(80) as u32,
                radix: 2 + rng.below(6) as u32,
                messages: 20 + rng.below(300) as u32,
                crash: [0.02, 0.05, 0.1, 0.2][rng.below(4) as usize],
                seed,
                burst: rng.chance(0.3),
            };
            let r = run(&p);
            assert!(r.crashed >= 1);
        }
    }

    /// Seeds whose runs (a grow among crashes, pauses and cuts) once stalled failure
    /// knowledge, so the deaths were never confirmed and chains to the dead never failed:
    /// 1863 (a joiner's children never heard of it: it now adopts them at start; a child that
    /// ignored a recovery request is asked again when it says hello), 7483 and 8618 (an
    /// adoption notice from before the grow read as a death: notices now carry their span),
    /// 6355 (a parent that knew fewer deaths than its child waited on it forever: the child now
    /// tells it what it knows), 3730 and 19847 (an adoption notice sent just before the grow
    /// was dropped on arrival for its old span and never sent again: a grow now re-sends every
    /// neighbour this rank's lineage).
    #[test]
    fn grow_among_faults_regressions() {
        for (ranks, radix, messages, crash, seed) in [
            (23, 6, 311, 0.2, 1863),
            (19, 6, 262, 0.02, 7483),
            (12, 2, 285, 0.2, 8618),
            (69, 2, 318, 0.2, 6355),
            (76, 2, 294, 0.2, 3730),
            (44, 3, 303, 0.2, 19847),
        ] {
            run(&params(ranks, radix, messages, crash, seed));
        }
    }
}
