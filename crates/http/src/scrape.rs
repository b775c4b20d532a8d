//! The one scrape client: `inferscale scrape`, the load generator's sampler and
//! `inferscale query` read `/metrics` endpoints through it.
//!
//! It asks as Prometheus asks (the same `Accept` header, so a server that negotiates gives
//! us what it would give Prometheus), takes the format from the answer's `Content-Type`
//! (falling back to the text's own shape when the header is missing or names neither format),
//! bounds the time and the body, and carries credentials and TLS from [`Get`].

use inferscale_clock::Instant;
use std::time::Duration;

use bytes::Bytes;
use inferscale_promtext::{Exposition, Format, ParseError, ParseOptions, parse_with};

use crate::target::Target;
use crate::transport::{FetchError, Get, get};

/// The `Accept` header Prometheus 2.x sends: OpenMetrics 1.0 preferred, then 0.0.1, then the
/// text format.
pub const ACCEPT: &str = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";

/// Why a scrape gave nothing. Each names the URL.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ScrapeError {
    /// No answer.
    #[error("{url}")]
    Fetch {
        /// The metrics URL.
        url: String,
        /// Why.
        #[source]
        source: FetchError,
    },
    /// An answer other than 200.
    #[error("{url}: HTTP {status}{}", if snippet.is_empty() { String::new() } else { format!(": {snippet}") })]
    Status {
        /// The metrics URL.
        url: String,
        /// The status.
        status: u16,
        /// The start of the body, control characters removed.
        snippet: String,
    },
}

/// Why one target of a scraping round gave no exposition.
#[derive(Debug, thiserror::Error)]
pub enum RoundError {
    /// The scrape failed.
    #[error(transparent)]
    Scrape(#[from] ScrapeError),
    /// The answer is not an exposition.
    #[error("not a valid exposition")]
    Exposition(#[source] ParseError),
    /// The task that scraped it did not finish.
    #[error("the scrape task failed")]
    Task(#[source] tokio::task::JoinError),
}

/// One answered scrape.
#[derive(Debug, Clone)]
pub struct Scraped {
    /// The body.
    pub body: Bytes,
    /// The `Content-Type` the server sent.
    pub content_type: Option<String>,
    /// How long the scrape took.
    pub duration: Duration,
}

impl Scraped {
    /// The format: from the `Content-Type`, else from the text.
    pub fn format(&self) -> Format {
        self.content_type
            .as_deref()
            .and_then(Format::from_content_type)
            .unwrap_or_else(|| Format::detect(&self.body))
    }

    /// The body parsed in [its format](Self::format), or `format` when given.
    pub fn parse(&self, format: Option<Format>) -> Result<Exposition<'_>, ParseError> {
        parse_with(
            &self.body,
            ParseOptions {
                format: Some(format.unwrap_or_else(|| self.format())),
                strict: false,
            },
        )
    }
}

/// Scrapes one target.
#[derive(Debug, Clone)]
pub struct Scraper {
    target: Target,
    how: Get,
}

impl Scraper {
    /// A scraper of `target` with `access`'s credentials, TLS, timeout and body limit (its
    /// `Accept` is replaced by Prometheus' [`ACCEPT`]).
    pub fn new(target: Target, access: Get) -> Self {
        let mut how = access;
        how.accept = ACCEPT.into();
        Scraper { target, how }
    }

    /// The scraped URL.
    pub fn url(&self) -> &str {
        &self.target.url
    }

    /// The target.
    pub fn target(&self) -> &Target {
        &self.target
    }

    /// Scrapes once; anything but a whole 200 answer is an error.
    pub async fn fetch(&self) -> Result<Scraped, ScrapeError> {
        let started = Instant::now();
        let url = || self.target.url.clone();
        let f = get(&self.target, &self.how)
            .await
            .map_err(|source| ScrapeError::Fetch { url: url(), source })?;
        if f.status != 200 {
            let snippet: String = String::from_utf8_lossy(&f.body[..f.body.len().min(200)])
                .chars()
                .filter(|c| !c.is_control())
                .collect();
            return Err(ScrapeError::Status {
                url: url(),
                status: f.status,
                snippet,
            });
        }
        Ok(Scraped {
            body: f.body,
            content_type: f.content_type,
            duration: started.elapsed(),
        })
    }
}

/// Scrapes every one of `scrapers` once, concurrently, and parses each answer in its format:
/// per scraper, its exposition or why there is none. What `query` and `monitor` record into
/// a series store each round.
pub async fn scrape_all(scrapers: &[Scraper]) -> Vec<Result<Exposition<'static>, RoundError>> {
    let handles: Vec<_> = scrapers
        .iter()
        .map(|s| {
            let scraper = s.clone();
            tokio::spawn(async move { scraper.fetch().await })
        })
        .collect();
    let mut out = Vec::with_capacity(handles.len());
    for h in handles {
        let fetched = match h.await {
            Ok(r) => r.map_err(RoundError::Scrape),
            Err(e) => Err(RoundError::Task(e)),
        };
        out.push(fetched.and_then(|f| {
            f.parse(None)
                .map(Exposition::into_owned)
                .map_err(RoundError::Exposition)
        }));
    }
    out
}
