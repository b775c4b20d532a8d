use inferscale_analysis::analyze;
use inferscale_results::run::RunReport;

/// A small run.json, written by `inferscale load` against the simulator (see testdata/README.md).
fn sample() -> RunReport {
    let text = include_str!("../../../testdata/runs/sim-seeds-short.json");
    inferscale_analysis::read_run(text).expect("the sample run.json reads")
}

#[test]
fn every_chart_is_in_the_page() {
    let run = sample();
    let a = analyze(&run, Some(120.0));
    let page = crate::render(&run, &a);
    for id in [
        "throughput",
        "queue",
        "e2e",
        "ttft",
        "tpot",
        "running",
        "kv",
        "errors",
        "warmup",
    ] {
        assert!(
            page.contains(&format!("data-chart=\"{id}\"")),
            "no {id} chart"
        );
    }
    assert!(page.starts_with("<!doctype html>"));
    assert!(
        !page.contains("src=\"http") && !page.contains("href=\"http"),
        "no network"
    );
    assert!(!page.contains("<script src"), "self-contained");
    let text = crate::summary(&run, &a);
    assert!(text.contains("saturation:"));
}
