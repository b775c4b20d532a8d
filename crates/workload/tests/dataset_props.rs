//! Property tests of the dataset reader, the parser of outside text that the fuzz target does
//! not cover: no input panics it, and what it accepts is what a server accepts (every prompt
//! holds text, every `max_tokens` is in range) or it is refused naming the line.

#![allow(clippy::unwrap_used)]

use inferscale_workload::prompt::{DatasetError, MAX_OUTPUT_TOKENS, load_dataset};
use proptest::prelude::*;

/// A JSON value of a few levels, strings drawn from awkward ones.
fn json() -> impl Strategy<Value = serde_json::Value> {
    let leaf = prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::from),
        any::<i64>().prop_map(serde_json::Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(serde_json::Value::from),
        prop_oneof![
            Just(String::new()),
            Just("  ".to_owned()),
            Just("hello".to_owned()),
            "\\PC{0,12}",
        ]
        .prop_map(serde_json::Value::from),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(serde_json::Value::from),
            prop::collection::btree_map(
                prop_oneof![
                    Just("prompt".to_owned()),
                    Just("messages".to_owned()),
                    Just("role".to_owned()),
                    Just("content".to_owned()),
                    Just("max_tokens".to_owned()),
                    Just("output_len".to_owned()),
                    Just("conversations".to_owned()),
                    Just("from".to_owned()),
                    Just("value".to_owned()),
                    "[a-z]{1,6}",
                ],
                inner,
                0..4
            )
            .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
        ]
    })
}

fn accepted_entries_are_servable(r: &Result<Vec<(String, Option<u32>)>, DatasetError>) {
    if let Ok(entries) = r {
        assert!(!entries.is_empty());
        for (prompt, max) in entries {
            assert!(!prompt.trim().is_empty(), "an empty prompt was accepted");
            if let Some(m) = max {
                assert!((1..=MAX_OUTPUT_TOKENS).contains(m), "max_tokens {m}");
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn no_text_panics_the_reader(text in "\\PC{0,200}") {
        let r = load_dataset(&text, "d.jsonl");
        accepted_entries_are_servable(&r);
    }

    #[test]
    fn jsonl_lines_are_servable_or_refused_by_line(lines in prop::collection::vec(json(), 1..6)) {
        let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
        let r = load_dataset(&text, "d.jsonl");
        accepted_entries_are_servable(&r);
        if let Err(e) = &r {
            let msg = e.to_string();
            prop_assert!(msg.starts_with("d.jsonl"), "{msg}");
        }
    }

    #[test]
    fn sharegpt_files_are_servable_or_refused(items in prop::collection::vec(json(), 0..5)) {
        let text = serde_json::Value::from(items).to_string();
        let r = load_dataset(&text, "d.json");
        accepted_entries_are_servable(&r);
    }
}
