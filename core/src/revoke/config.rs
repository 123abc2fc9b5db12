//! The revoke machine's configuration section.

use crate::config::ConfigError;

/// Revoke settings: [`Config::revoke`](crate::Config::revoke).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RevokeConfig {
    /// Bound on remembered groups. A rank remembers, per group, the newest epoch revoked (older
    /// epochs of that group are stale by definition, so one entry per group is enough). At the
    /// bound the group revoked longest ago is forgotten first (counted in
    /// [`RevokeStats::forgotten`](crate::revoke::RevokeStats::forgotten)); a late copy of a
    /// forgotten group's notice is then taken as new and delivered again.
    pub max_groups: usize,
}

impl Default for RevokeConfig {
    fn default() -> Self {
        Self { max_groups: 1024 }
    }
}

impl RevokeConfig {
    /// Checks every field; a zero bound is refused.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.max_groups == 0 {
            return Err(ConfigError::Zero("revoke.max_groups"));
        }
        Ok(())
    }
}
