//! What the binary's end-to-end tests share: the binary, its output, scratch folders, the
//! external programs they need, and a simulator child process on a port it bound itself.

#![allow(dead_code, clippy::unwrap_used)]

use std::io::{BufRead, BufReader};
use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// The binary under test.
pub(crate) fn inferscale() -> Command {
    Command::new(env!("CARGO_BIN_EXE_inferscale"))
}

/// Standard error, as text.
pub(crate) fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Standard output, as text.
pub(crate) fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// `name` in a scratch folder of this test binary (`tag` keeps test files apart).
pub(crate) fn tmp(tag: &str, name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("inferscale-cli-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

/// The repository's root.
pub(crate) fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

use inferscale_testkit::Reap;

/// `inferscale sim` in a child process, listening on a port the kernel chose (the simulator
/// binds 127.0.0.1:0 and says which port in its start-up lines: no port is guessed).
pub(crate) struct Sim {
    /// The child, killed on drop.
    pub(crate) child: Reap,
    /// `http://127.0.0.1:PORT`.
    pub(crate) url: String,
    /// The DCGM exporter's `/metrics` URL, with `--dcgm-listen`.
    pub(crate) dcgm: Option<String>,
    /// With `--replicas N`: every replica's URL and DCGM URL, in order.
    pub(crate) replicas: Vec<(String, Option<String>)>,
}

/// Starts `inferscale sim ARGS` with `envs` and waits until it serves.
pub(crate) fn sim_with_env(args: &[&str], envs: &[(&str, &str)]) -> Sim {
    let mut cmd = inferscale();
    cmd.args(["sim", "--listen", "127.0.0.1:0"])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    for (k, v) in envs {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().unwrap();
    let out = child.stdout.take().unwrap();
    let mut replicas = Vec::new();
    for line in BufReader::new(out).lines() {
        let line = line.unwrap();
        if let Some(rest) = line.trim().strip_prefix("serving ") {
            let url = rest.split_whitespace().next().map(str::to_owned);
            let dcgm = rest
                .split_once("DCGM ")
                .and_then(|(_, d)| d.split_whitespace().next())
                .map(str::to_owned);
            replicas.push((url.expect("a serving line names its URL"), dcgm));
        }
        if line.contains("stop with Ctrl-C") {
            break;
        }
    }
    let (url, dcgm) = replicas
        .first()
        .cloned()
        .expect("the simulator says where it serves");
    Sim {
        child: Reap(child),
        url,
        dcgm,
        replicas,
    }
}

impl Sim {
    /// Waits until `/health` answers 200 (the model has "loaded"), at most a minute.
    pub(crate) fn wait_healthy(&self) {
        use std::io::{Read as _, Write as _};
        let addr = self.url.trim_start_matches("http://").to_owned();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        loop {
            let mut b = String::new();
            if let Ok(mut s) = std::net::TcpStream::connect(&addr) {
                let _ = write!(s, "GET /health HTTP/1.0\r\n\r\n");
                let _ = s.read_to_string(&mut b);
            }
            if b.split(' ').nth(1) == Some("200") {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the simulator did not become healthy: {b}"
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }
}

/// Starts `inferscale sim ARGS` and waits until it serves.
pub(crate) fn sim(args: &[&str]) -> Sim {
    sim_with_env(args, &[])
}

/// Closed-loop requests for `model` from `threads` threads until `stop`, each asking for
/// `tokens` to twice as many tokens.
pub(crate) fn background_load(
    addr: &str,
    model: &str,
    threads: usize,
    tokens: usize,
    stop: &Arc<AtomicBool>,
) -> Vec<std::thread::JoinHandle<()>> {
    (0..threads)
        .map(|i| {
            let addr = addr.to_owned();
            let model = model.to_owned();
            let stop = Arc::clone(stop);
            std::thread::spawn(move || {
                let mut n = 0u32;
                while !stop.load(Ordering::Relaxed) {
                    // Each thread's lengths are offset, so the threads do not finish (and
                    // reconnect) in step: a gauge of running requests then dips by one at a
                    // time, not all at once between two of Prometheus' scrapes.
                    let body = format!(
                        "{{\"model\":\"{model}\",\"prompt\":\"hello {i} {n}\",\"max_tokens\":{}}}",
                        tokens + ((n as usize + i * 13) * tokens / 48) % tokens
                    );
                    if let Ok(mut s) = std::net::TcpStream::connect(&addr) {
                        let _ = write!(
                            s,
                            "POST /v1/completions HTTP/1.0\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                            body.len()
                        );
                        let _ = s.read_to_end(&mut Vec::new());
                    }
                    n += 1;
                }
            })
        })
        .collect()
}

/// Runs an instant query: its status and the sample values.
pub(crate) fn prom_query(prom: std::net::SocketAddr, q: &str) -> (String, Vec<String>) {
    let (_, body) = inferscale_testkit::http_get(
        prom,
        &format!("/api/v1/query?query={}", inferscale_testkit::urlencode(q)),
    )
    .unwrap();
    let v: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
    let values = v["data"]["result"]
        .as_array()
        .map(|r| {
            r.iter()
                .filter_map(|x| x["value"][1].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    (
        v["status"].as_str().unwrap_or("").to_owned()
            + &v["error"]
                .as_str()
                .map(|e| format!(": {e}"))
                .unwrap_or_default(),
        values,
    )
}

/// Whether a query answered, every value a finite number.
pub(crate) fn finite(values: &[String]) -> bool {
    !values.is_empty()
        && values
            .iter()
            .all(|v| v.parse::<f64>().is_ok_and(f64::is_finite))
}

/// The expression without its final comparison (`… > 27`, `… == 0`): what it measures.
pub(crate) fn measured(expr: &str) -> String {
    let t = expr.trim_end();
    for op in [" > ", " == "] {
        if let Some((head, tail)) = t.rsplit_once(op)
            && tail.trim().parse::<f64>().is_ok()
        {
            return head.to_owned();
        }
    }
    t.to_owned()
}
