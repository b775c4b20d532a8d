//! The signals inferscale reads, independent of which engine serves them.

use std::fmt;

/// The three tiers of the community guide: what users feel, what the engine does, what the GPU
/// does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Tier {
    /// Tier 1, user-facing service-level indicators.
    Service,
    /// Tier 2, engine internals.
    Engine,
    /// Tier 3, GPU and node (DCGM).
    Gpu,
}

impl Tier {
    /// A short title for tables.
    pub fn title(self) -> &'static str {
        match self {
            Tier::Service => "Tier 1: service",
            Tier::Engine => "Tier 2: engine",
            Tier::Gpu => "Tier 3: GPU",
        }
    }
}

/// How a signal is exposed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SignalKind {
    /// An instantaneous value.
    Gauge,
    /// A monotonic count; read as a total, or as a rate over a window.
    Counter,
    /// A latency or size distribution; read as percentiles.
    Histogram,
}

/// How values from several series (engines, pods, GPUs) combine into one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Aggregate {
    /// Add them up (queues, counts, power, memory).
    Sum,
    /// Average them (utilisation, KV usage, clocks).
    Mean,
    /// The largest (temperature).
    Max,
}

/// A thing worth knowing about an inference server, whatever its engine calls it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Signal {
    /// Requests waiting to be scheduled (the primary scaling signal).
    QueueDepth,
    /// Requests in the running batch.
    Running,
    /// Requests that finished normally (stop, length or repetition).
    RequestsOk,
    /// Requests aborted (usually the client went away).
    RequestsAborted,
    /// Requests that ended in an engine error.
    RequestsErrored,
    /// Time to first token (server side, from arrival).
    Ttft,
    /// Time per output token, per request.
    Tpot,
    /// Inter-token latency, per output step.
    Itl,
    /// End-to-end request latency.
    E2eLatency,
    /// Time spent waiting in the queue.
    QueueTime,
    /// Fraction of the KV-cache block pool in use (0–1).
    KvCacheUsage,
    /// Preemptions (requests evicted and recomputed).
    Preemptions,
    /// Prompt (prefill) tokens processed.
    PromptTokens,
    /// Output tokens generated.
    GenerationTokens,
    /// Tokens per engine step.
    IterationTokens,
    /// Prompt tokens looked up in the prefix cache.
    PrefixCacheQueries,
    /// Of them, found there (the hit rate is hits ÷ queries over a window).
    PrefixCacheHits,
    /// GPU utilisation, percent.
    GpuUtil,
    /// Memory-copy (memory-controller) utilisation, percent.
    MemCopyUtil,
    /// Framebuffer memory used, MiB.
    FbUsed,
    /// Framebuffer memory free, MiB.
    FbFree,
    /// Power draw, watts.
    Power,
    /// Single-bit volatile ECC errors.
    EccSbeVolatile,
    /// SM clock, MHz.
    SmClock,
    /// GPU temperature, °C.
    GpuTemp,
}

impl Signal {
    /// Every signal, in display order.
    pub const ALL: [Signal; 25] = [
        Signal::QueueDepth,
        Signal::Running,
        Signal::RequestsOk,
        Signal::RequestsAborted,
        Signal::RequestsErrored,
        Signal::Ttft,
        Signal::Tpot,
        Signal::Itl,
        Signal::E2eLatency,
        Signal::QueueTime,
        Signal::KvCacheUsage,
        Signal::Preemptions,
        Signal::PromptTokens,
        Signal::GenerationTokens,
        Signal::IterationTokens,
        Signal::PrefixCacheQueries,
        Signal::PrefixCacheHits,
        Signal::GpuUtil,
        Signal::MemCopyUtil,
        Signal::FbUsed,
        Signal::FbFree,
        Signal::Power,
        Signal::EccSbeVolatile,
        Signal::SmClock,
        Signal::GpuTemp,
    ];

    /// The stable snake-case key used in JSON output.
    pub fn key(self) -> &'static str {
        match self {
            Signal::QueueDepth => "queue_depth",
            Signal::Running => "running",
            Signal::RequestsOk => "requests_ok",
            Signal::RequestsAborted => "requests_aborted",
            Signal::RequestsErrored => "requests_errored",
            Signal::Ttft => "ttft",
            Signal::Tpot => "tpot",
            Signal::Itl => "itl",
            Signal::E2eLatency => "e2e",
            Signal::QueueTime => "queue_time",
            Signal::KvCacheUsage => "kv_cache_usage",
            Signal::Preemptions => "preemptions",
            Signal::PromptTokens => "prompt_tokens",
            Signal::GenerationTokens => "generation_tokens",
            Signal::IterationTokens => "iteration_tokens",
            Signal::PrefixCacheQueries => "prefix_cache_queries",
            Signal::PrefixCacheHits => "prefix_cache_hits",
            Signal::GpuUtil => "gpu_util",
            Signal::MemCopyUtil => "gpu_mem_copy_util",
            Signal::FbUsed => "gpu_fb_used_mib",
            Signal::FbFree => "gpu_fb_free_mib",
            Signal::Power => "gpu_power_watts",
            Signal::EccSbeVolatile => "gpu_ecc_sbe_volatile",
            Signal::SmClock => "gpu_sm_clock_mhz",
            Signal::GpuTemp => "gpu_temp_celsius",
        }
    }

    /// A human label for tables.
    pub fn label(self) -> &'static str {
        match self {
            Signal::QueueDepth => "queue depth (waiting)",
            Signal::Running => "running",
            Signal::RequestsOk => "requests ok",
            Signal::RequestsAborted => "requests aborted",
            Signal::RequestsErrored => "requests errored",
            Signal::Ttft => "TTFT",
            Signal::Tpot => "TPOT",
            Signal::Itl => "ITL",
            Signal::E2eLatency => "e2e latency",
            Signal::QueueTime => "queue time",
            Signal::KvCacheUsage => "KV-cache usage",
            Signal::Preemptions => "preemptions",
            Signal::PromptTokens => "prompt tokens",
            Signal::GenerationTokens => "generation tokens",
            Signal::IterationTokens => "tokens per step",
            Signal::PrefixCacheQueries => "prefix-cache queries",
            Signal::PrefixCacheHits => "prefix-cache hits",
            Signal::GpuUtil => "GPU util %",
            Signal::MemCopyUtil => "mem-copy util %",
            Signal::FbUsed => "FB used MiB",
            Signal::FbFree => "FB free MiB",
            Signal::Power => "power W",
            Signal::EccSbeVolatile => "ECC SBE (volatile)",
            Signal::SmClock => "SM clock MHz",
            Signal::GpuTemp => "temp °C",
        }
    }

    /// Which tier the signal belongs to.
    pub fn tier(self) -> Tier {
        use Signal::*;
        match self {
            QueueDepth | Running | RequestsOk | RequestsAborted | RequestsErrored | Ttft | Tpot
            | Itl | E2eLatency | QueueTime => Tier::Service,
            KvCacheUsage | Preemptions | PromptTokens | GenerationTokens | IterationTokens
            | PrefixCacheQueries | PrefixCacheHits => Tier::Engine,
            GpuUtil | MemCopyUtil | FbUsed | FbFree | Power | EccSbeVolatile | SmClock
            | GpuTemp => Tier::Gpu,
        }
    }

    /// How the signal is exposed.
    pub fn kind(self) -> SignalKind {
        use Signal::*;
        match self {
            QueueDepth | Running | KvCacheUsage | GpuUtil | MemCopyUtil | FbUsed | FbFree
            | Power | SmClock | GpuTemp => SignalKind::Gauge,
            RequestsOk | RequestsAborted | RequestsErrored | Preemptions | PromptTokens
            | GenerationTokens | EccSbeVolatile | PrefixCacheQueries | PrefixCacheHits => {
                SignalKind::Counter
            }
            Ttft | Tpot | Itl | E2eLatency | QueueTime | IterationTokens => SignalKind::Histogram,
        }
    }

    /// Whether the method reads it (the others are read when served, and an engine that
    /// lacks them is not said to lack anything).
    pub fn in_method(self) -> bool {
        !matches!(self, Signal::PrefixCacheQueries | Signal::PrefixCacheHits)
    }

    /// How series combine.
    pub fn aggregate(self) -> Aggregate {
        use Signal::*;
        match self {
            KvCacheUsage | GpuUtil | MemCopyUtil | SmClock => Aggregate::Mean,
            GpuTemp => Aggregate::Max,
            _ => Aggregate::Sum,
        }
    }
}

impl fmt::Display for Signal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.key())
    }
}
