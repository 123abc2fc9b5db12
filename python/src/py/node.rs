//! `lifeline._lifeline.Node`: the sans-IO core, one-to-one with the driving contract
//! (`lifeline_core` crate docs). Times are nanoseconds from an origin the caller picks.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};

use bytes::Bytes;
use lifeline_core::tree::{Rank, RankSet};
use lifeline_core::{Class, Instant, LinkCause};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use super::{ev_to_py, run_err, ForkError};
use crate::events::Members;
use crate::running::RunError;

/// `poll_transmit`'s answer: `(to, class, frame, fence)`.
type PyTransmit<'py> = (u32, &'static str, Bound<'py, PyBytes>, bool);

struct State {
    node: lifeline_core::Node,
    members: Members,
}

/// One rank's protocol state, driven by the caller: feed inputs (`handle_*`, commands), drain
/// outputs (`poll_transmit`, `poll_event`) after each, arm one timer at `poll_timeout`.
#[pyclass(module = "lifeline._lifeline")]
pub(crate) struct Node {
    state: Mutex<State>,
    pid: u32,
}

fn cause(s: &str) -> PyResult<LinkCause> {
    Ok(match s {
        "refused" => LinkCause::Refused,
        "incarnation" => LinkCause::Incarnation,
        "reset" => LinkCause::Reset,
        "timed_out" => LinkCause::TimedOut,
        "closed" => LinkCause::Closed,
        _ => {
            return Err(PyValueError::new_err(format!(
                "link-down cause {s:?}: one of refused, incarnation, reset, timed_out, closed"
            )))
        }
    })
}

impl Node {
    /// The state, after the fork check.
    fn state(&self) -> PyResult<MutexGuard<'_, State>> {
        let now = std::process::id();
        if now != self.pid {
            return Err(ForkError::new_err(
                RunError::Forked {
                    started: self.pid,
                    now,
                }
                .to_string(),
            ));
        }
        Ok(self.state.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Runs `f` on the state with the GIL released.
    fn with<R: Send>(&self, py: Python<'_>, f: impl FnOnce(&mut State) -> R + Send) -> PyResult<R> {
        let mut s = self.state()?;
        let s = &mut *s;
        Ok(py.detach(move || f(s)))
    }
}

#[pymethods]
impl Node {
    /// A node for `rank` of a tree of `span` rank positions with `radix`; `config` sets core
    /// settings by key (`CONFIG_KEYS`), `dead` lists holes (ranks that never start).
    #[new]
    #[pyo3(signature = (rank, span, radix = 8, *, seed = 0, now_ns = 0, config = None, dead = None))]
    fn new(
        rank: u32,
        span: u32,
        radix: u32,
        seed: u64,
        now_ns: u64,
        config: Option<BTreeMap<String, u64>>,
        dead: Option<Vec<u32>>,
    ) -> PyResult<Self> {
        let mut cfg = lifeline_core::Config::new(span, radix);
        for (k, v) in config.unwrap_or_default() {
            crate::config::set(&mut cfg, &k, v)
                .map_err(|e| PyValueError::new_err(e.to_string()))?;
        }
        for d in dead.unwrap_or_default() {
            cfg.dead.insert(Rank(d));
        }
        let members = Members::from_config(&cfg);
        let node = lifeline_core::Node::new(cfg, Rank(rank), seed, Instant::from_nanos(now_ns))
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
        Ok(Self {
            state: Mutex::new(State { node, members }),
            pid: std::process::id(),
        })
    }

    /// This rank.
    #[getter]
    fn rank(&self) -> PyResult<u32> {
        Ok(self.state()?.node.me().0)
    }

    /// The node's protocol time (the latest `now` fed), in nanoseconds.
    fn now_ns(&self) -> PyResult<u64> {
        Ok(self.state()?.node.now().as_nanos())
    }

    /// A whole frame from `src`, received at `now_ns`.
    fn handle_frame(&self, py: Python<'_>, now_ns: u64, src: u32, frame: &[u8]) -> PyResult<()> {
        let frame = Bytes::copy_from_slice(frame);
        self.with(py, move |s| {
            s.node
                .handle_frame(Instant::from_nanos(now_ns), Rank(src), frame)
        })
    }

    /// The link to `peer` is established.
    fn handle_link_up(&self, py: Python<'_>, now_ns: u64, peer: u32) -> PyResult<()> {
        self.with(py, move |s| {
            s.node
                .handle_link_up(Instant::from_nanos(now_ns), Rank(peer))
        })
    }

    /// The link to `peer` is lost, with the evidence: `refused`, `incarnation` (hard), `reset`,
    /// `timed_out`, `closed` (soft).
    #[pyo3(signature = (now_ns, peer, cause = "reset"))]
    fn handle_link_down(
        &self,
        py: Python<'_>,
        now_ns: u64,
        peer: u32,
        cause: &str,
    ) -> PyResult<()> {
        let c = self::cause(cause)?;
        self.with(py, move |s| {
            s.node
                .handle_link_down(Instant::from_nanos(now_ns), Rank(peer), c)
        })
    }

    /// The deadline of `poll_timeout` passed.
    fn handle_timeout(&self, py: Python<'_>, now_ns: u64) -> PyResult<()> {
        self.with(py, move |s| {
            s.node.handle_timeout(Instant::from_nanos(now_ns))
        })
    }

    /// The next frame to send, `(to, class, frame, fence)` with class `"control"` or `"data"`,
    /// or `None`.
    fn poll_transmit<'py>(&self, py: Python<'py>) -> PyResult<Option<PyTransmit<'py>>> {
        let t = self.state()?.node.poll_transmit();
        Ok(t.map(|t| {
            let class = match t.class {
                Class::Control => "control",
                Class::Data => "data",
            };
            (t.to.0, class, PyBytes::new(py, &t.frame), t.is_fence())
        }))
    }

    /// The next event as `(kind, fields...)`, or `None`.
    fn poll_event(&self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
        let ev = {
            let mut s = self.state()?;
            let s = &mut *s;
            s.node.poll_event().map(|e| s.members.convert(e))
        };
        ev.map(|e| ev_to_py(py, e)).transpose()
    }

    /// When to call `handle_timeout` (nanoseconds), or `None` when no timer is armed.
    fn poll_timeout(&self) -> PyResult<Option<u64>> {
        Ok(self
            .state()?
            .node
            .poll_timeout()
            .map(|(at, _)| at.as_nanos()))
    }

    /// Reliable broadcast of `data` under `tag` (1, or 16 and above); its sequence number.
    fn xcast(&self, py: Python<'_>, now_ns: u64, tag: u16, data: &[u8]) -> PyResult<u64> {
        let p = Bytes::copy_from_slice(data);
        self.with(py, move |s| {
            s.node.xcast(Instant::from_nanos(now_ns), tag, p)
        })?
        .map_err(|e| run_err(e.into()))
    }

    /// Reliable message of `data` under `tag` to `dst`; its uid.
    fn relm_send(
        &self,
        py: Python<'_>,
        now_ns: u64,
        dst: u32,
        tag: u16,
        data: &[u8],
    ) -> PyResult<u32> {
        let p = Bytes::copy_from_slice(data);
        self.with(py, move |s| {
            s.node
                .relm_send(Instant::from_nanos(now_ns), Rank(dst), tag, p)
        })?
        .map(|u| u.get())
        .map_err(|e| run_err(e.into()))
    }

    /// Best-effort flood of `data` to every rank; its id.
    fn flood(&self, py: Python<'_>, now_ns: u64, data: &[u8]) -> PyResult<u64> {
        let p = Bytes::copy_from_slice(data);
        self.with(py, move |s| s.node.flood(Instant::from_nanos(now_ns), p))?
            .map_err(|e| run_err(e.into()))
    }

    /// Declares `ranks` dead on the caller's word and repairs once.
    fn declare_dead(&self, py: Python<'_>, now_ns: u64, ranks: Vec<u32>) -> PyResult<()> {
        let mut set = RankSet::default();
        for r in ranks {
            set.insert(Rank(r));
        }
        self.with(py, move |s| {
            s.node.declare_dead(Instant::from_nanos(now_ns), &set)
        })?
        .map_err(|e| run_err(e.into()))
    }

    /// Grows the span to `new_span` (ranks granted out of band).
    fn grow(&self, py: Python<'_>, now_ns: u64, new_span: u32) -> PyResult<()> {
        self.with(py, move |s| {
            s.node.grow(Instant::from_nanos(now_ns), new_span)
        })?
        .map_err(|e| run_err(e.into()))
    }

    /// Revokes `group` as of `epoch`: `Revoked` here now and at every live rank once.
    fn revoke(&self, py: Python<'_>, now_ns: u64, group: u64, epoch: u64) -> PyResult<()> {
        self.with(py, move |s| {
            s.node.revoke(Instant::from_nanos(now_ns), group, epoch)
        })?
        .map_err(|e| run_err(e.into()))
    }

    /// Starts a shrink campaign removing `targets` on purpose; its id (`requester << 32 | seq`).
    fn shrink(&self, py: Python<'_>, now_ns: u64, targets: Vec<u32>) -> PyResult<u64> {
        let set = crate::shrink::targets(&targets).map_err(run_err)?;
        self.with(py, move |s| {
            s.node.shrink(Instant::from_nanos(now_ns), &set)
        })?
        .map(crate::shrink::campaign_id)
        .map_err(|e| run_err(e.into()))
    }

    /// The agreed view: `(epoch, span, removed, members)`.
    fn view(&self) -> PyResult<(u64, u32, Vec<u32>, Vec<u32>)> {
        let v: crate::running::ViewInfo = self.state()?.node.view().into();
        Ok((v.epoch, v.span, v.removed, v.members))
    }

    /// The members as this node's events told them (ascending).
    fn members(&self) -> PyResult<Vec<u32>> {
        Ok(self.state()?.members.to_vec())
    }

    /// The ranks this node has a tree link to (or wants one to).
    fn links(&self) -> PyResult<Vec<u32>> {
        Ok(self.state()?.node.links().map(|r| r.0).collect())
    }

    /// The core's counters.
    fn stats(&self) -> PyResult<BTreeMap<String, u64>> {
        let s = self.state()?;
        Ok(crate::running::core_stats(&s.node).into_iter().collect())
    }
}
