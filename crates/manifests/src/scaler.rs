//! `scaler.yaml` for `--scaler external`: `inferscale scaler` in the vLLM namespace — its
//! ServiceAccount, a Role that may only list and watch EndpointSlices (how it finds the vLLM
//! pods), the RoleBinding, the Service KEDA dials, and the Deployment.

use inferscale_analysis::Thresholds;

use crate::Options;
use crate::yaml::{Y, document, i, map, s};

/// The name of every object of the scaler.
pub const NAME: &str = "inferscale-scaler";
/// The gRPC port (KEDA's `scalerAddress`).
pub const GRPC_PORT: u16 = 6000;
/// The HTTP port: `/metrics`, `/healthz`, `/api/v1/value`.
pub const HTTP_PORT: u16 = 6001;

fn meta(o: &Options) -> Y {
    map(vec![
        ("name", s(NAME)),
        ("namespace", s(o.namespace.clone())),
        ("labels", labels()),
    ])
}

fn labels() -> Y {
    map(vec![
        ("app.kubernetes.io/name", s(NAME)),
        ("app.kubernetes.io/managed-by", s("inferscale")),
    ])
}

fn selector() -> Y {
    map(vec![("app.kubernetes.io/name", s(NAME))])
}

/// What the Role allows: list and watch EndpointSlices, in the namespace, and nothing else.
pub const VERBS: [&str; 2] = ["list", "watch"];

fn service_account(o: &Options) -> Y {
    map(vec![
        ("apiVersion", s("v1")),
        ("kind", s("ServiceAccount")),
        ("metadata", meta(o)),
    ])
}

fn role(o: &Options) -> Y {
    map(vec![
        ("apiVersion", s("rbac.authorization.k8s.io/v1")),
        ("kind", s("Role")),
        ("metadata", meta(o)),
        (
            "rules",
            Y::Seq(vec![map(vec![
                ("apiGroups", Y::Seq(vec![s("discovery.k8s.io")])),
                ("resources", Y::Seq(vec![s("endpointslices")])),
                ("verbs", Y::Seq(VERBS.iter().map(|v| s(*v)).collect())),
            ])]),
        ),
    ])
    .comment(
        "rules",
        "Only what discovery needs: the vLLM Service's EndpointSlices, listed then watched. No\nget, no pods, no secrets, nothing outside this namespace.",
    )
}

fn role_binding(o: &Options) -> Y {
    map(vec![
        ("apiVersion", s("rbac.authorization.k8s.io/v1")),
        ("kind", s("RoleBinding")),
        ("metadata", meta(o)),
        (
            "roleRef",
            map(vec![
                ("apiGroup", s("rbac.authorization.k8s.io")),
                ("kind", s("Role")),
                ("name", s(NAME)),
            ]),
        ),
        (
            "subjects",
            Y::Seq(vec![map(vec![
                ("kind", s("ServiceAccount")),
                ("name", s(NAME)),
                ("namespace", s(o.namespace.clone())),
            ])]),
        ),
    ])
}

fn service(o: &Options) -> Y {
    let port = |name: &str, n: u16, app: &str| {
        map(vec![
            ("name", s(name)),
            ("port", i(i64::from(n))),
            ("targetPort", s(name)),
            ("protocol", s("TCP")),
            ("appProtocol", s(app)),
        ])
    };
    map(vec![
        ("apiVersion", s("v1")),
        ("kind", s("Service")),
        ("metadata", meta(o)),
        (
            "spec",
            map(vec![
                ("type", s("ClusterIP")),
                ("selector", selector()),
                (
                    "ports",
                    Y::Seq(vec![
                        port("grpc", GRPC_PORT, "kubernetes.io/h2c"),
                        port("http", HTTP_PORT, "http"),
                    ]),
                ),
            ]),
        ),
    ])
}

fn deployment(o: &Options) -> Y {
    let probe = |period: i64| {
        map(vec![
            (
                "httpGet",
                map(vec![("path", s("/healthz")), ("port", s("http"))]),
            ),
            ("periodSeconds", i(period)),
            ("failureThreshold", i(3)),
        ])
    };
    let container = map(vec![
        ("name", s("scaler")),
        ("image", s(o.inferscale_image.clone())),
        (
            "args",
            Y::Seq(vec![
                s("scaler"),
                s("--listen"),
                s(format!("0.0.0.0:{GRPC_PORT}")),
                s("--http-listen"),
                s(format!("0.0.0.0:{HTTP_PORT}")),
            ]),
        ),
        (
            "ports",
            Y::Seq(vec![
                map(vec![
                    ("name", s("grpc")),
                    ("containerPort", i(i64::from(GRPC_PORT))),
                ]),
                map(vec![
                    ("name", s("http")),
                    ("containerPort", i(i64::from(HTTP_PORT))),
                ]),
            ]),
        ),
        ("readinessProbe", probe(5)),
        ("livenessProbe", probe(10)),
        (
            "resources",
            map(vec![
                (
                    "requests",
                    map(vec![("cpu", s("100m")), ("memory", s("64Mi"))]),
                ),
                ("limits", map(vec![("memory", s("256Mi"))])),
            ]),
        ),
        (
            "securityContext",
            map(vec![
                ("allowPrivilegeEscalation", Y::Bool(false)),
                ("readOnlyRootFilesystem", Y::Bool(true)),
                (
                    "capabilities",
                    map(vec![("drop", Y::Seq(vec![s("ALL")]))]),
                ),
            ]),
        ),
    ])
    .comment(
        "args",
        "0.0.0.0 in the pod: KEDA's operator dials the Service. Outside a pod the scaler binds\n127.0.0.1 unless told otherwise.",
    );
    map(vec![
        ("apiVersion", s("apps/v1")),
        ("kind", s("Deployment")),
        ("metadata", meta(o)),
        (
            "spec",
            map(vec![
                ("replicas", i(1)),
                ("selector", map(vec![("matchLabels", selector())])),
                (
                    "template",
                    map(vec![
                        ("metadata", map(vec![("labels", labels())])),
                        (
                            "spec",
                            map(vec![
                                ("serviceAccountName", s(NAME)),
                                (
                                    "securityContext",
                                    map(vec![
                                        ("runAsNonRoot", Y::Bool(true)),
                                        ("runAsUser", i(65_532)),
                                        (
                                            "seccompProfile",
                                            map(vec![("type", s("RuntimeDefault"))]),
                                        ),
                                    ]),
                                ),
                                ("containers", Y::Seq(vec![container])),
                            ]),
                        ),
                    ]),
                ),
            ])
            .comment(
                "replicas",
                "One: its windowed histograms live in memory. If it is down, KEDA's calls fail and the\nScaledObject's fallback holds the replicas (never fewer than are running).",
            ),
        ),
    ])
}

/// `scaler.yaml`: five documents.
pub fn scaler_file(t: &Thresholds, o: &Options) -> String {
    let head = format!(
        "{}\n\nApply before scaledobject.yaml: kubectl apply -f scaler.yaml",
        crate::header(
            t,
            "inferscale scaler, the KEDA external scaler that reads the vLLM pods directly.",
        )
    );
    [
        document(&head, &service_account(o)),
        document(
            "May list and watch EndpointSlices in this namespace, nothing else.",
            &role(o),
        ),
        document(
            "The scaler's ServiceAccount gets the Role.",
            &role_binding(o),
        ),
        document(
            "What KEDA dials (scalerAddress) and Prometheus may scrape (http: /metrics).",
            &service(o),
        ),
        document("The scaler.", &deployment(o)),
    ]
    .join("---\n")
}
