//! Core configuration by key: the core's one key table (`lifeline_core::CONFIG_KEYS`, which the
//! C ABI's `lifeline_config_set` uses too), so a setting reads the same from C and from Python.
//! Durations are nanoseconds (`_ns`).

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

/// Keys the core's table has that Python does not take: a joiner's node is built from its
/// admission, never by hand.
const NOT_FOR_PYTHON: &[&str] = &["joiner", "epoch"];

/// Every key [`set`] takes: the core's table (`lifeline_core::CONFIG_KEYS`, shared with the C
/// ABI) but `joiner` and `epoch`.
pub static KEYS: std::sync::LazyLock<Vec<&'static str>> = std::sync::LazyLock::new(|| {
    lifeline_core::CONFIG_KEYS
        .iter()
        .copied()
        .filter(|k| !NOT_FOR_PYTHON.contains(k))
        .collect()
});

/// Sets `key` to `value` in `c` (the core's `Config::set_key`). Ranges between fields are
/// checked when the node is built ([`lifeline_core::Node::new`]).
pub fn set(c: &mut lifeline_core::Config, key: &str, value: u64) -> Result<(), KeyError> {
    if NOT_FOR_PYTHON.contains(&key) {
        return Err(KeyError::Unknown(key.to_string()));
    }
    c.set_key(key, value).map_err(|e| match e {
        lifeline_core::ConfigKeyError::Range { key, value } => KeyError::Range { key, value },
        _ => KeyError::Unknown(key.to_string()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use lifeline_core::Duration;

    #[test]
    fn every_listed_key_is_settable_and_no_other() {
        let mut c = lifeline_core::Config::new(4, 2);
        for k in KEYS.iter() {
            let v = c.get_key(k).unwrap();
            assert_eq!(set(&mut c, k, v), Ok(()), "{k}");
        }
        assert!(set(&mut c, "joiner", 1).is_err());
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
