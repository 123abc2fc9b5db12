//! Joins: a process that is not a member asks a running cluster to admit it (the core's
//! [`lifeline_core::join`], one-to-one).
//!
//! - **Member side** (every node is a possible contact): the transport accepts a *join
//!   connection* (it carries no rank: the joiner has none yet), names it with a `conn_id` of
//!   its choosing, and hands the request's bytes to `lifeline_node_handle_join_request`. The
//!   answer comes out of `lifeline_node_poll_join_reply` for that `conn_id` (at once, or when
//!   the admission is applied, or after `join_timeout_ns`): write it and close the connection.
//!   Every member reports `LIFELINE_EVENT_JOINED` for the view that admitted joiners.
//! - **Joiner side**: `lifeline_joiner` is the joiner's sans-IO machine. Drive it like a node:
//!   after every input drain `lifeline_joiner_poll_transmit` (open a join connection to the
//!   contact it names and write the bytes) and `lifeline_joiner_poll_event`, then wake at
//!   `lifeline_joiner_poll_timeout`. On `LIFELINE_JOINER_EVENT_ADMITTED` build the node with
//!   `lifeline_node_new_from_admission` and free the joiner.

use std::cell::Cell;

use lifeline_core::join as core_join;
use lifeline_core::join::{Admission, JoinConn, JoinId, JoinerEvent as CoreEvent, TryFailure};
use lifeline_core::time::Duration;

use crate::config::Config;
use crate::node::{copy_in, enter_mut, now, put, Node};
use crate::result::*;
use crate::{catch, LIFELINE_NEVER, LIFELINE_NO_RANK};

/// The largest join message (request or reply) the library decodes or produces: a
/// `lifeline_node_poll_join_reply` or `lifeline_joiner_poll_transmit` buffer of this size never
/// gets `LIFELINE_ERR_BUFFER_TOO_SHORT`, and a transport may close a join connection that sends
/// more.
pub const LIFELINE_MAX_JOIN_MSG: usize = 1 << 20;
/// The longest joiner address (`lifeline_joiner_new`'s `addr`), in bytes.
pub const LIFELINE_MAX_JOIN_ADDR: usize = 256;

/// `lifeline_joiner_event.kind`: an event this version of the C API does not know. Ignore it.
pub const LIFELINE_JOINER_EVENT_UNKNOWN: u32 = 0;
/// `lifeline_joiner_event.kind`: admitted as `rank` by the view of `epoch` (whose tree spans
/// `span` ranks), answering the try `nonce`/`seq`. Build the node with
/// `lifeline_node_new_from_admission`; the joiner takes no more input.
pub const LIFELINE_JOINER_EVENT_ADMITTED: u32 = 1;
/// `lifeline_joiner_event.kind`: the try `nonce`/`seq` failed for `reason` (a
/// `LIFELINE_JOIN_RETRY_*`); the next goes to contact `next_contact` in `after_ns`
/// (`lifeline_joiner_poll_timeout` says when).
pub const LIFELINE_JOINER_EVENT_RETRYING: u32 = 2;

/// Retry reason: a reason this version of the C API does not know.
pub const LIFELINE_JOIN_RETRY_UNKNOWN: u32 = 0;
/// Retry reason: the contact's or the coordinator's join queue is full (the same contact is
/// asked again).
pub const LIFELINE_JOIN_RETRY_BUSY: u32 = 1;
/// Retry reason: the contact saw no admission within its `join_timeout_ns`.
pub const LIFELINE_JOIN_RETRY_TIMED_OUT: u32 = 2;
/// Retry reason: the contact is not a member (removed, or stopping).
pub const LIFELINE_JOIN_RETRY_NOT_MEMBER: u32 = 3;
/// Retry reason: the join connection failed or closed before the answer
/// (`lifeline_joiner_handle_contact_failed`).
pub const LIFELINE_JOIN_RETRY_CONTACT_FAILED: u32 = 4;
/// Retry reason: no answer within the joiner's `attempt_timeout_ns`.
pub const LIFELINE_JOIN_RETRY_NO_ANSWER: u32 = 5;

/// A joiner's tuning (the core's `JoinerConfig` besides contacts and address);
/// `lifeline_joiner_config_default` fills the defaults (back-off 50 ms doubling to 2 s, a try
/// given up after 15 s, spans up to 2^24).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct JoinerConfig {
    /// First back-off after a failed try (ns). Positive, at most `retry_max_ns`.
    pub retry_min_ns: u64,
    /// Longest back-off (ns): the doubling stops here.
    pub retry_max_ns: u64,
    /// A try with no answer for this long has failed (ns, positive). Keep it above the
    /// members' `join_timeout_ns` (after which a contact answers "retry" itself).
    pub attempt_timeout_ns: u64,
    /// Largest span accepted in an admission (a larger one is a malformed reply).
    pub max_span: u32,
}

impl JoinerConfig {
    fn apply(self, c: &mut core_join::JoinerConfig) {
        c.retry_min = Duration::from_nanos(self.retry_min_ns);
        c.retry_max = Duration::from_nanos(self.retry_max_ns);
        c.attempt_timeout = Duration::from_nanos(self.attempt_timeout_ns);
        c.max_span = self.max_span;
    }
}

impl From<&core_join::JoinerConfig> for JoinerConfig {
    fn from(c: &core_join::JoinerConfig) -> Self {
        Self {
            retry_min_ns: c.retry_min.as_nanos(),
            retry_max_ns: c.retry_max.as_nanos(),
            attempt_timeout_ns: c.attempt_timeout.as_nanos(),
            max_span: c.max_span,
        }
    }
}

/// One join request to send, described by `lifeline_joiner_poll_transmit` (the bytes go to the
/// caller's buffer): open a join connection to contact `contact` and write them.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct JoinTransmit {
    /// The contact's index (`0..contacts` of `lifeline_joiner_new`).
    pub contact: u32,
    /// The try's join id: sequence number (1 for the first try, raised on each retry).
    pub seq: u32,
    /// The try's join id: this process's nonce (the same in every try).
    pub nonce: u64,
    /// The request's length (on `LIFELINE_ERR_BUFFER_TOO_SHORT`: the buffer size needed).
    pub len: usize,
}

/// One joiner event, owned by the joiner: the pointer from `lifeline_joiner_poll_event` stays
/// valid until the next call on that joiner. Each kind documents the fields it sets; the others
/// are zero (`rank`: `LIFELINE_NO_RANK`). Unknown kinds must be ignored. New fields are only
/// ever appended.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JoinerEvent {
    /// A `LIFELINE_JOINER_EVENT_*` kind.
    pub kind: u32,
    /// `ADMITTED`: this process's rank.
    pub rank: u32,
    /// The try's join id: nonce.
    pub nonce: u64,
    /// The try's join id: sequence number.
    pub seq: u32,
    /// `RETRYING`: a `LIFELINE_JOIN_RETRY_*`.
    pub reason: u32,
    /// `ADMITTED`: the epoch of the view that admitted it.
    pub epoch: u64,
    /// `ADMITTED`: the span of that view's tree (this rank included).
    pub span: u32,
    /// `RETRYING`: the contact the next try goes to.
    pub next_contact: u32,
    /// `RETRYING`: the back-off before it (ns).
    pub after_ns: u64,
}

impl JoinerEvent {
    fn empty() -> Self {
        Self {
            kind: LIFELINE_JOINER_EVENT_UNKNOWN,
            rank: LIFELINE_NO_RANK,
            nonce: 0,
            seq: 0,
            reason: LIFELINE_JOIN_RETRY_UNKNOWN,
            epoch: 0,
            span: 0,
            next_contact: 0,
            after_ns: 0,
        }
    }
}

/// A joiner's counters (`lifeline_joiner_counters`). Fields are only ever appended;
/// `lifeline_joiner_stats` takes the caller's `sizeof(lifeline_joiner_counters)` and writes no
/// more than that.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct JoinerStats {
    /// Requests sent (tries).
    pub tries: u64,
    /// Answers for another try or another joiner (ignored).
    pub foreign_replies: u64,
    /// Answers that did not decode (`lifeline_joiner_handle_reply` answered
    /// `LIFELINE_ERR_MALFORMED`).
    pub malformed_replies: u64,
}

/// An opaque joiner: a process asking a running cluster to admit it. Made by
/// `lifeline_joiner_new`, released by `lifeline_joiner_free`. One thread at a time.
#[derive(Debug)]
pub struct Joiner {
    inner: core_join::Joiner,
    /// A request taken from the core that did not fit the caller's buffer: returned first.
    peek: Option<core_join::JoinTransmit>,
    /// The event last returned by `poll_event`.
    event: JoinerEvent,
    /// The admission, once reported (what `lifeline_node_new_from_admission` builds from).
    admission: Option<Admission>,
    poisoned: Cell<bool>,
}

/// Runs `f` on the joiner (`None`: `null`); a poisoned joiner or a panic in `f` is `panicked`,
/// and the panic poisons it.
fn enter<T>(j: Option<&mut Joiner>, null: T, panicked: T, f: impl FnOnce(&mut Joiner) -> T) -> T {
    let Some(j) = j else {
        return null;
    };
    if j.poisoned.get() {
        return panicked;
    }
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(&mut *j))) {
        Ok(r) => r,
        Err(_) => {
            j.poisoned.set(true);
            panicked
        }
    }
}

/// [`enter`] for a read-only call (the poison flag is a `Cell`).
fn enter_ref<T>(j: Option<&Joiner>, null: T, panicked: T, f: impl FnOnce(&Joiner) -> T) -> T {
    let Some(j) = j else {
        return null;
    };
    if j.poisoned.get() {
        return panicked;
    }
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(j))) {
        Ok(r) => r,
        Err(_) => {
            j.poisoned.set(true);
            panicked
        }
    }
}

/// Copies `bytes` to `buf` when they fit in `cap`.
///
/// # Safety
/// `buf` is NULL only when `cap` is 0, else `cap` writable bytes not overlapping `bytes`.
unsafe fn copy_out(bytes: &[u8], buf: *mut u8, cap: usize) -> LifelineResult {
    if bytes.len() > cap {
        return LIFELINE_ERR_BUFFER_TOO_SHORT;
    }
    if !bytes.is_empty() {
        // SAFETY: `buf` has `cap` >= len writable bytes (non-NULL since cap > 0) that cannot
        // overlap `bytes` (the caller's guarantee).
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), buf, bytes.len()) };
    }
    LIFELINE_OK
}

// ---- member side ----

/// A joiner's request (`bytes[0..len]`, copied) arrived on the transport's join connection
/// `conn_id` (any number the transport picks to name it): this rank is its contact. The answer
/// comes out of `lifeline_node_poll_join_reply` for `conn_id`: at once (already admitted,
/// busy, not a member), when the admission is applied here, or after `join_timeout_ns`
/// ("retry"). `LIFELINE_ERR_MALFORMED`: the bytes are not a join request (counted in
/// `join_requests_malformed`; nothing else changed): close the connection. `bytes` may be NULL
/// only when `len` is 0.
///
/// # Safety
/// `node` is NULL or a live node used by one thread at a time; `bytes` is NULL or `len`
/// readable bytes.
#[no_mangle]
pub unsafe extern "C" fn lifeline_node_handle_join_request(
    node: *mut Node,
    now_ns: u64,
    conn_id: u64,
    bytes: *const u8,
    len: usize,
) -> LifelineResult {
    // SAFETY: the caller guarantees `node` is NULL or a live node used by one thread at a time.
    enter_mut(
        unsafe { node.as_mut() },
        LIFELINE_ERR_NULL,
        LIFELINE_ERR_PANIC,
        |n| {
            // SAFETY: `bytes` is NULL or `len` readable bytes (the caller's guarantee).
            let Some(b) = (unsafe { copy_in(bytes, len) }) else {
                return LIFELINE_ERR_NULL;
            };
            match n
                .inner
                .handle_join_request(now(now_ns), JoinConn(conn_id), b)
            {
                Ok(()) => LIFELINE_OK,
                Err(_) => LIFELINE_ERR_MALFORMED,
            }
        },
    )
}

/// The join connection `conn_id` closed before its answer was written: the requests waiting
/// on it are forgotten (a joiner admitted meanwhile asks again and gets its rank). An answer
/// already queued for it may still come out of `lifeline_node_poll_join_reply`: drop it (the
/// transport no longer knows `conn_id`). Unknown ids are ignored.
///
/// # Safety
/// `node` is NULL or a live node used by one thread at a time.
#[no_mangle]
pub unsafe extern "C" fn lifeline_node_handle_join_conn_closed(
    node: *mut Node,
    now_ns: u64,
    conn_id: u64,
) -> LifelineResult {
    // SAFETY: the caller guarantees `node` is NULL or a live node used by one thread at a time.
    enter_mut(
        unsafe { node.as_mut() },
        LIFELINE_ERR_NULL,
        LIFELINE_ERR_PANIC,
        |n| {
            n.inner
                .handle_join_conn_closed(now(now_ns), JoinConn(conn_id));
            LIFELINE_OK
        },
    )
}

/// The next answer to a joiner, copied into `buf[0..cap]`. `LIFELINE_OK`: `*conn_id` names
/// the join connection and `*len` bytes were written: write them on it and close it once
/// written (one answer per request). `LIFELINE_DONE`: none queued.
/// `LIFELINE_ERR_BUFFER_TOO_SHORT`: `*conn_id` and `*len` (the size needed) are written and
/// the answer stays queued (the next call returns it); a buffer of `LIFELINE_MAX_JOIN_MSG`
/// bytes never sees this. Drain to `LIFELINE_DONE` after every input, as the transmits. `buf`
/// may be NULL only when `cap` is 0 (a size query).
///
/// # Safety
/// `node` is NULL or a live node used by one thread at a time; `conn_id` and `len` are NULL or
/// writable; `buf` is NULL or `cap` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn lifeline_node_poll_join_reply(
    node: *mut Node,
    conn_id: *mut u64,
    buf: *mut u8,
    cap: usize,
    len: *mut usize,
) -> LifelineResult {
    if conn_id.is_null() || len.is_null() || (buf.is_null() && cap != 0) {
        return LIFELINE_ERR_NULL;
    }
    // SAFETY: the caller guarantees `node` is NULL or a live node used by one thread at a time.
    enter_mut(
        unsafe { node.as_mut() },
        LIFELINE_ERR_NULL,
        LIFELINE_ERR_PANIC,
        |n| {
            let Some((conn, bytes)) = n.join_peek.take().or_else(|| n.inner.poll_join_reply())
            else {
                return LIFELINE_DONE;
            };
            // SAFETY: `conn_id` and `len` are non-NULL and writable (checked above).
            unsafe {
                put(conn_id, conn.0);
                put(len, bytes.len());
            }
            // SAFETY: `buf` is NULL only with `cap` 0, else `cap` writable bytes (the caller's
            // guarantee), and cannot overlap the node's own reply bytes.
            let r = unsafe { copy_out(&bytes, buf, cap) };
            if r != LIFELINE_OK {
                n.join_peek = Some((conn, bytes));
            }
            r
        },
    )
}

// ---- joiner side ----

/// Writes the default joiner tuning to `*out`.
///
/// # Safety
/// `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn lifeline_joiner_config_default(out: *mut JoinerConfig) -> LifelineResult {
    if out.is_null() {
        return LIFELINE_ERR_NULL;
    }
    catch(LIFELINE_ERR_PANIC, || {
        let d = core_join::JoinerConfig::new(1, bytes::Bytes::new());
        // SAFETY: non-NULL and writable (the caller's guarantee).
        unsafe { put(out, JoinerConfig::from(&d)) };
        LIFELINE_OK
    })
}

/// Makes a joiner that asks `contacts` members in turn (indices `0..contacts`: the transport
/// keeps their addresses) to admit this process, which members will reach at
/// `addr[0..addr_len]` (copied; the transport's own encoding, e.g. `host:port`, at most
/// `LIFELINE_MAX_JOIN_ADDR` bytes; every member gets it in `LIFELINE_EVENT_JOINED`). `config`
/// is the tuning (NULL: the defaults). `seed` makes the nonce and the jitter: take it from the
/// OS's randomness (`getrandom`), since two processes must never share a nonce; the first try
/// goes to contact `seed % contacts` at once (drain `lifeline_joiner_poll_transmit`). On
/// `LIFELINE_OK` `*out` is the joiner; else `*out` is NULL: `LIFELINE_ERR_INVALID_ARGUMENT` (no
/// contacts, an address over `LIFELINE_MAX_JOIN_ADDR`), `LIFELINE_ERR_INVALID_CONFIG` (a zero
/// back-off or attempt timeout, `retry_min_ns` above `retry_max_ns`), `LIFELINE_ERR_NULL`.
///
/// # Safety
/// `addr` is NULL (only with `addr_len` 0) or `addr_len` readable bytes; `config` is NULL or
/// readable; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn lifeline_joiner_new(
    contacts: u32,
    addr: *const u8,
    addr_len: usize,
    config: *const JoinerConfig,
    seed: u64,
    now_ns: u64,
    out: *mut *mut Joiner,
) -> LifelineResult {
    if out.is_null() {
        return LIFELINE_ERR_NULL;
    }
    // SAFETY: non-NULL and writable (the caller's guarantee).
    unsafe { put(out, std::ptr::null_mut()) };
    if addr_len > LIFELINE_MAX_JOIN_ADDR {
        return LIFELINE_ERR_INVALID_ARGUMENT;
    }
    // SAFETY: `addr` is NULL or `addr_len` readable bytes (the caller's guarantee).
    let Some(addr) = (unsafe { copy_in(addr, addr_len) }) else {
        return LIFELINE_ERR_NULL;
    };
    // SAFETY: the caller guarantees `config` is NULL or readable.
    let tuning = unsafe { config.as_ref() }.copied();
    catch(LIFELINE_ERR_PANIC, || {
        let mut cfg = core_join::JoinerConfig::new(contacts, addr);
        if let Some(t) = tuning {
            t.apply(&mut cfg);
        }
        match core_join::Joiner::new(cfg, seed, now(now_ns)) {
            Ok(inner) => {
                let b = Box::new(Joiner {
                    inner,
                    peek: None,
                    event: JoinerEvent::empty(),
                    admission: None,
                    poisoned: Cell::new(false),
                });
                // SAFETY: non-NULL and writable (checked above).
                unsafe { put(out, Box::into_raw(b)) };
                LIFELINE_OK
            }
            Err(core_join::JoinerError::Backoff) => LIFELINE_ERR_INVALID_CONFIG,
            Err(_) => LIFELINE_ERR_INVALID_ARGUMENT,
        }
    })
}

/// Releases a joiner (and its last event). NULL is a no-op. A node built from it is
/// unaffected.
///
/// # Safety
/// `joiner` is NULL or from `lifeline_joiner_new`, not yet freed, not in use by another
/// thread; it and the event it handed out are invalid afterwards.
#[no_mangle]
pub unsafe extern "C" fn lifeline_joiner_free(joiner: *mut Joiner) {
    if joiner.is_null() {
        return;
    }
    // SAFETY: non-NULL, from lifeline_joiner_new (a Box), freed once (the caller's guarantee).
    let b = unsafe { Box::from_raw(joiner) };
    catch((), || drop(b));
}

/// The next join request, copied into `buf[0..cap]`. `LIFELINE_OK`: `*out` describes it and
/// `out->len` bytes were written: open a join connection to contact `out->contact`, write
/// them, and keep `out->nonce`/`out->seq` with the connection (for
/// `lifeline_joiner_handle_contact_failed`). `LIFELINE_DONE`: nothing queued.
/// `LIFELINE_ERR_BUFFER_TOO_SHORT`: `*out` is written (`out->len` is the size needed) and the
/// request stays queued; a buffer of `LIFELINE_MAX_JOIN_MSG` bytes never sees this. `buf` may
/// be NULL only when `cap` is 0.
///
/// # Safety
/// `joiner` is NULL or a live joiner used by one thread at a time; `buf` is NULL or `cap`
/// writable bytes; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn lifeline_joiner_poll_transmit(
    joiner: *mut Joiner,
    buf: *mut u8,
    cap: usize,
    out: *mut JoinTransmit,
) -> LifelineResult {
    if out.is_null() || (buf.is_null() && cap != 0) {
        return LIFELINE_ERR_NULL;
    }
    // SAFETY: the caller guarantees `joiner` is NULL or live and used by one thread at a time.
    enter(
        unsafe { joiner.as_mut() },
        LIFELINE_ERR_NULL,
        LIFELINE_ERR_PANIC,
        |j| {
            let Some(t) = j.peek.take().or_else(|| j.inner.poll_transmit()) else {
                return LIFELINE_DONE;
            };
            let desc = JoinTransmit {
                contact: t.contact,
                seq: t.id.seq,
                nonce: t.id.nonce,
                len: t.bytes.len(),
            };
            // SAFETY: `out` is non-NULL and writable (checked above).
            unsafe { put(out, desc) };
            // SAFETY: `buf` is NULL only with `cap` 0, else `cap` writable bytes (the caller's
            // guarantee), and cannot overlap the joiner's own request bytes.
            let r = unsafe { copy_out(&t.bytes, buf, cap) };
            if r != LIFELINE_OK {
                j.peek = Some(t);
            }
            r
        },
    )
}

/// The answer (`bytes[0..len]`, copied) read from the join connection to contact `contact`
/// (the index its request named). An admission for this process is taken whichever try it
/// answers (`LIFELINE_JOINER_EVENT_ADMITTED`); a "retry" for the current try backs off
/// (`LIFELINE_JOINER_EVENT_RETRYING`); any other answer is ignored and counted.
/// `LIFELINE_ERR_MALFORMED`: the bytes are not a join reply (counted in `malformed_replies`;
/// the try goes on until its timeout or the connection's end). After the admission every
/// answer is ignored. `bytes` may be NULL only when `len` is 0.
///
/// # Safety
/// `joiner` is NULL or a live joiner used by one thread at a time; `bytes` is NULL or `len`
/// readable bytes.
#[no_mangle]
pub unsafe extern "C" fn lifeline_joiner_handle_reply(
    joiner: *mut Joiner,
    now_ns: u64,
    contact: u32,
    bytes: *const u8,
    len: usize,
) -> LifelineResult {
    // SAFETY: the caller guarantees `joiner` is NULL or live and used by one thread at a time.
    enter(
        unsafe { joiner.as_mut() },
        LIFELINE_ERR_NULL,
        LIFELINE_ERR_PANIC,
        |j| {
            // SAFETY: `bytes` is NULL or `len` readable bytes (the caller's guarantee).
            let Some(b) = (unsafe { copy_in(bytes, len) }) else {
                return LIFELINE_ERR_NULL;
            };
            match j.inner.handle_reply(now(now_ns), contact, b) {
                Ok(()) => LIFELINE_OK,
                Err(_) => LIFELINE_ERR_MALFORMED,
            }
        },
    )
}

/// The join connection of the try `nonce`/`seq` to contact `contact` failed or closed before
/// its answer: the joiner backs off and asks the next contact
/// (`LIFELINE_JOINER_EVENT_RETRYING`). Ignored for an older try.
///
/// # Safety
/// `joiner` is NULL or a live joiner used by one thread at a time.
#[no_mangle]
pub unsafe extern "C" fn lifeline_joiner_handle_contact_failed(
    joiner: *mut Joiner,
    now_ns: u64,
    contact: u32,
    nonce: u64,
    seq: u32,
) -> LifelineResult {
    // SAFETY: the caller guarantees `joiner` is NULL or live and used by one thread at a time.
    enter(
        unsafe { joiner.as_mut() },
        LIFELINE_ERR_NULL,
        LIFELINE_ERR_PANIC,
        |j| {
            j.inner
                .handle_contact_failed(now(now_ns), contact, JoinId { nonce, seq });
            LIFELINE_OK
        },
    )
}

/// The deadline from `lifeline_joiner_poll_timeout` passed: a try past its deadline fails, a
/// back-off that ended sends the next try. Early, late or repeated calls are harmless.
///
/// # Safety
/// `joiner` is NULL or a live joiner used by one thread at a time.
#[no_mangle]
pub unsafe extern "C" fn lifeline_joiner_handle_timeout(
    joiner: *mut Joiner,
    now_ns: u64,
) -> LifelineResult {
    // SAFETY: the caller guarantees `joiner` is NULL or live and used by one thread at a time.
    enter(
        unsafe { joiner.as_mut() },
        LIFELINE_ERR_NULL,
        LIFELINE_ERR_PANIC,
        |j| {
            j.inner.handle_timeout(now(now_ns));
            LIFELINE_OK
        },
    )
}

/// The absolute time (ns) at which `lifeline_joiner_handle_timeout` must be called, or
/// `LIFELINE_NEVER` (admitted, NULL, or a poisoned joiner). Re-read it after every input.
///
/// # Safety
/// `joiner` is NULL or a live joiner used by one thread at a time.
#[no_mangle]
pub unsafe extern "C" fn lifeline_joiner_poll_timeout(joiner: *const Joiner) -> u64 {
    // SAFETY: the caller guarantees `joiner` is NULL or live and used by one thread at a time.
    enter_ref(
        unsafe { joiner.as_ref() },
        LIFELINE_NEVER,
        LIFELINE_NEVER,
        |j| {
            j.inner
                .poll_timeout()
                .map_or(LIFELINE_NEVER, |at| at.as_nanos())
        },
    )
}

/// The next joiner event. `LIFELINE_OK`: `*out` points to it, owned by the joiner and valid
/// until the next call on it. `LIFELINE_DONE`: none queued (`*out` is NULL). Drain to
/// `LIFELINE_DONE` after every input.
///
/// # Safety
/// `joiner` is NULL or a live joiner used by one thread at a time; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn lifeline_joiner_poll_event(
    joiner: *mut Joiner,
    out: *mut *const JoinerEvent,
) -> LifelineResult {
    if out.is_null() {
        return LIFELINE_ERR_NULL;
    }
    // SAFETY: `out` is non-NULL and writable (the caller's guarantee).
    unsafe { put(out, std::ptr::null()) };
    // SAFETY: the caller guarantees `joiner` is NULL or live and used by one thread at a time.
    enter(
        unsafe { joiner.as_mut() },
        LIFELINE_ERR_NULL,
        LIFELINE_ERR_PANIC,
        |j| {
            let Some(e) = j.inner.poll_event() else {
                return LIFELINE_DONE;
            };
            let mut ev = JoinerEvent::empty();
            match e {
                CoreEvent::Admitted { id, admission } => {
                    ev.kind = LIFELINE_JOINER_EVENT_ADMITTED;
                    (ev.nonce, ev.seq) = (id.nonce, id.seq);
                    (ev.rank, ev.epoch) = (admission.rank.0, admission.epoch);
                    ev.span = admission.snapshot.layout.span();
                    j.admission = Some(admission);
                }
                CoreEvent::Retrying {
                    id,
                    why,
                    next_contact,
                    after,
                } => {
                    ev.kind = LIFELINE_JOINER_EVENT_RETRYING;
                    (ev.nonce, ev.seq) = (id.nonce, id.seq);
                    ev.reason = retry_reason(why);
                    (ev.next_contact, ev.after_ns) = (next_contact, after.as_nanos());
                }
                _ => {}
            }
            j.event = ev;
            // SAFETY: `out` is non-NULL and writable (checked above).
            unsafe { put(out, &j.event as *const JoinerEvent) };
            LIFELINE_OK
        },
    )
}

/// The C code of why a try failed.
fn retry_reason(why: TryFailure) -> u32 {
    use lifeline_core::join::RetryReason;
    match why {
        TryFailure::Retry(RetryReason::Busy) => LIFELINE_JOIN_RETRY_BUSY,
        TryFailure::Retry(RetryReason::TimedOut) => LIFELINE_JOIN_RETRY_TIMED_OUT,
        TryFailure::Retry(RetryReason::NotMember) => LIFELINE_JOIN_RETRY_NOT_MEMBER,
        TryFailure::ContactFailed => LIFELINE_JOIN_RETRY_CONTACT_FAILED,
        TryFailure::NoAnswer => LIFELINE_JOIN_RETRY_NO_ANSWER,
        _ => LIFELINE_JOIN_RETRY_UNKNOWN,
    }
}

/// Copies the joiner's counters into `*out`, writing `min(out_size,
/// sizeof(lifeline_joiner_counters))` bytes: pass `sizeof(lifeline_joiner_counters)` of the
/// header you compiled against.
///
/// # Safety
/// `joiner` is NULL or a live joiner used by one thread at a time; `out` is NULL or `out_size`
/// writable bytes.
#[no_mangle]
pub unsafe extern "C" fn lifeline_joiner_stats(
    joiner: *const Joiner,
    out: *mut JoinerStats,
    out_size: usize,
) -> LifelineResult {
    if out.is_null() {
        return LIFELINE_ERR_NULL;
    }
    // SAFETY: the caller guarantees `joiner` is NULL or live and used by one thread at a time.
    enter_ref(
        unsafe { joiner.as_ref() },
        LIFELINE_ERR_NULL,
        LIFELINE_ERR_PANIC,
        |j| {
            let c = j.inner.stats();
            let s = JoinerStats {
                tries: c.tries,
                foreign_replies: c.foreign_replies,
                malformed_replies: c.malformed_replies,
            };
            let len = out_size.min(std::mem::size_of::<JoinerStats>());
            // SAFETY: `out` has `out_size` >= `len` writable bytes (the caller's guarantee), `s`
            // has `size_of::<JoinerStats>()` >= `len` readable bytes, and they cannot overlap;
            // a byte copy needs no alignment.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    (&s as *const JoinerStats).cast::<u8>(),
                    out.cast::<u8>(),
                    len,
                );
            }
            LIFELINE_OK
        },
    )
}

/// Makes the node of an admitted joiner: rank, epoch and tree (span, radix, holes) from the
/// admission `joiner` reported (`LIFELINE_JOINER_EVENT_ADMITTED`), every other setting from a
/// copy of `config` (its span and dead ranks are replaced; its radix must be the cluster's).
/// `seed` and `now_ns` as for `lifeline_node_new`. On `LIFELINE_OK` `*out` is the node: drain
/// its outputs at once (it greets its parent and children), report the links it has to members
/// (`lifeline_node_handle_link_up`) as for any node, then free the joiner (the node does not
/// need it). On an error `*out` is NULL: `LIFELINE_ERR_INVALID_ARGUMENT` (the joiner has not
/// reported its admission), `LIFELINE_ERR_INVALID_CONFIG` (another radix than the cluster's, a
/// field out of range), `LIFELINE_ERR_NULL`.
///
/// # Safety
/// `config` is NULL or a live config and `joiner` NULL or a live joiner, neither used by
/// another thread during the call; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn lifeline_node_new_from_admission(
    config: *const Config,
    joiner: *const Joiner,
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
    // SAFETY: the caller guarantees `joiner` is NULL or live and not used elsewhere.
    enter_ref(
        unsafe { joiner.as_ref() },
        LIFELINE_ERR_NULL,
        LIFELINE_ERR_PANIC,
        |j| {
            let Some(a) = j.admission.as_ref() else {
                return LIFELINE_ERR_INVALID_ARGUMENT;
            };
            let cfg = match c.inner.for_admission(a) {
                Ok(cfg) => cfg,
                Err(e) => return LifelineResult::from(&e),
            };
            match lifeline_core::Node::new(cfg, a.rank, seed, now(now_ns)) {
                Ok(inner) => {
                    // SAFETY: `out` is non-NULL and writable (checked above).
                    unsafe { put(out, Node::boxed(inner)) };
                    LIFELINE_OK
                }
                Err(e) => LifelineResult::from(&e),
            }
        },
    )
}

#[cfg(test)]
#[path = "join_tests.rs"]
mod tests;
