//! What the monitor shows, as PromQL: the same expressions whether they are evaluated over
//! the pods' own scrapes (the in-process evaluator) or by a Prometheus (its HTTP API), so
//! the two sources cannot disagree on what a panel means.
//!
//! Every name comes from the catalog through `inferscale_manifests::promql`, current name
//! first and the deprecated ones as `or` fallbacks, exactly as the generated dashboards and
//! alerts read them.

use inferscale_catalog::Signal;
use inferscale_manifests::promql::{self as q, Sel};
use inferscale_promql::Query;

/// A percentile the latency panels show.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Pct {
    /// p50.
    P50,
    /// p95.
    P95,
    /// p99.
    P99,
}

impl Pct {
    /// All three, in order.
    pub const ALL: [Pct; 3] = [Pct::P50, Pct::P95, Pct::P99];

    fn q(self) -> f64 {
        match self {
            Pct::P50 => 0.5,
            Pct::P95 => 0.95,
            Pct::P99 => 0.99,
        }
    }
}

/// A latency the service panel shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Latency {
    /// Time to first token.
    Ttft,
    /// Time per output token.
    Tpot,
    /// End to end.
    E2e,
}

impl Latency {
    /// All three, in the panel's order.
    pub const ALL: [Latency; 3] = [Latency::Ttft, Latency::Tpot, Latency::E2e];

    fn signal(self) -> Signal {
        match self {
            Latency::Ttft => Signal::Ttft,
            Latency::Tpot => Signal::Tpot,
            Latency::E2e => Signal::E2eLatency,
        }
    }
}

/// One value the monitor reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Metric {
    /// Requests waiting, all replicas.
    Queue,
    /// Requests running, all replicas.
    Running,
    /// Requests finished per second.
    Rps,
    /// Share of the OpenAI API's answers that were 5xx.
    ErrorRate,
    /// A latency percentile over the window.
    Latency(Latency, Pct),
    /// KV-cache usage, mean over replicas (0–1).
    KvMean,
    /// KV-cache usage, the fullest replica (0–1).
    KvMax,
    /// Preemptions per second.
    Preemptions,
    /// Prompt tokens per second.
    PromptTokens,
    /// Generated tokens per second.
    GenerationTokens,
    /// Tokens per engine step, mean over the window.
    TokensPerStep,
    /// `up` per replica.
    ReplicaUp,
    /// Waiting, per replica.
    ReplicaQueue,
    /// Running, per replica.
    ReplicaRunning,
    /// Finished per second, per replica.
    ReplicaRps,
    /// KV-cache usage, per replica.
    ReplicaKv,
    /// p95 end-to-end latency, per replica.
    ReplicaE2eP95,
    /// GPU utilisation (%), per GPU.
    GpuUtil,
    /// Memory-copy utilisation (%), per GPU.
    MemCopyUtil,
    /// Framebuffer used (MiB), per GPU.
    FbUsed,
    /// Framebuffer free (MiB), per GPU.
    FbFree,
    /// Power (W), per GPU.
    Power,
    /// Temperature (°C), per GPU.
    Temperature,
    /// Single-bit ECC errors since the driver loaded, per GPU.
    EccSbe,
}

/// Which series the monitor reads.
#[derive(Debug, Clone)]
pub struct Scope {
    /// Label matchers of the engine's series (`namespace="llm"`), without braces.
    pub engine: String,
    /// Label matchers of the replicas' `up` series.
    pub up: String,
    /// Label matchers of the GPU exporter's series.
    pub gpu: String,
    /// The window of rates and percentiles (`1m`).
    pub window: String,
    /// The label that names a replica (`pod`).
    pub replica_label: String,
    /// The engine whose names the queries spell; what it does not serve is not asked for
    /// (and shows as missing).
    pub server: inferscale_catalog::Engine,
}

/// The signal a metric reads from the engine, if any (`None`: `up` and the GPU's).
fn engine_signal(m: Metric) -> Option<Signal> {
    Some(match m {
        Metric::Queue | Metric::ReplicaQueue => Signal::QueueDepth,
        Metric::Running | Metric::ReplicaRunning => Signal::Running,
        Metric::Rps | Metric::ReplicaRps | Metric::ReplicaE2eP95 => Signal::E2eLatency,
        Metric::Latency(l, _) => l.signal(),
        Metric::KvMean | Metric::KvMax | Metric::ReplicaKv => Signal::KvCacheUsage,
        Metric::Preemptions => Signal::Preemptions,
        Metric::PromptTokens => Signal::PromptTokens,
        Metric::GenerationTokens => Signal::GenerationTokens,
        Metric::TokensPerStep => Signal::IterationTokens,
        _ => return None,
    })
}

/// The labels a GPU row is grouped by: the exporter's own (released exporters write
/// `Hostname`, newer builds `hostname`; whichever is there names the row).
pub const GPU_LABELS: [&str; 3] = ["Hostname", "hostname", "gpu"];

/// Every query of one refresh, in a fixed order.
#[derive(Debug, Clone)]
pub struct Plan {
    /// What each query reads, and the query.
    pub items: Vec<(Metric, Query)>,
}

/// The error-rate expression: 5xx answers of the OpenAI API over all of its answers.
fn error_rate(sel: &Sel, window: &str) -> String {
    let http = inferscale_catalog::vllm::HTTP_REQUESTS;
    let all = sel.and("handler=~\"/v1/.*\"");
    let bad = all.and("status=\"5xx\"");
    format!(
        "sum(rate({http}{}[{window}])) / sum(rate({http}{}[{window}]))",
        bad.braces(),
        all.braces()
    )
}

impl Plan {
    /// The queries for `scope`.
    ///
    /// # Errors
    ///
    /// When a matcher in `scope` does not make a valid query (the text, and why).
    pub fn new(scope: &Scope) -> Result<Plan, inferscale_promql::ParseError> {
        let sel = Sel::raw(scope.engine.clone()).of(scope.server);
        let gsel = Sel::raw(scope.gpu.clone());
        let w = scope.window.as_str();
        let r = scope.replica_label.as_str();
        let mut items: Vec<(Metric, String)> = vec![
            (
                Metric::Queue,
                format!("sum({})", q::series(Signal::QueueDepth, &sel)),
            ),
            (
                Metric::Running,
                format!("sum({})", q::series(Signal::Running, &sel)),
            ),
            (Metric::Rps, q::count_rate(Signal::E2eLatency, &sel, w, &[])),
            (Metric::ErrorRate, error_rate(&sel, w)),
        ];
        for l in Latency::ALL {
            for p in Pct::ALL {
                items.push((
                    Metric::Latency(l, p),
                    q::quantile(p.q(), l.signal(), &sel, w, &[]),
                ));
            }
        }
        let kv = q::series(Signal::KvCacheUsage, &sel);
        let step_sum = |suffix: &str| {
            inferscale_catalog::names_of(scope.server, Signal::IterationTokens)
                .map(|n| format!("rate({}_{suffix}{}[{w}])", n.name, sel.braces()))
                .collect::<Vec<_>>()
                .join(" or ")
        };
        items.extend([
            (Metric::KvMean, format!("avg({kv})")),
            (Metric::KvMax, format!("max({kv})")),
            (
                Metric::Preemptions,
                format!("sum({})", q::rate(Signal::Preemptions, &sel, w)),
            ),
            (
                Metric::PromptTokens,
                format!("sum({})", q::rate(Signal::PromptTokens, &sel, w)),
            ),
            (
                Metric::GenerationTokens,
                format!("sum({})", q::rate(Signal::GenerationTokens, &sel, w)),
            ),
            (
                Metric::TokensPerStep,
                format!("sum({}) / sum({})", step_sum("sum"), step_sum("count")),
            ),
            (
                Metric::ReplicaUp,
                format!("max by ({r}) (up{{{}}})", scope.up),
            ),
            (
                Metric::ReplicaQueue,
                format!("sum by ({r}) ({})", q::series(Signal::QueueDepth, &sel)),
            ),
            (
                Metric::ReplicaRunning,
                format!("sum by ({r}) ({})", q::series(Signal::Running, &sel)),
            ),
            (
                Metric::ReplicaRps,
                q::count_rate(Signal::E2eLatency, &sel, w, &[r]),
            ),
            (Metric::ReplicaKv, format!("max by ({r}) ({kv})")),
            (
                Metric::ReplicaE2eP95,
                q::quantile(0.95, Signal::E2eLatency, &sel, w, &[r]),
            ),
        ]);
        let by = GPU_LABELS.join(", ");
        for (m, s) in [
            (Metric::GpuUtil, Signal::GpuUtil),
            (Metric::MemCopyUtil, Signal::MemCopyUtil),
            (Metric::FbUsed, Signal::FbUsed),
            (Metric::FbFree, Signal::FbFree),
            (Metric::Power, Signal::Power),
            (Metric::Temperature, Signal::GpuTemp),
            (Metric::EccSbe, Signal::EccSbeVolatile),
        ] {
            items.push((
                m,
                format!("max by ({by}) ({}{})", q::dcgm_name(s), gsel.braces()),
            ));
        }
        let served = |m: Metric| match m {
            // vLLM's HTTP counters (prometheus-fastapi-instrumentator).
            Metric::ErrorRate => scope.server == inferscale_catalog::Engine::Vllm,
            m => engine_signal(m).is_none_or(|s| sel.serves(s)),
        };
        let items = items
            .into_iter()
            .filter(|(m, _)| served(*m))
            .map(|(m, text)| Query::parse(&text).map(|q| (m, q)))
            .collect::<Result<_, _>>()?;
        Ok(Plan { items })
    }

    /// The longest range any query or `extra` reads, in seconds (what the series store must
    /// keep).
    pub fn longest_range_s<'a>(&self, extra: impl IntoIterator<Item = &'a Query>) -> f64 {
        let own = self.items.iter().map(|(_, q)| ranges(q.text()));
        own.chain(extra.into_iter().map(|q| ranges(q.text())))
            .fold(0.0, f64::max)
    }
}

/// The longest `[…]` range written in a query's text, in seconds (0 when none).
fn ranges(text: &str) -> f64 {
    let mut longest: f64 = 0.0;
    let mut rest = text;
    while let Some(open) = rest.find('[') {
        rest = &rest[open + 1..];
        let Some(close) = rest.find(']') else { break };
        // A subquery's `[5m:30s]`: its range is before the colon.
        let inner = rest[..close].split(':').next().unwrap_or("");
        if let Ok(d) = inferscale_catalog::units::parse_duration(inner) {
            longest = longest.max(d.as_secs_f64());
        }
        rest = &rest[close..];
    }
    longest
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scope() -> Scope {
        Scope {
            server: inferscale_catalog::Engine::Vllm,
            engine: "namespace=\"llm\"".into(),
            up: "namespace=\"llm\",job=\"vllm\"".into(),
            gpu: String::new(),
            window: "1m".into(),
            replica_label: "pod".into(),
        }
    }

    #[test]
    fn every_query_parses_and_reads_the_catalogs_names() {
        let plan = Plan::new(&scope()).unwrap();
        let text = |m: Metric| {
            plan.items
                .iter()
                .find(|(x, _)| *x == m)
                .map(|(_, q)| q.text().to_owned())
                .unwrap()
        };
        assert_eq!(
            text(Metric::Queue),
            "sum(vllm:num_requests_waiting{namespace=\"llm\"})"
        );
        // The deprecated KV name is a fallback, as in the generated rules.
        assert!(text(Metric::KvMax).contains(" or vllm:gpu_cache_usage_perc{"));
        assert!(
            text(Metric::Latency(Latency::E2e, Pct::P95))
                .starts_with("histogram_quantile(0.95, sum by (le) (rate(vllm:e2e_request_latency_seconds_bucket{namespace=\"llm\"}[1m])")
        );
        assert_eq!(
            text(Metric::ReplicaUp),
            "max by (pod) (up{namespace=\"llm\",job=\"vllm\"})"
        );
        assert!(
            text(Metric::GpuUtil)
                .starts_with("max by (Hostname, hostname, gpu) (DCGM_FI_DEV_GPU_UTIL")
        );
        assert_eq!(plan.longest_range_s([]), 60.0);
        let rule = Query::parse("rate(x[5m]) > 1 or max_over_time(y[10m:1m])").unwrap();
        assert_eq!(plan.longest_range_s([&rule]), 600.0);
    }

    #[test]
    fn a_bad_matcher_is_refused() {
        let mut s = scope();
        s.engine = "namespace=".into();
        assert!(Plan::new(&s).is_err());
    }
}
