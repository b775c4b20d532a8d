//! Load generators side by side: `inferscale load`, k6 (`constant-arrival-rate`) and GuideLLM
//! (`constant` profile) against the simulator's `instant` profile, with the simulator pinned to
//! CPU 0 and the tool to CPU 1.
//!
//! Every tool is judged by the same, tool-independent measure: the simulator's access log holds
//! the wall-clock arrival time of every request, so the schedule lag of the i-th arrival is
//! `a_i - (t0 + i/R)`, with `t0` a low (1st) percentile of `a_i - i/R` (the tool's own start-up
//! and a constant offset do not count against it; earlier than the anchor counts as 0). A dropped request shifts the later arrivals onto earlier slots, which
//! only makes the lag look worse, so the measure is conservative. A rate is *held* when at most
//! 0.1 % of the scheduled requests failed to arrive or failed, and the lag's p99 is under 1 ms.
//! Each tool's own numbers (latency percentiles, drops, its lag where it reports one) are kept
//! beside; CPU time is the tool's process tree's user + system time from `/usr/bin/time`.

use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::sim_capacity::cpu_seconds;

/// The seeds' prompt (about 35 tokens), sent by every tool.
const PROMPT: &str = "Starting with the word \"cloud\", write a brief technical explanation about \
cloud computing concepts. Cover containerization, orchestration, and scalability in about 80 words.";

/// Output tokens per request in the rate ladder.
const MAX_TOKENS: u32 = 16;

/// A tool under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tool {
    Inferscale,
    K6,
    Guidellm,
}

impl Tool {
    fn name(self) -> &'static str {
        match self {
            Tool::Inferscale => "inferscale",
            Tool::K6 => "k6",
            Tool::Guidellm => "guidellm",
        }
    }
}

struct Opts {
    inferscale: PathBuf,
    k6: Option<PathBuf>,
    guidellm: Option<PathBuf>,
    rates: Vec<f64>,
    seconds: f64,
    latency_rate: f64,
    stream_rates: Vec<f64>,
    stream_tokens: u32,
    /// Extra runs at the latency rate (a 10 s run can catch a stall of the machine).
    repeat: usize,
    /// Run the streaming part.
    stream: bool,
    dir: PathBuf,
}

/// What one tool run produced.
#[derive(Default)]
pub(crate) struct Outcome {
    /// The tool's own count of successful requests.
    pub(crate) ok: u64,
    /// Failed (any kind) by the tool's count.
    pub(crate) failed: u64,
    /// Dropped before sending, by the tool's count (None: it has no such notion).
    pub(crate) dropped: Option<u64>,
    /// The tool's own schedule-lag p99, where it reports one.
    pub(crate) own_lag_p99_s: Option<f64>,
    pub(crate) p50_s: Option<f64>,
    pub(crate) p99_s: Option<f64>,
    /// Streaming runs: output tokens and token-bearing events timed.
    pub(crate) output_tokens: Option<u64>,
    pub(crate) itl_samples: Option<u64>,
    pub(crate) extra: Value,
}

/// The simulator, pinned to CPU 0, with an access log.
struct Server {
    child: Child,
    addr: SocketAddr,
    log: PathBuf,
}

impl Server {
    fn start(inferscale: &Path, log: &Path) -> Result<Server, String> {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| e.to_string())?
            .port();
        let addr: SocketAddr = ([127, 0, 0, 1], port).into();
        let child = Command::new("taskset")
            .args(["-c", "0"])
            .arg(inferscale)
            .args(["sim", "--profile", "instant", "--served-model-name", "m"])
            .arg("--listen")
            .arg(addr.to_string())
            .arg("--access-log")
            .arg(log)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot start the simulator: {e}"))?;
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if http_status(addr, "/health") == Some(200) {
                return Ok(Server {
                    child,
                    addr,
                    log: log.to_owned(),
                });
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Err("the simulator did not become healthy within 20 s".into())
    }

    /// Stops it (SIGTERM, so the access log is flushed) and returns its CPU seconds.
    fn stop(mut self) -> f64 {
        let pid = self.child.id();
        // taskset execs the simulator, so the pid is the simulator's.
        let cpu = cpu_seconds(pid);
        let _ = Command::new("kill").arg(pid.to_string()).status();
        let _ = self.child.wait();
        cpu
    }
}

/// GET `path`, returning the status code.
fn http_status(addr: SocketAddr, path: &str) -> Option<u16> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_millis(500)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).ok()?;
    let head = std::str::from_utf8(buf.get(..12)?).ok()?;
    head.get(9..12)?.parse().ok()
}

/// The arrivals of `POST /v1/completions` in an access log, judged against a constant rate.
#[derive(Debug, Clone, Copy)]
struct Arrivals {
    count: u64,
    non_200: u64,
    lag_p50_s: f64,
    lag_p99_s: f64,
    lag_max_s: f64,
    span_s: f64,
}

fn arrivals(log: &Path, rate: f64) -> Result<Arrivals, String> {
    let text = std::fs::read_to_string(log).map_err(|e| format!("{}: {e}", log.display()))?;
    let mut t = Vec::new();
    let mut non_200 = 0;
    for line in text.lines() {
        let v: Value = serde_json::from_str(line).map_err(|e| format!("access log: {e}"))?;
        if v["method"] != "POST" || v["path"] != "/v1/completions" {
            continue;
        }
        t.push(v["time"].as_f64().ok_or("access log: no time")?);
        if v["status"] != 200 {
            non_200 += 1;
        }
    }
    t.sort_by(f64::total_cmp);
    // The anchor: the 1st percentile of `a_i - i/R`, so that a constant offset (a tool that is
    // always 0.2 ms "late" keeps its rate perfectly) and a few stray early arrivals (k6 sends
    // one iteration more than rate x duration, at the very end) do not count as lag.
    let mut offsets: Vec<f64> = t
        .iter()
        .enumerate()
        .map(|(i, a)| a - i as f64 / rate)
        .collect();
    offsets.sort_by(f64::total_cmp);
    let t0 = offsets.get(offsets.len() / 100).copied().unwrap_or(0.0);
    let mut lag: Vec<f64> = t
        .iter()
        .enumerate()
        .map(|(i, a)| (a - t0 - i as f64 / rate).max(0.0))
        .collect();
    lag.sort_by(f64::total_cmp);
    let q = |p: f64| -> f64 {
        if lag.is_empty() {
            return f64::NAN;
        }
        let i = ((p * lag.len() as f64).ceil() as usize).clamp(1, lag.len()) - 1;
        lag[i]
    };
    Ok(Arrivals {
        count: t.len() as u64,
        non_200,
        lag_p50_s: q(0.50),
        lag_p99_s: q(0.99),
        lag_max_s: q(1.0),
        span_s: t.last().zip(t.first()).map_or(0.0, |(l, f)| l - f),
    })
}

/// `/usr/bin/time -f '%U %S %e %M'` output: CPU seconds (user + system), wall, peak RSS KiB.
fn read_time(path: &Path) -> (f64, f64, u64) {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let last = text.lines().last().unwrap_or("");
    let f: Vec<f64> = last
        .split_whitespace()
        .filter_map(|x| x.parse().ok())
        .collect();
    match f.as_slice() {
        [u, s, e, m] => (u + s, *e, *m as u64),
        _ => (f64::NAN, f64::NAN, 0),
    }
}

fn tool_command(
    tool: Tool,
    o: &Opts,
    addr: SocketAddr,
    rate: f64,
    stream: Option<u32>,
    dir: &Path,
) -> Result<Command, String> {
    let secs = o.seconds;
    let mut c = Command::new("taskset");
    c.args(["-c", "1", "/usr/bin/time", "-f", "%U %S %e %M", "-o"])
        .arg(dir.join("time.txt"));
    match tool {
        Tool::Inferscale => {
            c.arg(&o.inferscale).args(["load", "--url"]);
            c.arg(format!("http://{addr}"));
            c.args(["--rates", &format!("{rate}"), "--step", &format!("{secs}s")]);
            c.args(["--rest", "0s", "--no-metrics", "--max-in-flight", "1000"]);
            c.args(["--prompt", PROMPT, "--model", "m", "--json"]);
            match stream {
                None => {
                    c.args(["--no-stream", "--max-tokens", &MAX_TOKENS.to_string()]);
                }
                Some(n) => {
                    c.args(["--stream", "--ignore-eos", "--max-tokens", &n.to_string()]);
                }
            }
            c.arg("--out").arg(dir.join("run.json"));
        }
        Tool::K6 => {
            let k6 = o.k6.as_ref().ok_or("k6 is not installed")?;
            let script = crate::root().join("bench/k6-constant.js");
            c.arg(k6)
                .args(["run", "--quiet", "--no-color", "--summary-export"])
                .arg(dir.join("k6.json"));
            for (k, v) in [
                ("BASE_URL", format!("http://{addr}")),
                ("RATE", format!("{rate}")),
                ("DURATION", format!("{secs}s")),
                // k6's advice: pre-allocate enough VUs for the rate times the latency.
                ("VUS", format!("{}", (rate / 50.0).ceil().max(20.0))),
                ("MAX_VUS", "1000".into()),
                ("MODEL", "m".into()),
                ("PROMPT", PROMPT.into()),
                ("MAX_TOKENS", MAX_TOKENS.to_string()),
            ] {
                c.arg("-e").arg(format!("{k}={v}"));
            }
            c.arg(script).env("K6_NO_USAGE_REPORT", "true");
        }
        Tool::Guidellm => {
            let g = o.guidellm.as_ref().ok_or("GuideLLM is not installed")?;
            c.arg(g);
            crate::guidellm::args(&mut c, addr, rate, secs, PROMPT, stream, MAX_TOKENS, dir)?;
        }
    }
    c.stdout(Stdio::from(
        std::fs::File::create(dir.join("stdout.txt")).map_err(|e| e.to_string())?,
    ))
    .stderr(Stdio::from(
        std::fs::File::create(dir.join("stderr.txt")).map_err(|e| e.to_string())?,
    ));
    Ok(c)
}

fn read_outcome(tool: Tool, dir: &Path) -> Result<Outcome, String> {
    let load = |p: &Path| -> Result<Value, String> {
        let text = std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()))?;
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", p.display()))
    };
    match tool {
        Tool::Inferscale => {
            let v = load(&dir.join("run.json"))?;
            let s = &v["steps"][0];
            Ok(Outcome {
                ok: s["requests"]["ok"].as_u64().unwrap_or(0),
                failed: s["requests"]["failed"]["total"].as_u64().unwrap_or(0),
                dropped: s["requests"]["dropped"].as_u64(),
                own_lag_p99_s: s["client"]["lag_p99_s"].as_f64(),
                p50_s: s["latency_s"]["e2e"]["p50"].as_f64(),
                p99_s: s["latency_s"]["e2e"]["p99"].as_f64(),
                output_tokens: s["tokens"]["output"].as_u64(),
                itl_samples: s["latency_s"]["itl"]["count"].as_u64(),
                extra: json!({
                    "ttft_p99_s": s["latency_s"]["ttft"]["p99"],
                    "lag_max_s": s["client"]["lag_max_s"],
                    "stalls": s["client"]["stalls"],
                }),
            })
        }
        Tool::K6 => {
            let v = load(&dir.join("k6.json"))?;
            let m = &v["metrics"];
            let reqs = m["http_reqs"]["count"].as_u64().unwrap_or(0);
            // http_req_failed is a rate; its `passes` counts the failed ones.
            let failed = m["http_req_failed"]["passes"].as_u64().unwrap_or(0);
            Ok(Outcome {
                ok: reqs.saturating_sub(failed),
                failed,
                dropped: Some(m["dropped_iterations"]["count"].as_u64().unwrap_or(0)),
                own_lag_p99_s: None,
                p50_s: m["http_req_duration"]["med"].as_f64().map(|x| x / 1e3),
                p99_s: m["http_req_duration"]["p(99)"].as_f64().map(|x| x / 1e3),
                output_tokens: None,
                itl_samples: None,
                extra: json!({}),
            })
        }
        Tool::Guidellm => crate::guidellm::read(dir),
    }
}

/// One run of one tool at one rate, on a fresh simulator.
fn one(o: &Opts, tool: Tool, rate: f64, stream: Option<u32>) -> Result<Value, String> {
    let mode = if stream.is_some() { "stream" } else { "plain" };
    let dir = o.dir.join(format!("{}-{mode}-{rate}", tool.name()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let server = Server::start(&o.inferscale, &dir.join("access.jsonl"))?;
    let status = tool_command(tool, o, server.addr, rate, stream, &dir)?
        .status()
        .map_err(|e| format!("cannot run {}: {e}", tool.name()));
    std::thread::sleep(Duration::from_millis(200));
    let log = server.log.clone();
    let sim_cpu = server.stop();
    let status = status?;
    let (cpu, wall, rss_kib) = read_time(&dir.join("time.txt"));
    let a = arrivals(&log, rate)?;
    let out = match read_outcome(tool, &dir) {
        Ok(x) => x,
        Err(e) => {
            return Err(format!(
                "{} at {rate} req/s (exit {status}): {e}",
                tool.name()
            ));
        }
    };
    let scheduled = (rate * o.seconds).round();
    let missing = (scheduled - a.count as f64).max(0.0);
    let lost = missing + a.non_200 as f64 + out.failed as f64;
    let lost_fraction = lost / scheduled;
    let held = lost_fraction < 0.001 && a.lag_p99_s < 1e-3;
    // The looser bar inferscale itself uses to call a step client-limited (lag p99 > 5 ms).
    let held_5ms = lost_fraction < 0.001 && a.lag_p99_s < 5e-3;
    // Throughput alone: the requests all arrived (however late).
    let delivered = lost_fraction < 0.001;
    // Streaming: every token-bearing event timed (one ITL sample per token after the first).
    let per_token_timing = match (out.output_tokens, out.itl_samples) {
        (Some(t), Some(i)) => Some(i + out.ok == t),
        _ => None,
    };
    let tokens_per_s = out.output_tokens.map(|t| t as f64 / o.seconds);
    Ok(json!({
        "tool": tool.name(),
        "mode": mode,
        "rate": rate,
        "seconds": o.seconds,
        "scheduled": scheduled,
        "arrived": a.count,
        "arrived_per_s": a.count as f64 / a.span_s.max(1e-9),
        "lost_fraction": lost_fraction,
        "server_lag_p50_s": a.lag_p50_s,
        "server_lag_p99_s": a.lag_p99_s,
        "server_lag_max_s": a.lag_max_s,
        "held": held,
        "held_5ms": held_5ms,
        "delivered": delivered,
        "per_token_timing_complete": per_token_timing,
        "tool_ok": out.ok,
        "tool_failed": out.failed,
        "tool_dropped": out.dropped,
        "tool_lag_p99_s": out.own_lag_p99_s,
        "latency_p50_s": out.p50_s,
        "latency_p99_s": out.p99_s,
        "output_tokens": out.output_tokens,
        "output_tokens_per_s": tokens_per_s,
        "itl_samples": out.itl_samples,
        "tool_cpu_s": cpu,
        "tool_cpu_s_per_1000": cpu / (out.ok.max(1) as f64) * 1000.0,
        "tool_wall_s": wall,
        "tool_peak_rss_mib": rss_kib as f64 / 1024.0,
        "sim_cpu_fraction": sim_cpu / o.seconds,
        "extra": out.extra,
        "exit": status.code(),
    }))
}

/// What inferscale's stall probe saw, for a row (empty for the other tools).
fn stalls(v: &Value) -> String {
    let s = &v["extra"]["stalls"];
    match s["count"].as_u64() {
        Some(n) => format!(
            "  stalls {n} (longest {:.1} ms, steal {:.2} s), own lag max {} ms",
            s["longest_s"].as_f64().unwrap_or(0.0) * 1e3,
            s["steal_s"].as_f64().unwrap_or(0.0),
            ms(&v["extra"]["lag_max_s"])
        ),
        None => String::new(),
    }
}

fn ms(v: &Value) -> String {
    v.as_f64().map_or("-".into(), |x| format!("{:.3}", x * 1e3))
}

fn row(v: &Value) -> String {
    format!(
        "{:<10} {:>7} {:>9.0} {:>8.3}% {:>8} {:>8} {:>8} {:>8} {:>8} {:>7.2} {:>8.3} {:>6.0}% {:>5}",
        v["tool"].as_str().unwrap_or(""),
        v["rate"],
        v["arrived_per_s"].as_f64().unwrap_or(0.0),
        v["lost_fraction"].as_f64().unwrap_or(0.0) * 100.0,
        ms(&v["server_lag_p50_s"]),
        ms(&v["server_lag_p99_s"]),
        ms(&v["tool_lag_p99_s"]),
        ms(&v["latency_p50_s"]),
        ms(&v["latency_p99_s"]),
        v["tool_cpu_s"].as_f64().unwrap_or(f64::NAN),
        v["tool_cpu_s_per_1000"].as_f64().unwrap_or(f64::NAN),
        v["sim_cpu_fraction"].as_f64().unwrap_or(0.0) * 100.0,
        if v["held"] == true { "yes" } else { "no" },
    )
}

const HEADER: &str = "tool          rate  arrived/s    lost  lag50ms  lag99ms  own99ms  lat50ms  lat99ms   cpu_s cpu/1000k   sim%  held";

fn parse_list(s: &str) -> Result<Vec<f64>, String> {
    s.split(',')
        .map(|x| x.trim().parse::<f64>().map_err(|e| format!("{x:?}: {e}")))
        .collect()
}

/// `loadgen --inferscale PATH [--k6 PATH] [--guidellm PATH] [--rates R,..] [--seconds S]
/// [--latency-rate R] [--stream-rates R,..] [--stream-tokens N] [--tools a,b]`
pub(crate) fn run(args: &[String]) -> Result<(), String> {
    let mut o = Opts {
        inferscale: crate::root().join("target/release/inferscale"),
        k6: None,
        guidellm: None,
        rates: parse_list(
            "100,250,500,1000,2000,3000,4000,5000,7500,10000,12500,15000,17500,20000,25000,30000,35000,40000",
        )?,
        seconds: 10.0,
        latency_rate: 5000.0,
        stream_rates: parse_list("25,50,100,250,500,750,1000,1250,1500")?,
        stream_tokens: 1000,
        repeat: 2,
        stream: true,
        dir: crate::root().join("target/bench/loadgen"),
    };
    let mut tools = vec![Tool::Inferscale, Tool::K6, Tool::Guidellm];
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut val = || it.next().ok_or(format!("{a} needs a value"));
        match a.as_str() {
            "--inferscale" => o.inferscale = PathBuf::from(val()?),
            "--k6" => o.k6 = Some(PathBuf::from(val()?)),
            "--guidellm" => o.guidellm = Some(PathBuf::from(val()?)),
            "--rates" => o.rates = parse_list(val()?)?,
            "--seconds" => o.seconds = val()?.parse().map_err(|e| format!("--seconds: {e}"))?,
            "--latency-rate" => {
                o.latency_rate = val()?.parse().map_err(|e| format!("--latency-rate: {e}"))?
            }
            "--stream-rates" => o.stream_rates = parse_list(val()?)?,
            "--repeat" => o.repeat = val()?.parse().map_err(|e| format!("--repeat: {e}"))?,
            "--no-stream" => o.stream = false,
            "--stream-tokens" => {
                o.stream_tokens = val()?
                    .parse()
                    .map_err(|e| format!("--stream-tokens: {e}"))?
            }
            "--tools" => {
                tools = val()?
                    .split(',')
                    .map(|t| match t {
                        "inferscale" => Ok(Tool::Inferscale),
                        "k6" => Ok(Tool::K6),
                        "guidellm" => Ok(Tool::Guidellm),
                        other => Err(format!("unknown tool {other:?}")),
                    })
                    .collect::<Result<_, _>>()?
            }
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    std::fs::create_dir_all(&o.dir).map_err(|e| e.to_string())?;
    let mut results = Vec::new();
    let mut report = String::new();
    let mut max_held = serde_json::Map::new();
    let mut skipped = serde_json::Map::new();
    println!("{HEADER}");
    let _ = writeln!(report, "{HEADER}");
    for &tool in &tools {
        let available = match tool {
            Tool::Inferscale => o.inferscale.is_file(),
            Tool::K6 => o.k6.is_some(),
            Tool::Guidellm => o.guidellm.is_some(),
        };
        if !available {
            skipped.insert(tool.name().into(), json!("not installed"));
            println!("{:<10} not installed, skipped", tool.name());
            continue;
        }
        // The ladder: up until two rates in a row are not held; plus the latency rate.
        let mut rates = o.rates.clone();
        if !rates.contains(&o.latency_rate) {
            rates.push(o.latency_rate);
            rates.sort_by(f64::total_cmp);
        }
        // Up the ladder until two rates in a row are not even delivered.
        let mut misses = 0;
        let (mut best, mut best_5ms, mut best_delivered): (Option<f64>, Option<f64>, Option<f64>) =
            (None, None, None);
        for &rate in &rates {
            if misses >= 2 && rate != o.latency_rate {
                continue;
            }
            match one(&o, tool, rate, None) {
                Ok(v) => {
                    let line = row(&v);
                    println!("{line}");
                    let _ = writeln!(report, "{line}");
                    if v["held"] == true {
                        best = Some(best.map_or(rate, |b: f64| b.max(rate)));
                    }
                    if v["held_5ms"] == true {
                        best_5ms = Some(best_5ms.map_or(rate, |b: f64| b.max(rate)));
                    }
                    if v["delivered"] == true {
                        misses = 0;
                        best_delivered = Some(best_delivered.map_or(rate, |b: f64| b.max(rate)));
                    } else {
                        misses += 1;
                    }
                    results.push(v);
                }
                Err(e) => {
                    println!("{:<10} {rate:>7} failed: {e}", tool.name());
                    let _ = writeln!(report, "{:<10} {rate:>7} failed: {e}", tool.name());
                    results.push(json!({"tool": tool.name(), "rate": rate, "error": e}));
                    misses += 1;
                }
            }
        }
        // The latency rate again (twice by default): one 10 s run can catch a stall of the
        // machine.
        for repeat in 1..=o.repeat {
            match one(&o, tool, o.latency_rate, None) {
                Ok(mut v) => {
                    let line = format!("{}{}", row(&v), stalls(&v));
                    println!("{line}  (repeat)");
                    let _ = writeln!(report, "{line}  (repeat)");
                    v["repeat"] = json!(repeat);
                    results.push(v);
                }
                Err(e) => println!("{:<10} {} failed: {e}", tool.name(), o.latency_rate),
            }
        }
        max_held.insert(
            tool.name().into(),
            json!({ "lag_p99_1ms": best, "lag_p99_5ms": best_5ms, "delivered": best_delivered }),
        );
    }
    // Streaming: tokens per second parsed with per-token timing.
    let mut streaming = Vec::new();
    for &tool in &tools {
        if !o.stream || tool == Tool::K6 || skipped.contains_key(tool.name()) {
            continue;
        }
        println!(
            "\nstreaming, {} tokens per request (tokens/s parsed):",
            o.stream_tokens
        );
        let mut misses = 0;
        for &rate in &o.stream_rates {
            if misses >= 2 {
                break;
            }
            match one(&o, tool, rate, Some(o.stream_tokens)) {
                Ok(v) => {
                    let line = format!(
                        "{} tokens/s {:>10.0}  itl samples {}",
                        row(&v),
                        v["output_tokens_per_s"].as_f64().unwrap_or(0.0),
                        v["itl_samples"]
                    );
                    println!("{line}");
                    if v["held"] == true {
                        misses = 0;
                    } else {
                        misses += 1;
                    }
                    streaming.push(v);
                }
                Err(e) => {
                    println!("{:<10} {rate:>7} failed: {e}", tool.name());
                    streaming.push(json!({"tool": tool.name(), "rate": rate, "error": e}));
                    misses += 1;
                }
            }
        }
    }
    let ratio = |peer: &str, key: &str| -> Value {
        let ours = max_held.get("inferscale").and_then(|v| v[key].as_f64());
        let theirs = max_held.get(peer).and_then(|v| v[key].as_f64());
        match (ours, theirs) {
            (Some(a), Some(b)) if b > 0.0 => json!(a / b),
            _ => Value::Null,
        }
    };
    let p99_runs = |tool: &str| -> Vec<f64> {
        let mut v: Vec<f64> = results
            .iter()
            .filter(|v| v["tool"] == tool && v["rate"].as_f64() == Some(o.latency_rate))
            .filter_map(|v| v["latency_p99_s"].as_f64())
            .collect();
        v.sort_by(f64::total_cmp);
        v
    };
    let at_rate = |tool: &str, rate: f64, key: &str| -> Value {
        results
            .iter()
            .find(|v| v["tool"] == tool && v["rate"].as_f64() == Some(rate))
            .map_or(Value::Null, |v| v[key].clone())
    };
    let mut latency_at = serde_json::Map::new();
    let mut cpu_at_1000 = serde_json::Map::new();
    for &tool in &tools {
        let runs = p99_runs(tool.name());
        let median = runs.get(runs.len() / 2).copied();
        latency_at.insert(
            tool.name().into(),
            json!({
                "tool_p99_s_runs": runs,
                "tool_p99_s_median": median,
                "held": at_rate(tool.name(), o.latency_rate, "held"),
            }),
        );
        cpu_at_1000.insert(
            tool.name().into(),
            at_rate(tool.name(), 1000.0, "tool_cpu_s_per_1000"),
        );
    }
    let best_stream = streaming
        .iter()
        .filter(|v| v["held"] == true && v["per_token_timing_complete"] != false)
        .filter_map(|v| {
            Some((
                v["tool"].as_str()?.to_owned(),
                v["output_tokens_per_s"].as_f64()?,
            ))
        })
        .fold(serde_json::Map::new(), |mut m, (t, x)| {
            let cur = m.get(&t).and_then(Value::as_f64).unwrap_or(0.0);
            m.insert(t, json!(cur.max(x)));
            m
        });
    let summary = json!({
        "max_rate_held": max_held,
        "ratio_inferscale_to_k6": { "lag_p99_1ms": ratio("k6", "lag_p99_1ms"), "lag_p99_5ms": ratio("k6", "lag_p99_5ms"), "delivered": ratio("k6", "delivered") },
        "ratio_inferscale_to_guidellm": { "lag_p99_1ms": ratio("guidellm", "lag_p99_1ms"), "lag_p99_5ms": ratio("guidellm", "lag_p99_5ms"), "delivered": ratio("guidellm", "delivered") },
        "latency_p99_at_latency_rate": latency_at,
        "cpu_s_per_1000_at_1000_rps": cpu_at_1000,
        "stream_tokens_per_s_held": best_stream,
        "skipped": skipped,
        "latency_rate": o.latency_rate,
        "criteria": "held: lost (not arrived, non-200, or failed) < 0.1% and server-side schedule lag p99 < 1 ms; lag_p99_5ms: the same with 5 ms; delivered: lost < 0.1%, lag ignored",
    });
    println!(
        "\n{}",
        serde_json::to_string_pretty(&summary).unwrap_or_default()
    );
    let all = json!({ "summary": summary, "runs": results, "streaming": streaming });
    let path = o.dir.join("loadgen.json");
    std::fs::write(
        &path,
        serde_json::to_string_pretty(&all).unwrap_or_default(),
    )
    .map_err(|e| format!("{}: {e}", path.display()))?;
    println!("results: {}", path.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lag_is_measured_from_the_best_aligned_arrival() {
        let path = std::env::temp_dir().join(format!("bench-arrivals-{}", std::process::id()));
        let mut text = String::new();
        // 1000 req/s: arrivals on schedule except the 10th, 2 ms late, and a slow start.
        for i in 0..100 {
            let mut t = 100.0 + f64::from(i) * 1e-3;
            if i == 10 {
                t += 2e-3;
            }
            if i == 0 {
                t += 5e-4;
            }
            let _ = writeln!(
                text,
                "{{\"time\":{t:.6},\"method\":\"POST\",\"path\":\"/v1/completions\",\"status\":200}}"
            );
        }
        text.push_str("{\"time\":1.0,\"method\":\"GET\",\"path\":\"/metrics\",\"status\":200}\n");
        std::fs::write(&path, text).unwrap();
        let a = arrivals(&path, 1000.0).unwrap();
        let _ = std::fs::remove_file(&path);
        assert_eq!(a.count, 100);
        // Sorted, the late one lands two places on: which request a slot belonged to is
        // unknown at the server, so the two slots it passed each show 1 ms.
        assert!(a.lag_p50_s.abs() < 1e-6, "{a:?}");
        assert!((a.lag_max_s - 1e-3).abs() < 2e-6, "{a:?}");
        assert!((a.lag_p99_s - 1e-3).abs() < 2e-6, "{a:?}");
    }
}
