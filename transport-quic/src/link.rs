//! [`QuicLink`]: one authenticated connection to one peer rank, with a control and a data
//! stream; [`LinkWatch`] to learn when and why it went down; [`keeps`], the tie-break between
//! two simultaneous connections of a pair.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use lifeline_core::tree::Rank;
use lifeline_core::Class;

use crate::down::{CloseCode, DownReason};
use crate::frames::{FrameSink, FrameSource, LinkShared, SendError};

/// Which end of a link this side is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Side {
    /// This side dialed it.
    Dialed,
    /// The peer dialed it and this side accepted it.
    Accepted,
}

/// The simultaneous-dial tie-break: of two connections between `me` and `peer`, one dialed by
/// each, whether the one this side holds as `side` is kept. **The connection dialed by the
/// lower rank wins**; both ends compute the same answer, so exactly one connection survives
/// and the other is closed with [`CloseCode::Duplicate`]. (The same rule as the core's link
/// policy, [`lifeline_core::link`], which the TCP adapter applies per class.)
pub fn keeps(me: Rank, peer: Rank, side: Side) -> bool {
    match side {
        Side::Dialed => me < peer,
        Side::Accepted => peer < me,
    }
}

/// A handle on a link's connection: its peer, whether and why it went down, and closing it.
/// Cheap to clone; every clone sees the same reason.
#[derive(Clone, Debug)]
pub struct LinkWatch {
    shared: Arc<LinkShared>,
}

impl LinkWatch {
    /// The peer's rank, proven by its certificate.
    pub fn peer(&self) -> Rank {
        self.shared.peer
    }

    /// The peer's address.
    pub fn remote_address(&self) -> SocketAddr {
        self.shared.conn.remote_address()
    }

    /// The current round-trip time estimate.
    pub fn rtt(&self) -> Duration {
        self.shared.conn.rtt()
    }

    /// Waits until the link is down and says why. The first cause wins: a link this side closed
    /// for a malformed frame reports [`DownReason::Malformed`], one the peer closed
    /// [`DownReason::Closed`], one silent for `link_timeout` [`DownReason::TimedOut`].
    pub async fn down(&self) -> DownReason {
        let e = self.shared.conn.closed().await;
        self.shared.lost(&e)
    }

    /// Why the link is down, or `None` while it is up.
    pub fn reason(&self) -> Option<DownReason> {
        if let Some(&r) = self.shared.reason.get() {
            return Some(r);
        }
        self.shared
            .conn
            .close_reason()
            .map(|e| self.shared.lost(&e))
    }

    /// Closes the link with `code` (the peer reads it as its reason); this side's reason is
    /// [`DownReason::LocallyClosed`] unless the link was already down.
    pub fn close(&self, code: CloseCode) {
        self.shared.fail(DownReason::LocallyClosed, code);
    }
}

/// One class's stream, both halves.
#[derive(Debug)]
pub struct Stream {
    /// Frames out.
    pub sink: FrameSink,
    /// Frames in.
    pub source: FrameSource,
}

/// A link taken apart ([`QuicLink::into_parts`]), so that each stream half can live in its own
/// task (a writer per class draining a send queue, a reader per class feeding the driver).
#[derive(Debug)]
pub struct LinkParts {
    /// Which end this side is.
    pub side: Side,
    /// The connection's handle.
    pub watch: LinkWatch,
    /// The control stream (QUIC priority 1: its buffered bytes go out before data's).
    pub control: Stream,
    /// The data stream (priority 0).
    pub data: Stream,
}

/// One mutually authenticated QUIC connection to one peer rank, carrying two long-lived
/// bidirectional streams: control (priority 1) and data (priority 0). The streams have
/// independent flow control, so a peer that stops reading data never delays control.
///
/// Frames are the core's envelopes (`version kind len body`, [`lifeline_core::wire`]), at most
/// [`QuicConfig::max_frame`](crate::QuicConfig) bytes each way. The link is up until
/// [`LinkWatch::down`] resolves; nothing keeps it up but QUIC's keep-alives, and it times out
/// after [`QuicConfig::link_timeout`](crate::QuicConfig) of silence. Dropping it, with every
/// [`LinkWatch`] and part taken from it, closes the connection (the peer reads
/// [`DownReason::Closed`]).
#[derive(Debug)]
pub struct QuicLink {
    parts: LinkParts,
}

impl QuicLink {
    pub(crate) fn new(side: Side, shared: Arc<LinkShared>, control: Stream, data: Stream) -> Self {
        Self {
            parts: LinkParts {
                side,
                watch: LinkWatch { shared },
                control,
                data,
            },
        }
    }

    /// The peer's rank, proven by its certificate (and, on an accepted link, by its claim).
    pub fn peer(&self) -> Rank {
        self.parts.watch.peer()
    }

    /// Which end this side is.
    pub fn side(&self) -> Side {
        self.parts.side
    }

    /// A handle that outlives [`into_parts`](Self::into_parts).
    pub fn watch(&self) -> LinkWatch {
        self.parts.watch.clone()
    }

    /// Sends one frame on `class`'s stream ([`FrameSink::send_all`]).
    pub async fn send(&mut self, class: Class, frame: Bytes) -> Result<(), SendError> {
        self.stream(class).sink.send(frame).await
    }

    /// Sends whole frames in order on `class`'s stream, without copying
    /// ([`FrameSink::send_all`]).
    pub async fn send_all(&mut self, class: Class, frames: &mut [Bytes]) -> Result<(), SendError> {
        self.stream(class).sink.send_all(frames).await
    }

    /// The next whole frame of either class, control first when both have one
    /// ([`FrameSource::recv`]). Cancel-safe.
    pub async fn recv(&mut self) -> Result<(Class, Bytes), DownReason> {
        let (c, d) = (&mut self.parts.control.source, &mut self.parts.data.source);
        tokio::select! {
            biased;
            f = c.recv() => f.map(|f| (Class::Control, f)),
            f = d.recv() => f.map(|f| (Class::Data, f)),
        }
    }

    /// The next whole frame of `class` only ([`FrameSource::recv`]). Cancel-safe.
    pub async fn recv_class(&mut self, class: Class) -> Result<Bytes, DownReason> {
        self.stream(class).source.recv().await
    }

    /// Closes the link with `code` ([`LinkWatch::close`]).
    pub fn close(&self, code: CloseCode) {
        self.parts.watch.close(code);
    }

    /// Closes the link with `code` and `reason` bytes of the caller's (the peer reads both).
    pub(crate) fn close_with(&self, code: CloseCode, reason: &[u8]) {
        let shared = &self.parts.watch.shared;
        let _ = shared.reason.get_or_init(|| DownReason::LocallyClosed);
        shared
            .conn
            .close(code.code(), &Bytes::copy_from_slice(reason));
    }

    /// The link's parts, for one task per stream half.
    pub fn into_parts(self) -> LinkParts {
        self.parts
    }

    pub(crate) fn parts_mut(&mut self) -> &mut LinkParts {
        &mut self.parts
    }

    fn stream(&mut self, class: Class) -> &mut Stream {
        match class {
            Class::Control => &mut self.parts.control,
            Class::Data => &mut self.parts.data,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lower_ranks_dial_wins_on_both_ends() {
        for (a, b) in [(0, 1), (1, 0), (3, 17), (u32::MAX, 0)] {
            let (a, b) = (Rank(a), Rank(b));
            // a's dial is b's accepted connection, and the other way round.
            let a_dial_kept_by_a = keeps(a, b, Side::Dialed);
            let a_dial_kept_by_b = keeps(b, a, Side::Accepted);
            let b_dial_kept_by_a = keeps(a, b, Side::Accepted);
            let b_dial_kept_by_b = keeps(b, a, Side::Dialed);
            assert_eq!(a_dial_kept_by_a, a_dial_kept_by_b, "both ends agree");
            assert_eq!(b_dial_kept_by_a, b_dial_kept_by_b, "both ends agree");
            assert_ne!(a_dial_kept_by_a, b_dial_kept_by_a, "exactly one survives");
            assert_eq!(a_dial_kept_by_a, a < b, "the lower rank's dial");
        }
    }
}
