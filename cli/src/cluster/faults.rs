//! The faults of `lifeline cluster` as asked: parsing `--kill`, `--stop`, `--cut`,
//! `--cut-oneway`, `--partition`, `--blackhole` and `--loss` into one timeline of [`Fault`]s,
//! the network faults ([`NetFault`]) and the pauses, and how long the workload must run to see
//! them all through ([`workload_ms`]).

use tokio::time::Instant as Tick;

use super::expect::gray_timeout_ms;
use super::ClusterArgs;
use crate::nft::NetKind;
use crate::CliError;

struct Kill {
    pub(super) rank: u32,
    pub(super) at_ms: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Action {
    Kill,
    Stop,
    Cont,
    /// Network fault `i` of [`Faults::net`] starts (its rules go in).
    NetOn(usize),
    /// It ends (its rules come out).
    NetOff(usize),
    /// Revoke `i` of [`Faults::revokes`]: its origin is told to revoke (not a fault: a
    /// command on the timeline).
    Revoke(usize),
}

/// One injected failure: SIGKILL, SIGSTOP or SIGCONT to `rank`, or a network fault starting or
/// ending, at `at_ms` into the workload.
#[derive(Clone, Copy, Debug)]
pub(super) struct Fault {
    pub(super) rank: u32,
    pub(super) at_ms: u64,
    pub(super) action: Action,
}

/// One network fault and what became of it.
#[derive(Debug)]
pub(super) struct NetFault {
    /// The flag as given (`--cut 1-4@500+1000`).
    pub(super) flag: String,
    pub(super) kind: NetKind,
    /// How long it lasts; `None`: until the end of the run (`+forever`).
    pub(super) dur_ms: Option<u64>,
    /// Its rules' handles while they are in.
    pub(super) handles: Vec<u64>,
    /// When its rules went in: the instant, ms into the workload, and the wall time (ms since
    /// the Unix epoch).
    pub(super) applied: Option<(Tick, u64, f64)>,
    /// When they came out, ms into the workload, and the wall time.
    pub(super) removed_ms: Option<u64>,
    pub(super) removed_wall: Option<f64>,
    /// The wall time just before the launcher asked nft to take them out (the heal: from here
    /// on packets may cross again).
    pub(super) healing_wall: Option<f64>,
    /// `--partition`: the ranks of the set as given, ascending (the other side is every other
    /// rank of the run); empty for the other faults.
    pub(super) side: Vec<u32>,
    pub(super) rules: usize,
    /// Packets its rules dropped (their counters, read just before they came out, or at the
    /// end of the run for a fault that lasts forever).
    pub(super) dropped: Option<u64>,
}

/// One `--stop R@MS+DUR` as asked.
#[derive(Clone, Copy, Debug)]
pub(super) struct Pause {
    pub(super) rank: u32,
    pub(super) at_ms: u64,
    pub(super) dur_ms: u64,
}

/// The timeline: process and network faults by time, the network faults, and the pauses.
pub(super) struct Faults {
    pub(super) timeline: Vec<Fault>,
    pub(super) net: Vec<NetFault>,
    pub(super) pauses: Vec<Pause>,
    /// The `--revoke`s as asked.
    pub(super) revokes: Vec<super::revokes::Asked>,
    /// `--nodes`: the ranks a partition splits.
    pub(super) nodes: u32,
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
                healing_wall: None,
                side: Vec::new(),
                rules: 0,
                dropped: None,
            };
            (f, at_ms)
        })
        .chain(parse_partitions(args)?)
        .collect())
}

/// The `--partition A,B,C@MS+DUR|forever`s: each a set of distinct ranks below `--nodes`,
/// neither empty nor every rank; two partitions whose windows overlap in time are refused
/// (which ranks are cut off from which would depend on how the sets meet), as is `--grow`
/// (a joiner is on neither side: its packets would cross).
fn parse_partitions(args: &ClusterArgs) -> Result<Vec<(NetFault, u64)>, CliError> {
    let n = args.nodes;
    let mut out: Vec<(NetFault, u64)> = Vec::new();
    if !args.partitions.is_empty() && !args.grows.is_empty() {
        return Err(CliError::Usage(
            "--partition and --grow cannot be combined: a joiner would be on neither side".into(),
        ));
    }
    for s in &args.partitions {
        let flag = format!("--partition {s}");
        let bad = || CliError::Usage(format!("{flag}: expected A,B,C@MS+DUR or A,B,C@MS+forever"));
        let (set, at_ms, dur_ms) = window(s).ok_or_else(bad)?;
        if set.trim().is_empty() {
            return Err(CliError::Usage(format!(
                "{flag}: the set of ranks is empty"
            )));
        }
        let mut side = Vec::new();
        for r in set.split(',') {
            let r: u32 = r.trim().parse().map_err(|_| bad())?;
            if r >= n {
                return Err(CliError::Usage(format!(
                    "{flag}: rank {r} is not below --nodes {n}"
                )));
            }
            if side.contains(&r) {
                return Err(CliError::Usage(format!("{flag}: rank {r} named twice")));
            }
            side.push(r);
        }
        side.sort_unstable();
        if side.len() as u32 >= n {
            return Err(CliError::Usage(format!(
                "{flag}: every rank is on one side; leave at least one rank out"
            )));
        }
        let end = dur_ms.map_or(u64::MAX, |d| at_ms.saturating_add(d));
        for (other, o_at) in &out {
            let o_end = other.dur_ms.map_or(u64::MAX, |d| o_at.saturating_add(d));
            if at_ms < o_end && *o_at < end {
                return Err(CliError::Usage(format!(
                    "{flag}: overlaps {} in time; partitions must not overlap",
                    other.flag
                )));
            }
        }
        let f = NetFault {
            flag,
            kind: NetKind::Partition(out.len() as u32),
            dur_ms,
            handles: Vec::new(),
            applied: None,
            removed_ms: None,
            removed_wall: None,
            healing_wall: None,
            side,
            rules: 0,
            dropped: None,
        };
        out.push((f, at_ms));
    }
    Ok(out)
}

pub(super) fn parse_faults(args: &ClusterArgs) -> Result<Faults, CliError> {
    let (net, starts): (Vec<NetFault>, Vec<u64>) = parse_net(args)?.into_iter().unzip();
    let (mut timeline, pauses) = parse_process_faults(args)?;
    for (i, (f, at_ms)) in net.iter().zip(starts).enumerate() {
        let rank = match f.kind {
            NetKind::Cut(a, _) | NetKind::CutOneway(a, _) => a,
            NetKind::Blackhole(r) | NetKind::Loss(r, _) => r,
            NetKind::Partition(_) => f.side[0],
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
    let revokes = super::revokes::parse(args)?;
    for (i, r) in revokes.iter().enumerate() {
        timeline.push(Fault {
            rank: r.rank,
            at_ms: r.at_ms,
            action: Action::Revoke(i),
        });
    }
    timeline.sort_by_key(|f| f.at_ms);
    Ok(Faults {
        timeline,
        net,
        pauses,
        revokes,
        nodes: args.nodes,
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

/// How long the workload goes on after the last fault event (a kill, a SIGCONT, a network
/// fault's end), so that every survivor can show it continued.
const TAIL_MS: u64 = 1000;

/// How long past the gray timeout the workload goes on after a cut for good starts: the link
/// is declared down first (the TCP adapter's user timeout, 3 s; with `--transport quic` the
/// idle timeout, link timeout less one keep-alive interval, 2.5 s: sooner, so the same tail
/// covers it), the gray timeout runs from there, and survivors then show they continued.
const GRAY_TAIL_MS: u64 = 6000;

/// How long the workload goes on after a partition heals: the side that was cut off learns
/// what the other decided (told `evicted`, exits) and both sides show they went on, which the
/// report's `outages` measures.
pub(super) const HEAL_TAIL_MS: u64 = 3000;

/// How long the workload runs, in ms: `--duration`, or longer so that it goes on `TAIL_MS`
/// after the last fault event, [`HEAL_TAIL_MS`] after a partition heals and, after a cut for
/// good starts, past the gray timeout.
pub(super) fn workload_ms(args: &ClusterArgs, faults: &Faults) -> u64 {
    let asked = (args.duration * 1e3).round() as u64;
    let last = faults.timeline.iter().map(|f| f.at_ms).max();
    let forever_start = faults
        .timeline
        .iter()
        .filter(|f| matches!(f.action, Action::NetOn(i) if faults.net[i].dur_ms.is_none()))
        .map(|f| f.at_ms)
        .max();
    let last_heal = faults
        .timeline
        .iter()
        .filter(|f| matches!(f.action, Action::NetOff(i) if matches!(faults.net[i].kind, NetKind::Partition(_))))
        .map(|f| f.at_ms)
        .max();
    [
        Some(asked),
        last.map(|l| l + TAIL_MS),
        last_heal.map(|h| h + HEAL_TAIL_MS),
        forever_start.map(|s| s + gray_timeout_ms() + GRAY_TAIL_MS),
    ]
    .into_iter()
    .flatten()
    .max()
    .unwrap_or(asked)
}
