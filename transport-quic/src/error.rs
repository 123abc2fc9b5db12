//! [`IdentityError`]: why a cluster identity could not be made, written, loaded or checked.

use std::io;
use std::path::PathBuf;

use lifeline_core::tree::Rank;

/// Why a certificate could not be generated, written or loaded, or why a peer's certificate
/// does not prove the rank it claims.
///
/// Every variant that concerns a file names it. None of them is a panic: a missing file,
/// garbage in a PEM file or a certificate for the wrong rank all come back here.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum IdentityError {
    /// The cluster id cannot be the middle label of a DNS name.
    #[error(
        "cluster id {id:?}: must be 1 to 63 lowercase letters, digits or '-', \
         not starting or ending with '-'"
    )]
    BadClusterId {
        /// The id as given.
        id: String,
    },
    /// The requested expiry is unusable: not in the future, or past what X.509 can write.
    #[error("certificate expiry: {reason}")]
    BadExpiry {
        /// What is wrong with it.
        reason: &'static str,
    },
    /// rcgen failed to make a key or sign a certificate.
    #[error("generating a certificate: {0}")]
    Generate(#[from] rcgen::Error),
    /// A file of the layout does not exist.
    #[error("{}: no such file", path.display())]
    Missing {
        /// The file.
        path: PathBuf,
    },
    /// A file or directory could not be read, written or created.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The error.
        source: io::Error,
    },
    /// A file holds no PEM section of the expected kind, or a broken one.
    #[error("{}: expected {expected} in PEM form: {reason}", path.display())]
    BadPem {
        /// The file (a layout-relative name for in-memory PEM).
        path: PathBuf,
        /// What the file should hold ("a CERTIFICATE", "a PRIVATE KEY").
        expected: &'static str,
        /// What was found instead.
        reason: String,
    },
    /// A PEM certificate is not a usable X.509 certificate (or the CA certificate cannot be a
    /// trust anchor).
    #[error("{}: not a usable certificate: {source}", path.display())]
    BadCertificate {
        /// The file.
        path: PathBuf,
        /// webpki's reason.
        source: webpki::Error,
    },
    /// The certificate is not valid for this rank's name (it was issued to another rank or
    /// another cluster).
    #[error("{}: not a certificate for {name}: {source}", path.display())]
    NotThisRank {
        /// The certificate file.
        path: PathBuf,
        /// The name it should be valid for, `r<rank>.<cluster>.lifeline`.
        name: String,
        /// webpki's reason.
        source: webpki::Error,
    },
    /// The certificate does not chain to the cluster CA for both TLS roles (another CA issued
    /// it, it has expired or is not yet valid, or it lacks serverAuth or clientAuth).
    #[error("{}: not trusted under {}: {source}", path.display(), ca.display())]
    Untrusted {
        /// The certificate file.
        path: PathBuf,
        /// The CA certificate file.
        ca: PathBuf,
        /// webpki's reason.
        source: webpki::Error,
    },
    /// The private key is unusable, or is not the key of the certificate beside it.
    #[error("{}: not the private key of the certificate beside it: {source}", path.display())]
    BadKey {
        /// The key file.
        path: PathBuf,
        /// rustls's reason.
        source: rustls::Error,
    },
    /// The connection has no verified peer certificate (it is not a mutual-TLS connection made
    /// with this crate's configurations, or its handshake has not finished).
    #[error("the connection has no verified peer certificate")]
    NoPeerCertificate,
    /// The peer's certificate could not be parsed (it passed the TLS stack, so this is not
    /// expected).
    #[error("the peer's certificate is unusable: {0}")]
    BadPeerCertificate(webpki::Error),
    /// The peer claimed a rank its certificate does not name.
    #[error(
        "the peer claims rank {claimed}, but its certificate is not valid for {name}: {source}"
    )]
    WrongRank {
        /// The rank the peer claimed.
        claimed: Rank,
        /// The name the certificate would have to be valid for.
        name: String,
        /// webpki's reason.
        source: webpki::Error,
    },
}
