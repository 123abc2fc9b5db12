//! The acceptor's check that a peer is the rank it claims: its verified certificate must be
//! valid for `r<claimed>.<cluster>.lifeline`.

use lifeline_core::tree::Rank;
use rustls::pki_types::{CertificateDer, ServerName};
use webpki::EndEntityCert;

use crate::{ClusterId, IdentityError};

/// Checks that the peer of `conn` is rank `claimed` of `cluster`: its certificate, which the
/// TLS handshake already verified against the cluster CA, must be valid for
/// `r<claimed>.<cluster>.lifeline`.
///
/// The acceptor calls it with the rank the peer claims in its first message, before trusting
/// anything else it sends; the dialer needs no such call, since it connected with
/// [`server_name`](crate::server_name) and the handshake checked the name.
///
/// Errors: [`IdentityError::NoPeerCertificate`] on a connection without a verified client
/// certificate (not made with [`server_config`](crate::server_config), or not yet
/// established); [`IdentityError::WrongRank`] if the certificate names another rank or
/// cluster.
pub fn verify_claimed_rank(
    conn: &quinn::Connection,
    claimed: Rank,
    cluster: &ClusterId,
) -> Result<(), IdentityError> {
    let chain = conn
        .peer_identity()
        .and_then(|any| any.downcast::<Vec<CertificateDer<'static>>>().ok())
        .ok_or(IdentityError::NoPeerCertificate)?;
    check_claim(&chain, claimed, cluster)
}

/// [`verify_claimed_rank`] on a peer's certificate chain (leaf first) that the TLS stack has
/// verified. It checks the name only, never the chain: do not call it on certificates that did
/// not come out of a verified handshake.
pub(crate) fn check_claim(
    chain: &[CertificateDer<'_>],
    claimed: Rank,
    cluster: &ClusterId,
) -> Result<(), IdentityError> {
    let leaf = chain.first().ok_or(IdentityError::NoPeerCertificate)?;
    let ee = EndEntityCert::try_from(leaf).map_err(IdentityError::BadPeerCertificate)?;
    let name = cluster.rank_name(claimed);
    let subject = ServerName::try_from(name.as_str()).map_err(|_| {
        // Cannot happen: a ClusterId always makes valid names.
        IdentityError::BadClusterId {
            id: cluster.to_string(),
        }
    })?;
    ee.verify_is_valid_for_subject_name(&subject)
        .map_err(|source| IdentityError::WrongRank {
            claimed,
            name,
            source,
        })
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, SystemTime};

    use super::*;
    use crate::ClusterCa;

    #[test]
    fn a_claim_must_match_the_certificate() {
        let c = ClusterId::new("c0ffee").unwrap();
        let ca =
            ClusterCa::generate(c.clone(), SystemTime::now() + Duration::from_secs(60)).unwrap();
        let leaf = ca.issue(Rank(1)).unwrap();
        let chain = [leaf.cert_der().clone()];
        assert!(check_claim(&chain, Rank(1), &c).is_ok());
        match check_claim(&chain, Rank(2), &c) {
            Err(IdentityError::WrongRank {
                claimed,
                name,
                source,
            }) => {
                assert_eq!(claimed, Rank(2));
                assert_eq!(name, "r2.c0ffee.lifeline");
                assert!(matches!(source, webpki::Error::CertNotValidForName(_)));
            }
            other => panic!("{other:?}"),
        }
        // The right rank of another cluster is another name.
        let other = ClusterId::new("other").unwrap();
        assert!(matches!(
            check_claim(&chain, Rank(1), &other),
            Err(IdentityError::WrongRank { .. })
        ));
        assert!(matches!(
            check_claim(&[], Rank(1), &c),
            Err(IdentityError::NoPeerCertificate)
        ));
        let junk = CertificateDer::from(vec![0x30, 0x03, 0x02, 0x01, 0x00]);
        assert!(matches!(
            check_claim(&[junk], Rank(1), &c),
            Err(IdentityError::BadPeerCertificate(_))
        ));
    }
}
