//! Fault injection for reliability tests: each request draws its fate from the simulator's
//! seed and its arrival number, so a run with the same seed and order fails the same way.

use inferscale_engine::Rng;

/// Fault rates and sizes, from `--fault-*` flags.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Faults {
    /// Fraction of requests answered `500 Internal Server Error` at once.
    pub error_500_rate: f64,
    /// Fraction of responses cut off mid-way (the connection is dropped).
    pub cut_rate: f64,
    /// Fraction of requests stalled before the first byte.
    pub stall_rate: f64,
    /// How long a stall lasts, simulated seconds.
    pub stall_s: f64,
    /// Fraction of streams that get a malformed event (after which the stream ends).
    pub malformed_rate: f64,
    /// From simulated time `.1` on, engine steps take `.0` times longer.
    pub slowdown: Option<(f64, f64)>,
}

/// What happens to one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Fate {
    /// Answer 500 without running it.
    pub error_500: bool,
    /// Stall before the first byte.
    pub stall: bool,
    /// Cut the response after this many output tokens.
    pub cut_after: Option<u32>,
    /// Send a malformed event after this many output tokens, then end the stream.
    pub malformed_after: Option<u32>,
}

impl Faults {
    /// Whether any per-request fault is configured.
    pub fn any(&self) -> bool {
        self.error_500_rate > 0.0
            || self.cut_rate > 0.0
            || self.stall_rate > 0.0
            || self.malformed_rate > 0.0
    }

    /// Draws the fate of request number `n` of a request with `max_tokens`.
    pub fn draw(&self, seed: u64, n: u64, max_tokens: u32) -> Fate {
        if !self.any() {
            return Fate::default();
        }
        let mut rng = Rng::new(inferscale_engine::mix(&[seed, n, 0xfa17]));
        let at = |rng: &mut Rng| 1 + (rng.next_f64() * f64::from(max_tokens.max(2) - 1)) as u32;
        let error_500 = rng.chance(self.error_500_rate);
        let stall = rng.chance(self.stall_rate);
        let cut_after = rng.chance(self.cut_rate).then(|| at(&mut rng));
        let malformed_after = if cut_after.is_none() && rng.chance(self.malformed_rate) {
            Some(at(&mut rng))
        } else {
            None
        };
        Fate {
            error_500,
            stall,
            cut_after,
            malformed_after,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_are_honoured_and_draws_repeat() {
        let f = Faults {
            error_500_rate: 0.1,
            cut_rate: 0.2,
            ..Faults::default()
        };
        let fates: Vec<Fate> = (0..10_000).map(|n| f.draw(1, n, 100)).collect();
        let e = fates.iter().filter(|x| x.error_500).count();
        let c = fates.iter().filter(|x| x.cut_after.is_some()).count();
        assert!((800..1200).contains(&e), "{e}");
        assert!((1700..2300).contains(&c), "{c}");
        assert!(
            fates
                .iter()
                .filter_map(|x| x.cut_after)
                .all(|a| (1..100).contains(&a))
        );
        assert_eq!(f.draw(1, 5, 100), f.draw(1, 5, 100));
    }
}
