//! KEDA, HPA, Prometheus-operator, Karpenter and Kubernetes workload objects as types that
//! read and write.
//!
//! A user's ScaledObject or PrometheusRule is loaded into these types (refused, when it does
//! not fit, with the field's path and the line and column), checked ([`crate::validate`]
//! returns structured [`Finding`](crate::validate::Finding)s), acted on, and written back. Fields
//! the types do not name are kept in `extra` and written back unchanged, so that loading and
//! writing a file loses nothing but its comments.

use std::collections::BTreeMap;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

mod access;
mod karpenter;
mod pod;

pub use access::{
    PolicyRule, Role, RoleBinding, RoleRef, Service, ServiceAccount, ServicePort, ServiceSpec,
    Subject,
};

pub use karpenter::{
    After, BlockDeviceMapping, Budget, DO_NOT_DISRUPT, Disruption, EC2NodeClass, EC2NodeClassSpec,
    Ebs, NodeClaimTemplate, NodeClaimTemplateSpec, NodeClassRef, NodePool, NodePoolSpec,
    Requirement, SelectorTerm, Taint,
};
pub use pod::{
    Container, Deployment, DeploymentPatch, DeploymentPatchSpec, DeploymentSpec, Job, JobSpec,
    JsonPatch, PatchOp, PatchOpKind, PodSpec, PodTemplateSpec, Probe, Quantity, Resources,
    TemplateMeta, Volume, VolumeMount, appended_args,
};

/// Fields a type does not name, kept as they were.
pub type Extra = BTreeMap<String, Value>;

/// `metadata` of any object.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectMeta {
    /// The name.
    pub name: String,
    /// The namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Labels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<BTreeMap<String, String>>,
    /// Annotations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<BTreeMap<String, String>>,
    /// Anything else.
    #[serde(flatten)]
    pub extra: Extra,
}

/// A KEDA `ScaledObject` (keda.sh/v1alpha1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScaledObject {
    /// `keda.sh/v1alpha1`.
    pub api_version: String,
    /// `ScaledObject`.
    pub kind: String,
    /// Name, namespace, labels.
    pub metadata: ObjectMeta,
    /// What scales, between which bounds, on which triggers.
    pub spec: ScaledObjectSpec,
}

/// `ScaledObject.spec`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScaledObjectSpec {
    /// The workload that scales.
    pub scale_target_ref: ScaleTargetRef,
    /// Seconds between trigger checks (KEDA's default 30).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub polling_interval: Option<i64>,
    /// Seconds after the last active trigger before scaling to zero (default 300).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cooldown_period: Option<i64>,
    /// Seconds after creation before the first scale to zero.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initial_cooldown_period: Option<i64>,
    /// Replicas while no trigger is active (below `minReplicaCount`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_replica_count: Option<i64>,
    /// The floor (default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_replica_count: Option<i64>,
    /// The ceiling (default 100).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_replica_count: Option<i64>,
    /// What to do when the triggers fail.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback: Option<Fallback>,
    /// The HPA's configuration and scaling modifiers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub advanced: Option<Advanced>,
    /// The triggers.
    pub triggers: Vec<Trigger>,
    /// Anything else.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `spec.scaleTargetRef`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScaleTargetRef {
    /// The workload's API version (default apps/v1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_version: Option<String>,
    /// Its kind (default Deployment).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Its name.
    pub name: String,
    /// Anything else.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `spec.fallback`: the replicas to hold after `failureThreshold` failed checks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Fallback {
    /// Consecutive failures before the fallback acts.
    pub failure_threshold: i64,
    /// The replicas it holds.
    pub replicas: i64,
    /// `static`, `currentReplicas`, `currentReplicasIfHigher`, `currentReplicasIfLower`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub behavior: Option<String>,
    /// Anything else.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `spec.advanced`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Advanced {
    /// Restore the workload's replica count when the ScaledObject is deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restore_to_original_replica_count: Option<bool>,
    /// The HPA KEDA creates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub horizontal_pod_autoscaler_config: Option<HpaConfig>,
    /// A formula over the triggers' metrics.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scaling_modifiers: Option<ScalingModifiers>,
    /// Anything else.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `spec.advanced.horizontalPodAutoscalerConfig`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HpaConfig {
    /// The HPA's name (default `keda-hpa-<name>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// autoscaling/v2 `behavior`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub behavior: Option<Behavior>,
    /// Anything else.
    #[serde(flatten)]
    pub extra: Extra,
}

/// An autoscaling/v2 `HorizontalPodAutoscalerBehavior`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Behavior {
    /// Scaling out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale_up: Option<ScalingRules>,
    /// Scaling in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale_down: Option<ScalingRules>,
    /// Anything else.
    #[serde(flatten)]
    pub extra: Extra,
}

/// An autoscaling/v2 `HPAScalingRules`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScalingRules {
    /// Seconds of recommendations the HPA looks back over (0..=3600).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stabilization_window_seconds: Option<i64>,
    /// `Max`, `Min` or `Disabled`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub select_policy: Option<String>,
    /// The rate limits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policies: Option<Vec<Policy>>,
    /// Anything else (`tolerance`, …).
    #[serde(flatten)]
    pub extra: Extra,
}

/// An autoscaling/v2 `HPAScalingPolicy`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Policy {
    /// `Pods` or `Percent`.
    #[serde(rename = "type")]
    pub kind: String,
    /// How many pods, or what percentage.
    pub value: i64,
    /// Per how many seconds (1..=1800).
    pub period_seconds: i64,
    /// Anything else.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `spec.advanced.scalingModifiers`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScalingModifiers {
    /// An expression over the triggers' names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub formula: Option<String>,
    /// The formula's target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// Its activation target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub activation_target: Option<String>,
    /// `AverageValue` or `Value`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metric_type: Option<String>,
    /// Anything else.
    #[serde(flatten)]
    pub extra: Extra,
}

/// One entry of `spec.triggers`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Trigger {
    /// The scaler (`prometheus`, `cpu`, `external`, …).
    #[serde(rename = "type")]
    pub kind: String,
    /// A name (needed by scaling modifiers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// `AverageValue` (default), `Value` or `Utilization`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metric_type: Option<String>,
    /// Serve the HPA the last value instead of asking the scaler each time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub use_cached_metrics: Option<bool>,
    /// The scaler's settings: strings, as the CRD requires.
    #[serde(default)]
    pub metadata: BTreeMap<String, String>,
    /// A TriggerAuthentication.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authentication_ref: Option<Value>,
    /// Anything else.
    #[serde(flatten)]
    pub extra: Extra,
}

impl Trigger {
    /// The PromQL of a `prometheus` trigger.
    pub fn query(&self) -> Option<&str> {
        (self.kind == "prometheus")
            .then(|| self.metadata.get("query").map(String::as_str))
            .flatten()
    }

    /// `metricType`, with KEDA's default.
    pub fn metric_type(&self) -> &str {
        self.metric_type.as_deref().unwrap_or("AverageValue")
    }
}

/// A Prometheus-operator `PrometheusRule` (monitoring.coreos.com/v1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PrometheusRule {
    /// `monitoring.coreos.com/v1`.
    pub api_version: String,
    /// `PrometheusRule`.
    pub kind: String,
    /// Name, namespace, labels (the operator's rule selector reads them).
    pub metadata: ObjectMeta,
    /// The groups.
    pub spec: RuleFile,
}

/// A Prometheus rule file (`groups:`), also a PrometheusRule's `spec`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RuleFile {
    /// The groups.
    pub groups: Vec<RuleGroup>,
    /// Anything else.
    #[serde(flatten)]
    pub extra: Extra,
}

/// One rule group.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RuleGroup {
    /// Its name.
    pub name: String,
    /// Its evaluation interval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<String>,
    /// Its rules.
    pub rules: Vec<Rule>,
    /// Anything else.
    #[serde(flatten)]
    pub extra: Extra,
}

/// A recording or alerting rule.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rule {
    /// A recording rule's series name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub record: Option<String>,
    /// An alert's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alert: Option<String>,
    /// The PromQL.
    pub expr: String,
    /// How long the condition must hold.
    #[serde(default, rename = "for", skip_serializing_if = "Option::is_none")]
    pub for_: Option<String>,
    /// How long an alert keeps firing after the condition clears.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep_firing_for: Option<String>,
    /// Labels added to the series or alert.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<BTreeMap<String, String>>,
    /// Annotations of an alert.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<BTreeMap<String, String>>,
    /// Anything else.
    #[serde(flatten)]
    pub extra: Extra,
}

/// A Prometheus-operator `ServiceMonitor` (monitoring.coreos.com/v1): which Services'
/// endpoints Prometheus scrapes, how often.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServiceMonitor {
    /// `monitoring.coreos.com/v1`.
    pub api_version: String,
    /// `ServiceMonitor`.
    pub kind: String,
    /// Name, namespace, labels (the operator's monitor selector reads them).
    pub metadata: ObjectMeta,
    /// What to scrape.
    pub spec: ServiceMonitorSpec,
}

/// `ServiceMonitor.spec`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServiceMonitorSpec {
    /// The Services, by label.
    pub selector: Value,
    /// In which namespaces (`matchNames`, or `any: true`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace_selector: Option<Value>,
    /// The ports to scrape.
    pub endpoints: Vec<Endpoint>,
    /// Anything else.
    #[serde(flatten)]
    pub extra: Extra,
}

/// One scraped port of a ServiceMonitor.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Endpoint {
    /// The Service port's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<String>,
    /// The HTTP path (default `/metrics`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// The scrape interval (`15s`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<String>,
    /// The scrape timeout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scrape_timeout: Option<String>,
    /// Anything else (relabelings, TLS, …).
    #[serde(flatten)]
    pub extra: Extra,
}

/// Why a file did not load into a type: where (the field's path, the line and column) and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}{}: {message}", if path.is_empty() { "(document)".to_owned() } else { path.clone() }, line.map_or(String::new(), |(l, c)| format!(" (line {l}, column {c})")))]
pub struct LoadError {
    /// The field's path (`spec.triggers[0].metadata.threshold`), empty for the document.
    pub path: String,
    /// Line and column (1-based), when known.
    pub line: Option<(u64, u64)>,
    /// What was wrong.
    pub message: String,
}

/// Loads YAML (one document) into `T`, refusing with the field path and position.
pub fn load<T: DeserializeOwned>(text: &str) -> Result<T, LoadError> {
    // The typed read gives the position; a read through a generic value gives the path.
    match crate::yaml::from_str::<T>(text) {
        Ok(v) => Ok(v),
        Err(e) => {
            let line = e.location().map(|l| (l.line(), l.column()));
            let generic: Result<Value, _> = crate::yaml::from_str(text);
            let (path, message) = match generic {
                Ok(v) => match serde_path_to_error::deserialize::<_, T>(v) {
                    Err(pe) => (clean_path(&pe.path().to_string()), pe.inner().to_string()),
                    Ok(_) => (String::new(), first_line(&e.to_string())),
                },
                Err(_) => (String::new(), first_line(&e.to_string())),
            };
            Err(LoadError {
                path,
                line,
                message,
            })
        }
    }
}

fn first_line(s: &str) -> String {
    s.lines().next().unwrap_or(s).to_owned()
}

/// serde_path_to_error writes `.` for the root and `?` for a flattened level.
fn clean_path(p: &str) -> String {
    let p = p.replace(".?", "");
    if p == "." { String::new() } else { p }
}

/// Writes an object as YAML (fields in the types' order, unknown ones after).
pub fn to_yaml<T: Serialize>(v: &T) -> String {
    let json = serde_json::to_value(v).unwrap_or(Value::Null);
    crate::yaml::document("", &crate::yaml::Y::from_json(&json))
}

/// The same object read from a file and written back, as data (comments and order aside).
pub fn same_data(a: &str, b: &str) -> bool {
    let a: Result<Value, _> = crate::yaml::from_str(a);
    let b: Result<Value, _> = crate::yaml::from_str(b);
    matches!((a, b), (Ok(a), Ok(b)) if a == b)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SO: &str = "apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata:
  name: vllm
spec:
  scaleTargetRef:
    name: vllm
  maxReplicaCount: 5
  triggers:
    - type: prometheus
      metadata:
        query: sum(x)
        threshold: \"25\"
";

    #[test]
    fn a_scaled_object_round_trips() {
        let so: ScaledObject = load(SO).unwrap();
        assert_eq!(so.spec.triggers[0].query(), Some("sum(x)"));
        assert_eq!(so.spec.max_replica_count, Some(5));
        let back = to_yaml(&so);
        assert!(same_data(SO, &back), "{back}");
    }

    #[test]
    fn a_wrong_field_is_named_with_its_line() {
        let bad = SO.replace("maxReplicaCount: 5", "maxReplicaCount: five");
        let e = load::<ScaledObject>(&bad).unwrap_err();
        assert_eq!(e.path, "spec.maxReplicaCount", "{e}");
        assert_eq!(e.line.map(|l| l.0), Some(8), "{e}");
        let missing = SO.replace("    name: vllm\n", "    kind: Deployment\n");
        let e = load::<ScaledObject>(&missing).unwrap_err();
        assert_eq!(e.path, "spec.scaleTargetRef", "{e}");
        assert!(e.message.contains("missing field `name`"), "{e}");
    }

    #[test]
    fn unknown_fields_are_kept() {
        let with = SO.replace(
            "  maxReplicaCount: 5\n",
            "  maxReplicaCount: 5\n  futureField: {a: 1}\n",
        );
        let so: ScaledObject = load(&with).unwrap();
        assert!(so.spec.extra.contains_key("futureField"));
        assert!(same_data(&with, &to_yaml(&so)));
    }
}
