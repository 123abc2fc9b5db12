//! `lifeline cluster`: a real local cluster of `lifeline node` processes on loopback that
//! runs a stream of xcasts from varying origins, kills the given ranks with SIGKILL (and pauses
//! others with SIGSTOP, then SIGCONT), cuts links, blackholes ranks and drops packets with
//! nftables, and reports who noticed, how fast, and whether every survivor delivered every
//! broadcast exactly once.
//!
//! Each rank has its own loopback address on Linux, rank R at `127.0.1.(R+1)` (rank 250 at
//! `127.0.2.1`, and so on; 127.0.0.0/8 is all loopback there, nothing to set up), and the nodes
//! connect from their own addresses, so every packet between two ranks names both and a
//! firewall rule can match one pair; elsewhere every rank is on 127.0.0.1. Ports are picked
//! free by binding port 0; the peers and key files go to a temporary folder removed at the end.
//! Every child is started with `--exit-on-stdin-eof` and killed on the way out (also on Ctrl-C
//! or SIGTERM), so no node outlives the command. The children share the command's stderr and
//! environment, so `RUST_LOG` turns on their diagnostics too.
//!
//! Network faults (`--cut`, `--cut-oneway`, `--blackhole`, `--loss`) are nftables rules in one
//! table per run (see [`crate::nft`]), added at their start and deleted at their end; they need
//! the `nft` binary and root, checked before any node starts. Like a SIGCONT, a fault's end is
//! never skipped: the workload runs until every fault has ended, and `TAIL_MS` (1 s) past the
//! last fault event, so that every survivor can show it went on. A cut for good
//! (`--cut A-B@MS+forever`, also `--cut-oneway`) keeps its rules until the end of the run, and
//! the workload then lasts until 3 s past the gray timeout (10 s) after its start.
//!
//! The nodes run the core's heartbeat failure detector by default (`--no-detect`: without it;
//! `--detect` is accepted and changes nothing). With it, the launcher knows what each fault
//! allows ([`Expect`], the report's `expect`), from the detector's settings ([`silence_rule`]):
//! - eviction *required*: a rank paused (`--stop`) or `--blackhole`d for 1 s or more. It must
//!   be confirmed removed at every survivor within 600 ms of the fault's start
//!   (`evict_ms_max`), told (`evicted`, once it can run again: after SIGCONT, after the
//!   heal) and exit with status 3 (`evictions_required`, each with `ok`);
//! - eviction *allowed*: a rank silent between 200 ms and 1 s, the lossy rank of `--loss`, one
//!   endpoint of a cut for good (or at least the gray timeout long), never both
//!   (`evict_both_ends`);
//! - eviction *forbidden* for every other rank (`evict_forbidden`): bystanders, pauses and
//!   blackholes of at most 200 ms, the endpoints of a shorter cut.
//!
//! Without the detector nothing is expected: every eviction is a false positive.
//!
//! The launcher is the nodes' parent: it sees every exit and its status, whoever caused it.
//! Each rank that exits before the end is attributed: killed by `--kill`, evicted (a live rank
//! the cluster removed: it printed `evicted` and exited with status 3), or exited by itself
//! (with its status or signal, e.g. a SIGKILL from an outside tester). Evicted ranks are
//! listed apart from the dead; those the faults did not require or allow are false positives.
//! What a rank reports after it was removed (its first confirmation by a rank not removed
//! itself, or its `evicted` line) is no evidence against others: a paused rank resumes with a
//! stale view.
//!
//! `pass` holds when: every op between survivors was delivered exactly once and settled
//! (`settled_ms`: no hang), every RELM message between survivors exactly once, every survivor
//! continued, no false positive, every kill was noticed, every required eviction is `ok`, no
//! forbidden eviction and never both ends of a cut, no rank confirmed twice by one survivor
//! (`confirmed_more_than_once`) and, with the detector, every survivor went on within 1 s of
//! each pause's start (`resume_ms`); with `--garbage`, every intruder was refused.
//!
//! With `--transport quic` the launcher generates a cluster CA and one certificate per rank
//! into the run's directory (`certs/`, the layout of `lifeline certs`) and starts every node
//! with `--transport quic --cert-dir DIR --cluster ID`; the report's `transport` says which.
//!
//! Measures:
//! - `detect_ms_max`: per killed rank, the wall time from the SIGKILL to the first survivor's
//!   `link_down` for it; the maximum over kills.
//! - `repair_ms_max`: per killed rank, the time until every survivor got the root's
//!   `failure_confirmed` naming it; the maximum over kills.
//! - `xcast_delivered_exactly_once`: no survivor delivered any op twice; every op started by a
//!   survivor reached every survivor; an op started by a killed rank reached all survivors or
//!   none.
//! - `survivors_continued`: survivors that delivered an op started after the last fault event
//!   (a kill, a SIGCONT, a network fault's start or end).
//! - `resume`: per fault, from its start until every survivor delivered an op started after
//!   it (`resume_ms`: the worst over pauses; `null` without pauses).
//! - `false_positives`: live ranks whose removal was neither required nor allowed, yet some
//!   rank (not removed by then) confirmed them dead or they were evicted; without the
//!   detector, also live ranks some rank reported a link down for (TCP's link timeout is then
//!   the failure detector). With the detector a link down is one link's loss, which the
//!   detector settles: listed in `link_downs_live`, no verdict.
//! - `refused_connections`: handshakes the survivors refused (`--garbage` sends each node
//!   garbage bytes and a wrong-key handshake halfway through; on QUIC garbage datagrams, which
//!   create no connection and are not counted, and three refused clients: another CA, a
//!   wrong rank claim, a rank outside the cluster).
//! - `deaths`: every rank that died before the end other than by eviction, with its cause
//!   (`killed` by `--kill`, or `exited` by itself), `at_ms` into the workload, and its exit
//!   `status` or `signal`; `evicted`: the live ranks the cluster evicted (named by some rank's
//!   `failure_confirmed`, or told `evicted`), with `at_ms`, `confirmed_by` (whose
//!   `failure_confirmed` named it: after a partition each side may confirm the other), when
//!   it was told (`told_ms`, `epoch`), and how it exited (`status`, `signal`; `null` while it
//!   runs). Survivors are the ranks neither killed, nor exited, nor removed (told, or confirmed
//!   by a rank not removed itself); the settling waits for nothing from the others, and an
//!   evicted rank's missed ops are not lost.
//! - `xcast_duplicated`, `xcast_partial`, `xcast_lost`: the ops behind a false
//!   `xcast_delivered_exactly_once` (delivered twice somewhere; reached some survivors but not
//!   all; started by a survivor and not delivered at every survivor).
//! - `net_faults`: each network fault with the times its rules went in (`at_ms`) and came out
//!   (`removed_ms`), and the packets they dropped (`dropped_packets`, the rules' counters);
//!   `link_downs_live`: every link down reported during the run for a peer that did not die
//!   (`rank` lost `peer`, `reason`, `at_ms`); `nft_table`: the run's table (`null` without
//!   network faults); `detect`: whether the nodes ran the heartbeat detector; `workload_ms`:
//!   how long the workload ran.
//!
//! - `relm_*`: with every xcast the origin also sends one reliable message (RELM) to another
//!   live rank, rotating through every destination (all-to-all). `relm_delivered` counts
//!   messages delivered at their destination, `relm_duplicates` extra deliveries, `relm_lost`
//!   messages between two survivors not delivered or never acknowledged to their sender, and
//!   `relm_failed_reported` messages to a killed rank that its sender was told failed.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use clap::Args;
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::mpsc;
use tokio::time::Instant as Tick;
use tracing::Instrument;

use crate::nft::{self, NetKind};
use crate::node_cmd::{wall_ms, TransportKind};
use crate::{write_stdout, CliError};

/// Arguments of `lifeline cluster`.
#[derive(Debug, Args)]
pub(crate) struct ClusterArgs {
    /// Number of node processes (ranks 0..N).
    #[arg(long)]
    nodes: u32,
    /// Tree radix.
    #[arg(long, default_value_t = 8)]
    radix: u32,
    /// Seconds of workload (xcasts), after every node is wired up.
    #[arg(long, value_name = "SECS", default_value_t = 5.0)]
    duration: f64,
    /// Kill rank R with SIGKILL MS milliseconds into the workload (default: a third of the
    /// way). Repeatable.
    #[arg(long = "kill", value_name = "R[@MS]")]
    kills: Vec<String>,
    /// Pause rank R with SIGSTOP MS milliseconds into the workload and resume it with SIGCONT
    /// DUR milliseconds later (a hung process; TCP alone does not notice). Repeatable.
    #[arg(long = "stop", value_name = "R@MS+DUR")]
    stops: Vec<String>,
    /// Drop every packet between ranks A and B, both ways, from MS milliseconds into the
    /// workload for DUR milliseconds (nftables; root); `+forever`: until the end of the run
    /// (the workload then lasts past the gray timeout). Repeatable.
    #[arg(long = "cut", value_name = "A-B@MS+DUR|forever")]
    cuts: Vec<String>,
    /// Drop the packets from rank A to rank B only (B's to A still flow); `+forever` as for
    /// `--cut`. Repeatable.
    #[arg(long = "cut-oneway", value_name = "A-B@MS+DUR|forever")]
    cuts_oneway: Vec<String>,
    /// Drop every packet to and from rank R, silently (no reset: a lost host). Repeatable.
    #[arg(long = "blackhole", value_name = "R@MS+DUR")]
    blackholes: Vec<String>,
    /// Drop PCT percent (1-100) of rank R's packets, both ways, at random. Repeatable.
    #[arg(long = "loss", value_name = "R:PCT@MS+DUR")]
    losses: Vec<String>,
    /// Accepted for compatibility: the nodes run the core's heartbeat failure detector by
    /// default.
    #[arg(long, conflicts_with = "no_detect")]
    #[allow(dead_code)] // read by clap only: it changes nothing
    detect: bool,
    /// Run the nodes without the heartbeat failure detector (`lifeline node --no-detect`):
    /// TCP's link timeout is then their only failure detector, and no eviction is expected.
    #[arg(long)]
    no_detect: bool,
    /// Xcasts started per second (round-robin over live origins).
    #[arg(long, default_value_t = 50)]
    rate: u32,
    /// The nodes' bound on noticing a vanished peer.
    #[arg(long, value_name = "MS", default_value_t = 3000)]
    link_timeout_ms: u64,
    /// Halfway through the workload, attack every node. TCP: a connection sending garbage
    /// bytes and a handshake with the wrong key. QUIC: garbage UDP datagrams, a client with
    /// another CA's certificate, a cluster certificate claiming another rank, and a certificate
    /// of a rank outside the cluster. Each connection must be refused (counted in
    /// `refused_connections`) and the run must still pass.
    #[arg(long)]
    garbage: bool,
    /// The nodes' transport: `tcp` (a cluster key in the run's directory) or `quic` (a cluster
    /// CA and one certificate per rank, generated into the run's directory). Network faults
    /// (`--cut`, `--cut-oneway`, `--blackhole`, `--loss`) match TCP or, with `quic`, UDP.
    #[arg(long, value_enum, default_value_t = TransportKind::Tcp)]
    transport: TransportKind,
    /// JSON: first line lists the nodes, last line is the report.
    #[arg(long)]
    json: bool,
}

/// The nodes' start-up grace (see `lifeline node --startup-grace-ms`): every node listens well
/// within it.
const STARTUP_GRACE: Duration = Duration::from_millis(1500);

struct Kill {
    rank: u32,
    at_ms: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Action {
    Kill,
    Stop,
    Cont,
    /// Network fault `i` of [`Faults::net`] starts (its rules go in).
    NetOn(usize),
    /// It ends (its rules come out).
    NetOff(usize),
}

/// One injected failure: SIGKILL, SIGSTOP or SIGCONT to `rank`, or a network fault starting or
/// ending, at `at_ms` into the workload.
#[derive(Clone, Copy, Debug)]
struct Fault {
    rank: u32,
    at_ms: u64,
    action: Action,
}

/// One network fault and what became of it.
#[derive(Debug)]
struct NetFault {
    /// The flag as given (`--cut 1-4@500+1000`).
    flag: String,
    kind: NetKind,
    /// How long it lasts; `None`: until the end of the run (`+forever`).
    dur_ms: Option<u64>,
    /// Its rules' handles while they are in.
    handles: Vec<u64>,
    /// When its rules went in: the instant, ms into the workload, and the wall time (ms since
    /// the Unix epoch).
    applied: Option<(Tick, u64, f64)>,
    /// When they came out, ms into the workload, and the wall time.
    removed_ms: Option<u64>,
    removed_wall: Option<f64>,
    rules: usize,
    /// Packets its rules dropped (their counters, read just before they came out, or at the
    /// end of the run for a fault that lasts forever).
    dropped: Option<u64>,
}

/// One `--stop R@MS+DUR` as asked.
#[derive(Clone, Copy, Debug)]
struct Pause {
    rank: u32,
    at_ms: u64,
    dur_ms: u64,
}

/// The timeline: process and network faults by time, the network faults, and the pauses.
struct Faults {
    timeline: Vec<Fault>,
    net: Vec<NetFault>,
    pauses: Vec<Pause>,
}

/// Splits `X@MS+DUR` into `X`, `MS`, `DUR`; `X@MS+forever` gives `DUR` `None`.
fn window(s: &str) -> Option<(&str, u64, Option<u64>)> {
    let (x, rest) = s.split_once('@')?;
    let (at, dur) = rest.split_once('+')?;
    let dur = if dur == "forever" {
        None
    } else {
        Some(dur.parse().ok()?)
    };
    Some((x, at.parse().ok()?, dur))
}

/// The same where `+forever` is not accepted.
fn bounded_window(s: &str) -> Option<(&str, u64, u64)> {
    let (x, at, dur) = window(s)?;
    Some((x, at, dur?))
}

/// The network faults, each with its start (ms into the workload).
fn parse_net(args: &ClusterArgs) -> Result<Vec<(NetFault, u64)>, CliError> {
    let n = args.nodes;
    let rank = |flag: &str, s: &str, r: &str, bad: &dyn Fn() -> CliError| {
        let r: u32 = r.parse().map_err(|_| bad())?;
        if r >= n {
            return Err(CliError::Usage(format!(
                "{flag} {s}: rank {r} is not below --nodes {n}"
            )));
        }
        Ok(r)
    };
    let mut net = Vec::new();
    let pairs = [("--cut", &args.cuts), ("--cut-oneway", &args.cuts_oneway)];
    for (flag, specs) in pairs {
        for s in specs {
            let bad =
                || CliError::Usage(format!("{flag} {s}: expected A-B@MS+DUR or A-B@MS+forever"));
            let (ab, at_ms, dur_ms) = window(s).ok_or_else(bad)?;
            let (a, b) = ab.split_once('-').ok_or_else(bad)?;
            let (a, b) = (rank(flag, s, a, &bad)?, rank(flag, s, b, &bad)?);
            if a == b {
                return Err(CliError::Usage(format!(
                    "{flag} {s}: a rank cannot be cut from itself"
                )));
            }
            let kind = if flag == "--cut" {
                NetKind::Cut(a, b)
            } else {
                NetKind::CutOneway(a, b)
            };
            net.push((format!("{flag} {s}"), kind, at_ms, dur_ms));
        }
    }
    for s in &args.blackholes {
        let bad = || CliError::Usage(format!("--blackhole {s}: expected R@MS+DUR"));
        let (r, at_ms, dur_ms) = bounded_window(s).ok_or_else(bad)?;
        let r = rank("--blackhole", s, r, &bad)?;
        net.push((
            format!("--blackhole {s}"),
            NetKind::Blackhole(r),
            at_ms,
            Some(dur_ms),
        ));
    }
    for s in &args.losses {
        let bad = || CliError::Usage(format!("--loss {s}: expected R:PCT@MS+DUR, PCT 1-100"));
        let (rp, at_ms, dur_ms) = bounded_window(s).ok_or_else(bad)?;
        let (r, pct) = rp.split_once(':').ok_or_else(bad)?;
        let r = rank("--loss", s, r, &bad)?;
        let pct: u32 = pct.parse().map_err(|_| bad())?;
        if !(1..=100).contains(&pct) {
            return Err(bad());
        }
        net.push((
            format!("--loss {s}"),
            NetKind::Loss(r, pct),
            at_ms,
            Some(dur_ms),
        ));
    }
    Ok(net
        .into_iter()
        .map(|(flag, kind, at_ms, dur_ms)| {
            let f = NetFault {
                flag,
                kind,
                dur_ms,
                handles: Vec::new(),
                applied: None,
                removed_ms: None,
                removed_wall: None,
                rules: 0,
                dropped: None,
            };
            (f, at_ms)
        })
        .collect())
}

fn parse_faults(args: &ClusterArgs) -> Result<Faults, CliError> {
    let (net, starts): (Vec<NetFault>, Vec<u64>) = parse_net(args)?.into_iter().unzip();
    let (mut timeline, pauses) = parse_process_faults(args)?;
    for (i, (f, at_ms)) in net.iter().zip(starts).enumerate() {
        let rank = match f.kind {
            NetKind::Cut(a, _) | NetKind::CutOneway(a, _) => a,
            NetKind::Blackhole(r) | NetKind::Loss(r, _) => r,
        };
        timeline.push(Fault {
            rank,
            at_ms,
            action: Action::NetOn(i),
        });
        if let Some(dur) = f.dur_ms {
            timeline.push(Fault {
                rank,
                at_ms: at_ms.saturating_add(dur),
                action: Action::NetOff(i),
            });
        }
    }
    timeline.sort_by_key(|f| f.at_ms);
    Ok(Faults {
        timeline,
        net,
        pauses,
    })
}

fn parse_process_faults(args: &ClusterArgs) -> Result<(Vec<Fault>, Vec<Pause>), CliError> {
    let mut pauses = Vec::new();
    let mut faults: Vec<Fault> = parse_kills(args)?
        .into_iter()
        .map(|k| Fault {
            rank: k.rank,
            at_ms: k.at_ms,
            action: Action::Kill,
        })
        .collect();
    for st in &args.stops {
        let bad = || CliError::Usage(format!("--stop {st}: expected R@MS+DUR"));
        let (r, rest) = st.split_once('@').ok_or_else(bad)?;
        let (at, dur) = rest.split_once('+').ok_or_else(bad)?;
        let rank: u32 = r.parse().map_err(|_| bad())?;
        let at_ms: u64 = at.parse().map_err(|_| bad())?;
        let dur: u64 = dur.parse().map_err(|_| bad())?;
        if rank >= args.nodes {
            return Err(CliError::Usage(format!(
                "--stop {st}: rank {rank} is not below --nodes {}",
                args.nodes
            )));
        }
        faults.push(Fault {
            rank,
            at_ms,
            action: Action::Stop,
        });
        faults.push(Fault {
            rank,
            at_ms: at_ms.saturating_add(dur),
            action: Action::Cont,
        });
        pauses.push(Pause {
            rank,
            at_ms,
            dur_ms: dur,
        });
    }
    Ok((faults, pauses))
}

/// Sends `sig` (`-STOP`, `-CONT`) to `pid` with the system's `kill`.
fn signal(pid: Option<u32>, sig: &str) {
    if let Some(pid) = pid {
        let _ = std::process::Command::new("kill")
            .args([sig, &pid.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

fn parse_kills(args: &ClusterArgs) -> Result<Vec<Kill>, CliError> {
    let default_at = (args.duration * 1e3 / 3.0) as u64;
    let mut kills = Vec::new();
    for k in &args.kills {
        let (r, at) = match k.split_once('@') {
            Some((r, at)) => (r, Some(at)),
            None => (k.as_str(), None),
        };
        let bad = || CliError::Usage(format!("--kill {k}: expected R or R@MS"));
        let rank: u32 = r.parse().map_err(|_| bad())?;
        let at_ms = match at {
            Some(a) => a.parse().map_err(|_| bad())?,
            None => default_at,
        };
        if rank >= args.nodes {
            return Err(CliError::Usage(format!(
                "--kill {k}: rank {rank} is not below --nodes {}",
                args.nodes
            )));
        }
        if kills.iter().any(|x: &Kill| x.rank == rank) {
            return Err(CliError::Usage(format!(
                "--kill {k}: rank {rank} killed twice"
            )));
        }
        kills.push(Kill { rank, at_ms });
    }
    if kills.len() as u32 >= args.nodes {
        return Err(CliError::Usage("at least one node must survive".into()));
    }
    kills.sort_by_key(|k| k.at_ms);
    Ok(kills)
}

/// The core's gray timeout (`membership.gray_timeout`, the default the nodes run with): a live
/// rank whose tree link stays cut this long has one endpoint of the link removed (cause:
/// unreachable). A cut shorter than this must evict nobody.
fn gray_timeout_ms() -> u64 {
    lifeline_core::MembershipConfig::default()
        .gray_timeout
        .as_millis()
}

/// How long the workload goes on after the last fault event (a kill, a SIGCONT, a network
/// fault's end), so that every survivor can show it continued.
const TAIL_MS: u64 = 1000;

/// How long past the gray timeout the workload goes on after a cut for good starts: the link
/// is declared down first (the TCP adapter's user timeout, 3 s; with `--transport quic` the
/// idle timeout, link timeout less one keep-alive interval, 2.5 s: sooner, so the same tail
/// covers it), the gray timeout runs from there, and survivors then show they continued.
const GRAY_TAIL_MS: u64 = 6000;

/// Required evictions: confirmed at every survivor within this long of the fault's start.
const EVICT_BOUND_MS: f64 = 600.0;

/// After a pause (`--stop`), every survivor delivers an op started after its start within
/// this long ("the rest continue within 1 s").
const RESUME_BOUND_MS: f64 = 1000.0;

/// The silence rule, from the nodes' detector settings (the core's defaults, which
/// `lifeline node` uses: heartbeat period 100 ms, timeout 300 ms, refutation window 100 ms):
/// `(quiet, loud)` in ms. A rank silent (paused with `--stop`, or `--blackhole`d) for at most
/// `quiet` must not be evicted; for `loud` or longer it must be; in between either is correct.
///
/// - An observer suspects its subject after `timeout` of silence, and the last heartbeat it
///   heard is at most one `period` old when the silence begins, so a silence of at most
///   `timeout - period` (200 ms) is never suspected (and a suspected rank that speaks again
///   still refutes within `refute`): `quiet`.
/// - Every observer of a silent rank reports it at most `period + timeout + refute` (500 ms)
///   after the silence begins; twice that (1000 ms) leaves as long again for the alerts, the
///   coordinator's decision and its confirmation, and a rank silent that long is gone for any
///   practical purpose: `loud`.
fn silence_rule() -> (u64, u64) {
    let d = lifeline_core::DetectConfig::default();
    let (period, timeout, refute) = (
        d.period.as_millis(),
        d.timeout.as_millis(),
        d.refute.as_millis(),
    );
    (
        timeout.saturating_sub(period),
        2 * (period + timeout + refute),
    )
}

/// A fault that requires a rank's eviction.
#[derive(Clone, Copy, Debug)]
enum Cause {
    /// [`Faults::pauses`]`[i]`.
    Stop(usize),
    /// [`Faults::net`]`[i]`.
    Net(usize),
}

/// What the faults let the cluster do to each live rank (with the detector on; without it,
/// nothing: every eviction is a false positive). A rank neither required nor allowed must not
/// be evicted: a bystander, a rank paused or blackholed for at most the quiet time of
/// [`silence_rule`], an endpoint of a cut shorter than the gray timeout.
#[derive(Debug, Default)]
struct Expect {
    /// Rank -> the faults that require its eviction: a pause or a blackhole at least the loud
    /// time of [`silence_rule`] long.
    required: BTreeMap<u32, Vec<Cause>>,
    /// Ranks whose eviction is allowed, not required: a rank paused or blackholed between
    /// the quiet and the loud time, the lossy rank of `--loss`, the endpoints of a cut for
    /// good (or at least the gray timeout long).
    allowed: BTreeSet<u32>,
    /// Pairs of which at most one may be evicted: the endpoints of such a cut.
    one_of: Vec<(u32, u32)>,
}

impl Expect {
    fn new(faults: &Faults, detect: bool) -> Self {
        let mut e = Self::default();
        if !detect {
            return e;
        }
        let (quiet, loud) = silence_rule();
        let mut silent = |rank: u32, dur: u64, cause: Cause| {
            if dur >= loud {
                e.required.entry(rank).or_default().push(cause);
            } else if dur > quiet {
                e.allowed.insert(rank);
            }
        };
        for (i, p) in faults.pauses.iter().enumerate() {
            silent(p.rank, p.dur_ms, Cause::Stop(i));
        }
        for (i, f) in faults.net.iter().enumerate() {
            if let NetKind::Blackhole(r) = f.kind {
                silent(r, f.dur_ms.unwrap_or(u64::MAX), Cause::Net(i));
            }
        }
        for f in &faults.net {
            match f.kind {
                NetKind::Loss(r, _) => {
                    e.allowed.insert(r);
                }
                NetKind::Cut(a, b) | NetKind::CutOneway(a, b)
                    if f.dur_ms.is_none_or(|d| d >= gray_timeout_ms()) =>
                {
                    e.allowed.extend([a, b]);
                    e.one_of.push((a.min(b), a.max(b)));
                }
                _ => {}
            }
        }
        let required = &e.required;
        e.allowed.retain(|r| !required.contains_key(r));
        e
    }

    /// Whether evicting `r` is required or allowed.
    fn may_go(&self, r: u32) -> bool {
        self.required.contains_key(&r) || self.allowed.contains(&r)
    }

    fn json(&self) -> Value {
        let (quiet, loud) = silence_rule();
        json!({
            "evict_required": self.required.keys().collect::<Vec<_>>(),
            "evict_allowed": self.allowed,
            "evict_at_most_one_of": self.one_of.iter().map(|(a, b)| [a, b]).collect::<Vec<_>>(),
            "silent_never_evicted_up_to_ms": quiet,
            "silent_evicted_from_ms": loud,
            "gray_timeout_ms": gray_timeout_ms(),
        })
    }
}

/// How long the workload runs, in ms: `--duration`, or longer so that it goes on `TAIL_MS`
/// after the last fault event and, after a cut for good starts, past the gray timeout.
fn workload_ms(args: &ClusterArgs, faults: &Faults) -> u64 {
    let asked = (args.duration * 1e3).round() as u64;
    let last = faults.timeline.iter().map(|f| f.at_ms).max();
    let forever_start = faults
        .timeline
        .iter()
        .filter(|f| matches!(f.action, Action::NetOn(i) if faults.net[i].dur_ms.is_none()))
        .map(|f| f.at_ms)
        .max();
    [
        Some(asked),
        last.map(|l| l + TAIL_MS),
        forever_start.map(|s| s + gray_timeout_ms() + GRAY_TAIL_MS),
    ]
    .into_iter()
    .flatten()
    .max()
    .unwrap_or(asked)
}

/// The children, the temporary folder and the nftables table; dropping it kills every child
/// that is still running, removes the folder and deletes the table, whatever path the command
/// leaves by.
struct Procs {
    children: Vec<Child>,
    stdins: Vec<Option<ChildStdin>>,
    dir: PathBuf,
    /// Only when network faults were asked for; deleted when dropped (after the children are
    /// killed).
    table: Option<nft::Table>,
}

impl Drop for Procs {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.start_kill();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Procs {
    async fn send(&mut self, rank: u32, line: &str) {
        if let Some(Some(s)) = self.stdins.get_mut(rank as usize) {
            if s.write_all(line.as_bytes()).await.is_err() {
                self.stdins[rank as usize] = None;
            }
        }
    }
}

/// What the nodes reported, and when.
#[derive(Default)]
struct Tally {
    listening: BTreeSet<u32>,
    link_ups: u64,
    /// payload -> origin and the wall time the origin started it.
    started: BTreeMap<String, (u32, f64)>,
    refused_xcasts: u64,
    /// rank -> xcast commands answered (started or refused).
    answers: BTreeMap<u32, u64>,
    /// payload -> rank -> deliveries.
    delivered: BTreeMap<String, BTreeMap<u32, u32>>,
    /// payload -> rank -> wall time of its first delivery there.
    delivered_at: BTreeMap<String, BTreeMap<u32, f64>>,
    /// (confirmed rank, reporter) -> `failure_confirmed` lines of the reporter naming it.
    confirm_counts: BTreeMap<(u32, u32), u32>,
    /// peer -> (first link-down wall time, rank that saw it).
    link_down: BTreeMap<u32, (f64, u32)>,
    /// dead rank -> survivor -> wall time of its failure_confirmed.
    confirmed: BTreeMap<u32, BTreeMap<u32, f64>>,
    /// ranks reported lost by anyone.
    suspected: BTreeSet<u32>,
    /// rank -> handshakes refused (from `stats`).
    refused: BTreeMap<u32, u64>,
    /// The run is over and nodes are quitting: their links going down is no finding.
    closing: bool,
    /// rank -> wall time of its `evicted` line and the epoch it names.
    evicted: BTreeMap<u32, (f64, Option<u64>)>,
    /// Every link down before closing: (wall time, rank, peer, reason).
    link_downs: Vec<(f64, u32, u32, String)>,
    /// RELM payload -> (src, dst, uid).
    relm_started: BTreeMap<String, (u32, u32, u32)>,
    relm_refused: u64,
    /// RELM payload -> ranks that delivered it (one entry per delivery).
    relm_delivered: BTreeMap<String, Vec<u32>>,
    /// (src, dst) -> highest uid acknowledged at src.
    relm_acked: BTreeMap<(u32, u32), u32>,
    /// (src, dst) -> uid ranges reported failed at src.
    relm_failed: BTreeMap<(u32, u32), Vec<(u32, u32)>>,
}

impl Tally {
    fn take(&mut self, rank: u32, v: &Value) {
        let t = v["t_ms"].as_f64().unwrap_or(0.0);
        let u = |k: &str| v[k].as_u64().map(|x| x as u32);
        match v["event"].as_str().unwrap_or("") {
            "listening" => {
                self.listening.insert(rank);
            }
            "link_up" => self.link_ups += 1,
            "evicted" => {
                self.evicted.entry(rank).or_insert((t, v["epoch"].as_u64()));
            }
            "link_down" | "failure_confirmed" if self.closing => {}
            "link_down" => {
                if let Some(p) = u("peer") {
                    let why = v["reason"].as_str().unwrap_or("").to_string();
                    self.link_downs.push((t, rank, p, why));
                    if v["reason"] != "dead" {
                        self.suspected.insert(p);
                    }
                    let e = self.link_down.entry(p).or_insert((t, rank));
                    if t < e.0 {
                        *e = (t, rank);
                    }
                }
            }
            "failure_confirmed" => {
                for r in v["ranks"].as_array().into_iter().flatten() {
                    if let Some(r) = r.as_u64() {
                        self.suspected.insert(r as u32);
                        *self.confirm_counts.entry((r as u32, rank)).or_default() += 1;
                        self.confirmed
                            .entry(r as u32)
                            .or_default()
                            .entry(rank)
                            .or_insert(t);
                    }
                }
            }
            "xcast_started" => {
                *self.answers.entry(rank).or_default() += 1;
                if let Some(p) = v["payload"].as_str() {
                    self.started.insert(p.to_string(), (rank, t));
                }
            }
            "xcast_delivered" => {
                if let Some(p) = v["payload"].as_str() {
                    *self
                        .delivered
                        .entry(p.to_string())
                        .or_default()
                        .entry(rank)
                        .or_default() += 1;
                    self.delivered_at
                        .entry(p.to_string())
                        .or_default()
                        .entry(rank)
                        .or_insert(t);
                }
            }
            "relm_started" => {
                *self.answers.entry(rank).or_default() += 1;
                if let (Some(p), Some(d), Some(uid)) = (v["payload"].as_str(), u("dst"), u("uid")) {
                    self.relm_started.insert(p.to_string(), (rank, d, uid));
                }
            }
            "relm_delivered" => {
                if let Some(p) = v["payload"].as_str() {
                    self.relm_delivered
                        .entry(p.to_string())
                        .or_default()
                        .push(rank);
                }
            }
            "relm_acked" => {
                if let (Some(d), Some(upto)) = (u("dst"), u("upto")) {
                    let a = self.relm_acked.entry((rank, d)).or_insert(upto);
                    *a = (*a).max(upto);
                }
            }
            "relm_failed" => {
                if let (Some(d), Some(first), Some(count)) = (u("dst"), u("first"), u("count")) {
                    self.relm_failed
                        .entry((rank, d))
                        .or_default()
                        .push((first, count));
                }
            }
            "error" => {
                *self.answers.entry(rank).or_default() += 1;
                if v["command"].as_str().is_some_and(|c| c.starts_with("relm")) {
                    self.relm_refused += 1;
                } else {
                    self.refused_xcasts += 1;
                }
            }
            "stats" => {
                let n = v["transport"]["handshakes_refused"].as_u64().unwrap_or(0);
                self.refused.insert(rank, n);
            }
            _ => {}
        }
    }

    /// Every survivor answered every command sent to it, every op that must reach every
    /// survivor has, and nothing reached only some.
    fn settled(&self, survivors: &BTreeSet<u32>, sent: &BTreeMap<u32, u64>) -> bool {
        let answered = survivors.iter().all(|s| {
            self.answers.get(s).copied().unwrap_or(0) >= sent.get(s).copied().unwrap_or(0)
        });
        let everywhere = |p: &str| {
            self.delivered
                .get(p)
                .is_some_and(|d| survivors.iter().all(|s| d.contains_key(s)))
        };
        // Delivered at some survivor: then it must be at all of them.
        let somewhere = |p: &str| {
            self.delivered
                .get(p)
                .is_some_and(|d| d.keys().any(|r| survivors.contains(r)))
        };
        answered
            && self.relm_settled(survivors)
            && self
                .started
                .iter()
                .all(|(p, (o, _))| !survivors.contains(o) || everywhere(p))
            && self
                .delivered
                .keys()
                .all(|p| !somewhere(p) || everywhere(p))
    }
}

impl Tally {
    /// When each rank was removed from the cluster (wall time): told `evicted`, or named by a
    /// `failure_confirmed` of a rank not itself removed by then (killed ranks included). What a
    /// rank reports after it was removed is no evidence against others: a paused rank resumes
    /// with a stale view, a fenced one loses its links.
    fn removed_at(&self) -> BTreeMap<u32, f64> {
        // (wall time, rank, reporter: `None` for its own `evicted` line), in time order.
        let mut seen: Vec<(f64, u32, Option<u32>)> = self
            .evicted
            .iter()
            .map(|(r, (t, _))| (*t, *r, None))
            .chain(
                self.confirmed
                    .iter()
                    .flat_map(|(r, m)| m.iter().map(|(by, t)| (*t, *r, Some(*by)))),
            )
            .collect();
        seen.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut removed = BTreeMap::new();
        for (t, r, by) in seen {
            if by.is_some_and(|by| removed.contains_key(&by)) {
                continue;
            }
            removed.entry(r).or_insert(t);
        }
        removed
    }

    /// Drops every `failure_confirmed` a rank printed after it was removed (see
    /// [`Tally::removed_at`]), and recomputes what was derived from them and from link downs,
    /// leaving out the link downs it reported after its removal (still listed in the report's
    /// `link_downs_live`).
    fn drop_reports_of_the_removed(&mut self) {
        let removed = self.removed_at();
        let counts = |by: u32, t: f64| removed.get(&by).is_none_or(|at| t < *at);
        for m in self.confirmed.values_mut() {
            m.retain(|by, t| counts(*by, *t));
        }
        self.confirmed.retain(|_, m| !m.is_empty());
        self.link_down.clear();
        self.suspected = self.confirmed.keys().copied().collect();
        let valid = self
            .link_downs
            .iter()
            .filter(|(t, by, _, _)| counts(*by, *t));
        for (t, by, p, why) in valid {
            if why != "dead" {
                self.suspected.insert(*p);
            }
            let e = self.link_down.entry(*p).or_insert((*t, *by));
            if *t < e.0 {
                *e = (*t, *by);
            }
        }
    }

    /// Whether the RELM message `(src, dst, uid)` was acknowledged at its sender.
    fn relm_is_acked(&self, src: u32, dst: u32, uid: u32) -> bool {
        self.relm_acked.get(&(src, dst)).is_some_and(|a| uid <= *a)
    }

    /// Whether it was reported failed at its sender.
    fn relm_is_failed(&self, src: u32, dst: u32, uid: u32) -> bool {
        self.relm_failed
            .get(&(src, dst))
            .is_some_and(|v| v.iter().any(|(f, c)| uid >= *f && uid - *f < *c))
    }

    /// Every RELM message from a survivor is settled: delivered and acknowledged when its
    /// destination survived, acknowledged or reported failed when it was killed.
    fn relm_settled(&self, survivors: &BTreeSet<u32>) -> bool {
        self.relm_started.iter().all(|(p, &(s, d, uid))| {
            !survivors.contains(&s)
                || if survivors.contains(&d) {
                    self.relm_delivered.get(p).is_some_and(|v| v.contains(&d))
                        && self.relm_is_acked(s, d, uid)
                } else {
                    self.relm_is_acked(s, d, uid) || self.relm_is_failed(s, d, uid)
                }
        })
    }

    /// (delivered, duplicates, lost, failed_reported).
    fn relm_counts(&self, survivors: &BTreeSet<u32>) -> (usize, usize, usize, usize) {
        let (mut delivered, mut dups, mut lost, mut failed) = (0, 0, 0, 0);
        for (p, &(s, d, uid)) in &self.relm_started {
            let at = self.relm_delivered.get(p).map_or(&[][..], |v| &v[..]);
            let here = at.iter().filter(|r| **r == d).count();
            delivered += usize::from(here > 0);
            dups += here.saturating_sub(1) + at.iter().filter(|r| **r != d).count();
            if survivors.contains(&s) && survivors.contains(&d) {
                lost += usize::from(here == 0 || !self.relm_is_acked(s, d, uid));
            } else if survivors.contains(&s)
                && !self.relm_is_acked(s, d, uid)
                && self.relm_is_failed(s, d, uid)
            {
                failed += 1;
            }
        }
        // Deliveries of payloads nobody reported sending (a sender killed before answering).
        dups += self
            .relm_delivered
            .iter()
            .filter(|(p, _)| !self.relm_started.contains_key(*p))
            .map(|(_, v)| v.len().saturating_sub(1))
            .sum::<usize>();
        (delivered, dups, lost, failed)
    }
}

/// Two intruders at one node: garbage bytes, then a handshake with the wrong key, from the
/// claimed rank's own address (`claim_ip`). Both are refused by the node; nothing here is
/// checked, the node's counters are.
async fn intrude(addr: SocketAddr, rank: u32, claim: u32, claim_ip: IpAddr) {
    use lifeline_core::tree::Rank;
    use lifeline_transport_tcp::{handshake, ClusterKey};
    let bounded = Duration::from_secs(3);
    let connect = |ip: Option<IpAddr>| async move {
        let sock = tokio::net::TcpSocket::new_v4()?;
        if let Some(ip) = ip {
            sock.bind(SocketAddr::new(ip, 0))?;
        }
        sock.connect(addr).await
    };
    if let Ok(Ok(mut s)) = tokio::time::timeout(bounded, connect(None)).await {
        let garbage = b"GET / HTTP/1.1\r\nHost: lifeline\r\n\r\n-- not a lifeline handshake --";
        let _ = s.write_all(garbage).await;
        let mut buf = [0u8; 64];
        let _ =
            tokio::time::timeout(bounded, tokio::io::AsyncReadExt::read(&mut s, &mut buf)).await;
    }
    if let (Ok(Ok(mut s)), Ok(key)) = (
        tokio::time::timeout(bounded, connect(Some(claim_ip))).await,
        ClusterKey::from_secret(b"not the cluster key"),
    ) {
        // Claims to be a real rank from its real address, without the key.
        let _ = tokio::time::timeout(
            bounded,
            handshake::dial(
                &mut s,
                &key,
                Rank(claim),
                Rank(rank),
                lifeline_core::Class::Control,
            ),
        )
        .await;
    }
}

/// QUIC's intruders at every node (`eps`), from `from`: garbage UDP datagrams (no QUIC
/// packet: dropped, nothing counted), then three clients, each refused and counted: another
/// CA's certificate for rank 0 (`handshakes_failed`), rank 0's certificate claiming rank 1
/// (`wrong_rank`), and the certificate of rank `n`, outside the cluster (`wrong_address`).
/// From a dead rank's exact address they reach those checks; from any other address the
/// acceptor refuses them first, as strangers. Nothing is checked here; the nodes' counters
/// are.
async fn intrude_quic(eps: Vec<SocketAddr>, certs: PathBuf, cluster: String, from: SocketAddr) {
    use lifeline_core::tree::Rank;
    use lifeline_core::Class;
    use lifeline_transport_quic::{probe, probe_endpoint, ClusterCa, ClusterId, RankIdentity};
    let bounded = Duration::from_secs(3);
    let n = eps.len() as u32;
    if let Ok(s) = tokio::net::UdpSocket::bind(SocketAddr::new(rank_ip(0), 0)).await {
        let garbage = b"GET / HTTP/1.1\r\nHost: lifeline\r\n\r\n-- not a QUIC packet --";
        for a in &eps {
            for _ in 0..4 {
                let _ = s.send_to(garbage, a).await;
            }
        }
    }
    let Ok(id) = ClusterId::new(&cluster) else {
        return;
    };
    let not_after = std::time::SystemTime::now() + Duration::from_secs(3600);
    let foreign = ClusterCa::generate(id.clone(), not_after).and_then(|ca| ca.identity(Rank(0)));
    let ours = |r: u32| RankIdentity::load(&certs, Rank(r), &id);
    let clients = [
        (foreign, Rank(0)),
        (ours(0), Rank(1 % n)),
        (ours(n), Rank(n)),
    ];
    let Ok(ep) = probe_endpoint(from) else {
        return;
    };
    // One task per target (a dead rank's probes wait out their bound), sharing the endpoint.
    let clients = std::sync::Arc::new(clients);
    let mut tasks = Vec::new();
    for (r, a) in eps.iter().enumerate() {
        let (ep, clients, id, a) = (ep.clone(), clients.clone(), id.clone(), *a);
        tasks.push(tokio::spawn(async move {
            let forged = [1u8, 1, 0, 0, 0, 0];
            for (cert, claim) in clients.iter() {
                if let Ok(cert) = cert {
                    let to = Rank(r as u32);
                    let _ =
                        probe(&ep, cert, &id, *claim, to, a, Class::Data, &forged, bounded).await;
                }
            }
        }));
    }
    for t in tasks {
        let _ = t.await;
    }
}

/// Ranks that get their own loopback address (127.0.1.1 .. 127.0.254.250).
const MAX_NODES: u32 = 250 * 254;

/// Rank `r`'s loopback address: `127.0.1.(r+1)` for ranks 0-249, then `127.0.2.1`, and so on
/// (Linux answers on all of 127.0.0.0/8); elsewhere 127.0.0.1 for every rank.
fn rank_ip(r: u32) -> IpAddr {
    if cfg!(target_os = "linux") {
        IpAddr::V4(Ipv4Addr::new(
            127,
            0,
            (1 + r / 250) as u8,
            (1 + r % 250) as u8,
        ))
    } else {
        IpAddr::V4(Ipv4Addr::LOCALHOST)
    }
}

/// Every rank's listening endpoint: its own address and a port free there (found by binding
/// port 0: a UDP port for QUIC, a TCP port otherwise).
fn endpoints(n: u32, transport: TransportKind) -> Result<Vec<SocketAddr>, CliError> {
    if transport == TransportKind::Quic {
        let ss: Vec<std::net::UdpSocket> = (0..n)
            .map(|r| std::net::UdpSocket::bind((rank_ip(r), 0)))
            .collect::<Result<_, _>>()
            .map_err(|e| CliError::Failed(format!("finding free ports: {e}")))?;
        return ss
            .iter()
            .map(std::net::UdpSocket::local_addr)
            .collect::<Result<_, _>>()
            .map_err(|e| CliError::Failed(format!("finding free ports: {e}")));
    }
    let ls: Vec<std::net::TcpListener> = (0..n)
        .map(|r| std::net::TcpListener::bind((rank_ip(r), 0)))
        .collect::<Result<_, _>>()
        .map_err(|e| CliError::Failed(format!("finding free ports: {e}")))?;
    ls.iter()
        .map(std::net::TcpListener::local_addr)
        .collect::<Result<_, _>>()
        .map_err(|e| CliError::Failed(format!("finding free ports: {e}")))
}

/// QUIC: a cluster CA for this run and a certificate per rank (and one for rank `n`, outside
/// the cluster, for `--garbage`), written to `DIR/certs` (the CA key stays there, with the
/// launcher); returns the directory and the cluster id.
fn quic_certs(dir: &std::path::Path, n: u32) -> Result<(PathBuf, String), CliError> {
    use lifeline_transport_quic::{ClusterCa, ClusterId};
    let failed = |e: lifeline_transport_quic::IdentityError| CliError::Failed(e.to_string());
    let id = format!("cluster-{}", std::process::id());
    let cluster = ClusterId::new(&id).map_err(failed)?;
    let not_after = std::time::SystemTime::now() + Duration::from_secs(86_400);
    let ca = ClusterCa::generate(cluster, not_after).map_err(failed)?;
    let certs = dir.join("certs");
    ca.write(&certs).map_err(failed)?;
    // Rank n is outside the cluster: its certificate is the `--garbage` intruders'.
    for r in 0..=n {
        let issued = ca.issue(lifeline_core::tree::Rank(r)).map_err(failed)?;
        issued.write(&certs).map_err(failed)?;
    }
    Ok((certs, id))
}

fn secret() -> Vec<u8> {
    let mut b = vec![0u8; 32];
    let urandom = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut b));
    if urandom.is_err() {
        b = format!("{}-{}", std::process::id(), wall_ms()).into_bytes();
    }
    b
}

/// Runs `lifeline cluster`.
pub(crate) fn run(args: &ClusterArgs) -> Result<(), CliError> {
    if args.nodes < 2 || args.nodes > MAX_NODES {
        return Err(CliError::Usage(format!(
            "--nodes must be in 2..={MAX_NODES}"
        )));
    }
    if !(args.duration > 0.0 && args.duration <= 3600.0) || args.rate == 0 {
        return Err(CliError::Usage(
            "--duration must be in (0, 3600] and --rate positive".into(),
        ));
    }
    let faults = parse_faults(args)?;
    crate::init_tracing();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::Failed(format!("starting the runtime: {e}")))?;
    let span = tracing::info_span!("cluster", nodes = args.nodes);
    rt.block_on(cluster(args, faults).instrument(span))
}

async fn cluster(args: &ClusterArgs, faults: Faults) -> Result<(), CliError> {
    let dir = std::env::temp_dir().join(format!("lifeline-cluster-{}", std::process::id()));
    std::fs::create_dir_all(&dir)
        .map_err(|e| CliError::Failed(format!("creating {}: {e}", dir.display())))?;
    let mut procs = Procs {
        children: Vec::new(),
        stdins: Vec::new(),
        dir,
        table: None,
    };
    let result = drive(args, faults, &mut procs).await;
    // Whatever happened (Ctrl-C included), every child is killed and reaped; dropping `procs`
    // then deletes the nftables table.
    for c in &mut procs.children {
        let _ = c.start_kill();
        let _ = tokio::time::timeout(Duration::from_secs(2), c.wait()).await;
    }
    result
}

/// How a rank's process ended, as its parent saw it.
#[derive(Clone, Copy, Debug)]
struct Exit {
    /// Milliseconds into the workload it was noticed (within one workload tick, or 50 ms
    /// after the workload; 0 for an exit before it).
    at_ms: i64,
    status: std::process::ExitStatus,
}

/// The name of signal `sig` (the usual ones; others by number).
fn signal_name(sig: i32) -> String {
    let name = match sig {
        1 => "SIGHUP",
        2 => "SIGINT",
        3 => "SIGQUIT",
        6 => "SIGABRT",
        9 => "SIGKILL",
        11 => "SIGSEGV",
        13 => "SIGPIPE",
        15 => "SIGTERM",
        _ => return format!("signal {sig}"),
    };
    name.to_string()
}

/// `(status, signal)` of an exit, for the report.
fn exit_fields(st: Option<std::process::ExitStatus>) -> (Option<i32>, Option<String>) {
    let Some(st) = st else {
        return (None, None);
    };
    #[cfg(unix)]
    let sig = std::os::unix::process::ExitStatusExt::signal(&st).map(signal_name);
    #[cfg(not(unix))]
    let sig = None;
    (st.code(), sig)
}

/// The same in words.
fn exit_words(st: Option<std::process::ExitStatus>) -> String {
    match exit_fields(st) {
        (_, Some(sig)) => format!("killed by {sig}"),
        (Some(c), _) => format!("exited with status {c}"),
        (None, None) => "still running".into(),
    }
}

/// Records every child that exited since the last call (and closes its stdin).
fn reap(procs: &mut Procs, exits: &mut BTreeMap<u32, Exit>, start: Tick) {
    for (r, c) in procs.children.iter_mut().enumerate() {
        let r = r as u32;
        if exits.contains_key(&r) {
            continue;
        }
        if let Ok(Some(status)) = c.try_wait() {
            let at_ms = i64::try_from(start.elapsed().as_millis()).unwrap_or(i64::MAX);
            tracing::debug!(rank = r, ?status, at_ms, "node exited");
            exits.insert(r, Exit { at_ms, status });
            procs.stdins[r as usize] = None;
        }
    }
}

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
struct Paused {
    rank: u32,
    /// Its SIGSTOP, ms into the workload and wall time.
    at_ms: u64,
    wall: f64,
    /// How long it lasted (0 until its SIGCONT).
    for_ms: u64,
    /// The `--stop` it is ([`Faults::pauses`]).
    asked: usize,
}

async fn drive(args: &ClusterArgs, faults: Faults, procs: &mut Procs) -> Result<(), CliError> {
    let n = args.nodes;
    let detect = !args.no_detect;
    let expect = Expect::new(&faults, detect);
    let work_ms = workload_ms(args, &faults);
    let Faults {
        timeline: faults,
        mut net,
        pauses: asked_pauses,
    } = faults;
    // Ctrl-C and SIGTERM are caught from here on, before any table or process exists, so
    // either ends the run through the same clean-up.
    #[cfg(unix)]
    let (mut sigint, mut sigterm) = {
        use tokio::signal::unix::{signal, SignalKind};
        let on =
            |k| signal(k).map_err(|e| CliError::Failed(format!("installing signal handlers: {e}")));
        (on(SignalKind::interrupt())?, on(SignalKind::terminate())?)
    };
    let interrupted = async {
        #[cfg(unix)]
        tokio::select! {
            _ = sigint.recv() => {}
            _ = sigterm.recv() => {}
        }
        #[cfg(not(unix))]
        let _ = tokio::signal::ctrl_c().await;
    };
    tokio::pin!(interrupted);

    let dir = procs.dir.clone();
    let eps = endpoints(n, args.transport)?;
    if !net.is_empty() {
        // Checked before any node starts: without nft or root, nothing runs.
        procs.table = Some(nft::Table::create(
            &eps,
            "--cut, --cut-oneway, --blackhole and --loss",
        )?);
    }
    let peers: String = eps
        .iter()
        .enumerate()
        .map(|(r, a)| format!("{r} {a}\n"))
        .collect();
    let write = |name: &str, bytes: &[u8]| {
        let path = dir.join(name);
        std::fs::write(&path, bytes)
            .map(|()| path)
            .map_err(|e| CliError::Failed(format!("writing {name}: {e}")))
    };
    let peers_file = write("peers", peers.as_bytes())?;
    let key_file = write("key", &secret())?;
    let quic = match args.transport {
        TransportKind::Quic => Some(quic_certs(&procs.dir, n)?),
        TransportKind::Tcp => None,
    };
    let exe = std::env::current_exe()
        .map_err(|e| CliError::Failed(format!("finding the lifeline binary: {e}")))?;

    let (tx, mut rx) = mpsc::channel::<(u32, Value)>(4096);
    let mut pids = Vec::new();
    let spawned = Tick::now();
    for r in 0..n {
        let mut cmd = Command::new(&exe);
        cmd.arg("node")
            .args(["--rank", &r.to_string()])
            .arg("--peers")
            .arg(&peers_file)
            .arg("--key-file")
            .arg(&key_file)
            .args(["--radix", &args.radix.to_string()])
            .args(["--link-timeout-ms", &args.link_timeout_ms.to_string()])
            .args(["--startup-grace-ms", &STARTUP_GRACE.as_millis().to_string()])
            .arg("--exit-on-stdin-eof");
        if args.no_detect {
            cmd.arg("--no-detect");
        }
        if let Some((certs, cluster)) = &quic {
            cmd.args(["--transport", "quic", "--cluster", cluster])
                .arg("--cert-dir")
                .arg(certs);
        }
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| CliError::Failed(format!("starting node {r}: {e}")))?;
        pids.push(child.id().unwrap_or(0));
        tracing::debug!(rank = r, pid = child.id(), addr = %eps[r as usize], "node started");
        let out = child.stdout.take();
        procs.stdins.push(child.stdin.take());
        procs.children.push(child);
        let tx = tx.clone();
        if let Some(out) = out {
            tokio::spawn(async move {
                let mut lines = BufReader::new(out).lines();
                while let Ok(Some(l)) = lines.next_line().await {
                    if let Ok(v) = serde_json::from_str::<Value>(&l) {
                        if tx.send((r, v)).await.is_err() {
                            break;
                        }
                    }
                }
            });
        }
    }
    drop(tx);

    let mut t = Tally::default();

    // Wiring: every node listening and every tree link up at both ends.
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
            () = &mut interrupted => return Err(CliError::Failed("interrupted".into())),
        }
    }
    tracing::debug!(link_ends = t.link_ups, "wired up");
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

    // The workload starts once the nodes' start-up grace is over, so a dial refused by a
    // killed rank is given up quickly.
    let ready = spawned + STARTUP_GRACE;
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
    let mut killed: BTreeMap<u32, f64> = BTreeMap::new();
    let mut killed_at_ms: BTreeMap<u32, u128> = BTreeMap::new();
    let mut exits: BTreeMap<u32, Exit> = BTreeMap::new();
    let mut stopped: BTreeSet<u32> = BTreeSet::new();
    let mut pauses: Vec<Paused> = Vec::new();
    let mut stop_at: BTreeMap<u32, (Tick, u64)> = BTreeMap::new();
    let mut next = 0usize;
    let mut k = 0u64;
    let mut origin = 0u32;
    let mut sent: BTreeMap<u32, u64> = BTreeMap::new();
    let mut attack = args
        .garbage
        .then(|| start + Duration::from_secs_f64(args.duration / 2.0));
    // Runs until the workload is over and every fault was injected (a SIGCONT or a fault's end
    // is never lost).
    while Tick::now() < end || next < faults.len() {
        tokio::select! {
            m = rx.recv() => if let Some((r, v)) = m { t.take(r, &v) },
            _ = tick.tick() => {
                reap(procs, &mut exits, start);
                while next < faults.len() && due(&faults[next], start, &stop_at, &net) {
                    let f = faults[next];
                    next += 1;
                    let r = f.rank;
                    let pid = procs.children.get(r as usize).and_then(Child::id);
                    tracing::debug!(rank = r, pid, action = ?f.action, at_ms = f.at_ms, "fault");
                    match f.action {
                        Action::Kill => {
                            if let Some(c) = procs.children.get_mut(r as usize) {
                                let _ = c.start_kill(); // SIGKILL
                            }
                            killed.insert(r, wall_ms());
                            killed_at_ms.insert(r, start.elapsed().as_millis());
                            procs.stdins[r as usize] = None;
                        }
                        Action::Stop => {
                            signal(pid, "-STOP");
                            stopped.insert(r);
                            stop_at.insert(r, (Tick::now(), f.at_ms));
                            let asked = asked_pauses
                                .iter()
                                .enumerate()
                                .position(|(i, p)| {
                                    p.rank == r
                                        && p.at_ms == f.at_ms
                                        && !pauses.iter().any(|q| q.asked == i)
                                })
                                .unwrap_or(usize::MAX);
                            pauses.push(Paused {
                                rank: r,
                                at_ms: start.elapsed().as_millis() as u64,
                                wall: wall_ms(),
                                for_ms: 0,
                                asked,
                            });
                        }
                        Action::Cont => {
                            signal(pid, "-CONT");
                            stopped.remove(&r);
                            // Measured from its own instant: subtracting two truncated
                            // millisecond marks could report 499 for a 500 ms pause.
                            let held = stop_at.remove(&r).map_or(0, |(t, _)| t.elapsed().as_millis());
                            if let Some(p) = pauses.iter_mut().rev().find(|p| p.rank == r) {
                                p.for_ms = held as u64;
                            }
                        }
                        Action::NetOn(i) => {
                            let Some(table) = procs.table.as_ref() else { continue };
                            let f = &mut net[i];
                            let proto = match args.transport {
                                TransportKind::Tcp => nft::Proto::Tcp,
                                TransportKind::Quic => nft::Proto::Udp,
                            };
                            let rules = nft::rules(f.kind, &eps, proto);
                            f.handles = table.add(&rules).await.map_err(|e| {
                                CliError::Failed(format!("{}: nft: {e}", f.flag))
                            })?;
                            f.rules = rules.len();
                            f.applied = Some((
                                Tick::now(),
                                start.elapsed().as_millis() as u64,
                                wall_ms(),
                            ));
                            tracing::debug!(fault = f.flag, handles = ?f.handles, "rules in");
                        }
                        Action::NetOff(i) => {
                            let Some(table) = procs.table.as_ref() else { continue };
                            let f = &mut net[i];
                            f.dropped = table.dropped(&f.handles).await.ok();
                            table.delete(&f.handles).await.map_err(|e| {
                                CliError::Failed(format!("{}: nft: {e}", f.flag))
                            })?;
                            f.handles.clear();
                            f.removed_ms = Some(start.elapsed().as_millis() as u64);
                            f.removed_wall = Some(wall_ms());
                            tracing::debug!(fault = f.flag, "rules out");
                        }
                    }
                }
                if attack.is_some_and(|at| Tick::now() >= at) {
                    attack = None;
                    if let Some((certs, cluster)) = &quic {
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
                if Tick::now() < end {
                    // Ranks that are gone (killed, exited, evicted or confirmed removed) are
                    // neither origins nor destinations.
                    let gone: BTreeSet<u32> = killed
                        .keys()
                        .chain(exits.keys())
                        .copied()
                        .chain(t.removed_at().into_keys())
                        .collect();
                    for _ in 0..n {
                        origin = (origin + 1) % n;
                        if !gone.contains(&origin) && !stopped.contains(&origin) {
                            break;
                        }
                    }
                    if !gone.contains(&origin) && !stopped.contains(&origin) {
                        procs.send(origin, &format!("xcast 16 c{k}\n")).await;
                        *sent.entry(origin).or_default() += 1;
                        // All-to-all RELM: the destination rotates through the other ranks.
                        let dst = (1..n)
                            .map(|i| (origin + 1 + (k as u32 + i) % (n - 1).max(1)) % n)
                            .find(|d| *d != origin && !gone.contains(d));
                        if let Some(dst) = dst {
                            procs.send(origin, &format!("relm {dst} 16 m{k}\n")).await;
                            *sent.entry(origin).or_default() += 1;
                        }
                        k += 1;
                    }
                }
            }
            () = &mut interrupted => return Err(CliError::Failed("interrupted".into())),
        }
    }
    // Survivors: the ranks neither killed, nor exited, nor evicted (told, or confirmed
    // removed by a rank not removed itself) so far. The settling waits for nothing from the
    // others.
    let survivors_of = |t: &Tally, exits: &BTreeMap<u32, Exit>| -> BTreeSet<u32> {
        let removed = t.removed_at();
        (0..n)
            .filter(|r| {
                !killed.contains_key(r) && !exits.contains_key(r) && !removed.contains_key(r)
            })
            .collect()
    };
    // Every killed rank, and every rank whose eviction is required, confirmed at every
    // survivor; the latter also exited (told once it could run again).
    let all_confirmed = |t: &Tally, survivors: &BTreeSet<u32>, exits: &BTreeMap<u32, Exit>| {
        killed.keys().chain(expect.required.keys()).all(|d| {
            t.confirmed
                .get(d)
                .is_some_and(|m| survivors.iter().all(|s| m.contains_key(s)))
        }) && expect.required.keys().all(|r| exits.contains_key(r))
    };
    let settle =
        Tick::now() + Duration::from_millis(args.link_timeout_ms) + Duration::from_secs(10);
    let mut check = tokio::time::interval(Duration::from_millis(50));
    let settled = loop {
        let survivors = survivors_of(&t, &exits);
        if t.settled(&survivors, &sent) && all_confirmed(&t, &survivors, &exits) {
            break true;
        }
        if Tick::now() >= settle {
            break false;
        }
        tokio::select! {
            m = rx.recv() => match m { Some((r, v)) => t.take(r, &v), None => break false },
            _ = check.tick() => reap(procs, &mut exits, start),
            () = &mut interrupted => return Err(CliError::Failed("interrupted".into())),
        }
    };
    let settled_ms = start.elapsed().as_millis() as u64;
    // The counters of the rules still in (a cut for good), which stay until the end.
    if let Some(table) = procs.table.as_ref() {
        for f in net.iter_mut().filter(|f| !f.handles.is_empty()) {
            f.dropped = table.dropped(&f.handles).await.ok();
        }
    }
    reap(procs, &mut exits, start);
    let survivors = survivors_of(&t, &exits);
    for s in &survivors {
        procs.send(*s, "stats\n").await;
    }
    let stats_end = Tick::now() + Duration::from_secs(3);
    while Tick::now() < stats_end && t.refused.len() < survivors.len() {
        tokio::select! {
            m = rx.recv() => match m { Some((r, v)) => t.take(r, &v), None => break },
            () = tokio::time::sleep_until(stats_end) => {}
        }
    }
    reap(procs, &mut exits, start);
    t.closing = true;
    for s in &survivors {
        procs.send(*s, "quit\n").await;
    }
    let mut final_status = BTreeMap::new();
    for (r, c) in procs.children.iter_mut().enumerate() {
        match tokio::time::timeout(Duration::from_secs(2), c.wait()).await {
            Ok(Ok(st)) => {
                final_status.insert(r as u32, st);
            }
            _ => {
                let _ = c.start_kill();
                let _ = c.wait().await;
            }
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
    t.drop_reports_of_the_removed();
    let outcome = Outcome {
        start_wall,
        exits,
        net,
        table: procs.table.as_ref().map(|t| t.name().to_string()),
        pauses,
        asked_pauses,
        expect,
        detect,
        work_ms,
        settled: settled.then_some(settled_ms),
    };
    report(args, &t, &killed, &killed_at_ms, &survivors, k, &outcome)
}

/// What the report adds to the kills and pauses: exits, network faults, the table.
struct Outcome {
    /// Wall time (ms since the Unix epoch) of the workload's start.
    start_wall: f64,
    exits: BTreeMap<u32, Exit>,
    net: Vec<NetFault>,
    table: Option<String>,
    /// The pauses as they happened, and as asked.
    pauses: Vec<Paused>,
    asked_pauses: Vec<Pause>,
    expect: Expect,
    /// Whether the nodes ran the heartbeat detector.
    detect: bool,
    /// How long the workload ran (ms).
    work_ms: u64,
    /// When every survivor had answered every command, every op was settled and every
    /// required confirmation and eviction was in, ms into the workload; `None`: not within the
    /// settling time (a hang).
    settled: Option<u64>,
}

/// How a rank left the cluster before the end.
#[derive(Debug)]
struct Gone {
    rank: u32,
    /// `killed` (by `--kill`), `exited` (by itself), `evicted` (a live rank removed).
    cause: &'static str,
    /// Ms into the workload: the kill, the exit, or (evicted) the first `failure_confirmed`
    /// naming it or its own `evicted` line, whichever came first.
    at_ms: i64,
    /// Evicted: when it printed `evicted` (it was told), ms into the workload.
    told_ms: Option<i64>,
    /// Its exit status, if it exited before the end.
    status: Option<std::process::ExitStatus>,
    /// Evicted and told: the epoch it was told.
    epoch: Option<u64>,
    /// Evicted: the ranks whose `failure_confirmed` named it (after a partition each side may
    /// confirm the other: this says whose view it is).
    confirmed_by: Vec<u32>,
}

impl Gone {
    fn json(&self) -> Value {
        let (status, signal) = exit_fields(self.status);
        let mut v = json!({"rank": self.rank, "at_ms": self.at_ms, "status": status,
                           "signal": signal});
        if self.cause == "evicted" {
            v["told_ms"] = json!(self.told_ms);
            v["epoch"] = json!(self.epoch);
            v["confirmed_by"] = json!(self.confirmed_by);
        } else {
            v["cause"] = json!(self.cause);
        }
        v
    }
}

/// Attributes every rank that left: `(deaths, evicted)`. A rank killed by `--kill` is a death
/// whatever it printed. A rank that exited without being told it was evicted (no `evicted`
/// line, a status other than 3) died by itself, e.g. an outside tester's SIGKILL. A live rank
/// that a `failure_confirmed` named, or that was told it was evicted, is evicted, whether it
/// then exited or is still running.
fn attribute(t: &Tally, killed_at_ms: &BTreeMap<u32, u128>, o: &Outcome) -> (Vec<Gone>, Vec<Gone>) {
    let into = |wall: f64| (wall - o.start_wall).round() as i64;
    let evicted_status = Some(i32::from(crate::EXIT_EVICTED));
    let mut deaths = Vec::new();
    let mut evicted = Vec::new();
    let ranks: BTreeSet<u32> = killed_at_ms
        .keys()
        .chain(o.exits.keys())
        .chain(t.evicted.keys())
        .chain(t.confirmed.keys())
        .copied()
        .collect();
    for r in ranks {
        let exit = o.exits.get(&r);
        let status = exit.map(|e| e.status);
        let told = t.evicted.get(&r);
        if let Some(at) = killed_at_ms.get(&r) {
            deaths.push(Gone {
                rank: r,
                cause: "killed",
                at_ms: i64::try_from(*at).unwrap_or(i64::MAX),
                told_ms: None,
                status,
                epoch: None,
                confirmed_by: Vec::new(),
            });
        } else if let (Some(e), None) = (exit, told) {
            if e.status.code() != evicted_status {
                deaths.push(Gone {
                    rank: r,
                    cause: "exited",
                    at_ms: e.at_ms,
                    told_ms: None,
                    status,
                    epoch: None,
                    confirmed_by: Vec::new(),
                });
                continue;
            }
        }
        if killed_at_ms.contains_key(&r) {
            continue;
        }
        let confirmed = t
            .confirmed
            .get(&r)
            .and_then(|m| m.values().copied().reduce(f64::min));
        let first = [confirmed, told.map(|x| x.0)]
            .into_iter()
            .flatten()
            .reduce(f64::min);
        let at_ms = first.map_or_else(|| exit.map_or(0, |e| e.at_ms), into);
        evicted.push(Gone {
            rank: r,
            cause: "evicted",
            at_ms,
            told_ms: told.map(|x| into(x.0)),
            status,
            epoch: told.and_then(|x| x.1),
            confirmed_by: t
                .confirmed
                .get(&r)
                .map(|m| m.keys().copied().collect())
                .unwrap_or_default(),
        });
    }
    (deaths, evicted)
}

/// One eviction the faults required, and how it went.
struct Required {
    rank: u32,
    /// Ms from the start of its fault until every survivor confirmed it removed (`None`: not
    /// at every survivor).
    evict_ms: Option<f64>,
    /// When it printed `evicted`, ms into the workload.
    told_ms: Option<i64>,
    status: Option<std::process::ExitStatus>,
}

impl Required {
    /// Confirmed at every survivor within [`EVICT_BOUND_MS`], told, and exited with status 3
    /// (`evicted`).
    fn ok(&self) -> bool {
        self.evict_ms.is_some_and(|ms| ms <= EVICT_BOUND_MS)
            && self.told_ms.is_some()
            && self.status.and_then(|s| s.code()) == Some(i32::from(crate::EXIT_EVICTED))
    }

    fn json(&self) -> Value {
        let (status, signal) = exit_fields(self.status);
        json!({"rank": self.rank, "evict_ms": self.evict_ms.map(|x| x.round()),
               "told_ms": self.told_ms, "status": status, "signal": signal, "ok": self.ok()})
    }
}

/// One fault's start and how long until every survivor delivered an op started after it.
struct Resume {
    flag: String,
    /// The fault's start, ms into the workload.
    at_ms: i64,
    /// A pause (`--stop`): [`RESUME_BOUND_MS`] applies.
    stop: bool,
    /// `None`: some survivor delivered no op started after it.
    ms: Option<f64>,
}

/// The evictions checked against [`Expect`], and the resumption after each fault.
struct Evictions {
    required: Vec<Required>,
    /// Evicted ranks whose eviction was neither required nor allowed.
    forbidden: Vec<u32>,
    /// Both endpoints of a cut for good evicted.
    both_ends: Vec<(u32, u32)>,
    resume: Vec<Resume>,
    /// With the detector on, the pauses' resumption is checked.
    detect: bool,
}

impl Evictions {
    fn ok(&self) -> bool {
        self.required.iter().all(Required::ok)
            && self.forbidden.is_empty()
            && self.both_ends.is_empty()
            && (!self.detect
                || self
                    .resume
                    .iter()
                    .filter(|r| r.stop)
                    .all(|r| r.ms.is_some_and(|ms| ms <= RESUME_BOUND_MS)))
    }

    /// The worst of `xs`; `None` if there are none or one is missing.
    fn worst(xs: impl Iterator<Item = Option<f64>>) -> Option<f64> {
        let mut any = false;
        let m = xs
            .inspect(|_| any = true)
            .try_fold(0.0f64, |m, x| x.map(|x| m.max(x)));
        m.filter(|_| any).map(f64::round)
    }

    fn evict_ms_max(&self) -> Option<f64> {
        Self::worst(self.required.iter().map(|r| r.evict_ms))
    }

    /// The slowest resumption after a pause.
    fn resume_ms(&self) -> Option<f64> {
        Self::worst(self.resume.iter().filter(|r| r.stop).map(|r| r.ms))
    }
}

/// Checks every eviction against the expectations and measures how the survivors resumed
/// after each fault.
fn evictions(
    t: &Tally,
    killed: &BTreeMap<u32, f64>,
    survivors: &BTreeSet<u32>,
    evicted: &[Gone],
    o: &Outcome,
) -> Evictions {
    let e = &o.expect;
    let into = |wall: f64| (wall - o.start_wall).round() as i64;
    // The wall time each fault requiring an eviction started.
    let started = |c: &Cause| match *c {
        Cause::Stop(i) => o.pauses.iter().find(|p| p.asked == i).map(|p| p.wall),
        Cause::Net(i) => o.net[i].applied.map(|a| a.2),
    };
    let required = e
        .required
        .iter()
        .map(|(r, causes)| {
            let from = causes.iter().filter_map(started).reduce(f64::min);
            let m = t.confirmed.get(r);
            let everywhere = m.is_some_and(|m| survivors.iter().all(|s| m.contains_key(s)));
            let last = m.and_then(|m| {
                survivors
                    .iter()
                    .filter_map(|s| m.get(s))
                    .copied()
                    .reduce(f64::max)
            });
            let g = evicted.iter().find(|g| g.rank == *r);
            Required {
                rank: *r,
                evict_ms: match (from, last) {
                    (Some(from), Some(last)) if everywhere => Some((last - from).max(0.0)),
                    _ => None,
                },
                told_ms: g.and_then(|g| g.told_ms),
                status: g.and_then(|g| g.status),
            }
        })
        .collect();
    let gone: BTreeSet<u32> = evicted.iter().map(|g| g.rank).collect();
    let forbidden = gone.iter().copied().filter(|r| !e.may_go(*r)).collect();
    let both_ends = e
        .one_of
        .iter()
        .copied()
        .filter(|(a, b)| gone.contains(a) && gone.contains(b))
        .collect();
    // Until every survivor delivered an op started after `from` (wall time).
    let resumed = |from: f64| -> Option<f64> {
        let mut worst = 0.0f64;
        for s in survivors {
            let first = t
                .started
                .iter()
                .filter(|(_, (_, at))| *at > from)
                .filter_map(|(p, _)| t.delivered_at.get(p).and_then(|d| d.get(s)))
                .copied()
                .reduce(f64::min)?;
            worst = worst.max(first - from);
        }
        Some(worst)
    };
    let mut resume: Vec<Resume> = Vec::new();
    for (r, wall) in killed {
        resume.push(Resume {
            flag: format!("--kill {r}@{}", into(*wall)),
            at_ms: into(*wall),
            stop: false,
            ms: resumed(*wall),
        });
    }
    for p in &o.pauses {
        let asked = o.asked_pauses.get(p.asked);
        resume.push(Resume {
            flag: asked.map_or_else(
                || format!("--stop {}", p.rank),
                |a| format!("--stop {}@{}+{}", a.rank, a.at_ms, a.dur_ms),
            ),
            at_ms: into(p.wall),
            stop: true,
            ms: resumed(p.wall),
        });
    }
    for f in &o.net {
        if let Some((_, _, wall)) = f.applied {
            resume.push(Resume {
                flag: f.flag.clone(),
                at_ms: into(wall),
                stop: false,
                ms: resumed(wall),
            });
        }
    }
    resume.sort_by_key(|r| r.at_ms);
    Evictions {
        required,
        forbidden,
        both_ends,
        resume,
        detect: o.detect,
    }
}

#[allow(clippy::too_many_arguments)]
fn report(
    args: &ClusterArgs,
    t: &Tally,
    killed: &BTreeMap<u32, f64>,
    killed_at_ms: &BTreeMap<u32, u128>,
    survivors: &BTreeSet<u32>,
    attempted: u64,
    o: &Outcome,
) -> Result<(), CliError> {
    let pauses = &o.pauses;
    let detect: BTreeMap<u32, Option<(f64, u32)>> = killed
        .iter()
        .map(|(r, at)| {
            (
                *r,
                t.link_down.get(r).map(|(d, by)| ((d - at).max(0.0), *by)),
            )
        })
        .collect();
    let repair: BTreeMap<u32, Option<f64>> = killed
        .iter()
        .map(|(r, at)| {
            let m = t.confirmed.get(r);
            let all = m.is_some_and(|m| survivors.iter().all(|s| m.contains_key(s)));
            let worst = m.and_then(|m| m.values().copied().reduce(f64::max));
            (*r, worst.filter(|_| all).map(|w| (w - at).max(0.0)))
        })
        .collect();
    let max_of = |v: Vec<Option<f64>>| -> Option<f64> {
        v.iter().try_fold(0.0f64, |m, x| x.map(|x| m.max(x)))
    };
    let detect_max = if killed.is_empty() {
        None
    } else {
        max_of(detect.values().map(|d| d.map(|x| x.0)).collect())
    };
    let repair_max = if killed.is_empty() {
        None
    } else {
        max_of(repair.values().copied().collect())
    };
    let duplicates: usize = t
        .delivered
        .values()
        .map(|d| d.values().filter(|c| **c > 1).count())
        .sum();
    // Reached some survivors but not all (an op that reached only removed ranks, e.g. one its
    // removed origin delivered to itself, reached none: no finding).
    let partial: usize = t
        .delivered
        .values()
        .filter(|d| {
            d.keys().any(|r| survivors.contains(r)) && !survivors.iter().all(|s| d.contains_key(s))
        })
        .count();
    let lost: usize = t
        .started
        .iter()
        .filter(|(p, (o, _))| {
            survivors.contains(o)
                && !t
                    .delivered
                    .get(*p)
                    .is_some_and(|d| survivors.iter().all(|s| d.contains_key(s)))
        })
        .count();
    let exactly_once = duplicates == 0 && partial == 0 && lost == 0;
    // The last fault event (a kill, a SIGCONT, a network fault's start or end): every survivor
    // must deliver an op started after it.
    let last_event = killed
        .values()
        .copied()
        .chain(pauses.iter().map(|p| p.wall + p.for_ms as f64))
        .chain(o.net.iter().filter_map(|f| f.applied.map(|a| a.2)))
        .chain(o.net.iter().filter_map(|f| f.removed_wall))
        .reduce(f64::max)
        .unwrap_or(0.0);
    let continued = survivors
        .iter()
        .filter(|s| {
            t.started.iter().any(|(p, (_, at))| {
                *at > last_event && t.delivered.get(p).is_some_and(|d| d.contains_key(s))
            })
        })
        .count();
    let (deaths, evicted) = attribute(t, killed_at_ms, o);
    let dead: BTreeSet<u32> = deaths.iter().map(|g| g.rank).collect();
    let e = &o.expect;
    let ev = evictions(t, killed, survivors, &evicted, o);
    // Removed but alive, and neither required nor allowed to be: a false positive. A rank
    // that died by itself (not by `--kill`) was truly lost. With the detector on, the
    // evidence is a verdict (a `failure_confirmed` naming the rank, or its eviction); a link
    // down is the loss of one link, which the detector settles. Without it, TCP's link
    // timeout is the failure detector and a link down reported for a live rank counts too.
    let evicted_ranks: BTreeSet<u32> = evicted.iter().map(|g| g.rank).collect();
    let evidence: BTreeSet<u32> = if o.detect {
        t.confirmed.keys().copied().collect()
    } else {
        t.suspected.clone()
    };
    let false_pos: Vec<u32> = evidence
        .union(&evicted_ranks)
        .copied()
        .filter(|r| !killed.contains_key(r) && !dead.contains(r) && !e.may_go(*r))
        .collect();
    let confirmed_twice = t
        .confirm_counts
        .iter()
        .filter(|((_, by), c)| survivors.contains(by) && **c > 1)
        .count();
    let live_downs: Vec<&(f64, u32, u32, String)> = t
        .link_downs
        .iter()
        .filter(|(_, _, p, _)| !dead.contains(p))
        .collect();
    let refused: u64 = t.refused.values().sum();
    let (relm_delivered, relm_dups, relm_lost, relm_failed) = t.relm_counts(survivors);
    let intruders = match args.transport {
        TransportKind::Tcp => 2,
        TransportKind::Quic => 3,
    };
    let pass = (!args.garbage || refused >= intruders * survivors.len() as u64)
        && exactly_once
        && relm_dups == 0
        && relm_lost == 0
        && continued == survivors.len()
        && false_pos.is_empty()
        && detect_max.is_some() != killed.is_empty()
        && ev.ok()
        && confirmed_twice == 0
        && o.settled.is_some();
    let round = |x: Option<f64>| x.map(|v| (v * 1000.0).round() / 1000.0);
    let into = |wall: f64| (wall - o.start_wall).round() as i64;
    if args.json {
        let v = json!({
            "nodes": args.nodes,
            "transport": match args.transport {
                TransportKind::Tcp => "tcp",
                TransportKind::Quic => "quic",
            },
            "killed": killed.keys().collect::<Vec<_>>(),
            "stopped": pauses.iter().map(|p| json!({"rank": p.rank, "at_ms": p.at_ms, "for_ms": p.for_ms})).collect::<Vec<_>>(),
            "survivors": survivors.len(),
            "detect_ms_max": round(detect_max),
            "repair_ms_max": round(repair_max),
            "xcast_ops": t.started.len(),
            "xcast_refused": t.refused_xcasts,
            "xcast_delivered_exactly_once": exactly_once,
            "xcast_duplicated": duplicates,
            "xcast_partial": partial,
            "xcast_lost": lost,
            "relm_sent": t.relm_started.len(),
            "relm_delivered": relm_delivered,
            "relm_duplicates": relm_dups,
            "relm_lost": relm_lost,
            "survivors_continued": continued,
            "false_positives": false_pos.len(),
            "refused_connections": refused,
            "relm_refused": t.relm_refused,
            "relm_failed_reported": relm_failed,
            "deaths": deaths.iter().map(Gone::json).collect::<Vec<_>>(),
            "evicted": evicted.iter().map(Gone::json).collect::<Vec<_>>(),
            "net_faults": o.net.iter().map(|f| json!({
                "flag": f.flag, "at_ms": f.applied.map(|a| a.1), "removed_ms": f.removed_ms,
                "rules": f.rules, "dropped_packets": f.dropped})).collect::<Vec<_>>(),
            "link_downs_live": live_downs.iter().map(|(at, by, p, why)| json!({
                "rank": by, "peer": p, "reason": why, "at_ms": into(*at)})).collect::<Vec<_>>(),
            "nft_table": o.table,
            "detect": o.detect,
            "expect": e.json(),
            "evictions_required": ev.required.iter().map(Required::json).collect::<Vec<_>>(),
            "evict_ms_max": ev.evict_ms_max(),
            "evict_forbidden": ev.forbidden,
            "evict_both_ends": ev.both_ends.iter().map(|(a, b)| [a, b]).collect::<Vec<_>>(),
            "resume": ev.resume.iter().map(|r| json!({"fault": r.flag, "at_ms": r.at_ms,
                "resume_ms": r.ms.map(f64::round)})).collect::<Vec<_>>(),
            "resume_ms": ev.resume_ms(),
            "confirmed_more_than_once": confirmed_twice,
            "workload_ms": o.work_ms,
            "settled_ms": o.settled,
            "pass": pass,
        });
        write_stdout(|o| writeln!(o, "{v}"))?;
    } else {
        write_stdout(|out| {
            for f in &o.net {
                match (f.applied, f.removed_ms) {
                    (Some((_, a, _)), None) => writeln!(
                        out,
                        "  {}: {} nftables rules in from {a} ms into the workload to the end, \
                         {} packets dropped",
                        f.flag,
                        f.rules,
                        f.dropped.map_or("?".into(), |d| d.to_string())
                    )?,
                    (Some((_, a, _)), Some(b)) => writeln!(
                        out,
                        "  {}: {} nftables rules in from {a} to {b} ms into the workload, \
                         {} packets dropped",
                        f.flag,
                        f.rules,
                        f.dropped.map_or("?".into(), |d| d.to_string())
                    )?,
                    _ => writeln!(out, "  {}: NOT applied", f.flag)?,
                }
            }
            for r in killed.keys() {
                writeln!(
                    out,
                    "  killed rank {r} with SIGKILL {} ms into the workload",
                    killed_at_ms.get(r).copied().unwrap_or(0)
                )?;
                match detect[r] {
                    Some((d, by)) => writeln!(
                        out,
                        "  rank {r}: rank {by} noticed first, {d:.1} ms after the kill"
                    )?,
                    None => writeln!(out, "  rank {r}: NOBODY noticed")?,
                }
                match repair[r] {
                    Some(ms) => writeln!(
                        out,
                        "  rank {r}: confirmed dead at all {} survivors {ms:.1} ms after the kill",
                        survivors.len()
                    )?,
                    None => writeln!(out, "  rank {r}: not confirmed dead at every survivor")?,
                }
            }
            for g in deaths.iter().filter(|g| g.cause != "killed") {
                writeln!(
                    out,
                    "  rank {} died {} ms into the workload, not by this launcher: {}",
                    g.rank,
                    g.at_ms,
                    exit_words(g.status)
                )?;
            }
            for g in &evicted {
                let told = match (g.told_ms, g.epoch) {
                    (Some(at), Some(e)) => format!("told at {at} ms (epoch {e})"),
                    (Some(at), None) => format!("found its slot gone at {at} ms"),
                    _ => "never told".into(),
                };
                let verdict = if e.required.contains_key(&g.rank) {
                    "evicted, as required,"
                } else if e.may_go(g.rank) {
                    "evicted (allowed)"
                } else {
                    "EVICTED (a false positive)"
                };
                writeln!(
                    out,
                    "  rank {} {verdict} {} ms into the workload (a live rank; confirmed removed \
                     by {:?}), {told}; {}",
                    g.rank,
                    g.at_ms,
                    g.confirmed_by,
                    exit_words(g.status)
                )?;
            }
            for p in pauses.iter() {
                let r = p.rank;
                let verdict = match (evicted_ranks.contains(&r), e.required.contains_key(&r)) {
                    (true, true) => "evicted, as required",
                    (false, true) => "NOT EVICTED (its eviction was required)",
                    (true, false) if e.may_go(r) => "evicted (allowed)",
                    (true, false) => "EVICTED (a false positive)",
                    (false, false) => "evicted by nobody",
                };
                writeln!(
                    out,
                    "  paused rank {r} with SIGSTOP {} ms into the workload for {} ms: {verdict}",
                    p.at_ms, p.for_ms
                )?;
            }
            for q in &ev.required {
                writeln!(
                    out,
                    "  rank {}: eviction required; {}, {}, {}",
                    q.rank,
                    q.evict_ms.map_or_else(
                        || "NOT confirmed removed at every survivor".into(),
                        |ms| format!(
                            "confirmed removed at every survivor {ms:.0} ms after its fault began \
                             (bound {EVICT_BOUND_MS} ms)"
                        )
                    ),
                    q.told_ms
                        .map_or_else(|| "NEVER told".into(), |at| format!("told at {at} ms")),
                    exit_words(q.status)
                )?;
            }
            for (a, b) in &ev.both_ends {
                writeln!(out, "  BOTH ends of the cut {a}-{b} evicted")?;
            }
            for r in ev.resume.iter().filter(|r| o.detect && r.stop) {
                writeln!(
                    out,
                    "  {} ({} ms): every survivor delivered a later op {}",
                    r.flag,
                    r.at_ms,
                    r.ms.map_or_else(|| "NEVER".into(), |ms| format!("within {ms:.0} ms"))
                )?;
            }
            const SHOWN: usize = 20;
            for (at, by, p, why) in live_downs.iter().take(SHOWN) {
                writeln!(
                    out,
                    "  link down: rank {by} lost live rank {p} ({why}) {} ms into the workload",
                    into(*at)
                )?;
            }
            if live_downs.len() > SHOWN {
                writeln!(
                    out,
                    "  ... and {} more link downs",
                    live_downs.len() - SHOWN
                )?;
            }
            writeln!(
                out,
                "  xcast: {} ops started ({} refused for back-pressure, {attempted} attempted); \
                 {duplicates} duplicated, {partial} reached only some survivors, {lost} lost: {}",
                t.started.len(),
                t.refused_xcasts,
                if exactly_once {
                    "exactly once everywhere"
                } else {
                    "NOT exactly once"
                }
            )?;
            writeln!(
                out,
                "  survivors continued: {continued}/{} delivered ops started after the last fault",
                survivors.len()
            )?;
            writeln!(
                out,
                "  false positives: {} {:?}; refused connections: {refused}",
                false_pos.len(),
                false_pos
            )?;
            writeln!(
                out,
                "  RELM: {} messages sent all-to-all ({} refused for back-pressure); {relm_delivered} \
                 delivered, {relm_dups} duplicated, {relm_lost} lost, {relm_failed} to killed ranks \
                 reported failed to their senders: {}",
                t.relm_started.len(),
                t.relm_refused,
                if relm_dups == 0 && relm_lost == 0 {
                    "exactly once, in order"
                } else {
                    "NOT exactly once"
                }
            )?;
            if o.settled.is_none() {
                writeln!(
                    out,
                    "  NOT SETTLED: ops still pending at the end of the settling time"
                )?;
            }
            if confirmed_twice > 0 {
                writeln!(
                    out,
                    "  {confirmed_twice} (rank, survivor) pairs confirmed more than once"
                )?;
            }
            writeln!(out, "{}", if pass { "PASS" } else { "FAIL" })
        })?;
    }
    if pass {
        Ok(())
    } else {
        Err(CliError::Failed("the cluster run failed its checks".into()))
    }
}
