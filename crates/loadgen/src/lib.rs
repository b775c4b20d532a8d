//! Open-loop load generation for LLM inference servers, built from independent parts:
//!
//! - [`schedule`]: *when* — constant, Poisson and gamma arrivals, ramps, steps with rests,
//!   computed ahead;
//! - [`transport`]: *how* — OpenAI completions or chat, streaming (an incremental SSE decoder)
//!   or not, with or without connection reuse, a deadline per request;
//! - [`prompt`]: *what* — a fixed prompt, the seeds' random-first-word prompt, synthetic
//!   lengths, a dataset (JSONL, ShareGPT), shared-prefix shapes or a replayed trace
//!   ([`trace`]);
//! - [`mod@run`]: the driver that sends on time, drops at the in-flight cap, samples the server's
//!   metrics ([`sampler`]), watches for stalls of the whole machine ([`probe`]) and builds the
//!   report ([`report`], from [`record`]s);
//! - [`threshold`]: k6-style pass/fail criteria.
//!
//! Latency is measured from each request's intended send time, so neither a slow server nor
//! a slow client can hide queueing (no coordinated omission); every scheduled request ends in
//! exactly one outcome: ok, http_error, timeout, connect_error, stream_error or dropped.

// The pure parts, re-exported where they have always been found.
pub use inferscale_workload::{hdr, merge, parts, prompt, record, schedule, threshold, trace};
// The HTTP client, in its own crate since scaler, monitor and check share it.
pub use inferscale_http::{
    Auth, AuthError, Target, UrlError, auth, h1, prometheus, scrape, target, tls, transport,
    with_causes,
};
pub mod discover;
pub mod pace;
pub mod plan;
pub mod probe;
pub mod report;
pub mod run;
pub mod sampler;

pub use run::{LoadConfig, LoadError, LoadOutput, Progress, Tick, run, warmup};
