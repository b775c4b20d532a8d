//! Property tests of the PromQL reader and writer: no text panics the parser or the evaluator,
//! and a label value of any characters, quoted by [`quote`], selects exactly the series that
//! carries it (the one escaping path the generators use cannot be broken out of).

#![allow(clippy::unwrap_used)]

use inferscale_promql::{Evaluator, Labels, Query, Store, Value, quote};
use proptest::prelude::*;

fn store_with(value: &str) -> Store {
    let body = format!(
        "x{{l=\"{}\"}} 1\nx{{l=\"other\"}} 2\n",
        value
            .replace('\\', "\\\\")
            .replace('"', "\\\"")
            .replace('\n', "\\n")
    );
    let exp = inferscale_promtext::parse(body.as_bytes())
        .unwrap()
        .into_owned();
    let mut s = Store::new();
    s.scrape(
        &Labels::new([("job", "j"), ("instance", "i")]),
        1_000,
        Some(&exp),
    );
    s
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn no_text_panics_the_parser_or_the_evaluator(text in "\\PC{0,80}") {
        if let Ok(q) = Query::parse(&text) {
            let store = store_with("v");
            let _ = Evaluator::new(&store).eval(&q, 2_000);
            // What was accepted writes back as text that parses again.
            prop_assert!(Query::parse(q.text()).is_ok());
        }
    }

    #[test]
    fn a_quoted_value_selects_exactly_its_series(value in "[^\\r\\t\\u{0}-\\u{8}\\u{b}-\\u{1f}\\u{7f}]{1,24}") {
        prop_assume!(value != "other");
        let q = Query::parse(&format!("x{{l={}}}", quote(&value))).unwrap();
        let store = store_with(&value);
        match Evaluator::new(&store).eval(&q, 2_000).unwrap() {
            Value::Vector(v) => {
                prop_assert_eq!(v.len(), 1);
                prop_assert_eq!(v[0].value, 1.0);
            }
            other => prop_assert!(false, "{other:?}"),
        }
    }

    #[test]
    fn no_value_breaks_out_of_its_quotes(value in "\\PC{0,24}") {
        // Whatever the value, the selector is one matcher: it parses, and `or vector(1)`
        // smuggled inside stays a string.
        let text = format!("x{{l={}}}", quote(&format!("{value}\"}} or vector(1) #")));
        let q = Query::parse(&text).unwrap();
        let store = store_with("v");
        let r = Evaluator::new(&store).eval(&q, 2_000).unwrap();
        prop_assert!(matches!(r, Value::Vector(ref v) if v.is_empty()), "{r:?}");
    }
}
