//! End-to-end tests of `inferscale scrape`, running the real binary against files, standard
//! input and small HTTP servers on loopback.

// A panic in a test is a failed assertion.
#![allow(clippy::unwrap_used)]

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;

fn testdata(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata")
        .join(rel)
}

fn inferscale(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_inferscale"))
        .args(args)
        .output()
        .expect("the binary runs")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// What a test server answers to the n-th request (0-based).
type Responder = dyn Fn(usize) -> Option<(u16, String)> + Send + Sync;

/// Serves HTTP/1.1 on 127.0.0.1, one connection at a time, until the test process ends.
/// `None` from the responder means "never answer" (to provoke timeouts).
fn serve(respond: Arc<Responder>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/metrics", listener.local_addr().unwrap());
    let hits = AtomicUsize::new(0);
    thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut buf = [0u8; 4096];
            let mut req = Vec::new();
            while !req.windows(4).any(|w| w == b"\r\n\r\n") {
                match stream.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => req.extend_from_slice(&buf[..n]),
                }
            }
            let n = hits.fetch_add(1, Ordering::SeqCst);
            match respond(n) {
                Some((status, body)) => {
                    let head = format!(
                        "HTTP/1.1 {status} X\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                        body.len()
                    );
                    let _ = stream.write_all(head.as_bytes());
                    let _ = stream.write_all(body.as_bytes());
                }
                None => {
                    thread::spawn(move || {
                        thread::sleep(std::time::Duration::from_secs(30));
                        drop(stream);
                    });
                }
            }
        }
    });
    url
}

#[test]
fn a_vllm_0_33_exposition_shows_every_tier_1_and_2_signal() {
    let o = inferscale(&[
        "scrape",
        testdata("vllm/metrics_single_engine.prom")
            .to_str()
            .unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    for label in [
        "queue depth (waiting)  1",
        "running                3",
        "requests               ok 2  aborted 0  errored 0",
        "TTFT                   p50",
        "TPOT                   p50",
        "ITL                    p50",
        "e2e latency            p50 2.00s  p95 4.75s  p99 4.95s",
        "queue time             p50",
        "KV-cache usage         12.5%",
        "preemptions            0",
        "prompt tokens          1200",
        "generation tokens      57",
        "tokens per step        p50",
    ] {
        assert!(out.contains(label), "missing {label:?} in:\n{out}");
    }
    assert!(!out.contains("deprecated"), "{out}");
}

#[test]
fn an_old_vllm_is_read_through_deprecated_names() {
    let o = inferscale(&[
        "scrape",
        testdata("vllm/metrics_v0_9.prom").to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("KV-cache usage         31.2%"), "{out}");
    assert!(
        out.contains("[vllm:gpu_cache_usage_perc (deprecated)]"),
        "{out}"
    );
    assert!(
        out.contains("[vllm:time_per_output_token_seconds (deprecated)]"),
        "{out}"
    );
}

#[test]
fn a_dcgm_node_shows_tier_3_per_gpu() {
    let o = inferscale(&[
        "scrape",
        "--json",
        testdata("dcgm/node-8gpu.prom").to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let t = &v["targets"][0];
    assert_eq!(t["engine"], "dcgm");
    assert_eq!(t["gpus"].as_array().unwrap().len(), 8);
    for key in [
        "gpu_util",
        "gpu_mem_copy_util",
        "gpu_fb_used_mib",
        "gpu_fb_free_mib",
        "gpu_power_watts",
        "gpu_ecc_sbe_volatile_total",
        "gpu_sm_clock_mhz",
        "gpu_temp_celsius",
    ] {
        assert!(
            t["signals"][key].is_number(),
            "{key}: {}",
            t["signals"][key]
        );
    }
    assert!(
        t["signals"]["queue_depth"].is_null(),
        "missing is null, not zero"
    );
    assert_eq!(t["gpus"][0]["hostname"], "ip-10-0-42-17.ec2.internal");
}

#[test]
fn standard_input_and_targets_aggregate() {
    let file = testdata("vllm/metrics_single_engine.prom");
    let mut child = Command::new(env!("CARGO_BIN_EXE_inferscale"))
        .args(["scrape", "--json", "-", file.to_str().unwrap()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(&std::fs::read(&file).unwrap())
        .unwrap();
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success());
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["targets"][0]["target"], "<stdin>");
    // Queues add up; merged histograms have both targets' observations.
    assert_eq!(v["aggregate"]["signals"]["queue_depth"], 2.0);
    assert_eq!(v["aggregate"]["signals"]["e2e_count"], 4.0);
    assert_eq!(
        v["aggregate"]["signals"]["e2e_p95_seconds"],
        v["targets"][0]["signals"]["e2e_p95_seconds"]
    );
}

#[test]
fn interval_reports_rates_and_windowed_percentiles() {
    let base = std::fs::read_to_string(testdata("vllm/metrics_single_engine.prom")).unwrap();
    // Between the two scrapes, 100 more requests finish, all with e2e in (5, 10].
    let later = base
        .replace(
            "vllm:request_success_total{engine=\"0\",finished_reason=\"stop\",model_name=\"Qwen/Qwen3-0.6B\"} 1.0",
            "vllm:request_success_total{engine=\"0\",finished_reason=\"stop\",model_name=\"Qwen/Qwen3-0.6B\"} 101.0",
        )
        .lines()
        .map(|l| {
            if let Some(rest) = l.strip_prefix("vllm:e2e_request_latency_seconds_bucket{engine=\"0\",le=\"") {
                let le: f64 = rest.split('"').next().unwrap().replace("+Inf", "inf").parse().unwrap();
                let (head, v) = l.rsplit_once(' ').unwrap();
                let v: f64 = v.parse().unwrap();
                return format!("{head} {}", if le >= 10.0 { v + 100.0 } else { v });
            }
            if l.starts_with("vllm:e2e_request_latency_seconds_count") {
                return l.replace(" 2.0", " 102.0");
            }
            l.to_owned()
        })
        .collect::<Vec<_>>()
        .join("\n")
        + "\n";
    let url = serve(Arc::new(move |n| {
        Some((200, if n == 0 { base.clone() } else { later.clone() }))
    }));
    let o = inferscale(&["scrape", "--json", "--interval", "300ms", &url]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let s = &v["targets"][0]["signals"];
    assert_eq!(s["requests_ok_increase"], 100.0);
    let window = v["window_seconds"].as_f64().unwrap();
    let rate = s["requests_ok_per_second"].as_f64().unwrap();
    assert!((rate * window - 100.0).abs() < 1e-6);
    // Windowed: only the 100 new observations, all in the (5, 10] bucket.
    assert_eq!(s["e2e_count"], 100.0);
    assert_eq!(s["e2e_p50_seconds"], 7.5);
    assert!(
        s["queue_depth"].is_number(),
        "gauges keep their latest value"
    );
}

#[test]
fn unreadable_targets_are_reported_and_the_rest_still_shown() {
    let broken = serve(Arc::new(|_| Some((500, "engine dead".to_owned()))));
    let garbage = serve(Arc::new(|_| {
        Some((200, "this is { not metrics\n".to_owned()))
    }));
    let silent = serve(Arc::new(|_| None));
    let refused = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/metrics", l.local_addr().unwrap());
        drop(l);
        url
    };
    let good = testdata("vllm/metrics_single_engine.prom");
    let o = inferscale(&[
        "scrape",
        "--timeout",
        "500ms",
        &broken,
        &garbage,
        &silent,
        &refused,
        "no/such/file.prom",
        "ftp://127.0.0.1/metrics",
        good.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 6, "one line per failed target:\n{err}");
    assert!(err.contains(&format!("error: {broken}: HTTP 500")), "{err}");
    assert!(
        err.contains(&format!(
            "error: {garbage}: not a valid prometheus-text exposition: line 1"
        )),
        "{err}"
    );
    assert!(
        err.contains(&format!("error: {silent}: timed out after 500ms")),
        "{err}"
    );
    assert!(
        err.contains(&format!("error: {refused}: cannot connect")),
        "{err}"
    );
    assert!(
        err.contains("error: no/such/file.prom: cannot read the exposition file"),
        "{err}"
    );
    assert!(
        err.contains("unsupported scheme \"ftp\" (expected http:// or https://)"),
        "{err}"
    );
    assert!(
        stdout(&o).contains("queue depth (waiting)  1"),
        "the good target is still shown"
    );
}

#[test]
fn strict_openmetrics_validation() {
    let good = testdata("openmetrics/simple_histogram/metrics");
    let bad = testdata("openmetrics/bad_histograms_3/metrics");
    let o = inferscale(&[
        "scrape",
        "--format",
        "openmetrics",
        "--strict",
        good.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).contains("valid OpenMetrics (1 families, 4 samples)"));
    let o = inferscale(&[
        "scrape",
        "--format",
        "openmetrics",
        "--strict",
        bad.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stdout(&o).contains("metrics:5:1: histogram a: _sum is not allowed with negative buckets"),
        "{}",
        stdout(&o)
    );
    // The vLLM exposition is Prometheus text, not OpenMetrics: no # EOF.
    let vllm = testdata("vllm/metrics_single_engine.prom");
    let o = inferscale(&["scrape", "--strict", "--json", vllm.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["targets"][0]["valid"], false);
}

#[test]
fn bad_flags_are_usage_errors() {
    for args in [
        vec!["scrape"],
        vec!["scrape", "--interval", "soon", "x"],
        vec!["scrape", "--strict", "--format", "prometheus", "x"],
        vec!["scrape", "-", "-"],
        vec!["scrape", "--interval", "1s", "-"],
    ] {
        let o = inferscale(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(stderr(&o).starts_with("error"), "{args:?}: {}", stderr(&o));
    }
}

#[test]
fn an_endpoint_picker_s_gateway_signals_are_read_in_the_router_s_names() {
    let path = testdata("engines/llm-d-epp-sample.prom");
    let o = inferscale(&["scrape", path.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    for line in [
        "Gateway: an endpoint picker, llm-d router (llm_d_epp_*) · 11 EPP families",
        "held in flow control   15",
        "pool saturation        1.18 (1.0 gates)",
        "running                96",
        "average queue          6.5",
        "average KV cache       62 %",
        "ready endpoints        4",
        "tokens in flight       3360",
        "mean TTFT              120 ms (since start)",
        "mean NTPOT             27.5 ms (since start)",
    ] {
        assert!(out.contains(line), "missing {line:?} in:\n{out}");
    }
    let o = inferscale(&["scrape", path.to_str().unwrap(), "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let g = v
        .pointer("/targets/0/gateway")
        .or_else(|| v.pointer("/gateway"))
        .unwrap_or_else(|| panic!("no gateway in {v:#}"));
    assert_eq!(g["names"], "llm-d-router");
    // The legacy twins are not counted twice.
    assert_eq!(g["queue_held"], 15.0);
    assert_eq!(g["pool_saturation"], 1.18);
    assert_eq!(g["inflight_tokens"], 3360.0);
    assert_eq!(g["ttft_mean_seconds"], 0.12);
}
