//! The load Job (`inferscale generate --load-job`): a snapshot, validity against Kubernetes'
//! batch/v1 schema, what each worker is told, the locked-down pod, and refusals.

#![allow(clippy::unwrap_used)]

use inferscale_manifests::loadjob::{LoadJob, generate};
use inferscale_manifests::validate::{object, schema, schema_for};
use inferscale_manifests::{GenerateError, Options};

fn load_job(workers: u32) -> LoadJob {
    LoadJob {
        workers,
        start_at: "2026-12-02T18:00:00Z".into(),
        load_args: vec![
            "--rates".into(),
            "40,80".into(),
            "--step".into(),
            "60s".into(),
        ],
        cpu: "2".into(),
        api_key_secret: Some(("vllm-api-key".into(), "key".into())),
        deadline_s: 4 * 3600,
    }
}

fn job(files: &[inferscale_manifests::File]) -> serde_json::Value {
    inferscale_manifests::yaml::from_str(&files[0].contents).unwrap()
}

#[test]
fn the_load_job_matches_its_snapshot() {
    let files = generate(&Options::example(), &load_job(4)).unwrap();
    let names: Vec<&str> = files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(names, ["load-job.yaml", "load-job.sh"]);
    for f in &files {
        insta::assert_snapshot!(f.path.clone(), f.contents);
    }
}

#[test]
fn the_load_job_validates_against_kubernetes_batch_v1_schema() {
    let files = generate(&Options::example(), &load_job(4)).unwrap();
    let j = job(&files);
    assert_eq!(object(&j), Vec::new());
    let mut errors = Vec::new();
    schema(schema_for("batch/v1", "Job").unwrap(), &j, "", &mut errors);
    assert_eq!(errors, Vec::<String>::new());
    // The schema is not lenient: a misspelt field of the pod template is refused.
    let mut bad = j.clone();
    bad["spec"]["template"]["spec"]["containers"][0]["volumeMount"] = serde_json::json!([]);
    bad["spec"]["parallelism"] = serde_json::json!("4");
    let findings = object(&bad);
    let text: Vec<String> = findings.iter().map(ToString::to_string).collect();
    assert!(
        text.iter()
            .any(|f| f.contains("spec.template.spec.containers[0].volumeMount: unknown field")),
        "{text:?}"
    );
    assert!(
        text.iter()
            .any(|f| f.contains("spec.parallelism: expected integer")
                && f.contains("Kubernetes' batch/v1 Job schema")),
        "{text:?}"
    );
}

#[test]
fn each_worker_runs_its_segment_of_one_schedule_locked_down() {
    let files = generate(&Options::example(), &load_job(6)).unwrap();
    let j = job(&files);
    let spec = &j["spec"];
    assert_eq!(spec["completionMode"], "Indexed");
    assert_eq!(spec["completions"], 6);
    assert_eq!(spec["parallelism"], 6);
    assert_eq!(spec["backoffLimitPerIndex"], 0);
    let pod = &spec["template"]["spec"];
    assert_eq!(pod["restartPolicy"], "Never");
    assert_eq!(pod["automountServiceAccountToken"], false);
    let c = &pod["containers"][0];
    let args: Vec<&str> = c["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    let after = |flag: &str| args[args.iter().position(|a| *a == flag).unwrap() + 1];
    assert_eq!(args[0], "load");
    assert_eq!(after("--url"), "http://vllm.llm.svc:8000");
    assert_eq!(after("--segment"), "$(JOB_COMPLETION_INDEX)/6");
    assert_eq!(after("--start-at"), "2026-12-02T18:00:00Z");
    assert_eq!(after("--rates"), "40,80");
    assert!(args.contains(&"--emit-part") && args.contains(&"--no-metrics"));
    // $(JOB_COMPLETION_INDEX) expands from the container's env: it is defined there.
    assert_eq!(c["env"][0]["name"], "JOB_COMPLETION_INDEX");
    assert_eq!(
        c["env"][0]["valueFrom"]["fieldRef"]["fieldPath"],
        "metadata.annotations['batch.kubernetes.io/job-completion-index']"
    );
    // The key comes from a Secret, never the manifest.
    assert_eq!(c["env"][1]["name"], "OPENAI_API_KEY");
    assert_eq!(
        c["env"][1]["valueFrom"]["secretKeyRef"]["name"],
        "vllm-api-key"
    );
    // Non-root, read-only root filesystem; the part goes to an emptyDir.
    assert_eq!(c["securityContext"]["runAsNonRoot"], true);
    assert_eq!(c["securityContext"]["readOnlyRootFilesystem"], true);
    assert_eq!(c["securityContext"]["allowPrivilegeEscalation"], false);
    assert_eq!(pod["securityContext"]["runAsUser"], 65532);
    assert_eq!(c["volumeMounts"][0]["mountPath"], "/out");
    assert!(pod["volumes"][0]["emptyDir"].is_object());
    assert_eq!(after("--out"), "/out/part.json");
    // No CPU limit: throttling would show as schedule lag.
    assert!(c["resources"]["limits"].get("cpu").is_none());
    // The script starts the Job with a fresh start time in place of the generated one.
    let sh = &files[1].contents;
    assert!(sh.contains("sed \"s/2026-12-02T18:00:00Z/$START/\" load-job.yaml"));
    assert!(sh.contains("inferscale merge - --out run.json \"$@\""));
    assert!(sh.contains("JOB=vllm-load"));
}

#[test]
fn a_job_without_workers_or_with_too_many_is_refused() {
    for n in [0, 1001] {
        match generate(&Options::example(), &load_job(n)) {
            Err(e @ GenerateError::Workers { .. }) => {
                assert!(e.to_string().contains(&format!("--workers {n}")), "{e}");
            }
            other => panic!("{n}: {other:?}"),
        }
    }
    let mut o = Options::example();
    o.namespace = "LLM".into();
    assert!(matches!(
        generate(&o, &load_job(2)),
        Err(GenerateError::Name {
            flag: "namespace",
            ..
        })
    ));
}
