//! `merge`: a run split into segments comes back as the single run — counts summed exactly,
//! histograms added exactly — and parts that do not belong together are refused naming the
//! file.

#![allow(clippy::unwrap_used)]

use inferscale_results::run::{RunReport, SegmentReport};
use inferscale_rng::Rng;
use inferscale_workload::merge::{MergeError, merge};
use inferscale_workload::outcome::{Outcome, TokenSource};
use inferscale_workload::record::{Record, StepInput, step_report};
use inferscale_workload::schedule::{Arrival, Segment, Stage, plan};
use inferscale_workload::threshold::Threshold;

const STAGES: [Stage; 2] = [
    Stage {
        rate: 40.0,
        end_rate: None,
        duration_s: 5.0,
        rest_s: 1.0,
        concurrency: None,
    },
    Stage {
        rate: 90.0,
        end_rate: None,
        duration_s: 5.0,
        rest_s: 0.0,
        concurrency: None,
    },
];

/// Every planned request, answered with a random latency, some failing, some dropped.
fn records() -> Vec<Record> {
    let (planned, _) = plan(&STAGES, Arrival::Poisson, 9).unwrap();
    let mut rng = Rng::new(5);
    planned
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let lag = rng.next_f64() * 2e-3;
            let e2e = 0.2 + rng.next_f64() * 3.0;
            let roll = rng.next_f64();
            let outcome = if roll < 0.03 {
                Outcome::HttpError { status: 503 }
            } else if roll < 0.05 {
                Outcome::Dropped
            } else {
                Outcome::Ok
            };
            let sent = (outcome != Outcome::Dropped).then_some(p.at + lag);
            Record {
                index: i as u64,
                step: p.stage,
                intended_s: p.at,
                sent_s: sent,
                events_s: sent
                    .map(|s| (1..=20).map(|k| s + e2e * f64::from(k) / 20.0).collect())
                    .unwrap_or_default(),
                end_s: sent.map(|s| s + e2e),
                outcome,
                output_tokens: Some(20),
                prompt_tokens: Some(35),
                token_source: Some(TokenSource::Usage),
                error: None,
            }
        })
        .collect()
}

/// A run.json of `recs` (one segment's, or the whole run's with `seg` = None).
fn report(recs: &[&Record], seg: Option<Segment>) -> RunReport {
    let (_, windows) = plan(&STAGES, Arrival::Poisson, 9).unwrap();
    let steps = (0..STAGES.len())
        .map(|i| {
            step_report(StepInput {
                stalls: None,
                index: i,
                stage: &STAGES[i],
                window: windows[i],
                records: recs.iter().copied().filter(|r| r.step == i).collect(),
                samples: &[],
                bounds: (None, None),
                cpu_s: 0.5,
                speedup: 1.0,
                histograms: true,
            })
        })
        .collect();
    let mut r: RunReport = serde_json::from_value(serde_json::json!({
        "version": 1, "tool": "inferscale test", "started_at": "2026-12-02T00:00:00Z",
        "interrupted": false,
        "target": {"url": "http://127.0.0.1:8000", "model": "m", "metrics_url": null},
        "plan": {"stages": STAGES, "arrival": {"kind": "poisson"}, "max_in_flight": 100,
                 "requests": {"model": "m", "prompt": {"kind": "seeds"},
                              "max_tokens": {"kind": "fixed", "tokens": 20},
                              "temperature": 0.7, "stream": true},
                 "connection_reuse": true, "timeout_s": 60.0, "speedup": 1.0, "seed": 9},
        "steps": [], "timeline": [], "client_cpu_s": 1.0
    }))
    .unwrap();
    r.steps = steps;
    r.segment = seg.map(|s| SegmentReport {
        index: s.index,
        count: s.count,
        start_at: None,
        late_s: 0.0,
    });
    r
}

fn parts(all: &[Record], n: u32) -> Vec<(String, RunReport)> {
    let (planned, _) = plan(&STAGES, Arrival::Poisson, 9).unwrap();
    (0..n)
        .map(|i| {
            let seg = Segment { index: i, count: n };
            let mine: Vec<&Record> = seg.select(&planned).into_iter().map(|j| &all[j]).collect();
            (format!("part-{i}.json"), report(&mine, Some(seg)))
        })
        .collect()
}

#[test]
fn four_segments_merge_into_the_single_run() {
    let all = records();
    let whole = report(&all.iter().collect::<Vec<_>>(), None);
    let p = parts(&all, 4);
    let thresholds = [
        Threshold::parse("p95(e2e)<5s").unwrap(),
        Threshold::parse("error_rate<1%").unwrap(),
    ];
    let m = merge(&p, false, &thresholds).unwrap();
    assert!(m.missing.is_empty());
    assert_eq!(m.report.steps.len(), 2);
    for (merged, single) in m.report.steps.iter().zip(&whole.steps) {
        // Counts: the sum of the parts, which is the single run's.
        assert_eq!(merged.requests, single.requests);
        let sum: u64 = p
            .iter()
            .map(|(_, r)| r.steps[merged.index].requests.scheduled)
            .sum();
        assert_eq!(merged.requests.scheduled, sum);
        assert_eq!(merged.tokens, single.tokens);
        // Histograms added exactly: the same percentiles as one histogram of every record.
        assert_eq!(merged.latency_s, single.latency_s);
        assert_eq!(merged.client.lag_p99_s, single.client.lag_p99_s);
        assert!((merged.sent_rps - single.sent_rps).abs() < 1e-9);
    }
    // Thresholds judged once, on the merged data: 3 % of requests failed.
    assert!(m.report.thresholds[0].ok);
    assert!(!m.report.thresholds[1].ok);
    assert!(m.report.segment.is_none());
    assert_eq!(m.workers.len(), 4);
    assert!(m.workers.iter().all(|w| w.file.is_some()));
}

#[test]
fn parts_that_do_not_belong_together_are_refused_naming_the_file() {
    let all = records();
    let p = parts(&all, 4);
    let err = |parts: &[(String, RunReport)]| merge(parts, false, &[]).unwrap_err();

    // A part missing; with --allow-missing the rest is merged and the gap named.
    let three = &p[..3];
    assert_eq!(
        err(three),
        MergeError::Missing {
            missing: vec![3],
            count: 4
        }
    );
    let m = merge(three, true, &[]).unwrap();
    assert_eq!(m.missing, vec![3]);
    assert!(m.workers[3].file.is_none());

    // Overlapping segments.
    let mut twice = p.clone();
    twice[1].1.segment.as_mut().unwrap().index = 0;
    assert!(
        err(&twice)
            .to_string()
            .contains("part-1.json and part-0.json are both segment 0/4")
    );

    // An index past the count (a hand-edited or corrupt part).
    let mut past = p.clone();
    past[3].1.segment.as_mut().unwrap().index = 9;
    let e = err(&past).to_string();
    assert!(e.starts_with("part-3.json: segment 9/4"), "{e}");

    // Another plan.
    let mut other = p.clone();
    other[2].1.plan.seed = 10;
    let e = err(&other).to_string();
    assert!(e.starts_with("part-2.json: the plan differs"), "{e}");

    // Another version.
    let mut old = p.clone();
    old[1].1.version = 99;
    assert!(
        err(&old)
            .to_string()
            .starts_with("part-1.json: run.json version 99")
    );

    // A part without its histograms (written without --segment, or cut).
    let mut cut = p.clone();
    cut[3].1.steps[1].histograms = None;
    let e = err(&cut).to_string();
    assert!(
        e.contains("part-3.json") && e.contains("step 2 has no histograms"),
        "{e}"
    );
    let mut garbled = p.clone();
    garbled[0].1.steps[0].histograms.as_mut().unwrap().e2e = "HISTFAAA".into();
    let e = err(&garbled).to_string();
    assert!(
        e.contains("part-0.json") && e.contains("does not read"),
        "{e}"
    );

    // Not a part at all.
    let mut whole = p;
    whole[0].1.segment = None;
    assert!(
        err(&whole)
            .to_string()
            .contains("not a part of a split run")
    );
}
