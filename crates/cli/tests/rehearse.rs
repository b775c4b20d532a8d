//! `inferscale rehearse` end to end: the seeds' ScaledObject rehearsed with every output,
//! alerts of a generated PrometheusRule evaluated on the same series, the built-in signals
//! side by side, and what KEDA or the HPA would reject refused with the field and its line.

#![allow(clippy::unwrap_used)]

use std::path::PathBuf;

mod common;

use common::{inferscale, stderr, stdout, workspace};

fn tmp(name: &str) -> PathBuf {
    common::tmp("rehearse", name)
}

fn seeds_so() -> String {
    workspace()
        .join("testdata/aws-eks/keda-scaledobject.yaml")
        .display()
        .to_string()
}

#[test]
fn the_seeds_scaledobject_rehearses_with_a_timeline_a_page_and_a_summary() {
    let dir = tmp("seeds");
    std::fs::create_dir_all(&dir).unwrap();
    let (csv, html) = (dir.join("timeline.csv"), dir.join("rehearsal.html"));
    let o = inferscale()
        .args(["rehearse", "--scaledobject", &seeds_so()])
        .args(["--pattern", "hold:60@10m,drop:0@20m", "--json"])
        .args(["--timeline-out", csv.to_str().unwrap()])
        .args(["--html-out", html.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let s: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    for key in [
        "max_replicas",
        "first_scale_out_s",
        "cycle_completed",
        "slo_attainment",
        "gpu_hours",
        "flaps",
        "p95_e2e_s",
        "p99_e2e_s",
        "max_queue",
        "recovered_s",
        "scale_events",
        "alerts_fired",
    ] {
        assert!(!s[key].is_null(), "{key}: {s:#}");
    }
    assert!(s["max_replicas"].as_u64() >= Some(2), "{s:#}");
    assert_eq!(s["cycle_completed"], true);
    assert!(
        s["notes"][0].as_str().unwrap().contains("ceil(p95 / 5 s)"),
        "{s:#}"
    );
    let text = std::fs::read_to_string(&csv).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    for col in [
        "time_s",
        "offered_rps",
        "desired_replicas",
        "ready_replicas",
        "queue_per_pod",
        "p95_e2e_s",
    ] {
        assert!(header.contains(&col), "{col} in {header:?}");
    }
    // One row per 15 s; the default duration is the traffic's end (30 minutes) plus 30.
    let rows: Vec<&str> = lines.collect();
    assert_eq!(rows.len(), 3600 / 15, "{}", rows.len());
    assert!(rows[1].starts_with("30,60,"), "{}", rows[1]);
    let page = std::fs::read_to_string(&html).unwrap();
    for id in ["replicas-", "queue-", "latency-"] {
        assert!(page.contains(&format!("data-chart=\"{id}")), "{id}");
    }
}

#[test]
fn alerts_of_a_generated_prometheusrule_fire_on_the_rehearsed_series() {
    let dir = tmp("rules");
    let man = dir.join("manifests");
    let thresholds = workspace().join("testdata/runs/thresholds-default.json");
    let g = inferscale()
        .args(["generate", "--thresholds", thresholds.to_str().unwrap()])
        .args(["--out", man.to_str().unwrap(), "--namespace", "llm"])
        .output()
        .unwrap();
    assert_eq!(g.status.code(), Some(0), "{}", stderr(&g));
    // Four times the capacity for 15 minutes on at most five replicas: the queue and the
    // latency alerts must fire, then resolve once the load is gone.
    let o = inferscale()
        .args(["rehearse", "--scaledobject"])
        .arg(man.join("scaledobject.yaml"))
        .arg("--rules")
        .arg(man.join("prometheusrule.yaml"))
        .args(["--thresholds", thresholds.to_str().unwrap()])
        .args(["--pattern", "hold:30@5m,hold:400@15m,hold:0@20m", "--json"])
        .output()
        .unwrap();
    assert!(o.status.code().is_some_and(|c| c <= 1), "{}", stderr(&o));
    let s: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let fired: Vec<&str> = s["alerts_fired"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert!(!fired.is_empty(), "no alert fired: {s:#}");
    assert!(
        fired
            .iter()
            .any(|a| a.contains("Latency") || a.contains("Queue")),
        "{fired:?}"
    );
}

#[test]
fn the_built_in_signals_are_rehearsed_side_by_side() {
    let thresholds = workspace().join("testdata/runs/thresholds-default.json");
    let o = inferscale()
        .args(["rehearse", "--compare-signals"])
        .args(["--thresholds", thresholds.to_str().unwrap()])
        .args(["--pattern", "diurnal:10..150@2h", "--duration", "2h"])
        .output()
        .unwrap();
    assert!(o.status.code().is_some_and(|c| c <= 1), "{}", stderr(&o));
    let text = stdout(&o);
    for signal in [
        "signal:queue",
        "signal:in-flight",
        "signal:arrival-rate",
        "signal:running",
        "signal:kv-cache",
        "signal:gpu-util",
        "signal:p95-e2e",
        "signal:p95-queue-time",
        "signal:epp-queue",
        "signal:epp-saturation",
        "signal:epp-tokens",
        "signal:epp-slo",
    ] {
        assert!(text.contains(signal), "{signal}: {text}");
    }
    // The gateway's signals are read from the rehearsal's endpoint picker (its gauges, its
    // in-flight tokens and its latency histograms): each scales out on a peak of about 2.7
    // replicas' worth.
    for signal in [
        "signal:epp-queue",
        "signal:epp-saturation",
        "signal:epp-tokens",
        "signal:epp-slo",
    ] {
        let block = &text[text.rfind(signal).unwrap()..];
        let block = &block[..block[1..].find("signal:").map_or(block.len(), |i| i + 1)];
        assert!(
            block.contains("scale events: ") && block.contains("1→2"),
            "{block}"
        );
    }
    assert!(text.contains("SLO met") && text.contains("GPU-h"), "{text}");
}

#[test]
fn what_keda_or_the_hpa_would_reject_is_refused_with_the_field_and_line() {
    let dir = tmp("refused");
    std::fs::create_dir_all(&dir).unwrap();
    let seeds = std::fs::read_to_string(seeds_so()).unwrap();
    let cases: Vec<(&str, String, &str)> = vec![
        (
            "no-triggers",
            seeds[..seeds.find("  triggers:").unwrap()].to_owned() + "  triggers: []\n",
            "spec.triggers",
        ),
        (
            "period-0",
            seeds.replacen("periodSeconds: 120", "periodSeconds: 0", 1),
            "line 28: spec.advanced.horizontalPodAutoscalerConfig.behavior.scaleDown.policies[0].periodSeconds",
        ),
        (
            "min-above-max",
            seeds.replacen("minReplicaCount: 1", "minReplicaCount: 9", 1),
            "line 10: spec.minReplicaCount",
        ),
        (
            "unknown-type",
            seeds.replacen("- type: prometheus", "- type: prometheuss", 1),
            "line 32: spec.triggers[0].type",
        ),
        (
            "kafka",
            seeds.replacen("- type: prometheus", "- type: kafka", 1),
            "cannot be simulated",
        ),
    ];
    for (name, text, want) in cases {
        let path = dir.join(format!("{name}.yaml"));
        std::fs::write(&path, text).unwrap();
        let o = inferscale()
            .args(["rehearse", "--scaledobject"])
            .arg(&path)
            .args(["--pattern", "hold:10@1m"])
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{name}: {}", stderr(&o));
        assert!(stderr(&o).contains(want), "{name}: {}", stderr(&o));
    }
    let trace = dir.join("trace.csv");
    std::fs::write(&trace, "time_s,rps\n0,10\n60,lots\n").unwrap();
    let o = inferscale()
        .args(["rehearse", "--scaledobject", &seeds_so(), "--trace"])
        .arg(&trace)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("line 3"), "{}", stderr(&o));
    let o = inferscale()
        .args(["rehearse", "--scaledobject", &seeds_so()])
        .args(["--pattern", "hold:10@1m,wave:3@1m"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("segment 2"), "{}", stderr(&o));
}

/// A request trace in Mooncake's JSONL (the one `load --trace` replays) is rehearsed as its
/// arrival rate: about as many requests as the trace holds, and none after it ends.
#[test]
fn a_request_trace_is_rehearsed_as_its_arrivals() {
    let dir = tmp("request-trace");
    std::fs::create_dir_all(&dir).unwrap();
    let csv = dir.join("timeline.csv");
    let trace = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/traces/chat-sessions.jsonl");
    let o = inferscale()
        .args(["rehearse", "--scaledobject", &seeds_so(), "--trace"])
        .arg(&trace)
        .args(["--json", "--timeline-out", csv.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let s: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    // 331 requests, drawn again as a Poisson process per 10 s bin (sd about 18).
    let n = s["requests"].as_u64().unwrap();
    assert!((256..=406).contains(&n), "{n} requests: {s:#}");
    let text = std::fs::read_to_string(&csv).unwrap();
    let last: Vec<&str> = text.lines().last().unwrap().split(',').collect();
    assert_eq!(last[1], "0", "the traffic ends with the trace: {last:?}");
}

#[test]
fn a_shapes_prompts_reach_the_rehearsed_replicas_prefix_caches() {
    // One replica (the seeds' object capped at one) under 33 req/s of six-turn
    // conversations. Their history is in the cache, so it keeps up; unique prompts of the
    // same mean length (1,464 tokens) are more than it serves.
    let dir = tmp("shape");
    std::fs::create_dir_all(&dir).unwrap();
    let so = dir.join("one.yaml");
    let seeds = std::fs::read_to_string(seeds_so()).unwrap();
    std::fs::write(
        &so,
        seeds.replace("maxReplicaCount: 5", "maxReplicaCount: 1"),
    )
    .unwrap();
    let rehearse = |extra: &[&str]| -> serde_json::Value {
        let o = inferscale()
            .args(["rehearse", "--scaledobject", so.to_str().unwrap()])
            .args(["--pattern", "hold:33@10m", "--duration", "12m"])
            .args(["--max-tokens", "48", "--slo-e2e", "5s", "--json"])
            .args(extra)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0), "{extra:?}: {}", stderr(&o));
        serde_json::from_str(&stdout(&o)).unwrap()
    };
    let shared = rehearse(&["--shape", "multi-turn:6", "--prompt-tokens", "384"]);
    let unique = rehearse(&["--prompt-tokens", "1464"]);
    let hit = shared["prefix_cache_hit_rate"].as_f64().unwrap();
    assert!((0.6..0.8).contains(&hit), "{hit}");
    assert_eq!(unique["prefix_cache_hit_rate"].as_f64().unwrap(), 0.0);
    let met = |v: &serde_json::Value| v["slo_attainment"].as_f64().unwrap();
    assert!(met(&shared) > 0.99, "{shared:#}");
    assert!(met(&unique) < 0.5, "{unique:#}");
    // The request trace's own prompts go with its arrivals.
    let trace = workspace().join("testdata/traces/chat-sessions.jsonl");
    let o = inferscale()
        .args(["rehearse", "--scaledobject", &seeds_so(), "--trace"])
        .arg(&trace)
        .arg("--json")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("chat-sessions.jsonl's prompts"),
        "{}",
        stderr(&o)
    );
    let s: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let hit = s["prefix_cache_hit_rate"].as_f64().unwrap();
    assert!(hit > 0.6, "the trace implies 77.5 %: {hit}");
}

#[test]
fn a_multi_gpu_profile_gets_a_node_that_holds_a_replica_unless_told_otherwise() {
    // The 70B's replicas need four GPUs: by default a node holds one replica.
    let plain = inferscale()
        .args(["rehearse", "--scaledobject", &seeds_so()])
        .args(["--profile", "h100-llama-3.1-70b-tp4"])
        .args(["--pattern", "hold:100@5m", "--duration", "10m", "--json"])
        .output()
        .unwrap();
    assert_eq!(plain.status.code(), Some(0), "{}", stderr(&plain));
    let s: serde_json::Value = serde_json::from_str(&stdout(&plain)).unwrap();
    assert!(s["max_nodes"].as_u64() >= Some(1), "{s:#}");
    // A node too small for one replica is named, with what the profile needs.
    let small = inferscale()
        .args(["rehearse", "--scaledobject", &seeds_so()])
        .args([
            "--profile",
            "h100-llama-3.1-70b-tp4",
            "--gpus-per-node",
            "2",
        ])
        .args(["--pattern", "hold:100@5m"])
        .output()
        .unwrap();
    assert_ne!(small.status.code(), Some(0));
    let e = stderr(&small);
    assert!(
        e.contains("--gpus-per-node 2") && e.contains("need 4 GPUs each"),
        "{e}"
    );
}
