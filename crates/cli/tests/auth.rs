//! Authentication end to end: a simulator that requires an API key (VLLM_API_KEY, as vLLM
//! reads it) is measured with the key from OPENAI_API_KEY or a key file, refused with a clear
//! 401 message without one, and the key appears in no file the run writes nor in its output.

#![allow(clippy::unwrap_used)]

mod common;

use common::{inferscale, sim_with_env, stderr, stdout, tmp};

const KEY: &str = "sk-inferscale-test-7f3a9c";

fn every_file_under(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            every_file_under(&p, out);
        } else {
            out.push(p);
        }
    }
}

/// A run that measured: done (0), or done without a saturation point (1: the seeds'
/// deployment does not saturate at these rates).
fn assert_measured(o: &std::process::Output) {
    assert!(o.status.code().is_some_and(|c| c <= 1), "{}", stderr(o));
}

fn short_run(url: &str, out: &std::path::Path) -> std::process::Command {
    let mut c = inferscale();
    c.args(["run", "--url", url, "--out"])
        .arg(out)
        .args([
            "--speedup",
            "10",
            "--rates",
            "5,10",
            "--step",
            "10s",
            "--rest",
            "0s",
            "--warmup",
            "3",
        ])
        .env_remove("OPENAI_API_KEY");
    c
}

#[test]
fn a_server_that_wants_a_key_is_measured_with_it_and_refused_without_it() {
    let s = sim_with_env(&["--speedup", "10"], &[("VLLM_API_KEY", KEY)]);
    s.wait_healthy();

    // Without a key: refused before anything is sent, naming what to do.
    let out = tmp("auth", "none");
    let o = short_run(&s.url, &out).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(e.contains("HTTP 401"), "{e}");
    assert!(e.contains("none was sent"), "{e}");
    assert!(e.contains("OPENAI_API_KEY"), "{e}");
    assert!(!out.join("run.json").exists(), "nothing written");

    // A wrong key: refused, and the message says the key was refused (without printing it).
    let o = short_run(&s.url, &out)
        .env("OPENAI_API_KEY", "sk-wrong")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("refused the credentials"),
        "{}",
        stderr(&o)
    );
    assert!(!stderr(&o).contains("sk-wrong"));

    // The key from the environment: measured.
    let out = tmp("auth", "env");
    let o = short_run(&s.url, &out)
        .env("OPENAI_API_KEY", KEY)
        .output()
        .unwrap();
    assert_measured(&o);
    let run: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("run.json")).unwrap()).unwrap();
    let ok: u64 = run["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["requests"]["ok"].as_u64().unwrap())
        .sum();
    assert_eq!(ok, 10 * 5 + 10 * 10, "every request got in");
    assert_eq!(run["warmup"]["ok"], 3);
    let mut files = Vec::new();
    every_file_under(&out, &mut files);
    assert!(files.len() >= 3, "{files:?}");
    for f in &files {
        let text = String::from_utf8_lossy(&std::fs::read(f).unwrap()).into_owned();
        assert!(!text.contains(KEY), "the key is in {}", f.display());
    }
    assert!(!stdout(&o).contains(KEY) && !stderr(&o).contains(KEY));

    // The key from a file: measured too.
    let key_file = tmp("auth", "key.txt");
    std::fs::write(&key_file, format!("{KEY}\n")).unwrap();
    let out = tmp("auth", "file");
    let o = short_run(&s.url, &out)
        .arg("--api-key-file")
        .arg(&key_file)
        .output()
        .unwrap();
    assert_measured(&o);

    // /health and /metrics stay open, as vLLM leaves them.
    let o = inferscale().args(["scrape", &s.url]).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

#[test]
fn a_key_is_never_taken_from_the_command_line() {
    let o = inferscale()
        .args(["load", "--url", "http://127.0.0.1:9", "--api-key", KEY])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--api-key"), "{}", stderr(&o));
}
