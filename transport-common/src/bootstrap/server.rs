//! [`RendezvousServer`]: rank 0's side of the rendezvous. It collects one authenticated
//! registration per rank and answers every registrant with the whole address book, or, after
//! the timeout, with the ranks that never registered.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use super::error::{BootstrapError, Refusal};
use super::wire::{self, BadRegister, BootstrapKey, Registration};
use crate::AddressBook;
use lifeline_core::tree::Rank;

/// Connections refused by the server, by reason. Every refused connection is counted once.
#[derive(Debug, Default)]
pub struct RefusalCounts {
    /// Not a rendezvous HELLO (bad magic or version), a bad address family, or closed early.
    pub malformed: AtomicU64,
    /// The key check failed: the registration's MAC was wrong (no key, a different key, or a
    /// replay), or the client closed after our CHALLENGE (it refused our MAC: a different key).
    pub bad_mac: AtomicU64,
    /// Authenticated, but the rank was not below the size or the size differed.
    pub out_of_range: AtomicU64,
    /// Authenticated, but the rank was already registered with another address.
    pub duplicate: AtomicU64,
    /// The connection did not finish its registration within the handshake bound.
    pub timed_out: AtomicU64,
    /// Connections over the bound on handshakes in progress, closed unanswered.
    pub over_limit: AtomicU64,
}

impl RefusalCounts {
    /// The sum of every reason.
    pub fn total(&self) -> u64 {
        [
            &self.malformed,
            &self.bad_mac,
            &self.out_of_range,
            &self.duplicate,
            &self.timed_out,
            &self.over_limit,
        ]
        .iter()
        .map(|c| c.load(Ordering::Relaxed))
        .sum()
    }
}

/// What a finished rendezvous gives its host.
#[derive(Debug)]
pub struct ServerReport {
    /// The complete book (every rank `0..size`).
    pub book: AddressBook,
    /// The connections refused on the way.
    pub refused: Arc<RefusalCounts>,
}

/// The rendezvous server, bound and not yet running.
///
/// Guarantees: [`RendezvousServer::run`] returns within `timeout` of its call plus the time to
/// write the answers (each write bounded by the handshake bound); a bad connection (garbage, a
/// wrong key, an oversized or slow peer, an out-of-range or conflicting rank) is refused and
/// counted, never a panic or an end of the server; each registrant is answered exactly once.
#[derive(Debug)]
pub struct RendezvousServer {
    listener: TcpListener,
    key: BootstrapKey,
    size: u32,
    timeout: Duration,
    handshake_timeout: Duration,
    refused: Arc<RefusalCounts>,
    wrong_key: WrongKey,
}

/// The ranks (as their HELLO claimed, below the size) whose registration failed the key check.
type WrongKey = Arc<Mutex<BTreeSet<u32>>>;

/// The most handshakes in progress at once (beyond registrants waiting for the book).
const MAX_HANDSHAKES: usize = 256;

type Reply = oneshot::Sender<(u8, Vec<u8>)>;

impl RendezvousServer {
    /// Binds `addr` for a job of `size` ranks. `timeout` bounds the whole rendezvous.
    pub async fn bind(
        addr: SocketAddr,
        key: BootstrapKey,
        size: u32,
        timeout: Duration,
    ) -> Result<Self, BootstrapError> {
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|source| BootstrapError::Bind {
                addr: addr.to_string(),
                source,
            })?;
        Ok(Self {
            listener,
            key,
            size: size.clamp(1, wire::MAX_SIZE),
            timeout,
            handshake_timeout: Duration::from_secs(2).min(timeout.max(Duration::from_millis(100))),
            refused: Arc::default(),
            wrong_key: Arc::default(),
        })
    }

    /// The bound address.
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// The refusal counters (shared; they keep counting while the server runs).
    pub fn refused(&self) -> Arc<RefusalCounts> {
        self.refused.clone()
    }

    /// Runs the rendezvous: the complete book once all `size` ranks registered (every
    /// registrant got it), or [`BootstrapError::Missing`] after the timeout (every waiting
    /// registrant was told the missing ranks).
    pub async fn run(self) -> Result<ServerReport, BootstrapError> {
        let deadline = Instant::now() + self.timeout;
        let (reg_tx, mut reg_rx) = mpsc::channel::<(Registration, Reply)>(64);
        let mut regs: BTreeMap<u32, (SocketAddr, Reply)> = BTreeMap::new();
        let key = Arc::new(self.key);
        let in_flight = Arc::new(AtomicU64::new(0));
        let mut tasks = tokio::task::JoinSet::new();
        let outcome = loop {
            if regs.len() as u32 == self.size {
                break Ok(());
            }
            tokio::select! {
                acc = self.listener.accept() => {
                    let Ok((stream, _)) = acc else { continue };
                    if in_flight.load(Ordering::Relaxed) as usize >= MAX_HANDSHAKES {
                        self.refused.over_limit.fetch_add(1, Ordering::Relaxed);
                        continue;
                    }
                    in_flight.fetch_add(1, Ordering::Relaxed);
                    let conn = Conn {
                        key: key.clone(),
                        size: self.size,
                        refused: self.refused.clone(),
                        wrong_key: self.wrong_key.clone(),
                        in_flight: in_flight.clone(),
                        handshake_timeout: self.handshake_timeout,
                        deadline,
                    };
                    tasks.spawn(conn.serve(stream, reg_tx.clone()));
                }
                Some((r, reply)) = reg_rx.recv() => {
                    let refusal = if r.rank >= self.size {
                        self.refused.out_of_range.fetch_add(1, Ordering::Relaxed);
                        Some(Refusal::OutOfRange)
                    } else if r.size != self.size {
                        self.refused.out_of_range.fetch_add(1, Ordering::Relaxed);
                        Some(Refusal::SizeMismatch)
                    } else if r.addr.ip().is_unspecified() || r.addr.port() == 0 {
                        self.refused.out_of_range.fetch_add(1, Ordering::Relaxed);
                        Some(Refusal::BadAddress)
                    } else if regs.get(&r.rank).is_some_and(|(a, _)| *a != r.addr) {
                        self.refused.duplicate.fetch_add(1, Ordering::Relaxed);
                        Some(Refusal::Duplicate)
                    } else {
                        None
                    };
                    match refusal {
                        Some(why) => { let _ = reply.send((why.code(), Vec::new())); }
                        // The same rank again with the same address (a retry): the newer
                        // connection is the one answered.
                        None => { regs.insert(r.rank, (r.addr, reply)); }
                    }
                }
                () = tokio::time::sleep_until(deadline) => break Err(()),
            }
        };
        drop(reg_tx);
        // Connections still mid-handshake now fail to register and end.
        drop(reg_rx);
        let result = match outcome {
            Ok(()) => {
                let mut book = AddressBook::new();
                for (r, (a, _)) in &regs {
                    book.insert(Rank(*r), *a);
                }
                let body = book.to_string().into_bytes();
                for (_, (_, reply)) in regs {
                    let _ = reply.send((wire::STATUS_BOOK, body.clone()));
                }
                Ok(ServerReport {
                    book,
                    refused: self.refused.clone(),
                })
            }
            Err(()) => {
                let missing: Vec<u32> = (0..self.size).filter(|r| !regs.contains_key(r)).collect();
                let wrong_key: Vec<u32> = {
                    let tried = self.wrong_key.lock().unwrap_or_else(|e| e.into_inner());
                    missing
                        .iter()
                        .copied()
                        .filter(|r| tried.contains(r))
                        .collect()
                };
                let body: Vec<u8> = missing.iter().flat_map(|r| r.to_be_bytes()).collect();
                for (_, (_, reply)) in regs {
                    let _ = reply.send((wire::STATUS_MISSING, body.clone()));
                }
                Err(BootstrapError::Missing {
                    missing,
                    wrong_key,
                    size: self.size,
                    timeout: self.timeout,
                })
            }
        };
        // Let the answers go out (each write is bounded), then drop what is left: connections
        // still mid-handshake are refused by closing them.
        let flush = Instant::now() + self.handshake_timeout;
        while !tasks.is_empty() {
            tokio::select! {
                _ = tasks.join_next() => {}
                () = tokio::time::sleep_until(flush) => break,
            }
        }
        tasks.abort_all();
        result
    }
}

/// One connection's handler.
struct Conn {
    key: Arc<BootstrapKey>,
    size: u32,
    refused: Arc<RefusalCounts>,
    wrong_key: WrongKey,
    in_flight: Arc<AtomicU64>,
    handshake_timeout: Duration,
    deadline: Instant,
}

impl Conn {
    async fn serve(self, mut s: TcpStream, reg_tx: mpsc::Sender<(Registration, Reply)>) {
        let _ = s.set_nodelay(true);
        let mut claimed = None;
        let hs = tokio::time::timeout(self.handshake_timeout, self.handshake(&mut s, &mut claimed))
            .await;
        self.in_flight.fetch_sub(1, Ordering::Relaxed);
        let (reg, nonce_c, nonce_s) = match hs {
            Ok(Ok(x)) => x,
            Ok(Err(BadRegister::Mac)) => {
                self.refused.bad_mac.fetch_add(1, Ordering::Relaxed);
                if let Some(r) = claimed.filter(|r| *r < self.size) {
                    self.wrong_key
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .insert(r);
                }
                return;
            }
            Ok(Err(BadRegister::Malformed)) => {
                self.refused.malformed.fetch_add(1, Ordering::Relaxed);
                return;
            }
            Err(_) => {
                self.refused.timed_out.fetch_add(1, Ordering::Relaxed);
                return;
            }
        };
        let (tx, rx) = oneshot::channel();
        if reg_tx.send((reg, tx)).await.is_err() {
            return;
        }
        // The answer comes at the latest at the deadline (the server's loop sends it then).
        let answer = tokio::time::timeout_at(self.deadline + self.handshake_timeout, rx).await;
        let Ok(Ok((status, body))) = answer else {
            return;
        };
        let bytes = wire::answer(&self.key, &nonce_c, &nonce_s, status, &body);
        let _ = tokio::time::timeout(self.handshake_timeout, async {
            s.write_all(&bytes).await?;
            s.shutdown().await
        })
        .await;
    }

    /// HELLO, CHALLENGE, REGISTER; `claimed` gets HELLO's rank once it is read.
    async fn handshake(
        &self,
        s: &mut TcpStream,
        claimed: &mut Option<u32>,
    ) -> Result<(Registration, [u8; 32], [u8; 32]), BadRegister> {
        let mut hello = [0u8; wire::HELLO_LEN];
        s.read_exact(&mut hello)
            .await
            .map_err(|_| BadRegister::Malformed)?;
        let (rank, nonce_c) = wire::parse_hello(&hello).map_err(|_| BadRegister::Malformed)?;
        *claimed = Some(rank);
        let nonce_s = wire::nonce().map_err(|_| BadRegister::Malformed)?;
        s.write_all(&wire::challenge(&self.key, &nonce_c, &nonce_s))
            .await
            .map_err(|_| BadRegister::Malformed)?;
        let mut reg = [0u8; wire::REGISTER_LEN];
        // A client that does not hold our key closes here, having checked our MAC: a failed
        // key check, like a wrong REGISTER MAC.
        s.read_exact(&mut reg).await.map_err(|e| match e.kind() {
            std::io::ErrorKind::UnexpectedEof => BadRegister::Mac,
            _ => BadRegister::Malformed,
        })?;
        let r = wire::parse_register(&self.key, &nonce_c, &nonce_s, &reg)?;
        Ok((r, nonce_c, nonce_s))
    }
}
