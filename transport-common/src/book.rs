//! [`AddressBook`]: every rank's listening address, supplied by the embedder and shared by the
//! driver (which dials by it) and the connector (which checks peers against it).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::net::SocketAddr;

use bytes::{BufMut, Bytes, BytesMut};
use lifeline_core::tree::Rank;

/// Every rank's listening address: `Rank → SocketAddr`, supplied by the embedder.
///
/// A runtime fills it from whatever it already uses to find its processes: a PMIx key-value
/// exchange (each daemon `put`s its `host:port` under its rank, then `fence` + `get`), a
/// rendezvous file written by a launcher, or a peers file as `lifeline node` reads
/// ([`AddressBook::parse`]: one `rank addr` per line). The adapter listens on its own entry,
/// dials the others' entries, and (during the TCP handshake, or after the QUIC one) checks
/// that a peer claiming rank `r` connects from `r`'s address. The book must cover every rank the node may talk to; a rank
/// missing from it is unreachable (reported to the core as a lost link). Ranks admitted by the
/// join protocol are added by the driver itself, from the admitting view's
/// [`Joined`](lifeline_core::MembershipEvent::Joined) event, before it dials them (see
/// [`crate::join`]); ranks added by a grow of the embedder's own go in with
/// [`Handle::add_peers`](crate::Handle::add_peers) or [`Handle::grow`](crate::Handle::grow). An
/// entry never changes once given.
///
/// An adapter may also **learn** a rank past the book from an authenticated peer
/// ([`AddressBook::learn`]: the TCP handshake's HELLO announces the dialer's listening port): a
/// launched rank that starts late knows only its peers file, and a joiner the tree made its
/// parent must still reach it. Learned entries are marked as such: [`AddressBook::given_span`]
/// leaves them out, so the bound on what may be learned ("so far past the given ranks") does
/// not move with what was learned.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AddressBook {
    addrs: BTreeMap<Rank, SocketAddr>,
    /// Ranks learned from peers rather than given (a later [`AddressBook::add`] of the same
    /// entry makes it given).
    learned: BTreeSet<Rank>,
}

/// Why a peers file was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BookError {
    /// A line is not `rank addr`.
    #[error("line {line}: expected `rank addr` (e.g. `3 127.0.0.1:7003`), got {text:?}")]
    Syntax {
        /// 1-based line number.
        line: usize,
        /// The line.
        text: String,
    },
    /// A rank appears twice.
    #[error("line {line}: rank {rank} is listed twice")]
    Duplicate {
        /// 1-based line number.
        line: usize,
        /// The rank.
        rank: Rank,
    },
}

/// Why an encoded book ([`AddressBook::decode`]) was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BookDecodeError {
    /// Not this encoding (another magic: another version).
    #[error("not an encoded address book (magic {0:02x?})")]
    Magic([u8; 4]),
    /// The bytes end inside an entry.
    #[error("encoded address book truncated")]
    Truncated,
    /// More entries than the caller allows.
    #[error("{count} address book entries, over the limit of {max}")]
    TooMany {
        /// Entries announced.
        count: u64,
        /// The caller's limit.
        max: usize,
    },
    /// Ranks not strictly ascending (a duplicate), or bytes after the last entry.
    #[error("encoded address book is not canonical (duplicate rank or trailing bytes)")]
    NotCanonical,
    /// An address that is not `ip:port` text.
    #[error("rank {0}: address is not ip:port")]
    Addr(Rank),
}

/// The encoded book's first bytes: "Lifeline Book, format 1".
pub const BOOK_MAGIC: [u8; 4] = *b"LLB1";

/// Longest address text an encoded entry carries (an IPv6 address with a scope id and a port
/// is under 64 bytes).
const MAX_ADDR_TEXT: usize = 64;

impl AddressBook {
    /// An empty book.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets `rank`'s address (replacing any earlier one), as a given entry.
    pub fn insert(&mut self, rank: Rank, addr: SocketAddr) {
        self.addrs.insert(rank, addr);
        self.learned.remove(&rank);
    }

    /// `rank`'s address.
    pub fn get(&self, rank: Rank) -> Option<SocketAddr> {
        self.addrs.get(&rank).copied()
    }

    /// Entries in rank order.
    pub fn iter(&self) -> impl Iterator<Item = (Rank, SocketAddr)> + '_ {
        self.addrs.iter().map(|(r, a)| (*r, *a))
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.addrs.len()
    }

    /// Whether the book is empty.
    pub fn is_empty(&self) -> bool {
        self.addrs.is_empty()
    }

    /// One past the highest rank listed (the span a cluster of these ranks needs).
    pub fn span(&self) -> u32 {
        self.addrs.keys().next_back().map_or(0, |r| r.0 + 1)
    }

    /// One past the highest rank *given* to the book (learned entries left out): the base of
    /// the bound on ranks an adapter may learn.
    pub fn given_span(&self) -> u32 {
        self.addrs
            .keys()
            .rev()
            .find(|r| !self.learned.contains(r))
            .map_or(0, |r| r.0 + 1)
    }

    /// Whether `rank`'s entry was learned from a peer ([`AddressBook::learn`]) and not given
    /// since.
    pub fn is_learned(&self, rank: Rank) -> bool {
        self.learned.contains(&rank)
    }

    /// Number of learned entries.
    pub fn learned_len(&self) -> usize {
        self.learned.len()
    }

    /// Adds `rank` at `addr` as a *learned* entry (an authenticated peer said where it
    /// listens; the caller checked the bound): as [`AddressBook::add`], and an entry added here
    /// is marked learned.
    pub fn learn(&mut self, rank: Rank, addr: SocketAddr) -> Result<bool, SocketAddr> {
        let added = self.add(rank, addr)?;
        if added {
            self.learned.insert(rank);
        }
        Ok(added)
    }

    /// Adds `rank` at `addr` unless the book already has it elsewhere: `Ok(true)` when added,
    /// `Ok(false)` when it was there already at this address, `Err(known)` (and nothing changes)
    /// when it is known at another address (an entry never changes once given). A learned
    /// entry added again here becomes a given one.
    pub fn add(&mut self, rank: Rank, addr: SocketAddr) -> Result<bool, SocketAddr> {
        match self.addrs.get(&rank) {
            Some(known) if *known == addr => {
                self.learned.remove(&rank);
                Ok(false)
            }
            Some(known) => Err(*known),
            None => {
                self.addrs.insert(rank, addr);
                Ok(true)
            }
        }
    }

    /// The book in a bounded, versioned binary form (what a contact sends a joiner with its
    /// admission): [`BOOK_MAGIC`], the entry count (u32), then per entry in rank order the
    /// rank (u32), the address text's length (u8) and the text (`ip:port`). Big-endian.
    pub fn encode(&self) -> Bytes {
        let mut b = BytesMut::with_capacity(8 + self.addrs.len() * 28);
        b.put_slice(&BOOK_MAGIC);
        b.put_u32(self.addrs.len() as u32);
        for (r, a) in &self.addrs {
            let text = a.to_string();
            b.put_u32(r.0);
            b.put_u8(text.len() as u8);
            b.put_slice(text.as_bytes());
        }
        b.freeze()
    }

    /// Decodes [`Self::encode`]'s form, refusing more than `max_entries` entries (checked
    /// before anything is allocated for them), duplicates, trailing bytes and addresses that
    /// do not parse. Never panics.
    pub fn decode(bytes: &[u8], max_entries: usize) -> Result<Self, BookDecodeError> {
        let (magic, mut rest) = bytes
            .split_first_chunk::<4>()
            .ok_or(BookDecodeError::Truncated)?;
        if *magic != BOOK_MAGIC {
            return Err(BookDecodeError::Magic(*magic));
        }
        let (count, r) = rest
            .split_first_chunk::<4>()
            .ok_or(BookDecodeError::Truncated)?;
        rest = r;
        let count = u32::from_be_bytes(*count) as u64;
        // Every entry takes at least 5 bytes: a count the bytes cannot hold is truncated.
        if count > max_entries as u64 {
            return Err(BookDecodeError::TooMany {
                count,
                max: max_entries,
            });
        }
        if count * 5 > rest.len() as u64 {
            return Err(BookDecodeError::Truncated);
        }
        let mut book = Self::new();
        let mut last: Option<u32> = None;
        for _ in 0..count {
            let (r, after) = rest
                .split_first_chunk::<4>()
                .ok_or(BookDecodeError::Truncated)?;
            let rank = u32::from_be_bytes(*r);
            let (&len, after) = after.split_first().ok_or(BookDecodeError::Truncated)?;
            let len = usize::from(len);
            if len > MAX_ADDR_TEXT || after.len() < len {
                return Err(BookDecodeError::Truncated);
            }
            let (text, after) = after.split_at(len);
            rest = after;
            if last.is_some_and(|l| rank <= l) {
                return Err(BookDecodeError::NotCanonical);
            }
            last = Some(rank);
            let addr = std::str::from_utf8(text)
                .ok()
                .and_then(|t| t.parse::<SocketAddr>().ok())
                .ok_or(BookDecodeError::Addr(Rank(rank)))?;
            book.addrs.insert(Rank(rank), addr);
        }
        if !rest.is_empty() {
            return Err(BookDecodeError::NotCanonical);
        }
        Ok(book)
    }

    /// Parses a peers file: one `rank addr` per line (`addr` is `ip:port`, IPv6 as
    /// `[::1]:7000`); blank lines and text after `#` are ignored.
    ///
    /// ```text
    /// # rank  address
    /// 0 127.0.0.1:7000
    /// 1 127.0.0.1:7001
    /// ```
    pub fn parse(text: &str) -> Result<Self, BookError> {
        let mut book = Self::new();
        for (i, raw) in text.lines().enumerate() {
            let line = raw.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let syntax = || BookError::Syntax {
                line: i + 1,
                text: raw.to_string(),
            };
            let mut parts = line.split_whitespace();
            let (Some(r), Some(a), None) = (parts.next(), parts.next(), parts.next()) else {
                return Err(syntax());
            };
            let rank = Rank(r.parse().map_err(|_| syntax())?);
            let addr: SocketAddr = a.parse().map_err(|_| syntax())?;
            if book.addrs.insert(rank, addr).is_some() {
                return Err(BookError::Duplicate { line: i + 1, rank });
            }
        }
        Ok(book)
    }
}

impl fmt::Display for AddressBook {
    /// The peers-file form that [`AddressBook::parse`] reads back.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (r, a) in self.iter() {
            writeln!(f, "{} {a}", r.0)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peers_file_round_trips() {
        let b = AddressBook::parse("# c\n0 127.0.0.1:7000\n\n 2  [::1]:9 # x\n").unwrap();
        assert_eq!(b.len(), 2);
        assert_eq!(b.span(), 3);
        assert_eq!(b.get(Rank(2)), Some("[::1]:9".parse().unwrap()));
        assert_eq!(AddressBook::parse(&b.to_string()).unwrap(), b);
        assert!(matches!(
            AddressBook::parse("0 127.0.0.1:1\n0 127.0.0.1:2"),
            Err(BookError::Duplicate { line: 2, .. })
        ));
        assert!(matches!(
            AddressBook::parse("x 127.0.0.1:1"),
            Err(BookError::Syntax { line: 1, .. })
        ));
        assert!(AddressBook::parse("1 127.0.0.1").is_err());
        assert!(AddressBook::parse("1 127.0.0.1:5 7").is_err());
    }

    #[test]
    fn adds_never_move_a_rank() {
        let mut b = AddressBook::new();
        let a: SocketAddr = "127.0.0.1:7".parse().unwrap();
        let c: SocketAddr = "127.0.0.1:8".parse().unwrap();
        assert_eq!(b.add(Rank(3), a), Ok(true));
        assert_eq!(b.add(Rank(3), a), Ok(false));
        assert_eq!(b.add(Rank(3), c), Err(a));
        assert_eq!(b.get(Rank(3)), Some(a));
    }

    #[test]
    fn learned_entries_stay_out_of_the_given_span_until_given() {
        let mut b = AddressBook::parse(
            "0 127.0.0.1:1
5 127.0.0.1:6
",
        )
        .unwrap();
        let a: SocketAddr = "127.0.0.1:9".parse().unwrap();
        assert_eq!((b.span(), b.given_span()), (6, 6));
        assert_eq!(b.learn(Rank(9), a), Ok(true));
        assert!(b.is_learned(Rank(9)));
        assert_eq!((b.span(), b.given_span(), b.learned_len()), (10, 6, 1));
        // Learning never moves an entry, given or learned.
        assert_eq!(b.learn(Rank(9), "127.0.0.1:10".parse().unwrap()), Err(a));
        assert_eq!(b.learn(Rank(0), a), Err("127.0.0.1:1".parse().unwrap()));
        assert_eq!(b.learn(Rank(5), "127.0.0.1:6".parse().unwrap()), Ok(false));
        assert!(!b.is_learned(Rank(5)));
        // Given later (an admission): no longer learned.
        assert_eq!(b.add(Rank(9), a), Ok(false));
        assert_eq!((b.given_span(), b.learned_len()), (10, 0));
    }

    /// The binary form round-trips; every prefix, every flipped byte and trailing bytes are an
    /// error or another book, never a panic; the entry limit holds before any allocation.
    #[test]
    fn binary_form_round_trips_and_refuses_malformed_bytes() {
        let b = AddressBook::parse(
            "0 127.0.0.1:7000\n1 [::1]:9\n7 [fe80::1%2]:65535\n300 10.1.2.3:1\n",
        )
        .unwrap();
        let e = b.encode();
        assert_eq!(AddressBook::decode(&e, 4), Ok(b.clone()));
        assert_eq!(
            AddressBook::decode(&AddressBook::new().encode(), 0),
            Ok(AddressBook::new())
        );
        assert!(matches!(
            AddressBook::decode(&e, 3),
            Err(BookDecodeError::TooMany { count: 4, max: 3 })
        ));
        for cut in 0..e.len() {
            assert!(AddressBook::decode(&e[..cut], 10).is_err(), "prefix {cut}");
        }
        for i in 0..e.len() {
            for x in [1u8, 0x80, 0xff] {
                let mut v = e.to_vec();
                v[i] ^= x;
                let _ = AddressBook::decode(&v, 10);
            }
        }
        let mut v = e.to_vec();
        v.push(0);
        assert_eq!(
            AddressBook::decode(&v, 10),
            Err(BookDecodeError::NotCanonical)
        );
        // A huge count in a short message: refused by the limit, or as truncated.
        let mut v = BOOK_MAGIC.to_vec();
        v.extend_from_slice(&u32::MAX.to_be_bytes());
        assert!(AddressBook::decode(&v, usize::MAX).is_err());
    }
}
