//! Why a link ended ([`DownReason`]), from quinn's [`ConnectionError`], and the application
//! close codes ([`CloseCode`]) Lifeline closes connections with.

use std::fmt;

use lifeline_core::LinkCause;
use quinn::{ConnectionError, VarInt};

/// The application error code a Lifeline endpoint closes a connection with; the peer reads it
/// back into a [`DownReason`] or a [`DialError`](crate::DialError).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CloseCode {
    /// 0: an orderly close (shutdown, or the link is no longer wanted).
    Normal,
    /// 1: the simultaneous-dial tie-break chose the other connection of the pair
    /// ([`keeps`](crate::keeps)); not a failure.
    Duplicate,
    /// 2: the peer broke the link protocol (a malformed or oversize frame header, a hello
    /// that is malformed or missing, a stream finished or reset).
    Malformed,
    /// 3: the acceptor refused the peer: a claimed rank its certificate does not name, or an
    /// address that is not the claimed rank's, or a rank the acceptor's core knows dead.
    Refused,
    /// 4: the acceptor's coordinator removed the dialing rank from the cluster; the reason
    /// bytes are the removal's epoch (8 bytes, big-endian), read back as
    /// [`DialError::Removed`](crate::DialError::Removed).
    Removed,
}

impl CloseCode {
    /// The code on the wire.
    pub fn code(self) -> VarInt {
        VarInt::from_u32(match self {
            Self::Normal => 0,
            Self::Duplicate => 1,
            Self::Malformed => 2,
            Self::Refused => 3,
            Self::Removed => 4,
        })
    }

    /// The code read back; `None` for a code Lifeline never sends.
    pub fn from_code(code: VarInt) -> Option<Self> {
        Some(match code.into_inner() {
            0 => Self::Normal,
            1 => Self::Duplicate,
            2 => Self::Malformed,
            3 => Self::Refused,
            4 => Self::Removed,
            _ => return None,
        })
    }

    /// The reason phrase sent with the code (for the peer's logs).
    pub(crate) fn phrase(self) -> &'static [u8] {
        match self {
            Self::Normal => b"closed",
            Self::Duplicate => b"duplicate",
            Self::Malformed => b"malformed",
            Self::Refused => b"refused",
            Self::Removed => b"removed",
        }
    }
}

/// Why a link went down, as the failure detector should weigh it: an idle timeout
/// ([`TimedOut`](Self::TimedOut)) is not the same evidence as a peer that closed on purpose
/// ([`Closed`](Self::Closed)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DownReason {
    /// Nothing arrived for the idle timeout ([`QuicConfig::link_timeout`](crate::QuicConfig)):
    /// the peer died, hung (QUIC acknowledgements come from its process, so a stopped process
    /// times out too) or was cut off. Soft evidence.
    TimedOut,
    /// The peer closed the connection on purpose ([`CloseCode::Normal`], an unknown code, or
    /// all its handles dropped), or finished a stream.
    Closed,
    /// The peer closed this connection because its tie-break kept the other one of the pair.
    Duplicate,
    /// A protocol violation: the peer sent a malformed or oversize frame header (counted in
    /// [`QuicStats::malformed_frames`](crate::QuicStats)), a QUIC stack aborted the connection
    /// on a transport error, or the peer told us we broke the protocol.
    Malformed,
    /// The peer refused us ([`CloseCode::Refused`]).
    Refused,
    /// A stateless reset: the peer's endpoint no longer knows the connection (it restarted),
    /// or it reset one of the link's streams.
    Reset,
    /// This side closed the link (never reported by a peer).
    LocallyClosed,
    /// The connection could not go on for a local reason (QUIC version mismatch, connection
    /// ids exhausted).
    Failed,
}

impl DownReason {
    /// The reason for a connection that ended with `e`.
    pub fn from_connection_error(e: &ConnectionError) -> Self {
        match e {
            ConnectionError::TimedOut => Self::TimedOut,
            ConnectionError::ApplicationClosed(c) => match CloseCode::from_code(c.error_code) {
                Some(CloseCode::Duplicate) => Self::Duplicate,
                Some(CloseCode::Malformed) => Self::Malformed,
                Some(CloseCode::Refused | CloseCode::Removed) => Self::Refused,
                Some(CloseCode::Normal) | None => Self::Closed,
            },
            ConnectionError::ConnectionClosed(_) | ConnectionError::TransportError(_) => {
                Self::Malformed
            }
            ConnectionError::Reset => Self::Reset,
            ConnectionError::LocallyClosed => Self::LocallyClosed,
            ConnectionError::VersionMismatch | ConnectionError::CidsExhausted => Self::Failed,
        }
    }

    /// The evidence this is for the core's detector
    /// ([`Node::handle_link_down`](lifeline_core::Node::handle_link_down)); `None` when there
    /// is nothing to report: a duplicate lost its tie-break (the pair's other connection
    /// stands) or this side closed the link itself.
    pub fn cause(self) -> Option<LinkCause> {
        match self {
            Self::TimedOut => Some(LinkCause::TimedOut),
            Self::Closed | Self::Malformed | Self::Refused => Some(LinkCause::Closed),
            Self::Reset | Self::Failed => Some(LinkCause::Reset),
            Self::Duplicate | Self::LocallyClosed => None,
        }
    }
}

impl fmt::Display for DownReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::TimedOut => "timed out",
            Self::Closed => "closed",
            Self::Duplicate => "duplicate",
            Self::Malformed => "malformed",
            Self::Refused => "refused",
            Self::Reset => "reset",
            Self::LocallyClosed => "locally closed",
            Self::Failed => "failed",
        })
    }
}

#[cfg(test)]
mod tests {
    use quinn::{ApplicationClose, ConnectionClose, TransportErrorCode};

    use super::*;

    fn app(code: u32) -> ConnectionError {
        ConnectionError::ApplicationClosed(ApplicationClose {
            error_code: VarInt::from_u32(code),
            reason: Default::default(),
        })
    }

    #[test]
    fn close_codes_round_trip() {
        for c in [
            CloseCode::Normal,
            CloseCode::Duplicate,
            CloseCode::Malformed,
            CloseCode::Refused,
            CloseCode::Removed,
        ] {
            assert_eq!(CloseCode::from_code(c.code()), Some(c));
        }
        assert_eq!(CloseCode::from_code(VarInt::from_u32(5)), None);
    }

    #[test]
    fn connection_errors_map_to_reasons() {
        use DownReason as D;
        let cases = [
            (
                ConnectionError::TimedOut,
                D::TimedOut,
                Some(LinkCause::TimedOut),
            ),
            (app(0), D::Closed, Some(LinkCause::Closed)),
            (app(1), D::Duplicate, None),
            (app(2), D::Malformed, Some(LinkCause::Closed)),
            (app(3), D::Refused, Some(LinkCause::Closed)),
            (app(4), D::Refused, Some(LinkCause::Closed)),
            (app(99), D::Closed, Some(LinkCause::Closed)),
            (ConnectionError::Reset, D::Reset, Some(LinkCause::Reset)),
            (ConnectionError::LocallyClosed, D::LocallyClosed, None),
            (
                ConnectionError::VersionMismatch,
                D::Failed,
                Some(LinkCause::Reset),
            ),
            (
                ConnectionError::ConnectionClosed(ConnectionClose {
                    error_code: TransportErrorCode::PROTOCOL_VIOLATION,
                    frame_type: None,
                    reason: Default::default(),
                }),
                D::Malformed,
                Some(LinkCause::Closed),
            ),
        ];
        for (e, want, cause) in cases {
            let got = DownReason::from_connection_error(&e);
            assert_eq!(got, want, "{e}");
            assert_eq!(got.cause(), cause, "{e}");
        }
        assert_eq!(D::TimedOut.to_string(), "timed out");
    }
}
