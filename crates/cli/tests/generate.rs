//! `inferscale generate` end to end: promtool accepts the rules and passes the generated
//! tests; a real Prometheus scraping the simulator (and its DCGM endpoint) accepts every
//! generated query, the dashboards' and the ScaledObject's return data under load, and on an
//! idle simulator the ScaledObject's queries return 0 (never NaN); bad inputs are named.

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

mod common;

use common::{finite, inferscale, measured, prom_query, sim, stderr, stdout};
use inferscale_testkit::program;

fn tmp(name: &str) -> PathBuf {
    common::tmp("gen", name)
}

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/runs/thresholds-default.json")
}

fn generate(out: &Path, extra: &[&str]) -> Output {
    inferscale()
        .args(["generate", "--thresholds"])
        .arg(fixture())
        .arg("--out")
        .arg(out)
        .args(extra)
        .output()
        .unwrap()
}

#[test]
fn promtool_checks_the_rules_and_passes_the_generated_tests() {
    let out = tmp("promtool");
    let o = generate(
        &out,
        &[
            "--namespace",
            "llm",
            "--runbook-url",
            "https://runbooks.example.com/vllm",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let promtool = program("promtool");
    let check = Command::new(&promtool)
        .args(["check", "rules"])
        .arg(out.join("prometheus-rules.yaml"))
        .output()
        .unwrap();
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stdout)
    );
    assert!(String::from_utf8_lossy(&check.stdout).contains("SUCCESS: 9 rules found"));
    promtool_tests_pass(&promtool, &out, "the default manifests");
    // The PrometheusRule object carries the same group.
    let rule: serde_json::Value = inferscale_manifests::yaml::from_str::<serde_json::Value>(
        &std::fs::read_to_string(out.join("prometheusrule.yaml")).unwrap(),
    )
    .unwrap();
    let plain: serde_json::Value = inferscale_manifests::yaml::from_str::<serde_json::Value>(
        &std::fs::read_to_string(out.join("prometheus-rules.yaml")).unwrap(),
    )
    .unwrap();
    assert_eq!(rule["spec"]["groups"], plain["groups"]);
}

/// For every engine `--engine` names, promtool accepts the rules and the generated tests
/// (each alert fires and stays quiet) pass on that engine's series; llama.cpp's rules, with
/// no KV-cache or preemption series and no HTTP counters to read, are fewer and say so.
#[test]
fn each_engine_s_rules_pass_promtool() {
    let promtool = program("promtool");
    for (engine, rules) in [("sglang", 8), ("tgi", 6), ("llamacpp", 6)] {
        let out = tmp(&format!("promtool-{engine}"));
        let o = generate(&out, &["--engine", engine]);
        assert_eq!(o.status.code(), Some(0), "{engine}: {}", stderr(&o));
        let check = Command::new(&promtool)
            .args(["check", "rules"])
            .arg(out.join("prometheus-rules.yaml"))
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&check.stdout);
        assert!(check.status.success(), "{engine}: {said}");
        assert!(
            said.contains(&format!("SUCCESS: {rules} rules found")),
            "{engine}: {said}"
        );
        promtool_tests_pass(&promtool, &out, engine);
    }
}

/// `promtool test rules` on the generated tests in `out` passes.
fn promtool_tests_pass(promtool: &Path, out: &Path, what: &str) {
    let test = Command::new(promtool)
        .args(["test", "rules"])
        .arg(out.join("prometheusrule.test.yaml"))
        .output()
        .unwrap();
    assert!(
        test.status.success(),
        "{what}: {}{}",
        String::from_utf8_lossy(&test.stdout),
        stderr(&test)
    );
}

#[test]
fn every_value_reaching_promql_is_escaped_and_promtool_still_passes() {
    // A model name that would end the string, inject `or vector(1)` and comment the rest
    // out, and one with a newline: escaped in the ScaledObject, the rules and the promtool
    // series alike, so every query parses and every generated promtool test still passes
    // (an injected `or vector(1)` would fire the alerts the "stays quiet" tests expect not to).
    let promtool = program("promtool");
    for (i, model) in ["x\"} or vector(1) #", "a\nb", "back\\slash"]
        .iter()
        .enumerate()
    {
        let out = tmp(&format!("escape-{i}"));
        let o = generate(&out, &["--model-name", model]);
        assert_eq!(o.status.code(), Some(0), "{model:?}: {}", stderr(&o));
        for f in ["scaledobject.yaml", "prometheus-rules.yaml"] {
            let text = std::fs::read_to_string(out.join(f)).unwrap();
            for q in inferscale_manifests::queries_in_text(&text).unwrap() {
                let parsed = inferscale_promql::Query::parse(&q);
                assert!(parsed.is_ok(), "{model:?}: {f}: {q}");
            }
        }
        promtool_tests_pass(&promtool, &out, &format!("{model:?}"));
    }
}

#[test]
fn bad_thresholds_and_names_are_named() {
    let good: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fixture()).unwrap()).unwrap();
    let text = serde_json::to_string_pretty(&good).unwrap();
    let mut cases: Vec<(String, String, &str)> = vec![
        (
            "truncated".into(),
            text[..text.len() / 2].to_owned(),
            "truncated",
        ),
        (
            "version".into(),
            text.replacen("\"version\": 1", "\"version\": 3", 1),
            "version 3 is not supported",
        ),
    ];
    let mut missing = good.clone();
    missing["scale_out"]
        .as_object_mut()
        .unwrap()
        .remove("queue_depth_per_pod");
    cases.push((
        "missing".into(),
        missing.to_string(),
        "missing field scale_out.queue_depth_per_pod",
    ));
    let mut wrong = good.clone();
    wrong["scale_in"]["for_seconds"] = "5m".into();
    cases.push((
        "wrong".into(),
        wrong.to_string(),
        "field scale_in.for_seconds must be a positive integer",
    ));
    for (name, body, why) in cases {
        let p = tmp(&format!("{name}.json"));
        std::fs::write(&p, body).unwrap();
        let out = tmp(&format!("{name}-out"));
        let o = inferscale()
            .args(["generate", "--thresholds"])
            .arg(&p)
            .arg("--out")
            .arg(&out)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{name}");
        assert!(stderr(&o).contains(why), "{name}: {}", stderr(&o));
        assert!(
            !out.join("scaledobject.yaml").exists(),
            "{name}: nothing half-written"
        );
    }
    let o = generate(&tmp("badname"), &["--deployment", "vLLM_app"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("--deployment: \"vLLM_app\" is not a valid RFC 1123"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn a_real_prometheus_accepts_every_generated_query_and_idle_reads_zero() {
    let model = "m";
    let out = tmp("live");
    let o = generate(
        &out,
        &[
            "--namespace",
            "llm",
            "--model-name",
            model,
            "--deployment",
            "vllm",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));

    // The simulator (the seeds' deployment at 10x, 2 % HTTP 500s so the error panels have a
    // numerator) with its DCGM endpoint.
    let sim = sim(&[
        "--speedup",
        "10",
        "--served-model-name",
        model,
        "--fault-500-rate",
        "0.02",
        "--dcgm-listen",
        "127.0.0.1:0",
    ]);
    sim.wait_healthy();
    let api = sim.url.trim_start_matches("http://");
    let dcgm = sim.dcgm.as_deref().unwrap();
    let dcgm = dcgm
        .trim_start_matches("http://")
        .trim_end_matches("/metrics");

    // Prometheus, with the labels the Prometheus operator would add (namespace, pod; the job
    // is the Service's name).
    let dir = tmp("prom");
    let (_prom, port) = inferscale_testkit::prometheus(
        &dir,
        &format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n  - job_name: vllm\n    static_configs:\n      - targets: ['{api}']\n        labels: {{namespace: llm, pod: vllm-0}}\n  - job_name: dcgm-exporter\n    static_configs:\n      - targets: ['{dcgm}']\n"
        ),
        &[&format!(
            "--storage.tsdb.path={}",
            dir.join("data").display()
        )],
    );
    // Until both targets have been scraped a few times.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (_, up) = prom_query(port, "count(up == 1) == 2");
        if up == vec!["2".to_owned()] {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "Prometheus never scraped both targets"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    std::thread::sleep(Duration::from_secs(3));

    let so: serde_json::Value = inferscale_manifests::yaml::from_str::<serde_json::Value>(
        &std::fs::read_to_string(out.join("scaledobject.yaml")).unwrap(),
    )
    .unwrap();
    let so_queries: Vec<String> = so["spec"]["triggers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["metadata"]["query"].as_str().unwrap().to_owned())
        .collect();
    // The policy derived by rule (these thresholds were never tuned): requests in flight,
    // the queue booster, the queue-time guardrail.
    assert_eq!(so_queries.len(), 3);
    // Idle: exactly 0, never NaN, never empty.
    for q in &so_queries {
        let (status, values) = prom_query(port, q);
        assert_eq!(status, "success", "{q}");
        assert_eq!(values, vec!["0".to_owned()], "idle: {q}");
    }

    // Under load: 8 req/s of the seeds' requests (streaming) for 200 simulated seconds.
    let load = inferscale()
        .args([
            "load",
            "--url",
            &sim.url,
            "--rates",
            "8",
            "--step",
            "200s",
            "--speedup",
            "10",
            "--no-metrics",
            "--out",
        ])
        .arg(tmp("live-run.json"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(load.success());

    let mut empty = Vec::new();
    for q in &so_queries {
        let (status, values) = prom_query(port, q);
        assert_eq!(status, "success", "{q}");
        if !finite(&values) {
            empty.push(format!("scaledobject: {q}"));
        }
    }
    let vars: Vec<(String, String)> =
        [("model", model), ("__rate_interval", "15s"), ("node", ".*")]
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .into();
    let mut dash = Vec::new();
    for f in ["1-service-slis.json", "2-engine.json", "3-gpu-dcgm.json"] {
        let text = std::fs::read_to_string(out.join("grafana").join(f)).unwrap();
        dash.extend(inferscale_manifests::queries_in_text(&text).unwrap());
    }
    assert!(dash.len() >= 25, "{} dashboard queries", dash.len());
    for e in &dash {
        let q = inferscale_manifests::with_variables(e, &vars);
        let (status, values) = prom_query(port, &q);
        assert_eq!(status, "success", "{q}");
        if !finite(&values) {
            empty.push(format!("dashboard: {q}"));
        }
    }
    let alerts = inferscale_manifests::queries_in_text(
        &std::fs::read_to_string(out.join("prometheus-rules.yaml")).unwrap(),
    )
    .unwrap();
    assert_eq!(alerts.len(), 9);
    for e in &alerts {
        let (status, _) = prom_query(port, e);
        assert_eq!(status, "success", "{e}");
        let base = measured(e);
        let (status, values) = prom_query(port, &base);
        assert_eq!(status, "success", "{base}");
        if base.starts_with("absent(") {
            // The metrics are there, so absent() is empty.
            assert!(values.is_empty(), "{base}: {values:?}");
        } else if !finite(&values) {
            empty.push(format!("rule: {base}"));
        }
    }
    assert!(
        empty.is_empty(),
        "queries without data:\n{}",
        empty.join("\n")
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_gateway_scaledobject_reads_the_endpoint_picker_and_is_rehearsed() {
    let out = tmp("gateway");
    let _ = std::fs::remove_dir_all(&out);
    let o = generate(&out, &["--gateway", "--namespace", "llm"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let path = out.join("scaledobject-gateway.yaml");
    let text = std::fs::read_to_string(&path).unwrap();
    // llm-d's shape: the flow-control queue 1 per pod, and the running requests per pod
    // from the measured capacity (not llm-d's constant 16).
    assert!(
        text.contains("sum(llm_d_epp_flow_control_queue_size{namespace=\\\"llm\\\",inference_pool=\\\"vllm\\\"})"),
        "{text}"
    );
    assert!(text.contains("llm_d_epp_request_running"), "{text}");
    assert!(!text.contains("threshold: \"16\""), "{text}");
    // The rehearsal serves the endpoint picker's families from its replicas: a rise to 2.5×
    // a replica's capacity scales out.
    let o = inferscale()
        .args(["rehearse", "--scaledobject"])
        .arg(&path)
        .arg("--thresholds")
        .arg(fixture())
        .args(["--pattern", "hold:30@5m,hold:140@20m,hold:20@35m", "--json"])
        .output()
        .unwrap();
    assert!(o.status.code().is_some_and(|c| c <= 1), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let most = v
        .pointer("/max_replicas")
        .or_else(|| v.pointer("/0/max_replicas"))
        .or_else(|| v.pointer("/results/0/max_replicas"))
        .and_then(serde_json::Value::as_u64)
        .unwrap_or_else(|| panic!("no max_replicas in {v:#}"));
    assert!(most >= 3, "{v:#}");
}

#[test]
fn the_gateway_s_signals_are_primaries_for_the_prometheus_scaler_only() {
    let out = tmp("gateway-primary");
    let _ = std::fs::remove_dir_all(&out);
    let o = generate(&out, &["--signal", "gateway-tokens", "--namespace", "llm"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = std::fs::read_to_string(out.join("scaledobject.yaml")).unwrap();
    // The picker's token backlog, by its Service (the family carries no pool label), at
    // Little's law in prompt tokens.
    assert!(
        text.contains(r#"sum(llm_d_epp_inflight_tokens{namespace="llm",service="vllm-epp"})"#),
        "{text}"
    );
    assert!(text.contains("prompt tokens in flight per pod"), "{text}");
    let _ = std::fs::remove_dir_all(&out);
    let o = generate(&out, &["--signal", "gateway-in-flight"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = std::fs::read_to_string(out.join("scaledobject.yaml")).unwrap();
    assert!(text.contains("llm_d_epp_request_running"), "{text}");
    assert!(text.contains("llm_d_epp_flow_control_queue_size"), "{text}");
    // The external scaler reads the pods: a gateway primary is refused, by name.
    let _ = std::fs::remove_dir_all(&out);
    let o = generate(
        &out,
        &["--signal", "gateway-in-flight", "--scaler", "external"],
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o)
            .contains("--signal gateway-in-flight: the external scaler reads the model's pods"),
        "{}",
        stderr(&o)
    );
    assert!(!out.join("scaledobject.yaml").exists());
    let _ = std::fs::remove_dir_all(&out);
}
