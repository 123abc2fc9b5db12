//! Lifeline's C ABI (`include/lifeline.h`): the sans-IO driving contract of
//! [`lifeline_core::Node`], one-to-one, for C and C++ embedders.
//!
//! - **Poll, don't call back.** Inputs are `lifeline_node_handle_*` and commands; outputs are
//!   `lifeline_node_poll_transmit`, `lifeline_node_poll_event` and
//!   `lifeline_node_poll_timeout`. There are no callbacks into C and no global state.
//! - **Opaque handles, Rust allocates.** `lifeline_config` and `lifeline_node` come from their
//!   `*_new` and go back through their `*_free` (NULL is a no-op). Inputs are copied on entry;
//!   transmits are copied into the caller's buffer; an event is borrowed from the node until the
//!   next call on that node.
//! - **One result code** ([`LifelineResult`]): 0 OK, 1 DONE, negative errors. A NULL pointer is
//!   `LIFELINE_ERR_NULL`, never a crash.
//! - **Panics never cross the boundary.** Every entry point runs under `catch_unwind`; a panic
//!   (a bug: the core promises none) returns `LIFELINE_ERR_PANIC` and poisons the node, so every
//!   later call on it returns the same code.
//! - **Joins.** A member answers joiners' requests (`lifeline_node_handle_join_request`,
//!   `lifeline_node_poll_join_reply`) and reports `LIFELINE_EVENT_JOINED`; a process that is not
//!   a member runs a `lifeline_joiner` until it is admitted, then builds its node with
//!   `lifeline_node_new_from_admission` (see [`join`]).
//! - **Start-up.** With the config key `membership_check_in` on (off by default, as in the core),
//!   a launched rank is a member once it checked in: every member reports
//!   `LIFELINE_EVENT_CHECKED_IN`, then one `LIFELINE_EVENT_READY`, or
//!   `LIFELINE_EVENT_STARTUP_INCOMPLETE` naming the ranks that never checked in within
//!   `membership_startup_timeout_ns` (removed with `LIFELINE_CAUSE_NEVER_JOINED`); counters
//!   `startup_*` in [`Stats`] (see [`event`], [`config::lifeline_config_set`]).
//! - **Shrink campaigns.** `lifeline_node_shrink` removes ranks on purpose as one collective
//!   event: the targets enter leaving mode (`LIFELINE_ERR_LEAVING`) and leave
//!   (`LIFELINE_EVENT_LEFT`), every member removes them in one view change
//!   (`LIFELINE_EVENT_DEPARTED`, cause `LIFELINE_CAUSE_LEFT`), and the requester gets one
//!   `LIFELINE_EVENT_CAMPAIGN_COMPLETED` or `_FAILED`; counters `shrink_*` in [`Stats`],
//!   config keys `membership_shrink_*` (see [`shrink`]).
//! - **Threads.** A node is `Send`, not `Sync`: one thread at a time per node; different nodes
//!   are independent. `lifeline_version`, `lifeline_abi_version` and `lifeline_strerror` are
//!   thread-safe.
//!
//! This is the only crate of the workspace with unsafe code; every unsafe block says why it is
//! sound (`// SAFETY:`).

use std::ffi::c_char;
use std::panic::{catch_unwind, AssertUnwindSafe};

pub mod command;
pub mod config;
pub mod event;
pub mod handshake;
pub mod join;
pub mod links;
pub mod node;
pub mod query;
pub mod result;
pub mod shrink;
pub mod stats;

#[cfg(test)]
#[path = "startup_tests.rs"]
mod startup_tests;

pub use config::Config;
pub use event::Event;
pub use join::Joiner;
pub use node::{Node, Transmit};
pub use result::LifelineResult;
pub use stats::Stats;

/// The C ABI's version: bumped on any incompatible change to `lifeline.h` (a changed signature
/// or layout, a removed or renumbered item). Additions (functions, event kinds, fields appended
/// to node-owned or size-checked structs, error codes) do not bump it. The shared library's
/// soname is `liblifeline.so.<LIFELINE_ABI_VERSION>`.
pub const LIFELINE_ABI_VERSION: u32 = 2;
/// The library's major version (`lifeline_version()` spells the whole version).
pub const LIFELINE_VERSION_MAJOR: u32 = 0;
/// The library's minor version.
pub const LIFELINE_VERSION_MINOR: u32 = 1;
/// The library's patch version.
pub const LIFELINE_VERSION_PATCH: u32 = 0;
/// "No rank": the parent of the root, and similar absent ranks.
pub const LIFELINE_NO_RANK: u32 = u32::MAX;
/// `lifeline_node_poll_timeout`: no timer is armed.
pub const LIFELINE_NEVER: u64 = u64::MAX;
/// Bytes of the wire envelope (version, kind, u32 length): what `lifeline_node_frame_len` needs
/// to size a frame.
pub const LIFELINE_HEADER_LEN: usize = 6;
/// The first xcast tag free for applications (tags below it are reserved, except wire-up).
pub const LIFELINE_FIRST_APP_TAG: u16 = 16;
/// The xcast tag for wire-up broadcasts (processed before forwarding).
pub const LIFELINE_TAG_WIREUP: u16 = 1;

/// The library version, e.g. "0.1.0": a static NUL-terminated string; never NULL, never free
/// it; thread-safe.
#[no_mangle]
pub extern "C" fn lifeline_version() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}

/// The C ABI version the library was built with. A program compares it with the
/// `LIFELINE_ABI_VERSION` of the header it was compiled against and refuses to run on a
/// mismatch. Thread-safe.
#[no_mangle]
pub extern "C" fn lifeline_abi_version() -> u32 {
    LIFELINE_ABI_VERSION
}

/// Runs `f`, turning a panic into `on_panic` (the panic boundary of every entry point).
pub(crate) fn catch<T>(on_panic: T, f: impl FnOnce() -> T) -> T {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or(on_panic)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_constants_match_the_package() {
        let v = |s: &str| s.parse::<u32>().unwrap();
        assert_eq!(LIFELINE_VERSION_MAJOR, v(env!("CARGO_PKG_VERSION_MAJOR")));
        assert_eq!(LIFELINE_VERSION_MINOR, v(env!("CARGO_PKG_VERSION_MINOR")));
        assert_eq!(LIFELINE_VERSION_PATCH, v(env!("CARGO_PKG_VERSION_PATCH")));
        // SAFETY: lifeline_version returns a pointer to a static NUL-terminated string.
        let s = unsafe { std::ffi::CStr::from_ptr(lifeline_version()) };
        assert_eq!(s.to_str().unwrap(), env!("CARGO_PKG_VERSION"));
    }

    #[test]
    fn literal_constants_match_the_core() {
        // cbindgen cannot evaluate paths into the core, so the header's values are literals.
        assert_eq!(LIFELINE_HEADER_LEN, lifeline_core::wire::HEADER_LEN);
        assert_eq!(LIFELINE_FIRST_APP_TAG, lifeline_core::xcast::FIRST_APP_TAG);
        assert_eq!(LIFELINE_TAG_WIREUP, lifeline_core::xcast::TAG_WIREUP);
        assert_eq!(
            join::LIFELINE_MAX_JOIN_MSG,
            lifeline_core::join::MAX_JOIN_MSG
        );
        assert_eq!(
            join::LIFELINE_MAX_JOIN_ADDR,
            lifeline_core::join::MAX_ADDR_LEN as usize
        );
    }

    #[test]
    fn soname_matches_the_abi_version() {
        assert_eq!(
            env!("LIFELINE_SONAME_ABI"),
            LIFELINE_ABI_VERSION.to_string()
        );
    }

    #[test]
    fn a_panic_is_caught() {
        assert_eq!(catch(7, || panic!("boom")), 7);
        assert_eq!(catch(7, || 1), 1);
    }
}
