//! A load split across four workers (`load --segment I/4`, one shared `--start-at`) against
//! `inferscale sim --replicas 4`, merged with `inferscale merge`: the union of the segments is
//! the single-client schedule, the merged counts are the sum of the parts, and the merged
//! percentiles are those of one histogram of every part's request records.

#![allow(clippy::unwrap_used)]

mod common;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::{inferscale, sim, stderr, tmp};
use inferscale_loadgen::record::{Record, latency_histograms};
use serde_json::Value;

fn read_json(p: &std::path::Path) -> Value {
    serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap()
}

#[test]
fn four_segments_merge_into_the_run_one_client_would_have_made() {
    let s = sim(&["--replicas", "4", "--speedup", "10"]);
    s.wait_healthy();
    assert_eq!(s.replicas.len(), 4);
    let dir = tmp("merge", "four");
    std::fs::create_dir_all(&dir).unwrap();
    let start = SystemTime::now().duration_since(UNIX_EPOCH).unwrap() + Duration::from_secs(3);
    let start = format!("{:.3}", start.as_secs_f64());
    let workers: Vec<_> = (0..4)
        .map(|i| {
            let mut args = vec![
                "load".to_owned(),
                "--url".into(),
                s.replicas[i].0.clone(),
                "--rates".into(),
                "20,40".into(),
                "--step".into(),
                "3s".into(),
                "--rest".into(),
                "1s".into(),
                "--speedup".into(),
                "10".into(),
                "--segment".into(),
                format!("{i}/4"),
                "--start-at".into(),
                start.clone(),
                "--out".into(),
                dir.join(format!("part-{i}.json")).display().to_string(),
                "--requests-out".into(),
                dir.join(format!("requests-{i}.jsonl"))
                    .display()
                    .to_string(),
            ];
            // One worker scrapes the server; the others do not.
            if i > 0 {
                args.push("--no-metrics".into());
            }
            inferscale().args(&args).spawn().unwrap()
        })
        .collect();
    for mut w in workers {
        assert!(w.wait().unwrap().success());
    }
    let parts: Vec<Value> = (0..4)
        .map(|i| read_json(&dir.join(format!("part-{i}.json"))))
        .collect();
    for (i, p) in parts.iter().enumerate() {
        assert_eq!(p["segment"]["index"], i);
        assert_eq!(p["segment"]["count"], 4);
        assert!(p["steps"][1]["histograms"]["e2e"].as_str().is_some());
        // Each worker's lag is reported, and how late it started.
        assert!(p["steps"][0]["client"]["lag_p99_s"].as_f64().is_some());
        assert!(p["segment"]["late_s"].as_f64().unwrap() >= 0.0);
    }

    let merged = dir.join("run.json");
    let o = inferscale()
        .args(["merge", "--out", merged.to_str().unwrap()])
        .arg(&dir)
        .args(["--threshold", "error_rate<1%"])
        .output()
        .unwrap();
    // The folder holds the parts only (the jsonl files are not *.json).
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let m = read_json(&merged);
    assert!(m.get("segment").is_none());
    assert_eq!(m["thresholds"][0]["ok"], true);
    let mut records: Vec<Record> = Vec::new();
    for i in 0..4 {
        let text = std::fs::read_to_string(dir.join(format!("requests-{i}.jsonl"))).unwrap();
        records.extend(
            text.lines()
                .map(|l| serde_json::from_str::<Record>(l).unwrap()),
        );
    }
    for (step, expected) in [(0usize, 60u64), (1, 120)] {
        let ms = &m["steps"][step];
        // The union of the segments is the single-client schedule: 20 and 40 req/s for 3 s.
        let sum: u64 = parts
            .iter()
            .map(|p| p["steps"][step]["requests"]["scheduled"].as_u64().unwrap())
            .sum();
        assert_eq!(ms["requests"]["scheduled"].as_u64().unwrap(), sum);
        assert_eq!(sum, expected);
        // 4 workers together offered the rate.
        assert!((ms["sent_rps"].as_f64().unwrap() - expected as f64 / 3.0).abs() < 0.5);
        // Percentiles equal to those of one histogram of every part's records.
        let mine: Vec<&Record> = records.iter().filter(|r| r.step == step).collect();
        let [ttft, tpot, itl, e2e] = latency_histograms(mine.iter().copied(), 10.0);
        for (name, h) in [("ttft", ttft), ("tpot", tpot), ("itl", itl), ("e2e", e2e)] {
            let want = serde_json::to_value(h.percentiles()).unwrap();
            assert_eq!(ms["latency_s"][name], want, "step {step} {name}");
        }
    }
    // `analyze` reads the merged file unchanged.
    let o = inferscale()
        .args(["analyze", merged.to_str().unwrap(), "--out"])
        .arg(dir.join("analysis"))
        .output()
        .unwrap();
    assert!(o.status.code().is_some_and(|c| c <= 1), "{}", stderr(&o));

    // A missing part is refused; --allow-missing merges the rest and exits 1.
    let three: Vec<String> = (0..3)
        .map(|i| dir.join(format!("part-{i}.json")).display().to_string())
        .collect();
    let o = inferscale()
        .args(["merge", "--out"])
        .arg(dir.join("three.json"))
        .args(&three)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("segments [3] of 4 are missing"),
        "{}",
        stderr(&o)
    );
    let o = inferscale()
        .args(["merge", "--allow-missing", "--out"])
        .arg(dir.join("three.json"))
        .args(&three)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(common::stdout(&o).contains("worker 3: MISSING"));
    // A truncated part is refused naming the file.
    let cut = dir.join("cut.json");
    let text = std::fs::read_to_string(dir.join("part-1.json")).unwrap();
    std::fs::write(&cut, &text[..text.len() / 2]).unwrap();
    let o = inferscale()
        .args(["merge", "--out"])
        .arg(dir.join("x.json"))
        .arg(dir.join("part-0.json"))
        .arg(&cut)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("cut.json"), "{}", stderr(&o));
}
