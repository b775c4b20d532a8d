//! The replica a rehearsal of a measured server runs: the engine's scheduler with the step
//! times fitted to the measurement ([`inferscale_analysis::replica`]), and how well it
//! reproduces the steps it was fitted to.

use inferscale_analysis::replica::ReplicaFit;
use inferscale_engine::cost::MeasuredStep;
use inferscale_engine::fleet::{Every, Fleet, Notice, Routing, drive};
use inferscale_engine::{EngineConfig, RequestSpec};
use inferscale_rng::mix;
use serde::Serialize;

use crate::traffic::Traffic;

/// The engine configuration of a replica fitted to a measurement, labelled `model`.
pub fn engine(fit: &ReplicaFit, model: &str) -> EngineConfig {
    EngineConfig::measured(
        MeasuredStep {
            fixed_s: fit.step_fixed_s,
            per_seq_s: fit.step_per_seq_s,
            per_token_s: 0.0,
        },
        fit.max_concurrency,
        model,
    )
}

/// The requests the fit stands for: its prompt and output lengths, generated in full.
pub fn request(fit: &ReplicaFit) -> RequestSpec {
    RequestSpec {
        prompt_tokens: fit.prompt_tokens.max(1),
        max_tokens: fit.output_tokens.max(1),
        ignore_eos: true,
    }
}

/// One measured step beside the same step on the model.
#[derive(Debug, Clone, Serialize)]
pub struct StepCheck {
    /// Offered rate, req/s.
    pub offered_rps: f64,
    /// Measured and modelled throughput, req/s.
    pub achieved_rps: (f64, f64),
    /// Measured and modelled e2e p50, seconds.
    pub e2e_p50_s: (Option<f64>, Option<f64>),
    /// Measured and modelled e2e p95, seconds.
    pub e2e_p95_s: (Option<f64>, Option<f64>),
    /// Measured and modelled queue p95.
    pub queue_p95: (Option<f64>, Option<f64>),
}

fn quantile(v: &mut [f64], q: f64) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let rank = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len());
    Some(v[rank - 1])
}

/// Runs each measured step on one replica of `engine` (Poisson arrivals at its offered rate
/// for its duration, from an empty server, as after the method's rests) and sets the result
/// beside the measurement.
pub fn check(fit: &ReplicaFit, engine: &EngineConfig, seed: u64) -> Vec<StepCheck> {
    let spec = request(fit);
    fit.steps
        .iter()
        .enumerate()
        .filter_map(|(i, s)| {
            let mut fleet = Fleet::new(engine.clone(), 1, Routing::Random).ok()?;
            fleet.set_token_events(false);
            fleet.record_histograms(&[]);
            let traffic = Traffic::constant(s.offered_rps);
            let arrivals = traffic
                .arrivals(s.duration_s, mix(&[seed, i as u64]))
                .map(|t| (t, spec));
            let mut e2e = Vec::new();
            let mut ends = Vec::new();
            let mut queue = Vec::new();
            let end = s.duration_s;
            let mut sample = Every::new(1.0, |t, f: &mut Fleet| {
                if t <= end {
                    queue.push(f64::from(f.waiting()));
                }
            });
            // As the load generator counts a step: its requests, each waited for to the end.
            let drain = end + 1800.0;
            drive(&mut fleet, arrivals, drain, &mut [&mut sample], |n| {
                if let Notice::Engine(e) = n
                    && n.finished().is_some()
                {
                    ends.push(e.event.t);
                    e2e.push(e.event.t - e.event.arrival);
                }
            });
            // Completions over the step shifted by the median latency, as `load` counts its
            // achieved throughput: in steady state as many finish as arrive, past saturation
            // only as many as the server can finish.
            let shift = quantile(&mut e2e.clone(), 0.5).unwrap_or(0.0);
            let finished_in = ends
                .iter()
                .filter(|t| **t >= shift && **t < end + shift)
                .count();
            Some(StepCheck {
                offered_rps: s.offered_rps,
                achieved_rps: (s.achieved_rps, finished_in as f64 / end.max(1e-9)),
                e2e_p50_s: (s.e2e_p50_s, quantile(&mut e2e, 0.5)),
                e2e_p95_s: (s.e2e_p95_s, quantile(&mut e2e, 0.95)),
                queue_p95: (s.queue_p95, quantile(&mut queue, 0.95)),
            })
        })
        .collect()
}

/// The checks as a table, with the model's error per step.
pub fn table(checks: &[StepCheck]) -> String {
    let pair = |m: Option<f64>, s: Option<f64>, unit: &str| match (m, s) {
        (Some(m), Some(s)) => format!("{m:>7.2}{unit} {s:>7.2}{unit}"),
        (m, s) => format!(
            "{:>8} {:>8}",
            m.map_or("-".to_owned(), |v| format!("{v:.2}{unit}")),
            s.map_or("-".to_owned(), |v| format!("{v:.2}{unit}"))
        ),
    };
    let mut out = String::from(
        "   offered   achieved (measured  model)   e2e p50 (measured  model)   e2e p95 (measured  model)   queue p95 (measured  model)\n",
    );
    for c in checks {
        out.push_str(&format!(
            "  {:>8.1}   {:>8.2} {:>8.2}                {}                 {}                 {}\n",
            c.offered_rps,
            c.achieved_rps.0,
            c.achieved_rps.1,
            pair(c.e2e_p50_s.0, c.e2e_p50_s.1, "s"),
            pair(c.e2e_p95_s.0, c.e2e_p95_s.1, "s"),
            pair(c.queue_p95.0, c.queue_p95.1, ""),
        ));
    }
    out
}

/// The median relative error of the modelled e2e p50 and throughput over the steps the
/// server sustained, as one number for a summary line: `(throughput, p50)`.
pub fn errors(fit: &ReplicaFit, checks: &[StepCheck]) -> (Option<f64>, Option<f64>) {
    let sustained: Vec<&StepCheck> = checks
        .iter()
        .zip(&fit.steps)
        .filter(|(_, s)| s.sustained)
        .map(|(c, _)| c)
        .collect();
    let mut thr: Vec<f64> = sustained
        .iter()
        .filter(|c| c.achieved_rps.0 > 0.0)
        .map(|c| ((c.achieved_rps.1 - c.achieved_rps.0) / c.achieved_rps.0).abs())
        .collect();
    let mut p50: Vec<f64> = sustained
        .iter()
        .filter_map(|c| match c.e2e_p50_s {
            (Some(m), Some(s)) if m > 0.0 => Some(((s - m) / m).abs()),
            _ => None,
        })
        .collect();
    (quantile(&mut thr, 0.5), quantile(&mut p50, 0.5))
}
