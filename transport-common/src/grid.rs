//! A wall-clock grid for periodic wake-ups: instants at which the wall clock (time since the
//! Unix epoch) is a multiple of a step. Timers rounded up to it fire in the same instants in
//! every process of a host, so the processes' periodic work (heartbeat rounds, keepalive
//! checks) shares wake-ups instead of each timer waking its process on its own: a process
//! costs its wake-ups (hundreds of processes on a few cores), not its few frames.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::time::Instant as Tick;

/// A grid of `step`-spaced instants aligned to the wall clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WallGrid {
    /// A grid point (the last one before the grid was made).
    origin: Tick,
    step: Duration,
}

/// How many phases a host's processes are spread over ([`WallGrid::for_rank`]): rank `r`
/// takes phase `r % GRID_PHASES`. One phase for all would make every process of a host wake
/// in the same instant (256 processes on 2 cores: a 40 ms burst every heartbeat period, which
/// makes the last ones' timers late enough to count as overload); four keep each burst a
/// quarter as large while an observer's eight subjects still share about 3.6 wake-ups a
/// period instead of eight.
pub const GRID_PHASES: u32 = 4;

impl WallGrid {
    /// The grid of multiples of `step` (at least 1 ns) of the wall clock, as tokio instants.
    pub fn new(step: Duration) -> Self {
        Self::phased(step, 0, 1)
    }

    /// The grid of rank `rank`'s phase: the wall clock's multiples of `step`, shifted by
    /// `rank % GRID_PHASES` of `GRID_PHASES` parts of a step.
    pub fn for_rank(step: Duration, rank: u32) -> Self {
        Self::phased(step, rank % GRID_PHASES, GRID_PHASES)
    }

    /// Multiples of `step`, shifted by `phase / phases` of a step.
    fn phased(step: Duration, phase: u32, phases: u32) -> Self {
        let step = step.max(Duration::from_nanos(1));
        let now = Tick::now();
        let wall = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let s = step.as_nanos();
        let shift = s * u128::from(phase) / u128::from(phases.max(1));
        // How far past its last grid point the wall clock is now.
        let past = (wall + s - shift % s) % s;
        let past = u64::try_from(past).unwrap_or(0);
        let origin = now.checked_sub(Duration::from_nanos(past)).unwrap_or(now);
        Self { origin, step }
    }

    /// The last grid point at or before the grid was made.
    pub fn origin(&self) -> Tick {
        self.origin
    }

    /// The first grid point at or after `t` (`t` itself before the origin).
    pub fn at_or_after(&self, t: Tick) -> Tick {
        let Some(since) = t.checked_duration_since(self.origin) else {
            return t;
        };
        let step = self.step.as_nanos();
        let steps = since.as_nanos().div_ceil(step);
        let off = u64::try_from(steps.saturating_mul(step)).unwrap_or(u64::MAX);
        self.origin
            .checked_add(Duration::from_nanos(off))
            .unwrap_or(t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn points_are_step_apart_and_never_early() {
        let g = WallGrid::new(Duration::from_millis(100));
        let o = g.origin();
        assert!(o <= Tick::now());
        assert_eq!(g.at_or_after(o), o);
        let t = o + Duration::from_millis(1);
        assert_eq!(g.at_or_after(t), o + Duration::from_millis(100));
        let t = o + Duration::from_millis(250);
        assert_eq!(g.at_or_after(t), o + Duration::from_millis(300));
        assert_eq!(
            g.at_or_after(o + Duration::from_millis(200)),
            o + Duration::from_millis(200)
        );
        // Two grids of one step made at different moments share their points.
        let h = WallGrid::new(Duration::from_millis(100));
        let d = (h.origin() + Duration::from_millis(100))
            .saturating_duration_since(o)
            .as_nanos()
            % 100_000_000;
        assert!(!(2_000_000..=98_000_000).contains(&d), "{d}");
        // Rank 1's phase is a quarter of a step after rank 0's (and rank 4's).
        let r1 = WallGrid::for_rank(Duration::from_millis(100), 1);
        let step = Duration::from_millis(100);
        let d = (r1.origin() + step).saturating_duration_since(o).as_nanos() % 100_000_000;
        assert!((23_000_000..27_000_000).contains(&d), "{d}");
    }
}
