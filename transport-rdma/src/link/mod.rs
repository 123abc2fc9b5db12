//! The composite link: the control class on a TCP connection, the data class on one RC queue
//! pair per peer, run by the shared tokio driver ([`lifeline_transport_common`]).
//!
//! [`RdmaConnector`] is a [`Connector`] with TCP's two slots. It delegates dialing, listening,
//! the cluster-key handshake and the control slot to [`TcpConnector`] (through its public API,
//! nothing copied). The data slot is also dialed and authenticated as a TCP connection, but
//! carries no frames: once its handshake succeeded (and the acceptor wrote its verdict) and the
//! control link to the same peer is up (waited for, within `exchange_timeout`), each
//! side opens a [`Channel`](crate::Channel) (queue pair in INIT, receives posted, a fresh PSN), writes its
//! [`QpDetails`](crate::QpDetails) record ([`crate::wire`]) on that authenticated connection, reads the peer's,
//! moves the queue pair to RTR/RTS, and writes one "ready" byte, then waits for the
//! peer's (so neither side sends to a queue pair not yet in RTR). From then on the data slot's "connection" is the
//! channel, and the TCP connection is only watched: its end (EOF, reset) ends the data link,
//! and any byte on it is a protocol violation. QP details never travel over an
//! unauthenticated socket.
//!
//! # Completions
//! All data links of a node share one completion queue. A watcher task sleeps on the
//! completion channel's descriptor (an [`OwnedFd`](std::os::fd::OwnedFd) duplicate under
//! tokio's `AsyncFd`); when it becomes readable the task takes the events, re-arms the queue
//! *before* draining it (a completion after the drain notifies again), and drains it into the
//! channels by `qpn` (unknown ones are counted and dropped). Every channel a completion touched
//! has its link task woken; a link task also steps when the driver queues frames and whenever
//! it drained completions itself. With no completion channel (or `completion_channel: false`)
//! link tasks poll every `poll_interval` instead; with one, `sweep_interval` (100 ms) is only
//! the safety net. With the mock the fabric is in-process: [`pump`] steps it on a short tick,
//! and its completion channel is a real descriptor, so the watcher runs as on a device.
//!
//! # Failures
//! A channel's link-down ends the data slot with a cause mapped like TCP's ([`ended`]): an
//! error completion is `Io(ConnectionReset)` (a reset: soft evidence, never a verdict), a
//! flush or a close is `Eof`, a protocol violation `Malformed`. The driver then reports the
//! link down and closes the control connection; the peer sees its data TCP connection end and
//! takes its own channel down, so both sides reconnect with new queue pairs and fresh PSNs.
//! Flush completions after a known error produce nothing more. Frames of the data class
//! accepted but not acknowledged are lost with the link, as on TCP; RELM retransmits its data
//! frames over the new link (its ACKs travel on the control class) and delivers exactly once,
//! in order.
//!
//! # Back-pressure
//! The task takes frames from the driver's bounded send queue only when it holds none: frames
//! the channel refuses (`WouldBlock`) stay held and the driver's queue grows instead, where
//! its soft bound refuses the application ([`TransportError::Backpressure`]) and its hard
//! bound closes the link. Nothing grows without bound.
//!
//! [`TransportError::Backpressure`]: lifeline_transport_common::TransportError::Backpressure

mod plane;
#[cfg(test)]
mod tests;
mod waiter;

use std::collections::VecDeque;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use lifeline_core::tree::Rank;
use lifeline_core::{Class, Instant, Node};
use lifeline_transport_common::{
    self as common, AddressBook, Connector, DialFailure, Ended, Inbound, LinkIo, Rejection,
    RunningNode, TransportStats, MAX_BATCH,
};
use lifeline_transport_tcp::handshake::{self, Verdict};
use lifeline_transport_tcp::{ClusterKey, TcpConfig, TcpConnector};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

pub use plane::PlaneStats;
pub use waiter::CompletionWaiter;

use crate::channel::{ChannelConfig, DownCause};
use crate::mock::MockFabric;
use crate::verbs::Verbs;
use crate::wire::{self, DETAILS_LEN};
use plane::Plane;

/// The byte each side writes once its queue pair is in RTS (after the details records).
const READY: u8 = 0x52;

/// Settings of the data plane of the composite link.
#[derive(Clone, Copy, Debug)]
pub struct RdmaConfig {
    /// Each data link's channel.
    pub channel: ChannelConfig,
    /// Wait for completions on the device's completion channel (the default): a task sleeps
    /// on its descriptor and wakes exactly the links whose queue pairs completed something.
    /// `false`, or verbs without a completion channel: poll every `poll_interval`.
    pub completion_channel: bool,
    /// The polling tick when there is no completion channel.
    pub poll_interval: Duration,
    /// With a completion channel: a safety sweep of the completion queue this often, in case
    /// a notification is ever lost (nothing else depends on it).
    pub sweep_interval: Duration,
    /// Longest wait for the peer's QP details after the handshake.
    pub exchange_timeout: Duration,
    /// Seeds the PSN generator.
    pub seed: u64,
}

impl Default for RdmaConfig {
    fn default() -> Self {
        Self {
            channel: ChannelConfig::default(),
            completion_channel: true,
            poll_interval: Duration::from_millis(1),
            sweep_interval: Duration::from_millis(100),
            exchange_timeout: Duration::from_secs(3),
            seed: 1,
        }
    }
}

/// The composite connector: TCP for the control class, an RC queue pair for the data class.
pub struct RdmaConnector<V> {
    tcp: Arc<TcpConnector>,
    plane: Arc<Plane<V>>,
    control: Arc<ControlUp>,
    cfg: RdmaConfig,
    /// How long a link task sleeps when nothing wakes it: `sweep_interval` with a completion
    /// channel, `poll_interval` without.
    tick: Duration,
    origin: tokio::time::Instant,
}

impl<V: Verbs + Send + 'static> RdmaConnector<V> {
    /// The data plane's counters.
    pub fn plane_stats(&self) -> PlaneStats {
        self.plane.stats()
    }

    /// Channels held (live and draining).
    pub fn channels(&self) -> usize {
        self.plane.channels()
    }

    fn now(&self) -> Instant {
        Instant::from_nanos(self.origin.elapsed().as_nanos() as u64)
    }
}

/// A node on the composite link: the shared driver's [`RunningNode`] and the connector (for
/// its data-plane counters).
pub struct RdmaNode<V> {
    /// The running node.
    pub node: RunningNode,
    /// The connector the driver runs.
    pub connector: Arc<RdmaConnector<V>>,
}

/// Starts driving `node` with TCP control and an RDMA data plane on `verbs`; as
/// [`lifeline_transport_tcp::spawn`] otherwise (same arguments, same handshake).
pub fn spawn<V: Verbs + Send + 'static>(
    node: Node,
    book: AddressBook,
    key: ClusterKey,
    tcp: TcpConfig,
    cfg: RdmaConfig,
    verbs: V,
    listener: TcpListener,
) -> RdmaNode<V> {
    let (t, setup) = lifeline_transport_tcp::connector(&node, book, key, tcp, listener);
    let seed = cfg.seed ^ u64::from(node.me().0).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    let plane = Arc::new(Plane::new(verbs, cfg.channel, seed));
    let origin = tokio::time::Instant::now();
    // The completion channel's watcher; without one every link task polls on its tick.
    let waiter = cfg.completion_channel.then(|| plane.waiter()).flatten();
    let tick = match waiter {
        Some(w) => {
            let plane = Arc::downgrade(&plane);
            tokio::spawn(watch_completions(plane, w, cfg.sweep_interval, origin));
            cfg.sweep_interval
        }
        None => cfg.poll_interval,
    };
    let connector = Arc::new(RdmaConnector {
        tcp: Arc::new(t),
        plane,
        control: Arc::default(),
        cfg,
        tick,
        origin,
    });
    let node = common::spawn(node, connector.clone(), setup);
    RdmaNode { node, connector }
}

/// The completion channel's task: sleeps on the descriptor (or `sweep` at most), then takes
/// the events, re-arms and drains the shared completion queue, which wakes each link task
/// whose queue pair completed something. Ends once the plane is gone.
async fn watch_completions<V: Verbs + Send + 'static>(
    plane: std::sync::Weak<Plane<V>>,
    waiter: CompletionWaiter,
    sweep: Duration,
    origin: tokio::time::Instant,
) {
    loop {
        tokio::select! {
            r = waiter.readable() => if r.is_err() {
                // The reactor failed on the descriptor: fall back to the sweep alone.
                tokio::time::sleep(sweep).await;
            },
            _ = tokio::time::sleep(sweep) => {}
        }
        let Some(plane) = plane.upgrade() else {
            return;
        };
        plane.on_cq_event(Instant::from_nanos(origin.elapsed().as_nanos() as u64));
    }
}

/// Steps `fabric` until idle every `every`, forever (abort the handle to stop): the mock's
/// stand-in for a device that moves messages by itself.
pub fn pump(fabric: MockFabric, every: Duration) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            fabric.run(100_000);
            tokio::time::sleep(every).await;
        }
    })
}

/// How a channel's link-down is reported to the driver, like TCP's ends: evidence, not a
/// verdict.
pub fn ended(cause: &DownCause) -> Ended {
    match cause {
        DownCause::Completion { .. } | DownCause::Verbs(_) => {
            Ended::Io(io::ErrorKind::ConnectionReset)
        }
        DownCause::Flushed | DownCause::Closed => Ended::Eof,
        DownCause::Malformed(_) => Ended::Malformed,
    }
}

impl<V: Verbs + Send + 'static> Connector for RdmaConnector<V> {
    type Conn = TcpStream;

    const SLOTS: usize = 2;

    fn slot_of(class: Class) -> usize {
        TcpConnector::slot_of(class)
    }

    fn dial(
        self: &Arc<Self>,
        peer: Rank,
        slot: usize,
        addr: SocketAddr,
    ) -> impl std::future::Future<Output = Result<TcpStream, DialFailure>> + Send + 'static {
        self.tcp.dial(peer, slot, addr)
    }

    fn listen(
        self: &Arc<Self>,
        inbound: Inbound<TcpStream>,
    ) -> impl std::future::Future<Output = ()> + Send + 'static {
        // Rank connections and join connections alike arrive on the TCP listener.
        self.tcp.listen(inbound)
    }

    fn run(
        self: &Arc<Self>,
        conn: TcpStream,
        io: LinkIo,
    ) -> impl std::future::Future<Output = ()> + Send + 'static {
        let this = self.clone();
        async move {
            if io.slot == Self::slot_of(Class::Control) {
                let _up = ControlUp::enter(&this.control, io.peer);
                this.tcp.run(conn, io).await;
            } else {
                this.run_data(conn, io).await;
            }
        }
    }

    fn reject(
        self: &Arc<Self>,
        conn: TcpStream,
        why: Rejection,
    ) -> impl std::future::Future<Output = ()> + Send + 'static {
        self.tcp.reject(conn, why)
    }

    fn fill_stats(&self, stats: &mut TransportStats) {
        self.tcp.fill_stats(stats);
    }
}

/// The control links running, per peer: a data link waits here until the control link to
/// its peer is up.
#[derive(Default)]
struct ControlUp {
    up: std::sync::Mutex<std::collections::BTreeMap<Rank, usize>>,
    changed: tokio::sync::Notify,
}

/// One running control link; counted down when dropped (the link ended or was aborted).
struct ControlGuard {
    set: Arc<ControlUp>,
    peer: Rank,
}

impl ControlUp {
    fn lock(&self) -> std::sync::MutexGuard<'_, std::collections::BTreeMap<Rank, usize>> {
        self.up
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn enter(set: &Arc<Self>, peer: Rank) -> ControlGuard {
        *set.lock().entry(peer).or_insert(0) += 1;
        set.changed.notify_waiters();
        ControlGuard {
            set: set.clone(),
            peer,
        }
    }

    fn is_up(&self, peer: Rank) -> bool {
        self.lock().get(&peer).is_some_and(|&n| n > 0)
    }

    /// Resolves once a control link to `peer` is running.
    async fn wait(&self, peer: Rank) {
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            // Registered before the check, so an `enter` between the two is not missed.
            changed.as_mut().enable();
            if self.is_up(peer) {
                return;
            }
            changed.await;
        }
    }
}

impl Drop for ControlGuard {
    fn drop(&mut self) {
        let mut m = self.set.lock();
        if let Some(n) = m.get_mut(&self.peer) {
            *n -= 1;
            if *n == 0 {
                m.remove(&self.peer);
            }
        }
    }
}

/// Closes a data link's channel when its task ends or is aborted (the driver aborts a
/// connection it replaces or closes).
struct Release<V: Verbs> {
    plane: Arc<Plane<V>>,
    qpn: u32,
    /// Notified when the channel's completions were handled.
    wake: Arc<tokio::sync::Notify>,
    origin: tokio::time::Instant,
}

impl<V: Verbs> Drop for Release<V> {
    fn drop(&mut self) {
        let now = Instant::from_nanos(self.origin.elapsed().as_nanos() as u64);
        self.plane.release(now, self.qpn);
    }
}

impl<V: Verbs + Send + 'static> RdmaConnector<V> {
    /// The data slot: exchange QP details on the authenticated connection, then move frames
    /// through the channel until either ends.
    async fn run_data(self: Arc<Self>, mut stream: TcpStream, io: LinkIo) {
        let why = match self.setup(&mut stream, io.peer, io.accepted).await {
            // `release` closes the channel however this task ends (aborts included).
            Ok(release) => self.pump_frames(&release, stream, &io).await,
            Err(why) => why,
        };
        io.ended(Class::Data, why).await;
    }

    async fn setup(
        &self,
        stream: &mut TcpStream,
        peer: Rank,
        accepted: bool,
    ) -> Result<Release<V>, Ended> {
        let io_err = |e: io::Error| match e.kind() {
            io::ErrorKind::UnexpectedEof => Ended::Eof,
            k => Ended::Io(k),
        };
        if accepted {
            handshake::finish(stream, Verdict::Accept)
                .await
                .map_err(io_err)?;
        }
        // The queue pair (a device resource) is created only once the control link to the
        // same peer is up: a peer that cannot hold a control link gets none.
        tokio::time::timeout(self.cfg.exchange_timeout, self.control.wait(peer))
            .await
            .map_err(|_| Ended::Io(io::ErrorKind::TimedOut))?;
        let (qpn, local, wake) = self
            .plane
            .open()
            .map_err(|_| Ended::Io(io::ErrorKind::Other))?;
        let release = Release {
            plane: self.plane.clone(),
            qpn,
            wake,
            origin: self.origin,
        };
        let exchange = async {
            stream.write_all(&wire::encode(&local)).await?;
            let mut b = [0u8; DETAILS_LEN];
            stream.read_exact(&mut b).await?;
            Ok::<_, io::Error>(b)
        };
        let b = tokio::time::timeout(self.cfg.exchange_timeout, exchange)
            .await
            .map_err(|_| Ended::Io(io::ErrorKind::TimedOut))?
            .map_err(io_err)?;
        let peer = wire::decode(&b).map_err(|_| Ended::Malformed)?;
        self.plane
            .connect(qpn, &peer)
            .map_err(|_| Ended::Malformed)?;
        // Both queue pairs must be in RTR before either side sends: a send reaching a queue
        // pair still in INIT is not acknowledged (retried, then `RetryExceeded`). Each side
        // says "ready" once its own is in RTR/RTS and waits for the peer's.
        let ready = async {
            stream.write_all(&[READY]).await?;
            let mut b = [0u8; 1];
            stream.read_exact(&mut b).await?;
            Ok::<_, io::Error>(b[0])
        };
        match tokio::time::timeout(self.cfg.exchange_timeout, ready).await {
            Err(_) => Err(Ended::Io(io::ErrorKind::TimedOut)),
            Ok(Err(e)) => Err(io_err(e)),
            Ok(Ok(READY)) => Ok(release),
            Ok(Ok(_)) => Err(Ended::Malformed),
        }
    }

    async fn pump_frames(&self, release: &Release<V>, mut stream: TcpStream, io: &LinkIo) -> Ended {
        let qpn = release.qpn;
        let queue = io.queue(Class::Data).clone();
        let mut held: VecDeque<Bytes> = VecDeque::new();
        let mut probe = [0u8; 1];
        loop {
            if held.is_empty() {
                queue.take(&mut held);
            }
            let step = self.plane.step(self.now(), qpn, &mut held);
            for chunk in step.frames.chunks(MAX_BATCH) {
                if !io.deliver(Class::Data, &mut chunk.to_vec()).await {
                    return Ended::Stopped;
                }
            }
            if let Some(cause) = step.down {
                return ended(&cause);
            }
            tokio::select! {
                _ = tokio::time::sleep(self.tick) => {}
                _ = release.wake.notified() => {}
                _ = queue.notify.notified(), if held.is_empty() => {}
                r = stream.read(&mut probe) => return match r {
                    Ok(0) => Ended::Eof,
                    Ok(_) => Ended::Malformed,
                    Err(e) => Ended::Io(e.kind()),
                },
            }
        }
    }
}
