//! The catalog against the reference material: vLLM 0.33's own exposition, an older vLLM's,
//! a DCGM node, and the metric names the official dashboards query.

// A panic in a test is a failed assertion.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use inferscale_catalog::vllm::{FAMILIES, MetricKind};
use inferscale_catalog::{Engine, NameStatus, Signal, Snapshot, Tier, dcgm, names_for};
use inferscale_promtext::{MetricType, histograms, parse};

fn testdata(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata")
        .join(rel)
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(testdata(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

fn snapshot(rel: &str) -> Snapshot {
    let text = read(rel);
    Snapshot::read(&parse(text.as_bytes()).unwrap(), rel)
}

/// Metric names a dashboard's PromQL mentions that start with `prefix`.
fn dashboard_names(rel: &str, prefix: &str) -> BTreeSet<String> {
    let text = read(rel);
    let mut names = BTreeSet::new();
    let mut rest = text.as_str();
    while let Some(i) = rest.find(prefix) {
        let tail = &rest[i..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
            .unwrap_or(tail.len());
        names.insert(tail[..end].to_owned());
        rest = &tail[end..];
    }
    names
}

fn strip_suffix(name: &str) -> &str {
    ["_bucket", "_count", "_sum"]
        .iter()
        .find_map(|s| name.strip_suffix(s))
        .unwrap_or(name)
}

#[test]
fn vllm_family_table_matches_vllm_0_33_exactly() {
    let text = read("vllm/metrics_single_engine.prom");
    let exp = parse(text.as_bytes()).unwrap();
    let served: Vec<_> = exp
        .families()
        .filter(|f| f.name().starts_with("vllm:") && !f.name().ends_with("_created"))
        .filter(|f| f.name() != "vllm:cache_config_info")
        .collect();
    assert_eq!(served.len(), FAMILIES.len());
    for (fam, want) in served.iter().zip(FAMILIES) {
        assert_eq!(fam.name(), want.name, "order and names");
        assert_eq!(fam.help(), Some(want.help), "{}", want.name);
        let kind = match fam.kind() {
            MetricType::Counter => MetricKind::Counter,
            MetricType::Gauge => MetricKind::Gauge,
            MetricType::Histogram => MetricKind::Histogram,
            other => panic!("{}: unexpected {other}", want.name),
        };
        assert_eq!(kind, want.kind, "{}", want.name);
        let labels: BTreeSet<&str> = fam
            .samples()
            .flat_map(|s| s.labels().iter().map(|l| &*l.name))
            .filter(|l| *l != "le")
            .collect();
        let mut expected: BTreeSet<&str> = want.extra_labels.iter().copied().collect();
        expected.insert("model_name");
        if want.engine_label {
            expected.insert("engine");
        }
        assert_eq!(labels, expected, "{}", want.name);
        if let Some(b) = want.buckets {
            let h = &histograms(&exp, want.name)[0].histogram;
            let bounds: Vec<f64> = h
                .buckets
                .iter()
                .map(|b| b.le)
                .filter(|le| le.is_finite())
                .collect();
            assert_eq!(bounds, b.bounds(4096), "{}", want.name);
        }
    }
}

#[test]
fn vllm_0_33_has_every_tier_1_and_2_signal() {
    let snap = snapshot("vllm/metrics_single_engine.prom");
    assert_eq!(snap.engines, vec![Engine::Vllm]);
    for signal in Signal::ALL.into_iter().filter(|s| s.tier() != Tier::Gpu) {
        assert!(snap.has(signal), "{signal} missing");
        let src = snap.sources(signal)[0];
        assert_eq!(
            src.status,
            NameStatus::Current,
            "{signal} read from {}",
            src.name
        );
    }
}

#[test]
fn older_vllm_is_read_through_the_deprecated_names() {
    let snap = snapshot("vllm/metrics_v0_9.prom");
    assert_eq!(snap.value(Signal::KvCacheUsage), Some(0.3125));
    assert_eq!(
        snap.sources(Signal::KvCacheUsage)[0].name,
        "vllm:gpu_cache_usage_perc"
    );
    assert_eq!(
        snap.sources(Signal::Itl)[0].name,
        "vllm:time_per_output_token_seconds"
    );
    assert_eq!(snap.sources(Signal::Tpot)[0].status, NameStatus::Deprecated);
    let tpot = snap.quantile(Signal::Tpot, 0.5).unwrap();
    assert!((0.01..0.05).contains(&tpot), "{tpot}");
    assert_eq!(snap.value(Signal::RequestsOk), Some(4102.0));
    assert_eq!(snap.value(Signal::RequestsAborted), Some(18.0));
    assert_eq!(
        snap.value(Signal::RequestsErrored),
        None,
        "0.9 had no error finish reason"
    );
}

#[test]
fn dcgm_node_has_every_tier_3_signal() {
    let snap = snapshot("dcgm/node-8gpu.prom");
    assert_eq!(snap.engines, vec![Engine::Dcgm]);
    assert_eq!(snap.gpus.len(), 8);
    for signal in Signal::ALL.into_iter().filter(|s| s.tier() == Tier::Gpu) {
        assert!(snap.has(signal), "{signal} missing");
        assert!(
            snap.gpus.iter().all(|g| g.values.contains_key(&signal)),
            "{signal} per GPU"
        );
    }
    assert_eq!(snap.value(Signal::EccSbeVolatile), Some(2.0));
    assert_eq!(
        snap.gpus[0].host.as_deref(),
        Some("ip-10-0-42-17.ec2.internal")
    );
}

#[test]
fn the_official_dashboards_query_names_the_catalog_knows() {
    let vllm = read("vllm/grafana.json");
    assert!(vllm.contains("vllm:e2e_request_latency_seconds"));
    for name in dashboard_names("vllm/grafana.json", "vllm:") {
        let base = strip_suffix(&name);
        if base == "vllm:e" {
            continue; // "vllm:e2e_…" cut at the digit by the scan above; asserted just before.
        }
        assert!(
            FAMILIES.iter().any(|f| f.name == base || f.name == name),
            "vLLM dashboard queries {name}, which vLLM 0.33 does not serve"
        );
    }
    for name in dashboard_names("dcgm/dcgm-exporter-dashboard.json", "DCGM_") {
        assert!(
            dcgm::field(&name).is_some(),
            "DCGM dashboard queries {name}, not a default field"
        );
    }
    let tgi = dashboard_names("engines/tgi_grafana.json", "tgi_");
    let tgi: BTreeSet<&str> = tgi.iter().map(|n| strip_suffix(n)).collect();
    for signal in Signal::ALL {
        for n in names_for(signal).filter(|n| n.engine == Engine::Tgi) {
            assert!(
                tgi.contains(n.name),
                "catalog's TGI name {} is not in TGI's dashboard",
                n.name
            );
        }
    }
}

/// Every llama.cpp name in the catalog is one the real server serves (its `/metrics`, built
/// from pinned sources by `scripts/llama-server`), with the type the catalog reads it as, and
/// a snapshot of that exposition reads the queue and the batch.
#[test]
fn llamacpp_names_are_the_real_servers() {
    let text = read("engines/llamacpp-0c1e570.prom");
    let exp = parse(text.as_bytes()).unwrap();
    let families: BTreeSet<&str> = exp.families().map(|f| f.name()).collect();
    let mut checked = 0;
    for signal in Signal::ALL {
        for n in names_for(signal).filter(|n| n.engine == Engine::LlamaCpp) {
            let family = n.name.strip_suffix("_total").unwrap_or(n.name);
            assert!(
                families.contains(n.name) || families.contains(family),
                "catalog's llama.cpp name {} is not served by llama-server 0c1e570",
                n.name
            );
            assert_eq!(n.status, NameStatus::Current, "{}", n.name);
            checked += 1;
        }
    }
    assert!(checked >= 4, "{checked} llama.cpp names checked");
    let snap = Snapshot::read(&exp, "llama-server");
    assert_eq!(snap.engines, vec![Engine::LlamaCpp]);
    assert_eq!(snap.value(Signal::QueueDepth), Some(0.0));
    assert_eq!(snap.value(Signal::Running), Some(0.0));
    assert!(
        snap.value(Signal::GenerationTokens)
            .is_some_and(|v| v > 0.0)
    );
    assert_eq!(snap.value(Signal::E2eLatency), None);
}
