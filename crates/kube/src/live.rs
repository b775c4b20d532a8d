//! The objects `check --kubeconfig` reads from a cluster: the deployment's Deployments,
//! ScaledObjects, HPAs (KEDA's, with their status), PrometheusRules and Grafana dashboard
//! ConfigMaps in one namespace, and the cluster's Karpenter NodePools. Each kind is listed
//! on its own, so a CRD that is not installed or a verb RBAC denies costs that kind only.
//!
//! Objects come back as JSON with `apiVersion` and `kind` set (a list's items lack them) and
//! `metadata.managedFields` dropped, so that they read as the files `kubectl get -o yaml`
//! writes.

use futures_util::future::join_all;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, ListParams};
use serde_json::Value;

use crate::Kube;

/// A kind read from the cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Kind {
    /// The API group (`""` for the core group).
    pub group: &'static str,
    /// The version.
    pub version: &'static str,
    /// The kind.
    pub kind: &'static str,
    /// The resource's plural (its URL path segment).
    pub plural: &'static str,
    /// Namespaced (else cluster-scoped).
    pub namespaced: bool,
    /// A label selector the list is limited to.
    pub selector: Option<&'static str>,
}

impl Kind {
    /// `group/version` (`v1` for the core group).
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_owned()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }
}

/// What `check` reads, in this order.
pub const KINDS: [Kind; 6] = [
    Kind {
        group: "apps",
        version: "v1",
        kind: "Deployment",
        plural: "deployments",
        namespaced: true,
        selector: None,
    },
    Kind {
        group: "keda.sh",
        version: "v1alpha1",
        kind: "ScaledObject",
        plural: "scaledobjects",
        namespaced: true,
        selector: None,
    },
    Kind {
        group: "autoscaling",
        version: "v2",
        kind: "HorizontalPodAutoscaler",
        plural: "horizontalpodautoscalers",
        namespaced: true,
        selector: None,
    },
    Kind {
        group: "monitoring.coreos.com",
        version: "v1",
        kind: "PrometheusRule",
        plural: "prometheusrules",
        namespaced: true,
        selector: None,
    },
    // kube-prometheus-stack's Grafana sidecar loads ConfigMaps with this label.
    Kind {
        group: "",
        version: "v1",
        kind: "ConfigMap",
        plural: "configmaps",
        namespaced: true,
        selector: Some("grafana_dashboard"),
    },
    Kind {
        group: "karpenter.sh",
        version: "v1",
        kind: "NodePool",
        plural: "nodepools",
        namespaced: false,
        selector: None,
    },
];

/// Why a kind could not be listed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LiveError {
    /// The API does not serve the kind (its CRD is not installed).
    #[error("the cluster does not serve {0} (is its CRD installed?)")]
    NotServed(String),
    /// RBAC denies the list.
    #[error("forbidden: {message} (grant list on {resource})")]
    Forbidden {
        /// The resource (`scaledobjects.keda.sh`).
        resource: String,
        /// The API server's message.
        message: String,
    },
    /// Anything else: the client's reason, causes and all.
    #[error("{0}")]
    Request(String),
}

/// One kind's objects.
#[derive(Debug)]
pub struct Listed {
    /// The kind.
    pub kind: Kind,
    /// Its objects, or why there are none.
    pub items: Result<Vec<Value>, LiveError>,
}

/// Lists every kind of [`KINDS`] (namespaced ones in `namespace`), concurrently.
pub async fn read(kube: &Kube, namespace: &str) -> Vec<Listed> {
    join_all(KINDS.iter().map(|k| async move {
        Listed {
            kind: *k,
            items: list(kube, k, namespace).await,
        }
    }))
    .await
}

async fn list(kube: &Kube, k: &Kind, namespace: &str) -> Result<Vec<Value>, LiveError> {
    let gvk = GroupVersionKind::gvk(k.group, k.version, k.kind);
    let ar = ApiResource::from_gvk_with_plural(&gvk, k.plural);
    let api: kube::Api<DynamicObject> = if k.namespaced {
        kube::Api::namespaced_with(kube.client(), namespace, &ar)
    } else {
        kube::Api::all_with(kube.client(), &ar)
    };
    let mut params = ListParams::default();
    if let Some(s) = k.selector {
        params = params.labels(s);
    }
    let resource = if k.group.is_empty() {
        k.plural.to_owned()
    } else {
        format!("{}.{}", k.plural, k.group)
    };
    let got = api.list(&params).await.map_err(|e| match &e {
        kube::Error::Api(s) if s.code == 404 => {
            LiveError::NotServed(format!("{} ({})", k.kind, k.api_version()))
        }
        kube::Error::Api(s) if s.code == 403 => LiveError::Forbidden {
            resource: resource.clone(),
            message: s.message.clone(),
        },
        _ => LiveError::Request(inferscale_http::with_causes(&e)),
    })?;
    Ok(got
        .items
        .into_iter()
        .filter_map(|o| {
            let mut v = serde_json::to_value(o).ok()?;
            v["apiVersion"] = Value::from(k.api_version());
            v["kind"] = Value::from(k.kind);
            if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
                m.remove("managedFields");
            }
            Some(v)
        })
        .collect())
}
