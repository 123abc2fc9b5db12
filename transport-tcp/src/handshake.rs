//! The connection handshake: mutual proof of the cluster key over fresh nonces, the claimed
//! rank checked against the address book, and the traffic class declared. No frame is read
//! from a connection before its handshake succeeds.
//!
//! ```text
//! dialer → acceptor  HELLO      "LLT1" version:u8 class:u8 from:u32 to:u32 nonce_d[32]   (46 B)
//! acceptor → dialer  CHALLENGE  "LLT1" me:u32 nonce_a[32] mac_a[32]                      (72 B)
//! dialer → acceptor  PROOF      mac_d[32]
//! acceptor → dialer  RESULT     0 accepted | 1 duplicate (the acceptor's own dial wins) | 2 refused
//!                               | 3 epoch:u64  removed (the dialer was removed from the cluster)
//!
//! mac_a = BLAKE3-keyed(key, "acceptor" | HELLO | me | nonce_a)
//! mac_d = BLAKE3-keyed(key, "dialer.." | HELLO | me | nonce_a)
//! ```
//!
//! Each side's MAC covers the other side's fresh nonce, so a recorded handshake cannot be
//! replayed, and the role label keeps one side's MAC from being reflected as the other's. The
//! dialer checks `mac_a` before it sends `mac_d`, so a stranger learns no MAC of the dialer's.
//! The acceptor checks, before answering, that the claimed rank is in the address book and
//! connects from that rank's IP, and that `to` is its own rank.
//!
//! What it does not do: encrypt or authenticate the frames that follow. An on-path attacker
//! can still inject into an established connection; use the QUIC adapter (mutual TLS) where
//! that matters.

use std::io;
use std::net::IpAddr;

use lifeline_core::tree::Rank;
use lifeline_core::Class;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use lifeline_transport_common::AddressBook;

use crate::config::ClusterKey;

/// Handshake magic: "Lifeline TCP, format 1".
pub const MAGIC: [u8; 4] = *b"LLT1";
/// Handshake version.
pub const VERSION: u8 = 1;
/// Length of HELLO.
pub const HELLO_LEN: usize = 46;
/// Length of CHALLENGE.
pub const CHALLENGE_LEN: usize = 72;

const LABEL_ACCEPTOR: &[u8; 8] = b"acceptor";
const LABEL_DIALER: &[u8; 8] = b"dialer..";

/// The acceptor's verdict, sent as the RESULT byte (and, for [`Verdict::Removed`], the epoch).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The connection is installed; frames may flow.
    Accept,
    /// The acceptor has (or is dialing) this class's connection and it wins the tie-break;
    /// the dialer drops this one and uses the other.
    Duplicate,
    /// The acceptor will not talk to this rank (known dead, shutting down).
    Refuse,
    /// The dialer was removed from the cluster as of `epoch` (the core's
    /// `Node::fence_verdict`): it is fenced, and learns it from this answer.
    Removed {
        /// The acceptor's failure epoch.
        epoch: u64,
    },
}

impl Verdict {
    /// The RESULT bytes: one byte, then the epoch for [`Verdict::Removed`].
    fn encode(self) -> ([u8; 9], usize) {
        let mut b = [0u8; 9];
        match self {
            Self::Accept => (b, 1),
            Self::Duplicate => {
                b[0] = 1;
                (b, 1)
            }
            Self::Refuse => {
                b[0] = 2;
                (b, 1)
            }
            Self::Removed { epoch } => {
                b[0] = 3;
                b[1..9].copy_from_slice(&epoch.to_be_bytes());
                (b, 9)
            }
        }
    }
}

/// Why a handshake failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HandshakeError {
    /// The socket failed or closed.
    #[error("i/o: {0}")]
    Io(#[from] io::Error),
    /// The peer did not finish in time.
    #[error("timed out")]
    Timeout,
    /// Not a Lifeline TCP handshake (bad magic, version or class).
    #[error("not a lifeline handshake")]
    Garbage,
    /// The claimed rank is not in the address book, is this node, or names another target.
    #[error("claimed rank {0} is unknown here")]
    UnknownRank(Rank),
    /// The claimed rank's address book entry has another IP than the connection.
    #[error("rank {rank} must connect from {expected}, not {got}")]
    AddressMismatch {
        /// The claimed rank.
        rank: Rank,
        /// Its IP in the address book.
        expected: IpAddr,
        /// The connection's IP.
        got: IpAddr,
    },
    /// The peer's MAC is wrong: it does not hold the cluster key.
    #[error("the peer failed to prove the cluster key")]
    BadMac,
    /// The acceptor answered that its own connection wins (not a failure).
    #[error("duplicate connection (the peer's own dial wins)")]
    Duplicate,
    /// The acceptor refused us.
    #[error("refused by the peer")]
    Refused,
    /// The acceptor answered that this rank was removed from the cluster (fenced).
    #[error("this rank was removed from the cluster (epoch {epoch})")]
    Removed {
        /// The acceptor's failure epoch.
        epoch: u64,
    },
}

/// An authenticated HELLO.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hello {
    /// The dialer's rank.
    pub from: Rank,
    /// The acceptor's rank, as the dialer believes.
    pub to: Rank,
    /// The connection's traffic class.
    pub class: Class,
    nonce: [u8; 32],
}

fn class_byte(c: Class) -> u8 {
    match c {
        Class::Control => 0,
        Class::Data => 1,
    }
}

impl Hello {
    fn encode(&self) -> [u8; HELLO_LEN] {
        let mut b = [0u8; HELLO_LEN];
        b[..4].copy_from_slice(&MAGIC);
        b[4] = VERSION;
        b[5] = class_byte(self.class);
        b[6..10].copy_from_slice(&self.from.0.to_be_bytes());
        b[10..14].copy_from_slice(&self.to.0.to_be_bytes());
        b[14..46].copy_from_slice(&self.nonce);
        b
    }

    fn decode(b: &[u8; HELLO_LEN]) -> Result<Self, HandshakeError> {
        if b[..4] != MAGIC || b[4] != VERSION {
            return Err(HandshakeError::Garbage);
        }
        let class = match b[5] {
            0 => Class::Control,
            1 => Class::Data,
            _ => return Err(HandshakeError::Garbage),
        };
        let u32_at = |i: usize| u32::from_be_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let mut nonce = [0u8; 32];
        nonce.copy_from_slice(&b[14..46]);
        Ok(Self {
            from: Rank(u32_at(6)),
            to: Rank(u32_at(10)),
            class,
            nonce,
        })
    }
}

fn nonce() -> io::Result<[u8; 32]> {
    let mut n = [0u8; 32];
    getrandom::fill(&mut n).map_err(|e| io::Error::other(e.to_string()))?;
    Ok(n)
}

fn mac(
    key: &ClusterKey,
    label: &[u8; 8],
    hello: &[u8; HELLO_LEN],
    acceptor: Rank,
    nonce_a: &[u8; 32],
) -> blake3::Hash {
    let mut h = blake3::Hasher::new_keyed(&key.0);
    h.update(label);
    h.update(hello);
    h.update(&acceptor.0.to_be_bytes());
    h.update(nonce_a);
    h.finalize()
}

/// The dialer's side: proves the key as `me` to `to` on a connection of `class`, and checks
/// that the acceptor is `to` and holds the key. `Ok` means the acceptor installed the
/// connection; [`HandshakeError::Duplicate`] means its own connection wins.
pub async fn dial<S: AsyncRead + AsyncWrite + Unpin>(
    s: &mut S,
    key: &ClusterKey,
    me: Rank,
    to: Rank,
    class: Class,
) -> Result<(), HandshakeError> {
    let hello = Hello {
        from: me,
        to,
        class,
        nonce: nonce()?,
    }
    .encode();
    s.write_all(&hello).await?;
    s.flush().await?;
    let mut ch = [0u8; CHALLENGE_LEN];
    s.read_exact(&mut ch).await?;
    if ch[..4] != MAGIC {
        return Err(HandshakeError::Garbage);
    }
    let acceptor = Rank(u32::from_be_bytes([ch[4], ch[5], ch[6], ch[7]]));
    if acceptor != to {
        return Err(HandshakeError::UnknownRank(acceptor));
    }
    let mut nonce_a = [0u8; 32];
    nonce_a.copy_from_slice(&ch[8..40]);
    let mut mac_a = [0u8; 32];
    mac_a.copy_from_slice(&ch[40..72]);
    // `blake3::Hash` equality is constant-time.
    if blake3::Hash::from_bytes(mac_a) != mac(key, LABEL_ACCEPTOR, &hello, acceptor, &nonce_a) {
        return Err(HandshakeError::BadMac);
    }
    let proof = mac(key, LABEL_DIALER, &hello, acceptor, &nonce_a);
    s.write_all(proof.as_bytes()).await?;
    s.flush().await?;
    let mut verdict = [0u8; 1];
    s.read_exact(&mut verdict).await?;
    match verdict[0] {
        0 => Ok(()),
        1 => Err(HandshakeError::Duplicate),
        3 => {
            let mut epoch = [0u8; 8];
            s.read_exact(&mut epoch).await?;
            Err(HandshakeError::Removed {
                epoch: u64::from_be_bytes(epoch),
            })
        }
        _ => Err(HandshakeError::Refused),
    }
}

/// The acceptor's side, up to (not including) the RESULT byte: checks the dialer's claim
/// against the address book and `peer_ip`, and its proof of the key. The caller decides the
/// [`Verdict`] and writes it with [`finish`].
pub async fn accept<S: AsyncRead + AsyncWrite + Unpin>(
    s: &mut S,
    key: &ClusterKey,
    me: Rank,
    book: &AddressBook,
    peer_ip: IpAddr,
) -> Result<Hello, HandshakeError> {
    let mut raw = [0u8; HELLO_LEN];
    s.read_exact(&mut raw).await?;
    let hello = Hello::decode(&raw)?;
    if hello.to != me || hello.from == me {
        return Err(HandshakeError::UnknownRank(hello.from));
    }
    let Some(addr) = book.get(hello.from) else {
        return Err(HandshakeError::UnknownRank(hello.from));
    };
    if !same_ip(addr.ip(), peer_ip) {
        return Err(HandshakeError::AddressMismatch {
            rank: hello.from,
            expected: addr.ip(),
            got: peer_ip,
        });
    }
    let nonce_a = nonce()?;
    let mut ch = [0u8; CHALLENGE_LEN];
    ch[..4].copy_from_slice(&MAGIC);
    ch[4..8].copy_from_slice(&me.0.to_be_bytes());
    ch[8..40].copy_from_slice(&nonce_a);
    ch[40..72].copy_from_slice(mac(key, LABEL_ACCEPTOR, &raw, me, &nonce_a).as_bytes());
    s.write_all(&ch).await?;
    s.flush().await?;
    let mut proof = [0u8; 32];
    s.read_exact(&mut proof).await?;
    if blake3::Hash::from_bytes(proof) != mac(key, LABEL_DIALER, &raw, me, &nonce_a) {
        return Err(HandshakeError::BadMac);
    }
    Ok(hello)
}

/// Writes the acceptor's verdict.
pub async fn finish<S: AsyncWrite + Unpin>(s: &mut S, v: Verdict) -> io::Result<()> {
    let (b, n) = v.encode();
    s.write_all(&b[..n]).await?;
    s.flush().await
}

/// IP equality that treats an IPv4-mapped IPv6 address as its IPv4 address.
fn same_ip(a: IpAddr, b: IpAddr) -> bool {
    let canon = |ip: IpAddr| match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    };
    canon(a) == canon(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn book() -> AddressBook {
        AddressBook::parse("0 127.0.0.1:1\n1 127.0.0.1:2\n2 10.0.0.9:3").unwrap()
    }

    async fn run(
        dial_key: &[u8],
        from: Rank,
        to: Rank,
        ip: &str,
    ) -> (Result<(), HandshakeError>, Result<Hello, HandshakeError>) {
        let (mut a, b) = tokio::io::duplex(1024);
        let key = ClusterKey::from_secret(b"k").unwrap();
        let dkey = ClusterKey::from_secret(dial_key).unwrap();
        let ip: IpAddr = ip.parse().unwrap();
        let book = book();
        let acc = async move {
            let mut b = b;
            let r = accept(&mut b, &key, Rank(1), &book, ip).await;
            match &r {
                Ok(_) => finish(&mut b, Verdict::Accept).await.unwrap(),
                Err(_) => drop(b),
            }
            r
        };
        // Each side drops its end when done, as a real socket task does.
        let dialer = async move { dial(&mut a, &dkey, from, to, Class::Data).await };
        tokio::join!(dialer, acc)
    }

    #[tokio::test]
    async fn mutual_proof() {
        let (d, a) = run(b"k", Rank(0), Rank(1), "127.0.0.1").await;
        assert!(d.is_ok(), "{d:?}");
        let h = a.unwrap();
        assert_eq!((h.from, h.to, h.class), (Rank(0), Rank(1), Class::Data));
    }

    #[tokio::test]
    async fn refusals() {
        // Wrong key: the dialer sees the acceptor's MAC fail and gives up; the acceptor sees EOF.
        let (d, a) = run(b"other", Rank(0), Rank(1), "127.0.0.1").await;
        assert!(matches!(d, Err(HandshakeError::BadMac)), "{d:?}");
        assert!(a.is_err());
        // Claimed rank from the wrong IP.
        let (_, a) = run(b"k", Rank(2), Rank(1), "127.0.0.1").await;
        assert!(matches!(a, Err(HandshakeError::AddressMismatch { .. })));
        // Unknown rank, wrong target.
        let (_, a) = run(b"k", Rank(9), Rank(1), "127.0.0.1").await;
        assert!(matches!(a, Err(HandshakeError::UnknownRank(Rank(9)))));
        let (_, a) = run(b"k", Rank(0), Rank(2), "127.0.0.1").await;
        assert!(matches!(a, Err(HandshakeError::UnknownRank(_))));
    }

    #[tokio::test]
    async fn a_removed_dialer_is_told_its_epoch() {
        let (mut a, b) = tokio::io::duplex(1024);
        let key = ClusterKey::from_secret(b"k").unwrap();
        let dkey = key.clone();
        let acc = async move {
            let mut b = b;
            let h = accept(&mut b, &key, Rank(1), &book(), "127.0.0.1".parse().unwrap()).await;
            finish(
                &mut b,
                Verdict::Removed {
                    epoch: 0x0102_0304_0506_0708,
                },
            )
            .await
            .unwrap();
            h
        };
        let dialer = async move { dial(&mut a, &dkey, Rank(0), Rank(1), Class::Control).await };
        let (d, a) = tokio::join!(dialer, acc);
        assert!(a.is_ok(), "{a:?}");
        assert!(
            matches!(
                d,
                Err(HandshakeError::Removed {
                    epoch: 0x0102_0304_0506_0708
                })
            ),
            "{d:?}"
        );
    }

    #[tokio::test]
    async fn garbage_is_refused() {
        let (mut a, mut b) = tokio::io::duplex(1024);
        a.write_all(&[0x55; HELLO_LEN]).await.unwrap();
        let key = ClusterKey::from_secret(b"k").unwrap();
        let r = accept(&mut b, &key, Rank(1), &book(), "127.0.0.1".parse().unwrap()).await;
        assert!(matches!(r, Err(HandshakeError::Garbage)));
    }
}
