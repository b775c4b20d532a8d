//! The HTTP side, beside gRPC: `/metrics` (the scaler's own), `/healthz`, and
//! `/api/v1/value`, the JSON KEDA's `metrics-api` trigger reads.
//!
//! `/api/v1/value` takes the same keys as a gRPC trigger's `scalerMetadata`, as query
//! parameters (`?service=vllm&port=8000&metric=queue_depth&target=5`), plus `scaledObject`
//! (a name for the scaler's metrics, default `metrics-api`). It answers
//! `{"metric": …, "value": …, "target": …, "pods": …, "failed": …, "failures": […]}`; a
//! `metrics-api` trigger reads it with `valueLocation: value`. A bad key is a 400 naming it,
//! no value a 503: KEDA's fallback engages either way.

use std::collections::BTreeMap;
use std::convert::Infallible;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::grpc::Code;
use crate::service::{Scaler, hpa_target};

/// Serves the HTTP side on `listener` until `shutdown` turns true.
pub async fn serve(listener: TcpListener, scaler: Scaler, mut shutdown: watch::Receiver<bool>) {
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            _ = async { drop(shutdown.wait_for(|s| *s).await) } => break,
        };
        let Ok((stream, _)) = accepted else { continue };
        let scaler = scaler.clone();
        let mut stop = shutdown.clone();
        tokio::spawn(async move {
            let svc = service_fn(move |req| {
                let scaler = scaler.clone();
                async move { Ok::<_, Infallible>(route(req, scaler).await) }
            });
            let stopped = async move { drop(stop.wait_for(|s| *s).await) };
            inferscale_http::server::serve_connection(stream, svc, stopped).await;
        });
    }
}

fn respond(
    status: StatusCode,
    content_type: &str,
    body: impl Into<Bytes>,
) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(body.into()));
    *r.status_mut() = status;
    if let Ok(v) = http::HeaderValue::from_str(content_type) {
        r.headers_mut().insert(http::header::CONTENT_TYPE, v);
    }
    r
}

fn json_error(status: StatusCode, message: &str) -> Response<Full<Bytes>> {
    let body = serde_json::json!({ "error": message });
    respond(status, "application/json", body.to_string())
}

async fn route(req: Request<Incoming>, scaler: Scaler) -> Response<Full<Bytes>> {
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return json_error(StatusCode::METHOD_NOT_ALLOWED, "only GET is served");
    }
    match req.uri().path() {
        "/healthz" => respond(StatusCode::OK, "text/plain; charset=utf-8", "ok\n"),
        "/metrics" => respond(
            StatusCode::OK,
            "text/plain; version=0.0.4; charset=utf-8",
            scaler.metrics().render(),
        ),
        "/api/v1/value" => value(req.uri().query().unwrap_or(""), &scaler).await,
        other => json_error(
            StatusCode::NOT_FOUND,
            &format!("no route {other:?} (served: /api/v1/value, /metrics, /healthz)"),
        ),
    }
}

async fn value(query: &str, scaler: &Scaler) -> Response<Full<Bytes>> {
    let mut meta = match parse_query(query) {
        Ok(m) => m,
        Err(e) => return json_error(StatusCode::BAD_REQUEST, &e.to_string()),
    };
    let so = meta
        .remove("scaledObject")
        .unwrap_or_else(|| "metrics-api".to_owned());
    // The ScaledObject's namespace is unknown here: a `service` without `namespace` is
    // looked for in `default`.
    match scaler.value(&so, "default", &meta).await {
        Ok(v) => {
            let body = serde_json::json!({
                "metric": v.config.metric.key(),
                "value": v.answer.value,
                "target": hpa_target(&v.config),
                "pods": v.answer.pods_ok,
                "failed": v.answer.failures.len(),
                "failures": v.answer.failures,
            });
            respond(StatusCode::OK, "application/json", body.to_string())
        }
        Err(s) => {
            let status = match s.code() {
                Code::InvalidArgument => StatusCode::BAD_REQUEST,
                Code::FailedPrecondition => StatusCode::CONFLICT,
                _ => StatusCode::SERVICE_UNAVAILABLE,
            };
            json_error(status, s.message())
        }
    }
}

/// A query string that is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum QueryError {
    /// A key given twice (which one would count?).
    #[error("query parameter {0:?} given twice")]
    Twice(String),
    /// A `%` escape that is not one.
    #[error("{0:?}: a % not followed by two hex digits")]
    BadEscape(String),
    /// Bytes that are not UTF-8 once decoded.
    #[error("{0:?}: not UTF-8 once decoded")]
    NotUtf8(String),
}

/// `a=1&b=x%2Cy` into keys and values; a key given twice is refused (which one would count?).
fn parse_query(q: &str) -> Result<BTreeMap<String, String>, QueryError> {
    let mut m = BTreeMap::new();
    for pair in q.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        let (k, v) = (percent_decode(k)?, percent_decode(v)?);
        if m.insert(k.clone(), v).is_some() {
            return Err(QueryError::Twice(k));
        }
    }
    Ok(m)
}

fn percent_decode(s: &str) -> Result<String, QueryError> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' => {
                let hex = b
                    .get(i + 1..i + 3)
                    .and_then(|h| std::str::from_utf8(h).ok())
                    .and_then(|h| u8::from_str_radix(h, 16).ok())
                    .ok_or_else(|| QueryError::BadEscape(s.to_owned()))?;
                out.push(hex);
                i += 2;
            }
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8(out).map_err(|_| QueryError::NotUtf8(s.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_decode_and_refuse_what_is_ambiguous() {
        let m =
            parse_query("metric=queue_depth&targets=http%3A%2F%2Fa%3A8000%2Chttp://b:8000&x=a+b")
                .unwrap();
        assert_eq!(m["targets"], "http://a:8000,http://b:8000");
        assert_eq!(m["x"], "a b");
        assert_eq!(parse_query("a=1&a=2"), Err(QueryError::Twice("a".into())));
        assert!(
            parse_query("a=%zz")
                .unwrap_err()
                .to_string()
                .contains("hex")
        );
    }
}
