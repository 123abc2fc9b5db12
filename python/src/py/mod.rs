//! The pyo3 glue: the module `lifeline._lifeline`, its exceptions, and the conversion of events
//! into the tuples the pure-Python layer (`lifeline/_events.py`) turns into typed objects.
//!
//! Every blocking call releases the GIL (`py.detach`); waits for events run in slices of
//! [`SLICE`] with `py.check_signals()` between two slices, so Ctrl-C interrupts them. Bad input
//! is a Python exception (`TypeError`/`OverflowError` from argument conversion, `ValueError`
//! from the checks here), never a panic.

mod node;
mod running;

use std::time::Duration;

use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::events::Ev;
use crate::running::RunError;

/// How long one wait for events lasts with the GIL released before signals are checked.
pub(crate) const SLICE: Duration = Duration::from_millis(100);

create_exception!(
    _lifeline,
    LifelineError,
    PyException,
    "Base class of Lifeline's errors."
);
create_exception!(
    _lifeline,
    Backpressure,
    LifelineError,
    "A queue is full (send queue, unacknowledged window, unread events): read events, wait, retry."
);
create_exception!(
    _lifeline,
    NotAMember,
    LifelineError,
    "This rank, or the destination, is not a member of the cluster."
);
create_exception!(
    _lifeline,
    Leaving,
    LifelineError,
    "This rank is leaving (a shrink campaign named it): it takes no new commands, and leaves once drained and excluded."
);
create_exception!(
    _lifeline,
    Unreachable,
    LifelineError,
    "The destination is alive but no route reaches it now."
);
create_exception!(
    _lifeline,
    Closed,
    LifelineError,
    "The node is closed (or its driver stopped)."
);
create_exception!(
    _lifeline,
    ForkError,
    LifelineError,
    "The node was started by another process: it cannot be used in a fork's child."
);
create_exception!(
    _lifeline,
    StartError,
    LifelineError,
    "The node could not start (binding, the rendezvous, the certificates)."
);

/// A running node's refusal as a Python exception.
pub(crate) fn run_err(e: RunError) -> PyErr {
    let s = e.to_string();
    match e {
        RunError::Forked { .. } => ForkError::new_err(s),
        RunError::Closed => Closed::new_err(s),
        RunError::Backpressure(_) => Backpressure::new_err(s),
        RunError::NotAMember(_) => NotAMember::new_err(s),
        RunError::Unreachable(_) => Unreachable::new_err(s),
        RunError::Leaving(_) => Leaving::new_err(s),
        RunError::TooLarge(_) | RunError::Invalid(_) => PyValueError::new_err(s),
    }
}

/// A timeout in seconds from Python: finite and not negative.
pub(crate) fn seconds(what: &str, s: f64) -> PyResult<Duration> {
    Duration::try_from_secs_f64(s)
        .map_err(|_| PyValueError::new_err(format!("{what}: {s} is not a duration in seconds")))
}

/// One event as `(kind, fields...)`; the kinds are `lifeline/_events.py`'s.
pub(crate) fn ev_to_py(py: Python<'_>, ev: Ev) -> PyResult<Py<PyAny>> {
    let b = |p: &[u8]| PyBytes::new(py, p);
    let o = match ev {
        Ev::XcastDelivered {
            origin,
            seq,
            op,
            tag,
            payload,
        } => ("xcast_delivered", origin, seq, op, tag, b(&payload))
            .into_pyobject(py)?
            .into_any(),
        Ev::XcastCompleted { seq, op } => {
            ("xcast_completed", seq, op).into_pyobject(py)?.into_any()
        }
        Ev::RelmDelivered {
            src,
            uid,
            tag,
            payload,
        } => ("relm_delivered", src, uid, tag, b(&payload))
            .into_pyobject(py)?
            .into_any(),
        Ev::RelmAcked { dst, upto } => ("relm_acked", dst, upto).into_pyobject(py)?.into_any(),
        Ev::RelmFailed { dst, first, count } => ("relm_failed", dst, first, count)
            .into_pyobject(py)?
            .into_any(),
        Ev::ViewChanged {
            epoch,
            removed,
            members,
        } => ("view_changed", epoch, removed, members)
            .into_pyobject(py)?
            .into_any(),
        Ev::Joined {
            epoch,
            joiners,
            members,
        } => ("joined", epoch, joiners, members)
            .into_pyobject(py)?
            .into_any(),
        Ev::CheckedIn {
            epoch,
            ranks,
            members,
        } => ("checked_in", epoch, ranks, members)
            .into_pyobject(py)?
            .into_any(),
        Ev::Ready { epoch, members } => ("ready", epoch, members).into_pyobject(py)?.into_any(),
        Ev::StartupIncomplete {
            epoch,
            missing,
            members,
        } => ("startup_incomplete", epoch, missing, members)
            .into_pyobject(py)?
            .into_any(),
        Ev::Evicted { epoch } => ("evicted", epoch).into_pyobject(py)?.into_any(),
        Ev::Departed {
            epoch,
            ranks,
            campaigns,
            members,
        } => ("departed", epoch, ranks, campaigns, members)
            .into_pyobject(py)?
            .into_any(),
        Ev::Left { epoch } => ("left", epoch).into_pyobject(py)?.into_any(),
        Ev::CampaignCompleted { id, removed, epoch } => ("campaign_completed", id, removed, epoch)
            .into_pyobject(py)?
            .into_any(),
        Ev::CampaignFailed { id, reason } => ("campaign_failed", id, reason)
            .into_pyobject(py)?
            .into_any(),
        Ev::Revoked {
            group,
            epoch,
            origin,
            hops,
        } => ("revoked", group, epoch, origin, hops)
            .into_pyobject(py)?
            .into_any(),
        Ev::RelayStarted { peer, via } => {
            ("relay_started", peer, via).into_pyobject(py)?.into_any()
        }
        Ev::RelayEnded { peer } => ("relay_ended", peer).into_pyobject(py)?.into_any(),
        Ev::FloodDelivered {
            origin,
            id,
            payload,
        } => ("flood_delivered", origin, id, b(&payload))
            .into_pyobject(py)?
            .into_any(),
        Ev::Suspected { rank } => ("suspected", rank).into_pyobject(py)?.into_any(),
        Ev::TreeChanged { slot, parent } => {
            ("tree_changed", slot, parent).into_pyobject(py)?.into_any()
        }
        Ev::LinkUp { peer } => ("link_up", peer).into_pyobject(py)?.into_any(),
        Ev::LinkDown { peer, reason } => ("link_down", peer, reason).into_pyobject(py)?.into_any(),
        Ev::Other { name, detail } => ("other", name, detail).into_pyobject(py)?.into_any(),
    };
    Ok(o.unbind())
}

/// The extension module: the sans-IO `Node`, `RunningNode` and `start`, the exceptions, the
/// config keys.
#[pymodule]
fn _lifeline(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add_class::<node::Node>()?;
    m.add_class::<running::RunningNode>()?;
    m.add_function(wrap_pyfunction!(running::start, m)?)?;
    m.add("LifelineError", py.get_type::<LifelineError>())?;
    m.add("Backpressure", py.get_type::<Backpressure>())?;
    m.add("NotAMember", py.get_type::<NotAMember>())?;
    m.add("Unreachable", py.get_type::<Unreachable>())?;
    m.add("Leaving", py.get_type::<Leaving>())?;
    m.add("Closed", py.get_type::<Closed>())?;
    m.add("ForkError", py.get_type::<ForkError>())?;
    m.add("StartError", py.get_type::<StartError>())?;
    m.add("CONFIG_KEYS", crate::config::KEYS.clone())?;
    m.add("FIRST_APP_TAG", lifeline_core::xcast::FIRST_APP_TAG)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
