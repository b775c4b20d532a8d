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
    // Each worker's schedule lag is reported beside the merged run.
    let summary = common::stdout(&o);
    for i in 0..4 {
        let line = summary
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("worker {i}: ")))
            .unwrap_or_else(|| panic!("{summary}"));
        assert!(line.contains("lag p99 up to"), "{line}");
    }
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

/// The load Job's own worker commands, run here: the args of `generate --load-job`'s
/// load-job.yaml with the pod's completion index, the Service swapped for the simulator and
/// /out for a folder. Their output, as `kubectl logs` would show it, is merged with
/// `merge -`; a tar of the parts merges the same.
#[test]
fn the_load_job_s_workers_print_parts_that_merge_from_their_logs() {
    let s = sim(&["--speedup", "10"]);
    s.wait_healthy();
    let dir = tmp("merge", "load-job");
    std::fs::create_dir_all(&dir).unwrap();
    let o = inferscale()
        .args([
            "generate",
            "--load-job",
            "--workers",
            "3",
            "--namespace",
            "llm",
        ])
        .arg("--out")
        .arg(&dir)
        .args([
            "--",
            "--rates",
            "20,40",
            "--step",
            "3s",
            "--rest",
            "1s",
            "--speedup",
            "10",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = std::fs::read_to_string(dir.join("load-job.yaml")).unwrap();
    let job: Value = inferscale_manifests::yaml::from_str(&text).unwrap();
    let args: Vec<String> = job["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_owned())
        .collect();
    let start = SystemTime::now().duration_since(UNIX_EPOCH).unwrap() + Duration::from_secs(3);
    let start = format!("{:.3}", start.as_secs_f64());
    let workers: Vec<_> = (0..3)
        .map(|i| {
            let out = dir.join(format!("out-{i}"));
            std::fs::create_dir_all(&out).unwrap();
            let mut a = args.clone();
            for k in 0..a.len() {
                a[k] = a[k].replace("$(JOB_COMPLETION_INDEX)", &i.to_string());
                if k > 0 && a[k - 1] == "--url" {
                    a[k] = s.url.clone();
                }
                if k > 0 && a[k - 1] == "--start-at" {
                    a[k] = start.clone();
                }
                a[k] = a[k].replace("/out/", &format!("{}/", out.display()));
            }
            inferscale()
                .args(&a)
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    // kubectl logs gives both streams of each pod, one pod after the other.
    let mut logs = Vec::new();
    for w in workers {
        let o = w.wait_with_output().unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
        logs.extend_from_slice(&o.stderr);
        logs.extend_from_slice(&o.stdout);
    }
    let merge_stdin = |input: &[u8], out: &std::path::Path| {
        use std::io::Write as _;
        let mut c = inferscale()
            .args(["merge", "-", "--out"])
            .arg(out)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        c.stdin.take().unwrap().write_all(input).unwrap();
        c.wait_with_output().unwrap()
    };
    let from_logs = dir.join("run-from-logs.json");
    let o = merge_stdin(&logs, &from_logs);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let summary = String::from_utf8_lossy(&o.stdout);
    assert!(summary.contains("merged 3 of 3 parts"), "{summary}");
    assert!(summary.contains("worker 2: stdin:part-2.json"), "{summary}");
    let m = read_json(&from_logs);
    for (step, expected) in [(0usize, 60u64), (1, 120)] {
        assert_eq!(m["steps"][step]["requests"]["scheduled"], expected);
    }
    // Each part printed is the part written.
    for i in 0..3 {
        let written = read_json(&dir.join(format!("out-{i}/part.json")));
        assert_eq!(written["segment"]["index"], i);
    }
    // A tar of the parts on stdin merges the same.
    let tar = std::process::Command::new("tar")
        .arg("cf")
        .arg("-")
        .arg("-C")
        .arg(&dir)
        .args(["out-0", "out-1", "out-2"])
        .output()
        .unwrap();
    assert!(tar.status.success());
    let from_tar = dir.join("run-from-tar.json");
    let o = merge_stdin(&tar.stdout, &from_tar);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(read_json(&from_tar)["steps"], m["steps"]);
    // Logs cut short name the part that was.
    let cut = &logs[..logs.len() - 200];
    let o = merge_stdin(cut, &dir.join("cut.json"));
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("part-2.json: the part ends before its END line"),
        "{}",
        stderr(&o)
    );
    assert!(!dir.join("cut.json").exists());
}

/// Workers behind a Service run `--no-metrics`; the merge takes the server's side from the
/// Prometheus that scraped every replica, over each step's window.
#[test]
fn the_server_side_of_a_merged_run_comes_from_prometheus() {
    let s = sim(&["--replicas", "2"]);
    s.wait_healthy();
    let mut config = String::from(
        "global:\n  scrape_interval: 500ms\nscrape_configs:\n  - job_name: vllm\n    static_configs:\n",
    );
    for (url, _) in &s.replicas {
        config.push_str(&format!(
            "      - targets: ['{}']\n",
            url.trim_start_matches("http://")
        ));
    }
    let dir = tmp("merge", "prometheus");
    let tsdb = format!("--storage.tsdb.path={}", dir.join("data").display());
    let (_prom, addr) = inferscale_testkit::prometheus(&dir, &config, &[&tsdb]);
    // Both replicas scraped before the load begins.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !inferscale_testkit::http_get(addr, "/api/v1/query?query=sum(up)")
        .is_ok_and(|(code, body)| code == 200 && body.contains("\"2\""))
    {
        assert!(
            std::time::Instant::now() < deadline,
            "Prometheus scraped nothing in 60 s"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let start = SystemTime::now().duration_since(UNIX_EPOCH).unwrap() + Duration::from_secs(3);
    let start = format!("{:.3}", start.as_secs_f64());
    let workers: Vec<_> = (0..2)
        .map(|i| {
            inferscale()
                .args(["load", "--url", &s.replicas[i].0])
                .args([
                    "--rates", "4,8", "--step", "4s", "--rest", "2s", "--warmup", "0",
                ])
                .args(["--max-tokens", "64"])
                .args([
                    "--no-metrics",
                    "--segment",
                    &format!("{i}/2"),
                    "--start-at",
                    &start,
                ])
                .arg("--out")
                .arg(dir.join(format!("part-{i}.json")))
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for w in workers {
        let o = w.wait_with_output().unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
    }
    // The last scrapes reach Prometheus.
    std::thread::sleep(Duration::from_millis(1500));
    let merged = dir.join("run.json");
    let parts: Vec<_> = (0..2).map(|i| dir.join(format!("part-{i}.json"))).collect();
    let without = inferscale()
        .args(["merge", "--out"])
        .arg(dir.join("client-only.json"))
        .args(&parts)
        .output()
        .unwrap();
    assert_eq!(without.status.code(), Some(0), "{}", stderr(&without));
    assert!(read_json(&dir.join("client-only.json"))["steps"][0]["server"].is_null());
    let o = inferscale()
        .args(["merge", "--prometheus", &format!("http://{addr}"), "--out"])
        .arg(&merged)
        .args(&parts)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        common::stdout(&o).contains("server side: from Prometheus, 2 of 2 steps"),
        "{}",
        common::stdout(&o)
    );
    let m = read_json(&merged);
    for step in 0..2 {
        let server = &m["steps"][step]["server"];
        let ok = m["steps"][step]["requests"]["ok"].as_f64().unwrap();
        assert!(server["samples"].as_u64().unwrap() >= 4, "{server}");
        // Both replicas' requests are counted: what finished in the window, within the
        // requests that straddle its edges.
        let done = server["success_delta"].as_f64().unwrap();
        assert!(
            (done - ok).abs() <= ok * 0.5 + 3.0,
            "step {step}: {done} vs {ok}"
        );
        assert!(
            server["running"]["max"].as_f64().unwrap() >= 1.0,
            "{server}"
        );
        assert!(server["e2e_p95_s"].as_f64().unwrap() > 0.0, "{server}");
        assert!(
            server["kv_cache_usage"]["max"].as_f64().unwrap() > 0.0,
            "{server}"
        );
    }
    // The timeline's gauges come from it too.
    assert!(
        m["timeline"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["running"].as_f64().is_some_and(|r| r >= 1.0))
    );
    // A selector that matches nothing says so, and the steps have no server side.
    let o = inferscale()
        .args(["merge", "--prometheus", &format!("http://{addr}")])
        .args(["--selector", "model_name=\"nobody\"", "--out"])
        .arg(dir.join("none.json"))
        .args(&parts)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stderr(&o).contains("no series matching"), "{}", stderr(&o));
    assert!(read_json(&dir.join("none.json"))["steps"][0]["server"].is_null());
}
