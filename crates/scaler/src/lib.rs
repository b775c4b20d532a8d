//! A KEDA external scaler (`inferscale scaler`): it reads queue depth and latency histograms
//! straight from the pods and answers KEDA's `externalscaler.ExternalScaler` service
//! (`proto/externalscaler.proto`: the package, service, messages and field numbers KEDA
//! v2.17+ uses).
//!
//! - [`metadata`] and [`decide`] (pure, in `inferscale-autoscale`, which rehearses the same
//!   computation): a trigger's `scalerMetadata`, read strictly (errors name the key), and
//!   from the pods' scrapes to the value, with the failure semantics (some pods failing:
//!   computed from the rest; all failing or none: an error, never a silent 0).
//! - [`scrape`]: the pods scraped concurrently, each with a timeout, answers cached briefly.
//! - a `service` trigger's pods come from `inferscale-kube`'s discovery (EndpointSlices,
//!   listed then watched, on kube-rs).
//! - [`service`]: the five calls, and the value the HTTP side serves.
//! - [`grpc`] and [`proto`]: the service on tonic (cleartext or TLS) and the code `build.rs`
//!   generates from the `.proto` (messages, server trait, client).
//! - [`http`]: `/metrics`, `/healthz` and the JSON of KEDA's `metrics-api` trigger.
//! - [`metrics`]: the scaler's own metrics.

pub mod grpc;
pub mod http;
pub mod metrics;
pub mod proto;
pub mod scrape;
pub mod service;

pub use inferscale_autoscale::external::{decide, metadata};

pub use decide::{Answer, History, NoValue, PodResult, answer, desired_replicas};
pub use metadata::{Config, MetadataError, Metric, Pods};
pub use service::{Options, Scaler};

use tokio::net::TcpListener;
use tokio::sync::watch;

/// Serves `scaler` over gRPC on `grpc` (TLS when `tls` is given) and over HTTP on `http`,
/// until `shutdown` turns true; calls in flight finish.
///
/// # Errors
///
/// When the gRPC server itself fails (the HTTP side goes on until `shutdown`).
pub async fn run(
    scaler: Scaler,
    grpc: TcpListener,
    tls: Option<grpc::Tls>,
    http: Option<TcpListener>,
    shutdown: watch::Receiver<bool>,
) -> Result<(), tonic::transport::Error> {
    let g = grpc::serve(scaler.clone(), grpc, tls, shutdown.clone());
    match http {
        Some(l) => tokio::join!(g, http::serve(l, scaler, shutdown)).0,
        None => g.await,
    }
}
