//! How far behind its scaled clock the simulator delivered what the engine computed.
//!
//! The engine's virtual time is exact, but its results reach clients only when the engine
//! thread wakes and releases them. On a machine that is too slow for the speed-up (an
//! unoptimised build, a busy neighbour) the thread wakes late or computes for longer than the
//! simulated step lasts, every release comes late, and a client measures latencies the model
//! never computed. The meter records, for every released event, how much wall time passed
//! between the moment its simulated time came and the moment it was released, so that a run
//! can say plainly when the machine, not the model, fell short.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

pub use inferscale_results::run::{ClockLag, LATE_BAR_S, LATE_SHARE_MAX};

/// Bucket `i` holds lateness in `[2^(i-1), 2^i)` microseconds (bucket 0: under 1 µs; the last
/// one everything from 18 minutes up).
const BUCKETS: usize = 32;

#[derive(Default)]
struct Inner {
    buckets: [AtomicU64; BUCKETS],
    late: AtomicU64,
    max_us: AtomicU64,
}

/// A shared, lock-free record of release lateness; cloning shares it.
#[derive(Clone, Default)]
pub struct LagMeter(Arc<Inner>);

impl std::fmt::Debug for LagMeter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("LagMeter").field(&self.read()).finish()
    }
}

/// Lateness gathered during one engine wake-up, published to the meter in one go.
#[derive(Default)]
pub(crate) struct Batch {
    buckets: [u64; BUCKETS],
    late: u64,
    max_us: u64,
    any: bool,
}

impl Batch {
    /// Records one release `late_s` wall seconds after its time.
    pub(crate) fn record(&mut self, late_s: f64) {
        let us = (late_s.max(0.0) * 1e6) as u64;
        self.buckets[bucket(us)] += 1;
        if late_s > LATE_BAR_S {
            self.late += 1;
        }
        self.max_us = self.max_us.max(us);
        self.any = true;
    }
}

fn bucket(us: u64) -> usize {
    ((u64::BITS - us.leading_zeros()) as usize).min(BUCKETS - 1)
}

/// Upper bound of bucket `i`, seconds.
fn upper_s(i: usize) -> f64 {
    (1u64 << i) as f64 * 1e-6
}

impl LagMeter {
    /// Adds a batch.
    pub(crate) fn publish(&self, b: &mut Batch) {
        if !b.any {
            return;
        }
        for (slot, n) in self.0.buckets.iter().zip(b.buckets.iter()) {
            if *n > 0 {
                slot.fetch_add(*n, Ordering::Relaxed);
            }
        }
        self.0.late.fetch_add(b.late, Ordering::Relaxed);
        self.0.max_us.fetch_max(b.max_us, Ordering::Relaxed);
        *b = Batch::default();
    }

    /// What the meter holds now.
    pub fn read(&self) -> ClockLag {
        let counts: Vec<u64> = self
            .0
            .buckets
            .iter()
            .map(|b| b.load(Ordering::Relaxed))
            .collect();
        let total: u64 = counts.iter().sum();
        let quantile = |q: f64| -> f64 {
            if total == 0 {
                return 0.0;
            }
            let rank = (q * total as f64).ceil().max(1.0) as u64;
            let mut seen = 0;
            for (i, n) in counts.iter().enumerate() {
                seen += n;
                if seen >= rank {
                    return upper_s(i);
                }
            }
            upper_s(BUCKETS - 1)
        };
        let max_s = self.0.max_us.load(Ordering::Relaxed) as f64 * 1e-6;
        ClockLag {
            releases: total,
            p50_s: quantile(0.50).min(max_s),
            p95_s: quantile(0.95).min(max_s),
            p99_s: quantile(0.99).min(max_s),
            max_s,
            late_share: if total == 0 {
                0.0
            } else {
                self.0.late.load(Ordering::Relaxed) as f64 / total as f64
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_few_late_releases_do_not_fail_the_clock_but_many_do() {
        let m = LagMeter::default();
        let mut b = Batch::default();
        for _ in 0..980 {
            b.record(0.0001);
        }
        for _ in 0..20 {
            b.record(0.080); // one pause of the machine
        }
        m.publish(&mut b);
        let r = m.read();
        assert_eq!(r.releases, 1000);
        assert!((r.late_share - 0.02).abs() < 1e-12);
        assert!(r.held(), "{r:?}");
        assert!(r.p50_s <= 0.000_128 && r.p50_s >= 0.0001, "{r:?}");
        assert!((r.max_s - 0.080).abs() < 1e-6);
        assert!(r.p99_s > LATE_BAR_S, "{r:?}");
        let mut b = Batch::default();
        for _ in 0..1000 {
            b.record(0.012);
        }
        m.publish(&mut b);
        let r = m.read();
        assert!(!r.held(), "{r:?}");
        assert!(r.describe().contains("over 5 ms"), "{}", r.describe());
    }

    #[test]
    fn an_empty_meter_reads_zero_and_held() {
        let r = LagMeter::default().read();
        assert_eq!(r.releases, 0);
        assert!(r.held());
    }
}
