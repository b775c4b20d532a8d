//! The seeds' experiment on the seeds' deployment, run on the engine in virtual time: the
//! numbers must come out as the AWS EKS load test reported them.

#![allow(clippy::unwrap_used)]

use std::collections::HashMap;

use inferscale_engine::{Engine, EventKind, RequestSpec, profile};

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
/// between, constant arrivals, the seeds' request (35 prompt tokens by the simulator's rule, max_tokens 100).
fn seeds_plan(rates: &[f64], step: f64, rest: f64) -> (Vec<f64>, Vec<StepResult>) {
    let mut engine = Engine::new(profile("aws-eks-ministral-8b-l40s").unwrap()).unwrap();
    let spec = RequestSpec {
        prompt_tokens: 34,
        max_tokens: 100,
        ignore_eos: false,
    };
    let mut events = Vec::new();
    let mut t = 0.0;
    let mut warmup = Vec::new();
    for _ in 0..100 {
        let id = engine.submit(spec, t);
        loop {
            let next = engine.next_event_time().unwrap();
            events.clear();
            engine.advance(next, &mut events);
            if let Some(e) = events
                .iter()
                .find(|e| e.id == id && matches!(e.kind, EventKind::Finished(_)))
            {
                warmup.push(e.t - t);
                t = e.t;
                break;
            }
        }
    }
    let mut results = Vec::new();
    for &rate in rates {
        t += rest;
        let start = t;
        let n = (rate * step).round() as usize;
        let mut arrivals = HashMap::new();
        let mut e2e = Vec::new();
        let mut queue = Vec::new();
        let mut next_sample = start;
        for i in 0..n {
            let at = start + i as f64 / rate;
            while next_sample <= at {
                events.clear();
                engine.advance(next_sample, &mut events);
                collect(&events, &mut arrivals, &mut e2e);
                queue.push(f64::from(engine.stats().waiting));
                next_sample += 1.0;
            }
            events.clear();
            engine.advance(at, &mut events);
            collect(&events, &mut arrivals, &mut e2e);
            let id = engine.submit(spec, at);
            arrivals.insert(id, at);
        }
        let end = start + step;
        while next_sample <= end {
            events.clear();
            engine.advance(next_sample, &mut events);
            collect(&events, &mut arrivals, &mut e2e);
            queue.push(f64::from(engine.stats().waiting));
            next_sample += 1.0;
        }
        // Let the step's requests finish (they belong to the step).
        while !arrivals.is_empty() {
            let next = engine.next_event_time().unwrap();
            events.clear();
            engine.advance(next, &mut events);
            collect(&events, &mut arrivals, &mut e2e);
        }
        t = engine.now().max(end);
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

fn collect(
    events: &[inferscale_engine::Event],
    arrivals: &mut HashMap<u64, f64>,
    e2e: &mut Vec<f64>,
) {
    for e in events {
        if let EventKind::Finished(_) = e.kind
            && let Some(a) = arrivals.remove(&e.id)
        {
            e2e.push(e.t - a);
        }
    }
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
