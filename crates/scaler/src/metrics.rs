//! The scaler's own metrics, served at `/metrics` on its HTTP port: how its calls and its
//! scrapes went, and the values it handed KEDA. Names are `inferscale_scaler_*`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::{Mutex, PoisonError};

/// Upper bounds of the latency histograms, seconds.
const BUCKETS: [f64; 14] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

#[derive(Debug, Default, Clone)]
struct Histogram {
    counts: [u64; BUCKETS.len()],
    count: u64,
    sum: f64,
}

impl Histogram {
    fn observe(&mut self, v: f64) {
        for (c, le) in self.counts.iter_mut().zip(BUCKETS) {
            if v <= le {
                *c += 1;
            }
        }
        self.count += 1;
        self.sum += v;
    }
}

/// A trigger's last answer.
#[derive(Debug, Clone, PartialEq)]
struct Served {
    value: f64,
    pods_ok: usize,
    pods_failed: usize,
}

#[derive(Debug, Default)]
struct State {
    /// (method, gRPC code name) → calls.
    calls: BTreeMap<(String, String), u64>,
    /// method → latency.
    call_seconds: BTreeMap<String, Histogram>,
    scrape_seconds: Histogram,
    scrapes_failed: u64,
    cache_hits: u64,
    /// (namespace, scaled object, metric) → last answer.
    served: BTreeMap<(String, String, String), Served>,
}

/// The scaler's metrics, shared by its gRPC and HTTP sides.
#[derive(Debug, Default)]
pub struct Metrics {
    state: Mutex<State>,
}

impl Metrics {
    fn with<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        f(&mut self.state.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// A call to `method` ended with `code` (a gRPC code's name, `OK` for success) after
    /// `seconds`.
    pub fn call(&self, method: &str, code: &str, seconds: f64) {
        self.with(|s| {
            *s.calls
                .entry((method.to_owned(), code.to_owned()))
                .or_default() += 1;
            s.call_seconds
                .entry(method.to_owned())
                .or_default()
                .observe(seconds);
        });
    }

    /// One pod's scrape took `seconds`; `ok` whether it gave a usable exposition.
    pub fn scrape(&self, seconds: f64, ok: bool) {
        self.with(|s| {
            s.scrape_seconds.observe(seconds);
            if !ok {
                s.scrapes_failed += 1;
            }
        });
    }

    /// An answer came from the cache (no scrape).
    pub fn cache_hit(&self) {
        self.with(|s| s.cache_hits += 1);
    }

    /// What a trigger was answered: its value and the pods it stands on.
    pub fn served(
        &self,
        namespace: &str,
        scaled_object: &str,
        metric: &str,
        value: f64,
        pods_ok: usize,
        pods_failed: usize,
    ) {
        self.with(|s| {
            s.served.insert(
                (
                    namespace.to_owned(),
                    scaled_object.to_owned(),
                    metric.to_owned(),
                ),
                Served {
                    value,
                    pods_ok,
                    pods_failed,
                },
            );
        });
    }

    /// The Prometheus text exposition (version 0.0.4).
    pub fn render(&self) -> String {
        self.with(|s| {
            let mut o = String::new();
            let _ = writeln!(
                o,
                "# HELP inferscale_scaler_calls_total gRPC calls answered, by method and status code."
            );
            let _ = writeln!(o, "# TYPE inferscale_scaler_calls_total counter");
            for ((m, c), n) in &s.calls {
                let _ = writeln!(
                    o,
                    "inferscale_scaler_calls_total{{method=\"{m}\",code=\"{c}\"}} {n}"
                );
            }
            let _ = writeln!(
                o,
                "# HELP inferscale_scaler_call_duration_seconds Time to answer a gRPC call, scrapes included."
            );
            let _ = writeln!(o, "# TYPE inferscale_scaler_call_duration_seconds histogram");
            for (m, h) in &s.call_seconds {
                histogram(
                    &mut o,
                    "inferscale_scaler_call_duration_seconds",
                    &format!("method=\"{m}\","),
                    h,
                );
            }
            let _ = writeln!(
                o,
                "# HELP inferscale_scaler_scrape_duration_seconds Time to scrape one pod's /metrics."
            );
            let _ = writeln!(o, "# TYPE inferscale_scaler_scrape_duration_seconds histogram");
            histogram(
                &mut o,
                "inferscale_scaler_scrape_duration_seconds",
                "",
                &s.scrape_seconds,
            );
            let _ = writeln!(
                o,
                "# HELP inferscale_scaler_scrape_errors_total Pod scrapes that failed (no answer, an error status, an unreadable exposition, missing metrics)."
            );
            let _ = writeln!(o, "# TYPE inferscale_scaler_scrape_errors_total counter");
            let _ = writeln!(o, "inferscale_scaler_scrape_errors_total {}", s.scrapes_failed);
            let _ = writeln!(
                o,
                "# HELP inferscale_scaler_cache_hits_total Answers given from the brief cache, without scraping."
            );
            let _ = writeln!(o, "# TYPE inferscale_scaler_cache_hits_total counter");
            let _ = writeln!(o, "inferscale_scaler_cache_hits_total {}", s.cache_hits);
            let _ = writeln!(
                o,
                "# HELP inferscale_scaler_value The last value served for a trigger."
            );
            let _ = writeln!(o, "# TYPE inferscale_scaler_value gauge");
            for ((ns, so, m), v) in &s.served {
                let _ = writeln!(
                    o,
                    "inferscale_scaler_value{{namespace=\"{}\",scaledobject=\"{}\",metric=\"{m}\"}} {}",
                    escape(ns),
                    escape(so),
                    v.value
                );
            }
            let _ = writeln!(
                o,
                "# HELP inferscale_scaler_pods The pods behind a trigger's last value, by whether their scrape counted."
            );
            let _ = writeln!(o, "# TYPE inferscale_scaler_pods gauge");
            for ((ns, so, m), v) in &s.served {
                for (state, n) in [("ok", v.pods_ok), ("failed", v.pods_failed)] {
                    let _ = writeln!(
                        o,
                        "inferscale_scaler_pods{{namespace=\"{}\",scaledobject=\"{}\",metric=\"{m}\",state=\"{state}\"}} {n}",
                        escape(ns),
                        escape(so)
                    );
                }
            }
            o
        })
    }
}

fn histogram(o: &mut String, name: &str, labels: &str, h: &Histogram) {
    for (c, le) in h.counts.iter().zip(BUCKETS) {
        let _ = writeln!(o, "{name}_bucket{{{labels}le=\"{le}\"}} {c}");
    }
    let _ = writeln!(o, "{name}_bucket{{{labels}le=\"+Inf\"}} {}", h.count);
    let l = labels.trim_end_matches(',');
    let braces = if l.is_empty() {
        String::new()
    } else {
        format!("{{{l}}}")
    };
    let _ = writeln!(o, "{name}_sum{braces} {}", h.sum);
    let _ = writeln!(o, "{name}_count{braces} {}", h.count);
}

/// A label value as the exposition format writes it.
fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_exposition_parses_and_counts_what_happened() {
        let m = Metrics::default();
        m.call("GetMetrics", "OK", 0.004);
        m.call("GetMetrics", "Unavailable", 0.2);
        m.scrape(0.003, true);
        m.scrape(2.0, false);
        m.cache_hit();
        m.served("llm", "vllm \"a\"", "queue_depth", 12.5, 2, 1);
        let text = m.render();
        let exp =
            inferscale_promtext::parse(text.as_bytes()).unwrap_or_else(|e| panic!("{e}\n{text}"));
        let value = |name: &str, want: &[(&str, &str)]| {
            exp.samples()
                .find(|s| s.name() == name && want.iter().all(|(k, v)| s.label(k) == Some(*v)))
                .map(|s| s.value())
        };
        assert_eq!(
            value(
                "inferscale_scaler_calls_total",
                &[("method", "GetMetrics"), ("code", "Unavailable")]
            ),
            Some(1.0)
        );
        assert_eq!(
            value("inferscale_scaler_scrape_errors_total", &[]),
            Some(1.0)
        );
        assert_eq!(
            value(
                "inferscale_scaler_scrape_duration_seconds_bucket",
                &[("le", "0.005")]
            ),
            Some(1.0)
        );
        assert_eq!(
            value("inferscale_scaler_value", &[("scaledobject", "vllm \"a\"")]),
            Some(12.5)
        );
        assert_eq!(
            value("inferscale_scaler_pods", &[("state", "failed")]),
            Some(1.0)
        );
    }
}
