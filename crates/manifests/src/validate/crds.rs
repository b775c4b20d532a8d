//! The CRD schemas the validator carries (`schemas/`, extracted from each CRD's OpenAPI v3
//! schema and embedded in the binary, so that checking needs no files): KEDA 2.20.2's
//! ScaledObject, prometheus-operator 0.93.0's PrometheusRule and ServiceMonitor, Karpenter
//! v1.14's NodePool and the AWS provider's EC2NodeClass.

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
        ]
        .into_iter()
        .filter_map(|(a, k, text)| Some((a, k, serde_json::from_str(text).ok()?)))
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
        ] {
            let s = schema_for(api, kind).unwrap_or_else(|| panic!("{kind} schema"));
            walk(s, &mut patterns);
        }
        assert!(patterns.len() > 20, "{}", patterns.len());
        for p in &patterns {
            assert!(crate::validate::regex(p).is_some(), "{p}");
        }
    }
}
