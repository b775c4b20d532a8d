//! The speed-up is honest: the same short plan against the seeds' simulated deployment, once
//! in real time and once at `inferscale run`'s default speed-up, gives the same p95 per step.

#![allow(clippy::unwrap_used)]

mod common;

use common::{eks, load, start};
use inferscale_engine::ColdStart;
use inferscale_loadgen::schedule::Stage;

/// `inferscale run`'s default speed-up for the embedded simulator (crates/cli/src/cmd/run.rs).
const DEFAULT_SPEEDUP: f64 = 10.0;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_time_and_the_default_speedup_agree_on_p95_per_step() {
    let plan = vec![
        Stage::constant(20.0, 20.0, 5.0),
        Stage::constant(45.0, 20.0, 0.0),
    ];
    let mut p95 = Vec::new();
    for k in [1.0, DEFAULT_SPEEDUP] {
        let mut cfg = eks(k);
        // Skip the model load (86 simulated seconds) so the real-time run starts at once.
        cfg.engine.cold_start = ColdStart {
            process_s: 0.0,
            load_gbps: 1e9,
            profile_s: 0.0,
            compile_s: 0.0,
            capture_per_size_s: 0.0,
        };
        let sim = start(cfg).await;
        let out = inferscale_loadgen::run(
            load(sim.api, plan.clone(), k, true),
            None,
            |_| {},
            std::future::pending(),
        )
        .await
        .unwrap();
        sim.assert_held(&out.report, k);
        for s in &out.report.steps {
            assert_eq!(s.requests.ok, s.requests.scheduled, "speed-up {k}");
        }
        p95.push(
            out.report
                .steps
                .iter()
                .map(|s| s.latency_s.e2e.p95.unwrap())
                .collect::<Vec<f64>>(),
        );
    }
    for (i, (real, fast)) in p95[0].iter().zip(&p95[1]).enumerate() {
        assert!(
            (fast / real - 1.0).abs() < 0.10,
            "step {i}: p95 {real:.3} s in real time vs {fast:.3} s at {DEFAULT_SPEEDUP}x"
        );
    }
}
