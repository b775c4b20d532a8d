//! `inferscale run` and `inferscale analyze` end to end: the default embedded run finds the
//! seeds' numbers, the report opens in headless Chromium with every chart drawn, and bad
//! run.json files are refused with the reason.

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

mod common;

use common::{inferscale, stderr, stdout, workspace};
use inferscale_testkit::program_any;

fn tmp(name: &str) -> PathBuf {
    common::tmp("run", name)
}

fn json(path: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// The README's first command with its defaults: the seeds' deployment, the seeds' plan, at
/// the default speed-up. The seeds found saturation between 50 and 60 req/s, a queue threshold
/// of 25, a 5 s guardrail over a 2.5 s healthy p95, and scale-in below 3 s.
#[test]
fn the_default_embedded_run_finds_the_seeds_numbers() {
    let (out, o) = run_ok("default", &[]);
    let t = json(&out.join("thresholds.json"));
    assert_eq!(t["version"], 1);
    assert_eq!(t["status"], "saturated", "{t:#}");
    assert_eq!(t["saturation_rps"], 50.0, "{t:#}");
    assert_eq!(t["first_saturated_rps"], 60.0, "{t:#}");
    let q = t["scale_out"]["queue_depth_per_pod"].as_u64().unwrap();
    assert!((10..=50).contains(&q), "queue threshold {q}");
    let healthy = t["healthy"]["p95_e2e_seconds"].as_f64().unwrap();
    let guard = t["scale_out"]["p95_e2e_seconds"].as_f64().unwrap() / healthy;
    assert!(
        (1.5..=3.0).contains(&guard),
        "guardrail {guard}x the healthy p95"
    );
    let scale_in = t["scale_in"]["p95_e2e_seconds"].as_f64().unwrap() / healthy;
    assert!((1.0..=1.5).contains(&scale_in), "scale-in {scale_in}x");
    for key in [
        "saturation_rps",
        "first_saturated_rps",
        "capacity_rps",
        "rationale",
    ] {
        assert!(!t[key].is_null(), "{key}");
    }
    let run = json(&out.join("run.json"));
    assert_eq!(run["warmup"]["requests"], 100);
    // The embedded simulator recorded that it held its clock.
    assert_eq!(run["target"]["simulated"]["clock_held"], true, "{run:#}");
    assert!(run["target"]["simulated"]["clock_lag"]["releases"].as_u64() > Some(100_000));
    assert_eq!(run["steps"].as_array().unwrap().len(), 7);
    assert_eq!(
        run["target"]["simulated"]["profile"],
        "aws-eks-ministral-8b-l40s"
    );
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(
        html.contains("Simulated."),
        "the report says it was simulated"
    );
    assert!(html.contains("speed-up of 10×"));
    // The production configuration is written beside the report.
    for f in [
        "scaledobject.yaml",
        "prometheusrule.yaml",
        "grafana/1-service-slis.json",
        "README.md",
    ] {
        assert!(out.join("manifests").join(f).exists(), "manifests/{f}");
    }
    let text = stdout(&o);
    assert!(text.contains("manifests"), "{text}");
    assert!(
        text.contains("saturates between 50 req/s and 60 req/s"),
        "{text}"
    );
    assert!(text.contains("report.html"));
    // It tunes the scaling policy in the rehearsal and generates from what held: a
    // proportional primary, no flap at a steady load, recorded in thresholds.json.
    let p = &t["scaling"];
    assert!(
        p["primary"] == "in_flight" || p["primary"] == "arrival_rate",
        "{p:#}"
    );
    assert_eq!(p["tuned"]["steady_flaps"], 0, "{p:#}");
    assert!(
        p["tuned"]["worst_attainment"].as_f64() >= Some(0.99),
        "{p:#}"
    );
    let so = std::fs::read_to_string(out.join("manifests/scaledobject.yaml")).unwrap();
    assert!(
        so.replace("\n# ", " ")
            .contains("inferscale tune chose and rehearsed it"),
        "{so}"
    );
    let tune = json(&out.join("tune.json"));
    assert!(tune["chosen"].is_u64(), "{}", tune["statements"]);
    assert!(out.join("tune.html").exists());
    assert!(text.contains("tuning ("), "{text}");
    // It ends by rehearsing the ScaledObject it generated, beside the seeds' shape, on a step
    // to 2.5x capacity and back, with the generated alert rules evaluated, and says how that
    // went, in the summary and in the report.
    assert!(text.contains("rehearsal ("), "{text}");
    assert!(html.contains("Rehearsal of the generated ScaledObject"));
    let r = json(&out.join("rehearsal.json"));
    let g = &r["generated"];
    assert!(
        g["max_replicas"].as_u64() >= Some(3),
        "2.5x the capacity needs 3 replicas: {r:#}"
    );
    assert_eq!(g["cycle_completed"], true, "{r:#}");
    assert_eq!(g["flaps"], 0, "{r:#}");
    // Outside the step's start-up transient, the SLO holds.
    assert!(g["slo_attainment_outside"].as_f64() >= Some(0.99), "{r:#}");
    // The generated alerts fire while the step's queue is above their threshold.
    let fired = g["alerts_fired"].as_array().unwrap();
    assert!(fired.iter().any(|a| a == "HighQueueDepth"), "{r:#}");
    assert_eq!(r["compare"].as_array().map(Vec::len), Some(2), "{r:#}");
    assert!(out.join("rehearsal.html").exists());
}

/// The same run from four local worker processes (`load --segment I/4` from one shared
/// start, merged): the same saturation point as one client, by goodput as by the queue, and
/// a probe stream beside it.
#[test]
fn four_workers_find_the_same_saturation_point_as_one() {
    // The seeds' queue trigger: this test is about the split load, not the tuning. The steps
    // are judged by goodput (95 % within a 5 s e2e SLO): the knee agrees with the queue's.
    let (out, o) = run_ok(
        "workers",
        &[
            "--workers",
            "4",
            "--signal",
            "queue",
            "--slo",
            "e2e=5s",
            "--knee",
            "goodput:95",
            "--probe-rate",
            "1",
        ],
    );
    let t = json(&out.join("thresholds.json"));
    assert_eq!(t["status"], "saturated", "{t:#}");
    assert_eq!(t["saturation_rps"], 50.0, "{t:#}");
    assert_eq!(t["first_saturated_rps"], 60.0, "{t:#}");
    let run = json(&out.join("run.json"));
    assert_eq!(run["warmup"]["requests"], 100);
    assert!(run.get("segment").is_none());
    let steps = run["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 7);
    // The parts add up to the seeds' schedule: 60 s at 10, 20, ..., 70 req/s.
    for (i, s) in steps.iter().enumerate() {
        assert_eq!(
            s["requests"]["scheduled"].as_u64().unwrap(),
            600 * (i as u64 + 1)
        );
    }
    for i in 0..4 {
        let p = json(&out.join(format!("parts/part-{i}.json")));
        assert_eq!(p["segment"]["index"], i);
        assert_eq!(p["segment"]["count"], 4);
    }
    let text = stdout(&o);
    assert!(
        text.contains("saturates between 50 req/s and 60 req/s"),
        "{text}"
    );
    assert!(text.contains("judged by goodput ≥ 95 %"), "{text}");
    assert_eq!(t["slo"]["e2e_s"], 5.0, "{t:#}");
    assert_eq!(t["knee"]["goodput"], 0.95, "{t:#}");
    // One probe a second beside the plan (sent by the first worker only): a newcomer's stall
    // grows past the knee, from tens of milliseconds at 50 req/s to seconds at 60 and 70.
    let stall = |i: usize| steps[i]["probe"]["ttft"]["p95"].as_f64().unwrap();
    let sent = steps[4]["probe"]["sent"].as_u64().unwrap();
    assert!((59..=61).contains(&sent), "{:#}", steps[4]);
    assert!(stall(4) < 0.5, "{:#}", steps[4]);
    assert!(
        stall(5) > 4.0 * stall(4) && stall(6) > 4.0 * stall(4),
        "{steps:#?}"
    );
    assert!(text.contains("probe p95"), "{text}");
    // The workers' good requests add up to each step's goodput.
    for st in steps {
        let g = &st["goodput"];
        assert_eq!(g["scheduled"], st["requests"]["scheduled"], "{st:#}");
        assert!(
            g["good"].as_u64() <= st["requests"]["ok"].as_u64(),
            "{st:#}"
        );
    }
}

/// `inferscale run ARGS --out TMP/NAME`, which must succeed (a failure on a machine too slow
/// for the speed-up is named as the machine's); the folder and the output.
fn run_ok(name: &str, args: &[&str]) -> (PathBuf, std::process::Output) {
    let out = tmp(name);
    let o = inferscale()
        .arg("run")
        .args(args)
        .args(["--out", out.to_str().unwrap()])
        .output()
        .unwrap();
    if o.status.code() != Some(0) {
        machine_held_the_speedup(&out.join("run.json"));
    }
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    (out, o)
}

/// Fails, naming the machine as the cause, when a run that did not succeed was client-limited
/// or its embedded simulator fell behind its clock; returns when neither happened (the failure
/// is then the code's, and the caller's assertion shows it).
fn machine_held_the_speedup(run_json: &Path) {
    let Ok(bytes) = std::fs::read(run_json) else {
        return;
    };
    let Ok(run) = serde_json::from_slice::<serde_json::Value>(&bytes) else {
        return;
    };
    let speedup = &run["plan"]["speedup"];
    for st in run["steps"].as_array().into_iter().flatten() {
        assert!(
            st["client"]["client_limited"] != true,
            "the client could not keep the schedule in step {} ({} req/s): {}; this machine is \
             too slow (or too busy) for the test's {speedup}× speed-up, which is not a fault in \
             the code",
            st["index"],
            st["target_rps"],
            st["client"]["reason"]
        );
    }
    let sim = &run["target"]["simulated"];
    assert!(
        sim["clock_held"] != false,
        "the embedded simulator could not keep its clock ({}); this machine is too slow (or too \
         busy) for the test's {speedup}× speed-up, which is not a fault in the code",
        sim["clock_lag"]
    );
}

fn chromium() -> PathBuf {
    program_any(&["chromium", "chromium-browser", "google-chrome"])
}

/// The report opens in headless Chromium: every chart drawn, no console errors; a screenshot
/// is kept under target/artifacts/ for CI.
#[test]
fn the_report_opens_in_headless_chromium_with_every_chart_drawn() {
    let browser = chromium();
    let dir = tmp("report");
    let run = workspace().join("testdata/runs/sim-seeds-short.json");
    let o = inferscale()
        .args([
            "analyze",
            run.to_str().unwrap(),
            "--out",
            dir.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(o.status.code().is_some_and(|c| c <= 1), "{}", stderr(&o));
    let page = dir.join("report.html");
    let url = format!("file://{}", page.canonicalize().unwrap().display());
    let artifacts = workspace().join("target/artifacts");
    std::fs::create_dir_all(&artifacts).unwrap();
    let shot = artifacts.join("report.png");
    let _ = std::fs::remove_file(&shot);
    let profile = tmp("chromium-profile");
    let common = |c: &mut Command| {
        c.args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--enable-logging=stderr",
            "--v=0",
            "--virtual-time-budget=5000",
            "--window-size=1280,4200",
        ])
        .arg(format!("--user-data-dir={}", profile.display()));
    };
    let mut dump = Command::new(&browser);
    common(&mut dump);
    let d = dump.arg("--dump-dom").arg(&url).output().unwrap();
    assert!(d.status.success(), "chromium failed: {}", stderr(&d));
    let dom = stdout(&d);
    let attr = |name: &str| -> Option<String> {
        let key = format!("{name}=\"");
        let i = dom.find(&key)? + key.len();
        Some(dom[i..].split('"').next()?.to_owned())
    };
    assert_eq!(
        attr("data-charts").as_deref(),
        Some("9"),
        "charts counted by the page"
    );
    assert_eq!(
        attr("data-drawn").as_deref(),
        Some("9"),
        "every chart drawn"
    );
    assert_eq!(
        attr("data-errors"),
        None,
        "script errors: {:?}",
        attr("data-errors")
    );
    let log = stderr(&d);
    let console: Vec<&str> = log.lines().filter(|l| l.contains("CONSOLE")).collect();
    assert!(console.is_empty(), "console messages: {console:?}");
    let mut sc = Command::new(&browser);
    common(&mut sc);
    let s = sc
        .arg(format!("--screenshot={}", shot.display()))
        .arg(&url)
        .output()
        .unwrap();
    assert!(s.status.success(), "screenshot failed: {}", stderr(&s));
    let size = std::fs::metadata(&shot).unwrap().len();
    assert!(size > 20_000, "a screenshot of a drawn page ({size} bytes)");
}

#[test]
fn bad_run_files_are_refused_with_the_reason() {
    let good =
        std::fs::read_to_string(workspace().join("testdata/runs/sim-seeds-short.json")).unwrap();
    let cases: [(&str, String, &str); 3] = [
        (
            "truncated.json",
            good[..good.len() / 3].to_owned(),
            "truncated",
        ),
        (
            "v9.json",
            good.replacen("\"version\": 1", "\"version\": 9", 1),
            "version 9 is not supported",
        ),
        ("empty.json", String::new(), "not valid JSON"),
    ];
    for (name, text, why) in cases {
        let p = tmp(name);
        std::fs::write(&p, text).unwrap();
        let o = inferscale()
            .args([
                "analyze",
                p.to_str().unwrap(),
                "--out",
                tmp("bad-out").to_str().unwrap(),
            ])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{name}: {}", stderr(&o));
        assert!(stderr(&o).contains(why), "{name}: {}", stderr(&o));
        assert!(stderr(&o).contains(name), "names the file: {}", stderr(&o));
    }
    let o = inferscale()
        .args(["analyze", tmp("missing.json").to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    // An interrupted run is analysed, flagged as partial, and exits 1.
    let p = tmp("interrupted.json");
    std::fs::write(
        &p,
        good.replacen("\"interrupted\": false", "\"interrupted\": true", 1),
    )
    .unwrap();
    let out = tmp("interrupted-out");
    let o = inferscale()
        .args([
            "analyze",
            p.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stdout(&o).contains("PARTIAL"), "{}", stdout(&o));
    assert!(out.join("report.html").exists());
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(html.contains("Partial run"));
}
