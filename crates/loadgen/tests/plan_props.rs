//! Property tests of the plan reader (a plan file's outside text, as the CLI reads it: YAML
//! into a generic value, then into [`Plan`]): no plan panics the reader, the resolver or the
//! schedule, and a plan that resolves sends something, at rates and durations in range.

#![allow(clippy::unwrap_used)]

use inferscale_loadgen::Auth;
use inferscale_loadgen::plan::{MAX_RATE, Plan};
use proptest::prelude::*;

const FIELDS: &[&str] = &[
    "url",
    "model",
    "rates",
    "concurrency",
    "step",
    "rest",
    "stages",
    "arrival",
    "max_in_flight",
    "api",
    "stream",
    "max_tokens",
    "prompt",
    "prompt_tokens",
    "temperature",
    "ignore_eos",
    "timeout",
    "connection_reuse",
    "metrics",
    "metrics_url",
    "speedup",
    "seed",
    "warmup",
    "thresholds",
    "grace",
    "wait_ready",
    "rate",
    "end_rate",
    "duration",
];

fn value() -> impl Strategy<Value = serde_json::Value> {
    let leaf = prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::from),
        (-5i64..200).prop_map(serde_json::Value::from),
        prop_oneof![Just(0.0), Just(-1.0), Just(1e300), Just(0.5), Just(25.0)]
            .prop_map(serde_json::Value::from),
        prop_oneof![
            Just("http://127.0.0.1:8000".to_owned()),
            Just("10s".to_owned()),
            Just("0s".to_owned()),
            Just("poisson".to_owned()),
            Just("gamma:0".to_owned()),
            Just("uniform:10-100".to_owned()),
            Just("p95<500".to_owned()),
            Just(String::new()),
            "\\PC{0,10}",
        ]
        .prop_map(serde_json::Value::from),
    ];
    leaf.prop_recursive(3, 20, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(serde_json::Value::from),
            prop::collection::btree_map(
                prop::sample::select(FIELDS).prop_map(str::to_owned),
                inner,
                0..4
            )
            .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
        ]
    })
}

fn plan() -> impl Strategy<Value = serde_json::Value> {
    prop::collection::btree_map(
        prop::sample::select(FIELDS).prop_map(str::to_owned),
        value(),
        0..6,
    )
    .prop_map(|mut m| {
        m.insert("url".into(), "http://127.0.0.1:8000".into());
        serde_json::Value::Object(m.into_iter().collect())
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    #[test]
    fn no_plan_panics_and_what_resolves_is_in_range(v in plan()) {
        let Ok(p) = serde_json::from_value::<Plan>(v) else { return Ok(()) };
        let Ok(r) = p.resolve(Auth::none(), None) else { return Ok(()) };
        let stages = &r.config.stages;
        prop_assert!(!stages.is_empty());
        for s in stages {
            prop_assert!(s.duration_s > 0.0 && s.duration_s.is_finite());
            if s.concurrency.is_none() {
                prop_assert!(s.rate > 0.0 && s.rate <= MAX_RATE, "rate {}", s.rate);
            }
            if let Some(e) = s.end_rate {
                prop_assert!((0.0..=MAX_RATE).contains(&e), "end rate {e}");
            }
        }
        // The schedule is computed ahead; it must come out or be refused, never panic.
        let _ = inferscale_loadgen::schedule::plan(stages, r.config.arrival, 0);
    }
}
