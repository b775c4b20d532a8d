//! `inferscale scaler` end to end, against simulated vLLM replicas under load: a gRPC client
//! generated from the `.proto` in Rust (`build.rs`) and an independent one in Python
//! (grpcio, stubs compiled by grpcio-tools from the same file) see the queue as the sum of
//! the pods' gauges, values from the survivors when a replica is killed, and an error when
//! all are; a KEDA-like loop (the `autoscale` crate's HPA) on the scaler's answers shows
//! where a saturated fleet is taken.
//!
//! The three replicas are `inferscale sim --replicas 2` and `inferscale sim` (one more) so
//! that one replica can be killed alone: `--replicas` engines share one process.

#![allow(clippy::unwrap_used)]

mod common;

use std::io::{BufRead, BufReader, Read as _, Write as _};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{inferscale, workspace};
use inferscale_autoscale::hpa::{Hpa, Reading, Replicas, Spec, Target};
use inferscale_scaler::grpc::{self, Code};
use inferscale_scaler::proto::{GetMetricsRequest, ScaledObjectRef};
use inferscale_testkit::Reap;

/// Requests in a batch at most, per replica; each replica is sent `IN_FLIGHT`, so
/// `IN_FLIGHT - MAX_NUM_SEQS` wait.
const MAX_NUM_SEQS: usize = 2;
const IN_FLIGHT: usize = 6;

/// A child that prints `marker` lines on standard output: each line's URL after `marker`.
fn spawn_with_urls(args: &[&str], marker: &str, until: &str) -> (Reap, Vec<String>) {
    let mut child = inferscale()
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let out = child.stdout.take().unwrap();
    let mut urls = Vec::new();
    for line in BufReader::new(out).lines() {
        let line = line.unwrap();
        if let Some((_, rest)) = line.split_once(marker) {
            urls.push(rest.split_whitespace().next().unwrap().to_owned());
        }
        if line.contains(until) {
            break;
        }
    }
    (Reap(child), urls)
}

fn sim(replicas: &str) -> (Reap, Vec<String>) {
    let n = MAX_NUM_SEQS.to_string();
    spawn_with_urls(
        &[
            "sim",
            "--listen",
            "127.0.0.1:0",
            "--replicas",
            replicas,
            "--max-num-seqs",
            &n,
            "--served-model-name",
            "m",
            // The model "loads" for 20 simulated seconds: 5 s of wall time. A request of 8,000
            // output tokens then takes about 40 s, far longer than the checks.
            "--speedup",
            "4",
        ],
        "serving ",
        "stop with Ctrl-C",
    )
}

/// Requests that hold a replica busy: long outputs (no early end of sequence), sent and
/// left open. Each thread ends when its replica goes.
fn hold_busy(url: &str, n: usize) {
    for i in 0..n {
        let addr = url.trim_start_matches("http://").to_owned();
        std::thread::spawn(move || {
            let body = format!(
                "{{\"model\":\"m\",\"prompt\":\"busy {i}\",\"max_tokens\":8000,\"ignore_eos\":true}}"
            );
            if let Ok(mut s) = std::net::TcpStream::connect(&addr) {
                let _ = write!(
                    s,
                    "POST /v1/completions HTTP/1.0\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                    body.len()
                );
                let _ = s.read_to_end(&mut Vec::new());
            }
        });
    }
}

/// A replica's `vllm:num_requests_waiting`, summed over its series.
fn waiting(url: &str) -> Option<f64> {
    let addr: std::net::SocketAddr = url.trim_start_matches("http://").parse().ok()?;
    let (status, text) = inferscale_testkit::http_get(addr, "/metrics").ok()?;
    (status == 200).then(|| {
        text.lines()
            .filter(|l| l.starts_with("vllm:num_requests_waiting{"))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    })
}

fn python(addr: &str, meta: &serde_json::Value) -> serde_json::Value {
    let root = workspace();
    let out = Command::new("python3")
        .arg(root.join("crates/scaler/tests/keda_client.py"))
        .arg(root.join("crates/scaler/proto"))
        .arg(addr)
        .arg(meta.to_string())
        .output()
        .expect("python3 runs (scripts/test installs grpcio and grpcio-tools)");
    assert!(
        out.status.success(),
        "the Python client failed (are grpcio and grpcio-tools installed? scripts/test installs them):\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn so(meta: &serde_json::Value) -> ScaledObjectRef {
    ScaledObjectRef {
        name: "vllm".into(),
        namespace: "llm".into(),
        scaler_metadata: meta
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_owned()))
            .collect(),
    }
}

#[test]
fn rust_and_python_clients_drive_the_scaler_against_simulated_replicas() {
    let (mut pair, pair_urls) = sim("2");
    let (mut lone, lone_urls) = sim("1");
    assert_eq!(
        (pair_urls.len(), lone_urls.len()),
        (2, 1),
        "{pair_urls:?} {lone_urls:?}"
    );
    let all: Vec<String> = pair_urls.iter().chain(&lone_urls).cloned().collect();
    let deadline = Instant::now() + Duration::from_secs(60);
    for u in &all {
        let addr: std::net::SocketAddr = u.trim_start_matches("http://").parse().unwrap();
        while inferscale_testkit::http_get(addr, "/health")
            .map(|r| r.0)
            .ok()
            != Some(200)
        {
            assert!(Instant::now() < deadline, "{u} did not load its model");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    for u in &all {
        hold_busy(u, IN_FLIGHT);
    }
    // Each replica runs MAX_NUM_SEQS and queues the rest.
    let want = (IN_FLIGHT - MAX_NUM_SEQS) as f64;
    let deadline = Instant::now() + Duration::from_secs(60);
    while !all.iter().all(|u| waiting(u) == Some(want)) {
        assert!(
            Instant::now() < deadline,
            "the replicas did not queue {want} each: {:?}",
            all.iter().map(|u| waiting(u)).collect::<Vec<_>>()
        );
        std::thread::sleep(Duration::from_millis(100));
    }

    let (_scaler, addrs) = spawn_with_urls(
        &[
            "scaler",
            "--listen",
            "127.0.0.1:0",
            "--http-listen",
            "127.0.0.1:0",
            "--cache",
            "0s",
        ],
        "ExternalScaler on ",
        "stop with Ctrl-C",
    );
    let addr = addrs[0].clone();
    let queue = serde_json::json!({
        "scalerAddress": addr,
        "targets": all.join(","),
        "metric": "queue_depth",
        "target": "2",
    });
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let client = rt.block_on(grpc::connect(&addr, None)).unwrap();
    let get = |meta: &serde_json::Value| {
        let req = GetMetricsRequest {
            scaled_object_ref: Some(so(meta)),
            metric_name: "inferscale-queue-depth".into(),
        };
        rt.block_on(client.clone().get_metrics(req))
            .map(|r| r.into_inner().metric_values[0].metric_value_float)
    };

    // All up: the value is the sum of the pods' gauges, read just before and after.
    let sum = |urls: &[String]| urls.iter().map(|u| waiting(u).unwrap()).sum::<f64>();
    let before = sum(&all);
    let rust = get(&queue).unwrap();
    let py = python(&addr, &queue);
    let after = sum(&all);
    assert_eq!(before, after, "the queues moved during the check");
    assert_eq!(rust, before);
    assert_eq!(py["metrics"][0]["metricValueFloat"], before, "{py}");
    assert_eq!(py["metrics"][0]["metricValue"], before as i64, "{py}");
    assert_eq!(
        py["spec"][0]["metricName"], "inferscale-queue-depth",
        "{py}"
    );
    assert_eq!(py["spec"][0]["targetSizeFloat"], 2.0, "{py}");
    assert_eq!(py["active"], true, "{py}");

    // A KEDA-like loop: GetMetricSpec once, then every 15 s GetMetrics into the HPA
    // (AverageValue, Kubernetes' default behaviour), the fleet's 3 pods ready throughout.
    let desired = serde_json::json!({
        "targets": all.join(","),
        "metric": "desired_replicas",
        "target": "2",
        "latencyTarget": "10s",
    });
    let spec = rt
        .block_on(client.clone().get_metric_spec(so(&desired)))
        .unwrap()
        .into_inner();
    let target = spec.metric_specs[0].target_size_float;
    assert_eq!(target, 1.0, "desired_replicas is read as AverageValue 1");
    let mut hpa = Hpa::new(Spec::new(1, 20, None));
    let mut n = 3u32;
    let mut path = vec![n];
    for sync in 0..4 {
        let req = GetMetricsRequest {
            scaled_object_ref: Some(so(&desired)),
            metric_name: spec.metric_specs[0].metric_name.clone(),
        };
        let got = rt
            .block_on(client.clone().get_metrics(req.clone()))
            .unwrap()
            .into_inner();
        let v = got.metric_values[0].metric_value_float;
        // The deprecated whole field rounds a replica count up, never down.
        assert_eq!(got.metric_values[0].metric_value, v.ceil() as i64, "{v}");
        let reading = Reading {
            target: Target::AverageValue(target),
            value: Some(v),
        };
        let r = Replicas {
            spec: n,
            status: n,
            ready: 3,
        };
        if let inferscale_autoscale::hpa::Decision::Desired(d) =
            hpa.reconcile(f64::from(sync) * 15.0, r, &[reading])
        {
            n = d;
        }
        path.push(n);
    }
    // 12 waiting at 2 per replica: 6 replicas, twice the fleet, reached at the first sync.
    let queued = sum(&all);
    assert_eq!(queued, 12.0);
    assert_eq!(*path.last().unwrap(), 6, "replicas per sync: {path:?}");
    eprintln!("HPA on the scaler's desired_replicas, per 15 s sync: {path:?}");

    // One replica killed: the value comes from the other two.
    lone.0.kill().unwrap();
    let _ = lone.0.wait();
    let rust = get(&queue).unwrap();
    let py = python(&addr, &queue);
    assert_eq!(rust, sum(&pair_urls));
    assert_eq!(py["metrics"][0]["metricValueFloat"], rust, "{py}");

    // All killed: an error (Unavailable), never a 0, for both clients.
    pair.0.kill().unwrap();
    let _ = pair.0.wait();
    let e = get(&queue).unwrap_err();
    assert_eq!(e.code(), Code::Unavailable, "{e}");
    assert!(e.message().contains("all 3 pods failed"), "{e}");
    let py = python(&addr, &queue);
    assert_eq!(py["metrics"]["code"], "UNAVAILABLE", "{py}");
    assert_eq!(py["active"]["code"], "UNAVAILABLE", "{py}");
}
