//! GuideLLM (PyPI `guidellm`, 0.8) as a peer in the load-generator benchmark: its command line
//! for a constant-rate load offline, and where its JSON report keeps the numbers.

use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};

use crate::loadgen::Outcome;

/// Adds GuideLLM's arguments for `rate` req/s during `secs`, `prompt` from a local data file
/// (no Hugging Face Hub here: the prompt file is plain JSON lines and the hub is kept offline).
#[allow(clippy::too_many_arguments)]
pub(crate) fn args(
    c: &mut Command,
    addr: SocketAddr,
    rate: f64,
    secs: f64,
    prompt: &str,
    stream: Option<u32>,
    max_tokens: u32,
    dir: &Path,
) -> Result<(), String> {
    // GuideLLM does not loop over a dataset (the run ends when it runs out) and queues up to
    // ~5000 requests ahead, so the file holds one line per scheduled request and then some.
    let data = dir.join("prompts.jsonl");
    let line = serde_json::to_string(&json!({ "prompt": prompt })).map_err(|e| e.to_string())?;
    let n = (rate * secs).ceil() as usize + 6000;
    let mut text = String::with_capacity((line.len() + 1) * n);
    for _ in 0..n {
        text.push_str(&line);
        text.push('\n');
    }
    std::fs::write(&data, text).map_err(|e| e.to_string())?;
    let (stream, tokens) = match stream {
        Some(n) => ("true", n),
        None => ("false", max_tokens),
    };
    c.args(["run", "--backend"])
        .arg(format!(
            "kind=openai_http,target=http://{addr},request_format=/v1/completions,stream={stream},max_tokens={tokens}"
        ))
        .arg("--profile")
        .arg(format!("kind=constant,rate={rate}"))
        .arg("--constraint")
        .arg(format!("kind=max_duration,seconds={secs}"))
        .arg("--data")
        .arg(format!("kind=json_file,path={}", data.display()))
        .args(["--metrics", "kind=generative,sample_size=0", "--output"])
        .arg(format!("kind=json,path={}", dir.join("guidellm.json").display()))
        .arg("--disable-progress")
        .env("HF_HUB_OFFLINE", "1")
        .env("TRANSFORMERS_OFFLINE", "1")
        .env("HF_DATASETS_OFFLINE", "1");
    Ok(())
}

fn percentile(xs: &mut [f64], q: f64) -> Option<f64> {
    if xs.is_empty() {
        return None;
    }
    xs.sort_by(f64::total_cmp);
    let i = ((q * xs.len() as f64).ceil() as usize).clamp(1, xs.len()) - 1;
    Some(xs[i])
}

/// Reads the first benchmark of GuideLLM's JSON report.
pub(crate) fn read(dir: &Path) -> Result<Outcome, String> {
    let p = dir.join("guidellm.json");
    let text = std::fs::read_to_string(&p).map_err(|e| format!("{}: {e}", p.display()))?;
    let v: Value = serde_json::from_str(&text).map_err(|e| format!("{}: {e}", p.display()))?;
    let b = &v["benchmarks"][0];
    let totals = &b["metrics"]["request_totals"];
    let ok = totals["successful"].as_u64().unwrap_or(0);
    let failed =
        totals["errored"].as_u64().unwrap_or(0) + totals["incomplete"].as_u64().unwrap_or(0);
    // Its own schedule lag: request_start - targeted_start of every request.
    let mut lags = Vec::new();
    for group in ["successful", "errored", "incomplete"] {
        for r in b["requests"][group].as_array().into_iter().flatten() {
            let t = &r["info"]["timings"];
            let start = t["request_start"].as_f64().or(t["resolve_start"].as_f64());
            if let (Some(s), Some(target)) = (start, t["targeted_start"].as_f64()) {
                lags.push(s - target);
            }
        }
    }
    let lat = &b["metrics"]["request_latency"]["successful"]["percentiles"];
    let output_tokens = b["metrics"]["output_token_count"]["successful"]["total_sum"]
        .as_f64()
        .map(|x| x as u64);
    Ok(Outcome {
        ok,
        failed,
        dropped: None,
        own_lag_p99_s: percentile(&mut lags, 0.99),
        p50_s: lat["p50"].as_f64(),
        p99_s: lat["p99"].as_f64(),
        output_tokens,
        itl_samples: None,
        extra: json!({
            "processes": b["scheduler_state"]["num_processes"],
            "created_requests": b["scheduler_state"]["created_requests"],
            "cancelled_requests": b["scheduler_state"]["cancelled_requests"],
        }),
    })
}
