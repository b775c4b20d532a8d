//! vLLM's histogram bucket layouts (the single source of truth since 0.32 is
//! `vllm/v1/metrics/buckets.py`; the layouts themselves go back to 0.8).
//!
//! Readers must never rely on these: a server may be started with
//! `--custom-histogram-buckets`, so bounds are always read from the scrape. They are here for
//! the simulator, which must serve exactly what vLLM serves, and for thresholds that have to
//! know where bucket edges fall (a 5 s p95 guardrail sits on an `e2e` bucket edge).

/// The named bucket families.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BucketFamily {
    /// e2e, queue, inference, prefill and decode times (seconds).
    RequestLatency,
    /// Time to first token (seconds).
    TimeToFirstToken,
    /// Inter-token latency and per-request TPOT (seconds).
    InterTokenLatency,
    /// Tokens per engine step.
    IterationTokens,
    /// The `n` request parameter.
    RequestParamsN,
    /// Preemptions per request.
    RequestNumPreemptions,
    /// Token counts per request: 1-2-5 steps up to `max_model_len`.
    RequestTokens,
}

/// `request_latency`: 0.3 … 7680 s.
pub const REQUEST_LATENCY: &[f64] = &[
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0,
    480.0, 960.0, 1920.0, 7680.0,
];

/// `time_to_first_token`: 1 ms … 2560 s.
pub const TIME_TO_FIRST_TOKEN: &[f64] = &[
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
    20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
];

/// `inter_token_latency`: 10 ms … 80 s.
pub const INTER_TOKEN_LATENCY: &[f64] = &[
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
    40.0, 80.0,
];

/// `iteration_tokens`: 1 … 16384.
pub const ITERATION_TOKENS: &[f64] = &[
    1.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0, 2048.0, 4096.0, 8192.0, 16384.0,
];

/// `request_params_n`.
pub const REQUEST_PARAMS_N: &[f64] = &[1.0, 2.0, 5.0, 10.0, 20.0];

/// `request_num_preemptions`.
pub const REQUEST_NUM_PREEMPTIONS: &[f64] = &[1.0, 2.0, 3.0, 4.0, 5.0, 10.0, 20.0];

/// The 1-2-5 series up to and including `max_model_len` that vLLM uses for token counts.
///
/// ```
/// use inferscale_catalog::buckets::request_tokens;
/// assert_eq!(request_tokens(4096), vec![1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0, 2000.0]);
/// assert_eq!(request_tokens(8192).last(), Some(&5000.0));
/// ```
pub fn request_tokens(max_model_len: u32) -> Vec<f64> {
    let mut out = Vec::new();
    let mut decade: u64 = 1;
    'outer: loop {
        for m in [1, 2, 5] {
            let v = m * decade;
            if v > u64::from(max_model_len) {
                break 'outer;
            }
            out.push(v as f64);
        }
        decade *= 10;
    }
    out
}

impl BucketFamily {
    /// The finite upper bounds of the family (`+Inf` is implicit).
    pub fn bounds(self, max_model_len: u32) -> Vec<f64> {
        match self {
            BucketFamily::RequestLatency => REQUEST_LATENCY.to_vec(),
            BucketFamily::TimeToFirstToken => TIME_TO_FIRST_TOKEN.to_vec(),
            BucketFamily::InterTokenLatency => INTER_TOKEN_LATENCY.to_vec(),
            BucketFamily::IterationTokens => ITERATION_TOKENS.to_vec(),
            BucketFamily::RequestParamsN => REQUEST_PARAMS_N.to_vec(),
            BucketFamily::RequestNumPreemptions => REQUEST_NUM_PREEMPTIONS.to_vec(),
            BucketFamily::RequestTokens => request_tokens(max_model_len),
        }
    }
}
