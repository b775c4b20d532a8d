//! `inferscale query` end to end: PromQL over a live simulator, checked against a real
//! Prometheus scraping the same simulator at the same time.

#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use common::{background_load, inferscale, sim, stderr, stdout, tmp};
use inferscale_testkit::{http_get, urlencode};

/// Closed-loop clients the simulator is loaded with while both sides scrape it.
const LOAD_THREADS: usize = 8;

/// The fewest tokens each of their requests asks for (up to twice as many). Long requests
/// make the moments between one request and the next (when a gauge dips) rare.
const LOAD_TOKENS: usize = 320;

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

/// The longest range selector in a query (`[5m]` → 300 s), 0 without one.
fn longest_range_s(q: &str) -> f64 {
    q.split('[')
        .skip(1)
        .filter_map(|r| {
            let d = r.split([']', ':']).next()?;
            let unit = d.chars().last()?;
            let n: f64 = d[..d.len() - 1].parse().ok()?;
            Some(match unit {
                's' => n,
                'm' => n * 60.0,
                'h' => n * 3600.0,
                _ => return None,
            })
        })
        .fold(0.0, f64::max)
}

/// Seconds `inferscale query` scrapes for in the agreement test.
const WINDOW_S: f64 = 40.0;

#[test]
fn query_on_the_simulator_agrees_with_prometheus_scraping_it() {
    // What the project's users would try: the generated ScaledObject, rules and dashboards,
    // the seeds' ScaledObject and vLLM's own dashboard, verbatim, plus a few short-window
    // expressions whose rate windows lie inside the scraped window.
    let out = tmp("query", "manifests");
    let g = inferscale()
        .args(["generate", "--thresholds"])
        .arg(common::workspace().join("testdata/runs/thresholds-default.json"))
        .arg("--out")
        .arg(&out)
        .args(["--namespace", "llm", "--model-name", "m"])
        .output()
        .unwrap();
    assert_eq!(g.status.code(), Some(0), "{}", stderr(&g));
    let mut files: Vec<std::path::PathBuf> = ["scaledobject.yaml", "prometheusrule.yaml"]
        .iter()
        .map(|f| out.join(f))
        .collect();
    for f in ["1-service-slis.json", "2-engine.json", "3-gpu-dcgm.json"] {
        files.push(out.join("grafana").join(f));
    }
    files.push(common::workspace().join("testdata/aws-eks/keda-scaledobject.yaml"));
    files.push(common::workspace().join("testdata/vllm/grafana.json"));
    let vars = ["model_name=m", "model=m", "node=.*"];

    let s = sim(&[
        "--speedup",
        "10",
        "--served-model-name",
        "m",
        "--dcgm-listen",
        "127.0.0.1:0",
    ]);
    s.wait_healthy();
    let addr = s.url.trim_start_matches("http://").to_owned();
    let dcgm_url = s.dcgm.clone().unwrap();
    let dcgm = dcgm_url
        .trim_start_matches("http://")
        .trim_end_matches("/metrics")
        .to_owned();
    let stop = Arc::new(AtomicBool::new(false));
    let load = background_load(&addr, "m", LOAD_THREADS, LOAD_TOKENS, &stop);
    let dir = tmp("query", "prometheus");
    let config = format!(
        "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: vllm\n    static_configs:\n      - targets: ['{addr}']\n        labels: {{namespace: llm, pod: vllm-0}}\n      - targets: ['{dcgm}']\n        labels: {{namespace: llm}}\n"
    );
    let (_prom, prom) = inferscale_testkit::prometheus(
        &dir,
        &config,
        &[&format!(
            "--storage.tsdb.path={}",
            dir.join("data").display()
        )],
    );
    // Start scraping ourselves once Prometheus has scraped both targets: the two then hold
    // samples over the same span, give or take a scrape.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let (_, body) = http_get(
            prom,
            &format!("/api/v1/query?query={}", urlencode("count(up == 1)")),
        )
        .unwrap();
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        if results(&v).values().any(|n| *n >= 2.0) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "Prometheus did not scrape: {body}"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let exprs = [
        "sum(vllm:num_requests_running)",
        "sum(vllm:num_requests_waiting) or vector(0)",
        "sum by (namespace) (rate(vllm:generation_tokens_total[10s]))",
        "histogram_quantile(0.95, sum(rate(vllm:e2e_request_latency_seconds_bucket[10s])) by (le)) or vector(0)",
        "sum(rate(vllm:request_success_total{namespace=\"llm\"}[10s])) > bool 0",
        "up{job=\"vllm\"}",
    ];
    let mut cmd = inferscale();
    cmd.arg("query").args(exprs);
    for f in &files {
        cmd.arg("--file").arg(f);
    }
    for v in vars {
        cmd.args(["--var", v]);
    }
    let out = cmd
        .args([
            "--target",
            &format!("{}#pod=vllm-0", s.url),
            "--target",
            &dcgm_url,
        ])
        .args(["--label", "job=vllm", "--label", "namespace=llm"])
        .args(["--for", &format!("{WINDOW_S}s"), "--every", "1s", "--json"])
        .output()
        .unwrap();
    // Prometheus scrapes past the second after the instant `query` evaluated at.
    std::thread::sleep(std::time::Duration::from_millis(2500));
    stop.store(true, Ordering::Relaxed);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let ours: Vec<serde_json::Value> = serde_json::from_str(&stdout(&out)).unwrap();

    // The command took every query of the files, once, with the variables set.
    let vars: Vec<(String, String)> = vars
        .iter()
        .chain(&["__rate_interval=1m", "__interval=1m", "__range=1m"])
        .map(|v| v.split_once('=').unwrap())
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    let mut expected: Vec<String> = exprs.iter().map(|e| (*e).to_owned()).collect();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        for q in inferscale_manifests::queries_in_text(&text).unwrap() {
            let q = inferscale_manifests::with_variables(&q, &vars);
            let q = inferscale_promql::Query::parse(&q)
                .unwrap()
                .text()
                .to_owned();
            if !expected.contains(&q) {
                expected.push(q);
            }
        }
    }
    let got: Vec<&str> = ours.iter().map(|o| o["query"].as_str().unwrap()).collect();
    assert_eq!(got, expected);
    assert!(got.len() >= 70, "{} queries", got.len());

    // Every expression was evaluated at one instant; the first that has a result says when.
    let t = ours
        .iter()
        .find_map(|m| m["data"]["result"][0]["value"][0].as_f64())
        .expect("some expression has a result");
    let (mut compared, mut worst) = (0, 0.0f64);
    for mine in &ours {
        let expr = mine["query"].as_str().unwrap();
        let at = |dt: f64| {
            let (status, body) = http_get(
                prom,
                &format!("/api/v1/query?query={}&time={:.3}", urlencode(expr), t - dt),
            )
            .unwrap();
            assert_eq!(status, 200, "{body}");
            results(&serde_json::from_str(&body).unwrap())
        };
        // Prometheus around `t`, from a second after back to a second and a quarter before:
        // its samples and ours were taken at different moments within each second, so ours
        // should lie within what Prometheus answers around it, give or take one step. A range longer
        // than the scraped window holds one or two more of Prometheus' samples (it started
        // first), which moves a rate by up to two scrapes in the window's.
        let p: Vec<BTreeMap<String, f64>> = (-4..=5).map(|k| at(f64::from(k) * 0.25)).collect();
        let mine = results(mine);
        let keys: Vec<&String> = mine.keys().collect();
        assert!(
            p.iter().any(|m| m.keys().collect::<Vec<_>>() == keys),
            "{expr}: label sets: ours {keys:?}, Prometheus {:?}",
            p[0].keys().collect::<Vec<_>>()
        );
        let share = if longest_range_s(expr) >= WINDOW_S - 2.0 {
            0.02 + 2.5 / WINDOW_S
        } else {
            0.02
        };
        for (k, v) in &mine {
            let seen: Vec<f64> = p.iter().filter_map(|m| m.get(k).copied()).collect();
            if v.is_nan() {
                assert!(
                    seen.iter().any(|x| x.is_nan()),
                    "{expr} {k}: ours NaN, Prometheus {seen:?}"
                );
                continue;
            }
            let lo = seen.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = seen.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let step = seen
                .windows(2)
                .map(|w| (w[0] - w[1]).abs())
                .fold(0.0, f64::max);
            // An instant read of a gauge that follows the load (requests running, KV cache in
            // use) dips at each request's boundary in the closed loop (the next request
            // connects and is scheduled a few ms later): a sample taken between Prometheus'
            // may catch a dip theirs did not. A request about to end holds the most KV cache,
            // up to about twice an average one's share when the requests' progress is spread
            // evenly, so ours may differ by two of the LOAD_THREADS requests' average share.
            let boundary = if expr.contains('[') {
                0.0
            } else {
                2.0 * hi.abs() / LOAD_THREADS as f64
            };
            let margin = step.max(boundary) + share * hi.abs() + 1e-9;
            assert!(
                *v >= lo - margin && *v <= hi + margin,
                "{expr} {k}: ours {v}, Prometheus {lo}..{hi} around t (margin {margin})"
            );
            compared += 1;
            if *v < lo || *v > hi {
                worst = worst.max((v - v.clamp(lo, hi)).abs() / hi.abs().max(1e-9));
            }
        }
    }
    eprintln!(
        "{} expressions, {compared} values compared; the farthest outside Prometheus' range \
         around t by {:.2} % of its value",
        ours.len(),
        worst * 100.0
    );
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
