//! The joiner's snapshot: (span, radix, dead set) as bytes.

use bytes::{Buf, BufMut, Bytes, BytesMut};

use super::layout::{Layout, LayoutError};
use super::rank::{Rank, RankSet};

/// What a joining rank needs to compute the same view as everyone else: the span (holes
/// included), the radix, and the persistent dead set.
///
/// A daemon whose raw parent is a hole can reach nobody until it knows the holes, so the
/// snapshot travels out of band (command line, environment, launcher) or in a join reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snapshot {
    /// The tree shape.
    pub layout: Layout,
    /// Every rank known to have departed (never reused).
    pub dead: RankSet,
}

/// Why snapshot bytes were refused. Decoding never panics and never allocates past the
/// caller's span bound.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SnapshotError {
    /// Fewer bytes than the header or the announced ranges need.
    #[error("snapshot truncated: need {need} bytes, have {have}")]
    Truncated {
        /// Bytes the header says are needed.
        need: u64,
        /// Bytes present.
        have: usize,
    },
    /// Bytes after the last range.
    #[error("snapshot has {0} trailing bytes")]
    Trailing(usize),
    /// Unknown format version.
    #[error("unsupported snapshot version {0}")]
    Version(u8),
    /// The span or radix is illegal.
    #[error("bad snapshot shape: {0}")]
    Layout(#[from] LayoutError),
    /// The span exceeds what this process accepts.
    #[error("snapshot span {span} exceeds the limit {limit}")]
    SpanLimit {
        /// Span in the snapshot.
        span: u32,
        /// Caller's limit.
        limit: u32,
    },
    /// Ranges not strictly ascending and separated, `lo > hi`, or past the span.
    #[error("snapshot dead ranges are not canonical at range {0}")]
    Ranges(u32),
}

const VERSION: u8 = 1;
const HEADER: usize = 1 + 2 + 4 + 4;

impl Snapshot {
    /// Encoded size in bytes.
    pub fn encoded_len(&self) -> usize {
        HEADER + 8 * self.dead.ranges().count()
    }

    /// Encodes as `version:u8 radix:u16 span:u32 nranges:u32 (lo:u32 hi:u32)*`, big-endian,
    /// ranges inclusive, ascending and canonical (maximal runs).
    pub fn encode(&self, buf: &mut impl BufMut) {
        buf.put_u8(VERSION);
        buf.put_u16(self.layout.radix() as u16);
        buf.put_u32(self.layout.span());
        buf.put_u32(self.dead.ranges().count() as u32);
        for (lo, hi) in self.dead.ranges() {
            buf.put_u32(lo.0);
            buf.put_u32(hi.0);
        }
    }

    /// The encoding as one buffer.
    pub fn to_bytes(&self) -> Bytes {
        let mut b = BytesMut::with_capacity(self.encoded_len());
        self.encode(&mut b);
        b.freeze()
    }

    /// Decodes exactly one snapshot from `bytes`, refusing spans above `max_span` before any
    /// allocation, non-canonical ranges and trailing bytes.
    pub fn decode(mut bytes: &[u8], max_span: u32) -> Result<Self, SnapshotError> {
        let have = bytes.len();
        if have < HEADER {
            return Err(SnapshotError::Truncated {
                need: HEADER as u64,
                have,
            });
        }
        let version = bytes.get_u8();
        if version != VERSION {
            return Err(SnapshotError::Version(version));
        }
        let radix = bytes.get_u16() as u32;
        let span = bytes.get_u32();
        let layout = Layout::new(span, radix)?;
        if span > max_span {
            return Err(SnapshotError::SpanLimit {
                span,
                limit: max_span,
            });
        }
        let n = bytes.get_u32();
        let need = HEADER as u64 + 8 * n as u64;
        if (have as u64) < need {
            return Err(SnapshotError::Truncated { need, have });
        }
        if (have as u64) > need {
            return Err(SnapshotError::Trailing((have as u64 - need) as usize));
        }
        let mut dead = RankSet::new();
        let mut next_min: u64 = 0;
        for i in 0..n {
            let lo = bytes.get_u32();
            let hi = bytes.get_u32();
            if (lo as u64) < next_min || lo > hi || hi >= span {
                return Err(SnapshotError::Ranges(i));
            }
            dead.insert_range(Rank(lo), Rank(hi));
            next_min = hi as u64 + 2;
        }
        Ok(Self { layout, dead })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snap(span: u32, radix: u32, dead: &str) -> Snapshot {
        Snapshot {
            layout: Layout::new(span, radix).unwrap(),
            dead: RankSet::parse_bounded(dead, span).unwrap(),
        }
    }

    #[test]
    fn round_trip() {
        for s in [
            snap(9, 2, ""),
            snap(9, 2, "3,7:8"),
            snap(70_000, 64, "2,7:9,65:200,69999"),
        ] {
            let b = s.to_bytes();
            assert_eq!(b.len(), s.encoded_len());
            assert_eq!(Snapshot::decode(&b, u32::MAX).unwrap(), s);
        }
    }

    #[test]
    fn refuses_malformed_without_panicking() {
        let good = snap(100, 4, "1,5:9,50").to_bytes();
        for cut in 0..good.len() {
            assert!(Snapshot::decode(&good[..cut], 1000).is_err(), "cut {cut}");
        }
        let mut long = good.to_vec();
        long.push(0);
        assert_eq!(
            Snapshot::decode(&long, 1000),
            Err(SnapshotError::Trailing(1))
        );
        assert!(matches!(
            Snapshot::decode(&good, 99),
            Err(SnapshotError::SpanLimit {
                span: 100,
                limit: 99
            })
        ));
        for i in 0..good.len() {
            for bit in 0..8 {
                let mut b = good.to_vec();
                b[i] ^= 1 << bit;
                let _ = Snapshot::decode(&b, 1000);
            }
        }
        // Adjacent ranges are not canonical; overlapping and descending ones are refused.
        let mut b = BytesMut::new();
        b.put_u8(1);
        b.put_u16(2);
        b.put_u32(10);
        b.put_u32(2);
        b.put_u32(1);
        b.put_u32(2);
        b.put_u32(3);
        b.put_u32(4);
        assert_eq!(Snapshot::decode(&b, 100), Err(SnapshotError::Ranges(1)));
        // A huge announced count is refused before allocating.
        let mut b = BytesMut::new();
        b.put_u8(1);
        b.put_u16(2);
        b.put_u32(10);
        b.put_u32(u32::MAX);
        assert!(matches!(
            Snapshot::decode(&b, 100),
            Err(SnapshotError::Truncated { .. })
        ));
    }
}
