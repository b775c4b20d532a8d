//! A replica calibrated from a measurement reproduces what was measured: the simulator's
//! default run taken as if it came from a real server.

use inferscale_analysis::replica::LimitSource;
use inferscale_autoscale::replica::{check, engine, errors};

#[test]
fn the_calibrated_replica_reproduces_the_measured_steps() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../testdata/runs/sim-default.json"
    );
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let run = inferscale_analysis::read_run(&text).unwrap_or_else(|e| panic!("{e}"));
    let a = inferscale_analysis::analyze(&run, None);
    let t = a.thresholds.unwrap_or_else(|e| panic!("{e}"));
    let fit = t.replica.unwrap_or_else(|| panic!("no fit"));
    // The run recorded max_num_seqs (128): the limit is the engine's.
    assert_eq!(
        (fit.max_concurrency, fit.limit_from),
        (128, LimitSource::MaxNumSeqs)
    );
    // Held to the measured capacity.
    let c = t.capacity_rps.unwrap_or_else(|| unreachable!());
    assert!(
        (fit.capacity_rps - c).abs() < 0.01 * c,
        "{} vs {c}",
        fit.capacity_rps
    );
    let e = engine(&fit, &t.source.model);
    let checks = check(&fit, &e, 1);
    assert_eq!(checks.len(), run.steps.len());
    let (thr, p50) = errors(&fit, &checks);
    let thr = thr.unwrap_or_else(|| panic!("no throughput error"));
    let p50 = p50.unwrap_or_else(|| panic!("no p50 error"));
    assert!(thr < 0.03, "throughput error {thr}");
    assert!(p50 < 0.10, "p50 error {p50}");
    // Past the knee it queues as the server did: the saturated steps' throughput is its
    // capacity, and a queue builds.
    for (ch, s) in checks.iter().zip(&fit.steps).filter(|(_, s)| !s.sustained) {
        assert!(
            (ch.achieved_rps.1 - ch.achieved_rps.0).abs() < 0.05 * ch.achieved_rps.0,
            "{ch:?}"
        );
        assert!(ch.queue_p95.1.is_some_and(|q| q > 20.0), "{ch:?} {s:?}");
    }
}
