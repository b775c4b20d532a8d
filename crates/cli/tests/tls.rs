//! https targets end to end: `inferscale scrape` against a local TLS server whose certificate
//! is self-signed (made fresh by the test) is refused when the certificate is not trusted,
//! naming the problem; reads with `--ca-file`; reads with `--insecure`, which says so. And
//! `warmup` and `load` measure the simulator through a TLS-terminating proxy, waiting for it
//! to load its model first with `--wait-ready`.

#![allow(clippy::unwrap_used)]

mod common;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::Arc;

use common::{inferscale, stderr, stdout, tmp, workspace};

/// A fresh self-signed certificate for 127.0.0.1: the server's configuration and the PEM a
/// client trusts it by.
fn self_signed() -> (Arc<rustls::ServerConfig>, String) {
    let ck =
        rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])
            .unwrap();
    let pem = ck.cert.pem();
    let cert = ck.cert.der().clone();
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(ck.signing_key.serialize_der().into());
    let mut cfg = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(vec![cert], key)
    .unwrap();
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    (Arc::new(cfg), pem)
}

/// A TLS-terminating proxy on 127.0.0.1 in front of `upstream` (as an ingress or a service
/// mesh would be): its port and the certificate's PEM.
fn tls_proxy(upstream: std::net::SocketAddr) -> (u16, String) {
    let (cfg, pem) = self_signed();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    listener.set_nonblocking(true).unwrap();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            let acceptor = tokio_rustls::TlsAcceptor::from(cfg);
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    continue;
                };
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    let Ok(mut tls) = acceptor.accept(tcp).await else {
                        return; // a client that refused our certificate
                    };
                    if let Ok(mut up) = tokio::net::TcpStream::connect(upstream).await {
                        let _ = tokio::io::copy_bidirectional(&mut tls, &mut up).await;
                    }
                });
            }
        });
    });
    (port, pem)
}

/// A TLS server on 127.0.0.1 that answers every request with `body` as Prometheus text.
/// Returns its port and the certificate's PEM.
fn tls_server(body: String) -> (u16, String) {
    let (cfg, pem) = self_signed();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for tcp in listener.incoming() {
            let Ok(mut tcp) = tcp else { continue };
            let cfg = Arc::clone(&cfg);
            let body = body.clone();
            std::thread::spawn(move || {
                let Ok(mut conn) = rustls::ServerConnection::new(cfg) else {
                    return;
                };
                let mut tls = rustls::Stream::new(&mut conn, &mut tcp);
                let mut req = Vec::new();
                let mut buf = [0u8; 4096];
                while !req.windows(4).any(|w| w == b"\r\n\r\n") {
                    match tls.read(&mut buf) {
                        Ok(0) | Err(_) => return, // a client that refused our certificate
                        Ok(n) => req.extend_from_slice(&buf[..n]),
                    }
                }
                let _ = write!(
                    tls,
                    "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = tls.flush();
                tls.conn.send_close_notify();
                let _ = tls.flush();
            });
        }
    });
    (port, pem)
}

#[test]
fn https_scrapes_need_a_trusted_certificate_a_ca_file_or_an_explicit_insecure() {
    let body =
        std::fs::read_to_string(workspace().join("testdata/vllm/metrics_single_engine.prom"))
            .unwrap();
    let (port, pem) = tls_server(body);
    let url = format!("https://127.0.0.1:{port}/metrics");

    // Not trusted: refused, saying why.
    let o = inferscale().args(["scrape", &url]).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("certificate"), "{}", stderr(&o));

    // Trusted through --ca-file.
    let ca = tmp("tls", "ca.pem");
    std::fs::write(&ca, &pem).unwrap();
    let o = inferscale()
        .args(["scrape", &url, "--ca-file"])
        .arg(&ca)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("queue depth (waiting)"),
        "{}",
        stdout(&o)
    );
    assert!(!stderr(&o).contains("insecure"));

    // Not checked, and said so.
    let o = inferscale()
        .args(["scrape", &url, "--insecure"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("--insecure: the server's TLS certificate is not checked"),
        "{}",
        stderr(&o)
    );

    // A CA file that holds no certificate is named.
    let bad = tmp("tls", "not-a-ca.pem");
    std::fs::write(&bad, "hello\n").unwrap();
    let o = inferscale()
        .args(["scrape", &url, "--ca-file"])
        .arg(&bad)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("no PEM certificate"), "{}", stderr(&o));
}

#[test]
fn warmup_and_load_measure_an_https_server_once_it_is_ready() {
    // Not waited for: the proxy is up at once, the model behind it loads for 2 s.
    let s = common::sim(&["--speedup", "10"]);
    let upstream = s.url.trim_start_matches("http://").parse().unwrap();
    let (port, pem) = tls_proxy(upstream);
    let url = format!("https://127.0.0.1:{port}");
    let ca = tmp("tls", "proxy-ca.pem");
    std::fs::write(&ca, &pem).unwrap();

    let o = inferscale()
        .args([
            "warmup",
            "--url",
            &url,
            "--requests",
            "3",
            "--speedup",
            "10",
        ])
        .args(["--wait-ready", "60s", "--json", "--ca-file"])
        .arg(&ca)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let w: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(w["warmup"]["ok"], 3, "{w}");

    // Untrusted: refused before any load, naming the certificate.
    let run = tmp("tls", "run.json");
    let load = |extra: &[&str]| {
        inferscale()
            .args(["load", "--url", &url, "--rates", "4", "--step", "5s"])
            .args(["--speedup", "10", "--warmup", "0", "--out"])
            .arg(&run)
            .args(extra)
            .output()
            .unwrap()
    };
    let o = load(&[]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("certificate"), "{}", stderr(&o));
    assert!(!run.exists());

    // Trusted: measured, with the server's metrics scraped through the same proxy.
    let o = load(&["--ca-file", ca.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&run).unwrap()).unwrap();
    assert_eq!(r["target"]["url"], url.as_str());
    let step = &r["steps"][0];
    assert_eq!(step["requests"]["scheduled"], 20, "{step}");
    assert_eq!(step["requests"]["ok"], 20, "{step}");
    assert!(
        step["server"]["samples"].as_u64().unwrap() >= 3,
        "the metrics were scraped over https: {step}"
    );
}
