//! Scraping the pods for a trigger: all at once, each bounded by a timeout, through the one
//! scrape client (`inferscale_http::scrape`), into each pod's [`History`]; answers are cached
//! briefly, so that KEDA's poll and the HPA's metric fetch a moment later do not scrape
//! twice.

use inferscale_clock::Instant;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use inferscale_catalog::{Signal, Snapshot, names_for};
use inferscale_http::Target;
use inferscale_http::scrape::Scraper;
use inferscale_http::transport::Get;
use inferscale_promtext::{ParseOptions, parse_with, retain_families};

use crate::decide::{History, PodError, PodResult};
use crate::metrics::Metrics;

/// A pod no trigger has read for this long is forgotten (seconds).
const FORGET_AFTER_S: f64 = 600.0;

/// The pods' scrapes, shared by every request of a scaler.
#[derive(Debug)]
pub struct Pods {
    started: Instant,
    timeout: Duration,
    cache_for: Duration,
    history: Mutex<History>,
    /// Answers by the pods and window asked for: triggers that read the same pods share
    /// their scrapes.
    cache: Mutex<HashMap<CacheKey, Cached>>,
    metrics: Arc<Metrics>,
}

/// The pods (base URLs), the window (its bits) and the signals read.
type CacheKey = (Vec<String>, u64, Vec<Signal>);

#[derive(Debug, Clone)]
struct Cached {
    at: Instant,
    results: Vec<PodResult>,
}

impl Pods {
    /// Scrapes time out after `timeout`; answers are reused for `cache_for`.
    pub fn new(timeout: Duration, cache_for: Duration) -> Arc<Pods> {
        Pods::with_metrics(timeout, cache_for, Arc::default())
    }

    /// As [`Pods::new`], counting scrapes and cache hits in `metrics`.
    pub fn with_metrics(
        timeout: Duration,
        cache_for: Duration,
        metrics: Arc<Metrics>,
    ) -> Arc<Pods> {
        Arc::new(Pods {
            started: Instant::now(),
            timeout,
            cache_for,
            history: Mutex::new(History::default()),
            cache: Mutex::new(HashMap::new()),
            metrics,
        })
    }

    /// Each pod's snapshot over `window_s` (or why it has none), in the order of `urls`
    /// (base URLs; `/metrics` is scraped). Pods no trigger has read for ten minutes are
    /// forgotten.
    ///
    /// Every signal is read; [`Pods::read_within`] reads only some.
    pub async fn read(self: &Arc<Self>, urls: &[String], window_s: f64) -> Vec<PodResult> {
        self.read_within(urls, window_s, self.timeout, &Signal::ALL)
            .await
    }

    /// As [`Pods::read`], each scrape bounded by `timeout` instead of the default, and only
    /// the families of `signals` parsed (a pod's other sixty-odd families are skipped
    /// before parsing, which is most of a scrape's cost).
    pub async fn read_within(
        self: &Arc<Self>,
        urls: &[String],
        window_s: f64,
        timeout: Duration,
        signals: &[Signal],
    ) -> Vec<PodResult> {
        let key = (urls.to_vec(), window_s.to_bits(), signals.to_vec());
        if let Some(c) = self
            .cache
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&key)
            && c.at.elapsed() < self.cache_for
        {
            self.metrics.cache_hit();
            return c.results.clone();
        }
        let names: Arc<Vec<&'static str>> = Arc::new(
            signals
                .iter()
                .flat_map(|s| names_for(*s).map(|n| n.name))
                .collect(),
        );
        let mut tasks = tokio::task::JoinSet::new();
        for (i, url) in urls.iter().enumerate() {
            let (url, metrics, names) =
                (url.clone(), Arc::clone(&self.metrics), Arc::clone(&names));
            tasks.spawn(async move {
                let t = Instant::now();
                let r = scrape(&url, timeout, &names).await;
                metrics.scrape(t.elapsed().as_secs_f64(), r.is_ok());
                (i, r)
            });
        }
        let mut got: Vec<Option<Result<Snapshot, PodError>>> = vec![None; urls.len()];
        while let Some(done) = tasks.join_next().await {
            if let Ok((i, r)) = done {
                got[i] = Some(r);
            }
        }
        let now = self.started.elapsed().as_secs_f64();
        let results: Vec<PodResult> = {
            let mut h = self.history.lock().unwrap_or_else(PoisonError::into_inner);
            h.forget_before(now - FORGET_AFTER_S);
            urls.iter()
                .zip(got)
                .map(|(url, r)| {
                    let r = r.unwrap_or(Err(PodError::TaskFailed));
                    let r = r.and_then(|snap| {
                        h.record(url, now, snap, window_s);
                        h.windowed(url, window_s).ok_or(PodError::NoHistory)
                    });
                    (url.clone(), r)
                })
                .collect()
        };
        if self.cache_for.is_zero() {
            // No cache: keeping a copy of every pod's snapshot would be work for nothing.
            return results;
        }
        let mut cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
        cache.retain(|_, c| c.at.elapsed() < self.cache_for);
        cache.insert(
            key,
            Cached {
                at: Instant::now(),
                results: results.clone(),
            },
        );
        results
    }
}

/// One pod's `/metrics`, the families named `names` read as a snapshot whose series carry
/// the pod's URL.
async fn scrape(base: &str, timeout: Duration, names: &[&str]) -> Result<Snapshot, PodError> {
    let target = Target::parse_metrics(base).map_err(|e| PodError::Fetch(e.to_string()))?;
    let metrics_url = target.url.clone();
    let mut how = Get::new(inferscale_http::scrape::ACCEPT);
    how.timeout = timeout;
    how.max_body = 16 << 20;
    let scraped = match tokio::time::timeout(timeout, Scraper::new(target, how).fetch()).await {
        // The failure is reported beside the pod's URL: not a second time in the message.
        Ok(r) => r.map_err(|e| {
            let chain = inferscale_http::with_causes(&e);
            PodError::Fetch(
                chain
                    .strip_prefix(&format!("{metrics_url}: "))
                    .map_or(chain.clone(), str::to_owned),
            )
        })?,
        Err(_) => return Err(PodError::Timeout(timeout)),
    };
    let kept = retain_families(&scraped.body, names);
    let exp = parse_with(
        &kept,
        ParseOptions {
            format: Some(scraped.format()),
            strict: false,
        },
    )
    .map_err(|e| PodError::Exposition(e.to_string()))?;
    Ok(Snapshot::read(&exp, base))
}
