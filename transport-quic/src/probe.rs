//! Test support: a raw QUIC client that speaks the link layer's opening by hand, so a test or
//! the `lifeline cluster` launcher can play an intruder (another CA's certificate, a claim of
//! a rank the certificate does not name, a rank outside the address book) against a running
//! endpoint. Nothing here is used by the transport itself.

use std::net::SocketAddr;
use std::time::Duration;

use lifeline_core::tree::Rank;
use lifeline_core::Class;

use crate::{
    client_config, server_name, CloseCode, ClusterId, Hello, QuicConfig, RankIdentity, ACCEPTED,
};

/// What a [`probe`] saw.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProbeOutcome {
    /// The TLS handshake succeeded and the acceptor answered both hellos with
    /// [`ACCEPTED`].
    pub handshake_ok: bool,
    /// The acceptor closed the connection (or refused the TLS handshake) within the bound.
    pub closed: bool,
    /// The acceptor closed the connection with [`CloseCode::Duplicate`]: its link policy keeps
    /// its own dial to the claimed rank (in flight while nothing answers at that rank's
    /// address). A real rank would accept that dial; a probe may try again once it failed.
    pub duplicate: bool,
}

/// A client-only quinn endpoint on `from` (port 0 for any), for [`probe`]. One endpoint serves
/// any number of probes, so a fixed source address is bound once.
pub fn probe_endpoint(from: SocketAddr) -> std::io::Result<quinn::Endpoint> {
    quinn::Endpoint::client(from)
}

/// Dials `target` (rank `to` of `cluster`) from `ep` with `id`'s certificate, sends a hello per
/// class claiming rank `claim`, and, if the acceptor answers [`ACCEPTED`], writes `bytes` on the
/// stream of `class`. Each step is bounded by `within`; then waits up to `within` for the
/// acceptor to close the connection. Never panics on anything the peer sends.
#[allow(clippy::too_many_arguments)]
pub async fn probe(
    ep: &quinn::Endpoint,
    id: &RankIdentity,
    cluster: &ClusterId,
    claim: Rank,
    to: Rank,
    target: SocketAddr,
    class: Class,
    bytes: &[u8],
    within: Duration,
) -> ProbeOutcome {
    let refused = ProbeOutcome {
        handshake_ok: false,
        closed: true,
        duplicate: false,
    };
    let Ok(config) = client_config(id, &QuicConfig::default()) else {
        return refused;
    };
    let Ok(connecting) = ep.connect_with(config, target, &server_name(to, cluster)) else {
        return refused;
    };
    let conn = match tokio::time::timeout(within, connecting).await {
        Ok(Ok(c)) => c,
        // The TLS handshake failed: the acceptor refused the certificate (or the address).
        Ok(Err(_)) => return refused,
        Err(_) => {
            return ProbeOutcome {
                handshake_ok: false,
                closed: false,
                duplicate: false,
            }
        }
    };
    let talk = async {
        let mut streams = Vec::new();
        for c in [Class::Control, Class::Data] {
            let (mut tx, rx) = conn.open_bi().await.ok()?;
            let h = Hello {
                rank: claim,
                class: c,
            }
            .encode();
            tx.write_all(&h).await.ok()?;
            streams.push((tx, rx));
        }
        let mut answer = [0u8; ACCEPTED.len()];
        streams.first_mut()?.1.read_exact(&mut answer).await.ok()?;
        (answer == ACCEPTED).then_some(streams)
    };
    let Ok(Some(mut streams)) = tokio::time::timeout(within, talk).await else {
        let closed = tokio::time::timeout(within, conn.closed()).await.ok();
        let duplicate = matches!(
            &closed,
            Some(quinn::ConnectionError::ApplicationClosed(c))
                if CloseCode::from_code(c.error_code) == Some(CloseCode::Duplicate)
        );
        return ProbeOutcome {
            handshake_ok: false,
            closed: closed.is_some(),
            duplicate,
        };
    };
    if let Some(s) = streams.get_mut(usize::from(class == Class::Data)) {
        let _ = s.0.write_all(bytes).await;
    }
    ProbeOutcome {
        handshake_ok: true,
        closed: tokio::time::timeout(within, conn.closed()).await.is_ok(),
        duplicate: false,
    }
}
