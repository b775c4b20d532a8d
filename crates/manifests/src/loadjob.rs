//! The load Job (`inferscale generate --load-job`): the workers of one split load as an
//! Indexed Job, each pod's completion index its `--segment`, and the script that starts it
//! with a fresh shared start, waits for it and merges what the workers printed.
//!
//! Kubernetes runs the workers; inferscale only splits the schedule before and merges the
//! histograms after. Each worker writes its part on an `emptyDir` (the root filesystem is
//! read-only) and prints it to stdout between marker lines (`inferscale load --emit-part`),
//! so `kubectl logs` carries it out of the cluster and `inferscale merge -` reads the logs.

use crate::yaml::{Y, document, i, map, s};
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
// Long: the Job manifest in document order, each field with the comment that explains it.
pub fn load_job(o: &Options, lj: &LoadJob) -> String {
    let url = format!(
        "http://{}.{}.svc:{}",
        o.service, o.namespace, o.service_port.1
    );
    let mut args = vec![
        s("load"),
        s("--url"),
        s(url),
        s("--segment"),
        s(format!("$(JOB_COMPLETION_INDEX)/{}", lj.workers)),
        s("--start-at"),
        s(lj.start_at.clone()),
        s("--warmup"),
        s("0"),
        s("--no-metrics"),
        s("--out"),
        s(format!("{OUT_DIR}/part.json")),
        s("--emit-part"),
    ];
    args.extend(lj.load_args.iter().map(|a| s(a.clone())));
    let mut env = vec![map(vec![
        ("name", s("JOB_COMPLETION_INDEX")),
        (
            "valueFrom",
            map(vec![(
                "fieldRef",
                map(vec![(
                    "fieldPath",
                    s("metadata.annotations['batch.kubernetes.io/job-completion-index']"),
                )]),
            )]),
        ),
    ])];
    if let Some((secret, key)) = &lj.api_key_secret {
        env.push(map(vec![
            ("name", s("OPENAI_API_KEY")),
            (
                "valueFrom",
                map(vec![(
                    "secretKeyRef",
                    map(vec![("name", s(secret.clone())), ("key", s(key.clone()))]),
                )]),
            ),
        ]));
    }
    let name = job_name(o);
    let labels = || {
        map(vec![
            ("app.kubernetes.io/name", s("inferscale")),
            ("app.kubernetes.io/component", s("load")),
            ("app.kubernetes.io/instance", s(name.clone())),
        ])
    };
    let container = map(vec![
        ("name", s("load")),
        ("image", s(o.inferscale_image.clone())),
        ("args", Y::Seq(args)),
        ("env", Y::Seq(env)),
        (
            "resources",
            map(vec![
                (
                    "requests",
                    map(vec![("cpu", s(lj.cpu.clone())), ("memory", s("512Mi"))]),
                ),
                ("limits", map(vec![("memory", s("2Gi"))])),
            ]),
        ),
        ("securityContext", crate::k8s::locked_down()),
        (
            "volumeMounts",
            Y::Seq(vec![map(vec![
                ("name", s("out")),
                ("mountPath", s(OUT_DIR)),
            ])]),
        ),
    ]);
    // Workers on different nodes (and zones where there are several), so that one node's
    // network or CPU does not limit them all.
    let spread = |key: &str| {
        map(vec![
            ("maxSkew", i(1)),
            ("topologyKey", s(key)),
            ("whenUnsatisfiable", s("ScheduleAnyway")),
            (
                "labelSelector",
                map(vec![(
                    "matchLabels",
                    map(vec![("app.kubernetes.io/instance", s(name.clone()))]),
                )]),
            ),
        ])
    };
    let pod = map(vec![
        ("restartPolicy", s("Never")),
        ("automountServiceAccountToken", Y::Bool(false)),
        ("enableServiceLinks", Y::Bool(false)),
        (
            "securityContext",
            map(vec![
                ("runAsNonRoot", Y::Bool(true)),
                ("runAsUser", i(65532)),
                ("runAsGroup", i(65532)),
                ("seccompProfile", map(vec![("type", s("RuntimeDefault"))])),
            ]),
        ),
        (
            "topologySpreadConstraints",
            Y::Seq(vec![
                spread("kubernetes.io/hostname"),
                spread("topology.kubernetes.io/zone"),
            ]),
        ),
        ("containers", Y::Seq(vec![container])),
        (
            "volumes",
            Y::Seq(vec![map(vec![
                ("name", s("out")),
                ("emptyDir", map(vec![("sizeLimit", s("256Mi"))])),
            ])]),
        ),
    ]);
    let y = map(vec![
        ("apiVersion", s("batch/v1")),
        ("kind", s("Job")),
        (
            "metadata",
            map(vec![
                ("name", s(name.clone())),
                ("namespace", s(o.namespace.clone())),
                (
                    "labels",
                    map(vec![
                        ("app.kubernetes.io/managed-by", s("inferscale")),
                        ("app.kubernetes.io/component", s("load")),
                    ]),
                ),
            ]),
        ),
        (
            "spec",
            map(vec![
                ("completionMode", s("Indexed")),
                ("completions", i(i64::from(lj.workers))),
                ("parallelism", i(i64::from(lj.workers))),
                // A retried worker would start late and send its share twice; a failed one
                // stays failed, and the merge names it missing.
                ("backoffLimitPerIndex", i(0)),
                ("activeDeadlineSeconds", i(lj.deadline_s as i64)),
                // A day to collect the logs before the Job and its pods go.
                ("ttlSecondsAfterFinished", i(86_400)),
                (
                    "template",
                    map(vec![
                        ("metadata", map(vec![("labels", labels())])),
                        ("spec", pod),
                    ]),
                ),
            ]),
        ),
    ]);
    document(
        &format!(
            "Load Job: {n} workers of one split load against http://{svc}.{ns}.svc:{port}.\nGenerated by inferscale {v}. Worker I (the pod's completion index) sends the I-th of\nevery {n} requests of the shared schedule from the start below, and prints its part at the end.\nStart it with load-job.sh, which writes a fresh start time, waits, and merges the parts from\nthe pods' logs into run.json (inferscale merge -). Warm the server up first (warmup-job.yaml).\nThe workers send with --no-metrics: going through the Service, /metrics would come from a\ndifferent replica each time; the server's side is Prometheus' (inferscale monitor, check).",
            n = lj.workers,
            svc = o.service,
            ns = o.namespace,
            port = o.service_port.1,
            v = env!("CARGO_PKG_VERSION"),
        ),
        &y,
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
            contents: load_job(o, lj),
        },
        File {
            path: "load-job.sh".into(),
            contents: script(o, lj),
        },
    ];
    crate::check_files(&files)?;
    Ok(files)
}
