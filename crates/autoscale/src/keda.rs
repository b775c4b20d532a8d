//! KEDA's operator and metrics server over one ScaledObject, in virtual time
//! (`../shared/reference/autoscaling.md` §2).
//!
//! - [`KedaSpec::from_object`] reads a ScaledObject as KEDA 2.20 does (defaults, the webhook's
//!   rules, the HPA API's validation of `behavior`), refusing what KEDA or the HPA would
//!   refuse and naming trigger types the rehearsal cannot simulate, each with the field path.
//! - [`Keda::poll`] is the operator's loop every `pollingInterval`: activation (0 → min),
//!   `cooldownPeriod` (→ 0 or idle, directly from any count), `initialCooldownPeriod`, and
//!   the cache `useCachedMetrics` serves.
//! - [`Keda::readings`] is what the HPA reads at each sync: one External metric per trigger
//!   (`s<i>-<type>`), or the `scalingModifiers` composite, with the fallback's failure
//!   counting and synthetic value (`target × R`, or `target × R / ready` for `Value`).

use inferscale_manifests::objects::{self, ScaledObject};
use inferscale_promql::{EvalError, Query, Value};

use crate::external::metadata::{Config, Metric, Pods};

use crate::formula::Formula;
use crate::hpa::{
    self, Behavior, Hpa, Policy, PolicyKind, Reading, Replicas, Rules, Select, Target,
};

/// A field KEDA, the HPA or the rehearsal cannot take.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {message}")]
pub struct SpecError {
    /// The field, e.g. `spec.triggers[1].metadata.threshold`.
    pub path: String,
    /// What is wrong, and what was expected.
    pub message: String,
}

fn err(path: impl Into<String>, message: impl Into<String>) -> SpecError {
    SpecError {
        path: path.into(),
        message: message.into(),
    }
}

/// How a metric is compared with its target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricType {
    /// Per replica (KEDA's default): the HPA proposes `ceil(value / target)`.
    AverageValue,
    /// For the whole workload: the HPA proposes `ceil(ready × value / target)`.
    Value,
}

impl MetricType {
    fn target(self, t: f64) -> Target {
        match self {
            MetricType::AverageValue => Target::AverageValue(t),
            MetricType::Value => Target::Value(t),
        }
    }
}

/// Where a trigger's value comes from.
#[derive(Debug, Clone)]
pub enum Source {
    /// A `prometheus` trigger: its query, evaluated on what Prometheus scraped.
    Prometheus(Query),
    /// An `external` trigger on `inferscale scaler`: what the scaler computes from the
    /// pods' own scrapes at each call ([`crate::external`]).
    External(Box<Config>),
}

/// One trigger the rehearsal can evaluate.
#[derive(Debug, Clone)]
pub struct TriggerSpec {
    /// Its `name`, if it has one (scaling modifiers refer to triggers by name).
    pub name: Option<String>,
    /// The HPA's External metric name, `s<index>-<type>`.
    pub metric: String,
    /// Where its value comes from.
    pub source: Source,
    /// `threshold`.
    pub threshold: f64,
    /// `activationThreshold` (default 0).
    pub activation: f64,
    /// `ignoreNullValues` (default true: an empty result reads as 0).
    pub ignore_null: bool,
    /// `metricType`.
    pub metric_type: MetricType,
    /// `useCachedMetrics`.
    pub cached: bool,
}

impl TriggerSpec {
    /// A `prometheus` trigger's query.
    pub fn query(&self) -> Option<&Query> {
        match &self.source {
            Source::Prometheus(q) => Some(q),
            Source::External(_) => None,
        }
    }

    /// What it reads, in words: the query, or the external scaler's metric and signal.
    pub fn describe(&self) -> String {
        match &self.source {
            Source::Prometheus(q) => q.text().to_owned(),
            Source::External(c) => {
                let mut d = format!("external: {}", c.metric);
                if c.metric == Metric::DesiredReplicas {
                    d.push_str(&format!(" by {} at {} per replica", c.signal, c.target));
                    if let Some(q) = c.queue_target {
                        d.push_str(&format!(", queue at {q}"));
                    }
                    if let Some((m, t)) = c.guardrail {
                        d.push_str(&format!(", {m} above {t} s"));
                    }
                }
                d
            }
        }
    }
}

/// `fallback.behavior`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FallbackBehavior {
    /// `static` (default): `fallback.replicas`.
    Static,
    /// `currentReplicas`.
    CurrentReplicas,
    /// `currentReplicasIfHigher`: max(current, fallback.replicas).
    CurrentReplicasIfHigher,
    /// `currentReplicasIfLower`: min(current, fallback.replicas).
    CurrentReplicasIfLower,
    /// `scalingModifiers`: a failed trigger is `nil` in the formula.
    ScalingModifiers,
}

/// `fallback`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FallbackSpec {
    /// Failures in a row after which the fallback applies (it applies when the count is
    /// above this).
    pub failure_threshold: u32,
    /// `replicas`.
    pub replicas: u32,
    /// How the replicas are chosen.
    pub behavior: FallbackBehavior,
}

/// `advanced.scalingModifiers`.
#[derive(Debug, Clone)]
pub struct Modifiers {
    /// The formula over trigger names.
    pub formula: Formula,
    /// The composite metric's target.
    pub target: f64,
    /// Active when the composite is above this (default 0).
    pub activation_target: f64,
    /// AverageValue (default) or Value.
    pub metric_type: MetricType,
}

/// A ScaledObject as KEDA runs it, with every default filled in.
#[derive(Debug, Clone)]
pub struct KedaSpec {
    /// `metadata.name`.
    pub name: String,
    /// `metadata.namespace` (default `default`).
    pub namespace: String,
    /// The Deployment it scales.
    pub target: String,
    /// `pollingInterval`, seconds (default 30).
    pub polling_s: f64,
    /// `cooldownPeriod`, seconds (default 300): only for the transition to 0 (or idle).
    pub cooldown_s: f64,
    /// `initialCooldownPeriod`, seconds (default 0).
    pub initial_cooldown_s: f64,
    /// `minReplicaCount` (default 0).
    pub min: u32,
    /// `maxReplicaCount` (default 100).
    pub max: u32,
    /// `idleReplicaCount`.
    pub idle: Option<u32>,
    /// `fallback`.
    pub fallback: Option<FallbackSpec>,
    /// The triggers, in order.
    pub triggers: Vec<TriggerSpec>,
    /// `advanced.scalingModifiers`.
    pub modifiers: Option<Modifiers>,
    /// The HPA KEDA creates (`minReplicas` = max(min, 1)).
    pub hpa: hpa::Spec,
    /// `autoscaling.keda.sh/paused-scale-in`: scale-down disabled, no transition to 0.
    pub paused_scale_in: bool,
}

/// KEDA's scalers that the rehearsal knows of but cannot simulate (they read systems outside
/// the inference deployment). A type in neither list is not a KEDA scaler.
const OTHER_SCALERS: &[&str] = &[
    "activemq",
    "apache-kafka",
    "arangodb",
    "artemis-queue",
    "aws-cloudwatch",
    "aws-dynamodb",
    "aws-dynamodb-streams",
    "aws-kinesis-stream",
    "aws-sqs-queue",
    "azure-app-insights",
    "azure-blob",
    "azure-data-explorer",
    "azure-eventhub",
    "azure-log-analytics",
    "azure-monitor",
    "azure-pipelines",
    "azure-queue",
    "azure-servicebus",
    "beanstalkd",
    "cassandra",
    "couchdb",
    "cpu",
    "cron",
    "datadog",
    "dynatrace",
    "elasticsearch",
    "etcd",
    "external-push",
    "gcp-cloudtasks",
    "gcp-pubsub",
    "gcp-stackdriver",
    "gcp-storage",
    "github-runner",
    "graphite",
    "huawei-cloudeye",
    "ibmmq",
    "influxdb",
    "kafka",
    "kubernetes-workload",
    "liiklus",
    "loki",
    "memory",
    "metrics-api",
    "mongodb",
    "mssql",
    "mysql",
    "nats-jetstream",
    "new-relic",
    "nsq",
    "openstack-metric",
    "openstack-swift",
    "postgresql",
    "predictkube",
    "pulsar",
    "rabbitmq",
    "redis",
    "redis-cluster",
    "redis-sentinel",
    "redis-streams",
    "redis-cluster-streams",
    "redis-sentinel-streams",
    "selenium-grid",
    "solace-event-queue",
    "solr",
    "splunk",
    "stan",
    "temporal",
];

fn seconds(v: Option<i64>, default: i64, min: i64, path: &str) -> Result<f64, SpecError> {
    let v = v.unwrap_or(default);
    if v < min {
        return Err(err(path, format!("{v} is below the minimum, {min}")));
    }
    Ok(v as f64)
}

fn count(v: Option<i64>, default: i64, path: &str) -> Result<u32, SpecError> {
    let v = v.unwrap_or(default);
    u32::try_from(v).map_err(|_| err(path, format!("{v} is not a replica count (0 or more)")))
}

fn float(s: &str, path: &str) -> Result<f64, SpecError> {
    s.trim()
        .parse::<f64>()
        .ok()
        .filter(|v| v.is_finite())
        .ok_or_else(|| err(path, format!("{s:?} is not a number")))
}

fn boolean(s: &str, path: &str) -> Result<bool, SpecError> {
    match s.trim().to_ascii_lowercase().as_str() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(err(path, format!("{s:?} is not \"true\" or \"false\""))),
    }
}

fn metric_type(s: Option<&str>, path: &str) -> Result<MetricType, SpecError> {
    match s.unwrap_or("AverageValue") {
        "AverageValue" => Ok(MetricType::AverageValue),
        "Value" => Ok(MetricType::Value),
        "Utilization" => Err(err(
            path,
            "Utilization is only for cpu and memory triggers; use AverageValue or Value",
        )),
        other => Err(err(path, format!("{other:?} is not AverageValue or Value"))),
    }
}

fn rules(
    r: Option<&objects::ScalingRules>,
    default: &Rules,
    path: &str,
) -> Result<Rules, SpecError> {
    let Some(r) = r else {
        return Ok(default.clone());
    };
    let stabilization_s = match r.stabilization_window_seconds {
        None => default.stabilization_s,
        Some(w @ 0..=3600) => w as u32,
        Some(w) => {
            return Err(err(
                format!("{path}.stabilizationWindowSeconds"),
                format!("{w} is outside 0..=3600"),
            ));
        }
    };
    let select = match r.select_policy.as_deref() {
        None | Some("Max") => Select::Max,
        Some("Min") => Select::Min,
        Some("Disabled") => Select::Disabled,
        Some(other) => {
            return Err(err(
                format!("{path}.selectPolicy"),
                format!("{other:?} is not Max, Min or Disabled"),
            ));
        }
    };
    let policies = match &r.policies {
        None => default.policies.clone(),
        Some(ps) if ps.is_empty() => {
            return Err(err(
                format!("{path}.policies"),
                "at least one policy is required when the list is given",
            ));
        }
        Some(ps) => {
            let mut out = Vec::new();
            for (i, p) in ps.iter().enumerate() {
                let at = format!("{path}.policies[{i}]");
                let kind = match p.kind.as_str() {
                    "Pods" => PolicyKind::Pods,
                    "Percent" => PolicyKind::Percent,
                    other => {
                        return Err(err(
                            format!("{at}.type"),
                            format!("{other:?} is not Pods or Percent"),
                        ));
                    }
                };
                if p.value <= 0 || p.value > i64::from(u32::MAX) {
                    return Err(err(
                        format!("{at}.value"),
                        format!("{} must be greater than 0", p.value),
                    ));
                }
                if !(1..=1800).contains(&p.period_seconds) {
                    return Err(err(
                        format!("{at}.periodSeconds"),
                        format!("{} is outside 1..=1800", p.period_seconds),
                    ));
                }
                out.push(Policy {
                    kind,
                    value: p.value as u32,
                    period_s: p.period_seconds as u32,
                });
            }
            out
        }
    };
    let tolerance = match r.extra.get("tolerance") {
        None => None,
        Some(v) => {
            let t = v
                .as_f64()
                .or_else(|| v.as_str().and_then(|s| s.trim().parse().ok()))
                .filter(|t: &f64| t.is_finite() && *t >= 0.0)
                .ok_or_else(|| {
                    err(
                        format!("{path}.tolerance"),
                        format!("{v} is not a quantity of 0 or more"),
                    )
                })?;
            Some(t)
        }
    };
    Ok(Rules {
        stabilization_s,
        select,
        policies,
        tolerance,
    })
}

/// An `external` trigger on `inferscale scaler`, read as the scaler reads its metadata; the
/// HPA's target is what the scaler's `GetMetricSpec` answers (1 for `desired_replicas`).
fn external_trigger(
    t: &objects::Trigger,
    i: usize,
    at: &str,
    so: &ScaledObject,
) -> Result<TriggerSpec, SpecError> {
    let address = t
        .metadata
        .get("scalerAddress")
        .filter(|v| !v.trim().is_empty());
    if address.is_none() {
        return Err(err(
            format!("{at}.metadata.scalerAddress"),
            "required by the external scaler",
        ));
    }
    let namespace = so.metadata.namespace.as_deref().unwrap_or("default");
    let cfg = Config::from_metadata(&t.metadata, namespace)
        .map_err(|e| err(format!("{at}.metadata.{}", e.key), e.message))?;
    if let Pods::Targets(_) = cfg.pods {
        return Err(err(
            format!("{at}.metadata.targets"),
            "fixed targets cannot be simulated: the rehearsal's pods are the scaled Deployment's; name its Service (service, port)",
        ));
    }
    let threshold = match cfg.metric {
        Metric::DesiredReplicas => 1.0,
        _ => cfg.target,
    };
    Ok(TriggerSpec {
        name: t.name.clone(),
        metric: format!("s{i}-external"),
        threshold,
        activation: cfg.activation_target,
        ignore_null: false,
        metric_type: metric_type(t.metric_type.as_deref(), &format!("{at}.metricType"))?,
        cached: t.use_cached_metrics.unwrap_or(false),
        source: Source::External(Box::new(cfg)),
    })
}

impl KedaSpec {
    /// Reads `so`, refusing what KEDA's webhook, the CRD or the HPA API would refuse and
    /// trigger types the rehearsal cannot simulate.
    // Long: one refusal of KEDA's webhook, its CRD or the HPA API after another, then one
    // trigger type after another, each a few lines with its field path.
    pub fn from_object(so: &ScaledObject) -> Result<KedaSpec, SpecError> {
        let s = &so.spec;
        let polling_s = seconds(s.polling_interval, 30, 1, "spec.pollingInterval")?;
        let cooldown_s = seconds(s.cooldown_period, 300, 0, "spec.cooldownPeriod")?;
        let initial_cooldown_s = seconds(
            s.initial_cooldown_period,
            0,
            0,
            "spec.initialCooldownPeriod",
        )?;
        let min = count(s.min_replica_count, 0, "spec.minReplicaCount")?;
        let max = count(s.max_replica_count, 100, "spec.maxReplicaCount")?;
        if max < 1 {
            return Err(err("spec.maxReplicaCount", "must be at least 1"));
        }
        if min > max {
            return Err(err(
                "spec.minReplicaCount",
                format!("{min} is above maxReplicaCount ({max})"),
            ));
        }
        let idle = match s.idle_replica_count {
            None => None,
            Some(i) => {
                let i = count(Some(i), 0, "spec.idleReplicaCount")?;
                if i >= min {
                    return Err(err(
                        "spec.idleReplicaCount",
                        format!("{i} must be below minReplicaCount ({min})"),
                    ));
                }
                Some(i)
            }
        };
        if s.triggers.is_empty() {
            return Err(err("spec.triggers", "at least one trigger is required"));
        }
        let mut triggers = Vec::new();
        for (i, t) in s.triggers.iter().enumerate() {
            let at = format!("spec.triggers[{i}]");
            if let Some(n) = &t.name
                && s.triggers[..i].iter().any(|o| o.name.as_ref() == Some(n))
            {
                return Err(err(
                    format!("{at}.name"),
                    format!("{n:?} names two triggers"),
                ));
            }
            if t.kind == "external" {
                triggers.push(external_trigger(t, i, &at, so)?);
                continue;
            }
            if t.kind != "prometheus" {
                let what = if OTHER_SCALERS.contains(&t.kind.as_str()) {
                    format!(
                        "trigger type {:?} cannot be simulated: the rehearsal evaluates \
                         prometheus triggers on the simulated series",
                        t.kind
                    )
                } else {
                    format!("{:?} is not a KEDA scaler type", t.kind)
                };
                return Err(err(format!("{at}.type"), what));
            }
            let md = |k: &str| t.metadata.get(k).map(String::as_str);
            let need = |k: &str| {
                md(k).filter(|v| !v.trim().is_empty()).ok_or_else(|| {
                    err(
                        format!("{at}.metadata.{k}"),
                        "required by the prometheus scaler",
                    )
                })
            };
            need("serverAddress")?;
            let q = need("query")?;
            let query =
                Query::parse(q).map_err(|e| err(format!("{at}.metadata.query"), e.to_string()))?;
            let threshold = float(need("threshold")?, &format!("{at}.metadata.threshold"))?;
            let activation = md("activationThreshold")
                .map(|v| float(v, &format!("{at}.metadata.activationThreshold")))
                .transpose()?
                .unwrap_or(0.0);
            let ignore_null = md("ignoreNullValues")
                .map(|v| boolean(v, &format!("{at}.metadata.ignoreNullValues")))
                .transpose()?
                .unwrap_or(true);
            triggers.push(TriggerSpec {
                name: t.name.clone(),
                metric: format!("s{i}-prometheus"),
                threshold,
                activation,
                ignore_null,
                metric_type: metric_type(t.metric_type.as_deref(), &format!("{at}.metricType"))?,
                cached: t.use_cached_metrics.unwrap_or(false),
                source: Source::Prometheus(query),
            });
        }
        let advanced = s.advanced.as_ref();
        let modifiers = match advanced.and_then(|a| a.scaling_modifiers.as_ref()) {
            None => None,
            Some(m) => {
                let p = "spec.advanced.scalingModifiers";
                let (Some(f), Some(target)) = (&m.formula, &m.target) else {
                    return Err(err(p, "formula and target are required together"));
                };
                let formula =
                    Formula::parse(f).map_err(|e| err(format!("{p}.formula"), e.to_string()))?;
                for n in formula.names() {
                    if !triggers.iter().any(|t| t.name.as_deref() == Some(&n)) {
                        return Err(err(
                            format!("{p}.formula"),
                            format!("{n:?} is not the name of a trigger"),
                        ));
                    }
                }
                Some(Modifiers {
                    formula,
                    target: float(target, &format!("{p}.target"))?,
                    activation_target: m
                        .activation_target
                        .as_deref()
                        .map(|v| float(v, &format!("{p}.activationTarget")))
                        .transpose()?
                        .unwrap_or(0.0),
                    metric_type: metric_type(m.metric_type.as_deref(), &format!("{p}.metricType"))?,
                })
            }
        };
        let fallback = match &s.fallback {
            None => None,
            Some(f) => {
                let p = "spec.fallback";
                let behavior = match f.behavior.as_deref().unwrap_or("static") {
                    "static" => FallbackBehavior::Static,
                    "currentReplicas" => FallbackBehavior::CurrentReplicas,
                    "currentReplicasIfHigher" => FallbackBehavior::CurrentReplicasIfHigher,
                    "currentReplicasIfLower" => FallbackBehavior::CurrentReplicasIfLower,
                    "scalingModifiers" => FallbackBehavior::ScalingModifiers,
                    other => {
                        return Err(err(
                            format!("{p}.behavior"),
                            format!(
                                "{other:?} is not static, currentReplicas, currentReplicasIfHigher, \
                                 currentReplicasIfLower or scalingModifiers"
                            ),
                        ));
                    }
                };
                if behavior == FallbackBehavior::ScalingModifiers && modifiers.is_none() {
                    return Err(err(
                        format!("{p}.behavior"),
                        "scalingModifiers needs spec.advanced.scalingModifiers",
                    ));
                }
                Some(FallbackSpec {
                    failure_threshold: count(
                        Some(f.failure_threshold),
                        0,
                        &format!("{p}.failureThreshold"),
                    )?,
                    replicas: count(Some(f.replicas), 0, &format!("{p}.replicas"))?,
                    behavior,
                })
            }
        };
        let behavior = match advanced
            .and_then(|a| a.horizontal_pod_autoscaler_config.as_ref())
            .and_then(|h| h.behavior.as_ref())
        {
            None => None,
            Some(b) => {
                let d = Behavior::kubernetes_default();
                let p = "spec.advanced.horizontalPodAutoscalerConfig.behavior";
                Some(Behavior {
                    up: rules(b.scale_up.as_ref(), &d.up, &format!("{p}.scaleUp"))?,
                    down: rules(b.scale_down.as_ref(), &d.down, &format!("{p}.scaleDown"))?,
                })
            }
        };
        let annotations = so.metadata.annotations.clone().unwrap_or_default();
        let paused_scale_in = annotations
            .get("autoscaling.keda.sh/paused-scale-in")
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"));
        let mut behavior = behavior;
        if paused_scale_in {
            let b = behavior.get_or_insert_with(Behavior::kubernetes_default);
            b.down.select = Select::Disabled;
        }
        Ok(KedaSpec {
            name: so.metadata.name.clone(),
            namespace: so
                .metadata
                .namespace
                .clone()
                .unwrap_or_else(|| "default".into()),
            target: s.scale_target_ref.name.clone(),
            polling_s,
            cooldown_s,
            initial_cooldown_s,
            min,
            max,
            idle,
            fallback,
            triggers,
            modifiers,
            hpa: hpa::Spec::new(min.max(1), max, behavior),
            paused_scale_in,
        })
    }
}

/// Why a trigger's value could not be had this time.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FetchError {
    /// The query returned no sample and `ignoreNullValues` is false.
    #[error("the query returned no sample (ignoreNullValues is false)")]
    Empty,
    /// More than one sample: KEDA's Prometheus scaler refuses it (aggregate with `sum`).
    #[error("the query returned {0} samples; KEDA's prometheus scaler needs one (use sum(...))")]
    Multiple(usize),
    /// NaN or ±Inf with `ignoreNullValues` false.
    #[error("the query returned {0}")]
    NotFinite(f64),
    /// The evaluator refused the query, or Prometheus was down.
    #[error("{0}")]
    Query(String),
    /// The external scaler had no value (no pods, or none answering).
    #[error("the scaler has no value: {0}")]
    External(String),
}

/// A trigger's value, or why there is none.
pub type Fetch = Result<f64, FetchError>;

/// What KEDA's Prometheus scaler makes of an instant query's result.
pub fn fetch(result: &Result<Value, EvalError>, ignore_null: bool) -> Fetch {
    let v = match result {
        Err(e) => return Err(FetchError::Query(e.to_string())),
        Ok(Value::Scalar(v)) => *v,
        Ok(Value::Vector(s)) if s.is_empty() => {
            return if ignore_null {
                Ok(0.0)
            } else {
                Err(FetchError::Empty)
            };
        }
        Ok(Value::Vector(s)) if s.len() > 1 => return Err(FetchError::Multiple(s.len())),
        Ok(Value::Vector(s)) => s[0].value,
        Ok(other) => {
            return Err(FetchError::Query(format!(
                "the query returned a {}, not an instant vector or scalar",
                other.kind()
            )));
        }
    };
    if v.is_finite() {
        // KEDA's quantities clamp negative values to 0.
        Ok(v.max(0.0))
    } else if ignore_null {
        Ok(0.0)
    } else {
        Err(FetchError::NotFinite(v))
    }
}

/// What the operator's poll did to the scale target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PollAction {
    /// Activation: set replicas from 0 (or idle) to this.
    Activate(u32),
    /// Deactivation after the cooldown: set replicas to 0 (or idle), from any count.
    Deactivate(u32),
    /// Below `minReplicaCount` with no idle mode: set to the minimum.
    ToMin(u32),
}

/// One ScaledObject's KEDA state and the HPA it owns.
#[derive(Debug, Clone)]
pub struct Keda {
    /// The configuration.
    pub spec: KedaSpec,
    /// The HPA KEDA created.
    pub hpa: Hpa,
    created: f64,
    last_active: Option<f64>,
    failures: Vec<u32>,
    cache: Vec<Option<Fetch>>,
    active: bool,
}

impl Keda {
    /// KEDA and its HPA as created at `created` (seconds).
    pub fn new(spec: KedaSpec, created: f64) -> Keda {
        let n = spec.triggers.len();
        Keda {
            hpa: Hpa::new(spec.hpa.clone()),
            spec,
            created,
            last_active: None,
            failures: vec![0; n + 1],
            cache: vec![None; n],
            active: false,
        }
    }

    /// Whether the last poll found the ScaledObject active.
    pub fn active(&self) -> bool {
        self.active
    }

    fn composite(&self, values: &[Fetch]) -> Option<f64> {
        let m = self.spec.modifiers.as_ref()?;
        let nil_ok = self
            .spec
            .fallback
            .is_some_and(|f| f.behavior == FallbackBehavior::ScalingModifiers);
        if !nil_ok && values.iter().any(Result::is_err) {
            return None;
        }
        let lookup = |name: &str| {
            self.spec
                .triggers
                .iter()
                .position(|t| t.name.as_deref() == Some(name))
                .and_then(|i| values[i].as_ref().ok().copied())
        };
        m.formula.eval(&lookup).ok().filter(|v| v.is_finite())
    }

    /// The operator's loop at `now`, with each trigger's value as the scaler returned it and
    /// the scale target's `spec.replicas`.
    pub fn poll(&mut self, now: f64, values: &[Fetch], current: u32) -> Option<PollAction> {
        for (c, v) in self.cache.iter_mut().zip(values) {
            *c = Some(v.clone());
        }
        let any_error = values.iter().any(Result::is_err);
        let active = match &self.spec.modifiers {
            Some(m) => self
                .composite(values)
                .is_some_and(|v| v > m.activation_target),
            None => self
                .spec
                .triggers
                .iter()
                .zip(values)
                .any(|(t, v)| v.as_ref().is_ok_and(|v| *v > t.activation)),
        };
        self.active = active;
        let s = &self.spec;
        let idle_mode = s.idle.is_some();
        if active {
            self.last_active = Some(now);
            if current == 0 || (idle_mode && current < s.min) {
                return Some(PollAction::Activate(s.min.max(1)));
            }
            return None;
        }
        if any_error {
            // With a fallback the HPA's fallback acts; without, the object is not Ready.
            return None;
        }
        let goes_idle = (idle_mode && current > s.idle.unwrap_or(0)) || (current > 0 && s.min == 0);
        if goes_idle && !s.paused_scale_in {
            let cooled = match self.last_active {
                Some(t) => t + s.cooldown_s < now,
                None => self.created + s.initial_cooldown_s < now,
            };
            return cooled.then_some(PollAction::Deactivate(s.idle.unwrap_or(0)));
        }
        if !idle_mode && current < s.min {
            return Some(PollAction::ToMin(s.min));
        }
        None
    }

    /// The value the HPA is served for trigger `i`: live (as given) or, with
    /// `useCachedMetrics`, what the last poll read.
    pub fn served(&self, i: usize, live: Fetch) -> Fetch {
        if self.spec.triggers[i].cached
            && let Some(Some(c)) = self.cache.get(i)
        {
            return c.clone();
        }
        live
    }

    fn fallback_value(&self, target: f64, kind: MetricType, n: Replicas) -> Option<f64> {
        let f = self.spec.fallback?;
        let r = match f.behavior {
            FallbackBehavior::Static | FallbackBehavior::ScalingModifiers => f.replicas,
            FallbackBehavior::CurrentReplicas => n.spec,
            FallbackBehavior::CurrentReplicasIfHigher => n.spec.max(f.replicas),
            FallbackBehavior::CurrentReplicasIfLower => n.spec.min(f.replicas),
        };
        match kind {
            MetricType::AverageValue => Some(target * f64::from(r)),
            MetricType::Value if n.ready > 0 => Some(target * f64::from(r) / f64::from(n.ready)),
            MetricType::Value => None,
        }
    }

    /// Counts a failure (or resets the count) of metric `slot` and returns the reading.
    fn counted(
        &mut self,
        slot: usize,
        v: Option<f64>,
        target: f64,
        kind: MetricType,
        n: Replicas,
    ) -> Reading {
        let value = match v {
            Some(v) => {
                self.failures[slot] = 0;
                Some(v)
            }
            None => {
                self.failures[slot] += 1;
                match self.spec.fallback {
                    Some(f) if self.failures[slot] > f.failure_threshold => {
                        self.fallback_value(target, kind, n)
                    }
                    _ => None,
                }
            }
        };
        Reading {
            target: kind.target(target),
            value,
        }
    }

    /// What the HPA reads this sync, given each trigger's served value and the replica
    /// counts: one reading per trigger, or the composite with `scalingModifiers`.
    pub fn readings(&mut self, values: &[Fetch], n: Replicas) -> Vec<Reading> {
        if let Some(m) = self.spec.modifiers.clone() {
            let v = self.composite(values);
            let slot = self.spec.triggers.len();
            return vec![self.counted(slot, v, m.target, m.metric_type, n)];
        }
        let specs: Vec<(f64, MetricType)> = self
            .spec
            .triggers
            .iter()
            .map(|t| (t.threshold, t.metric_type))
            .collect();
        specs
            .into_iter()
            .enumerate()
            .map(|(i, (target, kind))| {
                let v = values[i].as_ref().ok().copied();
                self.counted(i, v, target, kind, n)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use inferscale_manifests::objects::load;

    fn so(spec: &str) -> Result<KedaSpec, SpecError> {
        let text = format!(
            "apiVersion: keda.sh/v1alpha1\nkind: ScaledObject\nmetadata:\n  name: x\nspec:\n  scaleTargetRef:\n    name: vllm\n{spec}"
        );
        let o: ScaledObject = load(&text).unwrap_or_else(|e| panic!("{e}"));
        KedaSpec::from_object(&o)
    }

    const TRIGGER: &str = "  triggers:\n  - type: prometheus\n    metadata:\n      serverAddress: http://p:9090\n      query: sum(q)\n      threshold: \"5\"\n";

    #[test]
    fn defaults_are_kedas() {
        let s = so(TRIGGER).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            (s.polling_s, s.cooldown_s, s.min, s.max),
            (30.0, 300.0, 0, 100)
        );
        assert_eq!(s.hpa.min, 1, "the HPA gets max(min, 1)");
        assert!(s.hpa.behavior.is_none(), "no behavior: the legacy path");
        let t = &s.triggers[0];
        assert_eq!(
            (t.metric.as_str(), t.threshold, t.activation, t.ignore_null),
            ("s0-prometheus", 5.0, 0.0, true)
        );
        assert_eq!(t.metric_type, MetricType::AverageValue);
    }

    #[test]
    fn what_keda_or_the_hpa_would_refuse_names_the_field() {
        let cases = [
            ("  triggers: []\n", "spec.triggers"),
            (
                &format!("  minReplicaCount: 3\n  maxReplicaCount: 2\n{TRIGGER}"),
                "spec.minReplicaCount",
            ),
            (
                &format!(
                    "  advanced:\n    horizontalPodAutoscalerConfig:\n      behavior:\n        scaleDown:\n          policies:\n          - type: Pods\n            value: 1\n            periodSeconds: 0\n{TRIGGER}"
                ),
                "spec.advanced.horizontalPodAutoscalerConfig.behavior.scaleDown.policies[0].periodSeconds",
            ),
            (
                "  triggers:\n  - type: kafkaa\n    metadata: {}\n",
                "spec.triggers[0].type",
            ),
            (
                "  triggers:\n  - type: cpu\n    metadata: {value: \"50\"}\n",
                "spec.triggers[0].type",
            ),
            (
                "  triggers:\n  - type: prometheus\n    metadata:\n      serverAddress: http://p\n      query: sum(q)\n",
                "spec.triggers[0].metadata.threshold",
            ),
            (
                "  triggers:\n  - type: prometheus\n    metadata:\n      serverAddress: http://p\n      query: sum(q\n      threshold: \"1\"\n",
                "spec.triggers[0].metadata.query",
            ),
            (
                &format!("  idleReplicaCount: 1\n  minReplicaCount: 1\n{TRIGGER}"),
                "spec.idleReplicaCount",
            ),
            (
                &format!(
                    "  fallback:\n    failureThreshold: 3\n    replicas: 2\n    behavior: sometimes\n{TRIGGER}"
                ),
                "spec.fallback.behavior",
            ),
        ];
        for (spec, path) in cases {
            let e = so(spec).expect_err(spec);
            assert_eq!(e.path, path, "{spec}: {e}");
        }
        let cpu =
            so("  triggers:\n  - type: cpu\n    metadata: {value: \"50\"}\n").expect_err("cpu");
        assert!(cpu.message.contains("cannot be simulated"), "{cpu}");
        let typo = so("  triggers:\n  - type: kafkaa\n    metadata: {}\n").expect_err("typo");
        assert!(typo.message.contains("not a KEDA scaler"), "{typo}");
    }

    #[test]
    fn results_become_values_as_the_prometheus_scaler_reads_them() {
        use inferscale_promql::{Labels, Sample};
        let one = |v: f64| {
            Ok(Value::Vector(vec![Sample {
                labels: Labels::default(),
                value: v,
            }]))
        };
        assert_eq!(fetch(&one(3.5), true), Ok(3.5));
        assert_eq!(fetch(&one(-1.0), true), Ok(0.0));
        assert_eq!(fetch(&Ok(Value::Vector(vec![])), true), Ok(0.0));
        assert_eq!(
            fetch(&Ok(Value::Vector(vec![])), false),
            Err(FetchError::Empty)
        );
        assert_eq!(fetch(&one(f64::NAN), true), Ok(0.0));
        assert!(matches!(
            fetch(&one(f64::NAN), false),
            Err(FetchError::NotFinite(_))
        ));
        let two = Ok(Value::Vector(vec![
            Sample {
                labels: Labels::default(),
                value: 1.0,
            },
            Sample {
                labels: Labels::default(),
                value: 2.0,
            },
        ]));
        assert_eq!(fetch(&two, true), Err(FetchError::Multiple(2)));
    }

    #[test]
    fn activation_and_cooldown_to_zero() {
        let s = so(&format!("  cooldownPeriod: 60\n{TRIGGER}")).unwrap_or_else(|e| panic!("{e}"));
        let mut k = Keda::new(s, 0.0);
        // Activity is strictly above activationThreshold (0).
        assert_eq!(k.poll(30.0, &[Ok(0.0)], 0), None);
        assert_eq!(k.poll(60.0, &[Ok(2.0)], 0), Some(PollAction::Activate(1)));
        assert_eq!(k.poll(90.0, &[Ok(0.0)], 3), None, "cooling down");
        assert_eq!(
            k.poll(120.0, &[Ok(0.0)], 3),
            None,
            "60 s after last active: not yet past"
        );
        assert_eq!(
            k.poll(150.0, &[Ok(0.0)], 3),
            Some(PollAction::Deactivate(0)),
            "N -> 0 at once"
        );
        // An error never deactivates.
        let s = so(&format!("  cooldownPeriod: 0\n{TRIGGER}")).unwrap_or_else(|e| panic!("{e}"));
        let mut k = Keda::new(s, 0.0);
        assert_eq!(k.poll(30.0, &[Err(FetchError::Empty)], 2), None);
    }

    #[test]
    fn fallback_counts_failures_and_serves_target_times_replicas() {
        let s = so(&format!(
            "  minReplicaCount: 1\n  fallback:\n    failureThreshold: 2\n    replicas: 4\n    behavior: currentReplicasIfHigher\n{TRIGGER}"
        ))
        .unwrap_or_else(|e| panic!("{e}"));
        let mut k = Keda::new(s, 0.0);
        let n = Replicas {
            spec: 6,
            status: 6,
            ready: 5,
        };
        let bad = [Err(FetchError::Empty)];
        assert_eq!(k.readings(&bad, n)[0].value, None);
        assert_eq!(k.readings(&bad, n)[0].value, None);
        // Third failure: above the threshold; R = max(6, 4); AverageValue: 5 x 6.
        assert_eq!(k.readings(&bad, n)[0].value, Some(30.0));
        assert_eq!(k.readings(&[Ok(1.0)], n)[0].value, Some(1.0));
        assert_eq!(
            k.readings(&bad, n)[0].value,
            None,
            "a success reset the count"
        );
    }

    #[test]
    fn scaling_modifiers_compose_named_triggers() {
        let spec = "  advanced:\n    scalingModifiers:\n      formula: \"p95 > 5 ? max(q / 10, 3) : q / 10\"\n      target: \"1\"\n  triggers:\n  - type: prometheus\n    name: q\n    metadata: {serverAddress: http://p, query: sum(q), threshold: \"10\"}\n  - type: prometheus\n    name: p95\n    metadata: {serverAddress: http://p, query: max(l), threshold: \"5\"}\n";
        let mut k = Keda::new(so(spec).unwrap_or_else(|e| panic!("{e}")), 0.0);
        let n = Replicas {
            spec: 1,
            status: 1,
            ready: 1,
        };
        let r = k.readings(&[Ok(20.0), Ok(7.0)], n);
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].value, Some(3.0));
        assert_eq!(r[0].target, Target::AverageValue(1.0));
        // One failed trigger without a scalingModifiers fallback: the composite fails.
        assert_eq!(
            k.readings(&[Ok(20.0), Err(FetchError::Empty)], n)[0].value,
            None
        );
        let bad = spec.replace("p95 > 5", "latency > 5");
        assert_eq!(
            so(&bad).expect_err("unknown name").path,
            "spec.advanced.scalingModifiers.formula"
        );
    }
}
