//! Deterministic, seedable randomness for the simulated chain and its fault decisions.
//!
//! Everything the devnode makes up is a pure function of `(seed, position)`: a block's contents of
//! `hash(seed, number, fork generation)`, a fault of `hash(seed, request counter)`. That is what lets a 10,000,000
//! block chain be served without storing it, and a failing test be replayed from its seed. This is not a
//! cryptographic generator and must not be used as one.

/// The SplitMix64 finaliser: a bijective avalanche of 64 bits.
pub(crate) fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Hashes three words and a domain tag into one; different tags give independent streams.
pub(crate) fn hash3(a: u64, b: u64, c: u64, tag: u64) -> u64 {
    mix64(a ^ mix64(b.wrapping_add(0x9e37_79b9_7f4a_7c15) ^ mix64(c ^ mix64(tag))))
}

/// A SplitMix64 stream.
#[derive(Debug, Clone)]
pub(crate) struct Rng(u64);

impl Rng {
    /// A stream starting from `seed`.
    pub(crate) fn new(seed: u64) -> Self {
        Self(seed)
    }

    /// The next 64 random bits.
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        mix64(self.0)
    }

    /// A value in `0..n` (`0` when `n == 0`); the modulo bias is irrelevant for simulation.
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next_u64() % n
        }
    }

    /// A value in `lo..=hi`.
    pub(crate) fn between(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi.saturating_sub(lo).saturating_add(1))
    }

    /// A uniform float in `[0, 1)`.
    pub(crate) fn unit(&mut self) -> f64 {
        // 53 random bits are all an f64 mantissa holds.
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// True with probability `p` (clamped to `[0, 1]`).
    pub(crate) fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && self.unit() < p
    }

    /// Fills `buf` with random bytes.
    pub(crate) fn fill(&mut self, buf: &mut [u8]) {
        for chunk in buf.chunks_mut(8) {
            let word = self.next_u64().to_le_bytes();
            chunk.copy_from_slice(&word[..chunk.len()]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_gives_the_same_stream() {
        let mut a = Rng::new(7);
        let mut b = Rng::new(7);
        for _ in 0..100 {
            assert_eq!(a.next_u64(), b.next_u64());
        }
    }

    #[test]
    fn between_stays_within_its_bounds_and_reaches_both() {
        let mut rng = Rng::new(1);
        let values: Vec<u64> = (0..1000).map(|_| rng.between(3, 6)).collect();
        assert!(values.iter().all(|v| (3..=6).contains(v)));
        assert!(values.contains(&3) && values.contains(&6));
    }

    #[test]
    fn hash3_depends_on_every_input_and_the_tag() {
        let base = hash3(1, 2, 3, 4);
        assert_ne!(base, hash3(0, 2, 3, 4));
        assert_ne!(base, hash3(1, 0, 3, 4));
        assert_ne!(base, hash3(1, 2, 0, 4));
        assert_ne!(base, hash3(1, 2, 3, 0));
    }
}
