//! Real quinn endpoints on 127.0.0.1: who the mutual-TLS handshake and the rank check let in.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use lifeline_core::tree::Rank;
use lifeline_transport_quic::{
    client_config, server_config, server_name, verify_claimed_rank, ClusterCa, ClusterId,
    IdentityError, IssuedRank, QuicConfig, RankIdentity, ALPN,
};
use quinn::crypto::rustls::QuicClientConfig;
use quinn::{ConnectionError, Endpoint, TransportErrorCode};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// Bound on any one handshake in these tests (they take milliseconds).
const LIMIT: Duration = Duration::from_secs(10);

/// TLS alerts, as QUIC crypto error codes carry them (RFC 8446 §6, RFC 9001 §4.8).
const ALERT_BAD_CERTIFICATE: u8 = 42;
const ALERT_UNKNOWN_CA: u8 = 48;
const ALERT_CERTIFICATE_REQUIRED: u8 = 116;
const ALERT_NO_APPLICATION_PROTOCOL: u8 = 120;

fn cluster() -> ClusterId {
    ClusterId::new("c0ffee").unwrap()
}

fn new_ca() -> ClusterCa {
    ClusterCa::generate(cluster(), SystemTime::now() + Duration::from_secs(3600)).unwrap()
}

fn loopback() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

/// Rank `id` listening on loopback with this crate's server configuration.
fn acceptor(id: &RankIdentity) -> (Endpoint, SocketAddr) {
    let ep = Endpoint::server(
        server_config(id, &QuicConfig::default()).unwrap(),
        loopback(),
    )
    .unwrap();
    let addr = ep.local_addr().unwrap();
    (ep, addr)
}

/// Dials `addr` as `server` with `client`, and accepts on `acceptor` at the same time: the
/// dialer's and the acceptor's handshake results. The acceptor's is final (it has checked the
/// client's certificate); the dialer's may not be, see [`refused`].
async fn handshake(
    acceptor: &Endpoint,
    addr: SocketAddr,
    client: quinn::ClientConfig,
    server: &str,
) -> (
    Result<quinn::Connection, ConnectionError>,
    Result<quinn::Connection, ConnectionError>,
) {
    let dialer = Endpoint::client(loopback()).unwrap();
    let dial = async { dialer.connect_with(client, addr, server).unwrap().await };
    let accept = async {
        let incoming = acceptor.accept().await.expect("endpoint open");
        incoming.await
    };
    tokio::time::timeout(LIMIT, async { tokio::join!(dial, accept) })
        .await
        .expect("handshake within the limit")
}

/// The dialer's final result when the acceptor refuses it. A TLS 1.3 client finishes its
/// handshake before the server has checked the client's certificate, so a refused client may
/// first see its connection established, then closed by the server.
async fn refused(
    dialed: Result<quinn::Connection, ConnectionError>,
) -> Result<quinn::Connection, ConnectionError> {
    let conn = dialed?;
    let reason = tokio::time::timeout(LIMIT, conn.closed())
        .await
        .expect("the acceptor closes a refused connection within the limit");
    Err(reason)
}

/// The TLS alert in a locally detected crypto error, with quinn's reason text.
fn local_alert(r: &Result<quinn::Connection, ConnectionError>) -> (u8, String) {
    match r {
        Err(ConnectionError::TransportError(e)) => (crypto_alert(e.code), e.reason.clone()),
        Err(e) => panic!("expected a local TLS failure, got {e}"),
        Ok(_) => panic!("expected a local TLS failure, the handshake succeeded"),
    }
}

/// The TLS alert in the error the peer closed the connection with.
fn remote_alert(r: &Result<quinn::Connection, ConnectionError>) -> u8 {
    match r {
        Err(ConnectionError::ConnectionClosed(c)) => crypto_alert(c.error_code),
        Err(e) => panic!("expected the peer to close with a TLS alert, got {e}"),
        Ok(_) => panic!("expected the peer to close with a TLS alert, the handshake succeeded"),
    }
}

fn crypto_alert(code: TransportErrorCode) -> u8 {
    let raw = u64::from(code);
    assert!(
        (0x100..0x200).contains(&raw),
        "not a crypto error: {code:?}"
    );
    (raw - 0x100) as u8
}

/// A client configuration built by hand: trusts `root`, presents `client_cert` if any, offers
/// `alpn`.
fn raw_client(
    root: &CertificateDer<'static>,
    client_cert: Option<&IssuedRank>,
    alpn: &[u8],
) -> quinn::ClientConfig {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    roots.add(root.clone()).unwrap();
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .with_root_certificates(roots);
    let mut tls = match client_cert {
        Some(leaf) => builder
            .with_client_auth_cert(
                vec![leaf.cert_der().clone()],
                PrivateKeyDer::from_pem_slice(leaf.key_pem().as_bytes()).unwrap(),
            )
            .unwrap(),
        None => builder.with_no_client_auth(),
    };
    tls.alpn_protocols = vec![alpn.to_vec()];
    quinn::ClientConfig::new(Arc::new(QuicClientConfig::try_from(tls).unwrap()))
}

#[tokio::test]
async fn right_ca_right_rank_connects_and_the_claim_is_checked() {
    let ca = new_ca();
    let (r0, r1) = (ca.identity(Rank(0)).unwrap(), ca.identity(Rank(1)).unwrap());
    let (ep, addr) = acceptor(&r0);
    let client = client_config(&r1, &QuicConfig::default()).unwrap();
    let (dialed, accepted) = handshake(&ep, addr, client, &server_name(Rank(0), &cluster())).await;
    let dialed = dialed.expect("rank 1 reaches rank 0");
    let accepted = accepted.expect("rank 0 accepts rank 1");
    assert_eq!(
        accepted.handshake_data().and_then(|d| {
            d.downcast::<quinn::crypto::rustls::HandshakeData>()
                .ok()?
                .protocol
        }),
        Some(ALPN.to_vec())
    );

    // The acceptor: the true claim holds, a false one does not.
    verify_claimed_rank(&accepted, Rank(1), &cluster()).unwrap();
    match verify_claimed_rank(&accepted, Rank(2), &cluster()) {
        Err(IdentityError::WrongRank {
            claimed,
            name,
            source,
        }) => {
            assert_eq!(claimed, Rank(2));
            assert_eq!(name, "r2.c0ffee.lifeline");
            assert!(
                matches!(source, webpki::Error::CertNotValidForName(_)),
                "{source:?}"
            );
        }
        other => panic!("a false claim passed: {other:?}"),
    }
    // Claiming the acceptor's own rank fails too.
    assert!(matches!(
        verify_claimed_rank(&accepted, Rank(0), &cluster()),
        Err(IdentityError::WrongRank { .. })
    ));
    // The dialer's side holds rank 0's certificate.
    verify_claimed_rank(&dialed, Rank(0), &cluster()).unwrap();
    ep.close(0u32.into(), b"");
}

#[tokio::test]
async fn dialing_rank_5_at_rank_0s_address_is_refused() {
    let ca = new_ca();
    let (r0, r1) = (ca.identity(Rank(0)).unwrap(), ca.identity(Rank(1)).unwrap());
    let (ep, addr) = acceptor(&r0);
    let client = client_config(&r1, &QuicConfig::default()).unwrap();
    let (dialed, accepted) = handshake(&ep, addr, client, &server_name(Rank(5), &cluster())).await;
    let (alert, reason) = local_alert(&dialed);
    assert_eq!(alert, ALERT_BAD_CERTIFICATE, "{reason}");
    assert!(
        reason.contains("not valid for name") && reason.contains("r5.c0ffee.lifeline"),
        "{reason}"
    );
    assert_eq!(remote_alert(&accepted), ALERT_BAD_CERTIFICATE);
}

#[tokio::test]
async fn a_client_certificate_from_another_ca_is_refused() {
    let ca = new_ca();
    let (ep, addr) = acceptor(&ca.identity(Rank(0)).unwrap());
    // Same cluster id, same rank name, another CA; the client trusts the real CA, so only the
    // acceptor's client verifier stands in the way.
    let stranger = new_ca().issue(Rank(1)).unwrap();
    let client = raw_client(ca.cert_der(), Some(&stranger), ALPN);
    let (dialed, accepted) = handshake(&ep, addr, client, &server_name(Rank(0), &cluster())).await;
    let (alert, reason) = local_alert(&accepted);
    assert_eq!(alert, ALERT_UNKNOWN_CA, "{reason}");
    assert!(reason.contains("UnknownIssuer"), "{reason}");
    assert_eq!(remote_alert(&refused(dialed).await), ALERT_UNKNOWN_CA);
}

#[tokio::test]
async fn a_client_without_a_certificate_is_refused() {
    let ca = new_ca();
    let (ep, addr) = acceptor(&ca.identity(Rank(0)).unwrap());
    let client = raw_client(ca.cert_der(), None, ALPN);
    let (dialed, accepted) = handshake(&ep, addr, client, &server_name(Rank(0), &cluster())).await;
    let (alert, reason) = local_alert(&accepted);
    assert_eq!(alert, ALERT_CERTIFICATE_REQUIRED, "{reason}");
    assert_eq!(
        remote_alert(&refused(dialed).await),
        ALERT_CERTIFICATE_REQUIRED
    );
}

#[tokio::test]
async fn a_client_of_another_protocol_is_refused() {
    let ca = new_ca();
    let (ep, addr) = acceptor(&ca.identity(Rank(0)).unwrap());
    let leaf = ca.issue(Rank(1)).unwrap();
    let client = raw_client(ca.cert_der(), Some(&leaf), b"h3");
    let (dialed, accepted) = handshake(&ep, addr, client, &server_name(Rank(0), &cluster())).await;
    let (alert, reason) = local_alert(&accepted);
    assert_eq!(alert, ALERT_NO_APPLICATION_PROTOCOL, "{reason}");
    assert_eq!(
        remote_alert(&refused(dialed).await),
        ALERT_NO_APPLICATION_PROTOCOL
    );
}
