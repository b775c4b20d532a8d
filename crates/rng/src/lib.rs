//! A small deterministic random number generator (SplitMix64), so that runs repeat exactly
//! for a seed without pulling in a general-purpose crate.

/// SplitMix64: fast, statistically sound for simulation, and reproducible across platforms.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> Self {
        Rng(seed ^ 0x9E37_79B9_7F4A_7C15)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Standard normal (Box–Muller).
    pub fn normal(&mut self) -> f64 {
        let u1 = self.next_f64().max(f64::MIN_POSITIVE);
        let u2 = self.next_f64();
        (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    }

    /// Whether an event of probability `p` happens.
    pub fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && self.next_f64() < p
    }
}

/// A stateless hash of a few words, for values that must not depend on the order of calls
/// (the text of token `i` of a prompt, say).
pub fn mix(words: &[u64]) -> u64 {
    let mut r = Rng::new(0x51_7CC1_B727_220A);
    let mut h = 0u64;
    for w in words {
        r.0 ^= w.wrapping_add(h);
        h = r.next_u64();
    }
    h
}

/// Hashing for keys that are small integers or already hashes (a request's replica and id,
/// a prefix-cache block's key): one multiply-and-fold per word. Not for keys an adversary
/// chooses; the simulation's own keys are not, and SipHash cost a fifth of a rehearsal.
#[derive(Debug, Clone, Copy, Default)]
pub struct FastHash;

impl std::hash::BuildHasher for FastHash {
    type Hasher = FastHasher;
    fn build_hasher(&self) -> FastHasher {
        FastHasher(0)
    }
}

/// [`FastHash`]'s hasher.
#[derive(Debug, Clone, Copy)]
pub struct FastHasher(u64);

impl std::hash::Hasher for FastHasher {
    fn finish(&self) -> u64 {
        let x = u128::from(self.0) * 0x9E37_79B9_7F4A_7C15;
        (x as u64) ^ ((x >> 64) as u64)
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(*b)).wrapping_mul(0x100_0000_01B3);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(29) ^ v).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
    fn write_u32(&mut self, v: u32) {
        self.write_u64(u64::from(v));
    }
    fn write_usize(&mut self, v: usize) {
        self.write_u64(v as u64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reproducible_and_roughly_uniform() {
        let mut a = Rng::new(42);
        let mut b = Rng::new(42);
        assert_eq!(a.next_u64(), b.next_u64());
        let mean: f64 = (0..10_000).map(|_| a.next_f64()).sum::<f64>() / 10_000.0;
        assert!((mean - 0.5).abs() < 0.02);
        let m2: f64 = (0..10_000).map(|_| a.normal().powi(2)).sum::<f64>() / 10_000.0;
        assert!((m2 - 1.0).abs() < 0.05);
        assert_ne!(mix(&[1, 2]), mix(&[2, 1]));
    }

    #[test]
    fn the_fast_hash_spreads_neighbouring_keys() {
        use std::hash::BuildHasher;
        let h = |k: (u64, u32)| FastHash.hash_one(k);
        let mut seen: Vec<u64> = (0..1000u64).map(|i| h((i, 0)) >> 54).collect();
        seen.sort_unstable();
        seen.dedup();
        // 1000 keys over the top 10 bits' 1024 values: most of them used.
        assert!(seen.len() > 500, "{}", seen.len());
        assert_ne!(h((1, 2)), h((2, 1)));
    }
}
