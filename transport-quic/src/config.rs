//! [`QuicConfig`]: the QUIC adapter's settings and the quinn transport configuration they give.

use std::time::Duration;

use quinn::{IdleTimeout, TransportConfig, VarInt};

/// The shortest [`QuicConfig::link_timeout`]: QUIC carries the idle timeout (five sixths of it)
/// in whole milliseconds, and 0 would mean "never time out".
pub const MIN_LINK_TIMEOUT: Duration = Duration::from_millis(6);

/// The longest [`QuicConfig::link_timeout`]. A dead peer goes unnoticed for this long, so
/// anything longer is almost surely a unit mistake.
pub const MAX_LINK_TIMEOUT: Duration = Duration::from_secs(3600);

/// Bidirectional streams a peer may have open on one connection: Lifeline uses two (control and
/// data), the rest is slack for a stream being replaced.
pub const MAX_BIDI_STREAMS: u32 = 4;

/// The smallest [`QuicConfig::max_frame`]: room for a frame header and a few bytes of body.
pub const MIN_MAX_FRAME: u32 = 64;

/// The QUIC adapter's settings. [`QuicConfig::default`] suits a LAN or loopback cluster.
///
/// Build one with [`QuicConfig::default`] and struct update syntax inside this crate, or with
/// [`QuicConfig::with_link_timeout`] and the `with_*` setters from outside; every consumer
/// calls [`QuicConfig::validate`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct QuicConfig {
    /// The bound on noticing a silent peer: the QUIC idle timeout is five sixths of it
    /// ([`QuicConfig::idle_timeout`], truncated to whole milliseconds), with a keep-alive every
    /// `link_timeout / 6` so an idle but live connection never reaches it; a survivor's own
    /// keep-alive restarts the timer once, so a connection over which nothing has arrived for
    /// `link_timeout` is closed,
    /// whether the peer died, hung (QUIC acknowledgements come from user space, so a stopped
    /// process stops them) or was cut off. Both sides of a connection use the same value; QUIC
    /// takes the smaller of the two. Between [`MIN_LINK_TIMEOUT`] and [`MAX_LINK_TIMEOUT`].
    pub link_timeout: Duration,
    /// The bound on setting a link up, on either side: a dial gives up
    /// ([`DialError::Timeout`](crate::DialError::Timeout)) unless the handshake, both hellos
    /// and the acceptor's answer complete within it, and an acceptor drops a connection whose
    /// handshake and two hellos take longer. QUIC has no "connection refused": a dial to a port
    /// nobody listens on is never answered, so this is also how long a dial to a dead rank
    /// takes to fail. Between 1 ms and [`MAX_LINK_TIMEOUT`]; 1 s by default.
    pub connect_timeout: Duration,
    /// The largest frame (header included) a link sends or accepts, in bytes: a peer's frame
    /// header announcing more closes the link before anything is allocated for the body. At
    /// least [`MIN_MAX_FRAME`]; 1 MiB by default (the core's default `max_frame`).
    pub max_frame: u32,
    /// `SO_RCVBUF` requested for the endpoint's UDP socket, in bytes (the kernel may cap it at
    /// `net.core.rmem_max`). Large flow-control windows overflow the default 208 KiB buffer on
    /// loopback. 0 leaves the system default. 4 MiB by default.
    pub udp_recv_buffer: usize,
    /// `SO_SNDBUF` requested for the endpoint's UDP socket, in bytes (capped by
    /// `net.core.wmem_max`). 0 leaves the system default. 4 MiB by default.
    pub udp_send_buffer: usize,
    /// Inbound connections whose handshake and hellos may be in progress at once; more are
    /// refused (and counted in [`QuicStats::handshakes_failed`](crate::QuicStats)). 64 by
    /// default; at least 1.
    pub max_handshakes: usize,
    /// Authenticated inbound links waiting for [`QuicEndpoint::accept`](crate::QuicEndpoint);
    /// while this many wait, new ones wait in their handshake task (at most `max_handshakes`).
    /// 16 by default; at least 1.
    pub accept_backlog: usize,
    /// The round-trip time assumed before a connection has measured one: quinn resends an
    /// unanswered first packet after about three times this. RFC 9002's 333 ms suits the
    /// Internet; a cluster's links are a LAN, so 10 ms by default: a dial whose first packet
    /// reached a port that was not open yet (the peer still starting) is resent after about
    /// 30 ms instead of 1 s. (With 333 ms, a 16-node QUIC start-up kept one link down for the
    /// whole 1 s `connect_timeout`: the stalled dial won the tie-break over the peer's working
    /// ones, which were refused as duplicates.) Between 1 ms and `connect_timeout`.
    pub initial_rtt: Duration,
}

impl Default for QuicConfig {
    fn default() -> Self {
        Self {
            link_timeout: Duration::from_secs(3),
            connect_timeout: Duration::from_secs(1),
            max_frame: 1 << 20,
            udp_recv_buffer: 4 << 20,
            udp_send_buffer: 4 << 20,
            max_handshakes: 64,
            accept_backlog: 16,
            initial_rtt: Duration::from_millis(10),
        }
    }
}

/// Why a [`QuicConfig`] was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// `link_timeout` is below [`MIN_LINK_TIMEOUT`] (zero included).
    #[error("link timeout {got:?} is below {MIN_LINK_TIMEOUT:?}")]
    LinkTimeoutTooShort {
        /// The value given.
        got: Duration,
    },
    /// `link_timeout` is above [`MAX_LINK_TIMEOUT`].
    #[error("link timeout {got:?} is above {MAX_LINK_TIMEOUT:?}")]
    LinkTimeoutTooLong {
        /// The value given.
        got: Duration,
    },
    /// `connect_timeout` is zero, below 1 ms or above [`MAX_LINK_TIMEOUT`].
    #[error("connect timeout {got:?} is outside 1 ms ..= {MAX_LINK_TIMEOUT:?}")]
    ConnectTimeout {
        /// The value given.
        got: Duration,
    },
    /// `max_frame` is below [`MIN_MAX_FRAME`].
    #[error("max frame {got} is below {MIN_MAX_FRAME}")]
    MaxFrameTooSmall {
        /// The value given.
        got: u32,
    },
    /// `initial_rtt` is below 1 ms or above `connect_timeout`.
    #[error("initial RTT {got:?} is outside 1 ms ..= connect_timeout")]
    InitialRtt {
        /// The value given.
        got: Duration,
    },
    /// `max_handshakes` or `accept_backlog` is zero.
    #[error("{field} must be at least 1")]
    Zero {
        /// The field's name.
        field: &'static str,
    },
}

impl QuicConfig {
    /// A configuration with this link timeout, checked.
    pub fn with_link_timeout(link_timeout: Duration) -> Result<Self, ConfigError> {
        let c = Self {
            link_timeout,
            ..Self::default()
        };
        c.validate()?;
        Ok(c)
    }

    /// This configuration with `connect_timeout` set, checked.
    pub fn with_connect_timeout(mut self, connect_timeout: Duration) -> Result<Self, ConfigError> {
        self.connect_timeout = connect_timeout;
        self.validate()?;
        Ok(self)
    }

    /// This configuration with `initial_rtt` set, checked.
    pub fn with_initial_rtt(mut self, initial_rtt: Duration) -> Result<Self, ConfigError> {
        self.initial_rtt = initial_rtt;
        self.validate()?;
        Ok(self)
    }

    /// This configuration with `max_frame` set, checked.
    pub fn with_max_frame(mut self, max_frame: u32) -> Result<Self, ConfigError> {
        self.max_frame = max_frame;
        self.validate()?;
        Ok(self)
    }

    /// This configuration with the UDP socket buffer sizes set (0: the system default).
    pub fn with_udp_buffers(mut self, recv: usize, send: usize) -> Self {
        self.udp_recv_buffer = recv;
        self.udp_send_buffer = send;
        self
    }

    /// Checks every field; the builders call it, so an invalid value is an error, never a
    /// panic.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let got = self.link_timeout;
        if got < MIN_LINK_TIMEOUT {
            return Err(ConfigError::LinkTimeoutTooShort { got });
        }
        if got > MAX_LINK_TIMEOUT {
            return Err(ConfigError::LinkTimeoutTooLong { got });
        }
        let got = self.connect_timeout;
        if !(MIN_LINK_TIMEOUT..=MAX_LINK_TIMEOUT).contains(&got) {
            return Err(ConfigError::ConnectTimeout { got });
        }
        let got = self.initial_rtt;
        if !(Duration::from_millis(1)..=self.connect_timeout).contains(&got) {
            return Err(ConfigError::InitialRtt { got });
        }
        if self.max_frame < MIN_MAX_FRAME {
            return Err(ConfigError::MaxFrameTooSmall {
                got: self.max_frame,
            });
        }
        if self.max_handshakes == 0 {
            return Err(ConfigError::Zero {
                field: "max_handshakes",
            });
        }
        if self.accept_backlog == 0 {
            return Err(ConfigError::Zero {
                field: "accept_backlog",
            });
        }
        Ok(())
    }

    /// The keep-alive interval: `link_timeout / 6`, so several keep-alives are lost before a
    /// live link times out.
    pub fn keep_alive_interval(&self) -> Duration {
        self.link_timeout / 6
    }

    /// The idle timeout both sides negotiate: `link_timeout` less one keep-alive interval. A
    /// peer that dies without a word (SIGKILL, a lost host) is noticed by this timeout, which
    /// the survivor restarts once with its own next keep-alive (RFC 9000 §10.1: sending the
    /// first ack-eliciting packet after the last receipt restarts it), so the link goes down
    /// at most `link_timeout` after the peer's last packet.
    pub fn idle_timeout(&self) -> Duration {
        self.link_timeout - self.keep_alive_interval()
    }

    /// The quinn transport configuration both sides of every connection use:
    /// `max_idle_timeout =` [`Self::idle_timeout`] (`link_timeout × 5/6`),
    /// `keep_alive_interval = link_timeout / 6`, at most
    /// [`MAX_BIDI_STREAMS`] bidirectional and no unidirectional streams opened by the peer,
    /// `initial_rtt` from [`Self::initial_rtt`], and no datagrams (Lifeline sends none).
    pub fn transport_config(&self) -> Result<TransportConfig, ConfigError> {
        self.validate()?;
        let idle = IdleTimeout::try_from(self.idle_timeout()).map_err(|_| {
            ConfigError::LinkTimeoutTooLong {
                got: self.link_timeout,
            }
        })?;
        let mut t = TransportConfig::default();
        t.max_idle_timeout(Some(idle))
            .keep_alive_interval(Some(self.keep_alive_interval()))
            .max_concurrent_bidi_streams(VarInt::from_u32(MAX_BIDI_STREAMS))
            .max_concurrent_uni_streams(VarInt::from_u32(0))
            .initial_rtt(self.initial_rtt)
            .datagram_receive_buffer_size(None);
        Ok(t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_timeout_bounds() {
        for bad in [Duration::ZERO, Duration::from_micros(999)] {
            assert_eq!(
                QuicConfig::with_link_timeout(bad),
                Err(ConfigError::LinkTimeoutTooShort { got: bad })
            );
        }
        for bad in [MAX_LINK_TIMEOUT + Duration::from_nanos(1), Duration::MAX] {
            assert_eq!(
                QuicConfig::with_link_timeout(bad),
                Err(ConfigError::LinkTimeoutTooLong { got: bad })
            );
            // Set directly, the builder refuses it too (no panic in quinn's conversions).
            let c = QuicConfig {
                link_timeout: bad,
                ..QuicConfig::default()
            };
            assert!(matches!(
                c.transport_config(),
                Err(ConfigError::LinkTimeoutTooLong { .. })
            ));
        }
        assert!(QuicConfig::with_link_timeout(MIN_LINK_TIMEOUT).is_ok());
        assert!(QuicConfig::with_link_timeout(MAX_LINK_TIMEOUT).is_ok());
        assert!(QuicConfig::default().validate().is_ok());
    }

    #[test]
    fn link_layer_bounds() {
        let d = QuicConfig::default();
        for bad in [Duration::ZERO, MAX_LINK_TIMEOUT + Duration::from_millis(1)] {
            assert_eq!(
                d.clone().with_connect_timeout(bad),
                Err(ConfigError::ConnectTimeout { got: bad })
            );
        }
        assert_eq!(
            d.clone().with_max_frame(MIN_MAX_FRAME - 1),
            Err(ConfigError::MaxFrameTooSmall {
                got: MIN_MAX_FRAME - 1
            })
        );
        assert_eq!(
            d.clone().with_max_frame(MIN_MAX_FRAME).map(|c| c.max_frame),
            Ok(MIN_MAX_FRAME)
        );
        let c = QuicConfig {
            max_handshakes: 0,
            ..QuicConfig::default()
        };
        assert_eq!(
            c.validate(),
            Err(ConfigError::Zero {
                field: "max_handshakes"
            })
        );
        let c = QuicConfig {
            accept_backlog: 0,
            ..QuicConfig::default()
        };
        assert_eq!(
            c.validate(),
            Err(ConfigError::Zero {
                field: "accept_backlog"
            })
        );
    }

    #[test]
    fn initial_rtt_bounds() {
        let c = QuicConfig::default();
        for bad in [
            Duration::ZERO,
            Duration::from_micros(999),
            c.connect_timeout * 2,
        ] {
            assert_eq!(
                c.clone().with_initial_rtt(bad),
                Err(ConfigError::InitialRtt { got: bad })
            );
        }
        let ok = c.with_initial_rtt(Duration::from_millis(333)).unwrap();
        assert!(format!("{:?}", ok.transport_config().unwrap()).contains("initial_rtt: 333ms"));
    }

    #[test]
    fn keep_alive_is_a_sixth() {
        let c = QuicConfig::default();
        assert_eq!(c.keep_alive_interval(), Duration::from_millis(500));
        let t = c.transport_config().unwrap();
        let shown = format!("{t:?}");
        // quinn keeps the fields private; its Debug shows them.
        // Five sixths: the survivor's keep-alive restarts it once, so the link is down within
        // `link_timeout` of the peer's last packet.
        assert!(shown.contains("max_idle_timeout: Some(2500)"), "{shown}");
        assert!(shown.contains("initial_rtt: 10ms"), "{shown}");
        assert!(
            shown.contains("keep_alive_interval: Some(500ms)"),
            "{shown}"
        );
        assert!(shown.contains("max_concurrent_bidi_streams: 4"), "{shown}");
        assert!(shown.contains("max_concurrent_uni_streams: 0"), "{shown}");
    }
}
