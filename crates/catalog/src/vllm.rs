//! vLLM 0.33's `/metrics`: every `vllm:` family the V1 engine's stat logger registers by
//! default, with the exact HELP text, type, labels and bucket family (the simulator serves
//! these, and dashboards are checked against them).

use crate::buckets::BucketFamily;

/// How a family is exposed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MetricKind {
    /// A counter (exposed with `_total`).
    Counter,
    /// A gauge.
    Gauge,
    /// A classic histogram.
    Histogram,
}

/// One vLLM metric family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VllmFamily {
    /// The exposed name (counters with `_total`).
    pub name: &'static str,
    /// Counter, gauge or histogram.
    pub kind: MetricKind,
    /// The HELP text, exactly.
    pub help: &'static str,
    /// Whether the family carries the `engine` label (all but `admission_rejections`).
    pub engine_label: bool,
    /// Labels besides `engine` and `model_name`.
    pub extra_labels: &'static [&'static str],
    /// The bucket family of a histogram.
    pub buckets: Option<BucketFamily>,
}

/// The families of vLLM 0.33.0 in the order its `/metrics` lists them (`cache_config_info`,
/// whose labels are the engine's whole cache configuration, is described separately).
pub static FAMILIES: &[VllmFamily] = &[
    VllmFamily {
        name: "vllm:estimated_flops_per_gpu_total",
        kind: MetricKind::Counter,
        help: "Estimated number of floating point operations per GPU (for Model Flops Utilization calculations).",
        engine_label: true,
        extra_labels: &[],
        buckets: None,
    },
    VllmFamily {
        name: "vllm:estimated_read_bytes_per_gpu_total",
        kind: MetricKind::Counter,
        help: "Estimated number of bytes read from memory per GPU (for Model Flops Utilization calculations).",
        engine_label: true,
        extra_labels: &[],
        buckets: None,
    },
    VllmFamily {
        name: "vllm:estimated_write_bytes_per_gpu_total",
        kind: MetricKind::Counter,
        help: "Estimated number of bytes written to memory per GPU (for Model Flops Utilization calculations).",
        engine_label: true,
        extra_labels: &[],
        buckets: None,
    },
    VllmFamily {
        name: "vllm:num_requests_running",
        kind: MetricKind::Gauge,
        help: "Number of requests in model execution batches.",
        engine_label: true,
        extra_labels: &[],
        buckets: None,
    },
    VllmFamily {
        name: "vllm:num_requests_waiting",
        kind: MetricKind::Gauge,
        help: "Number of requests waiting to be processed.",
        engine_label: true,
        extra_labels: &[],
        buckets: None,
    },
    VllmFamily {
        name: "vllm:num_requests_waiting_by_reason",
        kind: MetricKind::Gauge,
        help: "Number of waiting requests by reason. Reason labels: 'capacity' = waiting for scheduling capacity; 'deferred' = deferred by transient constraints (LoRA budget, KV transfer, blocked status). Sum of all reasons equals vllm:num_requests_waiting.",
        engine_label: true,
        extra_labels: &["reason"],
        buckets: None,
    },
    VllmFamily {
        name: "vllm:engine_sleep_state",
        kind: MetricKind::Gauge,
        help: "Engine sleep state; awake = 0 means engine is sleeping; awake = 1 means engine is awake; weights_offloaded = 1 means sleep level 1; discard_all = 1 means sleep level 2.",
        engine_label: true,
        extra_labels: &["sleep_state"],
        buckets: None,
    },
    VllmFamily {
        name: "vllm:kv_cache_usage_perc",
        kind: MetricKind::Gauge,
        help: "KV-cache usage. 1 means 100 percent usage.",
        engine_label: true,
        extra_labels: &[],
        buckets: None,
    },
    VllmFamily {
        name: "vllm:prefix_cache_queries_total",
        kind: MetricKind::Counter,
        help: "Prefix cache queries, in terms of number of queried tokens.",
        engine_label: true,
        extra_labels: &[],
        buckets: None,
    },
    VllmFamily {
        name: "vllm:prefix_cache_hits_total",
        kind: MetricKind::Counter,
        help: "Prefix cache hits, in terms of number of cached tokens.",
        engine_label: true,
        extra_labels: &[],
        buckets: None,
    },
    VllmFamily {
        name: "vllm:external_prefix_cache_queries_total",
        kind: MetricKind::Counter,
        help: "External prefix cache queries from KV connector cross-instance cache sharing, in terms of number of queried tokens.",
        engine_label: true,
        extra_labels: &[],
        buckets: None,
    },
    VllmFamily {
        name: "vllm:external_prefix_cache_hits_total",
        kind: MetricKind::Counter,
        help: "External prefix cache hits from KV connector cross-instance cache sharing, in terms of number of cached tokens.",
        engine_label: true,
        extra_labels: &[],
        buckets: None,
    },
    VllmFamily {
        name: "vllm:mm_cache_queries_total",
        kind: MetricKind::Counter,
        help: "Multi-modal cache queries, in terms of number of queried items.",
        engine_label: true,
        extra_labels: &[],
        buckets: None,
    },
    VllmFamily {
        name: "vllm:mm_cache_hits_total",
        kind: MetricKind::Counter,
        help: "Multi-modal cache hits, in terms of number of cached items.",
        engine_label: true,
        extra_labels: &[],
        buckets: None,
    },
    VllmFamily {
        name: "vllm:num_preemptions_total",
        kind: MetricKind::Counter,
        help: "Cumulative number of preemption from the engine.",
        engine_label: true,
        extra_labels: &[],
        buckets: None,
    },
    VllmFamily {
        name: "vllm:prompt_tokens_total",
        kind: MetricKind::Counter,
        help: "Number of prefill tokens processed.",
        engine_label: true,
        extra_labels: &[],
        buckets: None,
    },
    VllmFamily {
        name: "vllm:prompt_tokens_by_source_total",
        kind: MetricKind::Counter,
        help: "Number of prompt tokens by source.",
        engine_label: true,
        extra_labels: &["source"],
        buckets: None,
    },
    VllmFamily {
        name: "vllm:prompt_tokens_cached_total",
        kind: MetricKind::Counter,
        help: "Number of cached prompt tokens (local + external).",
        engine_label: true,
        extra_labels: &[],
        buckets: None,
    },
    VllmFamily {
        name: "vllm:prompt_tokens_cached_by_source_total",
        kind: MetricKind::Counter,
        help: "Prefix-cache hit tokens by the cache tier that supplied them: device (local HBM), host (offloaded to DRAM), disk, p2p (transferred from another vLLM instance) or external_unspecified. Counted at admission; sums to vllm:prefix_cache_hits + vllm:external_prefix_cache_hits.",
        engine_label: true,
        extra_labels: &["source"],
        buckets: None,
    },
    VllmFamily {
        name: "vllm:generation_tokens_total",
        kind: MetricKind::Counter,
        help: "Number of generation tokens processed.",
        engine_label: true,
        extra_labels: &[],
        buckets: None,
    },
    VllmFamily {
        name: "vllm:request_success_total",
        kind: MetricKind::Counter,
        help: "Count of successfully processed requests.",
        engine_label: true,
        extra_labels: &["finished_reason"],
        buckets: None,
    },
    VllmFamily {
        name: "vllm:admission_rejections_total",
        kind: MetricKind::Counter,
        help: "Number of admission attempts rejected by a queue limit, by reason.",
        engine_label: false,
        extra_labels: &["reason"],
        buckets: None,
    },
    VllmFamily {
        name: "vllm:request_prompt_tokens",
        kind: MetricKind::Histogram,
        help: "Number of prefill tokens processed.",
        engine_label: true,
        extra_labels: &[],
        buckets: Some(BucketFamily::RequestTokens),
    },
    VllmFamily {
        name: "vllm:request_generation_tokens",
        kind: MetricKind::Histogram,
        help: "Number of generation tokens processed.",
        engine_label: true,
        extra_labels: &[],
        buckets: Some(BucketFamily::RequestTokens),
    },
    VllmFamily {
        name: "vllm:iteration_tokens_total",
        kind: MetricKind::Histogram,
        help: "Histogram of number of tokens per engine_step.",
        engine_label: true,
        extra_labels: &[],
        buckets: Some(BucketFamily::IterationTokens),
    },
    VllmFamily {
        name: "vllm:request_max_num_generation_tokens",
        kind: MetricKind::Histogram,
        help: "Histogram of maximum number of requested generation tokens.",
        engine_label: true,
        extra_labels: &[],
        buckets: Some(BucketFamily::RequestTokens),
    },
    VllmFamily {
        name: "vllm:request_params_n",
        kind: MetricKind::Histogram,
        help: "Histogram of the n request parameter.",
        engine_label: true,
        extra_labels: &[],
        buckets: Some(BucketFamily::RequestParamsN),
    },
    VllmFamily {
        name: "vllm:request_params_max_tokens",
        kind: MetricKind::Histogram,
        help: "Histogram of the max_tokens request parameter.",
        engine_label: true,
        extra_labels: &[],
        buckets: Some(BucketFamily::RequestTokens),
    },
    VllmFamily {
        name: "vllm:time_to_first_token_seconds",
        kind: MetricKind::Histogram,
        help: "Histogram of time to first token in seconds.",
        engine_label: true,
        extra_labels: &[],
        buckets: Some(BucketFamily::TimeToFirstToken),
    },
    VllmFamily {
        name: "vllm:inter_token_latency_seconds",
        kind: MetricKind::Histogram,
        help: "Histogram of inter-token latency in seconds.",
        engine_label: true,
        extra_labels: &[],
        buckets: Some(BucketFamily::InterTokenLatency),
    },
    VllmFamily {
        name: "vllm:request_time_per_output_token_seconds",
        kind: MetricKind::Histogram,
        help: "Histogram of time_per_output_token_seconds per request.",
        engine_label: true,
        extra_labels: &[],
        buckets: Some(BucketFamily::InterTokenLatency),
    },
    VllmFamily {
        name: "vllm:e2e_request_latency_seconds",
        kind: MetricKind::Histogram,
        help: "Histogram of e2e request latency in seconds.",
        engine_label: true,
        extra_labels: &[],
        buckets: Some(BucketFamily::RequestLatency),
    },
    VllmFamily {
        name: "vllm:request_queue_time_seconds",
        kind: MetricKind::Histogram,
        help: "Histogram of time spent in WAITING phase for request.",
        engine_label: true,
        extra_labels: &[],
        buckets: Some(BucketFamily::RequestLatency),
    },
    VllmFamily {
        name: "vllm:request_inference_time_seconds",
        kind: MetricKind::Histogram,
        help: "Histogram of time spent in RUNNING phase for request.",
        engine_label: true,
        extra_labels: &[],
        buckets: Some(BucketFamily::RequestLatency),
    },
    VllmFamily {
        name: "vllm:request_prefill_time_seconds",
        kind: MetricKind::Histogram,
        help: "Histogram of time spent in PREFILL phase for request.",
        engine_label: true,
        extra_labels: &[],
        buckets: Some(BucketFamily::RequestLatency),
    },
    VllmFamily {
        name: "vllm:request_decode_time_seconds",
        kind: MetricKind::Histogram,
        help: "Histogram of time spent in DECODE phase for request.",
        engine_label: true,
        extra_labels: &[],
        buckets: Some(BucketFamily::RequestLatency),
    },
    VllmFamily {
        name: "vllm:request_num_preemptions",
        kind: MetricKind::Histogram,
        help: "Histogram of the number of times a request was preempted.",
        engine_label: true,
        extra_labels: &[],
        buckets: Some(BucketFamily::RequestNumPreemptions),
    },
    VllmFamily {
        name: "vllm:request_prefill_kv_computed_tokens",
        kind: MetricKind::Histogram,
        help: "Histogram of new KV tokens computed during prefill (excluding cached tokens).",
        engine_label: true,
        extra_labels: &[],
        buckets: Some(BucketFamily::RequestTokens),
    },
];

/// The family called `name` (as exposed), if vLLM 0.33 has it.
pub fn family(name: &str) -> Option<&'static VllmFamily> {
    FAMILIES.iter().find(|f| f.name == name)
}

/// The labels of `vllm:cache_config_info` that consumers read (the Gateway API inference
/// extension reads `block_size` and `num_gpu_blocks`); a simulator should emit at least these.
pub const CACHE_CONFIG_INFO_LABELS: &[&str] = &[
    "block_size",
    "cache_dtype",
    "enable_prefix_caching",
    "gpu_memory_utilization",
    "num_gpu_blocks",
];

/// vLLM's `finished_reason` label values, all pre-created at zero for every engine.
pub const FINISH_REASONS: &[&str] = &["stop", "length", "abort", "error", "repetition"];
