//! The failure-knowledge machine's configuration section.

use crate::config::ConfigError;
use crate::time::Duration;

/// Failure-knowledge settings: [`Config::membership`](crate::Config::membership).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct MembershipConfig {
    /// Root: how long to gather reported deaths into one global failure notice.
    pub notice_batch: Duration,
    /// Coordinator: observers (of `detect.observers`) whose standing alerts make a subject's
    /// removal stable (H; scaled down in views with fewer observers, never below 2).
    pub stable_reports: u32,
    /// Coordinator: a subject with at least this many reports but fewer than H is in flux (L);
    /// a removal waits for it, so failures found together go into one view change, but at
    /// most `flux_hold` after the in-flux subject's first report.
    pub flux_reports: u32,
    /// Coordinator: the longest a stable removal waits for a subject in flux.
    pub flux_hold: Duration,
    /// Alerts: how long detector evidence waits at each hop (its observer and every relay up
    /// the tree) to be merged with what else arrives. Zero (the default) sends it in the turn
    /// that produced it: evidence that arrives together (one read of the socket, one batch of
    /// timers) still goes up as one message, and a loaded host adds no timer wake per hop
    /// (on 2 cores running 256 nodes each wake cost 10-40 ms, and a removal's alerts cross
    /// three hops).
    pub alert_batch: Duration,
    /// Check-ins: how long a relay merges its descendants' check-ins before sending them up
    /// (start-up is throughput-bound: hundreds of check-ins cross the same relays at once).
    pub relay_batch: Duration,
    /// Most fencing notices sent to one removed rank per this interval.
    pub evicted_interval: Duration,
    /// Coordinator: its removals on evidence within this window, plus the one it is about to
    /// make, must leave more than half of the members it had (the majority guard). Longer is
    /// safer against a coordinator cut off for a while; shorter lets a cluster shrink faster
    /// by evidence alone.
    pub majority_window: Duration,
    /// How long a tree link may stay down, both endpoints alive, before its lower endpoint
    /// (the child) is removed with cause "unreachable" (the gray timeout).
    pub gray_timeout: Duration,
    /// Detector on: a tree link (parent or child) over which no frame from the peer arrived
    /// for this long, while the peer is a live member and this rank hears others, is declared
    /// gray by the core itself and relayed around (`relay.rs`, `silence.rs`), before the
    /// transport notices anything. Idle tree links carry a tree ping at least every third of
    /// this, so silence means loss. Zero turns core-declared gray off (the transport's link
    /// loss is then the only sign).
    pub gray_after: Duration,
    /// Coordinator (detector on): how long a refused dial reported by one rank waits for its
    /// corroboration (a second rank's refused dial, the coordinator's own included) or its
    /// refutation (the subject answers a probe). Unsettled by then, the report is dropped: the
    /// subject's observers decide on their evidence. Also the least interval between one
    /// rank's reports about one subject.
    pub corroborate_timeout: Duration,
    /// Coordinator: how many of the subject's observers (other than the ranks that reported
    /// it) are asked to dial it at once when one rank reports a refused dial; the coordinator
    /// dials it too.
    pub corroborate_probes: u32,
    /// Coordinator: the overload window. Down evidence (an observer's alert or a refused dial)
    /// against more than `overload_percent` of the members, and at least
    /// `overload_min_subjects` of them, first arriving within this window means the trouble
    /// is probably this coordinator's own or the network's (Lifeguard): it holds its decisions
    /// about those subjects until their evidence has stood this long, or is refuted.
    pub overload_window: Duration,
    /// Coordinator: the share of the members (in percent, 1..=100) that down evidence arriving
    /// within `overload_window` must exceed to hold decisions.
    pub overload_percent: u32,
    /// Coordinator: fewer subjects accused within `overload_window` never hold a decision
    /// (small views: one loss in eight ranks is no overload). At least 1.
    pub overload_min_subjects: u32,
    /// Membership starts from check-ins: a launched rank is a member once the coordinator's
    /// check-in notice lists it (view 0 is formed from them; the span is the expected size),
    /// `MembershipEvent::Ready` once every expected rank is in, `StartupIncomplete` after
    /// `startup_timeout`. Off: view 0 is the whole span (the simulator's and benches'
    /// default, and the C ABI's; `lifeline node` turns it on, `--no-check-in` off).
    pub check_in: bool,
    /// Coordinator: how long check-ins heard wait to share one notice (one view change).
    pub check_in_batch: Duration,
    /// A launched rank re-sends its check-in this often until a notice lists it.
    pub check_in_resend: Duration,
    /// Coordinator: the ranks still missing this long after its start (and at least two
    /// re-send intervals after it became coordinator) are removed, cause "never joined", and
    /// every member gets `StartupIncomplete`.
    pub startup_timeout: Duration,
    /// Coordinator: how long shrink requests wait to share one order (one view change).
    pub shrink_batch: Duration,
    /// The shrink campaign bound: a requester reports `CampaignFailed` (timed out) for a
    /// campaign not completed this long after it asked; a target leaves at the latest this
    /// long after it entered leaving mode (the fallback when its lifeline is never closed),
    /// and acknowledges the order undrained after a quarter of it. Positive.
    pub shrink_timeout: Duration,
    /// Bound on shrink campaigns one requester has open, and on the coordinator's queue of
    /// requests (further requests are refused, or dropped and counted). At least 1.
    pub shrink_max_pending: u32,
    /// Quorum views (`membership.quorum`): `true` ("majority") decides every failure notice
    /// with members holding more than half of the previous view's weight (members 2, the root
    /// 3) and lets a candidate behind a lost root take over by ballots (`lifeline node` and
    /// `lifeline cluster` turn it on unless given `--quorum none`); `false` ("none", the core's
    /// default until the membership swarm's silent-detection p99 bound holds with it on:
    /// docs/quorum.md) is the earlier behaviour: the root decides alone, under the majority
    /// guard only.
    pub quorum: bool,
    /// How many candidates behind a subject's coordinator get its evidence straight (quorum
    /// on): the failover reaches past that many candidates lost together. At least 1.
    pub quorum_backups: u32,
    /// Quorum on: the leader's removal check and phase 2 go down its tree (tree rounds,
    /// `docs/quorum.md`) once its view has at least this many members; smaller views use
    /// direct sends (each member then hears the leader itself, which vouching counts on: at
    /// 32 ranks the partition sweep's seed 789 removed 14 live ranks with tree rounds against
    /// 3 without). 0: always tree rounds.
    pub quorum_tree_min: u32,
}

impl Default for MembershipConfig {
    fn default() -> Self {
        Self {
            notice_batch: Duration::from_millis(2),
            stable_reports: 6,
            flux_reports: 2,
            flux_hold: Duration::from_millis(50),
            alert_batch: Duration::ZERO,
            relay_batch: Duration::from_millis(2),
            evicted_interval: Duration::from_millis(100),
            majority_window: Duration::from_secs(30),
            gray_timeout: Duration::from_secs(10),
            gray_after: Duration::from_millis(500),
            corroborate_timeout: Duration::from_millis(200),
            corroborate_probes: 2,
            overload_window: Duration::from_millis(500),
            overload_percent: 25,
            overload_min_subjects: 4,
            check_in: false,
            check_in_batch: Duration::from_millis(50),
            check_in_resend: Duration::from_millis(500),
            startup_timeout: Duration::from_secs(10),
            shrink_batch: Duration::from_millis(2),
            shrink_timeout: Duration::from_secs(10),
            shrink_max_pending: 64,
            quorum: false,
            quorum_backups: 3,
            quorum_tree_min: 64,
        }
    }
}

impl MembershipConfig {
    /// Checks every field (zero batches are allowed: send at once): 2 ≤ L ≤ H, positive
    /// timeouts and windows, an overload share in 1..=100 and at least one subject.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.stable_reports < 2 {
            return Err(ConfigError::Invalid(
                "membership.stable_reports must be at least 2: one observer never evicts",
            ));
        }
        if self.flux_reports == 0 || self.flux_reports > self.stable_reports {
            return Err(ConfigError::Invalid(
                "membership.flux_reports must be in 1..=stable_reports",
            ));
        }
        if self.gray_timeout == Duration::ZERO {
            return Err(ConfigError::Invalid(
                "membership.gray_timeout must be positive: a link down for an instant is no verdict",
            ));
        }
        if self.corroborate_timeout == Duration::ZERO {
            return Err(ConfigError::Invalid(
                "membership.corroborate_timeout must be positive: a refused dial needs time to be corroborated",
            ));
        }
        if self.overload_window == Duration::ZERO {
            return Err(ConfigError::Invalid(
                "membership.overload_window must be positive",
            ));
        }
        if self.overload_percent == 0 || self.overload_percent > 100 {
            return Err(ConfigError::Invalid(
                "membership.overload_percent must be in 1..=100",
            ));
        }
        if self.overload_min_subjects == 0 {
            return Err(ConfigError::Invalid(
                "membership.overload_min_subjects must be at least 1",
            ));
        }
        if self.check_in
            && (self.check_in_resend == Duration::ZERO || self.startup_timeout == Duration::ZERO)
        {
            return Err(ConfigError::Invalid(
                "membership.check_in_resend and membership.startup_timeout must be positive with check_in",
            ));
        }
        if self.shrink_timeout == Duration::ZERO {
            return Err(ConfigError::Invalid(
                "membership.shrink_timeout must be positive: a campaign never waits unbounded",
            ));
        }
        if self.quorum_backups == 0 || self.quorum_backups > 64 {
            return Err(ConfigError::Invalid(
                "membership.quorum_backups must be in 1..=64",
            ));
        }
        if self.shrink_max_pending == 0 {
            return Err(ConfigError::Invalid(
                "membership.shrink_max_pending must be at least 1",
            ));
        }
        Ok(())
    }
}
