//! A small HTTP/1.1 GET client for scraping `/metrics` (no TLS, no redirects).
//!
//! It exists so the binary does not pull in a general-purpose client: scrapes are plain GETs
//! to loopback or in-cluster addresses with a deadline and a size cap.

use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Limited};
use hyper::Uri;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

/// A parsed `http://` URL ready to be fetched.
#[derive(Debug, Clone)]
pub(crate) struct Target {
    /// The URL as the user should see it (with `/metrics` added when no path was given).
    pub(crate) url: String,
    host: String,
    port: u16,
    path_and_query: String,
}

impl Target {
    /// Parses `http://host[:port][/path]`. An empty path means `/metrics`, Prometheus'
    /// convention.
    pub(crate) fn parse(url: &str) -> Result<Target> {
        let uri: Uri = url
            .parse()
            .with_context(|| format!("{url:?} is not a valid URL"))?;
        match uri.scheme_str() {
            Some("http") => {}
            Some("https") => bail!(
                "https is not supported; scrape over http (inside the cluster, or through `kubectl port-forward`)"
            ),
            Some(other) => bail!("unsupported scheme {other:?} (expected http://)"),
            None => bail!("{url:?} has no scheme (expected http://host:port/path)"),
        }
        let host = uri.host().ok_or_else(|| anyhow!("{url:?} has no host"))?;
        let host = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned();
        let port = uri.port_u16().unwrap_or(80);
        let mut path_and_query = uri.path_and_query().map_or("/", |p| p.as_str()).to_owned();
        let mut shown = url.trim_end_matches('/').to_owned();
        if path_and_query == "/" {
            path_and_query = "/metrics".to_owned();
            shown.push_str("/metrics");
        } else {
            shown = url.to_owned();
        }
        Ok(Target {
            url: shown,
            host,
            port,
            path_and_query,
        })
    }

    fn authority(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

/// What a successful GET returned.
#[derive(Debug)]
pub(crate) struct Response {
    /// The body.
    pub(crate) body: Bytes,
    /// The `Content-Type` header, if any.
    pub(crate) content_type: Option<String>,
}

/// GETs `target` within `timeout` (connection and body together), refusing bodies larger than
/// `max_body` bytes and any status other than 200.
pub(crate) async fn get(
    target: &Target,
    accept: &str,
    timeout: Duration,
    max_body: usize,
) -> Result<Response> {
    match tokio::time::timeout(timeout, get_inner(target, accept, max_body)).await {
        Ok(r) => r,
        Err(_) => bail!("timed out after {}", crate::units::format_duration(timeout)),
    }
}

async fn get_inner(target: &Target, accept: &str, max_body: usize) -> Result<Response> {
    let stream = TcpStream::connect((target.host.as_str(), target.port))
        .await
        .map_err(|e| anyhow!("cannot connect to {}: {e}", target.authority()))?;
    let _ = stream.set_nodelay(true);
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .context("HTTP handshake failed")?;
    let conn = tokio::spawn(conn);
    let req = http::Request::get(target.path_and_query.as_str())
        .header(http::header::HOST, target.authority())
        .header(http::header::ACCEPT, accept)
        .header(
            http::header::USER_AGENT,
            concat!("inferscale/", env!("CARGO_PKG_VERSION")),
        )
        .body(Empty::<Bytes>::new())
        .context("building the request")?;
    let resp = sender
        .send_request(req)
        .await
        .context("the server closed the connection")?;
    let status = resp.status();
    let content_type = resp
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let body = Limited::new(resp.into_body(), max_body)
        .collect()
        .await
        .map_err(|e| {
            if e.is::<http_body_util::LengthLimitError>() {
                anyhow!("the body is larger than {max_body} bytes (raise --max-body)")
            } else {
                anyhow!("reading the body failed: {e}")
            }
        })?
        .to_bytes();
    conn.abort();
    if !status.is_success() {
        let snippet: String = String::from_utf8_lossy(&body[..body.len().min(200)])
            .chars()
            .filter(|c| !c.is_control())
            .collect();
        bail!(
            "HTTP {status}{}",
            if snippet.is_empty() {
                String::new()
            } else {
                format!(": {snippet}")
            }
        );
    }
    Ok(Response { body, content_type })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        let t = Target::parse("http://127.0.0.1:8000").unwrap();
        assert_eq!(
            (t.url.as_str(), t.path_and_query.as_str(), t.port),
            ("http://127.0.0.1:8000/metrics", "/metrics", 8000)
        );
        let t = Target::parse("http://[::1]:9400/metrics?x=1").unwrap();
        assert_eq!(
            (t.host.as_str(), t.authority(), t.path_and_query.as_str()),
            ("::1", "[::1]:9400".to_owned(), "/metrics?x=1")
        );
        assert!(
            Target::parse("https://x")
                .unwrap_err()
                .to_string()
                .contains("https")
        );
        assert!(Target::parse("ftp://x").is_err());
        assert!(Target::parse("http://").is_err());
    }
}
