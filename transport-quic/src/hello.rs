//! The first bytes on each of a link's streams: the dialer's [`Hello`], and the acceptor's
//! answer on the control stream ([`ACCEPTED`]).
//!
//! ```text
//! hello    (dialer → acceptor, first on each stream): version:u8 = 1, rank:u32 BE, class:u8
//!          (0 = control, 1 = data)                                        6 bytes
//! accepted (acceptor → dialer, first on the control stream): version:u8 = 1, 0xAC   2 bytes
//! ```
//!
//! Refusals are never written as bytes: the acceptor closes the connection with a
//! [`CloseCode`](crate::CloseCode), which the dialer reads as its dial's error. A hello of
//! another version is refused as malformed; a new version is a new ALPN as well.

use lifeline_core::tree::Rank;
use lifeline_core::Class;

/// The hello format's version, the first byte of every hello and answer.
pub const HELLO_VERSION: u8 = 1;

/// Length of an encoded [`Hello`].
pub const HELLO_LEN: usize = 6;

/// The acceptor's answer that it runs the link, first on the control stream.
pub const ACCEPTED: [u8; 2] = [HELLO_VERSION, 0xAC];

/// What a dialer declares first on each stream: the rank it claims (checked by the acceptor
/// against its certificate) and the class the stream carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Hello {
    /// The rank the dialer claims to be.
    pub rank: Rank,
    /// The traffic class of the stream.
    pub class: Class,
}

/// Why a hello was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HelloError {
    /// The first byte is not [`HELLO_VERSION`].
    #[error("hello version {0} (this build speaks {HELLO_VERSION})")]
    Version(u8),
    /// The class byte is neither 0 (control) nor 1 (data).
    #[error("unknown class {0}")]
    Class(u8),
}

impl Hello {
    /// The six bytes of the hello.
    pub fn encode(&self) -> [u8; HELLO_LEN] {
        let r = self.rank.0.to_be_bytes();
        let class = match self.class {
            Class::Control => 0,
            Class::Data => 1,
        };
        [HELLO_VERSION, r[0], r[1], r[2], r[3], class]
    }

    /// Reads a hello; never panics, whatever the bytes.
    pub fn decode(b: &[u8; HELLO_LEN]) -> Result<Self, HelloError> {
        if b[0] != HELLO_VERSION {
            return Err(HelloError::Version(b[0]));
        }
        let class = match b[5] {
            0 => Class::Control,
            1 => Class::Data,
            c => return Err(HelloError::Class(c)),
        };
        Ok(Self {
            rank: Rank(u32::from_be_bytes([b[1], b[2], b[3], b[4]])),
            class,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_bytes_and_round_trip() {
        let h = Hello {
            rank: Rank(0x0102_0304),
            class: Class::Data,
        };
        assert_eq!(h.encode(), [1, 1, 2, 3, 4, 1]);
        assert_eq!(Hello::decode(&h.encode()), Ok(h));
        let c = Hello {
            rank: Rank(u32::MAX),
            class: Class::Control,
        };
        assert_eq!(c.encode(), [1, 0xff, 0xff, 0xff, 0xff, 0]);
        assert_eq!(Hello::decode(&c.encode()), Ok(c));
    }

    #[test]
    fn every_bad_byte_is_refused() {
        for v in (0..=255u8).filter(|&v| v != HELLO_VERSION) {
            assert_eq!(
                Hello::decode(&[v, 0, 0, 0, 1, 0]),
                Err(HelloError::Version(v))
            );
        }
        for c in 2..=255u8 {
            assert_eq!(
                Hello::decode(&[HELLO_VERSION, 0, 0, 0, 1, c]),
                Err(HelloError::Class(c))
            );
        }
    }
}
