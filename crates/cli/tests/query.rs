//! `inferscale query` end to end: PromQL over a live simulator, checked against a real
//! Prometheus scraping the same simulator at the same time.

#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeMap;
use std::io::{Read as _, Write as _};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use common::{inferscale, sim, stderr, stdout, tmp};
use inferscale_testkit::{http_get, urlencode};

/// Closed-loop requests from `threads` threads until `stop`.
fn background_load(
    addr: &str,
    threads: usize,
    stop: &Arc<AtomicBool>,
) -> Vec<std::thread::JoinHandle<()>> {
    (0..threads)
        .map(|i| {
            let addr = addr.to_owned();
            let stop = Arc::clone(stop);
            std::thread::spawn(move || {
                let mut n = 0u32;
                while !stop.load(Ordering::Relaxed) {
                    let body = format!(
                        "{{\"model\":\"m\",\"prompt\":\"hello {i} {n}\",\"max_tokens\":{}}}",
                        16 + (n % 48)
                    );
                    if let Ok(mut s) = std::net::TcpStream::connect(&addr) {
                        let _ = write!(
                            s,
                            "POST /v1/completions HTTP/1.0\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                            body.len()
                        );
                        let _ = s.read_to_end(&mut Vec::new());
                    }
                    n += 1;
                }
            })
        })
        .collect()
}

/// `labels → value` of one `/api/v1/query` answer, as text.
fn results(v: &serde_json::Value) -> BTreeMap<String, f64> {
    assert_eq!(v["status"], "success", "{v}");
    match v["data"]["resultType"].as_str() {
        Some("scalar") => [(String::new(), num(&v["data"]["result"][1]))].into(),
        _ => v["data"]["result"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| (r["metric"].to_string(), num(&r["value"][1])))
            .collect(),
    }
}

fn num(v: &serde_json::Value) -> f64 {
    inferscale_promql::parse_value(v.as_str().unwrap()).unwrap()
}

#[test]
fn query_on_the_simulator_agrees_with_prometheus_scraping_it() {
    let s = sim(&["--speedup", "10", "--served-model-name", "m"]);
    s.wait_healthy();
    let addr = s.url.trim_start_matches("http://").to_owned();
    let stop = Arc::new(AtomicBool::new(false));
    let load = background_load(&addr, 4, &stop);
    let dir = tmp("query", "prometheus");
    let config = format!(
        "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: vllm\n    static_configs:\n      - targets: ['{addr}']\n        labels:\n          namespace: llm\n"
    );
    let (_prom, prom) = inferscale_testkit::prometheus(
        &dir,
        &config,
        &[&format!(
            "--storage.tsdb.path={}",
            dir.join("data").display()
        )],
    );
    // Both sides must cover the whole rate window: wait until Prometheus has scraped thrice.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let (_, body) = http_get(
            prom,
            &format!(
                "/api/v1/query?query={}",
                urlencode("count_over_time(up[1m])")
            ),
        )
        .unwrap();
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        if results(&v).values().any(|n| *n >= 3.0) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "Prometheus did not scrape: {body}"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    let exprs = [
        "sum(vllm:num_requests_running)",
        "sum(vllm:num_requests_waiting) or vector(0)",
        "sum by (namespace) (rate(vllm:generation_tokens_total[10s]))",
        "histogram_quantile(0.95, sum(rate(vllm:e2e_request_latency_seconds_bucket[10s])) by (le)) or vector(0)",
        "sum(rate(vllm:request_success_total{namespace=\"llm\"}[10s])) > bool 0",
        "up{job=\"vllm\"}",
        // The generated ScaledObject's queue trigger and two alert shapes, verbatim but for the
        // model's name (their rate windows are minutes long; those are checked on backfilled
        // data in crates/promql/tests/prometheus.rs).
        "sum(vllm:num_requests_waiting{namespace=\"llm\",model_name=\"m\"})",
        "max by (namespace, pod, model_name) (vllm:kv_cache_usage_perc{namespace=\"llm\",model_name=\"m\"} or vllm:gpu_cache_usage_perc{namespace=\"llm\",model_name=\"m\"}) > bool 0.95",
        "absent(vllm:num_requests_waiting{namespace=\"llm\",model_name=\"m\"})",
    ];
    let out = inferscale()
        .arg("query")
        .args(exprs)
        .args([
            "--target",
            &s.url,
            "--label",
            "job=vllm",
            "--label",
            "namespace=llm",
        ])
        .args(["--for", "15s", "--every", "1s", "--json"])
        .output()
        .unwrap();
    // Prometheus scrapes once more past the instant `query` evaluated at.
    std::thread::sleep(std::time::Duration::from_millis(1500));
    stop.store(true, Ordering::Relaxed);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let ours: Vec<serde_json::Value> = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(ours.len(), exprs.len());
    // Every expression was evaluated at one instant; the first that has a result says when.
    let t = ours
        .iter()
        .find_map(|m| m["data"]["result"][0]["value"][0].as_f64())
        .expect("some expression has a result");
    for (expr, mine) in exprs.iter().zip(&ours) {
        let at = |dt: f64| {
            let (status, body) = http_get(
                prom,
                &format!("/api/v1/query?query={}&time={:.3}", urlencode(expr), t - dt),
            )
            .unwrap();
            assert_eq!(status, 200, "{body}");
            results(&serde_json::from_str(&body).unwrap())
        };
        // Prometheus over the last scrape interval before `t`: its samples and ours were
        // taken at different moments within each second, so ours should lie within what
        // Prometheus answers over that second, give or take one step of it.
        let p: Vec<BTreeMap<String, f64>> = (0..=4).map(|k| at(f64::from(k) * 0.25)).collect();
        let mine = results(mine);
        assert_eq!(
            mine.keys().collect::<Vec<_>>(),
            p[0].keys().collect::<Vec<_>>(),
            "{expr}: label sets"
        );
        for (k, v) in &mine {
            let seen: Vec<f64> = p.iter().filter_map(|m| m.get(k).copied()).collect();
            if v.is_nan() {
                assert!(
                    seen[0].is_nan(),
                    "{expr} {k}: ours NaN, Prometheus {}",
                    seen[0]
                );
                continue;
            }
            let lo = seen.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = seen.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let step = seen
                .windows(2)
                .map(|w| (w[0] - w[1]).abs())
                .fold(0.0, f64::max);
            let margin = step + 0.02 * hi.abs() + 1e-9;
            assert!(
                *v >= lo - margin && *v <= hi + margin,
                "{expr} {k}: ours {v}, Prometheus {lo}..{hi} over the last second (margin {margin})"
            );
        }
    }
    for h in load {
        h.join().unwrap();
    }
}

#[test]
fn bad_queries_and_labels_are_refused_before_scraping() {
    let cases: [(&[&str], &str); 4] = [
        (
            &["sum(rate(x[5m])", "--target", "http://127.0.0.1:9"],
            "invalid PromQL",
        ),
        (
            &["up", "--target", "http://127.0.0.1:9", "--label", "nope"],
            "expected name=value",
        ),
        (
            &["up", "--target", "http://127.0.0.1:9#__name__=x"],
            "not a label name",
        ),
        (&["up", "--target", "ftp://127.0.0.1:9"], "ftp"),
    ];
    for (args, needle) in cases {
        let out = inferscale().arg("query").args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(needle), "{args:?}: {}", stderr(&out));
    }
}
