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
    /// What the family reports, for whoever turns engine statistics into series (the
    /// simulator): matched exhaustively there, so no family can fall through to a silent
    /// zero and a renamed one keeps its value.
    pub value: Value,
}

/// What a vLLM family reports, in terms of what an engine counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Value {
    /// Requests in the running batch.
    Running,
    /// Requests waiting.
    Waiting,
    /// Requests waiting, by `reason`: all of them for `capacity` (the only wait modelled).
    WaitingByReason,
    /// `1` for `sleep_state="awake"`, `0` for the other states (the engine never sleeps).
    SleepState,
    /// KV-cache usage, 0–1.
    KvCacheUsage,
    /// Prompt tokens looked up in the prefix cache.
    PrefixCacheQueries,
    /// Prompt tokens found in the prefix cache.
    PrefixCacheHits,
    /// Preemptions.
    Preemptions,
    /// Prompt tokens processed.
    PromptTokens,
    /// Prompt tokens by `source`: all of them `local_compute` (no prefix cache, no KV
    /// transfer).
    PromptTokensBySource,
    /// Generated tokens.
    GenerationTokens,
    /// Finished requests by `finished_reason`.
    FinishedByReason,
    /// One of the engine's histograms.
    Histogram(EngineHistogram),
    /// Something vLLM counts that the engine model does not (multimodal and external caches, FLOP and byte estimates, admission rejections): served as zero,
    /// on purpose, so that dashboards find the family.
    NotModelled,
}

/// The engine's histograms, each in its vLLM bucket layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EngineHistogram {
    /// Prompt length per request.
    PromptTokens,
    /// Output length per request.
    GenerationTokens,
    /// Tokens per engine step.
    IterationTokens,
    /// `max_tokens` per request.
    MaxTokens,
    /// `n` per request.
    ParamsN,
    /// Time to first token.
    TimeToFirstToken,
    /// Gaps between tokens.
    InterTokenLatency,
    /// Decode time per output token, per request.
    TimePerOutputToken,
    /// Arrival to finish.
    EndToEnd,
    /// Waiting in the queue.
    QueueTime,
    /// First scheduled to finish.
    InferenceTime,
    /// First scheduled to first token.
    PrefillTime,
    /// First token to finish.
    DecodeTime,
    /// Preemptions per request.
    Preemptions,
    /// Prompt tokens computed (not cached) per request.
    PrefillKvComputed,
}

impl EngineHistogram {
    /// Every histogram, in declaration order.
    pub const ALL: [EngineHistogram; 15] = [
        EngineHistogram::PromptTokens,
        EngineHistogram::GenerationTokens,
        EngineHistogram::IterationTokens,
        EngineHistogram::MaxTokens,
        EngineHistogram::ParamsN,
        EngineHistogram::TimeToFirstToken,
        EngineHistogram::InterTokenLatency,
        EngineHistogram::TimePerOutputToken,
        EngineHistogram::EndToEnd,
        EngineHistogram::QueueTime,
        EngineHistogram::InferenceTime,
        EngineHistogram::PrefillTime,
        EngineHistogram::DecodeTime,
        EngineHistogram::Preemptions,
        EngineHistogram::PrefillKvComputed,
    ];
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
        value: Value::NotModelled,
    },
    VllmFamily {
        name: "vllm:estimated_read_bytes_per_gpu_total",
        kind: MetricKind::Counter,
        help: "Estimated number of bytes read from memory per GPU (for Model Flops Utilization calculations).",
        engine_label: true,
        extra_labels: &[],
        buckets: None,
        value: Value::NotModelled,
    },
    VllmFamily {
        name: "vllm:estimated_write_bytes_per_gpu_total",
        kind: MetricKind::Counter,
        help: "Estimated number of bytes written to memory per GPU (for Model Flops Utilization calculations).",
        engine_label: true,
        extra_labels: &[],
        buckets: None,
        value: Value::NotModelled,
    },
    VllmFamily {
        name: "vllm:num_requests_running",
        kind: MetricKind::Gauge,
        help: "Number of requests in model execution batches.",
        engine_label: true,
        extra_labels: &[],
        buckets: None,
        value: Value::Running,
    },
    VllmFamily {
        name: "vllm:num_requests_waiting",
        kind: MetricKind::Gauge,
        help: "Number of requests waiting to be processed.",
        engine_label: true,
        extra_labels: &[],
        buckets: None,
        value: Value::Waiting,
    },
    VllmFamily {
        name: "vllm:num_requests_waiting_by_reason",
        kind: MetricKind::Gauge,
        help: "Number of waiting requests by reason. Reason labels: 'capacity' = waiting for scheduling capacity; 'deferred' = deferred by transient constraints (LoRA budget, KV transfer, blocked status). Sum of all reasons equals vllm:num_requests_waiting.",
        engine_label: true,
        extra_labels: &["reason"],
        buckets: None,
        value: Value::WaitingByReason,
    },
    VllmFamily {
        name: "vllm:engine_sleep_state",
        kind: MetricKind::Gauge,
        help: "Engine sleep state; awake = 0 means engine is sleeping; awake = 1 means engine is awake; weights_offloaded = 1 means sleep level 1; discard_all = 1 means sleep level 2.",
        engine_label: true,
        extra_labels: &["sleep_state"],
        buckets: None,
        value: Value::SleepState,
    },
    VllmFamily {
        name: "vllm:kv_cache_usage_perc",
        kind: MetricKind::Gauge,
        help: "KV-cache usage. 1 means 100 percent usage.",
        engine_label: true,
        extra_labels: &[],
        buckets: None,
        value: Value::KvCacheUsage,
    },
    VllmFamily {
        name: "vllm:prefix_cache_queries_total",
        kind: MetricKind::Counter,
        help: "Prefix cache queries, in terms of number of queried tokens.",
        engine_label: true,
        extra_labels: &[],
        buckets: None,
        value: Value::PrefixCacheQueries,
    },
    VllmFamily {
        name: "vllm:prefix_cache_hits_total",
        kind: MetricKind::Counter,
        help: "Prefix cache hits, in terms of number of cached tokens.",
        engine_label: true,
        extra_labels: &[],
        buckets: None,
        value: Value::PrefixCacheHits,
    },
    VllmFamily {
        name: "vllm:external_prefix_cache_queries_total",
        kind: MetricKind::Counter,
        help: "External prefix cache queries from KV connector cross-instance cache sharing, in terms of number of queried tokens.",
        engine_label: true,
        extra_labels: &[],
        buckets: None,
        value: Value::NotModelled,
    },
    VllmFamily {
        name: "vllm:external_prefix_cache_hits_total",
        kind: MetricKind::Counter,
        help: "External prefix cache hits from KV connector cross-instance cache sharing, in terms of number of cached tokens.",
        engine_label: true,
        extra_labels: &[],
        buckets: None,
        value: Value::NotModelled,
    },
    VllmFamily {
        name: "vllm:mm_cache_queries_total",
        kind: MetricKind::Counter,
        help: "Multi-modal cache queries, in terms of number of queried items.",
        engine_label: true,
        extra_labels: &[],
        buckets: None,
        value: Value::NotModelled,
    },
    VllmFamily {
        name: "vllm:mm_cache_hits_total",
        kind: MetricKind::Counter,
        help: "Multi-modal cache hits, in terms of number of cached items.",
        engine_label: true,
        extra_labels: &[],
        buckets: None,
        value: Value::NotModelled,
    },
    VllmFamily {
        name: "vllm:num_preemptions_total",
        kind: MetricKind::Counter,
        help: "Cumulative number of preemption from the engine.",
        engine_label: true,
        extra_labels: &[],
        buckets: None,
        value: Value::Preemptions,
    },
    VllmFamily {
        name: "vllm:prompt_tokens_total",
        kind: MetricKind::Counter,
        help: "Number of prefill tokens processed.",
        engine_label: true,
        extra_labels: &[],
        buckets: None,
        value: Value::PromptTokens,
    },
    VllmFamily {
        name: "vllm:prompt_tokens_by_source_total",
        kind: MetricKind::Counter,
        help: "Number of prompt tokens by source.",
        engine_label: true,
        extra_labels: &["source"],
        buckets: None,
        value: Value::PromptTokensBySource,
    },
    VllmFamily {
        name: "vllm:prompt_tokens_cached_total",
        kind: MetricKind::Counter,
        help: "Number of cached prompt tokens (local + external).",
        engine_label: true,
        extra_labels: &[],
        buckets: None,
        value: Value::NotModelled,
    },
    VllmFamily {
        name: "vllm:prompt_tokens_cached_by_source_total",
        kind: MetricKind::Counter,
        help: "Prefix-cache hit tokens by the cache tier that supplied them: device (local HBM), host (offloaded to DRAM), disk, p2p (transferred from another vLLM instance) or external_unspecified. Counted at admission; sums to vllm:prefix_cache_hits + vllm:external_prefix_cache_hits.",
        engine_label: true,
        extra_labels: &["source"],
        buckets: None,
        value: Value::NotModelled,
    },
    VllmFamily {
        name: "vllm:generation_tokens_total",
        kind: MetricKind::Counter,
        help: "Number of generation tokens processed.",
        engine_label: true,
        extra_labels: &[],
        buckets: None,
        value: Value::GenerationTokens,
    },
    VllmFamily {
        name: "vllm:request_success_total",
        kind: MetricKind::Counter,
        help: "Count of successfully processed requests.",
        engine_label: true,
        extra_labels: &["finished_reason"],
        buckets: None,
        value: Value::FinishedByReason,
    },
    VllmFamily {
        name: "vllm:admission_rejections_total",
        kind: MetricKind::Counter,
        help: "Number of admission attempts rejected by a queue limit, by reason.",
        engine_label: false,
        extra_labels: &["reason"],
        buckets: None,
        value: Value::NotModelled,
    },
    VllmFamily {
        name: "vllm:request_prompt_tokens",
        kind: MetricKind::Histogram,
        help: "Number of prefill tokens processed.",
        engine_label: true,
        extra_labels: &[],
        buckets: Some(BucketFamily::RequestTokens),
        value: Value::Histogram(EngineHistogram::PromptTokens),
    },
    VllmFamily {
        name: "vllm:request_generation_tokens",
        kind: MetricKind::Histogram,
        help: "Number of generation tokens processed.",
        engine_label: true,
        extra_labels: &[],
        buckets: Some(BucketFamily::RequestTokens),
        value: Value::Histogram(EngineHistogram::GenerationTokens),
    },
    VllmFamily {
        name: "vllm:iteration_tokens_total",
        kind: MetricKind::Histogram,
        help: "Histogram of number of tokens per engine_step.",
        engine_label: true,
        extra_labels: &[],
        buckets: Some(BucketFamily::IterationTokens),
        value: Value::Histogram(EngineHistogram::IterationTokens),
    },
    VllmFamily {
        name: "vllm:request_max_num_generation_tokens",
        kind: MetricKind::Histogram,
        help: "Histogram of maximum number of requested generation tokens.",
        engine_label: true,
        extra_labels: &[],
        buckets: Some(BucketFamily::RequestTokens),
        value: Value::Histogram(EngineHistogram::MaxTokens),
    },
    VllmFamily {
        name: "vllm:request_params_n",
        kind: MetricKind::Histogram,
        help: "Histogram of the n request parameter.",
        engine_label: true,
        extra_labels: &[],
        buckets: Some(BucketFamily::RequestParamsN),
        value: Value::Histogram(EngineHistogram::ParamsN),
    },
    VllmFamily {
        name: "vllm:request_params_max_tokens",
        kind: MetricKind::Histogram,
        help: "Histogram of the max_tokens request parameter.",
        engine_label: true,
        extra_labels: &[],
        buckets: Some(BucketFamily::RequestTokens),
        value: Value::Histogram(EngineHistogram::MaxTokens),
    },
    VllmFamily {
        name: "vllm:time_to_first_token_seconds",
        kind: MetricKind::Histogram,
        help: "Histogram of time to first token in seconds.",
        engine_label: true,
        extra_labels: &[],
        buckets: Some(BucketFamily::TimeToFirstToken),
        value: Value::Histogram(EngineHistogram::TimeToFirstToken),
    },
    VllmFamily {
        name: "vllm:inter_token_latency_seconds",
        kind: MetricKind::Histogram,
        help: "Histogram of inter-token latency in seconds.",
        engine_label: true,
        extra_labels: &[],
        buckets: Some(BucketFamily::InterTokenLatency),
        value: Value::Histogram(EngineHistogram::InterTokenLatency),
    },
    VllmFamily {
        name: "vllm:request_time_per_output_token_seconds",
        kind: MetricKind::Histogram,
        help: "Histogram of time_per_output_token_seconds per request.",
        engine_label: true,
        extra_labels: &[],
        buckets: Some(BucketFamily::InterTokenLatency),
        value: Value::Histogram(EngineHistogram::TimePerOutputToken),
    },
    VllmFamily {
        name: "vllm:e2e_request_latency_seconds",
        kind: MetricKind::Histogram,
        help: "Histogram of e2e request latency in seconds.",
        engine_label: true,
        extra_labels: &[],
        buckets: Some(BucketFamily::RequestLatency),
        value: Value::Histogram(EngineHistogram::EndToEnd),
    },
    VllmFamily {
        name: "vllm:request_queue_time_seconds",
        kind: MetricKind::Histogram,
        help: "Histogram of time spent in WAITING phase for request.",
        engine_label: true,
        extra_labels: &[],
        buckets: Some(BucketFamily::RequestLatency),
        value: Value::Histogram(EngineHistogram::QueueTime),
    },
    VllmFamily {
        name: "vllm:request_inference_time_seconds",
        kind: MetricKind::Histogram,
        help: "Histogram of time spent in RUNNING phase for request.",
        engine_label: true,
        extra_labels: &[],
        buckets: Some(BucketFamily::RequestLatency),
        value: Value::Histogram(EngineHistogram::InferenceTime),
    },
    VllmFamily {
        name: "vllm:request_prefill_time_seconds",
        kind: MetricKind::Histogram,
        help: "Histogram of time spent in PREFILL phase for request.",
        engine_label: true,
        extra_labels: &[],
        buckets: Some(BucketFamily::RequestLatency),
        value: Value::Histogram(EngineHistogram::PrefillTime),
    },
    VllmFamily {
        name: "vllm:request_decode_time_seconds",
        kind: MetricKind::Histogram,
        help: "Histogram of time spent in DECODE phase for request.",
        engine_label: true,
        extra_labels: &[],
        buckets: Some(BucketFamily::RequestLatency),
        value: Value::Histogram(EngineHistogram::DecodeTime),
    },
    VllmFamily {
        name: "vllm:request_num_preemptions",
        kind: MetricKind::Histogram,
        help: "Histogram of the number of times a request was preempted.",
        engine_label: true,
        extra_labels: &[],
        buckets: Some(BucketFamily::RequestNumPreemptions),
        value: Value::Histogram(EngineHistogram::Preemptions),
    },
    VllmFamily {
        name: "vllm:request_prefill_kv_computed_tokens",
        kind: MetricKind::Histogram,
        help: "Histogram of new KV tokens computed during prefill (excluding cached tokens).",
        engine_label: true,
        extra_labels: &[],
        buckets: Some(BucketFamily::RequestTokens),
        value: Value::Histogram(EngineHistogram::PrefillKvComputed),
    },
];

/// The family called `name` (as exposed), if vLLM 0.33 has it.
pub fn family(name: &str) -> Option<&'static VllmFamily> {
    FAMILIES.iter().find(|f| f.name == name)
}

/// A family a newer vLLM serves than the 0.33 the simulator models: known, so that a query
/// reading it is not taken for a removed name, but not served by the simulator.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NewerFamily {
    /// The exposed name.
    pub name: &'static str,
    /// The release that added it.
    pub since: &'static str,
    /// Its type.
    pub kind: MetricKind,
    /// Its HELP text, exactly.
    pub help: &'static str,
    /// Its labels.
    pub labels: &'static [&'static str],
    /// A histogram's bucket bounds (without `+Inf`).
    pub buckets: &'static [f64],
}

/// The families vLLM 0.34 added (from its `vllm/renderers/metrics.py`). Registered lazily:
/// served from the first rendered request on.
pub static NEWER_FAMILIES: &[NewerFamily] = &[NewerFamily {
    name: "vllm:request_render_duration_seconds",
    since: "0.34",
    kind: MetricKind::Histogram,
    help: "Time spent rendering a request, including chat templating, tokenization, and multimodal preprocessing.",
    labels: &["model_name", "request_type"],
    buckets: &[
        0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
        5.0, 10.0,
    ],
}];

/// The prefixes of the families vLLM's KV connectors and offload backends add (Mooncake,
/// 3FS, the native and simple CPU offload, …): their names vary by backend and release, so
/// they are known by prefix.
pub const KV_TRANSFER_PREFIXES: &[&str] = &[
    "vllm:kv_offload_",
    "vllm:simple_kv_offload_",
    "vllm:mooncake_",
    "vllm:hf3fs_",
    "vllm:hisparse_",
    "vllm:umbp_",
];

/// Whether `name` (a family or one of its samples) is a family of a vLLM newer than 0.33,
/// or of a KV connector or offload backend.
pub fn is_newer_or_kv_transfer(name: &str) -> bool {
    let base = ["_bucket", "_sum", "_count", "_total", "_created"]
        .iter()
        .find_map(|s| name.strip_suffix(s))
        .unwrap_or(name);
    NEWER_FAMILIES
        .iter()
        .any(|f| f.name == base || f.name == name)
        || KV_TRANSFER_PREFIXES.iter().any(|p| name.starts_with(p))
}

/// The info family whose labels are the engine's cache configuration (`block_size`,
/// `num_gpu_blocks`, …; one sample, value 1).
pub const CACHE_CONFIG_INFO_NAME: &str = "vllm:cache_config_info";

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
/// The HTTP server's request counter (prometheus-fastapi-instrumentator), labels `handler`,
/// `method` and `status` (grouped: `2xx`, `5xx`).
pub const HTTP_REQUESTS: &str = "http_requests_total";

/// The finish reasons.
pub const FINISH_REASONS: &[&str] = &["stop", "length", "abort", "error", "repetition"];

/// The families vLLM's API server exposes besides its own: the Python client's process and
/// runtime collectors and prometheus-fastapi-instrumentator's HTTP metrics, as
/// `(name, type, HELP)` in the order vLLM 0.33 lists them (single-API-server mode).
pub static RUNTIME_FAMILIES: &[(&str, &str, &str)] = &[
    (
        "python_gc_objects_collected_total",
        "counter",
        "Objects collected during gc",
    ),
    (
        "python_gc_objects_uncollectable_total",
        "counter",
        "Uncollectable objects found during GC",
    ),
    (
        "python_gc_collections_total",
        "counter",
        "Number of times this generation was collected",
    ),
    ("python_info", "gauge", "Python platform information"),
    (
        "process_virtual_memory_bytes",
        "gauge",
        "Virtual memory size in bytes.",
    ),
    (
        "process_resident_memory_bytes",
        "gauge",
        "Resident memory size in bytes.",
    ),
    (
        "process_start_time_seconds",
        "gauge",
        "Start time of the process since unix epoch in seconds.",
    ),
    (
        "process_cpu_seconds_total",
        "counter",
        "Total user and system CPU time spent in seconds.",
    ),
    (
        "process_open_fds",
        "gauge",
        "Number of open file descriptors.",
    ),
    (
        "process_max_fds",
        "gauge",
        "Maximum number of open file descriptors.",
    ),
    (
        "http_requests_total",
        "counter",
        "Total number of requests by method, status and handler.",
    ),
    (
        "http_request_size_bytes",
        "summary",
        "Content length of incoming requests by handler. Only value of header is respected. Otherwise ignored. No percentile calculated. ",
    ),
    (
        "http_response_size_bytes",
        "summary",
        "Content length of outgoing responses by handler. Only value of header is respected. Otherwise ignored. No percentile calculated. ",
    ),
    (
        "http_request_duration_highr_seconds",
        "histogram",
        "Latency with many buckets but no API specific labels. Made for more accurate percentile calculations. ",
    ),
    (
        "http_request_duration_seconds",
        "histogram",
        "Latency with only few buckets by handler. Made to be only used if aggregation by handler is important. ",
    ),
];

/// Every label of `vllm:cache_config_info` in vLLM 0.33 (one per `CacheConfig` field, plus
/// `engine`) with the value a default configuration shows; a server fills in its own
/// `block_size`, `num_gpu_blocks`, `gpu_memory_utilization`, `cache_dtype` and
/// `enable_prefix_caching`.
pub static CACHE_CONFIG_INFO: &[(&str, &str)] = &[
    ("_block_size_resolved", "True"),
    ("block_size", "16"),
    ("cache_dtype", "auto"),
    ("cache_hit_alignment_tokens", "None"),
    ("effective_attention_block_size", "None"),
    ("enable_mamba_shared_prefix_checkpoint", "False"),
    ("enable_prefix_caching", "True"),
    ("engine", "0"),
    ("gpu_memory_utilization", "0.92"),
    ("hash_block_size", "None"),
    ("is_attention_free", "False"),
    ("kv_cache_dtype_skip_layers", "[]"),
    ("kv_cache_layout", "None"),
    ("kv_cache_max_concurrency", "None"),
    ("kv_cache_memory_bytes", "None"),
    ("kv_cache_size_tokens", "None"),
    ("kv_offloading_backend", "native"),
    ("kv_offloading_size", "None"),
    ("kv_sharing_fast_prefill", "False"),
    ("mamba_block_size", "None"),
    ("mamba_cache_dtype", "auto"),
    ("mamba_cache_mode", "none"),
    ("mamba_page_size_padded", "None"),
    ("mamba_ssm_cache_dtype", "auto"),
    ("num_cpu_blocks", "0"),
    ("num_gpu_blocks", "27713"),
    ("num_gpu_blocks_override", "None"),
    ("prefix_cache_retention_interval", "0"),
    ("prefix_caching_hash_algo", "sha256"),
    ("prefix_match_unit", "None"),
    ("replayssm_buffer_len", "16"),
    ("simple_cpu_offload_num_blocks", "None"),
    ("skip_page_size_padded", "None"),
    ("sliding_window", "None"),
    ("swa_bounded_replay", "True"),
    ("use_kda_recoverssm", "False"),
    ("use_replayssm", "False"),
    ("user_specified_block_size", "False"),
];

/// The families older vLLM served that 0.33 no longer does, with the family that replaced each
/// (`--show-deprecated-metrics` serves them as vLLM 0.10 did, "DEPRECATED" HELP included).
/// Source: the renames table (vLLM sdists 0.9.2–0.16.0).
pub static DEPRECATED_FAMILIES: &[(VllmFamily, &str)] = &[
    (
        VllmFamily {
            name: "vllm:gpu_cache_usage_perc",
            kind: MetricKind::Gauge,
            help: "GPU KV-cache usage. 1 means 100 percent usage. DEPRECATED: Use vllm:kv_cache_usage_perc instead.",
            engine_label: true,
            extra_labels: &[],
            buckets: None,
            value: Value::KvCacheUsage,
        },
        "vllm:kv_cache_usage_perc",
    ),
    (
        VllmFamily {
            name: "vllm:gpu_prefix_cache_queries_total",
            kind: MetricKind::Counter,
            help: "GPU prefix cache queries, in terms of number of queried tokens. DEPRECATED: Use vllm:prefix_cache_queries instead.",
            engine_label: true,
            extra_labels: &[],
            buckets: None,
            value: Value::PrefixCacheQueries,
        },
        "vllm:prefix_cache_queries_total",
    ),
    (
        VllmFamily {
            name: "vllm:gpu_prefix_cache_hits_total",
            kind: MetricKind::Counter,
            help: "GPU prefix cache hits, in terms of number of cached tokens. DEPRECATED: Use vllm:prefix_cache_hits instead.",
            engine_label: true,
            extra_labels: &[],
            buckets: None,
            value: Value::PrefixCacheHits,
        },
        "vllm:prefix_cache_hits_total",
    ),
    (
        VllmFamily {
            name: "vllm:time_per_output_token_seconds",
            kind: MetricKind::Histogram,
            help: "Histogram of time per output token in seconds. DEPRECATED: Use vllm:inter_token_latency_seconds instead.",
            engine_label: true,
            extra_labels: &[],
            buckets: Some(BucketFamily::InterTokenLatency),
            value: Value::Histogram(EngineHistogram::InterTokenLatency),
        },
        "vllm:inter_token_latency_seconds",
    ),
];

/// `reason` values of `vllm:num_requests_waiting_by_reason`, in vLLM's order.
pub const WAITING_REASONS: &[&str] = &["capacity", "deferred"];
/// `sleep_state` values of `vllm:engine_sleep_state`.
pub const SLEEP_STATES: &[&str] = &["awake", "weights_offloaded", "discard_all"];
/// `source` values of `vllm:prompt_tokens_by_source_total`.
pub const PROMPT_SOURCES: &[&str] = &["local_compute", "local_cache_hit", "external_kv_transfer"];
/// `source` values of `vllm:prompt_tokens_cached_by_source_total`.
pub const CACHED_SOURCES: &[&str] = &["device", "host", "p2p", "disk", "external_unspecified"];
/// `reason` values of `vllm:admission_rejections_total`.
pub const ADMISSION_REASONS: &[&str] = &["max_num_queued_reqs", "max_num_queued_tokens"];

/// The values vLLM pre-creates for a family's extra label (its one label besides `engine` and
/// `model_name`), in the order it lists them; empty for families without one.
pub fn extra_label_values(name: &str) -> &'static [&'static str] {
    match name {
        "vllm:num_requests_waiting_by_reason" => WAITING_REASONS,
        "vllm:engine_sleep_state" => SLEEP_STATES,
        "vllm:prompt_tokens_by_source_total" => PROMPT_SOURCES,
        "vllm:prompt_tokens_cached_by_source_total" => CACHED_SOURCES,
        "vllm:request_success_total" => FINISH_REASONS,
        "vllm:admission_rejections_total" => ADMISSION_REASONS,
        _ => &[],
    }
}

/// The name of a counter's or histogram's `_created` companion: a counter loses its `_total`
/// (`vllm:prompt_tokens_total` → `vllm:prompt_tokens_created`), a histogram keeps its whole
/// name (`vllm:iteration_tokens_total` → `vllm:iteration_tokens_total_created`).
pub fn created_name(name: &str, counter: bool) -> String {
    let base = if counter {
        name.strip_suffix("_total").unwrap_or(name)
    } else {
        name
    };
    format!("{base}_created")
}

#[cfg(test)]
mod value_tests {
    use super::*;
    use crate::{Engine, Signal, names_of};

    /// Every vLLM family that a signal is read from must say what it reports: a family the
    /// catalog reads can never be one the simulator serves as a silent zero.
    #[test]
    fn every_family_a_signal_reads_reports_an_engine_value() {
        let mut checked = 0;
        for signal in Signal::ALL {
            for n in names_of(Engine::Vllm, signal) {
                let Some(f) = family(n.name).or_else(|| {
                    DEPRECATED_FAMILIES
                        .iter()
                        .map(|(f, _)| f)
                        .find(|f| f.name == n.name)
                }) else {
                    continue; // a name of another release that 0.33 does not list
                };
                assert_ne!(
                    f.value,
                    Value::NotModelled,
                    "{} (read for {signal:?}) is not modelled",
                    f.name
                );
                checked += 1;
            }
        }
        assert!(checked >= 10, "{checked} families checked");
    }
}
