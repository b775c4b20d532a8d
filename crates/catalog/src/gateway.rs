//! The inference gateway's endpoint picker (EPP): the families llm-d's router serves, and the
//! ones the Gateway API Inference Extension (GIE) served before it, that autoscaling reads.
//!
//! Where the names come from (read at these commits):
//! - llm-d/llm-d-router `pkg/epp/metrics/llm_d_router_metrics.go` @ ebab6879 (subsystem
//!   `llm_d_epp`): the canonical names. The router still emits each legacy twin beside it,
//!   with a HELP that says it is deprecated.
//! - kubernetes-sigs/gateway-api-inference-extension `pkg/epp/metrics/metrics.go` and
//!   `collectors/inference_pool.go` @ v1.5.0 (df9f8909): `inference_pool_*`,
//!   `inference_objective_*` (named `inference_model_*` up to v1.0), `inference_extension_*`.
//!   The EPP left GIE in June 2026 (a70292c1).
//!
//! Every HELP is exposed as `[ALPHA] <text>`; the text is kept here without the prefix. The
//! histograms' bucket bounds are the router's (TTFT, streaming TPOT, NTPOT).
//!
//! The SLO ratio llm-d's workload-variant autoscaler scales on
//! (`llm-d-workload-variant-autoscaler`, its EPP saturation queries): the pool's P90 TTFT and
//! P90 NTPOT over one minute, each divided by its SLO; the larger is the saturation.
//!
//! What llm-d recommends scaling on (llm-d/llm-d `guides/workload-autoscaling/keda-epp` @
//! 1890658a): the flow-control queue (`sum`, 1 per replica), the running requests (`sum`, 16
//! per replica), or, experimentally, the pool saturation (`max`, 0.7). The pool saturation of
//! the default utilization detector is the mean over endpoints of
//! `max(queue / 5, kv_cache / 0.8)`: [`QUEUE_DEPTH_THRESHOLD`], [`KV_CACHE_THRESHOLD`].

use inferscale_promtext::Exposition;

use crate::vllm::MetricKind;

/// The utilization detector's default queue-depth threshold per endpoint.
pub const QUEUE_DEPTH_THRESHOLD: f64 = 5.0;
/// The utilization detector's default KV-cache threshold.
pub const KV_CACHE_THRESHOLD: f64 = 0.8;

/// What an EPP family reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum GatewaySignal {
    /// Requests held in the gateway's flow-control queue (not yet sent to a model server).
    QueueHeld,
    /// The pool's saturation, as the saturation detector computes it (1.0: the gating set
    /// point; above: oversubscribed).
    PoolSaturation,
    /// Requests sent to a model server and not finished.
    Running,
    /// The model servers' waiting queue, averaged over the pool.
    AverageQueue,
    /// The model servers' KV-cache utilisation, averaged over the pool.
    AverageKvCache,
    /// The model servers' running requests, averaged over the pool.
    AverageRunning,
    /// Endpoints ready in the pool.
    ReadyEndpoints,
    /// Each endpoint's waiting queue.
    EndpointQueue,
    /// Tokens in flight per endpoint (the in-flight load producer's token backlog).
    InflightTokens,
    /// Requests processed.
    Requests,
    /// Time to first token, seconds.
    Ttft,
    /// Time per output token of streamed requests, seconds.
    Tpot,
    /// Normalized time per output token (end-to-end latency over output tokens), seconds.
    Ntpot,
}

/// One EPP family.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GatewayFamily {
    /// The llm-d router's name.
    pub name: &'static str,
    /// GIE v1.1–v1.5's name for the same thing (`""`: none).
    pub legacy: &'static str,
    /// Its type.
    pub kind: MetricKind,
    /// The router's labels.
    pub labels: &'static [&'static str],
    /// The HELP text after `[ALPHA] `.
    pub help: &'static str,
    /// What it reports.
    pub signal: GatewaySignal,
    /// A histogram's bucket bounds (`le`, without `+Inf`); empty for the others.
    pub buckets: &'static [f64],
}

const MODEL: &[&str] = &["model_name", "target_model_name", "fairness_id", "priority"];
const FLOW: &[&str] = &[
    "fairness_id",
    "priority",
    "inference_pool",
    "model_name",
    "target_model_name",
];

/// The families autoscaling and the dashboards read, router names first.
pub static FAMILIES: &[GatewayFamily] = &[
    GatewayFamily {
        name: "llm_d_epp_flow_control_queue_size",
        legacy: "inference_extension_flow_control_queue_size",
        kind: MetricKind::Gauge,
        labels: FLOW,
        help: "Current number of requests actively held in the Flow Control queue.",
        signal: GatewaySignal::QueueHeld,
        buckets: &[],
    },
    GatewayFamily {
        name: "llm_d_epp_flow_control_pool_saturation",
        legacy: "inference_extension_flow_control_pool_saturation",
        kind: MetricKind::Gauge,
        labels: &["inference_pool", "stage"],
        help: "Pool saturation signal gating Flow Control dispatch. The stage label partitions by pipeline role: 'prefill' and 'decode' are per-stage signals, 'effective' is max(prefill, decode) and is the value used for gating. 1.0 is the gating set point; values above 1.0 indicate the magnitude of oversubscription past it. An empty pool reads as 1.0. With the default utilization detector, endpoints with missing or stale metrics score as fully saturated (fail-closed; see flow_control_stale_endpoints).",
        signal: GatewaySignal::PoolSaturation,
        buckets: &[],
    },
    GatewayFamily {
        name: "llm_d_epp_request_running",
        legacy: "inference_objective_running_requests",
        kind: MetricKind::Gauge,
        labels: MODEL,
        help: "Current number of active running requests.",
        signal: GatewaySignal::Running,
        buckets: &[],
    },
    GatewayFamily {
        name: "llm_d_epp_average_queue_size",
        legacy: "inference_pool_average_queue_size",
        kind: MetricKind::Gauge,
        labels: &["name"],
        help: "The average number of requests pending in the model server queue.",
        signal: GatewaySignal::AverageQueue,
        buckets: &[],
    },
    GatewayFamily {
        name: "llm_d_epp_average_kv_cache_utilization",
        legacy: "inference_pool_average_kv_cache_utilization",
        kind: MetricKind::Gauge,
        labels: &["name"],
        help: "The average kv cache utilization for an inference server pool.",
        signal: GatewaySignal::AverageKvCache,
        buckets: &[],
    },
    GatewayFamily {
        name: "llm_d_epp_average_running_requests",
        legacy: "inference_pool_average_running_requests",
        kind: MetricKind::Gauge,
        labels: &["name"],
        help: "The average number of running requests across model servers in the pool.",
        signal: GatewaySignal::AverageRunning,
        buckets: &[],
    },
    GatewayFamily {
        name: "llm_d_epp_ready_endpoints",
        legacy: "inference_pool_ready_pods",
        kind: MetricKind::Gauge,
        labels: &["name"],
        help: "The number of ready endpoints in the inference server pool.",
        signal: GatewaySignal::ReadyEndpoints,
        buckets: &[],
    },
    GatewayFamily {
        name: "llm_d_epp_per_endpoint_queue_size",
        legacy: "inference_pool_per_pod_queue_size",
        kind: MetricKind::Gauge,
        labels: &["name", "model_server_endpoint"],
        help: "The total number of requests pending in the model server queue for each underlying endpoint.",
        signal: GatewaySignal::EndpointQueue,
        buckets: &[],
    },
    GatewayFamily {
        name: "llm_d_epp_inflight_tokens",
        legacy: "",
        kind: MetricKind::Gauge,
        labels: &[
            "endpoint_name",
            "namespace",
            "producer_name",
            "fairness_id",
            "priority",
        ],
        help: "Current number of in-flight tokens per endpoint (uncached prompt tokens, optionally plus estimated output), as tracked by the in-flight load producer.",
        signal: GatewaySignal::InflightTokens,
        buckets: &[],
    },
    GatewayFamily {
        name: "llm_d_epp_request_total",
        legacy: "inference_objective_request_total",
        kind: MetricKind::Counter,
        labels: MODEL,
        help: "Total number of processed requests.",
        signal: GatewaySignal::Requests,
        buckets: &[],
    },
    GatewayFamily {
        name: "llm_d_epp_request_ttft_seconds",
        legacy: "inference_objective_request_ttft_seconds",
        kind: MetricKind::Histogram,
        labels: &[
            "model_name",
            "target_model_name",
            "fairness_id",
            "priority",
            "streaming",
        ],
        help: "Time to first token in seconds, measured from request received to first response byte. For non-streaming requests, this equals total request duration.",
        signal: GatewaySignal::Ttft,
        buckets: &[
            0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0,
            8.0, 10.0, 15.0, 20.0, 30.0, 45.0, 60.0, 120.0,
        ],
    },
    GatewayFamily {
        name: "llm_d_epp_request_streaming_tpot_seconds",
        legacy: "inference_objective_request_tpot_seconds",
        kind: MetricKind::Histogram,
        labels: MODEL,
        help: "Average time per output token in seconds for streaming requests, computed as (e2e - TTFT) / (output_tokens - 1).",
        signal: GatewaySignal::Tpot,
        buckets: &[
            0.0005, 0.00205, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.125, 0.15, 0.2, 0.3, 0.4,
            0.5, 0.6, 0.8, 1.0, 2.0,
        ],
    },
    GatewayFamily {
        name: "llm_d_epp_request_ntpot_seconds",
        legacy: "inference_objective_normalized_time_per_output_token_seconds",
        kind: MetricKind::Histogram,
        labels: MODEL,
        help: "Normalized time per output token in seconds (end-to-end latency divided by output token count).",
        signal: GatewaySignal::Ntpot,
        buckets: &[
            0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0,
        ],
    },
];

/// The family of `signal`.
pub fn family(signal: GatewaySignal) -> &'static GatewayFamily {
    FAMILIES
        .iter()
        .find(|f| f.signal == signal)
        .unwrap_or_else(|| unreachable!("every gateway signal has a family"))
}

/// Which names an endpoint picker serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Names {
    /// The llm-d router's `llm_d_epp_*` (its legacy twins may be there too).
    Router,
    /// GIE v1.1–v1.5's `inference_pool_*`, `inference_objective_*`, `inference_extension_*`.
    Gie,
}

/// What one scrape of an endpoint picker says, each `None` where it lacks the family.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Reading {
    /// Whose names: `None` when the exposition has no EPP family at all.
    pub names: Option<Names>,
    /// EPP families present.
    pub families: usize,
    /// Requests held in flow control, summed.
    pub queue_held: Option<f64>,
    /// The pool saturation (the `effective` stage, or the largest series).
    pub saturation: Option<f64>,
    /// Running requests, summed.
    pub running: Option<f64>,
    /// The pool's average model-server queue.
    pub average_queue: Option<f64>,
    /// The pool's average KV-cache utilisation.
    pub average_kv_cache: Option<f64>,
    /// Ready endpoints.
    pub ready: Option<f64>,
    /// The token backlog: in-flight tokens summed over the endpoints (the router only).
    pub inflight_tokens: Option<f64>,
    /// Mean TTFT since the picker started (`_sum / _count`), seconds.
    pub ttft_mean_s: Option<f64>,
    /// Mean NTPOT since the picker started, seconds.
    pub ntpot_mean_s: Option<f64>,
}

impl Names {
    /// `llm-d router` or `GIE`.
    pub fn title(self) -> &'static str {
        match self {
            Names::Router => "llm-d router (llm_d_epp_*)",
            Names::Gie => "Gateway API Inference Extension (inference_pool_*)",
        }
    }
}

/// Whether `name` is an EPP family (either naming).
pub fn owns(name: &str) -> bool {
    name.starts_with("llm_d_epp_")
        || name.starts_with("inference_pool_")
        || name.starts_with("inference_objective_")
        || name.starts_with("inference_model_")
        || name.starts_with("inference_extension_")
}

/// Reads an endpoint picker's scrape: the router's names where served, else GIE's.
pub fn read(exp: &Exposition<'_>) -> Reading {
    let families = exp.families().filter(|f| owns(f.name())).count();
    if families == 0 {
        return Reading::default();
    }
    let router = exp.families().any(|f| f.name().starts_with("llm_d_epp_"));
    let name = |s: GatewaySignal| {
        let f = family(s);
        if router { f.name } else { f.legacy }
    };
    let sum = |s: GatewaySignal| {
        let mut n = 0;
        let total: f64 = exp
            .samples_named(name(s))
            .inspect(|_| n += 1)
            .map(|x| x.value())
            .filter(|v| v.is_finite())
            .sum();
        (n > 0).then_some(total)
    };
    let saturation = {
        let all: Vec<(Option<String>, f64)> = exp
            .samples_named(name(GatewaySignal::PoolSaturation))
            .map(|x| (x.label("stage").map(str::to_owned), x.value()))
            .collect();
        all.iter()
            .find(|(stage, _)| stage.as_deref() == Some("effective"))
            .map(|(_, v)| *v)
            .or_else(|| all.iter().map(|(_, v)| *v).reduce(f64::max))
    };
    let mean = |s: GatewaySignal| {
        let total = |suffix: &str| {
            let n = format!("{}{suffix}", name(s));
            let v: Vec<f64> = exp.samples_named(&n).map(|x| x.value()).collect();
            (!v.is_empty()).then(|| v.iter().sum::<f64>())
        };
        match (total("_sum"), total("_count")) {
            (Some(sum), Some(n)) if n > 0.0 => Some(sum / n),
            _ => None,
        }
    };
    Reading {
        names: Some(if router { Names::Router } else { Names::Gie }),
        // GIE served no token gauge (its legacy name is empty): None there.
        inflight_tokens: sum(GatewaySignal::InflightTokens),
        ttft_mean_s: mean(GatewaySignal::Ttft),
        ntpot_mean_s: mean(GatewaySignal::Ntpot),
        families,
        queue_held: sum(GatewaySignal::QueueHeld),
        saturation,
        running: sum(GatewaySignal::Running),
        average_queue: sum(GatewaySignal::AverageQueue),
        average_kv_cache: sum(GatewaySignal::AverageKvCache),
        ready: sum(GatewaySignal::ReadyEndpoints),
    }
}

/// The saturation the default utilization detector computes for endpoints with these
/// `(waiting, kv_cache)` (an empty pool reads 1.0, as the router's does).
pub fn pool_saturation(endpoints: &[(f64, f64)]) -> f64 {
    if endpoints.is_empty() {
        return 1.0;
    }
    endpoints
        .iter()
        .map(|(q, kv)| (q / QUEUE_DEPTH_THRESHOLD).max(kv / KV_CACHE_THRESHOLD))
        .sum::<f64>()
        / endpoints.len() as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_router_s_names_win_and_gie_s_are_read_alone() {
        let router = b"# HELP llm_d_epp_flow_control_queue_size [ALPHA] Current number of requests actively held in the Flow Control queue.\n# TYPE llm_d_epp_flow_control_queue_size gauge\nllm_d_epp_flow_control_queue_size{fairness_id=\"a\",priority=\"0\",inference_pool=\"p\",model_name=\"m\",target_model_name=\"m\"} 3\nllm_d_epp_flow_control_queue_size{fairness_id=\"b\",priority=\"0\",inference_pool=\"p\",model_name=\"m\",target_model_name=\"m\"} 4\ninference_extension_flow_control_queue_size{fairness_id=\"a\",priority=\"0\",inference_pool=\"p\",model_name=\"m\",target_model_name=\"m\"} 3\nllm_d_epp_flow_control_pool_saturation{inference_pool=\"p\",stage=\"prefill\"} 0.4\nllm_d_epp_flow_control_pool_saturation{inference_pool=\"p\",stage=\"effective\"} 1.2\nllm_d_epp_flow_control_pool_saturation{inference_pool=\"p\",stage=\"decode\"} 1.2\n";
        let exp = inferscale_promtext::parse(router).unwrap_or_else(|e| panic!("{e}"));
        let r = read(&exp);
        assert_eq!(r.names, Some(Names::Router));
        assert_eq!(r.queue_held, Some(7.0));
        assert_eq!(r.saturation, Some(1.2));
        assert_eq!(r.running, None, "missing, not zero");
        let gie = b"inference_pool_average_queue_size{name=\"p\"} 2.5\ninference_pool_ready_pods{name=\"p\"} 4\ninference_extension_flow_control_pool_saturation{inference_pool=\"p\"} 0.9\n";
        let exp = inferscale_promtext::parse(gie).unwrap_or_else(|e| panic!("{e}"));
        let r = read(&exp);
        assert_eq!(r.names, Some(Names::Gie));
        assert_eq!(
            (r.average_queue, r.ready, r.saturation),
            (Some(2.5), Some(4.0), Some(0.9))
        );
        assert_eq!(
            read(
                &inferscale_promtext::parse(b"vllm:num_requests_waiting 1\n")
                    .unwrap_or_else(|e| panic!("{e}"))
            )
            .names,
            None
        );
    }

    #[test]
    fn the_detector_s_saturation_is_the_mean_of_each_endpoint_s_worst_ratio() {
        // Queue 10 of 5 (2.0) and KV 0.4 of 0.8 (0.5): 2.0; idle: 0. Mean 1.0.
        assert_eq!(pool_saturation(&[(10.0, 0.4), (0.0, 0.0)]), 1.0);
        assert_eq!(pool_saturation(&[(0.0, 0.4)]), 0.5);
        assert_eq!(pool_saturation(&[]), 1.0);
    }
}
