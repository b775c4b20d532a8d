//! A kubeconfig as kubectl reads it, against the fake API server: the context asked for (not
//! the current one) is used; its user is an exec credential plugin — a script the test writes,
//! shaped like `aws eks get-token` (v1beta1, `env`, an expiry) — whose token authenticates
//! every request; a context that is not there is an error naming it.

#![allow(clippy::unwrap_used)]

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

use inferscale_kube::fake::FakeApi;
use inferscale_kube::{Access, Discovery, Kube};
use serde_json::json;

const SLICES: &str = "/apis/discovery.k8s.io/v1/namespaces/llm/endpointslices";

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "inferscale-kubeconfig-{name}-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A plugin that logs its arguments and environment, then prints an ExecCredential.
fn plugin(d: &Path) -> PathBuf {
    let p = d.join("get-token");
    std::fs::write(
        &p,
        format!(
            "#!/bin/sh\necho \"$* cluster=$AWS_CLUSTER info=${{KUBERNETES_EXEC_INFO:+set}}\" >> {}\nprintf '%s' '{{\"kind\":\"ExecCredential\",\"apiVersion\":\"client.authentication.k8s.io/v1beta1\",\"spec\":{{}},\"status\":{{\"expirationTimestamp\":\"2099-01-01T00:00:00Z\",\"token\":\"k8s-aws-v1.exec-token\"}}}}'\n",
            d.join("calls").display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

fn kubeconfig(d: &Path, server: &str, plugin: &Path) -> PathBuf {
    let p = d.join("config");
    std::fs::write(
        &p,
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
    )
    .unwrap();
    p
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exec_credential_plugin_authenticates_the_context_asked_for() {
    let api = FakeApi::start("k8s-aws-v1.exec-token").await;
    api.apply(
        SLICES,
        json!({
            "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": "vllm-a", "namespace": "llm",
                "labels": {"kubernetes.io/service-name": "vllm"}},
            "addressType": "IPv4",
            "endpoints": [{"addresses": ["10.0.0.1"], "conditions": {"ready": true}}],
            "ports": [{"name": "http", "port": 8000}],
        }),
    );
    let d = dir("exec");
    let config = kubeconfig(&d, api.url(), &plugin(&d));
    let kube = Kube::connect(&Access {
        kubeconfig: Some(config.clone()),
        context: Some("eks-prod".into()),
        ..Access::default()
    })
    .await
    .unwrap()
    .unwrap();
    assert_eq!(kube.default_namespace(), "llm");
    assert!(
        kube.source().contains("context eks-prod") && kube.source().contains(api.url()),
        "{}",
        kube.source()
    );
    let urls = Discovery::new(kube)
        .urls("llm", "vllm", "http")
        .await
        .unwrap();
    assert_eq!(urls, ["http://10.0.0.1:8000"]);
    let asked = api.asked();
    assert!(!asked.is_empty());
    for a in &asked {
        assert_eq!(a.auth, "Bearer k8s-aws-v1.exec-token", "{a:?}");
    }
    // The plugin ran with its arguments, its env and the exec info kubectl passes.
    let calls = std::fs::read_to_string(d.join("calls")).unwrap();
    assert!(
        calls.contains("eks get-token --cluster-name prod cluster=prod info=set"),
        "{calls}"
    );

    // A context that is not there is named.
    let e = Kube::connect(&Access {
        kubeconfig: Some(config),
        context: Some("staging".into()),
        ..Access::default()
    })
    .await
    .unwrap_err();
    let e = inferscale_http::with_causes(&e);
    assert!(e.contains("staging"), "{e}");
    let _ = std::fs::remove_dir_all(&d);
}
