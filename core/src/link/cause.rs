//! Why a link was lost: the evidence an adapter hands the core with
//! [`Node::handle_link_down`](crate::Node::handle_link_down).

/// Why a link to a peer was lost. Only *hard* causes are a verdict on their own; the rest are
/// at most soft evidence, which (with the heartbeat detector on) never repairs the tree or
/// tells anyone: the peer's observers and the coordinator decide.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum LinkCause {
    /// A fresh dial to the peer's advertised address was refused (its host is up and nothing
    /// listens: the process is gone), or the peer has no address. Hard.
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
