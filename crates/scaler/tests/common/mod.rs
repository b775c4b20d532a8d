//! Pods for the scaler's tests: loopback HTTP servers serving a vLLM queue gauge.

#![allow(dead_code, unreachable_pub)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

/// A pod's queue gauge, settable while it serves.
#[derive(Debug, Clone)]
pub struct Gauge(Arc<AtomicU64>);

impl Gauge {
    pub fn set(&self, v: f64) {
        self.0.store(v.to_bits(), Ordering::SeqCst);
    }
}

/// A pod serving vLLM's queue gauge at `waiting` (or, with `None`, one that accepts and
/// never answers), on a loopback port. Aborting the task closes its port.
pub async fn pod(waiting: Option<f64>) -> (String, JoinHandle<()>) {
    let (url, task, _) = settable_pod(waiting).await;
    (url, task)
}

/// As [`pod`], with the gauge's handle.
pub async fn settable_pod(waiting: Option<f64>) -> (String, JoinHandle<()>, Gauge) {
    pod_at("127.0.0.1:0", waiting).await
}

/// As [`settable_pod`], on `addr` (another loopback address, a given port).
pub async fn pod_at(addr: &str, waiting: Option<f64>) -> (String, JoinHandle<()>, Gauge) {
    let l = TcpListener::bind(addr)
        .await
        .unwrap_or_else(|e| panic!("{addr}: {e}"));
    let url = format!(
        "http://{}",
        l.local_addr().unwrap_or_else(|e| panic!("{e}"))
    );
    let gauge = Gauge(Arc::new(AtomicU64::new(waiting.unwrap_or(0.0).to_bits())));
    let hangs = waiting.is_none();
    let g = gauge.clone();
    let task = tokio::spawn(async move {
        loop {
            let Ok((mut s, _)) = l.accept().await else {
                return;
            };
            let g = g.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 8192];
                let mut n = 0;
                while n < buf.len() && !buf[..n].windows(4).any(|w| w == b"\r\n\r\n") {
                    match s.read(&mut buf[n..]).await {
                        Ok(0) | Err(_) => return,
                        Ok(k) => n += k,
                    }
                }
                if hangs {
                    tokio::time::sleep(Duration::from_secs(30)).await;
                    return;
                }
                let w = f64::from_bits(g.0.load(Ordering::SeqCst));
                let body = format!(
                    "# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting{{engine=\"0\",model_name=\"m\"}} {w}\n"
                );
                let head = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    body.len()
                );
                let _ = s.write_all(head.as_bytes()).await;
                let _ = s.write_all(body.as_bytes()).await;
            });
        }
    });
    (url, task, gauge)
}
