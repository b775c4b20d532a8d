//! Reading signals out of an exposition, combining targets, and windows between two scrapes.

use std::collections::BTreeMap;

use inferscale_promtext::{Exposition, Histogram, Sample, counter_delta};

use crate::engine::{Engine, detect};
use crate::names::{
    DCGM_BLANK_THRESHOLD, DCGM_HOST_LABELS, MetricName, NameStatus, Read, names_for,
};
use crate::signal::{Aggregate, Signal, SignalKind, Tier};

/// What was read for one signal, kept per series so that targets combine and windows subtract
/// series by series (a counter reset on one pod must not look like a reset of the fleet).
#[derive(Debug, Clone, PartialEq)]
enum Values {
    Gauge(BTreeMap<String, f64>),
    Counter(BTreeMap<String, f64>),
    Histogram(BTreeMap<String, Histogram>),
}

/// One GPU as the DCGM exporter describes it.
#[derive(Debug, Clone, PartialEq)]
pub struct Gpu {
    /// The target the GPU was scraped from.
    pub source: String,
    /// The `gpu` label (device index).
    pub index: String,
    /// The `UUID` label.
    pub uuid: Option<String>,
    /// The `modelName` label.
    pub model: Option<String>,
    /// The `Hostname` (or `hostname`) label.
    pub host: Option<String>,
    /// Tier-3 readings of this GPU.
    pub values: BTreeMap<Signal, f64>,
}

/// The signals read from one or more scrapes.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Snapshot {
    /// Engines detected, over all targets.
    pub engines: Vec<Engine>,
    /// Metric families parsed, over all targets.
    pub families: usize,
    /// Samples parsed, over all targets.
    pub samples: usize,
    /// For a window between two scrapes, its length in seconds.
    pub window_seconds: Option<f64>,
    values: BTreeMap<Signal, Values>,
    sources: BTreeMap<Signal, Vec<&'static MetricName>>,
    /// vLLM's finished requests by `finished_reason`, per series.
    finish_reasons: BTreeMap<String, BTreeMap<String, f64>>,
    /// Each GPU found.
    pub gpus: Vec<Gpu>,
    /// An inference gateway's endpoint picker, when a target is one (its `names` is `None`
    /// otherwise).
    pub gateway: crate::gateway::Reading,
}

fn series_key(source: &str, s: &Sample<'_, '_>, skip: &[&str]) -> String {
    let mut labels: Vec<(&str, &str)> = s
        .labels()
        .iter()
        .filter(|l| !skip.contains(&&*l.name))
        .map(|l| (&*l.name, &*l.value))
        .collect();
    labels.sort_unstable();
    key_of(source, labels)
}

/// `source|name=value,…` with the labels in the order given (sorted by the callers).
fn key_of<'l>(source: &str, labels: impl IntoIterator<Item = (&'l str, &'l str)>) -> String {
    let mut key = String::with_capacity(source.len() + 32);
    key.push_str(source);
    key.push('|');
    for (n, v) in labels {
        key.push_str(n);
        key.push('=');
        key.push_str(v);
        key.push(',');
    }
    key
}

fn is_blank(name: &MetricName, v: f64) -> bool {
    name.engine == Engine::Dcgm && v.abs() >= DCGM_BLANK_THRESHOLD
}

fn passes(name: &MetricName, s: &Sample<'_, '_>) -> bool {
    match name.filter {
        None => true,
        Some((label, allowed)) => s.label(label).is_some_and(|v| allowed.contains(&v)),
    }
}

/// Reads one signal with one name; `None` when the exposition lacks that name.
fn read_name(exp: &Exposition<'_>, source: &str, name: &'static MetricName) -> Option<Values> {
    match name.read {
        Read::Value | Read::HistogramSum => {
            let sample_name = match name.read {
                Read::HistogramSum => format!("{}_sum", name.name),
                _ => name.name.to_owned(),
            };
            let mut found = false;
            let mut map = BTreeMap::new();
            for s in exp.samples_named(&sample_name) {
                found = true;
                if !passes(name, &s) || is_blank(name, s.value()) || s.value().is_nan() {
                    continue;
                }
                *map.entry(series_key(source, &s, &[])).or_insert(0.0) += s.value();
            }
            if !found {
                return None;
            }
            Some(match name.signal.kind() {
                SignalKind::Gauge => Values::Gauge(map),
                _ => Values::Counter(map),
            })
        }
        Read::Histogram => {
            let found = inferscale_promtext::histograms(exp, name.name);
            if found.is_empty() {
                return None;
            }
            let map = found
                .into_iter()
                .map(|h| {
                    let key = key_of(
                        source,
                        h.labels.iter().map(|(n, v)| (n.as_str(), v.as_str())),
                    );
                    (key, h.histogram)
                })
                .collect();
            Some(Values::Histogram(map))
        }
    }
}

fn read_gpus(exp: &Exposition<'_>, source: &str) -> Vec<Gpu> {
    let mut gpus: BTreeMap<String, Gpu> = BTreeMap::new();
    for signal in Signal::ALL
        .iter()
        .copied()
        .filter(|s| s.tier() == Tier::Gpu)
    {
        for name in names_for(signal) {
            let mut any = false;
            for s in exp.samples_named(name.name) {
                any = true;
                let Some(index) = s.label("gpu") else {
                    continue;
                };
                if is_blank(name, s.value()) || s.value().is_nan() {
                    continue;
                }
                let host = DCGM_HOST_LABELS.iter().find_map(|l| s.label(l));
                let uuid = s.label("UUID");
                let key = format!(
                    "{source}|{}|{index}|{}",
                    host.unwrap_or(""),
                    uuid.unwrap_or("")
                );
                let gpu = gpus.entry(key).or_insert_with(|| Gpu {
                    source: source.to_owned(),
                    index: index.to_owned(),
                    uuid: uuid.map(str::to_owned),
                    model: s.label("modelName").map(str::to_owned),
                    host: host.map(str::to_owned),
                    values: BTreeMap::new(),
                });
                gpu.values.insert(signal, s.value());
            }
            if any {
                break;
            }
        }
    }
    gpus.into_values().collect()
}

impl Snapshot {
    /// Reads every signal the exposition carries. `source` names the target (its URL or file)
    /// and keeps series of different targets apart when snapshots are merged.
    ///
    /// For each signal the first name in [`names_for`] order that the exposition has is used,
    /// so current vLLM names win over deprecated ones when a release serves both.
    pub fn read(exp: &Exposition<'_>, source: &str) -> Snapshot {
        let mut snap = Snapshot {
            engines: detect(exp),
            families: exp.family_count(),
            samples: exp.sample_count(),
            gateway: crate::gateway::read(exp),
            ..Snapshot::default()
        };
        for signal in Signal::ALL {
            for name in names_for(signal) {
                if let Some(values) = read_name(exp, source, name) {
                    snap.values.insert(signal, values);
                    snap.sources.insert(signal, vec![name]);
                    break;
                }
            }
        }
        for s in exp.samples_named("vllm:request_success_total") {
            if let Some(reason) = s.label("finished_reason") {
                let key = series_key(source, &s, &["finished_reason"]);
                *snap
                    .finish_reasons
                    .entry(reason.to_owned())
                    .or_default()
                    .entry(key)
                    .or_insert(0.0) += s.value();
            }
        }
        snap.gpus = read_gpus(exp, source);
        snap
    }

    /// Adds another target's snapshot: queues and counts add up, histograms merge by `le`,
    /// GPUs are listed together.
    pub fn merge(&mut self, other: Snapshot) {
        for e in other.engines {
            if !self.engines.contains(&e) {
                self.engines.push(e);
            }
        }
        self.families += other.families;
        self.samples += other.samples;
        for (signal, values) in other.values {
            match (self.values.get_mut(&signal), values) {
                (None, v) => {
                    self.values.insert(signal, v);
                }
                (Some(Values::Gauge(a)), Values::Gauge(b))
                | (Some(Values::Counter(a)), Values::Counter(b)) => a.extend(b),
                (Some(Values::Histogram(a)), Values::Histogram(b)) => a.extend(b),
                _ => {}
            }
        }
        for (signal, names) in other.sources {
            let mine = self.sources.entry(signal).or_default();
            for n in names {
                if !mine.contains(&n) {
                    mine.push(n);
                }
            }
        }
        for (reason, series) in other.finish_reasons {
            self.finish_reasons
                .entry(reason)
                .or_default()
                .extend(series);
        }
        self.gpus.extend(other.gpus);
        if self.gateway.names.is_none() {
            self.gateway = other.gateway;
        }
    }

    /// What happened between `earlier` and `self` (a later scrape of the same targets), over
    /// `seconds`: counters and histograms become increases (with reset handling, series by
    /// series), gauges keep their latest values.
    pub fn window(&self, earlier: &Snapshot, seconds: f64) -> Snapshot {
        let mut out = self.clone();
        out.window_seconds = Some(seconds);
        for (signal, values) in out.values.iter_mut() {
            let before = earlier.values.get(signal);
            match (values, before) {
                (Values::Counter(now), Some(Values::Counter(then))) => {
                    for (k, v) in now.iter_mut() {
                        *v = counter_delta(then.get(k).copied().unwrap_or(0.0), *v);
                    }
                }
                (Values::Histogram(now), Some(Values::Histogram(then))) => {
                    for (k, h) in now.iter_mut() {
                        if let Some(prev) = then.get(k) {
                            *h = h.delta(prev);
                        }
                    }
                }
                _ => {}
            }
        }
        for (reason, series) in out.finish_reasons.iter_mut() {
            let then = earlier.finish_reasons.get(reason);
            for (k, v) in series.iter_mut() {
                *v = counter_delta(then.and_then(|t| t.get(k)).copied().unwrap_or(0.0), *v);
            }
        }
        for gpu in out.gpus.iter_mut() {
            let prev = earlier.gpus.iter().find(|g| {
                g.source == gpu.source
                    && g.index == gpu.index
                    && g.uuid == gpu.uuid
                    && g.host == gpu.host
            });
            if let (Some(now), Some(then)) = (
                gpu.values.get_mut(&Signal::EccSbeVolatile),
                prev.and_then(|p| p.values.get(&Signal::EccSbeVolatile)),
            ) {
                *now = counter_delta(*then, *now);
            }
        }
        out
    }

    /// Whether the snapshot has a reading for `signal`.
    pub fn has(&self, signal: Signal) -> bool {
        self.values.contains_key(&signal)
    }

    /// The metric names the signal was read from (more than one when targets differ).
    pub fn sources(&self, signal: Signal) -> &[&'static MetricName] {
        self.sources.get(&signal).map_or(&[], Vec::as_slice)
    }

    /// A gauge or counter combined over series ([`Signal::aggregate`]); for a window, a
    /// counter's increase. `None` when absent or a histogram.
    pub fn value(&self, signal: Signal) -> Option<f64> {
        let series: Vec<f64> = match self.values.get(&signal)? {
            Values::Gauge(m) | Values::Counter(m) => m.values().copied().collect(),
            Values::Histogram(_) => return None,
        };
        if series.is_empty() {
            return None;
        }
        Some(match signal.aggregate() {
            Aggregate::Sum => series.iter().sum(),
            Aggregate::Mean => series.iter().sum::<f64>() / series.len() as f64,
            Aggregate::Max => series.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        })
    }

    /// The largest value of a gauge over series (the fullest KV cache of the fleet, say).
    pub fn max(&self, signal: Signal) -> Option<f64> {
        match self.values.get(&signal)? {
            Values::Gauge(m) | Values::Counter(m) => m.values().copied().reduce(f64::max),
            Values::Histogram(_) => None,
        }
    }

    /// A counter per second over the window; `None` for a single scrape.
    pub fn rate(&self, signal: Signal) -> Option<f64> {
        let secs = self.window_seconds.filter(|s| *s > 0.0)?;
        self.value(signal).map(|v| v / secs)
    }

    /// All series of a histogram signal merged (`sum by (le)`).
    pub fn histogram(&self, signal: Signal) -> Option<Histogram> {
        match self.values.get(&signal)? {
            Values::Histogram(m) => Some(Histogram::merged(m.values())),
            _ => None,
        }
    }

    /// `histogram_quantile(q, sum by (le) (…))`; `None` when absent or without observations.
    pub fn quantile(&self, signal: Signal, q: f64) -> Option<f64> {
        let v = self.histogram(signal)?.quantile(q);
        (!v.is_nan()).then_some(v)
    }

    /// vLLM's finished requests by `finished_reason`.
    pub fn finish_reasons(&self) -> BTreeMap<&str, f64> {
        self.finish_reasons
            .iter()
            .map(|(r, s)| (r.as_str(), s.values().sum()))
            .collect()
    }

    /// Errored requests over all finished ones (aborted included in the denominator); `None`
    /// when the server does not report errors.
    pub fn error_rate(&self) -> Option<f64> {
        let ok = self.value(Signal::RequestsOk)?;
        let errored = self.value(Signal::RequestsErrored)?;
        let aborted = self.value(Signal::RequestsAborted).unwrap_or(0.0);
        let all = ok + errored + aborted;
        (all > 0.0).then(|| errored / all)
    }

    /// Every reading as flat `key → value` pairs, `None` where the exposition lacked it. The
    /// keys are documented in `docs/formats.md` (`scrape --json`).
    pub fn signals(&self) -> Vec<(String, Option<f64>)> {
        let mut out: Vec<(String, Option<f64>)> = Vec::new();
        let windowed = self.window_seconds.is_some();
        for signal in Signal::ALL {
            let key = signal.key();
            match signal.kind() {
                SignalKind::Gauge => {
                    out.push((key.to_owned(), self.value(signal)));
                    if signal == Signal::KvCacheUsage {
                        out.push(("kv_cache_usage_max".to_owned(), self.max(signal)));
                    }
                }
                SignalKind::Counter => {
                    if windowed {
                        out.push((format!("{key}_increase"), self.value(signal)));
                        out.push((format!("{key}_per_second"), self.rate(signal)));
                    } else {
                        out.push((format!("{key}_total"), self.value(signal)));
                    }
                }
                SignalKind::Histogram => {
                    let unit = if signal == Signal::IterationTokens {
                        ""
                    } else {
                        "_seconds"
                    };
                    for (q, name) in [(0.5, "p50"), (0.95, "p95"), (0.99, "p99")] {
                        out.push((format!("{key}_{name}{unit}"), self.quantile(signal, q)));
                    }
                    let h = self.histogram(signal);
                    let mean = h.as_ref().map(Histogram::mean).filter(|m| !m.is_nan());
                    out.push((format!("{key}_mean{unit}"), mean));
                    out.push((
                        format!("{key}_count"),
                        h.map(|h| h.observations()).filter(|c| !c.is_nan()),
                    ));
                }
            }
        }
        out.push(("error_rate".to_owned(), self.error_rate()));
        out.push(("gpu_count".to_owned(), Some(self.gpus.len() as f64)));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snap(text: &str, source: &str) -> Snapshot {
        Snapshot::read(
            &inferscale_promtext::parse(text.as_bytes()).unwrap(),
            source,
        )
    }

    #[test]
    fn deprecated_names_are_read_when_current_ones_are_absent() {
        let old = snap("vllm:gpu_cache_usage_perc{model_name=\"m\"} 0.5\n", "a");
        assert_eq!(old.value(Signal::KvCacheUsage), Some(0.5));
        assert_eq!(
            old.sources(Signal::KvCacheUsage)[0].name,
            "vllm:gpu_cache_usage_perc"
        );
        let both = snap(
            "vllm:gpu_cache_usage_perc 0.5\nvllm:kv_cache_usage_perc 0.25\n",
            "a",
        );
        assert_eq!(both.value(Signal::KvCacheUsage), Some(0.25));
    }

    #[test]
    fn targets_combine_and_windows_subtract_per_series() {
        let a0 = snap(
            "vllm:num_requests_waiting 3\nvllm:num_preemptions_total 10\n",
            "a",
        );
        let b0 = snap(
            "vllm:num_requests_waiting 4\nvllm:num_preemptions_total 100\n",
            "b",
        );
        let mut t0 = a0.clone();
        t0.merge(b0);
        assert_eq!(t0.value(Signal::QueueDepth), Some(7.0));
        assert_eq!(t0.value(Signal::Preemptions), Some(110.0));
        // Pod b restarted: its counter went from 100 to 5, which is an increase of 5.
        let mut t1 = snap(
            "vllm:num_requests_waiting 1\nvllm:num_preemptions_total 12\n",
            "a",
        );
        t1.merge(snap(
            "vllm:num_requests_waiting 0\nvllm:num_preemptions_total 5\n",
            "b",
        ));
        let w = t1.window(&t0, 2.0);
        assert_eq!(w.value(Signal::Preemptions), Some(7.0));
        assert_eq!(w.rate(Signal::Preemptions), Some(3.5));
        assert_eq!(w.value(Signal::QueueDepth), Some(1.0));
    }

    #[test]
    fn finish_reasons_split_ok_aborted_errored() {
        let s = snap(
            "vllm:request_success_total{finished_reason=\"stop\"} 8\nvllm:request_success_total{finished_reason=\"length\"} 1\n\
             vllm:request_success_total{finished_reason=\"abort\"} 2\nvllm:request_success_total{finished_reason=\"error\"} 1\n",
            "a",
        );
        assert_eq!(s.value(Signal::RequestsOk), Some(9.0));
        assert_eq!(s.value(Signal::RequestsAborted), Some(2.0));
        assert_eq!(s.value(Signal::RequestsErrored), Some(1.0));
        assert_eq!(s.error_rate(), Some(1.0 / 12.0));
        assert_eq!(s.finish_reasons().get("stop"), Some(&8.0));
    }

    #[test]
    fn dcgm_blanks_and_both_host_labels() {
        let s = snap(
            "DCGM_FI_DEV_GPU_TEMP{gpu=\"0\",UUID=\"u0\",Hostname=\"n1\"} 40\n\
             DCGM_FI_DEV_GPU_TEMP{gpu=\"1\",UUID=\"u1\",hostname=\"n1\"} 60\n\
             DCGM_FI_DEV_MEMORY_TEMP{gpu=\"0\"} 9223372036854775794\n\
             DCGM_FI_DEV_POWER_USAGE{gpu=\"0\",UUID=\"u0\",Hostname=\"n1\"} 9223372036854775794\n",
            "node",
        );
        assert_eq!(s.value(Signal::GpuTemp), Some(60.0));
        assert_eq!(s.value(Signal::Power), None, "a blank is not a reading");
        assert_eq!(s.gpus.len(), 2);
        assert!(s.gpus.iter().all(|g| g.host.as_deref() == Some("n1")));
    }

    #[test]
    fn missing_is_not_zero() {
        let s = snap("vllm:num_requests_waiting 0\n", "a");
        let signals: BTreeMap<String, Option<f64>> = s.signals().into_iter().collect();
        assert_eq!(signals["queue_depth"], Some(0.0));
        assert_eq!(signals["running"], None);
        assert_eq!(signals["e2e_p95_seconds"], None);
    }
}

/// A number, or `null` for a missing or non-finite one (JSON has no NaN).
struct Num(Option<f64>);

impl serde::Serialize for Num {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            Some(x) if x.is_finite() => s.serialize_f64(x),
            _ => s.serialize_none(),
        }
    }
}

/// A map serialised from pairs, in their order.
struct Pairs<K, V>(Vec<(K, V)>);

impl<K: serde::Serialize, V: serde::Serialize> serde::Serialize for Pairs<K, V> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

#[derive(serde::Serialize)]
struct SourceJson {
    name: &'static str,
    engine: &'static str,
    status: &'static str,
}

#[derive(serde::Serialize)]
struct GpuJson<'a> {
    source: &'a str,
    gpu: &'a str,
    uuid: Option<&'a str>,
    model: Option<&'a str>,
    hostname: Option<&'a str>,
    signals: Pairs<&'static str, f64>,
}

/// The view `inferscale scrape --json` prints (documented in docs/formats.md): the engines,
/// counts, every signal's value (`null` when missing), where each came from, vLLM's finish
/// reasons and each GPU's readings.
/// An endpoint picker's reading, as `scrape --json` writes it.
struct GatewayJson<'a>(&'a crate::gateway::Reading);

impl serde::Serialize for GatewayJson<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let g = self.0;
        let mut m = s.serialize_map(Some(11))?;
        m.serialize_entry(
            "names",
            match g.names {
                Some(crate::gateway::Names::Router) => "llm-d-router",
                Some(crate::gateway::Names::Gie) => "gie",
                None => "none",
            },
        )?;
        m.serialize_entry("families", &g.families)?;
        m.serialize_entry("queue_held", &Num(g.queue_held))?;
        m.serialize_entry("pool_saturation", &Num(g.saturation))?;
        m.serialize_entry("running", &Num(g.running))?;
        m.serialize_entry("average_queue", &Num(g.average_queue))?;
        m.serialize_entry("average_kv_cache", &Num(g.average_kv_cache))?;
        m.serialize_entry("ready_endpoints", &Num(g.ready))?;
        m.serialize_entry("inflight_tokens", &Num(g.inflight_tokens))?;
        m.serialize_entry("ttft_mean_seconds", &Num(g.ttft_mean_s))?;
        m.serialize_entry("ntpot_mean_seconds", &Num(g.ntpot_mean_s))?;
        m.end()
    }
}

impl serde::Serialize for Snapshot {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(Some(10))?;
        m.serialize_entry("engine", &self.engines.first().map(|e| e.key()))?;
        m.serialize_entry(
            "engines",
            &self.engines.iter().map(|e| e.key()).collect::<Vec<_>>(),
        )?;
        m.serialize_entry("families", &self.families)?;
        m.serialize_entry("samples", &self.samples)?;
        m.serialize_entry("window_seconds", &Num(self.window_seconds))?;
        let signals = Pairs(
            self.signals()
                .into_iter()
                .map(|(k, v)| (k, Num(v)))
                .collect(),
        );
        m.serialize_entry("signals", &signals)?;
        let sources = Pairs(
            Signal::ALL
                .iter()
                .filter(|s| self.has(**s))
                .map(|s| {
                    let names: Vec<SourceJson> = self
                        .sources(*s)
                        .iter()
                        .map(|n| SourceJson {
                            name: n.name,
                            engine: n.engine.key(),
                            status: match n.status {
                                NameStatus::Current => "current",
                                NameStatus::Deprecated => "deprecated",
                                NameStatus::Unverified => "unverified",
                            },
                        })
                        .collect();
                    (s.key(), names)
                })
                .collect(),
        );
        m.serialize_entry("sources", &sources)?;
        m.serialize_entry("finish_reasons", &self.finish_reasons())?;
        if self.gateway.names.is_some() {
            m.serialize_entry("gateway", &GatewayJson(&self.gateway))?;
        }
        let gpus: Vec<GpuJson<'_>> = self
            .gpus
            .iter()
            .map(|g| GpuJson {
                source: &g.source,
                gpu: &g.index,
                uuid: g.uuid.as_deref(),
                model: g.model.as_deref(),
                hostname: g.host.as_deref(),
                signals: Pairs(g.values.iter().map(|(s, v)| (s.key(), *v)).collect()),
            })
            .collect();
        m.serialize_entry("gpus", &gpus)?;
        m.end()
    }
}
