//! Prometheus text format and OpenMetrics 1.0: parse, validate, write, and do histogram math.
//!
//! Everything inferscale learns from a server comes through this crate: the load generator
//! watches the queue with it, the analysis reads latency histograms with it, and the simulator
//! serves its `/metrics` through its writer. It is pure (no I/O, no async) and never panics on
//! input, whatever the bytes.
//!
//! - [`parse`] reads either format leniently, the way Prometheus' scraper does, borrowing names
//!   and label values from the input. [`validate_openmetrics`] applies the OpenMetrics 1.0
//!   grammar and semantics strictly (it agrees with the official suite's verdicts).
//! - [`write()`] prints an [`Exposition`] in either format, with the number style of Python's
//!   `prometheus_client` (what vLLM uses), Go's `expfmt`, or the DCGM exporter.
//! - [`Histogram`] implements `histogram_quantile`, `sum by (le)` and the increase between two
//!   scrapes exactly as Prometheus does; [`counter_delta`] handles counter resets.
//!
//! ```
//! use inferscale_promtext::{histograms, parse};
//!
//! let scrape = br#"# TYPE vllm:num_requests_waiting gauge
//! vllm:num_requests_waiting{engine="0",model_name="m"} 7.0
//! ## TYPE vllm:e2e_request_latency_seconds histogram
//! vllm:e2e_request_latency_seconds_bucket{engine="0",le="1.0",model_name="m"} 40.0
//! vllm:e2e_request_latency_seconds_bucket{engine="0",le="2.5",model_name="m"} 100.0
//! vllm:e2e_request_latency_seconds_bucket{engine="0",le="+Inf",model_name="m"} 100.0
//! vllm:e2e_request_latency_seconds_count{engine="0",model_name="m"} 100.0
//! vllm:e2e_request_latency_seconds_sum{engine="0",model_name="m"} 150.0
//! "#;
//! let exp = parse(scrape)?;
//! let queue = exp.samples_named("vllm:num_requests_waiting").map(|s| s.value()).sum::<f64>();
//! assert_eq!(queue, 7.0);
//! let e2e = &histograms(&exp, "vllm:e2e_request_latency_seconds")[0].histogram;
//! assert_eq!(e2e.quantile(0.95), 2.375);
//! # Ok::<(), inferscale_promtext::ParseError>(())
//! ```

mod error;
mod filter;
mod float;
mod histogram;
mod model;
mod parse;
mod strict;
mod write;

pub use error::ParseError;
pub use filter::retain_families;
pub use float::{FloatStyle, format_float, write_float};
pub use histogram::{
    Bucket, Histogram, LabeledHistogram, QuantileResult, counter_delta, histograms,
};
pub use model::{Exemplar, Exposition, Family, Format, Label, MetricType, Sample};
pub use parse::{ParseOptions, parse, parse_with, validate_openmetrics};
pub use write::{WriteOptions, write, write_into};
