//! The data channel: one RC queue pair carrying frames, as a sans-IO machine over [`Verbs`].
//!
//! # Driving contract
//! 1. [`Buffers::register`] once (the registered send and receive slots; reusable across
//!    reconnects via [`Channel::into_buffers`]).
//! 2. [`Channel::open`]: creates the queue pair, moves it to INIT and posts every receive
//!    slot *before* the details are exchanged. Send [`Channel::local`] to the peer over the
//!    authenticated control link; [`Channel::connect`] with the peer's details (RTR, RTS).
//! 3. [`Channel::send`] queues a frame (bounded: `WouldBlock` at `max_queued`);
//!    [`Channel::poll_transmit`] posts what credit and free slots allow.
//! 4. Feed every completion of this queue pair to [`Channel::handle_completion`] (route by
//!    [`Channel::qpn`]); then drain [`Channel::poll_frame`] and [`Channel::poll_event`] and call
//!    `poll_transmit` again (receiving returns credit, and taking frames may re-post held slots).
//!
//! # Wire format and credits
//! The queue pair is an ordered message stream. Each frame is written as a 4-byte big-endian
//! length and its bytes, starting a new message and cut into messages of at most `buf_size`
//! bytes (the smaller of both sides' slots); the receiver appends messages and splits frames
//! like the TCP reader. Every message is a `SEND_WITH_IMM` whose immediate is the cumulative
//! count (mod 2^32) of receives this side has posted. A side's credit is the peer's latest
//! count minus the messages it has sent, so a send never meets an empty receive queue (no RNR).
//! Data uses credit above `credit_reserve`; a zero-length credit-only message (which may use
//! the reserve) is sent when `credit_threshold` re-posted receives are unadvertised.
//!
//! # Failure contract
//! The first error completion (or an unexplained flush, a protocol violation, a failed post)
//! emits one [`ChannelEvent::LinkDown`] and moves the queue pair to ERR; the flush completions
//! that follow only return slots. [`Channel::take_unacknowledged`] then yields, in order, every
//! frame whose last message did not complete successfully: those may or may not have reached
//! the peer, so resending them on a new channel is at-least-once. Exactly-once is RELM's job
//! above (its sequence numbers drop the duplicates). Frames not in that list were acknowledged
//! by the peer's HCA, and the peer's channel delivers them even if it goes down meanwhile.
//!
//! The data plane is a hint, never a verdict: a side with no credit (or nothing to send) does
//! not notice a dead peer by itself, so the composite link takes the channel down when the
//! control link or the failure detector says so ([`Channel::close`]), and tears down *both*
//! sides' channels on any link-down before reconnecting.

mod config;
mod types;

#[cfg(test)]
mod tests;

use std::collections::VecDeque;

use bytes::{Buf, Bytes, BytesMut};
use lifeline_core::Instant;

pub use config::{ChannelConfig, ConfigError, QpAttrs};
pub use types::{ChannelEvent, ChannelStats, DownCause, FrameId, QpDetails, SendError, SetupError};

use crate::verbs::{
    AddressVector, Completion, MrId, QpCaps, QpId, SendWr, Sge, Transition, Verbs, WcOp, WcStatus,
};

const LEN_PREFIX: usize = 4;

/// The registered slot memory of one channel: `send_depth` and `recv_depth` slots of
/// `buf_size` bytes.
#[derive(Debug)]
pub struct Buffers {
    send_mr: MrId,
    recv_mr: MrId,
    cfg: ChannelConfig,
}

impl Buffers {
    /// Validates `cfg` and registers its two regions.
    pub fn register<V: Verbs>(verbs: &mut V, cfg: ChannelConfig) -> Result<Self, SetupError> {
        cfg.validate()?;
        let send_mr = verbs.reg_mr(cfg.send_bytes())?;
        let recv_mr = verbs.reg_mr(cfg.recv_bytes())?;
        Ok(Self {
            send_mr,
            recv_mr,
            cfg,
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Init,
    Up,
    Down,
}

#[derive(Debug)]
struct Queued {
    id: FrameId,
    frame: Bytes,
    /// Bytes of `len ‖ frame` already posted.
    posted: usize,
}

#[derive(Debug)]
struct InFlight {
    wr_id: u64,
    slot: Option<u32>,
    /// Set on the last message of a frame: its success acknowledges the frame.
    ends: Option<FrameId>,
}

/// One RC queue pair's data channel. See the module docs for the driving contract.
#[derive(Debug)]
pub struct Channel {
    cfg: ChannelConfig,
    bufs: Buffers,
    qp: QpId,
    qpn: u32,
    psn: u32,
    state: State,
    piece: usize,
    // Sender.
    next_frame: u64,
    next_wr: u64,
    queue: VecDeque<Queued>,
    /// Accepted frames not yet acknowledged, in order (the resend list after a failure).
    unacked: VecDeque<(FrameId, Bytes)>,
    in_flight: VecDeque<InFlight>,
    free_send: Vec<u32>,
    sent_total: u32,
    peer_total: u32,
    peer_depth: u32,
    // Receiver.
    posted_total: u32,
    advertised: u32,
    recv_posted: u32,
    held: Vec<u32>,
    rx: BytesMut,
    delivered: VecDeque<Bytes>,
    events: VecDeque<ChannelEvent>,
    stats: ChannelStats,
}

impl Channel {
    /// Creates the queue pair (RESET → INIT) and posts every receive slot. `psn` is this
    /// side's initial send PSN (use a fresh random 24-bit value per queue pair).
    pub fn open<V: Verbs>(verbs: &mut V, bufs: Buffers, psn: u32) -> Result<Self, SetupError> {
        let cfg = bufs.cfg;
        let qp = verbs.create_qp(QpCaps {
            // Credit-only messages need no slot but do need send-queue entries.
            max_send_wr: cfg.send_depth + cfg.credit_reserve,
            max_recv_wr: cfg.recv_depth,
        })?;
        let mut ch = Self {
            cfg,
            bufs,
            qp: qp.id,
            qpn: qp.qpn,
            psn: psn & 0xff_ffff,
            state: State::Init,
            piece: cfg.buf_size as usize,
            next_frame: 0,
            next_wr: 0,
            queue: VecDeque::new(),
            unacked: VecDeque::new(),
            in_flight: VecDeque::new(),
            free_send: (0..cfg.send_depth).rev().collect(),
            sent_total: 0,
            peer_total: 0,
            peer_depth: 0,
            posted_total: 0,
            advertised: 0,
            recv_posted: 0,
            held: Vec::new(),
            rx: BytesMut::new(),
            delivered: VecDeque::new(),
            events: VecDeque::new(),
            stats: ChannelStats::default(),
        };
        let port = verbs.port().port;
        let setup = verbs
            .modify_qp(ch.qp, Transition::Init { port })
            .and_then(|()| (0..cfg.recv_depth).try_for_each(|slot| ch.post_recv(verbs, slot)));
        if let Err(e) = setup {
            let _ = verbs.destroy_qp(ch.qp);
            return Err(e.into());
        }
        ch.advertised = ch.posted_total;
        Ok(ch)
    }

    /// What the peer needs to connect to this queue pair.
    pub fn local<V: Verbs>(&self, verbs: &V) -> QpDetails {
        let p = verbs.port();
        QpDetails {
            qpn: self.qpn,
            psn: self.psn,
            lid: p.lid,
            gid: p.gid,
            mtu: p.active_mtu,
            recv_depth: self.cfg.recv_depth,
            buf_size: self.cfg.buf_size,
        }
    }

    /// Moves the queue pair INIT → RTR → RTS towards `peer`. The peer's `recv_depth` is the
    /// initial credit; messages are cut to the smaller of both slot sizes.
    pub fn connect<V: Verbs>(&mut self, verbs: &mut V, peer: &QpDetails) -> Result<(), SetupError> {
        if self.state != State::Init {
            return Err(SetupError::AlreadyConnected);
        }
        if peer.recv_depth <= self.cfg.credit_reserve {
            return Err(SetupError::Peer(
                "recv_depth must exceed our credit_reserve",
            ));
        }
        if peer.buf_size < 64 || peer.qpn > 0xff_ffff || peer.psn > 0xff_ffff {
            return Err(SetupError::Peer(
                "buf_size below 64 or qpn/psn beyond 24 bits",
            ));
        }
        let a = self.cfg.qp;
        let p = verbs.port();
        let path_mtu = a.max_mtu.min(p.active_mtu).min(peer.mtu);
        let av = AddressVector {
            dlid: peer.lid,
            dgid: (peer.gid != [0; 16]).then_some(peer.gid),
            sgid_index: p.gid_index,
            hop_limit: a.hop_limit,
            port: p.port,
        };
        let rtr = Transition::Rtr {
            path_mtu,
            dest_qpn: peer.qpn,
            rq_psn: peer.psn,
            av,
            min_rnr_timer: a.min_rnr_timer,
        };
        let rts = Transition::Rts {
            sq_psn: self.psn,
            timeout: a.timeout,
            retry_cnt: a.retry_cnt,
            rnr_retry: a.rnr_retry,
        };
        verbs.modify_qp(self.qp, rtr)?;
        verbs.modify_qp(self.qp, rts)?;
        self.piece = self.cfg.buf_size.min(peer.buf_size) as usize;
        self.peer_total = peer.recv_depth;
        self.peer_depth = peer.recv_depth;
        self.state = State::Up;
        Ok(())
    }

    /// This queue pair's number: route completions with this `qpn` here.
    pub fn qpn(&self) -> u32 {
        self.qpn
    }

    /// True once connected and until the link goes down.
    pub fn is_up(&self) -> bool {
        self.state == State::Up
    }

    /// Counters.
    pub fn stats(&self) -> ChannelStats {
        self.stats
    }

    /// Messages this side may still send now (credit), including the reserve.
    pub fn credit(&self) -> u32 {
        self.peer_total.wrapping_sub(self.sent_total)
    }

    /// Frames queued and not yet fully posted.
    pub fn queued(&self) -> usize {
        self.queue.len()
    }

    /// Queues `frame` for sending. Never grows past `max_queued` (then `WouldBlock`, the frame
    /// handed back). Nothing is posted until [`Channel::poll_transmit`].
    pub fn send(&mut self, frame: Bytes) -> Result<FrameId, SendError> {
        if frame.len() > self.cfg.max_frame as usize {
            return Err(SendError::TooLarge(frame.len()));
        }
        match self.state {
            State::Init => return Err(SendError::NotConnected(frame)),
            State::Down => return Err(SendError::Down(frame)),
            State::Up => {}
        }
        if self.queue.len() >= self.cfg.max_queued {
            self.stats.would_block += 1;
            return Err(SendError::WouldBlock(frame));
        }
        let id = FrameId(self.next_frame);
        self.next_frame += 1;
        self.unacked.push_back((id, frame.clone()));
        self.queue.push_back(Queued {
            id,
            frame,
            posted: 0,
        });
        Ok(id)
    }

    /// Posts queued messages as far as credit (above the reserve) and free send slots allow,
    /// then a credit-only message if `credit_threshold` receives are unadvertised. A failed
    /// post takes the link down (see [`Channel::poll_event`]).
    pub fn poll_transmit<V: Verbs>(&mut self, now: Instant, verbs: &mut V) {
        if self.state != State::Up {
            return;
        }
        while let Some(q) = self.queue.front() {
            if self.credit() <= self.cfg.credit_reserve {
                self.stats.credit_stalls += 1;
                break;
            }
            let Some(slot) = self.free_send.pop() else {
                break;
            };
            let total = LEN_PREFIX + q.frame.len();
            let take = (total - q.posted).min(self.piece);
            let mut buf = Vec::with_capacity(take);
            let mut pos = q.posted;
            if pos < LEN_PREFIX {
                let len = (q.frame.len() as u32).to_be_bytes();
                let n = (LEN_PREFIX - pos).min(take);
                buf.extend_from_slice(&len[pos..pos + n]);
                pos += n;
            }
            let start = pos - LEN_PREFIX;
            buf.extend_from_slice(&q.frame[start..start + (take - buf.len())]);
            let done = q.posted + take == total;
            let id = q.id;
            if let Err(e) = self.post_send(verbs, Some((slot, &buf)), done.then_some(id)) {
                self.free_send.push(slot);
                return self.down(now, verbs, DownCause::Verbs(e));
            }
            let q = self.queue.front_mut().expect("front checked");
            q.posted += take;
            if done {
                self.queue.pop_front();
            }
        }
        let owed = self.posted_total.wrapping_sub(self.advertised);
        let sq_room =
            self.in_flight.len() < (self.cfg.send_depth + self.cfg.credit_reserve) as usize;
        if owed >= self.cfg.credit_threshold && self.credit() > 0 && sq_room {
            if let Err(e) = self.post_send(verbs, None, None) {
                return self.down(now, verbs, DownCause::Verbs(e));
            }
            self.stats.credit_messages += 1;
        }
    }

    /// Takes one completion of this queue pair (others are ignored: returns false).
    pub fn handle_completion<V: Verbs>(
        &mut self,
        now: Instant,
        verbs: &mut V,
        c: &Completion,
    ) -> bool {
        if c.qpn != self.qpn {
            return false;
        }
        match c.op {
            WcOp::Send => self.on_send_done(now, verbs, c),
            WcOp::Recv => self.on_recv_done(now, verbs, c),
        }
        true
    }

    /// The next received frame, in order. Taking frames may re-post held receive slots
    /// (call `poll_transmit` afterwards to advertise them).
    pub fn poll_frame<V: Verbs>(&mut self, now: Instant, verbs: &mut V) -> Option<Bytes> {
        let f = self.delivered.pop_front()?;
        while self.delivered.len() < self.cfg.max_delivered && self.state != State::Down {
            let Some(slot) = self.held.pop() else { break };
            if let Err(e) = self.post_recv(verbs, slot) {
                self.down(now, verbs, DownCause::Verbs(e));
            }
        }
        Some(f)
    }

    /// The next event (at most one `LinkDown` per channel).
    pub fn poll_event(&mut self) -> Option<ChannelEvent> {
        self.events.pop_front()
    }

    /// Takes the link down on purpose (cause [`DownCause::Closed`]): the queue pair goes to ERR
    /// and its flushes return every slot.
    pub fn close<V: Verbs>(&mut self, now: Instant, verbs: &mut V) {
        self.down(now, verbs, DownCause::Closed);
    }

    /// After a link-down: every accepted frame not acknowledged by the peer, in order, removed
    /// from the channel. Resending them on a new channel is at-least-once (see module docs).
    pub fn take_unacknowledged(&mut self) -> Vec<(FrameId, Bytes)> {
        if self.state != State::Down {
            return Vec::new();
        }
        self.queue.clear();
        self.unacked.drain(..).collect()
    }

    /// True when no work request of this queue pair is outstanding (every slot returned).
    pub fn is_drained(&self) -> bool {
        self.in_flight.is_empty() && self.recv_posted == 0
    }

    /// Destroys the queue pair and hands back the registered buffers for a new channel; only
    /// once down and drained (otherwise the channel is handed back unchanged).
    pub fn into_buffers<V: Verbs>(self, verbs: &mut V) -> Result<Buffers, Box<Self>> {
        if self.state != State::Down || !self.is_drained() {
            return Err(Box::new(self));
        }
        let _ = verbs.destroy_qp(self.qp);
        Ok(self.bufs)
    }

    fn post_recv<V: Verbs>(
        &mut self,
        verbs: &mut V,
        slot: u32,
    ) -> Result<(), crate::verbs::VerbsError> {
        let sge = Sge {
            mr: self.bufs.recv_mr,
            offset: slot as usize * self.cfg.buf_size as usize,
            len: self.cfg.buf_size,
        };
        verbs.post_recv(self.qp, u64::from(slot), sge)?;
        self.recv_posted += 1;
        self.posted_total = self.posted_total.wrapping_add(1);
        Ok(())
    }

    fn post_send<V: Verbs>(
        &mut self,
        verbs: &mut V,
        data: Option<(u32, &[u8])>,
        ends: Option<FrameId>,
    ) -> Result<(), crate::verbs::VerbsError> {
        let sge = match data {
            Some((slot, bytes)) => {
                let offset = slot as usize * self.cfg.buf_size as usize;
                verbs.write(self.bufs.send_mr, offset, bytes)?;
                Some(Sge {
                    mr: self.bufs.send_mr,
                    offset,
                    len: bytes.len() as u32,
                })
            }
            None => None,
        };
        let wr_id = self.next_wr % crate::verbs::WR_ID_LIMIT;
        verbs.post_send(
            self.qp,
            SendWr {
                wr_id,
                sge,
                imm: self.posted_total,
            },
        )?;
        self.next_wr += 1;
        self.advertised = self.posted_total;
        self.sent_total = self.sent_total.wrapping_add(1);
        self.stats.messages_sent += 1;
        self.in_flight.push_back(InFlight {
            wr_id,
            slot: data.map(|(s, _)| s),
            ends,
        });
        Ok(())
    }

    fn on_send_done<V: Verbs>(&mut self, now: Instant, verbs: &mut V, c: &Completion) {
        let Some(i) = self.in_flight.iter().position(|f| f.wr_id == c.wr_id) else {
            return; // Not ours (a stale id): nothing to return.
        };
        let f = self.in_flight.remove(i).expect("index found");
        if let Some(slot) = f.slot {
            self.free_send.push(slot);
        }
        match c.status {
            WcStatus::Success if self.state == State::Up => {
                if let Some(id) = f.ends {
                    while self.unacked.front().is_some_and(|(u, _)| *u <= id) {
                        self.unacked.pop_front();
                        self.stats.frames_acked += 1;
                    }
                }
            }
            WcStatus::Success => {}
            status => self.on_error(now, verbs, WcOp::Send, status),
        }
    }

    fn on_recv_done<V: Verbs>(&mut self, now: Instant, verbs: &mut V, c: &Completion) {
        let Some(slot) = Some(c.wr_id).filter(|s| *s < u64::from(self.cfg.recv_depth)) else {
            return;
        };
        self.recv_posted = self.recv_posted.saturating_sub(1);
        if c.status != WcStatus::Success {
            return self.on_error(now, verbs, WcOp::Recv, c.status);
        }
        // A successful receive was acknowledged to the peer, so it is delivered even after the
        // link went down (successes are an in-order prefix of the stream, never after a flush).
        if c.byte_len > self.cfg.buf_size {
            return self.down(
                now,
                verbs,
                DownCause::Malformed("message longer than a slot"),
            );
        }
        if let (Some(imm), State::Up) = (c.imm, self.state) {
            // Cumulative: a count that moves forward replaces the old one. The peer cannot have
            // more receives posted than its depth beyond what we have sent.
            if imm.wrapping_sub(self.peer_total) < 1 << 31 {
                if imm.wrapping_sub(self.sent_total) > self.peer_depth {
                    let why = "credit beyond the peer's receive depth";
                    return self.down(now, verbs, DownCause::Malformed(why));
                }
                self.peer_total = imm;
            }
        }
        let start = self.rx.len();
        self.rx.resize(start + c.byte_len as usize, 0);
        let offset = slot as usize * self.cfg.buf_size as usize;
        if let Err(e) = verbs.read(self.bufs.recv_mr, offset, &mut self.rx[start..]) {
            return self.down(now, verbs, DownCause::Verbs(e));
        }
        if let Err(why) = self.split_frames() {
            return self.down(now, verbs, DownCause::Malformed(why));
        }
        if self.state != State::Up {
            // Not re-posted: the queue pair is in ERR, the slot just returns.
        } else if self.delivered.len() >= self.cfg.max_delivered {
            self.held.push(slot as u32);
        } else if let Err(e) = self.post_recv(verbs, slot as u32) {
            self.down(now, verbs, DownCause::Verbs(e));
        }
    }

    fn split_frames(&mut self) -> Result<(), &'static str> {
        while self.rx.len() >= LEN_PREFIX {
            let len = u32::from_be_bytes([self.rx[0], self.rx[1], self.rx[2], self.rx[3]]);
            if len > self.cfg.max_frame {
                return Err("frame longer than max_frame");
            }
            if self.rx.len() < LEN_PREFIX + len as usize {
                break;
            }
            self.rx.advance(LEN_PREFIX);
            self.delivered
                .push_back(self.rx.split_to(len as usize).freeze());
            self.stats.frames_received += 1;
        }
        Ok(())
    }

    fn on_error<V: Verbs>(&mut self, now: Instant, verbs: &mut V, op: WcOp, status: WcStatus) {
        match (self.state, status) {
            (State::Down, WcStatus::Flushed) => self.stats.flushes_after_down += 1,
            (State::Down, _) => {}
            (_, WcStatus::Flushed) => self.down(now, verbs, DownCause::Flushed),
            (_, status) => self.down(now, verbs, DownCause::Completion { op, status }),
        }
    }

    fn down<V: Verbs>(&mut self, now: Instant, verbs: &mut V, cause: DownCause) {
        if self.state == State::Down {
            return;
        }
        self.state = State::Down;
        self.held.clear();
        // Idempotent on hardware; makes every outstanding work request flush (returning slots).
        let _ = verbs.modify_qp(self.qp, Transition::Error);
        self.events
            .push_back(ChannelEvent::LinkDown { cause, at: now });
    }
}
