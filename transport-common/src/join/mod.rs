//! Joins over a transport: how a process that is not a member yet reaches a member's driver
//! (the member side: [`JoinTx`], [`JoinSlot`]) and how it drives the core's
//! [`Joiner`](lifeline_core::join::Joiner) over real connections (the joiner side:
//! [`run_joiner`]).
//!
//! A joiner has no rank, so it cannot open a link. It opens a *join connection* to a member's
//! listener instead, which the adapter authenticates with its own scheme (TCP: a join
//! preamble proving the cluster key), then sends one
//! [`JoinRequest`](lifeline_core::join::JoinRequest). The connector hands the request to the
//! driver ([`JoinSlot::request`]); the driver names the connection with a
//! [`JoinConn`](lifeline_core::join::JoinConn) of its own, feeds the core
//! ([`Node::handle_join_request`](lifeline_core::Node::handle_join_request)), and once the core
//! answers ([`Node::poll_join_reply`](lifeline_core::Node::poll_join_reply)) gives the
//! connector a [`JoinAnswer`]: the reply, and with an admission the contact's whole
//! [`AddressBook`] (every member, the joiners of that admission included), which the
//! connector writes before closing. A connection that ends before its answer is told to the
//! core ([`Node::handle_join_conn_closed`](lifeline_core::Node::handle_join_conn_closed)).
//!
//! The open join connections are bounded ([`DriverConfig::max_join_conns`](crate::DriverConfig));
//! past the bound [`JoinTx::open`] refuses (counted in `joins_refused`) and the connector
//! closes the connection: the joiner tries another contact.

mod joiner;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::{BufMut, Bytes, BytesMut};
use lifeline_core::join::MAX_JOIN_MSG;
use tokio::sync::{mpsc, oneshot, OwnedSemaphorePermit, Semaphore};

use crate::book::{AddressBook, BookDecodeError};
use crate::stats::Counters;

pub use joiner::{run_joiner, DialError, JoinError, JoinSettings, Joined};

/// What a connector hands the driver about one join connection.
#[derive(Debug)]
pub(crate) enum JoinIn {
    /// The request of connection `id`; the answer goes to `answer` (dropped unanswered: the
    /// request was malformed or the driver stopped; close the connection).
    Request {
        id: u64,
        request: Bytes,
        answer: oneshot::Sender<JoinAnswer>,
    },
    /// Connection `id` ended before its answer.
    Closed { id: u64 },
}

/// The connector's way into the driver's join path (in [`Inbound`](crate::Inbound)). Cheap to
/// clone; every clone shares the bound.
#[derive(Clone, Debug)]
pub struct JoinTx {
    tx: mpsc::Sender<JoinIn>,
    open: Arc<Semaphore>,
    next: Arc<AtomicU64>,
    counters: Arc<Counters>,
}

impl JoinTx {
    /// A join path of at most `max` open connections feeding `tx`.
    pub(crate) fn new(tx: mpsc::Sender<JoinIn>, max: usize, counters: Arc<Counters>) -> Self {
        Self {
            tx,
            open: Arc::new(Semaphore::new(max)),
            next: Arc::new(AtomicU64::new(0)),
            counters,
        }
    }

    /// A slot for one authenticated join connection, or `None` past the bound of open join
    /// connections (counted in `joins_refused`): close the connection unanswered.
    pub fn open(&self) -> Option<JoinSlot> {
        let Ok(permit) = self.open.clone().try_acquire_owned() else {
            Counters::add(&self.counters.joins_refused);
            tracing::debug!("join connection refused: too many open");
            return None;
        };
        Counters::add(&self.counters.join_conns);
        Some(JoinSlot {
            id: self.next.fetch_add(1, Ordering::Relaxed) + 1,
            tx: self.tx.clone(),
            counters: self.counters.clone(),
            requested: false,
            answered: false,
            _permit: permit,
        })
    }
}

/// One open join connection's place in the driver's join path. Dropping it before its
/// answer arrived (the joiner closed the connection, a timeout) tells the driver, which tells
/// the core.
#[derive(Debug)]
pub struct JoinSlot {
    id: u64,
    tx: mpsc::Sender<JoinIn>,
    counters: Arc<Counters>,
    requested: bool,
    answered: bool,
    _permit: OwnedSemaphorePermit,
}

impl JoinSlot {
    /// Hands the connection's request to the driver and waits for the answer. `None`: the
    /// driver refused the request (malformed, counted in `joins_refused`) or stopped; close
    /// the connection. Call it once; cancelling the wait (select on the connection's end)
    /// and dropping the slot is how an early close is reported.
    pub async fn request(&mut self, request: Bytes) -> Option<JoinAnswer> {
        if self.requested {
            return None;
        }
        let (answer, rx) = oneshot::channel();
        let id = self.id;
        self.tx
            .send(JoinIn::Request {
                id,
                request,
                answer,
            })
            .await
            .ok()?;
        self.requested = true;
        let a = rx.await;
        // Answered, or refused by the driver (the sender dropped): either way the driver is
        // done with this connection.
        self.answered = true;
        a.ok()
    }
}

impl Drop for JoinSlot {
    fn drop(&mut self) {
        if self.requested && !self.answered {
            Counters::add(&self.counters.join_closed_early);
            // Best effort: the channel holds two messages per open slot; were it full, the
            // core's entry for this request would still expire after `join.timeout`.
            let _ = self.tx.try_send(JoinIn::Closed { id: self.id });
        }
    }
}

/// A contact's answer on a join connection: the core's [`JoinReply`](lifeline_core::join::JoinReply)
/// bytes and, with an admission, the contact's address book.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JoinAnswer {
    /// The encoded reply (decoded by the joiner's core).
    pub reply: Bytes,
    /// With an admission: every rank's address as the contact knows it once it applied the
    /// admission (the admitted joiners included).
    pub book: Option<AddressBook>,
}

/// The answer's first bytes: "Lifeline join Answer, format 1".
pub const ANSWER_MAGIC: [u8; 4] = *b"LLA1";

/// Why an answer ([`JoinAnswer::decode`]) was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AnswerError {
    /// Another magic, a reply over [`MAX_JOIN_MSG`], or bytes missing or left over.
    #[error("malformed join answer")]
    Malformed,
    /// The book in it.
    #[error("join answer: {0}")]
    Book(#[from] BookDecodeError),
}

impl JoinAnswer {
    /// The answer as bytes: [`ANSWER_MAGIC`], the reply's length (u32) and bytes, the encoded
    /// book's length (u32; 0 without a book) and bytes ([`AddressBook::encode`]).
    pub fn encode(&self) -> Bytes {
        let book = self.book.as_ref().map(AddressBook::encode);
        let blen = book.as_ref().map_or(0, Bytes::len);
        let mut b = BytesMut::with_capacity(12 + self.reply.len() + blen);
        b.put_slice(&ANSWER_MAGIC);
        b.put_u32(self.reply.len() as u32);
        b.put_slice(&self.reply);
        b.put_u32(blen as u32);
        if let Some(book) = book {
            b.put_slice(&book);
        }
        b.freeze()
    }

    /// Decodes [`Self::encode`]'s form; the book may hold at most `max_entries` entries.
    pub fn decode(bytes: &Bytes, max_entries: usize) -> Result<Self, AnswerError> {
        let m = AnswerError::Malformed;
        let b = &bytes[..];
        if b.len() < 12 || b[..4] != ANSWER_MAGIC {
            return Err(m);
        }
        let rlen = u32::from_be_bytes([b[4], b[5], b[6], b[7]]) as usize;
        if rlen > MAX_JOIN_MSG || b.len() < 12 + rlen {
            return Err(m);
        }
        let reply = bytes.slice(8..8 + rlen);
        let at = 8 + rlen;
        let blen = u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]) as usize;
        if b.len() - at - 4 != blen {
            return Err(m);
        }
        let book = if blen == 0 {
            None
        } else {
            Some(AddressBook::decode(&b[at + 4..], max_entries)?)
        };
        Ok(Self { reply, book })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lifeline_core::tree::Rank;

    #[test]
    fn answers_round_trip_and_refuse_malformed_bytes() {
        let mut book = AddressBook::new();
        book.insert(Rank(0), "127.0.0.1:1".parse().unwrap());
        book.insert(Rank(5), "127.0.0.2:2".parse().unwrap());
        for a in [
            JoinAnswer {
                reply: Bytes::from_static(b"LLJ1-some-reply"),
                book: Some(book.clone()),
            },
            JoinAnswer {
                reply: Bytes::from_static(b"retry"),
                book: None,
            },
        ] {
            let e = a.encode();
            assert_eq!(JoinAnswer::decode(&e, 8), Ok(a.clone()));
            for cut in 0..e.len() {
                assert!(JoinAnswer::decode(&e.slice(..cut), 8).is_err());
            }
            for i in 0..e.len() {
                let mut v = e.to_vec();
                v[i] ^= 0xff;
                let _ = JoinAnswer::decode(&Bytes::from(v), 8);
            }
            let mut v = e.to_vec();
            v.push(1);
            assert!(JoinAnswer::decode(&Bytes::from(v), 8).is_err());
        }
        let e = JoinAnswer {
            reply: Bytes::new(),
            book: Some(book),
        }
        .encode();
        assert!(matches!(
            JoinAnswer::decode(&e, 1),
            Err(AnswerError::Book(BookDecodeError::TooMany { .. }))
        ));
    }

    /// The bound on open join connections refuses and counts; a slot dropped after its
    /// request and before its answer reports the close.
    #[tokio::test]
    async fn slots_are_bounded_and_report_early_closes() {
        let counters = Arc::new(Counters::default());
        let (tx, mut rx) = mpsc::channel(8);
        let joins = JoinTx::new(tx, 2, counters.clone());
        let mut a = joins.open().expect("room");
        let b = joins.open().expect("room");
        assert!(joins.open().is_none());
        assert_eq!(counters.snapshot().joins_refused, 1);
        drop(b);
        let c = joins.open().expect("room again");
        // `a` asks; the "driver" takes the request and drops `a` before answering.
        let asked = tokio::time::timeout(
            std::time::Duration::from_millis(50),
            a.request(Bytes::from_static(b"req")),
        )
        .await;
        assert!(asked.is_err(), "no answer yet");
        let Some(JoinIn::Request { id, .. }) = rx.recv().await else {
            panic!("a request")
        };
        drop(a);
        assert!(matches!(rx.recv().await, Some(JoinIn::Closed { id: i }) if i == id));
        assert_eq!(counters.snapshot().join_closed_early, 1);
        drop(c); // never asked: nothing to report
        assert!(rx.try_recv().is_err());
    }
}
