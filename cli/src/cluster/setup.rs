//! What a run needs before any node starts: each rank's loopback address and free port, the
//! cluster key, and (QUIC) the cluster CA and the ranks' certificates.

use std::io::Read;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use super::procs::Procs;
use super::ClusterArgs;
use crate::nft;
use crate::node_cmd::{wall_ms, TransportKind};
use crate::CliError;

/// Ranks that get their own loopback address (127.0.1.1 .. 127.0.254.250).
pub(super) const MAX_NODES: u32 = 250 * 254;

/// Rank `r`'s loopback address: `127.0.1.(r+1)` for ranks 0-249, then `127.0.2.1`, and so on
/// (Linux answers on all of 127.0.0.0/8); elsewhere 127.0.0.1 for every rank.
pub(super) fn rank_ip(r: u32) -> IpAddr {
    if cfg!(target_os = "linux") {
        IpAddr::V4(Ipv4Addr::new(
            127,
            0,
            (1 + r / 250) as u8,
            (1 + r % 250) as u8,
        ))
    } else {
        IpAddr::V4(Ipv4Addr::LOCALHOST)
    }
}

/// Every rank's listening endpoint: its own address and a port free there (found by binding
/// port 0: a UDP port for QUIC, a TCP port otherwise).
fn endpoints(n: u32, transport: TransportKind) -> Result<Vec<SocketAddr>, CliError> {
    if transport == TransportKind::Quic {
        let ss: Vec<std::net::UdpSocket> = (0..n)
            .map(|r| std::net::UdpSocket::bind((rank_ip(r), 0)))
            .collect::<Result<_, _>>()
            .map_err(|e| CliError::Failed(format!("finding free ports: {e}")))?;
        return ss
            .iter()
            .map(std::net::UdpSocket::local_addr)
            .collect::<Result<_, _>>()
            .map_err(|e| CliError::Failed(format!("finding free ports: {e}")));
    }
    let ls: Vec<std::net::TcpListener> = (0..n)
        .map(|r| std::net::TcpListener::bind((rank_ip(r), 0)))
        .collect::<Result<_, _>>()
        .map_err(|e| CliError::Failed(format!("finding free ports: {e}")))?;
    ls.iter()
        .map(std::net::TcpListener::local_addr)
        .collect::<Result<_, _>>()
        .map_err(|e| CliError::Failed(format!("finding free ports: {e}")))
}

/// QUIC: a cluster CA for this run and a certificate per rank (and one for rank `n`, outside
/// the cluster, for `--garbage`), written to `DIR/certs` (the CA key stays there, with the
/// launcher); returns the directory and the cluster id.
fn quic_certs(dir: &std::path::Path, n: u32) -> Result<(PathBuf, String), CliError> {
    use lifeline_transport_quic::{ClusterCa, ClusterId};
    let failed = |e: lifeline_transport_quic::IdentityError| CliError::Failed(e.to_string());
    let id = format!("cluster-{}", std::process::id());
    let cluster = ClusterId::new(&id).map_err(failed)?;
    let not_after = std::time::SystemTime::now() + Duration::from_secs(86_400);
    let ca = ClusterCa::generate(cluster, not_after).map_err(failed)?;
    let certs = dir.join("certs");
    ca.write(&certs).map_err(failed)?;
    // Rank n is outside the cluster: its certificate is the `--garbage` intruders'.
    for r in 0..=n {
        let issued = ca.issue(lifeline_core::tree::Rank(r)).map_err(failed)?;
        issued.write(&certs).map_err(failed)?;
    }
    Ok((certs, id))
}

fn secret() -> Vec<u8> {
    let mut b = vec![0u8; 32];
    let urandom = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut b));
    if urandom.is_err() {
        b = format!("{}-{}", std::process::id(), wall_ms()).into_bytes();
    }
    b
}

/// What the nodes are started with.
pub(super) struct Setup {
    /// Every rank's listening endpoint.
    pub(super) eps: Vec<SocketAddr>,
    /// The peers file (`RANK ADDR` lines) and the cluster key file, in the run's directory.
    pub(super) peers_file: PathBuf,
    pub(super) key_file: PathBuf,
    /// QUIC: the certificates' directory and the cluster id.
    pub(super) quic: Option<(PathBuf, String)>,
}

/// Picks the endpoints, creates the nftables table (`net`: network faults were asked for;
/// checked before any node starts: without nft or root, nothing runs), and writes the peers,
/// the key and (QUIC) the certificates into the run's directory.
pub(super) fn prepare(args: &ClusterArgs, procs: &mut Procs, net: bool) -> Result<Setup, CliError> {
    let n = args.nodes;
    let dir = procs.dir.clone();
    let eps = endpoints(n, args.transport)?;
    if net {
        // Checked before any node starts: without nft or root, nothing runs.
        procs.table = Some(nft::Table::create(
            &eps,
            "--cut, --cut-oneway, --partition, --blackhole and --loss",
        )?);
    }
    let peers: String = eps
        .iter()
        .enumerate()
        .map(|(r, a)| format!("{r} {a}\n"))
        .collect();
    let write = |name: &str, bytes: &[u8]| {
        let path = dir.join(name);
        std::fs::write(&path, bytes)
            .map(|()| path)
            .map_err(|e| CliError::Failed(format!("writing {name}: {e}")))
    };
    let peers_file = write("peers", peers.as_bytes())?;
    let key_file = write("key", &secret())?;
    let quic = match args.transport {
        TransportKind::Quic => Some(quic_certs(&procs.dir, n)?),
        TransportKind::Tcp => None,
    };
    Ok(Setup {
        eps,
        peers_file,
        key_file,
        quic,
    })
}
