//! Heartbeat failure-detector counters.

/// Heartbeat failure-detector counters. Monotonic; read through
/// [`Node::stats`](crate::Node::stats).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct DetectStats {
    /// Heartbeats sent to this rank's observers (refutations included).
    pub heartbeats_out: u64,
    /// Heartbeats received from this rank's subjects.
    pub heartbeats_in: u64,
    /// Subjects this rank began to suspect (silent for `detect.timeout`).
    pub suspicions: u64,
    /// Suspicions lifted by a heartbeat with a higher incarnation.
    pub refuted: u64,
    /// Suspicions that stood for the whole refutation window (soft evidence).
    pub unresponsive: u64,
    /// Standing alerts sent again (every period until the subject's fate is decided).
    pub alerts_resent: u64,
    /// Late timers that found this rank frozen: the stretch it slept through was taken off its
    /// subjects' silence (accusations put off, not dropped).
    pub self_freeze_skips: u64,
    /// Times this rank raised its incarnation to refute a suspicion of itself.
    pub self_refutations: u64,
    /// Suspicion notices sent again to a subject whose suspicion stands (the first may have
    /// been lost with a connection; a subject that never hears it cannot refute).
    pub suspects_resent: u64,
    /// Points added to the local health score (evidence of this rank's own trouble: two
    /// observers suspecting it at about the same time, or its heartbeat timer firing late).
    pub health_raised: u64,
    /// Points removed from the local health score (after `detect.health_recover` healthy
    /// rounds each).
    pub health_lowered: u64,
    /// Silence timeouts and refutation windows extended because the local health score rose
    /// after they were armed (accusations a sick observer put off).
    pub health_held: u64,
    /// Heartbeats or suspicion notices from ranks this rank does not watch or is not
    /// watched by, or about another rank (dropped).
    pub stale: u64,
    /// Silence timers held because the subject was never heard from and the start-up grace
    /// (`detect.startup_grace`) was not over.
    pub startup_holds: u64,
}
