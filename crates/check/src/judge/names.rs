//! How the metric names a query reads stand against current vLLM and the DCGM exporter,
//! from the catalog: current, deprecated (served by older releases only) or unknown (removed,
//! or never served by the V1 engine).

use std::collections::BTreeSet;

use inferscale_catalog::{Engine, NameStatus, Signal, Tier, names_of};
use inferscale_promql::Query;

use crate::evidence::{Doc, Evidence, Manifests};

/// How a metric name in a query stands against current vLLM (and the DCGM exporter).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Standing {
    /// Served by current releases; the signal, when the catalog has one.
    Current(Option<Signal>),
    /// Served by older releases only.
    Deprecated(Signal),
    /// A `vllm:` name no release in the catalog serves (removed, or never in V1).
    Unknown,
}

/// A query's metric name without its histogram sample suffix.
pub(super) fn base(name: &str) -> &str {
    ["_bucket", "_sum", "_count"]
        .iter()
        .find_map(|s| name.strip_suffix(s))
        .unwrap_or(name)
}

/// `None` for names that are no engine's nor DCGM's (`up`, `http_requests_total`, …). Other
/// engines' names are judged against the catalog's names for them: a known one carries its
/// signal, an unknown one is taken as current (the catalog lists what the method reads, not
/// every family those engines serve).
pub(super) fn standing(name: &str) -> Option<Standing> {
    if let Some(other) = Engine::ALL
        .into_iter()
        .find(|e| *e != Engine::Vllm && *e != Engine::Dcgm && e.owns(name))
    {
        let b = base(name);
        let signal = Signal::ALL
            .into_iter()
            .find(|s| names_of(other, *s).any(|m| m.name == b || m.name == name));
        return Some(Standing::Current(signal));
    }
    if !(Engine::Vllm.owns(name) || Engine::Dcgm.owns(name)) {
        return None;
    }
    let b = base(name);
    let entry = Signal::ALL.iter().find_map(|s| {
        [Engine::Vllm, Engine::Dcgm]
            .into_iter()
            .flat_map(|en| names_of(en, *s))
            .find(|m| m.name == b || m.name == name)
    });
    Some(match entry {
        Some(m) if m.status == NameStatus::Deprecated => Standing::Deprecated(m.signal),
        Some(m) => Standing::Current(Some(m.signal)),
        None if inferscale_catalog::vllm::family(b).is_some()
            || inferscale_catalog::vllm::family(name).is_some()
            || name.starts_with(inferscale_catalog::vllm::CACHE_CONFIG_INFO_NAME)
            || inferscale_catalog::vllm::is_newer_or_kv_transfer(name) =>
        {
            Standing::Current(None)
        }
        // DCGM fields beyond the catalog's are many and stable: not judged.
        None if Engine::Dcgm.owns(name) => Standing::Current(None),
        None => Standing::Unknown,
    })
}

/// Every signal an engine's or DCGM's name carries in the catalog.
pub(super) fn signals_of(name: &str) -> Vec<Signal> {
    let b = base(name);
    Signal::ALL
        .into_iter()
        .filter(|s| {
            Engine::ALL
                .into_iter()
                .flat_map(|en| names_of(en, *s))
                .any(|m| m.name == b || m.name == name)
        })
        .collect()
}

/// What a query reads, judged.
#[derive(Debug, Default)]
pub(super) struct QueryNames {
    /// Every vLLM or DCGM name it reads.
    pub(super) names: Vec<String>,
    /// Its current names' tiers.
    pub(super) tiers: BTreeSet<u8>,
    /// It reads engine names and none is current.
    pub(super) dead: bool,
    /// Its deprecated names that have no current name beside them in the query.
    pub(super) deprecated_only: Vec<String>,
    /// Its unknown names.
    pub(super) unknown: Vec<String>,
}

pub(super) fn tier_no(t: Tier) -> u8 {
    match t {
        Tier::Service => 1,
        Tier::Engine => 2,
        Tier::Gpu => 3,
    }
}

/// A query's names, judged. A query that does not parse is `None`.
pub(super) fn query_names(q: &str) -> Option<QueryNames> {
    let vars: Vec<(String, String)> = inferscale_manifests::variables_in(q)
        .into_iter()
        .map(|v| {
            let value = if inferscale_manifests::GRAFANA_INTERVALS.contains(&v.as_str()) {
                "1m".to_owned()
            } else {
                "x".to_owned()
            };
            (v, value)
        })
        .collect();
    let parsed = Query::parse(&inferscale_manifests::with_variables(q, &vars)).ok()?;
    let mut out = QueryNames::default();
    let mut current_signals = BTreeSet::new();
    let mut any_current = false;
    let mut deprecated: Vec<(String, Signal)> = Vec::new();
    for n in parsed.metric_names() {
        let Some(st) = standing(&n) else { continue };
        out.names.push(n.clone());
        match st {
            Standing::Current(sig) => {
                any_current = true;
                if let Some(s) = sig {
                    current_signals.insert(s);
                    out.tiers.insert(tier_no(s.tier()));
                } else if n.starts_with("DCGM_FI_") {
                    out.tiers.insert(3);
                }
            }
            Standing::Deprecated(s) => deprecated.push((n, s)),
            Standing::Unknown => out.unknown.push(n),
        }
    }
    out.dead = !out.names.is_empty() && !any_current;
    // A deprecated name is a fallback when a current name in the query carries any signal
    // the deprecated one carries (vLLM's old per-token histogram stands for both TPOT and
    // ITL).
    out.deprecated_only = deprecated
        .into_iter()
        .filter(|(n, _)| !signals_of(n).iter().any(|s| current_signals.contains(s)))
        .map(|(n, _)| n)
        .collect();
    Some(out)
}

/// Every dashboard query and rule expression, with where it is.
pub(super) fn queries_of(m: &Manifests) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for f in &m.docs {
        match &f.doc {
            Doc::Dashboard { title, queries } => {
                for q in queries {
                    out.push((format!("{} (dashboard {title:?})", f.path), q.clone()));
                }
            }
            Doc::Rules(Ok(set)) => {
                for r in &set.rules {
                    out.push((
                        format!("{} (alert {})", f.path, r.name),
                        r.query.text().to_owned(),
                    ));
                }
            }
            _ => {}
        }
    }
    out
}

/// Whether a query shows nothing: it reads no current name, and the server (when known)
/// serves none of its names either (an older vLLM still serves the deprecated ones).
pub(super) fn blind(n: &QueryNames, e: &Evidence) -> bool {
    n.dead
        && !matches!(&e.metrics, Some((_, Ok(s))) if n.names.iter().any(|x| s.has(base(x)) || s.has(x)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_judged_against_the_catalog() {
        assert_eq!(
            standing("vllm:kv_cache_usage_perc"),
            Some(Standing::Current(Some(Signal::KvCacheUsage)))
        );
        assert_eq!(
            standing("vllm:gpu_cache_usage_perc"),
            Some(Standing::Deprecated(Signal::KvCacheUsage))
        );
        assert_eq!(
            standing("vllm:e2e_request_latency_seconds_bucket"),
            Some(Standing::Current(Some(Signal::E2eLatency)))
        );
        // vLLM 0.34's render histogram and the KV-offload families are known, not removed.
        assert_eq!(
            standing("vllm:request_render_duration_seconds_bucket"),
            Some(Standing::Current(None))
        );
        assert_eq!(
            standing("vllm:kv_offload_bytes_total"),
            Some(Standing::Current(None))
        );
        assert_eq!(
            standing("vllm:avg_generation_throughput_toks_per_s"),
            Some(Standing::Unknown)
        );
        assert_eq!(standing("up"), None);
        let q = query_names("vllm:kv_cache_usage_perc or vllm:gpu_cache_usage_perc").unwrap();
        assert!(!q.dead && q.deprecated_only.is_empty());
        let q = query_names("avg(vllm:gpu_cache_usage_perc{model_name=\"$model\"})").unwrap();
        assert!(q.dead && q.deprecated_only == ["vllm:gpu_cache_usage_perc"]);
        let q =
            query_names("sum(rate(vllm:avg_generation_throughput_toks_per_s[$__rate_interval]))")
                .unwrap();
        assert!(q.dead && q.unknown.len() == 1);
        let q = query_names(
            "rate(vllm:inter_token_latency_seconds_bucket[1m]) or rate(vllm:time_per_output_token_seconds_bucket[1m])",
        )
        .unwrap();
        assert!(q.deprecated_only.is_empty(), "{q:?}");
        let q = query_names("DCGM_FI_DEV_GPU_UTIL").unwrap();
        assert!(q.tiers.contains(&3));
    }
}
