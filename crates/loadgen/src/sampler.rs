//! The server sampler: scrapes the target's `/metrics` through `promtext`/`catalog` every
//! second of the server's time while the load runs.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use inferscale_catalog::Snapshot;

use crate::target::Target;
use crate::transport::get_once;

/// One scrape.
#[derive(Debug, Clone)]
pub struct Sample {
    /// Wall seconds from the run start.
    pub t: f64,
    /// What it said.
    pub snapshot: Snapshot,
}

/// Scrapes one target and keeps what it read.
pub struct Sampler {
    target: Target,
    samples: Mutex<Vec<Sample>>,
    errors: Mutex<Vec<String>>,
}

const ACCEPT: &str =
    "text/plain;version=0.0.4;q=0.9,application/openmetrics-text;version=1.0.0;q=0.5,*/*;q=0.1";

impl Sampler {
    /// A sampler of `target`.
    pub fn new(target: Target) -> Self {
        Sampler {
            target,
            samples: Mutex::new(Vec::new()),
            errors: Mutex::new(Vec::new()),
        }
    }

    /// The scraped URL.
    pub fn url(&self) -> &str {
        &self.target.url
    }

    /// Scrapes once (stored and returned); `Err` with the reason when it fails.
    pub async fn scrape(&self, t0: Instant) -> Result<Sample, String> {
        let r = get_once(&self.target, ACCEPT, Duration::from_secs(5), 64 << 20).await;
        let t = t0.elapsed().as_secs_f64();
        let sample = match r {
            Ok((200, body, _)) => match inferscale_promtext::parse(&body) {
                Ok(exp) => Sample {
                    t,
                    snapshot: Snapshot::read(&exp, &self.target.url),
                },
                Err(e) => {
                    return Err(
                        self.note(format!("{}: not a valid exposition: {e}", self.target.url))
                    );
                }
            },
            Ok((status, _, _)) => {
                return Err(self.note(format!("{}: HTTP {status}", self.target.url)));
            }
            Err(e) => return Err(self.note(format!("{}: {e}", self.target.url))),
        };
        if let Ok(mut s) = self.samples.lock() {
            s.push(sample.clone());
        }
        Ok(sample)
    }

    fn note(&self, e: String) -> String {
        if let Ok(mut errs) = self.errors.lock()
            && errs.len() < 100
        {
            errs.push(e.clone());
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
