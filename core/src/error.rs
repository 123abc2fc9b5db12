//! Why an application command was refused: node-wide reasons at the top, each machine's own
//! errors nested.

use crate::relm::RelmError;
use crate::revoke::RevokeError;
use crate::tree::{Rank, TreeError};
use crate::xcast::XcastError;

/// Why an application command was refused. A refused command changes nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CommandError {
    /// This rank is known dead (evicted); it must stop.
    #[error("this rank is dead and takes no commands")]
    Dead,
    /// This rank is leaving (a shrink campaign named it): it takes no new application
    /// commands, and leaves once drained and excluded.
    #[error("this rank is leaving and takes no new commands")]
    Leaving,
    /// The payload would make a frame over `max_frame`.
    #[error("payload of {len} bytes makes a frame over max_frame {max}")]
    TooLarge {
        /// Payload bytes.
        len: usize,
        /// The configured limit.
        max: u32,
    },
    /// A tree operation was refused.
    #[error(transparent)]
    Tree(#[from] TreeError),
    /// The destination is known dead (or outside the span): nothing was queued.
    #[error("rank {0} is dead or outside the span")]
    PeerDead(Rank),
    /// The destination is alive but no route reaches it now (cut off behind an empty slot).
    #[error("no route to rank {0}")]
    Unreachable(Rank),
    /// Reliable broadcast refused the command.
    #[error(transparent)]
    Xcast(#[from] XcastError),
    /// Reliable messaging refused the command.
    #[error(transparent)]
    Relm(#[from] RelmError),
    /// The revoke flood refused the command.
    #[error(transparent)]
    Revoke(#[from] RevokeError),
}
