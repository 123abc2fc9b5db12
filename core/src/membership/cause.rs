//! Why a rank was removed: carried by the coordinator's decision and the root's global notice,
//! and reported to the application with the view change.

use crate::wire::{DecodeError, Reader};

/// Why a rank left the view. One byte on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum RemovalCause {
    /// A tree link to it was lost on hard evidence (a refused fresh dial, another incarnation
    /// answering), or on any loss with the detector off. Also the cause of a death the root
    /// learned from a neighbour's notice without one.
    LinkLost,
    /// H of its K observers found it silent through the refutation window (the coordinator's
    /// decision).
    Unresponsive,
    /// A tree link to it stayed down past `membership.gray_timeout` with both ends alive; of
    /// the two endpoints, the child was removed (the coordinator's decision).
    Unreachable,
    /// The embedding runtime declared it dead ([`Node::declare_dead`](crate::Node::declare_dead)).
    Declared,
    /// A launched rank that never checked in: not a failure (it was expected, never a member).
    /// The coordinator removes the ranks still missing at `membership.startup_timeout` (and a
    /// rank removed on evidence before it checked in gets this cause too), so the tree routes
    /// around their slots; a process that starts later is fenced and may join as a new rank.
    NeverJoined,
    /// Removed on purpose by a shrink campaign ([`Node::shrink`](crate::Node::shrink)): it
    /// drained and left, or crashed while leaving (a departure, not a failure).
    Left,
}

impl RemovalCause {
    /// The wire byte.
    pub const fn byte(self) -> u8 {
        match self {
            Self::LinkLost => 0,
            Self::Unresponsive => 1,
            Self::Unreachable => 2,
            Self::Declared => 3,
            Self::NeverJoined => 4,
            Self::Left => 5,
        }
    }

    /// The cause a wire byte names.
    pub const fn from_byte(b: u8) -> Option<Self> {
        Some(match b {
            0 => Self::LinkLost,
            1 => Self::Unresponsive,
            2 => Self::Unreachable,
            3 => Self::Declared,
            4 => Self::NeverJoined,
            5 => Self::Left,
            _ => return None,
        })
    }

    /// A short name for logs and JSON.
    pub const fn name(self) -> &'static str {
        match self {
            Self::LinkLost => "link_lost",
            Self::Unresponsive => "unresponsive",
            Self::Unreachable => "unreachable",
            Self::Declared => "declared",
            Self::NeverJoined => "never_joined",
            Self::Left => "left",
        }
    }

    pub(crate) fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Self::from_byte(r.u8()?).ok_or(DecodeError::Invalid("unknown removal cause"))
    }
}

impl std::fmt::Display for RemovalCause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
