//! The typed objects: the seeds' ScaledObject and every generated ScaledObject, PrometheusRule
//! and rule file load into them and write back as the same data; malformed files are refused
//! with the field's path and the line.

#![allow(clippy::unwrap_used)]

use std::path::Path;

use std::time::Duration;

use inferscale_manifests::objects::{
    After, Deployment, DeploymentPatch, EC2NodeClass, Job, JsonPatch, LoadError, NodePool,
    PatchOpKind, PrometheusRule, Quantity, RuleFile, ScaledObject, ServiceMonitor, appended_args,
    load, same_data, to_yaml,
};
use inferscale_manifests::yaml_documents;

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

fn gpu_limit(pool: &NodePool) -> Option<&Quantity> {
    pool.limit("nvidia.com/gpu")
}

#[test]
fn the_generated_node_pool_and_node_class_round_trip() {
    let files = generated();
    let text = &files
        .iter()
        .find(|f| f.path == "karpenter-nodepool.yaml")
        .unwrap()
        .contents;
    let docs = yaml_documents(text);
    assert_eq!(docs.len(), 2);
    let pool: NodePool = round_trips("karpenter-nodepool.yaml: NodePool", docs[0]);
    assert_eq!(pool.consolidation_policy(), "WhenEmpty");
    assert_eq!(
        pool.consolidate_after(),
        Some(After::Wait(Duration::from_secs(600)))
    );
    let budgets = pool.budgets();
    assert_eq!(budgets.len(), 1);
    assert_eq!(budgets[0].nodes, "1");
    assert_eq!(
        pool.requirement("karpenter.k8s.aws/instance-gpu-name")
            .map(|r| r.values.clone()),
        Some(vec!["l40s".to_owned()])
    );
    let taints = &pool.spec.template.spec.taints;
    assert_eq!(taints.len(), 1);
    assert_eq!(
        (taints[0].key.as_str(), taints[0].effect.as_str()),
        ("nvidia.com/gpu", "NoSchedule")
    );
    assert_eq!(
        gpu_limit(&pool),
        Some(&Quantity::Number(serde_json::Number::from(5)))
    );
    // The pods carry do-not-disrupt; the nodes do not (an empty node must go).
    assert!(!pool.do_not_disrupt());
    let class: EC2NodeClass = round_trips("karpenter-nodepool.yaml: EC2NodeClass", docs[1]);
    assert_eq!(
        pool.spec.template.spec.node_class_ref.name,
        class.metadata.name
    );
    assert_eq!(
        class.spec.ami_selector_terms[0].alias.as_deref(),
        Some("al2023@latest")
    );
    let root = &class.spec.block_device_mappings[0];
    assert_eq!(root.root_volume, Some(true));
    assert_eq!(
        root.ebs.as_ref().and_then(|e| e.volume_size.as_deref()),
        Some("200Gi")
    );
}

#[test]
fn the_seeds_node_pool_and_node_class_round_trip() {
    let seeds = testdata("aws-eks/karpenter-gpu-inf-ec2nodeclass-nodepool.yaml");
    let docs = yaml_documents(&seeds);
    let class: EC2NodeClass = round_trips("seeds: EC2NodeClass", docs[0]);
    assert_eq!(
        class.spec.role.as_deref(),
        Some("eksctl-KarpenterNodeRole-${CLUSTER_NAME}")
    );
    assert_eq!(class.spec.instance_store_policy.as_deref(), Some("RAID0"));
    assert!(class.spec.extra.contains_key("userData"));
    let pool: NodePool = round_trips("seeds: NodePool", docs[1]);
    // No disruption block: Karpenter's defaults.
    assert_eq!(pool.consolidation_policy(), "WhenEmptyOrUnderutilized");
    assert_eq!(pool.consolidate_after(), Some(After::Wait(Duration::ZERO)));
    assert_eq!(pool.budgets()[0].nodes, "10%");
    let generation = pool
        .requirement("karpenter.k8s.aws/instance-generation")
        .unwrap();
    assert_eq!(
        (generation.operator.as_str(), generation.values.as_slice()),
        ("Gt", ["4".to_owned()].as_slice())
    );
    assert_eq!(
        pool.limit("cpu"),
        Some(&Quantity::Number(serde_json::Number::from(1000)))
    );
    assert_eq!(pool.limit("memory"), Some(&Quantity::Text("5000Gi".into())));
    assert_eq!(pool.spec.template.spec.taints[0].key, "nvidia.com/gpu");
    // Written with the do-not-disrupt annotation on its nodes, it reads back.
    let annotated = docs[1].replace(
        "    metadata:\n      labels:\n",
        "    metadata:\n      annotations:\n        karpenter.sh/do-not-disrupt: \"true\"\n      labels:\n",
    );
    let pool: NodePool = round_trips("seeds: NodePool, annotated", &annotated);
    assert!(pool.do_not_disrupt());
}

#[test]
fn a_malformed_node_pool_is_refused_with_the_path_and_the_line() {
    let seeds = testdata("aws-eks/karpenter-gpu-inf-ec2nodeclass-nodepool.yaml");
    let pool = yaml_documents(&seeds)[1];
    let e = load::<NodePool>(&pool.replace("          effect: NoSchedule\n", "")).unwrap_err();
    assert_eq!(e.path, "spec.template.spec.taints[0]", "{e}");
    assert!(e.message.contains("missing field `effect`"), "{e}");
    let e = load::<NodePool>(&pool.replace("values: [\"4\"]", "values: 4")).unwrap_err();
    assert_eq!(e.path, "spec.template.spec.requirements[3].values", "{e}");
    assert!(e.line.is_some(), "{e}");
}
