//! The evaluator against a real Prometheus on identical data.
//!
//! Two simulated vLLM servers (the seeds' L40S deployment) are driven in virtual time through
//! 25 minutes that hold what trips evaluators up: load below and above saturation, an idle
//! stretch (every latency quantile is 0/0 = NaN there), a restart under load (counters reset), a
//! target that goes down (`up` 0) and then vanishes (its series age out of the lookback). Both
//! servers' `/metrics` and DCGM bodies are scraped every 10 s into a store and written out as
//! timestamped OpenMetrics; `promtool tsdb create-blocks-from openmetrics` backfills that file
//! into a TSDB, a Prometheus serves it, and every query of the generated ScaledObject, rules
//! and dashboards, the seeds' ScaledObject and vLLM's official dashboard is evaluated at many
//! instants by both — our store read back from the same file. Results must agree within 1e-9
//! relative (or 1e-12 absolute, floating-point cancellation), with the same empty results and
//! the same NaNs.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

use inferscale_engine::fleet::{Fleet, Routing, drive};
use inferscale_engine::{EngineConfig, RequestSpec, profile};
use inferscale_promql::{Evaluator, Labels, Query, Store, Value, format_value, parse_value};
use inferscale_sim::Exporter;
use inferscale_testkit::{http_get as get, program, urlencode};

const MODEL: &str = "mistralai/Ministral-3-8B-Instruct-2512";
const SCRAPE_S: i64 = 10;
const END_S: i64 = 1500;

fn testdata(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata")
        .join(rel)
}

/// One simulated server: its fleet (one replica), exporters, and when its clock started.
struct Server {
    fleet: Fleet,
    exporter: Exporter,
    started_s: i64,
    vllm: Labels,
    dcgm: Labels,
    sent: u64,
}

impl Server {
    fn new(cfg: &EngineConfig, name: &str, ip: &str, at_s: i64, base_ms: i64) -> Server {
        let mut fleet = Fleet::new(cfg.clone(), 1, Routing::RoundRobin).unwrap();
        fleet.set_token_events(false);
        let created = (base_ms / 1000 + at_s) as f64;
        Server {
            fleet,
            exporter: Exporter::new(cfg, MODEL, created, usize::from(name == "b")),
            started_s: at_s,
            vllm: Labels::new([
                ("job", "vllm"),
                ("namespace", "llm"),
                ("pod", &format!("vllm-{name}")),
                ("instance", &format!("{ip}:8000")),
            ]),
            dcgm: Labels::new([
                ("job", "dcgm"),
                ("namespace", "gpu-operator"),
                ("pod", &format!("dcgm-exporter-{name}")),
                ("instance", &format!("{ip}:9400")),
            ]),
            sent: 0,
        }
    }

    /// Runs the server from `from_s` to `to_s` (global seconds) at `rate` req/s.
    fn run(&mut self, from_s: i64, to_s: i64, rate: f64) {
        let local = |t: i64| (t - self.started_s) as f64;
        let (a, b) = (local(from_s), local(to_s));
        let mut arrivals = Vec::new();
        if rate > 0.0 {
            let mut k = (a * rate).floor() as u64 + 1;
            while (k as f64) / rate <= b {
                let n = self.sent + arrivals.len() as u64;
                arrivals.push((
                    k as f64 / rate,
                    RequestSpec {
                        prompt_tokens: 24 + (n % 61) as u32,
                        max_tokens: 60 + (n % 97) as u32,
                        ignore_eos: true,
                    },
                ));
                k += 1;
            }
        }
        self.sent += arrivals.len() as u64;
        drive(&mut self.fleet, arrivals, b, &mut [], |_| {});
    }

    fn scrape(&mut self, store: &mut Store, t_s: i64, base_ms: i64) {
        let now = (t_s - self.started_s) as f64;
        let engine = &self.fleet.replicas()[0].engine;
        let vllm = self.exporter.vllm(engine);
        let dcgm = self.exporter.dcgm(engine, now);
        let t = base_ms + t_s * 1000;
        let exp = inferscale_promtext::parse(vllm.as_bytes()).unwrap();
        store.scrape(&self.vllm, t, Some(&exp));
        let exp = inferscale_promtext::parse(dcgm.as_bytes()).unwrap();
        store.scrape(&self.dcgm, t, Some(&exp));
    }
}

/// The requests per second each server gets at global second `t`.
fn rate_at(t: i64) -> f64 {
    match t {
        0..300 => 20.0,
        300..600 => 70.0, // above the ~56 req/s one replica sustains: the queue grows
        600..900 => 0.0,  // idle: quantiles over the rate windows are NaN
        900..1200 => 30.0,
        _ => 0.0,
    }
}

/// Records the 25 minutes and writes them as OpenMetrics with timestamps.
fn record(base_ms: i64, out: &Path) -> usize {
    let cfg = profile("aws-eks-ministral-8b-l40s").unwrap();
    let mut store = Store::new();
    let mut a = Server::new(&cfg, "a", "10.0.0.1", 0, base_ms);
    let mut b = Server::new(&cfg, "b", "10.0.0.2", 0, base_ms);
    let mut t = 0;
    while t <= END_S {
        if t == 1000 {
            // Server a restarts under load (same pod, same address): every counter starts
            // again at 0 inside the rate windows that span the restart.
            a = Server::new(&cfg, "a", "10.0.0.1", t, base_ms);
        }
        if t > 0 {
            a.run(t - SCRAPE_S, t, rate_at(t - 1));
        }
        a.scrape(&mut store, t, base_ms);
        match t {
            ..1050 => {
                if t > 0 {
                    b.run(t - SCRAPE_S, t, rate_at(t - 1));
                }
                b.scrape(&mut store, t, base_ms);
            }
            // Server b is down: its scrapes fail (`up` 0) …
            1050..1200 => {
                let at = base_ms + t * 1000;
                store.scrape(&b.vllm, at, None);
                store.scrape(&b.dcgm, at, None);
            }
            // … then its targets are gone, and its last samples age out of the lookback.
            _ => {}
        }
        t += SCRAPE_S;
    }
    // Staleness markers have no OpenMetrics form; both sides read the file without them.
    let mut text = String::new();
    let mut samples = 0;
    for s in store.series() {
        let name = s.labels.name().unwrap();
        let mut sel = String::new();
        for (k, v) in s.labels.iter().filter(|(k, _)| *k != "__name__") {
            if !sel.is_empty() {
                sel.push(',');
            }
            sel.push_str(&format!(
                "{k}=\"{}\"",
                v.replace('\\', "\\\\").replace('"', "\\\"")
            ));
        }
        for p in s
            .points
            .iter()
            .filter(|p| !inferscale_promql::store::is_stale(p.v))
        {
            text.push_str(&format!(
                "{name}{{{sel}}} {} {}.{:03}\n",
                format_value(p.v),
                p.t / 1000,
                p.t % 1000
            ));
            samples += 1;
        }
    }
    text.push_str("# EOF\n");
    std::fs::write(out, text).unwrap();
    samples
}

/// Grafana's variables, as a dashboard showing our model would set them.
fn substitute(q: &str) -> String {
    let vars: Vec<(String, String)> = [
        ("__rate_interval", "1m"),
        ("__interval", "1m"),
        ("__range", "1m"),
        ("model_name", MODEL),
        ("model", MODEL),
        ("node", ".*"),
    ]
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .into();
    inferscale_manifests::with_variables(q, &vars)
}

/// `(where, query)` for every query the test covers.
fn queries() -> Vec<(String, String)> {
    let thresholds: inferscale_analysis::Thresholds = serde_json::from_str(
        &std::fs::read_to_string(testdata("runs/thresholds-default.json")).unwrap(),
    )
    .unwrap();
    let options = inferscale_manifests::Options::example();
    assert_eq!(options.model_name, MODEL);
    let mut sources: Vec<(String, String)> = inferscale_manifests::generate(&thresholds, &options)
        .unwrap()
        .into_iter()
        .filter(|f| f.path.ends_with(".json") || f.path.ends_with(".yaml"))
        .filter(|f| !f.path.ends_with(".test.yaml"))
        .map(|f| (f.path, f.contents))
        .collect();
    // The proportional policies' triggers too: requests in flight, arrivals (rate and delta),
    // each predicted ahead by predict_linear over a subquery.
    // And the inference gateway's (its endpoint picker's requests in flight and token
    // backlog).
    for primary in [
        inferscale_analysis::scaling::Primary::InFlight,
        inferscale_analysis::scaling::Primary::ArrivalRate,
        inferscale_analysis::scaling::Primary::GatewayInFlight,
        inferscale_analysis::scaling::Primary::GatewayTokens,
    ] {
        let mut p =
            inferscale_analysis::scaling::Policy::derive(&thresholds, primary, 0.8, 50.0, 270.0, 1);
        p.horizon_s = Some(330);
        let mut o = options.clone();
        o.policy = Some(p);
        sources.push((
            format!("{} policy: scaledobject.yaml", primary.key()),
            inferscale_manifests::keda::policy_scaled_object(
                &thresholds,
                &o,
                o.policy.as_ref().unwrap(),
            )
            .to_yaml()
            .unwrap(),
        ));
    }
    // The gateway's SLO ratio as compare-signals writes it (P90 over a minute, NaN to 0).
    let p90 = inferscale_manifests::promql::epp_quantile(
        0.9,
        inferscale_catalog::gateway::GatewaySignal::Ttft,
        "llm",
        "vllm",
        "1m",
    );
    sources.push((
        "gateway SLO ratio".into(),
        format!("query: '(({p90}) / 0.5 >= 0) or on() vector(0)'\n"),
    ));
    for (name, path) in [
        (
            "seeds: keda-scaledobject.yaml",
            "aws-eks/keda-scaledobject.yaml",
        ),
        ("vLLM: grafana.json", "vllm/grafana.json"),
    ] {
        sources.push((
            name.into(),
            std::fs::read_to_string(testdata(path)).unwrap(),
        ));
    }
    let mut out: Vec<(String, String)> = Vec::new();
    for (name, text) in sources {
        for q in inferscale_manifests::queries_in_text(&text).unwrap() {
            let q = substitute(&q);
            if !out.iter().any(|(_, x)| *x == q) {
                out.push((name.clone(), q));
            }
        }
    }
    out
}

/// What one side answered, in a comparable form.
#[derive(Debug)]
enum Answer {
    Error(#[allow(dead_code)] String),
    Scalar(f64),
    Vector(BTreeMap<String, f64>),
}

fn ours(v: Result<Value, inferscale_promql::EvalError>) -> Answer {
    match v {
        Err(e) => Answer::Error(e.to_string()),
        Ok(Value::Scalar(x)) => Answer::Scalar(x),
        Ok(Value::Vector(v)) => Answer::Vector(
            v.into_iter()
                .map(|s| (s.labels.to_string(), s.value))
                .collect(),
        ),
        Ok(other) => Answer::Error(format!("unexpected {}", other.kind())),
    }
}

fn theirs(body: &str) -> Answer {
    let v: serde_json::Value = serde_json::from_str(body).unwrap();
    if v["status"] != "success" {
        return Answer::Error(v["error"].as_str().unwrap_or("?").to_owned());
    }
    let num = |x: &serde_json::Value| parse_value(x[1].as_str().unwrap()).unwrap();
    match v["data"]["resultType"].as_str() {
        Some("scalar") => Answer::Scalar(num(&v["data"]["result"])),
        Some("vector") => Answer::Vector(
            v["data"]["result"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| {
                    let labels = Labels::new(
                        r["metric"]
                            .as_object()
                            .unwrap()
                            .iter()
                            .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_owned())),
                    );
                    (labels.to_string(), num(&r["value"]))
                })
                .collect(),
        ),
        other => Answer::Error(format!("unexpected {other:?}")),
    }
}

/// Equal within 1e-9 relative, or within 1e-12 absolute: a difference that small between a
/// zero and a residue is cancellation in a sum that the two evaluate in another order
/// (Prometheus's `sum` compensates with Kahan's method; a 0 against 7e-15 was seen).
fn close(a: f64, b: f64) -> bool {
    (a.is_nan() && b.is_nan())
        || a == b
        || (a - b).abs() <= 1e-9 * a.abs().max(b.abs())
        || (a - b).abs() <= 1e-12
}

fn agree(a: &Answer, b: &Answer) -> bool {
    match (a, b) {
        (Answer::Error(_), Answer::Error(_)) => true,
        (Answer::Scalar(x), Answer::Scalar(y)) => close(*x, *y),
        (Answer::Vector(x), Answer::Vector(y)) => {
            x.len() == y.len()
                && x.iter()
                    .zip(y)
                    .all(|((ka, va), (kb, vb))| ka == kb && close(*va, *vb))
        }
        _ => false,
    }
}

#[test]
fn the_evaluator_agrees_with_prometheus_on_backfilled_simulator_series() {
    let promtool = program("promtool");
    let dir = std::env::temp_dir().join(format!("inferscale-promql-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    // Two hours ago, on a 10 s boundary: inside the TSDB's retention, behind its head.
    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let base_ms = (now_ms - 2 * 3600 * 1000) / 10_000 * 10_000;
    let om = dir.join("series.om.txt");
    let samples = record(base_ms, &om);
    assert!(samples > 50_000, "recorded {samples} samples");

    let tsdb = dir.join("tsdb");
    let out = Command::new(&promtool)
        .args(["tsdb", "create-blocks-from", "openmetrics"])
        .arg(&om)
        .arg(&tsdb)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "promtool: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let (_prom, addr) = inferscale_testkit::prometheus(
        &dir,
        "global:\n  scrape_interval: 1h\n",
        &[
            &format!("--storage.tsdb.path={}", tsdb.display()),
            "--storage.tsdb.retention.time=30d",
        ],
    );

    // Our side reads the very file promtool read.
    let text = std::fs::read(&om).unwrap();
    let exp = inferscale_promtext::parse_with(
        &text,
        inferscale_promtext::ParseOptions {
            format: Some(inferscale_promtext::Format::OpenMetrics),
            strict: false,
        },
    )
    .unwrap();
    let mut store = Store::new();
    for s in exp.samples() {
        let mut l = Labels::new(
            s.labels()
                .iter()
                .map(|l| (l.name.to_string(), l.value.to_string())),
        );
        l.set("__name__".into(), s.name().to_owned());
        let t = (s.timestamp().unwrap() * 1000.0).round() as i64;
        store.push(l, t, s.value()).unwrap();
    }
    assert_eq!(store.sample_count(), samples);

    let queries = queries();
    assert!(queries.len() >= 60, "found {} queries", queries.len());
    // Instants off the scrape grid and on it (where the window's closed ends matter), through
    // every phase: load, overload, idle, restart, the target down, and after it vanished.
    let mut instants: Vec<i64> = (0..44).map(|i| 61_237 + i * 32_911).collect();
    instants.extend([
        300_000, 600_000, 1_010_000, 1_030_000, 1_050_000, 1_200_000, 1_490_000,
    ]);
    let ev = Evaluator::new(&store);
    let (mut compared, mut empty, mut nan, mut errors) = (0, 0, 0, 0);
    let mut failures = Vec::new();
    for (source, q) in &queries {
        let parsed = Query::parse(q).unwrap_or_else(|e| panic!("{source}: {e}"));
        for &dt in &instants {
            let t = base_ms + dt;
            let mine = ours(ev.eval(&parsed, t));
            let path = format!(
                "/api/v1/query?query={}&time={}.{:03}",
                urlencode(q),
                t / 1000,
                t % 1000
            );
            let (status, body) = get(addr, &path).unwrap();
            assert!(
                status == 200 || status == 400 || status == 422,
                "{status}: {body}"
            );
            let reference = theirs(&body);
            compared += 1;
            match &reference {
                Answer::Vector(v) if v.is_empty() => empty += 1,
                Answer::Vector(v) if v.values().any(|x| x.is_nan()) => nan += 1,
                Answer::Scalar(x) if x.is_nan() => nan += 1,
                Answer::Error(_) => errors += 1,
                _ => {}
            }
            if !agree(&mine, &reference) && failures.len() < 10 {
                failures.push(format!(
                    "{source}: {q}\n  at +{dt} ms\n  ours:       {mine:?}\n  Prometheus: {reference:?}"
                ));
            }
        }
    }
    println!(
        "{} queries × {} instants = {compared} comparisons: {empty} empty, {nan} with NaN, \
         {errors} errors",
        queries.len(),
        instants.len()
    );
    assert!(
        failures.is_empty(),
        "disagreements:\n{}",
        failures.join("\n")
    );
    // The data exercised what it was built to exercise.
    assert!(empty > 100, "{empty} empty results");
    assert!(nan > 100, "{nan} NaN results");
    let _ = std::fs::remove_dir_all(&dir);
}
