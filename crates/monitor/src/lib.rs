//! `inferscale monitor`: the three metric tiers of a vLLM deployment and the states of its
//! alert rules, live in the terminal, refreshed every second.
//!
//! - [`signals`]: what is shown, as PromQL built from the catalog's names;
//! - [`source`]: where it is read: the pods' `/metrics` scraped into the PromQL store and
//!   evaluated in process (no Prometheus, no lag), or a Prometheus' HTTP API;
//! - [`dashboard`]: one refresh's numbers, pure (missing stays missing);
//! - [`ui`]: the views drawn with ratatui into a buffer (snapshot-tested, and printed as
//!   text by `--once`);
//! - [`app`]: the terminal loop (keys, pause, views), `--once` and `--json`.
//!
//! With a [`Follow`] (`--service`), the engine targets are a Service's ready pods, found
//! through `inferscale-kube`'s EndpointSlice watch before every scrape: a pod that appears is
//! scraped from then on, one that goes is forgotten as Prometheus forgets it.
//!
//! The alert rules are those `inferscale generate` writes (or any PrometheusRule), evaluated
//! by the rehearsal's evaluator ([`inferscale_autoscale::alerts`]): pending with the time
//! left, firing, per series, as Prometheus' rule manager does.
//!
//! ```
//! use inferscale_monitor::signals::{Plan, Scope};
//! let plan = Plan::new(&Scope {
//!     server: inferscale_catalog::Engine::Vllm,
//!     engine: "namespace=\"llm\"".into(),
//!     up: "namespace=\"llm\",job=\"vllm\"".into(),
//!     gpu: String::new(),
//!     window: "1m".into(),
//!     replica_label: "pod".into(),
//! }).unwrap();
//! assert!(plan.items.iter().any(|(_, q)| q.text().contains("vllm:num_requests_waiting")));
//! ```

pub mod app;
pub mod dashboard;
pub mod signals;
pub mod source;
pub mod ui;

use inferscale_autoscale::alerts::{AlertRule, Alerts};
use inferscale_http::prometheus::Prometheus;
use inferscale_http::transport::Get;
use inferscale_promql::Query;

use crate::dashboard::{Dashboard, History};
use crate::signals::{Plan, Scope};
use crate::source::{PodTarget, Pods, Remote, Source};

/// Where to read.
#[derive(Debug, Clone)]
pub enum SourceSpec {
    /// Scrape these endpoints directly.
    Pods {
        /// The targets.
        targets: Vec<PodTarget>,
        /// Timeout, body limit, credentials, TLS.
        access: Get,
    },
    /// Query this Prometheus.
    Prometheus(Prometheus),
}

/// A Service whose ready pods are the engine targets, found again before every scrape.
#[derive(Debug, Clone)]
pub struct Follow {
    /// The API's EndpointSlice watch.
    pub discovery: std::sync::Arc<inferscale_kube::Discovery>,
    /// The Service's namespace.
    pub namespace: String,
    /// The Service.
    pub service: String,
    /// The port: a number, or the name of the Service's port.
    pub port: String,
    /// The `job` label the pods' series get (the namespace label is `namespace`).
    pub job: String,
}

impl Follow {
    /// The Service's pods as targets: `pod` is the pod's name where the slice gives it.
    async fn targets(&self) -> Result<Vec<PodTarget>, inferscale_kube::DiscoveryError> {
        let found = self
            .discovery
            .endpoints(&self.namespace, &self.service, &self.port)
            .await?;
        Ok(found
            .into_iter()
            .map(|e| {
                let authority = e
                    .url
                    .trim_start_matches("http://")
                    .trim_end_matches('/')
                    .to_owned();
                let pod = e.pod.unwrap_or_else(|| authority.clone());
                PodTarget {
                    url: format!("{}/metrics", e.url),
                    labels: inferscale_promql::Labels::new([
                        ("job", self.job.as_str()),
                        ("namespace", self.namespace.as_str()),
                        ("pod", pod.as_str()),
                        ("instance", authority.as_str()),
                    ]),
                    kind: source::Kind::Engine,
                }
            })
            .collect())
    }
}

/// What to monitor.
#[derive(Debug, Clone)]
pub struct Config {
    /// Where to read.
    pub source: SourceSpec,
    /// With pods: a Service whose pods replace the engine targets at every scrape.
    pub follow: Option<Follow>,
    /// The alerting rules.
    pub rules: Vec<AlertRule>,
    /// Which series, and the window.
    pub scope: Scope,
    /// Refreshes the sparklines show.
    pub history: usize,
}

/// Why the monitor cannot start.
#[derive(Debug, thiserror::Error)]
pub enum MonitorError {
    /// A label matcher or the window does not make a valid query.
    #[error("the monitor's queries do not parse with these labels: {0}")]
    Query(#[from] inferscale_promql::ParseError),
    /// A target URL is wrong.
    #[error(transparent)]
    Url(#[from] inferscale_http::UrlError),
}

/// The monitor's state between refreshes.
#[derive(Debug)]
pub struct Monitor {
    plan: Plan,
    source: Source,
    follow: Option<Follow>,
    /// Why the Service's pods were last not found (the last ones known stay).
    follow_error: Option<String>,
    alerts: Alerts,
    history: History,
    scope: Scope,
}

/// How much more than the longest range the pods' store keeps, seconds.
const KEEP_MARGIN_S: f64 = 120.0;

impl Monitor {
    /// A monitor for `config`; nothing is read yet.
    ///
    /// # Errors
    ///
    /// When the queries do not parse with the configured labels, or a URL is wrong.
    pub fn new(config: Config) -> Result<Monitor, MonitorError> {
        let plan = Plan::new(&config.scope)?;
        let keep = plan.longest_range_s(config.rules.iter().map(|r| &r.query)) + KEEP_MARGIN_S;
        let source = match config.source {
            SourceSpec::Pods { targets, access } => Source::Pods(Pods::new(targets, access, keep)?),
            SourceSpec::Prometheus(p) => Source::Prometheus(Remote::new(p)),
        };
        Ok(Monitor {
            plan,
            source,
            follow: config.follow,
            follow_error: None,
            alerts: Alerts::new(config.rules),
            history: History::new(config.history),
            scope: config.scope,
        })
    }

    /// The source, in words.
    pub fn describe(&self) -> String {
        match &self.follow {
            Some(f) => format!(
                "the pods of Service {}/{} (port {}, through {})",
                f.namespace,
                f.service,
                f.port,
                f.discovery.source()
            ),
            None => self.source.describe(),
        }
    }

    /// The sparklines' history.
    pub fn history(&self) -> &History {
        &self.history
    }

    /// The alert rules and their states.
    pub fn alerts(&self) -> &Alerts {
        &self.alerts
    }

    /// Whether the numbers come from a Prometheus (which has history before the start).
    pub fn reads_prometheus(&self) -> bool {
        matches!(self.source, Source::Prometheus(_))
    }

    /// With a Prometheus: replays the rules over the last `for` of each (a twentieth of the
    /// longest `for` apart, between `min_step` and 15 seconds, up to `now`), so that an alert pending or firing before the monitor started
    /// shows as such rather than as newly pending. Prometheus restores its own alerts the
    /// same way after a restart (from `ALERTS_FOR_STATE`). Nothing to do for the pods, which
    /// have no history before the first scrape.
    pub async fn restore(&mut self, now: f64, min_step: f64) {
        let Source::Prometheus(remote) = &self.source else {
            return;
        };
        let longest = self
            .alerts
            .rules()
            .iter()
            .map(|r| r.for_s)
            .fold(0.0, f64::max);
        if longest <= 0.0 {
            return;
        }
        let step = (longest / 20.0).clamp(min_step.clamp(0.1, 15.0), 15.0);
        let queries: Vec<Query> = self
            .alerts
            .rules()
            .iter()
            .map(|r| r.query.clone())
            .collect();
        let refs: Vec<&Query> = queries.iter().collect();
        let steps = (longest / step).ceil() as i64 + 1;
        for k in (1..=steps).rev() {
            let t = now - k as f64 * step;
            let results = remote.eval_all(&refs, t).await;
            for (i, r) in results.into_iter().enumerate() {
                let r = r.map_err(|e| inferscale_http::with_causes(&e));
                self.alerts.eval(i, t, r);
            }
        }
    }

    /// The pods' source, to feed scrapes in by hand (`None` for a Prometheus).
    pub fn pods_mut(&mut self) -> Option<&mut Pods> {
        match &mut self.source {
            Source::Pods(p) => Some(p),
            Source::Prometheus(_) => None,
        }
    }

    /// Reads everything at `now` (seconds since the epoch), evaluates the rules, and
    /// returns the dashboard.
    pub async fn refresh(&mut self, now: f64) -> Dashboard {
        self.find_pods(now).await;
        self.source.collect(now).await;
        self.evaluate(now).await
    }

    /// With a [`Follow`]: makes the Service's ready pods the engine targets.
    pub async fn find_pods(&mut self, now: f64) {
        let (Some(f), Source::Pods(pods)) = (&self.follow, &mut self.source) else {
            return;
        };
        self.follow_error = match f.targets().await {
            Ok(t) => pods
                .set_engines(t, now)
                .err()
                .map(|e| inferscale_http::with_causes(&e)),
            Err(e) => Some(e.to_string()),
        };
    }

    /// Evaluates the panels and the rules at `now` over what was read, and returns the
    /// dashboard (and records it for the sparklines).
    pub async fn evaluate(&mut self, now: f64) -> Dashboard {
        let n = self.plan.items.len();
        let queries: Vec<&Query> = self
            .plan
            .items
            .iter()
            .map(|(_, q)| q)
            .chain(self.alerts.rules().iter().map(|r| &r.query))
            .collect();
        let queries: Vec<Query> = queries.into_iter().cloned().collect();
        let refs: Vec<&Query> = queries.iter().collect();
        let mut results = self.source.eval_all(&refs, now).await;
        let rules = results.split_off(n);
        for (i, r) in rules.into_iter().enumerate() {
            let r = r.map_err(|e| inferscale_http::with_causes(&e));
            self.alerts.eval(i, now, r);
        }
        let tagged: Vec<_> = self
            .plan
            .items
            .iter()
            .map(|(m, _)| *m)
            .zip(results)
            .collect();
        let mut d = Dashboard::build(
            now,
            &tagged,
            &self.alerts,
            self.source.health(),
            &self.scope.replica_label,
        );
        d.source = match &self.follow {
            Some(f) => format!(
                "Service {}/{} ({}): {}{}",
                f.namespace,
                f.service,
                f.discovery.source(),
                self.source.describe(),
                self.follow_error
                    .as_ref()
                    .map_or_else(String::new, |e| format!(" — last pods kept: {e}"))
            ),
            None => self.source.describe(),
        };
        d.window = self.scope.window.clone();
        self.history.push(&d);
        d
    }
}
