//! The node's only source of randomness: a seeded, deterministic generator.
//!
//! One `u64` seed drives everything random in a node (jitter, tie-breaks, nonces); sub-machines
//! get child generators derived from it with [`Rng::fork`], so adding a draw in one machine does
//! not shift another's sequence. The generator is xoshiro256** seeded through splitmix64; it is
//! not cryptographic.

/// A deterministic pseudo-random generator (xoshiro256**).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rng {
    s: [u64; 4],
}

fn splitmix64(x: &mut u64) -> u64 {
    *x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *x;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl Rng {
    /// A generator from a seed; equal seeds give equal sequences.
    pub fn new(seed: u64) -> Self {
        let mut x = seed;
        Self {
            s: [
                splitmix64(&mut x),
                splitmix64(&mut x),
                splitmix64(&mut x),
                splitmix64(&mut x),
            ],
        }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let result = self.s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = self.s[1] << 17;
        self.s[2] ^= self.s[0];
        self.s[3] ^= self.s[1];
        self.s[1] ^= self.s[2];
        self.s[0] ^= self.s[3];
        self.s[2] ^= t;
        self.s[3] = self.s[3].rotate_left(45);
        result
    }

    /// A uniform value in `0..n` (`0` when `n == 0`), without modulo bias worth caring about
    /// (Lemire's multiply-shift).
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }

    /// `true` with probability `p` (clamped to `[0, 1]`).
    pub fn chance(&mut self, p: f64) -> bool {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64) < p
    }

    /// An independent child generator for `stream` (e.g. one per sub-machine or per node).
    pub fn fork(&self, stream: u64) -> Self {
        let mut x =
            self.s[0] ^ self.s[3].rotate_left(17) ^ stream.wrapping_mul(0xA24B_AED4_963E_E407);
        Self::new(splitmix64(&mut x))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deterministic_and_forks_differ() {
        let mut a = Rng::new(7);
        let mut b = Rng::new(7);
        let va: Vec<u64> = (0..8).map(|_| a.next_u64()).collect();
        let vb: Vec<u64> = (0..8).map(|_| b.next_u64()).collect();
        assert_eq!(va, vb);
        assert_ne!(Rng::new(8).next_u64(), va[0]);
        assert_ne!(a.fork(1).next_u64(), a.fork(2).next_u64());
        for _ in 0..1000 {
            assert!(a.below(10) < 10);
        }
        assert_eq!(a.below(0), 0);
    }
}
