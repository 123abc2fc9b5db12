//! The run itself: start the nodes, wait until they are wired up, run the workload while
//! injecting the faults on time, let the cluster settle, collect the nodes' stats and hand
//! everything to the report.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::process::Child;
use tokio::time::Instant as Tick;

use super::evictions::Outcome;
use super::expect::Expect;
use super::faults::{workload_ms, Action, Fault, Faults, NetFault, Pause};
use super::grow::{spawn_joiners, Grow, Started};
use super::intrude::{intrude, intrude_quic};
use super::procs::{reap, signal, spawn_nodes, Exit, Lines, Procs, Sig};
use super::report::report;
use super::setup::{prepare, rank_ip, Setup};
use super::shrink::{ask, parse_bursts, parse_shrinks, requester, Asked, SHRINK_TAIL_MS};
use super::tally::Tally;
use super::{ClusterArgs, STARTUP_GRACE};
use crate::nft;
use crate::node_cmd::{wall_ms, TransportKind};
use crate::{write_stdout, CliError};

/// Whether fault `f` is due: its time has come and, for a SIGCONT or a network fault's end,
/// the pause or the fault has lasted its full duration from the moment it actually began (a
/// tick can begin it late).
fn due(f: &Fault, start: Tick, stop_at: &BTreeMap<u32, (Tick, u64)>, net: &[NetFault]) -> bool {
    if start.elapsed() < Duration::from_millis(f.at_ms) {
        return false;
    }
    match f.action {
        Action::Cont => stop_at
            .get(&f.rank)
            .is_none_or(|(t, s)| t.elapsed() >= Duration::from_millis(f.at_ms.saturating_sub(*s))),
        Action::NetOff(i) => net[i].applied.is_none_or(|(t, _, _)| {
            t.elapsed() >= Duration::from_millis(net[i].dur_ms.unwrap_or(u64::MAX))
        }),
        _ => true,
    }
}

/// A pause as it happened.
#[derive(Clone, Copy, Debug)]
pub(super) struct Paused {
    pub(super) rank: u32,
    /// Its SIGSTOP, ms into the workload and wall time.
    pub(super) at_ms: u64,
    pub(super) wall: f64,
    /// How long it lasted (0 until its SIGCONT).
    pub(super) for_ms: u64,
    /// The `--stop` it is ([`Faults::pauses`]).
    pub(super) asked: usize,
}

/// What the workload did to the ranks so far.
#[derive(Default)]
struct Injected {
    /// Killed rank -> wall time of its SIGKILL.
    killed: BTreeMap<u32, f64>,
    /// Killed rank -> ms into the workload of its SIGKILL.
    killed_at_ms: BTreeMap<u32, u128>,
    /// Ranks paused now.
    stopped: BTreeSet<u32>,
    /// Every pause so far.
    pauses: Vec<Paused>,
    /// Paused rank -> the instant of its SIGSTOP and the `at_ms` it was asked for.
    stop_at: BTreeMap<u32, (Tick, u64)>,
    /// `--revoke` index -> wall time its command was written to the origin.
    revokes_sent: BTreeMap<usize, f64>,
}

/// The workload's ops: the last origin, how many were attempted, and the commands sent to
/// each rank.
#[derive(Default)]
struct Ops {
    origin: u32,
    k: u64,
    sent: BTreeMap<u32, u64>,
}

/// Starts the nodes, runs the workload with the faults, lets the cluster settle, collects the
/// nodes' stats and reports.
pub(super) async fn drive(
    args: &ClusterArgs,
    faults: Faults,
    grows: Vec<Grow>,
    procs: &mut Procs,
) -> Result<(), CliError> {
    let n = args.nodes;
    let detect = !args.no_detect;
    let expect = Expect::new(&faults, detect);
    let shrinks = parse_shrinks(args)?;
    let bursts = parse_bursts(args)?;
    let mut next_burst = 0usize;
    // Past the last grow, long enough for the joiners to join and the workload to reach them.
    let work_ms = workload_ms(args, &faults)
        .max(
            grows
                .iter()
                .map(|g| g.at_ms + GROW_TAIL_MS)
                .max()
                .unwrap_or(0),
        )
        .max(
            shrinks
                .iter()
                .map(|s| s.at_ms + SHRINK_TAIL_MS)
                .max()
                .unwrap_or(0),
        );
    let Faults {
        timeline: faults,
        mut net,
        pauses: asked_pauses,
        revokes,
        ..
    } = faults;
    // Ctrl-C and SIGTERM are caught from here on, before any table or process exists, so
    // either ends the run through the same clean-up.
    let interrupted = interruption()?;
    tokio::pin!(interrupted);

    let setup = prepare(args, procs, !net.is_empty())?;
    let eps = &setup.eps;
    let (pids, spawned, mut rx, mut joiner_tx) = spawn_nodes(args, &setup, procs)?;
    // Wall time of the launch (start-up is measured from here).
    let launch_wall = wall_ms() - spawned.elapsed().as_secs_f64() * 1000.0;

    let mut t = Tally::default();
    if let Some(path) = &args.lines {
        let f = std::fs::File::create(path)
            .map_err(|e| CliError::Usage(format!("--lines {}: {e}", path.display())))?;
        t.dump = Some(std::io::BufWriter::new(f));
    }
    wire_up(n, &mut rx, &mut t, &mut interrupted).await?;
    announce(args, eps, &pids, detect, work_ms)?;

    // The workload starts once the nodes' start-up grace is over, so a dial refused by a
    // killed rank is given up quickly.
    let ready = spawned + Duration::from_millis(args.start_skew) + STARTUP_GRACE;
    while Tick::now() < ready {
        tokio::select! {
            m = rx.recv() => if let Some((r, v)) = m { t.take(r, &v) },
            () = tokio::time::sleep_until(ready) => {}
            () = &mut interrupted => return Err(CliError::Failed("interrupted".into())),
        }
    }
    // Workload and faults.
    let start = Tick::now();
    let start_wall = wall_ms();
    let end = start + Duration::from_millis(work_ms);
    let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / f64::from(args.rate)));
    let mut done = Injected::default();
    let mut exits: BTreeMap<u32, Exit> = BTreeMap::new();
    let mut next = 0usize;
    let mut ops = Ops::default();
    let mut attack = args
        .garbage
        .then(|| start + Duration::from_secs_f64(args.duration / 2.0));
    let mut next_grow = 0usize;
    let mut joiners: Vec<Started> = Vec::new();
    let mut next_shrink = 0usize;
    let mut asked: Vec<Asked> = Vec::new();
    // Runs until the workload is over and every fault was injected (a SIGCONT or a fault's end
    // is never lost).
    while Tick::now() < end || next < faults.len() {
        tokio::select! {
            m = rx.recv() => if let Some((r, v)) = m { t.take(r, &v) },
            _ = tick.tick() => {
                reap(procs, &mut exits, start);
                // Shrink requests, then bursts, then faults due in the same tick: a burst at a
                // request's moment starts after the request, between survivors (the targets of
                // every campaign asked so far are left out), so it is in flight across the
                // campaign; a kill at its moment lands while the campaign runs.
                let unusable: BTreeSet<u32> = done
                    .killed
                    .keys()
                    .chain(exits.keys())
                    .copied()
                    .chain(t.removed_at().into_keys())
                    .chain(t.departed_ranks())
                    .collect();
                let no_requester: BTreeSet<u32> = unusable.union(&done.stopped).copied().collect();
                let mut used = BTreeSet::new();
                while next_shrink < shrinks.len()
                    && start.elapsed() >= Duration::from_millis(shrinks[next_shrink].at_ms)
                {
                    let s = &shrinks[next_shrink];
                    if asked.last().is_some_and(|a| a.at_ms != s.at_ms) {
                        used.clear();
                    }
                    if let Some(r) = requester(&shrinks, next_shrink, n, &no_requester, &used) {
                        used.insert(r);
                        asked.push(ask(procs, s, r, s.at_ms).await);
                    }
                    next_shrink += 1;
                }
                while next_burst < bursts.len()
                    && start.elapsed() >= Duration::from_millis(bursts[next_burst].0)
                {
                    let ranks: Vec<u32> = (0..n).chain(t.joined.keys().copied()).collect();
                    let gone: BTreeSet<u32> = unusable
                        .iter()
                        .copied()
                        .chain(asked.iter().flat_map(|a| a.targets.iter().copied()))
                        .collect();
                    for _ in 0..bursts[next_burst].1 {
                        ops.next(&ranks, &gone, &done.stopped, procs).await;
                    }
                    next_burst += 1;
                }
                while next < faults.len() && due(&faults[next], start, &done.stop_at, &net) {
                    let f = faults[next];
                    next += 1;
                    if let Action::Revoke(i) = f.action {
                        done.revoke(i, &revokes[i], procs).await;
                        continue;
                    }
                    done.inject(f, args, procs, &mut net, eps, &asked_pauses, start).await?;
                }
                if attack.is_some_and(|at| Tick::now() >= at) {
                    attack = None;
                    unleash(&setup, &done.killed, n);
                }
                // Ranks that are gone (killed, exited, evicted or confirmed removed) are
                // neither origins nor destinations, nor contacts.
                let gone: BTreeSet<u32> = done
                    .killed
                    .keys()
                    .chain(exits.keys())
                    .copied()
                    .chain(t.removed_at().into_keys())
                    .chain(t.departed_ranks())
                    .collect();
                while next_grow < grows.len()
                    && start.elapsed() >= Duration::from_millis(grows[next_grow].at_ms)
                {
                    let live: Vec<u32> = (0..n)
                        .filter(|r| !gone.contains(r) && !done.stopped.contains(r))
                        .collect();
                    if let Some(tx) = &joiner_tx {
                        spawn_joiners(args, &setup, procs, grows[next_grow], &live, &mut joiners, tx)?;
                    }
                    next_grow += 1;
                    if next_grow == grows.len() {
                        // The channel closes once every process has exited, as without joiners.
                        joiner_tx = None;
                    }
                }
                if Tick::now() < end {
                    // Every rank: the nodes started from the peers file and the joiners
                    // admitted so far.
                    let ranks: Vec<u32> = (0..n).chain(t.joined.keys().copied()).collect();
                    ops.next(&ranks, &gone, &done.stopped, procs).await;
                }
            }
            () = &mut interrupted => return Err(CliError::Failed("interrupted".into())),
        }
    }
    let Injected {
        killed,
        killed_at_ms,
        pauses,
        revokes_sent,
        ..
    } = done;
    let settled = settle(
        args,
        &expect,
        &killed,
        &ops.sent,
        (&mut t, &mut rx),
        (procs, &mut exits, start),
        &mut interrupted,
    )
    .await?;
    let settled_ms = start.elapsed().as_millis() as u64;
    // The counters of the rules still in (a cut for good), which stay until the end.
    if let Some(table) = procs.table.as_ref() {
        for f in net.iter_mut().filter(|f| !f.handles.is_empty()) {
            f.dropped = table.dropped(&f.handles).await.ok();
        }
    }
    reap(procs, &mut exits, start);
    let survivors = survivors_of(n, &killed, &t, &exits);
    // Targets still running at the end (a campaign that never completed) are no survivors
    // either: their `stats` and `quit` still go to them.
    let running: BTreeSet<u32> = survivors
        .iter()
        .copied()
        .chain(asked.iter().flat_map(|a| a.targets.iter().copied()))
        .filter(|r| !killed.contains_key(r) && !exits.contains_key(r))
        .collect();
    wind_down(&running, (&mut t, &mut rx), (procs, &mut exits, start)).await;
    t.drop_reports_of_the_removed();
    let outcome = Outcome {
        start_wall,
        launch_wall,
        exits,
        net,
        table: procs.table.as_ref().map(|t| t.name().to_string()),
        pauses,
        asked_pauses,
        expect,
        detect,
        work_ms,
        joiners,
        asked,
        settled: settled.then_some(settled_ms),
        revokes,
        revokes_sent,
    };
    report(
        args,
        &t,
        &killed,
        &killed_at_ms,
        &survivors,
        ops.k,
        &outcome,
    )
}

/// Resolves on Ctrl-C or SIGTERM (the handlers are installed now).
fn interruption() -> Result<impl Future<Output = ()>, CliError> {
    #[cfg(unix)]
    let (mut sigint, mut sigterm) = {
        use tokio::signal::unix::{signal, SignalKind};
        let on =
            |k| signal(k).map_err(|e| CliError::Failed(format!("installing signal handlers: {e}")));
        (on(SignalKind::interrupt())?, on(SignalKind::terminate())?)
    };
    Ok(async move {
        #[cfg(unix)]
        tokio::select! {
            _ = sigint.recv() => {}
            _ = sigterm.recv() => {}
        }
        #[cfg(not(unix))]
        let _ = tokio::signal::ctrl_c().await;
    })
}

/// Wiring: waits until every node is listening and every tree link is up at both ends.
async fn wire_up(
    n: u32,
    rx: &mut Lines,
    t: &mut Tally,
    interrupted: &mut Pin<&mut impl Future<Output = ()>>,
) -> Result<(), CliError> {
    let want_ups = 2 * u64::from(n - 1);
    let deadline = Tick::now() + Duration::from_secs(20);
    while t.listening.len() < n as usize || t.link_ups < want_ups {
        tokio::select! {
            m = rx.recv() => match m {
                Some((r, v)) => t.take(r, &v),
                None => return Err(CliError::Failed("every node exited during start-up".into())),
            },
            () = tokio::time::sleep_until(deadline) => {
                return Err(CliError::Failed(format!(
                    "start-up: {} of {n} nodes listening, {} of {want_ups} link ends up after 20 s",
                    t.listening.len(), t.link_ups)));
            }
            () = interrupted.as_mut() => return Err(CliError::Failed("interrupted".into())),
        }
    }
    tracing::debug!(link_ends = t.link_ups, "wired up");
    Ok(())
}

/// The first line: the nodes (JSON), or what runs (text).
fn announce(
    args: &ClusterArgs,
    eps: &[SocketAddr],
    pids: &[u32],
    detect: bool,
    work_ms: u64,
) -> Result<(), CliError> {
    let n = args.nodes;
    let nodes: Vec<Value> = (0..n)
        .map(|r| json!({"rank": r, "addr": eps[r as usize].to_string(), "pid": pids[r as usize]}))
        .collect();
    if args.json {
        write_stdout(|o| writeln!(o, "{}", json!({ "nodes": nodes })))?;
    } else {
        let last = eps[n as usize - 1].ip();
        write_stdout(|o| {
            writeln!(
                o,
                "lifeline cluster: {n} nodes on {}..{last} (radix {}, heartbeat detector {}), \
                 wired up; {:.1} s of xcasts at {}/s",
                eps[0].ip(),
                args.radix,
                if detect { "on" } else { "off" },
                work_ms as f64 / 1e3,
                args.rate
            )
        })?;
    }
    Ok(())
}

impl Injected {
    /// `--revoke` `i`: tells its origin to revoke (unless the origin is gone: then it is never
    /// sent, and the report says so).
    async fn revoke(&mut self, i: usize, a: &super::revokes::Asked, procs: &mut Procs) {
        if self.killed.contains_key(&a.rank) {
            return;
        }
        tracing::debug!(rank = a.rank, group = a.group, "revoke");
        // The time before the write: the origin may act on it before the write returns.
        let at = wall_ms();
        procs.send(a.rank, &super::revokes::command(a)).await;
        self.revokes_sent.insert(i, at);
    }

    /// Injects fault `f` now: SIGKILL, SIGSTOP, SIGCONT, or a network fault's rules in or out.
    #[allow(clippy::too_many_arguments)]
    async fn inject(
        &mut self,
        f: Fault,
        args: &ClusterArgs,
        procs: &mut Procs,
        net: &mut [NetFault],
        eps: &[SocketAddr],
        asked_pauses: &[Pause],
        start: Tick,
    ) -> Result<(), CliError> {
        let r = f.rank;
        let pid = procs.children.get(r as usize).and_then(Child::id);
        tracing::debug!(rank = r, pid, action = ?f.action, at_ms = f.at_ms, "fault");
        match f.action {
            Action::Kill => {
                if let Some(c) = procs.children.get_mut(r as usize) {
                    let _ = c.start_kill(); // SIGKILL
                }
                self.killed.insert(r, wall_ms());
                self.killed_at_ms.insert(r, start.elapsed().as_millis());
                procs.stdins[r as usize] = None;
            }
            Action::Stop => {
                signal(pid, Sig::Stop);
                self.stopped.insert(r);
                self.stop_at.insert(r, (Tick::now(), f.at_ms));
                let pauses = &self.pauses;
                let asked = asked_pauses
                    .iter()
                    .enumerate()
                    .position(|(i, p)| {
                        p.rank == r && p.at_ms == f.at_ms && !pauses.iter().any(|q| q.asked == i)
                    })
                    .unwrap_or(usize::MAX);
                self.pauses.push(Paused {
                    rank: r,
                    at_ms: start.elapsed().as_millis() as u64,
                    wall: wall_ms(),
                    for_ms: 0,
                    asked,
                });
            }
            Action::Cont => {
                signal(pid, Sig::Cont);
                self.stopped.remove(&r);
                // Measured from its own instant: subtracting two truncated
                // millisecond marks could report 499 for a 500 ms pause.
                let held = self
                    .stop_at
                    .remove(&r)
                    .map_or(0, |(t, _)| t.elapsed().as_millis());
                if let Some(p) = self.pauses.iter_mut().rev().find(|p| p.rank == r) {
                    p.for_ms = held as u64;
                }
            }
            Action::NetOn(i) => {
                let Some(table) = procs.table.as_ref() else {
                    return Ok(());
                };
                let f = &mut net[i];
                let proto = match args.transport {
                    TransportKind::Tcp => nft::Proto::Tcp,
                    TransportKind::Quic => nft::Proto::Udp,
                };
                let rules = nft::rules(f.kind, eps, proto);
                f.handles = table
                    .add(&sets_of(f, eps, args.nodes), &rules)
                    .await
                    .map_err(|e| CliError::Failed(format!("{}: nft: {e}", f.flag)))?;
                f.rules = rules.len();
                f.applied = Some((Tick::now(), start.elapsed().as_millis() as u64, wall_ms()));
                tracing::debug!(fault = f.flag, handles = ?f.handles, "rules in");
            }
            Action::Revoke(_) => {} // not a fault: see `Injected::revoke`
            Action::NetOff(i) => {
                let Some(table) = procs.table.as_ref() else {
                    return Ok(());
                };
                let f = &mut net[i];
                f.dropped = table.dropped(&f.handles).await.ok();
                f.healing_wall = Some(wall_ms());
                table
                    .delete(&f.handles, &sets_of(f, eps, args.nodes))
                    .await
                    .map_err(|e| CliError::Failed(format!("{}: nft: {e}", f.flag)))?;
                f.handles.clear();
                f.removed_ms = Some(start.elapsed().as_millis() as u64);
                f.removed_wall = Some(wall_ms());
                tracing::debug!(fault = f.flag, "rules out");
            }
        }
        Ok(())
    }
}

/// The named sets network fault `f` needs: a partition's two sides over the run's ranks
/// (`eps` up to `nodes`); none for the others.
fn sets_of(f: &NetFault, eps: &[SocketAddr], nodes: u32) -> Vec<nft::AddrSet> {
    match f.kind {
        nft::NetKind::Partition(k) => {
            let ranks = eps.len().min(nodes as usize);
            nft::partition_sets(k, &f.side, &eps[..ranks]).to_vec()
        }
        _ => Vec::new(),
    }
}

/// `--garbage`: sets the intruders on every node (in the background).
fn unleash(setup: &Setup, killed: &BTreeMap<u32, f64>, n: u32) {
    let eps = &setup.eps;
    if let Some((certs, cluster)) = &setup.quic {
        // A dead rank's exact address gets the intruders past the address
        // check to the TLS and rank checks; without one they are strangers.
        let from = killed
            .keys()
            .next()
            .map_or(SocketAddr::new(rank_ip(0), 0), |d| eps[*d as usize]);
        tokio::spawn(intrude_quic(
            eps.clone(),
            certs.clone(),
            cluster.clone(),
            from,
        ));
    } else {
        for (r, a) in eps.iter().enumerate() {
            let claim = (r as u32 + 1) % n;
            tokio::spawn(intrude(*a, r as u32, claim, eps[claim as usize].ip()));
        }
    }
}

/// How long the nodes have to exit once told to quit: a node's own bound for writing out its
/// queued lines (`node_out::FLUSH_BOUND`, 10 s) and 2 s for its shutdown; the launcher reads
/// their lines meanwhile.
const EXIT_WAIT: Duration = Duration::from_secs(crate::node_out::FLUSH_BOUND.as_secs() + 2);

/// How long the workload goes on past the last `--grow`: the joiners start, join, link up,
/// and then take part in ops started after their joins.
const GROW_TAIL_MS: u64 = 2500;

impl Ops {
    /// Starts the next op: an xcast from the next live origin among `ranks` (ascending: the
    /// nodes started from the peers file, then the joiners admitted so far) that is not
    /// paused, and a RELM message from it to the next destination not `gone` (all-to-all).
    async fn next(
        &mut self,
        ranks: &[u32],
        gone: &BTreeSet<u32>,
        stopped: &BTreeSet<u32>,
        procs: &mut Procs,
    ) {
        let k = self.k;
        let m = ranks.len();
        if m == 0 {
            return;
        }
        // The position after the last origin.
        let mut at = ranks.partition_point(|r| *r <= self.origin) % m;
        for _ in 0..m {
            self.origin = ranks[at];
            if !gone.contains(&self.origin) && !stopped.contains(&self.origin) {
                break;
            }
            at = (at + 1) % m;
        }
        let origin = self.origin;
        if !gone.contains(&origin) && !stopped.contains(&origin) {
            procs.send(origin, &format!("xcast 16 c{k}\n")).await;
            *self.sent.entry(origin).or_default() += 1;
            // All-to-all RELM: the destination rotates through the other ranks.
            let dst = (1..m)
                .map(|i| ranks[(at + 1 + (k as usize + i) % (m - 1).max(1)) % m])
                .find(|d| *d != origin && !gone.contains(d));
            if let Some(dst) = dst {
                procs.send(origin, &format!("relm {dst} 16 m{k}\n")).await;
                *self.sent.entry(origin).or_default() += 1;
            }
            self.k += 1;
        }
    }
}

/// Survivors: the ranks neither killed, nor exited, nor evicted (told, or confirmed removed by
/// a rank not removed itself), nor removed by a shrink (named by a `departed` line, or
/// printed `left`) so far. The settling waits for nothing from the others.
fn survivors_of(
    n: u32,
    killed: &BTreeMap<u32, f64>,
    t: &Tally,
    exits: &BTreeMap<u32, Exit>,
) -> BTreeSet<u32> {
    let removed = t.removed_at();
    let departed = t.departed_ranks();
    (0..n)
        .chain(t.joined.keys().copied())
        .filter(|r| {
            !killed.contains_key(r)
                && !exits.contains_key(r)
                && !removed.contains_key(r)
                && !departed.contains(r)
        })
        .collect()
}

/// Every killed rank, and every rank whose eviction is required, confirmed at every survivor;
/// the latter also exited (told once it could run again).
fn all_confirmed(
    killed: &BTreeMap<u32, f64>,
    expect: &Expect,
    t: &Tally,
    survivors: &BTreeSet<u32>,
    exits: &BTreeMap<u32, Exit>,
) -> bool {
    killed.keys().chain(expect.required.keys()).all(|d| {
        // A killed shrink target may be removed as a departure (`departed`), not a failure.
        let m = t.removed_by(*d);
        survivors
            .iter()
            .filter(|s| t.must_confirm(**s, *d))
            .all(|s| m.contains_key(s))
    }) && expect.required.keys().all(|r| exits.contains_key(r))
}

/// After the workload: waits until every op and RELM message is settled and every required
/// confirmation and eviction is in (`true`), or the settling time is over (`false`).
async fn settle(
    args: &ClusterArgs,
    expect: &Expect,
    killed: &BTreeMap<u32, f64>,
    sent: &BTreeMap<u32, u64>,
    (t, rx): (&mut Tally, &mut Lines),
    (procs, exits, start): (&mut Procs, &mut BTreeMap<u32, Exit>, Tick),
    interrupted: &mut Pin<&mut impl Future<Output = ()>>,
) -> Result<bool, CliError> {
    let n = args.nodes;
    let settle =
        Tick::now() + Duration::from_millis(args.link_timeout_ms) + Duration::from_secs(10);
    let mut check = tokio::time::interval(Duration::from_millis(50));
    let settled = loop {
        let survivors = survivors_of(n, killed, t, exits);
        if t.settled(&survivors, sent) && all_confirmed(killed, expect, t, &survivors, exits) {
            break true;
        }
        if Tick::now() >= settle {
            break false;
        }
        tokio::select! {
            m = rx.recv() => match m { Some((r, v)) => t.take(r, &v), None => break false },
            _ = check.tick() => reap(procs, exits, start),
            () = interrupted.as_mut() => return Err(CliError::Failed("interrupted".into())),
        }
    };
    Ok(settled)
}

/// The end of the run: asks the survivors for their `stats`, tells them to quit, waits for
/// every node to exit (killing those that do not) and takes in everything they printed.
async fn wind_down(
    survivors: &BTreeSet<u32>,
    (t, rx): (&mut Tally, &mut Lines),
    (procs, exits, start): (&mut Procs, &mut BTreeMap<u32, Exit>, Tick),
) {
    for s in survivors {
        procs.send(*s, "stats\n").await;
    }
    let stats_end = Tick::now() + Duration::from_secs(3);
    while Tick::now() < stats_end && t.refused.len() < survivors.len() {
        tokio::select! {
            m = rx.recv() => match m { Some((r, v)) => t.take(r, &v), None => break },
            () = tokio::time::sleep_until(stats_end) => {}
        }
    }
    reap(procs, exits, start);
    // What the nodes print from now on is their quitting; what they printed before counts,
    // however late it is read (`Tally::closing_at`).
    t.closing_at = Some(wall_ms());
    for s in survivors {
        procs.send(*s, "quit\n").await;
    }
    let mut final_status = BTreeMap::new();
    let ranks: Vec<u32> = (0..procs.children.len())
        .map(|i| procs.rank_of(i))
        .collect();
    // A quitting node writes out its queued lines first (`node_out::FLUSH_BOUND`). The lines
    // are read while the nodes exit: a node whose lines wait behind a full pipe cannot exit
    // until they are read, and killed it would lose them (2,000 nodes on 16 cores: four
    // survivors, rank 0 among them, killed with everything after 6.3 s into the workload).
    let exit_by = Tick::now() + EXIT_WAIT;
    let mut check = tokio::time::interval(Duration::from_millis(50));
    let mut open = true;
    while final_status.len() < procs.children.len() && Tick::now() < exit_by {
        tokio::select! {
            m = rx.recv(), if open => match m {
                Some((r, v)) => t.take(r, &v),
                None => open = false,
            },
            _ = check.tick() => {
                for (i, c) in procs.children.iter_mut().enumerate() {
                    if let (false, Ok(Some(st))) = (final_status.contains_key(&ranks[i]), c.try_wait()) {
                        final_status.insert(ranks[i], st);
                    }
                }
            }
        }
    }
    for (i, c) in procs.children.iter_mut().enumerate() {
        if !final_status.contains_key(&ranks[i]) {
            tracing::debug!(rank = ranks[i], "did not exit after quit: killed");
            let _ = c.start_kill();
            let _ = c.wait().await;
        }
    }
    // Everything the nodes printed before exiting counts.
    let drained = Tick::now() + Duration::from_secs(2);
    while let Ok(Some((r, v))) = tokio::time::timeout_at(drained, rx.recv()).await {
        t.take(r, &v);
    }
    // A rank evicted at the very end exited after the last look: its status is the final one.
    for r in t.evicted.keys() {
        if let (false, Some(st)) = (exits.contains_key(r), final_status.get(r)) {
            let at_ms = i64::try_from(start.elapsed().as_millis()).unwrap_or(i64::MAX);
            exits.insert(*r, Exit { at_ms, status: *st });
        }
    }
}
