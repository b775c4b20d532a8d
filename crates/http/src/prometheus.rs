//! Prometheus' HTTP API, read: `inferscale monitor --prometheus` evaluates its signals there
//! and `inferscale check` asks it what it scrapes, which rules it has loaded and which
//! alerts are active. Every read goes through the one `GET` ([`get`]), with its timeout,
//! body limit, credentials and TLS.
//!
//! The answers are returned as JSON (`data`, with `status: error` turned into an error);
//! reading them into PromQL values is `inferscale_promql::from_api_json`'s job.

use std::fmt::Write as _;

use crate::target::Target;
use crate::transport::{FetchError, Get, get};

/// A Prometheus server (or anything that answers its HTTP API: Thanos, Mimir, Amazon
/// Managed Prometheus behind a signing proxy).
#[derive(Debug, Clone)]
pub struct Prometheus {
    base: Target,
    how: Get,
}

/// Why an API call gave no data. Each names the URL.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ApiCallError {
    /// No answer.
    #[error("{url}")]
    Fetch {
        /// The URL called (the query string left out).
        url: String,
        /// Why.
        #[source]
        source: FetchError,
    },
    /// An answer that is not the API's JSON (a proxy's error page, a login form).
    #[error("{url}: HTTP {status}, not Prometheus' API JSON{}", if snippet.is_empty() { String::new() } else { format!(": {snippet}") })]
    NotApi {
        /// The URL called.
        url: String,
        /// The HTTP status.
        status: u16,
        /// The start of the body, control characters removed.
        snippet: String,
    },
    /// The API answered with an error (`status: error`).
    #[error("{url}: Prometheus answered {error_type}: {error}")]
    Refused {
        /// The URL called.
        url: String,
        /// `errorType`.
        error_type: String,
        /// `error`.
        error: String,
    },
}

/// `s` percent-encoded for a query string (RFC 3986 unreserved characters kept).
///
/// ```
/// assert_eq!(inferscale_http::prometheus::encode("a b{c=\"d\"}"), "a%20b%7Bc%3D%22d%22%7D");
/// ```
pub fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len() * 3);
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(char::from(b));
            }
            _ => {
                let _ = write!(out, "%{b:02X}");
            }
        }
    }
    out
}

impl Prometheus {
    /// The server at `base` (`http://prometheus:9090`, or a prefix such as
    /// `http://gw/prometheus`), read with `how`'s timeout, limit, credentials and TLS.
    pub fn new(base: Target, how: Get) -> Prometheus {
        let mut how = how;
        how.accept = "application/json".into();
        Prometheus { base, how }
    }

    /// The base URL.
    pub fn url(&self) -> &str {
        &self.base.url
    }

    /// `GET {base}{path}?{query}`: the answer's whole JSON when its status is `success`.
    pub async fn call(
        &self,
        path: &str,
        params: &[(&str, &str)],
    ) -> Result<serde_json::Value, ApiCallError> {
        let mut target = self.base.with_path(path);
        let shown = target.url.clone();
        if !params.is_empty() {
            let q: Vec<String> = params
                .iter()
                .map(|(k, v)| format!("{k}={}", encode(v)))
                .collect();
            target.path_and_query = format!("{}?{}", target.path_and_query, q.join("&"));
        }
        let f = get(&target, &self.how)
            .await
            .map_err(|source| ApiCallError::Fetch {
                url: shown.clone(),
                source,
            })?;
        let json: Option<serde_json::Value> = serde_json::from_slice(&f.body).ok();
        let Some(json) = json.filter(|j| j.get("status").is_some()) else {
            let snippet: String = String::from_utf8_lossy(&f.body[..f.body.len().min(200)])
                .chars()
                .filter(|c| !c.is_control())
                .collect();
            return Err(ApiCallError::NotApi {
                url: shown,
                status: f.status,
                snippet,
            });
        };
        if json["status"] == "error" {
            let text = |k: &str| {
                json.get(k)
                    .and_then(|v| v.as_str())
                    .unwrap_or("")
                    .to_owned()
            };
            return Err(ApiCallError::Refused {
                url: shown,
                error_type: text("errorType"),
                error: text("error"),
            });
        }
        Ok(json)
    }

    /// `/api/v1/query`: `expr` at `time` (seconds since the epoch; `None`: now). The whole
    /// answer, for `inferscale_promql::from_api_json`.
    pub async fn query(
        &self,
        expr: &str,
        time: Option<f64>,
    ) -> Result<serde_json::Value, ApiCallError> {
        let t = time.map(|t| format!("{t:.3}"));
        let mut params = vec![("query", expr)];
        if let Some(t) = &t {
            params.push(("time", t.as_str()));
        }
        self.call("/api/v1/query", &params).await
    }

    /// `/api/v1/query_range`: `expr` from `start` to `end` (seconds since the epoch) every
    /// `step_s` seconds. The whole answer, for `inferscale_promql::from_api_json`.
    pub async fn query_range(
        &self,
        expr: &str,
        start: f64,
        end: f64,
        step_s: f64,
    ) -> Result<serde_json::Value, ApiCallError> {
        let (start, end, step) = (
            format!("{start:.3}"),
            format!("{end:.3}"),
            format!("{step_s:.3}"),
        );
        self.call(
            "/api/v1/query_range",
            &[
                ("query", expr),
                ("start", &start),
                ("end", &end),
                ("step", &step),
            ],
        )
        .await
    }

    /// `/api/v1/rules?type=alert`: the alerting rules Prometheus has loaded, with their
    /// health and their alerts.
    pub async fn alert_rules(&self) -> Result<serde_json::Value, ApiCallError> {
        self.call("/api/v1/rules", &[("type", "alert")]).await
    }

    /// `/api/v1/alerts`: the active (pending and firing) alerts.
    pub async fn alerts(&self) -> Result<serde_json::Value, ApiCallError> {
        self.call("/api/v1/alerts", &[]).await
    }

    /// `/api/v1/targets?state=active`: what it scrapes, with each target's health.
    pub async fn targets(&self) -> Result<serde_json::Value, ApiCallError> {
        self.call("/api/v1/targets", &[("state", "active")]).await
    }
}
