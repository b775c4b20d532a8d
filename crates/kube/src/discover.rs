//! A Service's pods, from its EndpointSlices: listed once, then watched, so that a pod that
//! appears or vanishes changes the next answer without a list per poll.
//!
//! One watcher per (namespace, Service), started by the first caller that names it: kube-rs's
//! runtime watcher on `discovery.k8s.io/v1` EndpointSlices labelled
//! `kubernetes.io/service-name`. It lists, then watches from the list's `resourceVersion`
//! with bookmarks on; a watch the server closes is re-opened from the last version seen
//! (bookmarks move it on), one that expires (`410 Gone`) is followed by a fresh list. After an
//! error the next try waits 1 s, doubling to 30 s. While the API server cannot be reached the
//! last endpoints known stand; before any are known, the error is the answer.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures_util::StreamExt;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::runtime::watcher::{self, Event};
use tokio::sync::watch;

use crate::Kube;

/// How long the first answer for a Service may take (the initial list).
const FIRST_LIST_WAIT: Duration = Duration::from_secs(5);

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
    /// The API server could not be asked, or refused: the client's reason, causes and all
    /// (text, so that the watcher's latest can be handed to every caller).
    #[error("the EndpointSlices of {namespace}/{service}: {reason}")]
    Request {
        /// The Service's namespace.
        namespace: String,
        /// The Service.
        service: String,
        /// Why, with its causes.
        reason: String,
    },
    /// A slice has no port of the name asked for.
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

/// A ready pod of a Service.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Endpoint {
    /// Its base URL (`http://10.0.0.5:8000`).
    pub url: String,
    /// The pod's name (the endpoint's `targetRef`), when the slice gives it.
    pub pod: Option<String>,
}

/// One EndpointSlice, as far as discovery cares.
#[derive(Debug, Clone, PartialEq, Default)]
struct Slice {
    /// Ready endpoints' first address, and their pod's name.
    ready: Vec<(String, Option<String>)>,
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

    /// Where the API's configuration came from.
    pub fn source(&self) -> &str {
        self.kube.source()
    }

    /// The base URLs of `service`'s ready pods in `namespace`, on `port` (a number, or the
    /// name of an EndpointSlice port), sorted.
    ///
    /// # Errors
    ///
    /// Before the first list: when it fails or does not come within 5 s. After: when a slice
    /// has no port of that name.
    pub async fn urls(
        &self,
        namespace: &str,
        service: &str,
        port: &str,
    ) -> Result<Vec<String>, DiscoveryError> {
        let e = self.endpoints(namespace, service, port).await?;
        let mut urls: Vec<String> = e.into_iter().map(|e| e.url).collect();
        urls.dedup();
        Ok(urls)
    }

    /// As [`urls`](Self::urls), with each pod's name.
    ///
    /// # Errors
    ///
    /// As [`urls`](Self::urls).
    pub async fn endpoints(
        &self,
        namespace: &str,
        service: &str,
        port: &str,
    ) -> Result<Vec<Endpoint>, DiscoveryError> {
        let mut rx = {
            let mut w = self.watched.lock().unwrap_or_else(PoisonError::into_inner);
            w.entry((namespace.to_owned(), service.to_owned()))
                .or_insert_with(|| {
                    let (tx, rx) = watch::channel(None);
                    tokio::spawn(run(
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
) -> Result<Vec<Endpoint>, DiscoveryError> {
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
        for (a, pod) in &s.ready {
            let url = if a.contains(':') {
                format!("http://[{a}]:{n}")
            } else {
                format!("http://{a}:{n}")
            };
            urls.push(Endpoint {
                url,
                pod: pod.clone(),
            });
        }
    }
    urls.sort();
    urls.dedup_by(|a, b| a.url == b.url);
    Ok(urls)
}

/// A slice as discovery keeps it; `None` without a name.
fn slice_of(v: &EndpointSlice) -> Option<(String, Slice)> {
    let name = v.metadata.name.clone()?;
    let mut s = Slice::default();
    for e in &v.endpoints {
        // A missing `ready` is unknown, which Kubernetes says to read as ready.
        let ready = e.conditions.as_ref().and_then(|c| c.ready).unwrap_or(true);
        if let (true, Some(a)) = (ready, e.addresses.first()) {
            let pod = e
                .target_ref
                .as_ref()
                .filter(|r| r.kind.as_deref() == Some("Pod"))
                .and_then(|r| r.name.clone());
            s.ready.push((a.clone(), pod));
        }
    }
    for p in v.ports.iter().flatten() {
        if let Some(n) = p.port.and_then(|n| u16::try_from(n).ok()) {
            s.ports.push((p.name.clone().unwrap_or_default(), n));
        }
    }
    Some((name, s))
}

async fn run(
    kube: Kube,
    namespace: String,
    service: String,
    tx: watch::Sender<Option<Result<Slices, DiscoveryError>>>,
) {
    let api: kube::Api<EndpointSlice> = kube::Api::namespaced(kube.client(), &namespace);
    let config =
        watcher::Config::default().labels(&format!("kubernetes.io/service-name={service}"));
    let mut events = std::pin::pin!(watcher::watcher(api, config));
    let mut slices = Slices::new();
    // A relist's objects, gathered until it is done, so that a half-listed state is never
    // an answer.
    let mut relist: Option<Slices> = None;
    let mut backoff = Duration::from_secs(1);
    while let Some(ev) = events.next().await {
        if tx.is_closed() {
            return;
        }
        match ev {
            Ok(ev) => {
                backoff = Duration::from_secs(1);
                match ev {
                    Event::Init => relist = Some(Slices::new()),
                    Event::InitApply(s) => {
                        if let (Some(r), Some((name, s))) = (relist.as_mut(), slice_of(&s)) {
                            r.insert(name, s);
                        }
                    }
                    Event::InitDone => slices = relist.take().unwrap_or_default(),
                    Event::Apply(s) => {
                        if let Some((name, s)) = slice_of(&s) {
                            slices.insert(name, s);
                        }
                    }
                    Event::Delete(s) => {
                        if let Some((name, _)) = slice_of(&s) {
                            slices.remove(&name);
                        }
                    }
                }
                if relist.is_none() {
                    tx.send_replace(Some(Ok(slices.clone())));
                }
            }
            Err(e) => {
                let reason = inferscale_http::with_causes(&e);
                eprintln!(
                    "inferscale: EndpointSlices of {namespace}/{service}: {reason}; trying again in {} s",
                    backoff.as_secs()
                );
                // The last endpoints known stand; before any, the error is the answer.
                if tx.borrow().as_ref().is_none_or(|r| r.is_err()) {
                    tx.send_replace(Some(Err(DiscoveryError::Request {
                        namespace: namespace.clone(),
                        service: service.clone(),
                        reason,
                    })));
                }
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(30));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_endpoints_on_a_named_or_numbered_port() {
        let v: EndpointSlice = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "vllm-abc"},
            "addressType": "IPv4",
            "endpoints": [
                {"addresses": ["10.0.0.1"], "conditions": {"ready": true},
                 "targetRef": {"kind": "Pod", "name": "vllm-0", "namespace": "llm"}},
                {"addresses": ["10.0.0.2"], "conditions": {"ready": false}},
                {"addresses": ["10.0.0.3"]},
                {"addresses": ["fd00::4"], "conditions": {"ready": true}}
            ],
            "ports": [{"name": "http", "port": 8000, "protocol": "TCP"}]
        }))
        .unwrap_or_default();
        let mut slices = Slices::new();
        let (name, s) = slice_of(&v).unwrap_or_default();
        slices.insert(name, s);
        assert_eq!(
            urls_of(&slices, "llm", "vllm", "http")
                .map(|e| e.into_iter().map(|e| (e.url, e.pod)).collect::<Vec<_>>()),
            Ok(vec![
                ("http://10.0.0.1:8000".to_owned(), Some("vllm-0".to_owned())),
                ("http://10.0.0.3:8000".to_owned(), None),
                ("http://[fd00::4]:8000".to_owned(), None),
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
