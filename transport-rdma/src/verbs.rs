//! The `Verbs` boundary: every libibverbs call the data plane makes, as one narrow trait.
//!
//! [`crate::mock::MockVerbs`] implements it in memory (deterministic, enforcing the RC queue
//! pair state machine); `RdmaSysVerbs` (feature `verbs`) implements it over `rdma-sys` and holds
//! the crate's only `unsafe` code. Registered memory is owned by the implementation and reached
//! only through [`Verbs::write`] and [`Verbs::read`] (bounds-checked copies), so code above the
//! trait never holds a pointer the device may write through.

use std::os::fd::OwnedFd;

use thiserror::Error;

/// Work request ids must be below this: implementations keep the top bit to tell sends from
/// receives in error completions, where libibverbs leaves the opcode undefined.
pub const WR_ID_LIMIT: u64 = 1 << 63;

/// Identifies a memory region registered with [`Verbs::reg_mr`]; valid until the `Verbs` value
/// is dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct MrId(pub u32);

/// Identifies a queue pair created with [`Verbs::create_qp`]; never reused by one `Verbs` value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct QpId(pub u32);

/// A scatter/gather element: `len` bytes at `offset` inside registered region `mr`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sge {
    /// The registered region.
    pub mr: MrId,
    /// Byte offset inside the region.
    pub offset: usize,
    /// Length in bytes.
    pub len: u32,
}

/// What the local port reports (`ibv_query_port` plus the chosen GID).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PortInfo {
    /// Port number (1-based, as libibverbs counts).
    pub port: u8,
    /// Local identifier (InfiniBand); 0 on RoCE.
    pub lid: u16,
    /// The GID used for the global route header (all zero when none is configured).
    pub gid: [u8; 16],
    /// Index of `gid` in the port's GID table.
    pub gid_index: u8,
    /// The active path MTU.
    pub active_mtu: Mtu,
}

/// Path MTU values of `enum ibv_mtu`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Mtu {
    /// 256 bytes.
    M256 = 1,
    /// 512 bytes.
    M512 = 2,
    /// 1024 bytes.
    M1024 = 3,
    /// 2048 bytes.
    M2048 = 4,
    /// 4096 bytes.
    M4096 = 5,
}

impl Mtu {
    /// The MTU for an `enum ibv_mtu` value, or `None` for a value outside 1..=5.
    pub fn from_raw(raw: u32) -> Option<Self> {
        Some(match raw {
            1 => Self::M256,
            2 => Self::M512,
            3 => Self::M1024,
            4 => Self::M2048,
            5 => Self::M4096,
            _ => return None,
        })
    }
}

/// Queue depths requested for a new queue pair.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QpCaps {
    /// Send work requests outstanding at once.
    pub max_send_wr: u32,
    /// Receive work requests outstanding at once.
    pub max_recv_wr: u32,
}

/// A created queue pair: its handle and its queue pair number (24 bits, what the peer needs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Qp {
    /// Handle for the other trait methods.
    pub id: QpId,
    /// The 24-bit queue pair number the peer addresses.
    pub qpn: u32,
}

/// The peer's address for RTR: InfiniBand LID, or a GID for a global route (RoCE).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AddressVector {
    /// Destination LID (InfiniBand); ignored when `gid` is set on RoCE.
    pub dlid: u16,
    /// Destination GID; `Some` sets `is_global = 1`.
    pub dgid: Option<[u8; 16]>,
    /// Local GID index used as the source GID when `dgid` is set.
    pub sgid_index: u8,
    /// Hop limit of the global route header.
    pub hop_limit: u8,
    /// Local port number.
    pub port: u8,
}

/// A queue pair state transition, with the attributes `ibv_modify_qp(3)` requires for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transition {
    /// RESET → INIT (send/receive only: no remote access flags).
    Init {
        /// Local port number.
        port: u8,
    },
    /// INIT → RTR (ready to receive).
    Rtr {
        /// Path MTU (the smaller of both sides' active MTUs).
        path_mtu: Mtu,
        /// The peer's queue pair number.
        dest_qpn: u32,
        /// The peer's initial send PSN (24 bits).
        rq_psn: u32,
        /// How to reach the peer.
        av: AddressVector,
        /// RNR NAK timer code this side asks senders to wait (12 = 0.64 ms).
        min_rnr_timer: u8,
    },
    /// RTR → RTS (ready to send).
    Rts {
        /// This side's initial send PSN (24 bits).
        sq_psn: u32,
        /// Local ACK timeout exponent: 4.096 µs × 2^timeout.
        timeout: u8,
        /// Transport retries before `RetryExceeded` (0..=7).
        retry_cnt: u8,
        /// RNR retries before `RnrRetryExceeded` (0..=6; 7 means forever).
        rnr_retry: u8,
    },
    /// Any state → ERR: every outstanding work request completes `Flushed`.
    Error,
}

/// The queue pair states of the RC state machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum QpState {
    /// Created; nothing may be posted.
    Reset,
    /// Receives may be posted; nothing is received or sent yet.
    Init,
    /// Ready to receive.
    Rtr,
    /// Ready to send.
    Rts,
    /// Failed: outstanding and new work requests complete `Flushed`.
    Error,
}

/// A send work request: always `SEND_WITH_IMM`, always signaled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SendWr {
    /// Returned in the completion.
    pub wr_id: u64,
    /// The bytes to send (`None`: a zero-length message carrying only `imm`).
    pub sge: Option<Sge>,
    /// The 32-bit immediate delivered with the message.
    pub imm: u32,
}

/// Which work request a completion is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WcOp {
    /// A send this side posted.
    Send,
    /// A receive this side posted.
    Recv,
}

/// Completion status, folded from `enum ibv_wc_status`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WcStatus {
    /// Completed.
    Success,
    /// Discarded because the queue pair was already in ERR (`IBV_WC_WR_FLUSH_ERR`): a
    /// consequence of an earlier failure, never a new one.
    Flushed,
    /// No ACK after `retry_cnt` timeouts (`IBV_WC_RETRY_EXC_ERR`): peer or path gone.
    RetryExceeded,
    /// The peer posted no receive through `rnr_retry` NAKs (`IBV_WC_RNR_RETRY_EXC_ERR`).
    RnrRetryExceeded,
    /// The peer rejected the request (`REM_INV_REQ_ERR`, `REM_ACCESS_ERR`, `REM_OP_ERR`).
    Remote(u32),
    /// A local error (`LOC_LEN_ERR`, `LOC_QP_OP_ERR`, `LOC_PROT_ERR`, `LOC_ACCESS_ERR`).
    Local(u32),
    /// Any other status.
    Other(u32),
}

/// One work completion.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Completion {
    /// The `wr_id` of the work request.
    pub wr_id: u64,
    /// The queue pair number it belongs to (route by this; drop unknown ones).
    pub qpn: u32,
    /// Send or receive.
    pub op: WcOp,
    /// Outcome.
    pub status: WcStatus,
    /// Bytes received (receives only; 0 otherwise).
    pub byte_len: u32,
    /// The immediate of a received `SEND_WITH_IMM` (receives only).
    pub imm: Option<u32>,
}

impl Completion {
    /// A placeholder to fill the buffer [`Verbs::poll_cq`] writes into (it describes no work
    /// request; only the entries `poll_cq` reports are meaningful).
    pub const EMPTY: Self = Self {
        wr_id: 0,
        qpn: 0,
        op: WcOp::Send,
        status: WcStatus::Success,
        byte_len: 0,
        imm: None,
    };
}

/// Errors from the verbs layer. Returning one never changes queue pair state unless the
/// variant says so.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum VerbsError {
    /// No usable device or port: no list, an empty list, or no ACTIVE port.
    #[error("no RDMA device: {0}")]
    NoDevice(String),
    /// A libibverbs call failed with this errno.
    #[error("{call} failed: errno {errno}")]
    Os {
        /// The libibverbs function.
        call: &'static str,
        /// The `errno` it set or returned.
        errno: i32,
    },
    /// The operation is not allowed in the queue pair's current state.
    #[error("queue pair {qp:?} is in {state:?}: {what} not allowed")]
    BadState {
        /// The queue pair.
        qp: QpId,
        /// Its state.
        state: QpState,
        /// The refused operation.
        what: &'static str,
    },
    /// The send or receive queue is full (`ENOMEM` from `ibv_post_*`).
    #[error("queue full")]
    QueueFull,
    /// Unknown queue pair or region, or a range outside a region.
    #[error("invalid handle or range: {0}")]
    Invalid(&'static str),
}

/// The narrow interface to an RDMA device. One value = one opened port, one protection
/// domain, one completion queue shared by all its queue pairs.
pub trait Verbs {
    /// The port this value opened.
    fn port(&self) -> PortInfo;
    /// Allocates and registers `len` zeroed bytes with local write access.
    fn reg_mr(&mut self, len: usize) -> Result<MrId, VerbsError>;
    /// Copies `data` into region `mr` at `offset`. Errors if the range is outside the region.
    fn write(&mut self, mr: MrId, offset: usize, data: &[u8]) -> Result<(), VerbsError>;
    /// Copies `out.len()` bytes from region `mr` at `offset`. Errors if out of range.
    fn read(&self, mr: MrId, offset: usize, out: &mut [u8]) -> Result<(), VerbsError>;
    /// Creates an RC queue pair in RESET on the shared completion queue.
    fn create_qp(&mut self, caps: QpCaps) -> Result<Qp, VerbsError>;
    /// Moves a queue pair along RESET → INIT → RTR → RTS (or to ERR from any state).
    fn modify_qp(&mut self, qp: QpId, to: Transition) -> Result<(), VerbsError>;
    /// Posts a receive into `sge` (allowed from INIT on). `wr_id` must be below
    /// [`WR_ID_LIMIT`] (the top bit belongs to the implementation).
    fn post_recv(&mut self, qp: QpId, wr_id: u64, sge: Sge) -> Result<(), VerbsError>;
    /// Posts a signaled `SEND_WITH_IMM` (allowed in RTS only); `wr.wr_id` below [`WR_ID_LIMIT`].
    fn post_send(&mut self, qp: QpId, wr: SendWr) -> Result<(), VerbsError>;
    /// Moves up to `out.len()` completions into `out`, returning how many. Never blocks.
    fn poll_cq(&mut self, out: &mut [Completion]) -> Result<usize, VerbsError>;
    /// Destroys a queue pair; later completions for its `qpn` must be dropped by the caller.
    fn destroy_qp(&mut self, qp: QpId) -> Result<(), VerbsError>;
    /// A duplicate of the completion channel's descriptor (`ibv_comp_channel::fd`,
    /// non-blocking), owned by the caller: it becomes readable once a completion is added to
    /// the completion queue after [`Verbs::arm_cq`]. `Ok(None)`: no completion channel; the
    /// caller polls on a tick.
    fn cq_fd(&self) -> Result<Option<OwnedFd>, VerbsError>;
    /// Requests one notification (`ibv_req_notify_cq(cq, 0)`): the next completion added to
    /// the queue makes [`Verbs::cq_fd`] readable. Completions queued before the call do not
    /// notify, so a caller arms first and then polls the queue empty.
    fn arm_cq(&mut self) -> Result<(), VerbsError>;
    /// Consumes the notifications waiting on [`Verbs::cq_fd`] without blocking
    /// (`ibv_get_cq_event` and `ibv_ack_cq_events`); returns how many there were.
    fn take_cq_events(&mut self) -> Result<u32, VerbsError>;
}
