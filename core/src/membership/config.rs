//! The failure-knowledge machine's configuration section.

use crate::config::ConfigError;
use crate::time::Duration;

/// Failure-knowledge settings: [`Config::membership`](crate::Config::membership).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct MembershipConfig {
    /// Root: how long to gather reported deaths into one global failure notice.
    pub notice_batch: Duration,
}

impl Default for MembershipConfig {
    fn default() -> Self {
        Self {
            notice_batch: Duration::from_millis(2),
        }
    }
}

impl MembershipConfig {
    /// Checks every field (a zero batch is allowed: announce at once).
    pub fn validate(&self) -> Result<(), ConfigError> {
        Ok(())
    }
}
