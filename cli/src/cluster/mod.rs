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
//! Network faults (`--cut`, `--cut-oneway`, `--partition`, `--blackhole`, `--loss`) are
//! nftables rules in one table per run (see [`crate::nft`]), added at their start and deleted
//! at their end; they need
//! the `nft` binary and root, checked before any node starts. Like a SIGCONT, a fault's end is
//! never skipped: the workload runs until every fault has ended, and `TAIL_MS` (1 s) past the
//! last fault event, so that every survivor can show it went on. A cut for good
//! (`--cut A-B@MS+forever`, also `--cut-oneway`) keeps its rules until the end of the run, and
//! the workload then lasts until 3 s past the gray timeout (10 s) after its start.
//!
//! The nodes run the core's heartbeat failure detector by default (`--no-detect`: without it;
//! `--detect` is accepted and changes nothing). With it, the launcher knows what each fault
//! allows ([`Expect`](expect::Expect), the report's `expect`), from the detector's settings
//! ([`silence_rule`](expect::silence_rule)):
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
//! - `--partition A,B,C@MS+DUR|forever` cuts every link between the set and the other ranks
//!   (two nftables sets and four rules, whatever the split; partitions must not overlap in
//!   time, nor be combined with `--grow`). Its minority side (fewer members; on an even split
//!   the side without rank 0) may be evicted; a majority rank must not be. The workload runs
//!   `HEAL_TAIL_MS` (3 s) past the heal, so that the minority can be told. The report's
//!   `outages` (see [`outage`]) gives per side whether it continued during the cut, how fast
//!   (`resume_ms`), what it decided, who was removed and told, and every rank's longest
//!   delivery gap; its `checks` (issue #23's "Done when": the majority continues within 1 s,
//!   the minority decides nothing, no majority rank removed, the minority told and exiting
//!   with status 3 after a heal) must all hold for `pass`.
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
//! continued, no false positive, every death was noticed, every required eviction is `ok`, no
//! forbidden eviction and never both ends of a cut, no rank confirmed twice by one survivor
//! (`confirmed_more_than_once`) and, with the detector, every survivor went on within 1 s of
//! each pause's start (`resume_ms`); with `--garbage`, every intruder was refused.
//!
//! With `--grow N@MS` (TCP only; repeatable) the launcher starts N more processes MS
//! milliseconds into the workload, each `lifeline node --join` with the addresses of 3 live
//! members spread over the cluster (see [`grow`]). Once a joiner prints `joined` it is a rank
//! like the others: an xcast origin, a RELM source and destination, a survivor. An op must
//! reach a joiner when it started after the joiner's `joined` line; a removal must be
//! confirmed by a joiner that joined before its first confirmation. The report lists every
//! join (`joins`: rank, join id, admitting epoch, `join_ms`, tries, contact), the views that
//! admitted them as the members reported them (`join_views`), `join_view_changes`,
//! `join_failures`, `xcast_ops_after_last_join`, and `relm_to_joiners` / `relm_from_joiners`
//! (delivered and acknowledged); `pass` further needs every joiner admitted with a distinct
//! rank, ops started after the last join, and RELM both ways with the surviving joiners. The
//! workload lasts at least 2.5 s past the last grow. `--join-batch-ms` passes every node
//! `--join-batch-ms`.
//!
//! With `--revoke R@MS` (repeatable) rank R revokes a group of its own MS milliseconds into
//! the workload (see [`revokes`]); the report's `revokes` gives for each the ranks reached,
//! every rank's latency from the launcher's command to its `revoked` line (`latency_ms`; max
//! and median over the ranks but the origin; `origin_latency_ms`), the flood alone (from the
//! origin's own `revoked` line, its `Node::revoke` call, to the last other rank's:
//! `flood_ms_max`), the most overlay hops,
//! `missing_survivors` and `delivered_twice`; `pass` needs both empty.
//!
//! With `--shrink R,R@MS[/FROM]` (repeatable) the launcher writes `shrink R,R` to the
//! requester's stdin MS milliseconds into the workload (FROM, or a live rank that is no target
//! of a campaign asked at that moment, a different one per such campaign; see [`shrink`]). A
//! target that printed `left` (or that a `departed` line named) is no survivor, neither a death
//! nor an eviction: what it delivered before it left counts once, ops started after are not
//! owed to it; a target killed mid-campaign is a death that the departure notice may remove
//! (no `failure_confirmed` needed). The report's `campaigns` gives, per campaign, `targets`,
//! `requester`, `id`, `campaign_started`, `completions` (must be 1), `epoch`, `removed`,
//! `complete_ms` (request to completion at the requester), `failed`, `repair_passes` (survivor ->
//! `repaired` lines naming a target; must be 1 unless a target crashed), `failure_verdicts`
//! (`failure_confirmed` lines naming a target that did not crash, at any rank; must be 0),
//! `failure_verdicts_crashed`, `departed_epochs` and `survivors_agree` (one departure view per
//! survivor, one epoch), `targets_exits` (status, signal, `left`, `crashed`, `killed`; a target
//! that did not crash must print `left` and exit 0), `xcasts_across` and `relm_across` (ops in
//! flight across it) and `ok`; `routes_via_holes` lists survivors whose final tree view (their
//! `stats` line's `view`, all in `views`) has a parent or child that is not a survivor;
//! `pass` needs every campaign `ok`, no route via a hole and no refused request
//! (`shrink_errors`). `--burst N@MS` starts N more xcasts and RELM messages in one tick.
//! Every report gives `delivery_gap_ms` (survivor -> the longest wait between two of its
//! deliveries during the workload) and `delivery_gap_ms_max`, so a survivor that stalled and
//! caught up shows even when everything was delivered. `outages` (with `--cut`,
//! `--cut-oneway` or `--partition`) gives the same from each cut on for every rank not killed,
//! survivor or not (a rank removed while cut off shows its silence until its exit), with the
//! ranks removed since the cut and after the heal and `resume_after_heal_ms`.
//!
//! Start-up: every node checks in (`lifeline node`'s default); the report's `startup` says how
//! many launched survivors printed `ready` (all must, exactly once, at one epoch: no rank of the
//! run fails to start, so `startup_incomplete` fails it), the check-in view changes one rank
//! applied (`startup_view_changes`) and the last `ready` since the launch (`ready_ms_max`);
//! each required eviction gives the first, median and last survivor's confirmation.
//! `detector` sums the heartbeat detector's counters over the ranks that printed `stats`
//! (suspicions, refutations, accusations withheld by a frozen rank) and counts the ranks whose
//! local health score rose (`ranks_health_raised`: their timers ran late, the machine was
//! saturated), so a slow eviction on an overloaded machine can be told from a slow protocol.
//! `--lines FILE` keeps every node line.
//!
//! With `--transport quic` the launcher generates a cluster CA and one certificate per rank
//! into the run's directory (`certs/`, the layout of `lifeline certs`) and starts every node
//! with `--transport quic --cert-dir DIR --cluster ID`; the report's `transport` says which.
//!
//! Measures:
//! - `detect_ms_max`: per death, the wall time from the death to the first survivor's
//!   `link_down` for it; the maximum over deaths. A death is timed from the launcher's SIGKILL
//!   (`--kill`) or, for a death the launcher did not cause (an outside signal, a crash), from
//!   the exit it observed: the node's stdout closing (the kernel closes it at the death), or
//!   the exit status if that was seen first. Each entry of `deaths` says which
//!   (`timed_from`: `sigkill` or `exit_observed`) with its own `detect_ms` and `repair_ms`.
//! - `repair_ms_max`: per death, the time until every survivor got the root's
//!   `failure_confirmed` naming it; the maximum over deaths.
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
//!   wrong rank claim, a rank outside the cluster). With `--transport quic` also
//!   `refused_by_reason`: the QUIC endpoints' refusal counters summed over the survivors
//!   (`strangers`, `handshakes_failed`, `malformed_hellos`, `wrong_rank`, `wrong_address`;
//!   their sum is `refused_connections`), and `refused_at`: rank -> its nonzero ones.
//! - `deaths`: every rank that died before the end other than by eviction, with its cause
//!   (`killed` by `--kill`, or `exited` by itself), `at_ms` into the workload, its exit
//!   `status` or `signal`, and its timing (`timed_from`, `detect_ms`, `repair_ms`); `evicted`: the live ranks the cluster evicted (named by some rank's
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

mod drive;
mod evictions;
mod expect;
mod faults;
mod grow;
mod intrude;
mod outage;
mod procs;
mod report;
mod revokes;
mod setup;
mod shrink;
mod tally;

use std::time::Duration;

use clap::Args;
use tracing::Instrument;

use crate::node_cmd::TransportKind;
use crate::CliError;
use faults::{parse_faults, Faults};
use procs::Procs;
use setup::MAX_NODES;

/// Arguments of `lifeline cluster`.
#[derive(Debug, Args)]
pub(crate) struct ClusterArgs {
    /// Number of node processes (ranks 0..N).
    #[arg(long)]
    nodes: u32,
    /// Tree radix.
    #[arg(long, default_value_t = 8)]
    radix: u32,
    /// Spread the nodes' starts over this many milliseconds, as a launcher does: each rank
    /// starts at a pseudo-random offset, uniform over 0..=MS (seeded by the rank, so a rerun
    /// spreads them alike). The workload begins once the last has started.
    #[arg(long, value_name = "MS", default_value_t = 0)]
    start_skew: u64,
    /// Run the nodes N niceness levels below the launcher (`nice -n N`, 0..=19). The launcher
    /// reads every node's lines and times the faults from one loop: on a host with more
    /// runnable node threads than cores it gets one thread's share of the CPU and falls
    /// behind (2,000 nodes on 16 cores: 25 s behind its nodes, so it sees nothing settle in
    /// time). 0, the default, runs them as the launcher runs.
    #[arg(long, value_name = "N", default_value_t = 0,
          value_parser = clap::value_parser!(u8).range(0..=19))]
    node_nice: u8,
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
    /// Cut every link between the ranks A,B,C and every other rank, both ways, from MS
    /// milliseconds into the workload for DUR milliseconds (`+forever`: until the end of the
    /// run); the links within each side stay up. Two nftables sets and four rules however
    /// large the sides. The report's `outages` gives each side's fate (see the module doc).
    /// Repeatable; partitions must not overlap in time.
    #[arg(long = "partition", value_name = "A,B,C@MS+DUR|forever")]
    partitions: Vec<String>,
    /// Drop every packet to and from rank R, silently (no reset: a lost host). Repeatable.
    #[arg(long = "blackhole", value_name = "R@MS+DUR")]
    blackholes: Vec<String>,
    /// Drop PCT percent (1-100) of rank R's packets, both ways, at random. Repeatable.
    #[arg(long = "loss", value_name = "R:PCT@MS+DUR")]
    losses: Vec<String>,
    /// Start N new `lifeline node --join` processes MS milliseconds into the workload, each
    /// given the addresses of 3 live members spread over the cluster; they join, then take
    /// part in the workload (xcast origins, RELM sources and destinations) and its checks
    /// (ops started after a joiner joined must reach it; RELM to and from joiners). TCP only.
    /// Repeatable.
    #[arg(long = "grow", value_name = "N@MS")]
    grows: Vec<String>,
    /// Rank R revokes a group MS milliseconds into the workload (stdin `revoke GROUP 1`, a
    /// new group per flag); the report gives, per revoke, every rank's latency from the
    /// command to its `revoked` line (max, median) and the survivors that never printed
    /// `revoked` (there must be none). Repeatable.
    #[arg(long = "revoke", value_name = "R@MS")]
    revokes: Vec<String>,
    /// Ask for a shrink campaign MS milliseconds into the workload: the launcher writes
    /// `shrink R,R` to the requester's stdin (FROM; by default a live rank that is no target
    /// of a campaign asked at the same moment, a different one for each such campaign). The
    /// targets drain, print `left` and exit 0; the report's `campaigns` checks each campaign
    /// (one completion, one repair pass at every survivor, no failure verdict for a target).
    /// Repeatable.
    #[arg(long = "shrink", value_name = "R,R@MS[/FROM]")]
    shrinks: Vec<String>,
    /// Start N more ops at once MS milliseconds into the workload: the next N xcasts and N
    /// RELM messages of the workload's rotation in one tick, right after any `--shrink` due
    /// then and between ranks no campaign asked so far names (so they are in flight across
    /// it). Repeatable.
    #[arg(long = "burst", value_name = "N@MS")]
    bursts: Vec<String>,
    /// Every node's `--join-batch-ms` (how long the coordinator lets a first waiting joiner
    /// wait for others to share its view change; the node's default when not given).
    #[arg(long, value_name = "MS")]
    join_batch_ms: Option<u64>,
    /// Accepted for compatibility: the nodes run the core's heartbeat failure detector by
    /// default.
    #[arg(long, conflicts_with = "no_detect")]
    #[allow(dead_code)] // read by clap only: it changes nothing
    detect: bool,
    /// Run the nodes without the heartbeat failure detector (`lifeline node --no-detect`):
    /// TCP's link timeout is then their only failure detector, and no eviction is expected.
    #[arg(long)]
    no_detect: bool,
    /// Every node's `--beat-grid`: heartbeat rounds and keepalive checks on a wall-clock grid
    /// in four phases (fewer wake-ups per node; see `lifeline node --help`).
    #[arg(long, conflicts_with = "no_detect")]
    beat_grid: bool,
    /// Every node's `--quorum`: `majority` (quorum views, the default) or `none` (the root
    /// decides alone).
    #[arg(long, value_enum, default_value_t = crate::node_cmd::QuorumMode::Majority)]
    quorum: crate::node_cmd::QuorumMode,
    /// Xcasts started per second (round-robin over live origins).
    #[arg(long, default_value_t = 50)]
    rate: u32,
    /// Write every line the nodes print to FILE, each prefixed with its rank (the report's
    /// raw material: the causes of each removal, every node's view changes).
    #[arg(long, value_name = "FILE")]
    lines: Option<std::path::PathBuf>,
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

/// How long after starting the nodes the workload begins: every node listens well within it.
const STARTUP_GRACE: Duration = Duration::from_millis(1500);

/// The nodes' start-up grace (`lifeline node --startup-grace-ms`): how long a node waits for a
/// peer it has never connected to or heard from (hundreds of processes on a few cores start
/// over seconds). A peer once connected that is gone is noticed at once, grace or not, so
/// the workload need not wait for it.
const NODE_STARTUP_GRACE: Duration = Duration::from_secs(10);

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
    let grows = grow::parse_grows(args)?;
    // Checked before any node starts (`drive` parses them again).
    shrink::parse_shrinks(args)?;
    shrink::parse_bursts(args)?;
    if !grows.is_empty() && args.transport == TransportKind::Quic {
        return Err(CliError::Usage(
            "--grow runs on TCP only: a QUIC joiner would need a certificate for a rank it \
             has not been given yet (`lifeline node --join` is TCP only)"
                .into(),
        ));
    }
    crate::init_tracing();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::Failed(format!("starting the runtime: {e}")))?;
    let span = tracing::info_span!("cluster", nodes = args.nodes);
    rt.block_on(cluster(args, faults, grows).instrument(span))
}

async fn cluster(
    args: &ClusterArgs,
    faults: Faults,
    grows: Vec<grow::Grow>,
) -> Result<(), CliError> {
    let dir = std::env::temp_dir().join(format!("lifeline-cluster-{}", std::process::id()));
    std::fs::create_dir_all(&dir)
        .map_err(|e| CliError::Failed(format!("creating {}: {e}", dir.display())))?;
    let mut procs = Procs {
        children: Vec::new(),
        stdins: Vec::new(),
        dir,
        table: None,
        nodes: args.nodes,
        joined: procs::JoinedProcs::default(),
    };
    let result = drive::drive(args, faults, grows, &mut procs).await;
    // Whatever happened (Ctrl-C included), every child is killed and reaped; dropping `procs`
    // then deletes the nftables table.
    for c in &mut procs.children {
        let _ = c.start_kill();
        let _ = tokio::time::timeout(Duration::from_secs(2), c.wait()).await;
    }
    result
}
