//! Join settings of a member (contact and coordinator): [`Config::join`](crate::Config::join).

use crate::config::ConfigError;
use crate::time::Duration;

/// How members handle joins.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct JoinConfig {
    /// Coordinator: how long the first waiting join waits for others to share its view change.
    pub batch: Duration,
    /// Coordinator: most joiners admitted by one view change (also bounded by `max_list` and
    /// the frame size).
    pub max_per_view: u32,
    /// Contact: a request not admitted within this long is answered "retry" (timed out).
    pub timeout: Duration,
    /// Contact: most requests waiting here; coordinator: most joins queued. Past it a request
    /// is answered "retry" (busy) at once.
    pub max_pending: u32,
    /// The back-off a "retry" answer suggests.
    pub retry_after: Duration,
    /// Every member: admitted nonces remembered, so a joiner whose answer was lost gets the
    /// same rank when it asks again.
    pub remembered: u32,
}

impl Default for JoinConfig {
    fn default() -> Self {
        Self {
            batch: Duration::from_millis(20),
            max_per_view: 1024,
            timeout: Duration::from_secs(5),
            max_pending: 4096,
            retry_after: Duration::from_millis(100),
            remembered: 8192,
        }
    }
}

impl JoinConfig {
    /// Every count must be positive, and the timeout too.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.max_per_view == 0 || self.max_pending == 0 || self.remembered == 0 {
            return Err(ConfigError::Invalid(
                "join.max_per_view, join.max_pending and join.remembered must be positive",
            ));
        }
        if self.timeout == Duration::ZERO {
            return Err(ConfigError::Invalid("join.timeout must be positive"));
        }
        Ok(())
    }
}
