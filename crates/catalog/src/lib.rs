//! Which metric means what: inference-engine and GPU-exporter metric names mapped to the
//! signals inferscale works with, and the reading of those signals from a scrape.
//!
//! This crate is the one place in inferscale that spells metric names and bucket layouts.
//! It knows vLLM's current names and the deprecated ones across releases 0.8–0.33
//! (`gpu_cache_usage_perc`, `time_per_output_token_seconds`, …), SGLang's, TGI's,
//! llama.cpp's and TensorRT-LLM's (the last two marked unverified where they are), and the
//! DCGM exporter's (both namespaces, both `Hostname` and `hostname`).
//!
//! ```
//! use inferscale_catalog::{Engine, Signal, Snapshot};
//!
//! let text = b"vllm:num_requests_waiting{engine=\"0\",model_name=\"m\"} 12.0\n\
//!              vllm:gpu_cache_usage_perc{engine=\"0\",model_name=\"m\"} 0.93\n";
//! let exp = inferscale_promtext::parse(text)?;
//! let snap = Snapshot::read(&exp, "pod-a");
//! assert_eq!(snap.engines, vec![Engine::Vllm]);
//! assert_eq!(snap.value(Signal::QueueDepth), Some(12.0));
//! // An older vLLM: the deprecated KV-cache name is read, and the snapshot says so.
//! assert_eq!(snap.value(Signal::KvCacheUsage), Some(0.93));
//! assert_eq!(snap.sources(Signal::KvCacheUsage)[0].name, "vllm:gpu_cache_usage_perc");
//! assert_eq!(snap.value(Signal::Running), None); // missing, not zero
//! # Ok::<(), inferscale_promtext::ParseError>(())
//! ```

pub mod buckets;
pub mod dcgm;
mod engine;
pub mod gateway;
pub mod llamacpp;
pub mod names;
mod signal;
mod snapshot;
pub mod table;
pub mod units;
pub mod vllm;

pub use engine::{Engine, detect};
pub use names::{MetricName, NameStatus, Read, names_for, names_of};
pub use signal::{Aggregate, Signal, SignalKind, Tier};
pub use snapshot::{Gpu, Snapshot};
