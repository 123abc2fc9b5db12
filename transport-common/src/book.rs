//! [`AddressBook`]: every rank's listening address, supplied by the embedder and shared by the
//! driver (which dials by it) and the connector (which checks peers against it).

use std::collections::BTreeMap;
use std::fmt;
use std::net::SocketAddr;

use lifeline_core::tree::Rank;

/// Every rank's listening address: `Rank → SocketAddr`, supplied by the embedder.
///
/// A runtime fills it from whatever it already uses to find its processes: a PMIx key-value
/// exchange (each daemon `put`s its `host:port` under its rank, then `fence` + `get`), a
/// rendezvous file written by a launcher, or a peers file as `lifeline node` reads
/// ([`AddressBook::parse`]: one `rank addr` per line). The adapter listens on its own entry,
/// dials the others' entries, and (during the TCP handshake, or after the QUIC one) checks
/// that a peer claiming rank `r` connects from `r`'s address. The book must cover every rank the node may talk to; a rank
/// missing from it is unreachable (reported to the core as a lost link). Ranks that join later
/// (a grow) are added to a running node with [`Handle::add_peers`](crate::Handle::add_peers) or
/// [`Handle::grow`](crate::Handle::grow); an entry never changes once given.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AddressBook {
    addrs: BTreeMap<Rank, SocketAddr>,
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

impl AddressBook {
    /// An empty book.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets `rank`'s address (replacing any earlier one).
    pub fn insert(&mut self, rank: Rank, addr: SocketAddr) {
        self.addrs.insert(rank, addr);
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
}
