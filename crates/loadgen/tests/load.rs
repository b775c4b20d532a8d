//! The load generator against the simulator: outcome accounting under injected faults, the
//! seeds' plan, interruption, and the in-flight cap.

#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::{eks, load, start};
use inferscale_loadgen::schedule::Stage;
use inferscale_loadgen::transport::Outcome;
use inferscale_sim::Faults;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_request_is_accounted_for_under_faults_and_matches_the_server() {
    let mut cfg = eks(20.0);
    cfg.faults = Faults {
        error_500_rate: 0.05,
        cut_rate: 0.05,
        stall_rate: 0.05,
        // 120 simulated seconds: longer than the client's 60 s timeout, so stalls time out.
        stall_s: 120.0,
        malformed_rate: 0.05,
        slowdown: None,
    };
    let sim = start(cfg).await;
    for stream in [true, false] {
        let mut lc = load(
            sim.api,
            vec![
                Stage::constant(20.0, 20.0, 40.0),
                Stage::constant(30.0, 20.0, 0.0),
            ],
            20.0,
            stream,
        );
        lc.client.timeout = Duration::from_secs_f64(60.0 / 20.0);
        let out = inferscale_loadgen::run(lc, None, |_| {}, std::future::pending())
            .await
            .unwrap();
        for step in &out.report.steps {
            let q = &step.requests;
            assert_eq!(
                q.scheduled,
                q.ok + q.failed.total + q.dropped,
                "stream={stream} step {}: {q:?}",
                step.index
            );
            assert_eq!(q.scheduled, (step.target_rps * 20.0).round() as u64);
            assert!(
                q.failed.http_error.get(&500).copied().unwrap_or(0) > 0,
                "some 500s: {q:?}"
            );
            assert!(q.failed.stream_error > 0, "some cut or malformed: {q:?}");
            assert!(q.failed.timeout > 0, "some stalls timed out: {q:?}");
            let server = step.server.as_ref().unwrap();
            assert_eq!(
                server.success_delta,
                Some(q.ok as f64),
                "stream={stream} step {}: client ok vs server successes",
                step.index
            );
        }
        // Every failure says why.
        assert!(
            out.records
                .iter()
                .filter(|r| r.outcome != Outcome::Ok)
                .all(|r| r.error.is_some())
        );
    }
}

/// A server that answers in microseconds finishes the first request at once: the step's
/// lower-bound scrape must still come before it, or the server's count misses requests.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fast_server_reconciles_from_the_first_request() {
    let instant =
        inferscale_sim::SimConfig::new(inferscale_engine::profile("instant").unwrap(), "m".into());
    let sim = start(instant).await;
    for _ in 0..3 {
        let lc = load(
            sim.api,
            vec![
                Stage::constant(50.0, 0.5, 0.2),
                Stage::constant(50.0, 0.5, 0.0),
            ],
            1.0,
            true,
        );
        let out = inferscale_loadgen::run(lc, None, |_| {}, std::future::pending())
            .await
            .unwrap();
        for step in &out.report.steps {
            assert_eq!(step.requests.ok, 25, "{:?}", step.requests);
            assert_eq!(
                step.server.as_ref().unwrap().success_delta,
                Some(25.0),
                "step {}",
                step.index
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_seeds_plan_shows_the_queue_jump_at_60_req_s() {
    let speedup = 20.0;
    let sim = start(eks(speedup)).await;
    let stages: Vec<Stage> = [10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0]
        .iter()
        .enumerate()
        .map(|(i, r)| Stage::constant(*r, 60.0, if i < 6 { 30.0 } else { 0.0 }))
        .collect();
    let out = inferscale_loadgen::run(
        load(sim.api, stages, speedup, false),
        None,
        |_| {},
        std::future::pending(),
    )
    .await
    .unwrap();
    sim.assert_held(&out.report, speedup);
    let json = serde_json::to_value(&out.report).unwrap();
    let queue_p95 = |i: usize| {
        json["steps"][i]["server"]["queue_depth"]["p95"]
            .as_f64()
            .unwrap()
    };
    let queue_max = |i: usize| {
        json["steps"][i]["server"]["queue_depth"]["max"]
            .as_f64()
            .unwrap()
    };
    for i in 0..5 {
        assert!(queue_p95(i) <= 5.0, "step {i}: queue p95 {}", queue_p95(i));
        assert_eq!(json["steps"][i]["requests"]["failed"]["total"], 0);
    }
    assert!(
        queue_max(5) > 100.0,
        "queue at 60 req/s peaked at {}",
        queue_max(5)
    );
    assert!(queue_max(6) > queue_max(5));
    // The timeline shows it too.
    let peak_60 = json["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["step"] == 5)
        .filter_map(|p| p["queue_depth"].as_f64())
        .fold(0.0, f64::max);
    assert!(peak_60 > 100.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_run_keeps_its_partial_result() {
    let sim = start(eks(20.0)).await;
    let stages = vec![
        Stage::constant(20.0, 60.0, 10.0),
        Stage::constant(30.0, 60.0, 0.0),
    ];
    let stop = tokio::time::sleep(Duration::from_millis(1500)); // 30 simulated seconds in
    let out = inferscale_loadgen::run(load(sim.api, stages, 20.0, true), None, |_| {}, stop)
        .await
        .unwrap();
    assert!(out.report.interrupted);
    assert_eq!(out.report.steps.len(), 1, "only the step that started");
    let q = &out.report.steps[0].requests;
    assert!(q.scheduled > 300 && q.scheduled < 1200, "{q:?}");
    assert_eq!(q.scheduled, q.ok + q.failed.total + q.dropped);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_in_flight_cap_drops_and_counts_like_k6_max_vus() {
    let sim = start(eks(20.0)).await;
    let mut lc = load(sim.api, vec![Stage::constant(60.0, 20.0, 0.0)], 20.0, true);
    lc.max_in_flight = 20; // far below the ~130 in flight that 60 req/s needs
    let out = inferscale_loadgen::run(lc, None, |_| {}, std::future::pending())
        .await
        .unwrap();
    let q = &out.report.steps[0].requests;
    assert!(q.dropped > 300, "{q:?}");
    assert_eq!(q.scheduled, 1200);
    assert_eq!(q.scheduled, q.ok + q.failed.total + q.dropped);
    // The server was not the bottleneck (it never queued): the step says the client was.
    let st = &out.report.steps[0];
    assert!(st.client.client_limited, "{:?}", st.client);
}

/// Closed loop: exactly `concurrency` requests in flight, each sent when one ends, so the
/// throughput follows Little's law and the server sees that many running.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_loop_keeps_its_concurrency() {
    let sim = start(eks(20.0)).await;
    let lc = load(
        sim.api,
        vec![Stage::closed(1, 20.0, 5.0), Stage::closed(8, 20.0, 0.0)],
        20.0,
        true,
    );
    let out = inferscale_loadgen::run(lc, None, |_| {}, std::future::pending())
        .await
        .unwrap();
    for (step, c) in out.report.steps.iter().zip([1u32, 8]) {
        assert_eq!(step.concurrency, Some(c));
        let q = &step.requests;
        assert_eq!(q.scheduled, q.ok, "step {}: {q:?}", step.index);
        assert!(
            q.ok > u64::from(c),
            "step {} sent more than its first wave",
            step.index
        );
        // Little's law: throughput = concurrency / mean latency, over the span the step's
        // requests covered (wall seconds x 20 = simulated).
        let mine: Vec<_> = out
            .records
            .iter()
            .filter(|r| r.step == step.index)
            .collect();
        let first = mine
            .iter()
            .filter_map(|r| r.sent_s)
            .fold(f64::MAX, f64::min);
        let last = mine.iter().filter_map(|r| r.end_s).fold(0.0, f64::max);
        let thr = q.ok as f64 / ((last - first) * 20.0);
        let little = f64::from(c) / step.latency_s.e2e.mean.unwrap();
        assert!(
            (thr / little - 1.0).abs() < 0.10,
            "step {}: {thr:.2} req/s vs Little {little:.2}",
            step.index
        );
        let running = step.server.as_ref().unwrap().running.max.unwrap();
        assert!(
            running <= f64::from(c),
            "step {}: {running} running",
            step.index
        );
        // No schedule to lag behind: each request goes when its predecessor ends. (The median:
        // the first step holds only about ten requests, so its p99 is one pause of the VM.)
        assert!(step.client.lag_p50_s.unwrap() < 0.005);
    }
    // Never more than 8 in flight at once, seen from the client's own records.
    let mut edges: Vec<(f64, i32)> = out
        .records
        .iter()
        .filter_map(|r| Some([(r.sent_s?, 1), (r.end_s?, -1)]))
        .flatten()
        .collect();
    edges.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let peak = edges
        .iter()
        .scan(0, |n, (_, d)| {
            *n += d;
            Some(*n)
        })
        .max()
        .unwrap();
    assert_eq!(peak, 8);
}
