//! Capacity from the engine model: the highest rate one replica sustains, the highest it
//! holds within a p95 latency SLO, and so the replicas a target rate needs — found by
//! running the workload at trial rates, so queueing and KV pressure are in the answer.

use inferscale_engine::EngineConfig;
use inferscale_engine::kv::MemoryError;
use serde::Serialize;

use crate::simulate::simulate;
use crate::summary::Summary;
use crate::workload::{Load, Workload};

/// Achieved over offered above which a rate counts as sustained.
pub const SUSTAINED: f64 = 0.95;

/// The workload at `rps` (its arrival process kept; a closed or offline load becomes a
/// constant rate).
fn at_rate(w: &Workload, rps: f64) -> Workload {
    let poisson = matches!(w.load, Load::Rate { poisson: true, .. });
    Workload {
        load: Load::Rate { rps, poisson },
        requests: None,
        ..w.clone()
    }
}

fn run(cfg: &EngineConfig, w: &Workload, rps: f64) -> Result<Summary, MemoryError> {
    Ok(Summary::of(&simulate(cfg, &at_rate(w, rps))?))
}

fn sustained(s: &Summary, rps: f64) -> bool {
    s.failed == 0 && s.throughput_rps >= SUSTAINED * rps
}

/// Bisects for the highest rate in `(0, hi]` at which `ok` holds, to 1 %; `ok` is assumed to
/// hold below a rate and fail above it.
fn highest(
    mut ok: impl FnMut(f64) -> Result<bool, MemoryError>,
    start: f64,
) -> Result<Option<f64>, MemoryError> {
    let mut lo = 0.0;
    let mut hi = start.max(0.01);
    // Grow until it fails (or a generous bound).
    while ok(hi)? {
        lo = hi;
        hi *= 2.0;
        if hi > 1e6 {
            return Ok(Some(lo));
        }
    }
    for _ in 0..40 {
        if hi - lo <= 0.01 * hi {
            break;
        }
        let mid = (lo + hi) / 2.0;
        if ok(mid)? {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Ok((lo > 0.0).then_some(lo))
}

/// The highest rate one replica sustains (achieved ≥ 95 % of offered) under `w`'s lengths.
pub fn saturation_rps(cfg: &EngineConfig, w: &Workload) -> Result<Option<f64>, MemoryError> {
    let guess = 4.0;
    highest(|r| Ok(sustained(&run(cfg, w, r)?, r)), guess)
}

/// The highest rate one replica holds with the p95 end-to-end latency within `slo_s`.
pub fn max_rps_within(
    cfg: &EngineConfig,
    w: &Workload,
    slo_s: f64,
) -> Result<Option<f64>, MemoryError> {
    highest(
        |r| {
            let s = run(cfg, w, r)?;
            Ok(sustained(&s, r) && s.e2e.p95.is_some_and(|p| p <= slo_s))
        },
        1.0,
    )
}

/// What serving a rate within an SLO takes on one GPU type.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Plan {
    /// The highest rate one replica holds within the SLO, req/s.
    pub per_replica_rps: f64,
    /// Replicas for the target rate.
    pub replicas: u32,
    /// GPUs (replicas × tensor parallelism).
    pub gpus: u32,
    /// GPU-hours per hour of serving.
    pub gpu_hours_per_hour: f64,
    /// The prediction at the target rate split over the replicas (one replica's share).
    pub at_target: Summary,
    /// Dollars per hour, when a price was given.
    pub usd_per_hour: Option<f64>,
    /// Dollars per million output tokens, when a price was given.
    pub usd_per_million_output_tokens: Option<f64>,
}

/// Replicas of `cfg` (each `tp` GPUs) for `target_rps` within a p95 of `slo_s`, and the cost
/// at `usd_per_gpu_hour`. `None` when not even a trickle meets the SLO.
pub fn plan(
    cfg: &EngineConfig,
    w: &Workload,
    target_rps: f64,
    slo_s: f64,
    usd_per_gpu_hour: Option<f64>,
) -> Result<Option<Plan>, MemoryError> {
    let Some(per) = max_rps_within(cfg, w, slo_s)? else {
        return Ok(None);
    };
    let mut replicas = (target_rps / per).ceil().max(1.0) as u32;
    let mut at_target = run(cfg, w, target_rps / f64::from(replicas))?;
    // A random arrival sequence at a slightly lower rate can come out a little slower than
    // the search's: the plan adds replicas until its own prediction meets the SLO.
    for _ in 0..8 {
        if at_target.e2e.p95.is_none_or(|p| p <= slo_s) {
            break;
        }
        replicas += 1;
        at_target = run(cfg, w, target_rps / f64::from(replicas))?;
    }
    let gpus = replicas * cfg.tensor_parallel_size.max(1);
    let usd = usd_per_gpu_hour.map(|p| p * f64::from(gpus));
    let tokens_per_hour = target_rps * w.output.mean() * 3600.0;
    Ok(Some(Plan {
        per_replica_rps: per,
        replicas,
        gpus,
        gpu_hours_per_hour: f64::from(gpus),
        at_target,
        usd_per_hour: usd,
        usd_per_million_output_tokens: usd
            .filter(|_| tokens_per_hour > 0.0)
            .map(|u| u / tokens_per_hour * 1e6),
    }))
}
