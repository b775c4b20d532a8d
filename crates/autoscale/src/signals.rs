//! The built-in set of autoscaling signals `--compare-signals` rehearses side by side: each
//! a ScaledObject derived from the same measured thresholds as the seeds' one (same
//! replicas, behavior and fallback), differing only in its one trigger.

use inferscale_analysis::Thresholds;
use inferscale_analysis::scaling::{DEFAULT_UTILISATION, Policy, Primary};
use inferscale_catalog::Signal;
use inferscale_catalog::gateway::GatewaySignal;
use inferscale_manifests::objects::{ScaledObject, Trigger};
use inferscale_manifests::promql::{self as q, Sel};
use inferscale_manifests::{Options, keda};

/// One signal: a short name, what it is, and its ScaledObject.
#[derive(Debug, Clone)]
pub struct Derived {
    /// `queue`, `in-flight`, `arrival-rate`, `running`, `kv-cache`, `gpu-util`, `p95-e2e`,
    /// `p95-queue-time`, and the gateway's `epp-queue`, `epp-saturation`, `epp-tokens` and
    /// `epp-slo`.
    pub name: &'static str,
    /// The trigger in words.
    pub about: String,
    /// The ScaledObject.
    pub object: ScaledObject,
}

fn trigger(name: &str, query: String, metric_type: &str, threshold: f64, o: &Options) -> Trigger {
    keda::prometheus_trigger(
        o,
        name,
        metric_type,
        query,
        format!("{threshold}"),
        Vec::new(),
    )
}

/// What each compared signal reads: one the engine does not serve is not offered (its query
/// could only return nothing).
fn needs(name: &str) -> &'static [Signal] {
    match name {
        "queue" => &[Signal::QueueDepth],
        "in-flight" => &[Signal::Running, Signal::QueueDepth],
        "arrival-rate" => &[Signal::RequestsOk, Signal::Running, Signal::QueueDepth],
        "running" => &[Signal::Running],
        "kv-cache" => &[Signal::KvCacheUsage],
        "p95-e2e" => &[Signal::E2eLatency],
        "p95-queue-time" => &[Signal::QueueTime],
        _ => &[],
    }
}

/// The eight signals, from `t` and `o` (`max_num_seqs`: the engine's, for the occupancy
/// target; `capacity_rps`: a replica's, for the proportional targets), each a copy of the
/// seeds' ScaledObject with its own trigger.
pub fn derived(t: &Thresholds, o: &Options, max_num_seqs: u32, capacity_rps: f64) -> Vec<Derived> {
    let mut seeds = o.clone();
    seeds.policy = None;
    let base: ScaledObject = keda::scaled_object(t, &seeds).object;
    let sel = o.sel();
    let startup = f64::from(o.cold_start_s);
    let proportional =
        |p: Primary| Policy::derive(t, p, DEFAULT_UTILISATION, capacity_rps, startup, 1);
    let (inflight, arrivals) = (
        proportional(Primary::InFlight),
        proportional(Primary::ArrivalRate),
    );
    let gpu_sel = Sel::exact(&[("namespace", &o.namespace)]);
    let running_target = (f64::from(max_num_seqs) * 0.8).floor().max(1.0);
    let sum = |s: Signal, sel: &Sel| format!("sum({})", q::series(s, sel));
    let list = [
        (
            "queue",
            format!(
                "waiting requests, AverageValue {} per pod (the generated trigger)",
                t.scale_out.queue_depth_per_pod
            ),
            trigger(
                "queue",
                keda::queue_query(o),
                "AverageValue",
                f64::from(t.scale_out.queue_depth_per_pod),
                o,
            ),
        ),
        (
            "in-flight",
            format!(
                "requests in flight (running + waiting), AverageValue {} per pod (Little's law at {:.0} % of {capacity_rps:.1} req/s)",
                inflight.target,
                DEFAULT_UTILISATION * 100.0
            ),
            trigger(
                "in-flight",
                keda::primary_query(&inflight, o),
                "AverageValue",
                inflight.target,
                o,
            ),
        ),
        (
            "arrival-rate",
            format!(
                "requests arriving per second, AverageValue {} per pod ({:.0} % of {capacity_rps:.1} req/s)",
                arrivals.target,
                DEFAULT_UTILISATION * 100.0
            ),
            trigger(
                "arrival-rate",
                keda::primary_query(&arrivals, o),
                "AverageValue",
                arrivals.target,
                o,
            ),
        ),
        (
            "running",
            format!(
                "running requests, AverageValue {running_target} per pod (80 % of max_num_seqs {max_num_seqs})"
            ),
            trigger(
                "running",
                sum(Signal::Running, &sel),
                "AverageValue",
                running_target,
                o,
            ),
        ),
        (
            "kv-cache",
            "KV-cache usage, AverageValue 0.8 per pod".to_owned(),
            trigger(
                "kv",
                sum(Signal::KvCacheUsage, &sel),
                "AverageValue",
                0.8,
                o,
            ),
        ),
        (
            "gpu-util",
            "GPU utilisation (DCGM), AverageValue 80 % per GPU".to_owned(),
            trigger(
                "gpu",
                format!("sum({}{})", q::dcgm_name(Signal::GpuUtil), gpu_sel.braces()),
                "AverageValue",
                80.0,
                o,
            ),
        ),
        (
            "p95-e2e",
            format!(
                "p95 end-to-end latency over 2 min, Value {} s",
                t.scale_out.p95_e2e_seconds
            ),
            trigger(
                "e2e",
                q::quantile_or_zero(0.95, Signal::E2eLatency, &sel, "2m"),
                "Value",
                t.scale_out.p95_e2e_seconds,
                o,
            ),
        ),
        (
            "p95-queue-time",
            format!(
                "p95 time in the engine's queue over 2 min, Value {} s",
                t.scale_out.p95_queue_time_seconds
            ),
            trigger(
                "queue-time",
                keda::guardrail_query(o).unwrap_or_default(),
                "Value",
                t.scale_out.p95_queue_time_seconds,
                o,
            ),
        ),
    ];
    let gateway = gateway(t, o, &inflight, capacity_rps);
    list.into_iter()
        .filter(|(name, _, _)| needs(name).iter().all(|s| sel.serves(*s)))
        .map(|(name, about, tr)| (name, about, vec![tr]))
        .chain(gateway)
        .map(|(name, about, triggers)| {
            let mut object = base.clone();
            object.metadata.name = format!("{}-{name}", base.metadata.name);
            object.spec.triggers = triggers;
            Derived {
                name,
                about,
                object,
            }
        })
        .collect()
}

/// The ScaledObject `generate --gateway` writes: the generated one's replicas, behavior and
/// fallback, on the inference gateway's signals in llm-d's shape (`epp-queue`: its
/// flow-control queue, 1 per pod, and its running requests per pod, the target from the
/// measurement by Little's law at the default utilisation).
pub fn gateway_object(t: &Thresholds, o: &Options, capacity_rps: f64) -> ScaledObject {
    let mut object: ScaledObject = keda::scaled_object(t, o).object;
    let startup = f64::from(o.cold_start_s);
    let inflight = Policy::derive(
        t,
        Primary::InFlight,
        DEFAULT_UTILISATION,
        capacity_rps,
        startup,
        1,
    );
    if let Some((_, _, triggers)) = gateway(t, o, &inflight, capacity_rps)
        .into_iter()
        .find(|(name, _, _)| *name == "epp-queue")
    {
        object.spec.triggers = triggers;
    }
    object
}

/// The SLO-ratio targets from the measurement: TTFT against the scale-out TTFT guardrail, and
/// NTPOT (end-to-end over output tokens) against the end-to-end guardrail over the mean
/// output; each `None` where the run did not measure what it needs.
pub fn slo_targets(t: &Thresholds) -> (Option<f64>, Option<f64>) {
    let ntpot = t
        .workload
        .output_tokens_mean
        .filter(|n| *n >= 1.0)
        .map(|n| t.scale_out.p95_e2e_seconds / n);
    (t.scale_out.p95_ttft_seconds, ntpot)
}

/// `(P90 of the endpoint picker's `signal` over a minute) / slo`, 0 when no request finished
/// in the minute (the quantile of no requests is NaN).
fn slo_ratio(signal: GatewaySignal, slo: f64, o: &Options) -> String {
    format!(
        "(({}) / {slo} >= 0) or on() vector(0)",
        q::epp_quantile(0.9, signal, &o.namespace, &o.deployment, "1m")
    )
}

/// The signals of an inference gateway's endpoint picker (llm-d's router): the flow-control
/// queue and running requests as llm-d's KEDA guide shapes them (the running target from the
/// measurement rather than its constant 16), the pool saturation, the token backlog, and the
/// SLO ratio llm-d's workload-variant autoscaler computes (P90 TTFT and NTPOT over their
/// targets; one `Value` trigger each at 1.0, so the HPA follows the larger ratio).
fn gateway(
    t: &Thresholds,
    o: &Options,
    inflight: &Policy,
    capacity_rps: f64,
) -> Vec<(&'static str, String, Vec<Trigger>)> {
    let inflight_target = inflight.target;
    let epp = |agg: &str, s: GatewaySignal| q::epp(agg, s, &o.namespace, &o.deployment);
    let mut out = vec![
        (
            "epp-queue",
            format!(
                "the gateway's flow-control queue, AverageValue 1 per pod, and its running requests, AverageValue {inflight_target} per pod (llm-d's KEDA shape; the running target from the measurement)"
            ),
            vec![
                trigger(
                    "epp-queue",
                    epp("sum", GatewaySignal::QueueHeld),
                    "AverageValue",
                    1.0,
                    o,
                ),
                trigger(
                    "epp-running",
                    epp("sum", GatewaySignal::Running),
                    "AverageValue",
                    inflight_target,
                    o,
                ),
            ],
        ),
        (
            "epp-saturation",
            "the gateway's pool saturation (mean over endpoints of max(queue/5, KV/0.8)), Value 0.7 (llm-d's threshold; a pool mean, so Value, not AverageValue)".to_owned(),
            vec![trigger(
                "epp-saturation",
                epp("max", GatewaySignal::PoolSaturation),
                "Value",
                0.7,
                o,
            )],
        ),
    ];
    if t.workload.prompt_tokens_mean.is_some() {
        let tokens = Policy::derive(
            t,
            Primary::GatewayTokens,
            inflight.utilisation.unwrap_or(DEFAULT_UTILISATION),
            capacity_rps,
            f64::from(o.cold_start_s),
            1,
        );
        out.push((
            "epp-tokens",
            format!(
                "the gateway's token backlog (uncached prompt tokens dispatched), AverageValue {} per pod (Little's law in prompt tokens)",
                tokens.target
            ),
            vec![trigger(
                "epp-tokens",
                epp("sum", GatewaySignal::InflightTokens),
                "AverageValue",
                tokens.target,
                o,
            )],
        ));
    }
    let (ttft, ntpot) = slo_targets(t);
    let mut slo = Vec::new();
    let mut about = Vec::new();
    for (name, signal, label, target) in [
        ("epp-slo-ttft", GatewaySignal::Ttft, "TTFT", ttft),
        (
            "epp-slo-ntpot",
            GatewaySignal::Ntpot,
            "NTPOT",
            ntpot.map(|s| (s * 1e4).round() / 1e4),
        ),
    ] {
        if let Some(s) = target {
            slo.push(trigger(name, slo_ratio(signal, s, o), "Value", 1.0, o));
            about.push(format!("P90 {label} / {s} s"));
        }
    }
    if !slo.is_empty() {
        out.push((
            "epp-slo",
            format!(
                "the gateway's SLO ratio ({}; the targets are the measured guardrails), Value 1.0 each (llm-d's workload-variant autoscaler's saturation)",
                about.join(", ")
            ),
            slo,
        ));
    }
    out
}
