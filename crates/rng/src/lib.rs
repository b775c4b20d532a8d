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
}
