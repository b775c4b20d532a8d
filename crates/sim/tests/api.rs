//! The simulator's HTTP surface: vLLM's exposition shape, the OpenAI API and its errors,
//! health while loading, and fault injection.

#![allow(clippy::unwrap_used)]

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use common::{get, post, request, start, wait_ready};
use inferscale_openai::{SseDecoder, StreamChunk};
use inferscale_promtext::{MetricType, parse};
use inferscale_sim::{Faults, SimConfig};

fn eks(speedup: f64) -> SimConfig {
    let mut e = inferscale_engine::profile("aws-eks-ministral-8b-l40s").unwrap();
    e.max_model_len = 4096; // the reference exposition's, which sets the token-count buckets
    let mut c = SimConfig::new(e, "Qwen/Qwen3-0.6B".into());
    c.speedup = speedup;
    c
}

/// family → (type, label names, bucket bounds of every histogram series)
type Shape = BTreeMap<String, (MetricType, BTreeSet<String>, BTreeSet<String>)>;

fn shape(text: &str) -> Shape {
    let exp = parse(text.as_bytes()).unwrap();
    let mut out = Shape::new();
    for f in exp.families() {
        let mut labels = BTreeSet::new();
        let mut bounds = BTreeSet::new();
        for s in f.samples() {
            for l in s.labels() {
                if l.name == "le" {
                    // Compare bounds numerically ("1.0" and "1" are the same bound).
                    let v: f64 = l.value.replace("+Inf", "inf").parse().unwrap();
                    bounds.insert(format!("{v}"));
                } else {
                    labels.insert(l.name.to_string());
                }
            }
        }
        out.insert(f.name().to_owned(), (f.kind(), labels, bounds));
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_match_vllm_0_33_families_types_labels_and_buckets() {
    let sim = start(eks(1000.0)).await;
    wait_ready(sim.api).await;
    // The reference was captured after completions and chat requests; do the same so the HTTP
    // families have their series.
    assert_eq!(
        post(
            sim.api,
            "/v1/completions",
            r#"{"prompt":"hello there","max_tokens":5}"#
        )
        .await
        .0,
        200
    );
    assert_eq!(
        post(
            sim.api,
            "/v1/chat/completions",
            r#"{"messages":[{"role":"user","content":"hi"}],"max_tokens":5}"#
        )
        .await
        .0,
        200
    );
    let (status, ours) = get(sim.api, "/metrics").await;
    assert_eq!(status, 200);
    let reference = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../testdata/vllm/metrics_single_engine.prom"),
    )
    .unwrap();
    let (ours, theirs) = (shape(&ours), shape(&reference));
    let names = |s: &Shape| s.keys().cloned().collect::<BTreeSet<_>>();
    assert_eq!(names(&ours), names(&theirs), "the same families");
    for (name, want) in &theirs {
        assert_eq!(
            &ours[name], want,
            "{name}: type, label names and bucket bounds"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_follow_the_engine_and_deprecated_names_are_optional() {
    let mut cfg = eks(1000.0);
    cfg.show_deprecated_metrics = true;
    let sim = start(cfg).await;
    wait_ready(sim.api).await;
    for _ in 0..3 {
        post(
            sim.api,
            "/v1/completions",
            r#"{"prompt":"a b c d","max_tokens":7,"ignore_eos":true}"#,
        )
        .await;
    }
    let (_, text) = get(sim.api, "/metrics").await;
    let exp = parse(text.as_bytes()).unwrap();
    let one = |n: &str| exp.samples_named(n).map(|s| s.value()).sum::<f64>();
    assert_eq!(one("vllm:generation_tokens_total"), 21.0);
    assert_eq!(one("vllm:e2e_request_latency_seconds_count"), 3.0);
    assert_eq!(one("vllm:request_success_total"), 3.0);
    assert!(exp.family("vllm:gpu_cache_usage_perc").is_some());
    assert!(exp.family("vllm:time_per_output_token_seconds").is_some());
    assert_eq!(
        one("vllm:time_per_output_token_seconds_count"),
        one("vllm:inter_token_latency_seconds_count")
    );
    // The DCGM endpoint: the exporter's default fields, FB used from the up-front allocation.
    let (status, dcgm) = get(sim.dcgm, "/metrics").await;
    assert_eq!(status, 200);
    let d = parse(dcgm.as_bytes()).unwrap();
    let used = d
        .samples_named("DCGM_FI_DEV_FB_USED")
        .next()
        .unwrap()
        .value();
    assert!((41_000.0..43_000.0).contains(&used), "{used}");
    assert_eq!(
        d.samples_named("DCGM_FI_DEV_GPU_UTIL")
            .next()
            .unwrap()
            .label("modelName"),
        Some("NVIDIA L40S")
    );
    // Busy GPU: utilisation and power follow the engine's steps.
    let busy = common::background_requests(sim.api, 20);
    tokio::time::sleep(std::time::Duration::from_millis(30)).await;
    let (_, dcgm) = get(sim.dcgm, "/metrics").await;
    busy.iter().for_each(|h| h.abort());
    let d = parse(dcgm.as_bytes()).unwrap();
    let util = d
        .samples_named("DCGM_FI_DEV_GPU_UTIL")
        .next()
        .unwrap()
        .value();
    let power = d
        .samples_named("DCGM_FI_DEV_POWER_USAGE")
        .next()
        .unwrap()
        .value();
    assert!(util > 10.0, "util {util}");
    assert!(power > 40.0, "power {power} W (idle 35 W)");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_is_503_until_the_model_has_loaded() {
    // 20 simulated seconds of loading at 100× = 0.2 s of wall time.
    let sim = start(eks(100.0)).await;
    let (status, body) = get(sim.api, "/health").await;
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("loading"));
    assert_eq!(
        post(sim.api, "/v1/completions", r#"{"prompt":"x"}"#)
            .await
            .0,
        503
    );
    wait_ready(sim.api).await;
    assert_eq!(get(sim.api, "/version").await.1, r#"{"version":"0.33.0"}"#);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn completions_and_chat_streaming_and_not() {
    let sim = start(eks(1000.0)).await;
    wait_ready(sim.api).await;
    let (status, body) = get(sim.api, "/v1/models").await;
    assert_eq!(status, 200);
    assert!(body.contains(r#""id":"Qwen/Qwen3-0.6B""#), "{body}");
    // Non-streaming: usage counts the prompt with the documented rule; text is deterministic.
    let req = r#"{"model":"Qwen/Qwen3-0.6B","prompt":"abcd efgh","max_tokens":5,"ignore_eos":true,"temperature":0.7}"#;
    let (status, a) = post(sim.api, "/v1/completions", req).await;
    assert_eq!(status, 200, "{a}");
    let a: serde_json::Value = serde_json::from_str(&a).unwrap();
    assert_eq!(a["usage"]["prompt_tokens"], 2);
    assert_eq!(a["usage"]["completion_tokens"], 5);
    assert_eq!(a["choices"][0]["finish_reason"], "length");
    let b: serde_json::Value =
        serde_json::from_str(&post(sim.api, "/v1/completions", req).await.1).unwrap();
    assert_eq!(a["choices"][0]["text"], b["choices"][0]["text"]);
    // Streaming with usage: one event per token, a finish chunk, a usage chunk, [DONE].
    let (status, body) = post(
        sim.api,
        "/v1/chat/completions",
        r#"{"messages":[{"role":"user","content":"hi"}],"max_tokens":4,"ignore_eos":true,"stream":true,"stream_options":{"include_usage":true}}"#,
    )
    .await;
    assert_eq!(status, 200);
    let mut d = SseDecoder::default();
    let mut events = Vec::new();
    d.feed(body.as_bytes(), &mut events).unwrap();
    d.finish(&mut events).unwrap();
    assert!(events.last().unwrap().is_done());
    let chunks: Vec<StreamChunk> = events[..events.len() - 1]
        .iter()
        .map(|e| serde_json::from_str(&e.data).unwrap())
        .collect();
    let tokens = chunks
        .iter()
        .filter(|c| {
            c.choices
                .first()
                .and_then(|x| x.content())
                .is_some_and(|t| !t.is_empty())
        })
        .count();
    assert_eq!(tokens, 4);
    assert_eq!(chunks.last().unwrap().usage.unwrap().completion_tokens, 4);
    assert_eq!(
        chunks[0].choices[0].delta.as_ref().unwrap().role.as_deref(),
        Some("assistant")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_are_refused_like_vllm() {
    let mut cfg = eks(1000.0);
    cfg.max_body_bytes = 1000;
    let sim = start(cfg).await;
    wait_ready(sim.api).await;
    let cases: &[(&str, u16, &str)] = &[
        ("not json", 400, "not valid JSON"),
        (r#"{"prompt":"x","max_tokens":0}"#, 400, "max_tokens"),
        (r#"{"prompt":"x","max_tokens":"many"}"#, 400, "max_tokens"),
        (r#"{"prompt":"x","temperature":-1}"#, 400, "temperature"),
        (r#"{"prompt":"x","stream":"yes"}"#, 400, "stream"),
        (
            r#"{"prompt":"x","stream_options":{"include_usage":true}}"#,
            400,
            "stream=True",
        ),
        (r#"{"max_tokens":3}"#, 400, "prompt"),
        (r#"{"prompt":"x","n":0}"#, 400, "`n`"),
        (r#"{"prompt":"x","n":1000}"#, 400, "at most 128"),
        (r#"{"prompt":"x","stop":5}"#, 400, "`stop`"),
        (r#"{"prompt":"x","logprobs":21}"#, 400, "max allowed: 20"),
        (r#"{"prompt":"x","cache_salt":7}"#, 400, "cache_salt"),
        (r#"{"model":"gpt-4","prompt":"x"}"#, 404, "does not exist"),
        (
            r#"{"prompt":"x","max_tokens":5000}"#,
            400,
            "maximum context length is 4096 tokens",
        ),
    ];
    for (body, status, needle) in cases {
        let (s, text) = post(sim.api, "/v1/completions", body).await;
        assert_eq!(s, *status, "{body}: {text}");
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["error"]["code"], *status);
        assert!(text.contains(needle), "{body}: {text}");
    }
    let big = format!(r#"{{"prompt":"{}"}}"#, "x".repeat(2000));
    assert_eq!(post(sim.api, "/v1/completions", &big).await.0, 413);
    assert_eq!(
        post(sim.api, "/v1/chat/completions", r#"{"messages":[]}"#)
            .await
            .0,
        400
    );
    assert_eq!(get(sim.api, "/v2/anything").await.0, 404);
    assert_eq!(get(sim.api, "/v1/completions").await.0, 405);
    // As strict as vLLM's request models: the field is named.
    let strict: &[(&str, &str, &str)] = &[
        (
            "/v1/completions",
            r#"{"prompt":"x","stream":true,"stream_options":"garbage"}"#,
            "stream_options",
        ),
        (
            "/v1/completions",
            r#"{"prompt":[-1, 1180591620717411303424]}"#,
            "token ids",
        ),
        (
            "/v1/chat/completions",
            r#"{"messages":[{"role":"user","content":[1, null, "x"]}]}"#,
            "content[0]",
        ),
        (
            "/v1/chat/completions",
            r#"{"messages":[{"role":"user","content":[{"type":"text","text":5}]}]}"#,
            "content[0].text",
        ),
    ];
    for (path, body, needle) in strict {
        let (s, text) = post(sim.api, path, body).await;
        assert_eq!(s, 400, "{body}: {text}");
        assert!(text.contains(needle), "{body}: {text}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_that_stalls_in_its_headers_is_closed() {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let sim = start(eks(1000.0)).await;
    wait_ready(sim.api).await;
    let mut s = tokio::net::TcpStream::connect(sim.api).await.unwrap();
    s.write_all(b"GET /health HTTP/1.1\r\nHost: x\r\n")
        .await
        .unwrap();
    // Never the blank line: the server must give up, not hold the connection for ever.
    let limit = inferscale_sim::HEADER_READ_TIMEOUT + std::time::Duration::from_secs(20);
    let mut buf = Vec::new();
    let read = tokio::time::timeout(limit, s.read_to_end(&mut buf)).await;
    assert!(
        read.is_ok(),
        "still open {limit:?} after the headers stalled"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn faults_are_injected_and_accounted() {
    let stream_req = r#"{"prompt":"x","max_tokens":20,"ignore_eos":true,"stream":true}"#;
    let plain_req = r#"{"prompt":"x","max_tokens":20,"ignore_eos":true}"#;
    let with = |f: Faults| {
        let mut c = eks(1000.0);
        c.faults = f;
        c
    };
    // 500s.
    let sim = start(with(Faults {
        error_500_rate: 1.0,
        ..Faults::default()
    }))
    .await;
    wait_ready(sim.api).await;
    let (s, body) = post(sim.api, "/v1/completions", plain_req).await;
    assert_eq!(s, 500);
    assert!(body.contains("InternalServerError"));
    // Cut streams: the connection breaks before [DONE]; the engine counts an abort.
    let sim = start(with(Faults {
        cut_rate: 1.0,
        ..Faults::default()
    }))
    .await;
    wait_ready(sim.api).await;
    for req in [stream_req, plain_req] {
        match request(sim.api, "POST", "/v1/completions", Some(req)).await {
            Err(_) => {}
            Ok((_, body)) => assert!(!body.contains("[DONE]") && !body.ends_with('}'), "{body}"),
        }
    }
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    let m = get(sim.api, "/metrics").await.1;
    assert!(
        m.contains(r#"finished_reason="abort",model_name="Qwen/Qwen3-0.6B"} 2.0"#),
        "aborts counted"
    );
    // Malformed events: the stream has an event that is not JSON, then ends; an error is counted.
    let sim = start(with(Faults {
        malformed_rate: 1.0,
        ..Faults::default()
    }))
    .await;
    wait_ready(sim.api).await;
    let (_, body) = post(sim.api, "/v1/completions", stream_req).await;
    let mut d = SseDecoder::default();
    let mut events = Vec::new();
    d.feed(body.as_bytes(), &mut events).unwrap();
    assert!(
        events
            .iter()
            .any(|e| serde_json::from_str::<serde_json::Value>(&e.data).is_err())
    );
    assert!(!events.iter().any(|e| e.is_done()));
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    let m = get(sim.api, "/metrics").await.1;
    assert!(
        m.contains(r#"finished_reason="error",model_name="Qwen/Qwen3-0.6B"} 1.0"#),
        "errors counted"
    );
    // Stalls: the first byte comes after the stall (5 simulated seconds = 5 ms of wall time here).
    let sim = start(with(Faults {
        stall_rate: 1.0,
        stall_s: 50.0,
        ..Faults::default()
    }))
    .await;
    wait_ready(sim.api).await;
    let t = std::time::Instant::now();
    assert_eq!(post(sim.api, "/v1/completions", plain_req).await.0, 200);
    assert!(
        t.elapsed().as_secs_f64() >= 0.05,
        "stalled for {:?}",
        t.elapsed()
    );
}

/// `vllm:prefix_cache_hits_total` now.
async fn prefix_hits(api: std::net::SocketAddr) -> f64 {
    let (_, text) = get(api, "/metrics").await;
    text.lines()
        .filter(|l| l.starts_with("vllm:prefix_cache_hits_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repeated_prompt_hits_the_prefix_cache_unless_it_is_off() {
    // 40 words of 1 token each, a full block of 16 being the unit: 2 full blocks.
    let prompt = "alpha beta gamma delta ".repeat(10);
    let body = format!(r#"{{"prompt":"{prompt}","max_tokens":4}}"#);
    for caching in [true, false] {
        let mut cfg = eks(1000.0);
        cfg.engine.prefix_caching = caching;
        let sim = start(cfg).await;
        wait_ready(sim.api).await;
        assert_eq!(post(sim.api, "/v1/completions", &body).await.0, 200);
        let first = prefix_hits(sim.api).await;
        assert_eq!(post(sim.api, "/v1/completions", &body).await.0, 200);
        let second = prefix_hits(sim.api).await - first;
        // Another prompt that shares the first 32 tokens; and a salted one that shares none.
        let other = format!(r#"{{"prompt":"{prompt} omega","max_tokens":4}}"#);
        assert_eq!(post(sim.api, "/v1/completions", &other).await.0, 200);
        let third = prefix_hits(sim.api).await - first - second;
        let salted = format!(r#"{{"prompt":"{prompt}","max_tokens":4,"cache_salt":"tenant-b"}}"#);
        assert_eq!(post(sim.api, "/v1/completions", &salted).await.0, 200);
        let fourth = prefix_hits(sim.api).await - first - second - third;
        if caching {
            assert_eq!((first, second, third, fourth), (0.0, 32.0, 32.0, 0.0));
        } else {
            assert_eq!((first, second, third, fourth), (0.0, 0.0, 0.0, 0.0));
        }
    }
}
