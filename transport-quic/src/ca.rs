//! The per-cluster CA ([`ClusterCa`]) and the rank certificates it issues ([`IssuedRank`]).
//! This is the launcher's side: the CA key never needs to reach a node.

use std::fmt;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use lifeline_core::tree::Rank;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};
use rustls::pki_types::CertificateDer;
use time::OffsetDateTime;

use crate::files::{self, CertDir};
use crate::{ClusterId, IdentityError, RankIdentity};

/// How far back certificates are valid from, so a node whose clock is a little behind the
/// launcher's accepts them at once.
const CLOCK_SKEW: Duration = Duration::from_secs(3600);

/// A cluster's certificate authority: one self-signed CA certificate and its key, made once per
/// job by the launcher (or `lifeline certs`).
///
/// Guarantees: the CA certificate is a CA for end-entity certificates only (path length 0),
/// may sign certificates and CRLs and nothing else, has a name of its own (`lifeline cluster
/// <id> CA <tag>`, the tag taken from its public key, so two CAs never share one), and is
/// valid from an hour before
/// [`generate`](Self::generate) until the requested expiry. Every certificate it
/// [`issue`](Self::issue)s expires with it. Its key is ECDSA P-256. Its `Debug` output never
/// shows the key.
pub struct ClusterCa {
    cluster: ClusterId,
    cert: CertificateDer<'static>,
    cert_pem: String,
    key_pem: String,
    issuer: Issuer<'static, KeyPair>,
    not_before: OffsetDateTime,
    not_after: OffsetDateTime,
}

/// A rank's certificate and key as issued by a [`ClusterCa`], in memory.
///
/// Guarantees: the certificate's only name (DNS SAN and common name) is
/// `r<rank>.<cluster>.lifeline`; it is an end entity with the extended key usages serverAuth
/// and clientAuth (a rank both dials and accepts), the key usage digitalSignature, and an
/// authority key identifier naming the CA's key. Its key is a fresh ECDSA P-256 key in PKCS#8.
/// Its `Debug` output never shows the key.
pub struct IssuedRank {
    rank: Rank,
    name: String,
    cert: CertificateDer<'static>,
    cert_pem: String,
    key_pem: String,
}

impl ClusterCa {
    /// Makes a new CA for `cluster`, valid until `not_after` (rounded down to the second).
    ///
    /// Errors: [`IdentityError::BadExpiry`] if `not_after` is not in the future or is past
    /// the year 9999; [`IdentityError::Generate`] if key generation or signing fails.
    pub fn generate(cluster: ClusterId, not_after: SystemTime) -> Result<Self, IdentityError> {
        let now = SystemTime::now();
        if not_after <= now {
            return Err(IdentityError::BadExpiry {
                reason: "it is not in the future",
            });
        }
        let not_after = to_offset(not_after)?;
        let not_before = to_offset(now.checked_sub(CLOCK_SKEW).unwrap_or(UNIX_EPOCH))?;
        let key = KeyPair::generate()?;
        // A tag from the CA's own public key makes every CA's name unique, so a certificate
        // from another CA of the same cluster id (a rerun) is reported as an unknown issuer.
        let tag: String = key
            .public_key_raw()
            .iter()
            .skip(1)
            .take(8)
            .map(|b| format!("{b:02x}"))
            .collect();
        let mut p = CertificateParams::default();
        p.distinguished_name = common_name(format!("lifeline cluster {cluster} CA {tag}"));
        p.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        p.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        p.not_before = not_before;
        p.not_after = not_after;
        let cert = p.self_signed(&key)?;
        Ok(Self {
            cluster,
            cert: cert.der().clone(),
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
            issuer: Issuer::new(p, key),
            not_before,
            not_after,
        })
    }

    /// Issues `rank`'s certificate with a fresh key (see [`IssuedRank`] for what it holds).
    /// Issuing the same rank twice gives two different, equally valid certificates; ranks are
    /// never reused within a job, so a launcher issues each once.
    ///
    /// Errors: [`IdentityError::Generate`] if key generation or signing fails.
    pub fn issue(&self, rank: Rank) -> Result<IssuedRank, IdentityError> {
        let name = self.cluster.rank_name(rank);
        let mut p = CertificateParams::new(vec![name.clone()])?;
        p.distinguished_name = common_name(name.clone());
        p.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        p.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        p.use_authority_key_identifier_extension = true;
        p.not_before = self.not_before;
        p.not_after = self.not_after;
        let key = KeyPair::generate()?;
        let cert = p.signed_by(&key, &self.issuer)?;
        Ok(IssuedRank {
            rank,
            name,
            cert: cert.der().clone(),
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }

    /// Issues `rank`'s certificate and returns it as the identity that rank would
    /// [`load`](RankIdentity::load), without touching the disk (for launchers that hand
    /// identities to in-process nodes, and for tests).
    ///
    /// Errors: as [`issue`](Self::issue); the checks of [`RankIdentity::from_pem`] cannot fail
    /// on a certificate this CA just issued.
    pub fn identity(&self, rank: Rank) -> Result<RankIdentity, IdentityError> {
        let issued = self.issue(rank)?;
        RankIdentity::from_pem(
            rank,
            &self.cluster,
            &issued.cert_pem,
            &issued.key_pem,
            &self.cert_pem,
        )
    }

    /// Writes `DIR/ca.pem` (the certificate) and `DIR/ca.key` (the key, created `0600`),
    /// creating `dir` if missing and replacing earlier files.
    ///
    /// Errors: [`IdentityError::Io`] naming the directory or file that failed.
    pub fn write(&self, dir: impl AsRef<Path>) -> Result<(), IdentityError> {
        let d = CertDir::new(dir.as_ref());
        files::create_dir(d.root())?;
        files::write_public(&d.ca_cert(), &self.cert_pem)?;
        files::write_secret(&d.ca_key(), &self.key_pem)
    }

    /// The cluster this CA serves.
    pub fn cluster(&self) -> &ClusterId {
        &self.cluster
    }

    /// The CA certificate (DER).
    pub fn cert_der(&self) -> &CertificateDer<'static> {
        &self.cert
    }

    /// The CA certificate (PEM), what `ca.pem` holds.
    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    /// When the CA and every certificate it issues expire.
    pub fn not_after(&self) -> SystemTime {
        let secs = self.not_after.unix_timestamp();
        // Always after the epoch: `generate` refused anything not in the future.
        UNIX_EPOCH + Duration::from_secs(u64::try_from(secs).unwrap_or(0))
    }

    /// [`not_after`](Self::not_after) as `YYYY-MM-DD HH:MM:SS UTC`.
    pub fn not_after_utc(&self) -> String {
        let t = self.not_after;
        format!(
            "{:04}-{:02}-{:02} {:02}:{:02}:{:02} UTC",
            t.year(),
            u8::from(t.month()),
            t.day(),
            t.hour(),
            t.minute(),
            t.second()
        )
    }
}

impl fmt::Debug for ClusterCa {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClusterCa")
            .field("cluster", &self.cluster)
            .field("not_after", &self.not_after_utc())
            .finish_non_exhaustive()
    }
}

impl IssuedRank {
    /// Writes `DIR/rank-R/cert.pem` and `DIR/rank-R/key.pem` (created `0600`), creating the
    /// directories if missing and replacing earlier files.
    ///
    /// Errors: [`IdentityError::Io`] naming the directory or file that failed.
    pub fn write(&self, dir: impl AsRef<Path>) -> Result<(), IdentityError> {
        let d = CertDir::new(dir.as_ref());
        files::create_dir(&d.rank_dir(self.rank))?;
        files::write_public(&d.rank_cert(self.rank), &self.cert_pem)?;
        files::write_secret(&d.rank_key(self.rank), &self.key_pem)
    }

    /// The rank.
    pub fn rank(&self) -> Rank {
        self.rank
    }

    /// The certificate's name, `r<rank>.<cluster>.lifeline`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The certificate (DER).
    pub fn cert_der(&self) -> &CertificateDer<'static> {
        &self.cert
    }

    /// The certificate (PEM), what `rank-R/cert.pem` holds.
    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    /// The private key (PKCS#8 PEM), what `rank-R/key.pem` holds. A secret: only rank R's node
    /// should ever see it.
    pub fn key_pem(&self) -> &str {
        &self.key_pem
    }
}

impl fmt::Debug for IssuedRank {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IssuedRank")
            .field("rank", &self.rank)
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// A distinguished name holding only a common name.
fn common_name(cn: String) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, cn);
    dn
}

/// `t` as an `OffsetDateTime` in UTC, rounded down to the second (what X.509 stores).
fn to_offset(t: SystemTime) -> Result<OffsetDateTime, IdentityError> {
    let too_late = IdentityError::BadExpiry {
        reason: "it is past the year 9999",
    };
    let secs = t
        .duration_since(UNIX_EPOCH)
        .map_err(|_| IdentityError::BadExpiry {
            reason: "it is before 1970",
        })?
        .as_secs();
    let secs = i64::try_from(secs).map_err(|_| too_late)?;
    OffsetDateTime::from_unix_timestamp(secs).map_err(|_| IdentityError::BadExpiry {
        reason: "it is past the year 9999",
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::files::tests::TempDir;
    use webpki::EndEntityCert;

    const DAY: Duration = Duration::from_secs(86_400);

    fn new_ca() -> ClusterCa {
        let c = ClusterId::new("c0ffee").unwrap();
        ClusterCa::generate(c, SystemTime::now() + DAY).unwrap()
    }

    #[test]
    fn expiry_must_be_in_the_future_and_writable() {
        let c = ClusterId::new("x").unwrap();
        let past = SystemTime::now() - DAY;
        assert!(matches!(
            ClusterCa::generate(c.clone(), past),
            Err(IdentityError::BadExpiry { .. })
        ));
        let far = UNIX_EPOCH + Duration::from_secs(400_000_000_000); // year ~14,700
        assert!(matches!(
            ClusterCa::generate(c.clone(), far),
            Err(IdentityError::BadExpiry { reason }) if reason.contains("9999")
        ));
        let ok = ClusterCa::generate(c, UNIX_EPOCH + Duration::from_secs(4_102_444_800)).unwrap();
        assert_eq!(ok.not_after_utc(), "2100-01-01 00:00:00 UTC");
        assert_eq!(
            ok.not_after(),
            UNIX_EPOCH + Duration::from_secs(4_102_444_800)
        );
    }

    #[test]
    fn a_leaf_names_its_rank_and_chains_to_its_ca() {
        let ca = new_ca();
        let leaf = ca.issue(Rank(7)).unwrap();
        assert_eq!(leaf.rank(), Rank(7));
        assert_eq!(leaf.name(), "r7.c0ffee.lifeline");
        assert!(leaf.cert_pem().starts_with("-----BEGIN CERTIFICATE-----"));
        assert!(leaf.key_pem().starts_with("-----BEGIN PRIVATE KEY-----"));
        let ee = EndEntityCert::try_from(leaf.cert_der()).unwrap();
        let name = |s: &str| rustls::pki_types::ServerName::try_from(s.to_owned()).unwrap();
        assert!(ee
            .verify_is_valid_for_subject_name(&name("r7.c0ffee.lifeline"))
            .is_ok());
        for other in [
            "r6.c0ffee.lifeline",
            "r7.other.lifeline",
            "r7.c0ffee.lifelinex",
        ] {
            assert!(
                ee.verify_is_valid_for_subject_name(&name(other)).is_err(),
                "{other}"
            );
        }
        // Both usages, under this CA; not under another.
        let anchor = webpki::anchor_from_trusted_cert(ca.cert_der()).unwrap();
        let now = rustls::pki_types::UnixTime::now();
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
            .unwrap();
        }
        let other = new_ca();
        let foreign = webpki::anchor_from_trusted_cert(other.cert_der()).unwrap();
        assert!(matches!(
            ee.verify_for_usage(
                webpki::ALL_VERIFICATION_ALGS,
                &[foreign],
                &[],
                now,
                webpki::KeyUsage::client_auth(),
                None,
                None,
            ),
            Err(webpki::Error::UnknownIssuer)
        ));
        // The CA certificate cannot pass as a rank's certificate.
        let ca_ee = EndEntityCert::try_from(ca.cert_der()).unwrap();
        assert!(ca_ee
            .verify_is_valid_for_subject_name(&name("r0.c0ffee.lifeline"))
            .is_err());
    }

    #[test]
    fn debug_never_shows_keys() {
        let ca = new_ca();
        let leaf = ca.issue(Rank(1)).unwrap();
        for shown in [format!("{ca:?}"), format!("{leaf:?}")] {
            assert!(!shown.contains("PRIVATE"), "{shown}");
            assert!(!shown.contains(&ca.key_pem[30..60]), "{shown}");
        }
    }

    #[cfg(unix)]
    #[test]
    fn writes_the_layout_with_keys_0600() {
        use std::os::unix::fs::PermissionsExt;
        let t = TempDir::new("ca-write");
        let ca = new_ca();
        ca.write(&t.0).unwrap();
        ca.issue(Rank(2)).unwrap().write(&t.0).unwrap();
        let d = CertDir::new(&t.0);
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&d.ca_key()), 0o600);
        assert_eq!(mode(&d.rank_key(Rank(2))), 0o600);
        assert_eq!(std::fs::read_to_string(d.ca_cert()).unwrap(), ca.cert_pem());
        assert!(d.rank_cert(Rank(2)).is_file());
        let ca_pem = std::fs::read_to_string(d.ca_cert()).unwrap();
        assert!(
            !ca_pem.contains("PRIVATE"),
            "ca.pem holds the certificate only"
        );
    }
}
