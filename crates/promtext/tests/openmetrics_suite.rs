//! The official OpenMetrics parser test suite: every case's `shouldParse` verdict must match
//! what strict validation says.
//!
//! The repository carries half of the suite (`testdata/openmetrics`). Point
//! `OPENMETRICS_SUITE_DIR` at a checkout's `tests/testdata/parsers` to run all of it.

// A panic in a test is a failed assertion.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

use inferscale_promtext::validate_openmetrics;

fn run_suite(dir: &Path) -> (usize, Vec<String>) {
    let mut cases: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("test.json").is_file())
        .collect();
    cases.sort();
    let mut failures = Vec::new();
    for case in &cases {
        let spec: serde_json::Value =
            serde_json::from_slice(&std::fs::read(case.join("test.json")).unwrap()).unwrap();
        let should_parse = spec["shouldParse"]
            .as_bool()
            .expect("shouldParse is a bool");
        let file = spec["file"].as_str().unwrap_or("metrics");
        let text = std::fs::read(case.join(file)).unwrap();
        let verdict = validate_openmetrics(&text);
        let name = case.file_name().unwrap().to_string_lossy().into_owned();
        match (should_parse, verdict) {
            (true, Err(e)) => failures.push(format!("{name}: should parse, but: {e}")),
            (false, Ok(_)) => {
                failures.push(format!("{name}: should be rejected, but was accepted"))
            }
            _ => {}
        }
    }
    (cases.len(), failures)
}

fn testdata() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/openmetrics")
}

#[test]
fn bundled_cases_agree_with_the_suite() {
    let (n, failures) = run_suite(&testdata());
    assert!(n >= 100, "expected the bundled suite, found {n} cases");
    assert!(
        failures.is_empty(),
        "{} of {n} cases disagree:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn full_suite_when_available() {
    let Some(dir) = std::env::var_os("OPENMETRICS_SUITE_DIR") else {
        return;
    };
    let (n, failures) = run_suite(Path::new(&dir));
    assert!(n > 0, "no cases under {dir:?}");
    eprintln!(
        "OpenMetrics suite: {n} cases, {} disagreements",
        failures.len()
    );
    assert!(
        failures.is_empty(),
        "{} of {n} cases disagree:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn lenient_parse_accepts_every_valid_case() {
    // Whatever strict mode accepts, the lenient parser must accept too, with the same samples.
    for entry in std::fs::read_dir(testdata()).unwrap() {
        let case = entry.unwrap().path();
        let text = std::fs::read(case.join("metrics")).unwrap();
        if let Ok(strict) = validate_openmetrics(&text) {
            let lenient = inferscale_promtext::parse(&text)
                .unwrap_or_else(|e| panic!("{}: lenient parse failed: {e}", case.display()));
            assert_eq!(
                strict.sample_count(),
                lenient.sample_count(),
                "{}",
                case.display()
            );
        }
    }
}
