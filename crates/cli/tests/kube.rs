//! The Kubernetes API from the command line, against `inferscale-kube`'s fake API server and
//! a kubeconfig whose user is an exec credential plugin (a script shaped like
//! `aws eks get-token`): `check --kubeconfig --context` reads the namespace's live objects
//! (what `generate` wrote, applied, with KEDA's and the HPA's status) and judges them, a
//! ScaledObject that is not Ready or an HPA that cannot scale is reported with the
//! controller's words, a cluster without KEDA is said to be one; `monitor --service` scrapes
//! a Service's pods found through its EndpointSlices; `scaler` names the context it uses.

#![allow(clippy::unwrap_used)]

mod common;

use std::path::{Path, PathBuf};

use common::{inferscale, sim, stderr, stdout, tmp};
use inferscale_kube::fake::{FakeApi, endpoint_slice, exec_kubeconfig};
use serde_json::{Value, json};

const TOKEN: &str = "k8s-aws-v1.from-the-plugin";
const DEPLOYMENTS: &str = "/apis/apps/v1/namespaces/llm/deployments";
const SCALED_OBJECTS: &str = "/apis/keda.sh/v1alpha1/namespaces/llm/scaledobjects";
const HPAS: &str = "/apis/autoscaling/v2/namespaces/llm/horizontalpodautoscalers";
const RULES: &str = "/apis/monitoring.coreos.com/v1/namespaces/llm/prometheusrules";
const CONFIGMAPS: &str = "/api/v1/namespaces/llm/configmaps";
const NODEPOOLS: &str = "/apis/karpenter.sh/v1/nodepools";
const SLICES: &str = "/apis/discovery.k8s.io/v1/namespaces/llm/endpointslices";

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The test's kubeconfig: context `eks-prod` reaches `server` through an exec plugin.
fn kubeconfig(d: &Path, server: &str) -> PathBuf {
    exec_kubeconfig(d, server, TOKEN)
}

/// The fake cluster's Service `vllm` in `llm`: one ready pod (the simulator on 127.0.0.1)
/// and one not ready.
fn sim_slice(port: u16) -> Value {
    endpoint_slice(
        "llm",
        "vllm",
        "vllm-x1",
        port,
        &[
            ("127.0.0.1", true, Some("vllm-7f9c-abcde")),
            ("127.0.0.9", false, Some("vllm-7f9c-unready")),
        ],
    )
}

/// The YAML documents of a file, as JSON.
fn docs(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap();
    inferscale_manifests::yaml_documents(&text)
        .into_iter()
        .map(|d| inferscale_manifests::yaml::from_str::<Value>(d).unwrap())
        .filter(|v| !v.is_null())
        .collect()
}

fn condition(kind: &str, status: &str, reason: &str, message: &str) -> Value {
    json!({"type": kind, "status": status, "reason": reason, "message": message})
}

/// What `generate` writes, applied to the fake cluster, with the seeds' Deployment (given
/// the annotation the patch adds) and the status KEDA and the HPA controller would write.
fn apply_generated(api: &FakeApi) {
    let out = tmp("kube", "generated");
    let _ = std::fs::remove_dir_all(&out);
    let o = inferscale()
        .args(["generate", "--thresholds"])
        .arg(workspace().join("testdata/runs/thresholds-default.json"))
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let mut deployment = docs(&workspace().join("testdata/aws-eks/vllm-deployment-service.yaml"))
        .into_iter()
        .find(|d| d["kind"] == "Deployment")
        .unwrap();
    deployment["metadata"]["namespace"] = json!("llm");
    // The seeds call it vllm-inference-app; the ScaledObject scales what generate names.
    deployment["metadata"]["name"] = json!("vllm");
    deployment["spec"]["template"]["metadata"]["annotations"] =
        json!({"karpenter.sh/do-not-disrupt": "true"});
    api.apply(DEPLOYMENTS, deployment);
    let mut so = docs(&out.join("scaledobject.yaml"))
        .into_iter()
        .find(|d| d["kind"] == "ScaledObject")
        .unwrap();
    let name = so["metadata"]["name"].as_str().unwrap().to_owned();
    so["status"] = json!({"hpaName": format!("keda-hpa-{name}"), "conditions": [
        condition("Ready", "True", "ScaledObjectReady", "ScaledObject is defined correctly and is ready for scaling"),
        condition("Active", "False", "ScalerNotActive", "Scaling is not performed because triggers are not active"),
        condition("Fallback", "False", "NoFallbackFound", "No fallbacks are active on this scaled object"),
    ]});
    api.apply(SCALED_OBJECTS, so);
    api.apply(
        HPAS,
        json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": format!("keda-hpa-{name}"), "namespace": "llm"},
            "spec": {"maxReplicas": 10, "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "vllm"}},
            "status": {"currentReplicas": 2, "desiredReplicas": 2, "conditions": [
                condition("AbleToScale", "True", "ReadyForNewScale", "recommended size matches current size"),
                condition("ScalingActive", "True", "ValidMetricFound", "the HPA was able to successfully calculate a replica count"),
            ]}}),
    );
    for rule in docs(&out.join("prometheusrule.yaml")) {
        api.apply(RULES, rule);
    }
    let mut data = serde_json::Map::new();
    for e in std::fs::read_dir(out.join("grafana")).unwrap() {
        let p = e.unwrap().path();
        data.insert(
            p.file_name().unwrap().to_string_lossy().into_owned(),
            json!(std::fs::read_to_string(&p).unwrap()),
        );
    }
    assert!(
        !data.is_empty(),
        "no dashboards written under {}",
        out.display()
    );
    api.apply(
        CONFIGMAPS,
        json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "vllm-dashboards", "namespace": "llm", "labels": {"grafana_dashboard": "1"}},
            "data": data}),
    );
    for np in docs(&out.join("karpenter-nodepool.yaml")) {
        if np["kind"] == "NodePool" {
            api.apply(NODEPOOLS, np);
        }
    }
}

/// `check` against the fake cluster through `kubeconfig`: the exit code and the checks.
fn check(kubeconfig: &Path) -> (i32, Vec<Value>) {
    let o = inferscale()
        .args(["check", "--kubeconfig"])
        .arg(kubeconfig)
        .args([
            "--context",
            "eks-prod",
            "--namespace",
            "llm",
            "--format",
            "json",
        ])
        .output()
        .unwrap();
    let v: Value = serde_json::from_str(&stdout(&o))
        .unwrap_or_else(|e| panic!("{e}: {}\n{}", stdout(&o), stderr(&o)));
    (
        o.status.code().unwrap(),
        v["checks"].as_array().unwrap().clone(),
    )
}

fn verdict(checks: &[Value], id: u64) -> (String, String) {
    let c = checks.iter().find(|c| c["id"] == id).unwrap();
    (
        c["status"].as_str().unwrap().to_owned(),
        c["reason"].as_str().unwrap().to_owned(),
    )
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn check_reads_the_live_namespace_through_a_kubeconfig_with_an_exec_plugin() {
    let rt = runtime();
    let api = rt.block_on(FakeApi::start(TOKEN));
    for c in [
        DEPLOYMENTS,
        SCALED_OBJECTS,
        HPAS,
        RULES,
        CONFIGMAPS,
        NODEPOOLS,
    ] {
        api.serve(c);
    }
    apply_generated(&api);
    let d = tmp("kube", "check");
    std::fs::create_dir_all(&d).unwrap();
    let config = kubeconfig(&d, api.url());

    let (code, checks) = check(&config);
    for id in [4, 5, 6, 7] {
        let (status, reason) = verdict(&checks, id);
        assert_eq!(status, "pass", "check {id}: {reason}");
    }
    let (_, six) = verdict(&checks, 6);
    assert!(
        six.contains("ScaledObject llm/vllm")
            && six.contains("Ready, HPA keda-hpa-vllm at 2 replicas (desired 2)")
            && six.contains("context eks-prod"),
        "{six}"
    );
    let (_, seven) = verdict(&checks, 7);
    assert!(
        seven.contains("NodePool") && seven.contains("consolidation"),
        "{seven}"
    );
    // The live Deployment is judged too: the seeds' has no readiness probe gated on the
    // warm-up, and gpu_memory_utilization 0.9.
    let (status, reason) = verdict(&checks, 9);
    assert_eq!(status, "fail", "{reason}");
    assert!(reason.contains("no readiness probe"), "{reason}");
    let (status, reason) = verdict(&checks, 10);
    assert_eq!(status, "warn", "{reason}");
    assert!(
        reason.contains("Deployment llm/vllm: gpu_memory_utilization 0.9"),
        "{reason}"
    );
    assert_eq!(code, 1, "{checks:?}");
    // Every request carried the plugin's token; Secrets and Pods were never asked for.
    let asked = api.asked();
    assert!(asked.iter().all(|a| a.auth == format!("Bearer {TOKEN}")));
    assert!(
        asked
            .iter()
            .all(|a| !a.path.contains("secrets") && !a.path.ends_with("/pods"))
    );

    // The HPA cannot read its metric: a warning in the HPA controller's words.
    let mut hpa = json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
    "metadata": {"name": "keda-hpa-vllm", "namespace": "llm"},
    "status": {"currentReplicas": 2, "desiredReplicas": 2, "conditions": [
        condition("AbleToScale", "True", "SucceededGetScale", "the HPA controller was able to get the target's current scale"),
        condition("ScalingActive", "False", "FailedGetExternalMetric", "the HPA was unable to compute the replica count: unable to get external metric llm/s0-prometheus/&LabelSelector{}"),
    ]}});
    api.apply(HPAS, hpa.clone());
    let (code, checks) = check(&config);
    let (status, reason) = verdict(&checks, 6);
    assert_eq!(status, "warn", "{reason}");
    assert!(
        reason.contains("ScalingActive is False (FailedGetExternalMetric"),
        "{reason}"
    );
    assert_eq!(code, 1);

    // KEDA says the ScaledObject is not Ready: a failure naming its reason.
    let out = tmp("kube", "generated");
    let mut so = docs(&out.join("scaledobject.yaml"))
        .into_iter()
        .find(|d| d["kind"] == "ScaledObject")
        .unwrap();
    so["status"] = json!({"conditions": [condition("Ready", "False", "ScaledObjectCheckFailed", "ScaledObject doesn't have correct Idle/Min/Max Replica Counts specification")]});
    api.apply(SCALED_OBJECTS, so);
    hpa["status"]["conditions"] = json!([]);
    api.apply(HPAS, hpa);
    let (code, checks) = check(&config);
    let (status, reason) = verdict(&checks, 6);
    assert_eq!(status, "fail", "{reason}");
    assert!(
        reason.contains("is not Ready (ScaledObjectCheckFailed: ScaledObject doesn't have correct"),
        "{reason}"
    );
    assert_eq!(code, 1);

    // The Deployment it scales is not there.
    api.delete(DEPLOYMENTS, "vllm");
    let (_, checks) = check(&config);
    let (status, reason) = verdict(&checks, 6);
    assert_eq!(status, "fail", "{reason}");
    assert!(
        reason.contains("scales Deployment \"vllm\", which is not in namespace llm (there: none)"),
        "{reason}"
    );
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_cluster_without_keda_or_rights_is_said_to_be_one() {
    let rt = runtime();
    let api = rt.block_on(FakeApi::start(TOKEN));
    // No KEDA (its CRD is not served), no Karpenter, and RBAC denies the PrometheusRules.
    for c in [DEPLOYMENTS, HPAS, CONFIGMAPS] {
        api.serve(c);
    }
    api.serve(RULES);
    api.forbid(RULES);
    let d = tmp("kube", "nokeda");
    std::fs::create_dir_all(&d).unwrap();
    let config = kubeconfig(&d, api.url());
    let (code, checks) = check(&config);
    assert_eq!(code, 1);
    let (status, reason) = verdict(&checks, 6);
    assert_eq!(status, "fail");
    assert!(reason.contains("KEDA is not installed"), "{reason}");
    let (status, reason) = verdict(&checks, 5);
    assert_eq!(status, "fail");
    assert!(
        reason.contains("forbidden") && reason.contains("prometheusrules.monitoring.coreos.com"),
        "{reason}"
    );
    // A context that is not in the kubeconfig: named, exit 2, nothing printed on stdout.
    let o = inferscale()
        .args(["check", "--kubeconfig"])
        .arg(&config)
        .args(["--context", "staging"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("staging"), "{}", stderr(&o));
    assert!(stdout(&o).is_empty());
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn monitor_scrapes_the_pods_of_a_service_found_through_its_endpoint_slices() {
    let s = sim(&[]);
    let port: u16 = s.url.rsplit(':').next().unwrap().parse().unwrap();
    let rt = runtime();
    let api = rt.block_on(FakeApi::start(TOKEN));
    api.apply(SLICES, sim_slice(port));
    let d = tmp("kube", "monitor");
    std::fs::create_dir_all(&d).unwrap();
    let config = kubeconfig(&d, api.url());
    let o = inferscale()
        .args(["monitor", "--kubeconfig"])
        .arg(&config)
        .args([
            "--context",
            "eks-prod",
            "--namespace",
            "llm",
            "--service",
            "vllm:http",
            "--once",
            "--json",
            "--for",
            "2s",
            "--refresh",
            "500ms",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert!(
        v["source"].as_str().unwrap().contains("Service llm/vllm"),
        "{}",
        v["source"]
    );
    let targets = v["targets"].as_array().unwrap();
    assert_eq!(targets.len(), 1, "{targets:?}");
    assert_eq!(targets[0]["name"], "vllm-7f9c-abcde");
    assert_eq!(targets[0]["up"], true, "{targets:?}");
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn the_scaler_finds_a_service_s_pods_through_a_kubeconfig_context() {
    use std::io::{BufRead as _, BufReader};
    use std::process::Stdio;

    let s = sim(&[]);
    let port: u16 = s.url.rsplit(':').next().unwrap().parse().unwrap();
    let rt = runtime();
    let api = rt.block_on(FakeApi::start(TOKEN));
    api.apply(SLICES, sim_slice(port));
    let d = tmp("kube", "scaler");
    std::fs::create_dir_all(&d).unwrap();
    let config = kubeconfig(&d, api.url());
    let mut child = inferscale()
        .args(["scaler", "--kubeconfig"])
        .arg(&config)
        .args([
            "--context",
            "eks-prod",
            "--listen",
            "127.0.0.1:0",
            "--http-listen",
            "127.0.0.1:0",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let out = child.stdout.take().unwrap();
    let _reap = inferscale_testkit::Reap(child);
    let mut banner = String::new();
    let mut grpc_addr = String::new();
    for line in BufReader::new(out).lines() {
        let line = line.unwrap();
        banner.push_str(&line);
        banner.push('\n');
        if let Some((_, rest)) = line.split_once("ExternalScaler on ") {
            grpc_addr = rest.split_whitespace().next().unwrap().to_owned();
        }
        if line.contains("stop with Ctrl-C") {
            break;
        }
    }
    assert!(
        banner.contains("EndpointSlices (kubeconfig") && banner.contains("context eks-prod"),
        "{banner}"
    );
    let meta = [
        ("service", "vllm"),
        ("port", "http"),
        ("metric", "queue_depth"),
        ("target", "5"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    let req = inferscale_scaler::proto::GetMetricsRequest {
        scaled_object_ref: Some(inferscale_scaler::proto::ScaledObjectRef {
            name: "vllm".into(),
            namespace: "llm".into(),
            scaler_metadata: meta,
        }),
        metric_name: String::new(),
    };
    let v = rt
        .block_on(async {
            let mut c = inferscale_scaler::grpc::connect(&grpc_addr, None)
                .await
                .unwrap();
            c.get_metrics(req).await
        })
        .unwrap()
        .into_inner();
    // The idle simulator's queue, read from the pod the slice named.
    assert_eq!(v.metric_values[0].metric_value_float, 0.0);
    assert!(api.asked().iter().any(|a| a.path == SLICES));
    let _ = std::fs::remove_dir_all(&d);
}
