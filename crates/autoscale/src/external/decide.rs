//! From the pods' scrapes to the number KEDA is given: pure, so the failure semantics are
//! tested without a network.
//!
//! - Some pods failing: the value is computed from the others, and the failures are counted
//!   (the caller reports them in the scaler's own metrics).
//! - Every pod failing, or no pods at all: an error, so that KEDA's `fallback` engages. A
//!   scaler that cannot see answers nothing, never a silent 0.
//! - Percentiles are over `window`: each pod's histogram increase since its scrape at least
//!   `window` earlier (a shorter one while the history is young, and the pod's lifetime
//!   until it has been scraped twice), merged by `le` across pods, as
//!   `histogram_quantile(0.95, sum by (le) (increase(…[window])))` reads them.
//! - No request finished in the window: a percentile of 0 (nothing is slow), as the
//!   generated ScaledObject's `or on() vector(0)` reads it. A pod without the family at all
//!   is a failure that names what it lacks.

use std::collections::{BTreeMap, VecDeque};

use inferscale_catalog::{Engine, Signal, Snapshot};

use crate::external::metadata::{Config, Metric};

/// The closest two kept snapshots of a pod may be, seconds.
const MIN_SPACING_S: f64 = 0.5;

/// Recent snapshots of each pod, by its URL.
#[derive(Debug, Clone, Default)]
pub struct History {
    by_pod: BTreeMap<String, VecDeque<(f64, Snapshot)>>,
}

impl History {
    /// Records a pod's scrape at `t` (seconds, any monotonic origin), keeping what a
    /// window of `window_s` needs: the newest scrape at least `window_s` old, and all after.
    pub fn record(&mut self, pod: &str, t: f64, snap: Snapshot, window_s: f64) {
        let h = self.by_pod.entry(pod.to_owned()).or_default();
        if h.back().is_some_and(|(last, _)| *last > t) {
            h.clear(); // The clock went back: start again rather than mix orders.
        }
        // Kept snapshots are at least a thirtieth of the window apart (the latest always
        // replaces a newer one), so a pod's history holds some 32 whatever the poll rate,
        // and a window starts within that spacing of where it should.
        let spacing = (window_s / 30.0).max(MIN_SPACING_S);
        let n = h.len();
        if n >= 2 && h.get(n - 2).is_some_and(|(t2, _)| t - *t2 < spacing) {
            h.pop_back();
        }
        h.push_back((t, snap));
        while h.len() > 1 && h.get(1).is_some_and(|(t1, _)| *t1 <= t - window_s) {
            h.pop_front();
        }
    }

    /// Forgets pods not in `live` (they vanished from the Service).
    pub fn retain(&mut self, live: &[&str]) {
        self.by_pod.retain(|k, _| live.contains(&k.as_str()));
    }

    /// Forgets pods last recorded before `t`: gone from every trigger's pods (a trigger
    /// sees only its own, so none of them may forget another's).
    pub fn forget_before(&mut self, t: f64) {
        self.by_pod
            .retain(|_, h| h.back().is_some_and(|(at, _)| *at >= t));
    }

    /// The pod's last scrape as a window over (up to) `window_s`: counters and histograms
    /// as increases, gauges as they are, and the requests that arrived per second over it.
    /// `None` for a pod never recorded.
    pub fn windowed(&self, pod: &str, window_s: f64) -> Option<Reading> {
        let h = self.by_pod.get(pod)?;
        let (t, last) = h.back()?;
        if h.len() == 1 {
            return Some(Reading::from(last.clone()));
        }
        let base = h
            .iter()
            .rev()
            .find(|(t0, _)| *t0 <= t - window_s)
            .or(h.front())?;
        let snapshot = last.window(&base.1, t - base.0);
        let arrivals_per_s = arrivals(&snapshot, &base.1, t - base.0);
        Some(Reading {
            snapshot,
            arrivals_per_s,
        })
    }

    /// How many pods it holds.
    pub fn len(&self) -> usize {
        self.by_pod.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.by_pod.is_empty()
    }
}

/// Requests in flight in a scrape: running and waiting (`None` when it lacks either).
fn in_flight(s: &Snapshot) -> Option<f64> {
    Some(s.value(Signal::Running)? + s.value(Signal::QueueDepth)?)
}

/// The requests that arrived per second over a window (`windowed`, whose counters are
/// increases) that started at `base`, `seconds` long: those that ended, however they ended,
/// plus the growth of those in flight. `None` when the pod reports no finished requests or no
/// queue.
fn arrivals(windowed: &Snapshot, base: &Snapshot, seconds: f64) -> Option<f64> {
    if seconds <= 0.0 {
        return None;
    }
    let ended: Vec<f64> = [
        Signal::RequestsOk,
        Signal::RequestsAborted,
        Signal::RequestsErrored,
    ]
    .into_iter()
    .filter_map(|sig| windowed.value(sig))
    .collect();
    if ended.is_empty() {
        return None;
    }
    let growth = in_flight(windowed)? - in_flight(base)?;
    Some(((ended.iter().sum::<f64>() + growth) / seconds).max(0.0))
}

/// One pod's scrape over a window, and what the window says about its arrivals.
#[derive(Debug, Clone, PartialEq)]
pub struct Reading {
    /// The windowed snapshot (a single scrape as it is, while the history is one deep).
    pub snapshot: Snapshot,
    /// Requests arriving per second over the window (`None` for a single scrape, or a pod
    /// without the counters it takes).
    pub arrivals_per_s: Option<f64>,
}

impl From<Snapshot> for Reading {
    fn from(snapshot: Snapshot) -> Reading {
        Reading {
            snapshot,
            arrivals_per_s: None,
        }
    }
}

/// A trigger's recent values of its signal, to predict it ahead as Prometheus'
/// `predict_linear` does: least squares through the last window of them (its
/// `trendWindow`, [`TREND_WINDOW_S`] by default).
#[derive(Debug, Clone, Default)]
pub struct Trend {
    points: VecDeque<(f64, f64)>,
}

/// How far back a [`Trend`] looks by default, seconds (the generated `predict_linear`'s
/// window unless the policy names another).
pub const TREND_WINDOW_S: f64 = inferscale_analysis::scaling::TREND_WINDOW_S as f64;

/// The longest window a [`Trend`] keeps, seconds (`trendWindow` at most).
pub const TREND_WINDOW_MAX_S: f64 = 1800.0;

impl Trend {
    /// Records value `v` at `t` (seconds, any monotonic origin).
    pub fn record(&mut self, t: f64, v: f64) {
        if self.points.back().is_some_and(|(last, _)| *last > t) {
            self.points.clear();
        }
        self.points.push_back((t, v));
        while self
            .points
            .front()
            .is_some_and(|(t0, _)| *t0 < t - TREND_WINDOW_MAX_S)
        {
            self.points.pop_front();
        }
    }

    /// When the last value was recorded.
    pub fn last_at(&self) -> Option<f64> {
        self.points.back().map(|p| p.0)
    }

    /// The value `horizon_s` after the last one recorded, on the line through the values of
    /// the last `window_s`; `None` until they span four fifths of it (a trigger just
    /// started, whose first values would make any line steep: the generated
    /// `predict_linear` waits the same).
    pub fn predict(&self, horizon_s: f64, window_s: f64) -> Option<f64> {
        let (at, _) = *self.points.back()?;
        let within = || self.points.iter().filter(|(t, _)| *t >= at - window_s);
        let first = within().next()?.0;
        let n = within().count() as f64;
        if n < 2.0 || at - first < 0.8 * window_s {
            return None;
        }
        let (mut sx, mut sy, mut sxy, mut sxx) = (0.0, 0.0, 0.0, 0.0);
        for (t, v) in within() {
            let x = t - at;
            sx += x;
            sy += v;
            sxy += x * v;
            sxx += x * x;
        }
        let var = sxx - sx * sx / n;
        if var <= 0.0 {
            return None;
        }
        let slope = (sxy - sx * sy / n) / var;
        Some(sy / n - slope * sx / n + slope * horizon_s)
    }
}

/// Why there is no value to give KEDA.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum NoValue {
    /// Nothing to scrape.
    #[error("no pods: the Service has no ready endpoints (or targets is empty)")]
    NoPods,
    /// Every pod failed.
    #[error("all {failed} pods failed; the first: {first}")]
    AllFailed {
        /// How many.
        failed: usize,
        /// The first failure, with its pod.
        first: String,
    },
}

/// The value for a trigger, and how many pods it stands on.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    /// What KEDA is given (finite, ≥ 0).
    pub value: f64,
    /// Pods whose scrape counted.
    pub pods_ok: usize,
    /// Pods that failed, with why (`url: reason`).
    pub failures: Vec<String>,
}

/// What one pod gave: its windowed reading (the snapshot read with the pod's URL as its
/// source, so that pods' series stay apart when merged), or why not.
pub type PodResult = (String, Result<Reading, PodError>);

/// Why a pod's reading did not count.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PodError {
    /// Its `/metrics` could not be fetched: the scrape client's reason, causes and all (kept
    /// as text so that a cached answer can be handed out again).
    #[error("{0}")]
    Fetch(String),
    /// It did not answer within the timeout.
    #[error("no answer within {} ms", .0.as_millis())]
    Timeout(std::time::Duration),
    /// Its exposition could not be parsed.
    #[error("unreadable exposition: {0}")]
    Exposition(String),
    /// The task that scraped it did not finish.
    #[error("the scrape task failed")]
    TaskFailed,
    /// It serves no `/metrics` (a rehearsed pod that exports nothing).
    #[error("no /metrics")]
    NoMetrics,
    /// One reading so far: a rate or a window needs two.
    #[error("no history")]
    NoHistory,
    /// It serves another engine's metrics than the one asked for.
    #[error("serves no {0} metrics (engine: {0} was asked for)")]
    NotEngine(Engine),
    /// It serves only DCGM's metrics, or none.
    #[error("serves no inference-engine metrics")]
    NoInferenceEngine,
    /// It lacks a signal the trigger needs.
    #[error("has no {} ({})", .0.label(), .0.key())]
    Lacks(Signal),
}

/// The signals a metric reads.
fn signals_of(m: Metric) -> &'static [Signal] {
    match m {
        Metric::QueueDepth | Metric::DesiredReplicas => &[Signal::QueueDepth],
        Metric::Running => &[Signal::Running],
        Metric::InFlight => &[Signal::Running, Signal::QueueDepth],
        Metric::ArrivalRate => &[Signal::Running, Signal::QueueDepth, Signal::RequestsOk],
        Metric::KvCacheUsage => &[Signal::KvCacheUsage],
        Metric::TtftP95 => &[Signal::Ttft],
        Metric::QueueTimeP95 => &[Signal::QueueTime],
        Metric::E2eP95 => &[Signal::E2eLatency],
    }
}

/// The histogram a latency metric reads.
fn latency_signal(m: Metric) -> Signal {
    match m {
        Metric::TtftP95 => Signal::Ttft,
        Metric::QueueTimeP95 => Signal::QueueTime,
        _ => Signal::E2eLatency,
    }
}

/// The signals a trigger reads: its metric's, its signal's, its booster's and its
/// guardrail's.
pub fn signals(cfg: &Config) -> Vec<Signal> {
    let mut v: Vec<Signal> = Vec::new();
    let mut add = |m: Metric| {
        for s in signals_of(m) {
            if !v.contains(s) {
                v.push(*s);
            }
        }
    };
    add(cfg.metric);
    if cfg.metric == Metric::DesiredReplicas {
        add(cfg.signal);
        if cfg.queue_target.is_some() {
            add(Metric::QueueDepth);
        }
    }
    if let Some((m, _)) = cfg.guardrail {
        add(m);
    }
    if cfg.metric == Metric::ArrivalRate
        || (cfg.metric == Metric::DesiredReplicas && cfg.signal == Metric::ArrivalRate)
    {
        // What ended, however it ended: aborted and errored requests arrived too (read when
        // the pod reports them; the successful ones are required above).
        for s in [Signal::RequestsAborted, Signal::RequestsErrored] {
            if !v.contains(&s) {
                v.push(s);
            }
        }
    }
    v
}

/// Whether a signal must be in a pod's scrape for `cfg` (the aborted and errored counts
/// only add to the arrivals when present).
fn required(s: Signal) -> bool {
    !matches!(s, Signal::RequestsAborted | Signal::RequestsErrored)
}

/// Whether the pod's snapshot can serve `cfg`, or what it lacks.
fn usable(cfg: &Config, s: &Snapshot) -> Result<(), PodError> {
    match cfg.engine {
        Some(e) if !s.engines.contains(&e) => return Err(PodError::NotEngine(e)),
        None if !s.engines.iter().any(|e| *e != Engine::Dcgm) => {
            return Err(PodError::NoInferenceEngine);
        }
        _ => {}
    }
    for sig in signals(cfg).into_iter().filter(|s| required(*s)) {
        if !s.has(sig) {
            return Err(PodError::Lacks(sig));
        }
    }
    Ok(())
}

fn p95(merged: &Snapshot, m: Metric) -> f64 {
    merged.quantile(latency_signal(m), 0.95).unwrap_or(0.0)
}

/// A load's value over the pods that answered: summed, each pod's arrivals its own window's.
fn load(m: Metric, merged: &Snapshot, arrivals: f64) -> f64 {
    match m {
        Metric::InFlight => in_flight(merged).unwrap_or(0.0),
        Metric::ArrivalRate => arrivals,
        Metric::Running => merged.value(Signal::Running).unwrap_or(0.0),
        _ => merged.value(Signal::QueueDepth).unwrap_or(0.0),
    }
}

/// The replica count `desired_replicas` reports for `pods` pods: enough for its signal at
/// its per-replica target (`(value, target)`: the HPA's AverageValue proposal,
/// `value / target`), for the queue at the booster's target when there is one, and, when
/// the latency is above its target, at least `pods × p95 / target` (more than now: the
/// proportional answer the HPA gives a Value metric, which is how a latency must be read;
/// fed as AverageValue it would be divided by the replicas and scale wrongly). 0 when none
/// asks for any (the HPA holds its minimum).
///
/// Unrounded: the HPA reads it at AverageValue 1, so its ratio to the current replicas is
/// the one a Prometheus trigger's value gives, and the HPA rounds it up and holds within its
/// tolerance (10 %) as it does there. A whole count would leave no tolerance: a signal's
/// noise across a whole number would move a replica each time.
pub fn desired_replicas(
    pods: usize,
    signal: (f64, f64),
    booster: Option<(f64, f64)>,
    latency: Option<(f64, f64)>,
) -> f64 {
    let per = |(v, t): (f64, f64)| {
        if t > 0.0 { v.max(0.0) / t } else { 0.0 }
    };
    let by_latency = match latency {
        Some((p95, target)) if p95 > target && target > 0.0 => pods.max(1) as f64 * p95 / target,
        _ => 0.0,
    };
    per(signal).max(booster.map_or(0.0, per)).max(by_latency)
}

/// The value of `cfg`'s metric over the pods that answered (see the module documentation
/// for what failures do).
pub fn answer(cfg: &Config, pods: Vec<PodResult>) -> Result<Answer, NoValue> {
    answer_at(cfg, pods, None)
}

/// [`answer`], with the trigger's [`Trend`] and the time for a `horizon`: the signal's value
/// is recorded in it, and `desired_replicas` also asks for what the prediction needs.
pub fn answer_at(
    cfg: &Config,
    pods: Vec<PodResult>,
    trend: Option<(&mut Trend, f64)>,
) -> Result<Answer, NoValue> {
    if pods.is_empty() {
        return Err(NoValue::NoPods);
    }
    let mut merged: Option<Snapshot> = None;
    let mut ok = 0;
    let mut arrivals = 0.0;
    let mut failures = Vec::new();
    for (url, r) in pods {
        match r.and_then(|r| usable(cfg, &r.snapshot).map(|()| r)) {
            Ok(r) => {
                ok += 1;
                arrivals += r.arrivals_per_s.unwrap_or(0.0);
                match &mut merged {
                    None => merged = Some(r.snapshot),
                    Some(m) => m.merge(r.snapshot),
                }
            }
            Err(why) => failures.push(format!("{url}: {why}")),
        }
    }
    let Some(merged) = merged else {
        return Err(NoValue::AllFailed {
            failed: failures.len(),
            first: failures.swap_remove(0),
        });
    };
    let value = match cfg.metric {
        Metric::QueueDepth | Metric::Running | Metric::InFlight | Metric::ArrivalRate => {
            load(cfg.metric, &merged, arrivals)
        }
        Metric::KvCacheUsage => merged.value(Signal::KvCacheUsage).unwrap_or(0.0),
        Metric::TtftP95 | Metric::QueueTimeP95 | Metric::E2eP95 => p95(&merged, cfg.metric),
        Metric::DesiredReplicas => {
            let now = load(cfg.signal, &merged, arrivals);
            let ahead = match (cfg.horizon_s, trend) {
                (Some(h), Some((trend, t))) => {
                    trend.record(t, now);
                    trend.predict(h, cfg.trend_window_s)
                }
                _ => None,
            };
            desired_replicas(
                ok,
                (now.max(ahead.unwrap_or(0.0)), cfg.target),
                cfg.queue_target
                    .map(|q| (load(Metric::QueueDepth, &merged, arrivals), q)),
                cfg.guardrail.map(|(m, t)| {
                    let p = p95(&merged, m);
                    (cfg.guardrail_ratio_max.map_or(p, |r| p.min(r * t)), t)
                }),
            )
        }
    };
    Ok(Answer {
        value: if value.is_finite() {
            value.max(0.0)
        } else {
            0.0
        },
        pods_ok: ok,
        failures,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::external::metadata::Pods;

    fn cfg(metric: Metric) -> Config {
        Config {
            pods: Pods::Targets(vec![]),
            metric,
            target: 5.0,
            signal: Metric::QueueDepth,
            queue_target: None,
            horizon_s: None,
            trend_window_s: TREND_WINDOW_S,
            activation_target: 0.0,
            window_s: 60.0,
            engine: None,
            guardrail: None,
            guardrail_ratio_max: None,
            timeout_s: None,
        }
    }

    /// A vLLM pod's exposition: `waiting` queued, and `e2e` end-to-end latencies observed
    /// (in vLLM's buckets 1, 2.5, 5, 10, +Inf seconds, a cut of its layout).
    fn pod(waiting: f64, e2e: &[f64]) -> Snapshot {
        pod_at("pod", waiting, e2e)
    }

    /// [`pod`] scraped from `url` (series of different pods stay apart when merged).
    fn pod_at(url: &str, waiting: f64, e2e: &[f64]) -> Snapshot {
        let bounds = [1.0, 2.5, 5.0, 10.0, f64::INFINITY];
        let mut text = format!(
            "# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting{{model_name=\"m\"}} {waiting}\n# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{{model_name=\"m\"}} 3\n# TYPE vllm:e2e_request_latency_seconds histogram\n"
        );
        for b in bounds {
            let n = e2e.iter().filter(|v| **v <= b).count();
            let le = if b.is_infinite() {
                "+Inf".to_owned()
            } else {
                format!("{b}")
            };
            text.push_str(&format!(
                "vllm:e2e_request_latency_seconds_bucket{{model_name=\"m\",le=\"{le}\"}} {n}\n"
            ));
        }
        text.push_str(&format!(
            "vllm:e2e_request_latency_seconds_count{{model_name=\"m\"}} {}\nvllm:e2e_request_latency_seconds_sum{{model_name=\"m\"}} {}\n",
            e2e.len(),
            e2e.iter().sum::<f64>()
        ));
        let exp = inferscale_promtext::parse(text.as_bytes()).unwrap_or_else(|e| panic!("{e}"));
        Snapshot::read(&exp, url)
    }

    fn ok(url: &str, s: impl Into<Reading>) -> PodResult {
        (url.to_owned(), Ok(s.into()))
    }

    /// A pod's result read from its own URL.
    fn at(url: &str, waiting: f64, e2e: &[f64]) -> PodResult {
        ok(url, pod_at(url, waiting, e2e))
    }

    #[test]
    fn the_queue_is_the_sum_of_the_pods_and_failures_are_counted_not_zeroed() {
        let c = cfg(Metric::QueueDepth);
        let a = answer(
            &c,
            vec![at("a", 3.0, &[]), at("b", 4.0, &[]), at("c", 0.0, &[])],
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((a.value, a.pods_ok, a.failures.len()), (7.0, 3, 0));
        let a = answer(
            &c,
            vec![
                at("a", 3.0, &[]),
                (
                    "b".into(),
                    Err(PodError::Fetch("connection refused".into())),
                ),
                at("c", 1.0, &[]),
            ],
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((a.value, a.pods_ok), (4.0, 2));
        assert_eq!(a.failures, ["b: connection refused"]);
        let e = answer(
            &c,
            vec![
                ("a".into(), Err(PodError::Fetch("timed out".into()))),
                ("b".into(), Err(PodError::Fetch("HTTP 503".into()))),
            ],
        )
        .expect_err("all failed");
        assert_eq!(
            e,
            NoValue::AllFailed {
                failed: 2,
                first: "a: timed out".into()
            }
        );
        assert_eq!(answer(&c, vec![]), Err(NoValue::NoPods));
        // A pod that answers without the engine's metrics is a failure that says so.
        let empty = Snapshot::read(
            &inferscale_promtext::parse(b"up 1\n").unwrap_or_else(|e| panic!("{e}")),
            "x",
        );
        let e = answer(&c, vec![ok("x", empty)]).expect_err("no engine");
        assert!(
            e.to_string().contains("serves no inference-engine metrics"),
            "{e}"
        );
    }

    #[test]
    fn percentiles_cover_the_window_merged_across_pods() {
        let mut h = History::default();
        // Before the window: 20 slow requests (8 s) on each pod. In it: 40 fast ones on
        // one, 18 fast, one 4 s and one 8 s on the other.
        let before = vec![8.0; 20];
        let mut a_now = before.clone();
        a_now.extend([0.5; 40]);
        let mut b_now = before.clone();
        b_now.extend([0.5; 18]);
        b_now.extend([4.0, 8.0]);
        for (url, now) in [("a", &a_now), ("b", &b_now)] {
            h.record(url, 0.0, pod_at(url, 0.0, &before), 60.0);
            h.record(url, 70.0, pod_at(url, 0.0, now), 60.0);
        }
        let c = cfg(Metric::E2eP95);
        let windowed: Vec<PodResult> = ["a", "b"]
            .iter()
            .map(|p| ok(p, h.windowed(p, 60.0).unwrap_or_else(|| unreachable!())))
            .collect();
        let w = answer(&c, windowed).unwrap_or_else(|e| panic!("{e}"));
        // 60 in the window, 58 of them ≤ 1 s: rank 57 lies in the first bucket.
        assert!(w.value > 0.9 && w.value <= 1.0, "{}", w.value);
        // Over the pods' lifetimes 40 of 100 are slow: p95 in (5, 10].
        let life = answer(&c, vec![at("a", 0.0, &a_now), at("b", 0.0, &b_now)])
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(life.value > 5.0 && life.value <= 10.0, "{}", life.value);
        // Nothing finished in the window: 0, not an error.
        let mut q = History::default();
        q.record("a", 0.0, pod_at("a", 0.0, &[2.0]), 60.0);
        q.record("a", 90.0, pod_at("a", 0.0, &[2.0]), 60.0);
        let idle = answer(
            &c,
            vec![ok(
                "a",
                q.windowed("a", 60.0).unwrap_or_else(|| unreachable!()),
            )],
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(idle.value, 0.0);
    }

    #[test]
    fn history_keeps_what_the_window_needs_and_forgets_vanished_pods() {
        let mut h = History::default();
        for t in 0..100 {
            h.record("a", f64::from(t), pod(0.0, &[]), 10.0);
        }
        assert!(h.by_pod["a"].len() <= 12, "{}", h.by_pod["a"].len());
        assert!(h.by_pod["a"].front().is_some_and(|(t, _)| *t <= 89.0));
        h.record("b", 0.0, pod(0.0, &[]), 10.0);
        h.retain(&["b"]);
        assert_eq!(h.len(), 1);
        assert!(h.windowed("a", 10.0).is_none());
    }

    #[test]
    fn a_fast_poll_keeps_a_bounded_history_and_the_window_still_spans_its_length() {
        let mut h = History::default();
        // 10 polls a second for 5 minutes, a request finishing at each (latency 2 s).
        let mut e2e = Vec::new();
        for i in 0..3_000 {
            e2e.push(2.0);
            h.record("p", f64::from(i) * 0.1, pod_at("p", 0.0, &e2e), 60.0);
        }
        let kept = h.by_pod["p"].len();
        assert!(kept <= 33, "{kept} snapshots kept");
        let w = h.windowed("p", 60.0).unwrap_or_else(|| panic!("no window"));
        let span = w.snapshot.window_seconds.unwrap_or(0.0);
        assert!((60.0..=62.0).contains(&span), "window of {span} s");
    }

    /// A pod with `waiting` queued, `running` running and `ok` and `aborted` requests ended.
    fn loaded(url: &str, waiting: f64, running: f64, ok: f64, aborted: f64) -> Snapshot {
        let text = format!(
            "# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting{{model_name=\"m\"}} {waiting}\n# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{{model_name=\"m\"}} {running}\n# TYPE vllm:request_success counter\nvllm:request_success_total{{model_name=\"m\",finished_reason=\"length\"}} {ok}\nvllm:request_success_total{{model_name=\"m\",finished_reason=\"abort\"}} {aborted}\n"
        );
        let exp = inferscale_promtext::parse(text.as_bytes()).unwrap_or_else(|e| panic!("{e}"));
        Snapshot::read(&exp, url)
    }

    #[test]
    fn in_flight_and_arrivals_count_what_is_running_waiting_and_ended() {
        let mut h = History::default();
        // Pod a: 100 ended in a minute (4 of them aborted) and in flight grew 10 -> 40: 130
        // arrived, 2.17/s. Pod b: 60 ended, in flight 50 -> 30: 40 arrived.
        h.record("a", 0.0, loaded("a", 0.0, 10.0, 500.0, 0.0), 60.0);
        h.record("a", 60.0, loaded("a", 12.0, 28.0, 596.0, 4.0), 60.0);
        h.record("b", 0.0, loaded("b", 20.0, 30.0, 0.0, 0.0), 60.0);
        h.record("b", 60.0, loaded("b", 0.0, 30.0, 60.0, 0.0), 60.0);
        let read = |m: Metric| {
            let mut c = cfg(m);
            c.target = 1.0;
            let pods: Vec<PodResult> = ["a", "b"]
                .iter()
                .map(|p| ok(p, h.windowed(p, 60.0).unwrap_or_else(|| unreachable!())))
                .collect();
            answer(&c, pods).unwrap_or_else(|e| panic!("{e}")).value
        };
        assert_eq!(read(Metric::InFlight), 70.0);
        assert!((read(Metric::ArrivalRate) - 170.0 / 60.0).abs() < 1e-9);
        // desired_replicas by in flight at 20 per replica, boosted by a queue of 12 at 5.
        let mut c = cfg(Metric::DesiredReplicas);
        c.signal = Metric::InFlight;
        c.target = 20.0;
        c.queue_target = Some(2.0);
        let pods: Vec<PodResult> = ["a", "b"]
            .iter()
            .map(|p| ok(p, h.windowed(p, 60.0).unwrap_or_else(|| unreachable!())))
            .collect();
        assert_eq!(answer(&c, pods).map(|a| a.value), Ok(6.0));
        // A pod without a queue cannot give in flight: named.
        let bare = Snapshot::read(
            &inferscale_promtext::parse(
                b"# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running 3\n",
            )
            .unwrap_or_else(|e| panic!("{e}")),
            "x",
        );
        let e = answer(&cfg(Metric::InFlight), vec![ok("x", bare)]).expect_err("no queue");
        assert!(e.to_string().contains("has no"), "{e}");
    }

    #[test]
    fn a_trend_predicts_a_rising_signal_ahead() {
        let w = TREND_WINDOW_S;
        let mut t = Trend::default();
        assert_eq!(t.predict(60.0, w), None);
        t.record(0.0, 1.0);
        t.record(15.0, 100.0);
        assert_eq!(t.predict(60.0, w), None, "too young to draw a line through");
        for i in 0..40 {
            // 2 per second, from a point long before the window on.
            t.record(f64::from(i) * 15.0, 100.0 + 30.0 * f64::from(i));
        }
        let p = t.predict(300.0, w).unwrap_or_else(|| unreachable!());
        assert!((p - (100.0 + 30.0 * 39.0 + 600.0)).abs() < 1e-6, "{p}");
        // Nothing older than the longest window is kept.
        for i in 40..400 {
            t.record(f64::from(i) * 15.0, 100.0);
        }
        assert!(t.points.len() <= 121, "{}", t.points.len());
    }

    #[test]
    fn a_shorter_trend_window_sees_a_rise_sooner() {
        let mut t = Trend::default();
        // Flat for ten minutes, then rising 2 per second for a minute.
        for i in 0..=44 {
            let s = f64::from(i) * 15.0;
            t.record(s, 100.0 + 2.0 * (s - 600.0).max(0.0));
        }
        let now = 100.0 + 2.0 * 60.0;
        let long = t
            .predict(300.0, TREND_WINDOW_S)
            .unwrap_or_else(|| unreachable!());
        let short = t.predict(300.0, 120.0).unwrap_or_else(|| unreachable!());
        assert!(
            short > now + 200.0 && long < now + 50.0,
            "{short} {long} {now}"
        );
        // Four fifths of a window must be spanned whatever its length.
        let mut young = Trend::default();
        for s in [0.0, 15.0, 30.0, 45.0, 60.0, 75.0, 90.0] {
            young.record(s, s);
        }
        assert!(young.predict(60.0, 120.0).is_none());
        young.record(105.0, 105.0);
        assert!(young.predict(60.0, 120.0).is_some());
    }

    #[test]
    fn desired_replicas_follows_the_queue_and_the_guardrail_raises_it() {
        assert_eq!(desired_replicas(3, (0.0, 5.0), None, Some((2.0, 5.0))), 0.0);
        // Unrounded, as the HPA's own proposal before it rounds up: 11 at 5 per replica.
        assert_eq!(
            desired_replicas(3, (11.0, 5.0), None, Some((2.0, 5.0))),
            2.2
        );
        // Latency above target: at least proportionally more than now.
        assert_eq!(desired_replicas(3, (0.0, 5.0), None, Some((7.5, 5.0))), 4.5);
        assert_eq!(
            desired_replicas(3, (40.0, 5.0), None, Some((7.5, 5.0))),
            8.0
        );
        // In flight 250 at 100 per replica: 2.5; a queue of 90 at 20 per replica: 4.5.
        assert_eq!(
            desired_replicas(3, (250.0, 100.0), Some((90.0, 20.0)), None),
            4.5
        );
        assert_eq!(
            desired_replicas(3, (250.0, 100.0), Some((10.0, 20.0)), None),
            2.5
        );
        let mut c = cfg(Metric::DesiredReplicas);
        c.guardrail = Some((Metric::E2eP95, 5.0));
        let slow = [9.0; 20];
        let a = answer(&c, vec![at("a", 2.0, &slow), at("b", 1.0, &slow)])
            .unwrap_or_else(|e| panic!("{e}"));
        // Queue 3 at 5 per replica: 1; p95 in (5, 10] over target 5 with 2 pods: ≥ 3.
        assert!(a.value >= 3.0, "{}", a.value);
        // A p95 far over its target asks for every replica, unless the ratio is bounded:
        // then for at most that many times the pods (the p95 reads 10 s, the top finite
        // bucket, against 1 s).
        c.guardrail = Some((Metric::E2eP95, 1.0));
        let stuck = [60.0; 20];
        let a = answer(&c, vec![at("a", 2.0, &stuck), at("b", 1.0, &stuck)])
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(a.value >= 20.0, "{}", a.value);
        c.guardrail_ratio_max = Some(1.5);
        let a = answer(&c, vec![at("a", 2.0, &stuck), at("b", 1.0, &stuck)])
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(a.value, 3.0);
    }
}
