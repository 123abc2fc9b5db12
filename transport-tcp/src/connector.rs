//! The TCP side of the shared driver ([`lifeline_transport_common`]): [`TcpConnector`] dials,
//! listens and runs connections with [`conn`](crate::conn) and [`handshake`](crate::handshake);
//! [`spawn`] starts the driver with it.

use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, RwLock};

use lifeline_core::link::DialOutcome;
use lifeline_core::tree::Rank;
use lifeline_core::{Class, Node};
use lifeline_transport_common::{
    self as common, AddressBook, Connector, Counters, DialFailure, Inbound, LinkIo, Rejection,
    RunningNode, Setup,
};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Mutex;

use crate::config::TcpConfig;
use crate::conn::{self, Shared};
use crate::handshake::{HandshakeError, Verdict};
use crate::key::ClusterKey;

/// A node running on TCP: the handle, the outputs to read, and the driver task (the shared
/// driver's [`RunningNode`]).
pub type TcpNode = RunningNode;

/// The TCP connector: two slots per link, one connection per class (control is slot 0, data
/// slot 1), each authenticated by the cluster-key handshake.
///
/// Public so that a composite connector can delegate to it (the RDMA link in
/// `lifeline-transport-rdma` runs its control slot through this connector and authenticates its
/// data slot's queue pair exchange with this connector's handshake); build one with
/// [`connector`]. [`spawn`] is the way to run plain TCP.
pub struct TcpConnector {
    sh: Shared,
    /// Taken once, by [`Connector::listen`].
    listener: Mutex<Option<TcpListener>>,
}

impl Connector for TcpConnector {
    type Conn = TcpStream;

    const SLOTS: usize = 2;

    fn slot_of(class: Class) -> usize {
        match class {
            Class::Control => 0,
            Class::Data => 1,
        }
    }

    fn dial(
        self: &Arc<Self>,
        peer: Rank,
        slot: usize,
        addr: SocketAddr,
    ) -> impl std::future::Future<Output = Result<TcpStream, DialFailure>> + Send + 'static {
        let sh = self.sh.clone();
        let class = if slot == 0 {
            Class::Control
        } else {
            Class::Data
        };
        async move {
            conn::dial(peer, addr, class, &sh).await.map_err(|e| {
                let outcome = match &e {
                    HandshakeError::Io(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                        DialOutcome::Refused
                    }
                    HandshakeError::Duplicate => DialOutcome::Duplicate,
                    _ => DialOutcome::Failed,
                };
                let removed = match &e {
                    HandshakeError::Removed { epoch } => Some(*epoch),
                    _ => None,
                };
                DialFailure {
                    outcome,
                    removed,
                    error: Box::new(e),
                }
            })
        }
    }

    fn listen(
        self: &Arc<Self>,
        inbound: Inbound<TcpStream>,
    ) -> impl std::future::Future<Output = ()> + Send + 'static {
        let this = self.clone();
        async move {
            let Some(listener) = this.listener.lock().await.take() else {
                return;
            };
            conn::listen(listener, this.sh.clone(), inbound).await;
        }
    }

    fn run(
        self: &Arc<Self>,
        conn: TcpStream,
        io: LinkIo,
    ) -> impl std::future::Future<Output = ()> + Send + 'static {
        let sh = self.sh.clone();
        let verdict = io.accepted.then_some(Verdict::Accept);
        conn::run(conn, verdict, io, sh)
    }

    fn reject(
        self: &Arc<Self>,
        conn: TcpStream,
        why: Rejection,
    ) -> impl std::future::Future<Output = ()> + Send + 'static {
        let v = match why {
            Rejection::Duplicate => Verdict::Duplicate,
            Rejection::Refuse => Verdict::Refuse,
            Rejection::Removed { epoch } => Verdict::Removed { epoch },
        };
        conn::reject(conn, v)
    }
}

/// The connector [`spawn`] runs, and the driver [`Setup`] to run it with: for a composite
/// connector that wraps it (see [`TcpConnector`]). Arguments as for [`spawn`].
pub fn connector(
    node: &Node,
    book: AddressBook,
    key: ClusterKey,
    cfg: TcpConfig,
    listener: TcpListener,
) -> (TcpConnector, Setup) {
    let local_addr = listener
        .local_addr()
        .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)));
    let counters = Arc::new(Counters::default());
    let book = Arc::new(RwLock::new(book));
    let setup = Setup {
        book: book.clone(),
        cfg: cfg.driver_config(),
        counters: counters.clone(),
        local_addr,
    };
    let sh = Shared {
        me: node.me(),
        key: Arc::new(key),
        book,
        limits: node.config().limits(),
        past_bound: crate::handshake::PastBook::bound_for(node.config().join.max_per_view),
        cfg: Arc::new(cfg),
        counters,
        links: Arc::default(),
    };
    let connector = TcpConnector {
        sh,
        listener: Mutex::new(Some(listener)),
    };
    (connector, setup)
}

/// Starts driving `node` on `listener` (bound to this rank's address book entry). Must be called
/// inside a tokio runtime; any flavour works.
///
/// The node should have been created with `now = Instant::ZERO`: the driver's clock starts at
/// zero when this is called (an earlier `now` would hold protocol time back until reached).
pub fn spawn(
    node: Node,
    book: AddressBook,
    key: ClusterKey,
    cfg: TcpConfig,
    listener: TcpListener,
) -> TcpNode {
    let (connector, setup) = connector(&node, book, key, cfg, listener);
    common::spawn(node, Arc::new(connector), setup)
}
