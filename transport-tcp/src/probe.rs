//! Test support: a raw TCP peer that speaks (or garbles) the handshake by hand, so a
//! conformance test can play an intruder or a misbehaving authenticated peer against a running
//! node. Nothing here is used by the transport itself.

use std::net::SocketAddr;
use std::time::Duration;

use lifeline_core::tree::Rank;
use lifeline_core::Class;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::{handshake, ClusterKey};

/// What a probe saw.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProbeOutcome {
    /// The handshake completed and the node accepted the connection.
    pub handshake_ok: bool,
    /// The node closed the connection within the bound (or refused the handshake).
    pub closed: bool,
}

/// Reads until EOF or an error: whether that happened within `within`.
async fn closed_within(s: &mut TcpStream, within: Duration) -> bool {
    let mut buf = [0u8; 4096];
    tokio::time::timeout(within, async {
        loop {
            match s.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    })
    .await
    .is_ok()
}

/// Connects to `target`, writes `bytes` without any handshake, and waits up to `within` for
/// the node to close the connection. Panics only if the connection cannot be opened at all.
pub async fn unauthenticated(target: SocketAddr, bytes: &[u8], within: Duration) -> ProbeOutcome {
    let mut s = TcpStream::connect(target).await.expect("connect");
    let _ = s.write_all(bytes).await;
    ProbeOutcome {
        handshake_ok: false,
        closed: closed_within(&mut s, within).await,
    }
}

/// Connects to `target` (rank `to`), runs the dialer's handshake as `as_rank` with `key` on a
/// connection of `class`, then writes `bytes` and waits up to `within` for the node to close
/// the connection. A dialer that cannot verify the node stops at once (the node sees EOF).
pub async fn authenticated(
    key: &ClusterKey,
    as_rank: Rank,
    to: Rank,
    target: SocketAddr,
    class: Class,
    bytes: &[u8],
    within: Duration,
) -> ProbeOutcome {
    let mut s = TcpStream::connect(target).await.expect("connect");
    let hs = tokio::time::timeout(within, handshake::dial(&mut s, key, as_rank, to, class)).await;
    if !matches!(hs, Ok(Ok(()))) {
        return ProbeOutcome {
            handshake_ok: false,
            closed: true,
        };
    }
    let _ = s.write_all(bytes).await;
    ProbeOutcome {
        handshake_ok: true,
        closed: closed_within(&mut s, within).await,
    }
}
