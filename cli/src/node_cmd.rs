//! `lifeline node`: one Lifeline node on TCP (or QUIC, `--transport quic`, or TCP with an RDMA
//! data plane, `--transport tcp+rdma`), until killed.
//!
//! With `--transport quic --cert-dir DIR --cluster ID` the node proves its rank with
//! `DIR/rank-R/{cert,key}.pem` under `DIR/ca.pem` (as `lifeline certs` writes them) instead of
//! the cluster key, and runs one QUIC connection per peer on the same driver.
//!
//! With `--transport tcp+rdma` the control class runs on TCP exactly as `--transport tcp`
//! (cluster key, peers file or `--bootstrap env`) and the data class (xcast, RELM and flood
//! payloads) on one RC queue
//! pair per peer (`lifeline_transport_rdma::spawn`), on the first RDMA device with an ACTIVE
//! port (`RdmaSysVerbs::open`). That needs a binary built with the cargo feature `rdma`
//! (`cargo build --release -p lifeline-cli --features rdma`; building needs `libibverbs-dev
//! librdmacm-dev libclang-dev`, running needs `libibverbs1`). The default binary does not link
//! libibverbs, so it starts on any machine; asked for `tcp+rdma` it exits with status 2 (a
//! usage error: the binary cannot do what was asked) saying it was built without RDMA support
//! and how to build it. A binary with the feature on a machine without a usable device exits
//! with status 1 and `no RDMA device: ...` before printing `listening`.
//!
//! The peers file lists every rank of the cluster, one `rank addr` per line (`#` starts a
//! comment; blank lines are ignored); ranks must be `0..N` with none missing, and this node
//! listens on its own line's address:
//!
//! ```text
//! # rank address
//! 0 127.0.0.1:7000
//! 1 127.0.0.1:7001
//! 2 127.0.0.1:7002
//! ```
//!
//! Under a launcher, `--bootstrap env` replaces `--rank` and `--peers` (exactly one of
//! `--peers` and `--bootstrap` is required): rank and size come from the launcher's
//! environment (Slurm, Open MPI/PRRTE, PMIx, MPICH/Hydra, torchrun; see
//! `lifeline_transport_common::bootstrap::LauncherEnv`), the node listens on `--listen`
//! (default `0.0.0.0:0`), and rank 0 hosts a rendezvous at `--rendezvous HOST:PORT` (default
//! `MASTER_ADDR:MASTER_PORT`) where every rank registers the IP of its interface that reaches
//! the rendezvous with its bound port, authenticated by the cluster key. Once all ranks
//! registered, each gets the whole book and prints `bootstrap` (`launcher`, `size`, `addr`,
//! `rendezvous`, `ms`; rank 0 also `refused`: the connections its rendezvous refused) before
//! `listening`. After `--bootstrap-timeout-ms` with ranks missing, every started process
//! prints `bootstrap_failed` (`missing`, `error`) and exits 1 with an error naming them. TCP
//! only: `--transport quic` with `--bootstrap` is refused.
//!
//! A process can also join a running cluster: `--join HOST:PORT[,HOST:PORT...]` replaces
//! `--rank` and `--peers`. It binds its listener (`--listen`, default `127.0.0.1:0`; an
//! unspecified IP is replaced, in what members are told, by the IP of the interface that routes
//! to the first contact), then asks the given members in turn, with back-off, to admit it (the
//! join preamble proves the cluster key; see `lifeline_transport_tcp::join`). Admitted, it
//! prints `joined` (`rank`, `epoch`: the admitting view, `join_id`, `join_ms`: from its first
//! request to the admission, `tries`, `contact`, `addr`, `span`), builds its node from the
//! admission (its span, holes and epoch) and the contact's address book, and from `listening`
//! on runs exactly as a node started from a peers file (the same stdin commands and lines).
//! Not admitted within `--join-timeout-ms`, it prints `join_failed` (`error`) and exits 1.
//! TCP only (`--transport tcp` or `tcp+rdma`): a QUIC node proves its rank with a certificate
//! issued for that rank, which a joiner cannot hold before it has one, so `--transport quic`
//! with `--join` is refused as a usage error. Every member prints `admitted` (`epoch`,
//! `ranks`, `joiners`: each with `rank`, `id`, `addr`, and `members`) for each view that
//! admitted joiners; `--join-batch-ms` is how long the coordinator lets a first waiting
//! joiner wait for others to share its view change.
//!
//! The key file holds the cluster secret (any bytes, used exactly as stored; every node of the
//! cluster reads the same file). Without `--key-file`, the secret is taken from the
//! `LIFELINE_CLUSTER_KEY` environment variable.
//!
//! stdout is one JSON object per line, written by a thread of its own through a bounded queue
//! (`node_out`: a slow or stalled reader never stops the event loop or the heartbeats; when the
//! queue is full the loop waits, back-pressuring the data class, and no line is ever dropped;
//! lines go out in batches, at most `node_out::WRITE_REST` (50 ms) after they were queued),
//! each with `event`, `rank`, `t_ms` (wall clock, ms since the Unix epoch, for comparing
//! processes) and `now_ms` (the node's protocol clock):
//! `listening` first, then `link_up`, `link_down` (`peer`, `reason`), `xcast_delivered`
//! (`op`, `origin`, `seq`, `tag`, `payload`), `xcast_completed`, `xcast_root_completed`,
//! `failure_confirmed` (`epoch`, `ranks`), `admitted` (`epoch`, `ranks`, `joiners`,
//! `members`), `view_changed` (`slot`, `parent`), `flood_delivered`,
//! `relm_delivered` (`src`, `uid`, `tag`, `payload`), `relm_acked` (`dst`, `upto`),
//! `relm_failed` (`dst`, `first`, `count`), `relm_source_lost`, and the answers to commands;
//! last, `stopped` (`reason`: `quit`, `sigterm`, `sigint`, `stdin_eof`, `transport_closed`)
//! when the node ends on its own terms (an evicted node's last line is `evicted`).
//!
//! A node the cluster removes prints one `evicted` line (`epoch`: the failure epoch of the
//! member that told it, from the core's `MembershipEvent::Evicted`; `null` when it only found
//! its own slot gone from its view) and exits with status 3, so a supervisor tells an evicted
//! node from one that failed (1) or was killed (a signal).
//!
//! With `--beat-grid` heartbeat rounds run on a wall-clock grid (`detect.beat_grid`, the
//! driver's clock aligned by `lifeline_transport_common::WallGrid`, four phases by rank), and
//! so do the keepalive checks (`TcpConfig::timer_grid`): the nodes of a host heartbeat in
//! shared instants and an observer reads its subjects' heartbeats in a few wake-ups a period
//! instead of one each.
//!
//! The core's heartbeat failure detector (`Config::detect`) runs by default: it notices hung
//! processes and cut links that TCP alone does not, and decides soft evidence (a reset, a
//! timeout, a close) instead of taking it as a death. `--no-detect` turns it off (TCP's link
//! timeout is then the only failure detector); `--detect` is accepted and changes nothing.
//! Every node of a cluster must agree.
//!
//! stdin takes commands, one per line: `xcast TAG TEXT` (answered `xcast_started` with its
//! `seq`, or `error`), `relm DST TAG TEXT` (a reliable message to rank DST; answered
//! `relm_started` with its `uid`, or `error`), `flood TEXT`, `revoke GROUP [EPOCH]` (answered
//! `revoke_started`; every rank, this one included, prints `revoked` once), `stats` (answered `stats` with the
//! adapter's and the core's counters, `membership` (where this rank's soft evidence went and
//! what held its decisions), `stdout.queue_waits` (lines that waited for room in the
//! stdout queue), with `--transport quic` the QUIC endpoint's own, `quic`: each refusal reason
//! apart, where the adapter's `handshakes_refused` is their sum, and with `--transport
//! tcp+rdma` the data plane's, `rdma`: queue pairs opened, frames over them, back-pressure,
//! completion-channel events), `quit`. With `--exit-on-stdin-eof` the node also stops when
//! stdin closes, so a supervisor that dies takes its nodes with it.

use lifeline_core::MembershipEvent;
use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use clap::Args;
use lifeline_core::tree::{Rank, RankSet};
use lifeline_core::{Config, Event, Instant, Node};
use lifeline_transport_common::bootstrap::{
    self, BootstrapError, BootstrapKey, LauncherEnv, RendezvousConfig,
};
use lifeline_transport_quic::{ClusterId, QuicConfig, QuicCounters, QuicEndpoint, RankIdentity};
use lifeline_transport_tcp::{
    spawn, AddressBook, ClusterKey, Handle, JoinSettings, Joined, Output, TcpConfig,
};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::node_json::{
    core_stats_json, detect_stats_json, event_json, join_stats_json, membership_stats_json,
    quorum_stats_json, revoke_stats_json, shrink_stats_json, startup_stats_json,
};
use crate::node_out::{self, Printer};
use crate::CliError;

/// The transport of a `lifeline cluster`'s nodes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum TransportKind {
    /// TCP, two connections per peer, authenticated by the cluster key.
    #[default]
    Tcp,
    /// QUIC, one connection per peer, mutual TLS under the cluster CA (`--cert-dir`,
    /// `--cluster`).
    Quic,
}

/// The transport a `lifeline node` runs on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum NodeTransport {
    /// TCP, two connections per peer, authenticated by the cluster key.
    #[default]
    Tcp,
    /// QUIC, one connection per peer, mutual TLS under the cluster CA (`--cert-dir`,
    /// `--cluster`).
    Quic,
    /// TCP for the control class (the cluster key), one RDMA RC queue pair per peer for the
    /// data class, on the first RDMA device with an active port. Needs a binary built with
    /// `--features rdma`.
    #[value(name = "tcp+rdma")]
    TcpRdma,
}

/// How a node's view changes are agreed (`membership.quorum`; every node of a cluster must
/// agree).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum QuorumMode {
    /// A view change is decided by members holding more than half of the previous view's
    /// weight; a candidate behind a lost root takes over by ballots; a side without a majority
    /// decides nothing (`docs/quorum.md`).
    #[default]
    Majority,
    /// The root decides alone, under the majority guard only (the earlier behaviour: a root
    /// cut off with a minority stalls everyone).
    None,
}

/// Where a node learns its rank and its peers without a peers file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum BootstrapKind {
    /// Rank and size from the launcher's environment (Slurm, Open MPI/PRRTE, PMIx,
    /// MPICH/Hydra, torchrun), the peers from a rendezvous hosted by rank 0.
    Env,
}

/// What `lifeline node --help` says after the options: the stdin commands, the tags they
/// allow (checked against the core's constants by a test) and how the node stops.
const NODE_AFTER_HELP: &str = "\
stdin commands, one per line, each answered by one JSON line on stdout:
  xcast TAG TEXT      reliable broadcast to every rank (answered `xcast_started` with its seq).
                      TAG is 1 (wire-up: processed before it is forwarded) or 16..=65535
                      (application tags); 0 and 2..=15 are reserved for Lifeline's own
                      broadcasts and refused.
  relm DST TAG TEXT   reliable message to rank DST (answered `relm_started` with its uid);
                      TAG is any of 0..=65535.
  flood TEXT          best-effort flood to every rank (answered `flood_started`).
  shrink R[,R...]     remove ranks on purpose, as one shrink campaign (answered
                      `campaign_started` with its id; `campaign_completed` with the ranks
                      removed and the epoch once every member removed them, or
                      `campaign_failed`). Every member prints `departed`; each target
                      drains, prints `left` and exits 0.
  revoke GROUP [EPOCH]
                      revoke GROUP (0..2^64) as of EPOCH (default: the current view's
                      epoch), answered `revoke_started`. Every live rank, this one included,
                      prints `revoked` (group, epoch, origin, hops, now_ms) exactly once per
                      (group, epoch); an older epoch than one already revoked is refused.
  stats               the transport's and the core's counters and this rank's tree view
                      (`view`: slot, parent, children), answered `stats`.

Every tree repair (a batch of deaths that recomputed this rank's view once) is printed as
`repaired` (ranks newly dead, scope `local` or `global`): a shrink campaign's departure
notice is one.
  quit                stop.

Joining a running cluster: `--join HOST:PORT[,HOST:PORT...]` instead of --rank and --peers
(TCP only). The node binds --listen (default 127.0.0.1:0), asks the members given, in turn,
to admit it, prints `joined` (rank, epoch, join_id, join_ms, tries) and then runs like any
node. Members print `admitted` (epoch, ranks, members) for each view that admits joiners.

Stopping: `quit`, SIGTERM, SIGINT (and stdin closing, with --exit-on-stdin-eof) print a last
line {\"event\":\"stopped\",\"reason\":\"quit\"|\"sigterm\"|\"sigint\"|\"stdin_eof\"|\"left\",...} and
exit 0. A node the cluster removed prints `evicted` and exits 3.

Under Open MPI keep mpirun from killing the job when one rank dies:
  mpirun --enable-recovery -np 8 lifeline node --bootstrap env --rendezvous HOST:PORT
and under Slurm: srun --no-kill -K0 lifeline node --bootstrap env --rendezvous HOST:PORT";

/// Arguments of `lifeline node`.
#[derive(Debug, Args)]
#[command(after_help = NODE_AFTER_HELP)]
pub(crate) struct NodeArgs {
    /// This node's rank (with --peers; --bootstrap takes it from the launcher, --join from
    /// the admission).
    #[arg(
        long,
        required_unless_present_any = ["bootstrap", "join"],
        conflicts_with_all = ["bootstrap", "join"]
    )]
    rank: Option<u32>,
    /// The transport: `tcp` (the cluster key), `quic` (certificates: `--cert-dir`,
    /// `--cluster`) or `tcp+rdma` (the cluster key; payloads over RDMA on the first device with
    /// an active port; only in a binary built with `--features rdma`).
    #[arg(long, value_enum, default_value_t = NodeTransport::Tcp)]
    transport: NodeTransport,
    /// QUIC: the certificate directory (`ca.pem` and `rank-R/{cert,key}.pem`, as `lifeline
    /// certs` writes them).
    #[arg(long, value_name = "DIR", required_if_eq("transport", "quic"))]
    cert_dir: Option<PathBuf>,
    /// QUIC: the cluster id the certificates were issued for.
    #[arg(long, value_name = "ID", required_if_eq("transport", "quic"))]
    cluster: Option<String>,
    /// The peers file: one `rank addr` per line, ranks 0..N (exactly one of --peers,
    /// --bootstrap and --join).
    #[arg(
        long,
        value_name = "FILE",
        required_unless_present_any = ["bootstrap", "join"],
        conflicts_with_all = ["bootstrap", "join"]
    )]
    peers: Option<PathBuf>,
    /// Join a running cluster through these members (their listening addresses, tried in
    /// turn with back-off) instead of starting from a peers file: prints `joined` with the
    /// rank and epoch it was admitted with, then runs as any node. TCP only.
    #[arg(
        long,
        value_name = "HOST:PORT[,HOST:PORT...]",
        value_delimiter = ',',
        conflicts_with = "bootstrap"
    )]
    join: Vec<String>,
    /// With --join: give up (print `join_failed`, exit 1) when not admitted within this long.
    #[arg(long, value_name = "MS", default_value_t = 60_000)]
    join_timeout_ms: u64,
    /// How long the coordinator lets the first waiting joiner wait for others, so that joiners
    /// arriving together are admitted in one view change (the core's `join.batch`; every node
    /// of a cluster should agree, the coordinator's counts).
    #[arg(long, value_name = "MS", default_value_t = 20)]
    join_batch_ms: u64,
    /// Start under a launcher instead of a peers file: `env` takes rank and size from the
    /// launcher's environment (SLURM_PROCID/SLURM_NTASKS, OMPI_COMM_WORLD_RANK/SIZE,
    /// PMIX_RANK, PMI_RANK/PMI_SIZE, RANK/WORLD_SIZE) and the peers from a rendezvous at
    /// --rendezvous (default MASTER_ADDR:MASTER_PORT) that rank 0 hosts. TCP only.
    #[arg(long, value_enum, value_name = "SOURCE")]
    bootstrap: Option<BootstrapKind>,
    /// The rendezvous address (rank 0 binds it; the others connect to it); default
    /// MASTER_ADDR:MASTER_PORT from the environment.
    #[arg(long, value_name = "HOST:PORT", requires = "bootstrap")]
    rendezvous: Option<String>,
    /// Bound on the rendezvous: ranks still missing then are named and every process exits
    /// with status 1 (registrants wait 2 s longer for that verdict).
    #[arg(
        long,
        value_name = "MS",
        default_value_t = 60_000,
        requires = "bootstrap"
    )]
    bootstrap_timeout_ms: u64,
    /// With --bootstrap: the address to listen on (default 0.0.0.0:0, any port; the address
    /// registered is then the IP of the interface that reaches the rendezvous, with the bound
    /// port). With --join: likewise (default 127.0.0.1:0; an unspecified IP is told to the
    /// members as the IP of the interface that routes to the first contact).
    #[arg(long, value_name = "ADDR", conflicts_with = "peers")]
    listen: Option<std::net::SocketAddr>,
    /// The cluster secret (default: the LIFELINE_CLUSTER_KEY environment variable).
    #[arg(long, value_name = "FILE")]
    key_file: Option<PathBuf>,
    /// Tree radix.
    #[arg(long, default_value_t = 8)]
    radix: u32,
    /// Bound on noticing a vanished peer (TCP_USER_TIMEOUT; keepalive derived from it).
    #[arg(long, value_name = "MS", default_value_t = 3000)]
    link_timeout_ms: u64,
    /// Failed dials before a peer is reported lost (back-off 50 ms doubling to 1 s).
    #[arg(long, default_value_t = 10)]
    dial_attempts: u32,
    /// For this long after start, a refused dial is retried like any failure (peers may still
    /// be starting); later, nothing listening means the process is gone: given up after 3
    /// tries (about 150 ms). The detector likewise suspects no peer it has never heard from
    /// within this grace (a peer that never starts is suspected when it ends).
    #[arg(long, value_name = "MS", default_value_t = 10_000)]
    startup_grace_ms: u64,
    /// Membership starts from check-ins: this rank is a member once the coordinator's notice
    /// lists it; every node prints `ready` once every launched rank is in, or, after
    /// `--startup-timeout-ms`, `startup_incomplete` with the ranks that never checked in
    /// (removed, cause `never_joined`, not failures; the node goes on with who is there).
    /// `--no-check-in`: the launch is the member set from the start (every node must agree).
    #[arg(long)]
    no_check_in: bool,
    /// How long the coordinator waits for every launched rank to check in (default: the
    /// start-up grace).
    #[arg(long, value_name = "MS")]
    startup_timeout_ms: Option<u64>,
    /// Stop when stdin closes.
    #[arg(long)]
    exit_on_stdin_eof: bool,
    /// Sleep this long before anything else (`lifeline cluster --start-skew` plays a launcher
    /// that spreads process starts with it).
    #[arg(long, value_name = "MS", default_value_t = 0, hide = true)]
    start_delay_ms: u64,
    /// Accepted for compatibility: the heartbeat failure detector runs by default.
    #[arg(long, conflicts_with = "no_detect")]
    #[allow(dead_code)] // read by clap only: it changes nothing
    detect: bool,
    /// Run without the core's heartbeat failure detector (TCP's link timeout alone notices
    /// failures; every node of a cluster must agree).
    #[arg(long)]
    no_detect: bool,
    /// Heartbeat rounds on a wall-clock grid (`detect.beat_grid`, four phases by rank) and the
    /// keepalive checks with them: an observer reads its subjects' heartbeats in a few
    /// wake-ups a period instead of one each (an idle 64-node cluster on 2 vCPUs: 8.25 ->
    /// 5.83 ms of CPU per node-second), but each phase's nodes wake together, and at 256
    /// nodes on 2 cores more ranks found their timers late (local health raised). Off by
    /// default; every node of a cluster should agree.
    #[arg(long, conflicts_with = "no_detect")]
    beat_grid: bool,
    /// How view changes are agreed: `majority` (quorum views, the default) or `none` (the
    /// root alone). Every node of a cluster must agree.
    #[arg(long, value_enum, default_value_t = QuorumMode::Majority)]
    quorum: QuorumMode,
}

/// How long an evicted node waits for the core's `Evicted` event after its own slot left its
/// view (the event names the epoch and normally follows in the same batch).
const EVICTED_GRACE: Duration = Duration::from_millis(250);

/// Milliseconds since the Unix epoch.
pub(crate) fn wall_ms() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64() * 1e3)
}

/// The cluster secret: the key file's bytes, or `LIFELINE_CLUSTER_KEY`.
fn load_secret(args: &NodeArgs) -> Result<Vec<u8>, CliError> {
    let secret = match &args.key_file {
        Some(path) => std::fs::read(path).map_err(|e| {
            CliError::Usage(format!("reading the key file {}: {e}", path.display()))
        })?,
        None => match std::env::var_os("LIFELINE_CLUSTER_KEY") {
            Some(v) => v.as_encoded_bytes().to_vec(),
            None => {
                return Err(CliError::Usage(
                    "no cluster key: give --key-file FILE or set LIFELINE_CLUSTER_KEY".into(),
                ))
            }
        },
    };
    if secret.is_empty() {
        return Err(CliError::Usage("the cluster key is empty".into()));
    }
    Ok(secret)
}

/// What a node listens with.
enum Start {
    Tcp(ClusterKey, tokio::net::TcpListener),
    Quic(QuicEndpoint),
    /// TCP control, RDMA data on this opened device.
    #[cfg(feature = "rdma")]
    TcpRdma(
        ClusterKey,
        tokio::net::TcpListener,
        lifeline_transport_rdma::RdmaSysVerbs,
    ),
}

/// Where the address book comes from.
enum Source {
    /// A peers file, read and checked: the book and this rank's address.
    Peers(PathBuf, AddressBook, std::net::SocketAddr),
    /// The launcher's environment and a rendezvous at this address.
    Bootstrap(LauncherEnv, String),
    /// A running cluster's members to ask for admission (`--join`).
    Join(Vec<std::net::SocketAddr>),
}

/// Reads and checks the peers file for `rank`.
fn read_peers(path: &PathBuf, rank: u32) -> Result<(AddressBook, std::net::SocketAddr), CliError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| CliError::Usage(format!("reading {}: {e}", path.display())))?;
    let book = AddressBook::parse(&text)
        .map_err(|e| CliError::Usage(format!("{}: {e}", path.display())))?;
    let span = book.span();
    if book.len() as u32 != span {
        return Err(CliError::Usage(format!(
            "{}: ranks must be 0..{span} with none missing ({} listed)",
            path.display(),
            book.len()
        )));
    }
    let Some(addr) = book.get(Rank(rank)) else {
        return Err(CliError::Usage(format!(
            "rank {rank} is not in {}",
            path.display()
        )));
    };
    Ok((book, addr))
}

/// The source of the book: exactly one of --peers (with --rank), --bootstrap and --join; the
/// rank, where it is known before the node starts (a joiner's comes with its admission).
fn source(args: &NodeArgs) -> Result<(Option<Rank>, Source), CliError> {
    if !args.join.is_empty() {
        if args.transport == NodeTransport::Quic {
            return Err(CliError::Usage(JOIN_NOT_ON_QUIC.into()));
        }
        let contacts = args
            .join
            .iter()
            .map(|c| resolve(c.trim()))
            .collect::<Result<Vec<_>, _>>()?;
        return Ok((None, Source::Join(contacts)));
    }
    match (&args.bootstrap, &args.peers, args.rank) {
        (Some(BootstrapKind::Env), None, None) => {
            if args.transport == NodeTransport::Quic {
                return Err(CliError::Usage(
                    "--bootstrap runs on TCP only (QUIC needs per-rank certificates from \
                     `lifeline certs` and a peers file)"
                        .into(),
                ));
            }
            let env = LauncherEnv::from_env()
                .map_err(|e| CliError::Usage(format!("--bootstrap env: {e}")))?;
            let Some(rv) = args.rendezvous.clone().or_else(|| env.rendezvous.clone()) else {
                return Err(CliError::Usage(
                    "--bootstrap env: no rendezvous address: give --rendezvous HOST:PORT or set \
                     MASTER_ADDR and MASTER_PORT"
                        .into(),
                ));
            };
            Ok((Some(Rank(env.rank)), Source::Bootstrap(env, rv)))
        }
        (None, Some(path), Some(rank)) => {
            let (book, addr) = read_peers(path, rank)?;
            Ok((Some(Rank(rank)), Source::Peers(path.clone(), book, addr)))
        }
        _ => Err(CliError::Usage(
            "give either --peers FILE with --rank R, --bootstrap env, or --join HOST:PORT".into(),
        )),
    }
}

/// Why `--join` is refused on QUIC.
const JOIN_NOT_ON_QUIC: &str = "--join runs on TCP only (`--transport tcp` or `tcp+rdma`): a \
    QUIC node proves its rank with a certificate issued for that rank (`lifeline certs`), and a \
    joiner has no rank before it is admitted";

/// A contact's address: `ip:port`, or `host:port` resolved (its first address).
fn resolve(contact: &str) -> Result<std::net::SocketAddr, CliError> {
    use std::net::ToSocketAddrs;
    contact
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .ok_or_else(|| CliError::Usage(format!("--join: {contact:?} is not HOST:PORT")))
}

/// Eight bytes of OS randomness (a joiner's nonce must be unique to its process), or the pid
/// and the clock where /dev/urandom cannot be read.
fn os_random() -> u64 {
    use std::io::Read;
    let mut b = [0u8; 8];
    match std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut b)) {
        Ok(()) => u64::from_le_bytes(b),
        Err(_) => u64::from(std::process::id()) << 32 ^ (wall_ms() * 1e3) as u64,
    }
}

/// `--join`: binds the listener (before the request: its address goes in it), asks the
/// contacts until admitted and prints `joined`; not admitted in time, prints `join_failed`.
async fn join_cluster(
    args: &NodeArgs,
    p: &Printer,
    contacts: &[std::net::SocketAddr],
    key: &ClusterKey,
    cfg: &TcpConfig,
    seed: u64,
) -> Result<(Joined, std::net::SocketAddr, tokio::net::TcpListener), CliError> {
    let listen = args
        .listen
        .unwrap_or_else(|| std::net::SocketAddr::from(([127, 0, 0, 1], 0)));
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .map_err(|e| CliError::Failed(format!("listening on {listen}: {e}")))?;
    let addr = listener
        .local_addr()
        .and_then(|bound| lifeline_transport_tcp::join::reachable_addr(bound, contacts[0]))
        .map_err(|e| CliError::Failed(format!("listening on {listen}: {e}")))?;
    let mut settings = JoinSettings::default();
    settings.give_up = Duration::from_millis(args.join_timeout_ms);
    let names: Vec<String> = contacts.iter().map(ToString::to_string).collect();
    match lifeline_transport_tcp::join::join(contacts, addr, key, cfg, &settings, seed).await {
        Ok(j) => {
            p.set_rank(j.admission.rank.0);
            p.line(
                Instant::ZERO,
                "joined",
                json!({"epoch": j.admission.epoch, "join_id": j.id.to_string(),
                       "join_ms": j.elapsed.as_secs_f64() * 1e3, "tries": j.stats.tries,
                       "contact": j.contact.to_string(), "addr": addr.to_string(),
                       "span": j.admission.snapshot.layout.span()}),
            )
            .await;
            Ok((j, addr, listener))
        }
        Err(e) => {
            p.line(
                Instant::ZERO,
                "join_failed",
                json!({"contacts": names, "addr": addr.to_string(), "error": e.to_string()}),
            )
            .await;
            Err(CliError::Failed(format!(
                "joining through {}: {e}",
                names.join(",")
            )))
        }
    }
}

/// Runs the rendezvous for `env` at `rv` on a fresh listener; prints `bootstrap` (or
/// `bootstrap_failed`, then fails naming the missing ranks).
async fn bootstrap(
    args: &NodeArgs,
    p: &Printer,
    env: &LauncherEnv,
    rv: &str,
    secret: &[u8],
) -> Result<(AddressBook, std::net::SocketAddr, tokio::net::TcpListener), CliError> {
    let t0 = std::time::Instant::now();
    let listen = args.listen.unwrap_or_else(|| {
        if rv.starts_with('[') {
            "[::]:0".parse().expect("an address")
        } else {
            "0.0.0.0:0".parse().expect("an address")
        }
    });
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .map_err(|e| CliError::Failed(format!("listening on {listen}: {e}")))?;
    let bound = listener
        .local_addr()
        .map_err(|e| CliError::Failed(format!("listening on {listen}: {e}")))?;
    let key = BootstrapKey::from_secret(secret)
        .ok_or_else(|| CliError::Usage("the cluster key is empty".into()))?;
    let cfg = RendezvousConfig::with_timeout(Duration::from_millis(args.bootstrap_timeout_ms));
    let ms = || t0.elapsed().as_secs_f64() * 1e3;
    match bootstrap::join(rv, &key, env.rank, env.size, bound, &cfg).await {
        Ok(j) => {
            p.line(
                Instant::ZERO,
                "bootstrap",
                json!({"launcher": env.launcher.name(), "size": env.size, "rendezvous": rv,
                       "addr": j.me.to_string(), "ms": ms(),
                       "refused": j.refused.map(|r| r.total())}),
            )
            .await;
            Ok((j.book, j.me, listener))
        }
        Err(e) => {
            let (missing, wrong_key) = match &e {
                BootstrapError::Missing {
                    missing, wrong_key, ..
                } => (json!(missing), json!(wrong_key)),
                _ => (Value::Null, Value::Null),
            };
            p.line(
                Instant::ZERO,
                "bootstrap_failed",
                json!({"launcher": env.launcher.name(), "size": env.size, "rendezvous": rv,
                       "ms": ms(), "missing": missing, "wrong_key": wrong_key,
                       "error": e.to_string()}),
            )
            .await;
            Err(CliError::Failed(format!(
                "bootstrap ({} rank {} of {}): {e}",
                env.launcher, env.rank, env.size
            )))
        }
    }
}

/// Runs `lifeline node`.
pub(crate) fn run(args: &NodeArgs) -> Result<(), CliError> {
    crate::init_tracing();
    std::thread::sleep(Duration::from_millis(args.start_delay_ms));
    if args.transport == NodeTransport::TcpRdma && !cfg!(feature = "rdma") {
        return Err(CliError::Usage(NO_RDMA_SUPPORT.into()));
    }
    let (known_rank, source) = source(args)?;
    let secret = match args.transport {
        NodeTransport::Tcp | NodeTransport::TcpRdma => Some(load_secret(args)?),
        NodeTransport::Quic => None,
    };
    let identity = match (args.transport, &args.cert_dir, &args.cluster) {
        (NodeTransport::Quic, Some(dir), Some(id)) => {
            let cluster = ClusterId::new(id).map_err(|e| CliError::Usage(e.to_string()))?;
            let me = known_rank.ok_or_else(|| CliError::Usage(JOIN_NOT_ON_QUIC.into()))?;
            Some(
                RankIdentity::load(dir, me, &cluster)
                    .map_err(|e| CliError::Usage(e.to_string()))?,
            )
        }
        (NodeTransport::Quic, _, _) => {
            return Err(CliError::Usage(
                "--transport quic needs --cert-dir and --cluster".into(),
            ))
        }
        (NodeTransport::Tcp | NodeTransport::TcpRdma, _, _) => None,
    };
    let seed = match known_rank {
        Some(me) => {
            u64::from(std::process::id()) << 32 ^ u64::from(me.0) ^ (wall_ms() * 1e3) as u64
        }
        // A joiner's seed draws its nonce: two processes must never share one.
        None => os_random(),
    };
    let cfg = TcpConfig {
        link_timeout: Duration::from_millis(args.link_timeout_ms.max(1)),
        dial_attempts: args.dial_attempts.max(1),
        startup_grace: Duration::from_millis(args.startup_grace_ms),
        // With the detector deciding soft evidence, a refused fresh dial (after start-up) is
        // the hard evidence that settles a reset or close at once.
        refused_attempts: if !args.no_detect {
            1
        } else {
            TcpConfig::default().refused_attempts
        },
        // Keepalive checks on the heartbeat grid (`--beat-grid`): they share its wake-ups.
        timer_grid: args
            .beat_grid
            .then(|| lifeline_core::detect::DetectConfig::default().period.into()),
        ..TcpConfig::default()
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::Failed(format!("starting the runtime: {e}")))?;
    // stdout through a bounded queue and a writer thread (see `node_out`).
    let (p, writer) = node_out::start(known_rank.map(|r| r.0))
        .map_err(|e| CliError::Failed(format!("starting the stdout writer: {e}")))?;
    let result = rt.block_on(async move {
        let p = p;
        // A joiner's admission: its rank, epoch and tree.
        let mut admission = None;
        let (book, addr, start) = match (source, secret, identity) {
            (Source::Bootstrap(env, rv), Some(secret), _) => {
                let (book, addr, listener) = bootstrap(args, &p, &env, &rv, &secret).await?;
                let key =
                    ClusterKey::from_secret(&secret).map_err(|e| CliError::Usage(e.to_string()))?;
                (book, addr, tcp_or_rdma(args, key, listener)?)
            }
            (Source::Join(contacts), Some(secret), _) => {
                let key =
                    ClusterKey::from_secret(&secret).map_err(|e| CliError::Usage(e.to_string()))?;
                let (joined, addr, listener) =
                    join_cluster(args, &p, &contacts, &key, &cfg, seed).await?;
                admission = Some(joined.admission);
                (joined.book, addr, tcp_or_rdma(args, key, listener)?)
            }
            (Source::Peers(_, book, addr), Some(secret), _) => {
                let key =
                    ClusterKey::from_secret(&secret).map_err(|e| CliError::Usage(e.to_string()))?;
                let listener = tokio::net::TcpListener::bind(addr)
                    .await
                    .map_err(|e| CliError::Failed(format!("listening on {addr}: {e}")))?;
                (book, addr, tcp_or_rdma(args, key, listener)?)
            }
            (Source::Peers(path, book, addr), None, Some(id)) => {
                let qcfg = QuicConfig::with_link_timeout(cfg.link_timeout)
                    .map_err(|e| CliError::Usage(e.to_string()))?;
                let qbook = lifeline_transport_quic::AddressBook::try_from(&book)
                    .map_err(|e| CliError::Usage(format!("{}: {e}", path.display())))?;
                let ep = QuicEndpoint::bind(&id, &qcfg, addr, Some(qbook))
                    .map_err(|e| CliError::Failed(format!("listening on {addr}: {e}")))?;
                (book, addr, Start::Quic(ep))
            }
            _ => return Err(CliError::Usage("no cluster key or identity".into())),
        };
        let mut config = Config::new(book.span(), args.radix);
        config.detect.enabled = !args.no_detect;
        // Every tree repair is printed (`repaired`): a supervisor counts repair passes.
        config.report_repairs = true;
        // The same start-up grace as the links': a peer never heard from within it has not
        // started yet (a launcher spreads starts over seconds), it is not suspected.
        config.detect.startup_grace = Duration::from_millis(args.startup_grace_ms).into();
        // `--beat-grid`: heartbeat rounds on the wall clock's grid (the processes of a phase
        // heartbeat in the same instants and each reads its subjects' heartbeats together).
        config.detect.beat_grid = args.beat_grid;
        config.membership.check_in = !args.no_check_in;
        config.membership.quorum = args.quorum == QuorumMode::Majority;
        config.membership.startup_timeout =
            Duration::from_millis(args.startup_timeout_ms.unwrap_or(args.startup_grace_ms)).into();
        config.join.batch = Duration::from_millis(args.join_batch_ms).into();
        // A joiner's node starts from its admission: the span, holes and epoch of the view
        // that admitted it (its radix must be the cluster's).
        let (config, me) = match &admission {
            Some(a) => (
                config.for_admission(a).map_err(|e| {
                    CliError::Usage(format!("--join: {e} (--radix {})", args.radix))
                })?,
                a.rank,
            ),
            None => (config, known_rank.expect("a rank without --join")),
        };
        let span = config.span;
        let node = Node::new(config, me, seed, Instant::ZERO)
            .map_err(|e| CliError::Usage(e.to_string()))?;
        p.line(
            Instant::ZERO,
            "listening",
            json!({"addr": addr.to_string(), "pid": std::process::id(), "span": span,
                   "radix": args.radix}),
        )
        .await;
        // The transport's own counters for `stats`: QUIC's endpoint (each refusal reason
        // apart) here, the RDMA data plane's once its node exists.
        #[cfg_attr(not(feature = "rdma"), allow(unused_mut))]
        let mut extra: Option<ExtraStats> = match &start {
            Start::Quic(ep) => {
                let c: QuicCounters = ep.counters();
                Some(("quic", Box::new(move || c.snapshot().fields())))
            }
            _ => None,
        };
        let mut tcp = match start {
            Start::Tcp(key, listener) => spawn(node, book, key, cfg, listener),
            #[cfg(feature = "rdma")]
            Start::TcpRdma(key, listener, verbs) => {
                let rdma = lifeline_transport_rdma::RdmaConfig {
                    seed,
                    ..Default::default()
                };
                let n = lifeline_transport_rdma::spawn(node, book, key, cfg, rdma, verbs, listener);
                // The data plane's counters, for `stats`.
                let c = n.connector.clone();
                extra = Some(("rdma", Box::new(move || c.plane_stats().fields())));
                n.node
            }
            Start::Quic(ep) => {
                let driver = cfg.driver_config();
                lifeline_transport_quic::spawn(node, book, ep, driver)
                    .map_err(|e| CliError::Usage(e.to_string()))?
            }
        };
        let mut stdin = BufReader::new(tokio::io::stdin()).lines();
        let mut stdin_open = true;
        let mut last_now = Instant::ZERO;
        let mut evicted = false;
        // Set when this rank's own slot left its view: the core's `Evicted` event (with the
        // epoch) is awaited until then.
        let mut view_lost: Option<tokio::time::Instant> = None;
        let mut sigterm = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .map_err(|e| CliError::Failed(format!("installing the SIGTERM handler: {e}")))?;
        // Why the loop ended, for the last line (`stopped`); an eviction prints `evicted`.
        let mut stop_reason = "transport_closed";
        loop {
            tokio::select! {
                out = tcp.outputs.recv() => {
                    let Some(out) = out else { break };
                    match out {
                        Output::Event { at, event: e } => {
                            // `now_ms`: the time of the input (frame, timer, command, link
                            // change) that caused the event.
                            last_now = at;
                            let (name, v) = event_json(&e);
                            p.line(at, name, v).await;
                            if matches!(&e, Event::Membership(MembershipEvent::Left { .. })) {
                                // A shrink target drained and was excluded: a clean exit.
                                tracing::debug!(rank = me.0, "left: stopping");
                                stop_reason = "left";
                                break;
                            }
                            if matches!(&e, Event::Membership(MembershipEvent::Evicted { .. })) {
                                // The cluster removed this rank; a departed rank never comes
                                // back, so it stops.
                                tracing::debug!(rank = me.0, "evicted: stopping");
                                evicted = true;
                                break;
                            }
                            if matches!(&e, Event::ViewChanged(d) if d.new_slot.is_none()) {
                                view_lost.get_or_insert_with(|| {
                                    tokio::time::Instant::now() + EVICTED_GRACE
                                });
                            }
                        }
                        Output::LinkUp { peer, at } => {
                            last_now = at;
                            p.line(at, "link_up", json!({"peer": peer.0})).await;
                        }
                        Output::LinkDown { peer, at, reason } => {
                            last_now = at;
                            p.line(at, "link_down",
                                   json!({"peer": peer.0, "reason": reason.to_string()})).await;
                        }
                        _ => {}
                    }
                }
                line = stdin.next_line(), if stdin_open => match line {
                    Ok(Some(l)) => {
                        if !command(&tcp.handle, extra.as_ref(), &p, &l).await {
                            stop_reason = "quit";
                            break;
                        }
                    }
                    _ => {
                        stdin_open = false;
                        if args.exit_on_stdin_eof {
                            stop_reason = "stdin_eof";
                            break;
                        }
                    }
                },
                () = sleep_until_some(view_lost) => {
                    // Presumed dead without being told (no `Evicted` event): stops all the same.
                    tracing::debug!(rank = me.0, "own slot left the view: stopping");
                    p.line(last_now, "evicted", json!({ "epoch": null })).await;
                    evicted = true;
                    break;
                }
                _ = tokio::signal::ctrl_c() => {
                    stop_reason = "sigint";
                    break;
                }
                _ = sigterm.recv() => {
                    stop_reason = "sigterm";
                    break;
                }
            }
        }
        tcp.handle.shutdown().await;
        let _ = tcp.task.await;
        if evicted {
            return Err(CliError::Evicted(format!("rank {} was evicted", me.0)));
        }
        p.line(last_now, "stopped", json!({ "reason": stop_reason }))
            .await;
        Ok(())
    });
    // Not waiting for the blocking stdin reader: an evicted node exits at once even while
    // its supervisor keeps stdin open (dropping the runtime would wait for the next line).
    rt.shutdown_background();
    // The printer went with the finished future: every queued line out, the last included.
    writer.finish();
    result
}

/// The error of `--transport tcp+rdma` in a binary built without the feature `rdma`.
const NO_RDMA_SUPPORT: &str = "--transport tcp+rdma: this lifeline was built without RDMA \
    support; rebuild it with `cargo build --release -p lifeline-cli --features rdma` (needs \
    libibverbs-dev, librdmacm-dev and libclang-dev to build, libibverbs1 to run)";

/// Completion queue entries of the node's device (shared by every peer's queue pair).
#[cfg(feature = "rdma")]
const CQ_DEPTH: u32 = 4096;

/// What a TCP-keyed node listens with: plain TCP, or (`tcp+rdma`) TCP and the first RDMA
/// device with an active port, opened now so that a missing device fails before `listening`.
fn tcp_or_rdma(
    args: &NodeArgs,
    key: ClusterKey,
    listener: tokio::net::TcpListener,
) -> Result<Start, CliError> {
    match args.transport {
        #[cfg(feature = "rdma")]
        NodeTransport::TcpRdma => {
            // `VerbsError::NoDevice` reads `no RDMA device: <why>`.
            let verbs = lifeline_transport_rdma::RdmaSysVerbs::open(None, CQ_DEPTH)
                .map_err(|e| CliError::Failed(format!("--transport tcp+rdma: {e}")))?;
            Ok(Start::TcpRdma(key, listener, verbs))
        }
        #[cfg(not(feature = "rdma"))]
        NodeTransport::TcpRdma => Err(CliError::Usage(NO_RDMA_SUPPORT.into())),
        NodeTransport::Tcp | NodeTransport::Quic => Ok(Start::Tcp(key, listener)),
    }
}

/// Sleeps until `at`, or forever when it is `None`.
async fn sleep_until_some(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// A transport's own counters for the `stats` answer: its key there (`quic`, `rdma`) and a
/// snapshot of `(name, value)` pairs.
type ExtraStats = (
    &'static str,
    Box<dyn Fn() -> Vec<(&'static str, u64)> + Send + Sync>,
);

/// Runs one stdin command; false for `quit`. `extra`: the transport's own counters, added to
/// the `stats` answer under their key.
async fn command(h: &Handle, extra: Option<&ExtraStats>, p: &Printer, line: &str) -> bool {
    let line = line.trim();
    tracing::trace!(rank = p.rank(), command = line, "stdin command");
    let (verb, rest) = line.split_once(' ').unwrap_or((line, ""));
    let now = h.inspect(Node::now).await.unwrap_or(Instant::ZERO);
    match verb {
        "" => {}
        "quit" => return false,
        "xcast" => {
            let (tag, body) = rest.trim().split_once(' ').unwrap_or((rest.trim(), ""));
            let Ok(tag) = tag.parse::<u16>() else {
                p.line(now, "error", json!({"command": line, "message": "usage: xcast TAG TEXT"})).await;
                return true;
            };
            let payload = Bytes::copy_from_slice(body.as_bytes());
            match h.xcast(tag, payload).await {
                Ok(seq) => p.line(now, "xcast_started", json!({"seq": seq, "tag": tag, "payload": body})).await,
                Err(e) => p.line(now, "error", json!({"command": line, "message": e.to_string()})).await,
            }
        }
        "relm" => {
            let mut parts = rest.trim().splitn(3, ' ');
            let dst = parts.next().and_then(|d| d.parse::<u32>().ok());
            let tag = parts.next().and_then(|t| t.parse::<u16>().ok());
            let body = parts.next().unwrap_or("").to_string();
            let (Some(dst), Some(tag)) = (dst, tag) else {
                p.line(now, "error", json!({"command": line, "message": "usage: relm DST TAG TEXT"})).await;
                return true;
            };
            let payload = Bytes::copy_from_slice(body.as_bytes());
            match h.command(move |n, now| n.relm_send(now, Rank(dst), tag, payload)).await {
                Ok(Ok(uid)) => p.line(
                    now,
                    "relm_started",
                    json!({"dst": dst, "uid": uid.get(), "tag": tag, "payload": body}),
                ).await,
                Ok(Err(e)) => p.line(now, "error", json!({"command": line, "message": e.to_string()})).await,
                Err(e) => p.line(now, "error", json!({"command": line, "message": e.to_string()})).await,
            }
        }
        "flood" => {
            let payload = Bytes::copy_from_slice(rest.as_bytes());
            match h.command(move |n, now| n.flood(now, payload)).await {
                Ok(Ok(id)) => p.line(now, "flood_started", json!({"id": id})).await,
                Ok(Err(e)) => p.line(now, "error", json!({"command": line, "message": e.to_string()})).await,
                Err(e) => p.line(now, "error", json!({"command": line, "message": e.to_string()})).await,
            }
        }
        "shrink" => {
            let targets: Option<RankSet> = rest
                .trim()
                .split(',')
                .map(|r| r.trim().parse::<u32>().ok().map(Rank))
                .collect();
            let Some(targets) = targets.filter(|t| !t.is_empty()) else {
                p.line(now, "error", json!({"command": line, "message": "usage: shrink R[,R...]"})).await;
                return true;
            };
            let list: Vec<u32> = targets.iter().map(|r| r.0).collect();
            match h.command(move |n, now| n.shrink(now, &targets)).await {
                Ok(Ok(id)) => p.line(now, "campaign_started", json!({"id": id.to_string(), "targets": list})).await,
                Ok(Err(e)) => p.line(now, "error", json!({"command": line, "message": e.to_string()})).await,
                Err(e) => p.line(now, "error", json!({"command": line, "message": e.to_string()})).await,
            }
        }
        "revoke" => {
            let mut parts = rest.split_whitespace();
            let group = parts.next().and_then(|g| g.parse::<u64>().ok());
            let epoch = parts.next().map(|e| e.parse::<u64>().ok());
            let (Some(group), None | Some(Some(_)), None) = (group, epoch, parts.next()) else {
                p.line(now, "error", json!({"command": line, "message": "usage: revoke GROUP [EPOCH]"})).await;
                return true;
            };
            let epoch = epoch.flatten();
            match h.command(move |n, now| {
                let epoch = epoch.unwrap_or_else(|| n.epoch());
                n.revoke(now, group, epoch).map(|()| epoch)
            }).await {
                Ok(Ok(epoch)) => p.line(now, "revoke_started", json!({"group": group, "epoch": epoch})).await,
                Ok(Err(e)) => p.line(now, "error", json!({"command": line, "message": e.to_string()})).await,
                Err(e) => p.line(now, "error", json!({"command": line, "message": e.to_string()})).await,
            }
        }
        "stats" => {
            let core = h.inspect(|n| n.stats().clone()).await.unwrap_or_default();
            let transport: serde_json::Map<String, Value> = h
                .stats()
                .fields()
                .into_iter()
                .map(|(k, v)| (k.to_string(), json!(v)))
                .collect();
            let joins = h.inspect(Node::join_stats).await.unwrap_or_default();
            let startup = h.inspect(Node::startup_stats).await.unwrap_or_default();
            let shrink = h.inspect(Node::shrink_stats).await.unwrap_or_default();
            let revoke = h.inspect(Node::revoke_stats).await.unwrap_or_default();
            let quorum = h.inspect(Node::quorum_stats).await.unwrap_or_default();
            let corroboration = h.inspect(Node::corroboration_stats).await.unwrap_or_default();
            // This rank's tree view now: where its broadcasts and repairs go.
            let view = h
                .inspect(|n| {
                    n.tree().view().map(|v| {
                        json!({"slot": v.slot().0, "parent": v.parent().map(|r| r.0),
                               "children": v.live_children().map(|r| r.0).collect::<Vec<_>>()})
                    })
                })
                .await
                .ok()
                .flatten();
            let mut v = json!({"view": view, "transport": transport, "core": core_stats_json(&core),
                               "detect": detect_stats_json(&core.detect),
                               "join": join_stats_json(&joins),
                               "startup": startup_stats_json(&startup),
                               "shrink": shrink_stats_json(&shrink),
                               "revoke": revoke_stats_json(&revoke),
                               "quorum": quorum_stats_json(&quorum),
                               "membership": membership_stats_json(&core.membership, &corroboration, &quorum),
                               "stdout": {"queue_waits": p.waits()}});
            if let Some((key, snapshot)) = extra {
                let fields: serde_json::Map<String, Value> = snapshot()
                    .into_iter()
                    .map(|(k, v)| (k.to_string(), json!(v)))
                    .collect();
                v[*key] = Value::Object(fields);
            }
            p.line(now, "stats", v).await;
        }
        _ => p.line(
            now,
            "error",
            json!({"command": line, "message": "commands: xcast TAG TEXT | relm DST TAG TEXT | flood TEXT | shrink R[,R...] | revoke GROUP [EPOCH] | stats | quit"}),
        ).await,
    }
    true
}

#[cfg(test)]
mod tests {
    use super::NODE_AFTER_HELP;
    use lifeline_core::xcast::{FIRST_APP_TAG, TAG_WIREUP};

    /// `--help` states the core's own tag rule (`Node::xcast` refuses the others).
    #[test]
    fn help_states_the_core_tag_rule() {
        for needle in [
            format!("TAG is {TAG_WIREUP} (wire-up"),
            format!("or {FIRST_APP_TAG}..=65535"),
            format!("0 and 2..={} are reserved", FIRST_APP_TAG - 1),
        ] {
            assert!(NODE_AFTER_HELP.contains(&needle), "{needle:?}");
        }
    }
}
