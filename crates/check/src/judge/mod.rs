//! The checks, each a pure function of the [`Evidence`]: the seeds' eleven, then the ones an
//! SRE adds. Each says pass, warn, fail or skipped, why, and the fix (the file and the field
//! to change, or the command to run).
//!
//! - `names`: how a query's metric names stand against current vLLM (the catalog);
//! - `live`: the checks on the running server, its exporter and its Prometheus (1–3, 12, 14);
//! - `files`: the checks on the manifests (4–7, 9, 13);
//! - `deploy`: the measurement and the deployment's settings and history (8, 10, 11).

mod deploy;
mod files;
mod live;
mod names;

use crate::evidence::Evidence;
use crate::{Check, Outcome, Status};

use deploy::{saturation_measured, scale_cycle, vllm_memory};
use files::{
    alerts, dashboards, do_not_disrupt, max_replicas_carry_peak, scaled_object,
    warmup_gates_readiness,
};
use live::{
    dcgm_exporter, metrics_exposed, prometheus_scrapes, queries_read_served_metrics,
    triggers_one_series,
};

/// Every metric name the manifests' queries (dashboards, rules, the ScaledObject's
/// triggers) read.
pub(crate) fn manifest_names(m: &crate::evidence::Manifests) -> Vec<String> {
    let mut out: Vec<String> = names::queries_of(m)
        .iter()
        .filter_map(|(_, q)| names::query_names(q))
        .flat_map(|n| n.names)
        .collect();
    for f in &m.docs {
        if let crate::evidence::Doc::ScaledObject(so) = &f.doc {
            for t in so["spec"]["triggers"].as_array().into_iter().flatten() {
                if let Some(q) = t["metadata"]["query"].as_str()
                    && let Ok(parsed) = inferscale_promql::Query::parse(q)
                {
                    out.extend(parsed.metric_names());
                }
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

/// Every check, in id order.
pub fn judge(e: &Evidence) -> Vec<Outcome> {
    vec![
        metrics_exposed(e),
        prometheus_scrapes(e),
        dcgm_exporter(e),
        dashboards(e),
        alerts(e),
        scaled_object(e),
        do_not_disrupt(e),
        saturation_measured(e),
        warmup_gates_readiness(e),
        vllm_memory(e),
        scale_cycle(e),
        queries_read_served_metrics(e),
        max_replicas_carry_peak(e),
        triggers_one_series(e),
    ]
}

pub(super) fn pass(c: Check, reason: impl Into<String>) -> Outcome {
    Outcome::new(c, Status::Pass, reason.into(), None)
}

pub(super) fn warn(c: Check, reason: impl Into<String>, fix: impl Into<String>) -> Outcome {
    Outcome::new(c, Status::Warn, reason.into(), Some(fix.into()))
}

pub(super) fn fail(c: Check, reason: impl Into<String>, fix: impl Into<String>) -> Outcome {
    Outcome::new(c, Status::Fail, reason.into(), Some(fix.into()))
}

pub(super) fn skipped(c: Check, reason: impl Into<String>) -> Outcome {
    Outcome::new(c, Status::Skipped, reason.into(), None)
}

pub(super) fn short(list: &[String], n: usize) -> String {
    let mut s = list.iter().take(n).cloned().collect::<Vec<_>>().join(", ");
    if list.len() > n {
        s.push_str(&format!(" and {} more", list.len() - n));
    }
    s
}

pub(super) fn no_manifests(c: Check) -> Outcome {
    skipped(
        c,
        "no manifests to look at (give --manifests DIR or --run-dir DIR)",
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evidence::{Names, PrometheusEvidence, Promtool};

    fn evidence(replicas: Option<(f64, f64, f64)>) -> Evidence {
        Evidence {
            names: Names {
                namespace: "llm".into(),
                job: "vllm".into(),
                container: "vllm".into(),
                engine: None,
            },
            engine: inferscale_catalog::Engine::Vllm,
            engine_from: "the default".into(),
            metrics: None,
            models: None,
            dcgm: None,
            prometheus: Some(PrometheusEvidence {
                url: "http://p".into(),
                up: Ok(Vec::new()),
                engine_series: Ok(Vec::new()),
                gpu_series: Ok(Vec::new()),
                rules: Ok(Vec::new()),
                triggers: vec![("sum(x)".into(), Ok(2))],
                replicas: Ok(replicas),
                observed_s: 86_400.0,
            }),
            manifests: None,
            promtool: Promtool::Missing,
            run: None,
            cluster: None,
        }
    }

    fn status(e: &Evidence, c: Check) -> Status {
        judge(e)[c.id() as usize - 1].status
    }

    #[test]
    fn a_cycle_observed_in_prometheus_passes_and_a_flat_history_fails() {
        assert_eq!(
            status(&evidence(Some((1.0, 4.0, 1.0))), Check::ScaleCycle),
            Status::Pass
        );
        assert_eq!(
            status(&evidence(Some((1.0, 4.0, 4.0))), Check::ScaleCycle),
            Status::Fail
        );
        assert_eq!(
            status(&evidence(Some((2.0, 2.0, 2.0))), Check::ScaleCycle),
            Status::Fail
        );
        assert_eq!(status(&evidence(None), Check::ScaleCycle), Status::Fail);
        // Prometheus without a target of the deployment's labels.
        assert_eq!(
            status(&evidence(None), Check::PrometheusScrapes),
            Status::Fail
        );
        // A trigger that returns two series.
        assert_eq!(
            status(&evidence(None), Check::TriggersOneSeries),
            Status::Fail
        );
        // Every check is judged, in id order.
        let all = judge(&evidence(None));
        assert_eq!(
            all.iter().map(|o| o.id).collect::<Vec<_>>(),
            (1..=14).collect::<Vec<_>>()
        );
    }
}
