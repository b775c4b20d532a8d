//! One refresh's worth of numbers: the query results turned into the three tiers, the
//! replicas and the alerts, with a value the source lacks kept as `None` (shown `-`), never
//! as 0. Pure: built from results, so frames are tested without a network or a clock.

use std::collections::{BTreeMap, VecDeque};

use inferscale_autoscale::alerts::{Alerts, State};
use inferscale_promql::Value;
use serde::Serialize;

use crate::signals::{GPU_LABELS, Latency, Metric, Pct};

/// p50, p95 and p99 of one latency, seconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Percentiles {
    /// Median.
    pub p50: Option<f64>,
    /// 95th percentile.
    pub p95: Option<f64>,
    /// 99th percentile.
    pub p99: Option<f64>,
}

impl Percentiles {
    fn set(&mut self, p: Pct, v: Option<f64>) {
        match p {
            Pct::P50 => self.p50 = v,
            Pct::P95 => self.p95 = v,
            Pct::P99 => self.p99 = v,
        }
    }
}

/// Tier 1: what users feel.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Service {
    /// Requests waiting, all replicas.
    pub queue: Option<f64>,
    /// Requests running, all replicas.
    pub running: Option<f64>,
    /// Requests finished per second over the window.
    pub rps: Option<f64>,
    /// Share of API answers that were 5xx over the window (0–1).
    pub error_rate: Option<f64>,
    /// Time to first token.
    pub ttft: Percentiles,
    /// Time per output token.
    pub tpot: Percentiles,
    /// End to end.
    pub e2e: Percentiles,
}

/// Tier 2: the engine.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Engine {
    /// KV-cache usage, mean over replicas (0–1).
    pub kv_mean: Option<f64>,
    /// KV-cache usage of the fullest replica (0–1).
    pub kv_max: Option<f64>,
    /// Preemptions per second.
    pub preemptions_per_s: Option<f64>,
    /// Prompt tokens per second.
    pub prompt_tokens_per_s: Option<f64>,
    /// Generated tokens per second.
    pub generation_tokens_per_s: Option<f64>,
    /// Tokens per engine step (mean).
    pub tokens_per_step: Option<f64>,
}

/// Tier 3: one GPU.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Gpu {
    /// `Hostname/gpu`.
    pub name: String,
    /// Utilisation, %.
    pub util_pct: Option<f64>,
    /// Memory-copy utilisation, %.
    pub mem_copy_pct: Option<f64>,
    /// Framebuffer used, MiB.
    pub fb_used_mib: Option<f64>,
    /// Framebuffer used + free, MiB.
    pub fb_total_mib: Option<f64>,
    /// Power, W.
    pub power_w: Option<f64>,
    /// Temperature, °C.
    pub temp_c: Option<f64>,
    /// Single-bit ECC errors.
    pub ecc_sbe: Option<f64>,
}

/// How a scrape target is doing (only when the monitor scrapes the pods itself).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Target {
    /// The replica's name (its `pod` label) or the exporter's address.
    pub name: String,
    /// The URL scraped.
    pub url: String,
    /// `engine` or `gpu`.
    pub kind: &'static str,
    /// Whether its last scrape succeeded.
    pub up: bool,
    /// Why its last scrape failed.
    pub error: Option<String>,
    /// Since when it has been up, or down (seconds since the epoch).
    pub since: f64,
}

/// One replica.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Replica {
    /// Its name (the replica label's value).
    pub name: String,
    /// Whether its metrics endpoint answers (`None`: unknown).
    pub up: Option<bool>,
    /// Why not, when the monitor scraped it itself.
    pub error: Option<String>,
    /// Since when it has been in its state (when the monitor scraped it itself).
    pub since: Option<f64>,
    /// Waiting.
    pub queue: Option<f64>,
    /// Running.
    pub running: Option<f64>,
    /// Finished per second.
    pub rps: Option<f64>,
    /// KV-cache usage (0–1).
    pub kv: Option<f64>,
    /// p95 end-to-end latency, seconds.
    pub e2e_p95: Option<f64>,
}

/// One active alert instance.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AlertInstance {
    /// Its labels (without `alertname`).
    pub labels: BTreeMap<String, String>,
    /// `pending` or `firing`.
    pub state: State,
    /// When its condition started to hold (seconds since the epoch).
    pub active_at: f64,
    /// When it fired.
    pub fired_at: Option<f64>,
    /// Seconds until it fires, when pending.
    pub fires_in_s: Option<f64>,
    /// The expression's value.
    pub value: f64,
}

/// One alerting rule.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AlertRow {
    /// `alert`.
    pub name: String,
    /// Its `severity` label.
    pub severity: Option<String>,
    /// `inactive`, `pending` or `firing`: the most severe of its instances.
    pub state: &'static str,
    /// `for`, seconds.
    pub for_s: f64,
    /// Its active instances.
    pub instances: Vec<AlertInstance>,
    /// Why its last evaluation failed.
    pub error: Option<String>,
}

/// The version of [`Dashboard`]'s JSON (`inferscale monitor --json`).
pub const DASHBOARD_VERSION: u32 = 1;

/// Everything one refresh shows.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Dashboard {
    /// [`DASHBOARD_VERSION`].
    pub version: u32,
    /// When (seconds since the epoch).
    pub time: f64,
    /// Where the numbers come from, in words.
    pub source: String,
    /// The rates' and percentiles' window, as written (`1m`).
    pub window: String,
    /// Tier 1.
    pub service: Service,
    /// Tier 2.
    pub engine: Engine,
    /// Tier 3, per GPU.
    pub gpus: Vec<Gpu>,
    /// Per replica.
    pub replicas: Vec<Replica>,
    /// The scrape targets' health (empty when reading a Prometheus).
    pub targets: Vec<Target>,
    /// The alerting rules.
    pub alerts: Vec<AlertRow>,
    /// Queries that failed, with why.
    pub errors: Vec<String>,
}

/// A one-sample result's value; `None` for an empty result or NaN.
fn single(v: &Value) -> Option<f64> {
    let x = match v {
        Value::Scalar(x) => *x,
        Value::Vector(s) if s.len() == 1 => s[0].value,
        // A sum over nothing is empty; more than one sample means the query was wrong for
        // what it feeds (a missing aggregation): show nothing rather than one at random.
        _ => return None,
    };
    x.is_finite().then_some(x)
}

/// A by-label result as `label value → value` (NaN dropped).
fn by_label(v: &Value, labels: &[&str]) -> BTreeMap<String, f64> {
    let Value::Vector(s) = v else {
        return BTreeMap::new();
    };
    s.iter()
        .filter(|s| s.value.is_finite())
        .map(|s| {
            let key = labels
                .iter()
                .map(|l| s.labels.get(l))
                .filter(|v| !v.is_empty())
                .collect::<Vec<_>>()
                .join("/");
            (key, s.value)
        })
        .collect()
}

impl Dashboard {
    /// The dashboard for `results` (what each of the plan's queries returned), the alert
    /// rules' states and the targets' health, at `time`.
    pub fn build(
        time: f64,
        results: &[(Metric, Result<Value, crate::source::ReadError>)],
        alerts: &Alerts,
        targets: Vec<Target>,
        replica_label: &str,
    ) -> Dashboard {
        let mut d = Dashboard {
            version: DASHBOARD_VERSION,
            time,
            targets,
            ..Dashboard::default()
        };
        let mut replicas: BTreeMap<String, Replica> = BTreeMap::new();
        let mut gpus: BTreeMap<String, Gpu> = BTreeMap::new();
        for (m, r) in results {
            let v = match r {
                Ok(v) => v,
                Err(e) => {
                    d.errors.push(inferscale_http::with_causes(e));
                    continue;
                }
            };
            let one = single(v);
            let s = &mut d.service;
            let e = &mut d.engine;
            match m {
                Metric::Queue => s.queue = one,
                Metric::Running => s.running = one,
                Metric::Rps => s.rps = one,
                Metric::ErrorRate => s.error_rate = one,
                Metric::Latency(l, p) => match l {
                    Latency::Ttft => s.ttft.set(*p, one),
                    Latency::Tpot => s.tpot.set(*p, one),
                    Latency::E2e => s.e2e.set(*p, one),
                },
                Metric::KvMean => e.kv_mean = one,
                Metric::KvMax => e.kv_max = one,
                Metric::Preemptions => e.preemptions_per_s = one,
                Metric::PromptTokens => e.prompt_tokens_per_s = one,
                Metric::GenerationTokens => e.generation_tokens_per_s = one,
                Metric::TokensPerStep => e.tokens_per_step = one,
                Metric::ReplicaUp
                | Metric::ReplicaQueue
                | Metric::ReplicaRunning
                | Metric::ReplicaRps
                | Metric::ReplicaKv
                | Metric::ReplicaE2eP95 => {
                    for (name, x) in by_label(v, &[replica_label]) {
                        let row = replicas.entry(name.clone()).or_insert_with(|| Replica {
                            name,
                            ..Replica::default()
                        });
                        let x = Some(x);
                        match m {
                            Metric::ReplicaUp => row.up = x.map(|u| u >= 1.0),
                            Metric::ReplicaQueue => row.queue = x,
                            Metric::ReplicaRunning => row.running = x,
                            Metric::ReplicaRps => row.rps = x,
                            Metric::ReplicaKv => row.kv = x,
                            _ => row.e2e_p95 = x,
                        }
                    }
                }
                Metric::GpuUtil
                | Metric::MemCopyUtil
                | Metric::FbUsed
                | Metric::FbFree
                | Metric::Power
                | Metric::Temperature
                | Metric::EccSbe => {
                    for (name, x) in by_label(v, &GPU_LABELS) {
                        let row = gpus.entry(name.clone()).or_insert_with(|| Gpu {
                            name,
                            ..Gpu::default()
                        });
                        let x = Some(x);
                        match m {
                            Metric::GpuUtil => row.util_pct = x,
                            Metric::MemCopyUtil => row.mem_copy_pct = x,
                            Metric::FbUsed => row.fb_used_mib = x,
                            // Total = used + free, set below.
                            Metric::FbFree => row.fb_total_mib = x,
                            Metric::Power => row.power_w = x,
                            Metric::Temperature => row.temp_c = x,
                            _ => row.ecc_sbe = x,
                        }
                    }
                }
            }
        }
        for g in gpus.values_mut() {
            g.fb_total_mib = match (g.fb_used_mib, g.fb_total_mib) {
                (Some(u), Some(f)) => Some(u + f),
                _ => None,
            };
        }
        // The monitor's own scrapes know more than `up`: why, and since when.
        for t in d.targets.iter().filter(|t| t.kind == "engine") {
            let row = replicas.entry(t.name.clone()).or_insert_with(|| Replica {
                name: t.name.clone(),
                ..Replica::default()
            });
            row.up = Some(t.up);
            row.error = t.error.clone();
            row.since = Some(t.since);
        }
        // A replica that is down has no current numbers: what a rate over the window still
        // finds of it is history, and shown beside "DOWN" it reads as if it were serving.
        for r in replicas.values_mut().filter(|r| r.up == Some(false)) {
            *r = Replica {
                name: std::mem::take(&mut r.name),
                up: r.up,
                error: r.error.take(),
                since: r.since,
                ..Replica::default()
            };
        }
        d.replicas = replicas.into_values().collect();
        d.gpus = gpus.into_values().collect();
        d.alerts = alert_rows(alerts, time);
        d
    }
}

fn alert_rows(alerts: &Alerts, now: f64) -> Vec<AlertRow> {
    alerts
        .iter()
        .map(|(rule, st)| {
            let instances: Vec<AlertInstance> = st
                .instances
                .iter()
                .map(|i| AlertInstance {
                    labels: i
                        .labels
                        .iter()
                        .filter(|(k, _)| *k != "alertname")
                        .map(|(k, v)| (k.to_owned(), v.to_owned()))
                        .collect(),
                    state: i.state,
                    active_at: i.active_at,
                    fired_at: i.fired_at,
                    fires_in_s: (i.state == State::Pending)
                        .then(|| (rule.for_s - (now - i.active_at)).max(0.0)),
                    value: i.value,
                })
                .collect();
            AlertRow {
                name: rule.name.clone(),
                severity: rule.label("severity").map(str::to_owned),
                state: if st.firing() {
                    "firing"
                } else if st.pending() {
                    "pending"
                } else {
                    "inactive"
                },
                for_s: rule.for_s,
                instances,
                error: st.error.clone(),
            }
        })
        .collect()
}

/// A series of one number over the last refreshes, for a sparkline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Trend {
    /// Requests waiting.
    Queue,
    /// Requests running.
    Running,
    /// Requests per second.
    Rps,
    /// Error rate.
    ErrorRate,
    /// p95 TTFT.
    TtftP95,
    /// p95 TPOT.
    TpotP95,
    /// p95 end to end.
    E2eP95,
    /// Mean KV-cache usage.
    Kv,
    /// Generated tokens per second.
    GenerationTokens,
}

impl Trend {
    const ALL: [Trend; 9] = [
        Trend::Queue,
        Trend::Running,
        Trend::Rps,
        Trend::ErrorRate,
        Trend::TtftP95,
        Trend::TpotP95,
        Trend::E2eP95,
        Trend::Kv,
        Trend::GenerationTokens,
    ];

    fn read(self, d: &Dashboard) -> Option<f64> {
        match self {
            Trend::Queue => d.service.queue,
            Trend::Running => d.service.running,
            Trend::Rps => d.service.rps,
            Trend::ErrorRate => d.service.error_rate,
            Trend::TtftP95 => d.service.ttft.p95,
            Trend::TpotP95 => d.service.tpot.p95,
            Trend::E2eP95 => d.service.e2e.p95,
            Trend::Kv => d.engine.kv_mean,
            Trend::GenerationTokens => d.engine.generation_tokens_per_s,
        }
    }
}

/// The last refreshes' numbers, oldest first, for the sparklines.
#[derive(Debug, Clone)]
pub struct History {
    keep: usize,
    series: Vec<VecDeque<Option<f64>>>,
}

impl History {
    /// Keeps the last `keep` refreshes.
    pub fn new(keep: usize) -> History {
        History {
            keep: keep.max(1),
            series: vec![VecDeque::new(); Trend::ALL.len()],
        }
    }

    /// Records one refresh.
    pub fn push(&mut self, d: &Dashboard) {
        for (i, t) in Trend::ALL.iter().enumerate() {
            let s = &mut self.series[i];
            if s.len() == self.keep {
                s.pop_front();
            }
            s.push_back(t.read(d));
        }
    }

    /// One number's values, oldest first.
    pub fn of(&self, t: Trend) -> impl Iterator<Item = Option<f64>> + '_ {
        let i = Trend::ALL.iter().position(|x| *x == t).unwrap_or(0);
        self.series[i].iter().copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::ReadError;
    use inferscale_autoscale::alerts::AlertRule;
    use inferscale_promql::{Labels, Query, Sample};

    fn vec(pairs: &[(&[(&str, &str)], f64)]) -> Result<Value, ReadError> {
        Ok(Value::Vector(
            pairs
                .iter()
                .map(|(l, v)| Sample {
                    labels: Labels::new(l.iter().copied()),
                    value: *v,
                })
                .collect(),
        ))
    }

    #[test]
    fn missing_is_none_and_nan_is_none_never_zero() {
        let alerts = Alerts::new(Vec::new());
        let d = Dashboard::build(
            0.0,
            &[
                (Metric::Queue, vec(&[])),
                (Metric::Running, vec(&[(&[], 3.0)])),
                (
                    Metric::Latency(Latency::E2e, Pct::P95),
                    vec(&[(&[], f64::NAN)]),
                ),
                (
                    Metric::Rps,
                    Err(ReadError::Eval(inferscale_promql::EvalError::Matching(
                        "boom".into(),
                    ))),
                ),
            ],
            &alerts,
            Vec::new(),
            "pod",
        );
        assert_eq!(d.service.queue, None);
        assert_eq!(d.service.running, Some(3.0));
        assert_eq!(d.service.e2e.p95, None);
        assert_eq!(d.errors, ["boom"]);
    }

    #[test]
    fn replicas_join_query_rows_with_the_scrape_targets_and_gpus_add_up_their_memory() {
        let alerts = Alerts::new(Vec::new());
        let d = Dashboard::build(
            100.0,
            &[
                (Metric::ReplicaQueue, vec(&[(&[("pod", "a")], 2.0)])),
                (Metric::ReplicaUp, vec(&[(&[("pod", "a")], 1.0)])),
                (
                    Metric::FbUsed,
                    vec(&[(&[("Hostname", "n1"), ("gpu", "0")], 40.0)]),
                ),
                (
                    Metric::FbFree,
                    vec(&[(&[("Hostname", "n1"), ("gpu", "0")], 8.0)]),
                ),
            ],
            &alerts,
            vec![Target {
                name: "b".into(),
                url: "http://b/metrics".into(),
                kind: "engine",
                up: false,
                error: Some("connection refused".into()),
                since: 90.0,
            }],
            "pod",
        );
        assert_eq!(d.replicas.len(), 2);
        assert_eq!(
            (d.replicas[0].up, d.replicas[0].queue),
            (Some(true), Some(2.0))
        );
        assert_eq!(d.replicas[1].up, Some(false));
        assert_eq!(d.replicas[1].error.as_deref(), Some("connection refused"));
        assert_eq!(d.gpus[0].name, "n1/0");
        assert_eq!(d.gpus[0].fb_total_mib, Some(48.0));
    }

    #[test]
    fn a_pending_alert_says_how_long_until_it_fires() {
        let mut r = AlertRule::new("HighQueueDepth", Query::parse("q > 1").unwrap(), 120.0);
        r.labels.push(("severity".into(), "warning".into()));
        let mut alerts = Alerts::new(vec![r]);
        alerts.eval(0, 1000.0, vec(&[(&[("pod", "a")], 60.0)]));
        let d = Dashboard::build(1030.0, &[], &alerts, Vec::new(), "pod");
        let a = &d.alerts[0];
        assert_eq!(
            (a.state, a.severity.as_deref()),
            ("pending", Some("warning"))
        );
        assert_eq!(a.instances[0].fires_in_s, Some(90.0));
        assert_eq!(
            a.instances[0].labels.get("pod").map(String::as_str),
            Some("a")
        );
        assert!(!a.instances[0].labels.contains_key("alertname"));
    }
}
