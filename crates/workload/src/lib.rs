//! What a load is, without sending it (pure: no clock, no network):
//!
//! - [`schedule`]: *when* — constant, Poisson and gamma arrivals, ramps, steps with rests,
//!   closed-loop stages, computed ahead;
//! - [`prompt`]: *what* — a fixed prompt, the seeds' prompt, synthetic lengths, or a dataset
//!   (JSONL, ShareGPT), as request bodies prepared ahead;
//! - [`record`]: what each request did, and its aggregation into steps and a timeline (the
//!   client-limited rule included);
//! - [`trace`]: prompts with cache structure — a replayed Mooncake trace, shared-prefix
//!   shapes — and the prefix-cache hit rate they imply;
//! - [`threshold`]: k6-style pass/fail criteria over the records;
//! - [`outcome`]: how a request ended;
//! - [`hdr`]: histograms in HdrHistogram's V2 encoding, so parts of a split run add up
//!   exactly; [`merge`]: the parts of a split run as one run.
//!
//! The load generator (`inferscale-loadgen`) sends what these describe and records what
//! happened; a virtual-time driver can use the same parts without a socket.

pub mod hdr;
pub mod merge;
pub mod outcome;
pub mod parts;
pub mod prompt;
pub mod record;
pub mod schedule;
pub mod threshold;
pub mod trace;
