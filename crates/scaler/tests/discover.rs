//! The scaler answering KEDA for a `service` trigger: the pods come from the Service's
//! EndpointSlices through `inferscale-kube`'s discovery, against its fake API server
//! (discovery's own list/watch/bookmark/410 cases are tested in that crate).

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::time::Duration;

use inferscale_clock::Instant;

use inferscale_kube::fake::{FakeApi, vllm_slice as slice};
use inferscale_kube::{Access, Kube};
use inferscale_scaler::proto::{GetMetricsRequest, ScaledObjectRef};
use inferscale_scaler::{Options, Scaler};
use tokio::net::TcpListener;
use tokio::sync::watch;

mod common;
use common::pod_at;

const SLICES: &str = "/apis/discovery.k8s.io/v1/namespaces/llm/endpointslices";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keda_gets_the_sum_of_the_services_ready_pods() {
    // Two pods on one port at two loopback addresses, as pods share a container port.
    let (first, _t1, _g1) = pod_at("127.0.0.2:0", Some(3.0)).await;
    let port: u16 = first.rsplit(':').next().unwrap().parse().unwrap();
    let (_second, _t2, _g2) = pod_at(&format!("127.0.0.3:{port}"), Some(4.0)).await;
    let api = FakeApi::start("").await;
    api.apply(
        SLICES,
        slice("vllm-a", port, &[("127.0.0.2", true), ("127.0.0.3", true)]),
    );

    let g = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = g.local_addr().unwrap().to_string();
    let (_stop, rx) = watch::channel(false);
    let scaler = Scaler::new(Options {
        cache_for: Duration::ZERO,
        kube: Kube::connect(&Access {
            api: Some(api.url().to_owned()),
            ..Access::default()
        })
        .await
        .unwrap(),
        ..Options::default()
    });
    tokio::spawn(inferscale_scaler::run(scaler, g, None, None, rx));
    let client = inferscale_scaler::grpc::connect(&addr, None).await.unwrap();
    let meta: BTreeMap<String, String> = [
        ("service", "vllm"),
        ("port", "http"),
        ("metric", "queue_depth"),
        ("target", "5"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    let req = GetMetricsRequest {
        scaled_object_ref: Some(ScaledObjectRef {
            name: "vllm".into(),
            namespace: "llm".into(),
            scaler_metadata: meta,
        }),
        metric_name: String::new(),
    };
    let v = client
        .clone()
        .get_metrics(req.clone())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(v.metric_values[0].metric_value_float, 7.0);
    // One pod turns unready: it is no longer counted.
    api.apply(
        SLICES,
        slice("vllm-a", port, &[("127.0.0.2", true), ("127.0.0.3", false)]),
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let v = client
            .clone()
            .get_metrics(req.clone())
            .await
            .unwrap()
            .into_inner()
            .metric_values[0]
            .metric_value_float;
        if v == 3.0 {
            break;
        }
        assert!(Instant::now() < deadline, "still {v}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // None ready: Unavailable, for KEDA's fallback.
    api.apply(SLICES, slice("vllm-a", port, &[("127.0.0.2", false)]));
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match client.clone().get_metrics(req.clone()).await {
            Err(e) => {
                assert_eq!(e.code(), inferscale_scaler::grpc::Code::Unavailable, "{e}");
                assert!(e.message().contains("no pods"), "{e}");
                break;
            }
            Ok(v) => assert!(Instant::now() < deadline, "still {v:?}"),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
