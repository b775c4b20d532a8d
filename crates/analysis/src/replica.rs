//! A replica model calibrated from a measurement, for a server nothing else is known of (a
//! real engine behind `--url`): how long its steps take as its batch grows, and how many
//! requests it runs at once. A rehearsal and `inferscale tune` drive a replica of it in
//! virtual time (the engine's scheduler with these step times), so that the autoscaling is
//! rehearsed on the server that was measured, not on a simulator profile.
//!
//! The fit, from the steps the server sustained:
//!
//! ```text
//! a request of O output tokens, with n requests running, takes  W ≈ O × (a + b·n)
//! below saturation n ≈ L = λ × W (Little's law), so            W / O = a + b·L   (least squares)
//! at saturation n = M (its concurrency limit) and               C = M / (O × (a + b·M))
//! ```
//!
//! `M` is the engine's `max_num_seqs` when the run knew it, else the most requests the server
//! reported running while saturated, else what the capacity and the fit imply. When `M` and
//! the measured capacity `C` are known, the fit is held to them exactly (capacity is what
//! autoscaling needs most): `a + b·M = M / (C·O)`, and `b` is the least-squares slope under
//! that constraint.

use inferscale_results::run::RunReport;
use serde::{Deserialize, Serialize};

use crate::saturation::{Saturation, Verdict};

/// One measured step the fit was made from, with what the replica model must reproduce.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MeasuredStep {
    /// Offered rate, req/s.
    pub offered_rps: f64,
    /// Seconds it lasted.
    pub duration_s: f64,
    /// Achieved throughput, req/s.
    pub achieved_rps: f64,
    /// Mean end-to-end latency, seconds.
    pub e2e_mean_s: Option<f64>,
    /// p50.
    pub e2e_p50_s: Option<f64>,
    /// p95.
    pub e2e_p95_s: Option<f64>,
    /// The server's queue, p95 over the step.
    pub queue_p95: Option<f64>,
    /// Whether the server sustained it.
    pub sustained: bool,
}

/// Where the concurrency limit came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LimitSource {
    /// The engine's `max_num_seqs`, recorded in the run.
    MaxNumSeqs,
    /// The most requests the server reported running while saturated.
    RunningWhileSaturated,
    /// What the measured capacity and the latency fit imply.
    Capacity,
}

/// The calibrated replica.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReplicaFit {
    /// A step's time whatever its batch, seconds.
    pub step_fixed_s: f64,
    /// What each running request adds to a step, seconds.
    pub step_per_seq_s: f64,
    /// Requests it runs at once; the rest wait.
    pub max_concurrency: u32,
    /// Where that limit came from.
    pub limit_from: LimitSource,
    /// Prompt tokens of a request.
    pub prompt_tokens: u32,
    /// Output tokens of a request.
    pub output_tokens: u32,
    /// Its throughput when saturated, req/s: `M / (O × (a + b·M))`.
    pub capacity_rps: f64,
    /// The measured steps.
    pub steps: Vec<MeasuredStep>,
}

/// Why no replica could be fitted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FitError {
    /// Too little to fit.
    #[error("no sustained step with a latency and output tokens to fit a replica on")]
    NoData,
}

/// Least squares of `y = a + b·x`.
fn line(points: &[(f64, f64)]) -> Option<(f64, f64)> {
    let n = points.len() as f64;
    if points.len() < 2 {
        return None;
    }
    let (mx, my) = points
        .iter()
        .fold((0.0, 0.0), |(a, b), (x, y)| (a + x / n, b + y / n));
    let (sxy, sxx) = points.iter().fold((0.0, 0.0), |(a, b), (x, y)| {
        (a + (x - mx) * (y - my), b + (x - mx) * (x - mx))
    });
    (sxx > 1e-12).then(|| {
        let b = sxy / sxx;
        (my - b * mx, b)
    })
}

/// Fits a replica to `run`'s steps, read with the saturation finding `sat`.
pub fn fit(run: &RunReport, sat: &Saturation) -> Result<ReplicaFit, FitError> {
    let (mut ok, mut prompt, mut output) = (0u64, 0u64, 0u64);
    for s in &run.steps {
        ok += s.requests.ok;
        prompt += s.tokens.prompt;
        output += s.tokens.output;
    }
    if ok == 0 || output == 0 {
        return Err(FitError::NoData);
    }
    let o = (output as f64 / ok as f64).max(1.0);
    let p = (prompt as f64 / ok as f64).max(1.0);
    let mut steps = Vec::new();
    let mut points = Vec::new();
    let mut running_saturated: Option<f64> = None;
    for (i, s) in run.steps.iter().enumerate() {
        if s.concurrency.is_some() {
            continue;
        }
        let verdict = sat.steps.iter().find(|a| a.index == i).map(|a| a.verdict);
        if verdict == Some(Verdict::ClientLimited) || s.requests.ok == 0 {
            continue;
        }
        let sustained = verdict == Some(Verdict::Sustained);
        let mean = s.latency_s.e2e.mean;
        if sustained && let Some(w) = mean {
            points.push((s.achieved_rps * w, w / o));
        }
        if verdict == Some(Verdict::Saturated)
            && let Some(m) = s.server.as_ref().and_then(|v| v.running.max)
        {
            running_saturated = Some(running_saturated.map_or(m, |r: f64| r.max(m)));
        }
        steps.push(MeasuredStep {
            offered_rps: s.target_rps,
            duration_s: s.duration_s,
            achieved_rps: s.achieved_rps,
            e2e_mean_s: mean,
            e2e_p50_s: s.latency_s.e2e.p50,
            e2e_p95_s: s.latency_s.e2e.p95,
            queue_p95: s.server.as_ref().and_then(|v| v.queue_depth.p95),
            sustained,
        });
    }
    if points.is_empty() {
        return Err(FitError::NoData);
    }
    let (limit, limit_from) = match (run.target.max_num_seqs, running_saturated) {
        (Some(m), _) => (Some(f64::from(m)), LimitSource::MaxNumSeqs),
        (None, Some(r)) if r >= 1.0 => (Some(r.round()), LimitSource::RunningWhileSaturated),
        _ => (None, LimitSource::Capacity),
    };
    let capacity = sat.capacity_rps.filter(|c| *c > 0.0);
    let (a, b, m) = match (limit, capacity) {
        (Some(m), Some(c)) => {
            // Held to the measured capacity at the limit: a + b·M = M / (C·O).
            let k = m / (c * o);
            let (sxy, sxx) = points.iter().fold((0.0, 0.0), |(sxy, sxx), (l, y)| {
                let x = l - m;
                (sxy + (y - k) * x, sxx + x * x)
            });
            let b = if sxx > 0.0 { sxy / sxx } else { 0.0 };
            let b = b.clamp(0.0, k / m);
            (k - b * m, b, m)
        }
        (Some(m), None) => {
            let (a, b) = line(&points).unwrap_or((points[0].1, 0.0));
            let b = b.max(0.0);
            (a.max(1e-6), b, m)
        }
        (None, Some(c)) => {
            let (a, b) = line(&points).unwrap_or((points[0].1, 0.0));
            let (a, b) = if a > 0.0 && b >= 0.0 {
                (a, b)
            } else {
                (
                    points.iter().map(|p| p.1).sum::<f64>() / points.len() as f64,
                    0.0,
                )
            };
            // C = M / (O(a + bM))  =>  M = C·O·a / (1 − C·O·b), when the slope allows C.
            let den = 1.0 - c * o * b;
            if den > 0.05 {
                (a, b, (c * o * a / den).max(1.0))
            } else {
                (a, 0.0, (c * o * a).max(1.0))
            }
        }
        (None, None) => {
            // Never saturated, no limit known: the most seen in flight, doubled.
            let l = points.iter().map(|p| p.0).fold(1.0, f64::max);
            let (a, b) = line(&points).unwrap_or((points[0].1, 0.0));
            (a.max(1e-6), b.max(0.0), (2.0 * l).ceil())
        }
    };
    let m = m.round().clamp(1.0, 1e6);
    Ok(ReplicaFit {
        step_fixed_s: a,
        step_per_seq_s: b,
        max_concurrency: m as u32,
        limit_from,
        prompt_tokens: p.round() as u32,
        output_tokens: o.round() as u32,
        capacity_rps: m / (o * (a + b * m)),
        steps,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_through_points() {
        let (a, b) = line(&[(0.0, 1.0), (2.0, 5.0), (4.0, 9.0)]).unwrap_or_default();
        assert!((a - 1.0).abs() < 1e-9 && (b - 2.0).abs() < 1e-9);
        assert_eq!(line(&[(1.0, 1.0)]), None);
        assert_eq!(line(&[(1.0, 1.0), (1.0, 2.0)]), None);
    }
}
