//! The generated files for the default run: snapshots, every object valid against the real
//! CRD schemas and KEDA's/HPA's rules, the seeds' own ScaledObject through the same validator,
//! and bad inputs refused.

#![allow(clippy::unwrap_used)]

use std::path::Path;

use inferscale_analysis::Thresholds;
use inferscale_manifests::validate::{lint, object};
use inferscale_manifests::{Options, generate};

fn testdata(rel: &str) -> String {
    std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../testdata")
            .join(rel),
    )
    .unwrap()
}

/// thresholds.json of the default `inferscale run` (the seeds' deployment, simulated).
fn thresholds() -> Thresholds {
    serde_json::from_str(&testdata("runs/thresholds-default.json")).unwrap()
}

fn options() -> Options {
    Options::example()
}

fn joined(findings: &[inferscale_manifests::validate::Finding]) -> String {
    findings
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("\n")
}

fn yaml(text: &str) -> serde_json::Value {
    inferscale_manifests::yaml::from_str(text).unwrap()
}

#[test]
fn the_default_run_s_files_match_their_snapshots() {
    let files = generate(&thresholds(), &options()).unwrap();
    let names: Vec<&str> = files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(
        names,
        [
            "scaledobject.yaml",
            "prometheusrule.yaml",
            "prometheus-rules.yaml",
            "prometheusrule.test.yaml",
            "servicemonitor.yaml",
            "dcgm-servicemonitor.yaml",
            "vllm-deployment-patch.yaml",
            "vllm-args-patch.yaml",
            "warmup-job.yaml",
            "grafana/1-service-slis.json",
            "grafana/2-engine.json",
            "grafana/3-gpu-dcgm.json",
            "README.md",
        ]
    );
    for f in &files {
        insta::assert_snapshot!(f.path.replace('/', "__"), f.contents);
    }
}

#[test]
fn every_object_validates_against_the_crds_and_keda_s_rules() {
    let files = generate(&thresholds(), &options()).unwrap();
    let mut kinds = Vec::new();
    for f in files.iter().filter(|f| f.path.ends_with(".yaml")) {
        let doc = yaml(&f.contents);
        if let Some(kind) = doc["kind"].as_str() {
            assert_eq!(object(&doc), Vec::new(), "{}", f.path);
            kinds.push(kind.to_owned());
        }
    }
    kinds.sort();
    assert_eq!(
        kinds,
        [
            "Job",
            "PrometheusRule",
            "ScaledObject",
            "ServiceMonitor",
            "ServiceMonitor"
        ]
    );
    // And none of the seeds' pitfalls.
    let so = yaml(&files[0].contents);
    assert_eq!(lint(&so), Vec::new());
    assert_eq!(so["spec"]["triggers"][0]["metadata"]["threshold"], "27");
    assert_eq!(so["spec"]["triggers"][1]["metricType"], "Value");
    assert_eq!(
        so["spec"]["triggers"][0]["metadata"]["ignoreNullValues"],
        "false"
    );
    assert_eq!(
        so["spec"]["fallback"]["behavior"],
        "currentReplicasIfHigher"
    );
    let down = &so["spec"]["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]["scaleDown"];
    assert!(down["stabilizationWindowSeconds"].as_i64().unwrap() >= 300);
}

/// The validator is not just agreeing with ourselves: the seeds' own ScaledObject (from the
/// EKS guide) is valid KEDA, and the linter names its pitfalls.
#[test]
fn the_seeds_scaledobject_passes_the_validator_and_the_linter_names_its_pitfalls() {
    let seeds = yaml(&testdata("aws-eks/keda-scaledobject.yaml"));
    assert_eq!(object(&seeds), Vec::new());
    let pitfalls = joined(&lint(&seeds));
    assert!(
        pitfalls.contains("divides it by the replica count"),
        "{pitfalls}"
    );
    assert!(pitfalls.contains("returns NaN"), "{pitfalls}");
    assert!(
        pitfalls.contains("ignoreNullValues defaults to true"),
        "{pitfalls}"
    );
    let sm = yaml(&testdata("aws-eks/vllm-servicemonitor.yaml"));
    assert_eq!(object(&sm), Vec::new());
    // A typo in the seeds' file would be caught.
    let mut broken = seeds.clone();
    broken["spec"]["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]["scaleUp"]["policies"]
        [0]["type"] = "pods".into();
    broken["spec"]["maxReplicaCount"] = serde_json::json!(0);
    let problems = joined(&object(&broken));
    assert!(problems.contains("must be Pods or Percent"), "{problems}");
    assert!(problems.contains("maxReplicaCount"), "{problems}");
}

#[test]
fn bad_names_and_settings_are_refused_with_the_flag() {
    let t = thresholds();
    for (change, flag) in [
        (
            Box::new(|o: &mut Options| o.namespace = "LLM".into()) as Box<dyn Fn(&mut Options)>,
            "--namespace",
        ),
        (
            Box::new(|o: &mut Options| o.deployment = "vllm_app".into()),
            "--deployment",
        ),
        (
            Box::new(|o: &mut Options| o.service = "-svc".into()),
            "--service",
        ),
        (
            Box::new(|o: &mut Options| o.max_replicas = 0),
            "--max-replicas",
        ),
        (
            Box::new(|o: &mut Options| o.min_replicas = 0),
            "--min-replicas",
        ),
        (
            Box::new(|o: &mut Options| o.slo_p95_e2e_s = 0.1),
            "--slo-p95-e2e",
        ),
        (
            Box::new(|o: &mut Options| o.prometheus_url = "prometheus:9090".into()),
            "--prometheus-url",
        ),
    ] {
        let mut o = options();
        change(&mut o);
        let e = generate(&t, &o).unwrap_err();
        assert!(e.to_string().contains(flag), "{flag}: {e}");
    }
}
