//! Helpers shared by the simulator's integration tests: start a simulator on loopback, and a
//! minimal HTTP/1.1 client.

#![allow(dead_code, clippy::unwrap_used)]

use std::net::SocketAddr;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use inferscale_sim::{Sim, SimConfig};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;

/// A simulator serving on 127.0.0.1 (random ports) until the handle is dropped.
pub(crate) struct Running {
    pub(crate) api: SocketAddr,
    pub(crate) dcgm: SocketAddr,
    _stop: oneshot::Sender<()>,
}

pub(crate) async fn start(cfg: SimConfig) -> Running {
    let api = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let dcgm = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let (api_addr, dcgm_addr) = (api.local_addr().unwrap(), dcgm.local_addr().unwrap());
    let sim = Sim::start(cfg, 1).unwrap();
    let (tx, rx) = oneshot::channel::<()>();
    tokio::spawn(sim.serve(vec![(api, Some(dcgm))], async {
        let _ = rx.await;
    }));
    Running {
        api: api_addr,
        dcgm: dcgm_addr,
        _stop: tx,
    }
}

/// Sends one request on a fresh connection and returns the status, the headers and the whole
/// body (`Err` when the connection broke, as injected cuts do).
pub(crate) async fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    body: Option<&str>,
) -> Result<(u16, String), String> {
    let stream = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(conn);
    let req = http::Request::builder()
        .method(method)
        .uri(path)
        .header("host", addr.to_string())
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body.unwrap_or("").to_owned())))
        .unwrap();
    let resp = sender.send_request(req).await.map_err(|e| e.to_string())?;
    let status = resp.status().as_u16();
    let bytes = resp
        .into_body()
        .collect()
        .await
        .map_err(|e| e.to_string())?
        .to_bytes();
    Ok((status, String::from_utf8_lossy(&bytes).into_owned()))
}

pub(crate) async fn get(addr: SocketAddr, path: &str) -> (u16, String) {
    request(addr, "GET", path, None).await.unwrap()
}

pub(crate) async fn post(addr: SocketAddr, path: &str, body: &str) -> (u16, String) {
    request(addr, "POST", path, Some(body)).await.unwrap()
}

/// Waits until `/health` says ready.
pub(crate) async fn wait_ready(addr: SocketAddr) {
    for _ in 0..2000 {
        if request(addr, "GET", "/health", None).await.map(|r| r.0) == Ok(200) {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    panic!("the simulator never became ready");
}

/// Keeps `n` long requests in flight until the returned tasks are aborted.
pub(crate) fn background_requests(api: SocketAddr, n: usize) -> Vec<tokio::task::JoinHandle<()>> {
    (0..n)
        .map(|_| {
            tokio::spawn(async move {
                loop {
                    let body = r#"{"prompt":"go","max_tokens":500,"ignore_eos":true}"#;
                    let _ = request(api, "POST", "/v1/completions", Some(body)).await;
                }
            })
        })
        .collect()
}
