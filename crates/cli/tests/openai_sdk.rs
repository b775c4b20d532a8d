//! The simulator's OpenAI surface as a new user meets it: the OpenAI Python SDK (PyPI
//! `openai`, which scripts/test installs) against `inferscale sim`, asking for `n` parallel
//! samples, stop strings, logprobs and tool calls (`openai_sdk.py` holds the checks). Each
//! is served as vLLM serves it, and its cost reaches the engine (shared prompt blocks, a
//! shorter output at a stop string, a tool call's tokens).

#![allow(clippy::unwrap_used)]

mod common;

use std::process::Command;

use common::{sim, workspace};

#[test]
fn the_openai_python_sdk_gets_n_stop_logprobs_and_tool_calls_as_from_vllm() {
    // The seeds' deployment, ten times faster than real time: the engine model runs.
    let plain = sim(&["--speedup", "10"]);
    let auto = sim(&[
        "--speedup",
        "10",
        "--enable-auto-tool-choice",
        "--tool-call-parser",
        "hermes",
    ]);
    plain.wait_healthy();
    auto.wait_healthy();
    let out = Command::new("python3")
        .arg(workspace().join("crates/cli/tests/openai_sdk.py"))
        .arg(&plain.url)
        .arg(&auto.url)
        .output()
        .expect("python3 runs (scripts/test installs the openai package)");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the SDK's checks failed:\n{stderr}\n{stdout}"
    );
    let summary: serde_json::Value =
        serde_json::from_str(stdout.lines().last().unwrap_or("")).unwrap();
    eprintln!("{summary}");
    assert!(summary["n_prefix_hits"].as_f64().unwrap() >= 144.0);
}
