//! Cluster ids and the DNS names that bind a certificate to a rank: `r<rank>.<cluster>.lifeline`.

use std::fmt;
use std::str::FromStr;

use lifeline_core::tree::Rank;

use crate::IdentityError;

/// The last label of every rank name.
pub const NAME_SUFFIX: &str = "lifeline";

/// A cluster's (job's) id: one DNS label, the middle of every rank's certificate name
/// `r<rank>.<id>.lifeline`.
///
/// Guarantees: 1 to 63 characters, each a lowercase ASCII letter, a digit or `-`, neither the
/// first nor the last a `-`; so every rank name built from it is a valid DNS name, and two
/// clusters with different ids never share a rank name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ClusterId(String);

impl ClusterId {
    /// The longest id (a DNS label's limit).
    pub const MAX_LEN: usize = 63;

    /// Checks `id` and keeps it; [`IdentityError::BadClusterId`] if it is not a lowercase DNS
    /// label (uppercase is refused rather than folded, so an id has one spelling).
    pub fn new(id: &str) -> Result<Self, IdentityError> {
        let ok_char = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-';
        let ok = !id.is_empty()
            && id.len() <= Self::MAX_LEN
            && id.chars().all(ok_char)
            && !id.starts_with('-')
            && !id.ends_with('-');
        if ok {
            Ok(Self(id.to_owned()))
        } else {
            Err(IdentityError::BadClusterId { id: id.to_owned() })
        }
    }

    /// The id.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// `rank`'s certificate name in this cluster, `r<rank>.<id>.lifeline`: the DNS SAN of its
    /// certificate, the server name a dialer connects with, and the name an acceptor checks a
    /// claimed rank against.
    pub fn rank_name(&self, rank: Rank) -> String {
        format!("r{}.{}.{NAME_SUFFIX}", rank.0, self.0)
    }
}

impl fmt::Display for ClusterId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl FromStr for ClusterId {
    type Err = IdentityError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::new(s)
    }
}

/// The server name a dialer passes to `quinn::Endpoint::connect` to reach `rank`:
/// `r<rank>.<cluster>.lifeline`. The TLS handshake then fails unless the peer at that address
/// holds a certificate for exactly this rank, issued by the cluster CA.
pub fn server_name(rank: Rank, cluster: &ClusterId) -> String {
    cluster.rank_name(rank)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_ids() {
        for good in ["c0ffee", "a", "job-42", "7", &"x".repeat(63)] {
            assert_eq!(ClusterId::new(good).unwrap().as_str(), good);
        }
        for bad in [
            "",
            "-a",
            "a-",
            "Job",
            "a.b",
            "a_b",
            "é",
            "a b",
            &"x".repeat(64),
        ] {
            assert!(
                matches!(ClusterId::new(bad), Err(IdentityError::BadClusterId { ref id }) if id == bad),
                "{bad:?} accepted"
            );
        }
        assert_eq!("job-1".parse::<ClusterId>().unwrap().to_string(), "job-1");
    }

    #[test]
    fn names() {
        let c = ClusterId::new("c0ffee").unwrap();
        assert_eq!(c.rank_name(Rank(7)), "r7.c0ffee.lifeline");
        assert_eq!(server_name(Rank(0), &c), "r0.c0ffee.lifeline");
        assert_eq!(
            server_name(Rank(u32::MAX), &c),
            "r4294967295.c0ffee.lifeline"
        );
        // Every name is one rustls accepts as a DNS server name.
        let long = ClusterId::new(&"x".repeat(63)).unwrap();
        let name = long.rank_name(Rank(u32::MAX));
        assert!(rustls::pki_types::ServerName::try_from(name.as_str()).is_ok());
    }
}
