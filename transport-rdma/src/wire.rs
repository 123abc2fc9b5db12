//! The fixed-size wire record of [`QpDetails`], exchanged over the authenticated control
//! connection (never over an unauthenticated socket) before a queue pair goes to RTR.
//!
//! Layout ([`DETAILS_LEN`] = 36 bytes, integers big-endian):
//!
//! | offset | size | field        |
//! |--------|------|--------------|
//! | 0      | 1    | version ([`DETAILS_VERSION`]) |
//! | 1      | 4    | `qpn` (24 bits used) |
//! | 5      | 4    | `psn` (24 bits used) |
//! | 9      | 2    | `lid` |
//! | 11     | 16   | `gid` |
//! | 27     | 1    | `mtu` (`enum ibv_mtu`, 1..=5) |
//! | 28     | 4    | `recv_depth` |
//! | 32     | 4    | `buf_size` |
//!
//! [`decode`] never panics: a wrong length, an unknown version, an MTU outside 1..=5 or a
//! `qpn`/`psn` beyond 24 bits is a [`DecodeError`].

use thiserror::Error;

use crate::channel::QpDetails;
use crate::verbs::Mtu;

/// Bytes in one encoded record.
pub const DETAILS_LEN: usize = 36;
/// The record version this build writes and accepts.
pub const DETAILS_VERSION: u8 = 1;

/// Why a record was refused.
#[derive(Clone, Copy, Debug, Error, PartialEq, Eq)]
pub enum DecodeError {
    /// The input is not exactly [`DETAILS_LEN`] bytes.
    #[error("QP details record of {0} bytes, expected {DETAILS_LEN}")]
    Length(usize),
    /// The version byte is not [`DETAILS_VERSION`].
    #[error("QP details record version {0}, expected {DETAILS_VERSION}")]
    Version(u8),
    /// The MTU code is outside 1..=5.
    #[error("QP details record with MTU code {0}")]
    Mtu(u8),
    /// `qpn` or `psn` uses more than 24 bits.
    #[error("QP details record with qpn/psn beyond 24 bits")]
    Range,
}

/// Encodes `d` into its fixed-size record.
pub fn encode(d: &QpDetails) -> [u8; DETAILS_LEN] {
    let mut b = [0u8; DETAILS_LEN];
    b[0] = DETAILS_VERSION;
    b[1..5].copy_from_slice(&d.qpn.to_be_bytes());
    b[5..9].copy_from_slice(&d.psn.to_be_bytes());
    b[9..11].copy_from_slice(&d.lid.to_be_bytes());
    b[11..27].copy_from_slice(&d.gid);
    b[27] = d.mtu as u8;
    b[28..32].copy_from_slice(&d.recv_depth.to_be_bytes());
    b[32..36].copy_from_slice(&d.buf_size.to_be_bytes());
    b
}

fn be32(b: &[u8; DETAILS_LEN], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// Decodes one record; see the module docs for what is refused.
pub fn decode(bytes: &[u8]) -> Result<QpDetails, DecodeError> {
    let b: &[u8; DETAILS_LEN] = bytes
        .try_into()
        .map_err(|_| DecodeError::Length(bytes.len()))?;
    if b[0] != DETAILS_VERSION {
        return Err(DecodeError::Version(b[0]));
    }
    let mtu = Mtu::from_raw(u32::from(b[27])).ok_or(DecodeError::Mtu(b[27]))?;
    let (qpn, psn) = (be32(b, 1), be32(b, 5));
    if qpn > 0xff_ffff || psn > 0xff_ffff {
        return Err(DecodeError::Range);
    }
    let mut gid = [0u8; 16];
    gid.copy_from_slice(&b[11..27]);
    Ok(QpDetails {
        qpn,
        psn,
        lid: u16::from_be_bytes([b[9], b[10]]),
        gid,
        mtu,
        recv_depth: be32(b, 28),
        buf_size: be32(b, 32),
    })
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn sample() -> QpDetails {
        QpDetails {
            qpn: 0x12_3456,
            psn: 0xab_cdef,
            lid: 7,
            gid: [3; 16],
            mtu: Mtu::M1024,
            recv_depth: 64,
            buf_size: 4096,
        }
    }

    #[test]
    fn layout_is_fixed() {
        let b = encode(&sample());
        assert_eq!(b[0], DETAILS_VERSION);
        assert_eq!(&b[1..5], &[0, 0x12, 0x34, 0x56]);
        assert_eq!(b[27], 3);
        assert_eq!(decode(&b), Ok(sample()));
    }

    #[test]
    fn refuses_bad_records() {
        let b = encode(&sample());
        assert_eq!(decode(&b[..35]), Err(DecodeError::Length(35)));
        assert_eq!(decode(&[]), Err(DecodeError::Length(0)));
        let mut long = b.to_vec();
        long.push(0);
        assert_eq!(decode(&long), Err(DecodeError::Length(37)));
        let mut v = b;
        v[0] = 2;
        assert_eq!(decode(&v), Err(DecodeError::Version(2)));
        let mut m = b;
        m[27] = 0;
        assert_eq!(decode(&m), Err(DecodeError::Mtu(0)));
        m[27] = 6;
        assert_eq!(decode(&m), Err(DecodeError::Mtu(6)));
        let mut q = b;
        q[1] = 1;
        assert_eq!(decode(&q), Err(DecodeError::Range));
        let mut p = b;
        p[5] = 0x80;
        assert_eq!(decode(&p), Err(DecodeError::Range));
    }

    fn mtu() -> impl Strategy<Value = Mtu> {
        (1u32..=5).prop_map(|m| Mtu::from_raw(m).unwrap())
    }

    proptest! {
        #[test]
        fn round_trip(qpn in 0u32..=0xff_ffff, psn in 0u32..=0xff_ffff, lid: u16,
                      gid: [u8; 16], mtu in mtu(), recv_depth: u32, buf_size: u32) {
            let d = QpDetails { qpn, psn, lid, gid, mtu, recv_depth, buf_size };
            prop_assert_eq!(decode(&encode(&d)), Ok(d));
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            if let Ok(d) = decode(&bytes) {
                prop_assert_eq!(&encode(&d)[..], &bytes[..]);
            }
        }
    }
}
