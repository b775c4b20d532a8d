//! The typed objects: the seeds' ScaledObject and every generated ScaledObject, PrometheusRule
//! and rule file load into them and write back as the same data; malformed files are refused
//! with the field's path and the line.

#![allow(clippy::unwrap_used)]

use std::path::Path;

use inferscale_manifests::objects::{
    Deployment, DeploymentPatch, Job, JsonPatch, LoadError, PatchOpKind, PrometheusRule, RuleFile,
    ScaledObject, ServiceMonitor, appended_args, load, same_data, to_yaml,
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
    let o = inferscale_manifests::Options::example();
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

#[test]
fn the_generated_deployment_patches_and_warm_up_job_round_trip() {
    let files = generated();
    let text = |p: &str| &files.iter().find(|f| f.path == p).unwrap().contents;
    let patch: DeploymentPatch = round_trips(
        "vllm-deployment-patch.yaml",
        text("vllm-deployment-patch.yaml"),
    );
    let pod = patch.spec.template.spec.unwrap();
    let sidecar = &pod.init_containers[0];
    assert_eq!(sidecar.restart_policy.as_deref(), Some("Always"));
    assert_eq!(sidecar.flag("--requests"), Some("100"));
    assert_eq!(pod.containers[0].name, "vllm");
    assert!(pod.containers[0].readiness_probe.is_some());
    assert!(pod.termination_grace_period_seconds.unwrap() > 0);

    let args: JsonPatch = round_trips("vllm-args-patch.yaml", text("vllm-args-patch.yaml"));
    assert!(args.iter().all(|o| o.op == PatchOpKind::Add));
    let appended = appended_args(&args, 0);
    assert!(
        appended.iter().any(|a| a.starts_with("--max-model-len=")),
        "{appended:?}"
    );

    let job: Job = round_trips("warmup-job.yaml", text("warmup-job.yaml"));
    assert_eq!(
        (job.api_version.as_str(), job.kind.as_str()),
        ("batch/v1", "Job")
    );
    let pod = job.spec.template.spec.unwrap();
    assert_eq!(pod.restart_policy.as_deref(), Some("Never"));
    let c = &pod.containers[0];
    assert_eq!(c.args.as_deref().unwrap()[0], "warmup");
    assert_eq!(c.flag("--url"), Some("http://vllm.llm.svc:8000"));
}

#[test]
fn the_seeds_deployment_and_warm_up_job_round_trip() {
    let seeds = testdata("aws-eks/vllm-deployment-service.yaml");
    let first = seeds.split("\n---\n").next().unwrap();
    let d: Deployment = round_trips("seeds: vllm-deployment-service.yaml", first);
    let c = &d.spec.template.spec.unwrap().containers[0];
    assert_eq!(c.flag("--max-num-seqs"), Some("128"));
    assert_eq!(c.flag("--gpu-memory-utilization"), Some("0.9"));
    let job: Job = round_trips(
        "seeds: k6-warmup-job.yaml",
        &testdata("aws-eks/k6-warmup-job.yaml"),
    );
    assert_eq!(job.spec.backoff_limit, Some(0));
    let c = &job.spec.template.spec.unwrap().containers[0];
    assert_eq!(c.flag("--iterations"), Some("100"));
}

#[test]
fn a_malformed_job_is_refused_with_the_path_and_the_line() {
    let seeds = testdata("aws-eks/k6-warmup-job.yaml");
    let e = load::<Job>(&seeds.replace("backoffLimit: 0", "backoffLimit: none")).unwrap_err();
    assert_eq!(e.path, "spec.backoffLimit", "{e}");
    assert_eq!(e.line.map(|l| l.0), Some(7), "{e}");
    let e = load::<Job>(&seeds.replace("        - name: k6\n", "        - nam: k6\n")).unwrap_err();
    assert_eq!(e.path, "spec.template.spec.containers[0]", "{e}");
    assert!(e.message.contains("missing field `name`"), "{e}");
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
