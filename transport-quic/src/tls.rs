//! quinn server and client configurations for one rank: TLS 1.3 only, mutual authentication
//! under the cluster CA, with the transport settings of [`QuicConfig`].

use std::sync::Arc;

use quinn::crypto::rustls::{NoInitialCipherSuite, QuicClientConfig, QuicServerConfig};
use rustls::client::Resumption;
use rustls::crypto::CryptoProvider;
use rustls::server::{NoServerSessionStorage, VerifierBuilderError, WebPkiClientVerifier};
use rustls::RootCertStore;

use crate::config::{ConfigError, QuicConfig};
use crate::RankIdentity;

/// The ALPN protocol both sides offer. QUIC requires a common one, so a QUIC client of another
/// protocol (HTTP/3, say) is refused in the handshake.
pub const ALPN: &[u8] = b"lifeline/1";

/// Why a quinn configuration could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TlsError {
    /// The settings are invalid.
    #[error("quic config: {0}")]
    Config(#[from] ConfigError),
    /// rustls refused the certificate, key or CA certificate.
    #[error("tls config: {0}")]
    Tls(#[from] rustls::Error),
    /// The client-certificate verifier could not be built from the CA certificate.
    #[error("client verifier: {0}")]
    Verifier(#[from] VerifierBuilderError),
    /// The TLS configuration lacks the cipher suite QUIC's initial packets need.
    #[error("quic crypto: {0}")]
    Quic(#[from] NoInitialCipherSuite),
}

/// The crypto provider every configuration uses: *ring*, named explicitly so the result never
/// depends on a process-wide default.
pub(crate) fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The cluster CA as the only root.
fn roots(id: &RankIdentity) -> Result<Arc<RootCertStore>, rustls::Error> {
    let mut roots = RootCertStore::empty();
    roots.add(id.ca_der().clone())?;
    Ok(Arc::new(roots))
}

/// The acceptor's configuration for rank `id`: it presents `id`'s certificate, **requires** a
/// client certificate that chains to the cluster CA (a client with none, or one from another
/// CA, fails the handshake), speaks TLS 1.3 with ALPN [`ALPN`] only, keeps no sessions (every
/// handshake verifies the peer's certificate in full), refuses connection migration (cluster
/// addresses are fixed), and uses [`QuicConfig::transport_config`] (so the peer may open at
/// most 4 bidirectional and no unidirectional streams).
///
/// The handshake proves the peer holds *some* rank's certificate of this cluster; which rank
/// it is, is checked against its claim with [`verify_claimed_rank`](crate::verify_claimed_rank).
pub fn server_config(id: &RankIdentity, cfg: &QuicConfig) -> Result<quinn::ServerConfig, TlsError> {
    let transport = cfg.transport_config()?;
    let provider = provider();
    let verifier =
        WebPkiClientVerifier::builder_with_provider(roots(id)?, provider.clone()).build()?;
    let mut tls = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])?
        .with_client_cert_verifier(verifier)
        .with_single_cert(vec![id.cert_der().clone()], id.key())?;
    tls.alpn_protocols = vec![ALPN.to_vec()];
    tls.session_storage = Arc::new(NoServerSessionStorage {});
    tls.send_tls13_tickets = 0;
    let mut server = quinn::ServerConfig::with_crypto(Arc::new(QuicServerConfig::try_from(tls)?));
    server
        .transport_config(Arc::new(transport))
        .migration(false);
    Ok(server)
}

/// The dialer's configuration for rank `id`: it trusts the cluster CA only, presents `id`'s
/// certificate when asked, speaks TLS 1.3 with ALPN [`ALPN`] only, resumes no sessions, and
/// uses [`QuicConfig::transport_config`].
///
/// Dial with [`server_name`](crate::server_name)`(peer, cluster)` as the server name: the
/// handshake then fails unless the peer's certificate is valid for exactly that rank.
pub fn client_config(id: &RankIdentity, cfg: &QuicConfig) -> Result<quinn::ClientConfig, TlsError> {
    let transport = cfg.transport_config()?;
    let mut tls = rustls::ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])?
        .with_root_certificates(roots(id)?)
        .with_client_auth_cert(vec![id.cert_der().clone()], id.key())?;
    tls.alpn_protocols = vec![ALPN.to_vec()];
    tls.resumption = Resumption::disabled();
    let mut client = quinn::ClientConfig::new(Arc::new(QuicClientConfig::try_from(tls)?));
    client.transport_config(Arc::new(transport));
    Ok(client)
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, SystemTime};

    use lifeline_core::tree::Rank;

    use super::*;
    use crate::{ClusterCa, ClusterId};

    #[test]
    fn builders_refuse_a_bad_config_without_panicking() {
        let c = ClusterId::new("c").unwrap();
        let ca = ClusterCa::generate(c, SystemTime::now() + Duration::from_secs(60)).unwrap();
        let id = ca.identity(Rank(0)).unwrap();
        let good = QuicConfig::default();
        assert!(server_config(&id, &good).is_ok());
        assert!(client_config(&id, &good).is_ok());
        let bad = QuicConfig {
            link_timeout: Duration::ZERO,
            ..QuicConfig::default()
        };
        assert!(matches!(
            server_config(&id, &bad),
            Err(TlsError::Config(ConfigError::LinkTimeoutTooShort { .. }))
        ));
        assert!(matches!(
            client_config(&id, &bad),
            Err(TlsError::Config(ConfigError::LinkTimeoutTooShort { .. }))
        ));
    }
}
