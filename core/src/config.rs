//! Validated node configuration.

use crate::detect::DetectConfig;
use crate::flood::FloodConfig;
use crate::join::JoinConfig;
use crate::membership::MembershipConfig;
use crate::relm::{RelmConfig, RelmConfigError};
use crate::revoke::RevokeConfig;
use crate::tree::{Layout, LayoutError, Rank, RankSet};
use crate::wire::{Limits, HEADER_LEN};
use crate::xcast::XcastConfig;

/// Smallest accepted `max_frame`.
pub const MIN_FRAME: u32 = 256;
/// Largest accepted `max_frame` (256 MiB).
pub const MAX_FRAME: u32 = 256 << 20;

/// Everything a [`Node`](crate::Node) needs besides its rank, seed and the current time.
///
/// Node-wide settings sit at the top; each machine's section is nested (`config.relm.window`)
/// and validated by that machine. Build with [`Config::new`] and adjust fields;
/// [`Node::new`](crate::Node::new) validates it and refuses an invalid one with a
/// [`ConfigError`] (never a panic).
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
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
    /// Report every tree repair as an [`Event::Repaired`](crate::Event::Repaired): each batch
    /// of deaths that marked at least one rank dead here (and so recomputed this rank's view
    /// once), with the ranks and how they were learned. Off by default (one more event per
    /// repair); a runtime that counts repair passes (`lifeline node`) turns it on.
    pub report_repairs: bool,
    /// This rank joined after the start (a grow): it adopts earlier broadcasts as complete.
    pub joiner: bool,
    /// The view epoch this rank starts at (a joiner: the epoch of the view that admitted it;
    /// 0 otherwise).
    pub epoch: u64,
    /// A joiner admitted while start-up from check-ins ran: start-up as the view that admitted
    /// it had it ([`Admission::startup`](crate::join::Admission::startup)), so that a joiner the
    /// tree makes the coordinator carries it on. `None` otherwise (ignored for launched ranks).
    pub startup: Option<crate::membership::StartupView>,
    /// Joins: how members answer and admit joiners.
    pub join: JoinConfig,
    /// The flood test protocol.
    pub flood: FloodConfig,
    /// Failure knowledge.
    pub membership: MembershipConfig,
    /// Reliable broadcast.
    pub xcast: XcastConfig,
    /// Reliable messaging.
    pub relm: RelmConfig,
    /// Heartbeat failure detector.
    pub detect: DetectConfig,
    /// The revoke flood.
    pub revoke: RevokeConfig,
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
            report_repairs: false,
            joiner: false,
            epoch: 0,
            startup: None,
            join: JoinConfig::default(),
            flood: FloodConfig::default(),
            membership: MembershipConfig::default(),
            xcast: XcastConfig::default(),
            relm: RelmConfig::default(),
            detect: DetectConfig::default(),
            revoke: RevokeConfig::default(),
        }
    }

    /// The configuration of a joiner that `admission` admitted: this one's settings with the
    /// admission's tree (span, radix, holes) and epoch, as a joiner. The radix must be the
    /// cluster's (it is in the admission; a mismatch is an error, as is a rank the tree does
    /// not hold).
    pub fn for_admission(&self, admission: &crate::join::Admission) -> Result<Self, ConfigError> {
        let layout = admission.snapshot.layout;
        if layout.radix() != self.radix {
            return Err(ConfigError::Invalid(
                "the admission's radix differs from this configuration's",
            ));
        }
        let mut cfg = self.clone();
        cfg.span = layout.span();
        cfg.dead = admission.snapshot.dead.clone();
        cfg.joiner = true;
        cfg.epoch = admission.view_epoch;
        cfg.startup = admission.startup.clone();
        if !layout.contains(admission.rank) || cfg.dead.contains(admission.rank) {
            return Err(ConfigError::MeDead(admission.rank));
        }
        Ok(cfg)
    }

    /// Checks every field (each machine checks its own section); returns the tree layout on
    /// success.
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
        ] {
            if v == 0 {
                return Err(ConfigError::Zero(name));
            }
        }
        self.flood.validate()?;
        self.join.validate()?;
        self.membership.validate()?;
        self.xcast.validate()?;
        self.relm.validate()?;
        self.detect.validate()?;
        self.revoke.validate()?;
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
    /// A field holds a value outside its documented range.
    #[error("invalid configuration: {0}")]
    Invalid(&'static str),
    /// The RELM section was refused.
    #[error(transparent)]
    Relm(#[from] RelmConfigError),
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
        c.relm.window = crate::relm::MAX_RELM_WINDOW + 1;
        assert_eq!(
            c.validate(),
            Err(ConfigError::Relm(RelmConfigError::Window(
                crate::relm::MAX_RELM_WINDOW + 1
            )))
        );
        let mut c = Config::new(10, 2);
        c.relm.first_uid = crate::relm::UID_NONE;
        assert_eq!(
            c.validate(),
            Err(ConfigError::Relm(RelmConfigError::FirstUid(
                crate::relm::UID_NONE
            )))
        );
        let mut c = Config::new(10, 2);
        c.xcast.retry = crate::time::Duration::ZERO;
        assert_eq!(c.validate(), Err(ConfigError::Zero("xcast.retry")));
    }
}
