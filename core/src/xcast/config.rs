//! The xcast machine's configuration section.

use crate::config::ConfigError;
use crate::time::Duration;

/// Reliable broadcast settings: [`Config::xcast`](crate::Config::xcast).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct XcastConfig {
    /// Broadcasts this rank may have awaiting completion, and the root's window of numbered
    /// but incomplete ops. Past it the origin gets
    /// [`XcastError::Backpressure`](crate::xcast::XcastError::Backpressure).
    pub max_inflight: usize,
    /// Payload bytes this rank may have awaiting completion.
    pub max_bytes: usize,
    /// How often an origin re-sends relays the root has not numbered and asks about
    /// completions it has not heard of.
    pub retry: Duration,
}

impl Default for XcastConfig {
    fn default() -> Self {
        Self {
            max_inflight: 1024,
            max_bytes: 64 << 20,
            retry: Duration::from_millis(200),
        }
    }
}

impl XcastConfig {
    /// Checks every field; a zero bound or period is refused.
    pub fn validate(&self) -> Result<(), ConfigError> {
        for (name, v) in [
            ("xcast.max_inflight", self.max_inflight as u64),
            ("xcast.max_bytes", self.max_bytes as u64),
            ("xcast.retry", self.retry.as_nanos()),
        ] {
            if v == 0 {
                return Err(ConfigError::Zero(name));
            }
        }
        Ok(())
    }
}
