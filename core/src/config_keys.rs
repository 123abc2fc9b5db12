//! Configuration by flat keys: the core's field path with dots as underscores, durations in
//! nanoseconds (`_ns`). The one table the embeddings share (the C ABI's `lifeline_config_set`
//! and the Python binding's `config={...}`), so a setting reads the same from C and from
//! Python and a new field is added in one place.

use crate::config::Config;
use crate::time::Duration;

/// Why a key could not be set or read (nothing changed).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigKeyError {
    /// No such key.
    #[error("unknown config key {0:?}")]
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

/// How a key's `u64` value maps onto its field.
enum Field<'a> {
    U32(&'a mut u32),
    Usize(&'a mut usize),
    U64(&'a mut u64),
    Bool(&'a mut bool),
    Nanos(&'a mut Duration),
}

/// Every key, in table order.
pub const CONFIG_KEYS: &[&str] = &[
    "max_frame",
    "max_list",
    "max_transmits",
    "max_events",
    "joiner",
    "epoch",
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

/// The field a key names.
fn field<'a>(c: &'a mut Config, key: &str) -> Option<Field<'a>> {
    use Field::*;
    Some(match key {
        "max_frame" => U32(&mut c.max_frame),
        "max_list" => U32(&mut c.max_list),
        "max_transmits" => Usize(&mut c.max_transmits),
        "max_events" => Usize(&mut c.max_events),
        "joiner" => Bool(&mut c.joiner),
        "epoch" => U64(&mut c.epoch),
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

impl Config {
    /// Sets the field `key` names ([`CONFIG_KEYS`]) to `value`: booleans take 0 or 1,
    /// durations are nanoseconds. Refuses an unknown key or a value the field's type cannot
    /// hold, changing nothing. Ranges between fields are checked by [`Config::validate`].
    pub fn set_key(&mut self, key: &str, value: u64) -> Result<(), ConfigKeyError> {
        let range = || ConfigKeyError::Range {
            key: key.to_string(),
            value,
        };
        match field(self, key).ok_or_else(|| ConfigKeyError::Unknown(key.to_string()))? {
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

    /// The value of the field `key` names (as [`Config::set_key`] takes it).
    pub fn get_key(&self, key: &str) -> Result<u64, ConfigKeyError> {
        let mut c = self.clone();
        Ok(
            match field(&mut c, key).ok_or_else(|| ConfigKeyError::Unknown(key.to_string()))? {
                Field::U32(v) => u64::from(*v),
                Field::Usize(v) => *v as u64,
                Field::U64(v) => *v,
                Field::Bool(v) => u64::from(*v),
                Field::Nanos(v) => v.as_nanos(),
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every listed key reads and writes its field and only listed keys are known: the list
    /// and the table cannot drift apart.
    #[test]
    fn every_listed_key_round_trips_and_no_other_is_known() {
        let mut c = Config::new(4, 2);
        for k in CONFIG_KEYS {
            let v = c.get_key(k).unwrap();
            c.set_key(k, v).unwrap();
            assert_eq!(c.get_key(k), Ok(v), "{k}");
        }
        assert_eq!(
            c.set_key("nope", 1),
            Err(ConfigKeyError::Unknown("nope".into()))
        );
        assert!(c.get_key("nope").is_err());
    }

    #[test]
    fn values_are_range_checked_and_nothing_changes_on_an_error() {
        let mut c = Config::new(4, 2);
        c.set_key("detect_enabled", 1).unwrap();
        assert!(c.detect.enabled);
        assert!(matches!(
            c.set_key("detect_enabled", 2),
            Err(ConfigKeyError::Range { .. })
        ));
        assert!(c.detect.enabled);
        assert!(matches!(
            c.set_key("max_frame", u64::MAX),
            Err(ConfigKeyError::Range { .. })
        ));
        c.set_key("membership_startup_timeout_ns", 5_000_000)
            .unwrap();
        assert_eq!(c.membership.startup_timeout, Duration::from_millis(5));
    }
}
