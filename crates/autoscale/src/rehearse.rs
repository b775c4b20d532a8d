//! A rehearsal: traffic against simulated replicas under a ScaledObject, in virtual time,
//! with the loops a cluster runs between them.
//!
//! ```text
//! arrivals ─► Service (routing) ─► replicas (engines) ─► finished requests ─► latency, SLO
//!                                      │ /metrics, DCGM
//!                      Prometheus scrape (every scrape interval) ─► Store ─► rules (for:)
//!                                                                    │
//!          KEDA poll (pollingInterval: activation, cooldown, cache) ◄┤ trigger queries
//!          HPA sync (15 s: KEDA's metrics server → proposals → behavior) ◄┘
//!                │ spec.replicas
//!                ▼
//!          pods: Pending → node (Karpenter) → image → model load → warm-up → Ready;
//!          scale-in: drain, node consolidated after consolidateAfter
//! ```
//!
//! Each loop runs on its own period with a seeded phase, as unsynchronised controllers do.
//! At one instant the order is: scrape, rules, KEDA's poll, the HPA's sync, the timeline row.

use std::cell::RefCell;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};

use inferscale_catalog::vllm::{self, EngineHistogram};
use inferscale_catalog::{Snapshot, names_for};
use inferscale_engine::fleet::{Fleet, FleetEvent, Notice, Observer, Replica, Routing, drive};
use inferscale_engine::stats::FinishReason;
use inferscale_engine::{EngineConfig, EventKind, Prompt, PromptCycle, RequestSpec};
use inferscale_promql::{Evaluator, Labels, Memo, Store};
use inferscale_promtext::Exposition;
use inferscale_rng::{FastHash, Rng, mix};
use serde::Serialize;

pub use crate::alerts::AlertRule;
use crate::alerts::{Alerts, Change};
use crate::cluster::{Cluster, ClusterSpec};
use crate::external::decide::{History, PodError, PodResult, Trend, answer_at, signals};
use crate::external::metadata::Config;
use crate::hpa::{Decision, Replicas};
use crate::keda::{Fetch, FetchError, Keda, KedaSpec, MetricType, PollAction, Source, fetch};
use crate::traffic::Traffic;

/// Which exporter an exposition comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Job {
    /// The inference server's `/metrics`.
    Engine,
    /// The GPU exporter on the replica's node.
    Gpu,
}

/// What the replicas' endpoints serve, in virtual time (the simulator's exporters in the
/// binary; anything that renders expositions in tests).
pub trait Exporters {
    /// Calls `out` with each exposition replica `replica` serves at `now`, keeping at least
    /// the families `keep` accepts (by family name).
    fn collect(
        &mut self,
        replica: &Replica,
        now: f64,
        keep: &dyn Fn(&str) -> bool,
        out: &mut dyn FnMut(Job, &Exposition<'_>),
    );
}

/// Everything about a rehearsal but the ScaledObject and the traffic.
#[derive(Debug, Clone)]
pub struct Setup {
    /// Each replica's engine.
    pub engine: EngineConfig,
    /// The requests sent (when `prompts` is `None`).
    pub request: RequestSpec,
    /// The prompts sent in turn, with what their blocks share (a trace's or a shape's), for
    /// the replicas' prefix caches to find; `None`: every request is `request`, unique.
    pub prompts: Option<PromptCycle>,
    /// How the Service spreads requests.
    pub routing: Routing,
    /// Replicas at the start (ready).
    pub initial_replicas: u32,
    /// How long to simulate, seconds.
    pub duration_s: f64,
    /// The seed of every random choice.
    pub seed: u64,
    /// The end-to-end latency a request must finish within, seconds.
    pub slo_e2e_s: f64,
    /// Prometheus' scrape interval, seconds.
    pub scrape_interval_s: f64,
    /// The HPA controller's sync period, seconds.
    pub hpa_sync_s: f64,
    /// The rule group's evaluation interval, seconds.
    pub rule_interval_s: f64,
    /// The timeline's resolution, seconds.
    pub step_s: f64,
    /// Pods and nodes.
    pub cluster: ClusterSpec,
    /// Alerting rules evaluated on the same series.
    pub rules: Vec<AlertRule>,
    /// How the clients behave: how long they wait, and how they retry.
    pub client: Client,
    /// Spans of the traffic the verdict names apart (a step inside a pod's start-up time):
    /// attainment is also given for the requests that arrived outside them.
    pub transients: Vec<Window>,
    /// A warm-in, seconds: the verdict (attainment, GPU-hours, scale events, flaps) counts
    /// from here, as if the deployment had been running before (0: from the start).
    pub judge_from_s: f64,
}

/// What one replica serves, req/s, as a transient's length is reckoned.
#[derive(Debug, Clone, Copy)]
pub struct Rates {
    /// The measured capacity: the unit a rise is told in (`2.5×`).
    pub capacity_rps: f64,
    /// What it serves while its queue never empties: what a backlog builds and drains at
    /// ([`crate::tune::backlogged_rps`]).
    pub backlogged_rps: f64,
    /// What it serves with the SLO met: how many replicas hold a rate.
    pub slo_rps: f64,
}

/// After a rise, the least time before a new replica could be asked for: two scrapes and an
/// HPA sync, and KEDA's poll, seconds.
pub const REACTION_S: f64 = 60.0;

/// The start-up transients of a rehearsal `out` of `traffic` (as rehearsed), with the
/// replicas ready at each: each rise of the rate faster than a replica starts, from the rise
/// until the backlog it leaves on the replicas that were ready could have drained.
///
/// A new replica is ready a start-up (`startup_s`) plus [`REACTION_S`] after the rise at
/// the earliest; until then the `n0` replicas ready take the new rate and queue what they
/// cannot serve (at [`Rates::backlogged_rps`] each). vLLM's queues are per replica (what waits in one
/// cannot move to another), so that backlog drains only as fast as those replicas serve
/// beyond their share of the new arrivals: the transient lasts until it has drained with
/// the [`cheapest_drain`] replicas sharing them (about `2 × rate / backlogged_rps`, and at
/// least the `ceil(rate / slo_rps)` that hold the new rate); more drain it sooner
/// at a higher cost, fewer later at a higher cost, and a least-outstanding router drains it
/// at the replicas' full speed. Requests arriving later are the policy's to serve within the
/// SLO. Times in the words are less `offset_s` (a warm-in).
pub fn start_up_transients(
    traffic: &Traffic,
    out: &Outcome,
    startup_s: f64,
    rates: Rates,
    offset_s: f64,
) -> Vec<(Window, u32)> {
    let c = rates.capacity_rps.max(1e-9);
    let b = rates.backlogged_rps.max(1e-9);
    traffic
        .jumps(1.2, 0.05 * c)
        .into_iter()
        .map(|(at, from, to)| {
            let n0 = ready_at(out, at);
            let until_ready = startup_s + REACTION_S;
            let backlog = (to / f64::from(n0) - b).max(0.0) * until_ready;
            let (sharing, drain) = drain_s(backlog, to, b, rates.slo_rps, n0);
            let window = Window {
                from_s: at,
                to_s: at + until_ready + drain,
                why: format!(
                    "a step from {from:.1} to {to:.1} req/s ({:.1}× to {:.1}× a replica's capacity) at {:.0} s, faster than a replica starts: {n0} ready replica{} take{} it for the {until_ready:.0} s until one more can serve, {:.0} requests queue on {} meanwhile and take {drain:.0} s more to drain with {sharing} replicas sharing the new arrivals",
                    from / c,
                    to / c,
                    at - offset_s,
                    if n0 == 1 { "" } else { "s" },
                    if n0 == 1 { "s" } else { "" },
                    backlog * f64::from(n0),
                    if n0 == 1 { "it" } else { "them" },
                ),
            };
            (window, n0)
        })
        .chain(traffic.rise_starts().into_iter().filter_map(|(at, from)| {
            ramp_transient(
                traffic,
                ready_at(out, at),
                (at, from),
                startup_s,
                rates,
                offset_s,
            )
        }))
        .collect()
}

/// The transient of a gradual rise that begins at `at` from `from` req/s, if it outruns a
/// replica's start: the rate passes what the replicas ready at its start hold within the
/// SLO before a replica asked for as it began (a start-up plus [`REACTION_S`] later) could
/// serve. A policy that follows a rise's trend keeps up once it has one replica more; until
/// then no scaling out helps, only replicas kept warm. From that crossing until what queued
/// meanwhile (beyond the replicas' capacity) has drained as after a step.
fn ramp_transient(
    traffic: &Traffic,
    n0: u32,
    (at, from): (f64, f64),
    startup_s: f64,
    rates: Rates,
    offset_s: f64,
) -> Option<(Window, u32)> {
    let c = rates.capacity_rps.max(1e-9);
    let b = rates.backlogged_rps.max(1e-9);
    let hold = f64::from(n0) * rates.slo_rps;
    let until_ready = startup_s + REACTION_S;
    let mut crossed = None;
    let mut backlog = 0.0;
    let mut t = at;
    while t < at + until_ready {
        let rate = traffic.rate_at(t);
        if crossed.is_none() && rate > hold {
            crossed = Some(t);
        }
        backlog += (rate / f64::from(n0) - b).max(0.0);
        t += 1.0;
    }
    let crossed = crossed?;
    let to = traffic.rate_at(at + until_ready);
    let (sharing, drain) = drain_s(backlog, to, b, rates.slo_rps, n0);
    let window = Window {
        from_s: crossed,
        to_s: at + until_ready + drain,
        why: format!(
            "a rise from {from:.1} req/s ({:.1}× a replica's capacity) at {:.0} s, faster than a replica starts: it passes the {hold:.1} req/s {n0} ready replica{} hold{} within the SLO {:.0} s in, before one asked for as it began could serve ({until_ready:.0} s in){}",
            from / c,
            at - offset_s,
            if n0 == 1 { "" } else { "s" },
            if n0 == 1 { "s" } else { "" },
            crossed - at,
            if backlog > 0.0 {
                format!(
                    "; {:.0} requests queue meanwhile and take {drain:.0} s more to drain with {sharing} replicas sharing the arrivals",
                    backlog * f64::from(n0)
                )
            } else {
                String::new()
            }
        ),
    };
    Some((window, n0))
}

/// How a `backlog` queued on each of `n0` replicas drains once new ones serve `rate`: the
/// [`cheapest_drain`] replicas sharing the arrivals, and the seconds it takes (infinite if
/// they cannot).
fn drain_s(backlog: f64, rate: f64, c: f64, capacity_slo_rps: f64, n0: u32) -> (u32, f64) {
    let sharing = cheapest_drain(rate, c, capacity_slo_rps, n0);
    let spare = c - rate / f64::from(sharing);
    let drain = if backlog <= 0.0 {
        0.0
    } else if spare > 0.0 {
        backlog / spare
    } else {
        f64::INFINITY
    };
    (sharing, drain)
}

/// The replicas ready at `at` in a rehearsal (at least one).
fn ready_at(out: &Outcome, at: f64) -> u32 {
    out.timeline
        .iter()
        .take_while(|row| row.time_s <= at)
        .last()
        .map_or(1, |row| row.ready_replicas)
        .max(1)
}

/// The replicas that drain a step's backlog at the least GPU time: `m` replicas share the
/// new `rate`, so each of the `n0` that hold the backlog drains it at `capacity_rps − rate /
/// m`, and the drain costs `m / (capacity_rps − rate / m)` replica-seconds per request of
/// it, least at `m = 2 × rate / capacity_rps`. At least the replicas that hold the new rate
/// within the SLO (`ceil(rate / capacity_slo_rps)`, each new one takes `rate / m`) and one
/// more than `n0`; of equal costs, the more replicas (the shorter drain).
pub fn cheapest_drain(rate: f64, capacity_rps: f64, capacity_slo_rps: f64, n0: u32) -> u32 {
    let c = capacity_rps.max(1e-9);
    let hold = (rate / capacity_slo_rps.max(1e-9)).ceil().max(1.0) as u32;
    let first = hold.max(n0 + 1).max((rate / c).floor() as u32 + 1);
    let cost = |m: u32| f64::from(m) / (c - rate / f64::from(m));
    // The cost falls to its least near 2 × rate / c and rises after: the search stops there.
    let last = first.max((2.0 * rate / c).ceil() as u32 + 1);
    (first..=last)
        .min_by(|&a, &b| cost(a).total_cmp(&cost(b)).then(b.cmp(&a)))
        .unwrap_or(first)
}

impl Outcome {
    /// Sets `windows` apart in the summary, after the fact: the attainment outside them (of
    /// the requests that arrived from `from_s`, the rehearsal's warm-in), and each one's
    /// requests.
    pub fn set_apart(&mut self, windows: &[Window], from_s: f64) {
        let (n, w) = self.judged_outside(windows, from_s);
        self.summary.slo_attainment_outside =
            (!windows.is_empty()).then(|| if n == 0 { 1.0 } else { w as f64 / n as f64 });
        self.summary.transients = windows
            .iter()
            .map(|win| {
                let (judged, within) = self.judged_inside(win);
                Transient {
                    window: win.clone(),
                    judged,
                    within,
                }
            })
            .collect();
    }
}

/// The width of [`Outcome::judged_by_arrival`]'s bins, seconds.
pub const JUDGE_BIN_S: f64 = 10.0;

/// A span of the rehearsal, and why it is set apart.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Window {
    /// From, seconds.
    pub from_s: f64,
    /// To, seconds.
    pub to_s: f64,
    /// Why.
    pub why: String,
}

impl Window {
    /// Whether `t` is in it.
    pub fn holds(&self, t: f64) -> bool {
        t >= self.from_s && t < self.to_s
    }
}

/// How the clients of the deployment behave. Real ones do not wait forever: the OpenAI SDKs
/// give up on a request after a timeout and try it again after a backoff, which changes both
/// what users see and the load the replicas get.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Client {
    /// How long a request may take before the client gives up on it (and closes the
    /// connection, which makes vLLM abort it), seconds; `None`: it waits forever.
    pub timeout_s: Option<f64>,
    /// Attempts after the first, for a request that timed out or found no ready replica.
    pub max_retries: u32,
    /// The first retry's wait, seconds; each further one waits twice as long…
    pub backoff_initial_s: f64,
    /// …up to this, seconds…
    pub backoff_max_s: f64,
    /// …less a random share up to this (0.25: 0–25 % less).
    pub backoff_jitter: f64,
}

impl Client {
    /// The OpenAI Python SDK's defaults (openai 1.x–3.x `_constants.py`: a 600 s timeout, 2
    /// retries, backoff 0.5 s doubling up to 8 s with up to 25 % jitter; timeouts and
    /// connection errors are retried).
    pub const OPENAI_SDK: Client = Client {
        timeout_s: Some(600.0),
        max_retries: 2,
        backoff_initial_s: 0.5,
        backoff_max_s: 8.0,
        backoff_jitter: 0.25,
    };

    /// A client that waits forever and never retries (a load test's view of the server).
    pub const PATIENT: Client = Client {
        timeout_s: None,
        max_retries: 0,
        backoff_initial_s: 0.0,
        backoff_max_s: 0.0,
        backoff_jitter: 0.0,
    };

    /// Whether requests need following one by one (a timeout, or retries).
    fn tracks(&self) -> bool {
        self.timeout_s.is_some() || self.max_retries > 0
    }

    /// The wait before retry number `retry` (0 for the first), as the SDK draws it.
    fn backoff(&self, retry: u32, rng: &mut Rng) -> f64 {
        let base =
            (self.backoff_initial_s * 2f64.powi(retry.min(30) as i32)).min(self.backoff_max_s);
        (base * (1.0 - self.backoff_jitter * rng.next_f64())).max(0.0)
    }
}

/// A rehearsal that cannot run.
#[derive(Debug, thiserror::Error)]
pub enum RehearseError {
    /// The engine configuration does not fit its GPU.
    #[error("the engine does not fit: {0}")]
    Engine(#[from] inferscale_engine::kv::MemoryError),
    /// A setting is out of range.
    #[error("{0}")]
    Setting(String),
}

/// One timeline row.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// Seconds from the start.
    pub time_s: f64,
    /// The traffic's rate at this time, req/s.
    pub offered_rps: f64,
    /// Requests that arrived during the row, per second.
    pub arrived_rps: f64,
    /// `spec.replicas`.
    pub desired_replicas: u32,
    /// Ready replicas (Service endpoints).
    pub ready_replicas: u32,
    /// GPU nodes present.
    pub nodes: u32,
    /// Requests waiting, all replicas.
    pub queue: u32,
    /// Waiting per ready replica.
    pub queue_per_pod: f64,
    /// Requests running, all replicas.
    pub running: u32,
    /// p95 end-to-end latency of the requests that finished during the row.
    pub p95_e2e_s: Option<f64>,
    /// Requests that finished during the row.
    pub finished: u64,
    /// Requests no replica was ready for, during the row.
    pub unrouted: u64,
    /// Each trigger's value at the HPA's last sync (`None`: it failed).
    pub triggers: Vec<Option<f64>>,
    /// Alerts firing.
    pub firing: Vec<String>,
}

/// A change of `spec.replicas`.
#[derive(Debug, Clone, Serialize)]
pub struct ScaleEvent {
    /// When.
    pub time_s: f64,
    /// From.
    pub from: u32,
    /// To.
    pub to: u32,
    /// `hpa` or `keda` (activation, cooldown).
    pub by: &'static str,
}

/// One alert's firing span.
#[derive(Debug, Clone, Serialize)]
pub struct AlertSpan {
    /// The alert.
    pub name: String,
    /// When it started pending.
    pub pending_s: f64,
    /// When it fired.
    pub fired_s: f64,
    /// When it resolved (`None`: still firing at the end).
    pub resolved_s: Option<f64>,
}

/// What one trigger did over the run.
#[derive(Debug, Clone, Serialize)]
pub struct TriggerReport {
    /// The HPA metric (`s0-prometheus`).
    pub metric: String,
    /// Its query.
    pub query: String,
    /// `AverageValue` or `Value`.
    pub metric_type: &'static str,
    /// Its target.
    pub threshold: f64,
    /// The highest value the HPA read.
    pub max_value: Option<f64>,
    /// The most replicas it alone asked for.
    pub max_proposal: Option<u32>,
    /// Syncs at which it could not be read.
    pub failures: u64,
}

/// The verdict.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    /// The ScaledObject's name.
    pub name: String,
    /// Seconds simulated.
    pub duration_s: f64,
    /// Requests that arrived.
    pub requests: u64,
    /// Requests that finished.
    pub finished: u64,
    /// …within the SLO.
    pub within_slo: u64,
    /// The SLO, seconds.
    pub slo_e2e_s: f64,
    /// Share of requests (arrived, and either finished, given up on, or older than the SLO
    /// at the end) that finished within the SLO.
    pub slo_attainment: f64,
    /// The same over the requests that arrived outside the transients (`None` when none
    /// was set apart).
    pub slo_attainment_outside: Option<f64>,
    /// The spans set apart, and how their requests fared.
    pub transients: Vec<Transient>,
    /// How the requests ended, as the clients saw them.
    pub outcomes: Outcomes,
    /// p95 end-to-end latency of the finished requests.
    pub p95_e2e_s: Option<f64>,
    /// p99.
    pub p99_e2e_s: Option<f64>,
    /// The longest queue seen at a scrape, all replicas.
    pub max_queue: u32,
    /// The longest queue per ready replica.
    pub max_queue_per_pod: f64,
    /// The most replicas asked for.
    pub max_replicas: u32,
    /// The most nodes present.
    pub max_nodes: u32,
    /// The first scale-out, seconds.
    pub first_scale_out_s: Option<f64>,
    /// After it, the first row with the queue under one per ready replica and the row's p95
    /// within the SLO.
    pub recovered_s: Option<f64>,
    /// GPU-hours of node time.
    pub gpu_hours: f64,
    /// Changes of `spec.replicas`.
    pub scale_events: usize,
    /// Direction reversals within 5 minutes of the previous change.
    pub flaps: usize,
    /// Alerts that fired.
    pub alerts_fired: Vec<String>,
    /// It scaled out and came back to its floor before the end.
    pub cycle_completed: bool,
    /// Requests refused for want of a ready replica.
    pub unrouted: u64,
    /// The share of prompt tokens the replicas found in their prefix caches, over the whole
    /// rehearsal (warm-in included); `None` when nothing was looked up (caching off).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prefix_cache_hit_rate: Option<f64>,
    /// `spec.replicas` at the end.
    pub final_replicas: u32,
    /// Per trigger.
    pub triggers: Vec<TriggerReport>,
    /// What the reader should know (e.g. a trigger that cannot ask for enough replicas).
    pub notes: Vec<String>,
}

/// How far the scale-out → scale-in cycle got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cycle {
    /// It scaled out and came back to its floor before the end.
    Completed,
    /// It never scaled out.
    NoScaleOut,
    /// It scaled out and had not come back by the end.
    NotCompleted,
}

impl Cycle {
    /// A table cell: `completed`, `no scale-out`, `not completed`.
    pub fn word(self) -> &'static str {
        match self {
            Cycle::Completed => "completed",
            Cycle::NoScaleOut => "no scale-out",
            Cycle::NotCompleted => "not completed",
        }
    }

    /// A clause of a sentence.
    pub fn sentence(self) -> &'static str {
        match self {
            Cycle::Completed => "the scale-out → scale-in cycle completed",
            Cycle::NoScaleOut => "it never scaled out",
            Cycle::NotCompleted => "the scale-in did not finish within the rehearsal",
        }
    }
}

impl Summary {
    /// How far the scale-out → scale-in cycle got.
    pub fn cycle(&self) -> Cycle {
        if self.cycle_completed {
            Cycle::Completed
        } else if self.first_scale_out_s.is_none() {
            Cycle::NoScaleOut
        } else {
            Cycle::NotCompleted
        }
    }
}

/// A span set apart, and the requests that arrived in it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Transient {
    /// The span.
    #[serde(flatten)]
    pub window: Window,
    /// Requests judged (ended, given up on, or late at the end).
    pub judged: u64,
    /// …of which within the SLO.
    pub within: u64,
}

/// How requests ended, counted as the load generator counts its outcomes: every request
/// that arrived is in exactly one of `ok`, `timeout`, `refused` and `unfinished`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Outcomes {
    /// Answered (within the SLO or not).
    pub ok: u64,
    /// Given up on: the last attempt ran past the client's timeout.
    pub timeout: u64,
    /// Given up on: the last attempt found no ready replica (a connection error).
    pub refused: u64,
    /// Still running, or waiting to be retried, at the end.
    pub unfinished: u64,
    /// Attempts after the first (each timed out or refused), over all requests.
    pub retries: u64,
    /// Attempts the engines aborted because their client gave up.
    pub aborted: u64,
}

/// A rehearsal's result.
#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    /// The verdict.
    pub summary: Summary,
    /// One row per step.
    pub timeline: Vec<Row>,
    /// Every change of `spec.replicas`.
    pub events: Vec<ScaleEvent>,
    /// Every alert's firing spans.
    pub alerts: Vec<AlertSpan>,
    /// Requests judged, and of them within the SLO, by when they first arrived: bin `i`
    /// holds arrivals in `[i, i + 1) × JUDGE_BIN_S` (spans set apart after the fact are
    /// judged from it).
    pub judged_by_arrival: Vec<[u64; 2]>,
}

impl Outcome {
    /// Attainment over the requests judged that first arrived in no span of `windows` (and
    /// after `from_s`), to the bin: `(judged, within)`.
    pub fn judged_outside(&self, windows: &[Window], from_s: f64) -> (u64, u64) {
        let mut acc = (0, 0);
        for (i, [n, w]) in self.judged_by_arrival.iter().enumerate() {
            let mid = (i as f64 + 0.5) * JUDGE_BIN_S;
            if mid >= from_s && !windows.iter().any(|x| x.holds(mid)) {
                acc.0 += n;
                acc.1 += w;
            }
        }
        acc
    }

    /// The same inside `window`.
    pub fn judged_inside(&self, window: &Window) -> (u64, u64) {
        let mut acc = (0, 0);
        for (i, [n, w]) in self.judged_by_arrival.iter().enumerate() {
            if window.holds((i as f64 + 0.5) * JUDGE_BIN_S) {
                acc.0 += n;
                acc.1 += w;
            }
        }
        acc
    }
}

/// `ln(LogHist::GROWTH)`, taken once.
static LN_GROWTH: std::sync::LazyLock<f64> = std::sync::LazyLock::new(|| LogHist::GROWTH.ln());

/// Latencies in 1 % buckets from 1 ms, for percentiles over millions of requests.
#[derive(Debug, Clone, Default)]
struct LogHist {
    counts: Vec<u64>,
    n: u64,
}

impl LogHist {
    const BASE: f64 = 1e-3;
    const GROWTH: f64 = 1.01;

    fn add(&mut self, v: f64) {
        let i = if v <= Self::BASE {
            0
        } else {
            ((v / Self::BASE).ln() / *LN_GROWTH).ceil() as usize
        };
        if self.counts.len() <= i {
            self.counts.resize(i + 1, 0);
        }
        self.counts[i] += 1;
        self.n += 1;
    }

    fn quantile(&self, q: f64) -> Option<f64> {
        if self.n == 0 {
            return None;
        }
        let rank = (q * self.n as f64).ceil().max(1.0) as u64;
        let mut acc = 0;
        for (i, c) in self.counts.iter().enumerate() {
            acc += c;
            if acc >= rank {
                return Some(Self::BASE * Self::GROWTH.powi(i as i32));
            }
        }
        None
    }
}

fn p95(v: &mut [f64]) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    let rank = ((0.95 * v.len() as f64).ceil() as usize).clamp(1, v.len());
    Some(*v.select_nth_unstable_by(rank - 1, f64::total_cmp).1)
}

/// A retry waiting for its time.
#[derive(Debug, Clone, PartialEq)]
struct Retry {
    at: f64,
    /// When the request first arrived.
    first: f64,
    /// The attempt it will be (1 for the first retry).
    attempt: u32,
    /// What it sends again.
    prompt: Prompt,
}

impl Eq for Retry {}

impl PartialOrd for Retry {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Retry {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.at
            .total_cmp(&other.at)
            .then(self.first.total_cmp(&other.first))
            .then(self.attempt.cmp(&other.attempt))
    }
}

/// An attempt the engines hold: when its request first arrived, which attempt it is, and
/// what it sent.
#[derive(Debug, Clone)]
struct Attempt {
    first: f64,
    attempt: u32,
    prompt: Prompt,
}

/// The requests, as their clients see them: latencies from the first arrival, timeouts,
/// retries and the outcome of each.
struct Requests {
    client: Client,
    slo: f64,
    transients: Vec<Window>,
    row: Vec<f64>,
    all: LogHist,
    arrived: u64,
    arrived_row: u64,
    unrouted_row: u64,
    within: u64,
    /// Requests judged (ended, or given up on) and within the SLO, outside the transients.
    judged_outside: u64,
    within_outside: u64,
    /// The same per transient.
    judged_in: Vec<(u64, u64)>,
    /// The same by first arrival ([`JUDGE_BIN_S`] bins).
    bins: Vec<[u64; 2]>,
    judge_from: f64,
    outcomes: Outcomes,
    /// Attempts in the engines, by replica and engine id (only when the client times out or
    /// retries: otherwise an attempt's first arrival is its own).
    live: HashMap<(usize, u64), Attempt, FastHash>,
    /// Each live attempt's deadline, in the order they were sent (one timeout for all, so
    /// also in deadline order); attempts that ended are skipped when they come up.
    deadlines: VecDeque<(f64, usize, u64)>,
    retries: BinaryHeap<Reverse<Retry>>,
    rng: Rng,
    /// What the modelled endpoint picker measures, when a trigger or rule reads it.
    epp: Option<EppLatencies>,
}

impl Requests {
    fn new(setup: &Setup) -> Requests {
        Requests {
            client: setup.client,
            slo: setup.slo_e2e_s,
            transients: setup.transients.clone(),
            row: Vec::new(),
            all: LogHist::default(),
            arrived: 0,
            arrived_row: 0,
            unrouted_row: 0,
            within: 0,
            judged_outside: 0,
            within_outside: 0,
            judged_in: vec![(0, 0); setup.transients.len()],
            bins: Vec::new(),
            judge_from: setup.judge_from_s,
            outcomes: Outcomes::default(),
            live: HashMap::default(),
            deadlines: VecDeque::new(),
            retries: BinaryHeap::new(),
            rng: Rng::new(mix(&[setup.seed, 0x7265_7472])),
            epp: None,
        }
    }

    /// Counts a judged request by where its first arrival fell.
    fn judge(&mut self, first: f64, within: bool) {
        let bin = (first.max(0.0) / JUDGE_BIN_S) as usize;
        if self.bins.len() <= bin {
            self.bins.resize(bin + 1, [0, 0]);
        }
        self.bins[bin][0] += 1;
        self.bins[bin][1] += u64::from(within);
        if first < self.judge_from {
            return;
        }
        match self.transients.iter().position(|w| w.holds(first)) {
            Some(i) => {
                self.judged_in[i].0 += 1;
                self.judged_in[i].1 += u64::from(within);
            }
            None => {
                self.judged_outside += 1;
                self.within_outside += u64::from(within);
            }
        }
    }

    /// A request that will not finish (given up on, or late at the end) counts against the
    /// SLO.
    fn missed(&mut self, first: f64) {
        self.judge(first, false);
    }

    fn done(&mut self, first: f64, t: f64) {
        let e2e = t - first;
        let within = e2e <= self.slo;
        self.row.push(e2e);
        self.judge(first, within);
        if first < self.judge_from {
            return;
        }
        self.outcomes.ok += 1;
        self.within += u64::from(within);
        self.all.add(e2e);
    }

    /// An attempt (number `attempt`) of `prompt` sent at `t` went to `routed`, or found no
    /// replica.
    fn sent(
        &mut self,
        t: f64,
        first: f64,
        attempt: u32,
        prompt: Prompt,
        routed: Option<(usize, u64)>,
    ) {
        match routed {
            Some(key) => {
                if self.client.tracks() {
                    self.live.insert(
                        key,
                        Attempt {
                            first,
                            attempt,
                            prompt,
                        },
                    );
                }
                if let Some(timeout) = self.client.timeout_s {
                    self.deadlines.push_back((t + timeout, key.0, key.1));
                }
            }
            None => {
                self.unrouted_row += 1;
                self.give_up_or_retry(t, first, attempt, prompt, false);
            }
        }
    }

    fn give_up_or_retry(
        &mut self,
        t: f64,
        first: f64,
        attempt: u32,
        prompt: Prompt,
        timed_out: bool,
    ) {
        if attempt < self.client.max_retries {
            let at = t + self.client.backoff(attempt, &mut self.rng);
            self.retries.push(Reverse(Retry {
                at,
                first,
                attempt: attempt + 1,
                prompt,
            }));
        } else {
            if first >= self.judge_from {
                if timed_out {
                    self.outcomes.timeout += 1;
                } else {
                    self.outcomes.refused += 1;
                }
            }
            self.missed(first);
        }
    }

    fn notice(&mut self, n: Notice) {
        match n {
            Notice::Arrived { t, routed, prompt } => {
                self.arrived += u64::from(t >= self.judge_from);
                self.arrived_row += 1;
                self.sent(t, t, 0, prompt, routed.map(|r| (r.replica, r.id)));
            }
            Notice::Engine(e) => self.engine_event(e),
        }
    }

    fn engine_event(&mut self, e: FleetEvent) {
        let EventKind::Finished(reason) = e.event.kind else {
            return;
        };
        if reason == FinishReason::Abort {
            // Only a client that gave up aborts (counted when it did).
            return;
        }
        if let Some(epp) = &mut self.epp {
            // The gateway sees each attempt as its own request.
            let ev = &e.event;
            epp.observe(ev.arrival, ev.first_token, ev.t, ev.output_tokens);
        }
        let first = if self.client.tracks() {
            match self.live.remove(&(e.replica, e.event.id)) {
                Some(a) => a.first,
                // Given up on already (its abort raced the last token): counted then.
                None => return,
            }
        } else {
            e.event.arrival
        };
        self.done(first, e.event.t);
    }

    /// When the controller must next act for the clients: a deadline or a retry.
    fn next_due(&self) -> f64 {
        let d = self.deadlines.front().map_or(f64::INFINITY, |d| d.0);
        let r = self.retries.peek().map_or(f64::INFINITY, |r| r.0.at);
        d.min(r)
    }
}

const SCRAPE: usize = 0;
const RULES: usize = 1;
const POLL: usize = 2;
const SYNC: usize = 3;
const ROW: usize = 4;

struct Control<'a> {
    traffic: &'a Traffic,
    keda: Keda,
    cluster: Cluster,
    store: Store,
    /// The triggers' and rules' subqueries' past steps (their samples arrive in time order).
    memo: Memo,
    exporters: &'a mut dyn Exporters,
    requests: &'a RefCell<Requests>,
    /// A request's mean prompt, tokens (what the modelled endpoint picker counts).
    mean_prompt_tokens: f64,
    /// Per trigger, the pods' histories an `external` trigger's scaler keeps, and its trend.
    histories: Vec<Option<(History, Trend)>>,
    keep: Box<dyn Fn(&str) -> bool>,
    departed_seen: usize,
    next: [f64; 5],
    /// The earliest of `next` (the driver asks twice per arrival).
    soonest: f64,
    period: [f64; 5],
    timeline: Vec<Row>,
    events: Vec<ScaleEvent>,
    /// The rules' instances, as Prometheus' rule manager keeps them.
    rule_state: Alerts,
    /// Per rule, the span it is firing in (any instance firing), by index into `alerts`.
    open_span: Vec<Option<usize>>,
    alerts: Vec<AlertSpan>,
    last_values: Vec<Option<f64>>,
    /// The triggers' values at a time, until the next scrape changes what they read (KEDA's
    /// poll and the HPA's sync often query at the same instant).
    live_at: Option<(f64, Vec<Fetch>)>,
    reports: Vec<TriggerReport>,
    max_queue: u32,
    max_queue_per_pod: f64,
    max_nodes: u32,
    unrouted: u64,
    progress: &'a mut dyn FnMut(f64),
    next_progress: f64,
    next_compaction: f64,
}

/// How long the rehearsal's Prometheus keeps samples: the triggers' and rules' windows must
/// be shorter (they are minutes in practice).
pub const RETENTION_S: f64 = 3600.0;

/// Pod `id`'s address (`host:port` of its server).
fn pod_address(id: usize) -> String {
    format!("10.0.{}.{}:8000", id / 250, id % 250 + 1)
}

fn engine_target(ns: &str, service: &str, id: usize) -> Labels {
    Labels::new([
        ("job", service.to_owned()),
        ("namespace", ns.to_owned()),
        ("service", service.to_owned()),
        ("pod", format!("{service}-{id}")),
        ("container", "vllm".to_owned()),
        ("instance", pod_address(id)),
    ])
}

/// The endpoint picker's target: one per pool, named after the Service (`<service>-epp`).
fn epp_target(ns: &str, service: &str) -> Labels {
    Labels::new([
        ("job", format!("{service}-epp")),
        ("namespace", ns.to_owned()),
        ("service", format!("{service}-epp")),
        ("instance", "10.2.0.1:9090".to_owned()),
    ])
}

/// One endpoint of the pool, as the modelled endpoint picker sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct EppEndpoint {
    /// The pod's name.
    pub name: String,
    /// Requests waiting in its engine.
    pub waiting: f64,
    /// Requests running in its engine.
    pub running: f64,
    /// Its KV-cache usage, 0 to 1.
    pub kv: f64,
}

/// A cumulative histogram in one family's buckets (`+Inf` last).
#[derive(Debug, Clone, PartialEq)]
struct Cumulative {
    bounds: &'static [f64],
    counts: Vec<u64>,
    sum: f64,
    n: u64,
}

impl Cumulative {
    fn new(signal: inferscale_catalog::gateway::GatewaySignal) -> Cumulative {
        let bounds = inferscale_catalog::gateway::family(signal).buckets;
        Cumulative {
            bounds,
            counts: vec![0; bounds.len() + 1],
            sum: 0.0,
            n: 0,
        }
    }

    fn observe(&mut self, v: f64) {
        let i = self.bounds.partition_point(|b| *b < v);
        self.counts[i] += 1;
        self.sum += v;
        self.n += 1;
    }

    fn write(&self, name: &str, labels: &str, out: &mut String) {
        out.push_str(&format!("# TYPE {name} histogram\n"));
        let mut acc = 0;
        for (i, c) in self.counts.iter().enumerate() {
            acc += c;
            let le = self
                .bounds
                .get(i)
                .map_or_else(|| "+Inf".to_owned(), |b| format!("{b}"));
            out.push_str(&format!("{name}_bucket{{{labels},le=\"{le}\"}} {acc}\n"));
        }
        out.push_str(&format!("{name}_sum{{{labels}}} {}\n", self.sum));
        out.push_str(&format!("{name}_count{{{labels}}} {}\n", self.n));
    }
}

/// What the modelled endpoint picker measures of the requests it forwarded, as the router
/// does: TTFT from the request's arrival to its first token, NTPOT (end-to-end over output
/// tokens) and, for requests of two tokens or more, TPOT (after the first token, per token).
#[derive(Debug, Clone, PartialEq)]
pub struct EppLatencies {
    ttft: Cumulative,
    ntpot: Cumulative,
    tpot: Cumulative,
}

impl Default for EppLatencies {
    fn default() -> Self {
        use inferscale_catalog::gateway::GatewaySignal as G;
        EppLatencies {
            ttft: Cumulative::new(G::Ttft),
            ntpot: Cumulative::new(G::Ntpot),
            tpot: Cumulative::new(G::Tpot),
        }
    }
}

impl EppLatencies {
    /// A request that arrived at `arrival`, had its first token at `first_token` and ended
    /// at `end` after `output_tokens` tokens.
    pub fn observe(
        &mut self,
        arrival: f64,
        first_token: Option<f64>,
        end: f64,
        output_tokens: u32,
    ) {
        let Some(first) = first_token else {
            return;
        };
        self.ttft.observe((first - arrival).max(0.0));
        if output_tokens > 0 {
            self.ntpot
                .observe((end - arrival).max(0.0) / f64::from(output_tokens));
        }
        if output_tokens > 1 {
            self.tpot
                .observe((end - first).max(0.0) / f64::from(output_tokens - 1));
        }
    }
}

/// What an inference gateway's endpoint picker (llm-d's router) would serve for the
/// `endpoints` ready at a scrape, in its own names, for a ScaledObject that reads them. The
/// model:
/// - the pool saturation is the default utilization detector's, exactly (the mean over
///   endpoints of `max(waiting / 5, kv / 0.8)`; an empty pool reads 1.0);
/// - the flow-control queue holds what the detector would not dispatch: each endpoint's
///   waiting requests beyond its queue threshold (5). The rehearsal's requests still wait
///   in the engines, so latency is as without a gateway; only where they are counted moves;
/// - running is what was dispatched and not finished (the engines' running and waiting, less
///   what the gateway holds);
/// - the in-flight tokens of an endpoint are its dispatched requests' uncached prompt tokens
///   (`prompt_tokens` each: the rehearsal's prompts share no prefix), the in-flight load
///   producer's default (no output estimate);
/// - the latency histograms are `latencies`, cumulative since the start.
pub fn epp_exposition(
    pool: &str,
    endpoints: &[EppEndpoint],
    prompt_tokens: f64,
    latencies: Option<&EppLatencies>,
) -> String {
    use inferscale_catalog::gateway::{
        GatewaySignal as G, QUEUE_DEPTH_THRESHOLD, family, pool_saturation,
    };
    let n = endpoints.len().max(1) as f64;
    let held_at = |e: &EppEndpoint| (e.waiting - QUEUE_DEPTH_THRESHOLD).max(0.0);
    let held: f64 = endpoints.iter().map(held_at).sum();
    let outstanding: f64 = endpoints.iter().map(|e| e.waiting + e.running).sum();
    let saturation = pool_saturation(
        &endpoints
            .iter()
            .map(|e| (e.waiting, e.kv))
            .collect::<Vec<_>>(),
    );
    let mean = |f: &dyn Fn(&EppEndpoint) -> f64| endpoints.iter().map(f).sum::<f64>() / n;
    let q = inferscale_promql::quote(pool);
    let model = "model_name=\"model\",target_model_name=\"model\"";
    let flow = "fairness_id=\"default\",priority=\"0\"";
    let mut out = String::new();
    let mut gauge = |s: G, labels: String, v: f64| {
        let f = family(s);
        out.push_str(&format!(
            "# TYPE {} gauge\n{}{{{labels}}} {v}\n",
            f.name, f.name
        ));
    };
    gauge(
        G::QueueHeld,
        format!("{flow},inference_pool={q},{model}"),
        held,
    );
    gauge(
        G::PoolSaturation,
        format!("inference_pool={q},stage=\"effective\""),
        saturation,
    );
    gauge(G::Running, format!("{model},{flow}"), outstanding - held);
    gauge(G::AverageQueue, format!("name={q}"), mean(&|e| e.waiting));
    gauge(G::AverageRunning, format!("name={q}"), mean(&|e| e.running));
    gauge(G::AverageKvCache, format!("name={q}"), mean(&|e| e.kv));
    gauge(
        G::ReadyEndpoints,
        format!("name={q}"),
        endpoints.len() as f64,
    );
    let tokens = family(G::InflightTokens).name;
    out.push_str(&format!("# TYPE {tokens} gauge\n"));
    for e in endpoints {
        let dispatched = e.waiting + e.running - held_at(e);
        out.push_str(&format!(
            "{tokens}{{endpoint_name={},producer_name=\"inflight-load\",{flow}}} {}\n",
            inferscale_promql::quote(&e.name),
            dispatched * prompt_tokens
        ));
    }
    if let Some(l) = latencies {
        l.ttft.write(
            family(G::Ttft).name,
            &format!("{model},{flow},streaming=\"true\""),
            &mut out,
        );
        l.ntpot
            .write(family(G::Ntpot).name, &format!("{model},{flow}"), &mut out);
        l.tpot
            .write(family(G::Tpot).name, &format!("{model},{flow}"), &mut out);
    }
    out
}

fn gpu_target(ns: &str, id: usize) -> Labels {
    Labels::new([
        ("job", "nvidia-dcgm-exporter".to_owned()),
        ("namespace", ns.to_owned()),
        (
            "instance",
            format!("10.1.{}.{}:9400", id / 250, id % 250 + 1),
        ),
    ])
}

impl Control<'_> {
    fn ms(t: f64) -> i64 {
        (t * 1000.0).round() as i64
    }

    fn replicas(fleet: &Fleet) -> Replicas {
        let d = fleet.desired() as u32;
        Replicas {
            spec: d,
            status: d,
            ready: fleet.ready() as u32,
        }
    }

    fn scale(&mut self, fleet: &mut Fleet, to: u32, t: f64, by: &'static str) {
        let from = fleet.desired() as u32;
        if to == from {
            return;
        }
        let cluster = &mut self.cluster;
        // Placing cannot fail: the engine configuration was checked when the fleet started.
        let _ = fleet.scale_to_with(to as usize, t, |id| cluster.place(id, t).ready_after_s);
        self.events.push(ScaleEvent {
            time_s: t,
            from,
            to,
            by,
        });
    }

    fn scrape(&mut self, t: f64, fleet: &Fleet) {
        let (ns, svc) = (&self.keda.spec.namespace, &self.keda.spec.target);
        let at = Self::ms(t);
        for r in &fleet.departed()[self.departed_seen..] {
            self.cluster.release(r.id, r.left_at.unwrap_or(t));
            self.store.forget(&engine_target(ns, svc, r.id), at);
            self.store.forget(&gpu_target(ns, r.id), at);
        }
        self.departed_seen = fleet.departed().len();
        self.live_at = None;
        if t >= self.next_compaction {
            // Queries look back minutes; an hour of samples is kept.
            self.store.retain_after(Self::ms(t - RETENTION_S));
            self.next_compaction = t + 600.0;
        }
        self.cluster.consolidate(t);
        let store = &mut self.store;
        for r in fleet.replicas() {
            if t < r.ready_at {
                continue; // The server is not up: no /metrics yet.
            }
            let (e, g) = (engine_target(ns, svc, r.id), gpu_target(ns, r.id));
            self.exporters.collect(r, t, &*self.keep, &mut |job, exp| {
                let target = match job {
                    Job::Engine => &e,
                    Job::Gpu => &g,
                };
                store.scrape(target, at, Some(exp));
            });
        }
        // An endpoint picker only where a trigger or a rule reads one of its families.
        if inferscale_catalog::gateway::FAMILIES
            .iter()
            .any(|f| (self.keep)(f.name))
        {
            let endpoints: Vec<EppEndpoint> = fleet
                .replicas()
                .iter()
                .filter(|r| r.serving(t))
                .map(|r| {
                    let s = r.engine.stats();
                    EppEndpoint {
                        name: format!("{svc}-{}", r.id),
                        waiting: f64::from(s.waiting),
                        running: f64::from(s.running),
                        kv: s.kv_usage,
                    }
                })
                .collect();
            let requests = self.requests.borrow();
            let text = epp_exposition(
                svc,
                &endpoints,
                self.mean_prompt_tokens,
                requests.epp.as_ref(),
            );
            if let Ok(exp) = inferscale_promtext::parse(text.as_bytes()) {
                store.scrape(&epp_target(ns, svc), at, Some(&exp));
            }
        }
        let q = fleet.waiting();
        self.max_queue = self.max_queue.max(q);
        let ready = fleet.ready().max(1) as f64;
        self.max_queue_per_pod = self.max_queue_per_pod.max(f64::from(q) / ready);
        self.max_nodes = self.max_nodes.max(self.cluster.live_nodes() as u32);
    }

    fn live(&mut self, t: f64, fleet: &Fleet) -> Vec<Fetch> {
        if let Some((at, v)) = &self.live_at
            && *at == t
        {
            return v.clone();
        }
        let mut v = Vec::with_capacity(self.keda.spec.triggers.len());
        for i in 0..self.keda.spec.triggers.len() {
            let value = match &self.keda.spec.triggers[i].source {
                Source::Prometheus(q) => {
                    let ev = Evaluator::new(&self.store).memo(&self.memo);
                    fetch(
                        &ev.eval(q, Self::ms(t)),
                        self.keda.spec.triggers[i].ignore_null,
                    )
                }
                Source::External(cfg) => {
                    let cfg = cfg.as_ref().clone();
                    self.external(i, &cfg, t, fleet)
                }
            };
            v.push(value);
        }
        self.live_at = Some((t, v.clone()));
        v
    }

    /// What `inferscale scaler` answers for trigger `i` at `t`: the Service's ready pods
    /// scraped (the families `cfg` reads), each into its history, and the value computed
    /// from their windows as the scaler computes it.
    fn external(&mut self, i: usize, cfg: &Config, t: f64, fleet: &Fleet) -> Fetch {
        let names: Vec<&'static str> = signals(cfg)
            .into_iter()
            .flat_map(|s| names_for(s).map(|n| n.name))
            .collect();
        let keep = |family: &str| {
            names.iter().any(|n| {
                *n == family
                    || n.strip_prefix(family).is_some_and(|s| {
                        ["_bucket", "_sum", "_count", "_total", "_created"].contains(&s)
                    })
            })
        };
        let (history, trend) = self.histories[i].get_or_insert_with(Default::default);
        let mut pods: Vec<PodResult> = Vec::new();
        let mut urls: Vec<String> = Vec::new();
        for r in fleet.replicas().iter().filter(|r| r.serving(t)) {
            let url = format!("http://{}", pod_address(r.id));
            let mut snap = None;
            self.exporters.collect(r, t, &keep, &mut |job, exp| {
                if job == Job::Engine {
                    snap = Some(Snapshot::read(exp, &url));
                }
            });
            let result = match snap {
                Some(s) => {
                    history.record(&url, t, s, cfg.window_s);
                    history
                        .windowed(&url, cfg.window_s)
                        .ok_or(PodError::NoHistory)
                }
                None => Err(PodError::NoMetrics),
            };
            pods.push((url.clone(), result));
            urls.push(url);
        }
        let live: Vec<&str> = urls.iter().map(String::as_str).collect();
        history.retain(&live);
        answer_at(cfg, pods, Some((trend, t)))
            .map(|a| a.value)
            .map_err(|e| FetchError::External(e.to_string()))
    }

    /// The clients' side at `t`: attempts past their deadline are given up on (and aborted
    /// in their engine) and retried or counted; retries due are sent.
    fn clients(&mut self, t: f64, fleet: &mut Fleet) {
        let mut req = self.requests.borrow_mut();
        let mut aborted = Vec::new();
        while let Some(&(d, replica, id)) = req.deadlines.front() {
            if d > t {
                break;
            }
            req.deadlines.pop_front();
            let Some(a) = req.live.remove(&(replica, id)) else {
                continue;
            };
            if fleet.cancel(replica, id, t, &mut aborted) {
                req.outcomes.aborted += u64::from(a.first >= req.judge_from);
            }
            req.give_up_or_retry(d, a.first, a.attempt, a.prompt, true);
        }
        // Deadlines of attempts that ended need no tick.
        while let Some(&(_, replica, id)) = req.deadlines.front() {
            if req.live.contains_key(&(replica, id)) {
                break;
            }
            req.deadlines.pop_front();
        }
        while req.retries.peek().is_some_and(|r| r.0.at <= t) {
            let Some(Reverse(r)) = req.retries.pop() else {
                break;
            };
            req.outcomes.retries += u64::from(r.first >= req.judge_from);
            let routed = fleet
                .submit_with(r.prompt.spec, r.prompt.blocks.clone(), t)
                .map(|x| (x.replica, x.id));
            req.sent(t, r.first, r.attempt, r.prompt, routed);
        }
    }

    fn rules(&mut self, t: f64) {
        let ev = Evaluator::new(&self.store).memo(&self.memo);
        let at = Self::ms(t);
        let changes = self.rule_state.step(t, |q| ev.eval(q, at));
        // A rule's span: from the first of its instances to fire until none is firing.
        for c in changes {
            let firing = self.rule_state.state(c.rule).firing();
            match (c.change, self.open_span[c.rule]) {
                (Change::Firing, None) => {
                    self.alerts.push(AlertSpan {
                        name: self.rule_state.rules()[c.rule].name.clone(),
                        pending_s: c.active_at,
                        fired_s: t,
                        resolved_s: None,
                    });
                    self.open_span[c.rule] = Some(self.alerts.len() - 1);
                }
                (Change::Resolved, Some(k)) if !firing => {
                    self.alerts[k].resolved_s = Some(t);
                    self.open_span[c.rule] = None;
                }
                _ => {}
            }
        }
    }

    fn poll(&mut self, t: f64, fleet: &mut Fleet) {
        let values = self.live(t, fleet);
        let current = fleet.desired() as u32;
        match self.keda.poll(t, &values, current) {
            Some(PollAction::Activate(n) | PollAction::Deactivate(n) | PollAction::ToMin(n)) => {
                self.scale(fleet, n, t, "keda");
            }
            None => {}
        }
    }

    fn sync(&mut self, t: f64, fleet: &mut Fleet) {
        let live = self.live(t, fleet);
        let served: Vec<Fetch> = live
            .into_iter()
            .enumerate()
            .map(|(i, v)| self.keda.served(i, v))
            .collect();
        let n = Self::replicas(fleet);
        for (i, v) in served.iter().enumerate() {
            let r = &mut self.reports[i];
            match v {
                Ok(v) => {
                    r.max_value = Some(r.max_value.map_or(*v, |m: f64| m.max(*v)));
                    let proposal = match self.keda.spec.triggers[i].metric_type {
                        MetricType::AverageValue => (v / r.threshold).ceil(),
                        MetricType::Value => (f64::from(n.ready) * v / r.threshold).ceil(),
                    };
                    let p = proposal.clamp(0.0, f64::from(u32::MAX)) as u32;
                    r.max_proposal = Some(r.max_proposal.map_or(p, |m| m.max(p)));
                }
                Err(_) => r.failures += 1,
            }
        }
        self.last_values = served.iter().map(|v| v.as_ref().ok().copied()).collect();
        let readings = self.keda.readings(&served, n);
        if let Decision::Desired(d) = self.keda.hpa.reconcile(t, n, &readings) {
            self.scale(fleet, d, t, "hpa");
        }
    }

    fn row(&mut self, t: f64, fleet: &Fleet) {
        let mut req = self.requests.borrow_mut();
        let step = self.period[ROW];
        let p = p95(&mut req.row);
        let ready = fleet.ready() as u32;
        let queue = fleet.waiting();
        self.unrouted += req.unrouted_row;
        let firing = self
            .rule_state
            .iter()
            .filter(|(_, s)| s.firing())
            .map(|(r, _)| r.name.clone())
            .collect();
        self.timeline.push(Row {
            time_s: t,
            offered_rps: self.traffic.rate_at(t),
            arrived_rps: req.arrived_row as f64 / step,
            desired_replicas: fleet.desired() as u32,
            ready_replicas: ready,
            nodes: self.cluster.live_nodes() as u32,
            queue,
            queue_per_pod: f64::from(queue) / f64::from(ready.max(1)),
            running: fleet.running(),
            p95_e2e_s: p,
            finished: req.row.len() as u64,
            unrouted: req.unrouted_row,
            triggers: self.last_values.clone(),
            firing,
        });
        req.row.clear();
        req.arrived_row = 0;
        req.unrouted_row = 0;
        if t >= self.next_progress {
            (self.progress)(t);
            self.next_progress = t + 3600.0;
        }
    }
}

impl Observer for Control<'_> {
    fn next_tick(&self) -> Option<f64> {
        Some(self.soonest.min(self.requests.borrow().next_due()))
    }

    fn tick(&mut self, t: f64, fleet: &mut Fleet) {
        self.clients(t, fleet);
        for task in [SCRAPE, RULES, POLL, SYNC, ROW] {
            if self.next[task] > t {
                continue;
            }
            match task {
                SCRAPE => self.scrape(t, fleet),
                RULES => self.rules(t),
                POLL => self.poll(t, fleet),
                SYNC => self.sync(t, fleet),
                _ => self.row(t, fleet),
            }
            self.next[task] += self.period[task];
        }
        self.soonest = soonest(&self.next);
    }
}

fn soonest(next: &[f64; 5]) -> f64 {
    next.iter().copied().fold(f64::INFINITY, f64::min)
}

fn flaps(events: &[ScaleEvent]) -> usize {
    events
        .windows(2)
        .filter(|w| {
            let up = |e: &ScaleEvent| e.to > e.from;
            up(&w[0]) != up(&w[1]) && w[1].time_s - w[0].time_s < 300.0
        })
        .count()
}

fn check(setup: &Setup) -> Result<(), RehearseError> {
    for (what, v) in [
        ("scrape interval", setup.scrape_interval_s),
        ("HPA sync period", setup.hpa_sync_s),
        ("rule evaluation interval", setup.rule_interval_s),
        ("timeline step", setup.step_s),
    ] {
        if !(v.is_finite() && (0.1..=3600.0).contains(&v)) {
            return Err(RehearseError::Setting(format!(
                "the {what} is {v} s; expected 0.1 s to 1 h"
            )));
        }
    }
    if !(setup.duration_s.is_finite()
        && setup.duration_s > 0.0
        && setup.duration_s <= 31.0 * 86400.0)
    {
        return Err(RehearseError::Setting(format!(
            "the duration is {} s; expected more than 0 and at most 31 days",
            setup.duration_s
        )));
    }
    let c = &setup.client;
    if let Some(t) = c.timeout_s
        && !(t.is_finite() && t > 0.0)
    {
        return Err(RehearseError::Setting(format!(
            "the client timeout is {t} s; expected more than 0"
        )));
    }
    let sane = c.max_retries <= 100
        && c.backoff_initial_s.is_finite()
        && c.backoff_initial_s >= 0.0
        && c.backoff_max_s.is_finite()
        && c.backoff_max_s >= 0.0
        && (0.0..=1.0).contains(&c.backoff_jitter);
    if !sane {
        return Err(RehearseError::Setting(format!(
            "the client's retries ({}, backoff {} s up to {} s, jitter {}) are out of range: at most 100 retries, backoffs of 0 s or more, jitter 0 to 1",
            c.max_retries, c.backoff_initial_s, c.backoff_max_s, c.backoff_jitter
        )));
    }
    Ok(())
}

/// Which families the scrapes keep: those the triggers' queries and the rules name.
fn scraped_families(keda: &KedaSpec, rules: &[AlertRule]) -> Box<dyn Fn(&str) -> bool> {
    let mut names: Vec<String> = Vec::new();
    let mut keep_all = false;
    for q in keda
        .triggers
        .iter()
        .filter_map(|t| t.query())
        .chain(rules.iter().map(|r| &r.query))
    {
        keep_all |= q.text().contains("__name__");
        names.extend(q.metric_names());
    }
    if keep_all {
        return Box::new(|_| true);
    }
    Box::new(move |family: &str| {
        names.iter().any(|n| {
            n == family
                || n.strip_prefix(family).is_some_and(|s| {
                    ["_bucket", "_sum", "_count", "_total", "_created"].contains(&s)
                })
        })
    })
}

/// The histograms the engines record: those of the families scraped (for the triggers'
/// queries and the rules) and those an external trigger reads. Nothing reads the others.
fn recorded_histograms(keda: &KedaSpec, keep: &dyn Fn(&str) -> bool) -> Vec<EngineHistogram> {
    let external: Vec<&'static str> = keda
        .triggers
        .iter()
        .filter_map(|t| match &t.source {
            Source::External(c) => Some(c),
            Source::Prometheus(_) => None,
        })
        .flat_map(|c| signals(c))
        .flat_map(|s| names_for(s).map(|n| n.name))
        .collect();
    vllm::FAMILIES
        .iter()
        .chain(vllm::DEPRECATED_FAMILIES.iter().map(|(f, _)| f))
        .filter(|f| keep(f.name) || external.contains(&f.name))
        .filter_map(|f| match f.value {
            vllm::Value::Histogram(h) => Some(h),
            _ => None,
        })
        .collect()
}

/// Rehearses `keda` under `traffic`. `progress` hears the simulated time every hour.
pub fn rehearse(
    setup: &Setup,
    keda: &KedaSpec,
    traffic: &Traffic,
    exporters: &mut dyn Exporters,
    progress: &mut dyn FnMut(f64),
) -> Result<Outcome, RehearseError> {
    check(setup)?;
    let mut fleet = Fleet::new(
        setup.engine.clone(),
        setup.initial_replicas as usize,
        setup.routing,
    )?;
    fleet.set_token_events(false);
    let mut cluster = Cluster::new(setup.cluster.clone(), mix(&[setup.seed, 0x6e6f_6465]));
    for r in fleet.replicas() {
        cluster.place_running(r.id);
    }
    let keep = scraped_families(keda, &setup.rules);
    fleet.record_histograms(&recorded_histograms(keda, &*keep));
    let mut phase = Rng::new(mix(&[setup.seed, 0x7068_6173]));
    let periods = [
        setup.scrape_interval_s,
        setup.rule_interval_s,
        keda.polling_s,
        setup.hpa_sync_s,
        setup.step_s,
    ];
    let mut next = [0.0; 5];
    for (i, p) in periods.iter().enumerate() {
        // The timeline's rows fall on whole steps; the controllers at a random phase.
        next[i] = if i == ROW { *p } else { p * phase.next_f64() };
    }
    let requests = RefCell::new(Requests::new(setup));
    {
        use inferscale_catalog::gateway::{GatewaySignal as G, family};
        if [G::Ttft, G::Ntpot, G::Tpot]
            .iter()
            .any(|g| keep(family(*g).name))
        {
            requests.borrow_mut().epp = Some(EppLatencies::default());
        }
    }
    let reports = keda
        .triggers
        .iter()
        .map(|t| TriggerReport {
            metric: t.metric.clone(),
            query: t.describe(),
            metric_type: match t.metric_type {
                MetricType::AverageValue => "AverageValue",
                MetricType::Value => "Value",
            },
            threshold: t.threshold,
            max_value: None,
            max_proposal: None,
            failures: 0,
        })
        .collect();
    let mut control = Control {
        traffic,
        keda: Keda::new(keda.clone(), 0.0),
        cluster,
        store: Store::new(),
        memo: Memo::default(),
        exporters,
        requests: &requests,
        mean_prompt_tokens: setup
            .prompts
            .as_ref()
            .map_or(f64::from(setup.request.prompt_tokens), |p| {
                p.mean_lengths().0
            }),
        histories: vec![None; keda.triggers.len()],
        keep,
        departed_seen: 0,
        next,
        soonest: soonest(&next),
        period: periods,
        timeline: Vec::new(),
        events: Vec::new(),
        rule_state: Alerts::new(setup.rules.clone()),
        open_span: vec![None; setup.rules.len()],
        alerts: Vec::new(),
        last_values: vec![None; keda.triggers.len()],
        live_at: None,
        reports,
        max_queue: 0,
        max_queue_per_pod: 0.0,
        max_nodes: setup.cluster.initial_nodes.max(setup.initial_replicas),
        unrouted: 0,
        progress,
        next_progress: 3600.0,
        next_compaction: 600.0,
    };
    let spec = setup.request;
    let mut prompts = setup.prompts.clone();
    let arrivals = traffic
        .arrivals(setup.duration_s, mix(&[setup.seed, 0x6172_7269]))
        .map(move |t| {
            let p = prompts
                .as_mut()
                .map_or_else(|| Prompt::from(spec), PromptCycle::next_prompt);
            (t, p)
        });
    drive(
        &mut fleet,
        arrivals,
        setup.duration_s,
        &mut [&mut control],
        |n| requests.borrow_mut().notice(n),
    );
    let req = std::mem::replace(&mut *requests.borrow_mut(), Requests::new(setup));
    Ok(verdict(setup, keda, &fleet, control, req))
}

/// Requests not ended at the end: `(count, of which older than the SLO)` by their first
/// arrival, each late one counted against the SLO.
fn unfinished(setup: &Setup, fleet: &Fleet, req: &mut Requests) -> u64 {
    let end = setup.duration_s;
    let firsts: Vec<f64> = if setup.client.tracks() {
        req.live
            .values()
            .map(|a| a.first)
            .chain(req.retries.iter().map(|r| r.0.first))
            .collect()
    } else {
        fleet
            .replicas()
            .iter()
            .flat_map(|r| r.engine.arrivals_in_progress())
            .collect()
    };
    let mut late = 0;
    for first in &firsts {
        if end - first > req.slo {
            late += u64::from(*first >= req.judge_from);
            req.missed(*first);
        }
    }
    req.outcomes.unfinished = firsts.iter().filter(|f| **f >= req.judge_from).count() as u64;
    late
}

fn notes(
    keda: &KedaSpec,
    reports: &[TriggerReport],
    base: u32,
    scaled: bool,
    cycle: bool,
) -> Vec<String> {
    let mut notes = Vec::new();
    for (i, t) in keda.triggers.iter().enumerate() {
        if t.metric_type == MetricType::AverageValue
            && t.query()
                .is_some_and(|q| q.text().contains("histogram_quantile"))
        {
            let r = &reports[i];
            notes.push(format!(
                "trigger {i} ({}) is a latency quantile fed as AverageValue: the HPA proposes \
                 ceil(value / {}) replicas whatever the replica count (a p95 is not a sum over \
                 pods), so it can never ask for more than ceil(p95 / {} s); in this run it read at \
                 most {} and asked for at most {} replica(s). Use metricType Value.",
                t.metric,
                t.threshold,
                t.threshold,
                r.max_value
                    .map_or("nothing".to_owned(), |v| format!("{v:.3} s")),
                r.max_proposal.map_or("no".to_owned(), |p| p.to_string()),
            ));
        }
    }
    if base > 1 && !cycle && scaled {
        notes.push(format!("the floor is {base} replicas"));
    }
    notes
}

/// The summary of a rehearsal that ran.
fn verdict(
    setup: &Setup,
    keda: &KedaSpec,
    fleet: &Fleet,
    control: Control<'_>,
    mut req: Requests,
) -> Outcome {
    let end = setup.duration_s;
    let slo = setup.slo_e2e_s;
    let from = setup.judge_from_s;
    let late = unfinished(setup, fleet, &mut req);
    let o = req.outcomes;
    let judged = o.ok + o.timeout + o.refused + late;
    let all_events = control.events;
    // The replicas when judging begins (after a warm-in, where the warm-in left them).
    let start = all_events
        .iter()
        .rev()
        .find(|e| e.time_s < from)
        .map_or(setup.initial_replicas, |e| e.to);
    let base = keda.hpa.min.max(start.min(keda.hpa.max));
    let events: Vec<ScaleEvent> = all_events
        .iter()
        .filter(|e| e.time_s >= from)
        .cloned()
        .collect();
    let first_out = events.iter().find(|e| e.to > e.from).map(|e| e.time_s);
    // Back where it started (its floor, or the replicas the starting load kept): a load that
    // returns to a rate needing two replicas is not expected to end on one.
    let cycle_completed = first_out.is_some_and(|t0| {
        events
            .iter()
            .any(|e| e.time_s > t0 && e.to < e.from && e.to <= base.max(1))
    });
    let recovered_s = first_out.and_then(|t0| {
        control
            .timeline
            .iter()
            .find(|r| {
                r.time_s > t0 && r.queue_per_pod < 1.0 && r.p95_e2e_s.is_some_and(|p| p <= slo)
            })
            .map(|r| r.time_s)
    });
    let notes = notes(
        keda,
        &control.reports,
        base,
        first_out.is_some(),
        cycle_completed,
    );
    let share = |within: u64, of: u64| {
        if of == 0 {
            1.0
        } else {
            within as f64 / of as f64
        }
    };
    let summary = Summary {
        name: keda.name.clone(),
        duration_s: end,
        requests: req.arrived,
        finished: o.ok,
        within_slo: req.within,
        slo_e2e_s: slo,
        slo_attainment: share(req.within, judged),
        slo_attainment_outside: (!setup.transients.is_empty())
            .then(|| share(req.within_outside, req.judged_outside)),
        transients: setup
            .transients
            .iter()
            .zip(&req.judged_in)
            .map(|(w, &(judged, within))| Transient {
                window: w.clone(),
                judged,
                within,
            })
            .collect(),
        outcomes: o,
        p95_e2e_s: req.all.quantile(0.95),
        p99_e2e_s: req.all.quantile(0.99),
        max_queue: control.max_queue,
        max_queue_per_pod: control.max_queue_per_pod,
        max_replicas: events.iter().map(|e| e.to).max().unwrap_or(0).max(start),
        max_nodes: control.max_nodes,
        first_scale_out_s: first_out,
        recovered_s,
        gpu_hours: control.cluster.gpu_hours(end) - control.cluster.gpu_hours(from),
        scale_events: events.len(),
        flaps: flaps(&events),
        alerts_fired: {
            let mut a: Vec<String> = control.alerts.iter().map(|a| a.name.clone()).collect();
            a.sort();
            a.dedup();
            a
        },
        cycle_completed,
        unrouted: control.unrouted,
        prefix_cache_hit_rate: {
            let (q, h) = fleet
                .replicas()
                .iter()
                .chain(fleet.departed())
                .map(|r| r.engine.stats())
                .fold((0u64, 0u64), |(q, h), s| {
                    (q + s.prefix_cache_queries, h + s.prefix_cache_hits)
                });
            (q > 0).then(|| h as f64 / q as f64)
        },
        final_replicas: fleet.desired() as u32,
        triggers: control.reports,
        notes,
    };
    Outcome {
        summary,
        timeline: control.timeline,
        events: all_events,
        alerts: control.alerts,
        judged_by_arrival: req.bins,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A replica's rates, served at its capacity while backlogged.
    fn rates(capacity_rps: f64, slo_rps: f64) -> Rates {
        Rates {
            capacity_rps,
            backlogged_rps: capacity_rps,
            slo_rps,
        }
    }

    #[test]
    fn a_ramp_that_outruns_a_start_up_is_a_transient_and_a_slow_one_is_not() {
        use crate::traffic::Piece;
        // A 70B's ramp: 96.7 req/s held, then 0.5x to 3x of 193.4 over 30 min (0.269 req/s
        // each second); one replica holds 146.2 within the SLO, a replica starts in 320 s.
        let ramp = Traffic::of(&[Piece::hold(96.7, 600.0), Piece::ramp(96.7, 580.2, 1800.0)]);
        assert_eq!(ramp.rise_starts(), vec![(600.0, 96.7)]);
        let (w, n0) =
            ramp_transient(&ramp, 1, (600.0, 96.7), 320.0, rates(193.4, 146.2), 0.0).unwrap();
        assert_eq!(n0, 1);
        // It passes 146.2 req/s 185 s in, before 320 + 60 s; it passes the replica's 193.4
        // only in the last 20 s, so a few dozen requests queue and drain within a second of
        // a replica's being able to serve.
        assert_eq!(w.from_s, 785.0, "{w:?}");
        assert!((980.0..982.0).contains(&w.to_s), "{w:?}");
        assert!(w.why.contains("185 s in"), "{}", w.why);
        // A replica that serves less while backlogged (150.9 req/s, as the 70B's does with
        // its KV cache full) queues from 200 s in, not 360 s: a longer transient.
        let slower = Rates {
            backlogged_rps: 150.9,
            ..rates(193.4, 146.2)
        };
        let (b, _) = ramp_transient(&ramp, 1, (600.0, 96.7), 320.0, slower, 0.0).unwrap();
        assert_eq!(b.from_s, w.from_s);
        assert!(b.to_s > w.to_s + 20.0, "{b:?} against {w:?}");
        assert!(b.why.contains("requests queue meanwhile"), "{}", b.why);
        // Two replicas ready hold it past the start-up: no transient.
        assert!(ramp_transient(&ramp, 2, (600.0, 96.7), 320.0, rates(193.4, 146.2), 0.0).is_none());
        // The default profile's ramp (0.5x to 3x of 56.18 over 30 min) is slow enough.
        let slow = Traffic::of(&[
            Piece::hold(28.09, 600.0),
            Piece::ramp(28.09, 168.54, 1800.0),
        ]);
        assert!(
            ramp_transient(&slow, 1, (600.0, 28.09), 270.0, rates(56.18, 55.96), 0.0).is_none()
        );
        // Holds, falls and the rise at time 0 begin none; a day's shape after a hold does.
        let day = Traffic::of(&[
            Piece::ramp(10.0, 50.0, 100.0),
            Piece::ramp(50.0, 20.0, 100.0),
            Piece::hold(20.0, 100.0),
            Piece::Diurnal {
                low: 20.0,
                high: 90.0,
                seconds: 600.0,
            },
        ]);
        assert_eq!(day.rise_starts(), vec![(300.0, 20.0)]);
    }

    #[test]
    fn a_backlog_drains_cheapest_near_twice_the_rate_over_a_replicas_capacity() {
        // The default profile's step (0.5x to 2.5x of 56.18 req/s) and a 70B's (2.5x of
        // 175.87, 131.9 within the SLO): 2 x rate / capacity is 5.0 for both.
        assert_eq!(cheapest_drain(140.5, 56.18, 55.96, 1), 5);
        assert_eq!(cheapest_drain(439.7, 175.87, 131.9, 1), 5);
        // Never fewer than hold the new rate within the SLO, nor than were ready plus one.
        assert_eq!(cheapest_drain(439.7, 175.87, 50.0, 1), 9);
        assert_eq!(cheapest_drain(100.0, 100.0, 100.0, 6), 7);
        // It is the least of every count that drains at all.
        for (rate, c, slo, n0) in [(300.0, 40.0, 35.0, 2), (90.0, 56.0, 50.0, 1)] {
            let m = cheapest_drain(rate, c, slo, n0);
            let cost = |m: u32| f64::from(m) / (c - rate / f64::from(m));
            let hold = (rate / slo).ceil() as u32;
            for k in hold.max(n0 + 1)..60 {
                if c - rate / f64::from(k) > 0.0 {
                    assert!(cost(m) <= cost(k) + 1e-12, "{m} vs {k}");
                }
            }
        }
    }

    #[test]
    fn the_modelled_picker_serves_its_histograms_and_each_endpoint_s_tokens() {
        let mut l = EppLatencies::default();
        // 0.3 s to the first token, 100 tokens in 2.3 s: NTPOT 0.023, TPOT 2.0 / 99.
        l.observe(10.0, Some(10.3), 12.3, 100);
        // No first token (refused at once): not observed at all.
        l.observe(11.0, None, 11.0, 0);
        // One token: TTFT and NTPOT, no TPOT.
        l.observe(12.0, Some(12.04), 12.04, 1);
        let endpoints = [
            EppEndpoint {
                name: "vllm-0".into(),
                waiting: 8.0,
                running: 4.0,
                kv: 0.4,
            },
            EppEndpoint {
                name: "vllm-1".into(),
                waiting: 0.0,
                running: 2.0,
                kv: 0.1,
            },
        ];
        let text = epp_exposition("vllm", &endpoints, 35.0, Some(&l));
        let exp = inferscale_promtext::parse(text.as_bytes()).unwrap_or_else(|e| panic!("{e}"));
        let value = |name: &str, label: (&str, &str)| {
            exp.samples_named(name)
                .find(|s| s.label(label.0) == Some(label.1))
                .map(|s| s.value())
        };
        // vllm-0 holds 3 beyond the detector's 5 at the gateway: 9 dispatched × 35 tokens.
        let tokens = "llm_d_epp_inflight_tokens";
        assert_eq!(value(tokens, ("endpoint_name", "vllm-0")), Some(315.0));
        assert_eq!(value(tokens, ("endpoint_name", "vllm-1")), Some(70.0));
        assert_eq!(
            value("llm_d_epp_flow_control_queue_size", ("priority", "0")),
            Some(3.0)
        );
        let ttft = "llm_d_epp_request_ttft_seconds_bucket";
        assert_eq!(value(ttft, ("le", "0.025")), Some(0.0));
        assert_eq!(value(ttft, ("le", "0.05")), Some(1.0));
        assert_eq!(value(ttft, ("le", "0.4")), Some(2.0));
        assert_eq!(value(ttft, ("le", "+Inf")), Some(2.0));
        let ntpot = "llm_d_epp_request_ntpot_seconds_bucket";
        assert_eq!(value(ntpot, ("le", "0.02")), Some(0.0));
        assert_eq!(value(ntpot, ("le", "0.05")), Some(2.0));
        assert_eq!(
            value(
                "llm_d_epp_request_streaming_tpot_seconds_count",
                ("priority", "0")
            ),
            Some(1.0)
        );
        // Without a reader of the latencies, no histogram is served.
        let bare = epp_exposition("vllm", &endpoints, 35.0, None);
        assert!(!bare.contains("_bucket"), "{bare}");
    }
}
