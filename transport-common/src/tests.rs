//! The driver on an in-memory connector (one slot carrying both classes, like QUIC's): links come
//! up and carry the core's frames, a stopped peer's link goes down as a close, a rank nobody
//! listens for is given up as refused, the tie-break answer "duplicate" is not a failure, an
//! event carries the time of the input that caused it, and an application that stops reading
//! loses nothing (the `stall` module).

use std::collections::BTreeMap;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use bytes::Bytes;
use lifeline_core::link::{DialOutcome, LinkConfig};
use lifeline_core::tree::Rank;
use lifeline_core::{Class, Config, Event, Instant, Node, XcastEvent};
use tokio::sync::{mpsc, oneshot};

mod stall;

use crate::{
    spawn, Accepted, AddressBook, Connector, Counters, DialFailure, DownReason, DriverConfig,
    Ended, Inbound, LinkIo, Output, Rejection, RunningNode, Setup, TransportError,
};

/// One direction of a link, per class.
struct Pipes {
    tx: [mpsc::UnboundedSender<Bytes>; 2],
    rx: [mpsc::UnboundedReceiver<Bytes>; 2],
}

fn pipes() -> (Pipes, Pipes) {
    let (a0, b0) = mpsc::unbounded_channel();
    let (a1, b1) = mpsc::unbounded_channel();
    let (c0, d0) = mpsc::unbounded_channel();
    let (c1, d1) = mpsc::unbounded_channel();
    (
        Pipes {
            tx: [a0, a1],
            rx: [d0, d1],
        },
        Pipes {
            tx: [c0, c1],
            rx: [b0, b1],
        },
    )
}

/// An accepted connection still owes the dialer its answer.
struct MemConn {
    pipes: Pipes,
    answer: Option<oneshot::Sender<Result<(), Rejection>>>,
}

type Listeners = Arc<Mutex<BTreeMap<SocketAddr, mpsc::Sender<Accepted<MemConn>>>>>;

struct Mem {
    me: Rank,
    net: Listeners,
    inbound: Mutex<Option<mpsc::Receiver<Accepted<MemConn>>>>,
    addr: SocketAddr,
    cut: Cut,
}

/// Ends a node's running connections to one peer as a timeout would ([`Cut::cut`]).
#[derive(Clone, Default)]
pub(crate) struct Cut {
    peer: Arc<Mutex<Option<Rank>>>,
    now: Arc<tokio::sync::Notify>,
}

impl Cut {
    /// Ends this node's connection to `peer` with `Ended::Io(TimedOut)`.
    pub(crate) fn cut(&self, peer: Rank) {
        *self.peer.lock().unwrap() = Some(peer);
        self.now.notify_waiters();
    }

    async fn wait(&self, peer: Rank) -> Ended {
        loop {
            self.now.notified().await;
            if *self.peer.lock().unwrap() == Some(peer) {
                return Ended::Io(std::io::ErrorKind::TimedOut);
            }
        }
    }
}

impl Connector for Mem {
    type Conn = MemConn;
    const SLOTS: usize = 1;

    fn slot_of(_: Class) -> usize {
        0
    }

    fn dial(
        self: &Arc<Self>,
        _peer: Rank,
        _slot: usize,
        addr: SocketAddr,
    ) -> impl Future<Output = Result<MemConn, DialFailure>> + Send + 'static {
        let target = self.net.lock().unwrap().get(&addr).cloned();
        let me = self.me;
        async move {
            let refused = || DialFailure {
                outcome: DialOutcome::Refused,
                removed: None,
                error: "nobody listens".into(),
            };
            let target = target.ok_or_else(refused)?;
            let (ours, theirs) = pipes();
            let (tx, rx) = oneshot::channel();
            let conn = MemConn {
                pipes: theirs,
                answer: Some(tx),
            };
            let a = Accepted {
                peer: me,
                slot: 0,
                conn,
            };
            target.send(a).await.map_err(|_| refused())?;
            match rx.await {
                Ok(Ok(())) => Ok(MemConn {
                    pipes: ours,
                    answer: None,
                }),
                Ok(Err(Rejection::Duplicate)) => Err(DialFailure {
                    outcome: DialOutcome::Duplicate,
                    removed: None,
                    error: "duplicate".into(),
                }),
                Ok(Err(Rejection::Removed { epoch })) => Err(DialFailure {
                    outcome: DialOutcome::Failed,
                    removed: Some(epoch),
                    error: "removed".into(),
                }),
                _ => Err(DialFailure::failed("refused")),
            }
        }
    }

    fn listen(
        self: &Arc<Self>,
        to_driver: Inbound<MemConn>,
    ) -> impl Future<Output = ()> + Send + 'static {
        let inbound = self.inbound.lock().unwrap().take();
        async move {
            let Some(mut inbound) = inbound else { return };
            while let Some(a) = inbound.recv().await {
                if to_driver.accepted.send(a).await.is_err() {
                    return;
                }
            }
        }
    }

    // Not an `async fn`: the future must be `'static`, and one would borrow `self`.
    #[allow(clippy::manual_async_fn)]
    fn run(
        self: &Arc<Self>,
        conn: MemConn,
        io: LinkIo,
    ) -> impl Future<Output = ()> + Send + 'static {
        let cut = self.cut.clone();
        async move {
            let MemConn { pipes, answer } = conn;
            if let Some(a) = answer {
                let _ = a.send(Ok(()));
            }
            let Pipes { tx, rx } = pipes;
            let [rc, rd] = rx;
            let read = |mut rx: mpsc::UnboundedReceiver<Bytes>, class| {
                let io = &io;
                async move {
                    while let Some(f) = rx.recv().await {
                        if !io.deliver(class, &mut vec![f]).await {
                            return Ended::Stopped;
                        }
                    }
                    Ended::Eof
                }
            };
            let write = |tx: mpsc::UnboundedSender<Bytes>, class| {
                let q = io.queue(class).clone();
                async move {
                    let mut out = std::collections::VecDeque::new();
                    loop {
                        q.take(&mut out);
                        if out.is_empty() {
                            q.notify.notified().await;
                        }
                        for f in out.drain(..) {
                            if tx.send(f).is_err() {
                                return Ended::Eof;
                            }
                        }
                    }
                }
            };
            let [tc, td] = tx;
            let why = tokio::select! {
                w = cut.wait(io.peer) => w,
                w = read(rc, Class::Control) => w,
                w = read(rd, Class::Data) => w,
                w = write(tc, Class::Control) => w,
                w = write(td, Class::Data) => w,
            };
            io.ended(Class::Control, why).await;
        }
    }

    fn reject(
        self: &Arc<Self>,
        mut conn: MemConn,
        why: Rejection,
    ) -> impl Future<Output = ()> + Send + 'static {
        if let Some(a) = conn.answer.take() {
            let _ = a.send(Err(why));
        }
        async {}
    }
}

fn addr(r: u32) -> SocketAddr {
    SocketAddr::from(([10, 0, 0, 1], 7000 + r as u16))
}

/// Starts `ranks` of a `span`-rank cluster (radix 2) on one in-memory network; the others are
/// in the book but nobody listens for them.
fn cluster(span: u32, ranks: &[u32], cfg: &DriverConfig) -> Vec<RunningNode> {
    cluster_with(span, ranks, cfg, |_| {})
}

/// [`cluster`] with every node's core configuration changed by `tune`.
pub(crate) fn cluster_with(
    span: u32,
    ranks: &[u32],
    cfg: &DriverConfig,
    tune: impl Fn(&mut Config),
) -> Vec<RunningNode> {
    cluster_cut(span, ranks, cfg, tune).0
}

/// [`cluster_with`], with each node's [`Cut`].
pub(crate) fn cluster_cut(
    span: u32,
    ranks: &[u32],
    cfg: &DriverConfig,
    tune: impl Fn(&mut Config),
) -> (Vec<RunningNode>, Vec<Cut>) {
    let net: Listeners = Arc::default();
    let mut cuts = Vec::new();
    let mut book = AddressBook::new();
    for r in 0..span {
        book.insert(Rank(r), addr(r));
    }
    let mut nodes = Vec::new();
    for &r in ranks {
        let (tx, rx) = mpsc::channel(16);
        net.lock().unwrap().insert(addr(r), tx);
        let mem = Arc::new(Mem {
            me: Rank(r),
            net: net.clone(),
            inbound: Mutex::new(Some(rx)),
            addr: addr(r),
            cut: Cut::default(),
        });
        cuts.push(mem.cut.clone());
        let mut core = Config::new(span, 2);
        tune(&mut core);
        let node = Node::new(core, Rank(r), u64::from(r) + 1, Instant::ZERO).expect("config");
        let setup = Setup {
            book: Arc::new(RwLock::new(book.clone())),
            cfg: cfg.clone(),
            counters: Arc::new(Counters::default()),
            local_addr: mem.addr,
        };
        nodes.push(spawn(node, mem, setup));
    }
    (nodes, cuts)
}

/// Reads `n`'s outputs until `f` is true for one, at most 5 s.
pub(crate) async fn until(n: &mut RunningNode, mut f: impl FnMut(&Output) -> bool) -> Output {
    let found = tokio::time::timeout(Duration::from_secs(5), async {
        while let Some(o) = n.outputs.recv().await {
            if f(&o) {
                return Some(o);
            }
        }
        None
    })
    .await;
    found.ok().flatten().expect("the output came within 5 s")
}

#[tokio::test]
async fn links_come_up_and_carry_xcasts() {
    let mut nodes = cluster(2, &[0, 1], &DriverConfig::default());
    let op = nodes[1]
        .handle
        .xcast(16, Bytes::from_static(b"hi"))
        .await
        .expect("xcast");
    let delivered = |o: &Output| matches!(o, Output::Event { event: Event::Xcast(XcastEvent::Delivered { payload, .. }), .. } if payload == "hi");
    until(&mut nodes[0], delivered).await;
    let completed = |o: &Output| matches!(o, Output::Event { event: Event::Xcast(XcastEvent::Completed { seq, .. }), .. } if *seq == op);
    until(&mut nodes[1], completed).await;
    let s = nodes[0].handle.stats();
    assert_eq!((s.link_ups, s.link_downs), (1, 0), "{s:?}");
    assert!(s.frames_in >= 1 && s.frames_out >= 1, "{s:?}");
}

/// `writable` answers at once while nothing is congested, waits while a queue is over the soft
/// bound (0 here: any queued byte), returns once the writers drained it, and reports a stopped
/// node.
#[tokio::test]
async fn writable_waits_for_the_send_queues_to_drain() {
    let cfg = DriverConfig {
        queue_soft_bytes: 0,
        ..DriverConfig::default()
    };
    let mut nodes = cluster(2, &[0, 1], &cfg);
    until(&mut nodes[0], |o| {
        matches!(o, Output::LinkUp { peer: Rank(1), .. })
    })
    .await;
    let h = nodes[0].handle.clone();
    tokio::time::timeout(Duration::from_secs(5), h.writable())
        .await
        .expect("not congested: at once")
        .expect("running");
    // Many commands, each queueing floods; every refusal is followed by a wait that ends.
    let (mut sent, mut waited) = (0, 0);
    while sent < 200 {
        match h
            .command(|n, now| n.flood(now, Bytes::from(vec![7u8; 4096])))
            .await
        {
            Ok(r) => {
                r.expect("flood");
                sent += 1;
            }
            Err(TransportError::Backpressure { .. }) => {
                waited += 1;
                tokio::time::timeout(Duration::from_secs(5), h.writable())
                    .await
                    .expect("the writer drains the queue")
                    .expect("running");
            }
            Err(e) => panic!("{e}"),
        }
    }
    let got = std::cell::Cell::new(0);
    until(&mut nodes[1], |o| {
        if matches!(
            o,
            Output::Event {
                event: Event::Flood(_),
                ..
            }
        ) {
            got.set(got.get() + 1);
        }
        got.get() == 200
    })
    .await;
    let _ = waited; // how often the soft bound was hit depends on scheduling
    h.shutdown().await;
    let one = nodes.remove(0);
    let _ = one.task.await;
    assert_eq!(h.writable().await, Err(TransportError::Stopped));
}

#[tokio::test]
async fn a_stopped_peers_link_goes_down_as_a_close() {
    let mut nodes = cluster(2, &[0, 1], &DriverConfig::default());
    until(&mut nodes[0], |o| {
        matches!(o, Output::LinkUp { peer: Rank(1), .. })
    })
    .await;
    let one = nodes.pop().expect("node 1");
    one.handle.shutdown().await;
    let _ = one.task.await;
    let down = until(&mut nodes[0], |o| matches!(o, Output::LinkDown { .. })).await;
    assert!(
        matches!(
            down,
            Output::LinkDown {
                peer: Rank(1),
                reason: DownReason::Closed,
                ..
            }
        ),
        "{down:?}"
    );
    assert_eq!(nodes[0].handle.stats().link_downs, 1);
}

#[tokio::test]
async fn a_rank_nobody_listens_for_is_given_up() {
    let cfg = DriverConfig {
        link: LinkConfig {
            dial_attempts: 3,
            refused_attempts: 2,
            startup_grace: Duration::ZERO.into(),
            backoff_initial: Duration::from_millis(5).into(),
            backoff_max: Duration::from_millis(20).into(),
        },
        ..DriverConfig::default()
    };
    // 0 -> {1, 2}; rank 2 never starts.
    let mut nodes = cluster(3, &[0, 1], &cfg);
    nodes[0]
        .handle
        .xcast(16, Bytes::from_static(b"to all"))
        .await
        .expect("xcast");
    let down = until(&mut nodes[0], |o| matches!(o, Output::LinkDown { .. })).await;
    assert!(
        matches!(
            down,
            Output::LinkDown {
                peer: Rank(2),
                reason: DownReason::Refused,
                ..
            }
        ),
        "{down:?}"
    );
    let s = nodes[0].handle.stats();
    // Two refused dials of rank 2 (refused_attempts), then the give-up.
    assert_eq!(s.dial_failures, 2, "{s:?}");
    let dead = nodes[0]
        .handle
        .inspect(|n| !n.tree().is_alive(Rank(2)))
        .await
        .expect("inspect");
    assert!(
        dead,
        "a refused give-up is hard evidence: the core presumes rank 2 dead"
    );
}

/// An event caused by a frame carries the frame's arrival time, not that of an earlier input:
/// node 0 idles for 300 ms after its link came up, then an xcast from node 1 reaches it.
#[tokio::test]
async fn an_event_carries_the_time_of_its_frame() {
    let mut nodes = cluster(2, &[0, 1], &DriverConfig::default());
    let up = until(&mut nodes[0], |o| matches!(o, Output::LinkUp { .. })).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before = nodes[0].handle.command(|_, now| now).await.expect("now");
    assert!(before.saturating_since(up.at()) >= Duration::from_millis(300).into());
    nodes[1]
        .handle
        .xcast(16, Bytes::from_static(b"late"))
        .await
        .expect("xcast");
    let delivered = until(&mut nodes[0], |o| {
        matches!(o.event(), Some(Event::Xcast(XcastEvent::Delivered { .. })))
    })
    .await;
    let after = nodes[0].handle.command(|_, now| now).await.expect("now");
    let at = delivered.at();
    assert!(
        before <= at && at <= after,
        "delivered at {at}, sent between {before} and {after}"
    );
}

/// Every rank holds a link to its standby parent (the rank a repair would make its parent):
/// span 7, radix 2 is `0→{1,2}, 1→{3,5}, 2→{4,6}`; if 1 died, 5 (the slot rule prefers the
/// highest living descendant) would take its slot under 0 and 3 would go under 5. Those links
/// come up although neither is a tree link, and when 1 stops, the repair finds them up: no
/// link to a new parent comes up after it.
#[tokio::test]
async fn standby_links_are_held_and_the_repair_dials_nothing() {
    let mut nodes = cluster(7, &[0, 1, 2, 3, 4, 5, 6], &DriverConfig::default());
    until(&mut nodes[5], |o| {
        matches!(o, Output::LinkUp { peer: Rank(0), .. })
    })
    .await;
    until(&mut nodes[3], |o| {
        matches!(o, Output::LinkUp { peer: Rank(5), .. })
    })
    .await;
    let one = nodes.remove(1);
    one.handle.shutdown().await;
    let _ = one.task.await;
    // nodes[2] is rank 3, nodes[4] rank 5: both repaired around 1.
    for (i, parent) in [(2, 5), (4, 0)] {
        until(&mut nodes[i], |o| {
            matches!(o, Output::Event { event: Event::ViewChanged(d), .. } if d.new_parent == Some(Rank(parent)))
        })
        .await;
    }
    // An xcast from rank 3 reaches 0 over the standby links now in the tree.
    nodes[2]
        .handle
        .xcast(16, Bytes::from_static(b"after"))
        .await
        .expect("xcast");
    let delivered = |o: &Output| matches!(o, Output::Event { event: Event::Xcast(XcastEvent::Delivered { payload, .. }), .. } if payload == "after");
    until(&mut nodes[0], delivered).await;
    // No link to the new parent came up after the repair: it was up before.
    for (i, parent) in [(2, 5), (4, 0)] {
        while let Ok(o) = nodes[i].outputs.try_recv() {
            assert!(
                !matches!(o, Output::LinkUp { peer, .. } if peer == Rank(parent)),
                "node at {i} dialled its new parent {parent} in the repair"
            );
        }
    }
}

/// A standby link that drops (here a timeout, with the detector off: a lateral link's loss
/// that nothing else would re-dial) is dialled again: span 7, radix 2, rank 3's standby parent
/// is 5. Rank 3 cuts its link to 5 and the link comes back up from the same side.
#[tokio::test]
async fn a_dropped_standby_link_is_dialled_again() {
    let (mut nodes, cuts) =
        cluster_cut(7, &[0, 1, 2, 3, 4, 5, 6], &DriverConfig::default(), |_| {});
    let up5 = |o: &Output| matches!(o, Output::LinkUp { peer: Rank(5), .. });
    until(&mut nodes[3], up5).await;
    cuts[3].cut(Rank(5));
    until(&mut nodes[3], |o| {
        matches!(
            o,
            Output::LinkDown {
                peer: Rank(5),
                reason: DownReason::Io(_),
                ..
            }
        )
    })
    .await;
    until(&mut nodes[3], up5).await;
}
