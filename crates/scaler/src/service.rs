//! The scaler: KEDA's five calls answered from the pods, and the same value for the HTTP
//! side. Each call reads its trigger's `scalerMetadata` afresh (KEDA sends it whole every
//! time), finds the pods (the listed targets, or the Service's EndpointSlices), scrapes them
//! through the brief cache and answers.
//!
//! What KEDA is told when there is no value: a bad key is `InvalidArgument` naming it; no
//! pods, or none answering, is `Unavailable`, so KEDA counts a failure and its fallback
//! engages; a Service named without Kubernetes credentials is `FailedPrecondition`. Never
//! a made-up 0.

use inferscale_clock::Instant;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response};

use crate::decide::{Answer, TREND_WINDOW_MAX_S, Trend, answer, answer_at, signals};
use crate::grpc::{Code, Status};
use crate::metadata::{Config, Metric, Pods as Where};
use crate::metrics::Metrics;
use crate::proto::external_scaler_server::ExternalScaler;
use crate::proto::{
    GetMetricSpecResponse, GetMetricsRequest, GetMetricsResponse, IsActiveResponse, MetricSpec,
    MetricValue, ScaledObjectRef,
};
use inferscale_kube::{Discovery, Kube};

/// A server-streaming call's messages, ended by dropping the sender.
pub type Stream<T> = ReceiverStream<Result<T, Status>>;
use crate::scrape::Pods;

/// How the scaler runs.
#[derive(Debug, Clone)]
pub struct Options {
    /// One pod's scrape, unless a trigger's `timeout` says otherwise.
    pub scrape_timeout: Duration,
    /// How long an answer is reused (KEDA's poll and the HPA's fetch a moment apart).
    pub cache_for: Duration,
    /// How often `StreamIsActive` re-checks (it sends only changes).
    pub push_every: Duration,
    /// The Kubernetes API, for triggers that name a `service`.
    pub kube: Option<Kube>,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            scrape_timeout: Duration::from_secs(2),
            cache_for: Duration::from_secs(1),
            push_every: Duration::from_secs(5),
            kube: None,
        }
    }
}

/// The scaler's state, shared by its gRPC and HTTP sides.
#[derive(Debug, Clone)]
pub struct Scaler {
    pods: Arc<Pods>,
    discovery: Option<Arc<Discovery>>,
    metrics: Arc<Metrics>,
    options: Options,
    /// Each trigger's recent signal (by ScaledObject and metadata), for a `horizon`.
    trends: Arc<Mutex<HashMap<String, Trend>>>,
    started: Instant,
}

/// A trigger's value, with what it stands on.
#[derive(Debug, Clone, PartialEq)]
pub struct Value {
    /// The trigger as read.
    pub config: Config,
    /// The value and its pods.
    pub answer: Answer,
}

/// The external metric's name for a trigger's metric (KEDA prefixes `s<index>-`).
pub fn metric_name(m: Metric) -> String {
    format!("inferscale-{}", m.key().replace('_', "-"))
}

/// The HPA's target for a trigger: the queue target, except for `desired_replicas`, whose
/// value is already a replica count (AverageValue 1 gives it back as the proposal).
pub fn hpa_target(cfg: &Config) -> f64 {
    match cfg.metric {
        Metric::DesiredReplicas => 1.0,
        _ => cfg.target,
    }
}

/// A metric name without KEDA's `s<index>-` prefix, for a caller that kept it.
fn strip_index(name: &str) -> &str {
    name.strip_prefix('s')
        .and_then(|r| r.split_once('-'))
        .filter(|(i, _)| !i.is_empty() && i.bytes().all(|b| b.is_ascii_digit()))
        .map_or(name, |(_, rest)| rest)
}

fn code_name(c: Code) -> String {
    match c {
        Code::Ok => "OK".to_owned(),
        other => format!("{other:?}"),
    }
}

impl Scaler {
    /// A scaler with `options`.
    pub fn new(options: Options) -> Scaler {
        let metrics = Arc::new(Metrics::default());
        Scaler {
            pods: Pods::with_metrics(
                options.scrape_timeout,
                options.cache_for,
                Arc::clone(&metrics),
            ),
            discovery: options.kube.clone().map(Discovery::new),
            metrics,
            options,
            trends: Arc::default(),
            started: Instant::now(),
        }
    }

    /// The scaler's own metrics.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// The value for the trigger `meta` of ScaledObject `namespace/name`, recorded in the
    /// scaler's metrics.
    pub async fn value(
        &self,
        name: &str,
        namespace: &str,
        meta: &BTreeMap<String, String>,
    ) -> Result<Value, Status> {
        let config = Config::from_metadata(meta, namespace)
            .map_err(|e| Status::invalid_argument(e.to_string()))?;
        let urls = match &config.pods {
            Where::Targets(urls) => urls.clone(),
            Where::Service {
                name: svc,
                namespace: ns,
                port,
            } => {
                let Some(d) = &self.discovery else {
                    return Err(Status::new(
                        Code::FailedPrecondition,
                        format!(
                            "scalerMetadata.service: finding {ns}/{svc}'s pods needs the Kubernetes API; run the scaler in a pod with a service account, give it --kubeconfig/--context, or use targets"
                        ),
                    ));
                };
                d.urls(ns, svc, port)
                    .await
                    .map_err(|e| Status::unavailable(e.to_string()))?
            }
        };
        let timeout = config
            .timeout_s
            .map_or(self.options.scrape_timeout, Duration::from_secs_f64);
        let results = self
            .pods
            .read_within(&urls, config.window_s, timeout, &signals(&config))
            .await;
        let answer = if config.horizon_s.is_some() {
            let key = format!("{namespace}/{name}/{meta:?}");
            let now = self.started.elapsed().as_secs_f64();
            let mut trends = self.trends.lock().unwrap_or_else(PoisonError::into_inner);
            // A trigger no call has read for the trend's window is forgotten.
            trends.retain(|k, t| {
                k == &key || t.last_at().is_some_and(|at| now - at < TREND_WINDOW_MAX_S)
            });
            let trend = trends.entry(key).or_default();
            answer_at(&config, results, Some((trend, now)))
        } else {
            answer(&config, results)
        }
        .map_err(|e| Status::unavailable(e.to_string()))?;
        self.metrics.served(
            namespace,
            name,
            config.metric.key(),
            answer.value,
            answer.pods_ok,
            answer.failures.len(),
        );
        Ok(Value { config, answer })
    }

    async fn is_active_now(&self, r: &ScaledObjectRef) -> Result<bool, Status> {
        let v = self
            .value(&r.name, &r.namespace, &r.scaler_metadata)
            .await?;
        Ok(v.answer.value > v.config.activation_target)
    }

    fn record<T>(&self, method: &str, t: Instant, r: &Result<T, Status>) {
        let code = r.as_ref().map_or_else(|s| s.code(), |_| Code::Ok);
        self.metrics
            .call(method, &code_name(code), t.elapsed().as_secs_f64());
    }
}

impl Scaler {
    /// The HPA's metric for a trigger: its name and target, from the metadata alone.
    fn spec(&self, request: &ScaledObjectRef) -> Result<GetMetricSpecResponse, Status> {
        Config::from_metadata(&request.scaler_metadata, &request.namespace)
            .map_err(|e| Status::invalid_argument(e.to_string()))
            .map(|cfg| {
                let target = hpa_target(&cfg);
                GetMetricSpecResponse {
                    metric_specs: vec![MetricSpec {
                        metric_name: metric_name(cfg.metric),
                        target_size: target.round().max(1.0) as i64,
                        target_size_float: target,
                    }],
                }
            })
    }
}

#[tonic::async_trait]
impl ExternalScaler for Scaler {
    async fn is_active(
        &self,
        request: Request<ScaledObjectRef>,
    ) -> Result<Response<IsActiveResponse>, Status> {
        let t = Instant::now();
        let r = self
            .is_active_now(request.get_ref())
            .await
            .map(|result| IsActiveResponse { result });
        self.record("IsActive", t, &r);
        r.map(Response::new)
    }

    type StreamIsActiveStream = Stream<IsActiveResponse>;

    async fn stream_is_active(
        &self,
        request: Request<ScaledObjectRef>,
    ) -> Result<Response<Stream<IsActiveResponse>>, Status> {
        let t = Instant::now();
        let request = request.into_inner();
        // Bad metadata is refused at once, not after the first tick.
        let checked = Config::from_metadata(&request.scaler_metadata, &request.namespace)
            .map(drop)
            .map_err(|e| Status::invalid_argument(e.to_string()));
        self.record("StreamIsActive", t, &checked);
        checked?;
        let (tx, rx) = mpsc::channel(1);
        let me = self.clone();
        tokio::spawn(async move {
            let mut last = None;
            loop {
                // A failing check sends nothing: KEDA keeps the last state it was told.
                if let Ok(active) = me.is_active_now(&request).await
                    && last != Some(active)
                {
                    if tx
                        .send(Ok(IsActiveResponse { result: active }))
                        .await
                        .is_err()
                    {
                        return;
                    }
                    last = Some(active);
                }
                tokio::select! {
                    _ = tx.closed() => return,
                    _ = tokio::time::sleep(me.options.push_every) => {}
                }
            }
        });
        Ok(Response::new(ReceiverStream::new(rx)))
    }

    async fn get_metric_spec(
        &self,
        request: Request<ScaledObjectRef>,
    ) -> Result<Response<GetMetricSpecResponse>, Status> {
        let t = Instant::now();
        let r = self.spec(request.get_ref());
        self.record("GetMetricSpec", t, &r);
        r.map(Response::new)
    }

    type StreamMetricSpecStream = Stream<GetMetricSpecResponse>;

    /// The spec at once, then the stream held open: a trigger's target comes from its
    /// metadata alone, which KEDA sends anew with each call, so it never changes under an
    /// open stream and [`get_metric_spec`](Self::get_metric_spec) always agrees with it.
    async fn stream_metric_spec(
        &self,
        request: Request<ScaledObjectRef>,
    ) -> Result<Response<Stream<GetMetricSpecResponse>>, Status> {
        let t = Instant::now();
        let r = self.spec(request.get_ref());
        self.record("StreamMetricSpec", t, &r);
        let spec = r?;
        let (tx, rx) = mpsc::channel(1);
        tokio::spawn(async move {
            if tx.send(Ok(spec)).await.is_ok() {
                tx.closed().await;
            }
        });
        Ok(Response::new(ReceiverStream::new(rx)))
    }

    async fn get_metrics(
        &self,
        request: Request<GetMetricsRequest>,
    ) -> Result<Response<GetMetricsResponse>, Status> {
        let t = Instant::now();
        let request = request.into_inner();
        let r = async {
            let so = request.scaled_object_ref.unwrap_or_default();
            let v = self
                .value(&so.name, &so.namespace, &so.scaler_metadata)
                .await?;
            let ours = metric_name(v.config.metric);
            if !request.metric_name.is_empty() && strip_index(&request.metric_name) != ours {
                return Err(Status::invalid_argument(format!(
                    "metricName {:?}: this trigger serves {ours:?}",
                    request.metric_name
                )));
            }
            let value = v.answer.value;
            // The deprecated whole field, for a KEDA that reads only it: a replica count
            // rounded up, never down to fewer replicas than asked for.
            let whole = if v.config.metric == Metric::DesiredReplicas {
                value.ceil()
            } else {
                value.round()
            };
            Ok(GetMetricsResponse {
                metric_values: vec![MetricValue {
                    metric_name: ours,
                    metric_value: whole as i64,
                    metric_value_float: value,
                }],
            })
        }
        .await;
        self.record("GetMetrics", t, &r);
        r.map(Response::new)
    }
}
