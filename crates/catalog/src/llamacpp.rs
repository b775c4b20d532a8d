//! llama.cpp's `/metrics` (`llama-server --metrics`): every family, in its order, with its
//! HELP text and type, exactly as the build of commit 0c1e570 serves them (the sources
//! PyPI's llama-cpp-python 0.3.36 vendors; `testdata/engines/llamacpp-0c1e570.prom`).
//!
//! The families carry no labels (one model per process) and no histograms: no latency
//! distribution at all, only running totals of tokens and of the seconds spent on them.

use crate::vllm::MetricKind;

/// One llama.cpp family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LlamaCppFamily {
    /// The exposed name (counters with `_total` where llama.cpp writes one).
    pub name: &'static str,
    /// Counter or gauge (llama.cpp has no histograms).
    pub kind: MetricKind,
    /// The HELP text, exactly.
    pub help: &'static str,
    /// What it reports, for whoever turns engine statistics into series.
    pub value: Value,
}

/// What a llama.cpp family reports, in terms of what an engine counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Value {
    /// Prompt tokens computed (not found in the prompt cache).
    PromptTokens,
    /// Prompt tokens found in the prompt cache.
    PromptTokensCached,
    /// Seconds spent on prompts, summed over requests.
    PromptSeconds,
    /// Generated tokens.
    GeneratedTokens,
    /// Seconds spent generating, summed over requests.
    GeneratedSeconds,
    /// Engine steps (`llama_decode` calls).
    Decodes,
    /// Prompt tokens per prompt second.
    PromptThroughput,
    /// Generated tokens per generating second.
    GenerationThroughput,
    /// Requests in a slot.
    Processing,
    /// Requests waiting for a slot.
    Deferred,
    /// Mean busy slots per step.
    BusySlotsPerDecode,
    /// What the engine model does not count (speculative decoding, the longest sequence):
    /// served as zero, so that queries find the family.
    NotModelled,
}

/// The families in the order llama-server lists them.
pub static FAMILIES: &[LlamaCppFamily] = &[
    f(
        "llamacpp:prompt_tokens_total",
        MetricKind::Counter,
        "Number of prompt tokens processed, excluding cached tokens",
        Value::PromptTokens,
    ),
    f(
        "llamacpp:prompt_tokens_cached_total",
        MetricKind::Counter,
        "Number of prompt tokens reused from the cache",
        Value::PromptTokensCached,
    ),
    f(
        "llamacpp:prompt_seconds_total",
        MetricKind::Counter,
        "Total time spent processing prompts",
        Value::PromptSeconds,
    ),
    f(
        "llamacpp:tokens_predicted_total",
        MetricKind::Counter,
        "Number of generation tokens processed",
        Value::GeneratedTokens,
    ),
    f(
        "llamacpp:tokens_predicted_seconds_total",
        MetricKind::Counter,
        "Total time spent generating tokens",
        Value::GeneratedSeconds,
    ),
    f(
        "llamacpp:n_decode_total",
        MetricKind::Counter,
        "Total number of llama_decode() calls, excluding speculative decoding and multimodal decoding",
        Value::Decodes,
    ),
    f(
        "llamacpp:n_tokens_max",
        MetricKind::Counter,
        "Largest observed sequence length (prompt + generation)",
        Value::NotModelled,
    ),
    f(
        "llamacpp:spec_decode_num_draft_tokens_total",
        MetricKind::Counter,
        "Speculative: Total draft tokens generated",
        Value::NotModelled,
    ),
    f(
        "llamacpp:spec_decode_num_accepted_tokens_total",
        MetricKind::Counter,
        "Speculative: Total draft tokens accepted by the target model",
        Value::NotModelled,
    ),
    f(
        "llamacpp:spec_decode_num_drafts_total",
        MetricKind::Counter,
        "Speculative: Total speculative decoding verification steps",
        Value::NotModelled,
    ),
    f(
        "llamacpp:prompt_tokens_seconds",
        MetricKind::Gauge,
        "Average prompt throughput in tokens/s",
        Value::PromptThroughput,
    ),
    f(
        "llamacpp:predicted_tokens_seconds",
        MetricKind::Gauge,
        "Average generation throughput in tokens/s",
        Value::GenerationThroughput,
    ),
    f(
        "llamacpp:requests_processing",
        MetricKind::Gauge,
        "Number of requests processing",
        Value::Processing,
    ),
    f(
        "llamacpp:requests_deferred",
        MetricKind::Gauge,
        "Number of requests deferred",
        Value::Deferred,
    ),
    f(
        "llamacpp:n_busy_slots_per_decode",
        MetricKind::Gauge,
        "Average number of busy slots per llama_decode() call",
        Value::BusySlotsPerDecode,
    ),
];

const fn f(
    name: &'static str,
    kind: MetricKind,
    help: &'static str,
    value: Value,
) -> LlamaCppFamily {
    LlamaCppFamily {
        name,
        kind,
        help,
        value,
    }
}
