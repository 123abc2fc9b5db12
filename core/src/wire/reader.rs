//! A bounds-checked reader: every read checks the remaining length first, so decoding never
//! panics and never allocates from an unchecked length.

use bytes::{Buf, Bytes};

use super::DecodeError;
use crate::tree::Rank;

/// Reads big-endian fields from one frame body. Byte strings are zero-copy slices of the frame.
#[derive(Debug)]
pub struct Reader {
    buf: Bytes,
}

impl Reader {
    /// A reader over `buf`.
    pub fn new(buf: Bytes) -> Self {
        Self { buf }
    }

    /// Bytes not yet read.
    pub fn remaining(&self) -> usize {
        self.buf.remaining()
    }

    fn need(&self, n: usize) -> Result<(), DecodeError> {
        if self.buf.remaining() < n {
            Err(DecodeError::Truncated {
                need: n,
                have: self.buf.remaining(),
            })
        } else {
            Ok(())
        }
    }

    /// One byte.
    pub fn u8(&mut self) -> Result<u8, DecodeError> {
        self.need(1)?;
        Ok(self.buf.get_u8())
    }

    /// A big-endian `u16`.
    pub fn u16(&mut self) -> Result<u16, DecodeError> {
        self.need(2)?;
        Ok(self.buf.get_u16())
    }

    /// A big-endian `u32`.
    pub fn u32(&mut self) -> Result<u32, DecodeError> {
        self.need(4)?;
        Ok(self.buf.get_u32())
    }

    /// A big-endian `u64`.
    pub fn u64(&mut self) -> Result<u64, DecodeError> {
        self.need(8)?;
        Ok(self.buf.get_u64())
    }

    /// A rank (`u32`).
    pub fn rank(&mut self) -> Result<Rank, DecodeError> {
        self.u32().map(Rank)
    }

    /// A boolean byte; anything but 0 or 1 is refused.
    pub fn bool(&mut self) -> Result<bool, DecodeError> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(DecodeError::Invalid("boolean byte")),
        }
    }

    /// A `u32` length prefix followed by that many bytes, refusing lengths over `max` or over
    /// what remains before slicing.
    pub fn bytes(&mut self, max: u32) -> Result<Bytes, DecodeError> {
        let len = self.u32()?;
        if len > max {
            return Err(DecodeError::TooLong {
                len: len as u64,
                max: max as u64,
            });
        }
        self.need(len as usize)?;
        Ok(self.buf.split_to(len as usize))
    }

    /// A `u32` element count for a list of `elem_len`-byte elements, refusing counts over `max`
    /// or needing more bytes than remain (checked before the caller allocates).
    pub fn count(&mut self, elem_len: usize, max: u32) -> Result<usize, DecodeError> {
        let n = self.u32()?;
        if n > max {
            return Err(DecodeError::TooLong {
                len: n as u64,
                max: max as u64,
            });
        }
        let bytes = (n as usize).saturating_mul(elem_len);
        self.need(bytes)?;
        Ok(n as usize)
    }

    /// Ends decoding: any byte left over is an error.
    pub fn finish(self) -> Result<(), DecodeError> {
        match self.buf.remaining() {
            0 => Ok(()),
            n => Err(DecodeError::Trailing(n)),
        }
    }
}
