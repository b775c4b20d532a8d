//! End-to-end tests of `inferscale sim`: the real binary serving replicas, its start-up
//! report, graceful shutdown, and its refusals of bad flags.

// A panic in a test is a failed assertion.
#![allow(clippy::unwrap_used)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::time::Duration;

fn inferscale() -> Command {
    Command::new(env!("CARGO_BIN_EXE_inferscale"))
}

/// A minimal blocking HTTP/1.1 exchange (Connection: close).
fn http(addr: &str, method: &str, path: &str, body: &str) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let status = out
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (status, out)
}

fn free_port_pair() -> u16 {
    // Two consecutive free ports (retry until the neighbour is free too).
    for _ in 0..50 {
        let a = TcpListener::bind("127.0.0.1:0").unwrap();
        let p = a.local_addr().unwrap().port();
        if p < u16::MAX && TcpListener::bind(("127.0.0.1", p + 1)).is_ok() {
            return p;
        }
    }
    panic!("no two consecutive free ports");
}

#[test]
fn serves_replicas_on_consecutive_ports_and_stops_on_sigterm() {
    let port = free_port_pair();
    let mut child = inferscale()
        .args([
            "sim",
            "--profile",
            "instant",
            "--replicas",
            "2",
            "--listen",
            &format!("127.0.0.1:{port}"),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut header = String::new();
    for line in lines.by_ref() {
        let line = line.unwrap();
        header.push_str(&line);
        header.push('\n');
        if line.contains("stop with Ctrl-C") {
            break;
        }
    }
    assert!(
        header.contains(&format!("serving http://127.0.0.1:{port}")),
        "{header}"
    );
    assert!(
        header.contains(&format!("serving http://127.0.0.1:{}", port + 1)),
        "{header}"
    );
    let (a, b) = (
        format!("127.0.0.1:{port}"),
        format!("127.0.0.1:{}", port + 1),
    );
    for _ in 0..3 {
        let (s, body) = http(
            &a,
            "POST",
            "/v1/completions",
            r#"{"prompt":"hi","max_tokens":4}"#,
        );
        assert_eq!(s, 200, "{body}");
    }
    assert_eq!(
        http(
            &b,
            "POST",
            "/v1/completions",
            r#"{"prompt":"hi","max_tokens":4}"#
        )
        .0,
        200
    );
    // Independent engines: each counts its own requests.
    let count = |addr: &str| {
        let (_, body) = http(addr, "GET", "/metrics", "");
        let text = body.split("\r\n\r\n").nth(1).unwrap_or_default().to_owned();
        // Chunked or not, the sample line is intact.
        text.lines()
            .find(|l| l.starts_with("vllm:e2e_request_latency_seconds_count"))
            .and_then(|l| l.rsplit(' ').next())
            .map(|v| v.trim().to_owned())
    };
    assert_eq!(count(&a).as_deref(), Some("3.0"));
    assert_eq!(count(&b).as_deref(), Some("1.0"));
    // SIGTERM stops it cleanly.
    let pid = child.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}");
}

#[test]
fn the_start_up_report_says_what_is_simulated() {
    let o = inferscale().args(["sim", "--list"]).output().unwrap();
    assert!(o.status.success());
    let out = String::from_utf8_lossy(&o.stdout);
    for needle in [
        "aws-eks-ministral-8b-l40s",
        "instant",
        "L40S",
        "H200",
        "B200",
        "Llama-3.1-70B",
        "Qwen3-32B",
        "Mistral-7B",
    ] {
        assert!(out.contains(needle), "{needle} missing from --list");
    }
}

#[test]
fn bad_flags_are_refused_with_the_reason() {
    let cases: &[(&[&str], &str)] = &[
        (&["sim", "--profile", "nope"], "unknown profile \"nope\""),
        (&["sim", "--gpu", "TPU"], "unknown GPU \"TPU\""),
        (&["sim", "--model", "gpt-5"], "unknown model \"gpt-5\""),
        (
            &["sim", "--gpu-memory-utilization", "1.5"],
            "--gpu-memory-utilization 1.5: a fraction in (0, 1]",
        ),
        (
            &["sim", "--fault-500-rate", "2"],
            "--fault-500-rate must be a fraction",
        ),
        (&["sim", "--fault-slowdown", "3x"], "expected FACTOR@TIME"),
        (&["sim", "--speedup", "0"], "--speedup must be"),
        (&["sim", "--listen", "localhost"], "is not an address"),
        (
            &["sim", "--gpu", "L4", "--model", "Llama-3.1-70B"],
            "no memory left for the KV cache",
        ),
        (
            &["sim", "--gpu-spec", "/no/such/file.json"],
            "cannot read the GPU spec file",
        ),
    ];
    for (args, needle) in cases {
        let o = inferscale().args(*args).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}
