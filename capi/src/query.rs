//! Read-only queries on a node: stream framing, the tree view, the agreed membership view and
//! the counters.

use lifeline_core::tree::Rank;

use crate::node::{enter_ref, put, Node};
use crate::result::*;
use crate::stats::Stats;
use crate::LIFELINE_NO_RANK;

/// Stream framing: the total length of the frame whose first bytes are `prefix[0..len]`.
/// `LIFELINE_DONE` until `len` >= `LIFELINE_HEADER_LEN` (give more bytes); `LIFELINE_OK` with
/// `*total` (wait until that many bytes are buffered, then hand them to
/// `lifeline_node_handle_frame`); `LIFELINE_ERR_MALFORMED` when the header is bad (version,
/// kind, or over `max_frame`): close the connection. Nothing is allocated for the body first.
///
/// # Safety
/// `node` is NULL or a live node used by one thread at a time; `prefix` is NULL (only with `len`
/// 0) or `len` readable bytes; `total` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn lifeline_node_frame_len(
    node: *const Node,
    prefix: *const u8,
    len: usize,
    total: *mut usize,
) -> LifelineResult {
    if total.is_null() || (prefix.is_null() && len != 0) {
        return LIFELINE_ERR_NULL;
    }
    // SAFETY: the caller guarantees `node` is NULL or a live node used by one thread at a time.
    enter_ref(
        unsafe { node.as_ref() },
        LIFELINE_ERR_NULL,
        LIFELINE_ERR_PANIC,
        |n| {
            let bytes: &[u8] = if len == 0 {
                &[]
            } else {
                // SAFETY: non-NULL with `len` readable bytes (the caller's guarantee).
                unsafe { std::slice::from_raw_parts(prefix, len) }
            };
            match lifeline_core::wire::frame_len(bytes, &n.core().config().limits()) {
                Ok(Some(t)) => {
                    // SAFETY: `total` is non-NULL and writable (checked above).
                    unsafe { put(total, t) };
                    LIFELINE_OK
                }
                Ok(None) => LIFELINE_DONE,
                Err(_) => LIFELINE_ERR_MALFORMED,
            }
        },
    )
}

/// This rank's parent in its current tree view, in `*parent` (`LIFELINE_NO_RANK` at the root).
/// `LIFELINE_ERR_DEAD` when this rank is dead (no view).
///
/// # Safety
/// `node` is NULL or a live node used by one thread at a time; `parent` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn lifeline_node_parent(
    node: *const Node,
    parent: *mut u32,
) -> LifelineResult {
    if parent.is_null() {
        return LIFELINE_ERR_NULL;
    }
    // SAFETY: the caller guarantees `node` is NULL or a live node used by one thread at a time.
    enter_ref(
        unsafe { node.as_ref() },
        LIFELINE_ERR_NULL,
        LIFELINE_ERR_PANIC,
        |n| {
            let Some(v) = n.core().tree().view() else {
                return LIFELINE_ERR_DEAD;
            };
            // SAFETY: `parent` is non-NULL and writable (checked above).
            unsafe { put(parent, v.parent().map_or(LIFELINE_NO_RANK, |r| r.0)) };
            LIFELINE_OK
        },
    )
}

/// This rank's live children in its current tree view, in slot order: `*n` is their number and
/// the first `min(*n, cap)` go to `out`. `LIFELINE_ERR_BUFFER_TOO_SHORT` when `cap < *n`
/// (`out` holds the first `cap`); `LIFELINE_ERR_DEAD` when this rank is dead. `out` may be NULL
/// only when `cap` is 0.
///
/// # Safety
/// `node` is NULL or a live node used by one thread at a time; `out` is NULL or `cap` writable
/// `uint32_t`; `n` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn lifeline_node_children(
    node: *const Node,
    out: *mut u32,
    cap: usize,
    n: *mut usize,
) -> LifelineResult {
    if n.is_null() || (out.is_null() && cap != 0) {
        return LIFELINE_ERR_NULL;
    }
    // SAFETY: the caller guarantees `node` is NULL or a live node used by one thread at a time.
    enter_ref(
        unsafe { node.as_ref() },
        LIFELINE_ERR_NULL,
        LIFELINE_ERR_PANIC,
        |nd| {
            let Some(v) = nd.core().tree().view() else {
                return LIFELINE_ERR_DEAD;
            };
            let kids: Vec<u32> = v.live_children().map(|r| r.0).collect();
            // SAFETY: `out` has `cap` writable elements and `n` is writable (the caller's
            // guarantee; `n` checked non-NULL above).
            unsafe { copy_ranks(&kids, out, cap, n) }
        },
    )
}

/// Whether `rank` is alive as far as this node knows, in `*alive`.
/// `LIFELINE_ERR_RANK_OUT_OF_RANGE` for a rank at or above the span.
///
/// # Safety
/// `node` is NULL or a live node used by one thread at a time; `alive` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn lifeline_node_is_alive(
    node: *const Node,
    rank: u32,
    alive: *mut bool,
) -> LifelineResult {
    if alive.is_null() {
        return LIFELINE_ERR_NULL;
    }
    // SAFETY: the caller guarantees `node` is NULL or a live node used by one thread at a time.
    enter_ref(
        unsafe { node.as_ref() },
        LIFELINE_ERR_NULL,
        LIFELINE_ERR_PANIC,
        |n| {
            let tree = n.core().tree();
            if !tree.layout().contains(Rank(rank)) {
                return LIFELINE_ERR_RANK_OUT_OF_RANGE;
            }
            // SAFETY: `alive` is non-NULL and writable (checked above).
            unsafe { put(alive, tree.is_alive(Rank(rank))) };
            LIFELINE_OK
        },
    )
}

/// The agreed membership view applied here: `*epoch` (0: no failure notice yet) and `*members`
/// (the span minus the removed ranks; with `membership_check_in`, until start-up is over, this
/// counts expected ranks that have not checked in yet, which the start-up events' `count` does
/// not). Every member that applied the same epoch holds the same view. The removed ranks:
/// `lifeline_node_view_removed`.
///
/// # Safety
/// `node` is NULL or a live node used by one thread at a time; `epoch` and `members` are NULL
/// or writable.
#[no_mangle]
pub unsafe extern "C" fn lifeline_node_view(
    node: *const Node,
    epoch: *mut u64,
    members: *mut u32,
) -> LifelineResult {
    if epoch.is_null() || members.is_null() {
        return LIFELINE_ERR_NULL;
    }
    // SAFETY: the caller guarantees `node` is NULL or a live node used by one thread at a time.
    enter_ref(
        unsafe { node.as_ref() },
        LIFELINE_ERR_NULL,
        LIFELINE_ERR_PANIC,
        |n| {
            let v = n.core().view();
            // SAFETY: both are non-NULL and writable (checked above).
            unsafe {
                put(epoch, v.epoch);
                put(members, v.members);
            }
            LIFELINE_OK
        },
    )
}

/// The ranks removed as of the agreed view's epoch, ascending: `*n` is their number and the
/// first `min(*n, cap)` go to `out`; `LIFELINE_ERR_BUFFER_TOO_SHORT` when `cap < *n`. `out` may
/// be NULL only when `cap` is 0.
///
/// # Safety
/// `node` is NULL or a live node used by one thread at a time; `out` is NULL or `cap` writable
/// `uint32_t`; `n` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn lifeline_node_view_removed(
    node: *const Node,
    out: *mut u32,
    cap: usize,
    n: *mut usize,
) -> LifelineResult {
    if n.is_null() || (out.is_null() && cap != 0) {
        return LIFELINE_ERR_NULL;
    }
    // SAFETY: the caller guarantees `node` is NULL or a live node used by one thread at a time.
    enter_ref(
        unsafe { node.as_ref() },
        LIFELINE_ERR_NULL,
        LIFELINE_ERR_PANIC,
        |nd| {
            let removed: Vec<u32> = nd.core().view().removed.iter().map(|r| r.0).collect();
            // SAFETY: `out` has `cap` writable elements and `n` is writable (the caller's
            // guarantee; `n` checked non-NULL above).
            unsafe { copy_ranks(&removed, out, cap, n) }
        },
    )
}

/// Copies the node's counters into `*out`, writing `min(out_size, sizeof(lifeline_stats))`
/// bytes: pass `sizeof(lifeline_stats)` of the header you compiled against (fields are only
/// appended, so an older, shorter struct gets its own fields).
///
/// # Safety
/// `node` is NULL or a live node used by one thread at a time; `out` is NULL or `out_size`
/// writable bytes.
#[no_mangle]
pub unsafe extern "C" fn lifeline_node_stats(
    node: *const Node,
    out: *mut Stats,
    out_size: usize,
) -> LifelineResult {
    if out.is_null() {
        return LIFELINE_ERR_NULL;
    }
    // SAFETY: the caller guarantees `node` is NULL or a live node used by one thread at a time.
    enter_ref(
        unsafe { node.as_ref() },
        LIFELINE_ERR_NULL,
        LIFELINE_ERR_PANIC,
        |n| {
            let s = Stats::of(n.core());
            let len = out_size.min(std::mem::size_of::<Stats>());
            // SAFETY: `out` has `out_size` >= `len` writable bytes (the caller's guarantee), `s`
            // has `size_of::<Stats>()` >= `len` readable bytes, and they cannot overlap; a byte
            // copy needs no alignment.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    (&s as *const Stats).cast::<u8>(),
                    out.cast::<u8>(),
                    len,
                );
            }
            LIFELINE_OK
        },
    )
}

/// Writes `ranks.len()` to `*n` and the first `min(len, cap)` ranks to `out`:
/// `LIFELINE_ERR_BUFFER_TOO_SHORT` when they do not all fit, else `LIFELINE_OK`.
///
/// # Safety
/// `out` is valid for `cap` writes of `u32` (NULL only when `cap` is 0) and does not overlap
/// `ranks`; `n` is non-NULL and writable.
unsafe fn copy_ranks(ranks: &[u32], out: *mut u32, cap: usize, n: *mut usize) -> LifelineResult {
    // SAFETY: at most `cap` writes into `out` (the caller's guarantee), and `n` is writable.
    unsafe {
        for (i, r) in ranks.iter().take(cap).enumerate() {
            out.add(i).write(*r);
        }
        put(n, ranks.len());
    }
    if ranks.len() > cap {
        LIFELINE_ERR_BUFFER_TOO_SHORT
    } else {
        LIFELINE_OK
    }
}
