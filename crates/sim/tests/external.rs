//! The simulator against real peers: Prometheus scrapes it under load and every query of
//! vLLM's official Grafana dashboard returns data; k6 runs the seeds' load test against it.
//! Both programs are required (`./scripts/test` installs them); a missing one fails the test.

#![allow(clippy::unwrap_used)]

mod common;

use inferscale_testkit::program;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::{get, post, start, wait_ready};
use inferscale_sim::SimConfig;

fn testdata(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata")
        .join(rel)
}

/// Kills the child process when the test ends, however it ends.
struct Reap(Child);

impl Drop for Reap {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

fn eks(speedup: f64, name: &str) -> SimConfig {
    let mut c = SimConfig::new(
        inferscale_engine::profile("aws-eks-ministral-8b-l40s").unwrap(),
        name.into(),
    );
    c.speedup = speedup;
    c
}

/// Keeps `per_second` requests a (wall) second going, mixed streaming/non-streaming and
/// completions/chat, until the returned sender is dropped.
fn background_load(api: SocketAddr, per_second: u32) -> tokio::sync::oneshot::Sender<()> {
    let (tx, mut rx) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / f64::from(per_second)));
        let mut n = 0u32;
        loop {
            tokio::select! {
                _ = &mut rx => break,
                _ = tick.tick() => {}
            }
            n += 1;
            let (path, body) = match n % 4 {
                0 => (
                    "/v1/completions",
                    r#"{"prompt":"Write about clusters.","max_tokens":60,"stream":true}"#,
                ),
                1 => (
                    "/v1/completions",
                    r#"{"prompt":"Write about nodes and pods.","max_tokens":60}"#,
                ),
                2 => (
                    "/v1/chat/completions",
                    r#"{"messages":[{"role":"user","content":"Explain autoscaling."}],"max_tokens":60,"stream":true}"#,
                ),
                _ => (
                    "/v1/chat/completions",
                    r#"{"messages":[{"role":"user","content":"Explain queues."}],"max_tokens":60}"#,
                ),
            };
            tokio::spawn(async move {
                let _ = post(api, path, body).await;
            });
        }
    });
    tx
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prometheus_scrapes_the_simulator_and_vllms_dashboard_queries_return_data() {
    let prometheus = program("prometheus");
    let model = "ministral";
    let sim = start(eks(5.0, model)).await;
    wait_ready(sim.api).await;
    let _load = background_load(sim.api, 8); // 40 req/s simulated: busy, below saturation
    let dir = std::env::temp_dir().join(format!("inferscale-prom-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let config = format!(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n  - job_name: vllm\n    static_configs:\n      - targets: ['{}']\n  - job_name: dcgm\n    static_configs:\n      - targets: ['{}']\n",
        sim.api, sim.dcgm
    );
    std::fs::write(dir.join("prometheus.yml"), config).unwrap();
    let port = free_port();
    let prom_addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let _prom = Reap(
        Command::new(prometheus)
            .arg(format!(
                "--config.file={}",
                dir.join("prometheus.yml").display()
            ))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address={prom_addr}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    for _ in 0..200 {
        if common::request(prom_addr, "GET", "/-/ready", None)
            .await
            .map(|r| r.0)
            == Ok(200)
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Let Prometheus collect a dozen scrapes under load.
    tokio::time::sleep(Duration::from_secs(12)).await;
    let dashboard: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(testdata("vllm/grafana.json")).unwrap())
            .unwrap();
    let mut exprs = Vec::new();
    collect_exprs(&dashboard, &mut exprs);
    assert!(exprs.len() >= 30, "found {} queries", exprs.len());
    let mut empty = Vec::new();
    for expr in &exprs {
        let q = expr
            .replace("$model_name", model)
            .replace("$__rate_interval", "10s");
        let (status, body) =
            get(prom_addr, &format!("/api/v1/query?query={}", urlencode(&q))).await;
        assert_eq!(status, 200, "{q}: {body}");
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(v["status"], "success", "{q}: {body}");
        let results = v["data"]["result"].as_array().unwrap();
        let has_number = results.iter().any(|r| {
            r["value"][1]
                .as_str()
                .is_some_and(|x| x.parse::<f64>().is_ok_and(f64::is_finite))
        });
        if !has_number {
            empty.push(q);
        }
    }
    assert!(
        empty.is_empty(),
        "queries without data:\n{}",
        empty.join("\n")
    );
    // The DCGM endpoint was scraped too.
    let (_, body) = get(
        prom_addr,
        &format!("/api/v1/query?query={}", urlencode("DCGM_FI_DEV_GPU_UTIL")),
    )
    .await;
    assert!(body.contains("NVIDIA L40S"), "{body}");
    let _ = std::fs::remove_dir_all(&dir);
}

fn collect_exprs(v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::Object(m) => {
            if let Some(e) = m.get("expr").and_then(|e| e.as_str()) {
                out.push(e.to_owned());
            }
            m.values().for_each(|x| collect_exprs(x, out));
        }
        serde_json::Value::Array(a) => a.iter().for_each(|x| collect_exprs(x, out)),
        _ => {}
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn k6_runs_the_seeds_load_against_the_simulator_without_errors() {
    let k6 = program("k6");
    let model = "mistralai/Ministral-3-8B-Instruct-2512";
    let sim = start(eks(5.0, model)).await;
    wait_ready(sim.api).await;
    let summary = std::env::temp_dir().join(format!("inferscale-k6-{}.json", std::process::id()));
    let script = testdata("k6/seeds-load.js");
    let out = tokio::process::Command::new(k6)
        .args(["run", "--quiet", "--no-color", "--summary-export"])
        .arg(&summary)
        .args([
            "-e",
            &format!("BASE_URL=http://{}", sim.api),
            "-e",
            &format!("MODEL={model}"),
        ])
        .args(["-e", "TARGET_RPS=8", "-e", "DURATION=10s"])
        .arg(&script)
        .env("K6_NO_USAGE_REPORT", "true")
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "k6 failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
    let m = &s["metrics"];
    let reqs = m["http_reqs"]["count"].as_f64().unwrap();
    assert!((75.0..=81.0).contains(&reqs), "{reqs} requests");
    assert_eq!(
        m["http_req_failed"]["value"].as_f64().unwrap(),
        0.0,
        "{}",
        m["http_req_failed"]
    );
    assert!(
        m.get("dropped_iterations")
            .is_none_or(|d| d["count"].as_f64() == Some(0.0))
    );
    // The server saw every request succeed.
    let (_, metrics) = get(sim.api, "/metrics").await;
    let exp = inferscale_promtext::parse(metrics.as_bytes()).unwrap();
    let ok: f64 = exp
        .samples_named("vllm:request_success_total")
        .filter(|x| matches!(x.label("finished_reason"), Some("stop" | "length")))
        .map(|x| x.value())
        .sum();
    assert_eq!(ok, reqs);
    let _ = std::fs::remove_file(&summary);
}
