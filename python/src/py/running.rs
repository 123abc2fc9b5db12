//! `lifeline._lifeline.RunningNode` and `start`: a node on its own runtime
//! ([`crate::running::Running`]), seen from Python.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Instant;

use bytes::Bytes;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use super::{ev_to_py, run_err, seconds, StartError, SLICE};
use crate::running::{self as run, Running, StartOptions, Transport};

/// A node running over the TCP (or QUIC) driver on its own runtime threads (`lifeline-rt`),
/// made by `start`. Commands release the GIL; events are read with `recv`/`try_recv`/`wait`.
#[pyclass(module = "lifeline._lifeline")]
pub(crate) struct RunningNode {
    inner: Running,
}

#[pymethods]
impl RunningNode {
    /// This rank.
    #[getter]
    fn rank(&self) -> u32 {
        self.inner.info().rank
    }

    /// The address this node listens on (`host:port`).
    #[getter]
    fn addr(&self) -> String {
        self.inner.info().addr.to_string()
    }

    /// Ranks at start (`0..span`).
    #[getter]
    fn span(&self) -> u32 {
        self.inner.info().span
    }

    /// The launcher found by `bootstrap="env"` (e.g. `torchrun`), else `None`.
    #[getter]
    fn launcher(&self) -> Option<String> {
        self.inner.info().launcher.clone()
    }

    /// The process that started the node.
    #[getter]
    fn pid(&self) -> u32 {
        self.inner.pid()
    }

    /// Whether the node is closed.
    #[getter]
    fn closed(&self) -> bool {
        self.inner.is_closed()
    }

    /// The next event as `(kind, fields...)`, waiting up to `timeout` seconds (`None`: for
    /// ever) with the GIL released, in slices between which signals are checked (Ctrl-C raises
    /// `KeyboardInterrupt`); `None` when the timeout passed.
    #[pyo3(signature = (timeout = None))]
    fn recv(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Option<Py<PyAny>>> {
        let deadline = match timeout {
            Some(t) => Some(Instant::now() + seconds("timeout", t)?),
            None => None,
        };
        loop {
            let slice = deadline.map_or(SLICE, |d| {
                d.saturating_duration_since(Instant::now()).min(SLICE)
            });
            let ev = py.detach(|| self.inner.recv(slice)).map_err(run_err)?;
            if let Some(ev) = ev {
                return ev_to_py(py, ev).map(Some);
            }
            py.check_signals()?;
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Ok(None);
            }
        }
    }

    /// The next event if one is ready now, else `None` (never blocks).
    fn try_recv(&self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
        match self.inner.try_recv().map_err(run_err)? {
            Some(ev) => ev_to_py(py, ev).map(Some),
            None => Ok(None),
        }
    }

    /// Waits up to `timeout` seconds (at most one slice is advised) for an event without
    /// taking it; whether one is ready. For an executor thread of an asyncio loop.
    fn wait(&self, py: Python<'_>, timeout: f64) -> PyResult<bool> {
        let t = seconds("timeout", timeout)?;
        py.detach(|| self.inner.wait(t)).map_err(run_err)
    }

    /// Reliable broadcast of `data` under `tag` (1, or 16 and above) to every member; its
    /// sequence number.
    fn xcast(&self, py: Python<'_>, tag: u16, data: &[u8]) -> PyResult<u64> {
        let p = Bytes::copy_from_slice(data);
        py.detach(|| self.inner.xcast(tag, p)).map_err(run_err)
    }

    /// Reliable message of `data` under `tag` to `dst`; its uid.
    fn relm_send(&self, py: Python<'_>, dst: u32, tag: u16, data: &[u8]) -> PyResult<u32> {
        let p = Bytes::copy_from_slice(data);
        py.detach(|| self.inner.relm_send(dst, tag, p))
            .map_err(run_err)
    }

    /// Best-effort flood of `data` to every rank; its id.
    fn flood(&self, py: Python<'_>, data: &[u8]) -> PyResult<u64> {
        let p = Bytes::copy_from_slice(data);
        py.detach(|| self.inner.flood(p)).map_err(run_err)
    }

    /// Declares `ranks` dead on the caller's word (its launcher saw them exit).
    fn declare_dead(&self, py: Python<'_>, ranks: Vec<u32>) -> PyResult<()> {
        py.detach(|| self.inner.declare_dead(ranks))
            .map_err(run_err)
    }

    /// Revokes `group` as of `epoch`: `Revoked` here and at every live rank once.
    fn revoke(&self, py: Python<'_>, group: u64, epoch: u64) -> PyResult<()> {
        py.detach(|| self.inner.revoke(group, epoch))
            .map_err(run_err)
    }

    /// Starts a shrink campaign removing `targets` on purpose; its id (`requester << 32 | seq`).
    fn shrink(&self, py: Python<'_>, targets: Vec<u32>) -> PyResult<u64> {
        py.detach(|| self.inner.shrink(&targets)).map_err(run_err)
    }

    /// Waits up to `timeout` seconds until no send queue is over its bound; whether so.
    fn writable(&self, py: Python<'_>, timeout: f64) -> PyResult<bool> {
        let t = seconds("timeout", timeout)?;
        py.detach(|| self.inner.writable(t)).map_err(run_err)
    }

    /// The agreed view: `(epoch, span, removed, members)`.
    fn view(&self, py: Python<'_>) -> PyResult<(u64, u32, Vec<u32>, Vec<u32>)> {
        let v = py.detach(|| self.inner.view()).map_err(run_err)?;
        Ok((v.epoch, v.span, v.removed, v.members))
    }

    /// The transport's and the core's counters.
    fn stats(&self, py: Python<'_>) -> PyResult<BTreeMap<String, u64>> {
        let s = py.detach(|| self.inner.stats()).map_err(run_err)?;
        Ok(s.into_iter().collect())
    }

    /// Stops the node (idempotent): connections close, the runtime's threads end.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        py.detach(|| self.inner.close()).map_err(run_err)
    }
}

/// Starts a node (see `lifeline.start` for the arguments); waits for it with the GIL released,
/// checking signals between slices.
#[pyfunction]
#[pyo3(signature = (
    rank = None, peers = None, *, bootstrap = None, rendezvous = None, listen = None,
    key = None, transport = "tcp", cert_dir = None, cluster = None, radix = 8, detect = true,
    link_timeout = 3.0, dial_attempts = 10, startup_grace = 10.0, check_in = true,
    startup_timeout = None, bootstrap_timeout = 60.0, join_batch = 0.02, output_buffer = 4096,
    seed = None, config = None
))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn start(
    py: Python<'_>,
    rank: Option<u32>,
    peers: Option<Vec<(u32, String)>>,
    bootstrap: Option<&str>,
    rendezvous: Option<String>,
    listen: Option<String>,
    key: Option<Vec<u8>>,
    transport: &str,
    cert_dir: Option<PathBuf>,
    cluster: Option<String>,
    radix: u32,
    detect: bool,
    link_timeout: f64,
    dial_attempts: u32,
    startup_grace: f64,
    check_in: bool,
    startup_timeout: Option<f64>,
    bootstrap_timeout: f64,
    join_batch: f64,
    output_buffer: usize,
    seed: Option<u64>,
    config: Option<BTreeMap<String, u64>>,
) -> PyResult<RunningNode> {
    let bootstrap_env = match bootstrap {
        None => false,
        Some("env") => true,
        Some(other) => {
            return Err(PyValueError::new_err(format!(
                "bootstrap={other:?}: the only source is \"env\""
            )))
        }
    };
    let transport = match (transport, cert_dir, cluster) {
        ("tcp", None, None) => Transport::Tcp,
        ("tcp", _, _) => {
            return Err(PyValueError::new_err(
                "cert_dir and cluster are for transport=\"quic\"",
            ))
        }
        ("quic", Some(cert_dir), Some(cluster)) => Transport::Quic { cert_dir, cluster },
        ("quic", _, _) => {
            return Err(PyValueError::new_err(
                "transport=\"quic\" needs cert_dir and cluster",
            ))
        }
        (other, _, _) => {
            return Err(PyValueError::new_err(format!(
                "transport={other:?}: \"tcp\" or \"quic\""
            )))
        }
    };
    let opts = StartOptions {
        rank,
        peers: peers.unwrap_or_default(),
        bootstrap_env,
        rendezvous,
        listen,
        key,
        transport,
        radix,
        detect,
        link_timeout: seconds("link_timeout", link_timeout)?,
        dial_attempts,
        startup_grace: seconds("startup_grace", startup_grace)?,
        check_in,
        startup_timeout: startup_timeout
            .map(|s| seconds("startup_timeout", s))
            .transpose()?,
        bootstrap_timeout: seconds("bootstrap_timeout", bootstrap_timeout)?,
        join_batch: seconds("join_batch", join_batch)?,
        output_buffer,
        seed,
        config: config.unwrap_or_default().into_iter().collect(),
    };
    let mut starting = Some(Running::start(opts).map_err(start_err)?);
    loop {
        let s = starting.take().expect("put back below");
        match py.detach(|| s.poll(SLICE)) {
            Ok(Ok(inner)) => return Ok(RunningNode { inner }),
            Ok(Err(e)) => return Err(start_err(e)),
            Err(s) => starting = Some(s),
        }
        // An interrupt drops `starting`: the start task is abandoned with its runtime.
        py.check_signals()?;
    }
}

fn start_err(e: run::StartError) -> PyErr {
    match e {
        run::StartError::Usage(s) => PyValueError::new_err(s),
        run::StartError::Failed(s) => StartError::new_err(s),
    }
}
