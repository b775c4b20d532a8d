//! Scaling and alerting thresholds derived from a saturation finding, each with its reason.
//! Written as `thresholds.json` (documented in `docs/formats.md`); `docs/analysis.md` explains
//! the rules.

use std::collections::BTreeMap;

use inferscale_results::plan::{Length, PromptSource};
use inferscale_results::run::{RunReport, StepReport};
use serde::{Deserialize, Serialize};

use crate::replica::{ReplicaFit, fit};
use crate::saturation::{Saturation, Status};
use crate::scaling::Policy;

/// The current `thresholds.json` version.
pub const THRESHOLDS_VERSION: u32 = 1;

/// The e2e p95 guardrail is this multiple of the healthy step's p95 (the seeds: 2.5 s → 5 s).
pub const GUARDRAIL_FACTOR: f64 = 2.0;
/// Scale-in requires the p95 below this multiple of the healthy p95 (the seeds: 2.5 s → 3 s).
pub const SCALE_IN_FACTOR: f64 = 1.25;
/// Scale out when queueing adds this fraction of the healthy p95 to a request's latency: a
/// queue of Q requests at capacity C makes a newcomer wait about Q / C seconds.
pub const QUEUE_WAIT_FRACTION: f64 = 0.2;
/// How long the queue must stay above the threshold before scaling out, at most.
pub const SCALE_OUT_FOR_MAX_S: u32 = 60;
/// …and at least (two Prometheus scrapes of 15 s; KEDA polls every 30 s by default).
pub const SCALE_OUT_FOR_MIN_S: u32 = 30;
/// Scale-in conditions must hold this long (the seeds: 5 minutes; slower than scale-out).
pub const SCALE_IN_FOR_S: u32 = 300;

/// When to add replicas.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScaleOut {
    /// The primary trigger: waiting requests per pod (KEDA `AverageValue`).
    pub queue_depth_per_pod: u32,
    /// …held this long.
    pub for_seconds: u32,
    /// The guardrail: p95 end-to-end latency, seconds.
    pub p95_e2e_seconds: f64,
    /// p95 time to first token, seconds (when the run streamed): reacts to capacity, not to
    /// output length.
    pub p95_ttft_seconds: Option<f64>,
    /// p95 time waiting in the server's queue, seconds: the same waiting budget as the e2e
    /// guardrail, readable from vLLM's queue-time histogram whatever the client streams.
    pub p95_queue_time_seconds: f64,
}

/// When to remove replicas.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScaleIn {
    /// Waiting requests per pod at most (0: none).
    pub queue_depth: u32,
    /// p95 end-to-end latency below this, seconds.
    pub p95_e2e_seconds: f64,
    /// Both held this long.
    pub for_seconds: u32,
}

/// KEDA's activation: the scaler is active (scales from zero, reports) above this.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Activation {
    /// Waiting requests.
    pub queue_depth: u32,
}

/// Replicas for a given peak.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Peak {
    /// The peak asked about, req/s.
    pub rps: f64,
    /// What one replica is planned for, req/s (the highest sustained rate).
    pub per_replica_rps: f64,
    /// `ceil(rps / per_replica_rps)`.
    pub replicas: u32,
}

/// The requests the run sent, for sizing the deployment (`--max-model-len`, grace periods).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Workload {
    /// Mean prompt tokens of a successful request (from `usage`).
    pub prompt_tokens_mean: Option<f64>,
    /// Mean output tokens.
    pub output_tokens_mean: Option<f64>,
    /// The largest `max_tokens` the plan could ask for.
    pub max_tokens: Option<u32>,
    /// The longest successful request at the healthy step, seconds.
    pub e2e_max_seconds: Option<f64>,
    /// Where the prompts came from when they shared prefixes (a `--shape`, a request
    /// trace): what a rehearsal sends again, so that its replicas' prefix caches find what
    /// the measured server's did. `None`: unique prompts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompts: Option<PromptSource>,
}

/// What the thresholds were measured at.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Healthy {
    /// The last sustained step's offered rate.
    pub step_rps: f64,
    /// Its client e2e p95, seconds.
    pub p95_e2e_seconds: f64,
    /// Its client TTFT p95, seconds (streaming runs).
    pub p95_ttft_seconds: Option<f64>,
    /// Its client e2e mean, seconds (what Little's law multiplies a rate by).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub e2e_mean_seconds: Option<f64>,
    /// The server's queue there: p95 and max.
    pub queue_depth_p95: Option<f64>,
    /// Max.
    pub queue_depth_max: Option<f64>,
}

/// The source run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Source {
    /// The server.
    pub url: String,
    /// The model.
    pub model: String,
    /// When the run started.
    pub started_at: String,
    /// The simulator's description, when the run was simulated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub simulated: Option<inferscale_results::run::Simulated>,
    /// `max_num_seqs`, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_num_seqs: Option<u32>,
    /// The engine its metrics came from (`vllm`, `llamacpp`, …; absent in files written
    /// before engines were told apart, which were vLLM's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine: Option<String>,
}

/// The whole of `thresholds.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Thresholds {
    /// [`THRESHOLDS_VERSION`].
    pub version: u32,
    /// The run they come from.
    pub source: Source,
    /// The finding they rest on.
    pub status: Status,
    /// The run was interrupted (or otherwise incomplete): treat with care.
    pub partial: bool,
    /// The highest sustained offered rate, req/s.
    pub saturation_rps: Option<f64>,
    /// The first rate not sustained.
    pub first_saturated_rps: Option<f64>,
    /// Estimated capacity, req/s.
    pub capacity_rps: Option<f64>,
    /// The healthy step the thresholds scale from.
    pub healthy: Healthy,
    /// The measured requests.
    #[serde(default)]
    pub workload: Workload,
    /// Scale-out.
    pub scale_out: ScaleOut,
    /// Scale-in.
    pub scale_in: ScaleIn,
    /// KEDA activation.
    pub activation: Activation,
    /// With `--peak-rps`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak: Option<Peak>,
    /// The replica calibrated from the run's steps, for rehearsing a server nothing else is
    /// known of.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replica: Option<ReplicaFit>,
    /// The scaling policy `generate` writes: set by `inferscale tune` (and `run`, which
    /// tunes); without it, `generate` derives one by rule.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scaling: Option<Policy>,
    /// For each threshold (by its JSON path), why it is what it is.
    pub rationale: BTreeMap<String, String>,
    /// The latency SLO the run counted goodput against (`--slo`), when one was given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slo: Option<inferscale_results::slo::Slo>,
    /// What judged the steps: `queue` (the method's) or the goodput share.
    #[serde(default = "crate::saturation::queue_knee")]
    pub knee: crate::saturation::Knee,
    /// Anything the reader should know before trusting these numbers.
    #[serde(default)]
    pub warnings: Vec<String>,
}

/// Why thresholds could not be derived.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ThresholdError {
    /// Even the lowest rate saturated the server.
    #[error(
        "no step was sustained (the first, at {first_saturated_rps} req/s, already saturated): rerun with lower rates"
    )]
    SaturatedFromStart {
        /// The lowest rate tried.
        first_saturated_rps: f64,
    },
    /// No sustained step for another reason (client-limited, no data, an interrupted run).
    #[error("no sustained step to measure thresholds at: {summary}")]
    NoSustainedStep {
        /// The saturation finding, in words.
        summary: String,
    },
    /// The healthy step measured no end-to-end latency, on either side.
    #[error("the healthy step ({rps} req/s) has no e2e latency")]
    NoLatency {
        /// Its offered rate.
        rps: f64,
    },
}

/// Rounds up to a readable value: tenths below 2 s, halves below 10 s, whole seconds above.
pub fn nice_up(x: f64) -> f64 {
    let step = if x < 2.0 {
        0.1
    } else if x < 10.0 {
        0.5
    } else {
        1.0
    };
    // Rounded again so that the steps' binary representation does not show (1.9, not
    // 1.9000000000000001).
    ((((x / step) - 1e-9).ceil() * step) * 1e6).round() / 1e6
}

/// A latency threshold `factor × base`, rounded up to a readable value when that keeps it
/// within `[lo, hi] × base`, else to tenths.
fn readable(base: f64, factor: f64, lo: f64, hi: f64) -> f64 {
    let nice = nice_up(factor * base);
    let v = if nice >= lo * base && nice <= hi * base {
        nice
    } else {
        ((factor * base) * 10.0).ceil() / 10.0
    };
    (v * 1000.0).round() / 1000.0
}

/// The inference engine the run's server showed in its metrics (not the GPU exporter).
fn measured_engine(run: &RunReport) -> Option<String> {
    let mut engines = run.target.engines.iter();
    engines.find(|e| e.as_str() != "dcgm").cloned()
}

/// Derives the thresholds.
pub fn thresholds(
    run: &RunReport,
    sat: &Saturation,
    peak_rps: Option<f64>,
) -> Result<Thresholds, ThresholdError> {
    let Some(h) = sat.healthy_step.and_then(|h| run.steps.get(h)) else {
        return Err(match sat.status {
            Status::SaturatedFromStart => ThresholdError::SaturatedFromStart {
                first_saturated_rps: sat.first_saturated_rps.unwrap_or(0.0),
            },
            _ => ThresholdError::NoSustainedStep {
                summary: sat.summary.clone(),
            },
        });
    };
    let mut rationale = BTreeMap::new();
    let mut warnings = Vec::new();
    let hp95 = h
        .latency_s
        .e2e
        .p95
        .or(h.server.as_ref().and_then(|s| s.e2e_p95_s))
        .ok_or(ThresholdError::NoLatency { rps: h.target_rps })?;
    let healthy = Healthy {
        step_rps: h.target_rps,
        p95_e2e_seconds: hp95,
        p95_ttft_seconds: h.latency_s.ttft.p95,
        e2e_mean_seconds: h.latency_s.e2e.mean,
        queue_depth_p95: h.server.as_ref().and_then(|s| s.queue_depth.p95),
        queue_depth_max: h.server.as_ref().and_then(|s| s.queue_depth.max),
    };
    let capacity = sat.capacity_rps.unwrap_or(h.target_rps);

    let Guardrails {
        guard,
        budget,
        queue_wait,
        ttft_guard,
    } = guardrails(&healthy, h.target_rps, &mut rationale);

    // The queue threshold.
    let floor = healthy
        .queue_depth_max
        .or(healthy.queue_depth_p95)
        .unwrap_or(0.0);
    let ceiling = budget * capacity;
    let raw = QUEUE_WAIT_FRACTION * hp95 * capacity;
    let mut q = raw.round().max(floor + 1.0).max(1.0);
    if ceiling > 2.0 && q > ceiling / 2.0 {
        q = (ceiling / 2.0).floor().max(floor + 1.0);
    }
    let q = q as u32;
    rationale.insert(
        "scale_out.queue_depth_per_pod".into(),
        format!(
            "a newcomer behind Q queued requests waits about Q / capacity ({capacity:.1} req/s); {q} waiting ≈ {:.2} s, {:.0} % of the healthy p95 ({hp95:.2} s). It is above the queue seen at the last healthy step (max {floor:.0}) and well below the {ceiling:.0} at which waiting alone would reach the guardrail",
            f64::from(q) / capacity,
            f64::from(q) / capacity / hp95 * 100.0
        ),
    );
    if sat.status == Status::NotSaturated {
        warnings.push(format!(
            "the run never saturated the server (up to {} req/s): the capacity ({capacity:.1} req/s) is a projection from Little's law, and the queue threshold rests on it",
            h.target_rps
        ));
    }
    // How long to hold: at the first saturated rate the queue climbs by (rate − capacity)
    // per second; if it would go from the threshold to the guardrail's level within a
    // minute, react after the minimum.
    let excess = sat.first_saturated_rps.map(|r| r - capacity);
    let for_seconds = match excess {
        Some(e) if e > 0.0 && (ceiling - f64::from(q)) / e < 60.0 => SCALE_OUT_FOR_MIN_S,
        _ => SCALE_OUT_FOR_MAX_S,
    };
    rationale.insert(
        "scale_out.for_seconds".into(),
        match excess {
            Some(e) if e > 0.0 => format!(
                "at the first saturated rate the queue grows by about {e:.1} requests/s, so from {q} to the guardrail's {ceiling:.0} in about {:.0} s; hold {for_seconds} s (at least two 15 s scrapes, at most a minute) so a burst shorter than that does not add a GPU",
                (ceiling - f64::from(q)) / e
            ),
            _ => format!(
                "hold {for_seconds} s: long enough to ignore a burst, short enough to start a replica (which takes minutes) before users feel the backlog"
            ),
        },
    );

    let scale_in_p95 = scale_in(hp95, &mut rationale);

    let activation = activation(run, &mut rationale);

    let peak = peak_rps.map(|rps| {
        peak(
            rps,
            sat.saturation_rps.unwrap_or(h.target_rps),
            &mut rationale,
        )
    });
    if run.interrupted {
        warnings.push(
            "the run was interrupted: the last step is partial and higher rates were never tried"
                .into(),
        );
    }
    rationale.insert("saturation".into(), sat.summary.clone());

    let workload = workload(run, h);
    Ok(Thresholds {
        version: THRESHOLDS_VERSION,
        source: Source {
            url: run.target.url.clone(),
            model: run.target.model.clone(),
            started_at: run.started_at.clone(),
            simulated: run.target.simulated.clone(),
            max_num_seqs: run.target.max_num_seqs,
            engine: measured_engine(run),
        },
        status: sat.status,
        partial: run.interrupted,
        saturation_rps: sat.saturation_rps,
        first_saturated_rps: sat.first_saturated_rps,
        capacity_rps: sat.capacity_rps,
        healthy,
        workload,
        scale_out: ScaleOut {
            queue_depth_per_pod: q,
            for_seconds,
            p95_e2e_seconds: guard,
            p95_ttft_seconds: ttft_guard,
            p95_queue_time_seconds: queue_wait,
        },
        scale_in: ScaleIn {
            queue_depth: 0,
            p95_e2e_seconds: scale_in_p95,
            for_seconds: SCALE_IN_FOR_S,
        },
        activation: Activation {
            queue_depth: activation,
        },
        peak,
        replica: fit(run, sat).ok(),
        scaling: None,
        rationale,
        warnings,
        slo: run.slo,
        knee: sat.knee,
    })
}
/// The latency guardrails and the waiting they allow.
struct Guardrails {
    /// The p95 e2e guardrail, seconds.
    guard: f64,
    /// The waiting it allows beyond a healthy request, seconds.
    budget: f64,
    /// The p95 queue-time guardrail, seconds.
    queue_wait: f64,
    /// The p95 TTFT guardrail, seconds, when TTFT was measured.
    ttft_guard: Option<f64>,
}

/// The guardrails from the healthy step (at `rps`), their rationale written.
fn guardrails(healthy: &Healthy, rps: f64, rationale: &mut BTreeMap<String, String>) -> Guardrails {
    let hp95 = healthy.p95_e2e_seconds;
    let guard = readable(hp95, GUARDRAIL_FACTOR, 1.5, 3.0);
    rationale.insert(
        "scale_out.p95_e2e_seconds".into(),
        format!(
            "{GUARDRAIL_FACTOR}× the p95 at the last healthy step ({hp95:.2} s at {} req/s), rounded to {guard} s: far enough above normal variation not to fire on it, low enough to catch a backlog before users wait twice as long. vLLM's e2e buckets are 0.3 … 2, 2.5, 5, 10 s: Prometheus interpolates inside a bucket, so a guardrail between edges fires when the interpolated estimate crosses it",
            rps
        ),
    );
    let budget = (guard - hp95).max(0.0);
    let queue_wait = nice_up(budget.max(0.1));
    rationale.insert(
        "scale_out.p95_queue_time_seconds".into(),
        format!(
            "the waiting the guardrail allows beyond a healthy request ({guard} − {hp95:.2} s), rounded to {queue_wait} s: queue time grows with waiting only, not with output length"
        ),
    );
    let ttft_guard = healthy.p95_ttft_seconds.map(|t| nice_up(t + budget));
    if let (Some(g), Some(t)) = (ttft_guard, healthy.p95_ttft_seconds) {
        rationale.insert(
            "scale_out.p95_ttft_seconds".into(),
            format!(
                "the healthy TTFT p95 ({t:.2} s) plus the same waiting budget ({budget:.2} s), rounded to {g} s: every second in the queue shows one for one in TTFT"
            ),
        );
    }
    Guardrails {
        guard,
        budget,
        queue_wait,
        ttft_guard,
    }
}

/// The scale-in latency: the healthy p95 `hp95` × [`SCALE_IN_FACTOR`], readable; the
/// scale-in rationale written.
fn scale_in(hp95: f64, rationale: &mut BTreeMap<String, String>) -> f64 {
    let scale_in_p95 = readable(hp95, SCALE_IN_FACTOR, 1.0, 1.5);
    rationale.insert(
        "scale_in.p95_e2e_seconds".into(),
        format!(
            "{SCALE_IN_FACTOR}× the healthy p95 ({hp95:.2} s), rounded to {scale_in_p95} s: only remove capacity when latency is back to normal"
        ),
    );
    rationale.insert(
        "scale_in.for_seconds".into(),
        format!(
            "{SCALE_IN_FOR_S} s with an empty queue and p95 below {scale_in_p95} s: scale in much slower than out, and not within a replica's start-up time after scaling out (flapping costs a cold start each time)"
        ),
    );
    rationale.insert(
        "scale_in.queue_depth".into(),
        "0: any waiting request means the current replicas are fully used".into(),
    );
    scale_in_p95
}

/// KEDA's activation: above the queue's p95 at the lowest open-loop rate, at least 1.
fn activation(run: &RunReport, rationale: &mut BTreeMap<String, String>) -> u32 {
    let lowest_q = run
        .steps
        .iter()
        .filter(|s| s.concurrency.is_none())
        .min_by(|a, b| a.target_rps.total_cmp(&b.target_rps))
        .and_then(|s| s.server.as_ref())
        .and_then(|s| s.queue_depth.p95)
        .unwrap_or(0.0);
    let activation = (lowest_q.ceil() as u32).max(1);
    rationale.insert(
        "activation.queue_depth".into(),
        format!(
            "{activation}: KEDA counts the trigger active above this (and scales from zero on it when minReplicaCount is 0); at the lowest rate the queue's p95 was {lowest_q:.0}, so one waiting request already means traffic"
        ),
    );
    activation
}

/// The replicas for a peak of `rps`, at `per` req/s per replica (the highest sustained step).
fn peak(rps: f64, per: f64, rationale: &mut BTreeMap<String, String>) -> Peak {
    let replicas = (rps / per).ceil().max(1.0) as u32;
    rationale.insert(
        "peak.replicas".into(),
        format!(
            "{rps} req/s over {per} req/s per replica (the highest sustained step) = {replicas}; add one more to survive losing a node at peak"
        ),
    );
    Peak {
        rps,
        per_replica_rps: per,
        replicas,
    }
}

/// The workload the run sent: mean prompt and output tokens of the successful requests,
/// the output cap, and the longest request at the healthy step `h`.
fn workload(run: &RunReport, h: &StepReport) -> Workload {
    let (mut ok, mut prompt, mut output) = (0u64, 0u64, 0u64);
    for st in &run.steps {
        ok += st.requests.ok;
        prompt += st.tokens.prompt;
        output += st.tokens.output;
    }
    let mean = |x: u64| (ok > 0 && x > 0).then(|| x as f64 / ok as f64);
    Workload {
        prompt_tokens_mean: mean(prompt),
        output_tokens_mean: mean(output),
        max_tokens: match run.plan.requests.max_tokens {
            Length::Fixed { tokens } => Some(tokens),
            Length::Uniform { max, .. } => Some(max),
            Length::Normal { .. } | Length::LogNormal { .. } => None,
        },
        e2e_max_seconds: h.latency_s.e2e.max,
        prompts: match &run.plan.requests.prompt {
            p @ (PromptSource::Shared { .. } | PromptSource::Trace { .. }) => Some(p.clone()),
            _ => None,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readable_values() {
        assert_eq!(nice_up(4.4), 4.5);
        assert_eq!(nice_up(5.0), 5.0);
        assert_eq!(nice_up(0.42), 0.5);
        assert_eq!(nice_up(12.2), 13.0);
        assert_eq!(nice_up(1.85), 1.9);
        assert_eq!(format!("{}", nice_up(1.81)), "1.9");
        // 2 × 2.2 = 4.4 → 4.5 (2.05×), 1.25 × 2.2 = 2.75 → 3.0 (1.36×).
        assert_eq!(readable(2.2, 2.0, 1.5, 3.0), 4.5);
        assert_eq!(readable(2.2, 1.25, 1.0, 1.5), 3.0);
        // 1.25 × 1.9 = 2.375 → 2.5 is 1.32×; 1.25 × 1.61 = 2.01 → 2.5 is 1.55×: tenths instead.
        assert_eq!(readable(1.61, 1.25, 1.0, 1.5), 2.1);
    }
}
