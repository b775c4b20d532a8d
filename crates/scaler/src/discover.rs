//! A Service's pods, from its EndpointSlices: listed once, then watched, so that a pod that
//! appears or vanishes changes the next answer without a list per poll.
//!
//! One watcher per (namespace, Service), started by the first trigger that names it. It
//! lists `discovery.k8s.io/v1` EndpointSlices labelled `kubernetes.io/service-name`, then
//! watches from the list's `resourceVersion`; a watch that ends is re-opened from the last
//! version seen (bookmarks move it on), one that expires (`410 Gone`) or breaks is followed
//! by a fresh list, after a backoff of 1 s doubling to 30 s. While the API server cannot be
//! reached, the last endpoints known stand; before any are known, the error is the answer.
//!
//! Credentials: in a pod, the service account's token and CA
//! (`/var/run/secrets/kubernetes.io/serviceaccount/`) and `KUBERNETES_SERVICE_HOST`/`_PORT`;
//! elsewhere an API URL with a token file (never a token on the command line).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use inferscale_http::Target;
use inferscale_http::auth::{Auth, AuthError};
use inferscale_http::target::UrlError;
use inferscale_http::tls::TlsError;
use inferscale_http::transport::{self, Get};
use serde_json::Value;
use tokio::sync::watch;

/// Where the service account's files are in a pod.
pub const SERVICE_ACCOUNT_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// How long the first answer for a Service may take (the initial list).
const FIRST_LIST_WAIT: Duration = Duration::from_secs(5);

/// A watch line larger than this is refused (a slice holds at most 1,000 endpoints).
const MAX_LINE: usize = 16 << 20;

/// Why the Kubernetes API cannot be reached as given.
#[derive(Debug, thiserror::Error)]
pub enum KubeError {
    /// The API's URL is not one.
    #[error(transparent)]
    Url(#[from] UrlError),
    /// A service account file could not be read.
    #[error("{}", path.display())]
    Read {
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The service account's token is not usable as a bearer token.
    #[error(transparent)]
    Token(#[from] AuthError),
    /// The service account's CA does not make a TLS configuration.
    #[error(transparent)]
    Tls(#[from] TlsError),
}

/// Why a Service's pods are not known.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DiscoveryError {
    /// The first list did not come in time.
    #[error("no EndpointSlices of {namespace}/{service} within {} s", FIRST_LIST_WAIT.as_secs())]
    NoListInTime {
        /// The Service's namespace.
        namespace: String,
        /// The Service.
        service: String,
    },
    /// The watcher ended (the runtime is shutting down).
    #[error("the EndpointSlice watcher stopped")]
    WatcherStopped,
    /// The API server could not be asked: the client's reason, causes and all (text, so
    /// that the watcher's latest can be handed to every caller).
    #[error("{0}")]
    Request(String),
    /// The API server answered with an error.
    #[error("listing the EndpointSlices of {namespace}/{service}: HTTP {status}: {message}")]
    Status {
        /// The Service's namespace.
        namespace: String,
        /// The Service.
        service: String,
        /// The HTTP status.
        status: u16,
        /// The `Status` body's message, or the body's start.
        message: String,
    },
    /// The list is not JSON.
    #[error("the EndpointSlice list is not JSON: {0}")]
    NotJson(String),
    /// A slice has no port of the name the trigger gives.
    #[error(
        "EndpointSlice {namespace}/{slice} of Service {service} has no port named {port:?} (it has {names:?})"
    )]
    NoSuchPort {
        /// The Service's namespace.
        namespace: String,
        /// The slice.
        slice: String,
        /// The Service.
        service: String,
        /// The port name asked for.
        port: String,
        /// The slice's port names.
        names: Vec<String>,
    },
}

/// How to reach the Kubernetes API.
#[derive(Debug, Clone)]
pub struct Kube {
    base: String,
    auth: Auth,
    tls: Option<Arc<rustls::ClientConfig>>,
}

impl Kube {
    /// The API at `base` (`https://host:port`, or `http://` through `kubectl proxy` or a
    /// test server), with `auth` and, for https, `tls`.
    pub fn new(
        base: &str,
        auth: Auth,
        tls: Option<Arc<rustls::ClientConfig>>,
    ) -> Result<Kube, KubeError> {
        Target::parse(base)?;
        Ok(Kube {
            base: base.trim_end_matches('/').to_owned(),
            auth,
            tls,
        })
    }

    /// The API as a pod sees it; `Ok(None)` outside a cluster (no `KUBERNETES_SERVICE_HOST`).
    pub fn in_cluster() -> Result<Option<Kube>, KubeError> {
        let Ok(host) = std::env::var("KUBERNETES_SERVICE_HOST") else {
            return Ok(None);
        };
        let port = std::env::var("KUBERNETES_SERVICE_PORT").unwrap_or_else(|_| "443".into());
        let host = if host.contains(':') {
            format!("[{host}]")
        } else {
            host
        };
        let dir = std::path::Path::new(SERVICE_ACCOUNT_DIR);
        let token_file = dir.join("token");
        let read = |path: std::path::PathBuf| {
            std::fs::read(&path).map_err(|source| KubeError::Read { path, source })
        };
        let token = read(token_file.clone())?;
        let auth = Auth::bearer(
            String::from_utf8_lossy(&token).trim(),
            &token_file.display().to_string(),
        )?;
        let ca_file = dir.join("ca.crt");
        let ca = read(ca_file.clone())?;
        let tls = inferscale_http::tls::client_config(&inferscale_http::tls::TlsOptions {
            ca_pem: Some((ca_file.display().to_string(), ca)),
            insecure: false,
        })?;
        Kube::new(&format!("https://{host}:{port}"), auth, Some(tls)).map(Some)
    }

    fn get(&self, path: &str, timeout: Duration) -> Result<(Target, Get), DiscoveryError> {
        let url = format!("{}{path}", self.base);
        let target = Target::parse(&url).map_err(|e| DiscoveryError::Request(e.to_string()))?;
        let mut how = Get::new("application/json");
        how.auth = self.auth.clone();
        how.tls = self.tls.clone();
        how.timeout = timeout;
        how.max_body = 64 << 20;
        Ok((target, how))
    }
}

/// One EndpointSlice, as far as the scaler cares.
#[derive(Debug, Clone, PartialEq, Default)]
struct Slice {
    /// Ready endpoints' first address.
    ready: Vec<String>,
    /// The slice's ports: name (empty when unnamed) and number.
    ports: Vec<(String, u16)>,
}

type Slices = BTreeMap<String, Slice>;

/// A watcher's latest: `None` before its first list, then the slices or why there are none.
type Latest = watch::Receiver<Option<Result<Slices, DiscoveryError>>>;

/// The Services being watched.
#[derive(Debug)]
pub struct Discovery {
    kube: Kube,
    watched: Mutex<HashMap<(String, String), Latest>>,
}

impl Discovery {
    /// Discovery through `kube`.
    pub fn new(kube: Kube) -> Arc<Discovery> {
        Arc::new(Discovery {
            kube,
            watched: Mutex::new(HashMap::new()),
        })
    }

    /// The base URLs of `service`'s ready pods in `namespace`, on `port` (a number, or the
    /// name of an EndpointSlice port), sorted.
    pub async fn urls(
        &self,
        namespace: &str,
        service: &str,
        port: &str,
    ) -> Result<Vec<String>, DiscoveryError> {
        let mut rx = {
            let mut w = self.watched.lock().unwrap_or_else(PoisonError::into_inner);
            w.entry((namespace.to_owned(), service.to_owned()))
                .or_insert_with(|| {
                    let (tx, rx) = watch::channel(None);
                    tokio::spawn(watcher(
                        self.kube.clone(),
                        namespace.to_owned(),
                        service.to_owned(),
                        tx,
                    ));
                    rx
                })
                .clone()
        };
        let got = tokio::time::timeout(FIRST_LIST_WAIT, rx.wait_for(Option::is_some)).await;
        let slices = match got {
            Err(_) => {
                return Err(DiscoveryError::NoListInTime {
                    namespace: namespace.to_owned(),
                    service: service.to_owned(),
                });
            }
            Ok(Err(_)) => return Err(DiscoveryError::WatcherStopped),
            // `wait_for` returned: the value is `Some`.
            Ok(Ok(v)) => v.clone().unwrap_or(Err(DiscoveryError::WatcherStopped))?,
        };
        urls_of(&slices, namespace, service, port)
    }
}

fn urls_of(
    slices: &Slices,
    namespace: &str,
    service: &str,
    port: &str,
) -> Result<Vec<String>, DiscoveryError> {
    let mut urls = Vec::new();
    for (name, s) in slices {
        if s.ready.is_empty() {
            continue;
        }
        let n: u16 = match port.parse() {
            Ok(n) => n,
            Err(_) => s
                .ports
                .iter()
                .find(|(p, _)| p == port)
                .map(|(_, n)| *n)
                .ok_or_else(|| DiscoveryError::NoSuchPort {
                    namespace: namespace.to_owned(),
                    slice: name.clone(),
                    service: service.to_owned(),
                    port: port.to_owned(),
                    names: s.ports.iter().map(|(p, _)| p.clone()).collect(),
                })?,
        };
        for a in &s.ready {
            urls.push(if a.contains(':') {
                format!("http://[{a}]:{n}")
            } else {
                format!("http://{a}:{n}")
            });
        }
    }
    urls.sort();
    urls.dedup();
    Ok(urls)
}

fn selector_path(namespace: &str, service: &str) -> String {
    format!(
        "/apis/discovery.k8s.io/v1/namespaces/{}/endpointslices?labelSelector=kubernetes.io%2Fservice-name%3D{}",
        encode(namespace),
        encode(service)
    )
}

/// Percent-encodes what is not unreserved in a query (names are DNS labels; this is defence).
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                char::from(b).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// A slice from its JSON; `None` without a name.
fn slice_of(v: &Value) -> Option<(String, Slice)> {
    let name = v.pointer("/metadata/name")?.as_str()?.to_owned();
    let mut s = Slice::default();
    for e in v
        .get("endpoints")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        // A missing `ready` is unknown, which Kubernetes says to read as ready.
        let ready = e
            .pointer("/conditions/ready")
            .and_then(Value::as_bool)
            .unwrap_or(true);
        let addr = e
            .get("addresses")
            .and_then(Value::as_array)
            .and_then(|a| a.first())
            .and_then(Value::as_str);
        if let (true, Some(a)) = (ready, addr) {
            s.ready.push(a.to_owned());
        }
    }
    for p in v
        .get("ports")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let name = p
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        if let Some(n) = p
            .get("port")
            .and_then(Value::as_u64)
            .and_then(|n| u16::try_from(n).ok())
        {
            s.ports.push((name, n));
        }
    }
    Some((name, s))
}

/// The list's slices and its `resourceVersion`.
async fn list(
    kube: &Kube,
    namespace: &str,
    service: &str,
) -> Result<(Slices, String), DiscoveryError> {
    let (target, how) = kube.get(&selector_path(namespace, service), Duration::from_secs(10))?;
    let got = transport::get(&target, &how)
        .await
        .map_err(|e| DiscoveryError::Request(inferscale_http::with_causes(&e)))?;
    if got.status != 200 {
        return Err(DiscoveryError::Status {
            namespace: namespace.to_owned(),
            service: service.to_owned(),
            status: got.status,
            message: api_message(&got.body),
        });
    }
    let v: Value =
        serde_json::from_slice(&got.body).map_err(|e| DiscoveryError::NotJson(e.to_string()))?;
    let rv = v
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    let slices = v
        .get("items")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(slice_of)
        .collect();
    Ok((slices, rv))
}

/// A Kubernetes `Status` body's message, or the body's start.
fn api_message(body: &[u8]) -> String {
    serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|v| v.get("message").and_then(Value::as_str).map(str::to_owned))
        .unwrap_or_else(|| String::from_utf8_lossy(&body[..body.len().min(200)]).into_owned())
}

/// How a watch ended.
enum WatchEnd {
    /// The server closed it (its timeout): re-watch from the version seen.
    Closed,
    /// Relist: the version expired, or the watch failed.
    Relist(String),
}

async fn watch_once(
    kube: &Kube,
    namespace: &str,
    service: &str,
    rv: &mut String,
    slices: &mut Slices,
    tx: &watch::Sender<Option<Result<Slices, DiscoveryError>>>,
) -> WatchEnd {
    let path = format!(
        "{}&watch=true&allowWatchBookmarks=true&timeoutSeconds=300&resourceVersion={}",
        selector_path(namespace, service),
        encode(rv)
    );
    let (target, how) = match kube.get(&path, Duration::from_secs(10)) {
        Ok(g) => g,
        Err(e) => return WatchEnd::Relist(e.to_string()),
    };
    let mut opened = match transport::open(&target, &how).await {
        Ok(o) => o,
        Err(e) => return WatchEnd::Relist(inferscale_http::with_causes(&e)),
    };
    if opened.status == 410 {
        return WatchEnd::Relist("the watch's resourceVersion expired (410)".into());
    }
    if opened.status != 200 {
        return WatchEnd::Relist(format!("watch: HTTP {}", opened.status));
    }
    let mut buf: Vec<u8> = Vec::new();
    loop {
        // A watch with bookmarks hears from the server at least every minute or so; a silent
        // one for 10 minutes is dead.
        let chunk = match tokio::time::timeout(Duration::from_secs(600), opened.chunk()).await {
            Err(_) => return WatchEnd::Relist("the watch went silent".into()),
            Ok(Err(e)) => return WatchEnd::Relist(e.to_string()),
            Ok(Ok(None)) => return WatchEnd::Closed,
            Ok(Ok(Some(c))) => c,
        };
        buf.extend_from_slice(&chunk);
        while let Some(nl) = buf.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = buf.drain(..=nl).collect();
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let Ok(ev) = serde_json::from_slice::<Value>(&line) else {
                return WatchEnd::Relist("a watch event that is not JSON".into());
            };
            let obj = ev.get("object").unwrap_or(&Value::Null);
            if let Some(v) = obj
                .pointer("/metadata/resourceVersion")
                .and_then(Value::as_str)
            {
                *rv = v.to_owned();
            }
            match ev.get("type").and_then(Value::as_str) {
                Some("ADDED" | "MODIFIED") => {
                    if let Some((name, s)) = slice_of(obj) {
                        slices.insert(name, s);
                    }
                }
                Some("DELETED") => {
                    if let Some((name, _)) = slice_of(obj) {
                        slices.remove(&name);
                    }
                }
                Some("BOOKMARK") => continue,
                Some("ERROR") => {
                    let code = obj.get("code").and_then(Value::as_u64).unwrap_or(0);
                    return WatchEnd::Relist(format!(
                        "watch error {code}: {}",
                        obj.get("message").and_then(Value::as_str).unwrap_or("")
                    ));
                }
                _ => continue,
            }
            tx.send_replace(Some(Ok(slices.clone())));
        }
        if buf.len() > MAX_LINE {
            return WatchEnd::Relist(format!("a watch event over {MAX_LINE} bytes"));
        }
    }
}

async fn watcher(
    kube: Kube,
    namespace: String,
    service: String,
    tx: watch::Sender<Option<Result<Slices, DiscoveryError>>>,
) {
    let mut backoff = Duration::from_secs(1);
    loop {
        match list(&kube, &namespace, &service).await {
            Err(e) => {
                // The last endpoints known stand; before any, the error is the answer.
                if tx.borrow().as_ref().is_none_or(|r| r.is_err()) {
                    tx.send_replace(Some(Err(e)));
                }
            }
            Ok((mut slices, mut rv)) => {
                tx.send_replace(Some(Ok(slices.clone())));
                backoff = Duration::from_secs(1);
                loop {
                    match watch_once(&kube, &namespace, &service, &mut rv, &mut slices, &tx).await {
                        WatchEnd::Closed => continue,
                        WatchEnd::Relist(why) => {
                            eprintln!(
                                "inferscale scaler: EndpointSlices of {namespace}/{service}: {why}; listing again"
                            );
                            break;
                        }
                    }
                }
            }
        }
        if tx.is_closed() {
            return;
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(Duration::from_secs(30));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_endpoints_on_a_named_or_numbered_port() {
        let v: Value = serde_json::json!({
            "metadata": {"name": "vllm-abc"},
            "addressType": "IPv4",
            "endpoints": [
                {"addresses": ["10.0.0.1"], "conditions": {"ready": true}},
                {"addresses": ["10.0.0.2"], "conditions": {"ready": false}},
                {"addresses": ["10.0.0.3"]},
                {"addresses": ["fd00::4"], "conditions": {"ready": true}}
            ],
            "ports": [{"name": "http", "port": 8000, "protocol": "TCP"}]
        });
        let mut slices = Slices::new();
        let (name, s) = slice_of(&v).unwrap_or_default();
        slices.insert(name, s);
        assert_eq!(
            urls_of(&slices, "llm", "vllm", "http"),
            Ok(vec![
                "http://10.0.0.1:8000".to_owned(),
                "http://10.0.0.3:8000".to_owned(),
                "http://[fd00::4]:8000".to_owned(),
            ])
        );
        assert_eq!(
            urls_of(&slices, "llm", "vllm", "9400").map(|u| u.len()),
            Ok(3)
        );
        let e = urls_of(&slices, "llm", "vllm", "metrics").unwrap_err();
        assert!(
            matches!(&e, DiscoveryError::NoSuchPort { port, .. } if port == "metrics"),
            "{e}"
        );
        assert!(e.to_string().contains("no port named \"metrics\""), "{e}");
    }
}
