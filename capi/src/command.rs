//! Application commands on a node: reliable broadcast, reliable messaging, the flood test
//! protocol.

use lifeline_core::tree::Rank;

use crate::node::{copy_in, enter_mut, now, put, Node};
use crate::result::*;

/// Broadcasts `payload[0..len]` (copied) to every rank, this one included, with `tag`
/// (`LIFELINE_TAG_WIREUP` or `LIFELINE_FIRST_APP_TAG` and above). On `LIFELINE_OK`, `*seq` is
/// this rank's sequence number for it: every survivor gets `LIFELINE_EVENT_XCAST_DELIVERED`
/// exactly once and this rank `LIFELINE_EVENT_XCAST_COMPLETED` once. Refusals change nothing:
/// `LIFELINE_ERR_RESERVED_TAG`, `LIFELINE_ERR_XCAST_BACKPRESSURE`, `LIFELINE_ERR_TOO_LARGE`,
/// `LIFELINE_ERR_DEAD`.
///
/// # Safety
/// `node` is NULL or a live node used by one thread at a time; `payload` is NULL (only with
/// `len` 0) or `len` readable bytes; `seq` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn lifeline_node_xcast(
    node: *mut Node,
    now_ns: u64,
    tag: u16,
    payload: *const u8,
    len: usize,
    seq: *mut u64,
) -> LifelineResult {
    if seq.is_null() {
        return LIFELINE_ERR_NULL;
    }
    // SAFETY: the caller guarantees `node` is NULL or a live node used by one thread at a time.
    enter_mut(
        unsafe { node.as_mut() },
        LIFELINE_ERR_NULL,
        LIFELINE_ERR_PANIC,
        |n| {
            // SAFETY: the caller guarantees `len` readable bytes or NULL.
            let Some(bytes) = (unsafe { copy_in(payload, len) }) else {
                return LIFELINE_ERR_NULL;
            };
            match n.inner.xcast(now(now_ns), tag, bytes) {
                Ok(s) => {
                    // SAFETY: `seq` is non-NULL and writable (checked above).
                    unsafe { put(seq, s) };
                    LIFELINE_OK
                }
                Err(e) => LifelineResult::from(&e),
            }
        },
    )
}

/// Sends `payload[0..len]` (copied) reliably to `dst` with `tag`. On `LIFELINE_OK`, `*uid` is
/// its uid in the (this rank, `dst`) chain: `dst` gets `LIFELINE_EVENT_RELM_DELIVERED` exactly
/// once while both live, and this rank `LIFELINE_EVENT_RELM_ACKED` (or `_FAILED` if `dst` dies).
/// Refusals change nothing: `LIFELINE_ERR_PEER_DEAD` (dead or outside the span),
/// `LIFELINE_ERR_UNREACHABLE`, `LIFELINE_ERR_RELM_BACKPRESSURE`, `LIFELINE_ERR_TOO_LARGE`,
/// `LIFELINE_ERR_DEAD`.
///
/// # Safety
/// As for `lifeline_node_xcast`; `uid` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn lifeline_node_relm_send(
    node: *mut Node,
    now_ns: u64,
    dst: u32,
    tag: u16,
    payload: *const u8,
    len: usize,
    uid: *mut u32,
) -> LifelineResult {
    if uid.is_null() {
        return LIFELINE_ERR_NULL;
    }
    // SAFETY: the caller guarantees `node` is NULL or a live node used by one thread at a time.
    enter_mut(
        unsafe { node.as_mut() },
        LIFELINE_ERR_NULL,
        LIFELINE_ERR_PANIC,
        |n| {
            // SAFETY: the caller guarantees `len` readable bytes or NULL.
            let Some(bytes) = (unsafe { copy_in(payload, len) }) else {
                return LIFELINE_ERR_NULL;
            };
            match n.inner.relm_send(now(now_ns), Rank(dst), tag, bytes) {
                Ok(u) => {
                    // SAFETY: `uid` is non-NULL and writable (checked above).
                    unsafe { put(uid, u.get()) };
                    LIFELINE_OK
                }
                Err(e) => LifelineResult::from(&e),
            }
        },
    )
}

/// Starts a flood (the test protocol: best effort, every rank including this one gets
/// `LIFELINE_EVENT_FLOOD_DELIVERED`). On `LIFELINE_OK`, `*id` is its id. Refusals:
/// `LIFELINE_ERR_TOO_LARGE`, `LIFELINE_ERR_DEAD`.
///
/// # Safety
/// As for `lifeline_node_xcast`; `id` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn lifeline_node_flood(
    node: *mut Node,
    now_ns: u64,
    payload: *const u8,
    len: usize,
    id: *mut u64,
) -> LifelineResult {
    if id.is_null() {
        return LIFELINE_ERR_NULL;
    }
    // SAFETY: the caller guarantees `node` is NULL or a live node used by one thread at a time.
    enter_mut(
        unsafe { node.as_mut() },
        LIFELINE_ERR_NULL,
        LIFELINE_ERR_PANIC,
        |n| {
            // SAFETY: the caller guarantees `len` readable bytes or NULL.
            let Some(bytes) = (unsafe { copy_in(payload, len) }) else {
                return LIFELINE_ERR_NULL;
            };
            match n.inner.flood(now(now_ns), bytes) {
                Ok(i) => {
                    // SAFETY: `id` is non-NULL and writable (checked above).
                    unsafe { put(id, i) };
                    LIFELINE_OK
                }
                Err(e) => LifelineResult::from(&e),
            }
        },
    )
}
