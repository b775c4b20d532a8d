//! A kubeconfig as kubectl reads it, against the fake API server: the context asked for (not
//! the current one) is used; its user is an exec credential plugin — a script the test writes,
//! shaped like `aws eks get-token` (v1beta1, `env`, an expiry) — whose token authenticates
//! every request; a context that is not there is an error naming it.

#![allow(clippy::unwrap_used)]

use std::path::PathBuf;

use inferscale_kube::fake::{FakeApi, endpoint_slice, exec_kubeconfig, slices_of};
use inferscale_kube::{Access, Discovery, Kube};

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "inferscale-kubeconfig-{name}-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exec_credential_plugin_authenticates_the_context_asked_for() {
    let api = FakeApi::start("k8s-aws-v1.exec-token").await;
    api.apply(
        &slices_of("llm"),
        endpoint_slice("llm", "vllm", "vllm-a", 8000, &[("10.0.0.1", true, None)]),
    );
    let d = dir("exec");
    let config = exec_kubeconfig(&d, api.url(), "k8s-aws-v1.exec-token");
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
