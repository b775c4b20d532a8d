//! Kubernetes' own workload objects, as far as inferscale writes and reads them: the warm-up
//! `Job` (batch/v1), the pod template inside it and inside a Deployment, and the two kinds of
//! patch the generator emits for the vLLM Deployment (a strategic-merge patch and an RFC 6902
//! JSON patch).
//!
//! Field names and types follow Kubernetes' published OpenAPI v3 schema
//! (`api/openapi-spec/v3/apis__batch__v1_openapi.json` and `api__v1_openapi.json` of
//! kubernetes/kubernetes, read at commit 0021731de5897e81f1d576a134db15c7c301eeff). Only the
//! fields inferscale sets or checks are named; every other field is kept in `extra` and written
//! back unchanged.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{Extra, ObjectMeta};

/// A `Job` (batch/v1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Job {
    /// `batch/v1`.
    pub api_version: String,
    /// `Job`.
    pub kind: String,
    /// Name, namespace, labels.
    pub metadata: ObjectMeta,
    /// How the Job runs.
    pub spec: JobSpec,
}

/// `Job.spec`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JobSpec {
    /// Retries before the Job is marked failed (Kubernetes' default 6).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backoff_limit: Option<i32>,
    /// Seconds the Job may run in all before it is stopped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_deadline_seconds: Option<i64>,
    /// Seconds a finished Job is kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_seconds_after_finished: Option<i32>,
    /// The pod it runs.
    pub template: PodTemplateSpec,
    /// Anything else (completions, parallelism, …).
    #[serde(flatten)]
    pub extra: Extra,
}

/// A pod template (`spec.template` of a Job or a Deployment).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodTemplateSpec {
    /// The pods' labels and annotations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<TemplateMeta>,
    /// The pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<PodSpec>,
    /// Anything else.
    #[serde(flatten)]
    pub extra: Extra,
}

/// A template's `metadata` (a name is not required there, unlike an object's).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct TemplateMeta {
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

/// `PodSpec`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodSpec {
    /// `Always`, `OnFailure` or `Never`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart_policy: Option<String>,
    /// Seconds between SIGTERM and SIGKILL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub termination_grace_period_seconds: Option<i64>,
    /// The pod's volumes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volumes: Vec<Volume>,
    /// Init containers; one with `restartPolicy: Always` is a native sidecar (1.29+).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub init_containers: Vec<Container>,
    /// The containers (a strategic-merge patch may name only some of them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub containers: Vec<Container>,
    /// Anything else (node selector, tolerations, …).
    #[serde(flatten)]
    pub extra: Extra,
}

/// A pod volume.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Volume {
    /// The name mounts refer to.
    pub name: String,
    /// The source (`emptyDir`, `configMap`, …), kept as it was.
    #[serde(flatten)]
    pub source: Extra,
}

/// A container.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Container {
    /// The name (a strategic-merge patch matches containers by it).
    pub name: String,
    /// The image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// The entrypoint, replacing the image's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<Vec<String>>,
    /// The arguments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args: Option<Vec<String>>,
    /// `Always` on an init container makes it a sidecar.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart_policy: Option<String>,
    /// CPU and memory requests and limits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<Resources>,
    /// Where volumes are mounted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volume_mounts: Vec<VolumeMount>,
    /// When the container counts as ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub readiness_probe: Option<Probe>,
    /// Anything else (env, ports, lifecycle, securityContext, …).
    #[serde(flatten)]
    pub extra: Extra,
}

/// `resources` of a container.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Resources {
    /// What the scheduler reserves.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests: Option<BTreeMap<String, Quantity>>,
    /// What the container may use at most.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<BTreeMap<String, Quantity>>,
    /// Anything else (claims).
    #[serde(flatten)]
    pub extra: Extra,
}

/// A Kubernetes quantity: `50m`, `32Mi`, or a bare number (`cpu: 1`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Quantity {
    /// Written as a number.
    Number(serde_json::Number),
    /// Written as a string, with or without a suffix.
    Text(String),
}

/// One mount of a volume into a container.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VolumeMount {
    /// The volume's name.
    pub name: String,
    /// Where in the container.
    pub mount_path: String,
    /// Mounted read-only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_only: Option<bool>,
    /// Anything else.
    #[serde(flatten)]
    pub extra: Extra,
}

/// A readiness (or liveness) probe.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Probe {
    /// Seconds between probes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub period_seconds: Option<i32>,
    /// Seconds one probe may take.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<i32>,
    /// Failures in a row before the container is not ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_threshold: Option<i32>,
    /// The handler (`exec`, `httpGet`, `tcpSocket`, `grpc`) and anything else.
    #[serde(flatten)]
    pub extra: Extra,
}

/// A strategic-merge patch of a Deployment (`kubectl patch deployment … --patch-file`): only
/// `spec.template` is patched by inferscale.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeploymentPatch {
    /// `spec` of the patch.
    pub spec: DeploymentPatchSpec,
    /// Anything else.
    #[serde(flatten)]
    pub extra: Extra,
}

/// `spec` of a Deployment patch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeploymentPatchSpec {
    /// The pod template, as merged into the Deployment's.
    pub template: PodTemplateSpec,
    /// Anything else (replicas, strategy, …).
    #[serde(flatten)]
    pub extra: Extra,
}

/// An RFC 6902 JSON patch (`kubectl patch … --type json`): operations applied in order.
pub type JsonPatch = Vec<PatchOp>;

/// One operation of a JSON patch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PatchOp {
    /// What it does.
    pub op: PatchOpKind,
    /// The JSON pointer it acts on (`/spec/template/spec/containers/0/args/-`).
    pub path: String,
    /// The value, for `add`, `replace` and `test`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<Value>,
    /// The source pointer, for `move` and `copy`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
}

/// The six operations of RFC 6902.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PatchOpKind {
    /// Insert (or append, with `-`).
    Add,
    /// Delete.
    Remove,
    /// Overwrite.
    Replace,
    /// Move from `from`.
    Move,
    /// Copy from `from`.
    Copy,
    /// Fail unless equal.
    Test,
}

impl Container {
    /// The value of a `--flag=value` or `--flag value` argument, the last one when repeated
    /// (as vLLM's argument parser keeps it).
    pub fn flag(&self, name: &str) -> Option<&str> {
        let args = self.args.as_deref().unwrap_or_default();
        let mut found = None;
        let mut it = args.iter().peekable();
        while let Some(a) = it.next() {
            if let Some(v) = a.strip_prefix(name).and_then(|r| r.strip_prefix('=')) {
                found = Some(v);
            } else if a == name {
                found = it.peek().map(|v| v.as_str());
            }
        }
        found
    }
}

/// The arguments a JSON patch appends to the container at `index`
/// (`add …/containers/<index>/args/-`), in order.
pub fn appended_args(patch: &JsonPatch, index: u32) -> Vec<&str> {
    let path = format!("/spec/template/spec/containers/{index}/args/-");
    patch
        .iter()
        .filter(|o| o.op == PatchOpKind::Add && o.path == path)
        .filter_map(|o| o.value.as_ref()?.as_str())
        .collect()
}

/// A `Deployment` (apps/v1): the vLLM workload the ScaledObject scales and the patches change.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Deployment {
    /// `apps/v1`.
    pub api_version: String,
    /// `Deployment`.
    pub kind: String,
    /// Name, namespace, labels.
    pub metadata: ObjectMeta,
    /// Replicas, selector, pod template.
    pub spec: DeploymentSpec,
}

/// `Deployment.spec`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeploymentSpec {
    /// Replicas wanted (an autoscaler owns this once a ScaledObject targets the Deployment).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    /// Which pods are the Deployment's.
    pub selector: Value,
    /// The pods.
    pub template: PodTemplateSpec,
    /// Anything else (strategy, …).
    #[serde(flatten)]
    pub extra: Extra,
}
