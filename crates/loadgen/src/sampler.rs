//! The server sampler: scrapes the target's `/metrics` through `promtext`/`catalog` every
//! second of the server's time while the load runs.

use inferscale_clock::Instant;
use std::sync::Mutex;
use std::time::Duration;

use inferscale_catalog::Snapshot;

use crate::scrape::{ScrapeError, Scraper};
use crate::target::Target;
use crate::transport::Get;

pub use inferscale_workload::record::Sample;

/// Scrapes one target and keeps what it read.
pub struct Sampler {
    scraper: Scraper,
    samples: Mutex<Vec<Sample>>,
    errors: Mutex<Vec<String>>,
}

/// Why one scrape gave nothing.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SampleError {
    /// No answer, or not a 200.
    #[error(transparent)]
    Scrape(#[from] ScrapeError),
    /// Not an exposition.
    #[error("{url}: not a valid exposition")]
    Parse {
        /// The metrics URL.
        url: String,
        /// Where and why.
        #[source]
        source: inferscale_promtext::ParseError,
    },
}

impl Sampler {
    /// A sampler of `target`, with `access`'s credentials and TLS.
    pub fn new(target: Target, access: Get) -> Self {
        Sampler {
            scraper: Scraper::new(target, access),
            samples: Mutex::new(Vec::new()),
            errors: Mutex::new(Vec::new()),
        }
    }

    /// The scraped URL.
    pub fn url(&self) -> &str {
        self.scraper.url()
    }

    /// Scrapes once (stored and returned); `Err` with the reason when it fails.
    pub async fn scrape(&self, t0: Instant) -> Result<Sample, SampleError> {
        let r = self.scraper.fetch().await;
        let t = t0.elapsed().as_secs_f64();
        let scraped = r.map_err(|e| self.note(e.into()))?;
        let sample = match scraped.parse(None) {
            Ok(exp) => Sample {
                t,
                snapshot: Snapshot::read(&exp, self.scraper.url()),
            },
            Err(source) => {
                return Err(self.note(SampleError::Parse {
                    url: self.scraper.url().to_owned(),
                    source,
                }));
            }
        };
        if let Ok(mut s) = self.samples.lock() {
            s.push(sample.clone());
        }
        Ok(sample)
    }

    fn note(&self, e: SampleError) -> SampleError {
        if let Ok(mut errs) = self.errors.lock()
            && errs.len() < 100
        {
            errs.push(crate::with_causes(&e));
        }
        e
    }

    /// Scrapes every `interval` until `stop` flips.
    pub async fn run(
        &self,
        t0: Instant,
        interval: Duration,
        mut stop: tokio::sync::watch::Receiver<bool>,
    ) {
        let mut tick = tokio::time::interval(interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        loop {
            tokio::select! {
                _ = tick.tick() => { let _ = self.scrape(t0).await; }
                _ = stop.changed() => break,
            }
        }
    }

    /// Every sample so far, in time order.
    pub fn samples(&self) -> Vec<Sample> {
        let mut v = self.samples.lock().map(|s| s.clone()).unwrap_or_default();
        v.sort_by(|a, b| a.t.total_cmp(&b.t));
        v
    }

    /// The latest sample.
    pub fn latest(&self) -> Option<Sample> {
        self.samples
            .lock()
            .ok()
            .and_then(|s| s.iter().max_by(|a, b| a.t.total_cmp(&b.t)).cloned())
    }

    /// Errors met so far (at most 100).
    pub fn errors(&self) -> Vec<String> {
        self.errors.lock().map(|e| e.clone()).unwrap_or_default()
    }
}
