//! The cluster key (pure: no runtime needed, so the C ABI and other embedders that run their own
//! sockets can prove it too).

use std::fmt;
use std::path::Path;

/// The cluster key: 32 bytes derived from a shared secret. Every node of a cluster holds the
/// same secret; the handshake proves knowledge of it without sending it.
#[derive(Clone, PartialEq, Eq)]
pub struct ClusterKey(pub(crate) [u8; 32]);

/// Why a key could not be made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KeyError {
    /// The secret is empty.
    #[error("the cluster key is empty")]
    Empty,
    /// The key file could not be read.
    #[error("reading the key file {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The error.
        source: std::io::Error,
    },
}

impl ClusterKey {
    /// Context string for deriving the key, so the same secret used elsewhere gives another key.
    const CONTEXT: &'static str = "lifeline transport-tcp 2025 cluster key v1";

    /// The key for a secret of any length (exact bytes, nothing trimmed); empty is refused.
    pub fn from_secret(secret: &[u8]) -> Result<Self, KeyError> {
        if secret.is_empty() {
            return Err(KeyError::Empty);
        }
        Ok(Self(blake3::derive_key(Self::CONTEXT, secret)))
    }

    /// The key for the contents of a file (exact bytes, a trailing newline included).
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, KeyError> {
        let path = path.as_ref();
        let secret = std::fs::read(path).map_err(|source| KeyError::Read {
            path: path.display().to_string(),
            source,
        })?;
        Self::from_secret(&secret)
    }
}

impl fmt::Debug for ClusterKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ClusterKey(..)")
    }
}

impl ClusterKey {
    /// The 32 key bytes (for a keyed MAC; never sent anywhere by this crate).
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_exact_bytes_and_never_empty() {
        assert!(matches!(ClusterKey::from_secret(b""), Err(KeyError::Empty)));
        assert_eq!(
            ClusterKey::from_secret(b"s").unwrap(),
            ClusterKey::from_secret(b"s").unwrap()
        );
        assert_ne!(
            ClusterKey::from_secret(b"s").unwrap(),
            ClusterKey::from_secret(b"s\n").unwrap()
        );
        assert_eq!(
            format!("{:?}", ClusterKey::from_secret(b"s").unwrap()),
            "ClusterKey(..)"
        );
    }
}
