//! Who may do what, and how a workload is reached: `ServiceAccount` and `Service` (v1),
//! `Role` and `RoleBinding` (rbac.authorization.k8s.io/v1), as `inferscale scaler`'s objects
//! use them.
//!
//! Field names and types follow Kubernetes' published OpenAPI v3 schema
//! (`api/openapi-spec/v3/apis__rbac.authorization.k8s.io__v1_openapi.json` and
//! `api__v1_openapi.json` of kubernetes/kubernetes, read at commit
//! 01aa0f3f6052c9866dcb69054d8924fa8c96e3cb). The RBAC types name every field the schema
//! has and refuse any other: a permission is not something to keep unread in `extra`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{Extra, ObjectMeta};

/// A `ServiceAccount` (v1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServiceAccount {
    /// `v1`.
    pub api_version: String,
    /// `ServiceAccount`.
    pub kind: String,
    /// Name, namespace, labels.
    pub metadata: ObjectMeta,
    /// Whether pods using it get its token mounted (Kubernetes' default: yes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub automount_service_account_token: Option<bool>,
    /// Anything else (secrets, imagePullSecrets).
    #[serde(flatten)]
    pub extra: Extra,
}

/// A `Role` (rbac.authorization.k8s.io/v1): permissions within one namespace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Role {
    /// `rbac.authorization.k8s.io/v1`.
    pub api_version: String,
    /// `Role`.
    pub kind: String,
    /// Name, namespace, labels.
    pub metadata: ObjectMeta,
    /// What it allows.
    #[serde(default)]
    pub rules: Vec<PolicyRule>,
}

/// One rule of a Role: `verbs` on `resources` of `apiGroups`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PolicyRule {
    /// API groups (`""` is the core group).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub api_groups: Vec<String>,
    /// Resources (`*`: all).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<String>,
    /// Only these names, when set.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resource_names: Vec<String>,
    /// Non-resource URLs (ClusterRoles only).
    #[serde(
        default,
        rename = "nonResourceURLs",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub non_resource_urls: Vec<String>,
    /// What may be done (`*`: anything).
    pub verbs: Vec<String>,
}

/// A `RoleBinding` (rbac.authorization.k8s.io/v1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RoleBinding {
    /// `rbac.authorization.k8s.io/v1`.
    pub api_version: String,
    /// `RoleBinding`.
    pub kind: String,
    /// Name, namespace, labels.
    pub metadata: ObjectMeta,
    /// The Role (or ClusterRole) granted.
    pub role_ref: RoleRef,
    /// Who gets it.
    #[serde(default)]
    pub subjects: Vec<Subject>,
}

/// `RoleBinding.roleRef`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RoleRef {
    /// `rbac.authorization.k8s.io`.
    pub api_group: String,
    /// `Role` or `ClusterRole`.
    pub kind: String,
    /// Its name.
    pub name: String,
}

/// One subject of a RoleBinding.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Subject {
    /// `ServiceAccount`, `User` or `Group`.
    pub kind: String,
    /// Its name.
    pub name: String,
    /// A ServiceAccount's namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// The API group (empty for ServiceAccounts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_group: Option<String>,
}

/// A `Service` (v1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Service {
    /// `v1`.
    pub api_version: String,
    /// `Service`.
    pub kind: String,
    /// Name, namespace, labels.
    pub metadata: ObjectMeta,
    /// Which pods, which ports.
    pub spec: ServiceSpec,
}

/// `Service.spec`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServiceSpec {
    /// `ClusterIP` (the default), `NodePort`, `LoadBalancer`, `ExternalName`.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// The pods' labels.
    #[serde(default)]
    pub selector: BTreeMap<String, String>,
    /// The ports.
    #[serde(default)]
    pub ports: Vec<ServicePort>,
    /// Anything else (clusterIP, sessionAffinity, …).
    #[serde(flatten)]
    pub extra: Extra,
}

/// One port of a Service.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ServicePort {
    /// Its name (EndpointSlices carry it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The Service's port.
    pub port: u16,
    /// The pods' port: a number or a container port's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_port: Option<Value>,
    /// `TCP` (default), `UDP`, `SCTP`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,
    /// The application protocol (`kubernetes.io/h2c`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app_protocol: Option<String>,
    /// For NodePort and LoadBalancer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_port: Option<u16>,
}
