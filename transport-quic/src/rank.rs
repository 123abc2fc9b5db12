//! [`RankIdentity`]: what one node holds to prove its rank: its certificate and key, and the
//! cluster CA certificate (never the CA key).

use std::fmt;
use std::path::{Path, PathBuf};

use lifeline_core::tree::Rank;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use webpki::EndEntityCert;

use crate::files::{self, CertDir};
use crate::{tls, ClusterId, IdentityError};

/// A rank's TLS identity: its certificate and private key, and the cluster CA certificate that
/// every peer's certificate must chain to.
///
/// Guarantees (checked by [`load`](Self::load) and [`from_pem`](Self::from_pem); there is no
/// other constructor): the certificate is valid for `r<rank>.<cluster>.lifeline`, chains to the
/// CA certificate for both serverAuth and clientAuth and is valid now, and the key is the
/// certificate's own key. Its `Debug` output never shows the key.
pub struct RankIdentity {
    rank: Rank,
    cluster: ClusterId,
    cert: CertificateDer<'static>,
    key: PrivateKeyDer<'static>,
    ca: CertificateDer<'static>,
}

impl RankIdentity {
    /// Loads `rank`'s identity from the layout under `dir` (see [`CertDir`]): `DIR/ca.pem`,
    /// `DIR/rank-R/cert.pem` and `DIR/rank-R/key.pem`. `DIR/ca.key` is neither needed nor read.
    ///
    /// Errors, each naming the file: [`IdentityError::Missing`], [`IdentityError::Io`],
    /// [`IdentityError::BadPem`] (no certificate or key in it), [`IdentityError::BadCertificate`],
    /// [`IdentityError::NotThisRank`] (a certificate for another rank or cluster),
    /// [`IdentityError::Untrusted`] (issued by another CA, expired, or missing a usage) and
    /// [`IdentityError::BadKey`] (not the certificate's key).
    pub fn load(
        dir: impl AsRef<Path>,
        rank: Rank,
        cluster: &ClusterId,
    ) -> Result<Self, IdentityError> {
        let d = CertDir::new(dir.as_ref());
        let paths = Paths {
            ca: d.ca_cert(),
            cert: d.rank_cert(rank),
            key: d.rank_key(rank),
        };
        let ca = files::read(&paths.ca)?;
        let cert = files::read(&paths.cert)?;
        let key = files::read(&paths.key)?;
        Self::check(rank, cluster, &paths, &cert, &key, &ca)
    }

    /// The same checks as [`load`](Self::load) on PEM text already in memory; errors name the
    /// files by their layout-relative paths (`ca.pem`, `rank-R/cert.pem`, `rank-R/key.pem`).
    pub fn from_pem(
        rank: Rank,
        cluster: &ClusterId,
        cert_pem: &str,
        key_pem: &str,
        ca_pem: &str,
    ) -> Result<Self, IdentityError> {
        let d = CertDir::new("");
        let paths = Paths {
            ca: d.ca_cert(),
            cert: d.rank_cert(rank),
            key: d.rank_key(rank),
        };
        Self::check(
            rank,
            cluster,
            &paths,
            cert_pem.as_bytes(),
            key_pem.as_bytes(),
            ca_pem.as_bytes(),
        )
    }

    fn check(
        rank: Rank,
        cluster: &ClusterId,
        paths: &Paths,
        cert: &[u8],
        key: &[u8],
        ca: &[u8],
    ) -> Result<Self, IdentityError> {
        let ca = parse_cert(&paths.ca, ca)?;
        let cert = parse_cert(&paths.cert, cert)?;
        let key = PrivateKeyDer::from_pem_slice(key).map_err(|e| IdentityError::BadPem {
            path: paths.key.clone(),
            expected: "a PRIVATE KEY",
            reason: e.to_string(),
        })?;
        let bad_cert = |path: &PathBuf| {
            let path = path.clone();
            move |source| IdentityError::BadCertificate { path, source }
        };
        let anchor = webpki::anchor_from_trusted_cert(&ca).map_err(bad_cert(&paths.ca))?;
        let ee = EndEntityCert::try_from(&cert).map_err(bad_cert(&paths.cert))?;
        let name = cluster.rank_name(rank);
        let subject = ServerName::try_from(name.as_str()).map_err(|_| {
            // Cannot happen: a ClusterId always makes valid names.
            IdentityError::BadClusterId {
                id: cluster.to_string(),
            }
        })?;
        ee.verify_is_valid_for_subject_name(&subject)
            .map_err(|source| IdentityError::NotThisRank {
                path: paths.cert.clone(),
                name: name.clone(),
                source,
            })?;
        let now = UnixTime::now();
        for usage in [
            webpki::KeyUsage::server_auth(),
            webpki::KeyUsage::client_auth(),
        ] {
            ee.verify_for_usage(
                webpki::ALL_VERIFICATION_ALGS,
                std::slice::from_ref(&anchor),
                &[],
                now,
                usage,
                None,
                None,
            )
            .map_err(|source| IdentityError::Untrusted {
                path: paths.cert.clone(),
                ca: paths.ca.clone(),
                source,
            })?;
        }
        rustls::sign::CertifiedKey::from_der(vec![cert.clone()], key.clone_key(), &tls::provider())
            .map_err(|source| IdentityError::BadKey {
                path: paths.key.clone(),
                source,
            })?;
        Ok(Self {
            rank,
            cluster: cluster.clone(),
            cert,
            key,
            ca,
        })
    }

    /// The rank.
    pub fn rank(&self) -> Rank {
        self.rank
    }

    /// The cluster.
    pub fn cluster(&self) -> &ClusterId {
        &self.cluster
    }

    /// The certificate's name, `r<rank>.<cluster>.lifeline`.
    pub fn name(&self) -> String {
        self.cluster.rank_name(self.rank)
    }

    /// The rank's certificate (DER).
    pub fn cert_der(&self) -> &CertificateDer<'static> {
        &self.cert
    }

    /// The cluster CA certificate (DER), the only root peers are checked against.
    pub fn ca_der(&self) -> &CertificateDer<'static> {
        &self.ca
    }

    /// The private key, for the TLS configurations.
    pub(crate) fn key(&self) -> PrivateKeyDer<'static> {
        self.key.clone_key()
    }
}

impl Clone for RankIdentity {
    fn clone(&self) -> Self {
        Self {
            rank: self.rank,
            cluster: self.cluster.clone(),
            cert: self.cert.clone(),
            key: self.key.clone_key(),
            ca: self.ca.clone(),
        }
    }
}

impl fmt::Debug for RankIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RankIdentity")
            .field("rank", &self.rank)
            .field("cluster", &self.cluster)
            .finish_non_exhaustive()
    }
}

/// The three files of one rank's identity.
struct Paths {
    ca: PathBuf,
    cert: PathBuf,
    key: PathBuf,
}

/// The first certificate in PEM text (later sections are ignored).
fn parse_cert(path: &Path, pem: &[u8]) -> Result<CertificateDer<'static>, IdentityError> {
    CertificateDer::from_pem_slice(pem).map_err(|e| IdentityError::BadPem {
        path: path.to_owned(),
        expected: "a CERTIFICATE",
        reason: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use std::fs;
    use std::time::{Duration, SystemTime};

    use super::*;
    use crate::files::tests::TempDir;
    use crate::ClusterCa;

    fn cluster() -> ClusterId {
        ClusterId::new("c0ffee").unwrap()
    }

    fn new_ca() -> ClusterCa {
        ClusterCa::generate(cluster(), SystemTime::now() + Duration::from_secs(86_400)).unwrap()
    }

    /// A directory with `ca.pem` and ranks 0..n.
    fn layout(name: &str, ca: &ClusterCa, n: u32) -> TempDir {
        let t = TempDir::new(name);
        ca.write(&t.0).unwrap();
        for r in 0..n {
            ca.issue(Rank(r)).unwrap().write(&t.0).unwrap();
        }
        t
    }

    #[test]
    fn loads_a_rank_without_the_ca_key() {
        let ca = new_ca();
        let t = layout("load-ok", &ca, 2);
        fs::remove_file(CertDir::new(&t.0).ca_key()).unwrap();
        let id = RankIdentity::load(&t.0, Rank(1), &cluster()).unwrap();
        assert_eq!(id.rank(), Rank(1));
        assert_eq!(id.name(), "r1.c0ffee.lifeline");
        assert_eq!(id.ca_der(), ca.cert_der());
        let shown = format!("{:?}", id.clone());
        assert!(
            shown.contains("RankIdentity") && !shown.contains("key:"),
            "{shown}"
        );
    }

    #[test]
    fn a_missing_key_file_is_named() {
        let ca = new_ca();
        let t = layout("load-missing", &ca, 1);
        let key = CertDir::new(&t.0).rank_key(Rank(0));
        fs::remove_file(&key).unwrap();
        match RankIdentity::load(&t.0, Rank(0), &cluster()) {
            Err(IdentityError::Missing { path }) => assert_eq!(path, key),
            other => panic!("{other:?}"),
        }
        // A rank never issued: its certificate is the first file missing.
        match RankIdentity::load(&t.0, Rank(9), &cluster()) {
            Err(IdentityError::Missing { path }) => {
                assert_eq!(path, CertDir::new(&t.0).rank_cert(Rank(9)))
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn garbage_pem_is_refused() {
        let ca = new_ca();
        let t = layout("load-garbage", &ca, 1);
        let d = CertDir::new(&t.0);
        let check = |path: PathBuf, want: &str| match RankIdentity::load(&t.0, Rank(0), &cluster())
        {
            Err(IdentityError::BadPem {
                path: p, expected, ..
            }) => {
                assert_eq!(p, path);
                assert_eq!(expected, want);
            }
            other => panic!("{other:?}"),
        };
        let good_cert = fs::read(d.rank_cert(Rank(0))).unwrap();
        fs::write(d.rank_cert(Rank(0)), b"\x00\xffnot pem at all\n").unwrap();
        check(d.rank_cert(Rank(0)), "a CERTIFICATE");
        // A well-formed PEM section of the wrong kind.
        fs::write(d.rank_cert(Rank(0)), ca.issue(Rank(0)).unwrap().key_pem()).unwrap();
        check(d.rank_cert(Rank(0)), "a CERTIFICATE");
        fs::write(d.rank_cert(Rank(0)), &good_cert).unwrap();
        fs::write(d.rank_key(Rank(0)), &good_cert).unwrap();
        check(d.rank_key(Rank(0)), "a PRIVATE KEY");
        // A certificate section whose body is not a certificate.
        fs::write(
            d.rank_cert(Rank(0)),
            "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
        )
        .unwrap();
        fs::write(d.rank_key(Rank(0)), ca.issue(Rank(0)).unwrap().key_pem()).unwrap();
        assert!(matches!(
            RankIdentity::load(&t.0, Rank(0), &cluster()),
            Err(IdentityError::BadCertificate { path, .. }) if path == d.rank_cert(Rank(0))
        ));
    }

    #[test]
    fn another_ranks_certificate_is_not_this_rank() {
        let ca = new_ca();
        let t = layout("load-other-rank", &ca, 4);
        let d = CertDir::new(&t.0);
        // Rank 1's files, given to rank 3.
        fs::copy(d.rank_cert(Rank(1)), d.rank_cert(Rank(3))).unwrap();
        fs::copy(d.rank_key(Rank(1)), d.rank_key(Rank(3))).unwrap();
        match RankIdentity::load(&t.0, Rank(3), &cluster()) {
            Err(IdentityError::NotThisRank { path, name, source }) => {
                assert_eq!(path, d.rank_cert(Rank(3)));
                assert_eq!(name, "r3.c0ffee.lifeline");
                assert!(
                    matches!(source, webpki::Error::CertNotValidForName(_)),
                    "{source:?}"
                );
            }
            other => panic!("{other:?}"),
        }
        // The same files are fine for rank 1 in another cluster's id? No: the name differs.
        let other = ClusterId::new("other").unwrap();
        assert!(matches!(
            RankIdentity::load(&t.0, Rank(1), &other),
            Err(IdentityError::NotThisRank { .. })
        ));
    }

    #[test]
    fn another_cas_certificate_is_untrusted() {
        let ca = new_ca();
        let t = layout("load-other-ca", &ca, 1);
        let d = CertDir::new(&t.0);
        // Same cluster id and rank, another CA: the name matches, the chain does not.
        new_ca().issue(Rank(0)).unwrap().write(&t.0).unwrap();
        match RankIdentity::load(&t.0, Rank(0), &cluster()) {
            Err(IdentityError::Untrusted { path, ca, source }) => {
                assert_eq!(path, d.rank_cert(Rank(0)));
                assert_eq!(ca, d.ca_cert());
                assert!(matches!(source, webpki::Error::UnknownIssuer), "{source:?}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn another_ranks_key_is_refused() {
        let ca = new_ca();
        let t = layout("load-other-key", &ca, 2);
        let d = CertDir::new(&t.0);
        fs::copy(d.rank_key(Rank(1)), d.rank_key(Rank(0))).unwrap();
        assert!(matches!(
            RankIdentity::load(&t.0, Rank(0), &cluster()),
            Err(IdentityError::BadKey { path, source: rustls::Error::InconsistentKeys(_) })
                if path == d.rank_key(Rank(0))
        ));
    }

    #[test]
    fn from_pem_names_layout_paths() {
        let ca = new_ca();
        let leaf = ca.issue(Rank(2)).unwrap();
        let id = RankIdentity::from_pem(
            Rank(2),
            &cluster(),
            leaf.cert_pem(),
            leaf.key_pem(),
            ca.cert_pem(),
        )
        .unwrap();
        assert_eq!(id.cert_der(), leaf.cert_der());
        match RankIdentity::from_pem(
            Rank(5),
            &cluster(),
            leaf.cert_pem(),
            leaf.key_pem(),
            ca.cert_pem(),
        ) {
            Err(e @ IdentityError::NotThisRank { .. }) => {
                assert_eq!(
                    e.to_string().split(':').next(),
                    Some("rank-5/cert.pem"),
                    "{e}"
                );
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            RankIdentity::from_pem(Rank(2), &cluster(), leaf.cert_pem(), leaf.key_pem(), ""),
            Err(IdentityError::BadPem { path, .. }) if path == Path::new("ca.pem")
        ));
    }
}
