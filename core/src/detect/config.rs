//! The detector's configuration section.

use crate::config::ConfigError;
use crate::time::Duration;

/// Most observers per member.
pub const MAX_OBSERVERS: u32 = 64;

/// Largest allowed [`DetectConfig::health_max`].
pub const MAX_HEALTH_MULTIPLIER: u32 = 64;

/// Heartbeat failure-detector settings: [`Config::detect`](crate::Config::detect).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct DetectConfig {
    /// Whether the detector runs. Off by default until membership consumes its evidence;
    /// when off it sends nothing and arms nothing.
    pub enabled: bool,
    /// How often a member heartbeats each of its observers.
    pub period: Duration,
    /// Silence after which an observer suspects its subject (more than one period).
    pub timeout: Duration,
    /// How long a suspected member has to refute (heartbeat with a higher incarnation)
    /// before its observer reports it unresponsive.
    pub refute: Duration,
    /// Observers per member (K, 1..=64); fewer in views too small to have K distinct ones.
    pub observers: u32,
    /// Seed of the observer rings. Every rank must use the same value: the rings are a
    /// cluster-wide function of (seed, live ranks), not of the node's own seed.
    pub ring_seed: u64,
    /// Local health awareness (Lifeguard's LHM): the most this rank's silence timeout and
    /// refutation window are multiplied by while it has evidence of its own trouble. The
    /// multiplier is 1 + the local health score, and the score is at most this minus one
    /// (1..=64; Lifeguard's 8; 1 turns awareness off).
    pub health_max: u32,
    /// Local health awareness: consecutive healthy heartbeat rounds (rounds with no evidence
    /// of this rank's own trouble) that lower the score by one (at least 1).
    pub health_recover: u32,
    /// Start-up grace: a subject this rank has never heard from is not suspected before this
    /// long after the node started (its silence counts from then). Processes of one cluster
    /// start over seconds (a launcher spreads them, an overloaded host runs them late): a
    /// rank that has not started yet is not dead. Zero (the default) watches every subject
    /// from the start; a subject heard once is watched normally, and so is every subject
    /// once the grace is over.
    pub startup_grace: Duration,
    /// The same for a joiner, counted from the view that admitted it: its process starts only
    /// once its contact's answer reaches it, then dials its parent; until it is heard once, or
    /// this long after its admission, it is not suspected. A joiner that never starts is
    /// removed after this plus the usual timeout.
    pub join_grace: Duration,
    /// Heartbeat rounds on a grid: every round starts at a multiple of `period` counted from
    /// `Instant::ZERO` (the first one after the previous round) instead of one period after
    /// the previous round fired. Processes whose clocks share an origin (a driver that aligns
    /// its clock to the wall clock) then heartbeat in the same instants, and an observer
    /// reads its subjects' heartbeats in one wake-up instead of one wake-up each. Off by
    /// default (the simulator's schedules do not use it); the lateness and freeze rules are
    /// unchanged (a round is late by how long after its grid point it fired).
    pub beat_grid: bool,
}

impl Default for DetectConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            period: Duration::from_millis(100),
            timeout: Duration::from_millis(300),
            refute: Duration::from_millis(100),
            observers: 8,
            ring_seed: 0x4c49_4645_4c49_4e45,
            health_max: 8,
            health_recover: 10,
            startup_grace: Duration::ZERO,
            join_grace: Duration::from_secs(2),
            beat_grid: false,
        }
    }
}

impl DetectConfig {
    /// Checks every field: positive period and refutation window, a timeout longer than one
    /// period, 1..=64 observers, a health multiplier of 1..=64 and a positive recovery.
    pub fn validate(&self) -> Result<(), ConfigError> {
        for (name, v) in [
            ("detect.period", self.period.as_nanos()),
            ("detect.refute", self.refute.as_nanos()),
            ("detect.observers", u64::from(self.observers)),
            ("detect.health_max", u64::from(self.health_max)),
            ("detect.health_recover", u64::from(self.health_recover)),
        ] {
            if v == 0 {
                return Err(ConfigError::Zero(name));
            }
        }
        if self.timeout <= self.period {
            return Err(ConfigError::Invalid(
                "detect.timeout must be longer than detect.period",
            ));
        }
        if self.observers > MAX_OBSERVERS {
            return Err(ConfigError::Invalid("detect.observers is over 64"));
        }
        if self.health_max > MAX_HEALTH_MULTIPLIER {
            return Err(ConfigError::Invalid("detect.health_max is over 64"));
        }
        Ok(())
    }
}
