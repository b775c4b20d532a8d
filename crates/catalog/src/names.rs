//! The name table: for each signal, the metric names each engine uses for it, current ones
//! first, with the releases they exist in and how sure we are.
//!
//! Sources: vLLM's released sdists 0.8.5–0.33.0 (renames diffed release by release), SGLang
//! 0.5.23's metrics collector, TGI's router at db931fcf, llama.cpp's server as built from the
//! sources llama-cpp-python 0.3.36 vendors (commit 0c1e570, its `/metrics` in
//! `testdata/engines/`), TensorRT-LLM names from secondary sources (AIBrix and the
//! Gateway API inference extension's engine maps: unverified), and dcgm-exporter at d5e5f510
//! (default counters and the 1.x `--use-old-namespace` names).

use crate::engine::Engine;
use crate::signal::Signal;

/// How far a name can be trusted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NameStatus {
    /// Served by current releases.
    Current,
    /// Served by older releases only (or behind a compatibility flag).
    Deprecated,
    /// Read from unpinned sources or secondary references; not checked against a release.
    Unverified,
}

/// Which samples of a metric carry the signal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Read {
    /// The sample named exactly like the metric.
    Value,
    /// A classic histogram: `<name>_bucket`, `<name>_sum`, `<name>_count`.
    Histogram,
    /// The `_sum` of a histogram (a token-length histogram's total tokens, say).
    HistogramSum,
}

/// One engine's name for one signal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MetricName {
    /// The engine that serves it.
    pub engine: Engine,
    /// The signal it carries.
    pub signal: Signal,
    /// The sample name (counters with their `_total`, histograms without suffix).
    pub name: &'static str,
    /// Current, deprecated or unverified.
    pub status: NameStatus,
    /// The releases that serve it, in words.
    pub versions: &'static str,
    /// How to read it.
    pub read: Read,
    /// Only samples whose label has one of these values count (`finished_reason`, say).
    pub filter: Option<(&'static str, &'static [&'static str])>,
}

const fn n(
    engine: Engine,
    signal: Signal,
    name: &'static str,
    status: NameStatus,
    versions: &'static str,
    read: Read,
) -> MetricName {
    MetricName {
        engine,
        signal,
        name,
        status,
        versions,
        read,
        filter: None,
    }
}

const fn f(
    engine: Engine,
    signal: Signal,
    name: &'static str,
    status: NameStatus,
    versions: &'static str,
    filter: (&'static str, &'static [&'static str]),
) -> MetricName {
    MetricName {
        filter: Some(filter),
        ..n(engine, signal, name, status, versions, Read::Value)
    }
}

use Engine::{Dcgm, LlamaCpp, Sglang, Tgi, TrtLlm, Vllm};
use NameStatus::{Current, Deprecated, Unverified};
use Read::{Histogram as H, HistogramSum as HSum, Value as V};
use Signal::*;

/// The llama.cpp build whose `/metrics` the names were read from.
const LLAMACPP: &str = "b1-0c1e570 (llama-cpp-python 0.3.36)";

/// vLLM's finish reasons that mean the request completed normally.
pub const VLLM_OK_REASONS: &[&str] = &["stop", "length", "repetition"];

/// Every known name, in preference order within each signal (current before deprecated,
/// vLLM first).
pub static NAMES: &[MetricName] = &[
    // ---- Tier 1 ----
    n(
        Vllm,
        QueueDepth,
        "vllm:num_requests_waiting",
        Current,
        "0.8–0.33",
        V,
    ),
    n(
        Sglang,
        QueueDepth,
        "sglang:num_queue_reqs",
        Current,
        "0.5.23",
        V,
    ),
    n(Tgi, QueueDepth, "tgi_queue_size", Current, "3.x", V),
    n(
        LlamaCpp,
        QueueDepth,
        "llamacpp:requests_deferred",
        Current,
        LLAMACPP,
        V,
    ),
    n(
        TrtLlm,
        QueueDepth,
        "trtllm_num_requests_waiting",
        Unverified,
        "secondary source",
        V,
    ),
    n(
        Vllm,
        Running,
        "vllm:num_requests_running",
        Current,
        "0.8–0.33",
        V,
    ),
    n(
        Sglang,
        Running,
        "sglang:num_running_reqs",
        Current,
        "0.5.23",
        V,
    ),
    n(Tgi, Running, "tgi_batch_current_size", Current, "3.x", V),
    n(
        LlamaCpp,
        Running,
        "llamacpp:requests_processing",
        Current,
        LLAMACPP,
        V,
    ),
    n(
        TrtLlm,
        Running,
        "trtllm_num_requests_running",
        Unverified,
        "secondary source",
        V,
    ),
    f(
        Vllm,
        RequestsOk,
        "vllm:request_success_total",
        Current,
        "0.8–0.33",
        ("finished_reason", VLLM_OK_REASONS),
    ),
    n(
        Sglang,
        RequestsOk,
        "sglang:num_requests_total",
        Current,
        "0.5.23 (includes aborted)",
        V,
    ),
    n(Tgi, RequestsOk, "tgi_request_success", Current, "3.x", V),
    f(
        TrtLlm,
        RequestsOk,
        "trtllm_request_success_total",
        Unverified,
        "secondary source",
        ("finished_reason", &["stop", "length"]),
    ),
    f(
        Vllm,
        RequestsAborted,
        "vllm:request_success_total",
        Current,
        "0.8–0.33",
        ("finished_reason", &["abort"]),
    ),
    n(
        Sglang,
        RequestsAborted,
        "sglang:num_aborted_requests_total",
        Current,
        "0.5.23",
        V,
    ),
    f(
        Vllm,
        RequestsErrored,
        "vllm:request_success_total",
        Current,
        "0.30–0.33 (finished_reason=error)",
        ("finished_reason", &["error"]),
    ),
    n(
        Tgi,
        RequestsErrored,
        "tgi_request_failure",
        Current,
        "3.x",
        V,
    ),
    n(
        Vllm,
        Ttft,
        "vllm:time_to_first_token_seconds",
        Current,
        "0.8–0.33",
        H,
    ),
    n(
        Sglang,
        Ttft,
        "sglang:time_to_first_token_seconds",
        Current,
        "0.5.23",
        H,
    ),
    n(
        TrtLlm,
        Ttft,
        "trtllm_time_to_first_token_seconds",
        Unverified,
        "secondary source",
        H,
    ),
    n(
        Vllm,
        Tpot,
        "vllm:request_time_per_output_token_seconds",
        Current,
        "0.11–0.33",
        H,
    ),
    n(
        Vllm,
        Tpot,
        "vllm:time_per_output_token_seconds",
        Deprecated,
        "0.8–0.14 (per token; removed 0.16)",
        H,
    ),
    n(
        Sglang,
        Tpot,
        "sglang:request_time_per_output_token_seconds",
        Current,
        "0.5.23",
        H,
    ),
    n(
        Sglang,
        Tpot,
        "sglang:time_per_output_token_seconds",
        Deprecated,
        "older SGLang",
        H,
    ),
    n(
        Tgi,
        Tpot,
        "tgi_request_mean_time_per_token_duration",
        Current,
        "3.x",
        H,
    ),
    n(
        TrtLlm,
        Tpot,
        "trtllm_time_per_output_token_seconds",
        Unverified,
        "secondary source",
        H,
    ),
    n(
        Vllm,
        Itl,
        "vllm:inter_token_latency_seconds",
        Current,
        "0.10.2–0.33",
        H,
    ),
    n(
        Vllm,
        Itl,
        "vllm:time_per_output_token_seconds",
        Deprecated,
        "0.8–0.14 (removed 0.16)",
        H,
    ),
    n(
        Sglang,
        Itl,
        "sglang:inter_token_latency_seconds",
        Current,
        "0.5.23",
        H,
    ),
    n(
        Vllm,
        E2eLatency,
        "vllm:e2e_request_latency_seconds",
        Current,
        "0.8–0.33",
        H,
    ),
    n(
        Sglang,
        E2eLatency,
        "sglang:e2e_request_latency_seconds",
        Current,
        "0.5.23",
        H,
    ),
    n(Tgi, E2eLatency, "tgi_request_duration", Current, "3.x", H),
    n(
        TrtLlm,
        E2eLatency,
        "trtllm_e2e_request_latency_seconds",
        Unverified,
        "secondary source",
        H,
    ),
    n(
        Vllm,
        QueueTime,
        "vllm:request_queue_time_seconds",
        Current,
        "0.8–0.33",
        H,
    ),
    n(
        Sglang,
        QueueTime,
        "sglang:queue_time_seconds",
        Current,
        "0.5.23",
        H,
    ),
    n(
        Tgi,
        QueueTime,
        "tgi_request_queue_duration",
        Current,
        "3.x",
        H,
    ),
    n(
        TrtLlm,
        QueueTime,
        "trtllm_request_queue_time_seconds",
        Unverified,
        "secondary source",
        H,
    ),
    // ---- Tier 2 ----
    n(
        Vllm,
        KvCacheUsage,
        "vllm:kv_cache_usage_perc",
        Current,
        "0.9.2–0.33",
        V,
    ),
    n(
        Vllm,
        KvCacheUsage,
        "vllm:gpu_cache_usage_perc",
        Deprecated,
        "0.8–0.11 (hidden 0.11, removed 0.12)",
        V,
    ),
    n(
        Sglang,
        KvCacheUsage,
        "sglang:token_usage",
        Current,
        "0.5.23",
        V,
    ),
    n(
        TrtLlm,
        KvCacheUsage,
        "trtllm_kv_cache_utilization",
        Unverified,
        "secondary source",
        V,
    ),
    n(
        Vllm,
        Preemptions,
        "vllm:num_preemptions_total",
        Current,
        "0.8–0.33",
        V,
    ),
    n(
        Sglang,
        Preemptions,
        "sglang:num_retracted_requests_total",
        Current,
        "0.5.23",
        V,
    ),
    n(
        Vllm,
        PrefixCacheQueries,
        "vllm:prefix_cache_queries_total",
        Current,
        "0.9.2–0.33",
        V,
    ),
    n(
        Vllm,
        PrefixCacheQueries,
        "vllm:gpu_prefix_cache_queries_total",
        Deprecated,
        "0.8–0.11 (hidden 0.11, removed 0.12)",
        V,
    ),
    n(
        Vllm,
        PrefixCacheHits,
        "vllm:prefix_cache_hits_total",
        Current,
        "0.9.2–0.33",
        V,
    ),
    n(
        Vllm,
        PrefixCacheHits,
        "vllm:gpu_prefix_cache_hits_total",
        Deprecated,
        "0.8–0.11 (hidden 0.11, removed 0.12)",
        V,
    ),
    n(
        Vllm,
        PromptTokens,
        "vllm:prompt_tokens_total",
        Current,
        "0.8–0.33",
        V,
    ),
    n(
        Sglang,
        PromptTokens,
        "sglang:prompt_tokens_total",
        Current,
        "0.5.23",
        V,
    ),
    n(
        Tgi,
        PromptTokens,
        "tgi_request_input_length",
        Current,
        "3.x (histogram sum)",
        HSum,
    ),
    n(
        LlamaCpp,
        PromptTokens,
        "llamacpp:prompt_tokens_total",
        Current,
        LLAMACPP,
        V,
    ),
    n(
        Vllm,
        GenerationTokens,
        "vllm:generation_tokens_total",
        Current,
        "0.8–0.33",
        V,
    ),
    n(
        Sglang,
        GenerationTokens,
        "sglang:generation_tokens_total",
        Current,
        "0.5.23",
        V,
    ),
    n(
        Tgi,
        GenerationTokens,
        "tgi_request_generated_tokens",
        Current,
        "3.x (histogram sum)",
        HSum,
    ),
    n(
        LlamaCpp,
        GenerationTokens,
        "llamacpp:tokens_predicted_total",
        Current,
        LLAMACPP,
        V,
    ),
    n(
        Vllm,
        IterationTokens,
        "vllm:iteration_tokens_total",
        Current,
        "0.8–0.33",
        H,
    ),
    // ---- Tier 3 ----
    n(
        Dcgm,
        GpuUtil,
        "DCGM_FI_DEV_GPU_UTIL",
        Current,
        "dcgm-exporter 2.x–4.x",
        V,
    ),
    n(
        Dcgm,
        GpuUtil,
        "dcgm_gpu_utilization",
        Deprecated,
        "--use-old-namespace",
        V,
    ),
    n(
        Dcgm,
        MemCopyUtil,
        "DCGM_FI_DEV_MEM_COPY_UTIL",
        Current,
        "dcgm-exporter 2.x–4.x",
        V,
    ),
    n(
        Dcgm,
        MemCopyUtil,
        "dcgm_mem_copy_utilization",
        Deprecated,
        "--use-old-namespace",
        V,
    ),
    n(
        Dcgm,
        FbUsed,
        "DCGM_FI_DEV_FB_USED",
        Current,
        "dcgm-exporter 2.x–4.x",
        V,
    ),
    n(
        Dcgm,
        FbUsed,
        "dcgm_fb_used",
        Deprecated,
        "--use-old-namespace",
        V,
    ),
    n(
        Dcgm,
        FbFree,
        "DCGM_FI_DEV_FB_FREE",
        Current,
        "dcgm-exporter 2.x–4.x",
        V,
    ),
    n(
        Dcgm,
        FbFree,
        "dcgm_fb_free",
        Deprecated,
        "--use-old-namespace",
        V,
    ),
    n(
        Dcgm,
        Power,
        "DCGM_FI_DEV_POWER_USAGE",
        Current,
        "dcgm-exporter 2.x–4.x",
        V,
    ),
    n(
        Dcgm,
        Power,
        "dcgm_power_usage",
        Deprecated,
        "--use-old-namespace",
        V,
    ),
    n(
        Dcgm,
        EccSbeVolatile,
        "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL",
        Current,
        "dcgm-exporter (not in the default counters)",
        V,
    ),
    n(
        Dcgm,
        EccSbeVolatile,
        "dcgm_ecc_sbe_volatile_total",
        Deprecated,
        "--use-old-namespace",
        V,
    ),
    n(
        Dcgm,
        SmClock,
        "DCGM_FI_DEV_SM_CLOCK",
        Current,
        "dcgm-exporter 2.x–4.x",
        V,
    ),
    n(
        Dcgm,
        SmClock,
        "dcgm_sm_clock",
        Deprecated,
        "--use-old-namespace",
        V,
    ),
    n(
        Dcgm,
        GpuTemp,
        "DCGM_FI_DEV_GPU_TEMP",
        Current,
        "dcgm-exporter 2.x–4.x",
        V,
    ),
    n(
        Dcgm,
        GpuTemp,
        "dcgm_gpu_temp",
        Deprecated,
        "--use-old-namespace",
        V,
    ),
];

/// The names for a signal, in preference order.
///
/// ```
/// use inferscale_catalog::{names_for, NameStatus, Signal};
/// let kv: Vec<_> = names_for(Signal::KvCacheUsage).map(|n| (n.name, n.status)).collect();
/// assert_eq!(kv[0], ("vllm:kv_cache_usage_perc", NameStatus::Current));
/// assert_eq!(kv[1], ("vllm:gpu_cache_usage_perc", NameStatus::Deprecated));
/// ```
pub fn names_for(signal: Signal) -> impl Iterator<Item = &'static MetricName> {
    NAMES.iter().filter(move |m| m.signal == signal)
}

/// One engine's names for a signal, in preference order.
pub fn names_of(engine: Engine, signal: Signal) -> impl Iterator<Item = &'static MetricName> {
    names_for(signal).filter(move |m| m.engine == engine)
}

/// DCGM label names that identify the host: released exporters up to 4.5.3-4.8.2 write
/// `Hostname`, newer builds `hostname`.
pub const DCGM_HOST_LABELS: &[&str] = &["Hostname", "hostname"];

/// DCGM writes "blank" sentinels (2147483632 for 32-bit fields, 9223372036854775794 and
/// neighbours for 64-bit ones) when a field is unsupported. No real reading of the fields
/// inferscale uses comes near this.
pub const DCGM_BLANK_THRESHOLD: f64 = 2_147_483_632.0;
