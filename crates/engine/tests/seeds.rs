//! The seeds' experiment on the seeds' deployment, run on the engine in virtual time: the
//! numbers must come out as the AWS EKS load test reported them.

#![allow(clippy::unwrap_used)]

use std::collections::HashMap;

use inferscale_engine::fleet::{Every, Fleet, Notice, Routing, drive};
use inferscale_engine::{RequestSpec, profile};

/// What one constant-rate step showed.
#[derive(Debug)]
struct StepResult {
    rate: f64,
    e2e_p95: f64,
    queue_p95: f64,
    queue_max: f64,
    completed: usize,
}

fn pct(v: &mut [f64], q: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    if v.is_empty() {
        return f64::NAN;
    }
    v[((v.len() as f64 * q).ceil() as usize).clamp(1, v.len()) - 1]
}

/// Warm-up (100 sequential requests), then each rate for `step` seconds with `rest` seconds
/// between, constant arrivals, the seeds' request (35 prompt tokens by the simulator's rule,
/// max_tokens 100), on a one-replica fleet driven in virtual time with a scrape every second.
fn seeds_plan(rates: &[f64], step: f64, rest: f64) -> (Vec<f64>, Vec<StepResult>) {
    let mut fleet = Fleet::new(
        profile("aws-eks-ministral-8b-l40s").unwrap(),
        1,
        Routing::RoundRobin,
    )
    .unwrap();
    fleet.set_token_events(false);
    let spec = RequestSpec {
        prompt_tokens: 34,
        max_tokens: 100,
        ignore_eos: false,
    };
    // Warm-up: each request sent when the previous one finished (a closed loop of one). Every
    // warm-up request generates all 100 tokens, so that the first and the steady ones differ
    // only by what warming up costs, not by the output lengths the engine happened to draw.
    let warm = RequestSpec {
        ignore_eos: true,
        ..spec
    };
    let mut t = 0.0;
    let mut warmup = Vec::new();
    for _ in 0..100 {
        drive(&mut fleet, [(t, warm)], t, &mut [], |_| {});
        let mut end = None;
        while end.is_none() {
            let next = fleet.next_event_time().unwrap();
            drive(
                &mut fleet,
                [] as [(f64, RequestSpec); 0],
                next,
                &mut [],
                |n| {
                    end = end.or(n.finished().map(|f| f.2));
                },
            );
        }
        let e = end.unwrap();
        warmup.push(e - t);
        t = e;
    }
    let mut results = Vec::new();
    for &rate in rates {
        t += rest;
        let start = t;
        let end = start + step;
        let n = (rate * step).round() as usize;
        let arrivals = (0..n).map(|i| (start + i as f64 / rate, spec));
        let mut arrived: HashMap<u64, f64> = HashMap::new();
        let mut e2e = Vec::new();
        let mut latency = |n: Notice| match n {
            Notice::Arrived { t, routed, .. } => {
                arrived.insert(routed.unwrap().id, t);
            }
            other => {
                if let Some((_, id, at)) = other.finished()
                    && let Some(a) = arrived.remove(&id)
                {
                    e2e.push(at - a);
                }
            }
        };
        let mut queue = Vec::new();
        let mut scrape = Every::starting(start, 1.0, |_t, f: &mut Fleet| {
            queue.push(f64::from(f.waiting()));
        });
        drive(&mut fleet, arrivals, end, &mut [&mut scrape], &mut latency);
        // Let the step's requests finish (they belong to the step).
        while fleet.next_event_time().is_some() {
            let next = fleet.next_event_time().unwrap();
            drive(
                &mut fleet,
                [] as [(f64, RequestSpec); 0],
                next,
                &mut [],
                &mut latency,
            );
        }
        t = fleet.now().max(end);
        let completed = e2e.len();
        results.push(StepResult {
            rate,
            e2e_p95: pct(&mut e2e, 0.95),
            queue_p95: pct(&mut queue.clone(), 0.95),
            queue_max: queue.iter().copied().fold(0.0, f64::max),
            completed,
        });
    }
    (warmup, results)
}

#[test]
fn the_seeds_load_test_reproduces_their_numbers() {
    let (warmup, steps) = seeds_plan(&[10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0], 60.0, 30.0);
    let steady = {
        let mut tail = warmup[50..].to_vec();
        pct(&mut tail, 0.5)
    };
    eprintln!(
        "warm-up: first {:.3} s, steady {:.3} s, ratio {:.2}",
        warmup[0],
        steady,
        warmup[0] / steady
    );
    for s in &steps {
        eprintln!(
            "{:>3} req/s: e2e p95 {:.3} s, queue p95 {:.1}, max {:.0}, completed {}",
            s.rate, s.e2e_p95, s.queue_p95, s.queue_max, s.completed
        );
    }
    assert!(
        warmup[0] >= 1.5 * steady,
        "first request {:.2} s vs steady {:.2} s",
        warmup[0],
        steady
    );
    for s in steps.iter().filter(|s| s.rate <= 50.0) {
        assert!(
            (1.8..=3.2).contains(&s.e2e_p95),
            "p95 e2e at {} req/s: {:.2} s",
            s.rate,
            s.e2e_p95
        );
        assert!(
            s.queue_p95 <= 5.0,
            "queue p95 at {} req/s: {}",
            s.rate,
            s.queue_p95
        );
    }
    let sixty = steps.iter().find(|s| s.rate == 60.0).unwrap();
    assert!(
        sixty.queue_max > 100.0,
        "queue at 60 req/s peaked at {}",
        sixty.queue_max
    );
}
