//! A running node: [`Running`] owns a tokio runtime (its own threads, named `lifeline-rt`) that
//! runs the shared driver over TCP (or QUIC) exactly as `lifeline node` does, and gives a
//! blocking API to a foreign caller (the Python binding): commands, and the driver's outputs
//! received in bounded waits ([`Running::recv`]), so the caller can check for signals between
//! two waits.
//!
//! - **Nothing is dropped.** Outputs are read straight from the driver's channel: while the
//!   caller does not read, the driver back-pressures (it stops reading data frames and refuses
//!   commands with `OutputsFull`), and heartbeats and membership keep running on the runtime.
//! - **The runtime never runs caller code** (it never takes the GIL): the caller's threads wait
//!   on channels; the runtime's threads only run the driver.
//! - **Fork.** The process id is recorded at start; every call from another process (a fork's
//!   child) fails at once with [`RunError::Forked`] before touching any lock, and dropping the
//!   node there leaks it instead of joining threads that do not exist in the child.

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc as std_mpsc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use lifeline_core::tree::{Rank, RankSet};
use lifeline_core::{CommandError, Config, Instant, Node, RelmError, XcastError};
use lifeline_transport_common::bootstrap::{self, BootstrapKey, LauncherEnv, RendezvousConfig};
use lifeline_transport_tcp::{AddressBook, ClusterKey, Handle, Output, TcpConfig, TransportError};
use tokio::sync::mpsc;

use crate::events::{Ev, Members};

/// The transport a running node uses.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Transport {
    /// TCP, two connections per peer, authenticated by the cluster key.
    #[default]
    Tcp,
    /// QUIC, one connection per peer, mutual TLS under the cluster CA (`lifeline certs`).
    Quic {
        /// `ca.pem` and `rank-R/{cert,key}.pem`.
        cert_dir: PathBuf,
        /// The cluster id the certificates were issued for.
        cluster: String,
    },
}

/// How to start a node: `lifeline node`'s options (the defaults are its defaults).
#[derive(Clone, Debug)]
pub struct StartOptions {
    /// This rank (with `peers`); `None` with `bootstrap_env`.
    pub rank: Option<u32>,
    /// Every rank's address (`host:port`), ranks `0..N` with none missing.
    pub peers: Vec<(u32, String)>,
    /// Rank and size from the launcher's environment (torchrun, Slurm, Open MPI, PMIx, Hydra)
    /// and the book from a rendezvous that rank 0 hosts.
    pub bootstrap_env: bool,
    /// The rendezvous (default `MASTER_ADDR:MASTER_PORT`).
    pub rendezvous: Option<String>,
    /// With `bootstrap_env`: the address to listen on (default `0.0.0.0:0`).
    pub listen: Option<String>,
    /// The cluster secret; `None`: `LIFELINE_CLUSTER_KEY`.
    pub key: Option<Vec<u8>>,
    /// TCP or QUIC.
    pub transport: Transport,
    /// Tree radix.
    pub radix: u32,
    /// The heartbeat failure detector (every node of a cluster must agree).
    pub detect: bool,
    /// Bound on noticing a vanished peer (TCP_USER_TIMEOUT).
    pub link_timeout: Duration,
    /// Failed dials before a peer is reported lost.
    pub dial_attempts: u32,
    /// Peers may still be starting for this long: refused dials are retried, silence is not
    /// suspected.
    pub startup_grace: Duration,
    /// Membership starts from check-ins, as under `lifeline node` (on by default here; the
    /// core's and the sans-IO node's default is off): each member reports `Ready` once every
    /// launched rank checked in, or `StartupIncomplete` after `startup_timeout`. Off: the launch
    /// is the member set from the start (every node of a cluster must agree).
    pub check_in: bool,
    /// How long the coordinator waits for every launched rank to check in (`None`: the
    /// start-up grace, as `lifeline node --startup-timeout-ms`).
    pub startup_timeout: Option<Duration>,
    /// Bound on the rendezvous.
    pub bootstrap_timeout: Duration,
    /// The coordinator's join batch.
    pub join_batch: Duration,
    /// Outputs buffered for the caller before the driver back-pressures.
    pub output_buffer: usize,
    /// The node's seed (default: from the pid, the rank and the clock).
    pub seed: Option<u64>,
    /// Core settings by key ([`crate::config::KEYS`]), applied last.
    pub config: Vec<(String, u64)>,
}

impl Default for StartOptions {
    fn default() -> Self {
        Self {
            rank: None,
            peers: Vec::new(),
            bootstrap_env: false,
            rendezvous: None,
            listen: None,
            key: None,
            transport: Transport::Tcp,
            radix: 8,
            detect: true,
            link_timeout: Duration::from_millis(3000),
            dial_attempts: 10,
            startup_grace: Duration::from_millis(10_000),
            check_in: true,
            startup_timeout: None,
            bootstrap_timeout: Duration::from_millis(60_000),
            join_batch: Duration::from_millis(20),
            output_buffer: 4096,
            seed: None,
            config: Vec::new(),
        }
    }
}

/// Why a node did not start.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StartError {
    /// The options are wrong (nothing was started).
    #[error("{0}")]
    Usage(String),
    /// Starting failed (binding, the rendezvous, the runtime).
    #[error("{0}")]
    Failed(String),
}

/// Why a call on a running node was refused. A refused call changed nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RunError {
    /// Called from another process than the one that started the node (a fork's child).
    #[error("this node was started by process {started}; it cannot be used from process {now} (a fork's child): start a new node there")]
    Forked {
        /// The starting process.
        started: u32,
        /// This process.
        now: u32,
    },
    /// The node is closed (or its driver stopped).
    #[error("the node is closed")]
    Closed,
    /// A send queue, the unacknowledged window or the caller's unread events are full: read
    /// events, wait, retry.
    #[error("back-pressure: {0}")]
    Backpressure(String),
    /// This rank, or the destination, is not a member of the cluster.
    #[error("{0}")]
    NotAMember(String),
    /// The destination is alive but unreachable now.
    #[error("{0}")]
    Unreachable(String),
    /// The payload is too large for one frame.
    #[error("{0}")]
    TooLarge(String),
    /// A bad argument (a reserved tag, a rank outside the span, bad shrink targets).
    #[error("{0}")]
    Invalid(String),
    /// This rank is leaving (a shrink campaign named it): it takes no new commands, and leaves
    /// once drained and excluded.
    #[error("{0}")]
    Leaving(String),
}

impl From<CommandError> for RunError {
    fn from(e: CommandError) -> Self {
        let s = e.to_string();
        match e {
            CommandError::Dead => Self::NotAMember(format!(
                "this rank was removed from the cluster and takes no commands ({s})"
            )),
            CommandError::PeerDead(r) => {
                Self::NotAMember(format!("rank {} is not a member of the cluster", r.0))
            }
            CommandError::Unreachable(_) => Self::Unreachable(s),
            CommandError::Leaving => Self::Leaving(s),
            CommandError::TooLarge { .. } => Self::TooLarge(s),
            CommandError::Xcast(XcastError::Backpressure { .. })
            | CommandError::Relm(RelmError::Backpressure { .. }) => Self::Backpressure(s),
            _ => Self::Invalid(s),
        }
    }
}

impl From<TransportError> for RunError {
    fn from(e: TransportError) -> Self {
        let s = e.to_string();
        match e {
            TransportError::Command(c) => c.into(),
            TransportError::Backpressure { .. } | TransportError::OutputsFull { .. } => {
                Self::Backpressure(s)
            }
            TransportError::Stopped => Self::Closed,
            TransportError::Unreachable(_) => Self::Unreachable(s),
            _ => Self::Invalid(s),
        }
    }
}

/// The agreed view, as a running node has applied it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ViewInfo {
    /// The epoch of the last view change (0: none yet).
    pub epoch: u64,
    /// Ranks ever in the cluster (`0..span`).
    pub span: u32,
    /// Ranks removed, ascending.
    pub removed: Vec<u32>,
    /// Members, ascending.
    pub members: Vec<u32>,
}

impl From<lifeline_core::MembershipView> for ViewInfo {
    fn from(v: lifeline_core::MembershipView) -> Self {
        let removed: Vec<u32> = v.removed.iter().map(|r| r.0).collect();
        let members = (0..v.span)
            .filter(|r| removed.binary_search(r).is_err())
            .collect();
        Self {
            epoch: v.epoch,
            span: v.span,
            removed,
            members,
        }
    }
}

/// What a started node is, besides its handle.
#[derive(Clone, Debug)]
pub struct Info {
    /// This rank.
    pub rank: u32,
    /// The address it listens on (the one its peers know).
    pub addr: SocketAddr,
    /// Ranks at start (`0..span`).
    pub span: u32,
    /// The launcher found (`bootstrap_env`), e.g. `torchrun`.
    pub launcher: Option<String>,
}

/// A node being started on its runtime ([`Running::start`]): wait for it in slices.
pub struct Starting {
    /// `None` once handed to the [`Running`] node.
    rt: Option<tokio::runtime::Runtime>,
    done: std_mpsc::Receiver<Result<Started, StartError>>,
}

struct Started {
    node: lifeline_transport_common::RunningNode,
    info: Info,
    members: Members,
}

impl Starting {
    /// Waits up to `wait` for the start to finish: `None` while it still runs.
    pub fn poll(mut self, wait: Duration) -> Result<Result<Running, StartError>, Self> {
        match self.done.recv_timeout(wait) {
            Ok(Ok(s)) => match self.rt.take() {
                Some(rt) => Ok(Ok(Running::new(rt, s))),
                None => Ok(Err(StartError::Failed("the runtime is gone".into()))),
            },
            Ok(Err(e)) => Ok(Err(e)),
            Err(std_mpsc::RecvTimeoutError::Timeout) => Err(self),
            Err(std_mpsc::RecvTimeoutError::Disconnected) => Ok(Err(StartError::Failed(
                "the start task ended without an answer".into(),
            ))),
        }
    }
}

impl Drop for Starting {
    fn drop(&mut self) {
        // Dropped unfinished (interrupted, failed): never wait for the start task.
        if let Some(rt) = self.rt.take() {
            rt.shutdown_background();
        }
    }
}

/// What the caller reads: the driver's outputs, one converted event kept back by
/// [`Running::wait`], the member list.
struct Rx {
    outputs: mpsc::Receiver<Output>,
    peek: Option<Ev>,
    members: Members,
}

impl Rx {
    fn convert(&mut self, out: Output) -> Option<Ev> {
        match out {
            Output::Event { event, .. } => Some(self.members.convert(event)),
            Output::LinkUp { peer, .. } => Some(Ev::LinkUp { peer: peer.0 }),
            Output::LinkDown { peer, reason, .. } => Some(Ev::LinkDown {
                peer: peer.0,
                reason: reason.to_string(),
            }),
            _ => None,
        }
    }
}

/// The state of a node of this process (see [`Running`]).
struct Inner {
    rt: Mutex<Option<tokio::runtime::Runtime>>,
    spawner: tokio::runtime::Handle,
    handle: Handle,
    rx: Mutex<Rx>,
    task: Mutex<Option<tokio::task::JoinHandle<()>>>,
    closed: AtomicBool,
}

/// A node running on its own runtime (see the module docs).
pub struct Running {
    pid: u32,
    info: Info,
    /// `None` only while dropping.
    inner: Option<Inner>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Running {
    /// Starts a node as `opts` say, on a new runtime: wait for it with [`Starting::poll`].
    pub fn start(opts: StartOptions) -> Result<Starting, StartError> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .max_blocking_threads(2)
            .thread_name("lifeline-rt")
            .enable_all()
            .build()
            .map_err(|e| StartError::Failed(format!("starting the runtime: {e}")))?;
        let (tx, done) = std_mpsc::channel();
        rt.spawn(async move {
            let _ = tx.send(start(opts).await);
        });
        Ok(Starting { rt: Some(rt), done })
    }

    fn new(rt: tokio::runtime::Runtime, s: Started) -> Self {
        let Started {
            node,
            info,
            members,
        } = s;
        Self {
            pid: std::process::id(),
            info,
            inner: Some(Inner {
                spawner: rt.handle().clone(),
                rt: Mutex::new(Some(rt)),
                handle: node.handle,
                rx: Mutex::new(Rx {
                    outputs: node.outputs,
                    peek: None,
                    members,
                }),
                task: Mutex::new(Some(node.task)),
                closed: AtomicBool::new(false),
            }),
        }
    }

    /// The process that started the node.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Rank, address, span, launcher.
    pub fn info(&self) -> &Info {
        &self.info
    }

    /// The node's state, after the fork and close checks.
    fn inner(&self) -> Result<&Inner, RunError> {
        let now = std::process::id();
        if now != self.pid {
            return Err(RunError::Forked {
                started: self.pid,
                now,
            });
        }
        match &self.inner {
            Some(i) if !i.closed.load(Ordering::Acquire) => Ok(i),
            _ => Err(RunError::Closed),
        }
    }

    /// Runs `f` to its end on the runtime, from a thread outside it; a panic (the runtime
    /// going away under a racing `close`) is `Closed`.
    fn block_on<F: std::future::Future>(&self, f: F) -> Result<F::Output, RunError> {
        let i = self.inner()?;
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| i.spawner.block_on(f)))
            .map_err(|_| RunError::Closed)
    }

    /// The next event, waiting up to `wait`; `Ok(None)` if none came.
    pub fn recv(&self, wait: Duration) -> Result<Option<Ev>, RunError> {
        self.next(wait, true)
    }

    /// Waits up to `wait` for an event without taking it (the next `recv` or `try_recv`
    /// returns it): whether one is ready.
    pub fn wait(&self, wait: Duration) -> Result<bool, RunError> {
        Ok(self.next(wait, false)?.is_some())
    }

    /// The next event within `wait`; kept for the next call unless `take`.
    fn next(&self, wait: Duration, take: bool) -> Result<Option<Ev>, RunError> {
        let i = self.inner()?;
        let mut rx = lock(&i.rx);
        // Re-checked under the lock: `close` takes it before stopping the runtime.
        self.inner()?;
        if let Some(ev) = rx.peek.take() {
            if !take {
                rx.peek = Some(ev.clone());
            }
            return Ok(Some(ev));
        }
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let out = self
                .block_on(async { tokio::time::timeout_at(deadline, rx.outputs.recv()).await })?;
            match out {
                Err(_) => return Ok(None),
                Ok(None) => return Err(RunError::Closed),
                Ok(Some(o)) => {
                    if let Some(ev) = rx.convert(o) {
                        if !take {
                            rx.peek = Some(ev.clone());
                        }
                        return Ok(Some(ev));
                    }
                }
            }
        }
    }

    /// The next event if one is ready now; `Ok(None)` if none is, or if another thread is
    /// waiting for one.
    pub fn try_recv(&self) -> Result<Option<Ev>, RunError> {
        let i = self.inner()?;
        let Ok(mut rx) = i.rx.try_lock() else {
            return Ok(None);
        };
        if let Some(ev) = rx.peek.take() {
            return Ok(Some(ev));
        }
        loop {
            match rx.outputs.try_recv() {
                Ok(o) => {
                    if let Some(ev) = rx.convert(o) {
                        return Ok(Some(ev));
                    }
                }
                Err(mpsc::error::TryRecvError::Empty) => return Ok(None),
                Err(mpsc::error::TryRecvError::Disconnected) => return Err(RunError::Closed),
            }
        }
    }

    /// Reliable broadcast to every member; the sequence number.
    pub fn xcast(&self, tag: u16, payload: Bytes) -> Result<u64, RunError> {
        let h = self.inner()?.handle.clone();
        Ok(self.block_on(async move { h.xcast(tag, payload).await })??)
    }

    /// Reliable message to `dst`; its uid.
    pub fn relm_send(&self, dst: u32, tag: u16, payload: Bytes) -> Result<u32, RunError> {
        let h = self.inner()?.handle.clone();
        let uid = self.block_on(async move {
            h.command(move |n, now| n.relm_send(now, Rank(dst), tag, payload))
                .await
        })???;
        Ok(uid.get())
    }

    /// Best-effort flood to every rank; its id.
    pub fn flood(&self, payload: Bytes) -> Result<u64, RunError> {
        let h = self.inner()?.handle.clone();
        Ok(self.block_on(async move { h.command(move |n, now| n.flood(now, payload)).await })???)
    }

    /// Revokes `group` as of `epoch` (see `Node::revoke`): `Revoked` here and at every live
    /// rank, once per (group, epoch). A repeat does nothing; an older epoch than one revoked
    /// here is [`RunError::Invalid`].
    pub fn revoke(&self, group: u64, epoch: u64) -> Result<(), RunError> {
        let h = self.inner()?.handle.clone();
        Ok(self.block_on(async move {
            h.command(move |n, now| n.revoke(now, group, epoch)).await
        })???)
    }

    /// Declares ranks dead on the caller's word (its launcher saw them exit).
    pub fn declare_dead(&self, ranks: Vec<u32>) -> Result<(), RunError> {
        let h = self.inner()?.handle.clone();
        let mut set = RankSet::default();
        for r in ranks {
            set.insert(Rank(r));
        }
        Ok(self.block_on(async move {
            h.command(move |n, now| n.declare_dead(now, &set)).await
        })???)
    }

    /// Starts a shrink campaign removing `targets` on purpose; its id
    /// ([`crate::shrink::campaign_id`]). The outcome comes as events: `Departed` at every
    /// member, `Left` at each target, one `CampaignCompleted` (or `CampaignFailed`) here.
    pub fn shrink(&self, targets: &[u32]) -> Result<u64, RunError> {
        let set = crate::shrink::targets(targets)?;
        let h = self.inner()?.handle.clone();
        let id =
            self.block_on(async move { h.command(move |n, now| n.shrink(now, &set)).await })???;
        Ok(crate::shrink::campaign_id(id))
    }

    /// Waits up to `wait` until no send queue is over its soft bound; whether it is so.
    pub fn writable(&self, wait: Duration) -> Result<bool, RunError> {
        let h = self.inner()?.handle.clone();
        match self.block_on(async move { tokio::time::timeout(wait, h.writable()).await })? {
            Ok(r) => r.map(|()| true).map_err(Into::into),
            Err(_) => Ok(false),
        }
    }

    /// The agreed view applied here.
    pub fn view(&self) -> Result<ViewInfo, RunError> {
        let h = self.inner()?.handle.clone();
        let v = self.block_on(async move { h.inspect(Node::view).await })??;
        Ok(v.into())
    }

    /// Counters: the transport's, then the core's (`core.*`).
    pub fn stats(&self) -> Result<Vec<(String, u64)>, RunError> {
        let h = self.inner()?.handle.clone();
        let mut out: Vec<(String, u64)> = h
            .stats()
            .fields()
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
        let core = self.block_on(async move { h.inspect(core_stats).await })??;
        out.extend(core);
        Ok(out)
    }

    /// Whether `close` ran (or the node stopped).
    pub fn is_closed(&self) -> bool {
        self.inner
            .as_ref()
            .is_none_or(|i| i.closed.load(Ordering::Acquire))
    }

    /// Stops the node: its connections close (peers see the links go down), its runtime's
    /// threads end. Idempotent. From a fork's child: [`RunError::Forked`], nothing touched.
    pub fn close(&self) -> Result<(), RunError> {
        let now = std::process::id();
        if now != self.pid {
            return Err(RunError::Forked {
                started: self.pid,
                now,
            });
        }
        let Some(i) = &self.inner else {
            return Ok(());
        };
        if i.closed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        // Wait for a reader's current slice to end; none starts after `closed`.
        let _rx = lock(&i.rx);
        let task = lock(&i.task).take();
        if let Some(rt) = lock(&i.rt).take() {
            let h = i.handle.clone();
            rt.block_on(async move {
                h.shutdown().await;
                if let Some(t) = task {
                    let _ = tokio::time::timeout(Duration::from_secs(2), t).await;
                }
            });
            rt.shutdown_timeout(Duration::from_secs(1));
        }
        Ok(())
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if std::process::id() != self.pid {
            // A fork's child: the runtime's threads do not exist here, and its locks may be
            // held forever. Leak everything rather than wait.
            std::mem::forget(self.inner.take());
            return;
        }
        let _ = self.close();
    }
}

/// The core's counters, as `core.<name>` (the start-up and refused-dial counters named as in
/// the C ABI's `lifeline_stats`: `startup_*`, `membership_*`).
pub(crate) fn core_stats(n: &Node) -> Vec<(String, u64)> {
    let s = n.stats();
    let st = n.startup_stats();
    let co = n.corroboration_stats();
    let sh = n.shrink_stats();
    let rv = n.revoke_stats();
    let (delivered, done) = n.xcast_watermarks();
    [
        ("frames_in", s.frames_in),
        ("frames_out", s.frames_out),
        ("dropped_decode_error", s.dropped_decode_error),
        ("dropped_outbox_full", s.dropped_outbox_full),
        ("dropped_events_full", s.dropped_events_full),
        ("xcast_retries", s.xcast.retries),
        ("xcast_delivered_op", delivered),
        ("xcast_global_done_op", done),
        ("relm_sent", s.relm.sent),
        ("relm_delivered", s.relm.delivered),
        ("relm_failed", s.relm.failed),
        ("startup_check_ins_out", st.check_ins_out),
        ("startup_check_ins_in", st.check_ins_in),
        ("startup_check_ins_stale", st.check_ins_stale),
        ("startup_check_in_views", st.check_in_views),
        ("startup_check_in_notices", st.check_in_notices),
        ("startup_never_joined_removed", st.never_joined_removed),
        ("membership_refusals_out", co.refusals_out),
        ("membership_refusals_in", co.refusals_in),
        ("membership_probes_out", co.probes_out),
        ("membership_refusals_refuted", co.refusals_refuted),
        ("membership_refusals_unconfirmed", co.refusals_unconfirmed),
        ("membership_refusals_not_joined", co.refusals_not_joined),
        (
            "membership_decisions_held_overload",
            co.decisions_held_overload,
        ),
        ("membership_gray_on_silence", s.membership.gray_on_silence),
        ("membership_tree_pings_out", s.membership.tree_pings_out),
        ("relay_started", n.relay_stats().gray_relays_started),
        ("relay_ended", n.relay_stats().gray_relays_ended),
        ("shrink_campaigns_requested", sh.campaigns_requested),
        ("shrink_campaigns_completed", sh.campaigns_completed),
        ("shrink_campaigns_failed", sh.campaigns_failed),
        ("shrink_orders", sh.shrink_orders),
        ("shrink_left_views", sh.left_views),
        ("shrink_batches_waited", sh.shrinks_waited),
        ("shrink_joins_waited", sh.joins_waited),
        ("shrink_requests_dropped", sh.shrink_requests_dropped),
        ("shrink_departures_observed", sh.departures_observed),
        ("shrink_departed", sh.departed),
        ("shrink_leaving_suppressed", sh.leaving_suppressed),
        ("shrink_leaving_entered", sh.leaving_entered),
        ("shrink_drain_timeouts", sh.drain_timeouts),
        ("shrink_hand_overs", sh.hand_overs),
        ("shrink_stale_departures", sh.stale_departures),
        ("shrink_children_waits", sh.children_waits),
        ("revoke_started", rv.started),
        ("revoke_delivered", rv.delivered),
        ("revoke_forwarded", rv.forwarded),
        ("revoke_duplicates", rv.duplicates),
        ("revoke_stale", rv.stale),
        ("revoke_forgotten", rv.forgotten),
        ("epoch", n.epoch()),
    ]
    .into_iter()
    .map(|(k, v)| (format!("core.{k}"), v))
    .collect()
}

fn wall_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

/// One `host:port`, resolved (its first address).
fn resolve(what: &str, s: &str) -> Result<SocketAddr, StartError> {
    s.to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .ok_or_else(|| StartError::Usage(format!("{what}: {s:?} is not HOST:PORT")))
}

/// The cluster secret: the option, or `LIFELINE_CLUSTER_KEY`.
fn secret(opts: &StartOptions) -> Result<Vec<u8>, StartError> {
    let s = match &opts.key {
        Some(k) => k.clone(),
        None => match std::env::var_os("LIFELINE_CLUSTER_KEY") {
            Some(v) => v.as_encoded_bytes().to_vec(),
            None => {
                return Err(StartError::Usage(
                    "no cluster key: pass key=... or set LIFELINE_CLUSTER_KEY".into(),
                ))
            }
        },
    };
    if s.is_empty() {
        return Err(StartError::Usage("the cluster key is empty".into()));
    }
    Ok(s)
}

/// The book and this rank from `peers`.
fn peers_book(opts: &StartOptions) -> Result<(AddressBook, u32, SocketAddr), StartError> {
    let Some(rank) = opts.rank else {
        return Err(StartError::Usage(
            "give rank= with peers=, or bootstrap=\"env\"".into(),
        ));
    };
    let mut book = AddressBook::new();
    for (r, a) in &opts.peers {
        let addr = resolve("peers", a)?;
        if book.add(Rank(*r), addr).is_err() {
            return Err(StartError::Usage(format!(
                "peers: rank {r} is listed twice"
            )));
        }
    }
    let span = book.span();
    if book.len() as u32 != span || span == 0 {
        return Err(StartError::Usage(format!(
            "peers: ranks must be 0..{span} with none missing ({} listed)",
            book.len()
        )));
    }
    let addr = book
        .get(Rank(rank))
        .ok_or_else(|| StartError::Usage(format!("rank {rank} is not in peers (0..{span})")))?;
    Ok((book, rank, addr))
}

/// The start itself, on the runtime.
async fn start(opts: StartOptions) -> Result<Started, StartError> {
    let failed = |what: &str, e: &dyn std::fmt::Display| StartError::Failed(format!("{what}: {e}"));
    if opts.radix < 2 {
        return Err(StartError::Usage(format!("radix {} < 2", opts.radix)));
    }
    let quic = matches!(opts.transport, Transport::Quic { .. });
    if opts.bootstrap_env && quic {
        return Err(StartError::Usage(
            "bootstrap=\"env\" runs on TCP only (QUIC needs per-rank certificates and peers)"
                .into(),
        ));
    }
    if opts.bootstrap_env && (!opts.peers.is_empty() || opts.rank.is_some()) {
        return Err(StartError::Usage(
            "give either bootstrap=\"env\" or rank= with peers=, not both".into(),
        ));
    }
    let mut launcher = None;
    let (book, rank, listen, key) = if opts.bootstrap_env {
        let secret = secret(&opts)?;
        let env = LauncherEnv::from_env()
            .map_err(|e| StartError::Usage(format!("bootstrap=\"env\": {e}")))?;
        let Some(rv) = opts.rendezvous.clone().or_else(|| env.rendezvous.clone()) else {
            return Err(StartError::Usage(
                "bootstrap=\"env\": no rendezvous: pass rendezvous=\"HOST:PORT\" or set \
                 MASTER_ADDR and MASTER_PORT"
                    .into(),
            ));
        };
        let listen = match &opts.listen {
            Some(l) => resolve("listen", l)?,
            None if rv.starts_with('[') => SocketAddr::from(([0u16; 8], 0)),
            None => SocketAddr::from(([0, 0, 0, 0], 0)),
        };
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .map_err(|e| failed(&format!("listening on {listen}"), &e))?;
        let bound = listener
            .local_addr()
            .map_err(|e| failed(&format!("listening on {listen}"), &e))?;
        let bkey = BootstrapKey::from_secret(&secret)
            .ok_or_else(|| StartError::Usage("the cluster key is empty".into()))?;
        let cfg = RendezvousConfig::with_timeout(opts.bootstrap_timeout);
        let j = bootstrap::join(&rv, &bkey, env.rank, env.size, bound, &cfg)
            .await
            .map_err(|e| {
                failed(
                    &format!(
                        "bootstrap ({} rank {} of {})",
                        env.launcher, env.rank, env.size
                    ),
                    &e,
                )
            })?;
        launcher = Some(env.launcher.name().to_string());
        let key = ClusterKey::from_secret(&secret).map_err(|e| StartError::Usage(e.to_string()))?;
        (j.book, env.rank, Some(listener), Some(key))
    } else {
        let (book, rank, addr) = peers_book(&opts)?;
        match &opts.transport {
            Transport::Tcp => {
                let secret = secret(&opts)?;
                let key = ClusterKey::from_secret(&secret)
                    .map_err(|e| StartError::Usage(e.to_string()))?;
                let listener = tokio::net::TcpListener::bind(addr)
                    .await
                    .map_err(|e| failed(&format!("listening on {addr}"), &e))?;
                (book, rank, Some(listener), Some(key))
            }
            Transport::Quic { .. } => (book, rank, None, None),
        }
    };
    let span = book.span();
    let mut config = Config::new(span, opts.radix);
    config.detect.enabled = opts.detect;
    config.detect.startup_grace = lifeline_core::Duration::from_nanos(
        u64::try_from(opts.startup_grace.as_nanos()).unwrap_or(u64::MAX),
    );
    config.membership.check_in = opts.check_in;
    config.membership.startup_timeout = lifeline_core::Duration::from_nanos(
        u64::try_from(
            opts.startup_timeout
                .unwrap_or(opts.startup_grace)
                .as_nanos(),
        )
        .unwrap_or(u64::MAX),
    );
    config.join.batch = lifeline_core::Duration::from_nanos(
        u64::try_from(opts.join_batch.as_nanos()).unwrap_or(u64::MAX),
    );
    for (k, v) in &opts.config {
        crate::config::set(&mut config, k, *v).map_err(|e| StartError::Usage(e.to_string()))?;
    }
    let members = Members::from_config(&config);
    let seed = opts
        .seed
        .unwrap_or_else(|| u64::from(std::process::id()) << 32 ^ u64::from(rank) ^ wall_us());
    let node = Node::new(config, Rank(rank), seed, Instant::ZERO)
        .map_err(|e| StartError::Usage(e.to_string()))?;
    let cfg = TcpConfig {
        link_timeout: opts.link_timeout.max(Duration::from_millis(1)),
        dial_attempts: opts.dial_attempts.max(1),
        startup_grace: opts.startup_grace,
        refused_attempts: if opts.detect {
            1
        } else {
            TcpConfig::default().refused_attempts
        },
        output_buffer: opts.output_buffer.max(1),
        ..TcpConfig::default()
    };
    let node = match (&opts.transport, listen, key) {
        (Transport::Tcp, Some(listener), Some(key)) => {
            lifeline_transport_tcp::spawn(node, book.clone(), key, cfg, listener)
        }
        (Transport::Quic { cert_dir, cluster }, _, _) => {
            use lifeline_transport_quic::{ClusterId, QuicConfig, QuicEndpoint, RankIdentity};
            let id = ClusterId::new(cluster).map_err(|e| StartError::Usage(e.to_string()))?;
            let identity = RankIdentity::load(cert_dir, Rank(rank), &id)
                .map_err(|e| StartError::Usage(e.to_string()))?;
            let qcfg = QuicConfig::with_link_timeout(cfg.link_timeout)
                .map_err(|e| StartError::Usage(e.to_string()))?;
            let qbook = lifeline_transport_quic::AddressBook::try_from(&book)
                .map_err(|e| StartError::Usage(format!("peers: {e}")))?;
            let addr = book.get(Rank(rank)).expect("checked by peers_book");
            let ep = QuicEndpoint::bind(&identity, &qcfg, addr, Some(qbook))
                .map_err(|e| failed(&format!("listening on {addr}"), &e))?;
            let mut driver = cfg.driver_config();
            driver.output_buffer = opts.output_buffer.max(1);
            lifeline_transport_quic::spawn(node, book.clone(), ep, driver)
                .map_err(|e| StartError::Usage(e.to_string()))?
        }
        _ => return Err(StartError::Failed("no listener".into())),
    };
    let addr = node.handle.local_addr();
    let addr = book
        .get(Rank(rank))
        .filter(|a| a.port() == addr.port())
        .unwrap_or(addr);
    Ok(Started {
        node,
        info: Info {
            rank,
            addr,
            span,
            launcher,
        },
        members,
    })
}

#[cfg(test)]
mod tests;
