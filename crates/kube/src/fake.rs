//! A loopback server that answers like the Kubernetes API, for tests (feature `fake`): lists
//! and watches (chunked JSON lines) of the collections it holds, label selectors of the
//! `key` and `key=value` forms, bearer-token authentication, and the events a test drives —
//! objects applied and deleted, bookmarks, watches the server closes, history compacted
//! (`410 Gone`), kinds it does not serve (404) and lists RBAC denies (403).
//!
//! Collections are named by their URL path, as the API serves them:
//! `/apis/discovery.k8s.io/v1/namespaces/llm/endpointslices`.

use std::collections::{BTreeMap, BTreeSet};
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::{Body, Frame, Incoming};
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::mpsc;

/// One request the server was sent.
#[derive(Debug, Clone, PartialEq)]
pub struct Asked {
    /// The path.
    pub path: String,
    /// The query's parameters, decoded.
    pub query: BTreeMap<String, String>,
    /// The `Authorization` header.
    pub auth: String,
}

impl Asked {
    /// A watch (else a list).
    pub fn is_watch(&self) -> bool {
        self.query
            .get("watch")
            .is_some_and(|w| w == "true" || w == "1")
    }
}

struct Watcher {
    collection: String,
    selector: Option<String>,
    tx: mpsc::UnboundedSender<Bytes>,
}

#[derive(Default)]
struct State {
    token: String,
    collections: BTreeMap<String, BTreeMap<String, Value>>,
    forbidden: BTreeSet<String>,
    rv: u64,
    /// Every event, with its collection and version: a watch from version V is first sent
    /// those after V, as the API server does.
    events: Vec<(String, u64, Value)>,
    watchers: Vec<Watcher>,
    /// Watches from a version before this are refused with 410 (history compacted).
    compacted_at: u64,
    asked: Vec<Asked>,
}

/// The fake API server; it stops when dropped… with the test's runtime.
#[derive(Clone)]
pub struct FakeApi {
    url: String,
    state: Arc<Mutex<State>>,
}

fn decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = b
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (b[i], hex) {
            (b'%', Some(v)) => {
                out.push(v);
                i += 3;
                continue;
            }
            (b'+', _) => out.push(b' '),
            (c, _) => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn query_of(q: Option<&str>) -> BTreeMap<String, String> {
    q.unwrap_or("")
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (decode(k), decode(v))
        })
        .collect()
}

/// Whether `obj`'s labels match `selector` (`a=b,c`: equality and existence terms).
fn matches(obj: &Value, selector: Option<&str>) -> bool {
    let Some(sel) = selector.filter(|s| !s.is_empty()) else {
        return true;
    };
    let labels = obj.pointer("/metadata/labels");
    sel.split(',').all(|term| {
        let (k, v) = match term.split_once('=') {
            Some((k, v)) => (k.trim_end_matches('='), Some(v)),
            None => (term, None),
        };
        match (labels.and_then(|l| l.get(k)).and_then(Value::as_str), v) {
            (Some(have), Some(want)) => have == want,
            (Some(_), None) => true,
            (None, _) => false,
        }
    })
}

fn line(kind: &str, obj: &Value) -> Bytes {
    Bytes::from(format!("{}\n", json!({"type": kind, "object": obj})))
}

fn status(code: u16, reason: &str, message: &str) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "reason": reason, "code": code})
}

impl State {
    /// Stores `obj` (or removes it, for `DELETED`) at a new version, and tells the watchers.
    fn event(&mut self, collection: &str, kind: &str, mut obj: Value) {
        self.rv += 1;
        obj["metadata"]["resourceVersion"] = json!(self.rv.to_string());
        let name = obj
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let c = self.collections.entry(collection.to_owned()).or_default();
        if kind == "DELETED" {
            c.remove(&name);
        } else {
            c.insert(name, obj.clone());
        }
        self.events.push((
            collection.to_owned(),
            self.rv,
            json!({"type": kind, "object": obj}),
        ));
        let l = line(kind, &obj);
        self.watchers.retain(|w| {
            if w.collection != collection || !matches(&obj, w.selector.as_deref()) {
                return !w.tx.is_closed();
            }
            w.tx.send(l.clone()).is_ok()
        });
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

fn json_response(code: StatusCode, v: &Value) -> Response<AnyBody> {
    let mut r = Response::new(Full::from(v.to_string()).boxed());
    *r.status_mut() = code;
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    r
}

impl FakeApi {
    /// A server on a loopback port that accepts `Bearer <token>` only (any request, with an
    /// empty `token`). Must run inside a tokio runtime.
    pub async fn start(token: &str) -> FakeApi {
        let l = TcpListener::bind("127.0.0.1:0")
            .await
            .unwrap_or_else(|e| panic!("fake API: bind: {e}"));
        let url = format!(
            "http://{}",
            l.local_addr()
                .unwrap_or_else(|e| panic!("fake API: address: {e}"))
        );
        let api = FakeApi {
            url,
            state: Arc::new(Mutex::new(State {
                token: token.to_owned(),
                ..State::default()
            })),
        };
        let shared = api.clone();
        tokio::spawn(async move {
            loop {
                let Ok((s, _)) = l.accept().await else { return };
                let api = shared.clone();
                tokio::spawn(async move {
                    let svc = service_fn(move |req| {
                        let api = api.clone();
                        async move { Ok::<_, Infallible>(api.handle(&req)) }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(s), svc)
                        .await;
                });
            }
        });
        api
    }

    /// Its base URL (`http://127.0.0.1:PORT`).
    pub fn url(&self) -> &str {
        &self.url
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Serves `collection` (empty until objects are applied to it).
    pub fn serve(&self, collection: &str) {
        self.state()
            .collections
            .entry(collection.to_owned())
            .or_default();
    }

    /// Answers lists of `collection` with 403, as RBAC does.
    pub fn forbid(&self, collection: &str) {
        self.state().forbidden.insert(collection.to_owned());
    }

    /// Adds or replaces an object (by `metadata.name`): `ADDED` or `MODIFIED` to watchers.
    pub fn apply(&self, collection: &str, obj: Value) {
        let mut s = self.state();
        let name = obj.pointer("/metadata/name").and_then(Value::as_str);
        let known = s
            .collections
            .get(collection)
            .is_some_and(|c| name.is_some_and(|n| c.contains_key(n)));
        s.event(collection, if known { "MODIFIED" } else { "ADDED" }, obj);
    }

    /// Adds or replaces an object without telling any watcher, as a change that falls in a
    /// gap only a relist sees.
    pub fn apply_quietly(&self, collection: &str, mut obj: Value) {
        let mut s = self.state();
        s.rv += 1;
        obj["metadata"]["resourceVersion"] = json!(s.rv.to_string());
        let name = obj
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        s.collections
            .entry(collection.to_owned())
            .or_default()
            .insert(name, obj);
    }

    /// Deletes an object: `DELETED` to watchers.
    pub fn delete(&self, collection: &str, name: &str) {
        let mut s = self.state();
        if let Some(o) = s
            .collections
            .get(collection)
            .and_then(|c| c.get(name))
            .cloned()
        {
            s.event(collection, "DELETED", o);
        }
    }

    /// Sends every open watch of `collection` a `BOOKMARK` at a new version (no object
    /// changed); returns the version.
    pub fn bookmark(&self, collection: &str, api_version: &str, kind: &str) -> u64 {
        let mut s = self.state();
        s.rv += 1;
        let rv = s.rv;
        let obj = json!({"apiVersion": api_version, "kind": kind,
            "metadata": {"resourceVersion": rv.to_string(),
                "annotations": {"k8s.io/initial-events-end": "true"}}});
        let l = line("BOOKMARK", &obj);
        s.watchers
            .retain(|w| w.collection != collection || w.tx.send(l.clone()).is_ok());
        rv
    }

    /// Ends every open watch, as the server does when a watch's timeout passes.
    pub fn close_watches(&self) {
        self.state().watchers.clear();
    }

    /// The history is compacted: every open watch is sent a 410 and ends, and a watch from
    /// any version before now is refused with 410.
    pub fn expire(&self) {
        let mut s = self.state();
        let l = line("ERROR", &status(410, "Expired", "too old resource version"));
        for w in s.watchers.drain(..) {
            let _ = w.tx.send(l.clone());
        }
        s.events.clear();
        s.compacted_at = s.rv;
    }

    /// Every request so far.
    pub fn asked(&self) -> Vec<Asked> {
        self.state().asked.clone()
    }

    fn handle(&self, req: &Request<Incoming>) -> Response<AnyBody> {
        let asked = Asked {
            path: req.uri().path().to_owned(),
            query: query_of(req.uri().query()),
            auth: req
                .headers()
                .get(http::header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_owned(),
        };
        let mut s = self.state();
        s.asked.push(asked.clone());
        if !s.token.is_empty() && asked.auth != format!("Bearer {}", s.token) {
            return json_response(
                StatusCode::UNAUTHORIZED,
                &status(401, "Unauthorized", "Unauthorized"),
            );
        }
        if asked.path == "/version" {
            return json_response(
                StatusCode::OK,
                &json!({"major": "1", "minor": "33", "gitVersion": "v1.33.0-fake",
                    "platform": "linux/amd64"}),
            );
        }
        if s.forbidden.contains(&asked.path) {
            return json_response(
                StatusCode::FORBIDDEN,
                &status(
                    403,
                    "Forbidden",
                    &format!(
                        "{} is forbidden: User \"test\" cannot list resource",
                        asked.path
                    ),
                ),
            );
        }
        let Some(objects) = s.collections.get(&asked.path) else {
            return json_response(
                StatusCode::NOT_FOUND,
                &status(
                    404,
                    "NotFound",
                    "the server could not find the requested resource",
                ),
            );
        };
        let selector = asked.query.get("labelSelector").cloned();
        if asked.is_watch() {
            let from: u64 = asked
                .query
                .get("resourceVersion")
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            let (tx, rx) = mpsc::unbounded_channel();
            if from < s.compacted_at {
                let _ = tx.send(line(
                    "ERROR",
                    &status(410, "Expired", "too old resource version"),
                ));
                return Response::new(Lines(rx).boxed());
            }
            for (c, rv, ev) in &s.events {
                if *c == asked.path && *rv > from && matches(&ev["object"], selector.as_deref()) {
                    let _ = tx.send(Bytes::from(format!("{ev}\n")));
                }
            }
            s.watchers.push(Watcher {
                collection: asked.path.clone(),
                selector,
                tx,
            });
            return Response::new(Lines(rx).boxed());
        }
        let items: Vec<Value> = objects
            .values()
            .filter(|o| matches(o, selector.as_deref()))
            .cloned()
            .collect();
        json_response(
            StatusCode::OK,
            &json!({"kind": "List", "apiVersion": "v1",
                "metadata": {"resourceVersion": s.rv.to_string()}, "items": items}),
        )
    }
}

/// The collection of a namespace's EndpointSlices, as the API serves it.
pub fn slices_of(namespace: &str) -> String {
    format!("/apis/discovery.k8s.io/v1/namespaces/{namespace}/endpointslices")
}

/// An EndpointSlice of `service` in `namespace`, port `http` = `port`, with these endpoints:
/// `(address, ready, pod name)`.
pub fn endpoint_slice(
    namespace: &str,
    service: &str,
    name: &str,
    port: u16,
    endpoints: &[(&str, bool, Option<&str>)],
) -> Value {
    json!({
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"kubernetes.io/service-name": service},
        },
        "addressType": "IPv4",
        "endpoints": endpoints.iter().map(|(a, ready, pod)| {
            let mut e = json!({
                "addresses": [a],
                "conditions": {"ready": ready, "serving": ready, "terminating": false},
            });
            if let Some(p) = pod {
                e["targetRef"] = json!({"kind": "Pod", "name": p, "namespace": namespace});
            }
            e
        }).collect::<Vec<_>>(),
        "ports": [{"name": "http", "port": port, "protocol": "TCP"}],
    })
}

/// Writes, in `dir`, an exec credential plugin (a script shaped like `aws eks get-token`
/// that logs its arguments and environment to `dir/calls` and prints an ExecCredential
/// carrying `token`) and a kubeconfig whose current context `laptop` points nowhere and
/// whose context `eks-prod` (namespace `llm`) reaches `server` as the plugin's user. Returns
/// the kubeconfig's path.
///
/// # Panics
///
/// When the files cannot be written.
pub fn exec_kubeconfig(dir: &std::path::Path, server: &str, token: &str) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt as _;
    let plugin = dir.join("get-token");
    let write = |p: &std::path::Path, text: String| {
        std::fs::write(p, text).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    };
    write(
        &plugin,
        format!(
            "#!/bin/sh\necho \"$* cluster=$AWS_CLUSTER info=${{KUBERNETES_EXEC_INFO:+set}}\" >> {}\nprintf '%s' '{{\"kind\":\"ExecCredential\",\"apiVersion\":\"client.authentication.k8s.io/v1beta1\",\"spec\":{{}},\"status\":{{\"expirationTimestamp\":\"2099-01-01T00:00:00Z\",\"token\":\"{token}\"}}}}'\n",
            dir.join("calls").display()
        ),
    );
    std::fs::set_permissions(&plugin, std::fs::Permissions::from_mode(0o755))
        .unwrap_or_else(|e| panic!("{}: {e}", plugin.display()));
    let config = dir.join("kubeconfig");
    write(
        &config,
        format!(
            "apiVersion: v1
kind: Config
current-context: laptop
clusters:
- name: eks
  cluster:
    server: {server}
- name: nowhere
  cluster:
    server: http://127.0.0.1:9
contexts:
- name: laptop
  context: {{cluster: nowhere, user: static}}
- name: eks-prod
  context: {{cluster: eks, user: eks-user, namespace: llm}}
users:
- name: static
  user: {{token: wrong}}
- name: eks-user
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1beta1
      command: {}
      args: [eks, get-token, --cluster-name, prod]
      env:
      - {{name: AWS_CLUSTER, value: prod}}
      interactiveMode: Never
",
            plugin.display()
        ),
    );
    config
}

/// [`endpoint_slice`] of Service `vllm` in `llm`, endpoints `(address, ready)` without pod
/// names: what most tests need.
pub fn vllm_slice(name: &str, port: u16, endpoints: &[(&str, bool)]) -> Value {
    let e: Vec<(&str, bool, Option<&str>)> =
        endpoints.iter().map(|(a, r)| (*a, *r, None)).collect();
    endpoint_slice("llm", "vllm", name, port, &e)
}
