//! Discovery against a local HTTP server that answers like the Kubernetes API: EndpointSlice
//! list and watch (chunked JSON lines), pods appearing, turning unready and vanishing, an
//! expired watch (410) followed by a fresh list; and the scaler answering KEDA for a
//! `service` trigger through it.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use inferscale_clock::Instant;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Full};
use hyper::body::{Body, Frame, Incoming};
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use inferscale_http::Auth;
use inferscale_scaler::discover::{Discovery, Kube};
use inferscale_scaler::proto::{GetMetricsRequest, ScaledObjectRef};
use inferscale_scaler::{Options, Scaler};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};

mod common;
use common::pod_at;

/// What the fake API server holds and has been asked.
#[derive(Default)]
struct Api {
    slices: BTreeMap<String, Value>,
    rv: u64,
    /// Every event sent, with its resourceVersion: a watch from version V is sent those
    /// after V first, as the API server does.
    events: Vec<(u64, String)>,
    watchers: Vec<mpsc::UnboundedSender<Bytes>>,
    /// Each request's path and query, and its Authorization header.
    requests: Vec<(String, String)>,
    lists: usize,
}

type Shared = Arc<Mutex<Api>>;

fn slice(name: &str, port: u16, endpoints: &[(&str, bool)]) -> Value {
    json!({
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": name,
            "namespace": "llm",
            "labels": {"kubernetes.io/service-name": "vllm"},
        },
        "addressType": "IPv4",
        "endpoints": endpoints.iter().map(|(a, ready)| json!({
            "addresses": [a],
            "conditions": {"ready": ready, "serving": ready, "terminating": false},
            "targetRef": {"kind": "Pod", "name": format!("pod-{a}")},
        })).collect::<Vec<_>>(),
        "ports": [{"name": "http", "port": port, "protocol": "TCP"}],
    })
}

impl Api {
    fn event(&mut self, kind: &str, mut obj: Value) {
        self.rv += 1;
        obj["metadata"]["resourceVersion"] = json!(self.rv.to_string());
        let line = format!("{}\n", json!({"type": kind, "object": obj}));
        self.events.push((self.rv, line.clone()));
        self.watchers
            .retain(|w| w.send(Bytes::from(line.clone())).is_ok());
    }

    fn apply(&mut self, s: Value) {
        let name = s["metadata"]["name"].as_str().unwrap().to_owned();
        let kind = if self.slices.contains_key(&name) {
            "MODIFIED"
        } else {
            "ADDED"
        };
        self.slices.insert(name, s.clone());
        self.event(kind, s);
    }

    fn delete(&mut self, name: &str) {
        if let Some(s) = self.slices.remove(name) {
            self.event("DELETED", s);
        }
    }

    /// The server's history is compacted: every open watch gets a 410 and ends.
    fn expire(&mut self) {
        let line = format!(
            "{}\n",
            json!({"type": "ERROR", "object": {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                "message": "too old resource version", "reason": "Expired", "code": 410}})
        );
        for w in self.watchers.drain(..) {
            let _ = w.send(Bytes::from(line.clone()));
        }
    }
}

/// A response body fed line by line from a channel (a watch), ending when it closes.
struct Lines(mpsc::UnboundedReceiver<Bytes>);

impl Body for Lines {
    type Data = Bytes;
    type Error = Infallible;
    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        self.0.poll_recv(cx).map(|o| o.map(|b| Ok(Frame::data(b))))
    }
}

type AnyBody = http_body_util::combinators::BoxBody<Bytes, Infallible>;

async fn handle(req: Request<Incoming>, api: Shared) -> Response<AnyBody> {
    let pq = req
        .uri()
        .path_and_query()
        .map(|p| p.to_string())
        .unwrap_or_default();
    let auth = req
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let mut a = api.lock().unwrap();
    a.requests.push((pq.clone(), auth.clone()));
    if auth != "Bearer sa-token" {
        let mut r = Response::new(
            Full::from(r#"{"kind":"Status","code":401,"message":"Unauthorized"}"#).boxed(),
        );
        *r.status_mut() = http::StatusCode::UNAUTHORIZED;
        return r;
    }
    if pq.contains("watch=true") {
        let (tx, rx) = mpsc::unbounded_channel();
        let from: u64 = pq
            .split("resourceVersion=")
            .nth(1)
            .and_then(|v| v.split('&').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        for (rv, line) in &a.events {
            if *rv > from {
                let _ = tx.send(Bytes::from(line.clone()));
            }
        }
        a.watchers.push(tx);
        return Response::new(Lines(rx).boxed());
    }
    a.lists += 1;
    let body = json!({
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSliceList",
        "metadata": {"resourceVersion": a.rv.to_string()},
        "items": a.slices.values().cloned().collect::<Vec<_>>(),
    });
    Response::new(Full::from(body.to_string()).boxed())
}

async fn fake_api() -> (String, Shared) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", l.local_addr().unwrap());
    let api: Shared = Arc::default();
    let shared = Arc::clone(&api);
    tokio::spawn(async move {
        loop {
            let Ok((s, _)) = l.accept().await else { return };
            let api = Arc::clone(&shared);
            tokio::spawn(async move {
                let svc = service_fn(move |req| {
                    let api = Arc::clone(&api);
                    async move { Ok::<_, Infallible>(handle(req, api).await) }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(s), svc)
                    .await;
            });
        }
    });
    (url, api)
}

fn kube(url: &str) -> Kube {
    Kube::new(url, Auth::bearer("sa-token", "test").unwrap(), None).unwrap()
}

/// Polls `d` until it gives `want`, for at most 5 s.
async fn until(d: &Discovery, port: &str, want: &[&str]) {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let got = d.urls("llm", "vllm", port).await;
        if got.as_deref().ok().is_some_and(|g| g == want) {
            return;
        }
        assert!(Instant::now() < deadline, "wanted {want:?}, have {got:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

// In virtual time: the relist's backoff after a 410 passes at once, and is measured exactly.
#[tokio::test(start_paused = true)]
async fn pods_appear_turn_unready_and_vanish_through_the_watch() {
    let (url, api) = fake_api().await;
    api.lock().unwrap().apply(slice(
        "vllm-a",
        8000,
        &[("10.0.0.1", true), ("10.0.0.2", false)],
    ));
    let d = Discovery::new(kube(&url));
    assert_eq!(
        d.urls("llm", "vllm", "http").await.unwrap(),
        ["http://10.0.0.1:8000"]
    );
    // A second slice appears; a pod becomes ready; another slice goes.
    api.lock()
        .unwrap()
        .apply(slice("vllm-b", 8000, &[("10.0.1.7", true)]));
    until(
        &d,
        "http",
        &["http://10.0.0.1:8000", "http://10.0.1.7:8000"],
    )
    .await;
    api.lock().unwrap().apply(slice(
        "vllm-a",
        8000,
        &[("10.0.0.1", true), ("10.0.0.2", true)],
    ));
    until(
        &d,
        "http",
        &[
            "http://10.0.0.1:8000",
            "http://10.0.0.2:8000",
            "http://10.0.1.7:8000",
        ],
    )
    .await;
    api.lock().unwrap().delete("vllm-b");
    until(
        &d,
        "http",
        &["http://10.0.0.1:8000", "http://10.0.0.2:8000"],
    )
    .await;
    api.lock()
        .unwrap()
        .apply(slice("vllm-a", 8000, &[("10.0.0.2", false)]));
    until(&d, "http", &[]).await;

    // The watch expires (410): a fresh list picks up what changed meanwhile.
    let lists = api.lock().unwrap().lists;
    let expired = Instant::now();
    {
        let mut a = api.lock().unwrap();
        a.expire();
        a.slices.insert(
            "vllm-c".into(),
            slice("vllm-c", 8000, &[("10.0.2.9", true)]),
        );
    }
    until(&d, "http", &["http://10.0.2.9:8000"]).await;
    // The relist waited its first backoff (1 s), and the poll saw it within 20 ms more.
    let waited = expired.elapsed();
    assert!(
        waited >= Duration::from_secs(1) && waited < Duration::from_millis(1100),
        "{waited:?}"
    );
    let a = api.lock().unwrap();
    assert_eq!(a.lists, lists + 1, "one relist after the 410");
    // Every request carried the token and asked for the Service's slices only; watches
    // resume from a version.
    for (pq, auth) in &a.requests {
        assert_eq!(auth, "Bearer sa-token");
        assert!(
            pq.starts_with("/apis/discovery.k8s.io/v1/namespaces/llm/endpointslices?labelSelector=kubernetes.io%2Fservice-name%3Dvllm"),
            "{pq}"
        );
    }
    assert!(
        a.requests
            .iter()
            .any(|(pq, _)| pq.contains("watch=true") && pq.contains("resourceVersion="))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_token_and_a_missing_port_name_are_errors_that_say_so() {
    let (url, api) = fake_api().await;
    api.lock()
        .unwrap()
        .apply(slice("vllm-a", 8000, &[("10.0.0.1", true)]));
    let wrong = Kube::new(&url, Auth::bearer("nope", "test").unwrap(), None).unwrap();
    let e = Discovery::new(wrong)
        .urls("llm", "vllm", "http")
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("HTTP 401") && e.contains("Unauthorized"), "{e}");
    let d = Discovery::new(kube(&url));
    let e = d
        .urls("llm", "vllm", "metrics")
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("no port named \"metrics\""), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keda_gets_the_sum_of_the_services_ready_pods() {
    // Two pods on one port at two loopback addresses, as pods share a container port.
    let (first, _t1, _g1) = pod_at("127.0.0.2:0", Some(3.0)).await;
    let port: u16 = first.rsplit(':').next().unwrap().parse().unwrap();
    let (_second, _t2, _g2) = pod_at(&format!("127.0.0.3:{port}"), Some(4.0)).await;
    let (url, api) = fake_api().await;
    api.lock().unwrap().apply(slice(
        "vllm-a",
        port,
        &[("127.0.0.2", true), ("127.0.0.3", true)],
    ));

    let g = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = g.local_addr().unwrap().to_string();
    let (_stop, rx) = watch::channel(false);
    let scaler = Scaler::new(Options {
        cache_for: Duration::ZERO,
        kube: Some(kube(&url)),
        ..Options::default()
    });
    tokio::spawn(inferscale_scaler::run(scaler, g, None, None, rx));
    let client = inferscale_scaler::grpc::connect(&addr, None).await.unwrap();
    let meta: BTreeMap<String, String> = [
        ("service", "vllm"),
        ("port", "http"),
        ("metric", "queue_depth"),
        ("target", "5"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    let req = GetMetricsRequest {
        scaled_object_ref: Some(ScaledObjectRef {
            name: "vllm".into(),
            namespace: "llm".into(),
            scaler_metadata: meta,
        }),
        metric_name: String::new(),
    };
    let v = client
        .clone()
        .get_metrics(req.clone())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(v.metric_values[0].metric_value_float, 7.0);
    // One pod turns unready: it is no longer counted.
    api.lock().unwrap().apply(slice(
        "vllm-a",
        port,
        &[("127.0.0.2", true), ("127.0.0.3", false)],
    ));
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let v = client
            .clone()
            .get_metrics(req.clone())
            .await
            .unwrap()
            .into_inner()
            .metric_values[0]
            .metric_value_float;
        if v == 3.0 {
            break;
        }
        assert!(Instant::now() < deadline, "still {v}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // None ready: Unavailable, for KEDA's fallback.
    api.lock()
        .unwrap()
        .apply(slice("vllm-a", port, &[("127.0.0.2", false)]));
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match client.clone().get_metrics(req.clone()).await {
            Err(e) => {
                assert_eq!(e.code(), inferscale_scaler::grpc::Code::Unavailable, "{e}");
                assert!(e.message().contains("no pods"), "{e}");
                break;
            }
            Ok(v) => assert!(Instant::now() < deadline, "still {v:?}"),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
