//! `inferscale check` end to end: against the simulator, a real Prometheus scraping it with
//! the generated rules loaded, and the folder of an `inferscale run`, every check passes;
//! then each is made to fail on purpose (a missing alert, no annotation, utilisation 0.95, a
//! dashboard on removed metric names, …) and reports it. Also the output formats and bad
//! flags.

#![allow(clippy::unwrap_used)]

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::{inferscale, sim, stderr, stdout, tmp};
use inferscale_testkit::{http_get, urlencode};

/// A short `inferscale run` on the embedded simulator: two rates (30 sustained, 80 not), a
/// peak to plan for; its folder.
fn run_folder() -> PathBuf {
    let out = tmp("check", "run");
    let o = inferscale()
        .args([
            "run",
            "--rates",
            "30,80",
            "--step",
            "20s",
            "--rest",
            "5s",
            "--warmup",
            "5",
            "--peak-rps",
            "120",
            "--out",
        ])
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    out
}

fn copy(src: &Path, dst: &Path) {
    std::fs::create_dir_all(dst).unwrap();
    for e in std::fs::read_dir(src).unwrap() {
        let e = e.unwrap();
        let to = dst.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy(&e.path(), &to);
        } else {
            std::fs::copy(e.path(), to).unwrap();
        }
    }
}

/// A copy of the run folder named `tag`, changed by `change`.
fn mutated(run: &Path, tag: &str, change: impl FnOnce(&Path)) -> PathBuf {
    let d = tmp("check", tag);
    let _ = std::fs::remove_dir_all(&d);
    copy(run, &d);
    change(&d);
    d
}

fn edit(path: &Path, f: impl FnOnce(String) -> String) {
    let text = std::fs::read_to_string(path).unwrap();
    let new = f(text.clone());
    assert_ne!(new, text, "the edit of {} changed nothing", path.display());
    std::fs::write(path, new).unwrap();
}

/// Runs `check ARGS --format json`: the exit code and the checks by id.
fn check(args: &[String]) -> (i32, Vec<serde_json::Value>) {
    let o = inferscale()
        .arg("check")
        .args(args)
        .args(["--format", "json"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_str(&stdout(&o))
        .unwrap_or_else(|e| panic!("{e}: {}{}", stdout(&o), stderr(&o)));
    (
        o.status.code().unwrap(),
        v["checks"].as_array().unwrap().clone(),
    )
}

fn status(checks: &[serde_json::Value], id: u64) -> (&str, String) {
    let c = checks.iter().find(|c| c["id"] == id).unwrap();
    (
        c["status"].as_str().unwrap(),
        format!("{} {}: {}", id, c["name"], c["reason"]),
    )
}

/// Everything passes; changing one thing makes exactly the check about it fail.
#[test]
fn the_checklist_passes_on_a_real_setup_and_each_check_fails_on_purpose() {
    let run = run_folder();
    let s = sim(&[
        "--speedup",
        "10",
        "--dcgm-listen",
        "127.0.0.1:0",
        "--gpu-memory-utilization",
        "0.85",
    ]);
    s.wait_healthy();
    let dcgm = s.dcgm.clone().unwrap();
    let dir = tmp("check", "prometheus");
    let config = format!(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nrule_files:\n  - {}\nscrape_configs:\n  - job_name: vllm\n    static_configs:\n      - targets: ['{}']\n        labels: {{namespace: default}}\n  - job_name: dcgm-exporter\n    static_configs:\n      - targets: ['{}']\n",
        run.join("manifests/prometheus-rules.yaml").display(),
        s.url.trim_start_matches("http://"),
        dcgm.trim_start_matches("http://")
            .trim_end_matches("/metrics"),
    );
    let tsdb = format!("--storage.tsdb.path={}", dir.join("data").display());
    let (_prom, addr) = inferscale_testkit::prometheus(&dir, &config, &[&tsdb]);
    // Until Prometheus has scraped both targets three times: the triggers' rate() and
    // delta() need two samples in their window to return a series at all (a check run
    // right after the first scrape, on a busy machine, read none).
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (_, body) = http_get(
            addr,
            &format!(
                "/api/v1/query?query={}",
                urlencode("count(sum_over_time(up[1m]) >= 3)")
            ),
        )
        .unwrap();
        if body.contains("\"2\"") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "Prometheus never scraped both: {body}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let prom = format!("http://{addr}");
    let args = |run: &Path, url: &str, dcgm: &str, prom: &str| -> Vec<String> {
        vec![
            "--url".into(),
            url.into(),
            "--dcgm-url".into(),
            dcgm.into(),
            "--prometheus".into(),
            prom.into(),
            "--run-dir".into(),
            run.display().to_string(),
        ]
    };
    let all = args(&run, &s.url, &dcgm, &prom);
    // The same, on a changed copy of the run folder.
    let on = |d: PathBuf| args(&d, &s.url, &dcgm, &prom);
    let (code, checks) = check(&all);
    let report: Vec<String> = checks
        .iter()
        .map(|c| format!("{} {} {}: {}", c["id"], c["status"], c["name"], c["reason"]))
        .collect();
    assert_eq!(code, 0, "{report:#?}");
    assert_eq!(checks.len(), 14);
    for id in 1..=14 {
        let (st, why) = status(&checks, id);
        assert_eq!(st, "pass", "{why}\n{report:#?}");
    }
    // The human table says the same.
    let o = inferscale().arg("check").args(&all).output().unwrap();
    assert_eq!(o.status.code(), Some(0));
    let table = stdout(&o);
    assert!(table.contains(" 7  PASS  do-not-disrupt"), "{table}");
    assert!(
        table.contains("14 passed, 0 warned, 0 failed, 0 skipped"),
        "{table}"
    );

    // Each check made to fail, alone.
    let dead = "http://127.0.0.1:1";
    let manifests = |d: &Path| d.join("manifests");
    let cases: Vec<(u64, Vec<String>, &str)> = vec![
        (1, args(&run, dead, &dcgm, &prom), "did not answer"),
        (
            3,
            args(&run, &s.url, &format!("{dead}/metrics"), &prom),
            "did not answer",
        ),
        (
            4,
            on(mutated(&run, "removed-names", |d| {
                edit(&manifests(d).join("grafana/2-engine.json"), |t| {
                    t.replace("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")
                })
            })),
            "2-engine.json",
        ),
        (
            5,
            on(mutated(&run, "missing-alert", |d| {
                for f in ["prometheusrule.yaml", "prometheus-rules.yaml"] {
                    edit(&manifests(d).join(f), |t| {
                        t.replace("alert: PreemptionSpike", "alert: SomethingElse")
                            .replace("num_preemptions_total", "num_requests_running")
                    });
                }
            })),
            "PreemptionSpike",
        ),
        (
            6,
            on(mutated(&run, "bad-scaledobject", |d| {
                edit(&manifests(d).join("scaledobject.yaml"), |t| {
                    t.replace("metricType: AverageValue", "metricType: Average")
                })
            })),
            "metricType",
        ),
        (
            7,
            on(mutated(&run, "no-annotation", |d| {
                edit(&manifests(d).join("vllm-deployment-patch.yaml"), |t| {
                    t.replace(
                        "karpenter.sh/do-not-disrupt: \"true\"",
                        "example.com/x: \"y\"",
                    )
                })
            })),
            "do-not-disrupt",
        ),
        (
            8,
            on(mutated(&run, "no-thresholds", |d| {
                std::fs::remove_file(d.join("thresholds.json")).unwrap();
            })),
            "no thresholds.json",
        ),
        (
            9,
            on(mutated(&run, "cold-ready", |d| {
                edit(&manifests(d).join("vllm-deployment-patch.yaml"), |t| {
                    t.replace("os.stat('/inferscale/warm'); ", "")
                })
            })),
            "does not wait for a warm-up",
        ),
        (
            10,
            on(mutated(&run, "utilisation", |d| {
                edit(&manifests(d).join("vllm-args-patch.yaml"), |t| {
                    t.replace(
                        "--gpu-memory-utilization=0.85",
                        "--gpu-memory-utilization=0.95",
                    )
                })
            })),
            "0.95",
        ),
        (
            11,
            on(mutated(&run, "no-cycle", |d| {
                edit(&d.join("rehearsal.json"), |t| {
                    t.replace("\"cycle_completed\": true", "\"cycle_completed\": false")
                })
            })),
            "did not complete",
        ),
        (
            13,
            on(mutated(&run, "few-replicas", |d| {
                edit(&manifests(d).join("scaledobject.yaml"), |t| {
                    let at = t.find("maxReplicaCount: ").unwrap();
                    let end = at + t[at..].find('\n').unwrap();
                    format!("{}maxReplicaCount: 1{}", &t[..at], &t[end..])
                })
            })),
            "maxReplicaCount 1",
        ),
    ];
    for (id, a, want) in &cases {
        let (code, checks) = check(a);
        let (st, why) = status(&checks, *id);
        assert_eq!(st, "fail", "check {id} should fail: {why}");
        assert!(
            why.contains(want),
            "check {id}: {why:?} does not say {want:?}"
        );
        assert_eq!(code, 1, "a failed check exits 1");
        let fix = checks.iter().find(|c| c["id"] == *id).unwrap()["fix"].clone();
        assert!(
            fix.as_str().is_some_and(|f| !f.is_empty()),
            "check {id} has no fix"
        );
    }
    // Prometheus scraping something else: no target with the deployment's labels.
    let mut other = all.clone();
    other.extend(["--job".into(), "not-vllm".into()]);
    let (_, checks) = check(&other);
    let (st, why) = status(&checks, 2);
    assert_eq!(st, "fail", "{why}");
    assert!(why.contains("no target with"), "{why}");

    // --skip, --fail-on warn and JUnit.
    let mut skip = all.clone();
    skip.extend(["--skip".into(), "11,do-not-disrupt".into()]);
    let (code, checks) = check(&skip);
    assert_eq!(code, 0);
    assert_eq!(status(&checks, 11).0, "skipped");
    assert_eq!(status(&checks, 7).0, "skipped");
    let warned = mutated(&run, "warned", |d| {
        edit(&d.join("manifests/vllm-args-patch.yaml"), |t| {
            t.replace(
                "--gpu-memory-utilization=0.85",
                "--gpu-memory-utilization=0.88",
            )
        })
    });
    let a = args(&warned, &s.url, &dcgm, &prom);
    let (code, checks) = check(&a);
    assert_eq!((code, status(&checks, 10).0), (0, "warn"));
    let mut strict = a.clone();
    strict.extend(["--fail-on".into(), "warn".into()]);
    assert_eq!(check(&strict).0, 1);
    let o = inferscale()
        .arg("check")
        .args(&a)
        .args(["--format", "junit", "--fail-on", "warn"])
        .output()
        .unwrap();
    let x = stdout(&o);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(x.matches("<testcase ").count(), 14, "{x}");
    assert!(x.contains("failures=\"1\""), "{x}");
    assert!(x.contains("name=\"10 vllm-memory:"), "{x}");
}

#[test]
fn bad_flags_are_refused_and_nothing_given_is_an_error() {
    let cases: &[(&[&str], &str)] = &[
        (
            &["--skip", "99", "--manifests", "."],
            "--skip \"99\": no such check",
        ),
        (&["--skip", "nope", "--manifests", "."], "no such check"),
        (&["--url", "ftp://x"], "ftp"),
        (
            &["--run-dir", "/nonexistent"],
            "--run-dir /nonexistent: not a folder",
        ),
        (
            &["--format", "xml", "--manifests", "."],
            "invalid value 'xml'",
        ),
    ];
    for (args, want) in cases {
        let o = inferscale().arg("check").args(*args).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(want), "{args:?}: {}", stderr(&o));
    }
    let empty = tmp("check-bad", "empty");
    std::fs::create_dir_all(&empty).unwrap();
    let o = inferscale()
        .arg("check")
        .current_dir(&empty)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("nothing to check"), "{}", stderr(&o));
    // An empty manifests folder: each check about files fails or is skipped, none passes.
    let (code, checks) = {
        let o = inferscale()
            .args(["check", "--json", "--manifests"])
            .arg(&empty)
            .output()
            .unwrap();
        let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
        (o.status.code(), v["checks"].as_array().unwrap().clone())
    };
    assert_eq!(code, Some(1));
    for c in &checks {
        assert_ne!(c["status"], "pass", "{c}");
    }
}

/// The seeds' own deployment (testdata/aws-eks) judged as the method judges it: no
/// dashboards or alerts in it, no do-not-disrupt, no readiness probe, 0.9 utilisation, and a
/// ScaledObject KEDA takes but whose latency trigger is divided by the replica count.
#[test]
fn the_seeds_own_deployment_is_judged_as_the_method_judges_it() {
    let (code, checks) = check(&[
        "--manifests".into(),
        common::workspace()
            .join("testdata/aws-eks")
            .display()
            .to_string(),
    ]);
    assert_eq!(code, 1);
    for (id, want, says) in [
        (4, "fail", "no Grafana dashboard"),
        (5, "fail", "5 of the five alerts missing"),
        (6, "warn", "AverageValue"),
        (7, "fail", "vllm-deployment-service.yaml"),
        (8, "fail", "no thresholds.json"),
        (9, "fail", "no readiness probe"),
        (10, "warn", "gpu_memory_utilization 0.9"),
        (1, "skipped", "no --url"),
    ] {
        let (st, why) = status(&checks, id);
        assert_eq!(st, want, "{why}");
        assert!(why.contains(says), "{why}");
    }
}
