//! `generate --scaler external`: the scaler's Deployment, Service, ServiceAccount, Role and
//! RoleBinding, and a ScaledObject with one `external` trigger — snapshots, every object valid
//! (the ScaledObject against KEDA's CRD schema and rules, Kubernetes' kinds through the typed
//! objects), the objects consistent with one another, the Role able to do nothing but list
//! and watch EndpointSlices, and the trigger's metadata read by the scaler itself.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::path::Path;

use inferscale_analysis::Thresholds;
use inferscale_manifests::objects::{
    Deployment, Role, RoleBinding, ScaledObject, Service, ServiceAccount, load,
};
use inferscale_manifests::validate::object;
use inferscale_manifests::{Options, ScalerKind, generate, yaml_documents};

fn thresholds() -> Thresholds {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/runs/thresholds-default.json"),
    )
    .unwrap();
    serde_json::from_str(&text).unwrap()
}

fn external() -> Vec<inferscale_manifests::File> {
    let o = Options {
        scaler: ScalerKind::External,
        ..Options::example()
    };
    generate(&thresholds(), &o).unwrap()
}

fn file<'a>(files: &'a [inferscale_manifests::File], path: &str) -> &'a str {
    &files.iter().find(|f| f.path == path).unwrap().contents
}

#[test]
fn the_external_files_match_their_snapshots() {
    let files = external();
    insta::assert_snapshot!(
        "external-scaledobject.yaml",
        file(&files, "scaledobject.yaml")
    );
    insta::assert_snapshot!("scaler.yaml", file(&files, "scaler.yaml"));
    // The Prometheus path writes no scaler.
    let plain = generate(&thresholds(), &Options::example()).unwrap();
    assert!(plain.iter().all(|f| f.path != "scaler.yaml"));
}

#[test]
fn the_scaler_objects_are_valid_and_fit_together() {
    let files = external();
    let text = file(&files, "scaler.yaml");
    let docs = yaml_documents(text);
    let kinds: Vec<String> = docs
        .iter()
        .map(|d| {
            let v: serde_json::Value = inferscale_manifests::yaml::from_str(d).unwrap();
            let problems = object(&v);
            assert!(problems.is_empty(), "{problems:?}");
            v["kind"].as_str().unwrap().to_owned()
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "ServiceAccount",
            "Role",
            "RoleBinding",
            "Service",
            "Deployment"
        ]
    );
    let sa: ServiceAccount = load(docs[0]).unwrap();
    let role: Role = load(docs[1]).unwrap();
    let binding: RoleBinding = load(docs[2]).unwrap();
    let svc: Service = load(docs[3]).unwrap();
    let dep: Deployment = load(docs[4]).unwrap();

    // The Role: list and watch EndpointSlices, nothing else, in the vLLM namespace.
    assert_eq!(role.metadata.namespace.as_deref(), Some("llm"));
    assert_eq!(role.rules.len(), 1);
    let r = &role.rules[0];
    assert_eq!(r.api_groups, ["discovery.k8s.io"]);
    assert_eq!(r.resources, ["endpointslices"]);
    assert_eq!(r.verbs, ["list", "watch"]);
    assert!(r.resource_names.is_empty() && r.non_resource_urls.is_empty());

    // The binding grants that Role to that ServiceAccount, which the pods run as.
    assert_eq!(
        (
            binding.role_ref.kind.as_str(),
            binding.role_ref.name.as_str()
        ),
        ("Role", role.metadata.name.as_str())
    );
    assert_eq!(binding.subjects.len(), 1);
    assert_eq!(binding.subjects[0].name, sa.metadata.name);
    assert_eq!(binding.subjects[0].namespace, sa.metadata.namespace);
    let pod = dep.spec.template.spec.as_ref().unwrap();
    assert_eq!(pod.extra["serviceAccountName"], sa.metadata.name.as_str());

    // The Service selects the Deployment's pods and targets its container's named ports.
    let labels = dep
        .spec
        .template
        .metadata
        .as_ref()
        .and_then(|m| m.labels.clone())
        .unwrap();
    assert!(
        svc.spec
            .selector
            .iter()
            .all(|(k, v)| labels.get(k) == Some(v))
    );
    assert_eq!(
        dep.spec.selector["matchLabels"],
        serde_json::json!(svc.spec.selector)
    );
    let container = &pod.containers[0];
    let ports: Vec<&str> = container.extra["ports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    for p in &svc.spec.ports {
        assert!(ports.contains(&p.target_port.as_ref().unwrap().as_str().unwrap()));
    }

    // The ScaledObject dials that Service's gRPC port, and its metadata is what the scaler
    // reads (the scaler's own parser, strict: an unknown key would fail here).
    let so: ScaledObject = load(file(&files, "scaledobject.yaml")).unwrap();
    assert_eq!(so.spec.triggers.len(), 1);
    let t = &so.spec.triggers[0];
    assert_eq!(t.kind, "external");
    let grpc = svc
        .spec
        .ports
        .iter()
        .find(|p| p.name.as_deref() == Some("grpc"))
        .unwrap();
    assert_eq!(
        t.metadata["scalerAddress"],
        format!("{}.llm.svc:{}", svc.metadata.name, grpc.port)
    );
    let meta: BTreeMap<String, String> = t.metadata.clone();
    let cfg = inferscale_scaler::Config::from_metadata(&meta, "llm").unwrap();
    assert_eq!(cfg.metric, inferscale_scaler::Metric::DesiredReplicas);
    let th = thresholds();
    assert_eq!(cfg.target, f64::from(th.scale_out.queue_depth_per_pod));
    assert_eq!(
        cfg.guardrail.map(|(m, s)| (m, (s * 1000.0).round())),
        Some((
            inferscale_scaler::Metric::QueueTimeP95,
            (th.scale_out.p95_queue_time_seconds * 1000.0).round()
        ))
    );
    assert_eq!(
        cfg.pods,
        inferscale_scaler::Pods::Service {
            name: "vllm".into(),
            namespace: "llm".into(),
            port: "http".into()
        }
    );
}

#[test]
fn a_role_that_grants_a_verb_kubernetes_does_not_have_or_an_unknown_field_is_refused() {
    let files = external();
    let text = file(&files, "scaler.yaml");
    let role = yaml_documents(text)[1];
    let v: serde_json::Value =
        inferscale_manifests::yaml::from_str(&role.replace("- watch", "- wach")).unwrap();
    let problems = object(&v);
    assert!(
        problems
            .iter()
            .any(|p| p.to_string().contains("\"wach\" is not a Kubernetes verb")),
        "{problems:?}"
    );
    let v: serde_json::Value =
        inferscale_manifests::yaml::from_str(&role.replace("  verbs:", "  verb:")).unwrap();
    let problems = object(&v);
    assert!(
        problems.iter().any(|p| p.to_string().contains("verb")),
        "{problems:?}"
    );
}
