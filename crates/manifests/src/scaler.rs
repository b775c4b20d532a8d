//! `scaler.yaml` for `--scaler external`: `inferscale scaler` in the vLLM namespace — its
//! ServiceAccount, a Role that may only list and watch EndpointSlices (how it finds the vLLM
//! pods), the RoleBinding, the Service KEDA dials, and the Deployment.

use std::collections::BTreeMap;

use inferscale_analysis::Thresholds;
use serde_json::json;

use crate::Options;
use crate::k8s::{extra, quantities, string_map, strings};
use crate::objects::{
    Container, Deployment, DeploymentSpec, Extra, ObjectMeta, PodSpec, PodTemplateSpec, PolicyRule,
    Probe, Resources, Role, RoleBinding, RoleRef, Service, ServiceAccount, ServicePort,
    ServiceSpec, Subject, TemplateMeta,
};
use crate::yaml::{ExplainError, Explained};

/// The name of every object of the scaler.
pub const NAME: &str = "inferscale-scaler";
/// The gRPC port (KEDA's `scalerAddress`).
pub const GRPC_PORT: u16 = 6000;
/// The HTTP port: `/metrics`, `/healthz`, `/api/v1/value`.
pub const HTTP_PORT: u16 = 6001;

fn meta(o: &Options) -> ObjectMeta {
    ObjectMeta {
        name: NAME.to_owned(),
        namespace: Some(o.namespace.clone()),
        labels: Some(labels()),
        ..ObjectMeta::default()
    }
}

fn labels() -> BTreeMap<String, String> {
    string_map(&[
        ("app.kubernetes.io/name", NAME),
        ("app.kubernetes.io/managed-by", "inferscale"),
    ])
}

fn selector() -> BTreeMap<String, String> {
    string_map(&[("app.kubernetes.io/name", NAME)])
}

/// What the Role allows: list and watch EndpointSlices, in the namespace, and nothing else.
pub const VERBS: [&str; 2] = ["list", "watch"];

fn service_account(t: &Thresholds, o: &Options) -> Explained<ServiceAccount> {
    let head = format!(
        "{}\n\nApply before scaledobject.yaml: kubectl apply -f scaler.yaml",
        crate::header(
            t,
            "inferscale scaler, the KEDA external scaler that reads the vLLM pods directly.",
        )
    );
    Explained::new(
        head,
        ServiceAccount {
            api_version: "v1".to_owned(),
            kind: "ServiceAccount".to_owned(),
            metadata: meta(o),
            automount_service_account_token: None,
            extra: Extra::new(),
        },
    )
}

fn role(o: &Options) -> Explained<Role> {
    let mut e = Explained::new(
        "May list and watch EndpointSlices in this namespace, nothing else.",
        Role {
            api_version: "rbac.authorization.k8s.io/v1".to_owned(),
            kind: "Role".to_owned(),
            metadata: meta(o),
            rules: vec![PolicyRule {
                api_groups: strings(&["discovery.k8s.io"]),
                resources: strings(&["endpointslices"]),
                resource_names: Vec::new(),
                non_resource_urls: Vec::new(),
                verbs: strings(&VERBS),
            }],
        },
    );
    e.comment(
        "rules",
        "Only what discovery needs: the vLLM Service's EndpointSlices, listed then watched. No\nget, no pods, no secrets, nothing outside this namespace.",
    );
    e
}

fn role_binding(o: &Options) -> Explained<RoleBinding> {
    Explained::new(
        "The scaler's ServiceAccount gets the Role.",
        RoleBinding {
            api_version: "rbac.authorization.k8s.io/v1".to_owned(),
            kind: "RoleBinding".to_owned(),
            metadata: meta(o),
            role_ref: RoleRef {
                api_group: "rbac.authorization.k8s.io".to_owned(),
                kind: "Role".to_owned(),
                name: NAME.to_owned(),
            },
            subjects: vec![Subject {
                kind: "ServiceAccount".to_owned(),
                name: NAME.to_owned(),
                namespace: Some(o.namespace.clone()),
                api_group: None,
            }],
        },
    )
}

fn service(o: &Options) -> Explained<Service> {
    let port = |name: &str, n: u16, app: &str| ServicePort {
        name: Some(name.to_owned()),
        port: n,
        target_port: Some(json!(name)),
        protocol: Some("TCP".to_owned()),
        app_protocol: Some(app.to_owned()),
        node_port: None,
    };
    Explained::new(
        "What KEDA dials (scalerAddress) and Prometheus may scrape (http: /metrics).",
        Service {
            api_version: "v1".to_owned(),
            kind: "Service".to_owned(),
            metadata: meta(o),
            spec: ServiceSpec {
                kind: Some("ClusterIP".to_owned()),
                selector: selector(),
                ports: vec![
                    port("grpc", GRPC_PORT, "kubernetes.io/h2c"),
                    port("http", HTTP_PORT, "http"),
                ],
                extra: Extra::new(),
            },
        },
    )
}

fn deployment(o: &Options) -> Explained<Deployment> {
    let health = json!({ "path": "/healthz", "port": "http" });
    let container = Container {
        name: "scaler".to_owned(),
        image: Some(o.inferscale_image.clone()),
        args: Some(vec![
            "scaler".to_owned(),
            "--listen".to_owned(),
            format!("0.0.0.0:{GRPC_PORT}"),
            "--http-listen".to_owned(),
            format!("0.0.0.0:{HTTP_PORT}"),
        ]),
        readiness_probe: Some(Probe {
            period_seconds: Some(5),
            failure_threshold: Some(3),
            extra: extra(json!({ "httpGet": health })),
            ..Probe::default()
        }),
        resources: Some(Resources {
            requests: quantities(&[("cpu", "100m"), ("memory", "64Mi")]),
            limits: quantities(&[("memory", "256Mi")]),
            extra: Extra::new(),
        }),
        extra: extra(json!({
            "ports": [
                { "name": "grpc", "containerPort": GRPC_PORT },
                { "name": "http", "containerPort": HTTP_PORT },
            ],
            "livenessProbe": {
                "httpGet": health,
                "periodSeconds": 10,
                "failureThreshold": 3,
            },
            "securityContext": {
                "allowPrivilegeEscalation": false,
                "readOnlyRootFilesystem": true,
                "capabilities": { "drop": ["ALL"] },
            },
        })),
        ..Container::default()
    };
    let object = Deployment {
        api_version: "apps/v1".to_owned(),
        kind: "Deployment".to_owned(),
        metadata: meta(o),
        spec: DeploymentSpec {
            replicas: Some(1),
            selector: json!({ "matchLabels": selector() }),
            template: PodTemplateSpec {
                metadata: Some(TemplateMeta {
                    labels: Some(labels()),
                    ..TemplateMeta::default()
                }),
                spec: Some(PodSpec {
                    containers: vec![container],
                    extra: extra(json!({
                        "serviceAccountName": NAME,
                        "securityContext": {
                            "runAsNonRoot": true,
                            "runAsUser": 65_532,
                            "seccompProfile": { "type": "RuntimeDefault" },
                        },
                    })),
                    ..PodSpec::default()
                }),
                extra: Extra::new(),
            },
            extra: Extra::new(),
        },
    };
    let mut e = Explained::new("The scaler.", object);
    e.comment(
        "spec.replicas",
        "One: its windowed histograms live in memory. If it is down, KEDA's calls fail and the\nScaledObject's fallback holds the replicas (never fewer than are running).",
    )
    .comment(
        "spec.template.spec.containers[0].args",
        "0.0.0.0 in the pod: KEDA's operator dials the Service. Outside a pod the scaler binds\n127.0.0.1 unless told otherwise.",
    );
    e
}

/// `scaler.yaml`: five documents.
pub fn scaler_file(t: &Thresholds, o: &Options) -> Result<String, ExplainError> {
    Ok([
        service_account(t, o).to_yaml()?,
        role(o).to_yaml()?,
        role_binding(o).to_yaml()?,
        service(o).to_yaml()?,
        deployment(o).to_yaml()?,
    ]
    .join("---\n"))
}
