//! The typed objects: the seeds' ScaledObject and every generated ScaledObject, PrometheusRule
//! and rule file load into them and write back as the same data; malformed files are refused
//! with the field's path and the line.

#![allow(clippy::unwrap_used)]

use std::path::Path;

use inferscale_manifests::objects::{
    LoadError, PrometheusRule, RuleFile, ScaledObject, ServiceMonitor, load, same_data, to_yaml,
};

fn testdata(rel: &str) -> String {
    std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../testdata")
            .join(rel),
    )
    .unwrap()
}

fn generated() -> Vec<inferscale_manifests::File> {
    let t: inferscale_analysis::Thresholds =
        serde_json::from_str(&testdata("runs/thresholds-default.json")).unwrap();
    let o = inferscale_manifests::Options {
        namespace: "llm".into(),
        deployment: "vllm".into(),
        container: "vllm".into(),
        container_index: 0,
        service: "vllm".into(),
        service_port: ("http".into(), 8000),
        model_name: "mistralai/Ministral-3-8B-Instruct-2512".into(),
        prometheus_url: "http://kube-prometheus-stack-prometheus.monitoring.svc:9090".into(),
        prometheus_release: "kube-prometheus-stack".into(),
        min_replicas: 1,
        max_replicas: 5,
        slo_p95_e2e_s: 5.0,
        cold_start_s: 300,
        max_model_len: 0,
        inferscale_image: "ghcr.io/inferscale/inferscale:0.1.0".into(),
        runbook_url: None,
    };
    inferscale_manifests::generate(&t, &o).unwrap()
}

fn round_trips<T: serde::de::DeserializeOwned + serde::Serialize>(name: &str, text: &str) -> T {
    let v: T = load(text).unwrap_or_else(|e| panic!("{name}: {e}"));
    let back = to_yaml(&v);
    assert!(
        same_data(text, &back),
        "{name} written back differs:\n{back}"
    );
    // And what was written loads again.
    let again: T = load(&back).unwrap();
    assert!(same_data(&back, &to_yaml(&again)));
    v
}

#[test]
fn the_seeds_scaled_object_round_trips() {
    let so: ScaledObject = round_trips("seeds", &testdata("aws-eks/keda-scaledobject.yaml"));
    assert_eq!(so.spec.triggers.len(), 2);
    assert_eq!(
        so.spec.triggers[0].query(),
        Some("sum(vllm:num_requests_waiting) or vector(0)")
    );
    let behavior = so
        .spec
        .advanced
        .and_then(|a| a.horizontal_pod_autoscaler_config)
        .and_then(|h| h.behavior)
        .unwrap();
    assert_eq!(
        behavior.scale_down.unwrap().stabilization_window_seconds,
        Some(300)
    );
}

#[test]
fn every_generated_object_round_trips() {
    let files = generated();
    let text = |p: &str| &files.iter().find(|f| f.path == p).unwrap().contents;
    let so: ScaledObject = round_trips("scaledobject.yaml", text("scaledobject.yaml"));
    assert!(so.spec.fallback.is_some());
    assert!(
        so.spec
            .triggers
            .iter()
            .all(|t| inferscale_promql::Query::parse(t.query().unwrap()).is_ok())
    );
    let pr: PrometheusRule = round_trips("prometheusrule.yaml", text("prometheusrule.yaml"));
    let rules: usize = pr.spec.groups.iter().map(|g| g.rules.len()).sum();
    assert!(rules >= 5, "{rules} rules");
    for r in pr.spec.groups.iter().flat_map(|g| &g.rules) {
        inferscale_promql::Query::parse(&r.expr).unwrap();
    }
    let file: RuleFile = round_trips("prometheus-rules.yaml", text("prometheus-rules.yaml"));
    assert_eq!(file.groups.len(), pr.spec.groups.len());
    for name in ["servicemonitor.yaml", "dcgm-servicemonitor.yaml"] {
        let sm: ServiceMonitor = round_trips(name, text(name));
        assert_eq!(
            sm.spec.endpoints[0].interval.as_deref(),
            Some("15s"),
            "{name}"
        );
    }
    let seeds_sm: ServiceMonitor = round_trips(
        "seeds: vllm-servicemonitor.yaml",
        &testdata("aws-eks/vllm-servicemonitor.yaml"),
    );
    assert!(!seeds_sm.spec.endpoints.is_empty());
}

fn refused(text: &str) -> LoadError {
    load::<ScaledObject>(text).unwrap_err()
}

#[test]
fn a_malformed_scaled_object_is_refused_with_the_path_and_the_line() {
    let seeds = testdata("aws-eks/keda-scaledobject.yaml");
    let line_of = |needle: &str| {
        seeds
            .lines()
            .position(|l| l.contains(needle))
            .map(|i| i as u64 + 1)
            .unwrap()
    };
    let e = refused(&seeds.replace("maxReplicaCount: 5", "maxReplicaCount: five"));
    assert_eq!(e.path, "spec.maxReplicaCount", "{e}");
    assert_eq!(e.line.map(|l| l.0), Some(line_of("maxReplicaCount")), "{e}");
    let e = refused(&seeds.replace("periodSeconds: 120", "periodSeconds: [120]"));
    assert_eq!(
        e.path,
        "spec.advanced.horizontalPodAutoscalerConfig.behavior.scaleDown.policies[0].periodSeconds",
        "{e}"
    );
    assert_eq!(
        e.line.map(|l| l.0),
        Some(line_of("periodSeconds: 120")),
        "{e}"
    );
    let e = refused(&seeds.replace("  triggers:", "  trigger:"));
    assert!(e.message.contains("missing field `triggers`"), "{e}");
    assert_eq!(e.path, "spec", "{e}");
    let e = refused("apiVersion: keda.sh/v1alpha1\nkind: ScaledObject\nmetadata: [\n");
    assert!(e.line.is_some(), "a syntax error has a position: {e}");
}
