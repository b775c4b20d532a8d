//! Classic-histogram math with Prometheus' semantics: `histogram_quantile`, `sum by (le)`, and
//! the increase of a histogram between two scrapes.

use std::collections::BTreeMap;

use crate::model::Exposition;
use crate::parse::parse_value;

/// One cumulative bucket: how many observations were `<= le`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bucket {
    /// Upper bound (inclusive); `f64::INFINITY` for the `+Inf` bucket.
    pub le: f64,
    /// Cumulative count.
    pub count: f64,
}

/// A classic histogram of one series (or of several merged).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Histogram {
    /// Buckets in ascending `le` order, as scraped (the `+Inf` bucket included when present).
    pub buckets: Vec<Bucket>,
    /// The `_sum` sample (NaN when absent).
    pub sum: f64,
    /// The `_count` sample (NaN when absent).
    pub count: f64,
}

/// The result of [`Histogram::quantile`] with the flags Prometheus also reports.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct QuantileResult {
    /// The estimate.
    pub value: f64,
    /// Cumulative counts decreased somewhere and were forced monotonic.
    pub forced_monotonic: bool,
    /// Tiny float-precision decreases were smoothed over.
    pub fixed_precision: bool,
}

/// The increase of a counter from `earlier` to `later`, treating a decrease as a reset to zero
/// (as Prometheus' `increase()` does between two points).
///
/// ```
/// use inferscale_promtext::counter_delta;
/// assert_eq!(counter_delta(10.0, 15.0), 5.0);
/// assert_eq!(counter_delta(10.0, 3.0), 3.0); // the process restarted
/// ```
pub fn counter_delta(earlier: f64, later: f64) -> f64 {
    if later >= earlier {
        later - earlier
    } else {
        later
    }
}

impl Histogram {
    /// A histogram from `(le, cumulative count)` pairs in any order, with `sum` and `count`.
    pub fn from_buckets(
        buckets: impl IntoIterator<Item = (f64, f64)>,
        sum: f64,
        count: f64,
    ) -> Self {
        let mut buckets: Vec<Bucket> = buckets
            .into_iter()
            .map(|(le, count)| Bucket { le, count })
            .collect();
        buckets.sort_by(|a, b| a.le.total_cmp(&b.le));
        Histogram {
            buckets,
            sum,
            count,
        }
    }

    /// The total number of observations: `_count`, or the `+Inf` bucket when `_count` is absent.
    pub fn observations(&self) -> f64 {
        if !self.count.is_nan() {
            return self.count;
        }
        self.buckets
            .last()
            .filter(|b| b.le == f64::INFINITY)
            .map_or(f64::NAN, |b| b.count)
    }

    /// The mean observation, `_sum / _count` (NaN without observations).
    pub fn mean(&self) -> f64 {
        let n = self.observations();
        if n > 0.0 { self.sum / n } else { f64::NAN }
    }

    /// `histogram_quantile(q, …)` exactly as Prometheus computes it for classic buckets.
    ///
    /// Linear interpolation inside the bucket holding rank `q × count`; the lowest bucket
    /// interpolates from 0 when its bound is positive (and returns its bound otherwise); a rank
    /// in the `+Inf` bucket returns the highest finite bound; `q < 0` gives `-Inf`, `q > 1`
    /// `+Inf`; no observations, fewer than two buckets, a missing `+Inf` bucket or a NaN `q`
    /// give NaN. Buckets with equal bounds are added together, tiny float-precision decreases
    /// are smoothed and other decreases are forced monotonic.
    ///
    /// ```
    /// use inferscale_promtext::Histogram;
    /// let h = Histogram::from_buckets([(1.0, 10.0), (2.0, 20.0), (f64::INFINITY, 20.0)], 25.0, 20.0);
    /// assert_eq!(h.quantile(0.5), 1.0);
    /// assert_eq!(h.quantile(0.75), 1.5);
    /// assert_eq!(h.quantile(0.25), 0.5);
    /// ```
    pub fn quantile(&self, q: f64) -> f64 {
        self.quantile_detailed(q).value
    }

    /// [`Histogram::quantile`] with the monotonicity flags.
    pub fn quantile_detailed(&self, q: f64) -> QuantileResult {
        let nan = QuantileResult {
            value: f64::NAN,
            forced_monotonic: false,
            fixed_precision: false,
        };
        if q.is_nan() {
            return nan;
        }
        if q < 0.0 {
            return QuantileResult {
                value: f64::NEG_INFINITY,
                ..nan
            };
        }
        if q > 1.0 {
            return QuantileResult {
                value: f64::INFINITY,
                ..nan
            };
        }
        let mut b: Vec<Bucket> = self.buckets.clone();
        if b.is_empty() {
            return nan;
        }
        b.sort_by(|x, y| x.le.total_cmp(&y.le));
        if b.last().is_none_or(|l| l.le != f64::INFINITY) {
            return nan;
        }
        // Add up buckets with equal bounds (`le="1"` and `le="1.0"` from two writers).
        let mut merged: Vec<Bucket> = Vec::with_capacity(b.len());
        for x in b {
            match merged.last_mut() {
                Some(last) if last.le == x.le => last.count += x.count,
                _ => merged.push(x),
            }
        }
        let mut b = merged;
        let fixed_precision = correct_precision_errors(&mut b, 1e-12);
        let forced_monotonic = ensure_monotonic(&mut b);
        let done = |value| QuantileResult {
            value,
            forced_monotonic,
            fixed_precision,
        };
        if b.len() < 2 {
            return nan;
        }
        let observations = b[b.len() - 1].count;
        if observations == 0.0 {
            return nan;
        }
        let mut rank = q * observations;
        // The first bucket (excluding +Inf) whose cumulative count reaches the rank.
        let idx = b[..b.len() - 1].partition_point(|x| x.count < rank);
        if idx == b.len() - 1 {
            return done(b[b.len() - 2].le);
        }
        if idx == 0 && b[0].le <= 0.0 {
            return done(b[0].le);
        }
        let end = b[idx].le;
        let mut count = b[idx].count;
        let mut start = 0.0;
        if idx > 0 {
            start = b[idx - 1].le;
            count -= b[idx - 1].count;
            rank -= b[idx - 1].count;
        }
        done(start + (end - start) * (rank / count))
    }

    /// Adds `other` into `self` bucket by bucket (`sum by (le)`): buckets with the same bound
    /// add up, bounds only one side has are kept as they are.
    pub fn merge(&mut self, other: &Histogram) {
        let mut by_le: BTreeMap<u64, Bucket> = BTreeMap::new();
        for b in self.buckets.iter().chain(&other.buckets) {
            by_le
                .entry(order_key(b.le))
                .and_modify(|x| x.count += b.count)
                .or_insert(*b);
        }
        self.buckets = by_le.into_values().collect();
        self.sum = add_present(self.sum, other.sum);
        self.count = add_present(self.count, other.count);
    }

    /// The sum of several histograms (an empty histogram when there are none).
    pub fn merged<'h>(all: impl IntoIterator<Item = &'h Histogram>) -> Histogram {
        let mut acc = Histogram {
            buckets: Vec::new(),
            sum: f64::NAN,
            count: f64::NAN,
        };
        for h in all {
            acc.merge(h);
        }
        acc
    }

    /// What was observed between the scrape `earlier` and this one: each bucket, the sum and
    /// the count as a counter delta. Percentiles of the result are windowed percentiles.
    pub fn delta(&self, earlier: &Histogram) -> Histogram {
        let before = |le: f64| {
            earlier
                .buckets
                .iter()
                .find(|b| b.le == le)
                .map_or(0.0, |b| b.count)
        };
        Histogram {
            buckets: self
                .buckets
                .iter()
                .map(|b| Bucket {
                    le: b.le,
                    count: counter_delta(before(b.le), b.count),
                })
                .collect(),
            sum: delta_present(earlier.sum, self.sum),
            count: delta_present(earlier.count, self.count),
        }
    }
}

/// A key that sorts floats in numeric order (bounds are never NaN in valid input).
fn order_key(v: f64) -> u64 {
    let bits = v.to_bits();
    if bits >> 63 == 1 {
        !bits
    } else {
        bits | (1 << 63)
    }
}

fn add_present(a: f64, b: f64) -> f64 {
    match (a.is_nan(), b.is_nan()) {
        (true, true) => f64::NAN,
        (true, false) => b,
        (false, true) => a,
        (false, false) => a + b,
    }
}

fn delta_present(earlier: f64, later: f64) -> f64 {
    if later.is_nan() {
        f64::NAN
    } else if earlier.is_nan() {
        later
    } else {
        counter_delta(earlier, later)
    }
}

fn correct_precision_errors(b: &mut [Bucket], tolerance: f64) -> bool {
    let mut fixed = false;
    let Some(first) = b.first() else { return false };
    let mut prev = first.count;
    for x in b.iter_mut().skip(1) {
        let delta = (x.count - prev).abs();
        if delta == 0.0 {
            continue;
        }
        if delta / x.count <= tolerance {
            x.count = prev;
            fixed = true;
        } else {
            prev = x.count;
        }
    }
    fixed
}

fn ensure_monotonic(b: &mut [Bucket]) -> bool {
    let mut forced = false;
    let Some(first) = b.first() else { return false };
    let mut max = first.count;
    for x in b.iter_mut().skip(1) {
        if x.count > max {
            max = x.count;
        } else if x.count < max {
            x.count = max;
            forced = true;
        }
    }
    forced
}

/// A histogram series found in an exposition, with its labels (minus `le`).
#[derive(Debug, Clone, PartialEq)]
pub struct LabeledHistogram {
    /// The series' labels without `le`, sorted by name.
    pub labels: Vec<(String, String)>,
    /// The buckets, sum and count.
    pub histogram: Histogram,
}

impl LabeledHistogram {
    /// The value of one of the series' labels.
    pub fn label(&self, name: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Collects every histogram series called `base` from an exposition: the samples
/// `base_bucket`, `base_sum` and `base_count`, grouped by their labels without `le`.
///
/// It works from sample names, not from `# TYPE`, so histograms from exporters that omit the
/// metadata are found too. Buckets whose `le` is not a number are skipped.
pub fn histograms(exp: &Exposition<'_>, base: &str) -> Vec<LabeledHistogram> {
    let mut by_labels: BTreeMap<Vec<(String, String)>, Histogram> = BTreeMap::new();
    let empty = || Histogram {
        buckets: Vec::new(),
        sum: f64::NAN,
        count: f64::NAN,
    };
    for s in exp.samples() {
        let Some(suffix) = s.name().strip_prefix(base) else {
            continue;
        };
        if !matches!(suffix, "_bucket" | "_sum" | "_count") {
            continue;
        }
        let mut key: Vec<(String, String)> = s
            .labels()
            .iter()
            .filter(|l| l.name != "le")
            .map(|l| (l.name.to_string(), l.value.to_string()))
            .collect();
        key.sort();
        let h = by_labels.entry(key).or_insert_with(empty);
        match suffix {
            "_bucket" => {
                if let Some(le) = s.label("le").and_then(parse_value).filter(|v| !v.is_nan()) {
                    h.buckets.push(Bucket {
                        le,
                        count: s.value(),
                    });
                }
            }
            "_sum" => h.sum = s.value(),
            _ => h.count = s.value(),
        }
    }
    by_labels
        .into_iter()
        .map(|(labels, mut histogram)| {
            histogram.buckets.sort_by(|a, b| a.le.total_cmp(&b.le));
            LabeledHistogram { labels, histogram }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const INF: f64 = f64::INFINITY;

    fn h(b: &[(f64, f64)]) -> Histogram {
        let count = b.last().map_or(0.0, |x| x.1);
        Histogram::from_buckets(b.iter().copied(), 0.0, count)
    }

    #[test]
    fn quantile_special_cases() {
        let x = h(&[(1.0, 1.0), (INF, 2.0)]);
        assert_eq!(x.quantile(-0.1), f64::NEG_INFINITY);
        assert_eq!(x.quantile(1.1), INF);
        assert!(x.quantile(f64::NAN).is_nan());
        assert!(
            h(&[(1.0, 0.0), (INF, 0.0)]).quantile(0.5).is_nan(),
            "no observations"
        );
        assert!(h(&[(INF, 5.0)]).quantile(0.5).is_nan(), "one bucket");
        assert!(
            h(&[(1.0, 1.0), (2.0, 2.0)]).quantile(0.5).is_nan(),
            "no +Inf bucket"
        );
        assert!(h(&[]).quantile(0.5).is_nan());
    }

    #[test]
    fn quantile_interpolates_like_prometheus() {
        // The lowest bucket interpolates from zero.
        let x = h(&[(2.0, 10.0), (4.0, 20.0), (INF, 20.0)]);
        assert_eq!(x.quantile(0.25), 1.0);
        assert_eq!(x.quantile(0.75), 3.0);
        assert_eq!(x.quantile(1.0), 4.0);
        assert_eq!(x.quantile(0.0), 0.0);
        // A rank in the +Inf bucket returns the highest finite bound.
        let y = h(&[(1.0, 1.0), (2.0, 2.0), (INF, 10.0)]);
        assert_eq!(y.quantile(0.99), 2.0);
        // A non-positive lowest bound is returned as is.
        let z = h(&[(-1.0, 5.0), (1.0, 10.0), (INF, 10.0)]);
        assert_eq!(z.quantile(0.1), -1.0);
        assert_eq!(z.quantile(0.75), 0.0);
    }

    #[test]
    fn quantile_repairs_non_monotonic_counts() {
        let x = h(&[(1.0, 5.0), (2.0, 3.0), (3.0, 8.0), (INF, 8.0)]);
        let r = x.quantile_detailed(0.5);
        assert!(r.forced_monotonic);
        // After repair: 5, 5, 8, 8 → rank 4 falls in the first bucket.
        assert_eq!(r.value, 0.8);
        // Equal bounds are added up before anything else.
        let dup = Histogram::from_buckets([(1.0, 1.0), (1.0, 1.0), (INF, 4.0)], 0.0, 4.0);
        assert_eq!(dup.quantile(0.5), 1.0);
    }

    #[test]
    fn the_seeds_e2e_bucket_pitfall() {
        // A steady 2.5 s latency lands in (2, 2.5]; p95 interpolates inside it.
        let x = h(&[(2.0, 0.0), (2.5, 100.0), (5.0, 100.0), (INF, 100.0)]);
        assert_eq!(x.quantile(0.95), 2.475);
    }

    #[test]
    fn merge_sums_by_le() {
        let mut a = Histogram::from_buckets([(1.0, 1.0), (INF, 2.0)], 3.0, 2.0);
        let b = Histogram::from_buckets([(1.0, 3.0), (5.0, 4.0), (INF, 4.0)], 6.0, 4.0);
        a.merge(&b);
        assert_eq!(
            a.buckets,
            vec![
                Bucket {
                    le: 1.0,
                    count: 4.0
                },
                Bucket {
                    le: 5.0,
                    count: 4.0
                },
                Bucket {
                    le: INF,
                    count: 6.0
                }
            ]
        );
        assert_eq!((a.sum, a.count), (9.0, 6.0));
        let m = Histogram::merged([&b, &b]);
        assert_eq!(m.count, 8.0);
    }

    #[test]
    fn delta_handles_resets() {
        let t0 = Histogram::from_buckets([(1.0, 10.0), (INF, 20.0)], 30.0, 20.0);
        let t1 = Histogram::from_buckets([(1.0, 12.0), (INF, 25.0)], 40.0, 25.0);
        let d = t1.delta(&t0);
        assert_eq!(d.buckets[0].count, 2.0);
        assert_eq!(d.buckets[1].count, 5.0);
        assert_eq!((d.sum, d.count), (10.0, 5.0));
        // After a restart the later values are the increase.
        let t2 = Histogram::from_buckets([(1.0, 1.0), (INF, 1.0)], 0.5, 1.0);
        assert_eq!(t2.delta(&t1).count, 1.0);
    }

    #[test]
    fn histograms_are_found_by_sample_name() {
        let text = "x_bucket{a=\"1\",le=\"1\"} 1\nx_bucket{a=\"1\",le=\"+Inf\"} 2\nx_sum{a=\"1\"} 3\nx_count{a=\"1\"} 2\n\
                    x_bucket{a=\"2\",le=\"+Inf\"} 0\n";
        let exp = crate::parse(text.as_bytes()).unwrap();
        let hs = histograms(&exp, "x");
        assert_eq!(hs.len(), 2);
        assert_eq!(hs[0].label("a"), Some("1"));
        assert_eq!(hs[0].histogram.quantile(0.5), 1.0);
        assert!(hs[1].histogram.count.is_nan());
    }
}
