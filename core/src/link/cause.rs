//! Why a link was lost: what an adapter reports ([`DownReason`]) and the evidence it is for the
//! core ([`LinkCause`], handed over with
//! [`Node::handle_link_down`](crate::Node::handle_link_down)). The one map between them is
//! [`DownReason::cause`].

use std::fmt;
use std::io;

use super::LinkDownReason;

/// Why a link to a peer was lost. Only *hard* causes are a verdict on their own; the rest are
/// at most soft evidence, which (with the heartbeat detector on) never repairs the tree or
/// tells anyone: the peer's observers and the coordinator decide.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum LinkCause {
    /// A fresh dial to the peer's advertised address was refused (its host is up and nothing
    /// listens: the process is gone). Hard.
    Refused,
    /// The handshake was answered by another incarnation of the rank. Hard.
    Incarnation,
    /// An established link was reset. Not evidence alone: the adapter re-dials, which ends in
    /// `Refused` (hard) or a new link (nothing).
    Reset,
    /// Nothing heard for the link timeout (`TCP_USER_TIMEOUT`, keepalive, dials timing out, a
    /// send queue the peer does not drain). Soft.
    TimedOut,
    /// The peer closed the link, or broke the protocol on it. Soft.
    Closed,
}

impl LinkCause {
    /// Whether this cause alone proves the peer dead.
    pub fn is_hard(self) -> bool {
        matches!(self, Self::Refused | Self::Incarnation)
    }
}

/// Why an adapter's link to a peer went down: a connection's end as its socket reported it, a
/// give-up of the [`LinkPolicy`](super::LinkPolicy), or a reason of the adapter's own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum DownReason {
    /// The peer closed a connection (EOF, an orderly QUIC close): a process that exited or was
    /// killed.
    Closed,
    /// A transport error: a reset, or a timeout (`TCP_USER_TIMEOUT` / keepalive giving up, a
    /// QUIC idle timeout: [`io::ErrorKind::TimedOut`]).
    Io(io::ErrorKind),
    /// The peer sent a malformed or oversized frame header; its connection was closed.
    Malformed,
    /// The link policy gave the peer up: `dial_attempts` dials in a row failed
    /// ([`LinkDownReason::Unreachable`]).
    Unreachable,
    /// The link policy gave the peer up and its last dial was refused outright: nothing listens
    /// at its address ([`LinkDownReason::Refused`]).
    Refused,
    /// The peer has no address book entry.
    NoAddress,
    /// A send queue passed the adapter's hard bound: the peer is not reading.
    Overflow,
    /// The core learned from others that the peer is dead; its connections were closed
    /// (the core is not told again).
    Dead,
}

impl DownReason {
    /// The evidence this loss is for the core, or `None` when the core must not be told (it
    /// already knows the peer dead: [`DownReason::Dead`]). A refused give-up and a missing
    /// address are hard ([`LinkCause::Refused`]); a reset is [`LinkCause::Reset`]; timeouts, a
    /// give-up after failed dials and an overflow are [`LinkCause::TimedOut`]; a close or a
    /// malformed frame is [`LinkCause::Closed`].
    pub fn cause(self) -> Option<LinkCause> {
        Some(match self {
            Self::Refused => LinkCause::Refused,
            // No entry is this adapter's ignorance, not the peer's death: a joiner admitted by
            // a view this rank has not applied yet has no address here until it does.
            Self::Unreachable
            | Self::Overflow
            | Self::NoAddress
            | Self::Io(io::ErrorKind::TimedOut) => LinkCause::TimedOut,
            Self::Io(_) => LinkCause::Reset,
            Self::Closed | Self::Malformed => LinkCause::Closed,
            Self::Dead => return None,
        })
    }
}

impl From<LinkDownReason> for DownReason {
    fn from(r: LinkDownReason) -> Self {
        match r {
            LinkDownReason::Unreachable => Self::Unreachable,
            LinkDownReason::Refused => Self::Refused,
            LinkDownReason::Dead => Self::Dead,
        }
    }
}

impl fmt::Display for DownReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Closed => f.write_str("closed"),
            Self::Io(k) => write!(f, "io: {k}"),
            Self::Malformed => f.write_str("malformed"),
            Self::Unreachable => f.write_str("unreachable"),
            Self::Refused => f.write_str("refused"),
            Self::NoAddress => f.write_str("no address"),
            Self::Overflow => f.write_str("send queue overflow"),
            Self::Dead => f.write_str("dead"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The one map: every reason's evidence, and which reasons the core never hears of.
    #[test]
    fn every_down_reason_has_its_evidence() {
        use io::ErrorKind as K;
        use DownReason as D;
        let table = [
            (D::Refused, Some(LinkCause::Refused)),
            (D::NoAddress, Some(LinkCause::TimedOut)),
            (D::Unreachable, Some(LinkCause::TimedOut)),
            (D::Overflow, Some(LinkCause::TimedOut)),
            (D::Io(K::TimedOut), Some(LinkCause::TimedOut)),
            (D::Io(K::ConnectionReset), Some(LinkCause::Reset)),
            (D::Io(K::BrokenPipe), Some(LinkCause::Reset)),
            (D::Closed, Some(LinkCause::Closed)),
            (D::Malformed, Some(LinkCause::Closed)),
            (D::Dead, None),
        ];
        for (reason, cause) in table {
            assert_eq!(reason.cause(), cause, "{reason}");
        }
        let hard: Vec<_> = table
            .iter()
            .filter(|(_, c)| c.is_some_and(LinkCause::is_hard))
            .map(|(r, _)| *r)
            .collect();
        assert_eq!(hard, [D::Refused]);
        assert_eq!(D::from(LinkDownReason::Refused), D::Refused);
        assert_eq!(D::from(LinkDownReason::Unreachable), D::Unreachable);
        assert_eq!(D::from(LinkDownReason::Dead).cause(), None);
    }
}
