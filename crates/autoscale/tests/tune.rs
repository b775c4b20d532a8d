//! `tune` on a small suite: what it chooses holds (no flap at a steady load, the SLO met),
//! its target is the measurement's, and the seeds' queue trigger is caught flapping.

mod common;

use inferscale_analysis::Thresholds;
use inferscale_analysis::scaling::Primary;
use inferscale_autoscale::rehearse::{Client, Exporters};
use inferscale_autoscale::traffic::Traffic;
use inferscale_autoscale::tune::{Trace, TuneSetup, backlogged_rps, tune};

fn thresholds() -> Thresholds {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../testdata/runs/thresholds-tuned.json"
    );
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let mut t: Thresholds =
        inferscale_analysis::read_thresholds(&text).unwrap_or_else(|e| panic!("{e}"));
    t.scaling = None;
    t
}

fn trace(name: &str, spec: &str, duration_s: f64) -> Trace {
    let traffic = Traffic::pattern(spec, |s| {
        s.strip_suffix('s')
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| s.to_owned())
    })
    .unwrap_or_else(|e| panic!("{e}"));
    let mut t = Trace::from_traffic(name, traffic);
    t.duration_s = duration_s;
    t
}

#[test]
fn the_tuned_policy_holds_its_target_is_measured_and_the_seeds_flap() {
    let t = thresholds();
    let c = t.capacity_rps.unwrap_or_else(|| unreachable!());
    let mut o = inferscale_manifests::Options::example();
    o.model_name = t.source.model.clone();
    o.cold_start_s = 270;
    o.max_replicas = 6;
    let mut base = common::setup(3600.0);
    base.client = Client::OPENAI_SDK;
    base.cluster.node_provisioning = inferscale_autoscale::cluster::Delay::Fixed(180.0);
    base.cluster.image_pull = inferscale_autoscale::cluster::Delay::Fixed(0.0);
    base.cluster.model_load = inferscale_autoscale::cluster::Delay::Fixed(90.0);
    let steady = trace("steady-2x", &format!("hold:{}@1800s", 2.0 * c), 1800.0);
    assert!(steady.steady);
    let ramp = trace(
        "ramp",
        &format!("ramp:{}..{}@1200s,hold:{}@300s", 0.5 * c, 2.2 * c, 2.2 * c),
        1500.0,
    );
    let ts = TuneSetup {
        gateway: true,
        base,
        thresholds: t.clone(),
        options: o,
        attainment: 0.99,
        capacity_rps: c,
        capacity_slo_rps: None,
        startup_s: 270.0,
        gpus_per_replica: 1,
        suite: vec![steady, ramp],
        held_out: Vec::new(),
    };
    let engine = common::eks();
    let make = move || -> Box<dyn Exporters> { Box::new(common::sim(&engine)) };
    let (report, policy) = tune(&ts, &make, &mut |_| {}).unwrap_or_else(|e| panic!("{e}"));
    // The seeds' queue trigger flaps at a steady 2× load: the tuning says so.
    let seeds = report.seeds.results.iter().find(|r| r.trace == "steady-2x");
    let seeds = seeds.unwrap_or_else(|| panic!("no seeds' result"));
    assert!(seeds.flaps > 0 && !seeds.held, "{seeds:?}");
    assert!(seeds.why_not.as_ref().is_some_and(|w| w.contains("flaps")));
    // The anticipation's shorter line is tried only where the five-minute one saw the ramp
    // too late, never where it flapped at the steady load.
    let short: Vec<_> = report
        .candidates
        .iter()
        .filter_map(|c| c.policy.as_ref().map(|p| (c, p)))
        .collect();
    assert!(
        short.iter().any(|(_, p)| p.trend_window_s == Some(120)),
        "the five-minute line sees this ramp late at u = 1.0; the shorter one was not tried"
    );
    for (c, p) in short.iter().filter(|(_, p)| p.trend_window_s == Some(120)) {
        let long: Vec<_> = short
            .iter()
            .filter(|(_, q)| {
                q.trend_window_s == Some(300)
                    && q.primary == p.primary
                    && q.utilisation == p.utilisation
            })
            .collect();
        assert!(
            long.is_empty()
                || long.iter().any(|(l, _)| {
                    l.results
                        .iter()
                        .find(|r| !r.held)
                        .is_some_and(|r| r.trace == "ramp")
                }),
            "{} tried though {:?}",
            c.label,
            long.iter()
                .map(|(l, _)| (&l.label, l.results.iter().find(|r| !r.held)))
                .collect::<Vec<_>>()
        );
    }
    // What it chose held: no flap at the steady load, the SLO met on every trace.
    let p = policy.unwrap_or_else(|| panic!("nothing held: {:?}", report.statements));
    let chosen = &report.candidates[report.chosen.unwrap_or_else(|| unreachable!())];
    for r in &chosen.results {
        assert!(r.held, "{r:?}");
        assert!(r.attainment_outside >= 0.99, "{r:?}");
    }
    let steady = chosen.results.iter().find(|r| r.trace == "steady-2x");
    assert_eq!(steady.map(|r| r.flaps), Some(0));
    // Its target is the measurement's: Little's law (or the capacity) at its utilisation of
    // the capacity at the SLO, not a constant.
    let u = p.utilisation.unwrap_or_else(|| unreachable!());
    let w = t.healthy.e2e_mean_seconds.unwrap_or_else(|| unreachable!());
    let expected = match p.primary {
        Primary::InFlight | Primary::GatewayInFlight => u * report.capacity_slo_rps * w,
        Primary::ArrivalRate => u * report.capacity_slo_rps,
        Primary::GatewayTokens => {
            u * report.capacity_slo_rps
                * w
                * t.workload
                    .prompt_tokens_mean
                    .unwrap_or_else(|| unreachable!())
        }
        Primary::Queue => unreachable!("the queue is not proportional"),
    };
    assert!(
        (p.target - expected).abs() <= 0.01 * expected,
        "{} vs {expected}",
        p.target
    );
    // The capacity at the SLO is the engine's, near the measured capacity.
    assert!(
        report.capacity_slo_rps > 0.8 * c && report.capacity_slo_rps <= 1.01 * c,
        "{}",
        report.capacity_slo_rps
    );
    // And it costs less than the seeds' configuration.
    assert!(chosen.gpu_hours < report.seeds.gpu_hours, "{report:?}");
    let tuned = p.tuned.unwrap_or_else(|| unreachable!());
    assert_eq!(tuned.steady_flaps, 0);
    // Behind a gateway, its signals were candidates too, read from the modelled endpoint
    // picker. Its requests in flight are the engines' (dispatched plus held), so at the same
    // utilisation and room it scales exactly as the engines' count does.
    let at = |key: &str| {
        report
            .candidates
            .iter()
            .find(|c| c.label.starts_with(key))
            .unwrap_or_else(|| panic!("no {key} candidate: {:?}", report.candidates))
    };
    assert!(t.workload.prompt_tokens_mean.is_some());
    assert!(!at("gateway-tokens ahead").results.is_empty());
    let gateway = at("gateway-in-flight ahead");
    let shape = |c: &inferscale_autoscale::tune::Evaluated| {
        c.policy
            .as_ref()
            .map(|p| (p.utilisation, p.max_replicas, p.horizon_s, p.trend_window_s))
    };
    let engines = report.candidates.iter().find(|c| {
        c.policy
            .as_ref()
            .is_some_and(|p| p.primary == Primary::InFlight)
            && shape(c) == shape(gateway)
    });
    let engines = engines.unwrap_or_else(|| panic!("no in-flight twin of {}", gateway.label));
    assert!(!gateway.results.is_empty());
    for (a, b) in engines.results.iter().zip(&gateway.results) {
        assert_eq!(
            (a.gpu_hours, a.flaps, a.outcomes),
            (b.gpu_hours, b.flaps, b.outcomes),
            "{}",
            a.trace
        );
    }
}

#[test]
fn a_backlogged_replica_serves_what_its_engine_does_with_a_full_queue() {
    let t = thresholds();
    let c = t.capacity_rps.unwrap_or_else(|| unreachable!());
    let base = common::setup(3600.0);
    let b = backlogged_rps(&base, c).unwrap_or_else(|e| panic!("{e}"));
    // Offered twice the capacity, it finishes less than it is offered and about what the
    // run measured saturated (its minute-long steps were backlogged too).
    assert!(
        b < 1.5 * c && b > 0.7 * c,
        "{b} req/s against a capacity of {c}"
    );
    // The same seed, the same arrivals: the same answer.
    assert_eq!(
        backlogged_rps(&base, c).unwrap_or_else(|e| panic!("{e}")),
        b
    );
}
