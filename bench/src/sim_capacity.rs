//! How many concurrent streams the simulator holds and how many streamed tokens per second it
//! serves, with the `instant` profile (no model delay) so that only the simulator's own HTTP
//! and SSE machinery is measured. Run through `bench/sim-capacity.sh`, which pins the
//! simulator to one core and this client to the other.

use std::cell::Cell;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

#[derive(Default)]
struct Counters {
    open: Cell<u64>,
    peak: Cell<u64>,
    tokens: Cell<u64>,
    done: Cell<u64>,
    failed: Cell<u64>,
}

/// Counts `data: {` events in a raw HTTP/1.1 response (chunk boundaries fall between events).
async fn one_stream(addr: SocketAddr, request: Rc<Vec<u8>>, c: Rc<Counters>) -> Result<(), String> {
    let mut s = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
    s.write_all(&request).await.map_err(|e| e.to_string())?;
    let mut buf = vec![0u8; 64 * 1024];
    let mut carry: Vec<u8> = Vec::new();
    let mut started = false;
    let needle = b"data: {";
    loop {
        let n = s.read(&mut buf).await.map_err(|e| e.to_string())?;
        if n == 0 {
            break;
        }
        if !started {
            started = true;
            c.open.set(c.open.get() + 1);
            c.peak.set(c.peak.get().max(c.open.get()));
        }
        carry.extend_from_slice(&buf[..n]);
        let mut count = 0;
        let mut i = 0;
        while let Some(p) = find(&carry[i..], needle) {
            count += 1;
            i += p + needle.len();
        }
        c.tokens.set(c.tokens.get() + count);
        let done = find(&carry, b"data: [DONE]").is_some();
        let keep = carry.len().saturating_sub(needle.len());
        carry.drain(..keep.max(i).min(carry.len()));
        if done {
            break;
        }
    }
    if started {
        c.open.set(c.open.get() - 1);
    }
    Ok(())
}

fn find(h: &[u8], n: &[u8]) -> Option<usize> {
    h.windows(n.len()).position(|w| w == n)
}

pub(crate) fn cpu_seconds(pid: u32) -> f64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return f64::NAN;
    };
    let Some(rest) = stat.rsplit_once(')').map(|x| x.1) else {
        return f64::NAN;
    };
    let f: Vec<&str> = rest.split_whitespace().collect();
    let t = |i: usize| f.get(i).and_then(|x| x.parse::<f64>().ok()).unwrap_or(0.0);
    (t(11) + t(12)) / 100.0
}

/// `sim-capacity --addr HOST:PORT --streams N --tokens T [--pid PID]`
pub(crate) fn run(args: &[String]) -> Result<(), String> {
    let mut addr: Option<SocketAddr> = None;
    let mut streams = 5000u64;
    let mut tokens = 400u32;
    let mut pid = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut val = || it.next().cloned().ok_or(format!("{a} needs a value"));
        match a.as_str() {
            "--addr" => addr = Some(val()?.parse().map_err(|e| format!("--addr: {e}"))?),
            "--streams" => streams = val()?.parse().map_err(|e| format!("--streams: {e}"))?,
            "--tokens" => tokens = val()?.parse().map_err(|e| format!("--tokens: {e}"))?,
            "--pid" => pid = Some(val()?.parse::<u32>().map_err(|e| format!("--pid: {e}"))?),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    let addr = addr.ok_or("--addr is required")?;
    let body = format!(
        r#"{{"prompt":"Tell me about clusters.","max_tokens":{tokens},"ignore_eos":true,"stream":true}}"#
    );
    let request = Rc::new(
        format!(
            "POST /v1/completions HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
        .into_bytes(),
    );
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let local = tokio::task::LocalSet::new();
    let c = Rc::new(Counters::default());
    let cpu0 = pid.map(cpu_seconds);
    let start = Instant::now();
    local.block_on(&rt, async {
        let mut handles = Vec::new();
        for _ in 0..streams {
            let (req, c2) = (Rc::clone(&request), Rc::clone(&c));
            handles.push(tokio::task::spawn_local(async move {
                match one_stream(addr, req, Rc::clone(&c2)).await {
                    Ok(()) => c2.done.set(c2.done.get() + 1),
                    Err(_) => c2.failed.set(c2.failed.get() + 1),
                }
            }));
        }
        let c3 = Rc::clone(&c);
        let progress = tokio::task::spawn_local(async move {
            loop {
                tokio::time::sleep(Duration::from_secs(2)).await;
                eprintln!(
                    "  {:>5.1}s open {:>5} (peak {:>5}) done {:>5} tokens {:>9}",
                    start.elapsed().as_secs_f64(),
                    c3.open.get(),
                    c3.peak.get(),
                    c3.done.get(),
                    c3.tokens.get()
                );
            }
        });
        for h in handles {
            let _ = h.await;
        }
        progress.abort();
    });
    let secs = start.elapsed().as_secs_f64();
    let server_cpu = match (pid, cpu0) {
        (Some(p), Some(c0)) => format!(
            "{:.2} s ({:.0} % of one core)",
            cpu_seconds(p) - c0,
            (cpu_seconds(p) - c0) / secs * 100.0
        ),
        _ => "not measured".into(),
    };
    // Each stream ends with one finish event that carries no token.
    let received = c.tokens.get().saturating_sub(c.done.get());
    c.tokens.set(received);
    let expected = streams * u64::from(tokens);
    println!(
        "streams {streams} × {tokens} tokens: {} done, {} failed; peak concurrent open streams {}\n\
         tokens received {} of {expected} in {secs:.2} s = {:.0} streamed tokens/s; simulator CPU {server_cpu}",
        c.done.get(),
        c.failed.get(),
        c.peak.get(),
        c.tokens.get(),
        c.tokens.get() as f64 / secs
    );
    Ok(())
}
