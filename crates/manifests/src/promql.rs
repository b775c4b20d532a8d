//! PromQL built from the catalog's names, so that every query reads vLLM's current metric
//! name and falls back to the deprecated one (`a or b`), and a selector written once.

use inferscale_catalog::{Engine, Read, Signal, names_of};

/// Label matchers, e.g. `namespace="llm",model_name="m"` (without braces), and the engine
/// whose metrics they select: every query built from a `Sel` spells that engine's names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sel {
    matchers: String,
    engine: Engine,
}

impl Sel {
    /// Exact matchers from `(label, value)` pairs, selecting vLLM's metrics.
    pub fn exact(pairs: &[(&str, &str)]) -> Sel {
        Sel::raw(
            pairs
                .iter()
                .map(|(k, v)| format!("{k}={}", inferscale_promql::quote(v)))
                .collect::<Vec<_>>()
                .join(","),
        )
    }

    /// Matchers written out (`a="b",c=~"d"`), selecting vLLM's metrics.
    pub fn raw(matchers: impl Into<String>) -> Sel {
        Sel {
            matchers: matchers.into(),
            engine: Engine::Vllm,
        }
    }

    /// One model's series in a namespace: `namespace` and, where the engine labels its
    /// series with the model ([`Engine::model_label`]), the model's name.
    pub fn model(engine: Engine, namespace: &str, model: &str) -> Sel {
        let sel = Sel::exact(&[("namespace", namespace)]).of(engine);
        match engine.model_label() {
            Some(label) => sel.and(&format!("{label}={}", inferscale_promql::quote(model))),
            None => sel,
        }
    }

    /// The same matchers, selecting `engine`'s metrics.
    pub fn of(mut self, engine: Engine) -> Sel {
        self.engine = engine;
        self
    }

    /// The engine whose names the queries spell.
    pub fn engine(&self) -> Engine {
        self.engine
    }

    /// The matchers, without braces.
    pub fn matchers(&self) -> &str {
        &self.matchers
    }

    /// Whether the engine serves `signal` at all (a query for one it does not serve could
    /// only return nothing, so callers substitute or leave it out).
    pub fn serves(&self, signal: Signal) -> bool {
        self.engine.serves(signal)
    }

    /// These matchers plus one more.
    pub fn and(&self, extra: &str) -> Sel {
        let matchers = if self.matchers.is_empty() {
            extra.to_owned()
        } else {
            format!("{},{extra}", self.matchers)
        };
        Sel {
            matchers,
            engine: self.engine,
        }
    }

    /// The matchers in braces, `{a="b"}` (empty braces when there are none).
    pub fn braces(&self) -> String {
        format!("{{{}}}", self.matchers)
    }
}

/// vLLM's names for a signal, current first.
pub fn vllm_names(signal: Signal) -> Vec<&'static str> {
    names_of(Engine::Vllm, signal).map(|n| n.name).collect()
}

/// The sample names `sel`'s engine serves `signal` under, current first: a histogram's
/// `_sum` where the signal is a token total read from one (TGI's input lengths, say).
fn samples(signal: Signal, sel: &Sel) -> Vec<String> {
    names_of(sel.engine, signal)
        .map(|n| {
            if n.read == Read::HistogramSum {
                format!("{}_sum", n.name)
            } else {
                n.name.to_owned()
            }
        })
        .collect()
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
    samples(signal, sel)
        .iter()
        .map(|n| format!("{n}{}", sel.braces()))
        .collect::<Vec<_>>()
        .join(" or ")
}

/// `rate()` of a counter over `window`, with name fallback.
pub fn rate(signal: Signal, sel: &Sel, window: &str) -> String {
    samples(signal, sel)
        .iter()
        .map(|n| format!("rate({n}{}[{window}])", sel.braces()))
        .collect::<Vec<_>>()
        .join(" or ")
}

/// `delta()` of a gauge over `window` (its change, extrapolated to the window's ends), with
/// name fallback.
pub fn delta(signal: Signal, sel: &Sel, window: &str) -> String {
    samples(signal, sel)
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

/// A selector for an inference gateway's endpoint picker `family` serving the pool named
/// `pool` in `namespace`: by the pool's label where the family carries it, else by the
/// picker's Service (`<pool>-epp`, the target label Prometheus gives its series).
pub fn epp_sel(
    family: &inferscale_catalog::gateway::GatewayFamily,
    namespace: &str,
    pool: &str,
) -> Sel {
    if family.labels.contains(&"inference_pool") {
        Sel::exact(&[("namespace", namespace), ("inference_pool", pool)])
    } else {
        Sel::exact(&[
            ("namespace", namespace),
            ("service", &format!("{pool}-epp")),
        ])
    }
}

/// `agg` over the endpoint picker's `signal` for the pool `pool` in `namespace`.
pub fn epp(
    agg: &str,
    signal: inferscale_catalog::gateway::GatewaySignal,
    namespace: &str,
    pool: &str,
) -> String {
    let f = inferscale_catalog::gateway::family(signal);
    format!("{agg}({}{})", f.name, epp_sel(f, namespace, pool).braces())
}

/// Requests in flight at the endpoint picker: those it dispatched and that have not finished,
/// plus those its flow control holds (0 where flow control is off and serves no queue).
pub fn epp_in_flight(namespace: &str, pool: &str) -> String {
    use inferscale_catalog::gateway::GatewaySignal as G;
    format!(
        "{} + ({} or vector(0))",
        epp("sum", G::Running, namespace, pool),
        epp("sum", G::QueueHeld, namespace, pool)
    )
}

/// The `q`-quantile of the endpoint picker's histogram `signal` over `window`, for the pool.
pub fn epp_quantile(
    q: f64,
    signal: inferscale_catalog::gateway::GatewaySignal,
    namespace: &str,
    pool: &str,
    window: &str,
) -> String {
    let f = inferscale_catalog::gateway::family(signal);
    format!(
        "histogram_quantile({q}, sum by (le) (rate({}_bucket{}[{window}])))",
        f.name,
        epp_sel(f, namespace, pool).braces()
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

/// [`arrival_rate`] for an engine that counts no finished requests (llama.cpp): the
/// generated tokens per second over the `tokens_per_request` a request generates on average
/// (what finished), plus the growth of what is in flight.
pub fn arrival_rate_by_tokens(sel: &Sel, window_s: u32, tokens_per_request: f64) -> String {
    let w = format!("{}m", window_s / 60);
    format!(
        "sum({}) / {:.2}\n+ (sum({}) + sum({})) / {window_s}",
        rate(Signal::GenerationTokens, sel, &w),
        tokens_per_request.max(0.01),
        delta(Signal::Running, sel, &w),
        delta(Signal::QueueDepth, sel, &w)
    )
}

/// `expr` (one series) predicted `horizon_s` seconds ahead by a straight line through its
/// last `window_s` seconds (sampled every 15 s, a Prometheus scrape): `predict_linear` over a
/// subquery, once the window holds four fifths of its samples; before (a deployment that
/// just started, whose first samples would make any line steep) `expr` itself. The result
/// is always the one series `expr` is.
pub fn ahead(expr: &str, horizon_s: u32, window_s: u32) -> String {
    let w = duration(window_s);
    let samples = (window_s * 4).div_ceil(5 * 15);
    format!(
        "(\n  sum(predict_linear(({expr})[{w}:15s], {horizon_s}))\n  and on()\n  sum(count_over_time(({expr})[{w}:15s])) >= {samples}\n)\nor on() ({expr})"
    )
}

/// Seconds as a PromQL duration: whole minutes as `5m`, else `90s`.
fn duration(s: u32) -> String {
    if s.is_multiple_of(60) {
        format!("{}m", s / 60)
    } else {
        format!("{s}s")
    }
}

/// The bucket rates of a histogram summed by `le` (and `by`), with name fallback.
pub fn bucket_rate(signal: Signal, sel: &Sel, window: &str, by: &[&str]) -> String {
    let inner = names_of(sel.engine, signal)
        .map(|n| format!("rate({}_bucket{}[{window}])", n.name, sel.braces()))
        .collect::<Vec<_>>()
        .join(" or ");
    let mut labels: Vec<&str> = by.to_vec();
    labels.push("le");
    format!("sum by ({}) ({inner})", labels.join(", "))
}

/// The request rate of a histogram (`_count`), summed (and by `by`).
pub fn count_rate(signal: Signal, sel: &Sel, window: &str, by: &[&str]) -> String {
    let inner = names_of(sel.engine, signal)
        .map(|n| format!("rate({}_count{}[{window}])", n.name, sel.braces()))
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
        assert_eq!(sel.matchers(), "namespace=\"llm\",model_name=\"m\\\"x\"");
        let kv = series(Signal::KvCacheUsage, &sel);
        assert!(kv.starts_with("vllm:kv_cache_usage_perc{"), "{kv}");
        assert!(kv.contains(" or vllm:gpu_cache_usage_perc{"), "{kv}");
        let q = quantile(0.95, Signal::E2eLatency, &sel, "1m", &[]);
        assert!(
            q.contains("rate(vllm:e2e_request_latency_seconds_bucket{"),
            "{q}"
        );
        let itl = bucket_rate(Signal::Itl, &Sel::raw(""), "5m", &["pod"]);
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
