//! Reading a live cluster (`check --kubeconfig/--context`): the deployment's namespace read
//! through `inferscale-kube` as if it were a manifests folder — Deployments, ScaledObjects,
//! PrometheusRules and Grafana dashboard ConfigMaps become the documents the file checks
//! judge — plus what only a cluster has: each ScaledObject's and HPA's status, and the
//! NodePools. A kind the cluster does not serve, or RBAC denies, is noted, not fatal.

use std::path::PathBuf;

use inferscale_kube::Kube;
use inferscale_kube::live::{self, LiveError};
use serde_json::Value;

use crate::ReadError;
use crate::evidence::{Cluster, Condition, Found, LiveHpa, LiveScaledObject, Manifests};

fn conditions(v: &Value) -> Vec<Condition> {
    v.pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|c| {
            let s = |k: &str| c.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
            Condition {
                kind: s("type"),
                status: s("status"),
                reason: s("reason"),
                message: s("message"),
            }
        })
        .collect()
}

fn name_of(v: &Value) -> String {
    v.pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("?")
        .to_owned()
}

/// Reads `namespace` (and the cluster's NodePools) through `kube`.
pub async fn read(kube: &Kube, namespace: &str) -> (Cluster, Manifests) {
    let listed = live::read(kube, namespace).await;
    let mut m = Manifests {
        dir: PathBuf::from(format!("namespace {namespace} of {}", kube.source())),
        ..Manifests::default()
    };
    let mut c = Cluster {
        source: kube.source().to_owned(),
        namespace: namespace.to_owned(),
        ..Cluster::default()
    };
    for l in listed {
        let items = match l.items {
            Ok(items) => items,
            Err(e) => {
                let kind = l.kind.kind.to_owned();
                if matches!(e, LiveError::NotServed(_)) {
                    c.not_served.push(kind.clone());
                }
                // The rules are judged with the files they would be (check 5 reports what
                // it could not read); the rest by the check they feed.
                if kind == "PrometheusRule" {
                    m.unreadable.push((kind, ReadError::Cluster(e.to_string())));
                } else {
                    c.unread.push((kind, e.to_string()));
                }
                continue;
            }
        };
        for v in items {
            let name = name_of(&v);
            let path = format!("{} {namespace}/{name}", l.kind.kind);
            match l.kind.kind {
                "HorizontalPodAutoscaler" => c.hpas.push(LiveHpa {
                    name,
                    current: v.pointer("/status/currentReplicas").and_then(Value::as_u64),
                    desired: v.pointer("/status/desiredReplicas").and_then(Value::as_u64),
                    conditions: conditions(&v),
                }),
                "NodePool" => c.nodepools.push(v),
                "ConfigMap" => {
                    for (key, text) in v
                        .get("data")
                        .and_then(Value::as_object)
                        .into_iter()
                        .flatten()
                    {
                        let Some(text) = text.as_str().filter(|_| key.ends_with(".json")) else {
                            continue;
                        };
                        let path = format!("ConfigMap {namespace}/{name} {key}");
                        add(&mut m, &path, key, text);
                    }
                }
                kind => {
                    if kind == "Deployment" {
                        c.deployments.push(name.clone());
                    }
                    if kind == "ScaledObject" {
                        let target = |k: &str| {
                            v.pointer(&format!("/spec/scaleTargetRef/{k}"))
                                .and_then(Value::as_str)
                                .map(str::to_owned)
                        };
                        c.scaled_objects.push(LiveScaledObject {
                            name: name.clone(),
                            target: (
                                target("kind").unwrap_or_else(|| "Deployment".into()),
                                target("name").unwrap_or_default(),
                            ),
                            hpa: v
                                .pointer("/status/hpaName")
                                .and_then(Value::as_str)
                                .map_or_else(|| format!("keda-hpa-{name}"), str::to_owned),
                            conditions: conditions(&v),
                        });
                    }
                    add(&mut m, &path, "object.yaml", &v.to_string());
                }
            }
        }
    }
    (c, m)
}

/// Classifies one object's text as the manifests folder would a file's.
fn add(m: &mut Manifests, path: &str, file: &str, text: &str) {
    m.inline.insert(path.to_owned(), text.to_owned());
    match crate::read::classify(file, text) {
        Ok(docs) => m.docs.extend(docs.into_iter().map(|doc| Found {
            path: path.to_owned(),
            doc,
        })),
        Err(e) => m.unreadable.push((path.to_owned(), e)),
    }
}
