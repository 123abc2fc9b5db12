//! `lifeline_result`: the one return code of every fallible entry point, and the mapping from
//! the core's errors.

use std::ffi::c_char;

use lifeline_core::membership::ShrinkError;
use lifeline_core::relm::RelmError;
use lifeline_core::tree::TreeError;
use lifeline_core::{CommandError, ConfigError, RevokeError, XcastError};

/// The result of a call. `LIFELINE_OK` (0) is success, `LIFELINE_DONE` (1) means "no more
/// output" (or "need more bytes" for `lifeline_node_frame_len`), and every negative value is an
/// error. Outputs go through out-parameters and are written only as each function documents.
/// New error codes may be added: treat an unknown negative value as an error.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
// The variant names are the C names (cbindgen writes them unchanged).
#[allow(non_camel_case_types, clippy::upper_case_acronyms)]
pub enum LifelineResult {
    /// Success.
    LIFELINE_OK = 0,
    /// Nothing more to poll (or: not enough bytes yet).
    LIFELINE_DONE = 1,
    /// A required pointer argument was NULL. Nothing changed.
    LIFELINE_ERR_NULL = -1,
    /// The configuration was refused (a field out of its range, a bad tree shape, a value too
    /// large for the key's type). Nothing changed.
    LIFELINE_ERR_INVALID_CONFIG = -2,
    /// `lifeline_config_set`/`_get`: no such key (or the key is not UTF-8). Nothing changed.
    LIFELINE_ERR_UNKNOWN_KEY = -3,
    /// The caller's buffer is too short; the length needed was written and the output stays
    /// queued (nothing was lost).
    LIFELINE_ERR_BUFFER_TOO_SHORT = -4,
    /// `lifeline_node_frame_len`: the header is not a valid frame header (bad version, unknown
    /// kind, or longer than `max_frame`). `lifeline_node_handle_join_request`,
    /// `lifeline_joiner_handle_reply`: the bytes are not a join message of that kind (counted;
    /// nothing else changed). Close the connection.
    LIFELINE_ERR_MALFORMED = -5,
    /// This rank is dead (evicted, or removed): it takes no more commands and must stop.
    LIFELINE_ERR_DEAD = -6,
    /// The payload would make a frame over `max_frame`. Nothing was queued.
    LIFELINE_ERR_TOO_LARGE = -7,
    /// The xcast tag is reserved (use 1 for wire-up or 16 and above). Nothing was queued.
    LIFELINE_ERR_RESERVED_TAG = -8,
    /// The destination is dead or outside the span. Nothing was queued.
    LIFELINE_ERR_PEER_DEAD = -9,
    /// The destination is alive but no route reaches it now. Nothing was queued.
    LIFELINE_ERR_UNREACHABLE = -10,
    /// Too many broadcasts await completion: retry after `LIFELINE_EVENT_XCAST_COMPLETED`.
    LIFELINE_ERR_XCAST_BACKPRESSURE = -11,
    /// Too many reliable messages await acknowledgement: retry after `LIFELINE_EVENT_RELM_ACKED`.
    LIFELINE_ERR_RELM_BACKPRESSURE = -12,
    /// A rank argument is at or above the span. Nothing changed.
    LIFELINE_ERR_RANK_OUT_OF_RANGE = -13,
    /// An argument is outside its documented values (e.g. an unknown link cause). Nothing
    /// changed.
    LIFELINE_ERR_INVALID_ARGUMENT = -14,
    /// `lifeline_node_handle_grow`: the new span is smaller than the current one. Nothing
    /// changed.
    LIFELINE_ERR_SPAN_SHRINK = -15,
    /// `lifeline_tcp_*`: the peer failed to prove the cluster key. Close the connection.
    LIFELINE_ERR_BAD_MAC = -16,
    /// `lifeline_tcp_*`: not a Lifeline TCP handshake, or one naming an unexpected rank (another
    /// target, this rank, another acceptor). Close the connection.
    LIFELINE_ERR_HANDSHAKE = -17,
    /// This rank is leaving: a shrink campaign named it. It takes no new application commands
    /// (nor shrinks), keeps relaying for others, and leaves (`LIFELINE_EVENT_LEFT`) once drained
    /// and excluded. Nothing changed.
    LIFELINE_ERR_LEAVING = -18,
    /// `lifeline_node_shrink`: no targets (`n` is 0). Nothing changed.
    LIFELINE_ERR_NO_TARGETS = -19,
    /// `lifeline_node_shrink`: a rank appears twice in the targets. Nothing changed.
    LIFELINE_ERR_DUPLICATE_TARGET = -20,
    /// `lifeline_node_shrink`: more targets than the config key `max_list`. Nothing changed.
    LIFELINE_ERR_TOO_MANY_TARGETS = -21,
    /// `lifeline_node_shrink`: this rank named itself and is not the coordinator (it could not
    /// be told of the completion). The coordinator may name itself: it hands the coordination
    /// over to the next root without a failure. Nothing changed. (-23, once "a target is the
    /// coordinator", is no longer produced: such a campaign is a planned hand-over.)
    LIFELINE_ERR_TARGET_SELF = -22,
    /// `lifeline_node_shrink`: `membership_shrink_max_pending` campaigns of this rank are open:
    /// retry after `LIFELINE_EVENT_CAMPAIGN_COMPLETED` or `_FAILED`. Nothing changed.
    LIFELINE_ERR_SHRINK_BUSY = -24,
    /// `lifeline_node_revoke`: a newer epoch of the group is already revoked here; the asked
    /// one is stale. Nothing changed.
    LIFELINE_ERR_REVOKE_STALE = -25,
    /// A refusal this version of the C API has no specific code for. Nothing changed.
    LIFELINE_ERR_OTHER = -99,
    /// A bug: the library panicked. The node is poisoned: every later call on it returns this
    /// code (free it and stop using it).
    LIFELINE_ERR_PANIC = -100,
}

pub(crate) use LifelineResult::*;

impl LifelineResult {
    /// The static, NUL-terminated description of a code.
    pub(crate) fn describe(code: i32) -> &'static std::ffi::CStr {
        let all = [
            (LIFELINE_OK, c"ok"),
            (LIFELINE_DONE, c"done: no more output"),
            (LIFELINE_ERR_NULL, c"a required pointer argument is NULL"),
            (LIFELINE_ERR_INVALID_CONFIG, c"invalid configuration"),
            (LIFELINE_ERR_UNKNOWN_KEY, c"unknown configuration key"),
            (
                LIFELINE_ERR_BUFFER_TOO_SHORT,
                c"buffer too short (the needed length was written)",
            ),
            (
                LIFELINE_ERR_MALFORMED,
                c"malformed frame header or join message",
            ),
            (
                LIFELINE_ERR_DEAD,
                c"this rank is dead and takes no commands",
            ),
            (
                LIFELINE_ERR_TOO_LARGE,
                c"payload makes a frame over max_frame",
            ),
            (LIFELINE_ERR_RESERVED_TAG, c"reserved xcast tag"),
            (
                LIFELINE_ERR_PEER_DEAD,
                c"destination is dead or outside the span",
            ),
            (LIFELINE_ERR_UNREACHABLE, c"no route to the destination"),
            (
                LIFELINE_ERR_XCAST_BACKPRESSURE,
                c"xcast back-pressure: retry after a completion",
            ),
            (
                LIFELINE_ERR_RELM_BACKPRESSURE,
                c"relm back-pressure: retry after an ack",
            ),
            (LIFELINE_ERR_RANK_OUT_OF_RANGE, c"rank outside the span"),
            (LIFELINE_ERR_INVALID_ARGUMENT, c"invalid argument"),
            (LIFELINE_ERR_SPAN_SHRINK, c"the span cannot shrink"),
            (
                LIFELINE_ERR_BAD_MAC,
                c"the peer failed to prove the cluster key",
            ),
            (LIFELINE_ERR_HANDSHAKE, c"not a valid lifeline handshake"),
            (
                LIFELINE_ERR_LEAVING,
                c"this rank is leaving and takes no new commands",
            ),
            (
                LIFELINE_ERR_NO_TARGETS,
                c"a shrink needs at least one target",
            ),
            (
                LIFELINE_ERR_DUPLICATE_TARGET,
                c"a shrink target is listed twice",
            ),
            (
                LIFELINE_ERR_TOO_MANY_TARGETS,
                c"more shrink targets than max_list",
            ),
            (
                LIFELINE_ERR_TARGET_SELF,
                c"a rank cannot shrink itself away",
            ),
            (
                LIFELINE_ERR_SHRINK_BUSY,
                c"too many shrink campaigns open: retry after one ends",
            ),
            (LIFELINE_ERR_OTHER, c"refused (no specific code)"),
            (
                LIFELINE_ERR_REVOKE_STALE,
                c"a newer epoch of the group is already revoked",
            ),
            (LIFELINE_ERR_PANIC, c"internal panic: the node is poisoned"),
        ];
        all.iter()
            .find(|(r, _)| *r as i32 == code)
            .map_or(c"unknown lifeline_result", |(_, s)| s)
    }
}

impl From<&CommandError> for LifelineResult {
    /// One code per `CommandError` variant; future variants are `LIFELINE_ERR_OTHER`.
    fn from(e: &CommandError) -> Self {
        match e {
            CommandError::Dead => LIFELINE_ERR_DEAD,
            CommandError::Leaving => LIFELINE_ERR_LEAVING,
            CommandError::TooLarge { .. } => LIFELINE_ERR_TOO_LARGE,
            CommandError::Tree(TreeError::RankOutOfRange { .. }) => LIFELINE_ERR_RANK_OUT_OF_RANGE,
            CommandError::Tree(TreeError::SpanShrink { .. }) => LIFELINE_ERR_SPAN_SHRINK,
            CommandError::Tree(TreeError::Layout(_)) => LIFELINE_ERR_INVALID_ARGUMENT,
            CommandError::PeerDead(_) => LIFELINE_ERR_PEER_DEAD,
            CommandError::Unreachable(_) => LIFELINE_ERR_UNREACHABLE,
            CommandError::Xcast(XcastError::Backpressure { .. }) => LIFELINE_ERR_XCAST_BACKPRESSURE,
            CommandError::Xcast(XcastError::ReservedTag(_)) => LIFELINE_ERR_RESERVED_TAG,
            CommandError::Relm(RelmError::Backpressure { .. }) => LIFELINE_ERR_RELM_BACKPRESSURE,
            CommandError::Revoke(RevokeError::Stale { .. }) => LIFELINE_ERR_REVOKE_STALE,
            _ => LIFELINE_ERR_OTHER,
        }
    }
}

impl From<&ShrinkError> for LifelineResult {
    /// One code per `ShrinkError` variant; future variants are `LIFELINE_ERR_OTHER`.
    fn from(e: &ShrinkError) -> Self {
        match e {
            ShrinkError::Dead => LIFELINE_ERR_DEAD,
            ShrinkError::Leaving => LIFELINE_ERR_LEAVING,
            ShrinkError::Empty => LIFELINE_ERR_NO_TARGETS,
            ShrinkError::TooMany { .. } => LIFELINE_ERR_TOO_MANY_TARGETS,
            ShrinkError::OutOfSpan(_) => LIFELINE_ERR_RANK_OUT_OF_RANGE,
            ShrinkError::IncludesSelf => LIFELINE_ERR_TARGET_SELF,
            ShrinkError::Busy(_) => LIFELINE_ERR_SHRINK_BUSY,
            _ => LIFELINE_ERR_OTHER,
        }
    }
}

impl From<&ConfigError> for LifelineResult {
    /// The node's own rank outside the span is `LIFELINE_ERR_RANK_OUT_OF_RANGE`; every other
    /// refusal is `LIFELINE_ERR_INVALID_CONFIG`.
    fn from(e: &ConfigError) -> Self {
        match e {
            ConfigError::MeOutOfRange { .. } => LIFELINE_ERR_RANK_OUT_OF_RANGE,
            _ => LIFELINE_ERR_INVALID_CONFIG,
        }
    }
}

/// A static, NUL-terminated English description of `result` (a `lifeline_result` value; any
/// other value gets "unknown lifeline_result"). Never NULL; thread-safe; never free it.
#[no_mangle]
pub extern "C" fn lifeline_strerror(result: i32) -> *const c_char {
    crate::catch(c"internal panic".as_ptr(), || {
        LifelineResult::describe(result).as_ptr()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use lifeline_core::tree::Rank;

    #[test]
    fn command_errors_map_one_to_one() {
        let cases = [
            (CommandError::Dead, LIFELINE_ERR_DEAD),
            (CommandError::Leaving, LIFELINE_ERR_LEAVING),
            (
                CommandError::TooLarge { len: 1, max: 2 },
                LIFELINE_ERR_TOO_LARGE,
            ),
            (CommandError::PeerDead(Rank(1)), LIFELINE_ERR_PEER_DEAD),
            (CommandError::Unreachable(Rank(1)), LIFELINE_ERR_UNREACHABLE),
            (
                CommandError::Revoke(RevokeError::Stale {
                    group: 1,
                    epoch: 1,
                    newest: 2,
                }),
                LIFELINE_ERR_REVOKE_STALE,
            ),
            (
                CommandError::Xcast(XcastError::ReservedTag(3)),
                LIFELINE_ERR_RESERVED_TAG,
            ),
            (
                CommandError::Xcast(XcastError::Backpressure { ops: 1, bytes: 1 }),
                LIFELINE_ERR_XCAST_BACKPRESSURE,
            ),
            (
                CommandError::Relm(RelmError::Backpressure {
                    dst: Rank(1),
                    inflight: 1,
                    bytes: 1,
                }),
                LIFELINE_ERR_RELM_BACKPRESSURE,
            ),
            (
                CommandError::Tree(TreeError::RankOutOfRange {
                    rank: Rank(9),
                    span: 3,
                }),
                LIFELINE_ERR_RANK_OUT_OF_RANGE,
            ),
            (
                CommandError::Tree(TreeError::SpanShrink { from: 3, to: 2 }),
                LIFELINE_ERR_SPAN_SHRINK,
            ),
        ];
        for (e, r) in cases {
            assert_eq!(LifelineResult::from(&e), r, "{e:?}");
        }
    }

    #[test]
    fn shrink_errors_map_one_to_one() {
        let cases = [
            (ShrinkError::Dead, LIFELINE_ERR_DEAD),
            (ShrinkError::Leaving, LIFELINE_ERR_LEAVING),
            (ShrinkError::Empty, LIFELINE_ERR_NO_TARGETS),
            (
                ShrinkError::TooMany { len: 9, max: 8 },
                LIFELINE_ERR_TOO_MANY_TARGETS,
            ),
            (
                ShrinkError::OutOfSpan(Rank(70)),
                LIFELINE_ERR_RANK_OUT_OF_RANGE,
            ),
            (ShrinkError::IncludesSelf, LIFELINE_ERR_TARGET_SELF),
            (ShrinkError::Busy(64), LIFELINE_ERR_SHRINK_BUSY),
        ];
        let mut seen = std::collections::BTreeSet::new();
        for (e, r) in cases {
            assert_eq!(LifelineResult::from(&e), r, "{e:?}");
            assert!(seen.insert(r as i32), "{e:?} shares its code");
        }
    }

    #[test]
    fn every_code_has_its_own_description() {
        let mut seen = std::collections::BTreeSet::new();
        for code in -100..=1 {
            let s = LifelineResult::describe(code);
            if s != c"unknown lifeline_result" {
                assert!(seen.insert(s.to_owned()), "duplicate text for {code}");
            }
        }
        // 28: -23 (a target was the coordinator) is no longer produced.
        assert_eq!(seen.len(), 28);
    }
}
