//! [`RdmaSysVerbs`]: the [`Verbs`] trait over `rdma-sys` 0.3 (feature `verbs`).
//!
//! The only `unsafe` code of the crate. Every block states why it is sound; the invariants
//! they share: `ctx`, `pd` and `cq` are non-null and live from `open` until `Drop`; every
//! pointer in `qps` and `regions` was returned non-null by libibverbs, is owned only here and
//! is released exactly once (in `destroy_qp` or `Drop`); region memory is a leaked boxed slice
//! that outlives its registration.

use std::collections::BTreeMap;
use std::ffi::CStr;
use std::io;
use std::mem;
use std::os::fd::{BorrowedFd, OwnedFd};
use std::ptr;

use rdma_sys::*;

use crate::verbs::{
    Completion, MrId, Mtu, PortInfo, Qp, QpCaps, QpId, SendWr, Sge, Transition, Verbs, VerbsError,
    WcOp, WcStatus, WR_ID_LIMIT,
};

/// Completions fetched per `ibv_poll_cq` call.
const POLL_BATCH: usize = 64;

struct Region {
    mr: *mut ibv_mr,
    buf: *mut [u8],
}

/// One opened device port with a protection domain, one completion queue and its completion
/// channel (non-blocking).
pub struct RdmaSysVerbs {
    ctx: *mut ibv_context,
    pd: *mut ibv_pd,
    channel: *mut ibv_comp_channel,
    cq: *mut ibv_cq,
    port: PortInfo,
    regions: Vec<Region>,
    qps: BTreeMap<u32, *mut ibv_qp>,
}

// SAFETY: libibverbs objects may be used from any thread (rdma-core's verbs are thread-safe),
// and this value owns all of them exclusively; nothing here is tied to the creating thread.
unsafe impl Send for RdmaSysVerbs {}

fn os(call: &'static str) -> VerbsError {
    VerbsError::Os {
        call,
        errno: io::Error::last_os_error().raw_os_error().unwrap_or(0),
    }
}

fn ret(call: &'static str, rc: i32) -> Result<(), VerbsError> {
    match rc {
        0 => Ok(()),
        // ENOMEM from a post: the work queue is full.
        12 if call.starts_with("ibv_post") => Err(VerbsError::QueueFull),
        errno => Err(VerbsError::Os {
            call,
            errno: errno.abs(),
        }),
    }
}

impl RdmaSysVerbs {
    /// Opens the first device with an ACTIVE port (or the device named `device`), allocates a
    /// protection domain and a completion queue of `cq_depth` entries. Fails with
    /// [`VerbsError::NoDevice`] when there is no device list (no kernel support, no verbs
    /// library), an empty list, or no ACTIVE port.
    pub fn open(device: Option<&str>, cq_depth: u32) -> Result<Self, VerbsError> {
        let mut n = 0i32;
        // SAFETY: `n` is a valid out-pointer; a null return is handled below.
        let list = unsafe { ibv_get_device_list(&mut n) };
        if list.is_null() {
            let e = io::Error::last_os_error();
            return Err(VerbsError::NoDevice(format!("ibv_get_device_list: {e}")));
        }
        let mut found = Err(VerbsError::NoDevice(match (n, device) {
            (0, _) => "the device list is empty".into(),
            (_, Some(d)) => format!("no device named {d}"),
            (_, None) => "no device could be opened".into(),
        }));
        for i in 0..n.max(0) as usize {
            // SAFETY: the list holds `n` valid device pointers until it is freed below.
            let dev = unsafe { *list.add(i) };
            // SAFETY: `dev` is a valid device; the name is a NUL-terminated string it owns.
            let name = unsafe { CStr::from_ptr(ibv_get_device_name(dev)) }
                .to_string_lossy()
                .into_owned();
            if device.is_some_and(|d| d != name) {
                continue;
            }
            found = Self::open_device(dev, &name, cq_depth);
            if found.is_ok() {
                break;
            }
        }
        // SAFETY: `list` came from ibv_get_device_list and is freed once; opened contexts stay
        // valid after the list is freed (ibv_get_device_list(3)).
        unsafe { ibv_free_device_list(list) };
        found
    }

    fn open_device(dev: *mut ibv_device, name: &str, cq_depth: u32) -> Result<Self, VerbsError> {
        // SAFETY: `dev` is a valid entry of a live device list.
        let ctx = unsafe { ibv_open_device(dev) };
        if ctx.is_null() {
            return Err(os("ibv_open_device"));
        }
        let mut v = Self {
            ctx,
            pd: ptr::null_mut(),
            channel: ptr::null_mut(),
            cq: ptr::null_mut(),
            port: PortInfo {
                port: 0,
                lid: 0,
                gid: [0; 16],
                gid_index: 0,
                active_mtu: Mtu::M1024,
            },
            regions: Vec::new(),
            qps: BTreeMap::new(),
        };
        // From here `Drop` releases whatever was created.
        v.port = v.active_port(name)?;
        // SAFETY: `ctx` is an open context.
        v.pd = unsafe { ibv_alloc_pd(ctx) };
        if v.pd.is_null() {
            return Err(os("ibv_alloc_pd"));
        }
        let depth = i32::try_from(cq_depth).map_err(|_| VerbsError::Invalid("cq_depth"))?;
        // SAFETY: `ctx` is open.
        v.channel = unsafe { ibv_create_comp_channel(ctx) };
        if v.channel.is_null() {
            return Err(os("ibv_create_comp_channel"));
        }
        // SAFETY: `channel` is live; `fd` is a plain integer field libibverbs set.
        let fd = unsafe { (*v.channel).fd };
        // The channel's reads (`ibv_get_cq_event`) must never block a runtime thread: the
        // documented way is O_NONBLOCK on its descriptor (ibv_get_cq_event(3)).
        // SAFETY: `fd` is the channel's open descriptor; F_GETFL/F_SETFL take and return ints.
        let ok = unsafe {
            let flags = libc::fcntl(fd, libc::F_GETFL);
            flags >= 0 && libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) == 0
        };
        if !ok {
            return Err(os("fcntl(O_NONBLOCK) on the completion channel"));
        }
        // SAFETY: `ctx` and `channel` are live; no CQ context (null) and vector 0 are allowed.
        v.cq = unsafe { ibv_create_cq(ctx, depth, ptr::null_mut(), v.channel, 0) };
        if v.cq.is_null() {
            return Err(os("ibv_create_cq"));
        }
        Ok(v)
    }

    fn active_port(&self, name: &str) -> Result<PortInfo, VerbsError> {
        for port in 1..=8u8 {
            // SAFETY: ibv_port_attr is plain integers; all-zero is a valid value.
            let mut attr: ibv_port_attr = unsafe { mem::zeroed() };
            // SAFETY: `ctx` is open and `attr` is a valid out-pointer of the right size.
            if unsafe { ___ibv_query_port(self.ctx, port, &mut attr) } != 0 {
                break; // No such port: the ports are numbered from 1 without gaps.
            }
            if attr.state != ibv_port_state::IBV_PORT_ACTIVE {
                continue;
            }
            let gid_index = roce_v2_gid_index(name, port).unwrap_or(0);
            let mut gid = [0u8; 16];
            if attr.link_layer == 2 {
                // Ethernet (RoCE) needs a GID; InfiniBand uses the LID.
                // SAFETY: ibv_gid is 16 plain bytes; all-zero is valid.
                let mut g: ibv_gid = unsafe { mem::zeroed() };
                // SAFETY: `ctx` is open and `g` is a valid out-pointer.
                let rc = unsafe { ibv_query_gid(self.ctx, port, i32::from(gid_index), &mut g) };
                ret("ibv_query_gid", rc)?;
                // SAFETY: every bit pattern of the union is a valid `[u8; 16]`.
                gid = unsafe { g.raw };
            }
            return Ok(PortInfo {
                port,
                lid: attr.lid,
                gid,
                gid_index,
                active_mtu: Mtu::from_raw(attr.active_mtu).unwrap_or(Mtu::M1024),
            });
        }
        Err(VerbsError::NoDevice(format!("{name} has no ACTIVE port")))
    }

    fn qp(&self, qp: QpId) -> Result<*mut ibv_qp, VerbsError> {
        self.qps
            .get(&qp.0)
            .copied()
            .ok_or(VerbsError::Invalid("unknown queue pair"))
    }

    fn range(&self, mr: MrId, offset: usize, len: usize) -> Result<(*mut u8, u32), VerbsError> {
        let r = self
            .regions
            .get(mr.0 as usize)
            .ok_or(VerbsError::Invalid("unknown memory region"))?;
        let end = offset
            .checked_add(len)
            .ok_or(VerbsError::Invalid("range overflows"))?;
        if end > r.buf.len() {
            return Err(VerbsError::Invalid("range outside the region"));
        }
        // SAFETY: `mr` was returned non-null by ibv_reg_mr and stays registered until Drop.
        let lkey = unsafe { (*r.mr).lkey };
        // SAFETY: `offset + len <= buf.len()` was checked, so the pointer stays in the slice.
        Ok((unsafe { r.buf.cast::<u8>().add(offset) }, lkey))
    }

    fn sge(&self, s: &Sge) -> Result<ibv_sge, VerbsError> {
        let (addr, lkey) = self.range(s.mr, s.offset, s.len as usize)?;
        Ok(ibv_sge {
            addr: addr as u64,
            length: s.len,
            lkey,
        })
    }
}

/// The first GID index of `port` whose sysfs type is "RoCE v2" with an IPv4-mapped address.
fn roce_v2_gid_index(dev: &str, port: u8) -> Option<u8> {
    let base = format!("/sys/class/infiniband/{dev}/ports/{port}");
    (0..=u8::MAX).find(|i| {
        let ty = std::fs::read_to_string(format!("{base}/gid_attrs/types/{i}")).unwrap_or_default();
        let gid = std::fs::read_to_string(format!("{base}/gids/{i}")).unwrap_or_default();
        ty.trim() == "RoCE v2" && gid.starts_with("0000:0000:0000:0000:0000:ffff:")
    })
}

impl Verbs for RdmaSysVerbs {
    fn port(&self) -> PortInfo {
        self.port
    }

    fn reg_mr(&mut self, len: usize) -> Result<MrId, VerbsError> {
        let buf = Box::into_raw(vec![0u8; len.max(1)].into_boxed_slice());
        let access = ibv_access_flags::IBV_ACCESS_LOCAL_WRITE.0 as i32;
        // SAFETY: `pd` is live; `buf` is a valid allocation of `len` bytes that stays alive
        // (leaked) until it is deregistered and freed in Drop.
        let mr = unsafe { ibv_reg_mr(self.pd, buf.cast(), buf.len(), access) };
        if mr.is_null() {
            let e = os("ibv_reg_mr");
            // SAFETY: `buf` came from Box::into_raw above and was never registered.
            drop(unsafe { Box::from_raw(buf) });
            return Err(e);
        }
        self.regions.push(Region { mr, buf });
        Ok(MrId((self.regions.len() - 1) as u32))
    }

    fn write(&mut self, mr: MrId, offset: usize, data: &[u8]) -> Result<(), VerbsError> {
        let (dst, _) = self.range(mr, offset, data.len())?;
        // SAFETY: `dst..dst+len` is inside the region (checked by `range`); the caller only
        // writes send slots that are not posted, so the device is not reading them.
        unsafe { ptr::copy_nonoverlapping(data.as_ptr(), dst, data.len()) };
        Ok(())
    }

    fn read(&self, mr: MrId, offset: usize, out: &mut [u8]) -> Result<(), VerbsError> {
        let (src, _) = self.range(mr, offset, out.len())?;
        // SAFETY: `src..src+len` is inside the region (checked by `range`); the caller only
        // reads receive slots whose completion it holds, so the device is not writing them.
        unsafe { ptr::copy_nonoverlapping(src, out.as_mut_ptr(), out.len()) };
        Ok(())
    }

    fn create_qp(&mut self, caps: QpCaps) -> Result<Qp, VerbsError> {
        // SAFETY: ibv_qp_init_attr is pointers and integers; all-zero (null) is valid.
        let mut attr: ibv_qp_init_attr = unsafe { mem::zeroed() };
        attr.send_cq = self.cq;
        attr.recv_cq = self.cq;
        attr.qp_type = ibv_qp_type::IBV_QPT_RC;
        attr.cap = ibv_qp_cap {
            max_send_wr: caps.max_send_wr,
            max_recv_wr: caps.max_recv_wr,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: 0,
        };
        // SAFETY: `pd` and `cq` are live; `attr` is a valid, initialised request.
        let qp = unsafe { ibv_create_qp(self.pd, &mut attr) };
        if qp.is_null() {
            return Err(os("ibv_create_qp"));
        }
        // SAFETY: `qp` was just returned non-null.
        let qpn = unsafe { (*qp).qp_num };
        self.qps.insert(qpn, qp);
        Ok(Qp { id: QpId(qpn), qpn })
    }

    fn modify_qp(&mut self, qp: QpId, to: Transition) -> Result<(), VerbsError> {
        let raw = self.qp(qp)?;
        // SAFETY: ibv_qp_attr is integers and a plain struct; all-zero is valid.
        let mut a: ibv_qp_attr = unsafe { mem::zeroed() };
        let m = |f: ibv_qp_attr_mask| f.0 as i32;
        let mask = match to {
            Transition::Init { port } => {
                a.qp_state = ibv_qp_state::IBV_QPS_INIT;
                a.pkey_index = 0;
                a.port_num = port;
                a.qp_access_flags = 0;
                m(ibv_qp_attr_mask::IBV_QP_STATE)
                    | m(ibv_qp_attr_mask::IBV_QP_PKEY_INDEX)
                    | m(ibv_qp_attr_mask::IBV_QP_PORT)
                    | m(ibv_qp_attr_mask::IBV_QP_ACCESS_FLAGS)
            }
            Transition::Rtr {
                path_mtu,
                dest_qpn,
                rq_psn,
                av,
                min_rnr_timer,
            } => {
                a.qp_state = ibv_qp_state::IBV_QPS_RTR;
                a.path_mtu = path_mtu as u32;
                a.dest_qp_num = dest_qpn;
                a.rq_psn = rq_psn;
                a.max_dest_rd_atomic = 1;
                a.min_rnr_timer = min_rnr_timer;
                a.ah_attr.dlid = av.dlid;
                a.ah_attr.port_num = av.port;
                if let Some(dgid) = av.dgid {
                    a.ah_attr.is_global = 1;
                    a.ah_attr.grh.dgid.raw = dgid;
                    a.ah_attr.grh.sgid_index = av.sgid_index;
                    a.ah_attr.grh.hop_limit = av.hop_limit;
                }
                m(ibv_qp_attr_mask::IBV_QP_STATE)
                    | m(ibv_qp_attr_mask::IBV_QP_AV)
                    | m(ibv_qp_attr_mask::IBV_QP_PATH_MTU)
                    | m(ibv_qp_attr_mask::IBV_QP_DEST_QPN)
                    | m(ibv_qp_attr_mask::IBV_QP_RQ_PSN)
                    | m(ibv_qp_attr_mask::IBV_QP_MAX_DEST_RD_ATOMIC)
                    | m(ibv_qp_attr_mask::IBV_QP_MIN_RNR_TIMER)
            }
            Transition::Rts {
                sq_psn,
                timeout,
                retry_cnt,
                rnr_retry,
            } => {
                a.qp_state = ibv_qp_state::IBV_QPS_RTS;
                a.sq_psn = sq_psn;
                a.timeout = timeout;
                a.retry_cnt = retry_cnt;
                a.rnr_retry = rnr_retry;
                a.max_rd_atomic = 1;
                m(ibv_qp_attr_mask::IBV_QP_STATE)
                    | m(ibv_qp_attr_mask::IBV_QP_SQ_PSN)
                    | m(ibv_qp_attr_mask::IBV_QP_TIMEOUT)
                    | m(ibv_qp_attr_mask::IBV_QP_RETRY_CNT)
                    | m(ibv_qp_attr_mask::IBV_QP_RNR_RETRY)
                    | m(ibv_qp_attr_mask::IBV_QP_MAX_QP_RD_ATOMIC)
            }
            Transition::Error => {
                a.qp_state = ibv_qp_state::IBV_QPS_ERR;
                m(ibv_qp_attr_mask::IBV_QP_STATE)
            }
        };
        // SAFETY: `raw` is a live queue pair owned here; `a` is initialised for `mask`.
        ret("ibv_modify_qp", unsafe { ibv_modify_qp(raw, &mut a, mask) })
    }

    fn post_recv(&mut self, qp: QpId, wr_id: u64, sge: Sge) -> Result<(), VerbsError> {
        if wr_id >= WR_ID_LIMIT {
            return Err(VerbsError::Invalid("wr_id top bit set"));
        }
        let raw = self.qp(qp)?;
        let mut s = self.sge(&sge)?;
        let mut wr = ibv_recv_wr {
            wr_id: wr_id | WR_ID_LIMIT,
            next: ptr::null_mut(),
            sg_list: &mut s,
            num_sge: 1,
        };
        let mut bad = ptr::null_mut();
        // SAFETY: `raw` is live; `wr` and `s` are valid for the call (libibverbs copies them);
        // the SGE lies inside a registered region (checked by `sge`).
        ret("ibv_post_recv", unsafe {
            ibv_post_recv(raw, &mut wr, &mut bad)
        })
    }

    fn post_send(&mut self, qp: QpId, wr: SendWr) -> Result<(), VerbsError> {
        if wr.wr_id >= WR_ID_LIMIT {
            return Err(VerbsError::Invalid("wr_id top bit set"));
        }
        let raw = self.qp(qp)?;
        let mut s = match &wr.sge {
            Some(sge) => Some(self.sge(sge)?),
            None => None,
        };
        // SAFETY: ibv_send_wr is pointers, integers and unions of integers; all-zero is valid.
        let mut w: ibv_send_wr = unsafe { mem::zeroed() };
        w.wr_id = wr.wr_id;
        w.opcode = ibv_wr_opcode::IBV_WR_SEND_WITH_IMM;
        w.send_flags = ibv_send_flags::IBV_SEND_SIGNALED.0;
        w.imm_data_invalidated_rkey_union.imm_data = wr.imm.to_be();
        if let Some(s) = s.as_mut() {
            w.sg_list = s;
            w.num_sge = 1;
        }
        let mut bad = ptr::null_mut();
        // SAFETY: `raw` is live; `w` and the SGE are valid for the call (copied by the
        // provider); the SGE lies inside a registered region (checked by `sge`).
        ret("ibv_post_send", unsafe {
            ibv_post_send(raw, &mut w, &mut bad)
        })
    }

    fn poll_cq(&mut self, out: &mut [Completion]) -> Result<usize, VerbsError> {
        // SAFETY: ibv_wc is integers and a union of integers; all-zero is valid.
        let mut wcs: [ibv_wc; POLL_BATCH] = unsafe { mem::zeroed() };
        let want = out.len().min(POLL_BATCH) as i32;
        // SAFETY: `cq` is live and `wcs` has room for `want` entries.
        let n = unsafe { ibv_poll_cq(self.cq, want, wcs.as_mut_ptr()) };
        if n < 0 {
            return Err(VerbsError::Os {
                call: "ibv_poll_cq",
                errno: -n,
            });
        }
        for (o, wc) in out.iter_mut().zip(&wcs[..n as usize]) {
            let recv = wc.wr_id & WR_ID_LIMIT != 0;
            let with_imm = wc.wc_flags & ibv_wc_flags::IBV_WC_WITH_IMM.0 != 0;
            *o = Completion {
                wr_id: wc.wr_id & !WR_ID_LIMIT,
                qpn: wc.qp_num,
                op: if recv { WcOp::Recv } else { WcOp::Send },
                status: status(wc.status),
                byte_len: if recv { wc.byte_len } else { 0 },
                // SAFETY: both union members are u32; reading either is always defined.
                imm: with_imm
                    .then(|| u32::from_be(unsafe { wc.imm_data_invalidated_rkey_union.imm_data })),
            };
        }
        Ok(n as usize)
    }

    fn destroy_qp(&mut self, qp: QpId) -> Result<(), VerbsError> {
        let raw = self.qp(qp)?;
        // SAFETY: `raw` is live and removed from the map right after, so it is destroyed once.
        let rc = unsafe { ibv_destroy_qp(raw) };
        self.qps.remove(&qp.0);
        ret("ibv_destroy_qp", rc)
    }

    fn cq_fd(&self) -> Result<Option<OwnedFd>, VerbsError> {
        // SAFETY: `channel` is live from open until Drop, so its descriptor is open for the
        // duration of this borrow; the duplicate is owned by the caller and outlives nothing.
        let fd = unsafe { BorrowedFd::borrow_raw((*self.channel).fd) };
        fd.try_clone_to_owned()
            .map(Some)
            .map_err(|e| VerbsError::Os {
                call: "dup(completion channel)",
                errno: e.raw_os_error().unwrap_or(0),
            })
    }

    fn arm_cq(&mut self) -> Result<(), VerbsError> {
        // SAFETY: `cq` is live; 0 asks for any completion, not only solicited ones.
        ret("ibv_req_notify_cq", unsafe {
            ibv_req_notify_cq(self.cq, 0)
        })
    }

    fn take_cq_events(&mut self) -> Result<u32, VerbsError> {
        let mut n = 0u32;
        let result = loop {
            let mut cq = ptr::null_mut();
            let mut cq_ctx = ptr::null_mut();
            // SAFETY: `channel` is live and non-blocking (set in open_device), so this returns
            // at once; both out-pointers are valid.
            if unsafe { ibv_get_cq_event(self.channel, &mut cq, &mut cq_ctx) } == 0 {
                n += 1;
                continue;
            }
            let e = io::Error::last_os_error();
            break match e.kind() {
                io::ErrorKind::WouldBlock => Ok(n),
                io::ErrorKind::Interrupted => continue,
                _ => Err(VerbsError::Os {
                    call: "ibv_get_cq_event",
                    errno: e.raw_os_error().unwrap_or(0),
                }),
            };
        };
        if n > 0 {
            // Every event taken is acknowledged at once (ibv_destroy_cq waits for unacked
            // events). The channel serves only `cq`, so each event was for it.
            // SAFETY: `cq` is live and `n` events for it were taken above.
            unsafe { ibv_ack_cq_events(self.cq, n) };
        }
        result
    }
}

fn status(s: ibv_wc_status::Type) -> WcStatus {
    use ibv_wc_status::*;
    match s {
        IBV_WC_SUCCESS => WcStatus::Success,
        IBV_WC_WR_FLUSH_ERR => WcStatus::Flushed,
        IBV_WC_RETRY_EXC_ERR => WcStatus::RetryExceeded,
        IBV_WC_RNR_RETRY_EXC_ERR => WcStatus::RnrRetryExceeded,
        IBV_WC_REM_INV_REQ_ERR | IBV_WC_REM_ACCESS_ERR | IBV_WC_REM_OP_ERR => WcStatus::Remote(s),
        IBV_WC_LOC_LEN_ERR | IBV_WC_LOC_QP_OP_ERR | IBV_WC_LOC_PROT_ERR | IBV_WC_LOC_ACCESS_ERR => {
            WcStatus::Local(s)
        }
        other => WcStatus::Other(other),
    }
}

impl Drop for RdmaSysVerbs {
    fn drop(&mut self) {
        for (_, qp) in std::mem::take(&mut self.qps) {
            // SAFETY: each queue pair is live and owned here; destroyed once (map emptied).
            unsafe { ibv_destroy_qp(qp) };
        }
        for r in self.regions.drain(..) {
            // SAFETY: `r.mr` is registered and deregistered once; after that the device no
            // longer uses `r.buf`, which came from Box::into_raw and is freed once.
            unsafe {
                ibv_dereg_mr(r.mr);
                drop(Box::from_raw(r.buf));
            }
        }
        if !self.cq.is_null() {
            // SAFETY: live, created by open_device, no queue pair uses it any more.
            unsafe { ibv_destroy_cq(self.cq) };
        }
        if !self.channel.is_null() {
            // SAFETY: live; its only CQ was destroyed above (every event was acknowledged).
            unsafe { ibv_destroy_comp_channel(self.channel) };
        }
        if !self.pd.is_null() {
            // SAFETY: live; its regions and queue pairs were released above.
            unsafe { ibv_dealloc_pd(self.pd) };
        }
        // SAFETY: `ctx` is the open context; everything created from it was released above.
        unsafe { ibv_close_device(self.ctx) };
    }
}
