//! Fitting the model's physics to measurements: a handful of parameters, each physical and
//! shared by every GPU and model (a scale on every GPU's bandwidth and compute efficiency,
//! the KV-read efficiency of paged attention, per-step GPU and CPU overheads, the frontend's
//! latency, the all-reduce's latency), searched within physical bounds for the smallest
//! median errors over a set of cases. What it finds is what the engine's defaults are set
//! to (docs/performance-model.md); a leave-one-GPU-out run fits without one GPU's cases and
//! reports the error on them.

use serde::{Deserialize, Serialize};

use inferscale_engine::EngineConfig;

use crate::fidelity::{Case, Catalog, Options, Report, run};

/// The fitted parameters, as multipliers of and values for the engine's defaults.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Physics {
    /// Multiplies every HBM GPU's memory efficiency (achieved / peak bandwidth).
    pub mem_scale: f64,
    /// Multiplies every GDDR GPU's memory efficiency (L4, L40S, A10G: a different memory
    /// and controller, whose achieved share of peak differs from HBM's).
    #[serde(default = "one")]
    pub gddr_mem_scale: f64,
    /// Multiplies every GPU's compute efficiency (achieved / peak tensor throughput).
    pub compute_scale: f64,
    /// Paged attention's KV reads as a share of the achieved weight-read bandwidth.
    pub kv_read_efficiency: f64,
    /// GPU time per step beyond the roofline, seconds.
    pub gpu_step_s: f64,
    /// CPU time per step (scheduling, input preparation), seconds.
    pub step_fixed_s: f64,
    /// CPU time per scheduled sequence per step, seconds.
    pub per_seq_s: f64,
    /// Arrival to schedulable, plus the first token's way back to the client, seconds.
    pub frontend_s: f64,
    /// Multiplies every GPU's small all-reduce latency.
    pub allreduce_latency_scale: f64,
}

fn one() -> f64 {
    1.0
}

impl Physics {
    /// The engine's defaults, as they are.
    pub fn defaults() -> Physics {
        let o = inferscale_engine::cost::Overheads::default();
        Physics {
            mem_scale: 1.0,
            gddr_mem_scale: 1.0,
            compute_scale: 1.0,
            kv_read_efficiency: o.kv_read_efficiency,
            gpu_step_s: o.gpu_step_s,
            step_fixed_s: o.step_fixed_s,
            per_seq_s: o.per_seq_s,
            frontend_s: o.frontend_s,
            allreduce_latency_scale: 1.0,
        }
    }

    /// What the model assumed before any calibration, from first principles and the
    /// literature alone: the GPU tables' bandwidth efficiencies as they are, GEMMs at 45 % of
    /// peak tensor throughput, paged-attention KV reads as fast as weight reads, no GPU time
    /// per step beyond the roofline, Vidur's CPU profile of vLLM (1.4 ms a step, 28 µs a
    /// sequence), a frontend of 0.8 ms, and the interconnects' nominal all-reduce latency.
    /// A fit starts here, so that what it finds is learnt from the cases it is given (and a
    /// leave-one-GPU-out check predicts the held-out GPU from the other GPUs' cases, not
    /// from defaults that were fitted on it).
    pub fn prior() -> Physics {
        Physics {
            mem_scale: 1.0 / inferscale_engine::hardware::HBM_MEM_SCALE,
            gddr_mem_scale: 1.0,
            compute_scale: 0.45 / inferscale_engine::hardware::COMPUTE_EFFICIENCY,
            kv_read_efficiency: 1.0,
            gpu_step_s: 0.0,
            step_fixed_s: 1.4e-3,
            per_seq_s: 28e-6,
            frontend_s: 0.8e-3,
            allreduce_latency_scale: 1.0 / inferscale_engine::hardware::ALLREDUCE_LATENCY_SCALE,
        }
    }

    /// Sets `cfg`'s physics to these.
    pub fn apply(&self, cfg: &mut EngineConfig) {
        let g = &mut cfg.gpu;
        let scale = if g.gddr() {
            self.gddr_mem_scale
        } else {
            self.mem_scale
        };
        g.mem_efficiency = (g.mem_efficiency * scale).clamp(0.05, 1.0);
        g.compute_efficiency = (g.compute_efficiency * self.compute_scale).clamp(0.05, 1.0);
        g.allreduce_latency_us *= self.allreduce_latency_scale;
        let o = &mut cfg.overheads;
        o.kv_read_efficiency = self.kv_read_efficiency;
        o.gpu_step_s = self.gpu_step_s;
        o.step_fixed_s = self.step_fixed_s;
        o.per_seq_s = self.per_seq_s;
        o.frontend_s = self.frontend_s;
    }

    fn get(&self, i: usize) -> f64 {
        [
            self.mem_scale,
            self.compute_scale,
            self.kv_read_efficiency,
            self.gpu_step_s,
            self.step_fixed_s,
            self.per_seq_s,
            self.frontend_s,
            self.allreduce_latency_scale,
            self.gddr_mem_scale,
        ][i]
    }

    fn set(&mut self, i: usize, v: f64) {
        let f = match i {
            0 => &mut self.mem_scale,
            1 => &mut self.compute_scale,
            2 => &mut self.kv_read_efficiency,
            3 => &mut self.gpu_step_s,
            4 => &mut self.step_fixed_s,
            5 => &mut self.per_seq_s,
            6 => &mut self.frontend_s,
            7 => &mut self.allreduce_latency_scale,
            _ => &mut self.gddr_mem_scale,
        };
        *f = v;
    }
}

/// Each parameter's physical bounds: outside them it would stand for something else. The
/// scales are of the GPU table's values, so the bounds on what they stand for are divided
/// by the table's constants.
const BOUNDS: [(f64, f64); 9] = [
    // Memory efficiency may move a fifth either way from the tables' values (no GPU streams
    // above ~95 % of peak).
    (0.8, 1.2),
    // GEMM efficiency between 42 % and 100 % of peak.
    (
        0.42 / inferscale_engine::hardware::COMPUTE_EFFICIENCY,
        1.0 / inferscale_engine::hardware::COMPUTE_EFFICIENCY,
    ),
    // Paged KV reads between 40 % and 100 % of the weight-read bandwidth.
    (0.4, 1.0),
    // GPU time per step beyond the roofline: at most 3 ms.
    (0.0, 3e-3),
    // CPU time per step: 0.2-5 ms (Python schedulers measure 1-3 ms).
    (0.2e-3, 5e-3),
    // CPU time per sequence per step: at most 100 µs.
    (0.0, 100e-6),
    // The frontend: 0.2-30 ms.
    (0.2e-3, 30e-3),
    // All-reduce latency: half to four times the interconnect's nominal.
    (
        0.5 / inferscale_engine::hardware::ALLREDUCE_LATENCY_SCALE,
        4.0 / inferscale_engine::hardware::ALLREDUCE_LATENCY_SCALE,
    ),
    // GDDR memory efficiency: as HBM's.
    (0.8, 1.2),
];

/// The metric families a fit minimises, each with the median error it is held to.
pub const TARGETS: [(&str, f64); 4] = [
    ("throughput", 0.10),
    ("e2e", 0.10),
    ("itl", 0.10),
    ("ttft", 0.20),
];

/// How far a report is from the targets: the squared median errors over their targets,
/// plus a tenth of the mean errors' (so that tails count a little).
pub fn objective(r: &Report) -> f64 {
    TARGETS
        .iter()
        .map(|(f, t)| {
            r.per_family.get(*f).map_or(0.0, |a| {
                (a.median_ape / t).powi(2) + 0.1 * (a.mean_ape.min(1.0) / t)
            })
        })
        .sum()
}

/// What a fit found.
#[derive(Debug, Clone, Serialize)]
pub struct Fit {
    /// The parameters.
    pub physics: Physics,
    /// The objective at them.
    pub objective: f64,
    /// Evaluations made.
    pub evaluations: usize,
}

/// Runs the cases with `physics`.
pub fn evaluate(cases: &[Case], cat: &dyn Catalog, opts: &Options, physics: &Physics) -> Report {
    let opts = Options {
        physics: Some(*physics),
        ..*opts
    };
    run(cases, cat, &opts, &mut |_, _| {})
}

/// Coordinate descent from `start` (usually [`Physics::prior`]), in multiplicative steps
/// that halve when no move helps, within the bounds of each parameter (`BOUNDS`).
pub fn fit(
    cases: &[Case],
    cat: &dyn Catalog,
    opts: &Options,
    start: Physics,
    progress: &mut dyn FnMut(usize, f64),
) -> Fit {
    let mut best = start;
    let mut best_j = objective(&evaluate(cases, cat, opts, &best));
    let mut evaluations = 1;
    let mut step: f64 = 0.5;
    while step > 0.02 {
        let mut moved = false;
        for (i, &(lo, hi)) in BOUNDS.iter().enumerate() {
            let here = best.get(i);
            let candidates = [here * (1.0 + step), here / (1.0 + step), here + step * 1e-3];
            for v in candidates {
                let v = v.clamp(lo, hi);
                if (v - here).abs() < 1e-12 {
                    continue;
                }
                let mut p = best;
                p.set(i, v);
                let j = objective(&evaluate(cases, cat, opts, &p));
                evaluations += 1;
                if j < best_j - 1e-9 {
                    best = p;
                    best_j = j;
                    moved = true;
                    break;
                }
            }
        }
        progress(evaluations, best_j);
        if !moved {
            step /= 2.0;
        }
    }
    Fit {
        physics: best,
        objective: best_j,
        evaluations,
    }
}
