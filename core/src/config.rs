//! Validated node configuration.

use crate::time::Duration;
use crate::tree::{Layout, LayoutError, Rank, RankSet};
use crate::wire::{Limits, HEADER_LEN};

/// Smallest accepted `max_frame`.
pub const MIN_FRAME: u32 = 256;
/// Largest accepted `max_frame` (256 MiB).
pub const MAX_FRAME: u32 = 256 << 20;

/// Largest accepted `relm_window` (2^20): far below half the uid cycle, so serial order is
/// never ambiguous.
pub const MAX_RELM_WINDOW: usize = 1 << 20;

/// Everything a [`Node`](crate::Node) needs besides its rank, seed and the current time.
///
/// Build with [`Config::new`] and adjust fields; [`Node::new`](crate::Node::new) validates it and
/// refuses an invalid one with a [`ConfigError`] (never a panic).
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// Number of rank positions, holes included.
    pub span: u32,
    /// Tree radix (2..=1024).
    pub radix: u32,
    /// Ranks already departed (holes), e.g. from a joiner's [`Snapshot`](crate::tree::Snapshot).
    pub dead: RankSet,
    /// Largest frame accepted or sent, header included. Checked before any allocation.
    pub max_frame: u32,
    /// Largest element count of any list inside a frame.
    pub max_list: u32,
    /// Bound on transmits queued between two drains; past it, transmits are dropped and counted.
    pub max_transmits: usize,
    /// Bound on events queued between two drains; past it, events are dropped and counted.
    pub max_events: usize,
    /// How long a flood id is remembered for duplicate suppression.
    pub flood_linger: Duration,
    /// Bound on remembered flood ids; the oldest is forgotten first.
    pub max_floods: usize,
    /// Xcast: broadcasts this rank may have awaiting completion, and the root's window of
    /// numbered but incomplete ops. Past it the origin gets
    /// [`CommandError::Backpressure`](crate::CommandError::Backpressure).
    pub xcast_max_inflight: usize,
    /// Xcast: payload bytes this rank may have awaiting completion.
    pub xcast_max_bytes: usize,
    /// Xcast: how often an origin re-sends relays the root has not numbered and asks about
    /// completions it has not heard of.
    pub xcast_retry: Duration,
    /// Root: how long to gather reported deaths into one global failure notice.
    pub notice_batch: Duration,
    /// This rank joined after the start (a grow): it adopts earlier broadcasts as complete.
    pub joiner: bool,
    /// RELM: messages this rank may have unacknowledged per destination (at most 2^20). Past
    /// it, [`Node::relm_send`](crate::Node::relm_send) refuses with
    /// [`CommandError::RelmBackpressure`](crate::CommandError::RelmBackpressure).
    pub relm_window: usize,
    /// RELM: payload bytes this rank may have unacknowledged across all destinations.
    pub relm_max_bytes: usize,
    /// RELM: how long a relay keeps a forwarded message's bytes for replays.
    pub relm_cache_ttl: Duration,
    /// RELM: how many forwarded messages a relay keeps for replays; past it the oldest goes
    /// (0 disables relay caching: replays then always come from the origin).
    pub relm_cache_max: usize,
    /// RELM: how long ACKs and probes wait to be coalesced into one frame per next hop.
    pub relm_ack_delay: Duration,
    /// RELM: how long an origin waits for ACK progress before it probes the destination again
    /// (the end-to-end safety net under link updates and replays).
    pub relm_retry: Duration,
    /// RELM: how long a promoted rank waits for its neighbours' link updates before it sends
    /// its own anyway (a backstop; counted in `relm_gate_timeouts`).
    pub relm_gate_timeout: Duration,
    /// RELM: the first uid of every (source, destination) chain (all ranks must agree; tests
    /// start near the top of the range to cross the wrap).
    pub relm_first_uid: u32,
}

impl Config {
    /// A configuration with defaults for everything but the tree shape.
    pub fn new(span: u32, radix: u32) -> Self {
        Self {
            span,
            radix,
            dead: RankSet::new(),
            max_frame: 1 << 20,
            max_list: 1 << 16,
            max_transmits: 1 << 16,
            max_events: 1 << 16,
            flood_linger: Duration::from_secs(10),
            max_floods: 1024,
            xcast_max_inflight: 1024,
            xcast_max_bytes: 64 << 20,
            xcast_retry: Duration::from_millis(200),
            notice_batch: Duration::from_millis(2),
            joiner: false,
            relm_window: 1024,
            relm_max_bytes: 64 << 20,
            relm_cache_ttl: Duration::from_millis(500),
            relm_cache_max: 4096,
            relm_ack_delay: Duration::from_millis(1),
            relm_retry: Duration::from_millis(250),
            relm_gate_timeout: Duration::from_millis(500),
            relm_first_uid: 0,
        }
    }

    /// Checks every field; returns the tree layout on success.
    pub fn validate(&self) -> Result<Layout, ConfigError> {
        let layout = Layout::new(self.span, self.radix)?;
        if let Some(r) = self.dead.max().filter(|&r| !layout.contains(r)) {
            return Err(ConfigError::DeadOutOfRange {
                rank: r,
                span: self.span,
            });
        }
        if !(MIN_FRAME..=MAX_FRAME).contains(&self.max_frame) {
            return Err(ConfigError::MaxFrame(self.max_frame));
        }
        for (name, v) in [
            ("max_list", self.max_list as usize),
            ("max_transmits", self.max_transmits),
            ("max_events", self.max_events),
            ("max_floods", self.max_floods),
            ("xcast_max_inflight", self.xcast_max_inflight),
            ("xcast_max_bytes", self.xcast_max_bytes),
            ("xcast_retry", self.xcast_retry.as_nanos() as usize),
            ("relm_window", self.relm_window),
            ("relm_max_bytes", self.relm_max_bytes),
            ("relm_cache_ttl", self.relm_cache_ttl.as_nanos() as usize),
            ("relm_retry", self.relm_retry.as_nanos() as usize),
            (
                "relm_gate_timeout",
                self.relm_gate_timeout.as_nanos() as usize,
            ),
        ] {
            if v == 0 {
                return Err(ConfigError::Zero(name));
            }
        }
        if self.relm_window > MAX_RELM_WINDOW {
            return Err(ConfigError::RelmWindow(self.relm_window));
        }
        if self.relm_first_uid > crate::relm::UID_MAX {
            return Err(ConfigError::RelmFirstUid(self.relm_first_uid));
        }
        debug_assert!(MIN_FRAME as usize > HEADER_LEN);
        Ok(layout)
    }

    /// The decoding limits this configuration implies.
    pub fn limits(&self) -> Limits {
        Limits {
            max_frame: self.max_frame,
            max_list: self.max_list,
        }
    }
}

/// Why a configuration (or the rank given with it) was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// Span or radix out of range.
    #[error("invalid tree shape: {0}")]
    Layout(#[from] LayoutError),
    /// A dead rank at or above the span.
    #[error("dead rank {rank} is outside the span {span}")]
    DeadOutOfRange {
        /// The rank.
        rank: Rank,
        /// The span.
        span: u32,
    },
    /// `max_frame` outside `MIN_FRAME..=MAX_FRAME`.
    #[error("max_frame {0} is out of range (256..=268435456)")]
    MaxFrame(u32),
    /// A bound that must be positive is zero.
    #[error("{0} must be positive")]
    Zero(&'static str),
    /// The node's own rank is outside the span.
    #[error("rank {rank} is outside the span {span}")]
    MeOutOfRange {
        /// The rank.
        rank: Rank,
        /// The span.
        span: u32,
    },
    /// The node's own rank is in the dead set (a departed rank never comes back).
    #[error("rank {0} is listed as dead")]
    MeDead(Rank),
    /// `relm_window` above [`MAX_RELM_WINDOW`].
    #[error("relm_window {0} is over the limit 1048576")]
    RelmWindow(usize),
    /// `relm_first_uid` is one of the reserved sentinels.
    #[error("relm_first_uid {0} is a reserved sentinel (valid uids are 0..=4294967292)")]
    RelmFirstUid(u32),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_configs_are_errors() {
        assert!(Config::new(10, 2).validate().is_ok());
        assert!(matches!(
            Config::new(10, 1).validate(),
            Err(ConfigError::Layout(_))
        ));
        assert!(matches!(
            Config::new(0, 2).validate(),
            Err(ConfigError::Layout(_))
        ));
        let mut c = Config::new(10, 2);
        c.dead.insert(Rank(10));
        assert!(matches!(
            c.validate(),
            Err(ConfigError::DeadOutOfRange { .. })
        ));
        let mut c = Config::new(10, 2);
        c.max_frame = 10;
        assert_eq!(c.validate(), Err(ConfigError::MaxFrame(10)));
        let mut c = Config::new(10, 2);
        c.max_transmits = 0;
        assert_eq!(c.validate(), Err(ConfigError::Zero("max_transmits")));
        let mut c = Config::new(10, 2);
        c.relm_window = MAX_RELM_WINDOW + 1;
        assert_eq!(
            c.validate(),
            Err(ConfigError::RelmWindow(MAX_RELM_WINDOW + 1))
        );
        let mut c = Config::new(10, 2);
        c.relm_first_uid = crate::relm::UID_NONE;
        assert_eq!(
            c.validate(),
            Err(ConfigError::RelmFirstUid(crate::relm::UID_NONE))
        );
    }
}
