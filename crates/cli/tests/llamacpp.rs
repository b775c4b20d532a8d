//! A real engine in the loop: llama.cpp's own `llama-server --metrics` (built from pinned
//! sources by `scripts/llama-server`, serving a tiny random-weight Llama on the CPU), measured
//! by `inferscale run` as a new user would, its outputs written in llama.cpp's metric names,
//! and every generated query answered by a real Prometheus scraping that server. And the
//! simulator's llama.cpp mode on the same plan, for the same shape of result.
//!
//! Where the knee lies depends on this machine's CPU: the plan spans 64× (2 to 128 req/s), so
//! that the verdicts — a step sustained, a later one saturated, the queue read from the
//! server — hold on any machine that runs the suite.

#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::{Output, Stdio};
use std::time::Duration;

mod common;

use common::{finite, inferscale, measured, prom_query, sim, stderr};
use inferscale_testkit::{http_get, llama_server};

fn tmp(name: &str) -> std::path::PathBuf {
    common::tmp("llamacpp", name)
}

/// The plan both servers are measured on: short steps, a 64× span.
const PLAN: [&str; 10] = [
    "--rates",
    "2,8,32,128",
    "--step",
    "10s",
    "--rest",
    "5s",
    "--warmup",
    "20",
    "--namespace",
    "llm",
];

fn run(url: &str, out: &Path, extra: &[&str]) -> Output {
    inferscale()
        .args(["run", "--url", url])
        .args(PLAN)
        .args(extra)
        .arg("--out")
        .arg(out)
        .output()
        .unwrap()
}

fn json(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// What a run's thresholds say about the knee and the engine, asserted alike for the real
/// server and the simulator: some step sustained, a later one saturated, llama.cpp's names.
fn assert_shape(what: &str, out: &Path, o: &Output) -> serde_json::Value {
    assert_eq!(o.status.code(), Some(0), "{what}: {}", stderr(o));
    let t = json(&out.join("thresholds.json"));
    assert_eq!(t["source"]["engine"], "llamacpp", "{what}: {t}");
    let sat = t["saturation_rps"].as_f64().unwrap_or(0.0);
    let first = t["first_saturated_rps"].as_f64().unwrap_or(0.0);
    assert!(sat >= 2.0 && first > sat, "{what}: knee {sat} → {first}");
    let run = json(&out.join("run.json"));
    let steps = run["steps"].as_array().unwrap();
    let waiting: f64 = steps
        .iter()
        .filter_map(|s| s["server"]["queue_depth"]["max"].as_f64())
        .fold(0.0, f64::max);
    assert!(
        waiting > 0.0,
        "{what}: the server's queue never read above 0"
    );
    let so = std::fs::read_to_string(out.join("manifests/scaledobject.yaml")).unwrap();
    assert!(so.contains("llamacpp:requests_deferred"), "{what}: {so}");
    for f in [
        "scaledobject.yaml",
        "prometheus-rules.yaml",
        "grafana/1-service-slis.json",
        "grafana/2-engine.json",
    ] {
        let text = std::fs::read_to_string(out.join("manifests").join(f)).unwrap();
        let vllm_name = text
            .match_indices("vllm:")
            .any(|(i, _)| text[i + 5..].starts_with(|c: char| c.is_ascii_alphabetic()));
        assert!(!vllm_name, "{what}: {f} reads a vLLM name");
    }
    t
}

/// `run --url` finds the real server's knee and reads its own queue; the thresholds say
/// llama.cpp; and every query the generated ScaledObject, rules and engine dashboards hold
/// returns data from a real Prometheus scraping that server (the GPU tier's need a DCGM
/// exporter, which a CPU server has not: the vLLM test covers them).
#[test]
fn a_real_llama_server_is_measured_and_every_generated_query_reads_it() {
    let (_server, addr) = llama_server(4);
    let url = format!("http://{addr}");
    let out = tmp("real");
    let o = run(&url, &out, &[]);
    let t = assert_shape("llama-server", &out, &o);
    eprintln!(
        "llama-server: knee {} → {} req/s, capacity {}",
        t["saturation_rps"], t["first_saturated_rps"], t["capacity_rps"]
    );
    let readme = std::fs::read_to_string(out.join("manifests/README.md")).unwrap();
    assert!(readme.contains("## The engine: llama.cpp"), "{readme}");

    // Prometheus scraping it with the labels the operator would add (the job is the
    // Service's name, `vllm` by default).
    let dir = tmp("prom");
    let (_prom, port) = inferscale_testkit::prometheus(
        &dir,
        &format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nrule_files:\n  - {}\nscrape_configs:\n  - job_name: vllm\n    static_configs:\n      - targets: ['{addr}']\n        labels: {{namespace: llm, pod: vllm-0}}\n",
            out.join("manifests/prometheus-rules.yaml").display()
        ),
        &[&format!(
            "--storage.tsdb.path={}",
            dir.join("data").display()
        )],
    );
    // Traffic for 20 s, so that every rate has samples in its window.
    let load = inferscale()
        .args([
            "load",
            "--url",
            &url,
            "--rates",
            "4",
            "--step",
            "20s",
            "--no-metrics",
            "--out",
        ])
        .arg(tmp("load.json"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(load.success());
    std::thread::sleep(Duration::from_secs(2));

    let m = out.join("manifests");
    let mut queries: Vec<(String, String)> = Vec::new();
    let so: serde_json::Value = inferscale_manifests::yaml::from_str::<serde_json::Value>(
        &std::fs::read_to_string(m.join("scaledobject.yaml")).unwrap(),
    )
    .unwrap();
    for tr in so["spec"]["triggers"].as_array().unwrap() {
        queries.push((
            "scaledobject".into(),
            tr["metadata"]["query"].as_str().unwrap().to_owned(),
        ));
    }
    let vars: Vec<(String, String)> = [("__rate_interval", "15s")]
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .into();
    for f in ["1-service-slis.json", "2-engine.json"] {
        let text = std::fs::read_to_string(m.join("grafana").join(f)).unwrap();
        for q in inferscale_manifests::queries_in_text(&text).unwrap() {
            queries.push((
                f.to_owned(),
                inferscale_manifests::with_variables(&q, &vars),
            ));
        }
    }
    let rules = inferscale_manifests::queries_in_text(
        &std::fs::read_to_string(m.join("prometheus-rules.yaml")).unwrap(),
    )
    .unwrap();
    let mut absent = 0;
    for e in rules.iter().filter(|e| !e.contains("DCGM_")) {
        let base = measured(e);
        if base.starts_with("absent(") {
            let (status, values) = prom_query(port, &base);
            assert_eq!(status, "success", "{base}");
            assert!(
                values.is_empty(),
                "the server is scraped, so {base} is empty"
            );
            absent += 1;
        } else {
            queries.push(("rules".into(), base));
        }
    }
    assert_eq!(absent, 1, "{rules:?}");
    assert!(queries.len() >= 12, "{} queries", queries.len());
    let mut empty = Vec::new();
    for (from, q) in &queries {
        let (status, values) = prom_query(port, q);
        assert_eq!(status, "success", "{from}: {q}");
        if !finite(&values) {
            empty.push(format!("{from}: {q} → {values:?}"));
        }
    }
    assert!(
        empty.is_empty(),
        "queries without data:\n{}",
        empty.join("\n")
    );
    // load as this server speaks: chat and completions, streamed and not, the token counts
    // from the `usage` it sends, every request answered.
    for api in ["chat", "completions"] {
        for stream in ["--stream", "--no-stream"] {
            let report = tmp(&format!("load-{api}{stream}.json"));
            let o = inferscale()
                .args(["load", "--url", &url, "--api", api, stream])
                .args(["--rates", "2", "--step", "3s", "--out"])
                .arg(&report)
                .output()
                .unwrap();
            assert_eq!(o.status.code(), Some(0), "{api} {stream}: {}", stderr(&o));
            let step = &json(&report)["steps"][0];
            let what = format!("{api} {stream}: {step}");
            assert!(step["requests"]["ok"].as_u64().unwrap() >= 5, "{what}");
            assert_eq!(step["requests"]["failed"]["total"], 0, "{what}");
            assert_eq!(step["tokens"]["source"], "usage", "{what}");
            assert!(step["tokens"]["output"].as_u64().unwrap() > 0, "{what}");
            let ttfts = step["latency_s"]["ttft"]["count"].as_u64().unwrap();
            assert_eq!(ttfts > 0, stream == "--stream", "{what}");
        }
    }
    // query evaluates PromQL over its /metrics, no Prometheus needed.
    let o = inferscale()
        .args([
            "query",
            "--target",
            &format!("{url}/metrics"),
            "--for",
            "2s",
            "--json",
        ])
        .arg("sum(llamacpp:requests_deferred) + sum(llamacpp:requests_processing)")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let answer: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(answer[0]["status"], "success", "{answer}");
    assert!(
        answer[0]["data"]["result"][0]["value"][1].is_string(),
        "{answer}"
    );

    // scrape and monitor read its own names: the queue and the batch, not "missing".
    let o = inferscale().args(["scrape", &url]).output().unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success() && text.contains("llamacpp · 15 families"),
        "{text}"
    );
    let o = inferscale()
        .args([
            "monitor",
            "--url",
            &url,
            "--once",
            "--json",
            "--for",
            "2s",
            "--refresh",
            "1s",
        ])
        .output()
        .unwrap();
    let frame: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(
        frame["service"]["queue"].is_number() && frame["service"]["running"].is_number(),
        "{frame}"
    );

    // check on this setup: every check passes but two a CPU server cannot pass — no GPU, so
    // no DCGM exporter; and the scale cycle, which the rehearsal judges against an SLO of
    // this tiny model's (a fifth of a second) on a replica calibrated from ten-second steps.
    let o = inferscale()
        .args([
            "check",
            "--url",
            &url,
            "--prometheus",
            &format!("http://{port}"),
        ])
        .args(["--namespace", "llm", "--skip", "dcgm-exporter,scale-cycle"])
        .args(["--format", "json", "--run-dir"])
        .arg(&out)
        .output()
        .unwrap();
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let failed: Vec<String> = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["status"] == "fail" || c["status"] == "warn")
        .map(|c| format!("{} {}: {}", c["id"], c["name"], c["reason"]))
        .collect();
    assert!(
        failed.is_empty(),
        "check on llama-server:\n{}",
        failed.join("\n")
    );
    assert_eq!(o.status.code(), Some(0));
    let _ = std::fs::remove_dir_all(&dir);
}

/// For each engine `generate --engine` writes for, `check` passes the files' checks on its
/// setup (the dashboards' tiers, the alerts it can feed, the ScaledObject, the patches);
/// told the deployment runs another engine, it fails them, naming both engines.
#[test]
fn each_engine_s_setup_passes_check_and_a_wrong_engine_fails_by_name() {
    let fixture =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/runs/thresholds-default.json");
    let files = [4, 5, 6, 7, 9];
    for (engine, wrong, wrong_title) in [
        ("vllm", "llamacpp", "llama.cpp"),
        ("sglang", "vllm", "vLLM"),
        ("tgi", "sglang", "SGLang"),
        ("llamacpp", "vllm", "vLLM"),
    ] {
        let out = tmp(&format!("setup-{engine}"));
        let o = inferscale()
            .args(["generate", "--engine", engine, "--thresholds"])
            .arg(&fixture)
            .arg("--out")
            .arg(&out)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0), "{engine}: {}", stderr(&o));
        let check = |as_engine: &str| -> Vec<(u64, String, String)> {
            let o = inferscale()
                .args([
                    "check",
                    "--engine",
                    as_engine,
                    "--format",
                    "json",
                    "--manifests",
                ])
                .arg(&out)
                .output()
                .unwrap();
            let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
            v["checks"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|c| files.contains(&c["id"].as_u64().unwrap()))
                .map(|c| {
                    (
                        c["id"].as_u64().unwrap(),
                        c["status"].as_str().unwrap().to_owned(),
                        c["reason"].as_str().unwrap().to_owned(),
                    )
                })
                .collect()
        };
        for (id, status, reason) in check(engine) {
            assert_eq!(status, "pass", "{engine}: check {id}: {reason}");
        }
        let wrong_checks = check(wrong);
        // The engine whose names the files read is named with the one told.
        let own = match engine {
            "vllm" => "vLLM",
            "sglang" => "SGLang",
            "tgi" => "TGI",
            _ => "llama.cpp",
        };
        for id in [4, 5, 6] {
            let (_, status, reason) = wrong_checks.iter().find(|c| c.0 == id).unwrap();
            assert_eq!(
                status, "fail",
                "{engine} files as {wrong}: check {id}: {reason}"
            );
            assert!(
                reason.contains(&format!("read {own}'s names"))
                    && reason.contains(&format!("the engine is {wrong_title}")),
                "{engine} files as {wrong}: check {id}: {reason}"
            );
        }
    }
}

/// The simulator in llama.cpp's dialect measured on the same plan (in simulated time, at
/// 10×: its modelled GPU replica is slower than the tiny CPU model, and its saturated step
/// would take minutes to drain in real time) gives the same shape of result: a knee, the
/// queue read from `llamacpp:requests_deferred`, thresholds and manifests in llama.cpp's
/// names. 32 slots put its knee in the same span as the real server's.
#[test]
fn the_simulator_s_llamacpp_mode_gives_the_same_shape() {
    let s = sim(&[
        "--engine",
        "llamacpp",
        "--max-num-seqs",
        "32",
        "--speedup",
        "10",
    ]);
    s.wait_healthy();
    let (_, body) = http_get(
        s.url.trim_start_matches("http://").parse().unwrap(),
        "/metrics",
    )
    .unwrap();
    let real = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/engines/llamacpp-0c1e570.prom"),
    )
    .unwrap();
    let families = |text: &str| -> Vec<String> {
        text.lines()
            .filter_map(|l| l.strip_prefix("# TYPE "))
            .map(str::to_owned)
            .collect()
    };
    assert_eq!(
        families(&body),
        families(&real),
        "the same families, types and order"
    );
    let out = tmp("sim");
    let o = run(&s.url, &out, &["--speedup", "10"]);
    let t = assert_shape("sim --engine llamacpp", &out, &o);
    eprintln!(
        "sim --engine llamacpp: knee {} → {} req/s, capacity {}",
        t["saturation_rps"], t["first_saturated_rps"], t["capacity_rps"]
    );
}
