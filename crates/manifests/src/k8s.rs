//! ServiceMonitors, the vLLM Deployment patches and the warm-up Job.

use std::collections::BTreeMap;

use inferscale_analysis::Thresholds;
use inferscale_catalog::Signal;
use serde_json::{Value, json};

use crate::Options;
use crate::karpenter::GPU_TAINT;
use crate::objects::{
    Container, DeploymentPatch, DeploymentPatchSpec, Endpoint, Extra, Job, JobSpec, JsonPatch,
    ObjectMeta, PatchOp, PatchOpKind, PodSpec, PodTemplateSpec, Probe, Quantity, Resources,
    ServiceMonitor, ServiceMonitorSpec, TemplateMeta, Volume, VolumeMount,
};
use crate::promql::vllm_names;
use crate::yaml::Explained;

/// A map of strings from pairs.
pub(crate) fn string_map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

/// Strings from string slices.
pub(crate) fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|v| (*v).to_owned()).collect()
}

/// The fields a type does not name, from a JSON object (`json!({"securityContext": …})`).
pub(crate) fn extra(fields: Value) -> Extra {
    match fields {
        Value::Object(m) => m.into_iter().collect(),
        _ => Extra::new(),
    }
}

/// Requests or limits: `("cpu", "50m")`, …
pub(crate) fn quantities(pairs: &[(&str, &str)]) -> Option<BTreeMap<String, Quantity>> {
    Some(
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), Quantity::Text((*v).to_owned())))
            .collect(),
    )
}

fn meta(name: &str, o: &Options, labels: &[(&str, &str)]) -> ObjectMeta {
    let mut all = string_map(&[("app.kubernetes.io/managed-by", "inferscale")]);
    all.extend(string_map(labels));
    ObjectMeta {
        name: name.to_owned(),
        namespace: Some(o.namespace.clone()),
        labels: Some(all),
        ..ObjectMeta::default()
    }
}

/// What the inferscale warm-up containers need: little.
fn small_resources() -> Resources {
    Resources {
        requests: quantities(&[("cpu", "50m"), ("memory", "32Mi")]),
        limits: quantities(&[("memory", "128Mi")]),
        extra: Extra::new(),
    }
}

/// Non-root, read-only, no privilege escalation (a container's `securityContext`).
pub(crate) fn locked_down() -> Value {
    json!({
        "runAsNonRoot": true,
        "readOnlyRootFilesystem": true,
        "allowPrivilegeEscalation": false,
    })
}

/// `servicemonitor.yaml`: Prometheus scrapes vLLM's `/metrics` every 15 s.
pub fn service_monitor(t: &Thresholds, o: &Options) -> Explained<ServiceMonitor> {
    let object = ServiceMonitor {
        api_version: "monitoring.coreos.com/v1".to_owned(),
        kind: "ServiceMonitor".to_owned(),
        metadata: meta(&o.service, o, &[("release", o.prometheus_release.as_str())]),
        spec: ServiceMonitorSpec {
            selector: json!({ "matchLabels": { "app": o.service } }),
            namespace_selector: Some(json!({ "matchNames": [o.namespace] })),
            endpoints: vec![Endpoint {
                port: Some(o.service_port.0.clone()),
                path: Some("/metrics".to_owned()),
                interval: Some("15s".to_owned()),
                scrape_timeout: Some("10s".to_owned()),
                extra: Extra::new(),
            }],
            extra: Extra::new(),
        },
    };
    let mut e = Explained::new(
        crate::header(
            t,
            "ServiceMonitor: Prometheus scrapes vLLM's /metrics every 15 s.",
        ),
        object,
    );
    e.comment(
        "spec.selector",
        format!(
            "Selects the Service labelled app: {} (its port named {:?}). The job label becomes the\nService's name, which the VLLMTargetDown alert matches.",
            o.service, o.service_port.0
        ),
    );
    e
}

/// `dcgm-servicemonitor.yaml`: the DCGM exporter's metrics, for clusters whose exporter chart
/// does not create its own ServiceMonitor.
pub fn dcgm_service_monitor(t: &Thresholds, o: &Options) -> Explained<ServiceMonitor> {
    let object = ServiceMonitor {
        api_version: "monitoring.coreos.com/v1".to_owned(),
        kind: "ServiceMonitor".to_owned(),
        metadata: meta(
            "dcgm-exporter",
            o,
            &[("release", o.prometheus_release.as_str())],
        ),
        spec: ServiceMonitorSpec {
            selector: json!({ "matchLabels": { "app.kubernetes.io/name": "dcgm-exporter" } }),
            namespace_selector: Some(json!({ "any": true })),
            endpoints: vec![Endpoint {
                port: Some("metrics".to_owned()),
                path: Some("/metrics".to_owned()),
                interval: Some("15s".to_owned()),
                scrape_timeout: None,
                extra: Extra::new(),
            }],
            extra: Extra::new(),
        },
    };
    Explained::new(
        crate::header(
            t,
            "ServiceMonitor for NVIDIA's DCGM exporter (GPU tier). Skip this file if the exporter's\nHelm chart already has serviceMonitor.enabled=true (the seeds' values do).",
        ),
        object,
    )
}

/// The `--max-model-len` to advise: twice the longest request the run sent (prompt plus
/// `max_tokens`), rounded up to a multiple of 1024, at least 2048 — unless given.
pub fn max_model_len(t: &Thresholds, o: &Options) -> u32 {
    if o.max_model_len > 0 {
        return o.max_model_len;
    }
    let need = 2.0 * longest_request(t);
    ((need / 1024.0).ceil().min(f64::from(u32::MAX / 1024)) as u32 * 1024).max(2048)
}

/// The longest request the run sent, in tokens (prompt plus `max_tokens`): what
/// `--max-model-len` must hold at least.
pub fn longest_request(t: &Thresholds) -> f64 {
    let prompt = t.workload.prompt_tokens_mean.unwrap_or(512.0);
    let out = t
        .workload
        .max_tokens
        .map(f64::from)
        .or(t.workload.output_tokens_mean)
        .unwrap_or(512.0);
    prompt + out
}

/// Seconds a terminating pod gets: the preStop drain waits for in-flight requests, as long as
/// the slowest healthy request took twice over, plus the endpoint-removal delay.
pub fn grace_seconds(t: &Thresholds) -> u32 {
    let slow = t
        .workload
        .e2e_max_seconds
        .unwrap_or(t.scale_out.p95_e2e_seconds * 2.0);
    ((2.0 * slow).ceil().min(600.0) as u32 + 15).clamp(30, 600)
}

/// The preStop drain: wait for endpoint removal, then until vLLM reports nothing running or
/// waiting (from its own /metrics), then let SIGTERM stop it.
fn drain_script(port: u16, grace: u32) -> String {
    let names: Vec<&str> = [Signal::QueueDepth, Signal::Running]
        .iter()
        .flat_map(|s| vllm_names(*s))
        .collect();
    let tuple = names
        .iter()
        .map(|n| format!("'{n}'"))
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "import time, urllib.request\ntime.sleep(5)\nend = time.time() + {budget}\nwhile time.time() < end:\n    try:\n        text = urllib.request.urlopen('http://127.0.0.1:{port}/metrics', timeout=2).read().decode()\n    except Exception:\n        break\n    busy = sum(float(l.rsplit(' ', 1)[1]) for l in text.splitlines() if l.startswith(({tuple},)))\n    if busy == 0:\n        break\n    time.sleep(1)",
        budget = grace.saturating_sub(10).max(5)
    )
}

/// `vllm-deployment-patch.yaml` (a strategic-merge patch) and `vllm-args-patch.yaml` (a JSON
/// patch appending vLLM flags: argparse keeps the last value of a repeated flag).
// Long: the patch in document order, then each field's comment.
pub fn deployment_patch(t: &Thresholds, o: &Options) -> Explained<DeploymentPatch> {
    let port = o.service_port.1;
    let grace = grace_seconds(t);
    let ready = format!(
        "import os, urllib.request; os.stat('/inferscale/warm'); urllib.request.urlopen('http://127.0.0.1:{port}/health', timeout=2)"
    );
    let sidecar = Container {
        name: "inferscale-warmup".to_owned(),
        image: Some(o.inferscale_image.clone()),
        restart_policy: Some("Always".to_owned()),
        args: Some(vec![
            "warmup".to_owned(),
            "--url".to_owned(),
            format!("http://127.0.0.1:{port}"),
            "--requests".to_owned(),
            "100".to_owned(),
            "--wait-ready".to_owned(),
            "30m".to_owned(),
            "--done-file".to_owned(),
            "/inferscale/warm".to_owned(),
            "--hold".to_owned(),
        ]),
        volume_mounts: vec![VolumeMount {
            name: "inferscale".to_owned(),
            mount_path: "/inferscale".to_owned(),
            read_only: None,
            extra: Extra::new(),
        }],
        resources: Some(small_resources()),
        extra: extra(json!({ "securityContext": locked_down() })),
        ..Container::default()
    };
    let vllm = Container {
        name: o.container.clone(),
        readiness_probe: Some(Probe {
            period_seconds: Some(5),
            timeout_seconds: Some(3),
            failure_threshold: Some(3),
            extra: extra(json!({ "exec": { "command": ["python3", "-c", ready] } })),
        }),
        volume_mounts: vec![VolumeMount {
            name: "inferscale".to_owned(),
            mount_path: "/inferscale".to_owned(),
            read_only: Some(true),
            extra: Extra::new(),
        }],
        extra: extra(json!({
            "lifecycle": {
                "preStop": {
                    "exec": { "command": ["python3", "-c", drain_script(port, grace)] }
                }
            }
        })),
        ..Container::default()
    };
    let object = DeploymentPatch {
        spec: DeploymentPatchSpec {
            template: PodTemplateSpec {
                metadata: Some(TemplateMeta {
                    annotations: Some(string_map(&[("karpenter.sh/do-not-disrupt", "true")])),
                    ..TemplateMeta::default()
                }),
                spec: Some(PodSpec {
                    termination_grace_period_seconds: Some(i64::from(grace)),
                    volumes: vec![Volume {
                        name: "inferscale".to_owned(),
                        source: extra(json!({
                            "emptyDir": { "medium": "Memory", "sizeLimit": "1Mi" }
                        })),
                    }],
                    init_containers: vec![sidecar],
                    containers: vec![vllm],
                    extra: extra(json!({
                        "tolerations": [
                            { "key": GPU_TAINT, "operator": "Exists", "effect": "NoSchedule" }
                        ]
                    })),
                    ..PodSpec::default()
                }),
                extra: Extra::new(),
            },
            extra: Extra::new(),
        },
        extra: Extra::new(),
    };
    let args = max_model_len(t, o);
    let header = format!(
        "{}\nApply: kubectl -n {ns} patch deployment {d} --patch-file vllm-deployment-patch.yaml\n  then: kubectl -n {ns} patch deployment {d} --type json --patch-file vllm-args-patch.yaml\n(--max-model-len {args}, --gpu-memory-utilization 0.85; see README.md).",
        crate::header(
            t,
            "Strategic-merge patch for the vLLM Deployment: warm-up before ready, no disruption, drain on\nstop, GPU nodes tolerated."
        ),
        ns = o.namespace,
        d = o.deployment
    );
    let mut e = Explained::new(header, object);
    e.comment(
        "spec.template.metadata",
        "Karpenter must not consolidate a node away from under a serving GPU pod.",
    )
    .comment(
        "spec.template.spec.terminationGracePeriodSeconds",
        format!(
            "Twice the slowest request seen at the healthy step ({}), plus 15 s.",
            t.workload
                .e2e_max_seconds
                .map_or("unknown".into(), |v| format!("{v:.1} s"))
        ),
    )
    .comment(
        "spec.template.spec.tolerations",
        format!(
            "Lets the pods onto the GPU nodes of karpenter-nodepool.yaml (tainted {GPU_TAINT}:NoSchedule), as\nthe seeds' Deployment does. A strategic-merge patch replaces the whole list (Kubernetes\nmerges tolerations as one value): add any other toleration your pods need here."
        ),
    )
    .comment(
        "spec.template.spec.initContainers[0].name",
        "A native sidecar (Kubernetes 1.29+): waits for vLLM's /health, sends the seeds' 100\nsequential warm-up requests, marks the pod warm, and stays up.",
    )
    .comment(
        "spec.template.spec.containers[0].readinessProbe",
        "Ready only once the warm-up sidecar marked the pod warm and vLLM answers /health: no\nuser request pays the first-request costs (the run measured them).",
    )
    .comment(
        "spec.template.spec.containers[0].lifecycle",
        format!(
            "On termination: wait 5 s for the endpoint to be removed, then until vLLM reports nothing\nrunning or waiting (at most {} s), so in-flight requests finish.",
            grace.saturating_sub(10).max(5)
        ),
    );
    e
}

/// `vllm-args-patch.yaml`: a JSON patch appending the sized vLLM flags to the container's args.
pub fn args_patch(t: &Thresholds, o: &Options) -> Explained<JsonPatch> {
    let len = max_model_len(t, o);
    let path = format!(
        "/spec/template/spec/containers/{}/args/-",
        o.container_index
    );
    let add = |value: String| PatchOp {
        op: PatchOpKind::Add,
        path: path.clone(),
        value: Some(Value::String(value)),
        from: None,
    };
    let object = vec![
        add("--gpu-memory-utilization=0.85".to_owned()),
        add(format!("--max-model-len={len}")),
    ];
    let header = format!(
        "{}\nApply: kubectl -n {} patch deployment {} --type json --patch-file vllm-args-patch.yaml\nThe container is the {}th of the pod (--container-index); vLLM keeps the last value of a\nrepeated flag, so these override what the Deployment sets.",
        crate::header(t, "JSON patch: the vLLM flags sized from the measurement."),
        o.namespace,
        o.deployment,
        o.container_index
    );
    let mut e = Explained::new(header, object);
    e.comment("[0].op", "0.85 leaves room for CUDA graphs, activations and the odd other process (the community\nguide's advice; the seeds ran 0.9).")
    .comment(
        "[1].op",
        format!(
            "Twice the longest measured request ({} prompt + {} output tokens), rounded to 1024: the\nscheduler's token budget and the profiling pass size to it.",
            t.workload.prompt_tokens_mean.map_or("?".into(), |v| format!("{v:.0}")),
            t.workload.max_tokens.map_or("?".into(), |v| v.to_string())
        ),
    );
    e
}

/// `warmup-job.yaml`: warms the Service up after a rollout.
pub fn warmup_job(t: &Thresholds, o: &Options) -> Explained<Job> {
    let url = format!(
        "http://{}.{}.svc:{}",
        o.service, o.namespace, o.service_port.1
    );
    let container = Container {
        name: "warmup".to_owned(),
        image: Some(o.inferscale_image.clone()),
        args: Some(vec![
            "warmup".to_owned(),
            "--url".to_owned(),
            url,
            "--requests".to_owned(),
            "100".to_owned(),
            "--wait-ready".to_owned(),
            "30m".to_owned(),
        ]),
        resources: Some(small_resources()),
        extra: extra(json!({ "securityContext": locked_down() })),
        ..Container::default()
    };
    let object = Job {
        api_version: "batch/v1".to_owned(),
        kind: "Job".to_owned(),
        metadata: meta(&format!("{}-warmup", o.deployment), o, &[]),
        spec: JobSpec {
            backoff_limit: Some(2),
            active_deadline_seconds: Some(3600),
            ttl_seconds_after_finished: Some(3600),
            template: PodTemplateSpec {
                metadata: None,
                spec: Some(PodSpec {
                    restart_policy: Some("Never".to_owned()),
                    containers: vec![container],
                    ..PodSpec::default()
                }),
                extra: Extra::new(),
            },
            extra: Extra::new(),
        },
    };
    Explained::new(
        format!(
            "{}\nRun after each rollout (kubectl -n {} create -f warmup-job.yaml, or as a post-upgrade hook):\nthe seeds' 100 sequential requests through the Service. Each pod's own sidecar (see\nvllm-deployment-patch.yaml) already warms it before it turns ready; this Job checks the\nService end to end and shows the cold-start cost in its log.",
            crate::header(t, "Warm-up Job."),
            o.namespace
        ),
        object,
    )
}
