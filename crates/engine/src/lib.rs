//! One replica of an LLM inference engine in virtual time.
//!
//! The engine behaves like vLLM's V1 engine because it is built like it: continuous batching
//! with chunked prefill under a token budget, admission limited by `max_num_seqs` and free KV
//! blocks, paged KV in blocks of 16 tokens, and preemption by recompute when a decode needs a
//! block and none is free. How long a step takes comes from a performance model of the GPU and
//! the model ([`cost`]), not from constants, and the KV-cache size from vLLM's memory-profiling
//! rule ([`kv`]). It is pure and deterministic for a seed: no clock, no I/O, no threads.
//!
//! ```
//! use inferscale_engine::{profile, Engine, EventKind, RequestSpec};
//!
//! let mut engine = Engine::new(profile("aws-eks-ministral-8b-l40s").unwrap()).unwrap();
//! let id = engine.submit(RequestSpec { prompt_tokens: 30, max_tokens: 100, ignore_eos: true }, 0.0);
//! let mut events = Vec::new();
//! engine.advance(60.0, &mut events);
//! let done = events.iter().find(|e| e.id == id && matches!(e.kind, EventKind::Finished(_))).unwrap();
//! assert_eq!(done.output_tokens, 100);
//! // A lone 100-token request on the seeds' L40S: about two seconds (plus first-use warm-up).
//! assert!(done.t > 1.5 && done.t < 4.0, "{}", done.t);
//! ```

pub mod cost;
mod engine;
pub mod fleet;
pub mod hardware;
pub mod hf;
pub mod kv;
pub mod model;
pub mod names;
mod profile;
pub mod prompts;
pub mod settings;
pub mod stats;

pub use engine::{
    ColdStart, Engine, EngineConfig, Event, EventKind, OutputLength, Prefix, PromptBlocks,
    RequestSpec, Warmup, capture_sizes,
};
pub use inferscale_rng::{Rng, mix};
pub use profile::{PROFILES, Profile, profile};
pub use prompts::{Prompt, PromptCycle};
pub use settings::{Settings, SettingsError};
