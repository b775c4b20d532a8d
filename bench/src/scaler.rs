//! `inferscale scaler` under a 200-pod fleet (`bench/scaler.sh`):
//!
//! - `scaler-latency`: `GetMetrics` (desired_replicas: the queue summed and the queue-time p95
//!   merged across every pod) called back to back for a while, each call scraping every pod
//!   (`--cache 0s`); latency percentiles, and the scaler's resident memory sampled every 10 s.
//! - `scaler-freshness`: the queue of the fleet stepped up and down (requests held open on some
//!   pods, then dropped), with the scaler and a real Prometheus (scraping the same pods every
//!   15 s) polled side by side as KEDA would; for each step, how long each path took to show it.

use std::collections::BTreeMap;
use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use inferscale_scaler::proto::{GetMetricsRequest, ScaledObjectRef};
use serde_json::json;

fn flag(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

fn need(args: &[String], name: &str) -> Result<String, String> {
    flag(args, name).ok_or_else(|| format!("{name} is required"))
}

fn num<T: std::str::FromStr>(args: &[String], name: &str, default: T) -> Result<T, String> {
    match flag(args, name) {
        None => Ok(default),
        Some(v) => v.parse().map_err(|_| format!("{name} {v:?}: not a number")),
    }
}

/// Base URLs of `pods` replicas on consecutive ports from `base`.
fn urls(base: u16, pods: u16) -> Vec<String> {
    (0..pods)
        .map(|i| format!("http://127.0.0.1:{}", base + i))
        .collect()
}

fn request(meta: &[(&str, String)]) -> GetMetricsRequest {
    GetMetricsRequest {
        scaled_object_ref: Some(ScaledObjectRef {
            name: "vllm".into(),
            namespace: "bench".into(),
            scaler_metadata: meta
                .iter()
                .map(|(k, v)| ((*k).to_owned(), v.clone()))
                .collect::<BTreeMap<_, _>>(),
        }),
        metric_name: String::new(),
    }
}

fn rss_kib(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines()
        .find(|l| l.starts_with("VmRSS:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[i]
}

fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())
}

/// One GET of `url`'s `/metrics`, whole.
fn fetch(url: &str) -> Result<Vec<u8>, String> {
    let addr = url.trim_start_matches("http://");
    let mut s = TcpStream::connect(addr).map_err(|e| format!("{addr}: {e}"))?;
    write!(s, "GET /metrics HTTP/1.0\r\n\r\n").map_err(|e| e.to_string())?;
    let mut b = Vec::new();
    s.read_to_end(&mut b).map_err(|e| e.to_string())?;
    let at = b
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or("no HTTP header end")?;
    Ok(b[at + 4..].to_vec())
}

/// Pods that answer at once: each serves the exposition one simulated replica wrote, on a
/// port of its own, from a thread of this process. Their rendering costs nothing, as
/// pods on machines of their own cost the scaler nothing; the scaler still receives and
/// reads every byte.
fn farm(bodies: Vec<Vec<u8>>) -> Result<Vec<String>, String> {
    let listeners: Vec<std::net::TcpListener> = bodies
        .iter()
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string()))
        .collect::<Result<_, _>>()?;
    let urls = listeners
        .iter()
        .map(|l| {
            l.local_addr()
                .map(|a| format!("http://{a}"))
                .map_err(|e| e.to_string())
        })
        .collect::<Result<Vec<_>, _>>()?;
    std::thread::spawn(move || {
        let Ok(rt) = runtime() else { return };
        rt.block_on(async move {
            for (l, body) in listeners.into_iter().zip(bodies) {
                let _ = l.set_nonblocking(true);
                let Ok(l) = tokio::net::TcpListener::from_std(l) else { continue };
                let body = std::sync::Arc::new(body);
                tokio::spawn(async move {
                    use tokio::io::{AsyncReadExt, AsyncWriteExt};
                    while let Ok((mut c, _)) = l.accept().await {
                        let body = std::sync::Arc::clone(&body);
                        tokio::spawn(async move {
                            let mut buf = vec![0u8; 4096];
                            let mut n = 0;
                            while !buf[..n].windows(4).any(|w| w == b"\r\n\r\n") && n < buf.len() {
                                match c.read(&mut buf[n..]).await {
                                    Ok(0) | Err(_) => return,
                                    Ok(k) => n += k,
                                }
                            }
                            let head = format!(
                                "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                                body.len()
                            );
                            let _ = c.write_all(head.as_bytes()).await;
                            let _ = c.write_all(&body).await;
                        });
                    }
                });
            }
            std::future::pending::<()>().await;
        });
    });
    Ok(urls)
}

/// `scaler-latency --scaler ADDR --base PORT --pods N --seconds S --pid PID [--farm]`.
pub(crate) fn latency(args: &[String]) -> Result<(), String> {
    let addr = need(args, "--scaler")?;
    let base: u16 = num(args, "--base", 20_000)?;
    let pods: u16 = num(args, "--pods", 200)?;
    let seconds: u64 = num(args, "--seconds", 600)?;
    let pid: u32 = num(args, "--pid", 0)?;
    let farmed = args.iter().any(|a| a == "--farm");
    let targets = if farmed {
        let bodies = urls(base, pods)
            .iter()
            .map(|u| fetch(u))
            .collect::<Result<Vec<_>, _>>()?;
        farm(bodies)?
    } else {
        urls(base, pods)
    };
    let rt = runtime()?;
    let client = rt
        .block_on(inferscale_scaler::grpc::connect(&addr, None))
        .map_err(|e| e.to_string())?;
    let req = request(&[
        ("targets", targets.join(",")),
        ("metric", "desired_replicas".into()),
        ("target", "5".into()),
        ("latencyMetric", "queue_time_p95".into()),
        ("latencyTarget", "3s".into()),
        ("window", "2m".into()),
    ]);
    let start = Instant::now();
    let mut lat = Vec::new();
    let mut rss = Vec::new();
    let mut next_rss = Duration::ZERO;
    let mut failed = 0u64;
    let mut pods_seen = 0.0;
    while start.elapsed() < Duration::from_secs(seconds) {
        if start.elapsed() >= next_rss {
            if let Some(k) = rss_kib(pid) {
                rss.push((start.elapsed().as_secs(), k));
            }
            next_rss += Duration::from_secs(10);
        }
        let t = Instant::now();
        match rt.block_on(client.clone().get_metrics(req.clone())) {
            Ok(r) => {
                lat.push(t.elapsed().as_secs_f64() * 1000.0);
                pods_seen = r
                    .into_inner()
                    .metric_values
                    .first()
                    .map_or(0.0, |v| v.metric_value_float);
            }
            Err(e) => {
                failed += 1;
                if failed < 5 {
                    eprintln!("GetMetrics failed: {e}");
                }
            }
        }
    }
    lat.sort_by(f64::total_cmp);
    let first_min: Vec<u64> = rss.iter().filter(|(t, _)| *t <= 60).map(|r| r.1).collect();
    let last_min: Vec<u64> = rss
        .iter()
        .filter(|(t, _)| *t + 60 >= seconds)
        .map(|r| r.1)
        .collect();
    let out = json!({
        "pods": pods,
        "pods_served_by": if farmed { "the bench (each pod's exposition captured from the simulator)" } else { "inferscale sim" },
        "seconds": seconds,
        "calls": lat.len(),
        "failed": failed,
        "last_value": pods_seen,
        "latency_ms": {
            "p50": percentile(&lat, 0.50),
            "p90": percentile(&lat, 0.90),
            "p99": percentile(&lat, 0.99),
            "max": lat.last().copied().unwrap_or(f64::NAN),
        },
        "rss_kib": {
            "first_minute_max": first_min.iter().max(),
            "last_minute_max": last_min.iter().max(),
            "max": rss.iter().map(|r| r.1).max(),
            "samples": rss,
        },
    });
    println!(
        "{}",
        serde_json::to_string_pretty(&out).map_err(|e| e.to_string())?
    );
    Ok(())
}

/// Requests held open on a pod: long outputs, no early end of sequence.
fn hold(url: &str, n: usize) -> Vec<TcpStream> {
    let addr = url.trim_start_matches("http://");
    (0..n)
        .filter_map(|i| {
            let body = format!(
                "{{\"model\":\"m\",\"prompt\":\"step {i}\",\"max_tokens\":8000,\"ignore_eos\":true}}"
            );
            let mut s = TcpStream::connect(addr).ok()?;
            write!(
                s,
                "POST /v1/completions HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            )
            .ok()?;
            Some(s)
        })
        .collect()
}

/// The queue as KEDA's Prometheus scaler reads it: an instant query at "now".
fn prometheus_queue(prom: &str) -> Option<f64> {
    let q = "sum(vllm:num_requests_waiting)";
    let path = format!(
        "/api/v1/query?query={}",
        q.bytes()
            .map(|b| if b.is_ascii_alphanumeric() {
                char::from(b).to_string()
            } else {
                format!("%{b:02X}")
            })
            .collect::<String>()
    );
    let mut s = TcpStream::connect(prom.trim_start_matches("http://")).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\n\r\n").ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    let body = text.split("\r\n\r\n").nth(1)?;
    let v: serde_json::Value = serde_json::from_str(body).ok()?;
    v["data"]["result"][0]["value"][1].as_str()?.parse().ok()
}

/// `scaler-freshness --scaler ADDR --prometheus URL --base PORT --pods N --steps K --hold H`.
pub(crate) fn freshness(args: &[String]) -> Result<(), String> {
    let addr = need(args, "--scaler")?;
    let prom = need(args, "--prometheus")?;
    let base: u16 = num(args, "--base", 20_000)?;
    let pods: u16 = num(args, "--pods", 200)?;
    let steps: usize = num(args, "--steps", 6)?;
    // Pods loaded at each step, and requests per pod (with --max-num-seqs 2, all but 2 wait).
    let loaded: usize = num(args, "--loaded", 10)?;
    let per_pod: usize = num(args, "--per-pod", 6)?;
    let rt = runtime()?;
    let client = rt
        .block_on(inferscale_scaler::grpc::connect(&addr, None))
        .map_err(|e| e.to_string())?;
    let all = urls(base, pods);
    let req = request(&[
        ("targets", all.join(",")),
        ("metric", "queue_depth".into()),
        ("target", "5".into()),
    ]);
    let want = (loaded * per_pod.saturating_sub(2)) as f64;
    let scaler_queue = || {
        rt.block_on(client.clone().get_metrics(req.clone()))
            .ok()
            .and_then(|r| {
                r.into_inner()
                    .metric_values
                    .first()
                    .map(|v| v.metric_value_float)
            })
    };
    // Both paths polled every 250 ms; a step is seen when the value reaches it.
    let watch = |pred: &dyn Fn(f64) -> bool, limit: Duration| {
        let t0 = Instant::now();
        let (mut s, mut p) = (None, None);
        while t0.elapsed() < limit && (s.is_none() || p.is_none()) {
            if s.is_none() && scaler_queue().is_some_and(pred) {
                s = Some(t0.elapsed().as_secs_f64());
            }
            if p.is_none() && prometheus_queue(&prom).is_some_and(pred) {
                p = Some(t0.elapsed().as_secs_f64());
            }
            std::thread::sleep(Duration::from_millis(250));
        }
        (s, p)
    };
    let mut rows = Vec::new();
    for k in 0..steps {
        // Steps fall at different phases of Prometheus' 15 s scrape cycle.
        std::thread::sleep(Duration::from_millis(3_700 + 2_300 * k as u64 % 15_000));
        let targets = &all[(k * loaded) % all.len()..][..loaded.min(all.len())];
        let held: Vec<TcpStream> = targets.iter().flat_map(|u| hold(u, per_pod)).collect();
        let (s_up, p_up) = watch(&|v| v >= want, Duration::from_secs(40));
        std::thread::sleep(Duration::from_millis(1_900 * (k as u64 % 5)));
        drop(held);
        let (s_down, p_down) = watch(&|v| v == 0.0, Duration::from_secs(40));
        eprintln!(
            "step {k}: up scaler {s_up:?} s, prometheus {p_up:?} s; down scaler {s_down:?} s, prometheus {p_down:?} s"
        );
        rows.push(json!({"up": {"scaler_s": s_up, "prometheus_s": p_up}, "down": {"scaler_s": s_down, "prometheus_s": p_down}}));
    }
    let gaps: Vec<f64> = rows
        .iter()
        .flat_map(|r| {
            ["up", "down"].map(|d| (r[d]["prometheus_s"].as_f64(), r[d]["scaler_s"].as_f64()))
        })
        .filter_map(|(p, s)| Some(p? - s?))
        .collect();
    let mean = gaps.iter().sum::<f64>() / gaps.len().max(1) as f64;
    let mut sorted = gaps.clone();
    sorted.sort_by(f64::total_cmp);
    let out = json!({
        "pods": pods,
        "step_queue": want,
        "steps": rows,
        "prometheus_minus_scaler_s": {
            "mean": mean,
            "min": sorted.first(),
            "max": sorted.last(),
            "n": sorted.len(),
        },
    });
    println!(
        "{}",
        serde_json::to_string_pretty(&out).map_err(|e| e.to_string())?
    );
    Ok(())
}
