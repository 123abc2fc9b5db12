//! Join connections at a member (see [`crate::join`]): requests from the connector go to the
//! core under a [`JoinConn`] id the driver owns; the core's answers go back with, for an
//! admission, the address book; and every admission's joiners are added to the book before
//! any link action for them runs.
//!
//! Order: a view that admits joiners comes out of the core as a
//! [`MembershipEvent::Joined`] event followed by the grow, in one drain with the frames the grow
//! sends to the new ranks. [`Driver::drain_core`] routes those frames into send queues (which
//! only *asks* the link policy for the peers: the dials it decides on are queued as actions),
//! then handles the events, adding the joiners' addresses here, then answers the waiting
//! joiners with the book that now holds them; link actions run only after the drain
//! ([`Driver::settle`]), so no dial to a new rank looks its address up before it is there.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use lifeline_core::join::{Admitted, JoinConn, JoinReply, JoinVerdict};
use tokio::sync::oneshot;

use super::Driver;
use crate::book::AddressBook;
use crate::connector::Connector;
use crate::join::{JoinAnswer, JoinIn};
use crate::stats::Counters;

/// The join connections waiting for the core's answer: their id -> where the answer goes.
#[derive(Debug, Default)]
pub(super) struct JoinConns {
    open: BTreeMap<u64, oneshot::Sender<JoinAnswer>>,
}

/// A joiner's address as the TCP and QUIC adapters encode it: `ip:port` as UTF-8 text.
pub(super) fn parse_addr(bytes: &[u8]) -> Option<SocketAddr> {
    std::str::from_utf8(bytes).ok()?.parse().ok()
}

impl<C: Connector> Driver<C> {
    /// A join connection's request, or its early end.
    pub(super) fn on_join(&mut self, j: JoinIn) {
        match j {
            JoinIn::Request {
                id,
                request,
                answer,
            } => {
                if self.stopping {
                    return; // dropped unanswered: the connector closes it
                }
                let now = self.input_now();
                match self.node.handle_join_request(now, JoinConn(id), request) {
                    Ok(()) => {
                        self.joins.open.insert(id, answer);
                    }
                    Err(e) => {
                        Counters::add(&self.counters.joins_refused);
                        tracing::debug!(conn = id, error = %e, "malformed join request");
                    }
                }
            }
            JoinIn::Closed { id } => {
                if self.joins.open.remove(&id).is_some() {
                    let now = self.input_now();
                    self.node.handle_join_conn_closed(now, JoinConn(id));
                }
            }
        }
    }

    /// Adds an admission's joiners to the book (called from the drain, before any link action
    /// runs). An address that does not parse, or a rank known at another address, is counted
    /// and logged, and the rank stays out of the book (a dial to it is then reported down for
    /// want of an address).
    pub(super) fn add_joiners(&mut self, epoch: u64, joiners: &[Admitted]) {
        let mut book = self.book.write().unwrap_or_else(|e| e.into_inner());
        for a in joiners {
            let Some(addr) = parse_addr(&a.addr) else {
                Counters::add(&self.counters.joiner_addrs_refused);
                tracing::warn!(
                    rank = a.rank.0,
                    epoch,
                    id = %a.id,
                    addr = %String::from_utf8_lossy(&a.addr),
                    "joiner's address is not ip:port: not added"
                );
                continue;
            };
            match book.add(a.rank, addr) {
                Ok(true) => {
                    Counters::add(&self.counters.joiner_addrs_added);
                    tracing::debug!(rank = a.rank.0, epoch, %addr, "joiner added to the book");
                }
                // Known already (a joiner's own admission, which it also delivers).
                Ok(false) => {}
                Err(known) => {
                    Counters::add(&self.counters.joiner_addrs_refused);
                    tracing::warn!(
                        rank = a.rank.0,
                        epoch,
                        %addr,
                        %known,
                        "joiner's rank is already in the book at another address: kept"
                    );
                }
            }
        }
    }

    /// Hands the core's answers to their connections; an admission goes with the book (which
    /// already holds the admitted joiners: the drain added them first).
    pub(super) fn answer_joins(&mut self) {
        while let Some((conn, reply)) = self.node.poll_join_reply() {
            let Some(tx) = self.joins.open.remove(&conn.0) else {
                continue; // closed meanwhile
            };
            let accepted = matches!(
                JoinReply::decode(reply.clone(), u32::MAX).map(|r| r.verdict),
                Ok(JoinVerdict::Accepted(_))
            );
            let book = accepted.then(|| self.book_snapshot());
            Counters::add(&self.counters.join_answers);
            if accepted {
                Counters::add(&self.counters.join_accepts);
            }
            tracing::debug!(conn = conn.0, accepted, "join answered");
            let _ = tx.send(JoinAnswer { reply, book });
        }
    }

    fn book_snapshot(&self) -> AddressBook {
        self.book.read().unwrap_or_else(|e| e.into_inner()).clone()
    }
}
