//! Plausibility checks on the counters peers send. Op ids, sequence numbers, watermarks,
//! recovery rounds and failure epochs start at 0 and grow by one, so a value at or above
//! [`MAX_COUNTER`] can only be forged, and a receiver that adopted it (a parent's watermarks are
//! taken as they are) would overflow when it counts on from it, at the latest once it inherits
//! the root's role. Likewise a rank's global watermark never exceeds its own `done`.

use super::DecodeError;

/// Exclusive bound on every counter on the wire: `2^63`.
/// Counters at or above this are refused as forged.
pub const MAX_COUNTER: u64 = 1 << 63;

/// Refuses a counter at or above [`MAX_COUNTER`].
/// `v` if it is a plausible counter (below [`MAX_COUNTER`]).
pub fn counter(v: u64) -> Result<u64, DecodeError> {
    if v < MAX_COUNTER {
        Ok(v)
    } else {
        Err(DecodeError::Invalid("counter at or above 2^63"))
    }
}
