//! The CRD schemas the validator carries (`schemas/`, extracted from each CRD's OpenAPI v3
//! schema and embedded in the binary, so that checking needs no files): KEDA 2.20.2's
//! ScaledObject, prometheus-operator 0.93.0's PrometheusRule and ServiceMonitor, Karpenter
//! v1.14's NodePool and the AWS provider's EC2NodeClass; and Kubernetes' own batch/v1 Job (v1.37.0's
//! OpenAPI spec, as the PyPI package kubernetes-validate 1.37.0 carries it in JSON-Schema form,
//! converted by `scripts/schemas/k8s-native.py`; its definitions sit in `$defs` and are inlined
//! on load).

use std::sync::OnceLock;

use serde_json::Value;

/// KEDA's ScaledObject (keda.sh/v1alpha1).
pub const SCALED_OBJECT_SCHEMA: &str =
    include_str!("../../schemas/ScaledObject.v1alpha1.openapi.json");
/// prometheus-operator's PrometheusRule (monitoring.coreos.com/v1).
pub const PROMETHEUS_RULE_SCHEMA: &str =
    include_str!("../../schemas/PrometheusRule.v1.openapi.json");
/// prometheus-operator's ServiceMonitor (monitoring.coreos.com/v1).
pub const SERVICE_MONITOR_SCHEMA: &str =
    include_str!("../../schemas/ServiceMonitor.v1.openapi.json");
/// Karpenter's NodePool (karpenter.sh/v1).
pub const NODE_POOL_SCHEMA: &str = include_str!("../../schemas/NodePool.v1.openapi.json");
/// Karpenter's AWS EC2NodeClass (karpenter.k8s.aws/v1).
pub const EC2_NODE_CLASS_SCHEMA: &str = include_str!("../../schemas/EC2NodeClass.v1.openapi.json");

/// Kubernetes' Job (batch/v1), strict: an unknown field is an error, as with
/// `kubectl apply --validate=strict`.
pub const JOB_SCHEMA: &str = include_str!("../../schemas/Job.batch.v1.openapi.json");

/// Replaces each `{"$ref": "#/$defs/NAME"}` by the definition it names. The native schemas
/// carry the definitions they reach in `$defs`, and none reaches itself; `depth` stops a
/// schema that did (its `$ref` is then left, and constrains nothing).
fn inline_refs(v: &Value, defs: &serde_json::Map<String, Value>, depth: u32) -> Value {
    match v {
        Value::Object(m) => {
            if let Some(name) = m
                .get("$ref")
                .and_then(Value::as_str)
                .and_then(|r| r.strip_prefix("#/$defs/"))
                && let Some(def) = defs.get(name)
                && depth < 64
            {
                return inline_refs(def, defs, depth + 1);
            }
            Value::Object(
                m.iter()
                    .map(|(k, x)| (k.clone(), inline_refs(x, defs, depth)))
                    .collect(),
            )
        }
        Value::Array(a) => Value::Array(a.iter().map(|x| inline_refs(x, defs, depth)).collect()),
        _ => v.clone(),
    }
}

/// Parses a carried schema, inlining its `$defs`.
fn load(text: &str) -> Option<Value> {
    let mut v: Value = serde_json::from_str(text).ok()?;
    match v.as_object_mut().and_then(|m| m.remove("$defs")) {
        Some(Value::Object(defs)) => Some(inline_refs(&v, &defs, 0)),
        _ => Some(v),
    }
}

/// The schema for an object's `apiVersion`/`kind`, if we carry one.
pub fn schema_for(api_version: &str, kind: &str) -> Option<&'static Value> {
    static CACHE: OnceLock<Vec<(&str, &str, Value)>> = OnceLock::new();
    let all = CACHE.get_or_init(|| {
        [
            ("keda.sh/v1alpha1", "ScaledObject", SCALED_OBJECT_SCHEMA),
            (
                "monitoring.coreos.com/v1",
                "PrometheusRule",
                PROMETHEUS_RULE_SCHEMA,
            ),
            (
                "monitoring.coreos.com/v1",
                "ServiceMonitor",
                SERVICE_MONITOR_SCHEMA,
            ),
            ("karpenter.sh/v1", "NodePool", NODE_POOL_SCHEMA),
            (
                "karpenter.k8s.aws/v1",
                "EC2NodeClass",
                EC2_NODE_CLASS_SCHEMA,
            ),
            ("batch/v1", "Job", JOB_SCHEMA),
        ]
        .into_iter()
        .filter_map(|(a, k, text)| Some((a, k, load(text)?)))
        .collect()
    });
    all.iter()
        .find(|(a, k, _)| *a == api_version && *k == kind)
        .map(|(_, _, v)| v)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every pattern of every schema carried compiles, so none is reported as not understood.
    #[test]
    fn every_schema_pattern_compiles() {
        fn walk(v: &Value, out: &mut Vec<String>) {
            match v {
                Value::Object(m) => {
                    for (k, x) in m {
                        match x {
                            Value::String(p) if k == "pattern" => out.push(p.clone()),
                            _ => walk(x, out),
                        }
                    }
                }
                Value::Array(a) => a.iter().for_each(|x| walk(x, out)),
                _ => {}
            }
        }
        let mut patterns = Vec::new();
        for (api, kind) in [
            ("keda.sh/v1alpha1", "ScaledObject"),
            ("monitoring.coreos.com/v1", "PrometheusRule"),
            ("monitoring.coreos.com/v1", "ServiceMonitor"),
            ("karpenter.sh/v1", "NodePool"),
            ("karpenter.k8s.aws/v1", "EC2NodeClass"),
            ("batch/v1", "Job"),
        ] {
            let s = schema_for(api, kind).unwrap_or_else(|| panic!("{kind} schema"));
            walk(s, &mut patterns);
        }
        assert!(patterns.len() > 20, "{}", patterns.len());
        for p in &patterns {
            assert!(crate::validate::regex(p).is_some(), "{p}");
        }
    }

    /// The Job schema's definitions are inlined: what the pod template reaches is checked,
    /// and a field Kubernetes does not have is refused there.
    #[test]
    fn the_job_schema_reaches_into_the_pod_template() {
        let s = schema_for("batch/v1", "Job").expect("Job schema");
        let text = s.to_string();
        assert!(!text.contains("$ref"), "a $ref was left");
        let job = serde_json::json!({
            "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "x"},
            "spec": {"completionMode": "Indexed", "completions": 4, "parallelism": 4,
                "template": {"spec": {"restartPolicy": "Never", "containers": [
                    {"name": "c", "image": "i", "resources": {"limits": {"cpu": 1, "memory": "1Gi"}},
                     "securityContext": {"readOnlyRootFilesystem": true, "runAsNonRoot": true}}]}}}
        });
        let mut errors = Vec::new();
        crate::validate::schema(s, &job, "", &mut errors);
        assert!(errors.is_empty(), "{errors:?}");
        let mut bad = job.clone();
        bad["spec"]["template"]["spec"]["containers"][0]["securityContext"]["readOnlyRootFs"] =
            true.into();
        bad["spec"]["completions"] = "four".into();
        let mut errors = Vec::new();
        crate::validate::schema(s, &bad, "", &mut errors);
        assert_eq!(errors.len(), 2, "{errors:?}");
        assert!(
            errors
                .iter()
                .any(|e| e.contains("readOnlyRootFs: unknown field")),
            "{errors:?}"
        );
        assert!(
            errors
                .iter()
                .any(|e| e.contains(".spec.completions: expected integer")),
            "{errors:?}"
        );
    }
}
