//! What the engine counts, in the shape vLLM's stat logger exposes it.

use inferscale_catalog::buckets::BucketFamily;
use inferscale_catalog::vllm::EngineHistogram;

/// A fixed-bucket histogram that records observations (not cumulative until exported).
#[derive(Debug, Clone)]
pub struct Hist {
    /// Finite upper bounds (the `+Inf` bucket is implicit).
    pub bounds: Vec<f64>,
    /// Observations per bucket; one more entry than `bounds` for `+Inf`.
    pub counts: Vec<u64>,
    /// Sum of observations.
    pub sum: f64,
    /// Number of observations.
    pub count: u64,
    /// The bucket of the last observation: the next one is often in it too (a request's
    /// token counts, a steady latency), and two comparisons say so.
    hint: usize,
    /// Observations are dropped (see [`Hist::set_recording`]).
    off: bool,
}

/// Equal when they hold the same observations.
impl PartialEq for Hist {
    fn eq(&self, other: &Self) -> bool {
        self.bounds == other.bounds
            && self.counts == other.counts
            && self.sum == other.sum
            && self.count == other.count
    }
}

impl Hist {
    /// An empty histogram of one of vLLM's bucket families.
    pub fn new(family: BucketFamily, max_model_len: u32) -> Self {
        Self::with_bounds(family.bounds(max_model_len))
    }

    /// An empty histogram with these finite upper bounds (ascending).
    pub fn with_bounds(bounds: Vec<f64>) -> Self {
        let counts = vec![0; bounds.len() + 1];
        Hist {
            bounds,
            counts,
            sum: 0.0,
            count: 0,
            hint: 0,
            off: false,
        }
    }

    /// Whether observations are recorded (they are unless turned off). A histogram that
    /// nothing will read can be turned off to save the work; it then stays as it was.
    pub fn set_recording(&mut self, on: bool) {
        self.off = !on;
    }

    /// The bucket of `v`: the first whose bound is at least `v` (`+Inf` past the last).
    fn bucket(&mut self, v: f64) -> usize {
        let h = self.hint;
        let above = h == 0 || self.bounds[h - 1] < v;
        let within = h == self.bounds.len() || v <= self.bounds[h];
        if above && within {
            return h;
        }
        let i = self.bounds.partition_point(|b| *b < v);
        self.hint = i;
        i
    }

    /// Records one observation (`le` semantics: a value on a bound goes in that bucket).
    pub fn observe(&mut self, v: f64) {
        if self.off {
            return;
        }
        let i = self.bucket(v);
        self.counts[i] += 1;
        self.sum += v;
        self.count += 1;
    }

    /// Records `n` equal observations: what `n` calls of [`Hist::observe`] record (the sum
    /// up to rounding: `n · v` is added at once), with one bucket search.
    pub fn observe_repeated(&mut self, v: f64, n: u64) {
        if n == 0 || self.off {
            return;
        }
        let i = self.bucket(v);
        self.counts[i] += n;
        self.sum += v * n as f64;
        self.count += n;
    }

    /// `(le, cumulative count)` pairs ending with `+Inf`.
    pub fn cumulative(&self) -> Vec<(f64, u64)> {
        let mut acc = 0;
        self.bounds
            .iter()
            .copied()
            .chain(std::iter::once(f64::INFINITY))
            .zip(&self.counts)
            .map(|(le, c)| {
                acc += c;
                (le, acc)
            })
            .collect()
    }
}

/// Why a request finished, as vLLM's `finished_reason` label says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FinishReason {
    /// End of sequence (or a stop string).
    Stop,
    /// `max_tokens` reached.
    Length,
    /// Cancelled (client gone).
    Abort,
    /// Failed in the engine.
    Error,
}

impl FinishReason {
    /// A request that ends this way ran to its end (stop or length), rather than being
    /// aborted or failing.
    pub fn is_normal(self) -> bool {
        matches!(self, FinishReason::Stop | FinishReason::Length)
    }

    /// The label value.
    pub fn label(self) -> &'static str {
        match self {
            FinishReason::Stop => "stop",
            FinishReason::Length => "length",
            FinishReason::Abort => "abort",
            FinishReason::Error => "error",
        }
    }

    /// Index into [`Stats::success`] (the order of vLLM's `FINISH_REASON_STRINGS`).
    pub fn index(self) -> usize {
        match self {
            FinishReason::Stop => 0,
            FinishReason::Length => 1,
            FinishReason::Abort => 2,
            FinishReason::Error => 3,
        }
    }
}

/// Everything the engine has counted since it started. Times are simulated seconds.
#[derive(Debug, Clone, PartialEq)]
pub struct Stats {
    /// Requests in the running batch.
    pub running: u32,
    /// Requests waiting (including preempted ones).
    pub waiting: u32,
    /// Fraction of KV blocks in use.
    pub kv_usage: f64,
    /// KV blocks in the pool.
    pub num_gpu_blocks: u32,
    /// Prompt tokens computed (recomputation after preemption included, as vLLM counts them).
    pub prompt_tokens: u64,
    /// Output tokens generated.
    pub generation_tokens: u64,
    /// Preemptions.
    pub preemptions: u64,
    /// Finished requests by reason: stop, length, abort, error, repetition.
    pub success: [u64; 5],
    /// Prefix-cache token queries (the prompt tokens of every request admitted).
    pub prefix_cache_queries: u64,
    /// Prompt tokens found in the prefix cache (`vllm:prefix_cache_hits`).
    pub prefix_cache_hits: u64,
    /// Tokens per step.
    pub iteration_tokens: Hist,
    /// Prompt tokens per request.
    pub request_prompt_tokens: Hist,
    /// Output tokens per request.
    pub request_generation_tokens: Hist,
    /// `max_tokens` per request.
    pub request_max_tokens: Hist,
    /// The `n` parameter per request (always 1).
    pub request_params_n: Hist,
    /// Time to first token.
    pub ttft: Hist,
    /// Inter-token latency, one observation per output step.
    pub itl: Hist,
    /// Mean time per output token, per request.
    pub tpot: Hist,
    /// End-to-end latency.
    pub e2e: Hist,
    /// Time waiting before the first schedule.
    pub queue_time: Hist,
    /// Time from first schedule to the last token.
    pub inference_time: Hist,
    /// Time from first schedule to the first token.
    pub prefill_time: Hist,
    /// Time from the first token to the last.
    pub decode_time: Hist,
    /// Preemptions per request.
    pub num_preemptions: Hist,
    /// New KV tokens computed during prefill, per request.
    pub prefill_kv_computed: Hist,
    /// Steps run.
    pub steps: u64,
    /// Time the engine spent in steps.
    pub busy_s: f64,
    /// Time the GPU was busy.
    pub gpu_busy_s: f64,
    /// Of `gpu_busy_s`, the memory-bound part.
    pub gpu_memory_bound_s: f64,
    /// Bytes read or written from device memory (one rank).
    pub bytes: f64,
    /// FLOPs (one rank).
    pub flops: f64,
    /// The engine's clock when these were taken.
    pub now: f64,
}

impl Stats {
    /// The histogram vLLM's family `h` reports.
    pub fn histogram(&self, h: EngineHistogram) -> &Hist {
        match h {
            EngineHistogram::PromptTokens => &self.request_prompt_tokens,
            EngineHistogram::GenerationTokens => &self.request_generation_tokens,
            EngineHistogram::IterationTokens => &self.iteration_tokens,
            EngineHistogram::MaxTokens => &self.request_max_tokens,
            EngineHistogram::ParamsN => &self.request_params_n,
            EngineHistogram::TimeToFirstToken => &self.ttft,
            EngineHistogram::InterTokenLatency => &self.itl,
            EngineHistogram::TimePerOutputToken => &self.tpot,
            EngineHistogram::EndToEnd => &self.e2e,
            EngineHistogram::QueueTime => &self.queue_time,
            EngineHistogram::InferenceTime => &self.inference_time,
            EngineHistogram::PrefillTime => &self.prefill_time,
            EngineHistogram::DecodeTime => &self.decode_time,
            EngineHistogram::Preemptions => &self.num_preemptions,
            EngineHistogram::PrefillKvComputed => &self.prefill_kv_computed,
        }
    }

    /// See [`Stats::histogram`].
    pub fn histogram_mut(&mut self, h: EngineHistogram) -> &mut Hist {
        match h {
            EngineHistogram::PromptTokens => &mut self.request_prompt_tokens,
            EngineHistogram::GenerationTokens => &mut self.request_generation_tokens,
            EngineHistogram::IterationTokens => &mut self.iteration_tokens,
            EngineHistogram::MaxTokens => &mut self.request_max_tokens,
            EngineHistogram::ParamsN => &mut self.request_params_n,
            EngineHistogram::TimeToFirstToken => &mut self.ttft,
            EngineHistogram::InterTokenLatency => &mut self.itl,
            EngineHistogram::TimePerOutputToken => &mut self.tpot,
            EngineHistogram::EndToEnd => &mut self.e2e,
            EngineHistogram::QueueTime => &mut self.queue_time,
            EngineHistogram::InferenceTime => &mut self.inference_time,
            EngineHistogram::PrefillTime => &mut self.prefill_time,
            EngineHistogram::DecodeTime => &mut self.decode_time,
            EngineHistogram::Preemptions => &mut self.num_preemptions,
            EngineHistogram::PrefillKvComputed => &mut self.prefill_kv_computed,
        }
    }

    /// Empty statistics for a cache of `num_gpu_blocks` blocks.
    pub fn new(max_model_len: u32, num_gpu_blocks: u32) -> Self {
        let h = |f| Hist::new(f, max_model_len);
        Stats {
            running: 0,
            waiting: 0,
            kv_usage: 0.0,
            num_gpu_blocks,
            prompt_tokens: 0,
            generation_tokens: 0,
            preemptions: 0,
            success: [0; 5],
            prefix_cache_queries: 0,
            prefix_cache_hits: 0,
            iteration_tokens: h(BucketFamily::IterationTokens),
            request_prompt_tokens: h(BucketFamily::RequestTokens),
            request_generation_tokens: h(BucketFamily::RequestTokens),
            request_max_tokens: h(BucketFamily::RequestTokens),
            request_params_n: h(BucketFamily::RequestParamsN),
            ttft: h(BucketFamily::TimeToFirstToken),
            itl: h(BucketFamily::InterTokenLatency),
            tpot: h(BucketFamily::InterTokenLatency),
            e2e: h(BucketFamily::RequestLatency),
            queue_time: h(BucketFamily::RequestLatency),
            inference_time: h(BucketFamily::RequestLatency),
            prefill_time: h(BucketFamily::RequestLatency),
            decode_time: h(BucketFamily::RequestLatency),
            num_preemptions: h(BucketFamily::RequestNumPreemptions),
            prefill_kv_computed: h(BucketFamily::RequestTokens),
            steps: 0,
            busy_s: 0.0,
            gpu_busy_s: 0.0,
            gpu_memory_bound_s: 0.0,
            bytes: 0.0,
            flops: 0.0,
            now: 0.0,
        }
    }

    /// Requests finished normally (stop, length, repetition).
    pub fn ok(&self) -> u64 {
        self.success[0] + self.success[1] + self.success[4]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn observations_land_in_le_buckets() {
        let mut h = Hist::new(BucketFamily::RequestLatency, 4096);
        h.observe(0.3);
        h.observe(2.4);
        h.observe(1e9);
        let c = h.cumulative();
        assert_eq!(c[0], (0.3, 1));
        assert_eq!(c[6], (2.5, 2));
        assert_eq!(*c.last().unwrap(), (f64::INFINITY, 3));
    }

    #[test]
    fn the_bucket_hint_never_changes_where_a_value_lands() {
        let mut h = Hist::new(BucketFamily::RequestLatency, 4096);
        let mut plain = vec![0u64; h.counts.len()];
        let mut rng = inferscale_rng::Rng::new(7);
        let bounds = h.bounds.clone();
        // Bounds themselves, values just off them, repeats, NaN and the extremes.
        let mut values: Vec<f64> = bounds
            .iter()
            .flat_map(|b| [*b, b.next_down(), b.next_up(), *b])
            .collect();
        values.extend((0..2000).map(|_| (rng.next_f64() * 12.0 - 4.0).exp()));
        values.extend([f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 0.0, -1.0]);
        for v in values {
            h.observe(v);
            plain[bounds.partition_point(|b| *b < v)] += 1;
        }
        assert_eq!(h.counts, plain);
    }
}
