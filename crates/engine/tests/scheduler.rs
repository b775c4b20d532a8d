//! The scheduler's mechanisms, each under a load built to make it happen: chunked prefill,
//! KV-cache exhaustion, preemption by recompute, the sequence limit, and determinism.

#![allow(clippy::unwrap_used)]

use std::collections::HashMap;

use inferscale_engine::{
    Engine, EngineConfig, Event, EventKind, RequestSpec, hardware::find_gpu, model::find_model,
};

fn engine(gpu: &str, model: &str, f: impl FnOnce(&mut EngineConfig)) -> Engine {
    let mut c = EngineConfig::new(find_gpu(gpu).unwrap(), find_model(model).unwrap());
    f(&mut c);
    Engine::new(c).unwrap()
}

fn run_to_end(e: &mut Engine) -> Vec<Event> {
    let mut events = Vec::new();
    while let Some(t) = e.next_event_time() {
        e.advance(t, &mut events);
    }
    events
}

fn finished(events: &[Event]) -> HashMap<u64, &Event> {
    events
        .iter()
        .filter(|e| matches!(e.kind, EventKind::Finished(_)))
        .map(|e| (e.id, e))
        .collect()
}

#[test]
fn a_long_prompt_is_prefilled_in_chunks_while_decodes_go_on() {
    let mut e = engine("H100", "Llama-3.1-8B", |_| {});
    let budget = e.config().max_num_batched_tokens;
    let decoder = e.submit(
        RequestSpec {
            prompt_tokens: 20,
            max_tokens: 400,
            ignore_eos: true,
        },
        0.0,
    );
    let mut events = Vec::new();
    e.advance(0.5, &mut events); // the short request is decoding
    let long = e.submit(
        RequestSpec {
            prompt_tokens: 3 * budget + 100,
            max_tokens: 10,
            ignore_eos: true,
        },
        0.5,
    );
    let steps_before = e.stats().steps;
    events.extend(run_to_end(&mut e));
    let first_long = events
        .iter()
        .find(|x| x.id == long && x.kind == EventKind::Token)
        .unwrap()
        .t;
    // The prompt needs four steps of at most `budget` tokens (the decode takes one of them).
    let steps_with_full_chunk = e.stats().iteration_tokens.cumulative();
    let at_budget = steps_with_full_chunk
        .iter()
        .find(|(le, _)| *le >= f64::from(budget))
        .unwrap()
        .1
        - steps_with_full_chunk
            .iter()
            .rev()
            .find(|(le, _)| *le < f64::from(budget))
            .unwrap()
            .1;
    assert!(
        at_budget >= 3,
        "steps with a full token budget: {at_budget}"
    );
    // The decoder kept getting tokens while the long prompt was being prefilled.
    let decoded_meanwhile = events
        .iter()
        .filter(|x| x.id == decoder && x.kind == EventKind::Token && x.t > 0.5 && x.t < first_long)
        .count();
    assert!(
        decoded_meanwhile >= 3,
        "decode tokens during the chunked prefill: {decoded_meanwhile}"
    );
    assert!(e.stats().steps - steps_before >= 4);
    assert_eq!(finished(&events)[&long].output_tokens, 10);
}

/// A GPU whose KV cache holds a few thousand tokens, loaded with requests that need far more.
fn tight_kv() -> Engine {
    engine("L4", "Llama-3.1-8B", |c| {
        c.gpu_memory_utilization = 0.8;
        c.max_model_len = 4096;
        c.max_num_batched_tokens = 4096;
    })
}

#[test]
fn kv_exhaustion_blocks_admission_and_preemption_recomputes() {
    let mut e = tight_kv();
    let kv_tokens = e.memory().kv_tokens();
    assert!((2_000..40_000).contains(&kv_tokens), "{kv_tokens}");
    let n = (kv_tokens / 1000) as u32 * 2; // twice what fits at full length
    let ids: Vec<u64> = (0..n)
        .map(|i| {
            e.submit(
                RequestSpec {
                    prompt_tokens: 500,
                    max_tokens: 1500,
                    ignore_eos: true,
                },
                f64::from(i) * 0.001,
            )
        })
        .collect();
    let mut events = Vec::new();
    let mut saw_full = false;
    let mut blocked_by_kv = false;
    while let Some(t) = e.next_event_time() {
        e.advance(t, &mut events);
        let s = e.stats();
        saw_full |= s.kv_usage > 0.97;
        blocked_by_kv |= s.waiting > 0 && s.running < e.config().max_num_seqs && s.kv_usage > 0.9;
    }
    let s = e.stats();
    assert!(saw_full, "the KV cache never filled");
    assert!(
        blocked_by_kv,
        "admission was never held back by the KV cache"
    );
    assert!(s.preemptions > 0, "no preemption happened");
    let preempted_requests = s.num_preemptions.count - s.num_preemptions.counts[0];
    assert!(preempted_requests > 0);
    // Recompute loses nothing: every request still gets all of its tokens, once each.
    let done = finished(&events);
    for id in ids {
        assert_eq!(done[&id].output_tokens, 1500);
        let tokens = events
            .iter()
            .filter(|x| x.id == id && x.kind == EventKind::Token)
            .count();
        assert_eq!(tokens, 1500);
    }
    assert_eq!(s.kv_usage, 0.0, "every block is back in the pool");
    assert_eq!(s.success[1], u64::from(n));
}

#[test]
fn the_most_recently_admitted_request_is_preempted_first() {
    let mut e = tight_kv();
    let kv = e.memory().kv_tokens() as u32;
    // Two requests that each fit alone but not together at full length.
    let a = e.submit(
        RequestSpec {
            prompt_tokens: 100,
            max_tokens: kv * 6 / 10,
            ignore_eos: true,
        },
        0.0,
    );
    let b = e.submit(
        RequestSpec {
            prompt_tokens: 100,
            max_tokens: kv * 6 / 10,
            ignore_eos: true,
        },
        0.0,
    );
    let events = run_to_end(&mut e);
    let done = finished(&events);
    assert!(done[&a].t < done[&b].t, "the first admitted finishes first");
    // b stopped getting tokens for a while (preempted), a never did.
    let gaps = |id| {
        let ts: Vec<f64> = events
            .iter()
            .filter(|x| x.id == id && x.kind == EventKind::Token)
            .map(|x| x.t)
            .collect();
        ts.windows(2).map(|w| w[1] - w[0]).fold(0.0, f64::max)
    };
    assert!(
        gaps(b) > 10.0 * gaps(a),
        "a max gap {}, b max gap {}",
        gaps(a),
        gaps(b)
    );
    assert!(e.stats().preemptions >= 1);
}

#[test]
fn the_sequence_limit_holds_requests_back() {
    let mut e = engine("H100", "Llama-3.1-8B", |c| c.max_num_seqs = 8);
    // All at once, so that all are through the frontend when the first step is planned.
    for _ in 0..20 {
        e.submit(
            RequestSpec {
                prompt_tokens: 10,
                max_tokens: 50,
                ignore_eos: true,
            },
            0.0,
        );
    }
    let mut events = Vec::new();
    e.advance(0.2, &mut events);
    assert_eq!(e.stats().running, 8);
    assert_eq!(e.stats().waiting, 12);
    assert!(e.stats().kv_usage < 0.01);
    events.extend(run_to_end(&mut e));
    assert_eq!(finished(&events).len(), 20);
}

#[test]
fn same_seed_same_run() {
    let run = || {
        let mut e = engine("L40S", "Ministral-3-8B", |c| {
            c.seed = 7;
            c.output_length = inferscale_engine::OutputLength::LogNormal {
                median: 80.0,
                sigma: 0.5,
            };
        });
        for i in 0..50 {
            e.submit(
                RequestSpec {
                    prompt_tokens: 30,
                    max_tokens: 200,
                    ignore_eos: false,
                },
                f64::from(i) * 0.05,
            );
        }
        run_to_end(&mut e)
    };
    let (x, y) = (run(), run());
    assert_eq!(x, y);
    // Natural lengths vary (end of sequence sampled), so some stop before max_tokens.
    let stops = finished(&x)
        .values()
        .filter(|e| e.kind == EventKind::Finished(inferscale_engine::stats::FinishReason::Stop))
        .count();
    assert!(stops > 20, "{stops}");
}

#[test]
fn aborts_free_their_blocks_and_are_counted() {
    let mut e = engine("H100", "Llama-3.1-8B", |_| {});
    let a = e.submit(
        RequestSpec {
            prompt_tokens: 1000,
            max_tokens: 500,
            ignore_eos: true,
        },
        0.0,
    );
    let mut events = Vec::new();
    e.advance(0.3, &mut events);
    assert!(e.stats().kv_usage > 0.0);
    assert!(e.abort(a, 0.3, &mut events));
    events.extend(run_to_end(&mut e));
    let s = e.stats();
    assert_eq!(s.success[2], 1);
    assert_eq!(s.kv_usage, 0.0);
    assert!(matches!(
        finished(&events)[&a].kind,
        EventKind::Finished(inferscale_engine::stats::FinishReason::Abort)
    ));
}

#[test]
fn a_slowdown_fault_slows_steps_from_its_start_time() {
    let run = |slowdown| {
        let mut e = engine("H100", "Llama-3.1-8B", |c| c.slowdown = slowdown);
        let spec = RequestSpec {
            prompt_tokens: 100,
            max_tokens: 200,
            ignore_eos: true,
        };
        let early = e.submit(spec, 0.0);
        let mut events = run_to_end(&mut e);
        let late = e.submit(spec, 100.0);
        events.extend(run_to_end(&mut e));
        let d = finished(&events);
        (d[&early].t, d[&late].t - 100.0)
    };
    let (early_normal, late_normal) = run(None);
    let (early_slow, late_slow) = run(Some((3.0, 50.0)));
    assert_eq!(
        early_normal, early_slow,
        "before the fault starts nothing changes"
    );
    // Three times longer steps (a little less overall: the GPU clocks ramp up faster).
    let ratio = late_slow / late_normal;
    assert!(
        (2.5..=3.01).contains(&ratio),
        "{late_slow} vs {late_normal}"
    );
}
