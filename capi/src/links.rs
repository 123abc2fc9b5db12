//! `lifeline_links`: the core's link policy ([`lifeline_core::link::LinkPolicy`]) one-to-one,
//! for a C transport that owns its sockets: which `(peer, slot)` connections to dial, when to
//! re-dial, when to give a peer up, and which of two simultaneous connections wins.
//!
//! Drive it like the node: feed what happened with the same monotonic clock (ns), drain
//! `lifeline_links_poll_action` to `LIFELINE_DONE` after every input, and arm the timer at the
//! earlier of `lifeline_node_poll_timeout` and `lifeline_links_poll_timeout`. The "alive"
//! predicate of the policy is the node's view: pass the `lifeline_node` the links serve (a rank
//! is linkable when it is not the node itself and the node knows it alive).

use std::cell::Cell;
use std::collections::BTreeMap;

use lifeline_core::link::{
    AcceptVerdict, AttemptId, DialOutcome, LinkAction as CoreAction, LinkConfig, LinkDownReason,
    LinkPolicy,
};
use lifeline_core::time::Duration;
use lifeline_core::tree::Rank;

use crate::node::{now, put, Node};
use crate::result::*;
use crate::{catch, LIFELINE_NEVER};

/// `lifeline_link_action.kind`: dial `peer` for `slot` and feed the outcome back with `attempt`.
pub const LIFELINE_LINK_ACTION_DIAL: u32 = 0;
/// `lifeline_link_action.kind`: every slot to `peer` is connected: call
/// `lifeline_node_handle_link_up`.
pub const LIFELINE_LINK_ACTION_UP: u32 = 1;
/// `lifeline_link_action.kind`: the policy gave `peer` up and forgot it: close its connections
/// and see `reason`.
pub const LIFELINE_LINK_ACTION_DOWN: u32 = 2;

/// `lifeline_link_action.reason`: dials failed too often: tell the node
/// (`lifeline_node_handle_link_down`, cause `LIFELINE_LINK_REFUSED` if the last dial was
/// refused, else `LIFELINE_LINK_TIMED_OUT`).
pub const LIFELINE_LINK_DOWN_UNREACHABLE: u32 = 0;
/// `lifeline_link_action.reason`: the node already knows the peer dead (`retain_alive`): close,
/// do not tell the node.
pub const LIFELINE_LINK_DOWN_DEAD: u32 = 1;

/// `lifeline_links_handle_accepted` verdict: run the connection (it replaces any other of the
/// slot); answer the dialer `LIFELINE_VERDICT_ACCEPT`.
pub const LIFELINE_ACCEPT: u32 = 0;
/// `lifeline_links_handle_accepted` verdict: this side's connection wins: answer
/// `LIFELINE_VERDICT_DUPLICATE` and close.
pub const LIFELINE_ACCEPT_DUPLICATE: u32 = 1;
/// `lifeline_links_handle_accepted` verdict: refuse (ask `lifeline_node_fence_verdict` whether
/// to answer `LIFELINE_VERDICT_REMOVED` instead of `LIFELINE_VERDICT_REFUSE`) and close.
pub const LIFELINE_ACCEPT_REFUSE: u32 = 2;

/// Dial outcome: connected, and the acceptor answered "accept".
pub const LIFELINE_DIAL_CONNECTED: u32 = 0;
/// Dial outcome: `ECONNREFUSED` (nothing listens: the process is gone).
pub const LIFELINE_DIAL_REFUSED: u32 = 1;
/// Dial outcome: any other failure (connect error or timeout, failed handshake, refusal).
pub const LIFELINE_DIAL_FAILED: u32 = 2;
/// Dial outcome: the acceptor answered "duplicate" (its own connection wins; not a failure).
pub const LIFELINE_DIAL_DUPLICATE: u32 = 3;

/// The link policy's tuning (the core's `LinkConfig`); `lifeline_links_config_default` fills
/// the defaults (8 attempts, 3 refused, 10 s grace, back-off 50 ms doubling to 1 s).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LinksConfig {
    /// Failed dials in a row (per slot) before the peer is given up. At least 1.
    pub dial_attempts: u32,
    /// After `startup_grace_ns`, a refused dial gives up after `min(refused_attempts,
    /// dial_attempts)`. At least 1.
    pub refused_attempts: u32,
    /// How long after creation a refused dial counts like any failure (ns).
    pub startup_grace_ns: u64,
    /// First re-dial delay (ns), doubling per failure; at most `backoff_max_ns`.
    pub backoff_initial_ns: u64,
    /// Longest re-dial delay (ns).
    pub backoff_max_ns: u64,
}

impl From<LinkConfig> for LinksConfig {
    fn from(c: LinkConfig) -> Self {
        Self {
            dial_attempts: c.dial_attempts,
            refused_attempts: c.refused_attempts,
            startup_grace_ns: c.startup_grace.as_nanos(),
            backoff_initial_ns: c.backoff_initial.as_nanos(),
            backoff_max_ns: c.backoff_max.as_nanos(),
        }
    }
}

impl From<LinksConfig> for LinkConfig {
    fn from(c: LinksConfig) -> Self {
        Self {
            dial_attempts: c.dial_attempts,
            refused_attempts: c.refused_attempts,
            startup_grace: Duration::from_nanos(c.startup_grace_ns),
            backoff_initial: Duration::from_nanos(c.backoff_initial_ns),
            backoff_max: Duration::from_nanos(c.backoff_max_ns),
        }
    }
}

/// One action of the policy, flattened (`lifeline_links_poll_action`). Fields a kind does not
/// use are zero.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LinkAction {
    /// `LIFELINE_LINK_ACTION_*`.
    pub kind: u32,
    /// The peer.
    pub peer: u32,
    /// `DIAL`: the slot (below the policy's slot count).
    pub slot: u32,
    /// `DIAL`: consecutive failed dials of this slot before this one.
    pub failures: u32,
    /// `DIAL`: the attempt id to feed back to `lifeline_links_handle_dial_result`.
    pub attempt: u64,
    /// `DOWN`: `LIFELINE_LINK_DOWN_*`.
    pub reason: u32,
}

/// Keep at most this many unanswered dial ids (a dial whose result never comes back is
/// forgotten oldest first).
const MAX_PENDING: usize = 4096;

/// An opaque link policy: made by `lifeline_links_new`, released by `lifeline_links_free`. One
/// thread at a time.
#[derive(Debug)]
pub struct Links {
    inner: LinkPolicy,
    /// Dials issued and not yet answered, by number (the core's ids cannot be made from one).
    pending: BTreeMap<u64, AttemptId>,
    poisoned: Cell<bool>,
}

/// Runs `f` on the links (`None`: `LIFELINE_ERR_NULL`); a poisoned handle or a panic is
/// `LIFELINE_ERR_PANIC`, and the panic poisons it.
fn enter(
    links: Option<&mut Links>,
    f: impl FnOnce(&mut Links) -> LifelineResult,
) -> LifelineResult {
    let Some(l) = links else {
        return LIFELINE_ERR_NULL;
    };
    if l.poisoned.get() {
        return LIFELINE_ERR_PANIC;
    }
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(&mut *l))) {
        Ok(r) => r,
        Err(_) => {
            l.poisoned.set(true);
            LIFELINE_ERR_PANIC
        }
    }
}

/// The policy's "alive" predicate from a node: not the node itself, and alive in its view.
fn alive(node: &Node) -> impl Fn(Rank) -> bool + '_ {
    let core = node.core();
    let me = core.me();
    move |r| r != me && core.tree().is_alive(r)
}

/// Runs `f` with the links and the node (both required).
///
/// # Safety
/// `links` and `node` are NULL or live handles used by this thread only.
unsafe fn with_node(
    links: *mut Links,
    node: *const Node,
    f: impl FnOnce(&mut Links, &Node) -> LifelineResult,
) -> LifelineResult {
    // SAFETY: the caller guarantees `node` is NULL or live.
    let Some(n) = (unsafe { node.as_ref() }) else {
        return LIFELINE_ERR_NULL;
    };
    // SAFETY: the caller guarantees `links` is NULL or live and not shared.
    enter(unsafe { links.as_mut() }, |l| f(l, n))
}

/// Writes the default configuration to `*out`.
///
/// # Safety
/// `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn lifeline_links_config_default(out: *mut LinksConfig) -> LifelineResult {
    if out.is_null() {
        return LIFELINE_ERR_NULL;
    }
    catch(LIFELINE_ERR_PANIC, || {
        // SAFETY: non-NULL and writable (the caller's guarantee).
        unsafe { put(out, LinkConfig::default().into()) };
        LIFELINE_OK
    })
}

/// Makes a link policy for rank `me` with `slots` connections per link (TCP: 2, one per traffic
/// class), from a copy of `config` (NULL: the defaults), at `now_ns` (the origin of the startup
/// grace). On `LIFELINE_OK` `*out` is the handle; else `*out` is NULL:
/// `LIFELINE_ERR_INVALID_CONFIG` (an attempt count or `slots` of 0, `backoff_initial_ns` above
/// `backoff_max_ns`), `LIFELINE_ERR_NULL`.
///
/// # Safety
/// `config` is NULL or readable; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn lifeline_links_new(
    me: u32,
    slots: u32,
    config: *const LinksConfig,
    now_ns: u64,
    out: *mut *mut Links,
) -> LifelineResult {
    if out.is_null() {
        return LIFELINE_ERR_NULL;
    }
    // SAFETY: non-NULL and writable (the caller's guarantee).
    unsafe { put(out, std::ptr::null_mut()) };
    // SAFETY: the caller guarantees `config` is NULL or readable.
    let cfg = unsafe { config.as_ref() }.map_or_else(LinkConfig::default, |c| (*c).into());
    catch(LIFELINE_ERR_PANIC, || {
        match LinkPolicy::new(Rank(me), slots as usize, cfg, now(now_ns)) {
            Ok(inner) => {
                let b = Box::new(Links {
                    inner,
                    pending: BTreeMap::new(),
                    poisoned: Cell::new(false),
                });
                // SAFETY: non-NULL and writable (checked above).
                unsafe { put(out, Box::into_raw(b)) };
                LIFELINE_OK
            }
            Err(_) => LIFELINE_ERR_INVALID_CONFIG,
        }
    })
}

/// Releases a link policy. NULL is a no-op.
///
/// # Safety
/// `links` is NULL or from `lifeline_links_new`, not yet freed, not in use elsewhere.
#[no_mangle]
pub unsafe extern "C" fn lifeline_links_free(links: *mut Links) {
    if links.is_null() {
        return;
    }
    // SAFETY: non-NULL, from lifeline_links_new (a Box), freed once (the caller's guarantee).
    let b = unsafe { Box::from_raw(links) };
    catch((), || drop(b));
}

/// The transport needs `peer`'s `slot` (the node transmits to it, or it is the tree parent):
/// a dial is queued unless the slot is connected, dialing or waiting to re-dial. Nothing happens
/// for this rank, a rank `node` knows dead or a slot out of range.
///
/// # Safety
/// `links` and `node` are NULL or live handles used by this thread only.
#[no_mangle]
pub unsafe extern "C" fn lifeline_links_want(
    links: *mut Links,
    now_ns: u64,
    peer: u32,
    slot: u32,
    node: *const Node,
) -> LifelineResult {
    // SAFETY: forwarded caller guarantees.
    unsafe {
        with_node(links, node, |l, n| {
            l.inner
                .want(now(now_ns), Rank(peer), slot as usize, alive(n));
            LIFELINE_OK
        })
    }
}

/// An authenticated inbound connection from `peer` for `slot` (its traffic class): the
/// tie-break's verdict in `*verdict` (`LIFELINE_ACCEPT`, `LIFELINE_ACCEPT_DUPLICATE`,
/// `LIFELINE_ACCEPT_REFUSE`). `LIFELINE_ACCEPT` may queue `LIFELINE_LINK_ACTION_UP`.
///
/// # Safety
/// `links` and `node` are NULL or live handles used by this thread only; `verdict` is NULL or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn lifeline_links_handle_accepted(
    links: *mut Links,
    now_ns: u64,
    peer: u32,
    slot: u32,
    node: *const Node,
    verdict: *mut u32,
) -> LifelineResult {
    if verdict.is_null() {
        return LIFELINE_ERR_NULL;
    }
    // SAFETY: forwarded caller guarantees.
    unsafe {
        with_node(links, node, |l, n| {
            let v = l
                .inner
                .handle_accepted(now(now_ns), Rank(peer), slot as usize, alive(n));
            let v = match v {
                AcceptVerdict::Accept => LIFELINE_ACCEPT,
                AcceptVerdict::Duplicate => LIFELINE_ACCEPT_DUPLICATE,
                AcceptVerdict::Refuse => LIFELINE_ACCEPT_REFUSE,
            };
            // SAFETY: non-NULL (checked above) and writable (the caller's guarantee).
            put(verdict, v);
            LIFELINE_OK
        })
    }
}

/// The outcome (`LIFELINE_DIAL_*`) of the dial `attempt` of `peer`'s `slot`. `*run` says
/// whether to run the connection (only for a connected, current attempt to a peer still alive;
/// otherwise close whatever the dial produced). A failure schedules a re-dial or gives the peer
/// up (`LIFELINE_LINK_ACTION_DOWN`). An attempt that is unknown or no longer current is ignored
/// (`*run` false). `LIFELINE_ERR_INVALID_ARGUMENT` for an unknown outcome.
///
/// # Safety
/// `links` and `node` are NULL or live handles used by this thread only; `run` is NULL or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn lifeline_links_handle_dial_result(
    links: *mut Links,
    now_ns: u64,
    peer: u32,
    slot: u32,
    attempt: u64,
    outcome: u32,
    node: *const Node,
    run: *mut bool,
) -> LifelineResult {
    if run.is_null() {
        return LIFELINE_ERR_NULL;
    }
    let outcome = match outcome {
        LIFELINE_DIAL_CONNECTED => DialOutcome::Connected,
        LIFELINE_DIAL_REFUSED => DialOutcome::Refused,
        LIFELINE_DIAL_FAILED => DialOutcome::Failed,
        LIFELINE_DIAL_DUPLICATE => DialOutcome::Duplicate,
        _ => return LIFELINE_ERR_INVALID_ARGUMENT,
    };
    // SAFETY: forwarded caller guarantees.
    unsafe {
        with_node(links, node, |l, n| {
            let go = match l.pending.remove(&attempt) {
                Some(id) => l.inner.handle_dial_result(
                    now(now_ns),
                    Rank(peer),
                    slot as usize,
                    id,
                    outcome,
                    alive(n),
                ),
                None => false,
            };
            // SAFETY: non-NULL (checked above) and writable (the caller's guarantee).
            put(run, go);
            LIFELINE_OK
        })
    }
}

/// The connection of `peer`'s `slot` ended. `*down` is whether the link is now down (the peer
/// is forgotten: close its other connections and report the loss to the node with the cause you
/// saw; nothing is queued).
///
/// # Safety
/// `links` is NULL or a live handle used by this thread only; `down` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn lifeline_links_handle_closed(
    links: *mut Links,
    now_ns: u64,
    peer: u32,
    slot: u32,
    down: *mut bool,
) -> LifelineResult {
    if down.is_null() {
        return LIFELINE_ERR_NULL;
    }
    // SAFETY: the caller guarantees `links` is NULL or live and not shared.
    enter(unsafe { links.as_mut() }, |l| {
        let d = l
            .inner
            .handle_closed(now(now_ns), Rank(peer), slot as usize);
        // SAFETY: non-NULL (checked above) and writable (the caller's guarantee).
        unsafe { put(down, d) };
        LIFELINE_OK
    })
}

/// Forgets everything about `peer` (the transport dropped it for a reason of its own and
/// reports that itself). `*known` (may be NULL) is whether anything was known.
///
/// # Safety
/// `links` is NULL or a live handle used by this thread only; `known` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn lifeline_links_forget(
    links: *mut Links,
    peer: u32,
    known: *mut bool,
) -> LifelineResult {
    // SAFETY: the caller guarantees `links` is NULL or live and not shared.
    enter(unsafe { links.as_mut() }, |l| {
        let k = l.inner.forget(Rank(peer));
        if !known.is_null() {
            // SAFETY: non-NULL and writable (the caller's guarantee).
            unsafe { put(known, k) };
        }
        LIFELINE_OK
    })
}

/// Forgets every peer `node` now knows dead, queueing `LIFELINE_LINK_ACTION_DOWN` with
/// `LIFELINE_LINK_DOWN_DEAD` for each (call it after every `LIFELINE_EVENT_VIEW_CHANGED`).
///
/// # Safety
/// `links` and `node` are NULL or live handles used by this thread only.
#[no_mangle]
pub unsafe extern "C" fn lifeline_links_retain_alive(
    links: *mut Links,
    node: *const Node,
) -> LifelineResult {
    // SAFETY: forwarded caller guarantees.
    unsafe {
        with_node(links, node, |l, n| {
            l.inner.retain_alive(alive(n));
            LIFELINE_OK
        })
    }
}

/// Re-dials every slot whose back-off has passed at `now_ns` (late or early calls are
/// harmless).
///
/// # Safety
/// `links` and `node` are NULL or live handles used by this thread only.
#[no_mangle]
pub unsafe extern "C" fn lifeline_links_handle_timeout(
    links: *mut Links,
    now_ns: u64,
    node: *const Node,
) -> LifelineResult {
    // SAFETY: forwarded caller guarantees.
    unsafe {
        with_node(links, node, |l, n| {
            l.inner.handle_timeout(now(now_ns), alive(n));
            LIFELINE_OK
        })
    }
}

/// The next action in `*out` (`LIFELINE_OK`), or `LIFELINE_DONE` when none is queued (then
/// `*out` is untouched). Drain it after every input.
///
/// # Safety
/// `links` is NULL or a live handle used by this thread only; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn lifeline_links_poll_action(
    links: *mut Links,
    out: *mut LinkAction,
) -> LifelineResult {
    if out.is_null() {
        return LIFELINE_ERR_NULL;
    }
    // SAFETY: the caller guarantees `links` is NULL or live and not shared.
    enter(unsafe { links.as_mut() }, |l| {
        let Some(a) = l.inner.poll_action() else {
            return LIFELINE_DONE;
        };
        let flat = match a {
            CoreAction::Dial {
                peer,
                slot,
                attempt,
                failures,
            } => {
                if l.pending.len() >= MAX_PENDING {
                    l.pending.pop_first();
                }
                l.pending.insert(attempt.as_u64(), attempt);
                LinkAction {
                    kind: LIFELINE_LINK_ACTION_DIAL,
                    peer: peer.0,
                    slot: slot as u32,
                    failures,
                    attempt: attempt.as_u64(),
                    reason: 0,
                }
            }
            CoreAction::LinkUp { peer } => LinkAction {
                kind: LIFELINE_LINK_ACTION_UP,
                peer: peer.0,
                ..LinkAction::default()
            },
            CoreAction::LinkDown { peer, reason } => LinkAction {
                kind: LIFELINE_LINK_ACTION_DOWN,
                peer: peer.0,
                reason: match reason {
                    // The C caller still tracks "refused" itself (see the constant's doc).
                    LinkDownReason::Unreachable | LinkDownReason::Refused => {
                        LIFELINE_LINK_DOWN_UNREACHABLE
                    }
                    LinkDownReason::Dead => LIFELINE_LINK_DOWN_DEAD,
                },
                ..LinkAction::default()
            },
        };
        // SAFETY: non-NULL (checked above) and writable (the caller's guarantee).
        unsafe { put(out, flat) };
        LIFELINE_OK
    })
}

/// When the earliest waiting re-dial is due (ns, the same clock): call
/// `lifeline_links_handle_timeout` then. `LIFELINE_NEVER` when none waits (or `links` is NULL or
/// poisoned).
///
/// # Safety
/// `links` is NULL or a live handle used by this thread only.
#[no_mangle]
pub unsafe extern "C" fn lifeline_links_poll_timeout(links: *const Links) -> u64 {
    // SAFETY: the caller guarantees `links` is NULL or live.
    let Some(l) = (unsafe { links.as_ref() }) else {
        return LIFELINE_NEVER;
    };
    if l.poisoned.get() {
        return LIFELINE_NEVER;
    }
    catch(LIFELINE_NEVER, || {
        l.inner
            .poll_timeout()
            .map_or(LIFELINE_NEVER, |t| t.as_nanos())
    })
}

/// Whether the link to `peer` is up (reported `LIFELINE_LINK_ACTION_UP` and not forgotten
/// since), in `*up`.
///
/// # Safety
/// `links` is NULL or a live handle used by this thread only; `up` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn lifeline_links_is_up(
    links: *mut Links,
    peer: u32,
    up: *mut bool,
) -> LifelineResult {
    if up.is_null() {
        return LIFELINE_ERR_NULL;
    }
    // SAFETY: the caller guarantees `links` is NULL or live and not shared.
    enter(unsafe { links.as_mut() }, |l| {
        // SAFETY: non-NULL (checked above) and writable (the caller's guarantee).
        unsafe { put(up, l.inner.is_up(Rank(peer))) };
        LIFELINE_OK
    })
}

#[cfg(test)]
#[path = "links_tests.rs"]
mod tests;
