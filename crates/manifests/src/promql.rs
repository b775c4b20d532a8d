//! PromQL built from the catalog's names, so that every query reads vLLM's current metric
//! name and falls back to the deprecated one (`a or b`), and a selector written once.

use inferscale_catalog::{Engine, Read, Signal, names_of};

/// Label matchers, e.g. `namespace="llm",model_name="m"` (without braces).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sel(pub String);

impl Sel {
    /// Exact matchers from `(label, value)` pairs.
    pub fn exact(pairs: &[(&str, &str)]) -> Sel {
        Sel(pairs
            .iter()
            .map(|(k, v)| format!("{k}={}", inferscale_promql::quote(v)))
            .collect::<Vec<_>>()
            .join(","))
    }

    /// These matchers plus one more.
    pub fn and(&self, extra: &str) -> Sel {
        if self.0.is_empty() {
            Sel(extra.to_owned())
        } else {
            Sel(format!("{},{extra}", self.0))
        }
    }

    /// The matchers in braces, `{a="b"}` (empty braces when there are none).
    pub fn braces(&self) -> String {
        format!("{{{}}}", self.0)
    }
}

/// vLLM's names for a signal, current first.
pub fn vllm_names(signal: Signal) -> Vec<&'static str> {
    names_of(Engine::Vllm, signal).map(|n| n.name).collect()
}

/// The DCGM exporter's name for a signal.
pub fn dcgm_name(signal: Signal) -> &'static str {
    names_of(Engine::Dcgm, signal)
        .map(|n| n.name)
        .next()
        .unwrap_or("DCGM_FI_UNKNOWN")
}

/// A gauge or counter series, every known name: `a{sel} or b{sel}`.
pub fn series(signal: Signal, sel: &Sel) -> String {
    let names = vllm_names(signal);
    let read_sum = names_of(Engine::Vllm, signal).any(|n| n.read == Read::HistogramSum);
    names
        .iter()
        .map(|n| {
            if read_sum {
                format!("{n}_sum{}", sel.braces())
            } else {
                format!("{n}{}", sel.braces())
            }
        })
        .collect::<Vec<_>>()
        .join(" or ")
}

/// `rate()` of a counter over `window`, with name fallback.
pub fn rate(signal: Signal, sel: &Sel, window: &str) -> String {
    vllm_names(signal)
        .iter()
        .map(|n| format!("rate({n}{}[{window}])", sel.braces()))
        .collect::<Vec<_>>()
        .join(" or ")
}

/// `delta()` of a gauge over `window` (its change, extrapolated to the window's ends), with
/// name fallback.
pub fn delta(signal: Signal, sel: &Sel, window: &str) -> String {
    vllm_names(signal)
        .iter()
        .map(|n| format!("delta({n}{}[{window}])", sel.braces()))
        .collect::<Vec<_>>()
        .join(" or ")
}

/// Requests in flight on the selected pods: running plus waiting, one series (empty when
/// either is missing, so that a trigger reading it errs rather than reads 0).
pub fn in_flight(sel: &Sel) -> String {
    format!(
        "sum({}) + sum({})",
        series(Signal::Running, sel),
        series(Signal::QueueDepth, sel)
    )
}

/// Requests arriving per second on the selected pods, over `window_s`: those that ended
/// (however they ended) plus the growth of those in flight (requests are conserved), so a
/// load the pods cannot serve still shows in full.
pub fn arrival_rate(sel: &Sel, window_s: u32) -> String {
    let w = format!("{}m", window_s / 60);
    format!(
        "sum({})\n+ (sum({}) + sum({})) / {window_s}",
        rate(Signal::RequestsOk, sel, &w),
        delta(Signal::Running, sel, &w),
        delta(Signal::QueueDepth, sel, &w)
    )
}

/// `expr` (one series) predicted `horizon_s` seconds ahead by a straight line through its
/// last five minutes (sampled every 15 s, a Prometheus scrape): `predict_linear` over a
/// subquery, once the window holds four minutes of samples; before (a deployment that just
/// started, whose first samples would make any line steep) `expr` itself. The result is
/// always the one series `expr` is.
pub fn ahead(expr: &str, horizon_s: u32) -> String {
    format!(
        "(\n  sum(predict_linear(({expr})[5m:15s], {horizon_s}))\n  and on()\n  sum(count_over_time(({expr})[5m:15s])) >= 16\n)\nor on() ({expr})"
    )
}

/// The bucket rates of a histogram summed by `le` (and `by`), with name fallback.
pub fn bucket_rate(signal: Signal, sel: &Sel, window: &str, by: &[&str]) -> String {
    let inner = vllm_names(signal)
        .iter()
        .map(|n| format!("rate({n}_bucket{}[{window}])", sel.braces()))
        .collect::<Vec<_>>()
        .join(" or ");
    let mut labels: Vec<&str> = by.to_vec();
    labels.push("le");
    format!("sum by ({}) ({inner})", labels.join(", "))
}

/// The request rate of a histogram (`_count`), summed (and by `by`).
pub fn count_rate(signal: Signal, sel: &Sel, window: &str, by: &[&str]) -> String {
    let inner = vllm_names(signal)
        .iter()
        .map(|n| format!("rate({n}_count{}[{window}])", sel.braces()))
        .collect::<Vec<_>>()
        .join(" or ");
    if by.is_empty() {
        format!("sum({inner})")
    } else {
        format!("sum by ({}) ({inner})", by.join(", "))
    }
}

/// `histogram_quantile(q, …)` over a histogram's buckets.
pub fn quantile(q: f64, signal: Signal, sel: &Sel, window: &str, by: &[&str]) -> String {
    format!(
        "histogram_quantile({q}, {})",
        bucket_rate(signal, sel, window, by)
    )
}

/// A quantile that is never NaN: with no requests in the window `histogram_quantile` returns
/// NaN (0/0), which `or vector(0)` does not replace because the vector is not empty. Keeping the
/// quantile only where requests were counted empties it instead, and then `or vector(0)` fills
/// in 0 — the right reading for "nobody waited".
pub fn quantile_or_zero(q: f64, signal: Signal, sel: &Sel, window: &str) -> String {
    format!(
        "(\n  {}\n  and on() {} > 0\n)\nor on() vector(0)",
        quantile(q, signal, sel, window, &[]),
        count_rate(signal, sel, window, &[])
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_come_from_the_catalog_with_fallbacks() {
        let sel = Sel::exact(&[("namespace", "llm"), ("model_name", "m\"x")]);
        assert_eq!(sel.0, "namespace=\"llm\",model_name=\"m\\\"x\"");
        let kv = series(Signal::KvCacheUsage, &sel);
        assert!(kv.starts_with("vllm:kv_cache_usage_perc{"), "{kv}");
        assert!(kv.contains(" or vllm:gpu_cache_usage_perc{"), "{kv}");
        let q = quantile(0.95, Signal::E2eLatency, &sel, "1m", &[]);
        assert!(
            q.contains("rate(vllm:e2e_request_latency_seconds_bucket{"),
            "{q}"
        );
        let itl = bucket_rate(Signal::Itl, &Sel(String::new()), "5m", &["pod"]);
        assert!(
            itl.contains("vllm:inter_token_latency_seconds_bucket"),
            "{itl}"
        );
        assert!(
            itl.contains("vllm:time_per_output_token_seconds_bucket"),
            "{itl}"
        );
        assert!(itl.starts_with("sum by (pod, le)"), "{itl}");
    }
}
