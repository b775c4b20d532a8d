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

use inferscale_catalog::vllm::{self, EngineHistogram};
use inferscale_engine::fleet::{Fleet, Notice, Observer, Replica, Routing, drive};
use inferscale_engine::{EngineConfig, RequestSpec};
use inferscale_promql::{Evaluator, Labels, Store};
use inferscale_promtext::Exposition;
use inferscale_rng::{Rng, mix};
use serde::Serialize;

pub use crate::alerts::AlertRule;
use crate::alerts::{Alerts, Change};
use crate::cluster::{Cluster, ClusterSpec};
use crate::hpa::{Decision, Replicas};
use crate::keda::{Fetch, Keda, KedaSpec, MetricType, PollAction, fetch};
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
    /// The requests sent.
    pub request: RequestSpec,
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
    /// Share of requests (arrived, and either finished, refused, or older than the SLO at the
    /// end) that finished within the SLO.
    pub slo_attainment: f64,
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
    /// `spec.replicas` at the end.
    pub final_replicas: u32,
    /// Per trigger.
    pub triggers: Vec<TriggerReport>,
    /// What the reader should know (e.g. a trigger that cannot ask for enough replicas).
    pub notes: Vec<String>,
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

#[derive(Default)]
struct Requests {
    row: Vec<f64>,
    all: LogHist,
    arrived: u64,
    arrived_row: u64,
    unrouted_row: u64,
    finished: u64,
    within: u64,
}

impl Requests {
    fn notice(&mut self, n: Notice, slo: f64) {
        match n {
            Notice::Arrived { routed, .. } => {
                self.arrived += 1;
                self.arrived_row += 1;
                if routed.is_none() {
                    self.unrouted_row += 1;
                }
            }
            Notice::Engine(e) => {
                if let Some((_, _, t)) = n.finished() {
                    let e2e = t - e.event.arrival;
                    self.finished += 1;
                    self.within += u64::from(e2e <= slo);
                    self.all.add(e2e);
                    self.row.push(e2e);
                }
            }
        }
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
    exporters: &'a mut dyn Exporters,
    requests: &'a RefCell<Requests>,
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

fn engine_target(ns: &str, service: &str, id: usize) -> Labels {
    Labels::new([
        ("job", service.to_owned()),
        ("namespace", ns.to_owned()),
        ("service", service.to_owned()),
        ("pod", format!("{service}-{id}")),
        ("container", "vllm".to_owned()),
        (
            "instance",
            format!("10.0.{}.{}:8000", id / 250, id % 250 + 1),
        ),
    ])
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
        let q = fleet.waiting();
        self.max_queue = self.max_queue.max(q);
        let ready = fleet.ready().max(1) as f64;
        self.max_queue_per_pod = self.max_queue_per_pod.max(f64::from(q) / ready);
        self.max_nodes = self.max_nodes.max(self.cluster.live_nodes() as u32);
    }

    fn live(&mut self, t: f64) -> Vec<Fetch> {
        if let Some((at, v)) = &self.live_at
            && *at == t
        {
            return v.clone();
        }
        let ev = Evaluator::new(&self.store);
        let v: Vec<Fetch> = self
            .keda
            .spec
            .triggers
            .iter()
            .map(|tr| fetch(&ev.eval(&tr.query, Self::ms(t)), tr.ignore_null))
            .collect();
        self.live_at = Some((t, v.clone()));
        v
    }

    fn rules(&mut self, t: f64) {
        let ev = Evaluator::new(&self.store);
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
        let values = self.live(t);
        let current = fleet.desired() as u32;
        match self.keda.poll(t, &values, current) {
            Some(PollAction::Activate(n) | PollAction::Deactivate(n) | PollAction::ToMin(n)) => {
                self.scale(fleet, n, t, "keda");
            }
            None => {}
        }
    }

    fn sync(&mut self, t: f64, fleet: &mut Fleet) {
        let live = self.live(t);
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
        Some(self.soonest)
    }

    fn tick(&mut self, t: f64, fleet: &mut Fleet) {
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

/// Rehearses `keda` under `traffic`. `progress` hears the simulated time every hour.
pub fn rehearse(
    setup: &Setup,
    keda: &KedaSpec,
    traffic: &Traffic,
    exporters: &mut dyn Exporters,
    progress: &mut dyn FnMut(f64),
) -> Result<Outcome, RehearseError> {
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
    let mut names: Vec<String> = Vec::new();
    let mut keep_all = false;
    for q in keda
        .triggers
        .iter()
        .map(|t| &t.query)
        .chain(setup.rules.iter().map(|r| &r.query))
    {
        keep_all |= q.text().contains("__name__");
        names.extend(q.metric_names());
    }
    let keep: Box<dyn Fn(&str) -> bool> = if keep_all {
        Box::new(|_| true)
    } else {
        Box::new(move |family: &str| {
            names.iter().any(|n| {
                n == family
                    || n.strip_prefix(family).is_some_and(|s| {
                        ["_bucket", "_sum", "_count", "_total", "_created"].contains(&s)
                    })
            })
        })
    };
    // The engines record the histograms of the families kept, no others: nothing reads
    // them (a trigger or a rule names a family, and only those are scraped).
    let recorded: Vec<EngineHistogram> = vllm::FAMILIES
        .iter()
        .chain(vllm::DEPRECATED_FAMILIES.iter().map(|(f, _)| f))
        .filter(|f| keep(f.name))
        .filter_map(|f| match f.value {
            vllm::Value::Histogram(h) => Some(h),
            _ => None,
        })
        .collect();
    fleet.record_histograms(&recorded);
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
    let requests = RefCell::new(Requests::default());
    let reports = keda
        .triggers
        .iter()
        .map(|t| TriggerReport {
            metric: t.metric.clone(),
            query: t.query.text().to_owned(),
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
        exporters,
        requests: &requests,
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
    let arrivals = traffic
        .arrivals(setup.duration_s, mix(&[setup.seed, 0x6172_7269]))
        .map(|t| (t, spec));
    let slo = setup.slo_e2e_s;
    drive(
        &mut fleet,
        arrivals,
        setup.duration_s,
        &mut [&mut control],
        |n| requests.borrow_mut().notice(n, slo),
    );
    let end = setup.duration_s;
    let req = std::mem::take(&mut *requests.borrow_mut());
    // Requests still running at the end count against the SLO only once they are late.
    let late = fleet
        .replicas()
        .iter()
        .flat_map(|r| r.engine.arrivals_in_progress())
        .filter(|at| end - at > slo)
        .count() as u64;
    let refused = control.unrouted;
    let judged = req.finished + refused + late;
    let base = keda.hpa.min.max(setup.initial_replicas.min(keda.hpa.max));
    let events = control.events;
    let first_out = events.iter().find(|e| e.to > e.from).map(|e| e.time_s);
    let cycle_completed = first_out.is_some_and(|t0| {
        events
            .iter()
            .any(|e| e.time_s > t0 && e.to < e.from && e.to <= keda.hpa.min.max(1))
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
    let mut notes = Vec::new();
    for (i, t) in keda.triggers.iter().enumerate() {
        if t.metric_type == MetricType::AverageValue
            && t.query.text().contains("histogram_quantile")
        {
            let r = &control.reports[i];
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
    if base > 1 && !cycle_completed && first_out.is_some() {
        notes.push(format!("the floor is {base} replicas"));
    }
    let summary = Summary {
        name: keda.name.clone(),
        duration_s: end,
        requests: req.arrived,
        finished: req.finished,
        within_slo: req.within,
        slo_e2e_s: slo,
        slo_attainment: if judged == 0 {
            1.0
        } else {
            req.within as f64 / judged as f64
        },
        p95_e2e_s: req.all.quantile(0.95),
        p99_e2e_s: req.all.quantile(0.99),
        max_queue: control.max_queue,
        max_queue_per_pod: control.max_queue_per_pod,
        max_replicas: events
            .iter()
            .map(|e| e.to)
            .max()
            .unwrap_or(0)
            .max(setup.initial_replicas),
        max_nodes: control.max_nodes,
        first_scale_out_s: first_out,
        recovered_s,
        gpu_hours: control.cluster.gpu_hours(end),
        scale_events: events.len(),
        flaps: flaps(&events),
        alerts_fired: {
            let mut a: Vec<String> = control.alerts.iter().map(|a| a.name.clone()).collect();
            a.dedup();
            a.sort();
            a.dedup();
            a
        },
        cycle_completed,
        unrouted: refused,
        final_replicas: fleet.desired() as u32,
        triggers: control.reports,
        notes,
    };
    Ok(Outcome {
        summary,
        timeline: control.timeline,
        events,
        alerts: control.alerts,
    })
}
