//! Per-request records and their aggregation into steps and a timeline.
//!
//! Latencies are measured from each request's *intended* send time: a request that waited
//! for a connection or for the client itself counts that wait against the server's latency,
//! as a user would experience it. Records keep wall-clock seconds; the aggregation turns them
//! into the server's time with the speed-up.

use hdrhistogram::Histogram;
use inferscale_catalog::{Signal, Snapshot};
use serde::{Deserialize, Serialize};

use crate::outcome::{Outcome, TokenSource};
use crate::schedule::{Stage, StageWindow};
use inferscale_results::run::{
    ClientStep, GaugeStats, Latencies, Percentiles, Requests, RunReport, ServerStep, Stalls,
    StepHistograms, StepReport, TimelinePoint, Tokens,
};
use inferscale_results::slo::{Goodput, Slo};

/// A step is client-limited when more than one request in twenty was sent later than its
/// *lag bar* after its intended time (the schedule lag's p95 above the bar). The p95, not the
/// p99: one pause of the machine (virtual machines take 20–100 ms now and then) delays about
/// 1 % of a step's requests at a few hundred per second, which moves neither the step's
/// throughput nor its latency p95; a client that cannot keep up delays most of them.
///
/// The bar is the larger of [`LAG_BAR_S`] and [`LAG_SHARE`] of the step's median end-to-end
/// latency. Latency is measured from the intended send, so a request's lag is charged to it
/// in full: a lag that is a twentieth of what the step measures cannot move its percentiles by
/// more than that. The share matters only where latencies are long next to the client's
/// timer — a simulator at a speed-up, whose seconds-long latencies shrink to a few hundred
/// wall milliseconds while the host's wake-up jitter (a busy neighbour on a shared core adds
/// 5–7 ms) does not shrink; against a server answering in milliseconds the 5 ms floor rules.
pub const LAG_BAR_S: f64 = 0.005;

/// The share of the step's median latency a schedule lag p95 may reach (see [`LAG_BAR_S`]).
pub const LAG_SHARE: f64 = 0.05;

/// The lag bar of a step whose successful requests took `e2e_median_wall` seconds (wall time)
/// at the median, or had none.
pub fn lag_bar(e2e_median_wall: Option<f64>) -> f64 {
    e2e_median_wall.map_or(LAG_BAR_S, |m| (LAG_SHARE * m).max(LAG_BAR_S))
}

/// One scrape of the server's metrics during a run.
#[derive(Debug, Clone)]
pub struct Sample {
    /// Wall seconds from the run start.
    pub t: f64,
    /// What it said.
    pub snapshot: Snapshot,
}

/// What one scheduled request did. Times are wall seconds from the run start.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// Position in the plan.
    pub index: u64,
    /// The step.
    pub step: usize,
    /// When it should have been sent.
    pub intended_s: f64,
    /// When it was sent (`null` if never).
    pub sent_s: Option<f64>,
    /// When each token-bearing event arrived (streaming); the first is the first token.
    #[serde(default)]
    pub events_s: Vec<f64>,
    /// When it ended (`null` if never sent).
    pub end_s: Option<f64>,
    /// How it ended.
    pub outcome: Outcome,
    /// Output tokens.
    pub output_tokens: Option<u32>,
    /// Prompt tokens (from `usage`).
    pub prompt_tokens: Option<u32>,
    /// Where `output_tokens` came from.
    pub token_source: Option<TokenSource>,
    /// Why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl Record {
    /// Time to first token from the intended send (streaming only).
    pub fn ttft(&self) -> Option<f64> {
        self.events_s.first().map(|f| f - self.intended_s)
    }

    /// End to end from the intended send.
    pub fn e2e(&self) -> Option<f64> {
        self.end_s.map(|e| e - self.intended_s)
    }

    /// `(e2e − ttft) / (output tokens − 1)`.
    pub fn tpot(&self) -> Option<f64> {
        let (first, end, n) = (self.events_s.first()?, self.end_s?, self.output_tokens?);
        (n > 1).then(|| (end - first) / f64::from(n - 1))
    }
}

/// Microsecond HDR histogram with percentile helpers.
pub struct Hdr(Histogram<u64>);

impl Default for Hdr {
    fn default() -> Self {
        // Only more than five significant figures make `new` fail.
        Hdr(Histogram::new(3).expect("three significant figures are supported"))
    }
}

impl Hdr {
    /// Records `seconds` (negative values count as zero).
    pub fn record(&mut self, seconds: f64) {
        let us = (seconds.max(0.0) * 1e6).round() as u64;
        let _ = self.0.record(us.max(1));
    }

    /// Observations.
    pub fn len(&self) -> u64 {
        self.0.len()
    }

    /// Whether nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Adds every observation of `other` (exactly: same layout, counts added per bucket).
    pub fn add(&mut self, other: &Hdr) {
        // The histogram resizes itself, so nothing `other` holds is out of range.
        let _ = self.0.add(&other.0);
    }

    /// HdrHistogram's V2 encoding, base64 ([`crate::hdr`]).
    pub fn encode(&self) -> String {
        crate::hdr::encode(&self.0)
    }

    /// Reads what [`Hdr::encode`] wrote.
    pub fn decode(text: &str) -> Result<Hdr, crate::hdr::HdrError> {
        let mut h = crate::hdr::decode(text)?;
        h.auto(true);
        Ok(Hdr(h))
    }

    /// A quantile in seconds.
    pub fn quantile(&self, q: f64) -> Option<f64> {
        (!self.0.is_empty()).then(|| self.0.value_at_quantile(q) as f64 / 1e6)
    }

    /// The summary.
    pub fn percentiles(&self) -> Percentiles {
        if self.0.is_empty() {
            return Percentiles::default();
        }
        Percentiles {
            count: self.0.len(),
            p50: self.quantile(0.5),
            p90: self.quantile(0.9),
            p95: self.quantile(0.95),
            p99: self.quantile(0.99),
            max: Some(self.0.max() as f64 / 1e6),
            mean: Some(self.0.mean() / 1e6),
        }
    }
}

/// Histograms of the successful records' TTFT, TPOT, ITL and e2e, in the server's time
/// (`× speedup`).
pub fn latency_histograms<'r>(
    records: impl IntoIterator<Item = &'r Record>,
    speedup: f64,
) -> [Hdr; 4] {
    let [mut ttft, mut tpot, mut itl, mut e2e] = [(); 4].map(|_| Hdr::default());
    for r in records.into_iter().filter(|r| r.outcome == Outcome::Ok) {
        if let Some(v) = r.ttft() {
            ttft.record(v * speedup);
        }
        if let Some(v) = r.tpot() {
            tpot.record(v * speedup);
        }
        for w in r.events_s.windows(2) {
            itl.record((w[1] - w[0]) * speedup);
        }
        if let Some(v) = r.e2e() {
            e2e.record(v * speedup);
        }
    }
    [ttft, tpot, itl, e2e]
}

/// Latencies of the successful records, in the server's time (`× speedup`).
pub fn latencies<'r>(records: impl IntoIterator<Item = &'r Record>, speedup: f64) -> Latencies {
    let [ttft, tpot, itl, e2e] = latency_histograms(records, speedup);
    Latencies {
        ttft: ttft.percentiles(),
        tpot: tpot.percentiles(),
        itl: itl.percentiles(),
        e2e: e2e.percentiles(),
    }
}

/// Whether a record met `slo`: it ended well and each bound holds, its latencies in the
/// server's time (`× speedup`). See [`inferscale_results::slo`] for the definitions.
pub fn good(r: &Record, slo: &Slo, speedup: f64) -> bool {
    r.outcome == Outcome::Ok
        && r.e2e().is_some_and(|e2e| {
            slo.met(
                r.ttft().map(|t| t * speedup),
                r.tpot().map(|t| t * speedup),
                e2e * speedup,
            )
        })
}

/// Counts each step's goodput against `slo` from the run's `records` and records the SLO in
/// the report.
pub fn annotate_goodput(report: &mut RunReport, records: &[Record], slo: Slo) {
    let k = report.plan.speedup;
    let mut counts =
        vec![(0u64, 0u64); report.steps.iter().map(|s| s.index + 1).max().unwrap_or(0)];
    for r in records {
        if let Some(c) = counts.get_mut(r.step) {
            c.0 += 1;
            c.1 += u64::from(good(r, &slo, k));
        }
    }
    for s in &mut report.steps {
        let (n, g) = counts.get(s.index).copied().unwrap_or_default();
        s.goodput = Some(Goodput::of(n, g, s.duration_s));
    }
    report.slo = Some(slo);
}

/// Outcome counts.
pub fn requests<'r>(records: impl IntoIterator<Item = &'r Record>) -> Requests {
    let mut q = Requests::default();
    for r in records {
        q.scheduled += 1;
        match r.outcome {
            Outcome::Ok => q.ok += 1,
            Outcome::Dropped => q.dropped += 1,
            other => {
                q.failed.total += 1;
                match other {
                    Outcome::HttpError { status } => {
                        *q.failed.http_error.entry(status).or_insert(0) += 1
                    }
                    Outcome::Timeout => q.failed.timeout += 1,
                    Outcome::ConnectError => q.failed.connect_error += 1,
                    _ => q.failed.stream_error += 1,
                }
            }
        }
    }
    q
}

/// Mean, p95 (nearest rank) and maximum of a gauge's samples.
pub fn gauge(values: &[f64]) -> GaugeStats {
    if values.is_empty() {
        return GaugeStats::default();
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let idx = ((v.len() as f64 * 0.95).ceil() as usize).clamp(1, v.len()) - 1;
    GaugeStats {
        mean: Some(v.iter().sum::<f64>() / v.len() as f64),
        p95: Some(v[idx]),
        max: v.last().copied(),
    }
}

/// Everything the aggregation of one step needs.
pub struct StepInput<'a> {
    /// The step's index.
    pub index: usize,
    /// Its plan entry.
    pub stage: &'a Stage,
    /// Its window (wall seconds).
    pub window: StageWindow,
    /// Its records.
    pub records: Vec<&'a Record>,
    /// Periodic samples of the whole run.
    pub samples: &'a [Sample],
    /// The scrape just before it and the one after its requests finished.
    pub bounds: (Option<&'a Sample>, Option<&'a Sample>),
    /// Client CPU seconds during it.
    pub cpu_s: f64,
    /// Simulated seconds per wall second.
    pub speedup: f64,
    /// Keep the step's histograms in the report (a segment's worker: `inferscale merge`
    /// adds them).
    pub histograms: bool,
    /// What the stall probe saw during the step's sending window.
    pub stalls: Option<Stalls>,
}

/// One step's report.
pub fn step_report(input: StepInput<'_>) -> StepReport {
    let k = input.speedup;
    let w = input.window;
    let recs = &input.records;
    let dur_wall = (w.end - w.start).max(1e-9);
    let req = requests(recs.iter().copied());
    let hdrs = latency_histograms(recs.iter().copied(), k);
    let lat = Latencies {
        ttft: hdrs[0].percentiles(),
        tpot: hdrs[1].percentiles(),
        itl: hdrs[2].percentiles(),
        e2e: hdrs[3].percentiles(),
    };
    let sent = recs.iter().filter(|r| r.sent_s.is_some()).count() as f64;
    // Completions counted over the window shifted by the median latency: in steady state as
    // many requests finish per second as arrive; past saturation, only as many as the server
    // can finish.
    let mut e2e_wall: Vec<f64> = recs
        .iter()
        .filter(|r| r.outcome == Outcome::Ok)
        .filter_map(|r| r.e2e())
        .collect();
    e2e_wall.sort_by(f64::total_cmp);
    let shift = e2e_wall.get(e2e_wall.len() / 2).copied().unwrap_or(0.0);
    let (lo, hi) = (w.start + shift, w.end + shift);
    let in_window: Vec<&&Record> = recs
        .iter()
        .filter(|r| r.outcome == Outcome::Ok && r.end_s.is_some_and(|e| e >= lo && e < hi))
        .collect();
    let achieved_rps = in_window.len() as f64 / dur_wall / k;
    let out_tokens: f64 = in_window
        .iter()
        .map(|r| f64::from(r.output_tokens.unwrap_or(0)))
        .sum();
    let oks = recs.iter().filter(|r| r.outcome == Outcome::Ok);
    let tokens = Tokens {
        prompt: oks
            .clone()
            .map(|r| u64::from(r.prompt_tokens.unwrap_or(0)))
            .sum(),
        output: oks
            .clone()
            .map(|r| u64::from(r.output_tokens.unwrap_or(0)))
            .sum(),
        source: if oks
            .clone()
            .any(|r| r.token_source == Some(TokenSource::Chunks))
        {
            "chunks".into()
        } else {
            "usage".into()
        },
    };
    let server = server_step(&input, w);
    let mut lag = Hdr::default();
    for r in recs {
        if let Some(s) = r.sent_s {
            lag.record(s - r.intended_s);
        }
    }
    let lag_p95 = lag.quantile(0.95);
    let lag_p99 = lag.quantile(0.99);
    // "Near zero" as the seeds read it: a server whose queue stays under 5 is not what limits
    // the load.
    let queue_idle = server
        .as_ref()
        .and_then(|s| s.queue_depth.p95)
        .is_some_and(|q| q < 5.0);
    let bar = lag_bar(e2e_wall.get(e2e_wall.len() / 2).copied());
    // Said beside a lag: the machine stopped too, so the lag is not all the client's; or
    // the client's threads fought over too few CPUs, so it is.
    let machine = input.stalls.map_or(String::new(), |s| {
        let mut m = String::new();
        if s.count > 0 {
            m += &format!(
                "; the machine stalled {} times during the step, up to {:.1} ms",
                s.count,
                s.longest_s * 1e3
            );
        }
        if s.cpu_waits > 0 {
            m += &format!(
                "; its threads waited for a CPU {} times, up to {:.1} ms (more busy threads than CPUs)",
                s.cpu_waits,
                s.cpu_wait_longest_s * 1e3
            );
        }
        m
    });
    let reason = if let Some(l) = lag_p95.filter(|l| *l > bar) {
        Some(format!(
            "schedule lag p95 {:.1} ms > {:.1} ms (p99 {:.1} ms): the client could not keep the schedule{machine}",
            l * 1e3,
            bar * 1e3,
            lag_p99.unwrap_or(0.0) * 1e3
        ))
    } else if req.dropped > 0 && queue_idle {
        Some(format!(
            "{} requests dropped at the in-flight cap while the server's queue stayed near zero",
            req.dropped
        ))
    } else {
        None
    };
    StepReport {
        index: input.index,
        target_rps: input.stage.rate,
        target_end_rps: input.stage.end_rate.filter(|e| *e != input.stage.rate),
        concurrency: input.stage.concurrency,
        start_s: w.start * k,
        duration_s: dur_wall * k,
        sent_rps: sent / dur_wall / k,
        achieved_rps,
        output_tokens_per_s: out_tokens / dur_wall / k,
        requests: req,
        latency_s: lat,
        tokens,
        server,
        cache: None,
        client: ClientStep {
            lag_p50_s: lag.quantile(0.5),
            lag_p95_s: lag_p95,
            lag_p99_s: lag_p99,
            lag_max_s: lag.quantile(1.0),
            cpu_s: input.cpu_s,
            client_limited: reason.is_some(),
            reason,
            stalls: input.stalls,
        },
        histograms: input.histograms.then(|| StepHistograms {
            ttft: hdrs[0].encode(),
            tpot: hdrs[1].encode(),
            itl: hdrs[2].encode(),
            e2e: hdrs[3].encode(),
            lag: lag.encode(),
        }),
        goodput: None,
        probe: None,
    }
}

fn server_step(input: &StepInput<'_>, w: StageWindow) -> Option<ServerStep> {
    let during: Vec<&Sample> = input
        .samples
        .iter()
        .filter(|s| s.t >= w.start && s.t <= w.end)
        .collect();
    if during.is_empty() && input.bounds.0.is_none() {
        return None;
    }
    let series = |sig: Signal| -> Vec<f64> {
        during
            .iter()
            .filter_map(|s| s.snapshot.value(sig))
            .collect()
    };
    let mut s = ServerStep {
        queue_depth: gauge(&series(Signal::QueueDepth)),
        running: gauge(&series(Signal::Running)),
        kv_cache_usage: gauge(&series(Signal::KvCacheUsage)),
        samples: during.len() as u64,
        ..ServerStep::default()
    };
    if let (Some(before), Some(after)) = input.bounds {
        let win: Snapshot = after.snapshot.window(
            &before.snapshot,
            ((after.t - before.t) * input.speedup).max(1e-9),
        );
        s.preemptions = win.value(Signal::Preemptions);
        s.e2e_p95_s = win.quantile(Signal::E2eLatency, 0.95);
        s.ttft_p95_s = win.quantile(Signal::Ttft, 0.95);
        s.queue_time_p95_s = win.quantile(Signal::QueueTime, 0.95);
        s.success_delta = win.value(Signal::RequestsOk);
        s.prefix_cache_hit_rate = win
            .value(Signal::PrefixCacheQueries)
            .filter(|q| *q > 0.0)
            .zip(win.value(Signal::PrefixCacheHits))
            .map(|(q, h)| h / q);
    }
    Some(s)
}

/// The per-second timeline (in the server's time).
pub fn timeline(
    records: &[Record],
    windows: &[StageWindow],
    samples: &[Sample],
    speedup: f64,
    end_wall: f64,
) -> Vec<TimelinePoint> {
    let k = speedup;
    let seconds = (end_wall * k).ceil().max(1.0) as usize;
    let mut pts: Vec<TimelinePoint> = (0..seconds)
        .map(|i| {
            let t = i as f64;
            TimelinePoint {
                t_s: t,
                step: windows
                    .iter()
                    .position(|w| t >= w.start * k && t < w.end * k),
                ..TimelinePoint::default()
            }
        })
        .collect();
    let slot = |wall: f64| ((wall * k).floor().max(0.0) as usize).min(seconds - 1);
    let mut starts = vec![0i64; seconds];
    let mut ends = vec![0i64; seconds];
    for r in records {
        match r.outcome {
            Outcome::Dropped => pts[slot(r.intended_s)].dropped += 1,
            o => {
                if let Some(s) = r.sent_s {
                    pts[slot(s)].sent += 1;
                    starts[slot(s)] += 1;
                }
                if let Some(e) = r.end_s {
                    if o == Outcome::Ok {
                        pts[slot(e)].ok += 1;
                    } else {
                        pts[slot(e)].failed += 1;
                    }
                    if r.sent_s.is_some() {
                        ends[slot(e)] += 1;
                    }
                }
            }
        }
    }
    let mut open = 0i64;
    let mut j = 0;
    for (i, p) in pts.iter_mut().enumerate() {
        open += starts[i] - ends[i];
        p.in_flight = open.max(0) as u64;
        // The last scrape at or before the end of this second.
        let until = (i as f64 + 1.0) / k;
        while j + 1 < samples.len() && samples[j + 1].t <= until {
            j += 1;
        }
        if let Some(s) = samples.get(j).filter(|s| s.t <= until) {
            p.queue_depth = s.snapshot.value(Signal::QueueDepth);
            p.running = s.snapshot.value(Signal::Running);
            p.kv_cache_usage = s.snapshot.value(Signal::KvCacheUsage);
        }
    }
    pts
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(index: u64, intended: f64, end: f64, events: Vec<f64>, outcome: Outcome) -> Record {
        Record {
            index,
            step: 0,
            intended_s: intended,
            sent_s: Some(intended + 0.001),
            events_s: events,
            end_s: Some(end),
            outcome,
            output_tokens: Some(3),
            prompt_tokens: Some(10),
            token_source: Some(TokenSource::Usage),
            error: None,
        }
    }

    #[test]
    fn latency_definitions() {
        let r = rec(0, 1.0, 2.0, vec![1.2, 1.6, 2.0], Outcome::Ok);
        assert!((r.ttft().unwrap() - 0.2).abs() < 1e-9);
        assert!((r.e2e().unwrap() - 1.0).abs() < 1e-9);
        assert!((r.tpot().unwrap() - 0.4).abs() < 1e-9);
        // With a speed-up of 10, a wall second is ten simulated seconds.
        let l = latencies([&r], 10.0);
        assert!((l.e2e.p50.unwrap() - 10.0).abs() < 0.01);
        assert_eq!(l.itl.count, 2);
    }

    #[test]
    fn outcome_accounting() {
        let rs = [
            rec(0, 0.0, 1.0, vec![], Outcome::Ok),
            rec(1, 0.0, 1.0, vec![], Outcome::HttpError { status: 500 }),
            rec(2, 0.0, 1.0, vec![], Outcome::HttpError { status: 500 }),
            rec(3, 0.0, 1.0, vec![], Outcome::StreamError),
            rec(4, 0.0, 1.0, vec![], Outcome::Dropped),
        ];
        let q = requests(&rs);
        assert_eq!((q.scheduled, q.ok, q.failed.total, q.dropped), (5, 1, 3, 1));
        assert_eq!(q.failed.http_error[&500], 2);
        assert_eq!(q.scheduled, q.ok + q.failed.total + q.dropped);
    }

    /// 100 requests over a second, each sent `lag` late and taking `e2e` (wall seconds).
    fn limited(lag: f64, e2e: f64) -> bool {
        let recs: Vec<Record> = (0..100u32)
            .map(|i| {
                let t = f64::from(i) * 0.01;
                let mut r = rec(i.into(), t, t + e2e, vec![t + e2e / 2.0], Outcome::Ok);
                r.sent_s = Some(t + lag);
                r
            })
            .collect();
        let stage = Stage::constant(100.0, 1.0, 0.0);
        let report = step_report(StepInput {
            stalls: None,
            index: 0,
            stage: &stage,
            window: StageWindow {
                start: 0.0,
                end: 1.0,
                rest_end: 1.0,
            },
            records: recs.iter().collect(),
            samples: &[],
            bounds: (None, None),
            cpu_s: 0.0,
            speedup: 1.0,
            histograms: false,
        });
        report.client.client_limited
    }

    #[test]
    fn the_lag_bar_is_5_ms_or_a_twentieth_of_the_median_latency() {
        assert_eq!(lag_bar(None), LAG_BAR_S);
        assert_eq!(lag_bar(Some(0.01)), LAG_BAR_S);
        assert!((lag_bar(Some(0.3)) - 0.015).abs() < 1e-12);
        // Fast server: 7 ms late is more than the 5 ms floor.
        assert!(limited(0.007, 0.02));
        // Seconds-long latencies (shrunk by a speed-up to 300 ms of wall time): 7 ms late is
        // 2 % of what the step measures.
        assert!(!limited(0.007, 0.3));
        // But a client 50 ms late is still the limit there.
        assert!(limited(0.05, 0.3));
        assert!(!limited(0.001, 0.02));
    }
}
