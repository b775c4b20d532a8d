//! The checks on what runs: the server's `/metrics`, the DCGM exporter, the Prometheus.

use inferscale_catalog::{Engine, NameStatus, Signal, names_of};

use super::names::{base, queries_of, query_names};
use super::{fail, pass, short, skipped, warn};
use crate::evidence::{Evidence, Served};
use crate::{Check, Outcome};

/// The vLLM signals a server must serve for the dashboards, alerts and autoscaling.
pub(super) const REQUIRED: [Signal; 10] = [
    Signal::QueueDepth,
    Signal::Running,
    Signal::E2eLatency,
    Signal::Ttft,
    Signal::Itl,
    Signal::QueueTime,
    Signal::KvCacheUsage,
    Signal::Preemptions,
    Signal::PromptTokens,
    Signal::GenerationTokens,
];

pub(super) fn metrics_exposed(e: &Evidence) -> Outcome {
    let c = Check::MetricsExposed;
    let Some((url, served)) = &e.metrics else {
        return skipped(c, "no --url given");
    };
    let served = match served {
        Ok(s) => s,
        Err(why) => {
            return fail(
                c,
                format!("{url} did not answer: {why}"),
                "start vLLM with its metrics on (they are by default, on the API port); check the Service port and --url",
            );
        }
    };
    let engine = e.engine;
    if let Some(other) = served
        .engines
        .iter()
        .find(|x| **x != Engine::Dcgm)
        .filter(|x| **x != engine)
    {
        return fail(
            c,
            format!(
                "{url} serves {}'s metrics, not {}'s ({}): the manifests' queries would read nothing",
                other.title(),
                engine.title(),
                e.engine_from
            ),
            format!(
                "regenerate the manifests with inferscale generate --engine {}, or point --url at the {} pods",
                other.key(),
                engine.title()
            ),
        );
    }
    let mut missing = Vec::new();
    let mut old = Vec::new();
    let required: Vec<Signal> = REQUIRED.into_iter().filter(|s| engine.serves(*s)).collect();
    for s in required.iter().copied() {
        let names: Vec<_> = names_of(engine, s).collect();
        let current = names
            .iter()
            .any(|n| n.status != NameStatus::Deprecated && served.has(n.name));
        let deprecated = names
            .iter()
            .find(|n| n.status == NameStatus::Deprecated && served.has(n.name));
        match (current, deprecated) {
            (true, _) => {}
            (false, Some(d)) => old.push(d.name.to_owned()),
            (false, None) => missing.push(names.first().map_or("?", |n| n.name).to_owned()),
        }
    }
    if !missing.is_empty() {
        return fail(
            c,
            format!(
                "{url} does not serve {} (is it {}? it serves them all)",
                short(&missing, 4),
                engine.title()
            ),
            format!(
                "point --url at the {} pods' API port; a gateway's /metrics is not the engine's",
                engine.title()
            ),
        );
    }
    // Dashboards and rules still written against renamed metrics.
    let mut stale: Vec<String> = Vec::new();
    if let Some(m) = &e.manifests {
        for (where_, q) in queries_of(m) {
            if let Some(n) = query_names(&q)
                && !n.deprecated_only.is_empty()
            {
                stale.push(format!("{where_}: {}", short(&n.deprecated_only, 2)));
            }
        }
    }
    let served_count = required.len();
    if !old.is_empty() {
        return warn(
            c,
            format!(
                "{url} serves the {served_count} required families, {} only under deprecated names: an upgrade removes them",
                short(&old, 3)
            ),
            "upgrade vLLM, and read the current names (inferscale generate writes both)",
        );
    }
    if !stale.is_empty() {
        return warn(
            c,
            format!(
                "{url} serves the {served_count} required families; {} quer{} read deprecated names only: {}",
                stale.len(),
                if stale.len() == 1 { "y" } else { "ies" },
                short(&stale, 2)
            ),
            "replace vllm:gpu_cache_usage_perc with vllm:kv_cache_usage_perc and vllm:time_per_output_token_seconds with vllm:inter_token_latency_seconds (or regenerate with inferscale generate)",
        );
    }
    let lacks: Vec<&str> = REQUIRED
        .into_iter()
        .filter(|s| !engine.serves(*s))
        .map(Signal::label)
        .collect();
    pass(
        c,
        if lacks.is_empty() {
            format!(
                "{url} serves the {served_count} required {} families under their current names",
                engine.title()
            )
        } else {
            format!(
                "{url} serves the {served_count} {} families the method reads there ({} has no {}: the generated files substitute or leave them out)",
                engine.title(),
                engine.title(),
                lacks.join(", ")
            )
        },
    )
}

pub(super) fn prometheus_scrapes(e: &Evidence) -> Outcome {
    let c = Check::PrometheusScrapes;
    let Some(p) = &e.prometheus else {
        return skipped(c, "no --prometheus given");
    };
    let sel = format!(
        "namespace=\"{}\", job=\"{}\"",
        e.names.namespace, e.names.job
    );
    let fix_sel = format!(
        "make Prometheus scrape the vLLM pods with these labels (apply servicemonitor.yaml; its Service must be named {} in {}), or pass --namespace/--job",
        e.names.job, e.names.namespace
    );
    let up = match &p.up {
        Err(why) => {
            return fail(
                c,
                format!("{} did not answer: {why}", p.url),
                "check --prometheus",
            );
        }
        Ok(u) => u,
    };
    if up.is_empty() {
        return fail(c, format!("{} has no target with {sel}", p.url), fix_sel);
    }
    let n_up = up.iter().filter(|(_, v)| *v >= 1.0).count();
    if n_up == 0 {
        return fail(
            c,
            format!(
                "{} scrapes {} target(s) with {sel}, none of them up",
                p.url,
                up.len()
            ),
            "see Prometheus' /targets page for the scrape error (port, path, TLS, NetworkPolicy)",
        );
    }
    let waiting = names_of(e.engine, Signal::QueueDepth)
        .map(|n| n.name)
        .next()
        .unwrap_or_default();
    match &p.engine_series {
        Ok(s) if !s.is_empty() => pass(
            c,
            format!(
                "{} scrapes {n_up} of {} target(s) with {sel} up, with {} {waiting} series",
                p.url,
                up.len(),
                s.len()
            ),
        ),
        Ok(_) => fail(
            c,
            format!(
                "{} scrapes {sel}, but has no {waiting}{{namespace=\"{}\"}}: the scraped port is not {}'s",
                p.url,
                e.names.namespace,
                e.engine.title()
            ),
            format!(
                "point the ServiceMonitor's port at {}'s API port (its /metrics)",
                e.engine.title()
            ),
        ),
        Err(why) => fail(c, format!("{}: {why}", p.url), "check --prometheus"),
    }
}

pub(super) fn dcgm_exporter(e: &Evidence) -> Outcome {
    let c = Check::DcgmExporter;
    let util = inferscale_manifests::promql::dcgm_name(Signal::GpuUtil);
    let fb = inferscale_manifests::promql::dcgm_name(Signal::FbUsed);
    if let Some((url, served)) = &e.dcgm {
        return match served {
            Ok(s) if s.has(util) && s.has(fb) => pass(c, format!("{url} serves {util} and {fb}")),
            Ok(_) => fail(
                c,
                format!(
                    "{url} answers but serves neither {util} nor {fb}: not a DCGM exporter, or its counters file lacks them"
                ),
                "use dcgm-exporter's default counters (default-counters.csv)",
            ),
            Err(why) => fail(
                c,
                format!("{url} did not answer: {why}"),
                "install the DCGM exporter DaemonSet on the GPU nodes (the NVIDIA GPU Operator or its Helm chart)",
            ),
        };
    }
    match &e.prometheus {
        None => skipped(c, "neither --dcgm-url nor --prometheus given"),
        Some(p) => match &p.gpu_series {
            Ok(s) if !s.is_empty() => pass(c, format!("{} has {} {util} series", p.url, s.len())),
            Ok(_) => fail(
                c,
                format!(
                    "{} has no {util}: the DCGM exporter is not running or not scraped",
                    p.url
                ),
                "install the DCGM exporter and apply dcgm-servicemonitor.yaml",
            ),
            Err(why) => fail(c, format!("{}: {why}", p.url), "check --prometheus"),
        },
    }
}

pub(super) fn queries_read_served_metrics(e: &Evidence) -> Outcome {
    let c = Check::QueriesReadServedMetrics;
    let (Some(m), Some((url, Ok(served)))) = (&e.manifests, &e.metrics) else {
        return skipped(
            c,
            "needs --url (what the server serves) and manifests (what is read)",
        );
    };
    let gpu: Option<&Served> = match &e.dcgm {
        Some((_, Ok(s))) => Some(s),
        _ => None,
    };
    let mut blind = Vec::new();
    for (where_, q) in queries_of(m) {
        let Some(n) = query_names(&q) else { continue };
        let vllm: Vec<&String> = n
            .names
            .iter()
            .filter(|x| Engine::SERVING.iter().any(|en| en.owns(x)))
            .collect();
        let dcgm: Vec<&String> = n.names.iter().filter(|x| x.starts_with("DCGM_")).collect();
        let none_served = |names: &[&String], s: &Served| {
            !names.is_empty() && !names.iter().any(|x| s.has(base(x)) || s.has(x))
        };
        if none_served(&vllm, served) || gpu.is_some_and(|g| none_served(&dcgm, g)) {
            blind.push(format!("{where_}: {}", short(&n.names, 2)));
        }
    }
    if !blind.is_empty() {
        return warn(
            c,
            format!(
                "{} quer{} read metrics {url} does not serve: {}",
                blind.len(),
                if blind.len() == 1 { "y" } else { "ies" },
                short(&blind, 2)
            ),
            "match the names to the server's /metrics (inferscale scrape --url shows what it serves)",
        );
    }
    pass(
        c,
        format!("every dashboard query and alert reads metrics {url} serves"),
    )
}

pub(super) fn triggers_one_series(e: &Evidence) -> Outcome {
    let c = Check::TriggersOneSeries;
    let Some(p) = &e.prometheus else {
        return skipped(c, "no --prometheus given");
    };
    if p.triggers.is_empty() {
        return skipped(c, "no Prometheus trigger in the manifests' ScaledObject");
    }
    let bad: Vec<String> = p
        .triggers
        .iter()
        .filter_map(|(q, r)| match r {
            Ok(1) => None,
            Ok(n) => Some(format!("{n} series from {q}")),
            Err(why) => Some(format!("{why} for {q}")),
        })
        .collect();
    if !bad.is_empty() {
        return fail(
            c,
            format!(
                "KEDA needs exactly one series per trigger: {}",
                short(&bad, 2)
            ),
            "wrap the query in sum(…) and end it with `or vector(0)` (empty with ignoreNullValues reads as 0, silently)",
        );
    }
    pass(
        c,
        format!(
            "each of the {} Prometheus trigger(s) returns one series in {}",
            p.triggers.len(),
            p.url
        ),
    )
}
