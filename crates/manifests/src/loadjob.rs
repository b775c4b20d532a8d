//! The load Job (`inferscale generate --load-job`): the workers of one split load as an
//! Indexed Job, each pod's completion index its `--segment`, and the script that starts it
//! with a fresh shared start, waits for it and merges what the workers printed.
//!
//! Kubernetes runs the workers; inferscale only splits the schedule before and merges the
//! histograms after. Each worker writes its part on an `emptyDir` (the root filesystem is
//! read-only) and prints it to stdout between marker lines (`inferscale load --emit-part`),
//! so `kubectl logs` carries it out of the cluster and `inferscale merge -` reads the logs.

use serde_json::json;

use crate::k8s::{extra, quantities, string_map};
use crate::objects::{
    Container, Extra, Job, JobSpec, ObjectMeta, PodSpec, PodTemplateSpec, Resources, TemplateMeta,
    Volume, VolumeMount,
};
use crate::yaml::Explained;
use crate::{File, GenerateError, Options};

/// Workers one Job may have here. Kubernetes takes up to 100,000 indexes; a split load past a
/// thousand clients is a different test.
pub const MAX_WORKERS: u32 = 1000;

/// What the load Job runs.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadJob {
    /// Workers: the Job's completions and parallelism. Worker I runs `--segment I/N`.
    pub workers: u32,
    /// The shared start the manifest carries (RFC 3339, UTC). The script writes a fresh one
    /// when it creates the Job.
    pub start_at: String,
    /// Flags every worker's `inferscale load` gets: the plan and the requests (the caller
    /// checks them; `--url`, `--segment`, `--start-at` and `--out` are the Job's).
    pub load_args: Vec<String>,
    /// CPU each worker requests (a Kubernetes quantity). No CPU limit is set: throttling
    /// would show as schedule lag.
    pub cpu: String,
    /// The Secret and key holding the API key, passed as `OPENAI_API_KEY`.
    pub api_key_secret: Option<(String, String)>,
    /// How long the Job may run, seconds (its `activeDeadlineSeconds`).
    pub deadline_s: u64,
}

/// The Job's name: the Deployment's, with `-load`.
pub fn job_name(o: &Options) -> String {
    format!("{}-load", o.deployment)
}

/// Where each worker writes its part (an `emptyDir`).
const OUT_DIR: &str = "/out";

/// `load-job.yaml`.
// Long: the Job manifest in document order.
pub fn load_job(o: &Options, lj: &LoadJob) -> Explained<Job> {
    let url = format!(
        "http://{}.{}.svc:{}",
        o.service, o.namespace, o.service_port.1
    );
    let mut args = vec![
        "load".to_owned(),
        "--url".to_owned(),
        url,
        "--segment".to_owned(),
        format!("$(JOB_COMPLETION_INDEX)/{}", lj.workers),
        "--start-at".to_owned(),
        lj.start_at.clone(),
        "--warmup".to_owned(),
        "0".to_owned(),
        "--no-metrics".to_owned(),
        "--out".to_owned(),
        format!("{OUT_DIR}/part.json"),
        "--emit-part".to_owned(),
    ];
    args.extend(lj.load_args.iter().cloned());
    let mut env = vec![json!({
        "name": "JOB_COMPLETION_INDEX",
        "valueFrom": {
            "fieldRef": {
                "fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"
            }
        },
    })];
    if let Some((secret, key)) = &lj.api_key_secret {
        env.push(json!({
            "name": "OPENAI_API_KEY",
            "valueFrom": { "secretKeyRef": { "name": secret, "key": key } },
        }));
    }
    let name = job_name(o);
    let container = Container {
        name: "load".to_owned(),
        image: Some(o.inferscale_image.clone()),
        args: Some(args),
        resources: Some(Resources {
            requests: quantities(&[("cpu", lj.cpu.as_str()), ("memory", "512Mi")]),
            limits: quantities(&[("memory", "2Gi")]),
            extra: Extra::new(),
        }),
        volume_mounts: vec![VolumeMount {
            name: "out".to_owned(),
            mount_path: OUT_DIR.to_owned(),
            read_only: None,
            extra: Extra::new(),
        }],
        extra: extra(json!({
            "env": env,
            "securityContext": crate::k8s::locked_down(),
        })),
        ..Container::default()
    };
    // Workers on different nodes (and zones where there are several), so that one node's
    // network or CPU does not limit them all.
    let spread = |key: &str| {
        json!({
            "maxSkew": 1,
            "topologyKey": key,
            "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": { "matchLabels": { "app.kubernetes.io/instance": name } },
        })
    };
    let pod = PodSpec {
        restart_policy: Some("Never".to_owned()),
        containers: vec![container],
        volumes: vec![Volume {
            name: "out".to_owned(),
            source: extra(json!({ "emptyDir": { "sizeLimit": "256Mi" } })),
        }],
        extra: extra(json!({
            "automountServiceAccountToken": false,
            "enableServiceLinks": false,
            "securityContext": {
                "runAsNonRoot": true,
                "runAsUser": 65532,
                "runAsGroup": 65532,
                "seccompProfile": { "type": "RuntimeDefault" },
            },
            "topologySpreadConstraints": [
                spread("kubernetes.io/hostname"),
                spread("topology.kubernetes.io/zone"),
            ],
        })),
        ..PodSpec::default()
    };
    let object = Job {
        api_version: "batch/v1".to_owned(),
        kind: "Job".to_owned(),
        metadata: ObjectMeta {
            name: name.clone(),
            namespace: Some(o.namespace.clone()),
            labels: Some(string_map(&[
                ("app.kubernetes.io/managed-by", "inferscale"),
                ("app.kubernetes.io/component", "load"),
            ])),
            ..ObjectMeta::default()
        },
        spec: JobSpec {
            backoff_limit: None,
            active_deadline_seconds: Some(lj.deadline_s as i64),
            // A day to collect the logs before the Job and its pods go.
            ttl_seconds_after_finished: Some(86_400),
            template: PodTemplateSpec {
                metadata: Some(TemplateMeta {
                    labels: Some(string_map(&[
                        ("app.kubernetes.io/name", "inferscale"),
                        ("app.kubernetes.io/component", "load"),
                        ("app.kubernetes.io/instance", name.as_str()),
                    ])),
                    ..TemplateMeta::default()
                }),
                spec: Some(pod),
                extra: Extra::new(),
            },
            extra: extra(json!({
                "completionMode": "Indexed",
                "completions": lj.workers,
                "parallelism": lj.workers,
                // A retried worker would start late and send its share twice; a failed one
                // stays failed, and the merge names it missing.
                "backoffLimitPerIndex": 0,
            })),
        },
    };
    Explained::new(
        format!(
            "Load Job: {n} workers of one split load against http://{svc}.{ns}.svc:{port}.\nGenerated by inferscale {v}. Worker I (the pod's completion index) sends the I-th of\nevery {n} requests of the shared schedule from the start below, and prints its part at the end.\nStart it with load-job.sh, which writes a fresh start time, waits, and merges the parts from\nthe pods' logs into run.json (inferscale merge -). Warm the server up first (warmup-job.yaml).\nThe workers send with --no-metrics: going through the Service, /metrics would come from a\ndifferent replica each time; the server's side is Prometheus' (inferscale monitor, check).",
            n = lj.workers,
            svc = o.service,
            ns = o.namespace,
            port = o.service_port.1,
            v = env!("CARGO_PKG_VERSION"),
        ),
        object,
    )
}

/// `load-job.sh`: creates the Job with a fresh start, waits for it, and merges the parts.
pub fn script(o: &Options, lj: &LoadJob) -> String {
    format!(
        r#"#!/bin/sh
# Runs load-job.yaml ({n} workers) and merges what they printed into run.json.
#
#   sh load-job.sh [merge flags...]      e.g. sh load-job.sh --threshold 'p95(e2e)<5s'
#
# LEAD (seconds, default 120) is how far ahead the shared start is set: long enough for
# every worker to be scheduled and to pull the image. A worker that starts late sends at
# once and says by how much; the merge lists it. Needs kubectl (namespace {ns}) and
# inferscale on this machine. Generated by inferscale {v}.
set -eu
cd "$(dirname "$0")"
NS={ns}
JOB={job}
LEAD=${{LEAD:-120}}
at=$(( $(date +%s) + LEAD ))
START=$(date -u -d "@$at" +%Y-%m-%dT%H:%M:%SZ 2>/dev/null || date -u -r "$at" +%Y-%m-%dT%H:%M:%SZ)
sed "s/{start}/$START/" load-job.yaml | kubectl -n "$NS" create -f -
echo "load-job.sh: $JOB starts at $START; waiting for it to finish" >&2
while :; do
  state=$(kubectl -n "$NS" get job "$JOB" -o jsonpath='{{.status.conditions[*].type}}')
  case " $state " in
    *" Complete "*|*" Failed "*) break ;;
  esac
  sleep 10
done
echo "load-job.sh: $JOB ended ($state); collecting the parts" >&2
for pod in $(kubectl -n "$NS" get pods -l job-name="$JOB" --field-selector=status.phase=Succeeded -o name); do
  kubectl -n "$NS" logs "$pod"
done > "$JOB.logs"
# A failed worker leaves no part: merge refuses then, naming it, unless --allow-missing.
inferscale merge - --out run.json "$@" < "$JOB.logs"
echo "load-job.sh: wrote run.json; next: inferscale analyze run.json" >&2
"#,
        n = lj.workers,
        ns = o.namespace,
        job = job_name(o),
        start = lj.start_at,
        v = env!("CARGO_PKG_VERSION"),
    )
}

/// The load Job's files, the Job validated against Kubernetes' batch/v1 schema.
pub fn generate(o: &Options, lj: &LoadJob) -> Result<Vec<File>, GenerateError> {
    crate::check(o)?;
    if lj.workers == 0 || lj.workers > MAX_WORKERS {
        return Err(GenerateError::Workers {
            workers: lj.workers,
        });
    }
    let files = vec![
        File {
            path: "load-job.yaml".into(),
            contents: crate::written("load-job.yaml", load_job(o, lj).to_yaml())?,
        },
        File {
            path: "load-job.sh".into(),
            contents: script(o, lj),
        },
    ];
    crate::check_files(&files)?;
    Ok(files)
}
