//! ServiceMonitors, the vLLM Deployment patches and the warm-up Job.

use inferscale_analysis::Thresholds;
use inferscale_catalog::Signal;

use crate::Options;
use crate::karpenter::GPU_TAINT;
use crate::promql::vllm_names;
use crate::yaml::{Y, document, i, map, s};

fn meta(name: &str, o: &Options, extra: Vec<(&str, Y)>) -> Y {
    let mut labels = vec![("app.kubernetes.io/managed-by", s("inferscale"))];
    labels.extend(extra);
    map(vec![
        ("name", s(name)),
        ("namespace", s(o.namespace.clone())),
        ("labels", map(labels)),
    ])
}

/// What the inferscale warm-up containers need: little.
fn small_resources() -> Y {
    map(vec![
        (
            "requests",
            map(vec![("cpu", s("50m")), ("memory", s("32Mi"))]),
        ),
        ("limits", map(vec![("memory", s("128Mi"))])),
    ])
}

/// Non-root, read-only, no privilege escalation.
pub(crate) fn locked_down() -> Y {
    map(vec![
        ("runAsNonRoot", Y::Bool(true)),
        ("readOnlyRootFilesystem", Y::Bool(true)),
        ("allowPrivilegeEscalation", Y::Bool(false)),
    ])
}

/// `servicemonitor.yaml`: Prometheus scrapes vLLM's `/metrics` every 15 s.
pub fn service_monitor(t: &Thresholds, o: &Options) -> String {
    let y = map(vec![
        ("apiVersion", s("monitoring.coreos.com/v1")),
        ("kind", s("ServiceMonitor")),
        (
            "metadata",
            meta(&o.service, o, vec![("release", s(o.prometheus_release.clone()))]),
        ),
        (
            "spec",
            map(vec![
                (
                    "selector",
                    map(vec![("matchLabels", map(vec![("app", s(o.service.clone()))]))]),
                ),
                (
                    "namespaceSelector",
                    map(vec![("matchNames", Y::Seq(vec![s(o.namespace.clone())]))]),
                ),
                (
                    "endpoints",
                    Y::Seq(vec![map(vec![
                        ("port", s(o.service_port.0.clone())),
                        ("path", s("/metrics")),
                        ("interval", s("15s")),
                        ("scrapeTimeout", s("10s")),
                    ])]),
                ),
            ])
            .comment(
                "selector",
                format!(
                    "Selects the Service labelled app: {} (its port named {:?}). The job label becomes the\nService's name, which the VLLMTargetDown alert matches.",
                    o.service, o.service_port.0
                ),
            ),
        ),
    ]);
    document(
        &crate::header(
            t,
            "ServiceMonitor: Prometheus scrapes vLLM's /metrics every 15 s.",
        ),
        &y,
    )
}

/// `dcgm-servicemonitor.yaml`: the DCGM exporter's metrics, for clusters whose exporter chart
/// does not create its own ServiceMonitor.
pub fn dcgm_service_monitor(t: &Thresholds, o: &Options) -> String {
    let y = map(vec![
        ("apiVersion", s("monitoring.coreos.com/v1")),
        ("kind", s("ServiceMonitor")),
        (
            "metadata",
            meta(
                "dcgm-exporter",
                o,
                vec![("release", s(o.prometheus_release.clone()))],
            ),
        ),
        (
            "spec",
            map(vec![
                (
                    "selector",
                    map(vec![(
                        "matchLabels",
                        map(vec![("app.kubernetes.io/name", s("dcgm-exporter"))]),
                    )]),
                ),
                ("namespaceSelector", map(vec![("any", Y::Bool(true))])),
                (
                    "endpoints",
                    Y::Seq(vec![map(vec![
                        ("port", s("metrics")),
                        ("path", s("/metrics")),
                        ("interval", s("15s")),
                    ])]),
                ),
            ]),
        ),
    ]);
    document(
        &crate::header(
            t,
            "ServiceMonitor for NVIDIA's DCGM exporter (GPU tier). Skip this file if the exporter's\nHelm chart already has serviceMonitor.enabled=true (the seeds' values do).",
        ),
        &y,
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
// Long: the two patch files in document order, each field with the comment that explains it.
pub fn deployment_patch(t: &Thresholds, o: &Options) -> String {
    let port = o.service_port.1;
    let grace = grace_seconds(t);
    let ready = format!(
        "import os, urllib.request; os.stat('/inferscale/warm'); urllib.request.urlopen('http://127.0.0.1:{port}/health', timeout=2)"
    );
    let sidecar = map(vec![
        ("name", s("inferscale-warmup")),
        ("image", s(o.inferscale_image.clone())),
        ("restartPolicy", s("Always")),
        (
            "args",
            Y::Seq(vec![
                s("warmup"),
                s("--url"),
                s(format!("http://127.0.0.1:{port}")),
                s("--requests"),
                s("100"),
                s("--wait-ready"),
                s("30m"),
                s("--done-file"),
                s("/inferscale/warm"),
                s("--hold"),
            ]),
        ),
        (
            "volumeMounts",
            Y::Seq(vec![map(vec![("name", s("inferscale")), ("mountPath", s("/inferscale"))])]),
        ),
        ("resources", small_resources()),
        ("securityContext", locked_down()),
    ])
    .comment(
        "name",
        "A native sidecar (Kubernetes 1.29+): waits for vLLM's /health, sends the seeds' 100\nsequential warm-up requests, marks the pod warm, and stays up.",
    );
    let vllm = map(vec![
        ("name", s(o.container.clone())),
        (
            "readinessProbe",
            map(vec![
                (
                    "exec",
                    map(vec![(
                        "command",
                        Y::Seq(vec![s("python3"), s("-c"), s(ready)]),
                    )]),
                ),
                ("periodSeconds", i(5)),
                ("timeoutSeconds", i(3)),
                ("failureThreshold", i(3)),
            ]),
        ),
        (
            "lifecycle",
            map(vec![(
                "preStop",
                map(vec![(
                    "exec",
                    map(vec![(
                        "command",
                        Y::Seq(vec![s("python3"), s("-c"), Y::Block(drain_script(port, grace))]),
                    )]),
                )]),
            )]),
        ),
        (
            "volumeMounts",
            Y::Seq(vec![map(vec![
                ("name", s("inferscale")),
                ("mountPath", s("/inferscale")),
                ("readOnly", Y::Bool(true)),
            ])]),
        ),
    ])
    .comment(
        "readinessProbe",
        "Ready only once the warm-up sidecar marked the pod warm and vLLM answers /health: no\nuser request pays the first-request costs (the run measured them).",
    )
    .comment(
        "lifecycle",
        format!(
            "On termination: wait 5 s for the endpoint to be removed, then until vLLM reports nothing\nrunning or waiting (at most {} s), so in-flight requests finish.",
            grace.saturating_sub(10).max(5)
        ),
    );
    let y = map(vec![(
        "spec",
        map(vec![(
            "template",
            map(vec![
                (
                    "metadata",
                    map(vec![(
                        "annotations",
                        map(vec![("karpenter.sh/do-not-disrupt", s("true"))]),
                    )]),
                ),
                (
                    "spec",
                    map(vec![
                        ("terminationGracePeriodSeconds", i(i64::from(grace))),
                        (
                            "tolerations",
                            Y::Seq(vec![map(vec![
                                ("key", s(GPU_TAINT)),
                                ("operator", s("Exists")),
                                ("effect", s("NoSchedule")),
                            ])]),
                        ),
                        (
                            "volumes",
                            Y::Seq(vec![map(vec![
                                ("name", s("inferscale")),
                                (
                                    "emptyDir",
                                    map(vec![("medium", s("Memory")), ("sizeLimit", s("1Mi"))]),
                                ),
                            ])]),
                        ),
                        ("initContainers", Y::Seq(vec![sidecar])),
                        ("containers", Y::Seq(vec![vllm])),
                    ])
                    .comment(
                        "terminationGracePeriodSeconds",
                        format!(
                            "Twice the slowest request seen at the healthy step ({}), plus 15 s.",
                            t.workload
                                .e2e_max_seconds
                                .map_or("unknown".into(), |v| format!("{v:.1} s"))
                        ),
                    )
                    .comment(
                        "tolerations",
                        format!(
                            "Lets the pods onto the GPU nodes of karpenter-nodepool.yaml (tainted {GPU_TAINT}:NoSchedule), as\nthe seeds' Deployment does. A strategic-merge patch replaces the whole list (Kubernetes\nmerges tolerations as one value): add any other toleration your pods need here."
                        ),
                    ),
                ),
            ])
            .comment(
                "metadata",
                "Karpenter must not consolidate a node away from under a serving GPU pod.",
            ),
        )]),
    )]);
    let args = max_model_len(t, o);
    document(
        &format!(
            "{}\nApply: kubectl -n {ns} patch deployment {d} --patch-file vllm-deployment-patch.yaml\n  then: kubectl -n {ns} patch deployment {d} --type json --patch-file vllm-args-patch.yaml\n(--max-model-len {args}, --gpu-memory-utilization 0.85; see README.md).",
            crate::header(
                t,
                "Strategic-merge patch for the vLLM Deployment: warm-up before ready, no disruption, drain on\nstop, GPU nodes tolerated."
            ),
            ns = o.namespace,
            d = o.deployment
        ),
        &y,
    )
}

/// `vllm-args-patch.yaml`: a JSON patch appending the sized vLLM flags to the container's args.
pub fn args_patch(t: &Thresholds, o: &Options) -> String {
    let len = max_model_len(t, o);
    let path = format!(
        "/spec/template/spec/containers/{}/args/-",
        o.container_index
    );
    let y = Y::Seq(vec![
        map(vec![
            ("op", s("add")),
            ("path", s(path.clone())),
            ("value", s("--gpu-memory-utilization=0.85")),
        ])
        .comment("op", "0.85 leaves room for CUDA graphs, activations and the odd other process (the community\nguide's advice; the seeds ran 0.9)."),
        map(vec![
            ("op", s("add")),
            ("path", s(path)),
            ("value", s(format!("--max-model-len={len}"))),
        ])
        .comment(
            "op",
            format!(
                "Twice the longest measured request ({} prompt + {} output tokens), rounded to 1024: the\nscheduler's token budget and the profiling pass size to it.",
                t.workload.prompt_tokens_mean.map_or("?".into(), |v| format!("{v:.0}")),
                t.workload.max_tokens.map_or("?".into(), |v| v.to_string())
            ),
        ),
    ]);
    document(
        &format!(
            "{}\nApply: kubectl -n {} patch deployment {} --type json --patch-file vllm-args-patch.yaml\nThe container is the {}th of the pod (--container-index); vLLM keeps the last value of a\nrepeated flag, so these override what the Deployment sets.",
            crate::header(t, "JSON patch: the vLLM flags sized from the measurement."),
            o.namespace,
            o.deployment,
            o.container_index
        ),
        &y,
    )
}

/// `warmup-job.yaml`: warms the Service up after a rollout.
pub fn warmup_job(t: &Thresholds, o: &Options) -> String {
    let url = format!(
        "http://{}.{}.svc:{}",
        o.service, o.namespace, o.service_port.1
    );
    let container = map(vec![
        ("name", s("warmup")),
        ("image", s(o.inferscale_image.clone())),
        (
            "args",
            Y::Seq(vec![
                s("warmup"),
                s("--url"),
                s(url),
                s("--requests"),
                s("100"),
                s("--wait-ready"),
                s("30m"),
            ]),
        ),
        ("resources", small_resources()),
        ("securityContext", locked_down()),
    ]);
    let y = map(vec![
        ("apiVersion", s("batch/v1")),
        ("kind", s("Job")),
        (
            "metadata",
            meta(&format!("{}-warmup", o.deployment), o, vec![]),
        ),
        (
            "spec",
            map(vec![
                ("backoffLimit", i(2)),
                ("activeDeadlineSeconds", i(3600)),
                ("ttlSecondsAfterFinished", i(3600)),
                (
                    "template",
                    map(vec![(
                        "spec",
                        map(vec![
                            ("restartPolicy", s("Never")),
                            ("containers", Y::Seq(vec![container])),
                        ]),
                    )]),
                ),
            ]),
        ),
    ]);
    document(
        &format!(
            "{}\nRun after each rollout (kubectl -n {} create -f warmup-job.yaml, or as a post-upgrade hook):\nthe seeds' 100 sequential requests through the Service. Each pod's own sidecar (see\nvllm-deployment-patch.yaml) already warms it before it turns ready; this Job checks the\nService end to end and shows the cold-start cost in its log.",
            crate::header(t, "Warm-up Job."),
            o.namespace
        ),
        &y,
    )
}
