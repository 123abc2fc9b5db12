//! The node processes: spawning them, writing commands to their stdin, signals (SIGSTOP,
//! SIGCONT), reaping their exits and putting exits into words and JSON fields.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::mpsc;
use tokio::time::Instant as Tick;

use super::setup::Setup;
use super::{ClusterArgs, NODE_STARTUP_GRACE};
use crate::nft;
use crate::node_cmd::wall_ms;
use crate::CliError;

/// A signal the launcher sends a node: its `--stop` and the end of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Sig {
    Stop,
    Cont,
}

/// Sends `sig` to `pid` with one kill(2), in the launcher's own process. It used to run the
/// system's `kill` and wait for it: on a saturated host (2,000 nodes on 16 cores) that fork,
/// exec and wait blocked the launcher's loop for 0.6–1.1 s (no op started from 2,502 to
/// 3,376 ms), so a `--stop` due at 2,500 ms was recorded at 3,059 and 3,321 ms while the
/// signal itself had landed somewhere in between.
pub(super) fn signal(pid: Option<u32>, sig: Sig) {
    #[cfg(unix)]
    if let Some(p) = pid
        .and_then(|p| i32::try_from(p).ok())
        .and_then(rustix::process::Pid::from_raw)
    {
        let s = match sig {
            Sig::Stop => rustix::process::Signal::STOP,
            Sig::Cont => rustix::process::Signal::CONT,
        };
        if let Err(e) = rustix::process::kill_process(p, s) {
            tracing::debug!(pid = p.as_raw_nonzero().get(), ?sig, error = %e, "signal not sent");
        }
    }
    #[cfg(not(unix))]
    let _ = (pid, sig);
}

/// Admitted joiners: rank -> process index, written by each joiner's stdout reader when it
/// reads the `joined` line.
pub(super) type JoinedProcs = Arc<Mutex<BTreeMap<u32, usize>>>;

/// The tag of a joiner's lines before it has a rank (`join_failed`, its stdout closing):
/// `UNJOINED + j` for the `j`-th joiner started, far above any rank.
pub(super) const UNJOINED: u32 = u32::MAX / 2;

/// The children, the temporary folder and the nftables table; dropping it kills every child
/// that is still running, removes the folder and deletes the table, whatever path the command
/// leaves by.
///
/// Processes `0..nodes` are ranks `0..nodes`; the joiners (`--grow`) follow, in the order
/// started, and take the rank their admission gives them ([`Procs::joined`]).
pub(super) struct Procs {
    pub(super) children: Vec<Child>,
    pub(super) stdins: Vec<Option<ChildStdin>>,
    pub(super) dir: PathBuf,
    /// Only when network faults were asked for; deleted when dropped (after the children are
    /// killed).
    pub(super) table: Option<nft::Table>,
    /// The nodes started from the peers file.
    pub(super) nodes: u32,
    pub(super) joined: JoinedProcs,
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
    /// The process of `rank` (a joiner's once its `joined` line was read).
    pub(super) fn proc_of(&self, rank: u32) -> Option<usize> {
        if rank < self.nodes {
            return Some(rank as usize);
        }
        self.joined
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&rank)
            .copied()
    }

    /// The rank of process `i`; for a joiner not (yet) admitted, its [`UNJOINED`] tag.
    pub(super) fn rank_of(&self, i: usize) -> u32 {
        if i < self.nodes as usize {
            return i as u32;
        }
        let joined = self.joined.lock().unwrap_or_else(|e| e.into_inner());
        joined
            .iter()
            .find(|(_, p)| **p == i)
            .map_or(UNJOINED + (i as u32 - self.nodes), |(r, _)| *r)
    }

    pub(super) async fn send(&mut self, rank: u32, line: &str) {
        let Some(i) = self.proc_of(rank) else { return };
        if let Some(Some(s)) = self.stdins.get_mut(i) {
            if s.write_all(line.as_bytes()).await.is_err() {
                self.stdins[i] = None;
            }
        }
    }
}

/// How a rank's process ended, as its parent saw it.
#[derive(Clone, Copy, Debug)]
pub(super) struct Exit {
    /// Milliseconds into the workload it was noticed (within one workload tick, or 50 ms
    /// after the workload; 0 for an exit before it).
    pub(super) at_ms: i64,
    pub(super) status: std::process::ExitStatus,
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
pub(super) fn exit_fields(st: Option<std::process::ExitStatus>) -> (Option<i32>, Option<String>) {
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
pub(super) fn exit_words(st: Option<std::process::ExitStatus>) -> String {
    match exit_fields(st) {
        (_, Some(sig)) => format!("killed by {sig}"),
        (Some(c), _) => format!("exited with status {c}"),
        (None, None) => "still running".into(),
    }
}

/// Records every child that exited since the last call (and closes its stdin), by rank (a
/// joiner that exited before its admission: by its [`UNJOINED`] tag).
pub(super) fn reap(procs: &mut Procs, exits: &mut BTreeMap<u32, Exit>, start: Tick) {
    let tags: Vec<u32> = (0..procs.children.len())
        .map(|i| procs.rank_of(i))
        .collect();
    for (i, c) in procs.children.iter_mut().enumerate() {
        let r = tags[i];
        if exits.contains_key(&r) {
            continue;
        }
        if let Ok(Some(status)) = c.try_wait() {
            let at_ms = i64::try_from(start.elapsed().as_millis()).unwrap_or(i64::MAX);
            tracing::debug!(rank = r, ?status, at_ms, "node exited");
            exits.insert(r, Exit { at_ms, status });
            procs.stdins[i] = None;
        }
    }
}

/// The event the launcher adds to a node's lines when its stdout closes (`t_ms`: when).
pub(super) const STDOUT_CLOSED: &str = "launcher_stdout_closed";

/// The nodes' output: (rank, one JSON line it printed).
pub(super) type Lines = mpsc::Receiver<(u32, Value)>;

/// Where the readers of the nodes' output send their lines.
pub(super) type LinesTx = mpsc::Sender<(u32, Value)>;

/// When rank `r` starts, in milliseconds after the launch, with starts spread uniformly over
/// `0..=skew` (a splitmix64 hash of the rank: a rerun spreads them alike).
pub(super) fn start_offset(r: u32, skew: u64) -> u64 {
    if skew == 0 {
        return 0;
    }
    let mut z = u64::from(r).wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    (z ^ (z >> 31)) % (skew + 1)
}

/// `lifeline node` with the flags every node of the run shares: the key, the radix, the link
/// timeout, the start-up grace, the join batch, the detector, stopping with stdin; under
/// `nice -n N` with `--node-nice N` (the process `nice` execs keeps its pid, so signals and
/// reaping are unchanged).
pub(super) fn node_command(args: &ClusterArgs, setup: &Setup) -> Result<Command, CliError> {
    let exe = std::env::current_exe()
        .map_err(|e| CliError::Failed(format!("finding the lifeline binary: {e}")))?;
    let mut cmd = if args.node_nice > 0 {
        let mut c = Command::new("nice");
        c.args(["-n", &args.node_nice.to_string()]).arg(exe);
        c
    } else {
        Command::new(exe)
    };
    cmd.arg("node")
        .arg("--key-file")
        .arg(&setup.key_file)
        .args(["--radix", &args.radix.to_string()])
        .args(["--link-timeout-ms", &args.link_timeout_ms.to_string()])
        .args([
            "--startup-grace-ms",
            &NODE_STARTUP_GRACE.as_millis().to_string(),
        ])
        .arg("--exit-on-stdin-eof");
    if let Some(ms) = args.join_batch_ms {
        cmd.args(["--join-batch-ms", &ms.to_string()]);
    }
    if args.no_detect {
        cmd.arg("--no-detect");
    }
    if args.beat_grid {
        cmd.arg("--beat-grid");
    }
    if args.quorum == crate::node_cmd::QuorumMode::None {
        cmd.args(["--quorum", "none"]);
    }
    Ok(cmd)
}

/// Starts `cmd` as the next process (its stdout read line by line into `tx`, each line tagged
/// with `tag`; a joiner's, with its rank from its `joined` line on, recorded in `joined`);
/// returns its pid.
pub(super) fn start(
    procs: &mut Procs,
    mut cmd: Command,
    tag: u32,
    joined: Option<JoinedProcs>,
    tx: &LinesTx,
) -> Result<u32, CliError> {
    let i = procs.children.len();
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| CliError::Failed(format!("starting node {tag}: {e}")))?;
    let pid = child.id().unwrap_or(0);
    let out = child.stdout.take();
    procs.stdins.push(child.stdin.take());
    procs.children.push(child);
    let tx = tx.clone();
    if let Some(out) = out {
        tokio::spawn(async move {
            let mut tag = tag;
            let mut lines = BufReader::new(out).lines();
            while let Ok(Some(l)) = lines.next_line().await {
                if let Ok(v) = serde_json::from_str::<Value>(&l) {
                    if let (Some(j), "joined") = (&joined, v["event"].as_str().unwrap_or("")) {
                        if let Some(r) = v["rank"].as_u64().and_then(|r| u32::try_from(r).ok()) {
                            tag = r;
                            j.lock().unwrap_or_else(|e| e.into_inner()).insert(r, i);
                        }
                    }
                    if tx.send((tag, v)).await.is_err() {
                        return;
                    }
                }
            }
            // The pipe closes when the process ends (however it ends): the moment the
            // launcher observes a death it did not cause, timed like its own kills.
            let closed = serde_json::json!({"event": STDOUT_CLOSED, "t_ms": wall_ms()});
            let _ = tx.send((tag, closed)).await;
        });
    }
    Ok(pid)
}

/// Starts every node (its stdout read line by line into the returned channel) and returns
/// their pids, the instant they were started and the channel (with a sender kept for the
/// joiners when the run grows).
pub(super) fn spawn_nodes(
    args: &ClusterArgs,
    setup: &Setup,
    procs: &mut Procs,
) -> Result<(Vec<u32>, Tick, Lines, Option<LinesTx>), CliError> {
    let n = args.nodes;
    let eps = &setup.eps;
    let (tx, rx) = mpsc::channel::<(u32, Value)>(4096);
    let mut pids = Vec::new();
    let spawned = Tick::now();
    for r in 0..n {
        let mut cmd = node_command(args, setup)?;
        cmd.args(["--rank", &r.to_string()])
            .arg("--peers")
            .arg(&setup.peers_file)
            .args([
                "--start-delay-ms",
                &start_offset(r, args.start_skew).to_string(),
            ]);
        if let Some((certs, cluster)) = &setup.quic {
            cmd.args(["--transport", "quic", "--cluster", cluster])
                .arg("--cert-dir")
                .arg(certs);
        }
        let pid = start(procs, cmd, r, None, &tx)?;
        pids.push(pid);
        tracing::debug!(rank = r, pid, addr = %eps[r as usize], "node started");
    }
    // Without joiners to come, the channel closes when every node has exited.
    let keep = (!args.grows.is_empty()).then_some(tx);
    Ok((pids, spawned, rx, keep))
}

#[cfg(test)]
mod tests {
    use super::start_offset;

    #[test]
    fn start_offsets_spread_over_the_skew_and_repeat() {
        assert!((0..64).all(|r| start_offset(r, 0) == 0));
        let v: Vec<u64> = (0..256).map(|r| start_offset(r, 3_000)).collect();
        assert!(v.iter().all(|&o| o <= 3_000));
        assert!(
            *v.iter().min().unwrap() < 300 && *v.iter().max().unwrap() > 2_700,
            "{v:?}"
        );
        // Each tenth of the skew gets some ranks (uniform, not clustered).
        let mut tenths = [0u32; 10];
        for &o in &v {
            tenths[(o * 10 / 3_001) as usize] += 1;
        }
        assert!(tenths.iter().all(|&n| n >= 10), "{tenths:?}");
        assert_eq!(
            v,
            (0..256).map(|r| start_offset(r, 3_000)).collect::<Vec<_>>()
        );
    }
}
