//! The flood machine's configuration section.

use crate::config::ConfigError;
use crate::time::Duration;

/// Flood (test protocol) settings: [`Config::flood`](crate::Config::flood).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct FloodConfig {
    /// How long a flood id is remembered for duplicate suppression.
    pub linger: Duration,
    /// Bound on remembered flood ids; the oldest is forgotten first.
    pub max: usize,
}

impl Default for FloodConfig {
    fn default() -> Self {
        Self {
            linger: Duration::from_secs(10),
            max: 1024,
        }
    }
}

impl FloodConfig {
    /// Checks every field; a zero bound is refused.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.max == 0 {
            return Err(ConfigError::Zero("flood.max"));
        }
        Ok(())
    }
}
