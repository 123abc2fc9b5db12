//! The rendezvous wire format and its authentication: [`BootstrapKey`] and keyed-BLAKE3 MACs
//! over fresh nonces from both sides, in the style of the TCP handshake.
//!
//! ```text
//! client → server  HELLO      "LLB1" version:u8 rank:u32 nonce_c[32]                 (41 B)
//! server → client  CHALLENGE  "LLB1" nonce_s[32] mac_s[32]                            (68 B)
//! client → server  REGISTER   rank:u32 size:u32 family:u8 ip[16] port:u16 mac_c[32]   (59 B)
//! server → client  ANSWER     status:u8 len:u32 body[len] mac_r[32]
//!
//! mac_s = BLAKE3-keyed(key, "server.." | nonce_c | nonce_s)
//! mac_c = BLAKE3-keyed(key, "register" | nonce_c | nonce_s | REGISTER without mac_c)
//! mac_r = BLAKE3-keyed(key, "answer.." | nonce_c | nonce_s | status | len | body)
//! status 0: body = the address book as a peers file; 1: body = missing ranks, u32 each;
//!        2..: a refusal (empty body)
//! ```
//!
//! The server proves the key first (so a stranger posing as the rendezvous learns no MAC of
//! the client's); the registration's MAC covers the server's fresh nonce (a recorded
//! registration cannot be replayed) and the answer's covers the client's (a recorded or
//! forged book is refused). Every message has a fixed length or a bounded length prefix.
//!
//! HELLO's rank is a claim, not authenticated: the server uses it only to name the rank whose
//! registration failed the key check (a client that refuses the server's MAC, or a REGISTER
//! whose MAC is wrong), so that rank 0 reports "rank R: wrong key" rather than "never
//! registered". Version 2 added it.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use super::error::BootstrapError;

/// Magic: "Lifeline Bootstrap, format 1".
pub const MAGIC: [u8; 4] = *b"LLB1";
/// Wire version.
pub const VERSION: u8 = 2;
/// Length of HELLO.
pub const HELLO_LEN: usize = 41;
/// Length of CHALLENGE.
pub const CHALLENGE_LEN: usize = 68;
/// Length of REGISTER.
pub const REGISTER_LEN: usize = 59;
/// The largest answer body accepted (a book of about 100 000 ranks); a longer one is refused
/// as malformed before it is read.
pub const MAX_BODY: usize = 4 << 20;
/// The largest job size accepted.
pub const MAX_SIZE: u32 = 1 << 20;

/// Answer status: the book follows.
pub(crate) const STATUS_BOOK: u8 = 0;
/// Answer status: the rendezvous timed out; the missing ranks follow.
pub(crate) const STATUS_MISSING: u8 = 1;

/// The rendezvous key: 32 bytes derived from the cluster secret, under its own context (so it
/// differs from the transport's key for the same secret). Every process of a job holds the
/// same secret; the rendezvous proves knowledge of it without sending it.
#[derive(Clone, PartialEq, Eq)]
pub struct BootstrapKey(pub(crate) [u8; 32]);

impl BootstrapKey {
    const CONTEXT: &'static str = "lifeline bootstrap 2025 rendezvous key v1";

    /// The key for a secret of any length (exact bytes); `None` for an empty secret.
    pub fn from_secret(secret: &[u8]) -> Option<Self> {
        (!secret.is_empty()).then(|| Self(blake3::derive_key(Self::CONTEXT, secret)))
    }
}

impl std::fmt::Debug for BootstrapKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BootstrapKey(..)")
    }
}

/// A fresh random nonce.
pub(crate) fn nonce() -> std::io::Result<[u8; 32]> {
    let mut n = [0u8; 32];
    getrandom::fill(&mut n).map_err(|e| std::io::Error::other(e.to_string()))?;
    Ok(n)
}

/// Keyed BLAKE3 over `label` and `parts`.
pub(crate) fn mac(key: &BootstrapKey, label: &[u8; 8], parts: &[&[u8]]) -> [u8; 32] {
    let mut h = blake3::Hasher::new_keyed(&key.0);
    h.update(label);
    for p in parts {
        h.update(p);
    }
    *h.finalize().as_bytes()
}

/// Constant-time comparison of two MACs.
pub(crate) fn mac_eq(a: &[u8; 32], b: &[u8]) -> bool {
    <[u8; 32]>::try_from(b).is_ok_and(|b| blake3::Hash::from(*a) == blake3::Hash::from(b))
}

pub(crate) const L_SERVER: &[u8; 8] = b"server..";
pub(crate) const L_REGISTER: &[u8; 8] = b"register";
pub(crate) const L_ANSWER: &[u8; 8] = b"answer..";

/// HELLO bytes: the rank the client will register (a claim) and its nonce.
pub(crate) fn hello(rank: u32, nonce_c: &[u8; 32]) -> [u8; HELLO_LEN] {
    let mut b = [0u8; HELLO_LEN];
    b[..4].copy_from_slice(&MAGIC);
    b[4] = VERSION;
    b[5..9].copy_from_slice(&rank.to_be_bytes());
    b[9..].copy_from_slice(nonce_c);
    b
}

/// The claimed rank and the client's nonce from HELLO.
pub(crate) fn parse_hello(b: &[u8; HELLO_LEN]) -> Result<(u32, [u8; 32]), BootstrapError> {
    if b[..4] != MAGIC || b[4] != VERSION {
        return Err(BootstrapError::Malformed(
            "bad HELLO magic or version".into(),
        ));
    }
    let rank = u32::from_be_bytes([b[5], b[6], b[7], b[8]]);
    let mut n = [0u8; 32];
    n.copy_from_slice(&b[9..]);
    Ok((rank, n))
}

/// CHALLENGE bytes.
pub(crate) fn challenge(
    key: &BootstrapKey,
    nonce_c: &[u8; 32],
    nonce_s: &[u8; 32],
) -> [u8; CHALLENGE_LEN] {
    let mut b = [0u8; CHALLENGE_LEN];
    b[..4].copy_from_slice(&MAGIC);
    b[4..36].copy_from_slice(nonce_s);
    b[36..].copy_from_slice(&mac(key, L_SERVER, &[nonce_c, nonce_s]));
    b
}

/// The server's nonce from CHALLENGE, its MAC checked.
pub(crate) fn check_challenge(
    key: &BootstrapKey,
    nonce_c: &[u8; 32],
    b: &[u8; CHALLENGE_LEN],
    addr: &str,
) -> Result<[u8; 32], BootstrapError> {
    if b[..4] != MAGIC {
        return Err(BootstrapError::Malformed("bad CHALLENGE magic".into()));
    }
    let mut nonce_s = [0u8; 32];
    nonce_s.copy_from_slice(&b[4..36]);
    if !mac_eq(&mac(key, L_SERVER, &[nonce_c, &nonce_s]), &b[36..]) {
        return Err(BootstrapError::BadServerMac(addr.to_string()));
    }
    Ok(nonce_s)
}

/// An authenticated registration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Registration {
    pub(crate) rank: u32,
    pub(crate) size: u32,
    pub(crate) addr: SocketAddr,
}

/// REGISTER bytes.
pub(crate) fn register(
    key: &BootstrapKey,
    nonce_c: &[u8; 32],
    nonce_s: &[u8; 32],
    r: Registration,
) -> [u8; REGISTER_LEN] {
    let mut b = [0u8; REGISTER_LEN];
    b[..4].copy_from_slice(&r.rank.to_be_bytes());
    b[4..8].copy_from_slice(&r.size.to_be_bytes());
    match r.addr.ip() {
        IpAddr::V4(ip) => {
            b[8] = 4;
            b[9..13].copy_from_slice(&ip.octets());
        }
        IpAddr::V6(ip) => {
            b[8] = 6;
            b[9..25].copy_from_slice(&ip.octets());
        }
    }
    b[25..27].copy_from_slice(&r.addr.port().to_be_bytes());
    let m = mac(key, L_REGISTER, &[nonce_c, nonce_s, &b[..27]]);
    b[27..].copy_from_slice(&m);
    b
}

/// Why a REGISTER was refused unanswered.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum BadRegister {
    /// The MAC is wrong: no key, or a replay.
    Mac,
    /// The address family byte is neither 4 nor 6.
    Malformed,
}

/// The registration in REGISTER, its MAC checked first.
pub(crate) fn parse_register(
    key: &BootstrapKey,
    nonce_c: &[u8; 32],
    nonce_s: &[u8; 32],
    b: &[u8; REGISTER_LEN],
) -> Result<Registration, BadRegister> {
    if !mac_eq(
        &mac(key, L_REGISTER, &[nonce_c, nonce_s, &b[..27]]),
        &b[27..],
    ) {
        return Err(BadRegister::Mac);
    }
    let u32_at = |i: usize| u32::from_be_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
    let ip = match b[8] {
        4 => IpAddr::V4(Ipv4Addr::new(b[9], b[10], b[11], b[12])),
        6 => {
            let mut o = [0u8; 16];
            o.copy_from_slice(&b[9..25]);
            IpAddr::V6(Ipv6Addr::from(o))
        }
        _ => return Err(BadRegister::Malformed),
    };
    let port = u16::from_be_bytes([b[25], b[26]]);
    Ok(Registration {
        rank: u32_at(0),
        size: u32_at(4),
        addr: SocketAddr::new(ip, port),
    })
}

/// ANSWER bytes: status, length, body, MAC.
pub(crate) fn answer(
    key: &BootstrapKey,
    nonce_c: &[u8; 32],
    nonce_s: &[u8; 32],
    status: u8,
    body: &[u8],
) -> Vec<u8> {
    let mut b = Vec::with_capacity(37 + body.len());
    b.push(status);
    b.extend_from_slice(&(body.len() as u32).to_be_bytes());
    b.extend_from_slice(body);
    let m = mac(key, L_ANSWER, &[nonce_c, nonce_s, &b]);
    b.extend_from_slice(&m);
    b
}
