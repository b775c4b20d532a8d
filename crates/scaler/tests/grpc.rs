//! The scaler over real gRPC (HTTP/2 on loopback), through the tonic client `build.rs`
//! generates from `proto/externalscaler.proto`: KEDA's five calls, the errors KEDA must see,
//! TLS, and the HTTP side beside it.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use inferscale_scaler::grpc::{self, Code, Tls};
use inferscale_scaler::proto::{GetMetricsRequest, ScaledObjectRef};
use inferscale_scaler::{Options, Scaler};
use tokio::net::TcpListener;
use tokio::sync::watch;

mod common;
use common::{pod, settable_pod};

struct Running {
    grpc: String,
    http: std::net::SocketAddr,
    _stop: watch::Sender<bool>,
}

async fn start(tls: Option<Tls>) -> Running {
    let g = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let h = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let (grpc, http) = (g.local_addr().unwrap().to_string(), h.local_addr().unwrap());
    let (tx, rx) = watch::channel(false);
    let scaler = Scaler::new(Options {
        cache_for: Duration::ZERO,
        push_every: Duration::from_millis(50),
        ..Options::default()
    });
    tokio::spawn(inferscale_scaler::run(scaler, g, tls, Some(h), rx));
    Running {
        grpc,
        http,
        _stop: tx,
    }
}

fn scaled_object(meta: &[(&str, &str)]) -> ScaledObjectRef {
    ScaledObjectRef {
        name: "vllm".into(),
        namespace: "llm".into(),
        scaler_metadata: meta
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect::<BTreeMap<_, _>>(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keda_calls_answer_from_the_pods_and_fail_loudly_without_them() {
    let (a, ta, ga) = settable_pod(Some(3.0)).await;
    let (b, _tb) = pod(Some(4.5)).await;
    let s = start(None).await;
    let mut client = grpc::connect(&s.grpc, None).await.unwrap();
    let targets = format!("{a},{b}");
    let so = scaled_object(&[
        ("scalerAddress", "inferscale-scaler:6000"),
        ("targets", &targets),
        ("metric", "queue_depth"),
        ("target", "5"),
        ("activationTarget", "1"),
    ]);

    let spec = client
        .get_metric_spec(so.clone())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(spec.metric_specs.len(), 1);
    let m = &spec.metric_specs[0];
    assert_eq!(
        (m.metric_name.as_str(), m.target_size, m.target_size_float),
        ("inferscale-queue-depth", 5, 5.0)
    );

    let req = GetMetricsRequest {
        scaled_object_ref: Some(so.clone()),
        metric_name: m.metric_name.clone(),
    };
    let got = client.get_metrics(req.clone()).await.unwrap().into_inner();
    let v = &got.metric_values[0];
    assert_eq!((v.metric_value_float, v.metric_value), (7.5, 8));
    // A replica count is answered unrounded (the HPA rounds it up within its tolerance);
    // the deprecated whole field rounds it up, never down: 7.5 queued at 7 a replica.
    let desired = scaled_object(&[
        ("scalerAddress", "inferscale-scaler:6000"),
        ("targets", &targets),
        ("metric", "desired_replicas"),
        ("target", "7"),
    ]);
    let got = client
        .get_metrics(GetMetricsRequest {
            scaled_object_ref: Some(desired),
            metric_name: String::new(),
        })
        .await
        .unwrap()
        .into_inner();
    let v = &got.metric_values[0];
    assert_eq!((v.metric_value_float, v.metric_value), (7.5 / 7.0, 2));
    assert!(
        client
            .is_active(so.clone())
            .await
            .unwrap()
            .into_inner()
            .result
    );

    // StreamMetricSpec sends what GetMetricSpec answers at once, and stays open.
    let mut specs = client
        .stream_metric_spec(so.clone())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(specs.message().await.unwrap(), Some(spec.clone()));
    let more = tokio::time::timeout(Duration::from_millis(300), specs.message()).await;
    assert!(more.is_err(), "the stream ended or sent again: {more:?}");
    drop(specs);

    // StreamIsActive sends the state, then each change.
    let mut stream = client
        .stream_is_active(so.clone())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        stream.message().await.unwrap().map(|r| r.result),
        Some(true)
    );
    drop(stream);
    // On the first pod alone: inactive while its queue is 0, then active when it fills.
    ga.set(0.0);
    let so_a = scaled_object(&[
        ("targets", &a),
        ("metric", "queue_depth"),
        ("target", "5"),
        ("activationTarget", "1"),
    ]);
    let mut stream_a = client
        .stream_is_active(so_a.clone())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        stream_a.message().await.unwrap().map(|r| r.result),
        Some(false)
    );
    ga.set(9.0);
    let next = tokio::time::timeout(Duration::from_secs(10), stream_a.message()).await;
    assert_eq!(next.unwrap().unwrap().map(|r| r.result), Some(true));

    // A pod gone: the value comes from the other.
    ta.abort();
    let _ = ta.await;
    let got = client.get_metrics(req).await.unwrap().into_inner();
    assert_eq!(got.metric_values[0].metric_value_float, 4.5);

    // Every pod gone: an error KEDA counts, never a 0.
    let none = GetMetricsRequest {
        scaled_object_ref: Some(so_a.clone()),
        metric_name: String::new(),
    };
    let e = client.get_metrics(none).await.unwrap_err();
    assert_eq!(e.code(), Code::Unavailable, "{e}");
    assert!(e.message().contains("all 1 pods failed"), "{e}");

    // A bad key is InvalidArgument, naming it.
    let bad = scaled_object(&[
        ("targets", &targets),
        ("metric", "queue_depth"),
        ("tagret", "5"),
    ]);
    let e = client.get_metric_spec(bad.clone()).await.unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    assert!(
        e.message()
            .starts_with("scalerMetadata.tagret: unknown key"),
        "{e}"
    );
    let e = client.is_active(bad.clone()).await.unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);
    let e = client.stream_metric_spec(bad).await.unwrap_err();
    assert_eq!(e.code(), Code::InvalidArgument);

    // A service without Kubernetes credentials says what is missing.
    let svc = scaled_object(&[
        ("service", "vllm"),
        ("port", "8000"),
        ("metric", "queue_depth"),
        ("target", "5"),
    ]);
    let e = client.is_active(svc).await.unwrap_err();
    assert_eq!(e.code(), Code::FailedPrecondition, "{e}");

    // The scaler's own metrics counted what happened.
    let (status, text) = inferscale_testkit::http_get(s.http, "/metrics").unwrap();
    assert_eq!(status, 200);
    assert!(
        text.contains(
            "inferscale_scaler_calls_total{method=\"GetMetrics\",code=\"Unavailable\"} 1"
        ),
        "{text}"
    );
    assert!(
        text.contains("inferscale_scaler_scrape_errors_total"),
        "{text}"
    );
    assert!(
        text.contains("inferscale_scaler_value{namespace=\"llm\",scaledobject=\"vllm\",metric=\"queue_depth\"}"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_metrics_api_json_and_health_answer_beside_grpc() {
    let (a, _ta) = pod(Some(2.0)).await;
    let (b, _tb) = pod(Some(6.0)).await;
    let s = start(None).await;
    let q = format!(
        "/api/v1/value?targets={}&metric=queue_depth&target=5",
        inferscale_testkit::urlencode(&format!("{a},{b}"))
    );
    let (status, body) = inferscale_testkit::http_get(s.http, &q).unwrap();
    assert_eq!(status, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["value"], 8.0);
    assert_eq!(v["pods"], 2);
    let (status, body) =
        inferscale_testkit::http_get(s.http, "/api/v1/value?metric=queue_depth&target=5").unwrap();
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("scalerMetadata.service: missing"), "{body}");
    let (status, body) = inferscale_testkit::http_get(s.http, "/healthz").unwrap();
    assert_eq!((status, body.as_str()), (200, "ok\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_methods_and_services_are_unimplemented() {
    let s = start(None).await;
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{}", s.grpc))
        .unwrap()
        .connect()
        .await
        .unwrap();
    for path in [
        "/externalscaler.ExternalScaler/StreamMetrics",
        "/grpc.health.v1.Health/Check",
    ] {
        let mut grpc = tonic::client::Grpc::new(channel.clone());
        grpc.ready().await.unwrap();
        let e = grpc
            .unary::<_, ScaledObjectRef, _>(
                tonic::Request::new(ScaledObjectRef::default()),
                http::uri::PathAndQuery::from_static(path),
                tonic_prost::ProstCodec::default(),
            )
            .await
            .unwrap_err();
        assert_eq!(e.code(), Code::Unimplemented, "{path}: {e}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_serves_h2_with_the_given_certificate() {
    let dir = std::env::temp_dir().join(format!("inferscale-scaler-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
    let (cert_file, key_file) = (dir.join("tls.crt"), dir.join("tls.key"));
    std::fs::write(&cert_file, cert.cert.pem()).unwrap();
    std::fs::write(&key_file, cert.signing_key.serialize_pem()).unwrap();
    let tls = Tls::from_pem_files(&cert_file, &key_file).unwrap();
    // A key that is not one is refused, naming the file.
    let e = Tls::from_pem_files(&cert_file, &cert_file)
        .unwrap_err()
        .to_string();
    assert!(e.contains("tls.crt: no private key"), "{e}");

    let (a, _ta) = pod(Some(4.0)).await;
    let s = start(Some(tls)).await;
    let roots = inferscale_http::tls::client_config(&inferscale_http::tls::TlsOptions {
        ca_pem: Some(("tls.crt".into(), cert.cert.pem().into_bytes())),
        insecure: false,
    })
    .unwrap();
    let mut client = grpc::connect_tls(&s.grpc, "localhost", Arc::clone(&roots))
        .await
        .unwrap();
    let so = scaled_object(&[("targets", &a), ("metric", "queue_depth"), ("target", "2")]);
    assert!(
        client
            .is_active(so.clone())
            .await
            .unwrap()
            .into_inner()
            .result
    );
    // The certificate is checked: another name is refused.
    let e = grpc::connect_tls(&s.grpc, "elsewhere.example", Arc::clone(&roots)).await;
    assert!(
        e.is_err(),
        "a certificate for localhost was taken for another name"
    );
    // Cleartext against the TLS port gets no answer.
    match grpc::connect(&s.grpc, Some(Duration::from_secs(2))).await {
        Err(_) => {}
        Ok(mut plain) => {
            let r = plain.is_active(so).await;
            assert!(r.is_err(), "{r:?}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
