//! [`QuicConfig`]: the QUIC adapter's settings and the quinn transport configuration they give.

use std::time::Duration;

use quinn::{IdleTimeout, TransportConfig, VarInt};

/// The shortest [`QuicConfig::link_timeout`]: QUIC carries the idle timeout in whole
/// milliseconds, and 0 would mean "never time out".
pub const MIN_LINK_TIMEOUT: Duration = Duration::from_millis(1);

/// The longest [`QuicConfig::link_timeout`]. A dead peer goes unnoticed for this long, so
/// anything longer is almost surely a unit mistake.
pub const MAX_LINK_TIMEOUT: Duration = Duration::from_secs(3600);

/// Bidirectional streams a peer may have open on one connection: Lifeline uses two (control and
/// data), the rest is slack for a stream being replaced.
pub const MAX_BIDI_STREAMS: u32 = 4;

/// The QUIC adapter's settings. [`QuicConfig::default`] suits a LAN or loopback cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct QuicConfig {
    /// The bound on noticing a silent peer: the QUIC idle timeout (truncated to whole
    /// milliseconds), with a keep-alive every `link_timeout / 6` so an idle but live connection
    /// never reaches it. A connection over which nothing has arrived for this long is closed,
    /// whether the peer died, hung (QUIC acknowledgements come from user space, so a stopped
    /// process stops them) or was cut off. Both sides of a connection use the same value; QUIC
    /// takes the smaller of the two. Between [`MIN_LINK_TIMEOUT`] and [`MAX_LINK_TIMEOUT`].
    pub link_timeout: Duration,
}

impl Default for QuicConfig {
    fn default() -> Self {
        Self {
            link_timeout: Duration::from_secs(3),
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
}

impl QuicConfig {
    /// A configuration with this link timeout, checked.
    pub fn with_link_timeout(link_timeout: Duration) -> Result<Self, ConfigError> {
        let c = Self { link_timeout };
        c.validate()?;
        Ok(c)
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
        Ok(())
    }

    /// The keep-alive interval: `link_timeout / 6`, so several keep-alives are lost before a
    /// live link times out.
    pub fn keep_alive_interval(&self) -> Duration {
        self.link_timeout / 6
    }

    /// The quinn transport configuration both sides of every connection use:
    /// `max_idle_timeout = link_timeout`, `keep_alive_interval = link_timeout / 6`, at most
    /// [`MAX_BIDI_STREAMS`] bidirectional and no unidirectional streams opened by the peer, and
    /// no datagrams (Lifeline sends none).
    pub fn transport_config(&self) -> Result<TransportConfig, ConfigError> {
        self.validate()?;
        let idle = IdleTimeout::try_from(self.link_timeout).map_err(|_| {
            ConfigError::LinkTimeoutTooLong {
                got: self.link_timeout,
            }
        })?;
        let mut t = TransportConfig::default();
        t.max_idle_timeout(Some(idle))
            .keep_alive_interval(Some(self.keep_alive_interval()))
            .max_concurrent_bidi_streams(VarInt::from_u32(MAX_BIDI_STREAMS))
            .max_concurrent_uni_streams(VarInt::from_u32(0))
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
            let c = QuicConfig { link_timeout: bad };
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
    fn keep_alive_is_a_sixth() {
        let c = QuicConfig::default();
        assert_eq!(c.keep_alive_interval(), Duration::from_millis(500));
        let t = c.transport_config().unwrap();
        let shown = format!("{t:?}");
        // quinn keeps the fields private; its Debug shows them.
        assert!(shown.contains("max_idle_timeout: Some(3000)"), "{shown}");
        assert!(
            shown.contains("keep_alive_interval: Some(500ms)"),
            "{shown}"
        );
        assert!(shown.contains("max_concurrent_bidi_streams: 4"), "{shown}");
        assert!(shown.contains("max_concurrent_uni_streams: 0"), "{shown}");
    }
}
