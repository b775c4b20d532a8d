//! A trigger's `scalerMetadata`: what it asks for, read strictly (an unknown key or a bad
//! value is refused, naming the key; KEDA shows the message in the ScaledObject's events).

use std::collections::BTreeMap;
use std::fmt;

use crate::external::decide::{TREND_WINDOW_MAX_S, TREND_WINDOW_S};
use inferscale_catalog::Engine;

/// What a trigger reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metric {
    /// Requests waiting, summed over the pods.
    QueueDepth,
    /// Requests running, summed over the pods.
    Running,
    /// Requests in flight (running + waiting), summed over the pods: by Little's law
    /// proportional to the load a pod carries, where the queue alone reads 0 until it is
    /// overloaded.
    InFlight,
    /// Requests arriving per second, summed over the pods: what finished over the window
    /// plus the growth of what is in flight (requests are conserved), so that a load
    /// beyond what the pods serve still shows.
    ArrivalRate,
    /// KV-cache usage (0–1), the mean over the pods.
    KvCacheUsage,
    /// p95 time to first token over `window`, seconds, from the pods' merged histograms.
    TtftP95,
    /// p95 queue time over `window`, seconds.
    QueueTimeP95,
    /// p95 end-to-end latency over `window`, seconds.
    E2eP95,
    /// The replica count to reach: the queue target, raised by the latency guardrail (see
    /// [`crate::external::decide::desired_replicas`]). Served with a target of 1.
    DesiredReplicas,
}

impl Metric {
    /// Every metric, in the order `--help` lists them.
    pub const ALL: [Metric; 9] = [
        Metric::QueueDepth,
        Metric::Running,
        Metric::InFlight,
        Metric::ArrivalRate,
        Metric::KvCacheUsage,
        Metric::TtftP95,
        Metric::QueueTimeP95,
        Metric::E2eP95,
        Metric::DesiredReplicas,
    ];

    /// The `metric` value that names it, and the metric name KEDA is told.
    pub fn key(self) -> &'static str {
        match self {
            Metric::QueueDepth => "queue_depth",
            Metric::Running => "running",
            Metric::InFlight => "in_flight",
            Metric::ArrivalRate => "arrival_rate",
            Metric::KvCacheUsage => "kv_cache_usage",
            Metric::TtftP95 => "ttft_p95",
            Metric::QueueTimeP95 => "queue_time_p95",
            Metric::E2eP95 => "e2e_p95",
            Metric::DesiredReplicas => "desired_replicas",
        }
    }

    /// Whether `desired_replicas` can scale by it (`signal`): a quantity that grows with the
    /// load and adds up over pods.
    pub fn is_load(self) -> bool {
        matches!(
            self,
            Metric::QueueDepth | Metric::Running | Metric::InFlight | Metric::ArrivalRate
        )
    }

    /// Whether it is a percentile over a window.
    pub fn is_latency(self) -> bool {
        matches!(
            self,
            Metric::TtftP95 | Metric::QueueTimeP95 | Metric::E2eP95
        )
    }
}

impl fmt::Display for Metric {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.key())
    }
}

/// Where the pods are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pods {
    /// A Service's ready endpoints, from its EndpointSlices.
    Service {
        /// `service`.
        name: String,
        /// `namespace` (the ScaledObject's when absent).
        namespace: String,
        /// `port`: the metrics port (a number or the EndpointSlice port's name).
        port: String,
    },
    /// `targets`: base URLs, comma-separated (`/metrics` is appended to each).
    Targets(Vec<String>),
}

/// A trigger's configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Where the pods are.
    pub pods: Pods,
    /// What is read.
    pub metric: Metric,
    /// The HPA target per replica (`target`); for `desired_replicas`, the per-replica
    /// target of its `signal`.
    pub target: f64,
    /// For `desired_replicas`: what it scales by (`signal`, default `queue_depth`) at
    /// `target` per replica.
    pub signal: Metric,
    /// For `desired_replicas` with another signal: the queue per replica that also asks for
    /// replicas (`queueTarget`: a step fills the queue before the signal's window shows it).
    pub queue_target: Option<f64>,
    /// For `desired_replicas`: the signal also predicted this far ahead, seconds (`horizon`),
    /// by a straight line through its answers of the last `trend_window_s`
    /// ([`crate::external::decide::Trend`]).
    pub horizon_s: Option<f64>,
    /// For a `horizon`: how far back the line looks, seconds (`trendWindow`, from a minute to
    /// [`TREND_WINDOW_MAX_S`]; default [`TREND_WINDOW_S`], five minutes).
    pub trend_window_s: f64,
    /// Above this the scaler reports the ScaledObject active (`activationTarget`, default 0).
    pub activation_target: f64,
    /// The window of percentiles, seconds (`window`, default 60 s).
    pub window_s: f64,
    /// The engine whose names are read (`engine`; detected from the pods when absent).
    pub engine: Option<Engine>,
    /// For `desired_replicas`: the latency guardrail (`latencyTarget`, seconds) and the
    /// percentile it is held against (`latencyMetric`, default `e2e_p95`).
    pub guardrail: Option<(Metric, f64)>,
    /// For the guardrail: the most it multiplies the pods by (`latencyMaxRatio`, above 1;
    /// the percentile is read up to this many times its target); unbounded when absent.
    pub guardrail_ratio_max: Option<f64>,
    /// How long one pod's scrape may take (`timeout`, seconds); the scaler's default when
    /// absent.
    pub timeout_s: Option<f64>,
}

/// A key of the metadata that cannot be used, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("scalerMetadata.{key}: {message}")]
pub struct MetadataError {
    /// The key.
    pub key: String,
    /// What was wrong and what is expected.
    pub message: String,
}

fn bad(key: &str, message: impl Into<String>) -> MetadataError {
    MetadataError {
        key: key.to_owned(),
        message: message.into(),
    }
}

/// Keys KEDA itself puts in an `external` trigger's metadata: passed to us, not ours to
/// judge.
const KEDA_KEYS: [&str; 4] = ["scalerAddress", "enableTLS", "unsafeSsl", "metricType"];

/// The keys this scaler reads.
pub const KEYS: [&str; 17] = [
    "service",
    "namespace",
    "port",
    "targets",
    "metric",
    "target",
    "signal",
    "queueTarget",
    "horizon",
    "trendWindow",
    "activationTarget",
    "window",
    "engine",
    "latencyTarget",
    "latencyMetric",
    "latencyMaxRatio",
    "timeout",
];

fn number(key: &str, v: &str, min_exclusive: Option<f64>) -> Result<f64, MetadataError> {
    let x: f64 = v
        .trim()
        .parse()
        .map_err(|_| bad(key, format!("{v:?} is not a number")))?;
    if !x.is_finite() || x < 0.0 {
        return Err(bad(key, format!("{v:?}: expected a finite number ≥ 0")));
    }
    if let Some(m) = min_exclusive
        && x <= m
    {
        return Err(bad(key, format!("{v:?}: expected a number above {m}")));
    }
    Ok(x)
}

/// A duration: `30s`, `2m`, `1h` or plain seconds.
pub fn seconds(key: &str, v: &str) -> Result<f64, MetadataError> {
    let t = v.trim();
    let (n, unit) = match t.char_indices().find(|(_, c)| c.is_ascii_alphabetic()) {
        Some((i, _)) => t.split_at(i),
        None => (t, "s"),
    };
    let mul = match unit {
        "ms" => 0.001,
        "s" => 1.0,
        "m" => 60.0,
        "h" => 3600.0,
        _ => {
            return Err(bad(
                key,
                format!("{v:?}: expected a duration such as 500ms, 30s, 2m or 1h"),
            ));
        }
    };
    let x = number(key, n, Some(0.0)).map_err(|_| {
        bad(
            key,
            format!("{v:?}: expected a duration such as 500ms, 30s, 2m or 1h"),
        )
    })?;
    Ok(x * mul)
}

fn metric(key: &str, v: &str) -> Result<Metric, MetadataError> {
    Metric::ALL
        .into_iter()
        .find(|m| m.key() == v.trim())
        .ok_or_else(|| {
            let all: Vec<&str> = Metric::ALL.iter().map(|m| m.key()).collect();
            bad(key, format!("{v:?} is not one of {}", all.join(", ")))
        })
}

fn base_url(key: &str, v: &str) -> Result<String, MetadataError> {
    let u = v.trim().trim_end_matches('/');
    let rest = u
        .strip_prefix("http://")
        .or_else(|| u.strip_prefix("https://"))
        .ok_or_else(|| {
            bad(
                key,
                format!("{v:?}: expected an http:// or https:// base URL"),
            )
        })?;
    if rest.is_empty() || rest.starts_with('/') {
        return Err(bad(key, format!("{v:?}: the URL has no host")));
    }
    Ok(u.to_owned())
}

impl Config {
    /// Reads a trigger's metadata; `namespace` is the ScaledObject's, for a `service`
    /// without one.
    // Long: one scalerMetadata key after another, each read strictly with the key named in its
    // error.
    pub fn from_metadata(
        meta: &BTreeMap<String, String>,
        namespace: &str,
    ) -> Result<Config, MetadataError> {
        for k in meta.keys() {
            if !KEYS.contains(&k.as_str()) && !KEDA_KEYS.contains(&k.as_str()) {
                return Err(bad(
                    k,
                    format!("unknown key; the scaler reads {}", KEYS.join(", ")),
                ));
            }
        }
        let get = |k: &str| {
            meta.get(k)
                .map(String::as_str)
                .filter(|v| !v.trim().is_empty())
        };
        let pods = match (get("service"), get("targets")) {
            (Some(_), Some(_)) => {
                return Err(bad(
                    "targets",
                    "give either service (with port) or targets, not both",
                ));
            }
            (None, None) => {
                return Err(bad(
                    "service",
                    "missing: give service and port (pods found through the Service's EndpointSlices) or targets (base URLs)",
                ));
            }
            (Some(name), None) => {
                let port = get("port").ok_or_else(|| {
                    bad(
                        "port",
                        "missing: the pods' metrics port, a number or a port name",
                    )
                })?;
                if let Ok(n) = port.trim().parse::<u32>()
                    && !(1..=65_535).contains(&n)
                {
                    return Err(bad(
                        "port",
                        format!("{port:?}: expected 1..65535 or a port name"),
                    ));
                }
                Pods::Service {
                    name: name.trim().to_owned(),
                    namespace: get("namespace").unwrap_or(namespace).trim().to_owned(),
                    port: port.trim().to_owned(),
                }
            }
            (None, Some(list)) => {
                if get("port").is_some() {
                    return Err(bad(
                        "port",
                        "only with service: targets carry their own ports",
                    ));
                }
                let urls = list
                    .split(',')
                    .filter(|s| !s.trim().is_empty())
                    .map(|s| base_url("targets", s))
                    .collect::<Result<Vec<_>, _>>()?;
                Pods::Targets(urls)
            }
        };
        let metric = metric(
            "metric",
            get("metric").ok_or_else(|| bad("metric", "missing"))?,
        )?;
        let target = match (metric, get("target")) {
            (Metric::DesiredReplicas, None) => {
                return Err(bad(
                    "target",
                    "missing: the per-replica value of its signal that desired_replicas aims at",
                ));
            }
            (_, None) => return Err(bad("target", "missing: the HPA's target per replica")),
            (_, Some(v)) => number("target", v, Some(0.0))?,
        };
        let activation_target = get("activationTarget")
            .map(|v| number("activationTarget", v, None))
            .transpose()?
            .unwrap_or(0.0);
        let window_s = get("window")
            .map(|v| seconds("window", v))
            .transpose()?
            .unwrap_or(60.0);
        let engine = match get("engine") {
            None | Some("auto") => None,
            Some(v) => Some(
                Engine::ALL
                    .into_iter()
                    .find(|e| e.key() == v.trim())
                    .ok_or_else(|| {
                        let all: Vec<&str> = Engine::ALL.iter().map(|e| e.key()).collect();
                        bad(
                            "engine",
                            format!("{v:?} is not auto or one of {}", all.join(", ")),
                        )
                    })?,
            ),
        };
        let guardrail = match (get("latencyTarget"), get("latencyMetric")) {
            (None, None) => None,
            (None, Some(_)) => return Err(bad("latencyTarget", "missing: latencyMetric needs it")),
            (Some(v), m) => {
                if metric != Metric::DesiredReplicas {
                    return Err(bad("latencyTarget", "only with metric desired_replicas"));
                }
                let m = m
                    .map(|m| self::metric("latencyMetric", m))
                    .transpose()?
                    .unwrap_or(Metric::E2eP95);
                if !m.is_latency() {
                    return Err(bad(
                        "latencyMetric",
                        format!(
                            "{m} is not a latency: expected ttft_p95, queue_time_p95 or e2e_p95"
                        ),
                    ));
                }
                Some((m, seconds("latencyTarget", v)?))
            }
        };
        let guardrail_ratio_max = match get("latencyMaxRatio") {
            None => None,
            Some(_) if guardrail.is_none() => {
                return Err(bad("latencyMaxRatio", "only with latencyTarget"));
            }
            Some(v) => Some(number("latencyMaxRatio", v, Some(1.0))?),
        };
        let signal = match get("signal") {
            None => Metric::QueueDepth,
            Some(_) if metric != Metric::DesiredReplicas => {
                return Err(bad("signal", "only with metric desired_replicas"));
            }
            Some(v) => {
                let m = self::metric("signal", v)?;
                if !m.is_load() {
                    return Err(bad(
                        "signal",
                        format!(
                            "{m} is not a load: expected queue_depth, running, in_flight or arrival_rate"
                        ),
                    ));
                }
                m
            }
        };
        let queue_target = match get("queueTarget") {
            None => None,
            Some(_) if metric != Metric::DesiredReplicas => {
                return Err(bad("queueTarget", "only with metric desired_replicas"));
            }
            Some(_) if signal == Metric::QueueDepth => {
                return Err(bad(
                    "queueTarget",
                    "the signal is queue_depth already: give target alone",
                ));
            }
            Some(v) => Some(number("queueTarget", v, Some(0.0))?),
        };
        let horizon_s = match get("horizon") {
            None => None,
            Some(_) if metric != Metric::DesiredReplicas => {
                return Err(bad("horizon", "only with metric desired_replicas"));
            }
            Some(v) => Some(seconds("horizon", v)?),
        };
        let trend_window_s = match get("trendWindow") {
            None => TREND_WINDOW_S,
            Some(_) if horizon_s.is_none() => {
                return Err(bad("trendWindow", "only with a horizon"));
            }
            Some(v) => {
                let w = seconds("trendWindow", v)?;
                if !(60.0..=TREND_WINDOW_MAX_S).contains(&w) {
                    return Err(bad(
                        "trendWindow",
                        format!(
                            "{v:?}: expected from 1m to {}m (a line needs a few scrapes, and a window longer than the load's changes only lags)",
                            TREND_WINDOW_MAX_S / 60.0
                        ),
                    ));
                }
                w
            }
        };
        let timeout_s = get("timeout").map(|v| seconds("timeout", v)).transpose()?;
        Ok(Config {
            pods,
            metric,
            target,
            signal,
            queue_target,
            horizon_s,
            trend_window_s,
            activation_target,
            window_s,
            engine,
            guardrail,
            guardrail_ratio_max,
            timeout_s,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn a_service_trigger_reads_with_defaults() {
        let c = Config::from_metadata(
            &meta(&[
                ("scalerAddress", "inferscale-scaler.keda:9090"),
                ("service", "vllm"),
                ("port", "8000"),
                ("metric", "desired_replicas"),
                ("target", "5"),
                ("latencyTarget", "5s"),
            ]),
            "default",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            c.pods,
            Pods::Service {
                name: "vllm".into(),
                namespace: "default".into(),
                port: "8000".into()
            }
        );
        assert_eq!(
            (c.metric, c.target, c.activation_target, c.window_s),
            (Metric::DesiredReplicas, 5.0, 0.0, 60.0)
        );
        assert_eq!(c.guardrail, Some((Metric::E2eP95, 5.0)));
        assert_eq!(c.guardrail_ratio_max, None);
        for (v, ok) in [("1.5", Some(1.5)), ("1", None), ("0.5", None), ("x", None)] {
            let mut m = meta(&[
                ("targets", "http://127.0.0.1:1"),
                ("metric", "desired_replicas"),
                ("target", "5"),
                ("latencyTarget", "5s"),
            ]);
            m.insert("latencyMaxRatio".into(), v.into());
            match (Config::from_metadata(&m, "d"), ok) {
                (Ok(c), Some(r)) => assert_eq!(c.guardrail_ratio_max, Some(r)),
                (Err(e), None) => assert_eq!(e.key, "latencyMaxRatio", "{v}: {e}"),
                (got, _) => panic!("{v}: {got:?}"),
            }
        }
        let t = Config::from_metadata(
            &meta(&[
                ("targets", "http://127.0.0.1:8001/, http://[::1]:8002"),
                ("metric", "e2e_p95"),
                ("target", "2.5"),
                ("window", "2m"),
                ("engine", "vllm"),
            ]),
            "x",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            t.pods,
            Pods::Targets(vec![
                "http://127.0.0.1:8001".into(),
                "http://[::1]:8002".into()
            ])
        );
        assert_eq!((t.window_s, t.engine), (120.0, Some(Engine::Vllm)));
    }

    #[test]
    fn a_trend_window_is_read_with_a_horizon_and_bounded() {
        let base = [
            ("targets", "http://127.0.0.1:1"),
            ("metric", "desired_replicas"),
            ("signal", "arrival_rate"),
            ("target", "5"),
            ("horizon", "370s"),
        ];
        let t = Config::from_metadata(&meta(&base), "d").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(t.trend_window_s, TREND_WINDOW_S);
        for (v, want) in [
            ("2m", Some(120.0)),
            ("90s", Some(90.0)),
            ("30m", Some(1800.0)),
        ] {
            let mut m = meta(&base);
            m.insert("trendWindow".into(), v.into());
            assert_eq!(
                Config::from_metadata(&m, "d")
                    .ok()
                    .map(|c| c.trend_window_s),
                want
            );
        }
        for v in ["10s", "31m", "2 fortnights", "-2m"] {
            let mut m = meta(&base);
            m.insert("trendWindow".into(), v.into());
            let e = Config::from_metadata(&m, "d").expect_err(v);
            assert_eq!(e.key, "trendWindow", "{v}: {e}");
            assert!(e.to_string().contains(v), "{e}");
        }
    }

    #[test]
    fn bad_metadata_is_refused_naming_the_key() {
        let base = [
            ("targets", "http://127.0.0.1:1"),
            ("metric", "queue_depth"),
            ("target", "5"),
        ];
        for (change, key) in [
            (("colour", "blue"), "colour"),
            (("metric", "queue"), "metric"),
            (("target", "-1"), "target"),
            (("target", "NaN"), "target"),
            (("target", "0"), "target"),
            (("window", "5 parsecs"), "window"),
            (("window", "0s"), "window"),
            (("engine", "vllm2"), "engine"),
            (("targets", "127.0.0.1:1"), "targets"),
            (("service", "vllm"), "targets"),
            (("port", "8000"), "port"),
            (("latencyTarget", "5s"), "latencyTarget"),
            (("activationTarget", "x"), "activationTarget"),
            (("timeout", "-3s"), "timeout"),
            (("signal", "in_flight"), "signal"),
            (("queueTarget", "5"), "queueTarget"),
            (("horizon", "5m"), "horizon"),
            (("trendWindow", "2m"), "trendWindow"),
            (("latencyMaxRatio", "2"), "latencyMaxRatio"),
        ] {
            let mut m = meta(&base);
            m.insert(change.0.into(), change.1.into());
            let e = Config::from_metadata(&m, "default").expect_err(change.0);
            assert_eq!(e.key, key, "{change:?}: {e}");
            assert!(
                e.to_string()
                    .starts_with(&format!("scalerMetadata.{key}: ")),
                "{e}"
            );
        }
        let e = Config::from_metadata(&meta(&[("metric", "running"), ("target", "1")]), "d")
            .expect_err("no pods");
        assert_eq!(e.key, "service");
        let e = Config::from_metadata(
            &meta(&[("service", "s"), ("metric", "running"), ("target", "1")]),
            "d",
        )
        .expect_err("no port");
        assert_eq!(e.key, "port");
        let e = Config::from_metadata(
            &meta(&[
                ("service", "s"),
                ("port", "70000"),
                ("metric", "running"),
                ("target", "1"),
            ]),
            "d",
        )
        .expect_err("port range");
        assert_eq!(e.key, "port");
        let e = Config::from_metadata(
            &meta(&[
                ("targets", "http://a:1"),
                ("metric", "desired_replicas"),
                ("target", "5"),
                ("latencyTarget", "5s"),
                ("latencyMetric", "running"),
            ]),
            "d",
        )
        .expect_err("latency metric");
        assert_eq!(e.key, "latencyMetric");
    }
}
