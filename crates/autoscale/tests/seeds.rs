//! The seeds' scenario: their ScaledObject (`testdata/aws-eks/keda-scaledobject.yaml`), one
//! replica, 60 req/s for ten minutes, then nothing.

mod common;

use inferscale_autoscale::rehearse::{Outcome, rehearse};
use inferscale_autoscale::traffic::Traffic;

fn seeds(seed: u64) -> Outcome {
    let keda = common::keda(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../testdata/aws-eks/keda-scaledobject.yaml"
    ));
    let mut setup = common::setup(2400.0);
    setup.seed = seed;
    let traffic = Traffic::from_csv("time_s,rps\n0,60\n600,0\n").unwrap_or_else(|e| panic!("{e}"));
    let mut sim = common::sim(&setup.engine);
    rehearse(&setup, &keda, &traffic, &mut sim, &mut |_| {}).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn the_seeds_scaledobject_scales_out_drains_the_queue_and_scales_in_one_pod_per_120_s() {
    for seed in [1, 2, 3] {
        let out = seeds(seed);
        let s = &out.summary;
        let log: Vec<String> = out
            .events
            .iter()
            .map(|e| format!("{:.0}s {}->{}", e.time_s, e.from, e.to))
            .collect();
        // One replica sustains about 56 req/s: 60 req/s needs a second.
        assert!(s.max_replicas >= 2, "seed {seed}: {log:?}");
        let first_out = s
            .first_scale_out_s
            .unwrap_or_else(|| panic!("no scale-out: {log:?}"));
        // The queue drains once the new replicas are ready, while the load is still on.
        let drained = out
            .timeline
            .iter()
            .find(|r| r.time_s > first_out && r.queue_per_pod < 1.0 && r.ready_replicas >= 2)
            .map(|r| r.time_s)
            .unwrap_or_else(|| panic!("seed {seed}: the queue never drained"));
        assert!(drained < 600.0, "seed {seed}: drained at {drained} s");
        // Scale-in: after the 300 s window (the last proposal above the current count is at
        // least 300 s old), one pod at a time, at least 120 s apart, down to 1.
        let downs: Vec<_> = out.events.iter().filter(|e| e.to < e.from).collect();
        assert!(!downs.is_empty(), "seed {seed}: never scaled in: {log:?}");
        let last_up = out
            .events
            .iter()
            .filter(|e| e.to > e.from)
            .map(|e| e.time_s)
            .fold(0.0, f64::max);
        assert!(
            downs[0].time_s >= drained + 300.0 - 30.0,
            "seed {seed}: {log:?}, drained at {drained}"
        );
        assert!(downs[0].time_s >= last_up + 300.0, "seed {seed}: {log:?}");
        for w in downs.windows(2) {
            assert!(w[1].time_s - w[0].time_s >= 120.0, "seed {seed}: {log:?}");
        }
        assert!(
            downs.iter().all(|e| e.from - e.to == 1),
            "one pod per step: {log:?}"
        );
        assert_eq!(s.final_replicas, 1, "seed {seed}: {log:?}");
        assert!(s.cycle_completed, "seed {seed}");
        assert_eq!(s.flaps, 0, "seed {seed}: {log:?}");
        // The latency trigger (AverageValue 5 s) can never ask for more than ceil(p95 / 5).
        let lat = &s.triggers[1];
        assert_eq!(lat.metric_type, "AverageValue");
        let max = lat
            .max_value
            .unwrap_or_else(|| panic!("the latency trigger was never read"));
        assert_eq!(lat.max_proposal, Some((max / 5.0).ceil() as u32));
        assert!(
            s.notes.iter().any(|n| n.contains("ceil(p95 / 5 s)")),
            "the rehearsal says so: {:?}",
            s.notes
        );
        // Nodes: the empty ones are consolidated after consolidateAfter; GPU-hours count them.
        let end_nodes = out.timeline.last().map_or(0, |r| r.nodes);
        assert_eq!(end_nodes, 1, "seed {seed}: nodes left at the end");
        assert!(
            s.gpu_hours > 2400.0 / 3600.0,
            "at least the one node all along: {}",
            s.gpu_hours
        );
    }
}

#[test]
fn the_same_seed_gives_the_same_rehearsal() {
    let (a, b) = (seeds(7), seeds(7));
    assert_eq!(format!("{:?}", a.summary), format!("{:?}", b.summary));
    assert_eq!(a.timeline.len(), b.timeline.len());
}
