//! An in-memory RDMA fabric: [`MockVerbs`] endpoints connected through a [`MockFabric`].
//!
//! Deterministic from a seed: sends move only when the test calls [`MockFabric::step`] (or
//! [`MockFabric::run`]), and which queue pair moves next is drawn from the seed. It enforces
//! what an HCA enforces for RC queue pairs:
//! - transitions RESET → INIT → RTR → RTS only (any state → ERR); anything else is
//!   [`VerbsError::BadState`];
//! - receives may be posted from INIT on, sends only in RTS; both are refused in RESET, and
//!   in ERR they complete `Flushed` at once (as on hardware);
//! - queue depths: [`VerbsError::QueueFull`] past `max_send_wr` / `max_recv_wr`;
//! - a send consumes the peer's oldest posted receive and copies its bytes into the peer's
//!   region; with no receive posted it is RNR-NAKed ([`MockStats::rnr_naks`]) and retried on
//!   later steps, up to `rnr_retry` (7 = forever), then completes `RnrRetryExceeded`;
//! - a send longer than the posted receive: `Local(LOC_LEN_ERR)` at the receiver,
//!   `Remote(REM_INV_REQ_ERR)` at the sender, both queue pairs to ERR;
//! - a send to a queue pair that is gone or not in RTR/RTS completes `RetryExceeded`;
//! - an error moves the queue pair to ERR and every other outstanding work request completes
//!   `Flushed` ([`MockFabric::fail_qp`] does the same on demand, like `IBV_EVENT_QP_FATAL`);
//! - injected [`Fault`]s: the `n`th send processed completes with a chosen error status;
//! - a completion channel: each endpoint's `cq_fd` is a real descriptor (one end of a socket
//!   pair) that becomes readable when a completion arrives after `arm_cq`, once per arming, so
//!   the composite link's `AsyncFd` driver runs the same code over the mock as over a device.

mod fabric;
#[cfg(test)]
mod tests;

use std::io::Read;
use std::os::fd::OwnedFd;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

pub use fabric::{Fault, MockStats};

use crate::verbs::{
    Completion, Mtu, PortInfo, Qp, QpCaps, QpId, QpState, SendWr, Sge, Transition, Verbs,
    VerbsError, WcOp,
};
use fabric::{Fabric, MockQp, Node};

/// The shared fabric. Cloning gives another handle to the same fabric; handles and endpoints
/// are `Send + Sync` (one mutex), so tokio tasks of the composite link can share them.
#[derive(Clone)]
pub struct MockFabric {
    inner: Arc<Mutex<Fabric>>,
}

impl MockFabric {
    /// A fabric with no endpoints, its scheduling drawn from `seed`.
    pub fn new(seed: u64) -> Self {
        Self {
            inner: Arc::new(Mutex::new(Fabric::new(seed))),
        }
    }

    /// A new endpoint (one "node": its own regions and completion queue) on this fabric.
    pub fn endpoint(&self) -> MockVerbs {
        let mut f = lock(&self.inner);
        f.nodes.push(Node::new());
        MockVerbs {
            fabric: self.inner.clone(),
            node: f.nodes.len() - 1,
        }
    }

    /// Processes one outstanding send; false when none is outstanding (the fabric is idle).
    pub fn step(&self) -> bool {
        lock(&self.inner).step()
    }

    /// Steps until idle or `max_steps` steps; returns the steps taken.
    pub fn run(&self, max_steps: usize) -> usize {
        (0..max_steps).take_while(|_| self.step()).count()
    }

    /// Schedules a fault.
    pub fn inject(&self, fault: Fault) {
        lock(&self.inner).faults.push(fault);
    }

    /// Moves queue pair `qpn` to ERR now (as a fatal async event would): everything it holds
    /// completes `Flushed`.
    pub fn fail_qp(&self, qpn: u32) {
        lock(&self.inner).fail(qpn, None);
    }

    /// The state of queue pair `qpn`, or `None` if it does not exist (never or destroyed).
    pub fn qp_state(&self, qpn: u32) -> Option<QpState> {
        lock(&self.inner).qps.get(&qpn).map(|q| q.state)
    }

    /// Receives currently posted on queue pair `qpn` (0 if unknown).
    pub fn posted_recvs(&self, qpn: u32) -> usize {
        lock(&self.inner).qps.get(&qpn).map_or(0, |q| q.rq.len())
    }

    /// What the fabric has done so far.
    pub fn stats(&self) -> MockStats {
        lock(&self.inner).stats
    }
}

/// One endpoint of a [`MockFabric`]: implements [`Verbs`] in memory, without `unsafe`.
pub struct MockVerbs {
    fabric: Arc<Mutex<Fabric>>,
    node: usize,
}

impl MockVerbs {
    fn own<'a>(&self, f: &'a mut Fabric, qp: QpId) -> Result<&'a mut MockQp, VerbsError> {
        f.qps
            .get_mut(&qp.0)
            .filter(|q| q.node == self.node)
            .ok_or(VerbsError::Invalid("unknown queue pair"))
    }
}

/// Locks the fabric; a panic in another holder (a failed test) does not poison it for the rest.
fn lock(f: &Mutex<Fabric>) -> MutexGuard<'_, Fabric> {
    f.lock().unwrap_or_else(PoisonError::into_inner)
}

fn bad(qp: QpId, state: QpState, what: &'static str) -> VerbsError {
    VerbsError::BadState { qp, state, what }
}

impl Verbs for MockVerbs {
    fn port(&self) -> PortInfo {
        let mut gid = [0u8; 16];
        gid[15] = self.node as u8;
        PortInfo {
            port: 1,
            lid: self.node as u16 + 1,
            gid,
            gid_index: 0,
            active_mtu: Mtu::M4096,
        }
    }

    fn reg_mr(&mut self, len: usize) -> Result<crate::verbs::MrId, VerbsError> {
        let mut f = lock(&self.fabric);
        let regions = &mut f.nodes[self.node].regions;
        regions.push(vec![0; len]);
        Ok(crate::verbs::MrId((regions.len() - 1) as u32))
    }

    fn write(
        &mut self,
        mr: crate::verbs::MrId,
        offset: usize,
        data: &[u8],
    ) -> Result<(), VerbsError> {
        let len = u32::try_from(data.len()).map_err(|_| VerbsError::Invalid("write too long"))?;
        let mut f = lock(&self.fabric);
        f.region_mut(self.node, &Sge { mr, offset, len })?
            .copy_from_slice(data);
        Ok(())
    }

    fn read(
        &self,
        mr: crate::verbs::MrId,
        offset: usize,
        out: &mut [u8],
    ) -> Result<(), VerbsError> {
        let len = u32::try_from(out.len()).map_err(|_| VerbsError::Invalid("read too long"))?;
        let f = lock(&self.fabric);
        out.copy_from_slice(f.region(self.node, &Sge { mr, offset, len })?);
        Ok(())
    }

    fn create_qp(&mut self, caps: QpCaps) -> Result<Qp, VerbsError> {
        if caps.max_send_wr == 0 || caps.max_recv_wr == 0 {
            return Err(VerbsError::Invalid("queue depth 0"));
        }
        let mut f = lock(&self.fabric);
        let qpn = f.next_qpn;
        f.next_qpn = (qpn + 1) & 0xff_ffff;
        f.qps.insert(
            qpn,
            MockQp {
                node: self.node,
                state: QpState::Reset,
                max_send_wr: caps.max_send_wr,
                max_recv_wr: caps.max_recv_wr,
                dest_qpn: None,
                rnr_retry: 7,
                rnr_count: 0,
                sq: Default::default(),
                rq: Default::default(),
            },
        );
        Ok(Qp { id: QpId(qpn), qpn })
    }

    fn modify_qp(&mut self, qp: QpId, to: Transition) -> Result<(), VerbsError> {
        let mut f = lock(&self.fabric);
        let q = self.own(&mut f, qp)?;
        match (q.state, to) {
            (_, Transition::Error) => {
                drop(f);
                lock(&self.fabric).fail(qp.0, None);
            }
            (QpState::Reset, Transition::Init { .. }) => q.state = QpState::Init,
            (QpState::Init, Transition::Rtr { dest_qpn, .. }) => {
                q.dest_qpn = Some(dest_qpn);
                q.state = QpState::Rtr;
            }
            (QpState::Rtr, Transition::Rts { rnr_retry, .. }) => {
                if rnr_retry > 7 {
                    return Err(VerbsError::Invalid("rnr_retry above 7"));
                }
                q.rnr_retry = rnr_retry;
                q.state = QpState::Rts;
            }
            (state, _) => return Err(bad(qp, state, "this transition")),
        }
        Ok(())
    }

    fn post_recv(&mut self, qp: QpId, wr_id: u64, sge: Sge) -> Result<(), VerbsError> {
        if wr_id >= crate::verbs::WR_ID_LIMIT {
            return Err(VerbsError::Invalid("wr_id top bit set"));
        }
        let mut f = lock(&self.fabric);
        f.region(self.node, &sge)?;
        let q = self.own(&mut f, qp)?;
        match q.state {
            QpState::Reset => Err(bad(qp, q.state, "post_recv")),
            QpState::Error => {
                f.flush_one(qp.0, wr_id, WcOp::Recv);
                Ok(())
            }
            _ if q.rq.len() >= q.max_recv_wr as usize => Err(VerbsError::QueueFull),
            _ => {
                q.rq.push_back((wr_id, sge));
                Ok(())
            }
        }
    }

    fn post_send(&mut self, qp: QpId, wr: SendWr) -> Result<(), VerbsError> {
        if wr.wr_id >= crate::verbs::WR_ID_LIMIT {
            return Err(VerbsError::Invalid("wr_id top bit set"));
        }
        let mut f = lock(&self.fabric);
        if let Some(s) = &wr.sge {
            f.region(self.node, s)?;
        }
        let q = self.own(&mut f, qp)?;
        match q.state {
            QpState::Rts if q.sq.len() >= q.max_send_wr as usize => Err(VerbsError::QueueFull),
            QpState::Rts => {
                q.sq.push_back(wr);
                Ok(())
            }
            QpState::Error => {
                f.flush_one(qp.0, wr.wr_id, WcOp::Send);
                Ok(())
            }
            state => Err(bad(qp, state, "post_send")),
        }
    }

    fn poll_cq(&mut self, out: &mut [Completion]) -> Result<usize, VerbsError> {
        let mut f = lock(&self.fabric);
        let cq = &mut f.nodes[self.node].cq;
        let n = out.len().min(cq.len());
        for (slot, c) in out.iter_mut().zip(cq.drain(..n)) {
            *slot = c;
        }
        Ok(n)
    }

    fn destroy_qp(&mut self, qp: QpId) -> Result<(), VerbsError> {
        let mut f = lock(&self.fabric);
        self.own(&mut f, qp)?;
        f.qps.remove(&qp.0);
        Ok(())
    }

    fn cq_fd(&self) -> Result<Option<OwnedFd>, VerbsError> {
        let f = lock(&self.fabric);
        let Some((_, rx)) = &f.nodes[self.node].notify else {
            return Ok(None);
        };
        rx.try_clone()
            .map(|s| Some(OwnedFd::from(s)))
            .map_err(|e| VerbsError::Os {
                call: "dup(completion channel)",
                errno: e.raw_os_error().unwrap_or(0),
            })
    }

    fn arm_cq(&mut self) -> Result<(), VerbsError> {
        lock(&self.fabric).nodes[self.node].armed = true;
        Ok(())
    }

    fn take_cq_events(&mut self) -> Result<u32, VerbsError> {
        let f = lock(&self.fabric);
        let Some((_, rx)) = &f.nodes[self.node].notify else {
            return Ok(0);
        };
        let mut n = 0u32;
        let mut buf = [0u8; 64];
        loop {
            match (&*rx).read(&mut buf) {
                Ok(0) => return Ok(n),
                Ok(k) => n += k as u32,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Ok(n),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    return Err(VerbsError::Os {
                        call: "read(completion channel)",
                        errno: e.raw_os_error().unwrap_or(0),
                    })
                }
            }
        }
    }
}
