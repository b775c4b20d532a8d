//! The bad-input suite: a table of hostile and careless inputs against every command. Each
//! must end with the documented exit code (2: nothing done) and a message that names the
//! value, without a panic, without leaving a file behind, within bounded time and memory
//! (each runs under `ulimit -v`, and is killed as hung after a minute).

#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{sim, tmp, workspace};

/// Virtual memory each command may use (KiB): the multi-threaded runtime reserves stacks,
/// but a command that reads an endless file would pass this within seconds.
const MEMORY_KIB: u64 = 4 << 20;

/// A command that has not ended after this long is hung.
const HANG: Duration = Duration::from_secs(60);

/// One row: what it shows, the arguments, files to create first (`name`, contents), and the
/// text the message must contain.
struct Case {
    rule: &'static str,
    args: Vec<String>,
    files: Vec<(&'static str, Vec<u8>)>,
    needle: &'static str,
}

fn case(rule: &'static str, args: &[&str], needle: &'static str) -> Case {
    Case {
        rule,
        args: args.iter().map(|a| (*a).to_owned()).collect(),
        files: Vec::new(),
        needle,
    }
}

fn with_file(mut c: Case, name: &'static str, contents: impl Into<Vec<u8>>) -> Case {
    c.files.push((name, contents.into()));
    c
}

/// Every path under `dir`, relative.
fn listing(dir: &Path) -> BTreeSet<PathBuf> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeSet<PathBuf>) {
        for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let p = e.path();
            out.insert(p.strip_prefix(root).unwrap().to_path_buf());
            if p.is_dir() && !p.is_symlink() {
                walk(root, &p, out);
            }
        }
    }
    let mut out = BTreeSet::new();
    walk(dir, dir, &mut out);
    out
}

/// Runs one case in a fresh folder; returns what went wrong, if anything.
fn check(c: &Case, n: usize) -> Option<String> {
    let dir = tmp("bad", &format!("case-{n}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for (name, contents) in &c.files {
        let p = dir.join(name);
        if name.ends_with('/') {
            std::fs::create_dir_all(&p).unwrap();
        } else {
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, contents).unwrap();
        }
    }
    let before = listing(&dir);
    let started = Instant::now();
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(format!("ulimit -v {MEMORY_KIB}; exec \"$0\" \"$@\""))
        .arg(env!("CARGO_BIN_EXE_inferscale"))
        .args(&c.args)
        .current_dir(&dir)
        .env_remove("OPENAI_API_KEY")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut stderr, &mut s);
        s
    });
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break Some(s);
        }
        if started.elapsed() > HANG {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let err = reader.join().unwrap();
    let after = listing(&dir);
    let _ = std::fs::remove_dir_all(&dir);
    let what = format!("[{}] inferscale {}", c.rule, c.args.join(" "));
    let Some(status) = status else {
        return Some(format!("{what}: hung (killed after {HANG:?})"));
    };
    if err.contains("panicked") {
        return Some(format!("{what}: panicked: {err}"));
    }
    if status.code() != Some(2) {
        return Some(format!("{what}: exit {:?}, not 2: {err}", status.code()));
    }
    let errors: Vec<&str> = err.lines().filter(|l| l.starts_with("error")).collect();
    if errors.len() != 1 || errors[0].chars().count() > 2100 {
        return Some(format!("{what}: not one short error line: {err}"));
    }
    // clap writes its usage errors over a few lines; ours are one.
    let message = if errors[0].contains("the following required arguments") {
        err.as_str()
    } else {
        errors[0]
    };
    if !message.contains(c.needle) {
        return Some(format!(
            "{what}: the message does not name {:?}: {}",
            c.needle, errors[0]
        ));
    }
    if before != after {
        let left: Vec<_> = after.difference(&before).collect();
        let gone: Vec<_> = before.difference(&after).collect();
        return Some(format!("{what}: files left {left:?}, lost {gone:?}"));
    }
    None
}

fn thresholds() -> String {
    std::fs::read_to_string(workspace().join("testdata/runs/thresholds-default.json")).unwrap()
}

/// thresholds.json with one field replaced.
fn thresholds_with(pointer: &str, v: serde_json::Value) -> Vec<u8> {
    let mut t: serde_json::Value = serde_json::from_str(&thresholds()).unwrap();
    *t.pointer_mut(pointer).unwrap() = v;
    serde_json::to_vec(&t).unwrap()
}

#[test]
fn hostile_inputs_are_refused_cleanly_by_every_command() {
    let s = sim(&["--speedup", "10", "--served-model-name", "m"]);
    s.wait_healthy();
    let url = s.url.clone();
    let u = url.as_str();
    let t = thresholds();
    let fifo_dir = tmp("bad", "fifo");
    std::fs::create_dir_all(&fifo_dir).unwrap();
    let fifo = fifo_dir.join("pipe");
    let _ = std::fs::remove_file(&fifo);
    assert!(
        Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let fifo = fifo.to_str().unwrap().to_owned();
    let generate = |extra: &[&str], needle: &'static str, rule: &'static str| {
        let mut args = vec!["generate", "--thresholds", "t.json", "--out", "o"];
        args.extend_from_slice(extra);
        with_file(case(rule, &args, needle), "t.json", t.clone())
    };
    let load = |extra: &[&str], needle: &'static str, rule: &'static str| {
        let mut args = vec!["load", "--url", u, "--rates", "5", "--step", "2s"];
        args.extend_from_slice(extra);
        case(rule, &args, needle)
    };
    let long_release = "r".repeat(300);
    let alias_bomb = {
        let big = "x".repeat(100_000);
        let mut p = format!("a: &a \"{big}\"\nprompt: [");
        for _ in 0..2000 {
            p.push_str("*a,");
        }
        p.push_str("*a]\n");
        p
    };
    let cases: Vec<Case> = vec![
        // Every input file is bounded, and devices and FIFOs are refused.
        case(
            "input files are bounded",
            &["analyze", "/dev/zero"],
            "/dev/zero",
        ),
        case(
            "input files are bounded",
            &["analyze", &fifo],
            "not a regular file",
        ),
        case(
            "input files are bounded",
            &["generate", "--thresholds", "/dev/zero", "--out", "o"],
            "/dev/zero",
        ),
        case(
            "input files are bounded",
            &["load", "--plan", "/dev/zero"],
            "/dev/zero",
        ),
        case(
            "input files are bounded",
            &["scrape", "/dev/zero"],
            "/dev/zero",
        ),
        case(
            "input files are bounded",
            &["query", "--file", "/dev/zero", "--target", u],
            "/dev/zero",
        ),
        case(
            "input files are bounded",
            &["load", "--url", u, "--api-key-file", "/dev/zero"],
            "/dev/zero",
        ),
        case(
            "input files are named",
            &["analyze", "missing.json"],
            "missing.json",
        ),
        // A URL is used as written or refused naming the wrong part.
        case(
            "ports are 1 to 65535",
            &["scrape", "http://127.0.0.1:99999/"],
            "99999",
        ),
        case(
            "ports are 1 to 65535",
            &["scrape", "http://127.0.0.1:abc/"],
            "abc",
        ),
        case(
            "ports are 1 to 65535",
            &["scrape", "http://127.0.0.1:-1/"],
            "-1",
        ),
        case(
            "ports are 1 to 65535",
            &["load", "--url", "http://127.0.0.1:65536"],
            "65536",
        ),
        case(
            "ports are 1 to 65535",
            &["warmup", "--url", "http://127.0.0.1:0"],
            "\"0\"",
        ),
        case(
            "ports are 1 to 65535",
            &["run", "--url", "http://127.0.0.1:70000"],
            "70000",
        ),
        case(
            "a segment's index is below the worker count",
            &["load", "--url", "http://127.0.0.1:9", "--segment", "4/4"],
            "4/4",
        ),
        case(
            "a segment is I/N",
            &["load", "--url", "http://127.0.0.1:9", "--segment", "half"],
            "half",
        ),
        case(
            "a start time is RFC 3339 or Unix seconds",
            &["load", "--url", "http://127.0.0.1:9", "--start-at", "noon"],
            "noon",
        ),
        case(
            "merge reads run.json parts",
            &["merge", "/nonexistent/part.json"],
            "/nonexistent/part.json",
        ),
        case(
            "merge thresholds parse",
            &["merge", "x.json", "--threshold", "p95(e2e)<<5s"],
            "p95(e2e)<<5s",
        ),
        case(
            "merge - reads parts from standard input",
            &["merge", "-"],
            "the input holds no parts",
        ),
        case(
            "a Prometheus URL has a scheme",
            &["merge", "x.json", "--prometheus", "prom:9090"],
            "prom:9090",
        ),
        case(
            "a load Job has workers",
            &["generate", "--load-job", "--workers", "0"],
            "--workers 0",
        ),
        case(
            "the load Job sets --url itself",
            &["generate", "--load-job", "--", "--url", "http://x"],
            "--url after --",
        ),
        case(
            "a load Job's workers read no local files",
            &["generate", "--load-job", "--", "--dataset", "d.jsonl"],
            "--dataset after --",
        ),
        case(
            "a load Job's flags are load's",
            &["generate", "--load-job", "--", "--rates", "fast"],
            "fast",
        ),
        case(
            "a worker's CPU is a quantity",
            &["generate", "--load-job", "--worker-cpu", "two"],
            "two",
        ),
        case(
            "a Secret's name is RFC 1123",
            &["generate", "--load-job", "--api-key-secret", "My_Key"],
            "My_Key",
        ),
        case(
            "a load Job outlasts its plan",
            &["generate", "--load-job", "--deadline", "1m"],
            "shorter than the plan",
        ),
        case(
            "load Job flags need --load-job",
            &["generate", "--thresholds", "t.json", "--workers", "3"],
            "--workers is for the load Job",
        ),
        case(
            "--emit-part is for a segment",
            &["load", "--url", "http://127.0.0.1:9", "--emit-part"],
            "--segment",
        ),
        case(
            "schemes are http or https",
            &["scrape", "ftp://127.0.0.1/"],
            "ftp",
        ),
        case(
            "a URL has a scheme",
            &["load", "--url", "127.0.0.1:8000"],
            "no scheme",
        ),
        case(
            "credentials in a URL are refused",
            &["scrape", "http://user:hunter2@127.0.0.1:9/"],
            "***@",
        ),
        case(
            "credentials in a URL are refused",
            &["load", "--url", "http://user:hunter2@127.0.0.1:9"],
            "***@",
        ),
        // Values that reach Kubernetes objects are what Kubernetes accepts.
        generate(
            &["--prometheus-release", "a\"b"],
            "a\\\"b",
            "label values are Kubernetes label values",
        ),
        generate(
            &["--prometheus-release", "ü"],
            "ü",
            "label values are Kubernetes label values",
        ),
        generate(
            &["--prometheus-release", "a\nb"],
            "a\\nb",
            "label values are Kubernetes label values",
        ),
        generate(
            &["--prometheus-release", &long_release],
            "63",
            "label values are Kubernetes label values",
        ),
        generate(
            &["--service-port", ":80"],
            "service-port",
            "ports are named and numbered",
        ),
        generate(
            &["--service-port", "x"],
            "service-port",
            "ports are named and numbered",
        ),
        generate(
            &["--service-port", "http:0"],
            "service-port",
            "ports are named and numbered",
        ),
        generate(
            &["--service-port", "http:70000"],
            "70000",
            "ports are named and numbered",
        ),
        generate(
            &["--service-port", "HTTP:80"],
            "HTTP",
            "ports are named and numbered",
        ),
        generate(
            &["--inferscale-image", ""],
            "inferscale-image",
            "an image is named",
        ),
        generate(
            &["--inferscale-image", "a b"],
            "inferscale-image",
            "an image is named",
        ),
        generate(
            &["--container-index", "100000"],
            "100000",
            "a container index is small",
        ),
        generate(
            &["--max-model-len", "1"],
            "max-model-len",
            "max-model-len fits the measured requests",
        ),
        generate(
            &["--max-model-len", "0"],
            "0",
            "max-model-len fits the measured requests",
        ),
        generate(
            &["--deployment", "a.b"],
            "--service",
            "a defaulted name says where it came from",
        ),
        generate(&["--namespace", "BAD"], "BAD", "names are RFC 1123"),
        generate(
            &["--min-replicas", "0"],
            "min-replicas",
            "replica bounds make sense",
        ),
        generate(
            &["--min-replicas", "3", "--max-replicas", "2"],
            "max-replicas",
            "replica bounds make sense",
        ),
        generate(
            &["--max-replicas", "4000000000"],
            "max-replicas",
            "replica bounds make sense",
        ),
        generate(
            &["--slo-p95-e2e", "0s"],
            "slo-p95-e2e",
            "the SLO is a latency",
        ),
        generate(
            &["--prometheus-url", "ftp://x"],
            "ftp://x",
            "URLs are http(s)",
        ),
        generate(&["--model-name", ""], "model-name", "a model is named"),
        // Numbers are range-checked where they enter.
        with_file(
            case(
                "numbers are range-checked where they enter",
                &["generate", "--thresholds", "t.json", "--out", "o"],
                "workload.prompt_tokens_mean",
            ),
            "t.json",
            thresholds_with("/workload/prompt_tokens_mean", serde_json::json!(1e18)),
        ),
        with_file(
            case(
                "numbers are range-checked where they enter",
                &["generate", "--thresholds", "t.json", "--out", "o"],
                "scale_out.queue_depth_per_pod",
            ),
            "t.json",
            thresholds_with("/scale_out/queue_depth_per_pod", serde_json::json!(1e12)),
        ),
        case(
            "numbers are range-checked where they enter",
            &["analyze", "x.json", "--peak-rps", "1e300"],
            "1e300",
        ),
        case(
            "numbers are range-checked where they enter",
            &["analyze", "x.json", "--peak-rps", "-1"],
            "-1",
        ),
        load(
            &["--rates", "1e300"],
            "1e300",
            "numbers are range-checked where they enter",
        ),
        load(
            &["--rates", "-1"],
            "-1",
            "numbers are range-checked where they enter",
        ),
        case(
            "a step sends something",
            &["load", "--url", u, "--rates", "5", "--step", "0s"],
            "duration",
        ),
        // A command that fails leaves the output as it found it.
        with_file(
            generate(&[], "warmup-job.yaml", "output is all or nothing"),
            "o/warmup-job.yaml/",
            Vec::new(),
        ),
        with_file(
            case(
                "output is all or nothing",
                &[
                    "warmup",
                    "--url",
                    u,
                    "--requests",
                    "1",
                    "--speedup",
                    "10",
                    "--done-file",
                    "d/",
                ],
                "directory",
            ),
            "d/",
            Vec::new(),
        ),
        // Two outputs of one command are two files.
        load(
            &["--out", "same.json", "--requests-out", "same.json"],
            "same file",
            "outputs do not collide",
        ),
        load(
            &["--out", "same.json", "--requests-out", "./same.json"],
            "same file",
            "outputs do not collide",
        ),
        // Prompts are checked before anything is sent.
        load(&["--prompt", ""], "prompt", "prompts are checked up front"),
        load(
            &["--prompt", "   "],
            "prompt",
            "prompts are checked up front",
        ),
        with_file(
            load(
                &["--dataset", "d.jsonl"],
                "d.jsonl:2",
                "prompts are checked up front",
            ),
            "d.jsonl",
            "{\"prompt\": \"hello\"}\n{\"prompt\": \"\"}\n",
        ),
        with_file(
            load(
                &["--dataset", "d.jsonl"],
                "d.jsonl:1",
                "prompts are checked up front",
            ),
            "d.jsonl",
            "{\"messages\": []}\n",
        ),
        with_file(
            load(
                &["--dataset", "d.jsonl"],
                "d.jsonl:1",
                "prompts are checked up front",
            ),
            "d.jsonl",
            "{\"messages\": [{\"role\": \"user\", \"content\": 5}]}\n",
        ),
        with_file(
            load(
                &["--dataset", "d.jsonl"],
                "max_tokens",
                "prompts are checked up front",
            ),
            "d.jsonl",
            "{\"prompt\": \"hi\", \"max_tokens\": 0}\n",
        ),
        with_file(
            load(
                &["--dataset", "d.jsonl"],
                "max_tokens",
                "prompts are checked up front",
            ),
            "d.jsonl",
            "{\"prompt\": \"hi\", \"max_tokens\": -5}\n",
        ),
        with_file(
            load(
                &["--dataset", "d.json"],
                "d.json:1",
                "prompts are checked up front",
            ),
            "d.json",
            "[{\"conversations\": [{\"from\": \"human\", \"value\": \"\"}]}]",
        ),
        // Traces and shapes: a line that cannot be meant is named with its number.
        with_file(
            case(
                "traces are checked up front",
                &["load", "--url", u, "--trace", "t.jsonl"],
                "t.jsonl:2",
            ),
            "t.jsonl",
            "{\"timestamp\": 0, \"input_length\": 600}\n{\"timestamp\": 5, \"input_length\": 10, \"hash_ids\": [1, 2]}\n",
        ),
        with_file(
            case(
                "traces are checked up front",
                &["load", "--url", u, "--trace", "t.jsonl", "--speed", "0x"],
                "\"0x\"",
            ),
            "t.jsonl",
            "{\"input_length\": 10}\n",
        ),
        with_file(
            case(
                "traces are checked up front",
                &[
                    "load",
                    "--url",
                    u,
                    "--trace",
                    "t.jsonl",
                    "--dispatch",
                    "sideways",
                ],
                "sideways",
            ),
            "t.jsonl",
            "{\"input_length\": 10}\n",
        ),
        case(
            "traces are checked up front",
            &["load", "--url", u, "--dispatch", "think-time"],
            "--trace",
        ),
        load(
            &["--shape", "multi-turn:0"],
            "multi-turn:0",
            "shapes are checked up front",
        ),
        // Plans: bounded, and an empty plan is refused.
        with_file(
            case(
                "plans are checked",
                &["load", "--url", u, "--plan", "p.yaml"],
                "stages",
            ),
            "p.yaml",
            "stages: []\n",
        ),
        with_file(
            case(
                "YAML aliases are bounded",
                &["load", "--url", u, "--plan", "p.yaml"],
                "p.yaml",
            ),
            "p.yaml",
            alias_bomb,
        ),
        with_file(
            case(
                "plans are checked",
                &["load", "--url", u, "--plan", "p.yaml"],
                "rates",
            ),
            "p.yaml",
            "rates: []\n",
        ),
        // `run` checks every flag before the first request.
        case(
            "run checks every flag first",
            &["run", "--namespace", "BAD"],
            "BAD",
        ),
        case(
            "run checks every flag first",
            &["run", "--min-replicas", "0"],
            "min-replicas",
        ),
        case(
            "run checks every flag first",
            &["run", "--min-replicas", "3", "--max-replicas", "2"],
            "max-replicas",
        ),
        case(
            "run checks every flag first",
            &["run", "--service-port", "x"],
            "service-port",
        ),
        case(
            "run checks every flag first",
            &["run", "--slo-p95-e2e", "0s"],
            "slo-p95-e2e",
        ),
        case(
            "run checks every flag first",
            &["run", "--prometheus-url", "ftp://x"],
            "ftp://x",
        ),
        case(
            "run checks every flag first",
            &["run", "--peak-rps", "-1"],
            "-1",
        ),
        case(
            "run checks every flag first",
            &["run", "--step", "0s", "--speedup", "10"],
            "duration",
        ),
        case(
            "run checks every flag first",
            &["run", "--wait-ready", "1s"],
            "--url",
        ),
        // The simulator's own flags.
        case(
            "consecutive ports stay in range",
            &["sim", "--replicas", "2", "--listen", "127.0.0.1:65535"],
            "65536",
        ),
        case(
            "a model is named",
            &["sim", "--served-model-name", ""],
            "served-model-name",
        ),
        // The external scaler.
        case(
            "addresses are addresses",
            &["scaler", "--listen", "localhost"],
            "--listen \"localhost\" is not an address",
        ),
        case(
            "TLS needs both files",
            &["scaler", "--tls-cert", "cert.pem"],
            "--tls-key",
        ),
        with_file(
            case(
                "a key that is not a key is named",
                &[
                    "scaler",
                    "--tls-cert",
                    "c.pem",
                    "--tls-key",
                    "c.pem",
                    "--listen",
                    "127.0.0.1:0",
                    "--http-listen",
                    "127.0.0.1:0",
                ],
                "c.pem: ",
            ),
            "c.pem",
            "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",
        ),
        case(
            "the Kubernetes API is a URL",
            &[
                "scaler",
                "--kube-api",
                "kubernetes.default.svc",
                "--listen",
                "127.0.0.1:0",
                "--http-listen",
                "127.0.0.1:0",
            ],
            "--kube-api \"kubernetes.default.svc\"",
        ),
        // Shapes and request traces in the rehearsal, the tuner and predict.
        with_file(
            case(
                "shapes are checked up front",
                &[
                    "rehearse",
                    "--thresholds",
                    "t.json",
                    "--compare-signals",
                    "--pattern",
                    "hold:1@1m",
                    "--shape",
                    "multi-turn:0",
                ],
                "multi-turn:0",
            ),
            "t.json",
            t.clone(),
        ),
        case(
            "shapes are checked up front",
            &[
                "predict",
                "--gpu",
                "L40S",
                "--model",
                "Llama-3.1-8B",
                "--shape",
                "multi-turn:1000,100000",
                "--rps",
                "1",
            ],
            "100000000 requests a round",
        ),
        with_file(
            case(
                "shapes are checked up front",
                &["tune", "--thresholds", "t.json", "--shape", "zigzag:3"],
                "zigzag:3",
            ),
            "t.json",
            t.clone(),
        ),
        with_file(
            case(
                "a trace the thresholds name is read or named",
                &[
                    "rehearse",
                    "--thresholds",
                    "t.json",
                    "--compare-signals",
                    "--pattern",
                    "hold:1@1m",
                ],
                "gone.jsonl",
            ),
            "t.json",
            {
                let mut v: serde_json::Value = serde_json::from_str(&t).unwrap();
                v["workload"]["prompts"] = serde_json::json!({
                    "kind": "trace", "path": "gone.jsonl", "dispatch": "timestamp", "speeds": [1.0]
                });
                serde_json::to_vec(&v).unwrap()
            },
        ),
        case(
            "traces are checked up front",
            &[
                "predict",
                "--gpu",
                "L40S",
                "--model",
                "Llama-3.1-8B",
                "--trace",
                "missing.jsonl",
            ],
            "missing.jsonl",
        ),
        // predict.
        case(
            "GPUs and models are named",
            &[
                "predict",
                "--gpu",
                "Z9000",
                "--model",
                "Llama-3.1-8B",
                "--rps",
                "1",
            ],
            "--gpu \"Z9000\"",
        ),
        case(
            "GPUs and models are named",
            &[
                "predict",
                "--gpu",
                "L40S",
                "--model",
                "acme/Secret-13B",
                "--rps",
                "1",
            ],
            "--model-config",
        ),
        case(
            "numbers are in range",
            &[
                "predict",
                "--gpu",
                "L40S",
                "--model",
                "Llama-3.1-8B",
                "--concurrency",
                "0",
            ],
            "--concurrency 0",
        ),
        case(
            "numbers are in range",
            &[
                "predict",
                "--gpu",
                "L40S",
                "--model",
                "Llama-3.1-8B",
                "--rps",
                "1",
                "--dtype",
                "int3",
            ],
            "--dtype \"int3\"",
        ),
        case(
            "numbers are in range",
            &[
                "predict",
                "--gpu",
                "L40S",
                "--model",
                "Llama-3.1-8B",
                "--rps",
                "1",
                "--shared-prefix",
                "10",
            ],
            "--shared-prefix \"10\"",
        ),
        case(
            "a model that does not fit says what to change",
            &[
                "predict",
                "--gpu",
                "L40S",
                "--model",
                "Llama-3.1-405B",
                "--rps",
                "1",
            ],
            "does not fit",
        ),
        with_file(
            case(
                "files are read strictly",
                &[
                    "predict",
                    "--gpu",
                    "L40S",
                    "--model-config",
                    "config.json",
                    "--rps",
                    "1",
                ],
                "hidden_size",
            ),
            "config.json",
            "{\"num_hidden_layers\": 32, \"num_attention_heads\": 32, \"vocab_size\": 32000}",
        ),
        // fidelity.
        with_file(
            case(
                "files are read strictly",
                &["fidelity", "cases.csv"],
                "\"load_type\"",
            ),
            "cases.csv",
            "id,source,engine,engine_version,gpu,num_gpus,tp,model,weights_dtype,kv_dtype,input_len,output_len,load_value,duration_s,max_num_seqs,max_num_batched_tokens,max_model_len,gpu_memory_utilization,enforce_eager,metric,value,unit,confidence,notes\n",
        ),
        with_file(
            case(
                "files are read strictly",
                &["fidelity", "cases.csv"],
                "line 2",
            ),
            "cases.csv",
            "id,source\n\"a,b\n",
        ),
        // query.
        case(
            "queries are checked first",
            &["query", "sum(", "--target", u],
            "sum(",
        ),
        case(
            "queries are checked first",
            &["query", "x", "--target", u, "--var", "novalue"],
            "novalue",
        ),
        with_file(
            case(
                "queries are checked first",
                &["query", "--file", "f.yaml", "--target", u],
                "f.yaml",
            ),
            "f.yaml",
            "kind: ConfigMap\ndata: {a: b}\n",
        ),
        with_file(
            case(
                "queries are checked first",
                &[
                    "query",
                    "--file",
                    "f.json",
                    "--target",
                    u,
                    "--var",
                    "__rate_interval=1m",
                ],
                "--var",
            ),
            "f.json",
            "{\"panels\": [{\"targets\": [{\"expr\": \"rate(x{a=\\\"$unknown\\\"}[5m])\"}]}]}",
        ),
    ];
    let failures: Vec<String> = cases
        .iter()
        .enumerate()
        .filter_map(|(i, c)| check(c, i))
        .collect();
    eprintln!(
        "{} hostile inputs, {} handled cleanly",
        cases.len(),
        cases.len() - failures.len()
    );
    assert!(
        failures.is_empty(),
        "{} of {} inputs were not refused cleanly:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

#[test]
fn a_password_in_a_url_is_never_printed() {
    let o = common::inferscale()
        .args(["scrape", "http://user:hunter2@127.0.0.1:9/"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let all = format!("{}{}", common::stdout(&o), common::stderr(&o));
    assert!(!all.contains("hunter2"), "{all}");
}
