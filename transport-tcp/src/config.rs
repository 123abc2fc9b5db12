//! What the embedder gives the adapter: the address book and the tuning knobs (the cluster key
//! is [`crate::ClusterKey`]).

use std::net::IpAddr;
use std::time::Duration;

use lifeline_core::link::LinkConfig;
use lifeline_transport_common::DriverConfig;

/// The least [`TcpConfig::keepalive_interval`]: an idle connection writes at most four
/// keepalive frames a second, whatever the link timeout.
pub const KEEPALIVE_FLOOR: Duration = Duration::from_millis(250);

/// Tuning knobs. [`TcpConfig::default`] suits a LAN or loopback cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TcpConfig {
    /// The bound on noticing a vanished peer: `TCP_USER_TIMEOUT` (unacknowledged data older than
    /// this kills the connection). A connection that wrote nothing for
    /// [`Self::keepalive_interval`] (`link_timeout / 6`, at least 250 ms) writes a keepalive frame, so an idle
    /// link always has data in flight: a link to a vanished host goes down within
    /// `link_timeout` plus one keepalive interval plus one retransmission timeout (1.42 s
    /// measured for 1 s, `tests/idle_link.rs`; 3.23-3.71 s for 3 s, a veth cut), and a loss shorter than `link_timeout` less
    /// TCP's retransmission back-off costs nothing, idle or busy (TCP retransmits). A reset or
    /// EOF (a killed process on a live host) is reported at once.
    pub link_timeout: Duration,
    /// Bound on one TCP connect.
    pub connect_timeout: Duration,
    /// Bound on the whole handshake, on either side; a peer slower than this is refused.
    pub handshake_timeout: Duration,
    /// Failed dials (per traffic class) before the peer is reported as a lost link
    /// ([`LinkConfig::dial_attempts`]; 0 is taken as 1).
    pub dial_attempts: u32,
    /// After `startup_grace`, a dial the peer's host refuses outright (nothing listens: the
    /// process is gone) is given up after this many attempts instead of `dial_attempts`
    /// ([`LinkConfig::refused_attempts`]; 0 is taken as 1).
    pub refused_attempts: u32,
    /// How long after start a refused dial is treated like any failure, because peers may
    /// still be starting. An embedder that publishes the address book only after every
    /// listener is bound (a PMIx fence) can set it to zero ([`LinkConfig::startup_grace`]).
    pub startup_grace: Duration,
    /// Delay before the first re-dial; it doubles per failure up to `backoff_max`
    /// ([`LinkConfig::backoff_initial`]; a value above `backoff_max` is taken as `backoff_max`).
    pub backoff_initial: Duration,
    /// Longest delay between re-dials ([`LinkConfig::backoff_max`]).
    pub backoff_max: Duration,
    /// Back-pressure threshold: while any per-peer send queue holds more bytes than this,
    /// application commands are refused with
    /// [`TransportError::Backpressure`](crate::TransportError::Backpressure). 1 MiB by default
    /// (the shared driver's default; see its `DriverConfig`).
    pub queue_soft_bytes: usize,
    /// Hard bound of one per-peer send queue: a peer that lets its queue grow past it is not
    /// reading, and its link is closed and reported down
    /// ([`DownReason::Overflow`](crate::DownReason::Overflow)).
    pub queue_hard_bytes: usize,
    /// Inputs handled per wake of the driver before it yields to other tasks.
    pub max_inputs_per_wake: usize,
    /// Outputs ([`Output`](crate::Output)) buffered for the application: the channel's capacity,
    /// and the count waiting in the driver beyond it at which the driver stops reading
    /// data-class frames and refuses commands (control frames, timers and link changes still
    /// run). No output is ever dropped.
    pub output_buffer: usize,
    /// Whole frames buffered from socket readers to the driver, per traffic class (readers hand
    /// them over in batches of up to 64, one read's worth; the bound is kept in whole batches,
    /// at least one).
    pub frame_buffer: usize,
    /// Read and write buffer capacity per connection: one read takes up to this many bytes
    /// (many frames), and small frames are gathered into one write of up to this many.
    pub io_buffer: usize,
    /// Handshakes in progress at once; connections past it are closed unanswered (counted).
    /// A join connection holds one until its preamble is done.
    pub max_handshakes: usize,
    /// Join connections (processes asking to join through this node) open at once, each
    /// waiting for its answer; past it they are closed unanswered (counted in
    /// `joins_refused`) and the joiner asks another contact.
    pub max_join_conns: usize,
    /// Bound on a join connection's wait for the core's answer (which comes within the
    /// core's `join.timeout`, 5 s by default, as a "retry" at the latest).
    pub join_timeout: Duration,
    /// The source address of outgoing connections ([`BindLocal`]): by default this node's own
    /// address-book IP when that is a loopback address, else whatever the OS picks.
    pub bind_local: BindLocal,
    /// Round the keepalive checks up to a wall-clock grid of this step, in this rank's phase
    /// ([`WallGrid::for_rank`]):
    /// a connection's keepalive timer then fires with the node's other periodic work (the
    /// heartbeat rounds, with `detect.beat_grid` and this set to `detect.period`) instead of
    /// waking the process on its own, at most one step late. `None` (the default): exactly
    /// when due.
    ///
    /// [`WallGrid::for_rank`]: lifeline_transport_common::WallGrid::for_rank
    pub timer_grid: Option<Duration>,
}

/// Which source address a node's outgoing connections carry. The acceptor's handshake checks
/// that a peer connects from its address-book IP, so the source address must be that IP.
///
/// Binding happens before `connect`, to port 0 (the kernel picks the port).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum BindLocal {
    /// [`BindLocal::Book`] when this node's address-book IP is a loopback address
    /// (`127.0.0.0/8`, `::1`), else [`BindLocal::Os`]. Several nodes on one host, each on its
    /// own loopback address (`127.0.1.R`, as `lifeline cluster` runs them), then connect from
    /// their own addresses, which the OS would not pick (it uses `127.0.0.1` for every
    /// loopback destination); on a real network the OS's choice is kept, so an address-book IP
    /// that is not on the host (a NAT or port-forwarded address) still works as before.
    #[default]
    Auto,
    /// Always bind to this node's address-book IP. For a multi-homed host whose route to the
    /// peers leaves by another interface than the one the book names: the OS would pick that
    /// interface's address and the peers would refuse it. A dial fails (and is retried like
    /// any failed dial) if the IP is not assigned to this host.
    Book,
    /// Never bind: the OS picks the source address from its routing table.
    Os,
}

impl BindLocal {
    /// The IP to bind outgoing connections to, for a node whose address-book IP is `own`
    /// (`None`: no entry); `None` means the OS picks.
    pub fn source_ip(self, own: Option<IpAddr>) -> Option<IpAddr> {
        let own = own.filter(|ip| !ip.is_unspecified())?;
        match self {
            Self::Auto if own.is_loopback() => Some(own),
            Self::Book => Some(own),
            Self::Auto | Self::Os => None,
        }
    }
}

impl Default for TcpConfig {
    fn default() -> Self {
        Self {
            link_timeout: Duration::from_secs(3),
            connect_timeout: Duration::from_secs(1),
            handshake_timeout: Duration::from_secs(2),
            dial_attempts: 8,
            refused_attempts: 3,
            startup_grace: Duration::from_secs(10),
            backoff_initial: Duration::from_millis(50),
            backoff_max: Duration::from_secs(1),
            queue_soft_bytes: 1 << 20,
            queue_hard_bytes: 256 << 20,
            max_inputs_per_wake: 256,
            output_buffer: 4096,
            frame_buffer: 1024,
            io_buffer: 256 << 10,
            max_handshakes: 64,
            max_join_conns: 256,
            join_timeout: Duration::from_secs(20),
            bind_local: BindLocal::Auto,
            timer_grid: None,
        }
    }
}

impl TcpConfig {
    /// How long a connection may go without writing before its writer sends the keepalive frame
    /// ([`lifeline_core::wire::KEEPALIVE`]): `link_timeout / 6` (as the QUIC adapter's
    /// keep-alive), at least 10 ms, without writing *or reading*: on an idle connection the end
    /// whose interval runs out first sends six bytes per interval and the other, hearing them,
    /// sends none; a busy connection carries nothing extra. A sixth, not a third: a cut that
    /// fails the send itself (the interface went down) is noticed only `link_timeout` after
    /// the first keepalive that cannot go out, and with a third that came to 4.2 s for 3 s,
    /// past the conformance suite's bound of `link_timeout` + 1 s.
    ///
    /// **Floor: [`KEEPALIVE_FLOOR`] (250 ms).** Below a 1.5 s link timeout a sixth would be
    /// under 250 ms, and every idle connection of every node would pay for it: 64 `lifeline
    /// node` processes on this project's 2-core machine (`lifeline cluster --nodes 64 --duration
    /// 24 --rate 1`, shared with other work) wrote 130,926 keepalive frames at
    /// `--link-timeout-ms 1000` (one per 167 ms, more than all their protocol frames: 125,485)
    /// against 41,774 at 3000, and used 0.96 % against 0.74 % of a core per node; 1 s link
    /// timeouts were already measured unsafe at 256 nodes here (overload). The floor takes a
    /// third off the 1 s figure: 88,366 frames, 0.83 % (131,393 and 0.92 % without it in the
    /// same session). Its cost: a vanished peer is seen within `link_timeout` +
    /// 250 ms + one retransmission timeout instead of `link_timeout` + `link_timeout / 6` +
    /// one (1.45 s rather than 1.37 s for 1 s; the conformance suite's bound is
    /// `link_timeout` + 1 s), and a loss is still retransmitted (several keepalives fit in any
    /// `link_timeout` of 500 ms or more).
    pub fn keepalive_interval(&self) -> Duration {
        (self.link_timeout / 6).max(KEEPALIVE_FLOOR)
    }

    /// The link policy's configuration ([`lifeline_core::link`]): who dials, back-off and
    /// give-up are decided there from the dial fields above. Always valid: attempt counts of 0
    /// are taken as 1 and a `backoff_initial` above `backoff_max` as `backoff_max`.
    pub fn link_config(&self) -> LinkConfig {
        LinkConfig {
            dial_attempts: self.dial_attempts.max(1),
            refused_attempts: self.refused_attempts.max(1),
            startup_grace: self.startup_grace.into(),
            backoff_initial: self.backoff_initial.min(self.backoff_max).into(),
            backoff_max: self.backoff_max.into(),
        }
    }

    /// The shared driver's settings ([`DriverConfig`]): the queue bounds, work cap, buffers and
    /// [`link_config`](Self::link_config).
    pub fn driver_config(&self) -> DriverConfig {
        let mut d = DriverConfig::default();
        d.queue_soft_bytes = self.queue_soft_bytes;
        d.queue_hard_bytes = self.queue_hard_bytes;
        d.max_inputs_per_wake = self.max_inputs_per_wake;
        d.output_buffer = self.output_buffer;
        d.frame_buffer = self.frame_buffer;
        d.max_join_conns = self.max_join_conns;
        d.link = self.link_config();
        d
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_config() {
        // The defaults are the link policy's.
        assert_eq!(TcpConfig::default().link_config(), LinkConfig::default());
        let odd = TcpConfig {
            dial_attempts: 0,
            refused_attempts: 0,
            backoff_initial: Duration::from_secs(5),
            ..TcpConfig::default()
        };
        let l = odd.link_config();
        assert_eq!(l.validate(), Ok(()));
        assert_eq!((l.dial_attempts, l.refused_attempts), (1, 1));
        assert_eq!(l.backoff_initial, l.backoff_max);
    }

    #[test]
    fn the_keepalive_interval_is_a_sixth_with_a_floor() {
        let at = |ms: u64| {
            TcpConfig {
                link_timeout: Duration::from_millis(ms),
                ..TcpConfig::default()
            }
            .keepalive_interval()
        };
        assert_eq!(at(3_000), Duration::from_millis(500));
        assert_eq!(at(6_000), Duration::from_secs(1));
        assert_eq!(at(1_500), KEEPALIVE_FLOOR);
        assert_eq!(at(1_000), KEEPALIVE_FLOOR);
        assert_eq!(at(1), KEEPALIVE_FLOOR);
    }

    #[test]
    fn source_ip() {
        let ip = |s: &str| Some(s.parse::<IpAddr>().unwrap());
        assert_eq!(BindLocal::default(), BindLocal::Auto);
        assert_eq!(BindLocal::Auto.source_ip(ip("127.0.1.7")), ip("127.0.1.7"));
        assert_eq!(BindLocal::Auto.source_ip(ip("127.0.0.1")), ip("127.0.0.1"));
        assert_eq!(BindLocal::Auto.source_ip(ip("::1")), ip("::1"));
        assert_eq!(BindLocal::Auto.source_ip(ip("10.0.0.9")), None);
        assert_eq!(BindLocal::Book.source_ip(ip("10.0.0.9")), ip("10.0.0.9"));
        assert_eq!(BindLocal::Os.source_ip(ip("127.0.1.7")), None);
        assert_eq!(BindLocal::Book.source_ip(ip("0.0.0.0")), None);
        assert_eq!(BindLocal::Book.source_ip(None), None);
    }
}
