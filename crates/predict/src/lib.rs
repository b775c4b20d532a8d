//! Prediction from the engine model, in virtual time and without I/O: what one replica of a
//! GPU and model does under a workload (throughput, TTFT, ITL/TPOT, end-to-end, queue, KV),
//! how much it sustains, how many replicas a rate needs within an SLO and at what cost, and
//! how far these predictions are from published measurements.
//!
//! - [`workload`]: lengths, arrivals (rate, concurrency, offline, sequential), timeouts;
//! - [`simulate`](mod@simulate): one replica driven by the workload;
//! - [`summary`]: the numbers a benchmark client reports;
//! - [`capacity`]: saturation, the rate within an SLO, replicas and cost;
//! - [`fidelity`]: predictions against a CSV of published measurements;
//! - [`harness`]: what is known about the load generators behind them.
//!
//! ```
//! use inferscale_engine::profile;
//! use inferscale_predict::workload::{Load, Workload};
//! use inferscale_predict::predict;
//!
//! let cfg = profile("aws-eks-ministral-8b-l40s").unwrap();
//! let w = Workload::fixed(35, 100, Load::Rate { rps: 20.0, poisson: false }, 30.0);
//! let s = predict(&cfg, &w).unwrap();
//! // 600 requests over the 30 s of sending plus the last one's ≈ 2.2 s: throughput, as
//! // benchmark clients report it, counts the tail.
//! assert!((18.0..20.0).contains(&s.throughput_rps));
//! assert!(s.e2e.p95.unwrap() < 3.0);
//! ```

pub mod calibrate;
pub mod capacity;
pub mod csv;
pub mod fidelity;
pub mod harness;
pub mod simulate;
pub mod summary;
pub mod workload;

use inferscale_engine::EngineConfig;
use inferscale_engine::kv::MemoryError;

pub use summary::Summary;

/// Runs `w` against one replica configured as `cfg` and summarises it.
///
/// # Errors
///
/// When the configuration does not fit its GPU.
pub fn predict(cfg: &EngineConfig, w: &workload::Workload) -> Result<Summary, MemoryError> {
    Ok(Summary::of(&simulate::simulate(cfg, w)?))
}
