//! The mock fabric's state: nodes (regions, a completion queue), queue pairs, the transfer step.

use std::collections::{BTreeMap, VecDeque};
use std::io::Write;
use std::os::unix::net::UnixStream;

use crate::verbs::{Completion, QpState, SendWr, Sge, VerbsError, WcOp, WcStatus};

/// `IBV_WC_LOC_LEN_ERR`: the receive buffer was too short.
pub(crate) const LOC_LEN_ERR: u32 = 1;
/// `IBV_WC_REM_INV_REQ_ERR`: the peer rejected the request (here: too long for its buffer).
pub(crate) const REM_INV_REQ_ERR: u32 = 9;

/// A fault the fabric injects when it processes sends (counted over the whole fabric, from 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// The `n`th send processed completes with `status` at its sender instead of arriving;
    /// the sender's queue pair goes to ERR and flushes everything else it holds.
    CompletionError {
        /// Which send (1-based, counted fabric-wide in processing order).
        n: u64,
        /// The error status the sender sees.
        status: WcStatus,
    },
}

pub(crate) struct Node {
    pub(crate) regions: Vec<Vec<u8>>,
    pub(crate) cq: VecDeque<Completion>,
    /// The completion channel: a socket pair whose reading end is the node's `cq_fd` (`None`
    /// if the pair could not be created: the node then has no completion channel).
    pub(crate) notify: Option<(UnixStream, UnixStream)>,
    /// `arm_cq` was called and no completion has notified since.
    pub(crate) armed: bool,
}

impl Node {
    pub(crate) fn new() -> Self {
        let notify = UnixStream::pair().ok().filter(|(tx, rx)| {
            tx.set_nonblocking(true).is_ok() && rx.set_nonblocking(true).is_ok()
        });
        Self {
            regions: Vec::new(),
            cq: VecDeque::new(),
            notify,
            armed: false,
        }
    }
}

pub(crate) struct MockQp {
    pub(crate) node: usize,
    pub(crate) state: QpState,
    pub(crate) max_send_wr: u32,
    pub(crate) max_recv_wr: u32,
    pub(crate) dest_qpn: Option<u32>,
    pub(crate) rnr_retry: u8,
    pub(crate) rnr_count: u8,
    pub(crate) sq: VecDeque<SendWr>,
    pub(crate) rq: VecDeque<(u64, Sge)>,
}

/// Counters of what the fabric did (for tests' assertions).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MockStats {
    /// Sends delivered into a posted receive.
    pub delivered: u64,
    /// RNR NAKs: a send found no posted receive (the credit protocol must keep this 0).
    pub rnr_naks: u64,
    /// Work requests completed `Flushed`.
    pub flushed: u64,
    /// Error completions other than `Flushed`.
    pub errors: u64,
}

pub(crate) struct Fabric {
    pub(crate) rng: u64,
    pub(crate) nodes: Vec<Node>,
    pub(crate) qps: BTreeMap<u32, MockQp>,
    pub(crate) next_qpn: u32,
    pub(crate) processed: u64,
    pub(crate) faults: Vec<Fault>,
    pub(crate) stats: MockStats,
}

impl Fabric {
    pub(crate) fn new(seed: u64) -> Self {
        Self {
            rng: seed ^ 0x9e37_79b9_7f4a_7c15,
            nodes: Vec::new(),
            qps: BTreeMap::new(),
            next_qpn: 0x11,
            processed: 0,
            faults: Vec::new(),
            stats: MockStats::default(),
        }
    }

    /// splitmix64: deterministic from the seed.
    fn next_u64(&mut self) -> u64 {
        self.rng = self.rng.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    pub(crate) fn region(&self, node: usize, sge: &Sge) -> Result<&[u8], VerbsError> {
        let r = self.nodes[node]
            .regions
            .get(sge.mr.0 as usize)
            .ok_or(VerbsError::Invalid("unknown memory region"))?;
        let end = sge
            .offset
            .checked_add(sge.len as usize)
            .ok_or(VerbsError::Invalid("range overflows"))?;
        r.get(sge.offset..end)
            .ok_or(VerbsError::Invalid("range outside the region"))
    }

    pub(crate) fn region_mut(&mut self, node: usize, sge: &Sge) -> Result<&mut [u8], VerbsError> {
        let r = self.nodes[node]
            .regions
            .get_mut(sge.mr.0 as usize)
            .ok_or(VerbsError::Invalid("unknown memory region"))?;
        let end = sge
            .offset
            .checked_add(sge.len as usize)
            .ok_or(VerbsError::Invalid("range overflows"))?;
        r.get_mut(sge.offset..end)
            .ok_or(VerbsError::Invalid("range outside the region"))
    }

    fn push(&mut self, node: usize, c: Completion) {
        match c.status {
            WcStatus::Success => {}
            WcStatus::Flushed => self.stats.flushed += 1,
            _ => self.stats.errors += 1,
        }
        let n = &mut self.nodes[node];
        n.cq.push_back(c);
        if n.armed {
            // One event per arming, as a completion channel delivers; a full socket buffer
            // (impossible with one byte per arming) would only merge events.
            n.armed = false;
            if let Some((tx, _)) = &n.notify {
                let _ = (&*tx).write(&[1]);
            }
        }
    }

    /// Moves `qpn` to ERR. The head send (if `head` is given) completes with that status;
    /// every other outstanding send and receive completes `Flushed`.
    pub(crate) fn fail(&mut self, qpn: u32, head: Option<WcStatus>) {
        let Some(qp) = self.qps.get_mut(&qpn) else {
            return;
        };
        qp.state = QpState::Error;
        let node = qp.node;
        let sends: Vec<SendWr> = qp.sq.drain(..).collect();
        let recvs: Vec<(u64, Sge)> = qp.rq.drain(..).collect();
        for (i, wr) in sends.into_iter().enumerate() {
            let status = match (i, head) {
                (0, Some(s)) => s,
                _ => WcStatus::Flushed,
            };
            self.push(node, completion(wr.wr_id, qpn, WcOp::Send, status));
        }
        for (wr_id, _) in recvs {
            self.push(node, completion(wr_id, qpn, WcOp::Recv, WcStatus::Flushed));
        }
    }

    /// A work request posted to a queue pair in ERR completes `Flushed` at once.
    pub(crate) fn flush_one(&mut self, qpn: u32, wr_id: u64, op: WcOp) {
        if let Some(node) = self.qps.get(&qpn).map(|q| q.node) {
            self.push(node, completion(wr_id, qpn, op, WcStatus::Flushed));
        }
    }

    /// Processes the head send of one queue pair (chosen by the seeded generator among those
    /// with sends outstanding). Returns false when no queue pair has anything to send.
    pub(crate) fn step(&mut self) -> bool {
        let ready: Vec<u32> = self
            .qps
            .iter()
            .filter(|(_, q)| q.state == QpState::Rts && !q.sq.is_empty())
            .map(|(n, _)| *n)
            .collect();
        if ready.is_empty() {
            return false;
        }
        let pick = ready[(self.next_u64() % ready.len() as u64) as usize];
        self.process(pick);
        true
    }

    fn process(&mut self, qpn: u32) {
        self.processed += 1;
        let n = self.processed;
        if let Some(i) = self
            .faults
            .iter()
            .position(|f| matches!(f, Fault::CompletionError { n: at, .. } if *at == n))
        {
            let Fault::CompletionError { status, .. } = self.faults.remove(i);
            self.fail(qpn, Some(status));
            return;
        }
        let (node, dest, wr, rnr_retry) = {
            let q = &self.qps[&qpn];
            (q.node, q.dest_qpn, q.sq[0], q.rnr_retry)
        };
        let dest = dest.filter(|d| {
            self.qps
                .get(d)
                .is_some_and(|p| matches!(p.state, QpState::Rtr | QpState::Rts))
        });
        let Some(dest) = dest else {
            // Nobody answers: after retry_cnt timeouts the sender gives up.
            self.fail(qpn, Some(WcStatus::RetryExceeded));
            return;
        };
        let Some(&(rwr, rsge)) = self.qps[&dest].rq.front() else {
            self.stats.rnr_naks += 1;
            let q = self.qps.get_mut(&qpn).expect("picked from the map");
            q.rnr_count = q.rnr_count.saturating_add(1);
            if rnr_retry != 7 && q.rnr_count > rnr_retry {
                self.fail(qpn, Some(WcStatus::RnrRetryExceeded));
            }
            return;
        };
        let len = wr.sge.map_or(0, |s| s.len);
        if len > rsge.len {
            let dnode = self.qps[&dest].node;
            self.qps.get_mut(&dest).expect("checked").rq.pop_front();
            self.push(
                dnode,
                completion(rwr, dest, WcOp::Recv, WcStatus::Local(LOC_LEN_ERR)),
            );
            self.fail(dest, None);
            self.fail(qpn, Some(WcStatus::Remote(REM_INV_REQ_ERR)));
            return;
        }
        let bytes = match wr.sge {
            Some(s) => self.region(node, &s).map(<[u8]>::to_vec),
            None => Ok(Vec::new()),
        };
        let dnode = self.qps[&dest].node;
        let target = Sge { len, ..rsge };
        let copied = bytes.and_then(|b| {
            self.region_mut(dnode, &target)
                .map(|t| t.copy_from_slice(&b))
        });
        if copied.is_err() {
            // A bad local range: the sender's protection error, the receiver never sees it.
            self.fail(qpn, Some(WcStatus::Local(4)));
            return;
        }
        self.qps.get_mut(&dest).expect("checked").rq.pop_front();
        let q = self.qps.get_mut(&qpn).expect("picked from the map");
        q.sq.pop_front();
        q.rnr_count = 0;
        self.stats.delivered += 1;
        let mut rc = completion(rwr, dest, WcOp::Recv, WcStatus::Success);
        rc.byte_len = len;
        rc.imm = Some(wr.imm);
        self.push(dnode, rc);
        self.push(
            node,
            completion(wr.wr_id, qpn, WcOp::Send, WcStatus::Success),
        );
    }
}

pub(crate) fn completion(wr_id: u64, qpn: u32, op: WcOp, status: WcStatus) -> Completion {
    Completion {
        wr_id,
        qpn,
        op,
        status,
        byte_len: 0,
        imm: None,
    }
}
