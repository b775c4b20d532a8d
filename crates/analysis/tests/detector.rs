//! The saturation detector and the thresholds on synthetic runs: never saturated, saturated
//! from the start, a knee in the middle, a noisy step, a client-limited run, and no server
//! metrics at all.

#![allow(clippy::unwrap_used)]

use inferscale_analysis::{Status, Verdict, analyze, read_run};
use inferscale_results::plan::{Api, Arrival, Length, PromptSource, RequestSpec, Stage};
use inferscale_results::run::*;

/// One synthetic step: offered and achieved rate, the server's queue over the step (one value
/// per second), e2e p50/p95 and whether the client limited it.
struct S {
    rate: f64,
    achieved: f64,
    queue: Vec<f64>,
    p95: f64,
    client_limited: bool,
}

fn s(rate: f64, achieved: f64, queue: Vec<f64>, p95: f64) -> S {
    S {
        rate,
        achieved,
        queue,
        p95,
        client_limited: false,
    }
}

fn flat(q: f64) -> Vec<f64> {
    vec![q; 60]
}

fn rising(to: f64) -> Vec<f64> {
    (0..60).map(|i| to * f64::from(i) / 59.0).collect()
}

fn pct(p50: f64, p95: f64) -> Percentiles {
    Percentiles {
        count: 100,
        p50: Some(p50),
        p90: Some(p95 * 0.95),
        p95: Some(p95),
        p99: Some(p95 * 1.1),
        max: Some(p95 * 1.3),
        mean: Some(p50 * 1.02),
    }
}

fn build(steps: Vec<S>, metrics: bool) -> RunReport {
    let mut out = Vec::new();
    let mut timeline = Vec::new();
    let mut t = 0.0;
    for (i, st) in steps.iter().enumerate() {
        let n = (st.rate * 60.0) as u64;
        let queue = GaugeStats {
            mean: Some(st.queue.iter().sum::<f64>() / st.queue.len() as f64),
            p95: Some(st.queue[(st.queue.len() * 95 / 100).min(st.queue.len() - 1)]),
            max: st.queue.iter().copied().reduce(f64::max),
        };
        out.push(StepReport {
            index: i,
            target_rps: st.rate,
            target_end_rps: None,
            concurrency: None,
            start_s: t,
            duration_s: 60.0,
            sent_rps: st.rate,
            achieved_rps: st.achieved,
            output_tokens_per_s: st.achieved * 100.0,
            requests: Requests {
                scheduled: n,
                ok: n,
                failed: Failed::default(),
                dropped: 0,
            },
            latency_s: Latencies {
                ttft: pct(0.08, 0.12 + st.p95 - 2.2),
                tpot: pct(0.02, 0.022),
                itl: pct(0.02, 0.025),
                e2e: pct(st.p95 * 0.9, st.p95),
            },
            tokens: Tokens {
                prompt: n * 35,
                output: n * 100,
                source: "usage".into(),
            },
            server: metrics.then(|| ServerStep {
                queue_depth: queue,
                running: GaugeStats {
                    mean: Some(st.rate * 2.0),
                    p95: Some((st.rate * 2.2).min(128.0)),
                    max: Some((st.rate * 2.5).min(128.0)),
                },
                kv_cache_usage: GaugeStats::default(),
                preemptions: Some(0.0),
                e2e_p95_s: Some(st.p95),
                ttft_p95_s: None,
                queue_time_p95_s: None,
                success_delta: Some(n as f64),
                prefix_cache_hit_rate: None,
                samples: 60,
            }),
            client: ClientStep {
                lag_p50_s: Some(1e-4),
                lag_p95_s: Some(if st.client_limited { 0.01 } else { 2e-4 }),
                lag_p99_s: Some(if st.client_limited { 0.02 } else { 3e-4 }),
                lag_max_s: Some(1e-3),
                cpu_s: 1.0,
                client_limited: st.client_limited,
                reason: st
                    .client_limited
                    .then(|| "schedule lag p95 10.0 ms > 5 ms".into()),
                stalls: None,
            },
            histograms: None,
            goodput: None,
            cache: None,
            probe: None,
        });
        for (k, q) in st.queue.iter().enumerate() {
            timeline.push(TimelinePoint {
                t_s: t + k as f64,
                step: Some(i),
                queue_depth: metrics.then_some(*q),
                ..TimelinePoint::default()
            });
        }
        t += 90.0;
    }
    RunReport {
        version: RUN_VERSION,
        tool: "test".into(),
        started_at: "2026-11-30T00:00:00Z".into(),
        interrupted: false,
        target: TargetReport {
            url: "http://127.0.0.1:8000".into(),
            model: "m".into(),
            metrics_url: None,
            engines: vec!["vllm".into()],
            simulated: None,
            max_num_seqs: Some(128),
        },
        plan: PlanReport {
            stages: steps
                .iter()
                .map(|s| Stage::constant(s.rate, 60.0, 30.0))
                .collect(),
            arrival: Arrival::Constant,
            max_in_flight: 500,
            requests: RequestSpec {
                api: Api::Completions,
                model: "m".into(),
                prompt: PromptSource::Seeds,
                max_tokens: Length::Fixed { tokens: 100 },
                temperature: 0.7,
                stream: true,
                ignore_eos: false,
            },
            connection_reuse: true,
            timeout_s: 240.0,
            speedup: 1.0,
            seed: 0,
            probe_rate_rps: None,
        },
        warmup: None,
        steps: out,
        timeline,
        thresholds: Vec::new(),
        client_cpu_s: 7.0,
        segment: None,
        slo: None,
    }
}

/// The seeds' shape: flat through 50, the queue runs away at 60 and 70.
fn knee() -> Vec<S> {
    vec![
        s(10.0, 10.0, flat(0.0), 2.1),
        s(20.0, 20.0, flat(0.0), 2.15),
        s(30.0, 30.0, flat(0.0), 2.2),
        s(40.0, 40.0, flat(0.0), 2.25),
        s(50.0, 49.8, flat(1.0), 2.3),
        s(60.0, 55.5, rising(220.0), 5.9),
        s(70.0, 55.8, rising(800.0), 16.0),
    ]
}

#[test]
fn a_knee_in_the_middle() {
    let run = build(knee(), true);
    let a = analyze(&run, Some(200.0));
    let sat = &a.saturation;
    assert_eq!(sat.status, Status::Saturated);
    assert_eq!(sat.saturation_rps, Some(50.0));
    assert_eq!(sat.first_saturated_rps, Some(60.0));
    let c = sat.capacity_rps.unwrap();
    assert!((50.0..=60.0).contains(&c), "{c}");
    // 128 concurrent / 2.07 s mean at the healthy step.
    assert!((sat.capacity_from_littles_law_rps.unwrap() - 128.0 / (2.3 * 0.9 * 1.02)).abs() < 0.1);
    assert_eq!(sat.steps[5].verdict, Verdict::Saturated);
    assert!(
        sat.steps[5]
            .reasons
            .iter()
            .any(|r| r.contains("queue grew"))
    );
    let t = a.thresholds.unwrap();
    assert!(
        (10..=50).contains(&t.scale_out.queue_depth_per_pod),
        "{t:?}"
    );
    let r = t.scale_out.p95_e2e_seconds / 2.3;
    assert!((1.5..=3.0).contains(&r), "guardrail {r}×");
    let r = t.scale_in.p95_e2e_seconds / 2.3;
    assert!((1.0..=1.5).contains(&r), "scale-in {r}×");
    assert_eq!(t.scale_in.for_seconds, 300);
    assert!(t.scale_out.for_seconds >= 30 && t.scale_out.for_seconds <= 60);
    assert_eq!(t.activation.queue_depth, 1);
    assert_eq!(t.peak.as_ref().unwrap().replicas, 4);
    for key in [
        "scale_out.queue_depth_per_pod",
        "scale_out.for_seconds",
        "scale_out.p95_e2e_seconds",
        "scale_in.p95_e2e_seconds",
        "scale_in.for_seconds",
        "activation.queue_depth",
        "peak.replicas",
    ] {
        assert!(t.rationale.contains_key(key), "no rationale for {key}");
    }
    // thresholds.json round-trips.
    let json = serde_json::to_string(&t).unwrap();
    let back: inferscale_analysis::Thresholds = serde_json::from_str(&json).unwrap();
    // (Compared as text: serde_json parses floats to within an ulp, not always exactly.)
    assert_eq!(serde_json::to_string(&back).unwrap(), json);
}

#[test]
fn never_saturated() {
    let steps = vec![
        s(10.0, 10.0, flat(0.0), 2.1),
        s(20.0, 20.0, flat(0.0), 2.1),
        s(30.0, 29.9, flat(0.0), 2.2),
    ];
    let a = analyze(&build(steps, true), None);
    assert_eq!(a.saturation.status, Status::NotSaturated);
    assert_eq!(a.saturation.summary, "not saturated up to 30 req/s");
    assert_eq!(a.saturation.first_saturated_rps, None);
    // A projection only, and said to be one.
    let t = a.thresholds.unwrap();
    assert!(t.warnings.iter().any(|w| w.contains("never saturated")));
    assert!(a.saturation.capacity_rps.unwrap() >= 30.0);
}

#[test]
fn saturated_from_the_start() {
    let steps = vec![
        s(100.0, 56.0, rising(900.0), 20.0),
        s(120.0, 55.0, rising(1400.0), 30.0),
    ];
    let a = analyze(&build(steps, true), None);
    assert_eq!(a.saturation.status, Status::SaturatedFromStart);
    assert_eq!(a.saturation.saturation_rps, None);
    assert_eq!(a.saturation.first_saturated_rps, Some(100.0));
    assert!((a.saturation.capacity_rps.unwrap() - 55.5).abs() < 0.6);
    let e = a.thresholds.unwrap_err();
    assert!(e.to_string().contains("lower rates"), "{e}");
}

#[test]
fn a_noisy_step_is_not_the_saturation_point() {
    let mut steps = knee();
    // 30 req/s: a burst of queueing that the next steps do not show.
    steps[2] = s(30.0, 27.0, rising(40.0), 3.5);
    let a = analyze(&build(steps, true), None);
    assert_eq!(a.saturation.steps[2].verdict, Verdict::Noisy);
    assert_eq!(a.saturation.saturation_rps, Some(50.0));
    assert_eq!(a.saturation.first_saturated_rps, Some(60.0));
    assert!(a.saturation.evidence.iter().any(|e| e.contains("noise")));
}

#[test]
fn a_client_limited_run_is_not_called_a_server_saturation() {
    let mut steps = knee();
    steps[4].client_limited = true;
    steps[5].client_limited = true;
    let a = analyze(&build(steps, true), None);
    assert_eq!(a.saturation.status, Status::ClientLimited);
    assert_eq!(a.saturation.first_saturated_rps, None);
    assert_eq!(a.saturation.saturation_rps, Some(40.0));
    assert!(a.saturation.summary.contains("client-limited"));
}

#[test]
fn without_server_metrics_latency_and_throughput_decide() {
    let a = analyze(&build(knee(), false), None);
    assert_eq!(a.saturation.status, Status::Saturated);
    assert_eq!(a.saturation.saturation_rps, Some(50.0));
    assert_eq!(a.saturation.first_saturated_rps, Some(60.0));
}

#[test]
fn bad_files_are_named() {
    let good = serde_json::to_string(&build(knee(), true)).unwrap();
    assert!(read_run(&good).is_ok());
    let e = read_run(&good[..good.len() / 2]).unwrap_err();
    assert!(e.to_string().contains("truncated"), "{e}");
    let e = read_run(&good.replacen("\"version\":1", "\"version\":7", 1)).unwrap_err();
    assert!(e.to_string().contains("version 7"), "{e}");
    let e = read_run("{\"steps\": []}").unwrap_err();
    assert!(e.to_string().contains("version"), "{e}");
    let e = read_run("{\"version\": \"1\"}").unwrap_err();
    assert!(
        e.to_string()
            .contains("\"version\" is \"1\", not a whole number"),
        "{e}"
    );
    let e = read_run(&good.replacen("\"steps\"", "\"stepz\"", 1)).unwrap_err();
    let chain = format!("{e}: {}", std::error::Error::source(&e).unwrap());
    assert!(chain.contains("steps"), "{chain}");
}
