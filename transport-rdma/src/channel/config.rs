//! Channel and queue pair configuration, with the bounds each value gives.

use std::time::Duration;

use thiserror::Error;

use crate::verbs::Mtu;

/// RC queue pair attributes set on RTR and RTS, and the failure-detection bound they give.
///
/// Defaults (the timer values of rdma-core's `rc_pingpong` example and of Mooncake's transfer
/// engine, with a finite RNR retry; the arithmetic is below):
/// - `timeout = 14`: the local ACK timeout is 4.096 µs × 2^14 ≈ 67 ms;
/// - `retry_cnt = 7`: a peer whose host, NIC, path or process is gone shows up as
///   `RetryExceeded` after about (7 + 1) × 67 ms ≈ 0.54 s ([`QpAttrs::detection_bound`]),
///   inside the TCP adapter's 3 s link timeout (HCAs may round the timer up: measure);
/// - `rnr_retry = 6` (not 7, "forever"): the credit protocol never lets a send meet an empty
///   receive queue, so an RNR NAK means the peer stopped posting receives (hung or broken);
///   6 retries of `min_rnr_timer = 12` (0.64 ms) turn that into `RnrRetryExceeded` after
///   ≈ 4 ms instead of an endless stall;
/// - `min_rnr_timer = 12` (0.64 ms), `hop_limit = 64`, `max_mtu = 4096`.
///
/// A data-plane error found this way is a hint for the failure detector, never a verdict.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QpAttrs {
    /// Local ACK timeout exponent (1..=31): 4.096 µs × 2^timeout.
    pub timeout: u8,
    /// Transport retries before `RetryExceeded` (0..=7).
    pub retry_cnt: u8,
    /// RNR retries before `RnrRetryExceeded` (0..=6; 7 would retry forever and is refused).
    pub rnr_retry: u8,
    /// RNR NAK timer code this side advertises (0..=31; 12 = 0.64 ms).
    pub min_rnr_timer: u8,
    /// Hop limit of the global route header (RoCE).
    pub hop_limit: u8,
    /// Upper bound on the path MTU (the smaller of both ports' active MTUs is used below it).
    pub max_mtu: Mtu,
}

impl Default for QpAttrs {
    fn default() -> Self {
        Self {
            timeout: 14,
            retry_cnt: 7,
            rnr_retry: 6,
            min_rnr_timer: 12,
            hop_limit: 64,
            max_mtu: Mtu::M4096,
        }
    }
}

impl QpAttrs {
    /// The local ACK timeout: 4.096 µs × 2^`timeout`.
    pub fn ack_timeout(&self) -> Duration {
        Duration::from_nanos(4096u64 << self.timeout.min(31))
    }

    /// How long after a peer vanishes an outstanding send completes `RetryExceeded`:
    /// (`retry_cnt` + 1) × [`QpAttrs::ack_timeout`], before any HCA rounding.
    pub fn detection_bound(&self) -> Duration {
        self.ack_timeout() * (u32::from(self.retry_cnt) + 1)
    }

    fn validate(&self) -> Result<(), ConfigError> {
        if self.timeout == 0 || self.timeout > 31 {
            return Err(ConfigError(
                "qp.timeout must be 1..=31 (0 means wait forever)",
            ));
        }
        if self.retry_cnt > 7 {
            return Err(ConfigError("qp.retry_cnt must be 0..=7"));
        }
        if self.rnr_retry > 6 {
            return Err(ConfigError(
                "qp.rnr_retry must be 0..=6 (7 retries forever and hides a hung peer)",
            ));
        }
        if self.min_rnr_timer > 31 {
            return Err(ConfigError("qp.min_rnr_timer must be 0..=31"));
        }
        Ok(())
    }
}

/// The data channel's buffers, credits and queue bounds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChannelConfig {
    /// Size of every registered send and receive buffer (slot), in bytes (≥ 64). A frame
    /// longer than a slot (with its 4-byte length) is sent as several messages.
    pub buf_size: u32,
    /// Receive slots, all posted before the queue pair is connected (R). The peer's credit.
    pub recv_depth: u32,
    /// Send slots: messages in flight at once (bounded by credit too).
    pub send_depth: u32,
    /// Credits (K ≥ 1) kept back from data for credit-only messages, so two sides that are
    /// both out of data credit can still grant each other.
    pub credit_reserve: u32,
    /// A credit-only message is sent when at least this many re-posted receives have not been
    /// advertised (2..=`recv_depth` − `credit_reserve`; ≥ 2 so credit-only messages cannot
    /// ping-pong forever).
    pub credit_threshold: u32,
    /// Frames waiting for credit or a slot; `send` answers `WouldBlock` beyond this.
    pub max_queued: usize,
    /// Received frames not yet taken with `poll_frame`; beyond this, receive slots are held
    /// (not re-posted), so the peer runs out of credit instead of this queue growing.
    pub max_delivered: usize,
    /// Largest frame accepted from the caller or the peer (a longer one from the peer is a
    /// protocol violation: link-down).
    pub max_frame: u32,
    /// Queue pair attributes.
    pub qp: QpAttrs,
}

impl Default for ChannelConfig {
    fn default() -> Self {
        Self {
            buf_size: 8192,
            recv_depth: 128,
            send_depth: 128,
            credit_reserve: 2,
            credit_threshold: 32,
            max_queued: 1024,
            max_delivered: 1024,
            max_frame: 1 << 20,
            qp: QpAttrs::default(),
        }
    }
}

/// An invalid configuration value; the message names the field and its allowed range.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
#[error("invalid RDMA channel configuration: {0}")]
pub struct ConfigError(pub &'static str);

impl ChannelConfig {
    /// Checks every field against its documented range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.buf_size < 64 {
            return Err(ConfigError("buf_size must be at least 64"));
        }
        if self.recv_depth == 0 || self.recv_depth > 1 << 16 {
            return Err(ConfigError("recv_depth must be 1..=65536"));
        }
        if self.send_depth == 0 || self.send_depth > 1 << 16 {
            return Err(ConfigError("send_depth must be 1..=65536"));
        }
        if self.credit_reserve == 0 || self.credit_reserve >= self.recv_depth {
            return Err(ConfigError("credit_reserve must be 1..recv_depth"));
        }
        if self.credit_threshold < 2
            || self.credit_threshold > self.recv_depth - self.credit_reserve
        {
            return Err(ConfigError(
                "credit_threshold must be 2..=recv_depth - credit_reserve",
            ));
        }
        if self.max_queued == 0 || self.max_delivered == 0 {
            return Err(ConfigError(
                "max_queued and max_delivered must be at least 1",
            ));
        }
        if self.max_frame == 0 || self.max_frame > u32::MAX - 4 {
            return Err(ConfigError("max_frame must be 1..=u32::MAX - 4"));
        }
        self.qp.validate()
    }

    /// Bytes of registered memory for receive slots (`recv_depth` × `buf_size`).
    pub fn recv_bytes(&self) -> usize {
        self.recv_depth as usize * self.buf_size as usize
    }

    /// Bytes of registered memory for send slots (`send_depth` × `buf_size`).
    pub fn send_bytes(&self) -> usize {
        self.send_depth as usize * self.buf_size as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_detection_bound_is_about_half_a_second() {
        let b = QpAttrs::default().detection_bound();
        assert!(
            b > Duration::from_millis(500) && b < Duration::from_millis(600),
            "{b:?}"
        );
        assert_eq!(
            QpAttrs::default().ack_timeout(),
            Duration::from_nanos(4096 << 14)
        );
    }

    #[test]
    fn bad_values_are_refused() {
        assert!(ChannelConfig::default().validate().is_ok());
        let bad = [
            ChannelConfig {
                buf_size: 8,
                ..Default::default()
            },
            ChannelConfig {
                credit_threshold: 1,
                ..Default::default()
            },
            ChannelConfig {
                credit_threshold: 127,
                ..Default::default()
            },
            ChannelConfig {
                credit_reserve: 0,
                ..Default::default()
            },
            ChannelConfig {
                recv_depth: 0,
                ..Default::default()
            },
            ChannelConfig {
                max_queued: 0,
                ..Default::default()
            },
            ChannelConfig {
                qp: QpAttrs {
                    rnr_retry: 7,
                    ..Default::default()
                },
                ..Default::default()
            },
            ChannelConfig {
                qp: QpAttrs {
                    timeout: 0,
                    ..Default::default()
                },
                ..Default::default()
            },
        ];
        for c in bad {
            assert!(c.validate().is_err(), "{c:?}");
        }
    }
}
