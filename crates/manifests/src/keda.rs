//! The KEDA ScaledObject: queue depth per pod as the primary trigger, a queue-time guardrail
//! that scales correctly, explicit HPA behaviour, and no silent zeros.

use inferscale_analysis::Thresholds;
use inferscale_analysis::scaling::{Policy, Primary};
use inferscale_catalog::Signal;

use std::collections::BTreeMap;

use inferscale_analysis::scaling::Step;

use crate::Options;
use crate::objects::{
    Advanced, Behavior, Extra, Fallback, HpaConfig, ObjectMeta, Policy as Limit, ScaleTargetRef,
    ScaledObject, ScaledObjectSpec, ScalingRules, Trigger,
};
use crate::promql;
use crate::yaml::Explained;

/// The queue trigger's query: the total of waiting requests of the model's pods. No
/// `or vector(0)`: when the series are gone (pods down, Prometheus down) the result is empty,
/// KEDA reports an error (with `ignoreNullValues: "false"`) and the fallback acts, instead of
/// reading "queue 0" and scaling in at the worst moment.
pub fn queue_query(o: &Options) -> String {
    format!("sum({})", promql::series(Signal::QueueDepth, &o.sel()))
}

/// The guardrail trigger's query: p95 time waiting in the engine's queue over 2 minutes, 0
/// (not NaN) when no request was counted; `None` for an engine that serves no queue-time
/// histogram (llama.cpp), whose queue the primary trigger reads directly.
pub fn guardrail_query(o: &Options) -> Option<String> {
    let sel = o.sel();
    sel.serves(Signal::QueueTime)
        .then(|| promql::quantile_or_zero(0.95, Signal::QueueTime, &sel, "2m"))
}

fn fmt_num(v: f64) -> String {
    let r = (v * 1000.0).round() / 1000.0;
    if r == r.trunc() {
        format!("{r:.0}")
    } else {
        format!("{r}")
    }
}

/// The external trigger's `engine` setting for an engine other than vLLM: the scaler then
/// reads that engine's names and refuses a pod serving another's, by name.
fn engine_meta(o: &Options) -> Option<(&'static str, String)> {
    (o.engine != inferscale_catalog::Engine::Vllm).then(|| ("engine", o.engine.key().to_owned()))
}

/// The queue trigger's comment, naming the engine.
fn queue_comment(o: &Options) -> String {
    format!(
        "Primary trigger: requests waiting in {}'s queue, summed over the model's pods.",
        o.engine.title()
    )
}

/// The HPA's scale-down stabilization window, seconds: the policy's, or for the seeds' shape
/// the scale-in condition's duration and at least a replica's cold start (a pod is not
/// removed while its replacement would still be loading), at most the hour the HPA API
/// allows. Karpenter's `consolidateAfter` follows from it
/// ([`crate::karpenter::consolidate_after_s`]).
pub fn scale_down_window_s(t: &Thresholds, o: &Options) -> u32 {
    match &o.policy {
        Some(p) => p.scale_down.window_s.min(3600),
        None => t.scale_in.for_seconds.max(o.cold_start_s).min(3600),
    }
}

/// Why the arrival rate cannot be counted on a setup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Uncounted {
    /// The engine counts no finished requests and the external scaler reads only that.
    ByTheExternalScaler,
    /// The engine counts no finished requests and no mean output length was measured to
    /// count them from its generated tokens.
    NoMeanOutput,
}

/// Whether the arrival rate can be counted on `o`'s engine and scaler: from the finished
/// requests, or (the Prometheus scaler, an engine that counts none but its generated
/// tokens) from those tokens over the measured `output_tokens_mean`.
pub fn arrivals_counted(o: &Options, output_tokens_mean: Option<f64>) -> Result<(), Uncounted> {
    use inferscale_catalog::Signal;
    if o.engine.serves(Signal::RequestsOk) {
        Ok(())
    } else if o.scaler == crate::ScalerKind::External {
        Err(Uncounted::ByTheExternalScaler)
    } else if output_tokens_mean.is_some_and(|k| k > 0.0)
        && o.engine.serves(Signal::GenerationTokens)
    {
        Ok(())
    } else {
        Err(Uncounted::NoMeanOutput)
    }
}

/// For the arrival rate on an engine that counts no finished requests: the tokens a
/// request generates on average, what its generated-token counter is divided by.
pub fn counted_by_tokens(p: &Policy, o: &Options) -> Option<f64> {
    p.output_tokens_mean
        .filter(|_| !o.engine.serves(inferscale_catalog::Signal::RequestsOk))
}

/// The primary trigger's query for a policy.
pub fn primary_query(p: &Policy, o: &Options) -> String {
    let sel = o.sel();
    match p.primary {
        Primary::InFlight => promql::in_flight(&sel),
        Primary::ArrivalRate => match counted_by_tokens(p, o) {
            Some(k) => promql::arrival_rate_by_tokens(&sel, ARRIVAL_WINDOW_S, k),
            None => promql::arrival_rate(&sel, ARRIVAL_WINDOW_S),
        },
        Primary::Queue => queue_query(o),
        Primary::GatewayInFlight => promql::epp_in_flight(&o.namespace, &o.deployment),
        Primary::GatewayTokens => promql::epp(
            "sum",
            inferscale_catalog::gateway::GatewaySignal::InflightTokens,
            &o.namespace,
            &o.deployment,
        ),
    }
}

/// The window arrivals are counted over, seconds: eight scrapes of 15 s, so that a rate
/// stands on several samples and still moves within a couple of minutes.
pub const ARRIVAL_WINDOW_S: u32 = 120;

fn reason<'a>(p: &'a Policy, key: &str) -> &'a str {
    p.reasons.get(key).map_or("", String::as_str)
}

/// A trigger's `metadata`: strings, as the CRD requires.
fn metadata(pairs: Vec<(&str, String)>) -> BTreeMap<String, String> {
    pairs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
}

/// A named trigger of `kind` with its metric type and metadata.
fn trigger(
    kind: &str,
    name: impl Into<String>,
    metric_type: &str,
    metadata: BTreeMap<String, String>,
) -> Trigger {
    Trigger {
        kind: kind.to_owned(),
        name: Some(name.into()),
        metric_type: Some(metric_type.to_owned()),
        use_cached_metrics: None,
        metadata,
        authentication_ref: None,
        extra: Extra::new(),
    }
}

/// A `prometheus` trigger: `query` against `--prometheus-url`, at `threshold`, an empty
/// result an error. `more` adds settings (an activation threshold).
pub fn prometheus_trigger(
    o: &Options,
    name: impl Into<String>,
    metric_type: &str,
    query: String,
    threshold: String,
    more: Vec<(&str, String)>,
) -> Trigger {
    let mut pairs = vec![
        ("serverAddress", o.prometheus_url.clone()),
        ("query", query),
        ("threshold", threshold),
        ("ignoreNullValues", "false".to_owned()),
    ];
    pairs.extend(more);
    trigger("prometheus", name, metric_type, metadata(pairs))
}

const NULL_IS_AN_ERROR: &str = "An empty result is an error, not 0: the fallback below takes over.";

/// The guardrail trigger at `guard` seconds; with `ratio_max`, its p95 is read up to
/// `ratio_max × guard` (`clamp_max`), so the HPA's `Value` proposal, `ready × p95 / guard`,
/// is at most `ratio_max` times the ready pods.
fn guardrail_trigger(
    o: &Options,
    guard: f64,
    ratio_max: Option<f64>,
    why: String,
) -> Option<Explained<Trigger>> {
    let q = guardrail_query(o)?;
    let q = match ratio_max {
        Some(r) => format!(
            "clamp_max(\n  {},\n  {}\n)",
            q.replace('\n', "\n  "),
            fmt_num(r * guard)
        ),
        None => q,
    };
    let mut e = Explained::new(
        "",
        prometheus_trigger(
            o,
            "queue-time-guardrail",
            "Value",
            q,
            fmt_num(guard),
            Vec::new(),
        ),
    );
    e.block("metadata.query").comment("type", why);
    Some(e)
}

/// `scaledobject.yaml` from a scaling policy (`inferscale tune`'s, or one derived by rule):
/// a proportional primary trigger, the queue as a booster, the queue-time guardrail.
pub fn policy_scaled_object(t: &Thresholds, o: &Options, p: &Policy) -> Explained<ScaledObject> {
    let name = p.primary.key();
    let mut primary = Explained::new(
        "",
        prometheus_trigger(
            o,
            name,
            "AverageValue",
            primary_query(p, o),
            fmt_num(p.target),
            Vec::new(),
        ),
    );
    primary
        .block("metadata.query")
        .comment(
            "metadata.threshold",
            format!(
                "{} {} per pod (AverageValue: the HPA asks for ceil(total / {})).\n{}",
                fmt_num(p.target),
                p.primary.unit(),
                fmt_num(p.target),
                reason(p, "target")
            ),
        )
        .comment("metadata.ignoreNullValues", NULL_IS_AN_ERROR)
        .comment(
            "type",
            match p.primary {
                Primary::InFlight => "Primary trigger: requests in flight (running + waiting), summed over the model's pods.".to_owned(),
                Primary::ArrivalRate => match counted_by_tokens(p, o) {
                    Some(k) => format!("Primary trigger: requests arriving per second, summed over the model's pods. {} counts no finished requests: they are its generated tokens per second over the {k:.2} tokens a measured request generated on average.", o.engine.title()),
                    None => "Primary trigger: requests arriving per second, summed over the model's pods.".to_owned(),
                },
                Primary::Queue => queue_comment(o),
                Primary::GatewayInFlight => "Primary trigger: requests in flight at the inference gateway (its endpoint picker, llm-d's router, for the InferencePool named as the Deployment): dispatched and not finished, plus held by its flow control.".to_owned(),
                Primary::GatewayTokens => "Primary trigger: the inference gateway's token backlog (its endpoint picker's in-flight load producer): uncached prompt tokens dispatched and not finished, summed over the pool's endpoints.".to_owned(),
            },
        );
    let mut triggers = vec![primary];
    if let Some(h) = p.horizon_s {
        let mut ahead = Explained::new(
            "",
            prometheus_trigger(
                o,
                format!("{name}-ahead"),
                "AverageValue",
                promql::ahead(&primary_query(p, o), h, p.trend_window()),
                fmt_num(p.target),
                Vec::new(),
            ),
        );
        ahead
            .block("metadata.query")
            .comment("type", format!("Anticipation: {}", reason(p, "horizon_s")));
        triggers.push(ahead);
    }
    if let Some(q) = p.queue_booster {
        let mut booster = Explained::new(
            "",
            prometheus_trigger(
                o,
                "queue-booster",
                "AverageValue",
                queue_query(o),
                q.to_string(),
                vec![("activationThreshold", t.activation.queue_depth.to_string())],
            ),
        );
        booster.comment("type", format!("Booster: {}", reason(p, "queue_booster")));
        triggers.push(booster);
    }
    if let Some(g) = p.guardrail_s {
        triggers.extend(guardrail_trigger(
            o,
            g,
            p.guardrail_ratio_max,
            format!(
                "Guardrail: p95 time requests wait in {}'s queue, {} s at most, as metricType Value\n(the HPA proposes ceil(ready pods x p95 / threshold): in proportion to how far over it\nis; a p95 fed as AverageValue would be divided by the replicas). 0, not NaN, when no\nrequest finished in the window.{}",
                o.engine.title(),
                fmt_num(g),
                p.guardrail_ratio_max.map_or(String::new(), |r| format!(
                    "\nRead up to {} s, so it asks for at most {r} times the ready pods at once: a\nlatency is not proportional to the pods missing, the primary counts what the load needs.",
                    fmt_num(r * g)
                ))
            ),
        ));
    }
    wrap(
        t,
        o,
        triggers,
        policy_behavior(p, false),
        &format!(
            "KEDA ScaledObject for the vLLM deployment: scale on {} per pod{}.",
            match p.primary {
                Primary::InFlight => "requests in flight",
                Primary::ArrivalRate => "requests arriving per second",
                Primary::Queue => "requests waiting",
                Primary::GatewayInFlight => "the inference gateway's requests in flight",
                Primary::GatewayTokens => "the inference gateway's prompt tokens in flight",
            },
            if p.tuned.is_some() {
                ", as inferscale tune chose and rehearsed it"
            } else {
                " (derived by rule; `inferscale tune` rehearses and tunes it)"
            }
        ),
        p.polling_s,
    )
}

/// `scaledobject.yaml` for `--scaler external` from a policy: one `external` trigger whose
/// `desired_replicas` combines the primary, the booster and the guardrail in the scaler.
pub fn policy_external_scaled_object(
    t: &Thresholds,
    o: &Options,
    p: &Policy,
) -> Explained<ScaledObject> {
    // The scaler reads the model's pods, not a gateway: a gateway primary is refused before
    // (`generate` says so); were one to reach here, the pods' in-flight count is the same
    // requests counted at the other end.
    let signal = match p.primary {
        Primary::InFlight | Primary::GatewayInFlight | Primary::GatewayTokens => "in_flight",
        Primary::ArrivalRate => "arrival_rate",
        Primary::Queue => "queue_depth",
    };
    let mut meta = vec![
        ("scalerAddress", scaler_address(o)),
        ("service", o.service.clone()),
        ("port", o.service_port.0.clone()),
        ("metric", "desired_replicas".to_owned()),
        ("signal", signal.to_owned()),
        ("target", fmt_num(p.target)),
    ];
    if let Some(h) = p.horizon_s {
        meta.push(("horizon", format!("{h}s")));
        if let Some(w) = p.trend_window_s {
            meta.push(("trendWindow", format!("{w}s")));
        }
    }
    if let Some(q) = p.queue_booster {
        meta.push(("queueTarget", q.to_string()));
    }
    // An engine without a queue-time histogram (llama.cpp) has no guardrail to read.
    let guardrail_s = p.guardrail_s.filter(|_| o.engine.serves(Signal::QueueTime));
    if let Some(g) = guardrail_s {
        meta.push(("latencyMetric", "queue_time_p95".to_owned()));
        meta.push(("latencyTarget", format!("{}s", fmt_num(g))));
        if let Some(r) = p.guardrail_ratio_max {
            meta.push(("latencyMaxRatio", fmt_num(r)));
        }
    }
    meta.extend(engine_meta(o));
    meta.push(("window", "2m".to_owned()));
    let mut e = Explained::new(
        "",
        trigger(
            "external",
            "desired-replicas",
            "AverageValue",
            metadata(meta),
        ),
    );
    e.comment(
        "metadata.target",
        format!(
            "{} {} per pod. {}.\nThe scaler answers the largest of {signal} / {}{}{}{}, unrounded; the HPA reads it\nat AverageValue 1 (GetMetricSpec says so): it is the proposal, which the HPA rounds up\nand holds within its 10 % tolerance as it does a Prometheus trigger's.",
            fmt_num(p.target),
            p.primary.unit(),
            reason(p, "target"),
            fmt_num(p.target),
            p.horizon_s.map_or(String::new(), |h| format!(
                " (its {signal} now, or as a line through its last {} s predicts it {h} s ahead)",
                p.trend_window()
            )),
            p.queue_booster
                .map_or(String::new(), |q| format!(", queue / {q}")),
            guardrail_s.map_or(String::new(), |g| format!(
                " and, with the p95 queue time above {} s, pods x p95 / {}{}",
                fmt_num(g),
                fmt_num(g),
                p.guardrail_ratio_max.map_or(String::new(), |r| format!(
                    " with p95 read up to {} s",
                    fmt_num(r * g)
                ))
            )),
        ),
    )
    .comment(
        "type",
        "One trigger on inferscale scaler: the pods' own /metrics read at each poll, seconds\nfresher than a Prometheus scrape. No pods, or none answering: an error, and the fallback acts.",
    );
    wrap(
        t,
        o,
        vec![e],
        policy_behavior(p, true),
        "KEDA ScaledObject for the vLLM deployment, through inferscale scaler (external trigger).",
        p.polling_s,
    )
}

/// The rate limits of one direction: so many pods, or so many percent, per period.
fn limits(step: &Step) -> Vec<Limit> {
    let limit = |kind: &str, value: u32| Limit {
        kind: kind.to_owned(),
        value: i64::from(value),
        period_seconds: i64::from(step.period_s),
        extra: Extra::new(),
    };
    let mut v = Vec::new();
    if step.pods > 0 {
        v.push(limit("Pods", step.pods));
    }
    if step.percent > 0 {
        v.push(limit("Percent", step.percent));
    }
    v
}

/// One direction's rules: a stabilization window, rate limits, the policy selection and,
/// with `exact`, a scale-up tolerance of 0.
fn rules(window_s: u32, policies: Vec<Limit>, select: &str, exact: bool) -> ScalingRules {
    let mut extra = Extra::new();
    if exact {
        extra.insert("tolerance".to_owned(), "0".into());
    }
    ScalingRules {
        stabilization_window_seconds: Some(i64::from(window_s)),
        select_policy: Some(select.to_owned()),
        policies: Some(policies),
        extra,
    }
}

const TOLERANCE: &str = "desired_replicas is already a replica count: any difference from the current\ncount is a step to take (needs the HPAConfigurableTolerance gate, beta and on by\ndefault from Kubernetes 1.35; without it the cluster's 10 % applies).";

/// The HPA behaviour a policy gives. With `exact`, the scale-up tolerance is 0 (a
/// desired-replica metric at AverageValue 1 must move the HPA by one replica).
fn policy_behavior(p: &Policy, exact: bool) -> Explained<Behavior> {
    let mut e = Explained::new(
        "",
        Behavior {
            scale_up: Some(rules(
                p.scale_up.window_s,
                limits(&p.scale_up),
                "Max",
                exact,
            )),
            scale_down: Some(rules(
                p.scale_down.window_s,
                limits(&p.scale_down),
                "Min",
                false,
            )),
            extra: Extra::new(),
        },
    );
    e.comment(
        "scaleUp.stabilizationWindowSeconds",
        format!(
            "{}.\nPolicies: {}.",
            reason(p, "scale_up.window_s"),
            reason(p, "scale_up.policies")
        ),
    )
    .comment(
        "scaleDown.stabilizationWindowSeconds",
        format!(
            "{}.\nPolicies: {}.",
            reason(p, "scale_down.window_s"),
            reason(p, "scale_down.policies")
        ),
    );
    if exact {
        e.comment("scaleUp.tolerance", TOLERANCE);
    }
    e
}

/// `scaledobject.yaml`: the seeds' path, Prometheus triggers.
pub fn scaled_object(t: &Thresholds, o: &Options) -> Explained<ScaledObject> {
    let q = t.scale_out.queue_depth_per_pod;
    let guard = t.scale_out.p95_queue_time_seconds;
    let mut queue = Explained::new(
        "",
        prometheus_trigger(
            o,
            "queue-depth",
            "AverageValue",
            queue_query(o),
            q.to_string(),
            vec![("activationThreshold", t.activation.queue_depth.to_string())],
        ),
    );
    queue
        .comment(
            "metadata.threshold",
            format!(
                "{} waiting requests per pod (AverageValue: the HPA asks for ceil(total / {q}) pods).\n{}",
                q,
                t.rationale
                    .get("scale_out.queue_depth_per_pod")
                    .map(String::as_str)
                    .unwrap_or("")
            ),
        )
        .comment("metadata.ignoreNullValues", NULL_IS_AN_ERROR)
        .comment(
            "type",
            queue_comment(o),
        );
    let guardrail = guardrail_trigger(
        o,
        guard,
        None,
        format!(
            "Guardrail: p95 time requests wait in {}'s queue, {} s at most.\nDesign: metricType Value, not AverageValue. With AverageValue the HPA would divide the\np95 by the replica count (p95 is not additive), so this trigger could never ask for more\nthan ceil(p95 / threshold) pods. With Value the HPA proposes ceil(ready pods x p95 /\nthreshold): above the threshold it grows the deployment in proportion to how far the\nlatency is over, below it it proposes fewer pods and the queue trigger (the HPA takes the\nlargest proposal) decides. Queue time rather than end-to-end latency: it grows with\nwaiting only, not with how long the answers are, so it reacts to missing capacity. The\nend-to-end p95 SLO ({} s) is watched by the HighLatency alert. The query returns 0 when\nno request finished in the window (histogram_quantile alone would return NaN, which\n`or vector(0)` does not replace).",
            o.engine.title(),
            fmt_num(guard),
            fmt_num(o.slo_p95_e2e_s)
        ),
    );
    let mut triggers = vec![queue];
    triggers.extend(guardrail);
    wrap(
        t,
        o,
        triggers,
        behavior(t, o, false),
        "KEDA ScaledObject for the vLLM deployment: scale on queue depth, guard on queue time.",
        15,
    )
}

/// The ScaledObject `o` asks for: its policy's, or the seeds' shape without one, with
/// Prometheus triggers or `inferscale scaler`'s.
pub fn for_options(t: &Thresholds, o: &Options) -> Explained<ScaledObject> {
    match (o.scaler, &o.policy) {
        (crate::ScalerKind::Prometheus, Some(p)) => policy_scaled_object(t, o, p),
        (crate::ScalerKind::Prometheus, None) => scaled_object(t, o),
        (crate::ScalerKind::External, Some(p)) => policy_external_scaled_object(t, o, p),
        (crate::ScalerKind::External, None) => external_scaled_object(t, o),
    }
}

/// The external scaler's address as KEDA dials it (`inferscale scaler`'s gRPC port).
pub fn scaler_address(o: &Options) -> String {
    format!(
        "{}.{}.svc:{}",
        crate::scaler::NAME,
        o.namespace,
        crate::scaler::GRPC_PORT
    )
}

/// `scaledobject.yaml` for `--scaler external`: one `external` trigger on `inferscale
/// scaler`, which reads the pods directly and answers the replica count the queue target and
/// the queue-time guardrail together ask for.
pub fn external_scaled_object(t: &Thresholds, o: &Options) -> Explained<ScaledObject> {
    let q = t.scale_out.queue_depth_per_pod;
    let guard = t.scale_out.p95_queue_time_seconds;
    let mut e = Explained::new(
        "",
        trigger(
            "external",
            "desired-replicas",
            "AverageValue",
            metadata({
                let mut m = vec![
                    ("scalerAddress", scaler_address(o)),
                    ("service", o.service.clone()),
                    ("port", o.service_port.0.clone()),
                    ("metric", "desired_replicas".to_owned()),
                    ("target", q.to_string()),
                ];
                if o.engine.serves(Signal::QueueTime) {
                    m.push(("latencyMetric", "queue_time_p95".to_owned()));
                    m.push(("latencyTarget", format!("{}s", fmt_num(guard))));
                }
                m.extend(engine_meta(o));
                m.push(("window", "2m".to_owned()));
                m
            }),
        ),
    );
    e.comment(
        "metadata.service",
        "The pods: the Service's ready endpoints, from its EndpointSlices (the scaler's Role\nmay list and watch those, nothing else).",
    )
    .comment(
        "metadata.target",
        format!(
            "{q} waiting requests per pod: the scaler answers max(queue / {q}, and, when the p95 queue\ntime over the window is above {} s, pods x p95 / {}), unrounded. The HPA reads it at\nAverageValue 1 (GetMetricSpec says so): it is the proposal, which the HPA rounds up and\nholds within its 10 % tolerance as it does a Prometheus trigger's.",
            fmt_num(guard),
            fmt_num(guard)
        ),
    )
    .comment(
        "type",
        "One trigger on inferscale scaler: queue depth and the queue-time guardrail read from the\npods' own /metrics at each poll, seconds fresher than a Prometheus scrape, combined\ninto the replica count. No pods, or none answering: an error, and the fallback acts.",
    );
    wrap(
        t,
        o,
        vec![e],
        behavior(t, o, true),
        "KEDA ScaledObject for the vLLM deployment, through inferscale scaler (external trigger).",
        15,
    )
}

/// The HPA behaviour: scale out on a held proposal, fast; scale in slowly, after a cold
/// start. With `exact`, the scale-up tolerance is 0 (a desired-replica metric at AverageValue
/// 1 must move the HPA by one replica, not only past 10 %).
fn behavior(t: &Thresholds, o: &Options, exact: bool) -> Explained<Behavior> {
    let down_window = scale_down_window_s(t, o);
    let up_window = t.scale_out.for_seconds.min(3600);
    let up = Step {
        pods: 2,
        percent: 100,
        period_s: 60,
        window_s: up_window,
    };
    let down = Step {
        pods: 1,
        percent: 0,
        period_s: 120,
        window_s: down_window,
    };
    let mut e = Explained::new(
        "",
        Behavior {
            scale_up: Some(rules(up_window, limits(&up), "Max", exact)),
            scale_down: Some(rules(down_window, limits(&down), "Min", false)),
            extra: Extra::new(),
        },
    );
    e.comment(
        "scaleUp.stabilizationWindowSeconds",
        format!(
            "Scale out only on a proposal that held for {up_window} s (the HPA takes the lowest\nproposal of the window): the measured queue climbs from the threshold to the guardrail's\nlevel in about that time at the first saturated rate. Then add up to 2 pods or double,\nwhichever is more, per minute."
        ),
    )
    .comment(
        "scaleDown.stabilizationWindowSeconds",
        format!(
            "Scale in on the highest proposal of the last {down_window} s (the scale-in condition's\n{} s, and at least a replica's cold start of {} s, so a pod is not removed while its\nreplacement would still be loading), one pod every two minutes.",
            t.scale_in.for_seconds, o.cold_start_s
        ),
    );
    if exact {
        e.comment("scaleUp.tolerance", TOLERANCE);
    }
    e
}

/// A ScaledObject around `triggers`: target, bounds, fallback, behaviour.
fn wrap(
    t: &Thresholds,
    o: &Options,
    triggers: Vec<Explained<Trigger>>,
    behavior: Explained<Behavior>,
    what: &str,
    polling_s: u32,
) -> Explained<ScaledObject> {
    let failures = match o.scaler {
        crate::ScalerKind::Prometheus => "Prometheus down, series missing",
        crate::ScalerKind::External => "the scaler down, no pod answering",
    };
    let fallback_replicas = t
        .peak
        .as_ref()
        .map_or(o.min_replicas, |p| p.replicas)
        .clamp(o.min_replicas, o.max_replicas);
    let mut e = Explained::new(
        crate::header(t, what),
        ScaledObject {
            api_version: "keda.sh/v1alpha1".to_owned(),
            kind: "ScaledObject".to_owned(),
            metadata: ObjectMeta {
                name: o.deployment.clone(),
                namespace: Some(o.namespace.clone()),
                labels: Some(BTreeMap::from([(
                    "app.kubernetes.io/managed-by".to_owned(),
                    "inferscale".to_owned(),
                )])),
                ..ObjectMeta::default()
            },
            spec: ScaledObjectSpec {
                scale_target_ref: ScaleTargetRef {
                    api_version: Some("apps/v1".to_owned()),
                    kind: Some("Deployment".to_owned()),
                    name: o.deployment.clone(),
                    extra: Extra::new(),
                },
                polling_interval: Some(i64::from(polling_s)),
                cooldown_period: Some(300),
                initial_cooldown_period: None,
                idle_replica_count: None,
                min_replica_count: Some(i64::from(o.min_replicas)),
                max_replica_count: Some(i64::from(o.max_replicas)),
                fallback: Some(Fallback {
                    failure_threshold: 3,
                    replicas: i64::from(fallback_replicas),
                    behavior: Some("currentReplicasIfHigher".to_owned()),
                    extra: Extra::new(),
                }),
                advanced: None,
                triggers: Vec::new(),
                extra: Extra::new(),
            },
        },
    );
    let behavior = e.adopt(
        "spec.advanced.horizontalPodAutoscalerConfig.behavior",
        behavior,
    );
    e.object.spec.advanced = Some(Advanced {
        horizontal_pod_autoscaler_config: Some(HpaConfig {
            name: Some(format!("keda-hpa-{}", o.deployment)),
            behavior: Some(behavior),
            extra: Extra::new(),
        }),
        ..Advanced::default()
    });
    for (k, tr) in triggers.into_iter().enumerate() {
        let tr = e.adopt(&format!("spec.triggers[{k}]"), tr);
        e.object.spec.triggers.push(tr);
    }
    e.comment(
        "spec.pollingInterval",
        "KEDA's own loop (activation); the HPA queries every 15 s regardless.",
    )
    .comment(
        "spec.minReplicaCount",
        "At least one replica: a model takes minutes to load, and vLLM's own queue cannot wake a\ndeployment at zero.",
    )
    .comment(
        "spec.fallback",
        format!(
            "After 3 failed queries ({failures}) hold at least {fallback_replicas} replica{} and\nnever fewer than are running: missing metrics must not scale in.",
            if fallback_replicas == 1 { "" } else { "s" }
        ),
    );
    e
}
