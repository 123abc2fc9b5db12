//! Joins, the member side (see [`crate::join`] for the protocol): a contact's waiting
//! requests, the coordinator's FIFO and its admissions, and applying a delivered admission.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use bytes::Bytes;

use super::{Membership, MembershipEvent, MembershipTimer};
use crate::join::{
    Admission, AdmitNotice, Admitted, JoinAnswerMsg, JoinConn, JoinForwardMsg, JoinId, JoinReply,
    JoinRequest, JoinVerdict, RetryReason,
};
use crate::machine::{Ctx, Effect};
use crate::time::Instant;
use crate::timer::TimerToken;
use crate::tree::{Layout, Rank, Snapshot};
use crate::wire::Codec;
use crate::xcast;

/// A request waiting at its contact for the admission.
#[derive(Debug, Clone)]
struct Waiting {
    conn: JoinConn,
    addr: Bytes,
    deadline: Instant,
    /// The coordinator confirmed the admission (rank, epoch) before it was applied here.
    confirmed: Option<(Rank, u64)>,
}

/// One join in the coordinator's queue.
#[derive(Debug, Clone)]
struct Queued {
    id: JoinId,
    addr: Bytes,
    /// The contact that forwarded it (told the rank if a notice admitted it meanwhile).
    contact: Rank,
}

/// Join state of one member.
#[derive(Debug, Default)]
pub(super) struct Joins {
    /// Contact: requests waiting for their admission, one entry per join id.
    waiting: BTreeMap<JoinId, Waiting>,
    /// Contact: the earliest deadline the expiry timer is armed for.
    expiry_at: Option<Instant>,
    /// The coordinator the waiting requests were last forwarded to.
    forwarded_to: Option<Rank>,
    /// Coordinator: joins in arrival order, and their nonces (a nonce is queued once).
    queue: VecDeque<Queued>,
    queued: BTreeSet<u64>,
    batch_timer: Option<TimerToken>,
    /// Recently admitted nonces: (rank, epoch), oldest first in `admitted_order`.
    admitted: BTreeMap<u64, (Rank, u64)>,
    admitted_order: VecDeque<u64>,
    /// Joiner: admissions its snapshot already holds, delivered here after it started (in op
    /// order) and not applied again, whose ranks are not known yet: held admissions are the
    /// latest ones as of the snapshot's epoch, so the last of them ends at the snapshot's span,
    /// and their ranks are known once that last one is (see `settle_held`). Until then a
    /// request for one of their nonces is dropped, never admitted again (its contact answers
    /// it from its own copy). Empty but for that wait: a joiner whose snapshot is newer than
    /// its admission gets the older held admissions first, the one at the snapshot's epoch (or
    /// the first later admission) settles them. Bounded by `join.remembered` nonces.
    held: Vec<AdmitNotice>,
    /// Joiner: the held admissions' ranks are settled (once: every later admission has a
    /// later epoch and is applied, not held).
    held_settled: bool,
    /// Answers for the adapter ([`crate::Node::poll_join_reply`]).
    replies: VecDeque<(JoinConn, JoinReply)>,
    pub(super) stats: crate::join::JoinStats,
}

impl Joins {
    /// Requests and queued joins held (for leak checks).
    pub(super) fn held(&self) -> usize {
        self.waiting.len() + self.queue.len() + self.replies.len()
    }

    /// Coordinator: joins queued or a batch armed (a shrink waits).
    pub(super) fn batch_open(&self) -> bool {
        !self.queue.is_empty() || self.batch_timer.is_some()
    }

    pub(super) fn poll_reply(&mut self) -> Option<(JoinConn, JoinReply)> {
        self.replies.pop_front()
    }

    /// Joiner: `nonce` is in a held admission whose ranks are not settled yet.
    fn held_nonce(&self, nonce: u64) -> bool {
        self.held
            .iter()
            .any(|m| m.joiners.iter().any(|(id, _)| id.nonce == nonce))
    }
}

impl Membership {
    /// The join state, created on first use (most ranks never hold any: 8 bytes until then).
    fn j(&mut self) -> &mut Joins {
        self.joins.get_or_insert_with(Box::default)
    }

    /// This rank's tree as a joiner admitted now would need it.
    fn snapshot(ctx: &Ctx<'_>, span: u32) -> Option<Snapshot> {
        let layout = Layout::new(span, ctx.tree.layout().radix()).ok()?;
        Some(Snapshot {
            layout,
            dead: ctx.tree.dead().clone(),
        })
    }

    /// The coordinator: the root of this rank's view.
    pub(super) fn coordinator(ctx: &Ctx<'_>) -> Option<Rank> {
        let v = ctx.tree.view()?;
        Some(v.ancestors().first().copied().unwrap_or(ctx.me()))
    }

    fn answer(&mut self, conn: JoinConn, id: JoinId, verdict: JoinVerdict) {
        match &verdict {
            JoinVerdict::Accepted(_) => self.j().stats.join_accepts_sent += 1,
            JoinVerdict::Retry { .. } => self.j().stats.join_retries_sent += 1,
        }
        self.j()
            .replies
            .push_back((conn, JoinReply { id, verdict }));
    }

    fn retry(&mut self, ctx: &mut Ctx<'_>, conn: JoinConn, id: JoinId, reason: RetryReason) {
        let after = ctx.cfg.join.retry_after;
        self.answer(conn, id, JoinVerdict::Retry { reason, after });
    }

    /// Answers `conn` with the admission of rank `rank` at `epoch`, with this rank's tree (it
    /// has applied that admission: `rank` is in its span).
    fn accept(&mut self, ctx: &mut Ctx<'_>, conn: JoinConn, id: JoinId, rank: Rank, epoch: u64) {
        let span = self.admitted_span;
        let Some(snapshot) = Self::snapshot(ctx, span) else {
            return;
        };
        if ctx.tree.dead().contains(rank) {
            // Admitted, then removed before it answered: a rejoin needs a new process.
            self.retry(ctx, conn, id, RetryReason::NotMember);
            return;
        }
        let a = Admission {
            rank,
            epoch,
            view_epoch: self.agreed.epoch.max(epoch),
            snapshot,
            startup: self.startup_view(),
        };
        self.answer(conn, id, JoinVerdict::Accepted(a));
    }

    /// A joiner's request arrived on the adapter's connection `conn`: answer at once (already
    /// admitted, not a member, full) or keep it and forward it to the coordinator.
    pub(crate) fn on_join_request(&mut self, ctx: &mut Ctx<'_>, conn: JoinConn, req: JoinRequest) {
        self.j().stats.join_requests_in += 1;
        let id = req.id;
        if self.evicted || ctx.tree.view().is_none() {
            self.retry(ctx, conn, id, RetryReason::NotMember);
            return;
        }
        // Already admitted or not, the coordinator answers (an admission is answered only once
        // it is applied everywhere, so a joiner never starts with a rank a failover could give
        // to another).
        let full = self.j().waiting.len() >= ctx.cfg.join.max_pending as usize;
        if full || self.j().waiting.contains_key(&id) {
            self.retry(ctx, conn, id, RetryReason::Busy);
            return;
        }
        let deadline = ctx.now + ctx.cfg.join.timeout;
        self.j().waiting.insert(
            id,
            Waiting {
                conn,
                addr: req.addr.clone(),
                deadline,
                confirmed: None,
            },
        );
        self.arm_expiry(ctx, deadline);
        self.forward(ctx, id, req.addr);
    }

    /// Sends one waiting request to the coordinator (this rank: queued here).
    fn forward(&mut self, ctx: &mut Ctx<'_>, id: JoinId, addr: Bytes) {
        let Some(coord) = Self::coordinator(ctx) else {
            return;
        };
        self.j().forwarded_to = Some(coord);
        if coord == ctx.me() {
            self.enqueue(ctx, ctx.me(), id, addr);
        } else {
            self.j().stats.join_forwards_out += 1;
            let known = self.j().admitted.get(&id.nonce).copied();
            ctx.send(coord, JoinForwardMsg { id, addr, known });
        }
    }

    fn arm_expiry(&mut self, ctx: &mut Ctx<'_>, at: Instant) {
        if self.j().expiry_at.is_some_and(|t| t <= at) {
            return;
        }
        self.j().expiry_at = Some(at);
        ctx.timers.set(MembershipTimer::JoinExpiry, at);
    }

    /// Contact: requests past their deadline are answered "retry" (timed out).
    pub(super) fn on_join_expiry(&mut self, ctx: &mut Ctx<'_>) {
        self.j().expiry_at = None;
        let now = ctx.now;
        let due: Vec<JoinId> = self
            .j()
            .waiting
            .iter()
            .filter(|(_, w)| w.deadline <= now)
            .map(|(id, _)| *id)
            .collect();
        for id in due {
            if let Some(w) = self.j().waiting.remove(&id) {
                self.j().stats.joins_timed_out += 1;
                self.retry(ctx, w.conn, id, RetryReason::TimedOut);
            }
        }
        if let Some(next) = self.j().waiting.values().map(|w| w.deadline).min() {
            self.arm_expiry(ctx, next);
        }
    }

    /// The adapter's join connection closed: its waiting requests are dropped (the
    /// coordinator may still admit the joiner; it then asks again and gets its rank).
    pub(crate) fn on_join_conn_closed(&mut self, _ctx: &mut Ctx<'_>, conn: JoinConn) {
        if let Some(j) = self.joins.as_mut() {
            j.waiting.retain(|_, w| w.conn != conn);
        }
    }

    /// A contact forwarded a request: queue it if this rank is the coordinator.
    pub(super) fn on_join_forward(&mut self, ctx: &mut Ctx<'_>, from: Rank, m: JoinForwardMsg) {
        self.j().stats.join_forwards_in += 1;
        if Self::coordinator(ctx) != Some(ctx.me()) {
            // Not (or no longer) the coordinator: the contact re-forwards when it sees the
            // root change; until then its joiner waits (or times out and retries).
            ctx.stats.membership.stale += 1;
            return;
        }
        if let Some((rank, epoch)) = m.known {
            // A retry whose first admission the contact applied and this coordinator does not
            // remember (it was admitted itself in or after that view): the rank is in this
            // view, alive, so the joiner gets it rather than a second rank nobody starts.
            let known_here = self.j().admitted.contains_key(&m.id.nonce);
            if !known_here && rank.0 < self.admitted_span && ctx.tree.is_alive(rank) {
                self.j().stats.joins_known_by_contact += 1;
                self.remember(ctx, m.id.nonce, rank, epoch);
            }
        }
        self.enqueue(ctx, from, m.id, m.addr);
    }

    /// Coordinator: queue a join (FIFO, one entry per nonce), or answer its contact at once.
    fn enqueue(&mut self, ctx: &mut Ctx<'_>, contact: Rank, id: JoinId, addr: Bytes) {
        if let Some(&(rank, epoch)) = self.j().admitted.get(&id.nonce) {
            self.answer_contact(
                ctx,
                contact,
                JoinAnswerMsg {
                    id,
                    admitted: Some((rank, epoch)),
                },
            );
            return;
        }
        if self.j().queued.contains(&id.nonce) {
            return;
        }
        if self.j().held_nonce(id.nonce) {
            // Admitted by a view this joiner's snapshot holds, its rank not known yet here:
            // its contact answers it.
            ctx.stats.membership.stale += 1;
            return;
        }
        if self.j().queue.len() >= ctx.cfg.join.max_pending as usize {
            self.j().stats.joins_refused_busy += 1;
            self.answer_contact(ctx, contact, JoinAnswerMsg { id, admitted: None });
            return;
        }
        self.j().queued.insert(id.nonce);
        self.j().queue.push_back(Queued { id, addr, contact });
        if self.j().batch_timer.is_none() {
            let at = ctx.now + ctx.cfg.join.batch;
            self.j().batch_timer = Some(ctx.timers.set(MembershipTimer::JoinBatch, at));
        }
    }

    fn answer_contact(&mut self, ctx: &mut Ctx<'_>, contact: Rank, m: JoinAnswerMsg) {
        if contact == ctx.me() {
            self.on_join_answer(ctx, m);
        } else {
            ctx.send(contact, m);
        }
    }

    /// Contact: the coordinator's answer to a request it did not queue.
    pub(super) fn on_join_answer(&mut self, ctx: &mut Ctx<'_>, m: JoinAnswerMsg) {
        let Some(w) = self.j().waiting.get(&m.id).cloned() else {
            return;
        };
        match m.admitted {
            // Admitted by a view this rank has applied: answer now; otherwise the admission,
            // when it arrives here, answers.
            Some((rank, epoch)) if rank.0 < self.admitted_span => {
                self.j().waiting.remove(&m.id);
                self.accept(ctx, w.conn, m.id, rank, epoch);
            }
            Some(confirmed) => {
                if let Some(w) = self.j().waiting.get_mut(&m.id) {
                    w.confirmed = Some(confirmed);
                }
            }
            None => {
                self.j().waiting.remove(&m.id);
                self.retry(ctx, w.conn, m.id, RetryReason::Busy);
            }
        }
    }

    /// Coordinator: whether every view change it knows of is applied here, so its applied
    /// admissions are all the admissions any member will apply before its next notice: no
    /// notice it issued waits unapplied (its epoch counter is not ahead of the agreed view),
    /// and every rank its tree holds dead is in an applied notice or was a hole from the
    /// start (after a failover the old root is dead here and in no notice until the new
    /// root's recovery is over and its announcement applied).
    fn view_settled(&self, ctx: &Ctx<'_>) -> bool {
        self.epoch <= self.agreed.epoch
            && ctx
                .tree
                .dead()
                .iter()
                .all(|r| self.agreed.removed.contains(r))
    }

    /// Coordinator: the queue waits one more batch window (at least 1 ms, so a zero window
    /// never spins on the same instant).
    fn rearm_join_batch(&mut self, ctx: &mut Ctx<'_>) {
        let wait = ctx
            .cfg
            .join
            .batch
            .max(crate::time::Duration::from_millis(1));
        self.j().batch_timer = Some(ctx.timers.set(MembershipTimer::JoinBatch, ctx.now + wait));
    }

    /// Coordinator: the batch window passed: admit the queue's head in one view change.
    pub(super) fn on_join_batch(&mut self, ctx: &mut Ctx<'_>, token: TimerToken) {
        if self.j().batch_timer != Some(token) {
            ctx.stats.stale_timers += 1;
            return;
        }
        self.j().batch_timer = None;
        if Self::coordinator(ctx) != Some(ctx.me()) {
            // No longer the coordinator: the contacts re-forward to the new one.
            self.j().queue.clear();
            self.j().queued.clear();
            return;
        }
        if self.shrink_open() {
            // Joins wait while a shrink is open (`membership.md` §4.3).
            self.s().stats.joins_waited += 1;
            self.rearm_join_batch(ctx);
            return;
        }
        if !self.view_settled(ctx) {
            // A view change is in flight here: a notice this coordinator issued is not applied
            // yet (a new root's notices wait until its recovery has gathered and applied every
            // op of its predecessor's, whose admissions the queue may repeat: a joiner's retry
            // re-forwarded after the failover), or a death is in no applied notice yet.
            // Admitting now could give a second rank to a nonce already admitted; the queue
            // waits for the view to settle.
            self.j().stats.join_batches_held += 1;
            self.rearm_join_batch(ctx);
            return;
        }
        let limits = ctx.cfg.limits();
        let room = limits.payload_room(64);
        let cap = ctx.cfg.join.max_per_view.min(ctx.cfg.max_list) as usize;
        let mut joiners = Vec::new();
        let mut size = 16;
        while let Some(q) = self.j().queue.front() {
            let len = 16 + q.addr.len();
            if joiners.len() >= cap || size + len > room {
                break;
            }
            size += len;
            let q = self.j().queue.pop_front().expect("front exists");
            self.j().queued.remove(&q.id.nonce);
            if let Some(&(rank, epoch)) = self.j().admitted.get(&q.id.nonce) {
                // Admitted since it was queued (by a predecessor's notice this rank applied
                // after a failover): its contact gets the rank it has.
                let m = JoinAnswerMsg {
                    id: q.id,
                    admitted: Some((rank, epoch)),
                };
                self.answer_contact(ctx, q.contact, m);
                continue;
            }
            joiners.push((q.id, q.addr));
        }
        if !self.j().queue.is_empty() {
            let at = ctx.now + ctx.cfg.join.batch;
            self.j().batch_timer = Some(ctx.timers.set(MembershipTimer::JoinBatch, at));
        }
        if joiners.is_empty() {
            return;
        }
        let n = joiners.len() as u64;
        if u64::from(ctx.tree.layout().span()) + n > u64::from(u32::MAX) {
            self.j().stats.joins_refused_busy += n;
            return;
        }
        self.epoch += 1;
        self.j().stats.join_views += 1;
        self.j().stats.joins_admitted += n;
        self.note_admission_broadcast();
        let m = AdmitNotice {
            epoch: self.epoch,
            joiners,
        };
        ctx.effect(Effect::RootBroadcast {
            tag: xcast::TAG_JOIN_NOTICE,
            payload: m.to_payload(),
        });
    }

    /// A delivered admission (in op order): the joiners are members as of its epoch, with
    /// consecutive ranks from this rank's span (every member applies the same notices in the
    /// same order, so every member gives the same ranks). The event first (the adapter learns
    /// their addresses), then the grow, then the answers of the joiners waiting here.
    pub(super) fn on_admit_notice(&mut self, ctx: &mut Ctx<'_>, payload: Bytes) {
        let m = match AdmitNotice::from_payload(payload, &ctx.cfg.limits()) {
            Ok(m) => m,
            Err(_) => {
                ctx.stats.membership.inconsistent += 1;
                return;
            }
        };
        if self.joiner && m.epoch <= ctx.cfg.epoch {
            self.on_held_admission(ctx, m);
            return;
        }
        // A view past the snapshot's: every admission the snapshot holds that reaches this
        // joiner came before it.
        self.settle_held(ctx);
        let span = self.admitted_span;
        let Some(new_span) = u32::try_from(m.joiners.len())
            .ok()
            .and_then(|n| span.checked_add(n))
        else {
            ctx.stats.membership.inconsistent += 1;
            return;
        };
        self.epoch = self.epoch.max(m.epoch);
        self.agreed.apply(m.epoch, &[]);
        self.admitted_span = new_span;
        let joiners: Vec<Admitted> = m.admitted(Rank(span)).collect();
        for a in &joiners {
            self.remember(ctx, a.id.nonce, a.rank, m.epoch);
            if self.j().queued.remove(&a.id.nonce) {
                self.j().queue.retain(|q| q.id.nonce != a.id.nonce);
            }
        }
        let dead_now = ctx.tree.dead().iter().filter(|r| r.0 < new_span).count() as u32;
        ctx.effect(Effect::Event(
            MembershipEvent::Joined {
                epoch: m.epoch,
                joiners: joiners.clone(),
                members: new_span - dead_now,
            }
            .into(),
        ));
        if new_span > ctx.tree.layout().span() {
            ctx.effect(Effect::Grow { new_span });
        }
        // The requests waiting here that this view admits, or that the coordinator confirmed
        // and this view makes applicable, are answered with the tree as of this view (a
        // nonce admitted twice, after a failover, keeps its first rank).
        let j = self.j();
        let ready: Vec<(JoinId, Rank, u64)> = j
            .waiting
            .iter()
            .filter_map(|(id, w)| {
                let by_nonce = j.admitted.get(&id.nonce).copied();
                by_nonce.or(w.confirmed).map(|(r, e)| (*id, r, e))
            })
            .filter(|&(_, r, _)| r.0 < new_span)
            .collect();
        if ready.is_empty() {
            return;
        }
        let Some(snapshot) = Self::snapshot(ctx, new_span) else {
            return;
        };
        for (id, rank, epoch) in ready {
            let Some(w) = self.j().waiting.remove(&id) else {
                continue;
            };
            let a = Admission {
                rank,
                epoch,
                view_epoch: self.agreed.epoch.max(epoch),
                snapshot: snapshot.clone(),
                startup: self.startup_view(),
            };
            self.answer(w.conn, id, JoinVerdict::Accepted(a));
        }
    }

    /// A joiner's own admission (or an earlier one), forwarded to it after it started: its
    /// snapshot holds it already, so it is not applied again, but its nonces are remembered
    /// with their ranks: as the coordinator (a grow can put a joiner in the root slot) this
    /// rank answers a contact that re-forwards one of them after the root change with its
    /// rank, and never admits it again (`sim shrink --ranks 33 --radix 4 --seed 153
    /// --campaigns 6 --joins 4 --crashes 2 --window-ms 1654 --detect`: joiner 36 admitted its
    /// own request again as 37). The notice at the snapshot's epoch is the last admission
    /// the snapshot holds: the held admissions' ranks are known with it.
    fn on_held_admission(&mut self, ctx: &mut Ctx<'_>, m: AdmitNotice) {
        let last = m.epoch == ctx.cfg.epoch;
        let cap = ctx.cfg.join.remembered as usize;
        let j = self.j();
        if j.held_settled {
            // Every held admission came before the view that settled them (ops are delivered
            // once, in order): this one cannot be ranked; its nonces wait, unanswered.
            ctx.stats.membership.inconsistent += 1;
        }
        j.held.push(m);
        while j.held.iter().map(|h| h.joiners.len()).sum::<usize>() > cap && j.held.len() > 1 {
            j.held.remove(0);
        }
        if last {
            self.settle_held(ctx);
        }
        // Requests queued here for nonces still unranked: dropped (their contacts answer them
        // once they apply the admission); ranked ones were answered as the ranks settled.
        let j = self.j();
        if !j.held.is_empty() {
            let held = std::mem::take(&mut j.held);
            let drop = |n: u64| {
                held.iter()
                    .any(|m| m.joiners.iter().any(|(id, _)| id.nonce == n))
            };
            j.queue.retain(|q| !drop(q.id.nonce));
            j.queued.retain(|&n| !drop(n));
            j.held = held;
        }
    }

    /// Joiner: the last admission the snapshot holds is known (it arrived, or a later view
    /// did): the held admissions, in notice order, end at the snapshot's span, so each one's
    /// joiners are the ranks just below the next one's. They are remembered as admitted.
    /// A no-op after the first call.
    fn settle_held(&mut self, ctx: &mut Ctx<'_>) {
        let Some(j) = self.joins.as_mut() else {
            return;
        };
        if j.held_settled {
            return;
        }
        j.held_settled = true;
        let held = std::mem::take(&mut j.held);
        let mut end = ctx.cfg.span;
        let mut ranked = Vec::new();
        for (k, m) in held.iter().enumerate().rev() {
            let Some(first) = u32::try_from(m.joiners.len())
                .ok()
                .and_then(|n| end.checked_sub(n))
            else {
                // More joiners than the span holds: not this snapshot's; the rest wait.
                ctx.stats.membership.inconsistent += 1;
                self.j().held = held[..=k].to_vec();
                break;
            };
            ranked.extend(
                m.admitted(Rank(first))
                    .map(|a| (a.id.nonce, a.rank, m.epoch)),
            );
            end = first;
        }
        for (nonce, rank, epoch) in ranked {
            // Known already (a contact's re-forward carried it): the same admission, not a
            // second one.
            if !self.j().admitted.contains_key(&nonce) {
                self.remember(ctx, nonce, rank, epoch);
            }
            // A request for it queued here (re-forwarded by its contact after a root change,
            // before the admission reached this rank): its contact gets the rank.
            let j = self.j();
            if !j.queued.remove(&nonce) {
                continue;
            }
            let known = j.admitted.get(&nonce).copied().unwrap_or((rank, epoch));
            if let Some(k) = j.queue.iter().position(|q| q.id.nonce == nonce) {
                let q = j.queue.remove(k).expect("a position in the queue");
                let m = JoinAnswerMsg {
                    id: q.id,
                    admitted: Some(known),
                };
                self.answer_contact(ctx, q.contact, m);
            }
        }
    }

    /// Remembers a nonce's admission; a nonce admitted again keeps its first rank: the second
    /// is a rank nobody starts, removed once its join grace is over. (A coordinator admits only
    /// with its view settled, which rules out the failover that did this: see `view_settled`.)
    fn remember(&mut self, ctx: &Ctx<'_>, nonce: u64, rank: Rank, epoch: u64) {
        let j = self.j();
        if j.admitted.contains_key(&nonce) {
            j.stats.joins_readmitted += 1;
            return;
        }
        j.admitted.insert(nonce, (rank, epoch));
        j.admitted_order.push_back(nonce);
        while self.j().admitted_order.len() > ctx.cfg.join.remembered as usize {
            if let Some(old) = self.j().admitted_order.pop_front() {
                self.j().admitted.remove(&old);
            }
        }
    }

    /// After a view change: if the coordinator changed, the waiting requests go to the new
    /// one (idempotent there: it queues a nonce once and answers an admitted one); a rank that
    /// is no longer the coordinator drops its queue (the contacts re-forward it).
    pub(super) fn joins_after_view_change(&mut self, ctx: &mut Ctx<'_>) {
        if self.joins.is_none() {
            return;
        }
        let coord = Self::coordinator(ctx);
        if coord != Some(ctx.me()) {
            let j = self.j();
            j.queue.clear();
            j.queued.clear();
        }
        if coord.is_none() || coord == self.j().forwarded_to || self.j().waiting.is_empty() {
            return;
        }
        let again: Vec<(JoinId, Bytes)> = self
            .j()
            .waiting
            .iter()
            .map(|(id, w)| (*id, w.addr.clone()))
            .collect();
        self.j().stats.join_reforwards += again.len() as u64;
        for (id, addr) in again {
            self.forward(ctx, id, addr);
        }
    }

    /// This rank stopped being a member: every waiting joiner is told to ask someone else.
    pub(super) fn joins_on_evicted(&mut self, ctx: &mut Ctx<'_>) {
        if self.joins.is_none() {
            return;
        }
        let waiting = std::mem::take(&mut self.j().waiting);
        for (id, w) in waiting {
            self.retry(ctx, w.conn, id, RetryReason::NotMember);
        }
        self.j().queue.clear();
        self.j().queued.clear();
    }
}
