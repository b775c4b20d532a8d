//! The generated files for the default run: snapshots, every object valid against the real
//! CRD schemas and KEDA's/HPA's rules, the seeds' own ScaledObject through the same validator,
//! and bad inputs refused.

#![allow(clippy::unwrap_used)]

use std::path::Path;

use inferscale_analysis::Thresholds;
use inferscale_manifests::karpenter::{
    consolidate_after_s, gpu_limit, nodes_for, replicas_per_node,
};
use inferscale_manifests::validate::{lint, object, schema_for};
use inferscale_manifests::{Options, generate, yaml_documents};
use serde_json::json;

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

/// The objects of a YAML stream.
fn documents(text: &str) -> Vec<serde_json::Value> {
    yaml_documents(text).into_iter().map(yaml).collect()
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
            "karpenter-nodepool.yaml",
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
        for doc in documents(&f.contents) {
            if let Some(kind) = doc["kind"].as_str() {
                assert_eq!(object(&doc), Vec::new(), "{}", f.path);
                kinds.push(kind.to_owned());
            }
        }
    }
    kinds.sort();
    assert_eq!(
        kinds,
        [
            "EC2NodeClass",
            "Job",
            "NodePool",
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

/// Both objects of `karpenter-nodepool.yaml` pass the real Karpenter CRD schemas (and their
/// CEL rules) with nothing to report, and carry what the rest of the configuration relies
/// on: GPU requirements, the taint the Deployment patch tolerates, WhenEmpty consolidation no
/// sooner than the ScaledObject's scale-in window plus a cold start, one node at a time, and a
/// GPU limit from the replica maximum.
#[test]
fn the_karpenter_node_pool_and_node_class_validate_against_the_crds() {
    let t = thresholds();
    let o = options();
    let files = generate(&t, &o).unwrap();
    let text = &files
        .iter()
        .find(|f| f.path == "karpenter-nodepool.yaml")
        .unwrap()
        .contents;
    let docs = documents(text);
    assert_eq!(docs.len(), 2, "{text}");
    let (pool, class) = (&docs[0], &docs[1]);
    assert_eq!(
        (pool["apiVersion"].as_str(), pool["kind"].as_str()),
        (Some("karpenter.sh/v1"), Some("NodePool"))
    );
    assert_eq!(
        (class["apiVersion"].as_str(), class["kind"].as_str()),
        (Some("karpenter.k8s.aws/v1"), Some("EC2NodeClass"))
    );
    for doc in &docs {
        assert!(
            schema_for(
                doc["apiVersion"].as_str().unwrap(),
                doc["kind"].as_str().unwrap()
            )
            .is_some()
        );
        assert_eq!(object(doc), Vec::new(), "{doc}");
    }
    let spec = &pool["spec"];
    let reqs = spec["template"]["spec"]["requirements"].as_array().unwrap();
    let values = |key: &str| {
        reqs.iter()
            .find(|r| r["key"] == key)
            .unwrap_or_else(|| panic!("no requirement on {key}"))["values"]
            .clone()
    };
    assert_eq!(
        values("karpenter.k8s.aws/instance-gpu-name"),
        json!(["l40s"])
    );
    assert_eq!(values("karpenter.k8s.aws/instance-gpu-count"), json!(["1"]));
    assert_eq!(values("karpenter.sh/capacity-type"), json!(["on-demand"]));
    assert_eq!(values("kubernetes.io/arch"), json!(["amd64"]));
    assert_eq!(
        values("karpenter.k8s.aws/instance-category"),
        json!(["g", "p"])
    );
    assert_eq!(
        spec["template"]["spec"]["taints"],
        json!([{"key": "nvidia.com/gpu", "effect": "NoSchedule"}])
    );
    assert_eq!(
        spec["template"]["spec"]["nodeClassRef"],
        json!({"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": class["metadata"]["name"]})
    );
    let d = &spec["disruption"];
    assert_eq!(d["consolidationPolicy"], "WhenEmpty");
    assert_eq!(d["budgets"], json!([{"nodes": "1"}]));
    // 300 s of scale-down window (the scale-in condition, and the cold start) + 300 s.
    assert_eq!(consolidate_after_s(&t, &o), 600);
    assert_eq!(d["consolidateAfter"], "10m");
    let so = yaml(&files[0].contents);
    let window = so["spec"]["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]["scaleDown"]
        ["stabilizationWindowSeconds"]
        .as_u64()
        .unwrap();
    assert!(u64::from(consolidate_after_s(&t, &o)) >= window + u64::from(o.cold_start_s));
    assert_eq!(spec["limits"]["nvidia.com/gpu"], json!(o.max_replicas));
    // The vLLM pods tolerate the taint.
    let patch = yaml(
        &files
            .iter()
            .find(|f| f.path == "vllm-deployment-patch.yaml")
            .unwrap()
            .contents,
    );
    assert_eq!(
        patch["spec"]["template"]["spec"]["tolerations"],
        json!([{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}])
    );
    let c = &class["spec"];
    assert_eq!(c["amiSelectorTerms"], json!([{"alias": "al2023@latest"}]));
    assert_eq!(
        c["subnetSelectorTerms"][0]["tags"]["karpenter.sh/discovery"],
        "${CLUSTER_NAME}"
    );
    assert_eq!(c["blockDeviceMappings"][0]["ebs"]["volumeSize"], "200Gi");
}

/// More GPUs per node than a replica needs: fewer nodes, the limit rounded up to whole nodes,
/// and spot capacity when asked for.
#[test]
fn a_node_with_several_gpus_holds_several_replicas() {
    let t = thresholds();
    let mut o = options();
    o.max_replicas = 5;
    o.nodes.gpus_per_node = 4;
    o.nodes.gpus_per_replica = 1;
    o.nodes.capacity_types = vec!["spot".into(), "on-demand".into()];
    assert_eq!(replicas_per_node(&o), 4);
    assert_eq!(nodes_for(5, &o), 2);
    assert_eq!(gpu_limit(&o), 8);
    let files = generate(&t, &o).unwrap();
    let text = &files
        .iter()
        .find(|f| f.path == "karpenter-nodepool.yaml")
        .unwrap()
        .contents;
    let pool = &documents(text)[0];
    assert_eq!(pool["spec"]["limits"]["nvidia.com/gpu"], 8);
    let reqs = pool["spec"]["template"]["spec"]["requirements"]
        .as_array()
        .unwrap();
    assert!(
        reqs.iter()
            .any(|r| r["values"] == json!(["spot", "on-demand"]))
    );
    assert!(reqs.iter().any(|r| r["values"] == json!(["4"])));
}

/// A NodePool with a value the CRD refuses is reported with the field's path.
#[test]
fn a_bad_node_pool_is_reported_with_the_field_path() {
    let files = generate(&thresholds(), &options()).unwrap();
    let text = &files
        .iter()
        .find(|f| f.path == "karpenter-nodepool.yaml")
        .unwrap()
        .contents;
    let good = documents(text).remove(0);
    let report = |change: &dyn Fn(&mut serde_json::Value)| {
        let mut bad = good.clone();
        change(&mut bad);
        object(&bad)
    };
    let policy = report(&|p| p["spec"]["disruption"]["consolidationPolicy"] = json!("Sometimes"));
    assert_eq!(policy.len(), 1, "{}", joined(&policy));
    assert_eq!(policy[0].path, "spec.disruption.consolidationPolicy");
    assert!(
        policy[0].message.contains("\"Sometimes\" is not one of"),
        "{}",
        joined(&policy)
    );
    let after = report(&|p| p["spec"]["disruption"]["consolidateAfter"] = json!("5 minutes"));
    assert_eq!(after.len(), 1, "{}", joined(&after));
    assert_eq!(after[0].path, "spec.disruption.consolidateAfter");
    assert!(
        after[0].message.contains("does not match"),
        "{}",
        joined(&after)
    );
    let typo = report(&|p| {
        p["spec"]["disruption"]["consolidateAftr"] = json!("5m");
        p["spec"]["template"]["spec"]["taints"][0]["effect"] = json!("NoScheduling");
        p["spec"]["template"]["spec"]["requirements"][1]["values"] = json!([]);
    });
    let all = joined(&typo);
    assert!(
        all.contains("spec.disruption.consolidateAftr: unknown field"),
        "{all}"
    );
    assert!(all.contains("spec.template.spec.taints[0].effect"), "{all}");
    assert!(
        all.contains("spec.template.spec.requirements[1].values: requirements with operator 'In'"),
        "{all}"
    );
}

/// The seeds' own NodePool and EC2NodeClass (from the EKS guide) pass the same validator.
#[test]
fn the_seeds_karpenter_objects_pass_the_validator() {
    let seeds = documents(&testdata(
        "aws-eks/karpenter-gpu-inf-ec2nodeclass-nodepool.yaml",
    ));
    let kinds: Vec<&str> = seeds.iter().map(|d| d["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["EC2NodeClass", "NodePool"]);
    for doc in &seeds {
        assert_eq!(object(doc), Vec::new(), "{doc}");
    }
}

#[test]
fn bad_node_options_are_refused_with_the_flag() {
    let t = thresholds();
    for (change, flag) in [
        (
            Box::new(|o: &mut Options| o.nodes.gpu_name = "L40S".into())
                as Box<dyn Fn(&mut Options)>,
            "--gpu-name",
        ),
        (
            Box::new(|o: &mut Options| o.nodes.gpus_per_replica = 0),
            "--gpus-per-replica",
        ),
        (
            Box::new(|o: &mut Options| {
                o.nodes.gpus_per_replica = 2;
                o.nodes.gpus_per_node = 1;
            }),
            "--gpus-per-node",
        ),
        (
            Box::new(|o: &mut Options| o.nodes.capacity_types = vec!["preemptible".into()]),
            "--capacity-types",
        ),
        (
            Box::new(|o: &mut Options| o.nodes.capacity_types = vec![]),
            "--capacity-types",
        ),
        (
            Box::new(|o: &mut Options| o.nodes.root_volume_gib = 0),
            "--root-volume",
        ),
        (
            Box::new(|o: &mut Options| o.deployment = "a".repeat(62)),
            "--deployment",
        ),
    ] {
        let mut o = options();
        change(&mut o);
        let e = generate(&t, &o).unwrap_err();
        assert!(e.to_string().contains(flag), "{flag}: {e}");
    }
}

/// thresholds.json as `inferscale run` leaves it: tuned (`scaling`).
fn tuned() -> Thresholds {
    serde_json::from_str(&testdata("runs/thresholds-tuned.json")).unwrap()
}

#[test]
fn the_tuned_policy_is_written_validated_and_explained() {
    let t = tuned();
    let p = t.scaling.clone().unwrap();
    for scaler in [
        inferscale_manifests::ScalerKind::Prometheus,
        inferscale_manifests::ScalerKind::External,
    ] {
        let mut o = options();
        o.model_name = t.source.model.clone();
        o.policy = Some(p.clone());
        o.max_replicas = p.max_replicas.unwrap();
        o.scaler = scaler;
        let files = generate(&t, &o).unwrap();
        let so = files
            .iter()
            .find(|f| f.path == "scaledobject.yaml")
            .unwrap();
        insta::assert_snapshot!(
            format!("tuned-{:?}-scaledobject.yaml", scaler).to_lowercase(),
            so.contents
        );
        let doc = yaml(&so.contents);
        assert_eq!(object(&doc), Vec::new());
        assert!(
            lint(&doc)
                .iter()
                .all(|f| f.severity != inferscale_manifests::validate::Severity::Error),
            "{}",
            joined(&lint(&doc))
        );
        // The choices carry their reasons, and the numbers are the policy's.
        assert!(
            so.contents
                .contains(&format!("threshold: \"{}\"", p.target))
                || scaler == inferscale_manifests::ScalerKind::External
        );
        assert!(so.contents.contains(&format!(
            "stabilizationWindowSeconds: {}",
            p.scale_down.window_s
        )));
        // The guardrail asks for at most `guardrail_ratio_max` times the ready pods: its
        // p95 is read up to that many times its threshold, in the query or in the scaler.
        let (g, r) = (p.guardrail_s.unwrap(), p.guardrail_ratio_max.unwrap());
        let guard = doc["spec"]["triggers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| {
                t["name"] == "queue-time-guardrail" || t["metadata"]["latencyTarget"].is_string()
            })
            .unwrap_or_else(|| panic!("no guardrail: {}", so.contents));
        if scaler == inferscale_manifests::ScalerKind::Prometheus {
            let q = guard["metadata"]["query"].as_str().unwrap();
            assert!(
                q.starts_with("clamp_max(") && q.trim_end().ends_with(&format!("{}\n)", r * g)),
                "{q}"
            );
            inferscale_promql::Query::parse(q).unwrap_or_else(|e| panic!("{q}: {e}"));
        } else {
            let meta: std::collections::BTreeMap<String, String> =
                serde_json::from_value(guard["metadata"].clone()).unwrap();
            let cfg = inferscale_scaler::Config::from_metadata(&meta, "default").unwrap();
            assert_eq!(cfg.guardrail_ratio_max, Some(r));
        }
        // The README explains the policy shipped, not the seeds' queue shape: every choice
        // with its reason, the behaviour the ScaledObject has, the evidence of the tuning.
        let readme = &files
            .iter()
            .find(|f| f.path == "README.md")
            .unwrap()
            .contents;
        assert!(readme.contains("## The scaling policy"), "{readme}");
        for (k, why) in &p.reasons {
            assert!(readme.contains(&format!("| `{k}` | {} |", why.replace('|', "\\|"))));
        }
        assert!(!readme.contains("Queue depth is the trigger"), "{readme}");
        assert!(readme.contains(&format!(
            "scale in on the\n  highest proposal of {} s",
            p.scale_down.window_s
        )));
        assert!(readme.contains("inferscale tune` chose it"), "{readme}");
        // A shorter trend window is the line's, in the query or in the scaler; the default
        // (five minutes) when the policy names none.
        for (window, span, samples) in [(None, "5m", 16), (Some(120), "2m", 7)] {
            let mut o = o.clone();
            let mut q = p.clone();
            q.trend_window_s = window;
            o.policy = Some(q);
            let files = generate(&t, &o).unwrap();
            let so = files
                .iter()
                .find(|f| f.path == "scaledobject.yaml")
                .unwrap();
            let doc = yaml(&so.contents);
            assert_eq!(object(&doc), Vec::new());
            let triggers = doc["spec"]["triggers"].as_array().unwrap();
            if scaler == inferscale_manifests::ScalerKind::Prometheus {
                let ahead = triggers
                    .iter()
                    .find(|t| t["name"].as_str().is_some_and(|n| n.ends_with("-ahead")))
                    .unwrap_or_else(|| panic!("no anticipation: {}", so.contents));
                let q = ahead["metadata"]["query"].as_str().unwrap();
                assert!(q.contains(&format!("[{span}:15s]")), "{q}");
                assert!(q.contains(&format!(">= {samples}\n")), "{q}");
                inferscale_promql::Query::parse(q).unwrap_or_else(|e| panic!("{q}: {e}"));
            } else {
                let meta: std::collections::BTreeMap<String, String> =
                    serde_json::from_value(triggers[0]["metadata"].clone()).unwrap();
                assert_eq!(
                    meta.get("trendWindow").map(String::as_str),
                    window.map(|_| "120s")
                );
                let cfg = inferscale_scaler::Config::from_metadata(&meta, "default").unwrap();
                assert_eq!(cfg.trend_window_s, f64::from(window.unwrap_or(300)));
            }
        }
        assert!(
            so.contents
                .replace("\n# ", " ")
                .contains("inferscale tune chose and rehearsed it")
                || scaler == inferscale_manifests::ScalerKind::External
        );
        // The NodePool consolidates as the policy says.
        let pool = files
            .iter()
            .find(|f| f.path == "karpenter-nodepool.yaml")
            .unwrap();
        assert_eq!(consolidate_after_s(&t, &o), p.consolidate_after_s);
        let after = match p.consolidate_after_s {
            0 => "0s".to_owned(),
            s if s % 60 == 0 => format!("{}m", s / 60),
            s => format!("{}m{}s", s / 60, s % 60),
        };
        assert!(
            pool.contents
                .contains(&format!("consolidateAfter: {after}")),
            "{after}: {}",
            pool.contents
        );
    }
}

/// Every query in the generated files: the ScaledObject's triggers, the rules and the
/// dashboards' panels, with Grafana's variables filled in.
fn queries(files: &[inferscale_manifests::File]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for f in files {
        if f.path == "scaledobject.yaml" {
            for t in yaml(&f.contents)["spec"]["triggers"].as_array().unwrap() {
                if let Some(q) = t["metadata"]["query"].as_str() {
                    out.push((f.path.clone(), q.to_owned()));
                }
            }
        } else if f.path == "prometheus-rules.yaml" {
            for g in yaml(&f.contents)["groups"].as_array().unwrap() {
                for r in g["rules"].as_array().unwrap() {
                    out.push((f.path.clone(), r["expr"].as_str().unwrap().to_owned()));
                }
            }
        } else if f.path.ends_with(".json") {
            let doc: serde_json::Value = serde_json::from_str(&f.contents).unwrap();
            for p in doc["panels"].as_array().unwrap() {
                for t in p["targets"].as_array().unwrap() {
                    let q = t["expr"].as_str().unwrap();
                    let vars: Vec<(String, String)> = inferscale_manifests::variables_in(q)
                        .into_iter()
                        .map(|v| (v, "1m".to_owned()))
                        .collect();
                    out.push((
                        f.path.clone(),
                        inferscale_manifests::with_variables(q, &vars),
                    ));
                }
            }
        }
    }
    out
}

/// For each engine the files are written for, every object validates, every query reads
/// only that engine's names (each one the catalog has it serving) and DCGM's, and what the
/// engine lacks is said in the README rather than queried; a query that could only return
/// nothing is a defect here.
#[test]
fn each_engine_s_files_read_only_its_own_metric_names() {
    use inferscale_catalog::{Engine, Signal, names_for};
    for engine in [Engine::Vllm, Engine::Sglang, Engine::Tgi, Engine::LlamaCpp] {
        let mut o = options();
        o.engine = engine;
        let files = generate(&thresholds(), &o).unwrap_or_else(|e| panic!("{engine}: {e}"));
        for f in files.iter().filter(|f| f.path.ends_with(".yaml")) {
            for doc in documents(&f.contents) {
                if doc["kind"].as_str().is_some() {
                    assert_eq!(object(&doc), Vec::new(), "{engine}: {}", f.path);
                }
            }
        }
        let served: Vec<&str> = Signal::ALL
            .into_iter()
            .flat_map(names_for)
            .filter(|n| n.engine == engine || n.engine == Engine::Dcgm)
            .map(|n| n.name)
            .collect();
        let qs = queries(&files);
        assert!(qs.len() > 20, "{engine}: {} queries", qs.len());
        for (path, q) in &qs {
            let parsed = inferscale_promql::Query::parse(q)
                .unwrap_or_else(|e| panic!("{engine}: {path}: {q}: {e}"));
            for name in parsed.metric_names() {
                let base = ["_bucket", "_sum", "_count"]
                    .iter()
                    .find_map(|s| name.strip_suffix(s))
                    .unwrap_or(&name);
                let allowed = served.contains(&name.as_str())
                    || served.contains(&base)
                    || name == "up"
                    || (engine == Engine::Vllm
                        && (name.starts_with("vllm:") || name.starts_with("http_")));
                assert!(
                    allowed,
                    "{engine}: {path} reads {name}, which {engine} does not serve: {q}"
                );
            }
        }
        let readme = &files
            .iter()
            .find(|f| f.path == "README.md")
            .unwrap()
            .contents;
        let so = yaml(&files[0].contents);
        let triggers = so["spec"]["triggers"].as_array().unwrap();
        if engine == Engine::LlamaCpp {
            assert!(readme.contains("## The engine: llama.cpp"), "{readme}");
            assert!(readme.contains("serves no latency histogram"), "{readme}");
            assert!(
                triggers.iter().all(|t| t["name"] != "queue-time-guardrail"),
                "{so}"
            );
            let rules = &files
                .iter()
                .find(|f| f.path == "prometheus-rules.yaml")
                .unwrap()
                .contents;
            assert!(
                rules.contains("alert: HighLatency")
                    && rules.contains("llamacpp:tokens_predicted_total"),
                "{rules}"
            );
            assert!(
                !rules.contains("KVCacheFull") && rules.contains("LlamaCppTargetDown"),
                "{rules}"
            );
        } else {
            assert!(!readme.contains("serves no latency histogram"), "{engine}");
        }
        if engine == Engine::Vllm {
            assert!(!readme.contains("## The engine:"), "{readme}");
        }
    }
}

/// Through `inferscale scaler`, a llama.cpp deployment's trigger names its engine (the
/// scaler refuses a pod serving another's) and asks for no queue-time guardrail, which
/// llama.cpp cannot feed; vLLM's keeps its guardrail and needs no engine setting.
#[test]
fn the_external_trigger_names_a_non_vllm_engine_and_only_what_it_serves() {
    use inferscale_catalog::Engine;
    for (engine, guard, named) in [
        (Engine::Vllm, true, None),
        (Engine::LlamaCpp, false, Some("llamacpp")),
    ] {
        let mut o = options();
        o.engine = engine;
        o.scaler = inferscale_manifests::ScalerKind::External;
        let files = generate(&thresholds(), &o).unwrap();
        let so = yaml(&files[0].contents);
        let meta = &so["spec"]["triggers"][0]["metadata"];
        assert_eq!(meta["latencyMetric"].is_string(), guard, "{engine}: {meta}");
        assert_eq!(meta["engine"].as_str(), named, "{engine}: {meta}");
    }
}

#[test]
fn the_arrival_rate_on_an_engine_that_counts_no_requests_counts_its_tokens() {
    use inferscale_analysis::scaling::{Policy, Primary};
    use inferscale_catalog::Engine;
    let t = thresholds();
    let k = t.workload.output_tokens_mean.unwrap();
    let p = Policy::derive(&t, Primary::ArrivalRate, 0.9, 50.0, 270.0, 1);
    assert_eq!(p.output_tokens_mean, Some(k));
    let mut o = options();
    o.policy = Some(p.clone());
    // vLLM counts finished requests: its counter, not its tokens.
    let q = inferscale_manifests::keda::primary_query(&p, &o);
    assert!(q.contains("vllm:request_success_total"), "{q}");
    assert!(!q.contains("generation_tokens"), "{q}");
    // llama.cpp counts none: its generated tokens over the measured mean output.
    o.engine = Engine::LlamaCpp;
    let q = inferscale_manifests::keda::primary_query(&p, &o);
    assert!(q.contains("llamacpp:tokens_predicted_total"), "{q}");
    assert!(q.contains(&format!("/ {k:.2}")), "{q}");
    let parsed = inferscale_promql::Query::parse(&q).unwrap_or_else(|e| panic!("{q}: {e}"));
    for name in parsed.metric_names() {
        assert!(name.starts_with("llamacpp:"), "{name} in {q}");
    }
    // Its README explains no guardrail it has not got, nor vLLM's names.
    let files = generate(&t, &o).unwrap();
    let readme = &files
        .iter()
        .find(|f| f.path == "README.md")
        .unwrap()
        .contents;
    assert!(readme.contains("## The scaling policy"), "{readme}");
    for absent in ["p95 queue time", "guardrail_ratio_max", "vllm:"] {
        assert!(!readme.contains(absent), "{absent} in {readme}");
    }
    // Without a measured mean output there is nothing to count them from.
    let mut bare = p;
    bare.output_tokens_mean = None;
    let q = inferscale_manifests::keda::primary_query(&bare, &o);
    assert!(!q.contains("tokens_predicted"), "{q}");
    // Where they can be counted, and why not elsewhere.
    use inferscale_manifests::keda::{Uncounted, arrivals_counted};
    assert_eq!(arrivals_counted(&o, Some(k)), Ok(()));
    assert_eq!(arrivals_counted(&o, None), Err(Uncounted::NoMeanOutput));
    o.scaler = inferscale_manifests::ScalerKind::External;
    assert_eq!(
        arrivals_counted(&o, Some(k)),
        Err(Uncounted::ByTheExternalScaler)
    );
    o.engine = Engine::Vllm;
    assert_eq!(arrivals_counted(&o, None), Ok(()));
}
