//! The registrant's side of the rendezvous ([`register`]), and [`join`]: a rank's whole
//! bootstrap (rank 0 hosts the server and registers with it like every other rank).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;

use super::error::{BootstrapError, Refusal};
use super::server::{RefusalCounts, RendezvousServer};
use super::wire::{self, BootstrapKey, Registration};
use crate::AddressBook;
use lifeline_core::tree::Rank;

/// How long a rendezvous may take.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RendezvousConfig {
    /// Bound on the whole rendezvous: the server gives up this long after it starts (naming
    /// the missing ranks), and a registrant stops trying to reach the server this long after
    /// it starts.
    pub timeout: Duration,
    /// How much longer than `timeout` a registrant waits for the server's answer, so that the
    /// server's own verdict (the missing ranks) reaches registrants that started before it.
    pub answer_grace: Duration,
    /// Pause between connection attempts while the server is not up yet.
    pub retry: Duration,
}

impl Default for RendezvousConfig {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(60),
            answer_grace: Duration::from_secs(2),
            retry: Duration::from_millis(100),
        }
    }
}

impl RendezvousConfig {
    /// The defaults with this `timeout`.
    pub fn with_timeout(timeout: Duration) -> Self {
        Self {
            timeout,
            ..Self::default()
        }
    }
}

/// A rank's result of a successful rendezvous.
#[derive(Debug)]
pub struct Joined {
    /// Every rank's listening address, `0..size`, none missing.
    pub book: AddressBook,
    /// The address this rank registered (the book's entry for it).
    pub me: SocketAddr,
    /// Rank 0 only: the connections its server refused.
    pub refused: Option<Arc<RefusalCounts>>,
}

/// Resolves `addr` (`host:port`) to its first address.
pub(crate) async fn resolve(addr: &str) -> std::io::Result<SocketAddr> {
    tokio::net::lookup_host(addr)
        .await?
        .next()
        .ok_or_else(|| std::io::Error::other(format!("{addr} resolves to no address")))
}

/// Runs rank `rank`'s part of a rendezvous at `rendezvous` (`host:port`) for a job of `size`:
/// rank 0 binds the rendezvous address and serves it ([`RendezvousServer`]), then every rank,
/// rank 0 included, [`register`]s its listening address `listen`.
///
/// Guarantees: returns within `cfg.timeout + cfg.answer_grace` (plus one handshake bound for
/// rank 0's answers); on success the book holds every rank `0..size`; when ranks never
/// registered, every registrant, rank 0 included, fails with [`BootstrapError::Missing`]
/// naming them.
pub async fn join(
    rendezvous: &str,
    key: &BootstrapKey,
    rank: u32,
    size: u32,
    listen: SocketAddr,
    cfg: &RendezvousConfig,
) -> Result<Joined, BootstrapError> {
    let server = if rank == 0 {
        let at = tokio::time::timeout(cfg.timeout, resolve(rendezvous))
            .await
            .map_err(|_| std::io::Error::other("resolving timed out"))
            .and_then(|r| r)
            .map_err(|e| BootstrapError::Unreachable {
                addr: rendezvous.to_string(),
                timeout: cfg.timeout,
                last: e.to_string(),
            })?;
        let server = RendezvousServer::bind(at, key.clone(), size, cfg.timeout).await?;
        let refused = server.refused();
        Some((tokio::spawn(server.run()), refused))
    } else {
        None
    };
    let registered = register(rendezvous, key, rank, size, listen, cfg).await;
    let refused = match server {
        None => None,
        Some((task, refused)) => {
            let bound = cfg.timeout + cfg.answer_grace;
            match tokio::time::timeout(bound, task).await {
                // The server's verdict comes first when it failed: it names the missing ranks.
                Ok(Ok(Err(e))) => return Err(e),
                Ok(Ok(Ok(_))) => {}
                Ok(Err(join)) => return Err(std::io::Error::other(join.to_string()).into()),
                Err(_) => {}
            }
            Some(refused)
        }
    };
    let (book, me) = registered?;
    Ok(Joined { book, me, refused })
}

/// Registers `rank` of a job of `size` with the rendezvous server at `rendezvous`
/// (`host:port`) and waits for the whole book.
///
/// The registered address is `listen`, except that an unspecified IP (`0.0.0.0`, `::`) is
/// replaced by this host's end of the connection to the rendezvous (the interface that reaches
/// it); the port is `listen`'s. Connecting is retried every `cfg.retry` until `cfg.timeout`;
/// the answer is awaited until `cfg.timeout + cfg.answer_grace` after the call. The server
/// must prove the key before the registration is sent, and the answer's MAC must cover this
/// connection's nonce: a forged or replayed book is refused ([`BootstrapError::BadAnswerMac`]).
/// Returns the book and the address registered.
pub async fn register(
    rendezvous: &str,
    key: &BootstrapKey,
    rank: u32,
    size: u32,
    listen: SocketAddr,
    cfg: &RendezvousConfig,
) -> Result<(AddressBook, SocketAddr), BootstrapError> {
    let start = Instant::now();
    let connect_by = start + cfg.timeout;
    let answer_by = connect_by + cfg.answer_grace;
    let mut stream = connect(rendezvous, connect_by, cfg).await?;
    let _ = stream.set_nodelay(true);
    let me = if listen.ip().is_unspecified() {
        SocketAddr::new(stream.local_addr()?.ip(), listen.port())
    } else {
        listen
    };
    let reg = Registration {
        rank,
        size,
        addr: me,
    };
    match tokio::time::timeout_at(answer_by, exchange(&mut stream, key, reg, rendezvous)).await {
        Ok(r) => r.map(|book| (book, me)).map_err(|e| match e {
            BootstrapError::Missing {
                missing,
                wrong_key,
                size,
                ..
            } => BootstrapError::Missing {
                missing,
                wrong_key,
                size,
                timeout: cfg.timeout,
            },
            e => e,
        }),
        Err(_) => Err(BootstrapError::NoAnswer {
            addr: rendezvous.to_string(),
            timeout: answer_by - start,
        }),
    }
}

async fn connect(
    rendezvous: &str,
    by: Instant,
    cfg: &RendezvousConfig,
) -> Result<TcpStream, BootstrapError> {
    let mut last;
    loop {
        let attempt = async {
            let at = resolve(rendezvous).await?;
            TcpStream::connect(at).await
        };
        match tokio::time::timeout_at(by, attempt).await {
            Ok(Ok(s)) => return Ok(s),
            Ok(Err(e)) => last = e.to_string(),
            Err(_) => last = String::from("connect timed out"),
        }
        if Instant::now() + cfg.retry >= by {
            return Err(BootstrapError::Unreachable {
                addr: rendezvous.to_string(),
                timeout: cfg.timeout,
                last,
            });
        }
        tokio::time::sleep(cfg.retry).await;
    }
}

/// HELLO, CHALLENGE, REGISTER, ANSWER on `s`.
pub(crate) async fn exchange(
    s: &mut TcpStream,
    key: &BootstrapKey,
    reg: Registration,
    rendezvous: &str,
) -> Result<AddressBook, BootstrapError> {
    let closed = |e: std::io::Error| match e.kind() {
        std::io::ErrorKind::UnexpectedEof => BootstrapError::Malformed(
            "the rendezvous closed the connection before answering".into(),
        ),
        _ => BootstrapError::Io(e),
    };
    let nonce_c = wire::nonce()?;
    s.write_all(&wire::hello(reg.rank, &nonce_c)).await?;
    let mut ch = [0u8; wire::CHALLENGE_LEN];
    s.read_exact(&mut ch).await.map_err(closed)?;
    let nonce_s = wire::check_challenge(key, &nonce_c, &ch, rendezvous)?;
    s.write_all(&wire::register(key, &nonce_c, &nonce_s, reg))
        .await?;
    let mut head = [0u8; 5];
    s.read_exact(&mut head).await.map_err(closed)?;
    let len = u32::from_be_bytes([head[1], head[2], head[3], head[4]]) as usize;
    if len > wire::MAX_BODY {
        return Err(BootstrapError::Malformed(format!(
            "answer of {len} bytes (at most {})",
            wire::MAX_BODY
        )));
    }
    let mut rest = vec![0u8; len + 32];
    s.read_exact(&mut rest).await.map_err(closed)?;
    let (body, mac) = rest.split_at(len);
    let mut signed = head.to_vec();
    signed.extend_from_slice(body);
    if !wire::mac_eq(
        &wire::mac(key, wire::L_ANSWER, &[&nonce_c, &nonce_s, &signed]),
        mac,
    ) {
        return Err(BootstrapError::BadAnswerMac);
    }
    match head[0] {
        wire::STATUS_BOOK => check_book(body, reg),
        wire::STATUS_MISSING if len % 4 == 0 => Err(BootstrapError::Missing {
            missing: body
                .chunks_exact(4)
                .map(|c| u32::from_be_bytes([c[0], c[1], c[2], c[3]]))
                .collect(),
            // Only rank 0, the server's host, knows whose key failed.
            wrong_key: Vec::new(),
            size: reg.size,
            timeout: Duration::ZERO,
        }),
        code => match Refusal::from_code(code) {
            Some(reason) => Err(BootstrapError::Refused {
                rank: reg.rank,
                reason,
            }),
            None => Err(BootstrapError::Malformed(format!("answer status {code}"))),
        },
    }
}

/// The book in an answer, checked: ranks `0..size`, none missing, our own entry as registered.
fn check_book(body: &[u8], reg: Registration) -> Result<AddressBook, BootstrapError> {
    let text = std::str::from_utf8(body)
        .map_err(|_| BootstrapError::Malformed("the book is not UTF-8".into()))?;
    let book = AddressBook::parse(text)
        .map_err(|e| BootstrapError::Malformed(format!("the book: {e}")))?;
    if book.len() as u32 != reg.size || book.span() != reg.size {
        return Err(BootstrapError::Malformed(format!(
            "the book lists {} ranks, not 0..{}",
            book.len(),
            reg.size
        )));
    }
    if book.get(Rank(reg.rank)) != Some(reg.addr) {
        return Err(BootstrapError::Malformed(
            "the book does not hold this rank's registration".into(),
        ));
    }
    Ok(book)
}
