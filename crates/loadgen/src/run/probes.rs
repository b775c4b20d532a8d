//! The probe stream (`--probe-rate`): single-token requests sent beside the plan at a fixed
//! rate, outside its in-flight cap, on their own connections, each on its own task so that a
//! probe stuck behind the server's queue does not hold back the next. A probe's time to first
//! token is the head-of-line stall a newcomer meets; it is reported per step, apart from the
//! workload, whose records and counts it never enters. The stream is bounded: it stops at the
//! end of the plan's last sending window, or when the run is stopped.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use inferscale_clock::Instant;
use inferscale_results::run::ProbeStep;
use tokio::sync::watch;

use crate::prompt::{Length, Prepared, PromptSource, prepare};
use crate::record::Hdr;
use crate::schedule::StageWindow;
use crate::transport::{Client, Outcome};

/// One probe: when it was meant to go (wall seconds from the start), its time to first token
/// (wall seconds; `None`: none came) and whether it ended well.
#[derive(Debug, Clone, Copy)]
pub(super) struct ProbeResult {
    intended_s: f64,
    ttft_s: Option<f64>,
    ok: bool,
}

/// What the stream sends.
pub(super) struct Probes {
    /// Its own client: the plan's connections and in-flight cap are not its.
    pub(super) client: Arc<Client>,
    /// The API path.
    pub(super) path: &'static str,
    /// A single-token request.
    pub(super) body: Prepared,
    /// Whether it streams (a first token then comes before the end).
    pub(super) stream: bool,
    /// Wall seconds between probes.
    pub(super) period_s: f64,
    /// Wall seconds from the start at which the stream stops.
    pub(super) until_s: f64,
}

impl Probes {
    /// The stream `cfg` asks for (`probe_rate_rps`, server time) until the end of the last
    /// of `windows`; `None` without one, and on every worker of a split run but the first
    /// (one stream, not one per worker).
    pub(super) fn of(
        cfg: &super::LoadConfig,
        windows: &[StageWindow],
    ) -> Result<Option<Probes>, super::LoadError> {
        let Some(rate) = cfg.probe_rate_rps.filter(|r| *r > 0.0) else {
            return Ok(None);
        };
        if cfg.segment.index != 0 {
            return Ok(None);
        }
        let mut spec = cfg.requests.clone();
        spec.max_tokens = Length::Fixed { tokens: 1 };
        if matches!(
            spec.prompt,
            PromptSource::Dataset { .. } | PromptSource::Trace { .. } | PromptSource::Shared { .. }
        ) {
            // A probe measures the wait, not the prompt: the seeds' prompt will do.
            spec.prompt = PromptSource::Seeds;
        }
        let body = prepare(&spec, 1, cfg.seed ^ 0x7072_6f62, None)?
            .pop()
            .ok_or(super::LoadError::TaskPanicked)?;
        Ok(Some(Probes {
            client: Arc::new(Client::new(cfg.client.clone())),
            path: spec.api.path(),
            body,
            stream: spec.stream,
            period_s: 1.0 / (rate * cfg.speedup),
            until_s: windows.last().map_or(0.0, |w| w.end),
        }))
    }

    /// [`Probes::run`] on its own task.
    pub(super) fn spawn(
        self,
        t0: Instant,
        stop: &watch::Receiver<bool>,
    ) -> tokio::task::JoinHandle<Vec<ProbeResult>> {
        tokio::spawn(self.run(t0, stop.clone()))
    }

    /// Sends the stream from `t0` until `until_s` or `stop`, and returns every probe's result
    /// once each has ended (a probe's own deadline is the client's timeout).
    pub(super) async fn run(
        self,
        t0: Instant,
        mut stop: watch::Receiver<bool>,
    ) -> Vec<ProbeResult> {
        let results = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = tokio::task::JoinSet::new();
        let mut i = 0u64;
        loop {
            let at_s = i as f64 * self.period_s;
            if at_s > self.until_s || *stop.borrow() {
                break;
            }
            let at = t0 + Duration::from_secs_f64(at_s);
            tokio::select! {
                () = tokio::time::sleep_until(at) => {}
                _ = stop.changed() => break,
            }
            let (client, body, results) = (
                Arc::clone(&self.client),
                self.body.body.clone(),
                Arc::clone(&results),
            );
            let (path, stream) = (self.path, self.stream);
            tasks.spawn(async move {
                let ex = client.send(path, &body, at, stream).await;
                let ok = ex.outcome == Outcome::Ok;
                let first = ex
                    .token_events
                    .first()
                    .copied()
                    .or_else(|| ok.then_some(ex.end));
                if let Ok(mut r) = results.lock() {
                    r.push(ProbeResult {
                        intended_s: at_s,
                        ttft_s: first.map(|f| (f - at).as_secs_f64()),
                        ok,
                    });
                }
            });
            i += 1;
        }
        while tasks.join_next().await.is_some() {}
        let mut out = results.lock().map(|r| r.clone()).unwrap_or_default();
        out.sort_by(|a, b| a.intended_s.total_cmp(&b.intended_s));
        out
    }
}

/// The stream's results once it ended: it ends with the plan's last window, and a probe still
/// waiting then gets `grace` (what the plan's requests got), after which the stream's
/// results are left out.
pub(super) async fn collect(
    task: Option<tokio::task::JoinHandle<Vec<ProbeResult>>>,
    grace: Duration,
) -> Option<Vec<ProbeResult>> {
    let mut t = task?;
    Some(match tokio::time::timeout(grace, &mut t).await {
        Ok(Ok(r)) => r,
        _ => {
            t.abort();
            Vec::new()
        }
    })
}

/// The probes intended during `window` (wall seconds), their TTFT in server time
/// (`× speedup`).
pub(super) fn step(results: &[ProbeResult], window: StageWindow, speedup: f64) -> ProbeStep {
    let mut ttft = Hdr::default();
    let (mut sent, mut ok) = (0, 0);
    for p in results
        .iter()
        .filter(|p| p.intended_s >= window.start && p.intended_s < window.end)
    {
        sent += 1;
        ok += u64::from(p.ok);
        if let (true, Some(t)) = (p.ok, p.ttft_s) {
            ttft.record(t * speedup);
        }
    }
    ProbeStep {
        sent,
        ok,
        ttft: ttft.percentiles(),
    }
}
