//! The certificate directory layout and the file helpers behind it: public files written
//! normally, key files created `0600`, and reads that tell a missing file from other failures.
//!
//! ```text
//! DIR/ca.pem              the cluster CA certificate: every node gets it
//! DIR/ca.key              the cluster CA key: stays with the launcher, never on a node
//! DIR/rank-R/cert.pem     rank R's certificate (DNS SAN rR.<cluster>.lifeline)
//! DIR/rank-R/key.pem      rank R's private key (PKCS#8)
//! ```
//!
//! A node's own directory has the same layout with only `ca.pem` and its `rank-R/`.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use lifeline_core::tree::Rank;

use crate::IdentityError;

/// The cluster CA certificate's file name.
pub const CA_CERT_FILE: &str = "ca.pem";
/// The cluster CA key's file name.
pub const CA_KEY_FILE: &str = "ca.key";
/// A rank's certificate file name, inside its `rank-R` directory.
pub const RANK_CERT_FILE: &str = "cert.pem";
/// A rank's key file name, inside its `rank-R` directory.
pub const RANK_KEY_FILE: &str = "key.pem";

/// The paths of a certificate directory (see the module docs for the layout). It only builds
/// paths; nothing is read or created.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CertDir {
    root: PathBuf,
}

impl CertDir {
    /// The layout rooted at `root`.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    /// The root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// `DIR/ca.pem`.
    pub fn ca_cert(&self) -> PathBuf {
        self.root.join(CA_CERT_FILE)
    }

    /// `DIR/ca.key`.
    pub fn ca_key(&self) -> PathBuf {
        self.root.join(CA_KEY_FILE)
    }

    /// `DIR/rank-R`: everything a node needs besides `ca.pem`.
    pub fn rank_dir(&self, rank: Rank) -> PathBuf {
        self.root.join(rank_dir_name(rank))
    }

    /// `DIR/rank-R/cert.pem`.
    pub fn rank_cert(&self, rank: Rank) -> PathBuf {
        self.rank_dir(rank).join(RANK_CERT_FILE)
    }

    /// `DIR/rank-R/key.pem`.
    pub fn rank_key(&self, rank: Rank) -> PathBuf {
        self.rank_dir(rank).join(RANK_KEY_FILE)
    }
}

/// `rank-R`.
fn rank_dir_name(rank: Rank) -> String {
    format!("rank-{}", rank.0)
}

/// Creates `dir` and its parents if missing.
pub(crate) fn create_dir(dir: &Path) -> Result<(), IdentityError> {
    fs::create_dir_all(dir).map_err(|source| IdentityError::Io {
        path: dir.to_owned(),
        source,
    })
}

/// Writes a public file (a certificate), replacing any earlier one.
pub(crate) fn write_public(path: &Path, contents: &str) -> Result<(), IdentityError> {
    fs::write(path, contents).map_err(|source| IdentityError::Io {
        path: path.to_owned(),
        source,
    })
}

/// Writes a secret file (a private key) readable by its owner only (`0600` on Unix). An
/// existing file is removed first and the new one created with its mode, so the key never sits
/// in a file with looser permissions, even when replacing one that had them.
pub(crate) fn write_secret(path: &Path, contents: &str) -> Result<(), IdentityError> {
    let io_err = |source| IdentityError::Io {
        path: path.to_owned(),
        source,
    };
    match fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(io_err(e)),
    }
    let mut options = fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options.open(path).map_err(io_err)?;
    file.write_all(contents.as_bytes()).map_err(io_err)
}

/// Reads a whole file; a missing one is [`IdentityError::Missing`].
pub(crate) fn read(path: &Path) -> Result<Vec<u8>, IdentityError> {
    fs::read(path).map_err(|source| match source.kind() {
        io::ErrorKind::NotFound => IdentityError::Missing {
            path: path.to_owned(),
        },
        _ => IdentityError::Io {
            path: path.to_owned(),
            source,
        },
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A fresh, empty directory under the system temp dir, unique to this process and `name`;
    /// removed when dropped.
    pub(crate) struct TempDir(pub(crate) PathBuf);

    impl TempDir {
        pub(crate) fn new(name: &str) -> Self {
            let p = std::env::temp_dir()
                .join(format!("lifeline-quic-unit-{}-{name}", std::process::id()));
            let _ = fs::remove_dir_all(&p);
            fs::create_dir_all(&p).unwrap();
            Self(p)
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn layout_paths() {
        let d = CertDir::new("/x");
        assert_eq!(d.root(), Path::new("/x"));
        assert_eq!(d.ca_cert(), Path::new("/x/ca.pem"));
        assert_eq!(d.ca_key(), Path::new("/x/ca.key"));
        assert_eq!(d.rank_dir(Rank(12)), Path::new("/x/rank-12"));
        assert_eq!(d.rank_cert(Rank(3)), Path::new("/x/rank-3/cert.pem"));
        assert_eq!(d.rank_key(Rank(3)), Path::new("/x/rank-3/key.pem"));
    }

    #[cfg(unix)]
    #[test]
    fn secrets_are_0600_even_over_a_looser_file() {
        use std::os::unix::fs::PermissionsExt;
        let t = TempDir::new("secret");
        let p = t.0.join("k");
        fs::write(&p, "old").unwrap();
        fs::set_permissions(&p, fs::Permissions::from_mode(0o644)).unwrap();
        write_secret(&p, "new").unwrap();
        assert_eq!(fs::read_to_string(&p).unwrap(), "new");
        assert_eq!(
            fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o600
        );
    }

    #[test]
    fn reads_tell_missing_from_other_failures() {
        let t = TempDir::new("read");
        let missing = t.0.join("nope");
        assert!(matches!(read(&missing), Err(IdentityError::Missing { path }) if path == missing));
        // A directory is not readable as a file: an i/o error, not "missing".
        assert!(matches!(read(&t.0), Err(IdentityError::Io { .. })));
    }
}
