//! The scaling policy: what the ScaledObject scales by, at what target, how fast it moves
//! and how many replicas it keeps warm — each with its reason. `generate` writes the
//! ScaledObject (and the NodePool's consolidation) from it; `inferscale tune` searches its
//! space in the rehearsal and records the one that held (`thresholds.json`'s `scaling`).
//!
//! The primary signal is proportional to load: requests in flight per pod (running and
//! waiting), whose target follows from the measurement by Little's law, or requests arriving
//! per pod against the capacity. The seeds' queue depth is not: it reads 0 whenever the
//! replicas keep up, so a steady load above one replica makes the HPA scale in, the queue
//! come back, and the HPA scale out again (the flapping the rehearsal shows). The queue stays
//! as a booster for steps, and the latency guardrail as a `Value` trigger.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::thresholds::Thresholds;

/// What the primary trigger reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Primary {
    /// Requests in flight (running + waiting) per pod.
    InFlight,
    /// Requests arriving per second per pod.
    ArrivalRate,
    /// Requests waiting per pod: the seeds' trigger.
    Queue,
    /// Requests in flight at an inference gateway's endpoint picker (llm-d's router): those
    /// it dispatched and that have not finished, plus those its flow control holds, per pod.
    GatewayInFlight,
    /// The endpoint picker's token backlog: the uncached prompt tokens of the requests it
    /// dispatched and that have not finished, per pod.
    GatewayTokens,
}

impl Primary {
    /// Every primary, the proportional ones first.
    pub const ALL: [Primary; 5] = [
        Primary::InFlight,
        Primary::ArrivalRate,
        Primary::GatewayInFlight,
        Primary::GatewayTokens,
        Primary::Queue,
    ];

    /// The name on the command line and in files (`in-flight`, `arrival-rate`, `queue`,
    /// `gateway-in-flight`, `gateway-tokens`).
    pub fn key(self) -> &'static str {
        match self {
            Primary::InFlight => "in-flight",
            Primary::ArrivalRate => "arrival-rate",
            Primary::Queue => "queue",
            Primary::GatewayInFlight => "gateway-in-flight",
            Primary::GatewayTokens => "gateway-tokens",
        }
    }

    /// The unit of its target.
    pub fn unit(self) -> &'static str {
        match self {
            Primary::InFlight | Primary::GatewayInFlight => "requests in flight",
            Primary::ArrivalRate => "req/s",
            Primary::Queue => "requests waiting",
            Primary::GatewayTokens => "prompt tokens in flight",
        }
    }

    /// What it reads, in words.
    pub fn about(self) -> &'static str {
        match self {
            Primary::InFlight => "requests in flight",
            Primary::ArrivalRate => "arrival rate",
            Primary::Queue => "queue",
            Primary::GatewayInFlight => "the gateway's requests in flight",
            Primary::GatewayTokens => "the gateway's token backlog",
        }
    }

    /// Whether it is read from an inference gateway's endpoint picker.
    pub fn at_gateway(self) -> bool {
        matches!(self, Primary::GatewayInFlight | Primary::GatewayTokens)
    }
}

/// How fast the HPA moves in one direction.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Step {
    /// `stabilizationWindowSeconds`.
    pub window_s: u32,
    /// A `Pods` policy: at most this many pods per period (0: none).
    pub pods: u32,
    /// A `Percent` policy: at most this share of the current pods per period (0: none).
    pub percent: u32,
    /// The policies' `periodSeconds`.
    pub period_s: u32,
}

/// What the tuning showed, for the record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tuned {
    /// The end-to-end SLO, seconds.
    pub slo_e2e_s: f64,
    /// The share of requests that had to meet it outside the named transients.
    pub attainment: f64,
    /// The lowest attainment outside the transients over the traces tuned on.
    pub worst_attainment: f64,
    /// GPU-hours over the traces, and the perfect-foresight schedule's.
    pub gpu_hours: f64,
    /// The perfect-foresight schedule's GPU-hours on the same traces.
    pub foresight_gpu_hours: f64,
    /// Flaps over the steady traces.
    pub steady_flaps: usize,
    /// The traces tuned on.
    pub traces: Vec<String>,
    /// The replica's capacity at the SLO, req/s (what `utilisation` is a share of).
    pub capacity_slo_rps: f64,
    /// A new replica's start-up, seconds.
    pub startup_s: f64,
    /// The seed.
    pub seed: u64,
}

/// The policy. See the module documentation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Policy {
    /// What the primary trigger reads.
    pub primary: Primary,
    /// The share of a replica's capacity the target stands for (not for `queue`).
    pub utilisation: Option<f64>,
    /// The primary trigger's target per pod (`AverageValue`), in the primary's unit.
    pub target: f64,
    /// Anticipation: a second trigger on the primary as a straight line through its last
    /// [`Policy::trend_window`] seconds predicts it this many seconds ahead
    /// (`predict_linear`), at the same target, so that a rising load is met a start-up
    /// early; `None`: off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub horizon_s: Option<u32>,
    /// How far back the anticipation's line looks, seconds; `None`: [`TREND_WINDOW_S`]. A
    /// shorter window sees a rise sooner and follows the noise of a steady load more.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trend_window_s: Option<u32>,
    /// The queue booster: waiting requests per pod (`AverageValue`), when on.
    pub queue_booster: Option<u32>,
    /// The guardrail: p95 time in the queue over 2 minutes, seconds (`Value`), when on.
    pub guardrail_s: Option<f64>,
    /// The most the guardrail multiplies the ready pods by in one decision (its p95 is read
    /// up to this many times the threshold); `None`: unbounded, as the seeds' guardrail.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guardrail_ratio_max: Option<f64>,
    /// `minReplicaCount`.
    pub min_replicas: u32,
    /// `maxReplicaCount` the tuning needed room for (the suite's peak at a low
    /// utilisation), when tuned; `generate --max-replicas` overrides it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_replicas: Option<u32>,
    /// `pollingInterval`, seconds.
    pub polling_s: u32,
    /// Scale-up behaviour.
    pub scale_up: Step,
    /// Scale-down behaviour.
    pub scale_down: Step,
    /// Karpenter's `consolidateAfter` for the GPU nodes, seconds.
    pub consolidate_after_s: u32,
    /// The per-replica capacity the targets were derived from, req/s.
    pub capacity_rps: f64,
    /// For the arrival rate on an engine that counts no finished requests (llama.cpp): the
    /// measured mean output tokens of a request, what its generated-token counter is
    /// divided by to count them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens_mean: Option<f64>,
    /// Set when `inferscale tune` chose it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tuned: Option<Tuned>,
    /// For each choice, why.
    pub reasons: BTreeMap<String, String>,
}

/// The utilisation a policy starts from before tuning: a fifth of a replica kept free, for
/// the noise of Poisson arrivals and the minutes a new replica takes.
pub const DEFAULT_UTILISATION: f64 = 0.8;

/// The most a derived policy's guardrail multiplies the ready pods by in one decision: half
/// as many again. A latency is not proportional to the pods missing: read as a `Value` it
/// asks for `ready × p95 / threshold`, so a queue of a minute on one replica asks for every
/// replica the room allows, which start a start-up later, when the proportional primary has
/// already asked for what the load needs, and stay a scale-down window after the backlog
/// they were asked for has drained.
pub const GUARDRAIL_RATIO_MAX: f64 = 1.5;

/// How far back the anticipation's straight line looks by default, seconds: five minutes of
/// a Prometheus scrape every 15 s.
pub const TREND_WINDOW_S: u32 = 300;

/// A new replica's start-up below which the scale-down window is still this long, seconds
/// (the seeds' five minutes of calm before removing capacity).
pub const MIN_SCALE_DOWN_WINDOW_S: u32 = 300;

/// The mean latency at the healthy step (the p95 when the run did not record a mean).
fn healthy_latency(t: &Thresholds) -> (f64, &'static str) {
    match t.healthy.e2e_mean_seconds {
        Some(m) if m > 0.0 => (m, "mean"),
        _ => (t.healthy.p95_e2e_seconds, "p95 (no mean recorded)"),
    }
}

/// Rounds to three significant figures, for targets a reader can check.
fn sig3(x: f64) -> f64 {
    if x == 0.0 || !x.is_finite() {
        return x;
    }
    let d = 10f64.powi(2 - x.abs().log10().floor() as i32);
    (x * d).round() / d
}

/// The token backlog's target per pod at utilisation `u` of `capacity_rps`: Little's law in
/// uncached prompt tokens, and why.
fn token_target(t: &Thresholds, u: f64, capacity_rps: f64) -> (f64, String) {
    let (w, which) = healthy_latency(t);
    let requests = u * capacity_rps * w;
    let (prompt, known) = match t.workload.prompt_tokens_mean {
        Some(p) if p > 0.0 => (p, "the measured mean prompt"),
        _ => (1.0, "no prompt length was recorded: one token a request"),
    };
    let k = sig3(requests * prompt);
    (
        k.max(1.0),
        format!(
            "Little's law in prompt tokens: {:.0} % × {capacity_rps:.1} req/s × {w:.2} s (the healthy step's {which} latency) = {requests:.1} requests in flight × {prompt:.0} tokens ({known}) = {k} uncached prompt tokens dispatched per pod; the HPA asks for ceil(backlog / {k}) replicas, so long prompts weigh more than short ones",
            u * 100.0
        ),
    )
}

/// The guardrail's bound for a policy on `primary` ([`GUARDRAIL_RATIO_MAX`]; none for the
/// seeds' queue shape), with its reason.
fn guardrail_ratio(primary: Primary, reasons: &mut BTreeMap<String, String>) -> Option<f64> {
    let r = (primary != Primary::Queue).then_some(GUARDRAIL_RATIO_MAX)?;
    reasons.insert(
        "guardrail_ratio_max".into(),
        format!(
            "{r}: the guardrail asks for at most {r} times the ready pods in one decision. A latency is not proportional to the pods missing (a queue of a minute on one replica would ask for every replica the room allows); the primary counts what the load needs, the guardrail only nudges where it falls short"
        ),
    );
    Some(r)
}

impl Policy {
    /// The policy derived from the thresholds by rule: `primary` at `utilisation` of
    /// `capacity_rps` per replica (the measured capacity, or the capacity at the SLO that
    /// `tune` measured), windows from a replica's `startup_s`, `min_replicas` warm.
    pub fn derive(
        t: &Thresholds,
        primary: Primary,
        utilisation: f64,
        capacity_rps: f64,
        startup_s: f64,
        min_replicas: u32,
    ) -> Policy {
        let mut reasons = BTreeMap::new();
        let u = utilisation.clamp(0.05, 1.0);
        let (w, which) = healthy_latency(t);
        let target = match primary {
            Primary::InFlight => {
                let l = sig3(u * capacity_rps * w);
                reasons.insert(
                    "target".into(),
                    format!(
                        "Little's law: a replica carrying {:.0} % of its {capacity_rps:.1} req/s holds about {:.0} % × {capacity_rps:.1} req/s × {w:.2} s (the healthy step's {which} latency) = {l} requests in flight; the HPA asks for ceil(in flight / {l}) replicas, in proportion to the load",
                        u * 100.0,
                        u * 100.0
                    ),
                );
                l.max(1.0)
            }
            Primary::ArrivalRate => {
                let r = sig3(u * capacity_rps);
                reasons.insert(
                    "target".into(),
                    format!(
                        "{:.0} % of a replica's {capacity_rps:.1} req/s: the HPA asks for ceil(arrivals / {r}) replicas; arrivals are what ended plus the growth of what is in flight, so a load beyond what the pods serve still shows",
                        u * 100.0
                    ),
                );
                r.max(0.01)
            }
            Primary::GatewayInFlight => {
                let l = sig3(u * capacity_rps * w);
                reasons.insert(
                    "target".into(),
                    format!(
                        "Little's law, counted at the inference gateway: a replica carrying {:.0} % of its {capacity_rps:.1} req/s holds about {:.0} % × {capacity_rps:.1} req/s × {w:.2} s (the healthy step's {which} latency) = {l} requests in flight, dispatched or held by the gateway's flow control; the HPA asks for ceil(in flight / {l}) replicas",
                        u * 100.0,
                        u * 100.0
                    ),
                );
                l.max(1.0)
            }
            Primary::GatewayTokens => {
                let (k, why) = token_target(t, u, capacity_rps);
                reasons.insert("target".into(), why);
                k
            }
            Primary::Queue => {
                let q = f64::from(t.scale_out.queue_depth_per_pod);
                reasons.insert(
                    "target".into(),
                    format!(
                        "the seeds' trigger: {q} waiting requests per pod. It reads 0 whenever the replicas keep up, so under a steady load above one replica it scales in until the queue returns (it flaps); kept for comparison"
                    ),
                );
                q
            }
        };
        // The booster asks for more replicas only for a queue the others cannot drain in
        // time: what the spare capacity at this utilisation serves in a start-up, per pod (and
        // never below the measured scale-out threshold).
        let spare = ((1.0 - u) * capacity_rps * startup_s.max(0.0)).round() as u32;
        let booster = (primary != Primary::Queue)
            .then_some(spare.max(t.scale_out.queue_depth_per_pod).max(1));
        if let Some(q) = booster {
            reasons.insert(
                "queue_booster".into(),
                format!(
                    "a second trigger on the queue at {q} waiting per pod: what a replica's spare capacity at this utilisation ({:.0} % of {capacity_rps:.1} req/s) serves in a start-up ({startup_s:.0} s), and at least the measured scale-out threshold ({}). A step fills the queue within seconds; a backlog the replicas cannot clear before a new one could start asks for more, and the more there are the sooner the backlog on the first ones drains (the Service spreads new requests over all of them). A queue of a few seconds' work asks for nothing",
                    (1.0 - u) * 100.0,
                    t.scale_out.queue_depth_per_pod
                ),
            );
        }
        let startup = startup_s.max(0.0).round() as u32;
        let down_window = startup.clamp(MIN_SCALE_DOWN_WINDOW_S, 3600);
        reasons.insert(
            "scale_down.window_s".into(),
            format!(
                "{down_window} s: the highest proposal of the last {down_window} s decides a scale-in, at least a replica's start-up ({startup} s), so a replica is not removed while one removed earlier would still be starting if the load came back"
            ),
        );
        reasons.insert(
            "scale_up.window_s".into(),
            "0 s: a proportional signal needs no holding (its average moves with the load, not with a burst's queue), and every second of delay adds to a start-up that is already minutes long".into(),
        );
        reasons.insert(
            "scale_up.policies".into(),
            "up to double, or 4 pods, every 15 s: the HPA asks for what the load needs in one decision, so the replicas start together instead of one start-up after another".into(),
        );
        reasons.insert(
            "scale_down.policies".into(),
            "one pod a minute: each scale-in is judged again on the load the remaining pods carry"
                .into(),
        );
        let consolidate = down_window;
        reasons.insert(
            "consolidate_after_s".into(),
            format!(
                "{consolidate} s: an empty GPU node waits one scale-down window before Karpenter removes it, so a pod asked for again soon lands on a node that is up and skips the node's provisioning"
            ),
        );
        let guardrail_ratio_max = guardrail_ratio(primary, &mut reasons);
        reasons.insert(
            "min_replicas".into(),
            format!(
                "{min_replicas}: warm replicas are what absorbs a step faster than a start-up ({startup} s)"
            ),
        );
        Policy {
            primary,
            utilisation: (primary != Primary::Queue).then_some(u),
            target,
            horizon_s: None,
            trend_window_s: None,
            queue_booster: booster,
            guardrail_s: Some(t.scale_out.p95_queue_time_seconds),
            guardrail_ratio_max,
            min_replicas: min_replicas.max(1),
            max_replicas: None,
            polling_s: 15,
            scale_up: Step {
                window_s: 0,
                pods: 4,
                percent: 100,
                period_s: 15,
            },
            scale_down: Step {
                window_s: down_window,
                pods: 1,
                percent: 0,
                period_s: 60,
            },
            consolidate_after_s: consolidate,
            capacity_rps,
            output_tokens_mean: (primary == Primary::ArrivalRate)
                .then_some(t.workload.output_tokens_mean)
                .flatten()
                .filter(|k| *k > 0.0),
            tuned: None,
            reasons,
        }
    }

    /// How far back the anticipation's line looks, seconds ([`TREND_WINDOW_S`] unless set).
    pub fn trend_window(&self) -> u32 {
        self.trend_window_s.unwrap_or(TREND_WINDOW_S)
    }

    /// One line on what it is.
    pub fn describe(&self) -> String {
        let mut s = match self.utilisation {
            Some(u) => format!(
                "{} at {} {} per pod ({:.0} % of {:.1} req/s)",
                self.primary.key(),
                self.target,
                self.primary.unit(),
                u * 100.0,
                self.capacity_rps
            ),
            None => format!(
                "{} at {} {} per pod",
                self.primary.key(),
                self.target,
                self.primary.unit()
            ),
        };
        if let Some(h) = self.horizon_s {
            s.push_str(&format!(", {h} s ahead"));
            if let Some(w) = self.trend_window_s {
                s.push_str(&format!(" (a line through {w} s)"));
            }
        }
        if let Some(q) = self.queue_booster {
            s.push_str(&format!(", queue booster {q}"));
        }
        s.push_str(&format!(
            ", min {}, up window {} s, down window {} s, consolidate after {} s",
            self.min_replicas,
            self.scale_up.window_s,
            self.scale_down.window_s,
            self.consolidate_after_s
        ));
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn three_significant_figures() {
        assert_eq!(sig3(107.567), 108.0);
        assert_eq!(sig3(44.96), 45.0);
        assert_eq!(sig3(0.01234), 0.0123);
        assert_eq!(sig3(0.0), 0.0);
    }
}
