//! A run's numbers, as benchmark clients report them: throughput over the run, and the mean
//! and percentiles of TTFT, ITL, TPOT and end-to-end latency over the requests that
//! finished.

use serde::Serialize;

use crate::simulate::Trace;

/// Mean and percentiles of one latency, seconds (`None`: no request had one).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
pub struct Stats {
    /// Mean.
    pub mean: Option<f64>,
    /// Median.
    pub p50: Option<f64>,
    /// 90th percentile.
    pub p90: Option<f64>,
    /// 95th percentile.
    pub p95: Option<f64>,
    /// 99th percentile.
    pub p99: Option<f64>,
}

/// The `q` quantile of sorted values, interpolated linearly between the closest ranks (as
/// numpy's default, which `vllm bench` and inference-perf use).
pub fn quantile(sorted: &[f64], q: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let pos = q.clamp(0.0, 1.0) * (sorted.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    Some(sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64))
}

impl Stats {
    /// Of `values` (any order; NaNs dropped).
    pub fn of(mut values: Vec<f64>) -> Stats {
        values.retain(|v| v.is_finite());
        if values.is_empty() {
            return Stats::default();
        }
        values.sort_by(f64::total_cmp);
        Stats {
            mean: Some(values.iter().sum::<f64>() / values.len() as f64),
            p50: quantile(&values, 0.50),
            p90: quantile(&values, 0.90),
            p95: quantile(&values, 0.95),
            p99: quantile(&values, 0.99),
        }
    }
}

/// What a run predicts.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct Summary {
    /// Requests sent.
    pub sent: u64,
    /// Requests that finished.
    pub completed: u64,
    /// Requests the client gave up on (timeout).
    pub failed: u64,
    /// From the first send to the last end, seconds.
    pub window_s: f64,
    /// Finished requests per second over the window.
    pub throughput_rps: f64,
    /// Output tokens of finished requests per second over the window.
    pub output_tps: f64,
    /// Time to first token.
    pub ttft: Stats,
    /// Inter-token latency: every gap between tokens, pooled over requests
    /// (`Σ(e2e − ttft) / Σ(output − 1)` for the mean).
    pub itl: Stats,
    /// Time per output token per request, `(e2e − ttft) / (output − 1)`.
    pub tpot: Stats,
    /// End to end.
    pub e2e: Stats,
    /// Requests waiting: the most at once, and the time average.
    pub queue_max: u32,
    /// Time-averaged requests waiting.
    pub queue_mean: f64,
    /// KV-cache blocks of the replica, and the highest share used.
    pub kv_blocks: u32,
    /// Highest KV-cache usage (0–1).
    pub kv_max: f64,
    /// Preemptions (recomputed requests).
    pub preemptions: u64,
    /// The first request's end-to-end latency (the cold one when the run was not warm).
    pub first_e2e_s: Option<f64>,
    /// The largest time to first token (a static batch's whole prefill).
    pub ttft_max_s: Option<f64>,
    /// The share of prompt tokens found in the prefix cache (`None`: none looked up).
    pub prefix_cache_hit_rate: Option<f64>,
}

impl Summary {
    /// The numbers of `trace`.
    pub fn of(trace: &Trace) -> Summary {
        let ok: Vec<_> = trace.records.iter().filter(|r| r.ok).collect();
        let first_sent = trace
            .records
            .iter()
            .map(|r| r.sent)
            .min_by(f64::total_cmp)
            .unwrap_or(0.0);
        // Over every request, failed ones too (a client's window ends with its last answer).
        let last_end = trace
            .records
            .iter()
            .map(|r| r.end)
            .fold(first_sent, f64::max);
        let window = (last_end - first_sent).max(0.0);
        let output: u64 = ok.iter().map(|r| u64::from(r.output)).sum();
        let ttft: Vec<f64> = ok
            .iter()
            .filter_map(|r| r.first_token.map(|f| f - r.sent))
            .collect();
        let e2e: Vec<f64> = ok.iter().map(|r| r.end - r.sent).collect();
        let mut gaps_sum = 0.0;
        let mut gaps_n = 0u64;
        let mut tpot = Vec::new();
        for r in &ok {
            if let (Some(f), true) = (r.first_token, r.output > 1) {
                let span = r.end - f;
                gaps_sum += span;
                gaps_n += u64::from(r.output - 1);
                tpot.push(span / f64::from(r.output - 1));
            }
        }
        let mut itl = Stats::of(tpot.clone());
        itl.mean = (gaps_n > 0).then(|| gaps_sum / gaps_n as f64);
        let first = trace
            .records
            .iter()
            .filter(|r| r.ok)
            .min_by(|a, b| a.sent.total_cmp(&b.sent))
            .map(|r| r.end - r.sent);
        let rate = |n: f64| if window > 0.0 { n / window } else { 0.0 };
        Summary {
            sent: trace.records.len() as u64,
            completed: ok.len() as u64,
            failed: (trace.records.len() - ok.len()) as u64,
            window_s: window,
            throughput_rps: rate(ok.len() as f64),
            output_tps: rate(output as f64),
            ttft_max_s: ttft.iter().copied().reduce(f64::max),
            ttft: Stats::of(ttft),
            itl,
            tpot: Stats::of(tpot),
            e2e: Stats::of(e2e),
            queue_max: trace.queue_max,
            queue_mean: trace.queue_mean,
            kv_blocks: trace.kv_blocks,
            kv_max: trace.kv_max,
            preemptions: trace.preemptions,
            first_e2e_s: first,
            prefix_cache_hit_rate: (trace.prefix_cache.0 > 0)
                .then(|| trace.prefix_cache.1 as f64 / trace.prefix_cache.0 as f64),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_interpolate_as_numpy_does() {
        let v = [1.0, 2.0, 3.0, 4.0];
        assert_eq!(quantile(&v, 0.5), Some(2.5));
        assert_eq!(quantile(&v, 0.0), Some(1.0));
        assert_eq!(quantile(&v, 1.0), Some(4.0));
        assert!((quantile(&v, 0.99).unwrap() - 3.97).abs() < 1e-12);
        assert_eq!(quantile(&[], 0.5), None);
        let s = Stats::of(vec![3.0, f64::NAN, 1.0]);
        assert_eq!((s.mean, s.p50), (Some(2.0), Some(2.0)));
    }
}
