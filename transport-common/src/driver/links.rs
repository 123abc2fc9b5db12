//! Connections: executing the link policy's actions (dial, link up, link down), installing
//! accepted and dialled connections, and the ends of running ones. Every function here is a
//! policy or core input; none drains: the driver's work loop ([`Driver::settle`]) runs after
//! each input and executes what they queued.

use lifeline_core::link::{AcceptVerdict, AttemptId, DialOutcome, DownReason, LinkAction};
use lifeline_core::tree::Rank;
use tracing::Instrument;

use super::{alive, Dialed, Driver};
use crate::connector::{Accepted, Connector, Ended, LinkIo, Rejection};
use crate::handle::Output;
use crate::stats::Counters;

impl<C: Connector> Driver<C> {
    /// Asks the link policy for every connection to `peer` (a policy input: the dials it
    /// decides on are queued as actions).
    pub(super) fn want(&mut self, peer: Rank) {
        let now = self.now();
        for slot in 0..C::SLOTS {
            self.links.want(now, peer, slot, alive(&self.node));
        }
    }

    /// Dials the tree parent: children dial up at wire-up and after every repair, so each tree
    /// link exists before traffic needs it and a lost one is noticed. Once start-up is over,
    /// the standby parent too ([`Node::standby_parent`](lifeline_core::Node::standby_parent)):
    /// the rank that would adopt this one if its parent died, so that repair finds its link
    /// up instead of dialling it between loaded processes.
    pub(super) fn wire_up(&mut self) {
        if let Some(parent) = self.node.tree().view().and_then(|v| v.parent()) {
            self.want(parent);
        }
        if let Some(standby) = self.node.standby_parent() {
            self.want(standby);
        }
    }

    /// After a view change: links to ranks the core now knows dead go ([`LinkAction::LinkDown`]
    /// with [`DownReason::Dead`] queued), and the (new) parent is dialled.
    pub(super) fn on_view_changed(&mut self) {
        self.links.retain_alive(alive(&self.node));
        self.wire_up();
    }

    /// Executes one action of the link policy. A link change is an input to the core.
    pub(super) fn execute(&mut self, a: LinkAction) {
        match a {
            LinkAction::Dial {
                peer,
                slot,
                attempt,
                failures,
            } => self.dial(peer, slot, attempt, failures),
            LinkAction::LinkUp { peer } => {
                tracing::debug!(peer = peer.0, "link up");
                Counters::add(&self.counters.link_ups);
                let now = self.input_now();
                self.node.handle_link_up(now, peer);
                self.outputs.push(Output::LinkUp { peer, at: now });
            }
            LinkAction::LinkDown { peer, reason } => self.report_down(peer, reason.into()),
        }
    }

    /// Spawns the dial the link policy asked for. A rank without an address is queued to go
    /// down ([`DownReason::NoAddress`]).
    fn dial(&mut self, peer: Rank, slot: usize, attempt: AttemptId, failures: u32) {
        if slot >= C::SLOTS || self.stopping {
            return;
        }
        let Some(addr) = self.addr(peer) else {
            tracing::debug!(peer = peer.0, slot, "cannot dial: no address");
            self.queue_down(peer, DownReason::NoAddress);
            return;
        };
        tracing::debug!(
            peer = peer.0,
            slot,
            %addr,
            attempt = attempt.as_u64(),
            failures,
            "dial"
        );
        Counters::add(&self.counters.dials);
        let dialing = self.connector.dial(peer, slot, addr);
        let reports = self.reports.clone();
        tokio::spawn(
            async move {
                let result = dialing.await;
                let _ = reports
                    .send(Dialed {
                        peer,
                        slot,
                        attempt,
                        result,
                    })
                    .await;
            }
            .in_current_span(),
        );
    }

    /// Queues a link down for a reason of the adapter's own, once per peer.
    pub(super) fn queue_down(&mut self, peer: Rank, why: DownReason) {
        if !self.downs.iter().any(|(r, _)| *r == peer) {
            self.downs.push_back((peer, why));
        }
    }

    /// Runs `conn` as `peer`'s connection for `slot`, replacing (aborting) any earlier one.
    fn install(&mut self, peer: Rank, slot: usize, conn: C::Conn, accepted: bool) {
        self.next_conn += 1;
        let id = self.next_conn;
        let p = self.peers.entry(peer);
        let Some(cell) = p.conns.get_mut(slot) else {
            return;
        };
        if let Some(old) = cell.take() {
            old.task.abort();
        }
        let io = LinkIo {
            peer,
            slot,
            id,
            accepted,
            queues: p.queues.clone(),
            frames: self.frames.clone(),
            counters: self.counters.clone(),
        };
        let task = tokio::spawn(self.connector.run(conn, io));
        *cell = Some(super::peers::Conn {
            id,
            task: task.abort_handle(),
        });
    }

    /// Drops a link for a reason of the adapter's own (a send queue overflow, no address): the
    /// link policy forgets the peer and the loss is reported.
    pub(super) fn link_down(&mut self, peer: Rank, reason: DownReason) {
        let known = self.links.forget(peer);
        if known || self.peers.contains(peer) {
            self.report_down(peer, reason);
        }
    }

    /// Closes `peer`'s connections, tells the core with the evidence the loss is
    /// ([`DownReason::cause`]; not at all for [`DownReason::Dead`]) and the application.
    fn report_down(&mut self, peer: Rank, reason: DownReason) {
        tracing::debug!(peer = peer.0, %reason, "link down");
        self.peers.close(peer);
        self.early.forget(peer);
        let at = self.input_now();
        if let Some(cause) = reason.cause() {
            Counters::add(&self.counters.link_downs);
            self.node.handle_link_down(at, peer, cause);
        }
        self.outputs.push(Output::LinkDown { peer, at, reason });
    }

    /// A connection ended by itself.
    pub(super) fn on_ended(&mut self, peer: Rank, slot: usize, id: u64, why: Ended) {
        let current = self.peers.is_current(peer, slot, id);
        tracing::trace!(peer = peer.0, slot, ?why, current, "connection ended");
        if !current {
            return; // replaced or already closed by the driver
        }
        self.peers.clear_conn(peer, slot);
        let reason = match why {
            Ended::Eof => DownReason::Closed,
            Ended::Io(k) => DownReason::Io(k),
            Ended::Malformed => DownReason::Malformed,
            Ended::Stopped => return,
        };
        let now = self.now();
        if self.links.handle_closed(now, peer, slot) {
            self.report_down(peer, reason);
            // With the core's detector on, a close or reset is not evidence by itself: one
            // re-dial settles it (refused: hard evidence, reported as such; connected: nothing).
            let settle = !matches!(reason, DownReason::Io(std::io::ErrorKind::TimedOut));
            // A standby link that drops is dialled again, whatever the detector (a repair
            // must find it up); the link policy backs off, and gives the peer up after
            // `dial_attempts` failures (the next view change's `wire_up` asks again).
            let standby = self.node.standby_parent() == Some(peer);
            let redial = standby || (settle && self.node.config().detect.enabled);
            if redial && alive(&self.node)(peer) {
                self.want(peer);
            }
        }
    }

    /// An authenticated inbound connection: the link policy's tie-break decides. A rank past
    /// this node's span that the book holds (a joiner admitted by a view not applied here yet,
    /// or one the connector learned from its handshake) is not known dead: it is taken like
    /// any live rank. A launched rank that starts late holds only the launcher's span, and the
    /// joiner that a grow made its parent reaches it this way; the core then reads its
    /// adoption notice and catches up (`Node::dispatch_frame`).
    pub(super) fn on_accepted(&mut self, a: Accepted<C::Conn>) {
        let Accepted { peer, slot, conn } = a;
        let verdict = if self.stopping {
            AcceptVerdict::Refuse
        } else {
            let now = self.now();
            let past = !self.node.tree().layout().contains(peer) && self.addr(peer).is_some();
            let me = self.node.me();
            let alive = alive(&self.node);
            self.links.handle_accepted(now, peer, slot, |r| {
                alive(r) || (past && r == peer && r != me)
            })
        };
        tracing::debug!(peer = peer.0, slot, ?verdict, "inbound connection");
        match verdict {
            AcceptVerdict::Accept => self.install(peer, slot, conn, true),
            AcceptVerdict::Duplicate => {
                Counters::add(&self.counters.duplicates);
                tokio::spawn(self.connector.reject(conn, Rejection::Duplicate));
            }
            AcceptVerdict::Refuse => {
                Counters::add(&self.counters.refused_dead);
                // A rank the coordinator removed is told so (that is how a paused or cut-off
                // rank learns its fate: nobody dials it). Shutting down: a plain refusal.
                let removed = if self.stopping {
                    None
                } else {
                    let now = self.input_now();
                    self.node.fence_verdict(now, peer)
                };
                let why = match removed {
                    Some(epoch) => {
                        Counters::add(&self.counters.fenced);
                        tracing::debug!(peer = peer.0, epoch, "refused a removed rank: fenced");
                        Rejection::Removed { epoch }
                    }
                    None => Rejection::Refuse,
                };
                tokio::spawn(self.connector.reject(conn, why));
            }
        }
    }

    /// A finished dial: the link policy says whether to run the connection, and schedules the
    /// re-dial or gives the peer up after a failure (saying whether the last dial was refused).
    pub(super) fn on_dialed(&mut self, d: Dialed<C::Conn>) {
        let Dialed {
            peer,
            slot,
            attempt,
            result,
        } = d;
        let outcome = match &result {
            Ok(_) => DialOutcome::Connected,
            Err(f) if f.outcome == DialOutcome::Connected => DialOutcome::Failed,
            Err(f) => f.outcome,
        };
        if let Some(epoch) = result.as_ref().err().and_then(|f| f.removed) {
            tracing::info!(
                peer = peer.0,
                epoch,
                "this rank was removed from the cluster"
            );
            let now = self.input_now();
            self.node.handle_fenced(now, peer, epoch);
        }
        let now = self.now();
        let run =
            self.links
                .handle_dial_result(now, peer, slot, attempt, outcome, alive(&self.node));
        Counters::set(
            &self.counters.dial_failures,
            self.links.stats().dial_failures,
        );
        match (run, result) {
            (true, Ok(conn)) => {
                tracing::debug!(
                    peer = peer.0,
                    slot,
                    attempt = attempt.as_u64(),
                    "dial connected"
                );
                self.install(peer, slot, conn, false);
            }
            (_, Ok(_)) => tracing::trace!(
                peer = peer.0,
                slot,
                attempt = attempt.as_u64(),
                "dial connected but not current: dropped"
            ),
            (_, Err(e)) => tracing::debug!(
                peer = peer.0,
                slot,
                attempt = attempt.as_u64(),
                ?outcome,
                error = %e.error,
                "dial failed"
            ),
        }
    }
}
