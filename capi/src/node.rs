//! `lifeline_node`: one rank's protocol state, and the driving contract's inputs, commands and
//! outputs.

use std::cell::Cell;

use bytes::Bytes;
use lifeline_core::tree::{Rank, RankSet};
use lifeline_core::{Class, Instant, LinkCause};

use crate::config::Config;
use crate::event::{Event, EventSlot};
use crate::result::*;
use crate::{catch, LIFELINE_NEVER};

/// `lifeline_transmit.traffic_class`: control frames (heartbeats, membership, ACKs). Carry them
/// on a channel bulk data cannot starve.
pub const LIFELINE_CLASS_CONTROL: u32 = 0;
/// `lifeline_transmit.traffic_class`: application data.
pub const LIFELINE_CLASS_DATA: u32 = 1;
/// `lifeline_transmit.flags`: a fencing notice to a removed rank, the only frame ever addressed
/// to a rank known dead. Deliver it on a connection that is still open, drop it otherwise; never
/// dial for it.
pub const LIFELINE_TRANSMIT_FENCE: u32 = 1;

/// Link-down cause: a fresh dial was refused (nothing listens: the process is gone). Hard
/// evidence: the peer is dead.
pub const LIFELINE_LINK_REFUSED: u32 = 0;
/// Link-down cause: the handshake was answered by another incarnation of the rank. Hard.
pub const LIFELINE_LINK_INCARNATION: u32 = 1;
/// Link-down cause: an established link was reset. Soft (re-dial; a refusal is then hard).
pub const LIFELINE_LINK_RESET: u32 = 2;
/// Link-down cause: nothing heard for the link timeout. Soft.
pub const LIFELINE_LINK_TIMED_OUT: u32 = 3;
/// Link-down cause: the peer closed the link or broke the protocol on it. Soft.
pub const LIFELINE_LINK_CLOSED: u32 = 4;

/// One frame to send, described by `lifeline_node_poll_transmit` (the bytes go to the caller's
/// buffer).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Transmit {
    /// Destination rank: never a rank known dead, except for a fencing notice.
    pub to: u32,
    /// `LIFELINE_CLASS_CONTROL` or `LIFELINE_CLASS_DATA`.
    pub traffic_class: u32,
    /// `LIFELINE_TRANSMIT_FENCE` or 0.
    pub flags: u32,
    /// The frame's length (on `LIFELINE_ERR_BUFFER_TOO_SHORT`: the buffer size needed).
    pub len: usize,
}

/// An opaque node: one rank of a Lifeline overlay. Made by `lifeline_node_new` (or, for a
/// joiner, `lifeline_node_new_from_admission`), released by `lifeline_node_free`. One thread
/// at a time per node (it may move between threads); different nodes are independent.
#[derive(Debug)]
pub struct Node {
    pub(crate) inner: lifeline_core::Node,
    /// A transmit taken from the core that did not fit the caller's buffer: sent first.
    peek: Option<lifeline_core::Transmit>,
    /// A join reply taken from the core that did not fit the caller's buffer: returned first.
    pub(crate) join_peek: Option<(lifeline_core::join::JoinConn, Bytes)>,
    /// The event last returned by `poll_event`, and what its pointers point into.
    event: EventSlot,
    /// Set when a call panicked: every later call answers `LIFELINE_ERR_PANIC`.
    poisoned: Cell<bool>,
}

/// Runs `f` on `node` (from the caller's pointer): `None` (NULL) is `null`; a poisoned node or
/// a panic in `f` is `panicked`, and the panic poisons the node.
pub(crate) fn enter_mut<T>(
    node: Option<&mut Node>,
    null: T,
    panicked: T,
    f: impl FnOnce(&mut Node) -> T,
) -> T {
    let Some(n) = node else {
        return null;
    };
    if n.poisoned.get() {
        return panicked;
    }
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(&mut *n))) {
        Ok(r) => r,
        Err(_) => {
            n.poisoned.set(true);
            panicked
        }
    }
}

/// [`enter_mut`] for a read-only call (the poison flag is a `Cell`).
pub(crate) fn enter_ref<T>(
    node: Option<&Node>,
    null: T,
    panicked: T,
    f: impl FnOnce(&Node) -> T,
) -> T {
    let Some(n) = node else {
        return null;
    };
    if n.poisoned.get() {
        return panicked;
    }
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(n))) {
        Ok(r) => r,
        Err(_) => {
            n.poisoned.set(true);
            panicked
        }
    }
}

/// The bytes at `ptr..ptr+len` copied, or `None` for a NULL `ptr` with a non-zero `len`.
///
/// # Safety
/// `ptr` is NULL or points to `len` readable bytes.
pub(crate) unsafe fn copy_in(ptr: *const u8, len: usize) -> Option<Bytes> {
    if len == 0 {
        return Some(Bytes::new());
    }
    if ptr.is_null() {
        return None;
    }
    // SAFETY: non-NULL, and the caller guarantees `len` readable bytes.
    Some(Bytes::copy_from_slice(unsafe {
        std::slice::from_raw_parts(ptr, len)
    }))
}

/// Writes `v` to `out`.
///
/// # Safety
/// `out` is non-NULL and writable.
pub(crate) unsafe fn put<T>(out: *mut T, v: T) {
    // SAFETY: the caller guarantees `out` is non-NULL and writable.
    unsafe { out.write(v) }
}

pub(crate) fn now(ns: u64) -> Instant {
    Instant::from_nanos(ns)
}

/// Makes a node for rank `me` from a copy of `config`; `seed` drives all its randomness (use a
/// different one per rank); `now_ns` is the driver's monotonic clock in nanoseconds (any origin,
/// the same clock for every later call, e.g. CLOCK_MONOTONIC). On `LIFELINE_OK`, `*out` is the
/// node: drain its outputs once right away (a joiner starts with notices queued). On an error
/// `*out` is NULL: `LIFELINE_ERR_INVALID_CONFIG` (a field out of range, `me` listed dead),
/// `LIFELINE_ERR_RANK_OUT_OF_RANGE` (`me` at or above the span), `LIFELINE_ERR_NULL`.
///
/// # Safety
/// `config` is NULL or a live config not used by another thread during the call; `out` is NULL
/// or writable.
#[no_mangle]
pub unsafe extern "C" fn lifeline_node_new(
    config: *const Config,
    me: u32,
    seed: u64,
    now_ns: u64,
    out: *mut *mut Node,
) -> LifelineResult {
    if out.is_null() {
        return LIFELINE_ERR_NULL;
    }
    // SAFETY: `out` is non-NULL and the caller guarantees it is writable.
    unsafe { put(out, std::ptr::null_mut()) };
    // SAFETY: the caller guarantees `config` is NULL or live.
    let Some(c) = (unsafe { config.as_ref() }) else {
        return LIFELINE_ERR_NULL;
    };
    catch(LIFELINE_ERR_PANIC, || {
        match lifeline_core::Node::new(c.inner.clone(), Rank(me), seed, now(now_ns)) {
            Ok(inner) => {
                // SAFETY: `out` is non-NULL and writable (checked above).
                unsafe { put(out, Node::boxed(inner)) };
                LIFELINE_OK
            }
            Err(e) => LifelineResult::from(&e),
        }
    })
}

/// Releases a node and everything it owns (including the last event). NULL is a no-op.
///
/// # Safety
/// `node` is NULL or from `lifeline_node_new` (or `_new_from_admission`), not yet freed, not in
/// use by another thread; it and every pointer it handed out are invalid afterwards.
#[no_mangle]
pub unsafe extern "C" fn lifeline_node_free(node: *mut Node) {
    if node.is_null() {
        return;
    }
    // SAFETY: non-NULL, from lifeline_node_new or _new_from_admission (a Box from
    // `Node::boxed`), freed once (the caller's guarantee).
    let b = unsafe { Box::from_raw(node) };
    catch((), || drop(b));
}

// ---- inputs ----

/// One whole frame received from rank `from` (split a stream with `lifeline_node_frame_len`).
/// The bytes are copied. A malformed frame, or one from a rank outside the span or known dead,
/// is dropped and counted: a peer's mistake is never an error here. `frame` may be NULL only
/// when `len` is 0.
///
/// # Safety
/// `node` is NULL or a live node used by one thread at a time; `frame` is NULL or points to
/// `len` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn lifeline_node_handle_frame(
    node: *mut Node,
    now_ns: u64,
    from: u32,
    frame: *const u8,
    len: usize,
) -> LifelineResult {
    // SAFETY: the caller guarantees `node` is NULL or a live node used by one thread at a time.
    enter_mut(
        unsafe { node.as_mut() },
        LIFELINE_ERR_NULL,
        LIFELINE_ERR_PANIC,
        |n| {
            // SAFETY: `frame` is NULL or `len` readable bytes (the caller's guarantee).
            let Some(bytes) = (unsafe { copy_in(frame, len) }) else {
                return LIFELINE_ERR_NULL;
            };
            n.inner.handle_frame(now(now_ns), Rank(from), bytes);
            LIFELINE_OK
        },
    )
}

/// The driver established a link (both traffic classes) to `peer`. A peer outside the span is
/// counted and ignored.
///
/// # Safety
/// `node` is NULL or a live node used by one thread at a time.
#[no_mangle]
pub unsafe extern "C" fn lifeline_node_handle_link_up(
    node: *mut Node,
    now_ns: u64,
    peer: u32,
) -> LifelineResult {
    // SAFETY: the caller guarantees `node` is NULL or a live node used by one thread at a time.
    enter_mut(
        unsafe { node.as_mut() },
        LIFELINE_ERR_NULL,
        LIFELINE_ERR_PANIC,
        |n| {
            n.inner.handle_link_up(now(now_ns), Rank(peer));
            LIFELINE_OK
        },
    )
}

/// The driver lost the link to `peer`, for `cause` (a `LIFELINE_LINK_*`): the evidence, not a
/// verdict. Hard causes (refused, incarnation) mark the peer dead at once; soft ones (reset,
/// timed out, closed) do so only with the detector off and on a tree link. An unknown cause is
/// `LIFELINE_ERR_INVALID_ARGUMENT` (nothing changed).
///
/// # Safety
/// `node` is NULL or a live node used by one thread at a time.
#[no_mangle]
pub unsafe extern "C" fn lifeline_node_handle_link_down(
    node: *mut Node,
    now_ns: u64,
    peer: u32,
    cause: u32,
) -> LifelineResult {
    let cause = match cause {
        LIFELINE_LINK_REFUSED => LinkCause::Refused,
        LIFELINE_LINK_INCARNATION => LinkCause::Incarnation,
        LIFELINE_LINK_RESET => LinkCause::Reset,
        LIFELINE_LINK_TIMED_OUT => LinkCause::TimedOut,
        LIFELINE_LINK_CLOSED => LinkCause::Closed,
        _ if node.is_null() => return LIFELINE_ERR_NULL,
        _ => return LIFELINE_ERR_INVALID_ARGUMENT,
    };
    // SAFETY: the caller guarantees `node` is NULL or a live node used by one thread at a time.
    enter_mut(
        unsafe { node.as_mut() },
        LIFELINE_ERR_NULL,
        LIFELINE_ERR_PANIC,
        |n| {
            n.inner.handle_link_down(now(now_ns), Rank(peer), cause);
            LIFELINE_OK
        },
    )
}

/// The deadline from `lifeline_node_poll_timeout` passed: runs every timer due at `now_ns`.
/// Early, late or repeated calls are harmless.
///
/// # Safety
/// `node` is NULL or a live node used by one thread at a time.
#[no_mangle]
pub unsafe extern "C" fn lifeline_node_handle_timeout(
    node: *mut Node,
    now_ns: u64,
) -> LifelineResult {
    // SAFETY: the caller guarantees `node` is NULL or a live node used by one thread at a time.
    enter_mut(
        unsafe { node.as_mut() },
        LIFELINE_ERR_NULL,
        LIFELINE_ERR_PANIC,
        |n| {
            n.inner.handle_timeout(now(now_ns));
            LIFELINE_OK
        },
    )
}

/// The embedding runtime says `ranks[0..n]` are dead (e.g. its launcher saw them exit): they
/// are removed and the tree repaired once. `LIFELINE_ERR_RANK_OUT_OF_RANGE` if any is at or
/// above the span (nothing changed). `ranks` may be NULL only when `n` is 0.
///
/// # Safety
/// `node` is NULL or a live node used by one thread at a time; `ranks` is NULL or points to `n`
/// readable `uint32_t`.
#[no_mangle]
pub unsafe extern "C" fn lifeline_node_handle_dead(
    node: *mut Node,
    now_ns: u64,
    ranks: *const u32,
    n: usize,
) -> LifelineResult {
    if ranks.is_null() && n != 0 {
        return LIFELINE_ERR_NULL;
    }
    // SAFETY: the caller guarantees `node` is NULL or a live node used by one thread at a time.
    enter_mut(
        unsafe { node.as_mut() },
        LIFELINE_ERR_NULL,
        LIFELINE_ERR_PANIC,
        |nd| {
            let list: &[u32] = if n == 0 {
                &[]
            } else {
                // SAFETY: non-NULL with `n` readable elements (the caller's guarantee).
                unsafe { std::slice::from_raw_parts(ranks, n) }
            };
            let mut set = RankSet::new();
            for &r in list {
                set.insert(Rank(r));
            }
            match nd.inner.declare_dead(now(now_ns), &set) {
                Ok(()) => LIFELINE_OK,
                Err(e) => LifelineResult::from(&e),
            }
        },
    )
}

/// The cluster grew to `new_span` rank positions (new ranks joined; holes stay holes), applied
/// as one repair. `LIFELINE_ERR_SPAN_SHRINK` for a smaller span,
/// `LIFELINE_ERR_INVALID_ARGUMENT` for one out of range (nothing changed).
///
/// # Safety
/// `node` is NULL or a live node used by one thread at a time.
#[no_mangle]
pub unsafe extern "C" fn lifeline_node_handle_grow(
    node: *mut Node,
    now_ns: u64,
    new_span: u32,
) -> LifelineResult {
    // SAFETY: the caller guarantees `node` is NULL or a live node used by one thread at a time.
    enter_mut(
        unsafe { node.as_mut() },
        LIFELINE_ERR_NULL,
        LIFELINE_ERR_PANIC,
        |n| match n.inner.grow(now(now_ns), new_span) {
            Ok(()) => LIFELINE_OK,
            Err(e) => LifelineResult::from(&e),
        },
    )
}

/// Rank `by` refused this rank's dial with the verdict "you were removed as of `epoch`" (the
/// answer a transport's handshake carries; see `lifeline_node_fence_verdict`). This rank gets
/// `LIFELINE_EVENT_EVICTED` once and takes no more commands. Heard only with the detector on.
///
/// # Safety
/// `node` is NULL or a live node used by one thread at a time.
#[no_mangle]
pub unsafe extern "C" fn lifeline_node_handle_fenced(
    node: *mut Node,
    now_ns: u64,
    by: u32,
    epoch: u64,
) -> LifelineResult {
    // SAFETY: the caller guarantees `node` is NULL or a live node used by one thread at a time.
    enter_mut(
        unsafe { node.as_mut() },
        LIFELINE_ERR_NULL,
        LIFELINE_ERR_PANIC,
        |n| {
            n.inner.handle_fenced(now(now_ns), Rank(by), epoch);
            LIFELINE_OK
        },
    )
}

/// An authenticated dial from `peer` arrived that the driver refuses because `peer` is dead
/// here. `LIFELINE_OK` with `*epoch`: answer "you were removed as of `*epoch`" (the dialer feeds
/// it to `lifeline_node_handle_fenced`); `LIFELINE_DONE`: refuse plainly (`*epoch` untouched).
///
/// # Safety
/// `node` is NULL or a live node used by one thread at a time; `epoch` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn lifeline_node_fence_verdict(
    node: *mut Node,
    now_ns: u64,
    peer: u32,
    epoch: *mut u64,
) -> LifelineResult {
    if epoch.is_null() {
        return LIFELINE_ERR_NULL;
    }
    // SAFETY: the caller guarantees `node` is NULL or a live node used by one thread at a time.
    enter_mut(
        unsafe { node.as_mut() },
        LIFELINE_ERR_NULL,
        LIFELINE_ERR_PANIC,
        |n| {
            match n.inner.fence_verdict(now(now_ns), Rank(peer)) {
                Some(e) => {
                    // SAFETY: `epoch` is non-NULL and writable (checked above).
                    unsafe { put(epoch, e) };
                    LIFELINE_OK
                }
                None => LIFELINE_DONE,
            }
        },
    )
}

// ---- outputs ----

/// The next frame to send, copied into `buf[0..cap]`. `LIFELINE_OK`: `*out` describes it and
/// `out->len` bytes were written; send them to `out->to` on the channel of
/// `out->traffic_class`. `LIFELINE_DONE`: nothing queued. `LIFELINE_ERR_BUFFER_TOO_SHORT`:
/// `out->len` is the size needed and the frame stays queued (the next call returns it); a
/// buffer of `lifeline_node_max_frame` bytes never sees this. Drain to `LIFELINE_DONE` after
/// every input. `buf` may be NULL only when `cap` is 0 (a size query).
///
/// # Safety
/// `node` is NULL or a live node used by one thread at a time; `buf` is NULL or `cap` writable
/// bytes; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn lifeline_node_poll_transmit(
    node: *mut Node,
    buf: *mut u8,
    cap: usize,
    out: *mut Transmit,
) -> LifelineResult {
    if out.is_null() || (buf.is_null() && cap != 0) {
        return LIFELINE_ERR_NULL;
    }
    // SAFETY: the caller guarantees `node` is NULL or a live node used by one thread at a time.
    enter_mut(
        unsafe { node.as_mut() },
        LIFELINE_ERR_NULL,
        LIFELINE_ERR_PANIC,
        |n| {
            let Some(t) = n.peek.take().or_else(|| n.inner.poll_transmit()) else {
                return LIFELINE_DONE;
            };
            let desc = Transmit {
                to: t.to.0,
                traffic_class: match t.class {
                    Class::Control => LIFELINE_CLASS_CONTROL,
                    Class::Data => LIFELINE_CLASS_DATA,
                },
                flags: if t.is_fence() {
                    LIFELINE_TRANSMIT_FENCE
                } else {
                    0
                },
                len: t.frame.len(),
            };
            // SAFETY: `out` is non-NULL and writable (checked above).
            unsafe { put(out, desc) };
            if t.frame.len() > cap {
                n.peek = Some(t);
                return LIFELINE_ERR_BUFFER_TOO_SHORT;
            }
            // SAFETY: `buf` has `cap` >= len writable bytes (the caller's guarantee; non-NULL
            // since len > 0 or cap > 0 is needed to get here with bytes to copy, and a NULL
            // `buf` has cap 0), and it cannot overlap the node's own frame buffer.
            unsafe {
                if !t.frame.is_empty() {
                    std::ptr::copy_nonoverlapping(t.frame.as_ptr(), buf, t.frame.len());
                }
            }
            LIFELINE_OK
        },
    )
}

/// The largest frame this node sends or accepts (`max_frame`): a `lifeline_node_poll_transmit`
/// buffer of this size never gets `LIFELINE_ERR_BUFFER_TOO_SHORT`. 0 for NULL or a poisoned
/// node.
///
/// # Safety
/// `node` is NULL or a live node used by one thread at a time.
#[no_mangle]
pub unsafe extern "C" fn lifeline_node_max_frame(node: *const Node) -> usize {
    // SAFETY: the caller guarantees `node` is NULL or a live node used by one thread at a time.
    enter_ref(unsafe { node.as_ref() }, 0, 0, |n| {
        n.inner.config().max_frame as usize
    })
}

/// The next application event. `LIFELINE_OK`: `*out` points to it, owned by the node and valid
/// until the next call on this node (payload and rank lists included: copy what you keep).
/// `LIFELINE_DONE`: none queued (`*out` is NULL). Drain to `LIFELINE_DONE` after every input.
///
/// # Safety
/// `node` is NULL or a live node used by one thread at a time; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn lifeline_node_poll_event(
    node: *mut Node,
    out: *mut *const Event,
) -> LifelineResult {
    if out.is_null() {
        return LIFELINE_ERR_NULL;
    }
    // SAFETY: `out` is non-NULL and writable (the caller's guarantee).
    unsafe { put(out, std::ptr::null()) };
    // SAFETY: the caller guarantees `node` is NULL or a live node used by one thread at a time.
    enter_mut(
        unsafe { node.as_mut() },
        LIFELINE_ERR_NULL,
        LIFELINE_ERR_PANIC,
        |n| {
            let Some(e) = n.inner.poll_event() else {
                return LIFELINE_DONE;
            };
            n.event.fill(e);
            // SAFETY: `out` is non-NULL and writable (checked above).
            unsafe { put(out, &n.event.ev as *const Event) };
            LIFELINE_OK
        },
    )
}

/// The absolute time (ns, the driver's clock) at which `lifeline_node_handle_timeout` must be
/// called, or `LIFELINE_NEVER` when no timer is armed (also for NULL or a poisoned node).
/// Re-read it after every input and re-arm one timer.
///
/// # Safety
/// `node` is NULL or a live node used by one thread at a time.
#[no_mangle]
pub unsafe extern "C" fn lifeline_node_poll_timeout(node: *const Node) -> u64 {
    // SAFETY: the caller guarantees `node` is NULL or a live node used by one thread at a time.
    enter_ref(
        unsafe { node.as_ref() },
        LIFELINE_NEVER,
        LIFELINE_NEVER,
        |n| {
            n.inner
                .poll_timeout()
                .map_or(LIFELINE_NEVER, |(at, _)| at.as_nanos())
        },
    )
}

impl Node {
    pub(crate) fn core(&self) -> &lifeline_core::Node {
        &self.inner
    }

    /// A new handle around `inner`, for the caller to own (`lifeline_node_free` releases it).
    pub(crate) fn boxed(inner: lifeline_core::Node) -> *mut Self {
        Box::into_raw(Box::new(Self {
            inner,
            peek: None,
            join_peek: None,
            event: EventSlot::new(),
            poisoned: Cell::new(false),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{lifeline_config_free, lifeline_config_new};

    /// A panic inside an entry point (simulated: the core promises none) is answered
    /// `LIFELINE_ERR_PANIC`, and every later call on that node answers the same, without
    /// running; another node is unaffected.
    #[test]
    fn a_panic_poisons_only_its_node() {
        let c = lifeline_config_new(2, 2);
        let (mut a, mut b) = (std::ptr::null_mut(), std::ptr::null_mut());
        // SAFETY: `c` is a live config; `a` and `b` are writable.
        unsafe {
            assert_eq!(lifeline_node_new(c, 0, 1, 0, &mut a), LIFELINE_OK);
            assert_eq!(lifeline_node_new(c, 1, 1, 0, &mut b), LIFELINE_OK);
            lifeline_config_free(c);
        }
        let prev = std::panic::take_hook();
        std::panic::set_hook(Box::new(|_| {})); // keep the expected panic out of the output
                                                // SAFETY: `a` is a live node used by this thread only.
        let r = enter_mut(
            unsafe { a.as_mut() },
            LIFELINE_ERR_NULL,
            LIFELINE_ERR_PANIC,
            |_| panic!("a bug"),
        );
        std::panic::set_hook(prev);
        assert_eq!(r, LIFELINE_ERR_PANIC);
        let mut ran = false;
        // SAFETY: as above.
        let r = enter_mut(
            unsafe { a.as_mut() },
            LIFELINE_ERR_NULL,
            LIFELINE_ERR_PANIC,
            |_| {
                ran = true;
                LIFELINE_OK
            },
        );
        assert_eq!(
            (r, ran),
            (LIFELINE_ERR_PANIC, false),
            "a poisoned node runs nothing"
        );
        // SAFETY: `a` and `b` are live nodes used by this thread only; freed once.
        unsafe {
            assert_eq!(lifeline_node_handle_timeout(a, 1), LIFELINE_ERR_PANIC);
            assert_eq!(lifeline_node_handle_timeout(b, 1), LIFELINE_OK);
            lifeline_node_free(a);
            lifeline_node_free(b);
        }
    }
}
