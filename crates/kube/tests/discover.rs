//! Discovery on kube-rs against the fake API server: EndpointSlice list and watch, pods
//! appearing, turning unready and vanishing; a bookmark that moves the watch on, so that a
//! watch the server closes resumes from it without a relist; an expired watch (410) followed
//! by a fresh list after the first backoff; a refused token and a missing port name.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use inferscale_kube::fake::{FakeApi, vllm_slice as slice};
use inferscale_kube::{Access, Discovery, Kube};
use serde_json::json;

const SLICES: &str = "/apis/discovery.k8s.io/v1/namespaces/llm/endpointslices";

fn token_file(name: &str, token: &str) -> std::path::PathBuf {
    let p = std::env::temp_dir().join(format!(
        "inferscale-kube-{name}-{}.token",
        std::process::id()
    ));
    std::fs::write(&p, token).unwrap();
    p
}

async fn kube(api: &FakeApi, token: &str) -> Kube {
    let access = Access {
        api: Some(api.url().to_owned()),
        token_file: Some(token_file(token, token)),
        ..Access::default()
    };
    Kube::connect(&access).await.unwrap().unwrap()
}

/// Polls `d` until it gives `want`, for at most 10 s.
async fn until(d: &Discovery, want: &[&str]) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let got = d.urls("llm", "vllm", "http").await;
        if got.as_deref().ok().is_some_and(|g| g == want) {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "wanted {want:?}, have {got:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn lists(api: &FakeApi) -> usize {
    api.asked()
        .iter()
        .filter(|a| a.path == SLICES && !a.is_watch())
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_appear_turn_unready_and_vanish_through_the_watch() {
    let api = FakeApi::start("sa-token").await;
    api.apply(
        SLICES,
        slice("vllm-a", 8000, &[("10.0.0.1", true), ("10.0.0.2", false)]),
    );
    // Another Service's slice in the namespace is not this one's.
    let mut other = slice("other-a", 9000, &[("10.9.9.9", true)]);
    other["metadata"]["labels"]["kubernetes.io/service-name"] = json!("other");
    api.apply(SLICES, other);
    let d = Discovery::new(kube(&api, "sa-token").await);
    assert_eq!(
        d.urls("llm", "vllm", "http").await.unwrap(),
        ["http://10.0.0.1:8000"]
    );
    // A second slice appears; a pod becomes ready; a slice goes.
    api.apply(SLICES, slice("vllm-b", 8000, &[("10.0.1.7", true)]));
    until(&d, &["http://10.0.0.1:8000", "http://10.0.1.7:8000"]).await;
    api.apply(
        SLICES,
        slice("vllm-a", 8000, &[("10.0.0.1", true), ("10.0.0.2", true)]),
    );
    until(
        &d,
        &[
            "http://10.0.0.1:8000",
            "http://10.0.0.2:8000",
            "http://10.0.1.7:8000",
        ],
    )
    .await;
    api.delete(SLICES, "vllm-b");
    until(&d, &["http://10.0.0.1:8000", "http://10.0.0.2:8000"]).await;
    assert_eq!(lists(&api), 1, "one list, the rest came by the watch");

    // A bookmark moves the watch on; the server then closes the watch (its timeout): the
    // watcher resumes from the bookmark's version, and a change made after it arrives, with
    // no relist.
    let rv = api.bookmark(SLICES, "discovery.k8s.io/v1", "EndpointSlice");
    tokio::time::sleep(Duration::from_millis(200)).await;
    api.close_watches();
    api.apply(SLICES, slice("vllm-a", 8000, &[("10.0.0.2", false)]));
    until(&d, &[]).await;
    assert_eq!(lists(&api), 1, "a closed watch is resumed, not relisted");
    assert!(
        api.asked()
            .iter()
            .any(|a| a.is_watch() && a.query.get("resourceVersion") == Some(&rv.to_string())),
        "no watch resumed from the bookmark's version {rv}: {:?}",
        api.asked()
    );

    // The watch expires (410): a fresh list, after the first backoff (1 s), picks up what
    // changed meanwhile.
    let expired = std::time::Instant::now();
    api.apply_quietly(SLICES, slice("vllm-c", 8000, &[("10.0.2.9", true)]));
    api.expire();
    until(&d, &["http://10.0.2.9:8000"]).await;
    assert!(expired.elapsed() >= Duration::from_secs(1), "no backoff");
    assert_eq!(lists(&api), 2, "one relist after the 410");

    // Every request carried the token and asked for the Service's slices only; watches ask
    // for bookmarks and resume from a version.
    for a in api.asked() {
        assert_eq!(a.auth, "Bearer sa-token");
        assert_eq!(a.path, SLICES);
        assert_eq!(
            a.query.get("labelSelector").map(String::as_str),
            Some("kubernetes.io/service-name=vllm"),
            "{a:?}"
        );
        if a.is_watch() {
            assert_eq!(
                a.query.get("allowWatchBookmarks").map(String::as_str),
                Some("true")
            );
            assert!(a.query.contains_key("resourceVersion"), "{a:?}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_token_and_a_missing_port_name_are_errors_that_say_so() {
    let api = FakeApi::start("sa-token").await;
    api.apply(SLICES, slice("vllm-a", 8000, &[("10.0.0.1", true)]));
    let e = Discovery::new(kube(&api, "nope").await)
        .urls("llm", "vllm", "http")
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("llm/vllm") && e.contains("401") && e.contains("Unauthorized"),
        "{e}"
    );
    let d = Discovery::new(kube(&api, "sa-token").await);
    let e = d
        .urls("llm", "vllm", "metrics")
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("no port named \"metrics\""), "{e}");
}
