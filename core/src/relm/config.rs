//! The RELM machine's configuration section.

use crate::config::ConfigError;
use crate::time::Duration;

/// Largest accepted `relm.window` (2^20): far below half the uid cycle, so serial order is
/// never ambiguous.
pub const MAX_RELM_WINDOW: usize = 1 << 20;

/// Reliable messaging settings: [`Config::relm`](crate::Config::relm).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RelmConfig {
    /// Messages this rank may have unacknowledged per destination (at most 2^20). Past it,
    /// sending refuses with [`RelmError::Backpressure`](crate::relm::RelmError::Backpressure).
    pub window: usize,
    /// Payload bytes this rank may have unacknowledged across all destinations.
    pub max_bytes: usize,
    /// How long a relay keeps a forwarded message's bytes for replays.
    pub cache_ttl: Duration,
    /// How many forwarded messages a relay keeps for replays; past it the oldest goes
    /// (0 disables relay caching: replays then always come from the origin).
    pub cache_max: usize,
    /// How long ACKs and probes wait to be coalesced into one frame per next hop.
    pub ack_delay: Duration,
    /// How long an origin waits for ACK progress before it probes the destination again
    /// (the end-to-end safety net under link updates and replays).
    pub retry: Duration,
    /// How long a promoted rank waits for its neighbours' link updates before it sends
    /// its own anyway (a backstop; counted in `relm.gate_timeouts`).
    pub gate_timeout: Duration,
    /// The first uid of every (source, destination) chain (all ranks must agree; tests
    /// start near the top of the range to cross the wrap).
    pub first_uid: u32,
}

impl Default for RelmConfig {
    fn default() -> Self {
        Self {
            window: 1024,
            max_bytes: 64 << 20,
            cache_ttl: Duration::from_millis(500),
            cache_max: 4096,
            ack_delay: Duration::from_millis(1),
            retry: Duration::from_millis(250),
            gate_timeout: Duration::from_millis(500),
            first_uid: 0,
        }
    }
}

/// Why a RELM configuration section was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RelmConfigError {
    /// `window` above [`MAX_RELM_WINDOW`].
    #[error("relm.window {0} is over the limit 1048576")]
    Window(usize),
    /// `first_uid` is one of the reserved sentinels.
    #[error("relm.first_uid {0} is a reserved sentinel (valid uids are 0..=4294967292)")]
    FirstUid(u32),
}

impl RelmConfig {
    /// Checks every field: positive bounds and periods, the window limit, a valid first uid.
    pub fn validate(&self) -> Result<(), ConfigError> {
        for (name, v) in [
            ("relm.window", self.window as u64),
            ("relm.max_bytes", self.max_bytes as u64),
            ("relm.cache_ttl", self.cache_ttl.as_nanos()),
            ("relm.retry", self.retry.as_nanos()),
            ("relm.gate_timeout", self.gate_timeout.as_nanos()),
        ] {
            if v == 0 {
                return Err(ConfigError::Zero(name));
            }
        }
        if self.window > MAX_RELM_WINDOW {
            return Err(RelmConfigError::Window(self.window).into());
        }
        if self.first_uid > super::UID_MAX {
            return Err(RelmConfigError::FirstUid(self.first_uid).into());
        }
        Ok(())
    }
}
