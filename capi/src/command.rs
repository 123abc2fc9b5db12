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

/// Revokes `group` as of `epoch` (ULFM's `MPIX_Comm_revoke`): this rank gets
/// `LIFELINE_EVENT_REVOKED` at once, and a notice floods a binomial-graph overlay of the live
/// members so that every live rank gets it exactly once, despite up to the overlay's degree − 1
/// ranks dying during the flood (degree 19 at 1,024 members, 23 at 4,096). Idempotent: a
/// (group, epoch) already revoked here is `LIFELINE_OK` and does nothing. Refusals change
/// nothing: `LIFELINE_ERR_DEAD` (not a member), `LIFELINE_ERR_REVOKE_STALE` (a newer epoch of the
/// group is already revoked here). At most `revoke_max_groups` groups are remembered (the one
/// revoked longest ago is forgotten first).
///
/// # Safety
/// `node` is NULL or a live node used by one thread at a time.
#[no_mangle]
pub unsafe extern "C" fn lifeline_node_revoke(
    node: *mut Node,
    now_ns: u64,
    group: u64,
    epoch: u64,
) -> LifelineResult {
    // SAFETY: the caller guarantees `node` is NULL or a live node used by one thread at a time.
    enter_mut(
        unsafe { node.as_mut() },
        LIFELINE_ERR_NULL,
        LIFELINE_ERR_PANIC,
        |n| match n.inner.revoke(now(now_ns), group, epoch) {
            Ok(()) => LIFELINE_OK,
            Err(e) => LifelineResult::from(&e),
        },
    )
}
