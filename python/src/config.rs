//! Core configuration by key: the C ABI's key names (`lifeline_config_set`), so a setting reads
//! the same from C and from Python. Durations are nanoseconds (`_ns`).

use lifeline_core::Duration;

/// Why a key could not be set (nothing changed).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// No such key.
    #[error("unknown config key {0:?} (keys: {keys})", keys = KEYS.join(", "))]
    Unknown(String),
    /// The value does not fit the field (booleans take 0 or 1).
    #[error("config key {key:?}: {value} does not fit the field")]
    Range {
        /// The key.
        key: String,
        /// The value refused.
        value: u64,
    },
}

/// Every key [`set`] takes, in the C ABI's order.
pub const KEYS: &[&str] = &[
    "max_frame",
    "max_list",
    "max_transmits",
    "max_events",
    "join_batch_ns",
    "join_max_per_view",
    "join_timeout_ns",
    "join_max_pending",
    "join_retry_after_ns",
    "join_remembered",
    "flood_linger_ns",
    "flood_max",
    "membership_notice_batch_ns",
    "membership_stable_reports",
    "membership_flux_reports",
    "membership_flux_hold_ns",
    "membership_alert_batch_ns",
    "membership_relay_batch_ns",
    "membership_evicted_interval_ns",
    "membership_majority_window_ns",
    "membership_gray_timeout_ns",
    "membership_corroborate_timeout_ns",
    "membership_corroborate_probes",
    "membership_overload_window_ns",
    "membership_overload_percent",
    "membership_overload_min_subjects",
    "membership_check_in",
    "membership_check_in_batch_ns",
    "membership_check_in_resend_ns",
    "membership_startup_timeout_ns",
    "xcast_max_inflight",
    "xcast_max_bytes",
    "xcast_retry_ns",
    "relm_window",
    "relm_max_bytes",
    "relm_cache_ttl_ns",
    "relm_cache_max",
    "relm_ack_delay_ns",
    "relm_retry_ns",
    "relm_gate_timeout_ns",
    "relm_first_uid",
    "detect_enabled",
    "detect_period_ns",
    "detect_timeout_ns",
    "detect_refute_ns",
    "detect_observers",
    "detect_ring_seed",
    "detect_health_max",
    "detect_health_recover",
    "detect_startup_grace_ns",
    "detect_join_grace_ns",
];

/// How a key's value maps onto its field.
enum Field<'a> {
    U32(&'a mut u32),
    Usize(&'a mut usize),
    U64(&'a mut u64),
    Bool(&'a mut bool),
    Nanos(&'a mut Duration),
}

/// The field a key names (the core's field path, dots as underscores).
fn field<'a>(c: &'a mut lifeline_core::Config, key: &str) -> Option<Field<'a>> {
    use Field::*;
    Some(match key {
        "max_frame" => U32(&mut c.max_frame),
        "max_list" => U32(&mut c.max_list),
        "max_transmits" => Usize(&mut c.max_transmits),
        "max_events" => Usize(&mut c.max_events),
        "join_batch_ns" => Nanos(&mut c.join.batch),
        "join_max_per_view" => U32(&mut c.join.max_per_view),
        "join_timeout_ns" => Nanos(&mut c.join.timeout),
        "join_max_pending" => U32(&mut c.join.max_pending),
        "join_retry_after_ns" => Nanos(&mut c.join.retry_after),
        "join_remembered" => U32(&mut c.join.remembered),
        "flood_linger_ns" => Nanos(&mut c.flood.linger),
        "flood_max" => Usize(&mut c.flood.max),
        "membership_notice_batch_ns" => Nanos(&mut c.membership.notice_batch),
        "membership_stable_reports" => U32(&mut c.membership.stable_reports),
        "membership_flux_reports" => U32(&mut c.membership.flux_reports),
        "membership_flux_hold_ns" => Nanos(&mut c.membership.flux_hold),
        "membership_alert_batch_ns" => Nanos(&mut c.membership.alert_batch),
        "membership_relay_batch_ns" => Nanos(&mut c.membership.relay_batch),
        "membership_evicted_interval_ns" => Nanos(&mut c.membership.evicted_interval),
        "membership_majority_window_ns" => Nanos(&mut c.membership.majority_window),
        "membership_gray_timeout_ns" => Nanos(&mut c.membership.gray_timeout),
        "membership_corroborate_timeout_ns" => Nanos(&mut c.membership.corroborate_timeout),
        "membership_corroborate_probes" => U32(&mut c.membership.corroborate_probes),
        "membership_overload_window_ns" => Nanos(&mut c.membership.overload_window),
        "membership_overload_percent" => U32(&mut c.membership.overload_percent),
        "membership_overload_min_subjects" => U32(&mut c.membership.overload_min_subjects),
        "membership_check_in" => Bool(&mut c.membership.check_in),
        "membership_check_in_batch_ns" => Nanos(&mut c.membership.check_in_batch),
        "membership_check_in_resend_ns" => Nanos(&mut c.membership.check_in_resend),
        "membership_startup_timeout_ns" => Nanos(&mut c.membership.startup_timeout),
        "xcast_max_inflight" => Usize(&mut c.xcast.max_inflight),
        "xcast_max_bytes" => Usize(&mut c.xcast.max_bytes),
        "xcast_retry_ns" => Nanos(&mut c.xcast.retry),
        "relm_window" => Usize(&mut c.relm.window),
        "relm_max_bytes" => Usize(&mut c.relm.max_bytes),
        "relm_cache_ttl_ns" => Nanos(&mut c.relm.cache_ttl),
        "relm_cache_max" => Usize(&mut c.relm.cache_max),
        "relm_ack_delay_ns" => Nanos(&mut c.relm.ack_delay),
        "relm_retry_ns" => Nanos(&mut c.relm.retry),
        "relm_gate_timeout_ns" => Nanos(&mut c.relm.gate_timeout),
        "relm_first_uid" => U32(&mut c.relm.first_uid),
        "detect_enabled" => Bool(&mut c.detect.enabled),
        "detect_period_ns" => Nanos(&mut c.detect.period),
        "detect_timeout_ns" => Nanos(&mut c.detect.timeout),
        "detect_refute_ns" => Nanos(&mut c.detect.refute),
        "detect_observers" => U32(&mut c.detect.observers),
        "detect_ring_seed" => U64(&mut c.detect.ring_seed),
        "detect_health_max" => U32(&mut c.detect.health_max),
        "detect_health_recover" => U32(&mut c.detect.health_recover),
        "detect_startup_grace_ns" => Nanos(&mut c.detect.startup_grace),
        "detect_join_grace_ns" => Nanos(&mut c.detect.join_grace),
        _ => return None,
    })
}

/// Sets `key` to `value` in `c`. Ranges between fields are checked when the node is built
/// ([`lifeline_core::Node::new`]).
pub fn set(c: &mut lifeline_core::Config, key: &str, value: u64) -> Result<(), KeyError> {
    let range = || KeyError::Range {
        key: key.to_string(),
        value,
    };
    match field(c, key).ok_or_else(|| KeyError::Unknown(key.to_string()))? {
        Field::U32(v) => *v = u32::try_from(value).map_err(|_| range())?,
        Field::Usize(v) => *v = usize::try_from(value).map_err(|_| range())?,
        Field::U64(v) => *v = value,
        Field::Bool(v) => match value {
            0 | 1 => *v = value == 1,
            _ => return Err(range()),
        },
        Field::Nanos(v) => *v = Duration::from_nanos(value),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_listed_key_is_settable_and_no_other() {
        let mut c = lifeline_core::Config::new(4, 2);
        for k in KEYS {
            assert!(field(&mut c, k).is_some(), "{k}");
        }
        assert_eq!(
            set(&mut c, "nope", 1),
            Err(KeyError::Unknown("nope".into()))
        );
    }

    #[test]
    fn values_are_range_checked() {
        let mut c = lifeline_core::Config::new(4, 2);
        set(&mut c, "detect_enabled", 1).unwrap();
        assert!(c.detect.enabled);
        assert!(matches!(
            set(&mut c, "detect_enabled", 2),
            Err(KeyError::Range { .. })
        ));
        assert!(matches!(
            set(&mut c, "max_frame", u64::MAX),
            Err(KeyError::Range { .. })
        ));
        set(&mut c, "detect_period_ns", 5_000_000).unwrap();
        assert_eq!(c.detect.period, Duration::from_millis(5));
    }

    #[test]
    fn start_up_keys_reach_the_core_and_check_ins_stay_off_by_default() {
        let mut c = lifeline_core::Config::new(4, 2);
        assert!(
            !c.membership.check_in,
            "the core's default, as in the C ABI"
        );
        set(&mut c, "membership_check_in", 1).unwrap();
        set(&mut c, "membership_check_in_batch_ns", 29_000_000).unwrap();
        set(&mut c, "membership_check_in_resend_ns", 31_000_000).unwrap();
        set(&mut c, "membership_startup_timeout_ns", 37_000_000).unwrap();
        assert!(c.membership.check_in);
        assert_eq!(c.membership.check_in_batch, Duration::from_millis(29));
        assert_eq!(c.membership.check_in_resend, Duration::from_millis(31));
        assert_eq!(c.membership.startup_timeout, Duration::from_millis(37));
        assert!(matches!(
            set(&mut c, "membership_check_in", 2),
            Err(KeyError::Range { .. })
        ));
    }
}
