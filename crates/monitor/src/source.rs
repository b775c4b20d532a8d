//! Where the numbers come from: the pods' own `/metrics` (scraped as Prometheus scrapes
//! them, into the PromQL store, and evaluated in process) or a Prometheus (its HTTP API).
//! Both answer the same queries; only the pods know why a target is down.

use inferscale_http::prometheus::ApiCallError;
use inferscale_http::prometheus::Prometheus;
use inferscale_http::scrape::Scraper;
use inferscale_http::transport::Get;
use inferscale_http::{Target, UrlError};
use inferscale_promql::{ApiError, EvalError, Evaluator, Labels, Query, Store, Value};
use inferscale_promtext::Exposition;

use crate::dashboard;

/// Why a query gave no value.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// Evaluating it over the scraped series failed.
    #[error(transparent)]
    Eval(#[from] EvalError),
    /// Prometheus could not be asked.
    #[error(transparent)]
    Prometheus(#[from] ApiCallError),
    /// Prometheus' answer is not a query result.
    #[error("not a query result")]
    Answer(#[source] ApiError),
    /// The task that asked did not finish.
    #[error("the query task failed")]
    Task(#[source] tokio::task::JoinError),
}

/// What a scrape target serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// An inference server's `/metrics`.
    Engine,
    /// A GPU exporter (DCGM).
    Gpu,
}

/// A target to scrape, and the labels its series get (as Prometheus' target labels).
#[derive(Debug, Clone)]
pub struct PodTarget {
    /// The metrics URL (`/metrics` when no path is given).
    pub url: String,
    /// Its target labels (`job`, `namespace`, `pod`, `instance`).
    pub labels: Labels,
    /// Engine or GPU exporter.
    pub kind: Kind,
}

#[derive(Debug)]
struct Scrapee {
    scraper: Scraper,
    labels: Labels,
    kind: Kind,
    name: String,
    up: bool,
    error: Option<String>,
    since: f64,
    seen: bool,
}

impl Scrapee {
    fn new(t: PodTarget, access: &Get) -> Result<Scrapee, UrlError> {
        let target = Target::parse_metrics(&t.url)?;
        let name = match t.labels.get("pod") {
            "" => target.authority(),
            p => p.to_owned(),
        };
        Ok(Scrapee {
            scraper: Scraper::new(target, access.clone()),
            labels: t.labels,
            kind: t.kind,
            name,
            up: false,
            error: None,
            since: 0.0,
            seen: false,
        })
    }
}

/// The pods' endpoints, scraped into an in-memory series store.
#[derive(Debug)]
pub struct Pods {
    targets: Vec<Scrapee>,
    access: Get,
    store: Store,
    keep_s: f64,
    next_trim: f64,
}

impl Pods {
    /// Scrapes `targets` with `access`'s timeout, limit, credentials and TLS, keeping
    /// `keep_s` seconds of samples (the longest range a query reads, and some).
    ///
    /// # Errors
    ///
    /// When a URL is not an http(s) URL.
    pub fn new(targets: Vec<PodTarget>, access: Get, keep_s: f64) -> Result<Pods, UrlError> {
        let targets = targets
            .into_iter()
            .map(|t| Scrapee::new(t, &access))
            .collect::<Result<_, UrlError>>()?;
        Ok(Pods {
            targets,
            access,
            store: Store::new(),
            keep_s,
            next_trim: 0.0,
        })
    }

    /// Makes the engine targets `engines` (a Service's pods as discovery now sees them),
    /// keeping the GPU exporters: a target already scraped keeps its history; one that is
    /// gone is forgotten at `now` as Prometheus forgets a target service discovery drops
    /// (its series go stale, no `up` is written); a new one is scraped from the next scrape.
    /// Returns how many were added and removed.
    ///
    /// # Errors
    ///
    /// When a URL is not an http(s) URL (nothing is changed then).
    pub fn set_engines(
        &mut self,
        engines: Vec<PodTarget>,
        now: f64,
    ) -> Result<(usize, usize), UrlError> {
        let mut fresh: Vec<Scrapee> = Vec::new();
        for t in &engines {
            if !self
                .targets
                .iter()
                .any(|s| s.kind == Kind::Engine && s.labels == t.labels)
            {
                fresh.push(Scrapee::new(t.clone(), &self.access)?);
            }
        }
        let t = (now * 1000.0).round() as i64;
        let store = &mut self.store;
        let mut removed = 0;
        self.targets.retain(|s| {
            if s.kind != Kind::Engine || engines.iter().any(|e| e.labels == s.labels) {
                return true;
            }
            store.forget(&s.labels, t);
            removed += 1;
            false
        });
        let added = fresh.len();
        self.targets.extend(fresh);
        Ok((added, removed))
    }

    /// Scrapes every target once, concurrently, at `now` (seconds since the epoch), and
    /// [ingests](Self::ingest) what each gave.
    pub async fn scrape(&mut self, now: f64) {
        let scrapers: Vec<Scraper> = self.targets.iter().map(|t| t.scraper.clone()).collect();
        let results = inferscale_http::scrape::scrape_all(&scrapers).await;
        for (i, r) in results.into_iter().enumerate() {
            match r {
                Ok(exp) => self.ingest(i, now, Ok(&exp)),
                Err(e) => self.ingest(i, now, Err(&e)),
            }
        }
    }

    /// Records target `i`'s scrape at `now`: its exposition, or why there was none. A
    /// failed scrape writes `up` 0 and makes the target's series stale, as Prometheus does,
    /// so a pod that went away drops out of every panel until it comes back.
    ///
    /// # Panics
    ///
    /// When `i` is not a target's index.
    pub fn ingest(
        &mut self,
        i: usize,
        now: f64,
        scraped: Result<&Exposition<'_>, &dyn std::error::Error>,
    ) {
        let t = (now * 1000.0).round() as i64;
        let s = &mut self.targets[i];
        let ok = scraped.is_ok();
        match scraped {
            Ok(exp) => {
                self.store.scrape(&s.labels, t, Some(exp));
                s.error = None;
            }
            Err(e) => {
                self.store.scrape(&s.labels, t, None);
                s.error = Some(inferscale_http::with_causes(e));
            }
        }
        if !s.seen || s.up != ok {
            s.since = now;
        }
        s.up = ok;
        s.seen = true;
        if now >= self.next_trim {
            self.store
                .retain_after(((now - self.keep_s) * 1000.0).round() as i64);
            self.next_trim = now + 60.0;
        }
    }

    /// Evaluates `q` at `now` over what was scraped.
    pub fn eval(&self, q: &Query, now: f64) -> Result<Value, EvalError> {
        Evaluator::new(&self.store).eval(q, (now * 1000.0).round() as i64)
    }

    /// Each target's health.
    pub fn health(&self) -> Vec<dashboard::Target> {
        self.targets
            .iter()
            .filter(|s| s.seen)
            .map(|s| dashboard::Target {
                name: s.name.clone(),
                url: s.scraper.url().to_owned(),
                kind: match s.kind {
                    Kind::Engine => "engine",
                    Kind::Gpu => "gpu",
                },
                up: s.up,
                error: s.error.clone(),
                since: s.since,
            })
            .collect()
    }

    /// How many targets, by kind.
    pub fn count(&self, kind: Kind) -> usize {
        self.targets.iter().filter(|t| t.kind == kind).count()
    }
}

/// A Prometheus that scrapes the deployment.
#[derive(Debug, Clone)]
pub struct Remote {
    prometheus: Prometheus,
}

impl Remote {
    /// Reads through `prometheus`.
    pub fn new(prometheus: Prometheus) -> Remote {
        Remote { prometheus }
    }

    /// The server's URL.
    pub fn url(&self) -> &str {
        self.prometheus.url()
    }

    /// Every query at `at` (seconds since the epoch), concurrently; each result or why it
    /// failed.
    pub async fn eval_all(&self, queries: &[&Query], at: f64) -> Vec<Result<Value, ReadError>> {
        let handles: Vec<_> = queries
            .iter()
            .map(|q| {
                let p = self.prometheus.clone();
                let text = q.text().to_owned();
                tokio::spawn(async move { p.query(&text, Some(at)).await })
            })
            .collect();
        let mut out = Vec::with_capacity(handles.len());
        for h in handles {
            out.push(match h.await {
                Ok(Ok(json)) => inferscale_promql::from_api_json(&json).map_err(ReadError::Answer),
                Ok(Err(e)) => Err(ReadError::Prometheus(e)),
                Err(e) => Err(ReadError::Task(e)),
            });
        }
        out
    }
}

/// The pods, or a Prometheus.
#[derive(Debug)]
pub enum Source {
    /// Scraped by the monitor.
    Pods(Pods),
    /// Read from a Prometheus.
    Prometheus(Remote),
}

impl Source {
    /// In words, for the header.
    pub fn describe(&self) -> String {
        match self {
            Source::Pods(p) => {
                let (e, g) = (p.count(Kind::Engine), p.count(Kind::Gpu));
                let plural = |n: usize| if n == 1 { "" } else { "s" };
                if g == 0 {
                    format!("{e} pod{} (direct)", plural(e))
                } else {
                    format!("{e} pod{} + {g} DCGM (direct)", plural(e))
                }
            }
            Source::Prometheus(r) => format!("Prometheus {}", r.url()),
        }
    }

    /// Reads what there is to read at `now`: the pods are scraped; a Prometheus has it.
    pub async fn collect(&mut self, now: f64) {
        if let Source::Pods(p) = self {
            p.scrape(now).await;
        }
    }

    /// Every query's result at `now`.
    pub async fn eval_all(&self, queries: &[&Query], now: f64) -> Vec<Result<Value, ReadError>> {
        match self {
            Source::Pods(p) => queries
                .iter()
                .map(|q| p.eval(q, now).map_err(ReadError::from))
                .collect(),
            Source::Prometheus(r) => r.eval_all(queries, now).await,
        }
    }

    /// The targets' health (the pods only).
    pub fn health(&self) -> Vec<dashboard::Target> {
        match self {
            Source::Pods(p) => p.health(),
            Source::Prometheus(_) => Vec::new(),
        }
    }
}
