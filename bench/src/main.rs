//! Side-by-side benchmarks of inferscale against its peers, in one run on one machine.
//!
//! `cargo run --release -p inferscale-bench -- parse [--python PATH] [--seconds S]` parses a
//! realistic node's exposition (vLLM 0.33 plus an 8-GPU DCGM exporter) and a synthetic one of
//! more than 100,000 series with `inferscale-promtext`, the `prometheus-parse` crate and
//! Python's `prometheus_client`, and prints throughput and ratios. `bench/parse.sh` wraps it
//! with a Python virtual environment. Results also go to `target/bench/parse.json`.
//!
//! `sim-capacity` drives the simulator's `instant` profile with thousands of concurrent
//! streams (`bench/sim-capacity.sh`).
//!
//! `scaler-latency` and `scaler-freshness` measure `inferscale scaler` over 200 simulated pods,
//! beside a real Prometheus (`bench/scaler.sh`).
//!
//! `loadgen` runs `inferscale load`, k6 and GuideLLM at rising constant rates against the
//! simulator and judges each by the arrival times in the simulator's access log
//! (`bench/loadgen.sh`).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::json;

mod guidellm;
mod loadgen;
mod scaler;
mod sim_capacity;

/// One measurement.
struct Measure {
    tool: String,
    bytes: usize,
    best: Duration,
    runs: usize,
    samples: usize,
}

impl Measure {
    fn mb_per_s(&self) -> f64 {
        self.bytes as f64 / 1e6 / self.best.as_secs_f64()
    }
}

/// Runs `f` until `min` has passed (and at least 3 times); keeps the best time.
fn time_best(min: Duration, mut f: impl FnMut() -> usize) -> (Duration, usize, usize) {
    let start = Instant::now();
    let mut best = Duration::MAX;
    let mut runs = 0;
    let mut samples = 0;
    while runs < 3 || start.elapsed() < min {
        let t = Instant::now();
        samples = f();
        best = best.min(t.elapsed());
        runs += 1;
    }
    (best, runs, samples)
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// vLLM 0.33's own exposition followed by an 8-GPU DCGM exporter's: what a node-level scrape
/// of one GPU server returns.
fn node_exposition() -> String {
    let vllm = std::fs::read_to_string(root().join("testdata/vllm/metrics_single_engine.prom"))
        .unwrap_or_default();
    let dcgm =
        std::fs::read_to_string(root().join("testdata/dcgm/node-8gpu.prom")).unwrap_or_default();
    // prometheus-parse's name regex (`\w+`) rejects colons and silently skips such lines, which
    // would flatter it; so every parser reads the names as prometheus_client writes them with
    // `escaping=underscores` (`vllm_num_requests_waiting`).
    format!("{vllm}{dcgm}").replace("vllm:", "vllm_")
}

/// A large exposition in the shape of a big fleet's federation endpoint: per-pod vLLM-style
/// gauges, counters and latency histograms with realistic label sets.
fn large_exposition(target_series: usize) -> (String, usize) {
    let mut out = String::with_capacity(target_series * 150);
    let mut series = 0;
    let bounds = [
        "0.3", "0.5", "0.8", "1.0", "1.5", "2.0", "2.5", "5.0", "10.0", "15.0", "20.0", "30.0",
        "40.0", "50.0", "60.0", "120.0", "+Inf",
    ];
    let mut fam = 0;
    while series < target_series {
        let kind = fam % 3;
        let name = format!("app_metric_{fam}_seconds");
        match kind {
            0 => {
                let _ = writeln!(
                    out,
                    "# HELP {name} Gauge number {fam}.\n# TYPE {name} gauge"
                );
            }
            1 => {
                let _ = writeln!(
                    out,
                    "# HELP {name}_total Counter number {fam}.\n# TYPE {name}_total counter"
                );
            }
            _ => {
                let _ = writeln!(
                    out,
                    "# HELP {name} Histogram number {fam}.\n# TYPE {name} histogram"
                );
            }
        }
        for pod in 0..40 {
            let labels = format!(
                "engine=\"0\",model_name=\"meta-llama/Llama-3.1-8B-Instruct\",namespace=\"inference\",pod=\"vllm-{pod:03}-7f9c\""
            );
            match kind {
                0 => {
                    let _ = writeln!(out, "{name}{{{labels}}} {}.5", pod * 3 + fam);
                    series += 1;
                }
                1 => {
                    let _ = writeln!(out, "{name}_total{{{labels}}} {}", 1_000_000 + pod * fam);
                    series += 1;
                }
                _ => {
                    for (i, le) in bounds.iter().enumerate() {
                        let _ = writeln!(out, "{name}_bucket{{{labels},le=\"{le}\"}} {}.0", i * 7);
                    }
                    let _ = writeln!(out, "{name}_count{{{labels}}} 112.0");
                    let _ = writeln!(out, "{name}_sum{{{labels}}} 250.125");
                    series += bounds.len() + 2;
                }
            }
        }
        fam += 1;
    }
    (out, series)
}

fn bench_promtext(text: &str, min: Duration) -> Measure {
    let (best, runs, samples) = time_best(min, || {
        inferscale_promtext::parse(text.as_bytes())
            .map(|e| e.sample_count())
            .unwrap_or(0)
    });
    Measure {
        tool: "inferscale-promtext".into(),
        bytes: text.len(),
        best,
        runs,
        samples,
    }
}

fn bench_prometheus_parse(text: &str, min: Duration) -> Measure {
    let (best, runs, samples) = time_best(min, || {
        let lines = text.lines().map(|l| Ok(l.to_owned()));
        // Histograms and summaries come back as one sample per series; count the values.
        prometheus_parse::Scrape::parse(lines)
            .map(|s| {
                s.samples
                    .iter()
                    .map(|x| match &x.value {
                        prometheus_parse::Value::Histogram(h) => h.len(),
                        prometheus_parse::Value::Summary(q) => q.len(),
                        _ => 1,
                    })
                    .sum()
            })
            .unwrap_or(0)
    });
    Measure {
        tool: "prometheus-parse 0.2 (Rust)".into(),
        bytes: text.len(),
        best,
        runs,
        samples,
    }
}

fn bench_python(python: &str, file: &Path, min: Duration) -> Result<Measure, String> {
    let script = root().join("bench/parse_prometheus_client.py");
    let out = Command::new(python)
        .arg(&script)
        .arg(file)
        .arg(min.as_secs_f64().to_string())
        .output()
        .map_err(|e| format!("cannot run {python}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{python} failed (is prometheus_client installed? bench/parse.sh makes a venv): {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let v: serde_json::Value =
        serde_json::from_slice(&out.stdout).map_err(|e| format!("bad output from Python: {e}"))?;
    Ok(Measure {
        tool: v["tool"].as_str().unwrap_or("prometheus_client").to_owned(),
        bytes: v["bytes"].as_u64().unwrap_or(0) as usize,
        best: Duration::from_secs_f64(v["seconds"].as_f64().unwrap_or(f64::NAN)),
        runs: v["runs"].as_u64().unwrap_or(0) as usize,
        samples: v["samples"].as_u64().unwrap_or(0) as usize,
    })
}

fn parse_bench(args: &[String]) -> Result<(), String> {
    let mut python = "python3".to_owned();
    let mut seconds = 3.0;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--python" => python = it.next().ok_or("--python needs a path")?.clone(),
            "--seconds" => {
                seconds = it
                    .next()
                    .and_then(|s| s.parse().ok())
                    .ok_or("--seconds needs a number")?
            }
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    let min = Duration::from_secs_f64(seconds);
    let dir = root().join("target/bench");
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let node = node_exposition();
    let (large, large_series) = large_exposition(100_000);
    let inputs = [
        ("node (vLLM 0.33 + 8-GPU DCGM)", "node.prom", node),
        ("synthetic (100k+ series)", "large.prom", large),
    ];
    let mut report = String::new();
    let mut results = Vec::new();
    let _ = writeln!(
        report,
        "{:<32} {:<30} {:>10} {:>9} {:>10} {:>8} {:>11}",
        "input", "parser", "bytes", "samples", "best ms", "MB/s", "promtext ×"
    );
    for (label, file, text) in &inputs {
        let path = dir.join(file);
        std::fs::write(&path, text).map_err(|e| e.to_string())?;
        let ours = bench_promtext(text, min);
        let peers = [
            Ok(bench_prometheus_parse(text, min)),
            bench_python(&python, &path, min),
        ];
        let ours_mbs = ours.mb_per_s();
        let mut rows = vec![ours];
        for p in peers {
            match p {
                Ok(m) => rows.push(m),
                Err(e) => eprintln!("warning: {e}"),
            }
        }
        for m in &rows {
            let ratio = ours_mbs / m.mb_per_s();
            let _ = writeln!(
                report,
                "{:<32} {:<30} {:>10} {:>9} {:>10.3} {:>8.1} {:>11.1}",
                label,
                m.tool,
                m.bytes,
                m.samples,
                m.best.as_secs_f64() * 1e3,
                m.mb_per_s(),
                ratio
            );
            results.push(json!({
                "input": label, "parser": m.tool, "bytes": m.bytes, "samples": m.samples,
                "best_seconds": m.best.as_secs_f64(), "runs": m.runs, "mb_per_s": m.mb_per_s(),
                "promtext_speedup": ratio,
            }));
        }
    }
    let _ = writeln!(
        report,
        "(synthetic input: {large_series} series; best of ≥3 runs and ≥{seconds}s per cell)"
    );
    print!("{report}");
    let json = json!({ "version": 1, "results": results });
    std::fs::write(
        dir.join("parse.json"),
        serde_json::to_string_pretty(&json).unwrap_or_default(),
    )
    .map_err(|e| e.to_string())?;
    Ok(())
}

fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("parse") => parse_bench(&args[1..]),
        Some("sim-capacity") => sim_capacity::run(&args[1..]),
        Some("loadgen") => loadgen::run(&args[1..]),
        Some("scaler-latency") => scaler::latency(&args[1..]),
        Some("scaler-freshness") => scaler::freshness(&args[1..]),
        _ => Err("usage: inferscale-bench parse [--python PATH] [--seconds S]\n       inferscale-bench sim-capacity --addr HOST:PORT [--streams N] [--tokens T] [--pid PID]".to_owned()),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::ExitCode::from(2)
        }
    }
}
