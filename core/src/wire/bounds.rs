//! Plausibility checks on the counters peers send. Op ids, sequence numbers, watermarks,
//! recovery rounds and failure epochs start at 0 and grow by one, so a value at or above
//! [`MAX_COUNTER`] can only be forged, and a receiver that adopted it (a parent's watermarks are
//! taken as they are) would overflow when it counts on from it, at the latest once it inherits
//! the root's role. Likewise a rank's global watermark never exceeds its own `done`.

use super::{DecodeError, Message};

/// Exclusive bound on every counter on the wire: `2^63`.
pub const MAX_COUNTER: u64 = 1 << 63;

/// Refuses a counter at or above [`MAX_COUNTER`].
pub(super) fn counter(v: u64) -> Result<u64, DecodeError> {
    if v < MAX_COUNTER {
        Ok(v)
    } else {
        Err(DecodeError::Invalid("counter at or above 2^63"))
    }
}

impl Message {
    /// Checks a decoded message's counters (flood ids are opaque and unchecked).
    pub(super) fn check_counters(&self) -> Result<(), DecodeError> {
        let (counters, watermarks): (&[u64], Option<(u64, u64)>) = match self {
            Self::Relay(m) => (&[m.seq], None),
            Self::Forward(m) => (&[m.op, m.seq, m.done], Some((m.done, m.global_done))),
            Self::Ack(m) => (&[m.op], None),
            Self::Poll(m) => (&[m.op, m.done], Some((m.done, m.global_done))),
            Self::Need(m) => (&[m.op], None),
            Self::Sync(m) => (&[m.done], Some((m.done, m.global_done))),
            Self::Complete(m) => (&[m.seq, m.op], None),
            Self::Recover(m) => (&[m.gen, m.base], None),
            Self::RecoveredOp(m) => (&[m.gen, m.op, m.seq], None),
            Self::RecoverDone(m) => (&[m.gen], None),
            _ => (&[], None),
        };
        for &c in counters {
            counter(c)?;
        }
        match watermarks {
            Some((done, global_done)) if global_done > done => {
                Err(DecodeError::Invalid("global watermark above done"))
            }
            _ => Ok(()),
        }
    }
}
