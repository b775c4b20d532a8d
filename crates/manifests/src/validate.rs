//! Checking Kubernetes objects before anyone applies them:
//!
//! - [`schema`]: a validator for the OpenAPI v3 subset CRDs use (types, properties, required,
//!   `additionalProperties`, items, enums, bounds, lengths, patterns, formats, `anyOf`/`oneOf`/
//!   `allOf`, `x-kubernetes-int-or-string`, `x-kubernetes-preserve-unknown-fields`), strict about
//!   unknown fields as `kubectl apply --validate=strict` is;
//! - [`keda_rules`]: the rules KEDA's admission webhook, the CRD's CEL rule and the HPA API
//!   validation apply to a ScaledObject (listed in the autoscaling notes);
//! - [`karpenter_rules`]: the CEL rules of Karpenter's NodePool and EC2NodeClass CRDs that an
//!   OpenAPI validator cannot see (an `In` requirement without values, a budget's schedule
//!   without its duration, restricted label domains, exactly one of `role`/`instanceProfile`,
//!   AMI aliases);
//! - [`lint`]: the pitfalls that are valid YAML but wrong (a p95 fed as `AverageValue`, NaN
//!   that `or vector(0)` does not catch, `ignoreNullValues` left on, removed metric names).
//!
//! The CRD schemas are KEDA 2.20.2's, prometheus-operator 0.93.0's, Karpenter v1.14's NodePool
//! (kubernetes-sigs/karpenter) and EC2NodeClass (aws/karpenter-provider-aws v1.14.1)
//! (`schemas/`), and Kubernetes v1.37.0's batch/v1 Job.

mod crds;
mod karpenter;

pub use crds::{
    EC2_NODE_CLASS_SCHEMA, JOB_SCHEMA, NODE_POOL_SCHEMA, PROMETHEUS_RULE_SCHEMA,
    SCALED_OBJECT_SCHEMA, SERVICE_MONITOR_SCHEMA, schema_for,
};
pub use karpenter::karpenter_rules;

use std::sync::OnceLock;

use inferscale_catalog::{Engine, NameStatus, Signal};
use regex::Regex;
use serde_json::Value;

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Compiled schema patterns (a schema has a handful).
type PatternCache = std::sync::Mutex<Vec<(String, Option<Regex>)>>;

fn regex(pattern: &str) -> Option<Regex> {
    static CACHE: OnceLock<PatternCache> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    let mut c = cache.lock().ok()?;
    if let Some((_, r)) = c.iter().find(|(p, _)| p == pattern) {
        return r.clone();
    }
    let r = Regex::new(pattern).ok();
    c.push((pattern.to_owned(), r.clone()));
    r
}

/// Validates `doc` against an OpenAPI v3 `schema`, appending `path: problem` to `errors`.
// Long: one OpenAPI v3 keyword after another, as the schema language lists them, each a few
// lines.
pub fn schema(schema: &Value, doc: &Value, path: &str, errors: &mut Vec<String>) {
    let here = if path.is_empty() { "." } else { path };
    if schema.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true)) {
        if !(doc.is_string() || type_name(doc) == "integer") {
            errors.push(format!(
                "{here}: expected an integer or a string, found {}",
                type_name(doc)
            ));
        }
        return;
    }
    if doc.is_null() && schema.get("nullable") == Some(&Value::Bool(true)) {
        return;
    }
    for key in ["allOf"] {
        for s in schema
            .get(key)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            self::schema(s, doc, path, errors);
        }
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(alts) = schema.get(key).and_then(Value::as_array) {
            let ok = alts.iter().filter(|s| {
                let mut e = Vec::new();
                self::schema(s, doc, path, &mut e);
                e.is_empty()
            });
            let n = ok.count();
            if n == 0 || (key == "oneOf" && n > 1) {
                errors.push(format!("{here}: matches {n} of the {key} alternatives"));
            }
        }
    }
    if let Some(t) = schema.get("type").and_then(Value::as_str) {
        let actual = type_name(doc);
        let fits = actual == t || (t == "number" && actual == "integer");
        if !fits {
            errors.push(format!("{here}: expected {t}, found {actual} ({doc})"));
            return;
        }
    }
    if let Some(e) = schema.get("enum").and_then(Value::as_array)
        && !e.contains(doc)
    {
        errors.push(format!(
            "{here}: {doc} is not one of {}",
            Value::Array(e.clone())
        ));
    }
    match doc {
        Value::Object(m) => {
            let props = schema.get("properties").and_then(Value::as_object);
            for r in schema
                .get("required")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                if let Some(r) = r.as_str()
                    && !m.contains_key(r)
                {
                    errors.push(format!("{here}: missing required field {r:?}"));
                }
            }
            let preserve =
                schema.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true));
            let additional = schema.get("additionalProperties");
            for (k, v) in m {
                let p = format!("{path}.{k}");
                match (props.and_then(|p| p.get(k)), additional) {
                    (Some(s), _) => self::schema(s, v, &p, errors),
                    (None, Some(Value::Object(_))) => {
                        if let Some(a) = additional {
                            self::schema(a, v, &p, errors);
                        }
                    }
                    (None, Some(Value::Bool(true))) => {}
                    (None, _) if preserve => {}
                    // An object schema with neither properties nor additionalProperties takes
                    // anything (metadata, for instance).
                    (None, None) if props.is_none() => {}
                    (None, _) => errors.push(format!("{p}: unknown field")),
                }
            }
            let n = m.len() as u64;
            let words = ("fewer", "more", "properties");
            counted(
                schema,
                ("minProperties", "maxProperties"),
                n,
                words,
                here,
                errors,
            );
        }
        Value::Array(items) => {
            if let Some(s) = schema.get("items") {
                for (i, v) in items.iter().enumerate() {
                    self::schema(s, v, &format!("{path}[{i}]"), errors);
                }
            }
            let n = items.len() as u64;
            let words = ("fewer", "more", "items");
            counted(schema, ("minItems", "maxItems"), n, words, here, errors);
        }
        Value::String(s) => {
            let n = s.chars().count() as u64;
            let words = ("shorter", "longer", "characters");
            counted(schema, ("minLength", "maxLength"), n, words, here, errors);
            if let Some(p) = schema.get("pattern").and_then(Value::as_str) {
                match regex(p) {
                    Some(r) if !r.is_match(s) => {
                        errors.push(format!("{here}: {s:?} does not match {p:?}"));
                    }
                    Some(_) => {}
                    None => errors.push(format!(
                        "{here}: the schema's pattern {p:?} is not understood"
                    )),
                }
            }
        }
        Value::Number(n) => {
            let x = n.as_f64().unwrap_or(f64::NAN);
            if let Some(min) = schema.get("minimum").and_then(Value::as_f64)
                && x < min
            {
                errors.push(format!("{here}: {x} is below the minimum {min}"));
            }
            if let Some(max) = schema.get("maximum").and_then(Value::as_f64)
                && x > max
            {
                errors.push(format!("{here}: {x} is above the maximum {max}"));
            }
            if schema.get("format").and_then(Value::as_str) == Some("int32")
                && !(f64::from(i32::MIN)..=f64::from(i32::MAX)).contains(&x)
            {
                errors.push(format!("{here}: {x} does not fit int32"));
            }
        }
        _ => {}
    }
}

/// A count (`n` items, characters or properties) against the schema's bounds under `keys`
/// (`minItems`, `maxItems`), worded with `(below, above, unit)`: "fewer than 1 items".
fn counted(
    schema: &Value,
    (min_key, max_key): (&str, &str),
    n: u64,
    (below, above, unit): (&str, &str, &str),
    here: &str,
    errors: &mut Vec<String>,
) {
    if let Some(min) = schema.get(min_key).and_then(Value::as_u64)
        && n < min
    {
        errors.push(format!("{here}: {below} than {min} {unit}"));
    }
    if let Some(max) = schema.get(max_key).and_then(Value::as_u64)
        && n > max
    {
        errors.push(format!("{here}: {above} than {max} {unit}"));
    }
}

/// A name Kubernetes would refuse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    /// Not an RFC 1123 label.
    #[error(
        "{0:?} is not a valid RFC 1123 name (lowercase letters, digits and '-', starting and ending with a letter or digit, at most 63 characters)"
    )]
    Label(String),
    /// Not an RFC 1123 subdomain.
    #[error(
        "{0:?} is not a valid RFC 1123 subdomain name (lowercase letters, digits, '-' and '.', at most 253 characters)"
    )]
    Subdomain(String),
}

/// RFC 1123 label (a Service, a Deployment's pods, a namespace): lowercase alphanumerics and
/// '-', starting and ending alphanumeric, at most 63 characters.
pub fn rfc1123_label(s: &str) -> Result<(), NameError> {
    let ok = !s.is_empty()
        && s.len() <= 63
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !s.starts_with('-')
        && !s.ends_with('-');
    if ok {
        Ok(())
    } else {
        Err(NameError::Label(s.to_owned()))
    }
}

/// RFC 1123 subdomain (most object names): labels joined by '.', at most 253 characters.
pub fn rfc1123_subdomain(s: &str) -> Result<(), NameError> {
    if s.is_empty() || s.len() > 253 || s.split('.').any(|l| rfc1123_label(l).is_err()) {
        Err(NameError::Subdomain(s.to_owned()))
    } else {
        Ok(())
    }
}

/// How bad a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// The API server, KEDA's webhook or the HPA would refuse it.
    Error,
    /// Valid, and wrong: it will not do what it seems to.
    Warning,
}

/// One problem with an object: a stable id (for filtering and docs), how bad, where (a field
/// path), what, and how to fix it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Finding {
    /// A stable identifier, e.g. `keda.min-above-max`.
    pub id: &'static str,
    /// How bad.
    pub severity: Severity,
    /// The field, e.g. `spec.triggers[1].metricType` (empty: the whole object).
    pub path: String,
    /// What is wrong.
    pub message: String,
    /// What to do about it.
    pub fix: String,
}

impl Finding {
    fn new(
        severity: Severity,
        id: &'static str,
        path: impl Into<String>,
        message: impl Into<String>,
        fix: impl Into<String>,
    ) -> Self {
        Finding {
            id,
            severity,
            path: path.into(),
            message: message.into(),
            fix: fix.into(),
        }
    }

    fn error(
        id: &'static str,
        path: impl Into<String>,
        message: impl Into<String>,
        fix: impl Into<String>,
    ) -> Self {
        Finding::new(Severity::Error, id, path, message, fix)
    }

    fn warning(
        id: &'static str,
        path: impl Into<String>,
        message: impl Into<String>,
        fix: impl Into<String>,
    ) -> Self {
        Finding::new(Severity::Warning, id, path, message, fix)
    }
}

/// `error spec.minReplicaCount: … (keda.min-above-max; fix: …)`.
impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let sev = match self.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        let path = if self.path.is_empty() {
            "(object)"
        } else {
            &self.path
        };
        write!(
            f,
            "{sev} {path}: {} ({}; fix: {})",
            self.message, self.id, self.fix
        )
    }
}

/// KEDA's webhook and CEL rules and the HPA API's validation of `behavior`, for a ScaledObject.
// Long: one rule of KEDA's webhook, its CRD's CEL or the HPA API's behavior validation after
// another, each a few lines, in the order their sources list them.
pub fn keda_rules(so: &Value, out: &mut Vec<Finding>) {
    let spec = &so["spec"];
    let triggers = spec["triggers"].as_array().cloned().unwrap_or_default();
    if triggers.is_empty() {
        out.push(Finding::error(
            "keda.no-triggers",
            "spec.triggers",
            "at least one trigger is required",
            "add a trigger",
        ));
    }
    let min = spec["minReplicaCount"].as_i64().unwrap_or(0);
    let max = spec["maxReplicaCount"].as_i64().unwrap_or(100);
    if min > max {
        out.push(Finding::error(
            "keda.min-above-max",
            "spec.minReplicaCount",
            format!(
                "minReplicaCount ({min}) must be less than or equal to maxReplicaCount ({max})"
            ),
            "lower minReplicaCount or raise maxReplicaCount",
        ));
    }
    if let Some(idle) = spec["idleReplicaCount"].as_i64()
        && idle >= min
    {
        out.push(Finding::error(
            "keda.idle-not-below-min",
            "spec.idleReplicaCount",
            format!("idleReplicaCount ({idle}) must be less than minReplicaCount ({min})"),
            "set idleReplicaCount below minReplicaCount, or remove it",
        ));
    }
    let mut names = Vec::new();
    for (i, t) in triggers.iter().enumerate() {
        let p = format!("spec.triggers[{i}]");
        let ty = t["type"].as_str().unwrap_or("");
        if let Some(n) = t["name"].as_str() {
            if names.contains(&n) {
                out.push(Finding::error(
                    "keda.duplicate-trigger-name",
                    format!("{p}.name"),
                    format!("{n:?} is used by two triggers"),
                    "give each trigger its own name",
                ));
            }
            names.push(n);
        }
        let mt = t["metricType"].as_str().unwrap_or("AverageValue");
        if !["AverageValue", "Value", "Utilization"].contains(&mt) {
            out.push(Finding::error(
                "keda.metric-type",
                format!("{p}.metricType"),
                format!("{mt:?} is not AverageValue, Value or Utilization"),
                "use AverageValue or Value",
            ));
        }
        if mt == "Utilization" && !["cpu", "memory"].contains(&ty) {
            out.push(Finding::error(
                "keda.utilization-type",
                format!("{p}.metricType"),
                "Utilization is only for cpu and memory triggers",
                "use AverageValue or Value",
            ));
        }
        if t["useCachedMetrics"] == Value::Bool(true) && ["cpu", "memory", "cron"].contains(&ty) {
            out.push(Finding::error(
                "keda.cached-metrics",
                format!("{p}.useCachedMetrics"),
                format!("not allowed for {ty} triggers"),
                "remove useCachedMetrics",
            ));
        }
        if ty == "external" || ty == "external-push" {
            let addr = t["metadata"]["scalerAddress"].as_str().unwrap_or("");
            let port_ok = addr
                .rsplit_once(':')
                .is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok_and(|p| p > 0));
            if !port_ok {
                out.push(Finding::error(
                    "keda.external-address",
                    format!("{p}.metadata.scalerAddress"),
                    format!("{addr:?} is not host:port"),
                    "set scalerAddress to the scaler's Service and gRPC port, e.g. inferscale-scaler.llm.svc:6000",
                ));
            }
        }
        if ty == "prometheus" {
            let md = &t["metadata"];
            for key in ["serverAddress", "query", "threshold"] {
                if md[key].as_str().is_none_or(str::is_empty) {
                    out.push(Finding::error(
                        "keda.prometheus-required",
                        format!("{p}.metadata.{key}"),
                        "required by the prometheus scaler",
                        format!("set metadata.{key}"),
                    ));
                }
            }
            for key in ["threshold", "activationThreshold"] {
                if let Some(v) = md[key].as_str()
                    && v.trim().parse::<f64>().is_err()
                {
                    out.push(Finding::error(
                        "keda.not-a-number",
                        format!("{p}.metadata.{key}"),
                        format!("{v:?} is not a number"),
                        "write the number as a quoted string, e.g. \"25\"",
                    ));
                }
            }
            if let Some(v) = md["ignoreNullValues"].as_str()
                && !["true", "false"].contains(&v)
            {
                out.push(Finding::error(
                    "keda.not-a-bool",
                    format!("{p}.metadata.ignoreNullValues"),
                    format!("{v:?} is not \"true\" or \"false\""),
                    "write \"true\" or \"false\"",
                ));
            }
        }
    }
    if let Some(fb) = spec.get("fallback") {
        for key in ["failureThreshold", "replicas"] {
            match fb[key].as_i64() {
                Some(v) if v >= 0 => {}
                _ => out.push(Finding::error(
                    "keda.fallback-field",
                    format!("spec.fallback.{key}"),
                    "required, a non-negative integer",
                    format!("set fallback.{key}"),
                )),
            }
        }
        if triggers
            .iter()
            .all(|t| ["cpu", "memory"].contains(&t["type"].as_str().unwrap_or("")))
        {
            out.push(Finding::error(
                "keda.fallback-cpu-memory",
                "spec.fallback",
                "not supported when every trigger is cpu or memory",
                "remove the fallback, or add a metric trigger",
            ));
        }
    }
    let modifiers = &spec["advanced"]["scalingModifiers"];
    if modifiers.is_object() {
        if modifiers["formula"].is_string() != modifiers["target"].is_string() {
            out.push(Finding::error(
                "keda.modifiers-formula-target",
                "spec.advanced.scalingModifiers",
                "formula and target go together",
                "set both formula and target, or neither",
            ));
        }
        if triggers.iter().any(|t| t["name"].as_str().is_none()) {
            out.push(Finding::error(
                "keda.modifiers-names",
                "spec.advanced.scalingModifiers",
                "every trigger needs a name",
                "name every trigger the formula uses",
            ));
        }
    }
    let behavior = &spec["advanced"]["horizontalPodAutoscalerConfig"]["behavior"];
    for dir in ["scaleUp", "scaleDown"] {
        let r = &behavior[dir];
        if !r.is_object() {
            continue;
        }
        let p = format!("spec.advanced.horizontalPodAutoscalerConfig.behavior.{dir}");
        if let Some(w) = r["stabilizationWindowSeconds"].as_i64()
            && !(0..=3600).contains(&w)
        {
            out.push(Finding::error(
                "hpa.stabilization-window",
                format!("{p}.stabilizationWindowSeconds"),
                format!("{w} is outside 0..=3600"),
                "use a window of at most an hour",
            ));
        }
        if let Some(sp) = r["selectPolicy"].as_str()
            && !["Max", "Min", "Disabled"].contains(&sp)
        {
            out.push(Finding::error(
                "hpa.select-policy",
                format!("{p}.selectPolicy"),
                format!("{sp:?} is not Max, Min or Disabled"),
                "use Max, Min or Disabled",
            ));
        }
        let policies = r["policies"].as_array().cloned().unwrap_or_default();
        if r.get("policies").is_some() && policies.is_empty() {
            out.push(Finding::error(
                "hpa.no-policies",
                format!("{p}.policies"),
                "at least one policy",
                "add a policy or remove the list",
            ));
        }
        for (i, pol) in policies.iter().enumerate() {
            let pp = format!("{p}.policies[{i}]");
            if !["Pods", "Percent"].contains(&pol["type"].as_str().unwrap_or("")) {
                out.push(Finding::error(
                    "hpa.policy-type",
                    format!("{pp}.type"),
                    "must be Pods or Percent",
                    "use Pods or Percent",
                ));
            }
            if pol["value"].as_i64().is_none_or(|v| v <= 0) {
                out.push(Finding::error(
                    "hpa.policy-value",
                    format!("{pp}.value"),
                    "must be greater than 0",
                    "use a positive value",
                ));
            }
            if pol["periodSeconds"]
                .as_i64()
                .is_none_or(|v| !(1..=1800).contains(&v))
            {
                out.push(Finding::error(
                    "hpa.policy-period",
                    format!("{pp}.periodSeconds"),
                    "must be in 1..=1800",
                    "use a period of at most 30 minutes",
                ));
            }
        }
    }
}

/// Verbs Kubernetes' authorizer knows (`*` is all of them).
const RBAC_VERBS: [&str; 13] = [
    "get",
    "list",
    "watch",
    "create",
    "update",
    "patch",
    "delete",
    "deletecollection",
    "use",
    "bind",
    "escalate",
    "impersonate",
    "*",
];

/// Kubernetes' own kinds, read into the typed objects (fields and types as the published
/// schema has them); RBAC rules checked for verbs that do not exist.
fn kubernetes_types(api: &str, kind: &str, doc: &Value, out: &mut Vec<Finding>) {
    use crate::objects::{Deployment, Job, Role, RoleBinding, Service, ServiceAccount};
    fn read<T: serde::de::DeserializeOwned>(
        doc: &Value,
        kind: &str,
        out: &mut Vec<Finding>,
    ) -> Option<T> {
        match serde_path_to_error::deserialize::<_, T>(doc.clone()) {
            Ok(v) => Some(v),
            Err(e) => {
                out.push(Finding::error(
                    "k8s.schema",
                    e.path()
                        .to_string()
                        .trim_start_matches('.')
                        .replace(".?", ""),
                    e.inner().to_string(),
                    format!("make it match the {kind} schema"),
                ));
                None
            }
        }
    }
    match (api, kind) {
        ("v1", "ServiceAccount") => drop(read::<ServiceAccount>(doc, kind, out)),
        ("v1", "Service") => drop(read::<Service>(doc, kind, out)),
        ("apps/v1", "Deployment") => drop(read::<Deployment>(doc, kind, out)),
        ("batch/v1", "Job") => drop(read::<Job>(doc, kind, out)),
        ("rbac.authorization.k8s.io/v1", "RoleBinding") => {
            drop(read::<RoleBinding>(doc, kind, out))
        }
        ("rbac.authorization.k8s.io/v1", "Role") => {
            let Some(role) = read::<Role>(doc, kind, out) else {
                return;
            };
            for (i, r) in role.rules.iter().enumerate() {
                for v in &r.verbs {
                    if !RBAC_VERBS.contains(&v.as_str()) {
                        out.push(Finding::error(
                            "rbac.verb",
                            format!("rules[{i}].verbs"),
                            format!("{v:?} is not a Kubernetes verb"),
                            format!("use {}", RBAC_VERBS.join(", ")),
                        ));
                    }
                }
                if r.verbs.is_empty() {
                    out.push(Finding::error(
                        "rbac.verb",
                        format!("rules[{i}].verbs"),
                        "empty: the rule allows nothing",
                        "name the verbs, or remove the rule",
                    ));
                }
            }
        }
        _ => {}
    }
}

/// Every problem with one Kubernetes object: schema (a CRD's, or for Kubernetes' own kinds
/// the typed objects), names, KEDA's rules for ScaledObjects, RBAC verbs, and the CRDs' CEL
/// rules for Karpenter's NodePools and EC2NodeClasses. All are errors: the cluster would
/// refuse the object.
pub fn object(doc: &Value) -> Vec<Finding> {
    let mut out = Vec::new();
    let api = doc["apiVersion"].as_str().unwrap_or("");
    let kind = doc["kind"].as_str().unwrap_or("");
    if api.is_empty() || kind.is_empty() {
        out.push(Finding::error(
            "k8s.type",
            "",
            "apiVersion and kind are required",
            "set apiVersion and kind",
        ));
        return out;
    }
    match doc["metadata"]["name"].as_str() {
        Some(n) => {
            if let Err(e) = rfc1123_subdomain(n) {
                out.push(Finding::error(
                    "k8s.name",
                    "metadata.name",
                    e.to_string(),
                    "use lowercase letters, digits, '-' and '.'",
                ));
            }
        }
        None => out.push(Finding::error(
            "k8s.name",
            "metadata.name",
            "required",
            "set metadata.name",
        )),
    }
    if let Some(ns) = doc["metadata"]["namespace"].as_str()
        && let Err(e) = rfc1123_label(ns)
    {
        out.push(Finding::error(
            "k8s.namespace",
            "metadata.namespace",
            e.to_string(),
            "use lowercase letters, digits and '-'",
        ));
    }
    if let Some(s) = schema_for(api, kind) {
        let mut errors = Vec::new();
        schema(s, doc, "", &mut errors);
        for e in errors {
            // The schema validator's messages start with the field's path.
            let (path, message) = e.split_once(": ").unwrap_or(("", e.as_str()));
            let path = path.trim_start_matches('.').to_owned();
            out.push(Finding::error(
                "schema",
                path,
                message.to_owned(),
                if api == "batch/v1" {
                    format!("make it match Kubernetes' {api} {kind} schema")
                } else {
                    format!("make it match the {kind} CRD's schema")
                },
            ));
        }
    }
    if kind == "ScaledObject" {
        keda_rules(doc, &mut out);
    }
    kubernetes_types(api, kind, doc, &mut out);
    if matches!(
        (api, kind),
        ("karpenter.sh/v1", "NodePool") | ("karpenter.k8s.aws/v1", "EC2NodeClass")
    ) {
        karpenter_rules(doc, &mut out);
    }
    out
}

/// Pitfalls in a ScaledObject that are valid but wrong (all warnings).
pub fn lint(so: &Value) -> Vec<Finding> {
    let mut out = Vec::new();
    let deprecated: Vec<&str> = Signal::ALL
        .iter()
        .flat_map(|s| inferscale_catalog::names_of(Engine::Vllm, *s))
        .filter(|n| n.status == NameStatus::Deprecated)
        .map(|n| n.name)
        .collect();
    for (i, t) in so["spec"]["triggers"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        if t["type"] != "prometheus" {
            continue;
        }
        let q = t["metadata"]["query"].as_str().unwrap_or("");
        let mt = t["metricType"].as_str().unwrap_or("AverageValue");
        let p = format!("spec.triggers[{i}]");
        if q.contains("histogram_quantile") && mt == "AverageValue" {
            out.push(Finding::warning("lint.quantile-average-value", format!("{p}.metricType"), "a latency quantile with metricType AverageValue: the HPA divides it by the replica count, so this trigger can never ask for more than ceil(p95 / threshold) replicas", "use metricType: Value for a latency guardrail"));
        }
        if q.contains("histogram_quantile") && q.contains("or vector(0)") && !q.contains(" and ") {
            out.push(Finding::warning("lint.quantile-nan", format!("{p}.metadata.query"), "histogram_quantile over an idle server returns NaN, which `or vector(0)` does not replace (the vector is not empty)", "guard it with `and on() <request rate> > 0` before `or on() vector(0)`"));
        }
        if t["metadata"]["ignoreNullValues"].as_str() != Some("false") {
            out.push(Finding::warning("lint.ignore-null-values", format!("{p}.metadata.ignoreNullValues"), "ignoreNullValues defaults to true: an empty result (Prometheus down, series gone) reads as 0 and the fallback never fires", "set ignoreNullValues: \"false\" and add a fallback"));
        }
        let one = inferscale_promql::Query::parse(q).map_or_else(
            |_| q.trim_start().starts_with("sum") || q.contains("histogram_quantile"),
            |parsed| parsed.at_most_one_series(),
        );
        if !one {
            out.push(Finding::warning("lint.not-aggregated", format!("{p}.metadata.query"), "the query is not aggregated: KEDA fails as soon as it returns more than one series", "wrap it in sum(...)"));
        }
        for d in &deprecated {
            if q.contains(d) {
                out.push(Finding::warning(
                    "lint.removed-metric",
                    format!("{p}.metadata.query"),
                    format!(
                        "{d} was removed from vLLM; the query returns nothing on current releases"
                    ),
                    "use the current name (see docs/metrics.md)",
                ));
            }
        }
    }
    if so["spec"]["advanced"]["horizontalPodAutoscalerConfig"]["behavior"].is_null() {
        out.push(Finding::warning("lint.no-behavior", "spec.advanced.horizontalPodAutoscalerConfig.behavior", "no HPA behavior: the legacy path doubles replicas every sync and scales down after the controller's default 5-minute window", "set scaleUp and scaleDown explicitly"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_schema_validator_catches_what_kubectl_would() {
        let s = schema_for("keda.sh/v1alpha1", "ScaledObject").unwrap();
        let good = json!({
            "apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject",
            "metadata": {"name": "vllm"},
            "spec": {"scaleTargetRef": {"name": "vllm"}, "triggers": [{"type": "prometheus", "metadata": {"serverAddress": "http://p:9090", "query": "sum(x)", "threshold": "5"}}]}
        });
        let mut e = Vec::new();
        schema(s, &good, "", &mut e);
        assert!(e.is_empty(), "{e:?}");
        let mut bad = good.clone();
        bad["spec"]["minReplicaCount"] = json!("one");
        bad["spec"]["scaleTargetRef"]["nmae"] = json!("x");
        bad["spec"]["triggers"][0]
            .as_object_mut()
            .unwrap()
            .remove("type");
        let mut e = Vec::new();
        schema(s, &bad, "", &mut e);
        let all = e.join("\n");
        assert!(
            all.contains(".spec.minReplicaCount: expected integer"),
            "{all}"
        );
        assert!(
            all.contains(".spec.scaleTargetRef.nmae: unknown field"),
            "{all}"
        );
        assert!(all.contains("missing required field \"type\""), "{all}");
    }

    #[test]
    fn keda_and_hpa_rules() {
        let so = json!({"spec": {"minReplicaCount": 5, "maxReplicaCount": 2, "triggers": [
            {"type": "prometheus", "name": "a", "metadata": {"serverAddress": "x", "query": "q", "threshold": "five"}},
            {"type": "prometheus", "name": "a", "metricType": "Utilization", "metadata": {"serverAddress": "x", "query": "q", "threshold": "1"}}
        ], "advanced": {"horizontalPodAutoscalerConfig": {"behavior": {"scaleDown": {"stabilizationWindowSeconds": 4000, "policies": [{"type": "Pods", "value": 0, "periodSeconds": 2000}]}}}}}});
        let mut e = Vec::new();
        keda_rules(&so, &mut e);
        let all = e
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("\n");
        for needle in [
            "minReplicaCount (5)",
            "used by two triggers",
            "Utilization is only",
            "\"five\" is not a number",
            "outside 0..=3600",
            "greater than 0",
            "1..=1800",
        ] {
            assert!(all.contains(needle), "{needle}: {all}");
        }
    }

    #[test]
    fn names() {
        assert!(rfc1123_label("vllm-0").is_ok());
        assert!(rfc1123_label("Vllm").is_err());
        assert!(rfc1123_label("-a").is_err());
        assert!(rfc1123_label(&"a".repeat(64)).is_err());
        assert!(rfc1123_subdomain("keda-hpa.vllm").is_ok());
        assert!(rfc1123_subdomain("a..b").is_err());
    }
}
