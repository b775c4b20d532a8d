//! https targets end to end: `inferscale scrape` against a local TLS server whose certificate
//! is self-signed (made fresh by the test) is refused when the certificate is not trusted,
//! naming the problem; reads with `--ca-file`; reads with `--insecure`, which says so.

#![allow(clippy::unwrap_used)]

mod common;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::Arc;

use common::{inferscale, stderr, stdout, tmp, workspace};

/// A TLS server on 127.0.0.1 that answers every request with `body` as Prometheus text.
/// Returns its port and the certificate's PEM.
fn tls_server(body: String) -> (u16, String) {
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
    let cfg = Arc::new(cfg);
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
