//! `lifeline_config`: an opaque configuration builder with string keys.

use std::ffi::{c_char, CStr};

use lifeline_core::tree::Rank;
use lifeline_core::ConfigKeyError;

use crate::catch;
use crate::result::*;

/// An opaque node configuration (the core's `Config`), built with `lifeline_config_new`,
/// adjusted with `lifeline_config_set` and `lifeline_config_add_dead`, copied by
/// `lifeline_node_new` (so it may be freed or reused right after), and released with
/// `lifeline_config_free`.
#[derive(Debug)]
pub struct Config {
    pub(crate) inner: lifeline_core::Config,
}

/// A configuration for a tree of `span` rank positions (holes included) and radix `radix`,
/// every other field at its default. Not validated here: `lifeline_node_new` refuses an invalid
/// one with `LIFELINE_ERR_INVALID_CONFIG`. Returns NULL only if the library panicked. Free it
/// with `lifeline_config_free`.
#[no_mangle]
pub extern "C" fn lifeline_config_new(span: u32, radix: u32) -> *mut Config {
    catch(std::ptr::null_mut(), || {
        Box::into_raw(Box::new(Config {
            inner: lifeline_core::Config::new(span, radix),
        }))
    })
}

/// Releases a configuration. NULL is a no-op. Nodes made from it are unaffected (they copied
/// it).
///
/// # Safety
/// `config` is NULL or from `lifeline_config_new`, not yet freed; it is invalid afterwards.
#[no_mangle]
pub unsafe extern "C" fn lifeline_config_free(config: *mut Config) {
    if config.is_null() {
        return;
    }
    // SAFETY: non-NULL, and the caller guarantees it came from lifeline_config_new (Box) and is
    // freed only once.
    let b = unsafe { Box::from_raw(config) };
    catch((), || drop(b));
}

/// Resolves the key and runs `f` with the configuration and the key, with the NULL, UTF-8
/// and panic checks; a key the core's table does not know is `LIFELINE_ERR_UNKNOWN_KEY`.
///
/// # Safety
/// As for `lifeline_config_set`.
unsafe fn with_key(
    config: *mut Config,
    key: *const c_char,
    f: impl FnOnce(&mut lifeline_core::Config, &str) -> Result<(), ConfigKeyError>,
) -> LifelineResult {
    if key.is_null() {
        return LIFELINE_ERR_NULL;
    }
    // SAFETY: the caller guarantees `config` is NULL or a live config used by one thread.
    let Some(c) = (unsafe { config.as_mut() }) else {
        return LIFELINE_ERR_NULL;
    };
    // SAFETY: non-NULL, and the caller guarantees a NUL-terminated string.
    let key = unsafe { CStr::from_ptr(key) };
    catch(LIFELINE_ERR_PANIC, || {
        let Ok(key) = key.to_str() else {
            return LIFELINE_ERR_UNKNOWN_KEY;
        };
        match f(&mut c.inner, key) {
            Ok(()) => LIFELINE_OK,
            Err(ConfigKeyError::Unknown(_)) => LIFELINE_ERR_UNKNOWN_KEY,
            Err(_) => LIFELINE_ERR_INVALID_CONFIG,
        }
    })
}

/// Sets one field by name. Returns `LIFELINE_ERR_UNKNOWN_KEY` for a key not listed here (never
/// ignored), `LIFELINE_ERR_INVALID_CONFIG` for a value the field's type cannot hold (booleans
/// take 0 or 1), `LIFELINE_ERR_NULL` for a NULL argument; nothing changes on an error. Ranges
/// between fields are checked by `lifeline_node_new`. Durations are nanoseconds (`_ns`).
///
/// Keys (the core's `Config` fields, `lifeline_core::CONFIG_KEYS`; see its documentation for
/// the defaults):
/// - `max_frame`: largest frame sent or accepted, header included (256..=268435456).
/// - `max_list`: largest element count of a list inside a frame.
/// - `max_transmits`, `max_events`: bounds on queued output between two drains (past them
///   output is dropped and counted).
/// - `joiner`: 1 if this rank joined after the start (a grow); `epoch`: the view epoch it
///   starts at. `lifeline_node_new_from_admission` sets both (and the tree) from the admission.
/// - `join_batch_ns` (the coordinator holds the first waiting join this long so others share
///   its view change), `join_max_per_view` (most joiners one view change admits),
///   `join_timeout_ns` (a contact answers "retry" to a request not admitted within this long),
///   `join_max_pending` (most requests waiting at a contact, and joins queued at the
///   coordinator; past it "retry" at once), `join_retry_after_ns` (the back-off a "retry"
///   suggests), `join_remembered` (admitted nonces every member remembers, so a joiner whose
///   answer was lost gets its rank again): how members answer and admit joiners. The counts
///   and the timeout must be positive.
/// - `flood_linger_ns`, `flood_max`: the flood test protocol's duplicate memory.
/// - `revoke_max_groups`: groups the revoke flood remembers (`lifeline_node_revoke`).
/// - `membership_notice_batch_ns`, `membership_stable_reports`, `membership_flux_reports`,
///   `membership_flux_hold_ns`, `membership_alert_batch_ns`, `membership_relay_batch_ns`,
///   `membership_evicted_interval_ns`, `membership_majority_window_ns`,
///   `membership_gray_timeout_ns`: failure knowledge and the coordinator's decisions;
///   `membership_corroborate_timeout_ns`, `membership_corroborate_probes`: how a refused dial
///   reported by one rank is corroborated; `membership_overload_window_ns`,
///   `membership_overload_percent`, `membership_overload_min_subjects`: the coordinator's
///   overload hold.
/// - `membership_check_in`: 1 starts membership from check-ins (0 by default, as in the core's
///   `Config`: view 0 is then the whole span, as before). On, a launched rank is a member once
///   the coordinator's check-in notice lists it (`LIFELINE_EVENT_CHECKED_IN`), and every member
///   gets `LIFELINE_EVENT_READY` once every expected rank is in, or
///   `LIFELINE_EVENT_STARTUP_INCOMPLETE` after `membership_startup_timeout_ns` (the missing
///   ranks removed, `LIFELINE_CAUSE_NEVER_JOINED`). Every rank of a launch must agree; a joiner
///   ignores it. `membership_check_in_batch_ns` (the coordinator gathers check-ins this long into
///   one notice, one view change), `membership_check_in_resend_ns` (a rank re-sends its check-in
///   this often until a notice lists it), `membership_startup_timeout_ns` (the coordinator
///   removes the ranks still missing this long after its start); with check-ins on the re-send
///   interval and the timeout must be positive.
/// - `membership_shrink_batch_ns` (the coordinator holds shrink requests this long so campaigns
///   asked for together share one order and one view change), `membership_shrink_timeout_ns`
///   (the campaign bound: the requester reports `LIFELINE_EVENT_CAMPAIGN_FAILED` past it, and a
///   leaving rank's departure timer; must be positive), `membership_shrink_max_pending` (most
///   campaigns one rank has open, and the coordinator's queue; past it
///   `LIFELINE_ERR_SHRINK_BUSY`; at least 1): shrink campaigns (`lifeline_node_shrink`).
/// - `xcast_max_inflight`, `xcast_max_bytes`: broadcasts awaiting completion (back-pressure);
///   `xcast_retry_ns`: the origin's re-send interval.
/// - `relm_window` (per destination), `relm_max_bytes` (in all): unacknowledged reliable
///   messages; `relm_cache_ttl_ns`, `relm_cache_max`: a relay's replay cache;
///   `relm_ack_delay_ns`, `relm_retry_ns`, `relm_gate_timeout_ns`; `relm_first_uid` (every rank
///   must agree).
/// - `detect_enabled`: 1 runs the heartbeat failure detector (off by default);
///   `detect_period_ns` (heartbeat period), `detect_timeout_ns` (silence before suspicion),
///   `detect_refute_ns`, `detect_observers` (K), `detect_ring_seed` (every rank must agree),
///   `detect_health_max`, `detect_health_recover`; `detect_startup_grace_ns` (a peer never
///   heard from is not suspected within this long after start; 0, the default, watches from
///   the start); `detect_join_grace_ns` (an admitted joiner is not suspected until it is heard
///   once or this long after its admission).
///
/// # Safety
/// `config` is NULL or a live config from `lifeline_config_new`, not used by another thread
/// during the call; `key` is NULL or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn lifeline_config_set(
    config: *mut Config,
    key: *const c_char,
    value: u64,
) -> LifelineResult {
    // SAFETY: forwarded: the same contract as this function's.
    unsafe { with_key(config, key, |c, k| c.set_key(k, value)) }
}

/// Reads one field by name (the keys of `lifeline_config_set`) into `*value`. Errors as for
/// `lifeline_config_set`; `*value` is written only on `LIFELINE_OK`.
///
/// # Safety
/// As for `lifeline_config_set`; `value` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn lifeline_config_get(
    config: *mut Config,
    key: *const c_char,
    value: *mut u64,
) -> LifelineResult {
    if value.is_null() {
        return LIFELINE_ERR_NULL;
    }
    let read = |c: &mut lifeline_core::Config, k: &str| {
        let v = c.get_key(k)?;
        // SAFETY: `value` is non-NULL (checked above) and writable (the caller's guarantee).
        unsafe { value.write(v) };
        Ok(())
    };
    // SAFETY: forwarded: the same contract as this function's.
    unsafe { with_key(config, key, read) }
}

/// Lists `rank` as already departed (a hole in the tree). `LIFELINE_ERR_RANK_OUT_OF_RANGE` if
/// `rank` is at or above the span (nothing changed).
///
/// # Safety
/// `config` is NULL or a live config, not used by another thread during the call.
#[no_mangle]
pub unsafe extern "C" fn lifeline_config_add_dead(
    config: *mut Config,
    rank: u32,
) -> LifelineResult {
    // SAFETY: the caller guarantees `config` is NULL or a live config used by one thread.
    let Some(c) = (unsafe { config.as_mut() }) else {
        return LIFELINE_ERR_NULL;
    };
    catch(LIFELINE_ERR_PANIC, || {
        if rank >= c.inner.span {
            return LIFELINE_ERR_RANK_OUT_OF_RANGE;
        }
        c.inner.dead.insert(Rank(rank));
        LIFELINE_OK
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use lifeline_core::Duration;

    /// Check-ins are off by default, as in the core (a program built before them keeps its
    /// view 0 = the whole span); a program turns them on with `membership_check_in`.
    #[test]
    fn check_in_is_off_by_default_as_in_the_core() {
        let c = lifeline_config_new(4, 2);
        let mut v = 7;
        // SAFETY: `c` is a live config, the key a NUL-terminated literal, `v` writable.
        unsafe {
            assert_eq!(
                lifeline_config_get(c, c"membership_check_in".as_ptr(), &mut v),
                LIFELINE_OK
            );
            assert!(!(*c).inner.membership.check_in);
            lifeline_config_free(c);
        }
        assert_eq!(v, 0);
    }

    #[test]
    fn keys_set_the_named_fields() {
        let c = lifeline_config_new(8, 2);
        // SAFETY: `c` is a live config and the keys are NUL-terminated literals.
        unsafe {
            assert_eq!(
                lifeline_config_set(c, c"detect_enabled".as_ptr(), 1),
                LIFELINE_OK
            );
            assert_eq!(
                lifeline_config_set(c, c"detect_period_ns".as_ptr(), 7_000),
                LIFELINE_OK
            );
            assert_eq!(
                lifeline_config_set(c, c"relm_window".as_ptr(), 5),
                LIFELINE_OK
            );
            assert_eq!(
                lifeline_config_set(c, c"detect_enabled".as_ptr(), 2),
                LIFELINE_ERR_INVALID_CONFIG
            );
            assert_eq!(
                lifeline_config_set(c, c"max_frame".as_ptr(), u64::MAX),
                LIFELINE_ERR_INVALID_CONFIG
            );
            assert_eq!(
                lifeline_config_set(c, c"nope".as_ptr(), 1),
                LIFELINE_ERR_UNKNOWN_KEY
            );
            assert_eq!(
                lifeline_config_add_dead(c, 8),
                LIFELINE_ERR_RANK_OUT_OF_RANGE
            );
            assert_eq!(lifeline_config_add_dead(c, 7), LIFELINE_OK);
            for (key, v) in [
                (c"join_batch_ns", 5_000_000),
                (c"join_max_per_view", 7),
                (c"join_timeout_ns", 9_000_000),
                (c"join_max_pending", 11),
                (c"join_retry_after_ns", 13_000_000),
                (c"join_remembered", 17),
                (c"detect_join_grace_ns", 19_000_000),
                (c"epoch", 23),
                (c"membership_check_in", 1),
                (c"membership_check_in_batch_ns", 29_000_000),
                (c"membership_check_in_resend_ns", 31_000_000),
                (c"membership_startup_timeout_ns", 37_000_000),
                (c"membership_shrink_batch_ns", 41_000_000),
                (c"membership_shrink_timeout_ns", 43_000_000),
                (c"membership_shrink_max_pending", 47),
            ] {
                assert_eq!(
                    lifeline_config_set(c, key.as_ptr(), v),
                    LIFELINE_OK,
                    "{key:?}"
                );
                let mut got = 0;
                assert_eq!(lifeline_config_get(c, key.as_ptr(), &mut got), LIFELINE_OK);
                assert_eq!(got, v, "{key:?}");
            }
            assert_eq!(
                lifeline_config_set(c, c"join_max_per_view".as_ptr(), u64::from(u32::MAX) + 1),
                LIFELINE_ERR_INVALID_CONFIG
            );
            let inner = &(*c).inner;
            assert_eq!(inner.join.batch, Duration::from_millis(5));
            assert_eq!(inner.join.max_per_view, 7);
            assert_eq!(inner.join.timeout, Duration::from_millis(9));
            assert_eq!(inner.join.max_pending, 11);
            assert_eq!(inner.join.retry_after, Duration::from_millis(13));
            assert_eq!(inner.join.remembered, 17);
            assert_eq!(inner.detect.join_grace, Duration::from_millis(19));
            assert_eq!(inner.epoch, 23);
            assert!(inner.membership.check_in);
            assert_eq!(inner.membership.check_in_batch, Duration::from_millis(29));
            assert_eq!(inner.membership.check_in_resend, Duration::from_millis(31));
            assert_eq!(inner.membership.startup_timeout, Duration::from_millis(37));
            assert_eq!(inner.membership.shrink_batch, Duration::from_millis(41));
            assert_eq!(inner.membership.shrink_timeout, Duration::from_millis(43));
            assert_eq!(inner.membership.shrink_max_pending, 47);
            assert!(inner.detect.enabled);
            assert_eq!(inner.detect.period, Duration::from_nanos(7_000));
            assert_eq!(inner.relm.window, 5);
            assert!(inner.dead.contains(Rank(7)));
            let mut v = 0;
            assert_eq!(
                lifeline_config_get(c, c"relm_window".as_ptr(), &mut v),
                LIFELINE_OK
            );
            assert_eq!(v, 5);
            lifeline_config_free(c);
        }
    }
}
