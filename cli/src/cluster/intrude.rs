//! The `--garbage` intruders: over TCP garbage bytes and a wrong-key handshake, over QUIC
//! garbage datagrams and three clients with wrong certificates. Each must be refused by the
//! nodes (their `stats` counters say so); nothing is checked here.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use tokio::io::AsyncWriteExt;

use super::setup::rank_ip;

/// Two intruders at one node: garbage bytes, then a handshake with the wrong key, from the
/// claimed rank's own address (`claim_ip`). Both are refused by the node; nothing here is
/// checked, the node's counters are.
pub(super) async fn intrude(addr: SocketAddr, rank: u32, claim: u32, claim_ip: IpAddr) {
    use lifeline_core::tree::Rank;
    use lifeline_transport_tcp::{handshake, ClusterKey};
    let bounded = Duration::from_secs(3);
    let connect = |ip: Option<IpAddr>| async move {
        let sock = tokio::net::TcpSocket::new_v4()?;
        if let Some(ip) = ip {
            sock.bind(SocketAddr::new(ip, 0))?;
        }
        sock.connect(addr).await
    };
    if let Ok(Ok(mut s)) = tokio::time::timeout(bounded, connect(None)).await {
        let garbage = b"GET / HTTP/1.1\r\nHost: lifeline\r\n\r\n-- not a lifeline handshake --";
        let _ = s.write_all(garbage).await;
        let mut buf = [0u8; 64];
        let _ =
            tokio::time::timeout(bounded, tokio::io::AsyncReadExt::read(&mut s, &mut buf)).await;
    }
    if let (Ok(Ok(mut s)), Ok(key)) = (
        tokio::time::timeout(bounded, connect(Some(claim_ip))).await,
        ClusterKey::from_secret(b"not the cluster key"),
    ) {
        // Claims to be a real rank from its real address, without the key.
        let _ = tokio::time::timeout(
            bounded,
            handshake::dial(
                &mut s,
                &key,
                Rank(claim),
                Rank(rank),
                lifeline_core::Class::Control,
            ),
        )
        .await;
    }
}

/// QUIC's intruders at every node (`eps`), from `from`: garbage UDP datagrams (no QUIC
/// packet: dropped, nothing counted), then three clients, each refused and counted: another
/// CA's certificate for rank 0 (`handshakes_failed`), rank 0's certificate claiming rank 1
/// (`wrong_rank`), and the certificate of rank `n`, outside the cluster (`wrong_address`).
/// From a dead rank's exact address they reach those checks; from any other address the
/// acceptor refuses them first, as strangers. Nothing is checked here; the nodes' counters
/// are.
pub(super) async fn intrude_quic(
    eps: Vec<SocketAddr>,
    certs: PathBuf,
    cluster: String,
    from: SocketAddr,
) {
    use lifeline_core::tree::Rank;
    use lifeline_core::Class;
    use lifeline_transport_quic::{probe, probe_endpoint, ClusterCa, ClusterId, RankIdentity};
    let bounded = Duration::from_secs(3);
    let n = eps.len() as u32;
    if let Ok(s) = tokio::net::UdpSocket::bind(SocketAddr::new(rank_ip(0), 0)).await {
        let garbage = b"GET / HTTP/1.1\r\nHost: lifeline\r\n\r\n-- not a QUIC packet --";
        for a in &eps {
            for _ in 0..4 {
                let _ = s.send_to(garbage, a).await;
            }
        }
    }
    let Ok(id) = ClusterId::new(&cluster) else {
        return;
    };
    let not_after = std::time::SystemTime::now() + Duration::from_secs(3600);
    let foreign = ClusterCa::generate(id.clone(), not_after).and_then(|ca| ca.identity(Rank(0)));
    let ours = |r: u32| RankIdentity::load(&certs, Rank(r), &id);
    let clients = [
        (foreign, Rank(0)),
        (ours(0), Rank(1 % n)),
        (ours(n), Rank(n)),
    ];
    let Ok(ep) = probe_endpoint(from) else {
        return;
    };
    // One task per target (a dead rank's probes wait out their bound), sharing the endpoint.
    let clients = std::sync::Arc::new(clients);
    let mut tasks = Vec::new();
    for (r, a) in eps.iter().enumerate() {
        let (ep, clients, id, a) = (ep.clone(), clients.clone(), id.clone(), *a);
        tasks.push(tokio::spawn(async move {
            let forged = [1u8, 1, 0, 0, 0, 0];
            for (cert, claim) in clients.iter() {
                if let Ok(cert) = cert {
                    let to = Rank(r as u32);
                    let _ =
                        probe(&ep, cert, &id, *claim, to, a, Class::Data, &forged, bounded).await;
                }
            }
        }));
    }
    for t in tasks {
        let _ = t.await;
    }
}
