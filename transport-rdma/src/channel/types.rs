//! The channel's public vocabulary: connection details, events, errors, counters.

use bytes::Bytes;
use lifeline_core::Instant;
use thiserror::Error;

use crate::verbs::{Mtu, VerbsError, WcOp, WcStatus};

/// What one side tells the other (over the authenticated control link) to connect a queue
/// pair: everything RTR and the credit protocol need.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QpDetails {
    /// Queue pair number (24 bits).
    pub qpn: u32,
    /// Initial send PSN (24 bits).
    pub psn: u32,
    /// Port LID (InfiniBand; 0 on RoCE).
    pub lid: u16,
    /// Port GID (RoCE); all zero means "use the LID".
    pub gid: [u8; 16],
    /// Active MTU of the port.
    pub mtu: Mtu,
    /// Receives posted before connecting: the other side's initial credit.
    pub recv_depth: u32,
    /// Size of each receive slot: the other side never sends a longer message.
    pub buf_size: u32,
}

/// Identifies a frame accepted by `Channel::send`, increasing by one per accepted frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FrameId(pub u64);

/// Why the data link went down. A hint for the failure detector, never a verdict on the peer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DownCause {
    /// A work request completed with this error (`RetryExceeded`: peer or path gone;
    /// `RnrRetryExceeded`: the peer stopped posting receives; `Remote`: it rejected us;
    /// `Local`: our bug).
    Completion {
        /// Send or receive.
        op: WcOp,
        /// The error status.
        status: WcStatus,
    },
    /// A flush with no earlier error seen on this queue pair: it was moved to ERR elsewhere
    /// (a fatal async event, or the other side of a local `close`).
    Flushed,
    /// The peer broke the channel protocol (the message says how).
    Malformed(&'static str),
    /// A verbs call failed while posting.
    Verbs(VerbsError),
    /// `Channel::close` was called.
    Closed,
}

/// Something the caller must learn about (`Channel::poll_event`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ChannelEvent {
    /// The queue pair failed; emitted exactly once per channel. Later flush completions are
    /// consequences and produce no further event.
    LinkDown {
        /// Why.
        cause: DownCause,
        /// The `now` of the call that saw it.
        at: Instant,
    },
}

/// Why `Channel::send` refused a frame. Nothing was queued; the frame is handed back where it
/// can be retried.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum SendError {
    /// The send queue holds `max_queued` frames: back-pressure. Retry after `poll_transmit`
    /// and completions have drained it.
    #[error("send queue full")]
    WouldBlock(Bytes),
    /// The frame is longer than `max_frame`.
    #[error("frame of {0} bytes exceeds max_frame")]
    TooLarge(usize),
    /// The link is down; take the unacknowledged frames and resend on a new channel.
    #[error("link is down")]
    Down(Bytes),
    /// `connect` has not been called yet.
    #[error("not connected")]
    NotConnected(Bytes),
}

/// Errors from setting a channel up (API misuse, bad configuration, verbs failures).
#[derive(Debug, Error, PartialEq, Eq)]
pub enum SetupError {
    /// Invalid configuration.
    #[error(transparent)]
    Config(#[from] super::ConfigError),
    /// A verbs call failed.
    #[error(transparent)]
    Verbs(#[from] VerbsError),
    /// The peer's details are unusable (the message says which).
    #[error("unusable peer details: {0}")]
    Peer(&'static str),
    /// `connect` on a channel that is already connected or down.
    #[error("channel already connected")]
    AlreadyConnected,
}

/// Counters kept by a channel.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ChannelStats {
    /// Frames whose last message completed successfully.
    pub frames_acked: u64,
    /// Frames delivered to `poll_frame`.
    pub frames_received: u64,
    /// Messages posted (data and credit-only).
    pub messages_sent: u64,
    /// Credit-only (zero-length) messages posted.
    pub credit_messages: u64,
    /// `send` calls answered `WouldBlock`.
    pub would_block: u64,
    /// Flush completions seen after the link was already down (not failures).
    pub flushes_after_down: u64,
    /// Times a data message waited because credit (not a slot) was missing.
    pub credit_stalls: u64,
}
