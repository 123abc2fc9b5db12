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

/// The types a key's `u64` value maps onto, and how.
trait KeyValue: Sized {
    /// The field's value as a key reads it.
    fn read(&self) -> u64;
    /// The field's value from a key's, or `None` if it does not fit (booleans take 0 or 1).
    fn from_key(v: u64) -> Option<Self>;
}

impl KeyValue for u32 {
    fn read(&self) -> u64 {
        u64::from(*self)
    }
    fn from_key(v: u64) -> Option<Self> {
        Self::try_from(v).ok()
    }
}

impl KeyValue for usize {
    fn read(&self) -> u64 {
        *self as u64
    }
    fn from_key(v: u64) -> Option<Self> {
        Self::try_from(v).ok()
    }
}

impl KeyValue for u64 {
    fn read(&self) -> u64 {
        *self
    }
    fn from_key(v: u64) -> Option<Self> {
        Some(v)
    }
}

impl KeyValue for bool {
    fn read(&self) -> u64 {
        u64::from(*self)
    }
    fn from_key(v: u64) -> Option<Self> {
        match v {
            0 | 1 => Some(v == 1),
            _ => None,
        }
    }
}

impl KeyValue for Duration {
    fn read(&self) -> u64 {
        self.as_nanos()
    }
    fn from_key(v: u64) -> Option<Self> {
        Some(Self::from_nanos(v))
    }
}

/// The one table: each key once, with the field it names. It makes [`CONFIG_KEYS`] and both
/// accessors, so the list and the fields cannot drift apart; the field's type decides how a
/// value maps ([`KeyValue`]).
macro_rules! keys {
    ($($key:literal => $($path:ident).+,)*) => {
        /// Every key, in table order.
        pub const CONFIG_KEYS: &[&str] = &[$($key),*];

        /// Stores `value` in the field `key` names: `None` for an unknown key, `Some(false)`
        /// for a value the field cannot hold (nothing changed).
        fn store(c: &mut Config, key: &str, value: u64) -> Option<bool> {
            match key {
                $($key => Some(match KeyValue::from_key(value) {
                    Some(v) => {
                        c.$($path).+ = v;
                        true
                    }
                    None => false,
                }),)*
                _ => None,
            }
        }

        /// The value of the field `key` names (`None`: unknown key).
        fn load(c: &Config, key: &str) -> Option<u64> {
            match key {
                $($key => Some(c.$($path).+.read()),)*
                _ => None,
            }
        }
    };
}

keys! {
    "max_frame" => max_frame,
    "max_list" => max_list,
    "max_transmits" => max_transmits,
    "max_events" => max_events,
    "joiner" => joiner,
    "epoch" => epoch,
    "join_batch_ns" => join.batch,
    "join_max_per_view" => join.max_per_view,
    "join_timeout_ns" => join.timeout,
    "join_max_pending" => join.max_pending,
    "join_retry_after_ns" => join.retry_after,
    "join_remembered" => join.remembered,
    "flood_linger_ns" => flood.linger,
    "flood_max" => flood.max,
    "revoke_max_groups" => revoke.max_groups,
    "membership_notice_batch_ns" => membership.notice_batch,
    "membership_stable_reports" => membership.stable_reports,
    "membership_flux_reports" => membership.flux_reports,
    "membership_flux_hold_ns" => membership.flux_hold,
    "membership_alert_batch_ns" => membership.alert_batch,
    "membership_relay_batch_ns" => membership.relay_batch,
    "membership_evicted_interval_ns" => membership.evicted_interval,
    "membership_majority_window_ns" => membership.majority_window,
    "membership_gray_timeout_ns" => membership.gray_timeout,
    "membership_gray_after_ns" => membership.gray_after,
    "membership_corroborate_timeout_ns" => membership.corroborate_timeout,
    "membership_corroborate_probes" => membership.corroborate_probes,
    "membership_overload_window_ns" => membership.overload_window,
    "membership_overload_percent" => membership.overload_percent,
    "membership_overload_min_subjects" => membership.overload_min_subjects,
    "membership_check_in" => membership.check_in,
    "membership_check_in_batch_ns" => membership.check_in_batch,
    "membership_check_in_resend_ns" => membership.check_in_resend,
    "membership_startup_timeout_ns" => membership.startup_timeout,
    "membership_shrink_batch_ns" => membership.shrink_batch,
    "membership_shrink_timeout_ns" => membership.shrink_timeout,
    "membership_shrink_max_pending" => membership.shrink_max_pending,
    "membership_quorum" => membership.quorum,
    "membership_quorum_backups" => membership.quorum_backups,
    "membership_quorum_tree_min" => membership.quorum_tree_min,
    "xcast_max_inflight" => xcast.max_inflight,
    "xcast_max_bytes" => xcast.max_bytes,
    "xcast_retry_ns" => xcast.retry,
    "relm_window" => relm.window,
    "relm_max_bytes" => relm.max_bytes,
    "relm_cache_ttl_ns" => relm.cache_ttl,
    "relm_cache_max" => relm.cache_max,
    "relm_ack_delay_ns" => relm.ack_delay,
    "relm_retry_ns" => relm.retry,
    "relm_gate_timeout_ns" => relm.gate_timeout,
    "relm_first_uid" => relm.first_uid,
    "detect_enabled" => detect.enabled,
    "detect_period_ns" => detect.period,
    "detect_timeout_ns" => detect.timeout,
    "detect_refute_ns" => detect.refute,
    "detect_observers" => detect.observers,
    "detect_ring_seed" => detect.ring_seed,
    "detect_health_max" => detect.health_max,
    "detect_health_recover" => detect.health_recover,
    "detect_startup_grace_ns" => detect.startup_grace,
    "detect_join_grace_ns" => detect.join_grace,
}

impl Config {
    /// Sets the field `key` names ([`CONFIG_KEYS`]) to `value`: booleans take 0 or 1,
    /// durations are nanoseconds. Refuses an unknown key or a value the field's type cannot
    /// hold, changing nothing. Ranges between fields are checked by [`Config::validate`].
    pub fn set_key(&mut self, key: &str, value: u64) -> Result<(), ConfigKeyError> {
        match store(self, key, value) {
            Some(true) => Ok(()),
            Some(false) => Err(ConfigKeyError::Range {
                key: key.to_string(),
                value,
            }),
            None => Err(ConfigKeyError::Unknown(key.to_string())),
        }
    }

    /// The value of the field `key` names (as [`Config::set_key`] takes it).
    pub fn get_key(&self, key: &str) -> Result<u64, ConfigKeyError> {
        load(self, key).ok_or_else(|| ConfigKeyError::Unknown(key.to_string()))
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
