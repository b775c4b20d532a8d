//! What inferscale's tests share across crates (a dev-dependency only): finding the external
//! programs the suite needs, and reaping child processes.
//!
//! ```
//! let sh = inferscale_testkit::program("sh");
//! assert!(sh.is_file());
//! ```

use std::path::PathBuf;
use std::process::Child;

/// An external program from `PATH`. A missing one fails the test, naming how to get it: the
/// suite never skips a test because a program is missing (`./scripts/test` installs
/// Prometheus, k6 and Chromium first).
///
/// # Panics
///
/// When `name` is not on `PATH`.
pub fn program(name: &str) -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!("`{name}` is not installed; ./scripts/test installs it (this test never skips)")
        })
}

/// The first of `names` found on `PATH` (a program packaged under several names, like
/// Chromium), as [`program`] finds it.
///
/// # Panics
///
/// When none is on `PATH`.
pub fn program_any(names: &[&str]) -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let found = names
        .iter()
        .find(|n| std::env::split_paths(&path).any(|d| d.join(n).is_file()));
    program(
        found
            .copied()
            .unwrap_or(names.first().copied().unwrap_or("")),
    )
}

/// Kills and waits for a child process when dropped, so a failing test leaves nothing
/// running.
pub struct Reap(pub Child);

impl Drop for Reap {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A port that was free a moment ago on 127.0.0.1, for a program that must be told its port
/// (Prometheus' `--web.listen-address`); the kernel chose it.
///
/// # Panics
///
/// When no socket can be bound.
pub fn free_port() -> u16 {
    #[allow(clippy::unwrap_used)]
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap()
}

/// Percent-encodes a query-string value.
pub fn urlencode(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(char::from(b))
            }
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// One `GET` over HTTP/1.0 (so no chunked body): the status and the body.
pub fn http_get(addr: std::net::SocketAddr, path: &str) -> std::io::Result<(u16, String)> {
    use std::io::{Read as _, Write as _};
    let mut s = std::net::TcpStream::connect_timeout(&addr, std::time::Duration::from_secs(5))?;
    s.set_read_timeout(Some(std::time::Duration::from_secs(30)))?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n")?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf)?;
    let text = String::from_utf8_lossy(&buf).into_owned();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .map(|x| x.1.to_owned())
        .unwrap_or_default();
    Ok((status, body))
}

/// Starts Prometheus with `config` (a prometheus.yml's text) and `--storage.tsdb.path` under
/// `dir` on a free loopback port, and waits (at most a minute) until it is ready.
///
/// # Panics
///
/// When Prometheus is not on `PATH`, does not start, or is not ready in a minute.
pub fn prometheus(
    dir: &std::path::Path,
    config: &str,
    extra: &[&str],
) -> (Reap, std::net::SocketAddr) {
    #[allow(clippy::unwrap_used)]
    {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(dir.join("prometheus.yml"), config).unwrap();
        let addr: std::net::SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        let child = std::process::Command::new(program("prometheus"))
            .arg(format!(
                "--config.file={}",
                dir.join("prometheus.yml").display()
            ))
            .arg(format!("--web.listen-address={addr}"))
            .args(extra)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let reap = Reap(child);
        wait_ready(addr, "/-/ready", "Prometheus");
        (reap, addr)
    }
}

/// The llama.cpp build the tests serve with ([`llama_server`]): the sources PyPI's
/// llama-cpp-python of this version vendors, built by `scripts/llama-server`.
pub const LLAMA_CPP_PYTHON: &str = "0.3.36";

/// A running `llama-server --metrics` (llama.cpp's own OpenAI-compatible server, not ours)
/// serving the tiny random-weight model with `slots` slots on a free loopback port, ready.
/// `scripts/llama-server` (run by `./scripts/test`) builds both into
/// `$INFERSCALE_CACHE` (default `~/.cache/inferscale`); a missing build fails the test
/// naming that script, never skips it.
///
/// # Panics
///
/// When the build or the model is missing, or the server is not ready in a minute.
pub fn llama_server(slots: u32) -> (Reap, std::net::SocketAddr) {
    let cache = std::env::var_os("INFERSCALE_CACHE")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/inferscale")))
        .unwrap_or_else(|| PathBuf::from(".cache/inferscale"));
    let bin = cache
        .join(format!("llama-cpp-python-{LLAMA_CPP_PYTHON}"))
        .join("bin/llama-server");
    let model = cache.join("tiny-llama.gguf");
    for p in [&bin, &model] {
        assert!(
            p.is_file(),
            "{} is missing: run ./scripts/llama-server (./scripts/test does) to build llama.cpp's server and write the tiny model; this test never skips",
            p.display()
        );
    }
    #[allow(clippy::unwrap_used)]
    let addr: std::net::SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    #[allow(clippy::unwrap_used)]
    let child = std::process::Command::new(&bin)
        .arg("-m")
        .arg(&model)
        .args(["--host", "127.0.0.1", "--port", &addr.port().to_string()])
        .args(["--metrics", "-np", &slots.to_string()])
        .args(["-c", &(1024 * slots).to_string(), "-t", "1"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let reap = Reap(child);
    wait_ready(addr, "/health", "llama-server");
    (reap, addr)
}

/// Waits (at most a minute) until `GET path` on `addr` answers 200.
///
/// # Panics
///
/// When it does not in a minute, naming `what`.
fn wait_ready(addr: std::net::SocketAddr, path: &str, what: &str) {
    let deadline = inferscale_clock::now() + std::time::Duration::from_secs(60);
    while http_get(addr, path).map(|r| r.0).unwrap_or(0) != 200 {
        assert!(
            inferscale_clock::now() < deadline,
            "{what} did not become ready in 60 s"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}
