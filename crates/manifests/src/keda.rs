//! The KEDA ScaledObject: queue depth per pod as the primary trigger, a queue-time guardrail
//! that scales correctly, explicit HPA behaviour, and no silent zeros.

use inferscale_analysis::Thresholds;
use inferscale_analysis::scaling::{Policy, Primary};
use inferscale_catalog::Signal;

use crate::Options;
use crate::promql::{self, Sel};
use crate::yaml::{Y, document, i, map, s};

/// The queue trigger's query: the total of waiting requests of the model's pods. No
/// `or vector(0)`: when the series are gone (pods down, Prometheus down) the result is empty,
/// KEDA reports an error (with `ignoreNullValues: "false"`) and the fallback acts, instead of
/// reading "queue 0" and scaling in at the worst moment.
pub fn queue_query(o: &Options) -> String {
    let sel = Sel::exact(&[("namespace", &o.namespace), ("model_name", &o.model_name)]);
    format!("sum({})", promql::series(Signal::QueueDepth, &sel))
}

/// The guardrail trigger's query: p95 time waiting in vLLM's queue over 2 minutes, 0 (not NaN)
/// when no request was counted.
pub fn guardrail_query(o: &Options) -> String {
    let sel = Sel::exact(&[("namespace", &o.namespace), ("model_name", &o.model_name)]);
    promql::quantile_or_zero(0.95, Signal::QueueTime, &sel, "2m")
}

fn fmt_num(v: f64) -> String {
    let r = (v * 1000.0).round() / 1000.0;
    if r == r.trunc() {
        format!("{r:.0}")
    } else {
        format!("{r}")
    }
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

/// The primary trigger's query for a policy.
pub fn primary_query(p: &Policy, o: &Options) -> String {
    let sel = Sel::exact(&[("namespace", &o.namespace), ("model_name", &o.model_name)]);
    match p.primary {
        Primary::InFlight => promql::in_flight(&sel),
        Primary::ArrivalRate => promql::arrival_rate(&sel, ARRIVAL_WINDOW_S),
        Primary::Queue => queue_query(o),
    }
}

/// The window arrivals are counted over, seconds: eight scrapes of 15 s, so that a rate
/// stands on several samples and still moves within a couple of minutes.
pub const ARRIVAL_WINDOW_S: u32 = 120;

fn reason<'a>(p: &'a Policy, key: &str) -> &'a str {
    p.reasons.get(key).map_or("", String::as_str)
}

fn guardrail_trigger(o: &Options, guard: f64) -> Y {
    map(vec![
        ("type", s("prometheus")),
        ("name", s("queue-time-guardrail")),
        ("metricType", s("Value")),
        (
            "metadata",
            map(vec![
                ("serverAddress", s(o.prometheus_url.clone())),
                ("query", Y::Block(guardrail_query(o))),
                ("threshold", s(fmt_num(guard))),
                ("ignoreNullValues", s("false")),
            ]),
        ),
    ])
    .comment(
        "type",
        format!(
            "Guardrail: p95 time requests wait in vLLM's queue, {} s at most, as metricType Value\n(the HPA proposes ceil(ready pods x p95 / threshold): in proportion to how far over it\nis; a p95 fed as AverageValue would be divided by the replicas). 0, not NaN, when no\nrequest finished in the window.",
            fmt_num(guard)
        ),
    )
}

/// `scaledobject.yaml` from a scaling policy (`inferscale tune`'s, or one derived by rule):
/// a proportional primary trigger, the queue as a booster, the queue-time guardrail.
pub fn policy_scaled_object(t: &Thresholds, o: &Options, p: &Policy) -> String {
    let name = p.primary.key();
    let mut primary = map(vec![
        ("type", s("prometheus")),
        ("name", s(name)),
        ("metricType", s("AverageValue")),
        (
            "metadata",
            map(vec![
                ("serverAddress", s(o.prometheus_url.clone())),
                ("query", Y::Block(primary_query(p, o))),
                ("threshold", s(fmt_num(p.target))),
                ("ignoreNullValues", s("false")),
            ])
            .comment(
                "threshold",
                format!(
                    "{} {} per pod (AverageValue: the HPA asks for ceil(total / {})).\n{}",
                    fmt_num(p.target),
                    p.primary.unit(),
                    fmt_num(p.target),
                    reason(p, "target")
                ),
            )
            .comment(
                "ignoreNullValues",
                "An empty result is an error, not 0: the fallback below takes over.",
            ),
        ),
    ]);
    primary = primary.comment(
        "type",
        match p.primary {
            Primary::InFlight => "Primary trigger: requests in flight (running + waiting), summed over the model's pods.",
            Primary::ArrivalRate => "Primary trigger: requests arriving per second, summed over the model's pods.",
            Primary::Queue => "Primary trigger: requests waiting in vLLM's queue, summed over the model's pods.",
        },
    );
    let mut triggers = vec![primary];
    if let Some(h) = p.horizon_s {
        triggers.push(
            map(vec![
                ("type", s("prometheus")),
                ("name", s(format!("{name}-ahead"))),
                ("metricType", s("AverageValue")),
                (
                    "metadata",
                    map(vec![
                        ("serverAddress", s(o.prometheus_url.clone())),
                        ("query", Y::Block(promql::ahead(&primary_query(p, o), h))),
                        ("threshold", s(fmt_num(p.target))),
                        ("ignoreNullValues", s("false")),
                    ]),
                ),
            ])
            .comment("type", format!("Anticipation: {}", reason(p, "horizon_s"))),
        );
    }
    if let Some(q) = p.queue_booster {
        triggers.push(
            map(vec![
                ("type", s("prometheus")),
                ("name", s("queue-booster")),
                ("metricType", s("AverageValue")),
                (
                    "metadata",
                    map(vec![
                        ("serverAddress", s(o.prometheus_url.clone())),
                        ("query", s(queue_query(o))),
                        ("threshold", s(q.to_string())),
                        (
                            "activationThreshold",
                            s(t.activation.queue_depth.to_string()),
                        ),
                        ("ignoreNullValues", s("false")),
                    ]),
                ),
            ])
            .comment("type", format!("Booster: {}", reason(p, "queue_booster"))),
        );
    }
    if let Some(g) = p.guardrail_s {
        triggers.push(guardrail_trigger(o, g));
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
pub fn policy_external_scaled_object(t: &Thresholds, o: &Options, p: &Policy) -> String {
    let signal = match p.primary {
        Primary::InFlight => "in_flight",
        Primary::ArrivalRate => "arrival_rate",
        Primary::Queue => "queue_depth",
    };
    let mut meta = vec![
        ("scalerAddress", s(scaler_address(o))),
        ("service", s(o.service.clone())),
        ("port", s(o.service_port.0.clone())),
        ("metric", s("desired_replicas")),
        ("signal", s(signal)),
        ("target", s(fmt_num(p.target))),
    ];
    if let Some(h) = p.horizon_s {
        meta.push(("horizon", s(format!("{h}s"))));
    }
    if let Some(q) = p.queue_booster {
        meta.push(("queueTarget", s(q.to_string())));
    }
    if let Some(g) = p.guardrail_s {
        meta.push(("latencyMetric", s("queue_time_p95")));
        meta.push(("latencyTarget", s(format!("{}s", fmt_num(g)))));
    }
    meta.push(("window", s("2m")));
    let trigger = map(vec![
        ("type", s("external")),
        ("name", s("desired-replicas")),
        ("metricType", s("AverageValue")),
        (
            "metadata",
            map(meta).comment(
                "target",
                format!(
                    "{} {} per pod. {}.\nThe scaler answers the largest of ceil({signal} / {}){}{}{}; the HPA reads\nthat count at AverageValue 1 (GetMetricSpec says so): it is the proposal.",
                    fmt_num(p.target),
                    p.primary.unit(),
                    reason(p, "target"),
                    fmt_num(p.target),
                    p.horizon_s.map_or(String::new(), |h| format!(
                        " (its {signal} now, or as a line through its last five minutes predicts it {h} s ahead)"
                    )),
                    p.queue_booster
                        .map_or(String::new(), |q| format!(", ceil(queue / {q})")),
                    p.guardrail_s.map_or(String::new(), |g| format!(
                        " and, with the p95 queue time above {} s, ceil(pods x p95 / {})",
                        fmt_num(g),
                        fmt_num(g)
                    )),
                ),
            ),
        ),
    ])
    .comment(
        "type",
        "One trigger on inferscale scaler: the pods' own /metrics read at each poll, seconds\nfresher than a Prometheus scrape. No pods, or none answering: an error, and the fallback acts.",
    );
    wrap(
        t,
        o,
        vec![trigger],
        policy_behavior(p, true),
        "KEDA ScaledObject for the vLLM deployment, through inferscale scaler (external trigger).",
        p.polling_s,
    )
}

fn policies(step: &inferscale_analysis::scaling::Step) -> Y {
    let mut v = Vec::new();
    if step.pods > 0 {
        v.push(map(vec![
            ("type", s("Pods")),
            ("value", i(i64::from(step.pods))),
            ("periodSeconds", i(i64::from(step.period_s))),
        ]));
    }
    if step.percent > 0 {
        v.push(map(vec![
            ("type", s("Percent")),
            ("value", i(i64::from(step.percent))),
            ("periodSeconds", i(i64::from(step.period_s))),
        ]));
    }
    Y::Seq(v)
}

/// The HPA behaviour a policy gives. With `exact`, the scale-up tolerance is 0 (a
/// desired-replica metric at AverageValue 1 must move the HPA by one replica).
fn policy_behavior(p: &Policy, exact: bool) -> Y {
    let mut up = vec![
        (
            "stabilizationWindowSeconds",
            i(i64::from(p.scale_up.window_s)),
        ),
        ("policies", policies(&p.scale_up)),
        ("selectPolicy", s("Max")),
    ];
    if exact {
        up.insert(0, ("tolerance", s("0")));
    }
    let mut up = map(up).comment(
        "stabilizationWindowSeconds",
        format!(
            "{}.\nPolicies: {}.",
            reason(p, "scale_up.window_s"),
            reason(p, "scale_up.policies")
        ),
    );
    if exact {
        up = up.comment("tolerance", "desired_replicas is already a replica count: any difference from the current\ncount is a step to take (needs the HPAConfigurableTolerance gate, beta and on by\ndefault from Kubernetes 1.35; without it the cluster's 10 % applies).");
    }
    let down = map(vec![
        (
            "stabilizationWindowSeconds",
            i(i64::from(p.scale_down.window_s)),
        ),
        ("policies", policies(&p.scale_down)),
        ("selectPolicy", s("Min")),
    ])
    .comment(
        "stabilizationWindowSeconds",
        format!(
            "{}.\nPolicies: {}.",
            reason(p, "scale_down.window_s"),
            reason(p, "scale_down.policies")
        ),
    );
    map(vec![("scaleUp", up), ("scaleDown", down)])
}

/// `scaledobject.yaml`: the seeds' path, Prometheus triggers.
pub fn scaled_object(t: &Thresholds, o: &Options) -> String {
    let q = t.scale_out.queue_depth_per_pod;
    let guard = t.scale_out.p95_queue_time_seconds;
    let queue_trigger = map(vec![
        ("type", s("prometheus")),
        ("name", s("queue-depth")),
        ("metricType", s("AverageValue")),
        (
            "metadata",
            map(vec![
                ("serverAddress", s(o.prometheus_url.clone())),
                ("query", s(queue_query(o))),
                ("threshold", s(q.to_string())),
                ("activationThreshold", s(t.activation.queue_depth.to_string())),
                ("ignoreNullValues", s("false")),
            ])
            .comment(
                "threshold",
                format!(
                    "{} waiting requests per pod (AverageValue: the HPA asks for ceil(total / {q}) pods).\n{}",
                    q,
                    t.rationale
                        .get("scale_out.queue_depth_per_pod")
                        .map(String::as_str)
                        .unwrap_or("")
                ),
            )
            .comment(
                "ignoreNullValues",
                "An empty result is an error, not 0: the fallback below takes over.",
            ),
        ),
    ])
    .comment("type", "Primary trigger: requests waiting in vLLM's queue, summed over the model's pods.");
    let guard_trigger = map(vec![
        ("type", s("prometheus")),
        ("name", s("queue-time-guardrail")),
        ("metricType", s("Value")),
        (
            "metadata",
            map(vec![
                ("serverAddress", s(o.prometheus_url.clone())),
                ("query", Y::Block(guardrail_query(o))),
                ("threshold", s(fmt_num(guard))),
                ("ignoreNullValues", s("false")),
            ]),
        ),
    ])
    .comment(
        "type",
        format!(
            "Guardrail: p95 time requests wait in vLLM's queue, {} s at most.\nDesign: metricType Value, not AverageValue. With AverageValue the HPA would divide the\np95 by the replica count (p95 is not additive), so this trigger could never ask for more\nthan ceil(p95 / threshold) pods. With Value the HPA proposes ceil(ready pods x p95 /\nthreshold): above the threshold it grows the deployment in proportion to how far the\nlatency is over, below it it proposes fewer pods and the queue trigger (the HPA takes the\nlargest proposal) decides. Queue time rather than end-to-end latency: it grows with\nwaiting only, not with how long the answers are, so it reacts to missing capacity. The\nend-to-end p95 SLO ({} s) is watched by the HighLatency alert. The query returns 0 when\nno request finished in the window (histogram_quantile alone would return NaN, which\n`or vector(0)` does not replace).",
            fmt_num(guard),
            fmt_num(o.slo_p95_e2e_s)
        ),
    );
    wrap(
        t,
        o,
        vec![queue_trigger, guard_trigger],
        behavior(t, o, false),
        "KEDA ScaledObject for the vLLM deployment: scale on queue depth, guard on queue time.",
        15,
    )
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
pub fn external_scaled_object(t: &Thresholds, o: &Options) -> String {
    let q = t.scale_out.queue_depth_per_pod;
    let guard = t.scale_out.p95_queue_time_seconds;
    let trigger = map(vec![
        ("type", s("external")),
        ("name", s("desired-replicas")),
        ("metricType", s("AverageValue")),
        (
            "metadata",
            map(vec![
                ("scalerAddress", s(scaler_address(o))),
                ("service", s(o.service.clone())),
                ("port", s(o.service_port.0.clone())),
                ("metric", s("desired_replicas")),
                ("target", s(q.to_string())),
                ("latencyMetric", s("queue_time_p95")),
                ("latencyTarget", s(format!("{}s", fmt_num(guard)))),
                ("window", s("2m")),
            ])
            .comment(
                "service",
                "The pods: the Service's ready endpoints, from its EndpointSlices (the scaler's Role\nmay list and watch those, nothing else).",
            )
            .comment(
                "target",
                format!(
                    "{q} waiting requests per pod: the scaler answers max(ceil(queue / {q}), and, when the p95\nqueue time over the window is above {} s, ceil(pods x p95 / {})). The HPA reads\nthat count at AverageValue 1 (GetMetricSpec says so): it is the proposal.",
                    fmt_num(guard),
                    fmt_num(guard)
                ),
            ),
        ),
    ])
    .comment(
        "type",
        "One trigger on inferscale scaler: queue depth and the queue-time guardrail read from the\npods' own /metrics at each poll, seconds fresher than a Prometheus scrape, combined\ninto the replica count. No pods, or none answering: an error, and the fallback acts.",
    );
    wrap(
        t,
        o,
        vec![trigger],
        behavior(t, o, true),
        "KEDA ScaledObject for the vLLM deployment, through inferscale scaler (external trigger).",
        15,
    )
}

/// The HPA behaviour: scale out on a held proposal, fast; scale in slowly, after a cold
/// start. With `exact`, the scale-up tolerance is 0 (a desired-replica metric at AverageValue
/// 1 must move the HPA by one replica, not only past 10 %).
fn behavior(t: &Thresholds, o: &Options, exact: bool) -> Y {
    let down_window = scale_down_window_s(t, o);
    let up_window = t.scale_out.for_seconds.min(3600);
    let b = map(vec![
        (
            "scaleUp",
            map(vec![
                ("stabilizationWindowSeconds", i(i64::from(up_window))),
                (
                    "policies",
                    Y::Seq(vec![
                        map(vec![("type", s("Pods")), ("value", i(2)), ("periodSeconds", i(60))]),
                        map(vec![
                            ("type", s("Percent")),
                            ("value", i(100)),
                            ("periodSeconds", i(60)),
                        ]),
                    ]),
                ),
                ("selectPolicy", s("Max")),
            ])
            .comment(
                "stabilizationWindowSeconds",
                format!(
                    "Scale out only on a proposal that held for {up_window} s (the HPA takes the lowest\nproposal of the window): the measured queue climbs from the threshold to the guardrail's\nlevel in about that time at the first saturated rate. Then add up to 2 pods or double,\nwhichever is more, per minute."
                ),
            ),
        ),
        (
            "scaleDown",
            map(vec![
                ("stabilizationWindowSeconds", i(i64::from(down_window))),
                (
                    "policies",
                    Y::Seq(vec![map(vec![
                        ("type", s("Pods")),
                        ("value", i(1)),
                        ("periodSeconds", i(120)),
                    ])]),
                ),
                ("selectPolicy", s("Min")),
            ])
            .comment(
                "stabilizationWindowSeconds",
                format!(
                    "Scale in on the highest proposal of the last {down_window} s (the scale-in condition's\n{} s, and at least a replica's cold start of {} s, so a pod is not removed while its\nreplacement would still be loading), one pod every two minutes.",
                    t.scale_in.for_seconds, o.cold_start_s
                ),
            ),
        ),
    ]);
    if !exact {
        return b;
    }
    let Y::Map(mut entries) = b else { return b };
    if let Some(e) = entries.iter_mut().find(|e| e.key == "scaleUp")
        && let Y::Map(up) = &mut e.value
    {
        up.insert(
            0,
            crate::yaml::Entry {
                key: "tolerance".into(),
                value: s("0"),
                comment: Some("desired_replicas is already a replica count: any difference from the current\ncount is a step to take (needs the HPAConfigurableTolerance gate, beta and on by\ndefault from Kubernetes 1.35; without it the cluster's 10 % applies).".into()),
            },
        );
    }
    Y::Map(entries)
}

/// A ScaledObject around `triggers`: target, bounds, fallback, behaviour.
fn wrap(
    t: &Thresholds,
    o: &Options,
    triggers: Vec<Y>,
    behavior: Y,
    what: &str,
    polling_s: u32,
) -> String {
    let failures = match o.scaler {
        crate::ScalerKind::Prometheus => "Prometheus down, series missing",
        crate::ScalerKind::External => "the scaler down, no pod answering",
    };
    let fallback_replicas = t
        .peak
        .as_ref()
        .map_or(o.min_replicas, |p| p.replicas)
        .clamp(o.min_replicas, o.max_replicas);
    let spec = map(vec![
        (
            "scaleTargetRef",
            map(vec![
                ("apiVersion", s("apps/v1")),
                ("kind", s("Deployment")),
                ("name", s(o.deployment.clone())),
            ]),
        ),
        ("pollingInterval", i(i64::from(polling_s))),
        ("cooldownPeriod", i(300)),
        ("minReplicaCount", i(i64::from(o.min_replicas))),
        ("maxReplicaCount", i(i64::from(o.max_replicas))),
        (
            "fallback",
            map(vec![
                ("failureThreshold", i(3)),
                ("replicas", i(i64::from(fallback_replicas))),
                ("behavior", s("currentReplicasIfHigher")),
            ]),
        ),
        (
            "advanced",
            map(vec![(
                "horizontalPodAutoscalerConfig",
                map(vec![
                    ("name", s(format!("keda-hpa-{}", o.deployment))),
                    ("behavior", behavior),
                ]),
            )]),
        ),
        ("triggers", Y::Seq(triggers)),
    ])
    .comment(
        "pollingInterval",
        "KEDA's own loop (activation); the HPA queries every 15 s regardless.",
    )
    .comment(
        "minReplicaCount",
        "At least one replica: a model takes minutes to load, and vLLM's own queue cannot wake a\ndeployment at zero.",
    )
    .comment(
        "fallback",
        format!(
            "After 3 failed queries ({failures}) hold at least {fallback_replicas} replica{} and\nnever fewer than are running: missing metrics must not scale in.",
            if fallback_replicas == 1 { "" } else { "s" }
        ),
    );
    let y = map(vec![
        ("apiVersion", s("keda.sh/v1alpha1")),
        ("kind", s("ScaledObject")),
        (
            "metadata",
            map(vec![
                ("name", s(o.deployment.clone())),
                ("namespace", s(o.namespace.clone())),
                (
                    "labels",
                    map(vec![("app.kubernetes.io/managed-by", s("inferscale"))]),
                ),
            ]),
        ),
        ("spec", spec),
    ]);
    document(&crate::header(t, what), &y)
}
