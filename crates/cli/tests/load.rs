//! End-to-end tests of `inferscale load` and `inferscale warmup` against the real binary's
//! simulator: output files, thresholds and exit codes, plan files, and refusals before any
//! load is sent.

// A panic in a test is a failed assertion.
#![allow(clippy::unwrap_used)]

use std::net::TcpListener;
use std::process::Output;

mod common;

use common::{inferscale, sim, stderr};

fn run(args: &[&str]) -> Output {
    inferscale().args(args).output().unwrap()
}

fn tmp(name: &str) -> std::path::PathBuf {
    common::tmp("load", name)
}

#[test]
fn a_short_plan_writes_run_json_and_requests_jsonl_and_thresholds_set_the_exit_code() {
    let s = sim(&["--profile", "instant"]);
    let out = tmp("run.json");
    let reqs = tmp("requests.jsonl");
    let o = run(&[
        "load",
        "--url",
        &s.url,
        "--rates",
        "20,40",
        "--step",
        "2s",
        "--rest",
        "1s",
        "--out",
        out.to_str().unwrap(),
        "--requests-out",
        reqs.to_str().unwrap(),
        "--threshold",
        "p95(e2e)<10s",
        "--threshold",
        "error_rate<1%",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.contains("threshold p95(e2e)<10s: ok"), "{stdout}");
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(v["version"], 1);
    assert_eq!(v["interrupted"], false);
    assert_eq!(v["steps"].as_array().unwrap().len(), 2);
    let st = &v["steps"][1];
    assert_eq!(st["target_rps"], 40.0);
    assert_eq!(st["requests"]["scheduled"], 80);
    assert_eq!(st["requests"]["ok"], 80);
    for k in ["ttft", "tpot", "itl", "e2e"] {
        for p in ["p50", "p90", "p95", "p99", "max", "mean"] {
            assert!(st["latency_s"][k][p].is_number(), "{k}.{p}");
        }
    }
    assert!(st["server"]["queue_depth"]["p95"].is_number());
    assert_eq!(st["server"]["success_delta"], 80.0);
    assert!(st["client"]["lag_p99_s"].is_number());
    assert!(!v["timeline"].as_array().unwrap().is_empty());
    let lines = std::fs::read_to_string(&reqs).unwrap();
    assert_eq!(lines.lines().count(), 120);
    let first: serde_json::Value = serde_json::from_str(lines.lines().next().unwrap()).unwrap();
    assert_eq!(first["outcome"]["kind"], "ok");
    // A threshold that cannot hold: exit 1, result still written.
    std::fs::remove_file(&out).unwrap();
    let o = run(&[
        "load",
        "--url",
        &s.url,
        "--rates",
        "20",
        "--step",
        "1s",
        "--out",
        out.to_str().unwrap(),
        "--threshold",
        "p99(e2e)<1us",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("BREACHED"));
    assert!(out.exists());
}

#[test]
fn plan_files_in_yaml_and_toml() {
    let s = sim(&["--profile", "instant"]);
    let yaml = tmp("plan.yaml");
    std::fs::write(
        &yaml,
        format!("url: {}\nstages:\n  - {{rate: 10, duration: 1s, rest: 0.5s}}\n  - {{rate: 10, end_rate: 30, duration: 1s}}\narrival: poisson\nstream: false\nmax_tokens: uniform:5,15\nprompt_tokens: 50\nthresholds: ['error_rate<1%']\n", s.url),
    )
    .unwrap();
    let out = tmp("plan-run.json");
    let o = run(&[
        "load",
        "--plan",
        yaml.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(v["plan"]["arrival"]["kind"], "poisson");
    assert_eq!(v["plan"]["stages"][1]["end_rate"], 30.0);
    assert_eq!(v["plan"]["requests"]["stream"], false);
    assert_eq!(v["thresholds"][0]["ok"], true);
    let toml = tmp("plan.toml");
    std::fs::write(
        &toml,
        format!(
            "url = \"{}\"\nrates = [15]\nstep = \"1s\"\napi = \"chat\"\n",
            s.url
        ),
    )
    .unwrap();
    let o = run(&[
        "load",
        "--plan",
        toml.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(v["plan"]["requests"]["api"], "chat");
    assert_eq!(v["steps"][0]["requests"]["ok"], 15);
    // Closed-loop steps, from a flag and from a plan's stages.
    let o = run(&[
        "load",
        "--url",
        &s.url,
        "--concurrency",
        "2,4",
        "--step",
        "1s",
        "--rest",
        "0.2s",
        "--max-tokens",
        "5",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(v["steps"][1]["concurrency"], 4);
    assert!(v["steps"][1]["requests"]["ok"].as_u64().unwrap() > 4);
    assert!(String::from_utf8_lossy(&o.stdout).contains("c=4"));
    std::fs::write(
        &yaml,
        format!(
            "url: {}
stages:
  - {{concurrency: 3, duration: 1s}}
",
            s.url
        ),
    )
    .unwrap();
    let o = run(&[
        "load",
        "--plan",
        yaml.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(v["plan"]["stages"][0]["concurrency"], 3);
    // A stage must say which it is.
    std::fs::write(
        &yaml,
        format!(
            "url: {}
stages:
  - {{rate: 2, concurrency: 3, duration: 1s}}
",
            s.url
        ),
    )
    .unwrap();
    let o = run(&[
        "load",
        "--plan",
        yaml.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("either `rate` or `concurrency`"),
        "{}",
        stderr(&o)
    );
    // A typo in a plan is named.
    std::fs::write(&toml, "url = \"http://x\"\nrtaes = [1]\n").unwrap();
    let o = run(&["load", "--plan", toml.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("rtaes"), "{}", stderr(&o));
}

#[test]
fn nothing_is_sent_when_the_run_could_not_be_saved_or_the_target_is_wrong() {
    let s = sim(&["--profile", "instant"]);
    let dead = format!(
        "http://127.0.0.1:{}",
        TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port()
    );
    let cases: Vec<(Vec<String>, &str)> = vec![
        (vec!["--url".into(), dead], "does not answer"),
        (
            vec![
                "--url".into(),
                s.url.clone(),
                "--model".into(),
                "gpt-4".into(),
            ],
            "the server has no model \"gpt-4\"; it serves: ",
        ),
        (
            vec![
                "--url".into(),
                s.url.clone(),
                "--out".into(),
                "/proc/forbidden/run.json".into(),
            ],
            "cannot write /proc/forbidden/run.json",
        ),
        (
            vec!["--url".into(), s.url.clone(), "--rates".into(), "0".into()],
            "rate must be a positive number",
        ),
        (
            vec![
                "--url".into(),
                s.url.clone(),
                "--arrival".into(),
                "gamma:-1".into(),
            ],
            "arrival (--arrival): \"gamma:-1\" is not constant, poisson or gamma:SHAPE",
        ),
        (
            vec![
                "--url".into(),
                s.url.clone(),
                "--speedup".into(),
                "0".into(),
            ],
            "speedup (--speedup): must be",
        ),
        (
            vec![
                "--url".into(),
                s.url.clone(),
                "--threshold".into(),
                "p95(e2e)".into(),
            ],
            "no comparison",
        ),
        (
            vec!["--url".into(), "ftp://127.0.0.1:8000".into()],
            "unsupported scheme \"ftp\"",
        ),
        (
            vec![
                "--url".into(),
                s.url.clone(),
                "--dataset".into(),
                "/no/such.jsonl".into(),
            ],
            "cannot read the dataset /no/such.jsonl",
        ),
        (vec![], "--url is required"),
    ];
    for (args, needle) in cases {
        let mut full = vec!["load".to_owned()];
        if !args.iter().any(|a| a == "--out") {
            full.extend(["--out".to_owned(), tmp("never.json").display().to_string()]);
        }
        full.extend(args.clone());
        let o = inferscale().args(&full).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(stderr(&o).contains(needle), "{args:?}: {}", stderr(&o));
    }
    assert!(!tmp("never.json").exists());
}

#[test]
fn warmup_reports_the_cold_start() {
    let s = sim(&["--speedup", "50"]); // the seeds' L40S, with its first-request costs
    // Wait until the simulated model has loaded (20 s at 50×: 0.4 s).
    std::thread::sleep(std::time::Duration::from_millis(600));
    let o = run(&[
        "warmup",
        "--url",
        &s.url,
        "--requests",
        "20",
        "--speedup",
        "50",
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let w = &v["warmup"];
    assert_eq!(w["ok"], 20);
    // The first request pays the one-time costs (≈ 1.2 simulated seconds on this profile); its
    // output length is drawn like the others', so the ratio varies a little with the draw.
    let ratio = w["cold_ratio"].as_f64().unwrap();
    let (first, steady) = (
        w["first_s"].as_f64().unwrap(),
        w["steady_s"].as_f64().unwrap(),
    );
    assert!(
        ratio >= 1.3 && first - steady > 0.8,
        "first {first} s vs steady {steady} s"
    );
    let o = run(&[
        "warmup",
        "--url",
        &s.url,
        "--requests",
        "5",
        "--speedup",
        "50",
    ]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("first") && text.contains("steady") && text.contains("cold/steady"),
        "{text}"
    );
}

#[test]
fn a_load_in_which_every_request_failed_is_not_a_success() {
    let s = sim(&["--speedup", "10", "--fault-500-rate", "1"]);
    s.wait_healthy();
    let out = tmp("all-failed.json");
    let o = run(&[
        "load",
        "--url",
        &s.url,
        "--rates",
        "5",
        "--step",
        "2s",
        "--speedup",
        "10",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("all 10 requests failed"),
        "{}",
        stderr(&o)
    );
    // The run is kept: it says why each failed.
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(r["steps"][0]["requests"]["failed"]["http_error"]["500"], 10);
}

/// A pause of the whole process (as a VM pause would be: SIGSTOP, then SIGCONT 400 ms
/// later) shows in the step as a stall beside the lag it caused, so a reader can tell the
/// machine's share from the client's.
#[test]
fn a_stopped_process_reports_the_stall_beside_the_lag() {
    let s = sim(&[]);
    s.wait_healthy();
    let dir = tmp("stalled");
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("run.json");
    let mut child = inferscale()
        .args([
            "load", "--url", &s.url, "--rates", "20", "--step", "3s", "--rest", "0s",
        ])
        .args([
            "--warmup",
            "0",
            "--max-tokens",
            "16",
            "--no-metrics",
            "--out",
        ])
        .arg(&out)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Stop it well inside the step, however long it took to start: the step's first line
    // on stderr says it began.
    let (began_tx, began) = std::sync::mpsc::channel();
    let err = child.stderr.take().unwrap();
    let log = std::thread::spawn(move || {
        use std::io::BufRead;
        let mut text = String::new();
        for line in std::io::BufReader::new(err).lines().map_while(Result::ok) {
            if line.starts_with("step 1/1") {
                let _ = began_tx.send(());
            }
            text.push_str(&line);
            text.push('\n');
        }
        text
    });
    let _ = began.recv_timeout(std::time::Duration::from_secs(60));
    std::thread::sleep(std::time::Duration::from_millis(800));
    let pid = child.id().to_string();
    let kill = |sig: &str| {
        assert!(
            std::process::Command::new("kill")
                .args([sig, &pid])
                .status()
                .unwrap()
                .success()
        );
    };
    kill("-STOP");
    std::thread::sleep(std::time::Duration::from_millis(400));
    kill("-CONT");
    let status = child.wait().unwrap();
    let log = log.join().unwrap();
    assert!(status.success(), "{log}");
    let run: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    let client = &run["steps"][0]["client"];
    let stalls = &client["stalls"];
    assert!(stalls["count"].as_u64().unwrap() >= 1, "{client}");
    let longest = stalls["longest_s"].as_f64().unwrap();
    assert!((0.3..2.0).contains(&longest), "{client}");
    // The requests due during the pause went late by about as much.
    assert!(client["lag_max_s"].as_f64().unwrap() >= 0.3, "{client}");
    assert!(
        client["reason"]
            .as_str()
            .is_some_and(|r| r.contains("the machine stalled")),
        "{client}"
    );
}

/// Goodput per step, recounted from the requests themselves with the definitions
/// `inferscale load --help` gives: the same counts as run.json's. The SLO splits the
/// requests whatever the machine's speed: a request of one token has no TPOT and meets the
/// 1 µs bound, one of two or three cannot (the engine takes milliseconds a token), and the
/// TTFT and e2e bounds are far above any latency here.
#[test]
fn goodput_per_step_is_the_recount_of_the_requests_within_the_slo() {
    let s = sim(&["--profile", "aws-eks-ministral-8b-l40s", "--speedup", "10"]);
    let out = tmp("goodput-run.json");
    let reqs = tmp("goodput-requests.jsonl");
    let o = run(&[
        "load",
        "--url",
        &s.url,
        "--speedup",
        "10",
        "--rates",
        "20,40",
        "--step",
        "10s",
        "--rest",
        "1s",
        "--max-tokens",
        "uniform:1,3",
        "--slo",
        "ttft=10m,tpot=1us,e2e=10m",
        "--out",
        out.to_str().unwrap(),
        "--requests-out",
        reqs.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(v["slo"]["e2e_s"], 600.0, "{}", v["slo"]);
    let k = v["plan"]["speedup"].as_f64().unwrap();
    let mut recount = [(0u64, 0u64); 2];
    for line in std::fs::read_to_string(&reqs).unwrap().lines() {
        let r: serde_json::Value = serde_json::from_str(line).unwrap();
        let step = r["step"].as_u64().unwrap() as usize;
        recount[step].0 += 1;
        if r["outcome"]["kind"] != "ok" {
            continue;
        }
        let at = r["intended_s"].as_f64().unwrap();
        let end = r["end_s"].as_f64().unwrap();
        let first = r["events_s"]
            .as_array()
            .unwrap()
            .first()
            .map(|f| f.as_f64().unwrap());
        let e2e = (end - at) * k;
        // A non-streaming answer's first token is its end.
        let ttft = first.map_or(e2e, |f| (f - at) * k);
        let n = r["output_tokens"].as_u64().unwrap();
        let tpot = match first {
            Some(f) if n > 1 => Some((end - f) / (n - 1) as f64 * k),
            _ => None,
        };
        let good = ttft <= 600.0 && e2e <= 600.0 && tpot.is_none_or(|t| t <= 1e-6);
        recount[step].1 += u64::from(good);
    }
    let (mut all, mut good) = (0, 0);
    for (i, (n, g)) in recount.iter().enumerate() {
        let gp = &v["steps"][i]["goodput"];
        assert_eq!(gp["scheduled"], *n, "step {i}: {gp}");
        assert_eq!(gp["good"], *g, "step {i}: {gp}");
        let d = v["steps"][i]["duration_s"].as_f64().unwrap();
        assert!((gp["rate_rps"].as_f64().unwrap() - *g as f64 / d).abs() < 1e-9);
        all += n;
        good += g;
    }
    // The SLO splits the requests: the test would prove nothing if all or none met it.
    assert!(good > 0 && good < all, "{good} of {all} good");
    let table = String::from_utf8_lossy(&o.stdout);
    assert!(table.contains("goodput"), "{table}");
}

/// The prefix-cache hit rate a trace's `hash_ids` imply, recounted here from the file: each
/// prompt's leading 512-token blocks seen in an earlier prompt, in whole 16-token blocks, at
/// most all but one token.
/// The JSON lines of a file.
fn jsonl(path: &std::path::Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// `load --trace TRACE --dispatch RULE` (and `extra`) against a 10× simulator at `url`:
/// its run.json (written to `out`), its records written to `reqs`.
fn replay(
    url: &str,
    trace: &std::path::Path,
    rule: &str,
    extra: &[&str],
    out: &std::path::Path,
    reqs: &std::path::Path,
) -> serde_json::Value {
    let mut args = vec![
        "load",
        "--url",
        url,
        "--speedup",
        "10",
        "--wait-ready",
        "120s",
    ];
    args.extend(["--trace", trace.to_str().unwrap(), "--dispatch", rule]);
    args.extend_from_slice(extra);
    args.extend(["--out", out.to_str().unwrap()]);
    args.extend(["--requests-out", reqs.to_str().unwrap()]);
    let o = run(&args);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    serde_json::from_slice(&std::fs::read(out).unwrap()).unwrap()
}

fn implied_hit_rate(trace: &str) -> f64 {
    let mut seen = std::collections::HashSet::new();
    let (mut hits, mut all) = (0u64, 0u64);
    for line in trace.lines().filter(|l| !l.trim().is_empty()) {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        let input = v["input_length"].as_u64().unwrap();
        let ids: Vec<u64> = v["hash_ids"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_u64().unwrap())
            .collect();
        let mut matched = 0;
        for (k, id) in ids.iter().enumerate() {
            if !seen.contains(id) {
                break;
            }
            matched += (input - 512 * k as u64).min(512);
        }
        seen.extend(ids);
        hits += matched.min(input - 1) / 16 * 16;
        all += input;
    }
    hits as f64 / all as f64
}

/// A Mooncake-format trace of chat sessions, replayed at 4× (a slack server) and 16× (past
/// its capacity) by each dispatch rule, each against a fresh simulator: the simulator's
/// prefix cache finds what the `hash_ids` imply; think-time dispatch never sends a turn
/// before the one before it ended (plus its delay), timestamp dispatch sends each at its own
/// time; the two agree on a slack server and part past saturation, where think-time
/// dispatch holds the load back as its users wait.
#[test]
fn a_trace_replay_finds_the_cache_its_hash_ids_imply_under_either_dispatch_rule() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/traces/chat-sessions.jsonl");
    let text = std::fs::read_to_string(&path).unwrap();
    let lines = jsonl(&path);
    let n = lines.len();
    let t0 = lines[0]["timestamp"].as_f64().unwrap();
    let implied = implied_hit_rate(&text);
    let mut p95 = Vec::new();
    for rule in ["timestamp", "think-time"] {
        let s = sim(&["--profile", "aws-eks-ministral-8b-l40s", "--speedup", "10"]);
        let out = tmp(&format!("trace-{rule}.json"));
        let reqs = tmp(&format!("trace-{rule}.jsonl"));
        let v = replay(
            &s.url,
            &path,
            rule,
            &["--speed", "4x,16x", "--rest", "15s"],
            &out,
            &reqs,
        );
        assert_eq!(v["plan"]["requests"]["prompt"]["dispatch"], rule);
        let steps = v["steps"].as_array().unwrap();
        assert_eq!(steps.len(), 2);
        let first = &steps[0];
        assert_eq!(first["requests"]["ok"], n as u64, "{}", first["requests"]);
        let rate = first["cache"]["implied_hit_rate"].as_f64().unwrap();
        assert!((rate - implied).abs() < 1e-9, "{rate} vs {implied}");
        let measured = first["server"]["prefix_cache_hit_rate"].as_f64().unwrap();
        assert!(
            (measured - implied).abs() < 0.05,
            "{rule}: the simulator found {measured:.3}, the hash_ids imply {implied:.3}"
        );
        p95.push([0, 1].map(|i| steps[i]["latency_s"]["e2e"]["p95"].as_f64().unwrap()));

        // When each request was meant to go, against the trace.
        let records = jsonl(&reqs);
        let k = 10.0;
        let (mut overlapped, mut checked) = (0, 0);
        for (step, speed) in [(0usize, 4.0), (1, 16.0)] {
            let start = steps[step]["start_s"].as_f64().unwrap() / k;
            let of = |j: usize| &records[step * n + j];
            let mut last: std::collections::HashMap<&str, usize> = Default::default();
            for (j, line) in lines.iter().enumerate() {
                assert_eq!(of(j)["index"], (step * n + j) as u64);
                let at = of(j)["intended_s"].as_f64().unwrap();
                // The replay starts with the trace's first request.
                let ts = (line["timestamp"].as_f64().unwrap() - t0) / 1000.0 / speed / k;
                let before = last.insert(line["session_id"].as_str().unwrap(), j);
                match (rule, before) {
                    ("think-time", Some(p)) => {
                        let ended = of(p)["end_s"].as_f64().unwrap();
                        let delay = line["delay"].as_f64().unwrap() / 1000.0 / speed / k;
                        assert!(
                            at >= ended + delay - 1e-3,
                            "turn {j}: {at} < {ended} + {delay}"
                        );
                        checked += 1;
                    }
                    (_, p) => {
                        assert!(
                            (at - (start + ts)).abs() < 1e-3,
                            "request {j}: {at} vs {ts}"
                        );
                        let ended = p.map(|p| of(p)["end_s"].as_f64().unwrap());
                        overlapped += usize::from(ended.is_some_and(|e| at < e));
                    }
                }
            }
        }
        match rule {
            "think-time" => assert!(checked > 100, "{checked}"),
            _ => assert!(
                overlapped > 0,
                "no turn went before the one before it ended"
            ),
        }
    }
    let (slack, saturated) = (p95[1][0] / p95[0][0], p95[1][1] / p95[0][1]);
    assert!(
        (0.75..1.33).contains(&slack),
        "slack: think-time's p95 e2e is {slack:.2}× timestamp's"
    );
    assert!(
        saturated < 0.75,
        "saturated: think-time's p95 e2e is {saturated:.2}× timestamp's ({p95:?})"
    );
}

/// An agentic trace with branches (`testdata/traces/agent-branches.jsonl`: planners that fan
/// out into tool calls, and joins that wait for every call) under think-time dispatch: each
/// call is sent once its planner has ended, each join once all its calls have, each after
/// its recorded delay; and the simulator finds the cache the branches' hash_ids imply.
#[test]
fn an_agents_branches_go_when_their_parent_ends_and_a_join_when_all_have() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/traces/agent-branches.jsonl");
    let text = std::fs::read_to_string(&path).unwrap();
    let lines = jsonl(&path);
    let s = sim(&["--profile", "aws-eks-ministral-8b-l40s", "--speedup", "10"]);
    let (out, reqs) = (tmp("agent.json"), tmp("agent.jsonl"));
    let v = replay(&s.url, &path, "think-time", &["--speed", "2x"], &out, &reqs);
    let step = &v["steps"][0];
    assert_eq!(step["requests"]["ok"], lines.len() as u64);
    let implied = implied_hit_rate(&text);
    let measured = step["server"]["prefix_cache_hit_rate"].as_f64().unwrap();
    assert!(
        (measured - implied).abs() < 0.05,
        "the simulator found {measured:.3}, the hash_ids imply {implied:.3}"
    );
    let records = jsonl(&reqs);
    let at: std::collections::HashMap<&str, usize> = lines
        .iter()
        .enumerate()
        .map(|(j, l)| (l["id"].as_str().unwrap(), j))
        .collect();
    let (k, speed) = (10.0, 2.0);
    let (mut calls, mut joins) = (0, 0);
    for (j, line) in lines.iter().enumerate() {
        let parents: Vec<&str> = match (line.get("parent"), line.get("parents")) {
            (Some(p), _) => vec![p.as_str().unwrap()],
            (_, Some(ps)) => ps
                .as_array()
                .unwrap()
                .iter()
                .map(|p| p.as_str().unwrap())
                .collect(),
            _ => continue,
        };
        let sent = records[j]["intended_s"].as_f64().unwrap();
        let last_end = parents
            .iter()
            .map(|p| records[at[p]]["end_s"].as_f64().unwrap())
            .fold(0.0, f64::max);
        let delay = line["delay"].as_f64().unwrap() / 1000.0 / speed / k;
        assert!(
            sent >= last_end + delay - 1e-3,
            "{}: sent at {sent}, before {last_end} + {delay}",
            line["id"]
        );
        if parents.len() > 1 {
            joins += 1;
        } else {
            calls += 1;
        }
    }
    assert!(calls > 50 && joins > 20, "{calls} calls, {joins} joins");
}

/// A multi-turn workload whose turns carry long histories (six turns of 384-token messages
/// and 48-token answers, an agent's shape) at 10 to 50 req/s, against the simulator with
/// prefix caching and without: the cache moves the knee, and `analyze --baseline` says by
/// how much, from the two runs' own analyses.
#[test]
fn prefix_caching_moves_a_multi_turn_knee_and_analyze_says_by_how_much() {
    let mut knees = Vec::new();
    let mut files = Vec::new();
    for caching in [true, false] {
        let mut args = vec!["--profile", "aws-eks-ministral-8b-l40s", "--speedup", "10"];
        if !caching {
            args.push("--no-enable-prefix-caching");
        }
        let s = sim(&args);
        let out = tmp(&format!("multi-turn-{caching}.json"));
        let o = run(&[
            "load",
            "--url",
            &s.url,
            "--speedup",
            "10",
            "--wait-ready",
            "120s",
            "--shape",
            "multi-turn:6",
            "--prompt-tokens",
            "384",
            "--max-tokens",
            "48",
            "--rates",
            "10,20,30,40,50",
            "--step",
            "30s",
            "--rest",
            "10s",
            "--out",
            out.to_str().unwrap(),
        ]);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        let table = String::from_utf8_lossy(&o.stdout).into_owned();
        assert!(table.contains("cache hit"), "{table}");
        let dir = tmp(&format!("multi-turn-{caching}"));
        let a = run(&[
            "analyze",
            out.to_str().unwrap(),
            "--out",
            dir.to_str().unwrap(),
            "--json",
        ]);
        assert_eq!(a.status.code(), Some(0), "{}", stderr(&a));
        let t: serde_json::Value = serde_json::from_slice(&a.stdout).unwrap();
        knees.push(t["saturation_rps"].as_f64().unwrap());
        let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
        let hit = v["steps"][0]["server"]["prefix_cache_hit_rate"]
            .as_f64()
            .unwrap();
        let implied = v["steps"][0]["cache"]["implied_hit_rate"].as_f64().unwrap();
        if caching {
            assert!((hit - implied).abs() < 0.05, "{hit} vs {implied}");
            // The thresholds keep the shape, and a rehearsal of them sends it again: its
            // replicas (the profile's engine) find the history in their caches.
            let th = dir.join("thresholds.json");
            let t: serde_json::Value =
                serde_json::from_slice(&std::fs::read(&th).unwrap()).unwrap();
            assert_eq!(t["workload"]["prompts"]["kind"], "shared", "{t:#}");
            let so = common::workspace().join("testdata/aws-eks/keda-scaledobject.yaml");
            let rehearse = |extra: &[&str]| {
                let mut args = vec!["rehearse", "--thresholds", th.to_str().unwrap()];
                args.extend(["--scaledobject", so.to_str().unwrap()]);
                args.extend(["--profile", "aws-eks-ministral-8b-l40s"]);
                args.extend(["--pattern", "hold:20@5m", "--json"]);
                args.extend_from_slice(extra);
                let o = run(&args);
                assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
                let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
                (
                    stderr(&o),
                    v["prefix_cache_hit_rate"].as_f64().unwrap_or(0.0),
                )
            };
            let (said, shared) = rehearse(&[]);
            assert!(
                said.contains("prompts: shared-prefix prompts (multi-turn:6,16)"),
                "{said}"
            );
            assert!((shared - implied).abs() < 0.1, "{shared} vs {implied}");
            assert_eq!(rehearse(&["--unique-prompts"]).1, 0.0);
        } else {
            assert_eq!(hit, 0.0);
        }
        files.push(out);
    }
    assert!(
        knees[0] > knees[1],
        "caching on {} vs off {}",
        knees[0],
        knees[1]
    );
    let a = run(&[
        "analyze",
        files[0].to_str().unwrap(),
        "--out",
        tmp("multi-turn-compared").to_str().unwrap(),
        "--baseline",
        files[1].to_str().unwrap(),
    ]);
    let text = String::from_utf8_lossy(&a.stdout).into_owned();
    let moved = format!(
        "knee      {:.1} → {:.1} req/s (+{:.1}",
        knees[1],
        knees[0],
        knees[0] - knees[1]
    );
    assert!(text.contains(&moved), "{moved:?} not in {text}");
    let html = std::fs::read_to_string(tmp("multi-turn-compared").join("report.html")).unwrap();
    assert!(html.contains("Against the baseline"));
}
