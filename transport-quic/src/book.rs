//! [`AddressBook`]: where each rank's endpoint is, as the acceptor checks it.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use lifeline_core::tree::Rank;

/// Every known rank's endpoint address. A node dials and accepts on one UDP socket, so a peer's
/// connections come *from* the address it listens on: the acceptor requires the exact
/// `SocketAddr` (IP and port), not just the IP.
///
/// Guarantees: one address per rank and one rank per address; [`insert`](Self::insert) refuses
/// anything else, so a lookup in either direction is unambiguous.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AddressBook {
    by_rank: BTreeMap<Rank, SocketAddr>,
    by_addr: BTreeMap<SocketAddr, Rank>,
}

/// Why [`AddressBook::insert`] refused an entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BookError {
    /// The rank already has another address (ranks are never reused, entries never change).
    #[error("rank {rank} is already at {have}")]
    RankTaken {
        /// The rank.
        rank: Rank,
        /// Its address.
        have: SocketAddr,
    },
    /// Another rank already has the address.
    #[error("{addr} is already rank {rank}'s")]
    AddressTaken {
        /// The address.
        addr: SocketAddr,
        /// The rank at it.
        rank: Rank,
    },
}

impl AddressBook {
    /// An empty book.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records `rank` at `addr`; inserting the same pair again is a no-op.
    pub fn insert(&mut self, rank: Rank, addr: SocketAddr) -> Result<(), BookError> {
        if let Some(&have) = self.by_rank.get(&rank) {
            return if have == addr {
                Ok(())
            } else {
                Err(BookError::RankTaken { rank, have })
            };
        }
        if let Some(&other) = self.by_addr.get(&addr) {
            return Err(BookError::AddressTaken { addr, rank: other });
        }
        self.by_rank.insert(rank, addr);
        self.by_addr.insert(addr, rank);
        Ok(())
    }

    /// `rank`'s address.
    pub fn get(&self, rank: Rank) -> Option<SocketAddr> {
        self.by_rank.get(&rank).copied()
    }

    /// The rank at `addr`.
    pub fn rank_at(&self, addr: SocketAddr) -> Option<Rank> {
        self.by_addr.get(&addr).copied()
    }

    /// Entries, in rank order.
    pub fn iter(&self) -> impl Iterator<Item = (Rank, SocketAddr)> + '_ {
        self.by_rank.iter().map(|(&r, &a)| (r, a))
    }
}

impl TryFrom<&lifeline_transport_common::AddressBook> for AddressBook {
    type Error = BookError;

    /// The driver's book as the endpoint's: refused if two ranks share an address (an acceptor
    /// could not tell them apart).
    fn try_from(b: &lifeline_transport_common::AddressBook) -> Result<Self, BookError> {
        let mut book = Self::new();
        for (r, a) in b.iter() {
            book.insert(r, a)?;
        }
        Ok(book)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_address_per_rank_and_one_rank_per_address() {
        let a: SocketAddr = "127.0.0.1:7000".parse().unwrap();
        let b: SocketAddr = "127.0.0.1:7001".parse().unwrap();
        let mut book = AddressBook::new();
        book.insert(Rank(0), a).unwrap();
        book.insert(Rank(0), a).unwrap();
        assert_eq!(
            book.insert(Rank(0), b),
            Err(BookError::RankTaken {
                rank: Rank(0),
                have: a
            })
        );
        assert_eq!(
            book.insert(Rank(1), a),
            Err(BookError::AddressTaken {
                addr: a,
                rank: Rank(0)
            })
        );
        book.insert(Rank(1), b).unwrap();
        assert_eq!(book.get(Rank(1)), Some(b));
        assert_eq!(book.rank_at(a), Some(Rank(0)));
        assert_eq!(book.rank_at("127.0.0.1:7002".parse().unwrap()), None);
        assert_eq!(book.iter().count(), 2);
    }
}
