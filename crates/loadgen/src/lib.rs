//! Open-loop load generation for LLM inference servers, built from independent parts:
//!
//! - [`schedule`]: *when* — constant, Poisson and gamma arrivals, ramps, steps with rests,
//!   computed ahead;
//! - [`transport`]: *how* — OpenAI completions or chat, streaming (an incremental SSE decoder)
//!   or not, with or without connection reuse, a deadline per request;
//! - [`prompt`]: *what* — a fixed prompt, the seeds' random-first-word prompt, synthetic
//!   lengths, or a dataset (JSONL, ShareGPT);
//! - [`mod@run`]: the driver that sends on time, drops at the in-flight cap, samples the server's
//!   metrics ([`sampler`]), watches for stalls of the whole machine ([`probe`]) and builds the
//!   report ([`report`], from [`record`]s);
//! - [`threshold`]: k6-style pass/fail criteria.
//!
//! Latency is measured from each request's intended send time, so neither a slow server nor
//! a slow client can hide queueing (no coordinated omission); every scheduled request ends in
//! exactly one outcome: ok, http_error, timeout, connect_error, stream_error or dropped.

pub mod auth;
// The pure parts, re-exported where they have always been found.
pub use inferscale_workload::{hdr, merge, parts, prompt, record, schedule, threshold};
pub mod discover;
pub mod h1;
pub mod json;
pub mod pace;
pub mod plan;
pub mod probe;
pub mod prometheus;
pub mod report;
pub mod run;
pub mod sampler;
pub mod scrape;
pub mod target;
pub mod tls;
pub mod transport;

pub use auth::{Auth, AuthError};
pub use run::{LoadConfig, LoadError, LoadOutput, Progress, Tick, run, warmup};
pub use target::{Target, UrlError};

/// An error and every cause under it, joined (`URL: connecting: Connection refused`): the one
/// line a list of failures shows.
pub fn with_causes(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        out.push_str(": ");
        out.push_str(&c.to_string());
        cur = c.source();
    }
    out
}
