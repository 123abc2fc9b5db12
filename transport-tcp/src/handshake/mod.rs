//! The connection handshake: mutual proof of the cluster key over fresh nonces, the claimed
//! rank checked against the address book, and the traffic class declared. No frame is read
//! from a connection before its handshake succeeds.
//!
//! ```text
//! dialer → acceptor  HELLO      "LLT1" version:u8 class:u8 from:u32 to:u32 nonce_d[32]
//!                               span:u32 port:u16                                     (52 B)
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
//! **Ranks past the book** (version 2). The HELLO announces the dialer's span (one past the
//! highest rank it knows) and the port it listens on (0: none announced). A launched rank that
//! starts late holds only its peers file, while joiners were admitted past it; the joiner the
//! tree made its parent must still get in. So an acceptor whose book lacks the claimed rank
//! accepts it when it lies past the book's given ranks, below the announced span, and within
//! a bound ([`PastBook`]: `join.max_per_view × 64` ranks, as far as the core's catch-up on an
//! adoption notice believes a larger span), it announced a port, and it proves the key; its
//! address (the connection's IP, the announced port) is then learned into the book
//! (`AddressBook::learn`, in `lifeline-transport-common`). A stranger without
//! the key learns nothing and adds nothing; one with it cannot grow the book past the bound.
//! A version-1 HELLO is refused as [`HandshakeError::Version`] (counted in
//! `handshakes_refused`, and in `handshakes_old_version`) before anything else is read.
//!
//! A process that is not a member yet (a joiner: it has no rank) opens its connection with
//! the [join preamble](join) instead, on the same listener; the first four bytes tell which.
//!
//! What it does not do: encrypt or authenticate the frames that follow. An on-path attacker
//! can still inject into an established connection; use the QUIC adapter (mutual TLS) where
//! that matters.

use std::io;
use std::net::{IpAddr, SocketAddr};

use lifeline_core::tree::Rank;
use lifeline_core::Class;

use crate::key::ClusterKey;

/// Handshake magic: "Lifeline TCP, format 1".
pub const MAGIC: [u8; 4] = *b"LLT1";
/// Handshake version (2: the HELLO announces the dialer's span and listening port).
pub const VERSION: u8 = 2;
/// Length of HELLO.
pub const HELLO_LEN: usize = 52;
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
    /// The RESULT bytes (the first `n` of the array): one byte, then the epoch for
    /// [`Verdict::Removed`].
    pub fn encode(self) -> ([u8; 9], usize) {
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
    /// Not a Lifeline TCP handshake (bad magic or class).
    #[error("not a lifeline handshake")]
    Garbage,
    /// A Lifeline TCP HELLO of another version than [`VERSION`] (an older build): refused,
    /// nothing past its version byte read.
    #[error("handshake version {0} is not supported (this build speaks version {VERSION})")]
    Version(u8),
    /// The claimed rank is past this node's address book and beyond what it may learn (not
    /// below the span the dialer announced, no port announced, or past [`PastBook`]'s bound).
    #[error(
        "rank {rank} is past the address book and cannot be learned (span {span}, port {port})"
    )]
    PastBook {
        /// The claimed rank.
        rank: Rank,
        /// The span the dialer announced.
        span: u32,
        /// The port the dialer announced.
        port: u16,
    },
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
    /// A join request or answer longer than its bound.
    #[error("join message of {0} bytes is over its bound")]
    TooLong(usize),
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
    /// What the dialer announced about itself (version 2).
    pub listen: Listen,
    nonce: [u8; 32],
}

/// What a HELLO announces about its dialer, so an acceptor whose book lacks it can learn it
/// (see the module documentation).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Listen {
    /// One past the highest rank the dialer knows (its address book's span); 0: not announced.
    pub span: u32,
    /// The port the dialer listens on, at the IP it connects from; 0: not announced.
    pub port: u16,
}

/// The bound on ranks an acceptor learns from HELLOs: a rank past the book is learned only if
/// it is at least `given` (one past the highest rank the book was given, not learned) and below
/// `given + bound`, below the span it announced, and it announced a port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PastBook {
    /// One past the highest rank given to the book (learned ranks not counted).
    pub given: u32,
    /// How many ranks past `given` may be learned (`join.max_per_view × 64` in the adapter).
    pub bound: u32,
}

impl PastBook {
    /// The core's bound on a span caught up from an adoption notice, for `max_per_view`
    /// (`join.max_per_view`): the adapter learns no rank the core would not take into its span.
    pub fn bound_for(max_per_view: u32) -> u32 {
        max_per_view.saturating_mul(64)
    }

    /// Whether `hello`'s dialer, absent from the book, may be learned: `Ok` or
    /// [`HandshakeError::PastBook`].
    pub fn check(&self, hello: &Hello) -> Result<(), HandshakeError> {
        let r = hello.from.0;
        let ok = r >= self.given
            && u64::from(r) < u64::from(self.given) + u64::from(self.bound)
            && r < hello.listen.span
            && hello.listen.port != 0;
        if ok {
            Ok(())
        } else {
            Err(HandshakeError::PastBook {
                rank: hello.from,
                span: hello.listen.span,
                port: hello.listen.port,
            })
        }
    }
}

pub mod join;
#[cfg(feature = "runtime")]
pub(crate) mod stream;
#[cfg(feature = "runtime")]
pub use stream::{accept, accept_after_magic, dial, dial_announcing, finish};

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
        b[46..50].copy_from_slice(&self.listen.span.to_be_bytes());
        b[50..52].copy_from_slice(&self.listen.port.to_be_bytes());
        b
    }

    fn decode(b: &[u8; HELLO_LEN]) -> Result<Self, HandshakeError> {
        if b[..4] != MAGIC {
            return Err(HandshakeError::Garbage);
        }
        check_version(b[4])?;
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
            listen: Listen {
                span: u32_at(46),
                port: u16::from_be_bytes([b[50], b[51]]),
            },
            nonce,
        })
    }
}

impl Hello {
    /// Where this HELLO's dialer listens, as an acceptor learns it: the connection's IP
    /// `peer_ip` (an IPv4-mapped IPv6 address as IPv4: the dialer is checked against it, and
    /// later dialled at it) and the announced port.
    pub fn listen_addr(&self, peer_ip: IpAddr) -> SocketAddr {
        let ip = match peer_ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(peer_ip, IpAddr::V4),
            v4 => v4,
        };
        SocketAddr::new(ip, self.listen.port)
    }
}

/// Checks a HELLO's version byte (its fifth byte, after [`MAGIC`]): read it first, so a HELLO
/// of another length (an older build's) is refused at once as [`HandshakeError::Version`]
/// instead of waiting for bytes that never come.
pub fn check_version(v: u8) -> Result<(), HandshakeError> {
    if v == VERSION {
        Ok(())
    } else {
        Err(HandshakeError::Version(v))
    }
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

/// The dialer's side of one handshake, without I/O: send [`Dialer::hello`], answer the
/// acceptor's CHALLENGE with [`Dialer::on_challenge`]'s PROOF, then read the RESULT with
/// [`decode_verdict`]. The nonce must be fresh (random) for every handshake.
#[derive(Clone, Debug)]
pub struct Dialer {
    key: ClusterKey,
    to: Rank,
    hello: [u8; HELLO_LEN],
}

impl Dialer {
    /// A handshake proving `key` as `me` to `to`, for a connection of `class`, announcing
    /// nothing ([`Listen::default`]): an acceptor that lacks `me` in its book refuses it.
    pub fn new(key: &ClusterKey, me: Rank, to: Rank, class: Class, nonce: [u8; 32]) -> Self {
        Self::announcing(key, me, to, class, Listen::default(), nonce)
    }

    /// [`Dialer::new`], announcing `listen` (this rank's span and listening port), so an
    /// acceptor whose book lacks `me` can learn it.
    pub fn announcing(
        key: &ClusterKey,
        me: Rank,
        to: Rank,
        class: Class,
        listen: Listen,
        nonce: [u8; 32],
    ) -> Self {
        let hello = Hello {
            from: me,
            to,
            class,
            listen,
            nonce,
        }
        .encode();
        Self {
            key: key.clone(),
            to,
            hello,
        }
    }

    /// The HELLO to send first.
    pub fn hello(&self) -> &[u8; HELLO_LEN] {
        &self.hello
    }

    /// Checks the acceptor's CHALLENGE (it must be `to` and prove the key) and returns the
    /// PROOF to send. On an error nothing may be sent: close the connection.
    pub fn on_challenge(&self, ch: &[u8; CHALLENGE_LEN]) -> Result<[u8; 32], HandshakeError> {
        if ch[..4] != MAGIC {
            return Err(HandshakeError::Garbage);
        }
        let acceptor = Rank(u32::from_be_bytes([ch[4], ch[5], ch[6], ch[7]]));
        if acceptor != self.to {
            return Err(HandshakeError::UnknownRank(acceptor));
        }
        let mut nonce_a = [0u8; 32];
        nonce_a.copy_from_slice(&ch[8..40]);
        let mut mac_a = [0u8; 32];
        mac_a.copy_from_slice(&ch[40..72]);
        // `blake3::Hash` equality is constant-time.
        let expected = mac(&self.key, LABEL_ACCEPTOR, &self.hello, acceptor, &nonce_a);
        if blake3::Hash::from_bytes(mac_a) != expected {
            return Err(HandshakeError::BadMac);
        }
        Ok(*mac(&self.key, LABEL_DIALER, &self.hello, acceptor, &nonce_a).as_bytes())
    }
}

/// The RESULT at the start of `b`: `Ok(None)` while more bytes are needed (at most
/// [`RESULT_MAX_LEN`]), else the verdict and how many bytes it took. An unknown RESULT byte
/// reads as [`Verdict::Refuse`], as every earlier version did.
pub fn decode_verdict(b: &[u8]) -> Option<(Verdict, usize)> {
    let first = *b.first()?;
    Some(match first {
        0 => (Verdict::Accept, 1),
        1 => (Verdict::Duplicate, 1),
        3 => {
            let epoch: [u8; 8] = b.get(1..9)?.try_into().ok()?;
            (
                Verdict::Removed {
                    epoch: u64::from_be_bytes(epoch),
                },
                9,
            )
        }
        _ => (Verdict::Refuse, 1),
    })
}

/// The longest RESULT ([`Verdict::Removed`]: the byte and the epoch).
pub const RESULT_MAX_LEN: usize = 9;

/// The acceptor's side of one handshake, without I/O: [`Acceptor::on_hello`] checks the HELLO
/// and gives the CHALLENGE to send; [`Acceptor::on_proof`] checks the dialer's PROOF; the
/// caller then decides the [`Verdict`] and sends [`Verdict::encode`]'s bytes.
#[derive(Clone, Debug)]
pub struct Acceptor {
    key: ClusterKey,
    me: Rank,
    raw: [u8; HELLO_LEN],
    nonce_a: [u8; 32],
    hello: Hello,
}

impl Acceptor {
    /// Checks a HELLO received by `me`: well formed, of this [`VERSION`], addressed to `me`,
    /// from another rank, and `from_ok(&hello)` (the caller's address-book and source-IP check,
    /// or for a rank past the book [`PastBook::check`]; its error is returned as is). `nonce_a`
    /// must be fresh (random). Returns the state for the PROOF and the CHALLENGE to send.
    pub fn on_hello(
        key: &ClusterKey,
        me: Rank,
        raw: &[u8; HELLO_LEN],
        nonce_a: [u8; 32],
        from_ok: impl FnOnce(&Hello) -> Result<(), HandshakeError>,
    ) -> Result<(Self, [u8; CHALLENGE_LEN]), HandshakeError> {
        let hello = Hello::decode(raw)?;
        if hello.to != me || hello.from == me {
            return Err(HandshakeError::UnknownRank(hello.from));
        }
        from_ok(&hello)?;
        let mut ch = [0u8; CHALLENGE_LEN];
        ch[..4].copy_from_slice(&MAGIC);
        ch[4..8].copy_from_slice(&me.0.to_be_bytes());
        ch[8..40].copy_from_slice(&nonce_a);
        ch[40..72].copy_from_slice(mac(key, LABEL_ACCEPTOR, raw, me, &nonce_a).as_bytes());
        let state = Self {
            key: key.clone(),
            me,
            raw: *raw,
            nonce_a,
            hello,
        };
        Ok((state, ch))
    }

    /// The HELLO this handshake checked.
    pub fn hello(&self) -> Hello {
        self.hello
    }

    /// Checks the dialer's PROOF of the key; on success the dialer is authenticated as
    /// [`Hello::from`].
    pub fn on_proof(&self, proof: &[u8; 32]) -> Result<Hello, HandshakeError> {
        let expected = mac(&self.key, LABEL_DIALER, &self.raw, self.me, &self.nonce_a);
        if blake3::Hash::from_bytes(*proof) != expected {
            return Err(HandshakeError::BadMac);
        }
        Ok(self.hello)
    }
}

/// IP equality that treats an IPv4-mapped IPv6 address as its IPv4 address.
pub fn same_ip(a: IpAddr, b: IpAddr) -> bool {
    let canon = |ip: IpAddr| match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    };
    canon(a) == canon(b)
}

#[cfg(all(test, feature = "runtime"))]
mod tests;

/// The sans-IO steps alone (these run without the `runtime` feature too).
#[cfg(test)]
mod steps_tests {
    use super::*;

    fn key(s: &[u8]) -> ClusterKey {
        ClusterKey::from_secret(s).unwrap()
    }

    /// Runs the steps between a dialer holding `dk` and an acceptor holding `ak`.
    fn run(dk: &[u8], ak: &[u8]) -> Result<Hello, HandshakeError> {
        let d = Dialer::new(&key(dk), Rank(0), Rank(1), Class::Data, [7; 32]);
        let (acc, ch) = Acceptor::on_hello(&key(ak), Rank(1), d.hello(), [9; 32], |_| Ok(()))?;
        let proof = d.on_challenge(&ch)?;
        acc.on_proof(&proof)
    }

    #[test]
    fn both_sides_prove_the_key() {
        let h = run(b"k", b"k").unwrap();
        assert_eq!((h.from, h.to, h.class), (Rank(0), Rank(1), Class::Data));
        assert!(matches!(run(b"k", b"other"), Err(HandshakeError::BadMac)));
    }

    #[test]
    fn the_acceptor_checks_the_claim_and_the_dialer_the_acceptor() {
        let k = key(b"k");
        let d = Dialer::new(&k, Rank(0), Rank(1), Class::Control, [1; 32]);
        // Addressed to another rank, or claiming the acceptor's own rank.
        let r = Acceptor::on_hello(&k, Rank(2), d.hello(), [2; 32], |_| Ok(()));
        assert!(matches!(r, Err(HandshakeError::UnknownRank(Rank(0)))));
        let me = Dialer::new(&k, Rank(1), Rank(1), Class::Control, [1; 32]);
        let r = Acceptor::on_hello(&k, Rank(1), me.hello(), [2; 32], |_| Ok(()));
        assert!(matches!(r, Err(HandshakeError::UnknownRank(Rank(1)))));
        // The caller's check is returned as is.
        let r = Acceptor::on_hello(&k, Rank(1), d.hello(), [2; 32], |h| {
            Err(HandshakeError::UnknownRank(h.from))
        });
        assert!(matches!(r, Err(HandshakeError::UnknownRank(Rank(0)))));
        // Garbage, and a challenge from another rank than the one dialled.
        let r = Acceptor::on_hello(&k, Rank(1), &[0x55; HELLO_LEN], [2; 32], |_| Ok(()));
        assert!(matches!(r, Err(HandshakeError::Garbage)));
        let (_, mut ch) = Acceptor::on_hello(&k, Rank(1), d.hello(), [2; 32], |_| Ok(())).unwrap();
        ch[4..8].copy_from_slice(&5u32.to_be_bytes());
        assert!(matches!(
            d.on_challenge(&ch),
            Err(HandshakeError::UnknownRank(Rank(5)))
        ));
        ch[0] = b'X';
        assert!(matches!(d.on_challenge(&ch), Err(HandshakeError::Garbage)));
    }

    #[test]
    fn the_past_book_bound_and_the_version_byte() {
        let k = key(b"k");
        let past = PastBook {
            given: 10,
            bound: 5,
        };
        let hello = |from: u32, span: u32, port: u16| {
            let d = Dialer::announcing(
                &k,
                Rank(from),
                Rank(1),
                Class::Control,
                Listen { span, port },
                [3; 32],
            );
            Hello::decode(d.hello()).unwrap()
        };
        assert!(past.check(&hello(10, 11, 1)).is_ok());
        assert!(past.check(&hello(14, 20, 1)).is_ok());
        for (from, span, port) in [(9, 20, 1), (15, 20, 1), (12, 12, 1), (12, 13, 0)] {
            assert!(
                matches!(
                    past.check(&hello(from, span, port)),
                    Err(HandshakeError::PastBook { .. })
                ),
                "{from} {span} {port}"
            );
        }
        // Near the top of the rank space: no overflow.
        let top = PastBook {
            given: u32::MAX - 1,
            bound: u32::MAX,
        };
        assert!(top.check(&hello(u32::MAX - 1, u32::MAX, 1)).is_ok());
        assert_eq!(PastBook::bound_for(1024), 65_536);
        assert_eq!(PastBook::bound_for(u32::MAX), u32::MAX);
        // Every version but this one is refused as such; the magic is checked first.
        let mut raw = hello(10, 11, 1).encode();
        for v in [0u8, 1, 3, 255] {
            raw[4] = v;
            assert!(matches!(Hello::decode(&raw), Err(HandshakeError::Version(x)) if x == v));
        }
        raw[0] = b'X';
        assert!(matches!(Hello::decode(&raw), Err(HandshakeError::Garbage)));
    }

    #[test]
    fn a_replayed_proof_fails_against_a_fresh_nonce() {
        let k = key(b"k");
        let d = Dialer::new(&k, Rank(0), Rank(1), Class::Data, [1; 32]);
        let (a1, ch1) = Acceptor::on_hello(&k, Rank(1), d.hello(), [2; 32], |_| Ok(())).unwrap();
        let proof = d.on_challenge(&ch1).unwrap();
        assert!(a1.on_proof(&proof).is_ok());
        let (a2, _) = Acceptor::on_hello(&k, Rank(1), d.hello(), [3; 32], |_| Ok(())).unwrap();
        assert!(matches!(a2.on_proof(&proof), Err(HandshakeError::BadMac)));
    }

    #[test]
    fn verdicts_round_trip_and_wait_for_their_bytes() {
        for v in [
            Verdict::Accept,
            Verdict::Duplicate,
            Verdict::Refuse,
            Verdict::Removed {
                epoch: 0x0102_0304_0506_0708,
            },
        ] {
            let (b, n) = v.encode();
            assert_eq!(decode_verdict(&b[..n]), Some((v, n)));
            assert_eq!(
                decode_verdict(&b[..n - 1]),
                None,
                "{v:?} needs all its bytes"
            );
        }
        assert_eq!(decode_verdict(&[77]), Some((Verdict::Refuse, 1)));
    }
}
