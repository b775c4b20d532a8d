//! Grafana dashboards for the three metric tiers: the service's SLIs, the engine's internals,
//! the GPUs (DCGM). A model variable, thresholds from the measurement drawn on the panels, and
//! queries that read vLLM's current names and fall back to the deprecated ones.

use inferscale_analysis::Thresholds;
use inferscale_catalog::Signal;
use serde_json::{Value, json};

use crate::Options;
use crate::promql::{self, Sel};

/// The rate window Grafana picks for the panel (at least four scrapes).
const RATE: &str = "$__rate_interval";

struct Panel {
    title: &'static str,
    unit: &'static str,
    description: String,
    targets: Vec<(String, &'static str)>,
    /// `(value, color, label)` threshold lines.
    thresholds: Vec<(f64, &'static str)>,
}

fn panel_json(id: usize, p: &Panel, x: u32, y: u32) -> Value {
    let mut steps = vec![json!({"color": "green", "value": null})];
    for (v, c) in &p.thresholds {
        steps.push(json!({"color": c, "value": v}));
    }
    json!({
        "id": id,
        "type": "timeseries",
        "title": p.title,
        "description": p.description,
        "datasource": {"type": "prometheus", "uid": "${datasource}"},
        "gridPos": {"h": 8, "w": 12, "x": x, "y": y},
        "fieldConfig": {
            "defaults": {
                "unit": p.unit,
                "custom": {
                    "drawStyle": "line",
                    "lineWidth": 2,
                    "fillOpacity": 5,
                    "thresholdsStyle": {"mode": if p.thresholds.is_empty() { "off" } else { "line+area" }}
                },
                "thresholds": {"mode": "absolute", "steps": steps}
            },
            "overrides": []
        },
        "options": {"legend": {"displayMode": "table", "placement": "bottom", "calcs": ["lastNotNull", "max"]}, "tooltip": {"mode": "multi"}},
        "targets": p.targets.iter().enumerate().map(|(i, (expr, legend))| json!({
            "refId": ((b'A' + i as u8) as char).to_string(),
            "datasource": {"type": "prometheus", "uid": "${datasource}"},
            "expr": expr,
            "legendFormat": legend,
            "range": true
        })).collect::<Vec<_>>()
    })
}

fn dashboard(
    uid: String,
    title: String,
    description: String,
    o: &Options,
    panels: &[Panel],
    gpu: bool,
) -> Value {
    let queue = inferscale_catalog::names_of(o.engine, Signal::QueueDepth)
        .map(|n| n.name)
        .next()
        .unwrap_or_default();
    let model_label = o.engine.model_label();
    let model_query = format!(
        "label_values({queue}{{namespace=\"{}\"}}, {})",
        o.namespace,
        model_label.unwrap_or("model_name")
    );
    let mut vars = vec![json!({
        "name": "datasource",
        "label": "Prometheus",
        "type": "datasource",
        "query": "prometheus",
        "current": {},
        "hide": 0
    })];
    if gpu {
        let host_query = format!(
            "label_values({}, Hostname)",
            promql::dcgm_name(Signal::GpuUtil)
        );
        vars.push(json!({
            "name": "node",
            "label": "GPU node",
            "type": "query",
            "datasource": {"type": "prometheus", "uid": "${datasource}"},
            "query": {"query": host_query, "refId": "node"},
            "definition": host_query,
            "includeAll": true,
            "multi": true,
            "allValue": ".*",
            "current": {"text": "All", "value": "$__all"},
            "refresh": 2
        }));
    } else if model_label.is_some() {
        vars.push(json!({
            "name": "model",
            "label": "Model",
            "type": "query",
            "datasource": {"type": "prometheus", "uid": "${datasource}"},
            "query": {"query": model_query, "refId": "model"},
            "definition": model_query,
            "includeAll": false,
            "multi": false,
            "current": {"text": o.model_name, "value": o.model_name},
            "refresh": 2
        }));
    }
    let panels: Vec<Value> = panels
        .iter()
        .enumerate()
        .map(|(i, p)| panel_json(i + 1, p, (i as u32 % 2) * 12, (i as u32 / 2) * 8))
        .collect();
    json!({
        "uid": uid,
        "title": title,
        "description": description,
        "tags": ["inferscale", o.engine.key()],
        "editable": true,
        "schemaVersion": 39,
        "version": 1,
        "timezone": "browser",
        "refresh": "30s",
        "time": {"from": "now-1h", "to": "now"},
        "templating": {"list": vars},
        "annotations": {"list": []},
        "panels": panels
    })
}

/// What a panel (by title), or one of its targets (by legend), reads: a panel or target
/// whose signal the engine does not serve is left out, since its query could only return
/// nothing.
fn needs(title: &str, legend: &str) -> &'static [Signal] {
    match (title, legend) {
        (_, "TPOT p50" | "TPOT p95") => &[Signal::Tpot],
        (_, "ITL p95") => &[Signal::Itl],
        (_, "prompt") => &[Signal::PromptTokens],
        (_, "generation") => &[Signal::GenerationTokens],
        ("End-to-end latency p50 / p95 / p99" | "Request rate", _) => &[Signal::E2eLatency],
        ("Time to first token p50 / p95 / p99", _) => &[Signal::Ttft],
        ("Waiting requests per pod", _) => &[Signal::QueueDepth],
        ("Running requests per pod", _) => &[Signal::Running],
        ("Queue time p95", _) => &[Signal::QueueTime],
        ("KV-cache usage", _) => &[Signal::KvCacheUsage],
        ("Preemptions per second", _) => &[Signal::Preemptions],
        ("Tokens per engine step p50 / p95", _) => &[Signal::IterationTokens],
        ("Waiting and running (all pods)", _) => &[Signal::QueueDepth, Signal::Running],
        _ => &[],
    }
}

/// Fits the panels to the engine: targets and panels it cannot feed go (vLLM's finish
/// reasons and HTTP counters are vLLM's alone), and without a latency histogram the mean
/// end-to-end latency by Little's law takes the percentiles' place.
fn substitute(
    t: &Thresholds,
    o: &Options,
    sel: &Sel,
    service: &mut Vec<Panel>,
    engine: &mut Vec<Panel>,
) {
    let e = o.engine;
    for panels in [&mut *service, &mut *engine] {
        for p in panels.iter_mut() {
            let title = p.title;
            p.targets
                .retain(|(_, legend)| needs(title, legend).iter().all(|s| sel.serves(*s)));
        }
        panels.retain(|p| {
            !p.targets.is_empty()
                && (e == inferscale_catalog::Engine::Vllm
                    || !matches!(
                        p.title,
                        "Requests per second by outcome"
                            | "Error ratio (HTTP 5xx and engine errors)"
                    ))
        });
    }
    if !sel.serves(Signal::E2eLatency) {
        let out = t.workload.output_tokens_mean.unwrap_or(1.0).max(1.0);
        let finishing = format!(
            "sum({}) / {}",
            promql::rate(Signal::GenerationTokens, sel, RATE),
            (out * 1000.0).round() / 1000.0
        );
        service.insert(0, Panel {
            title: "Mean end-to-end latency (Little's law)",
            unit: "s",
            description: format!("{} serves no latency histogram: requests in flight over requests finishing per second (generated tokens per second over the measured mean output, {out:.0} tokens). A mean; the p95 is higher. Red: the p95 SLO ({} s).", e.title(), o.slo_p95_e2e_s),
            targets: vec![
                (format!("(sum({}) + sum({})) / ({finishing})", promql::series(Signal::Running, sel), promql::series(Signal::QueueDepth, sel)), "mean"),
            ],
            thresholds: vec![(o.slo_p95_e2e_s, "red")],
        });
        engine.push(Panel {
            title: "Requests finishing per second (estimated)",
            unit: "reqps",
            description: format!("Generated tokens per second over the measured mean output ({out:.0} tokens): {} counts no requests.", e.title()),
            targets: vec![(finishing, "requests/s")],
            thresholds: t.saturation_rps.map(|v| vec![(v, "orange")]).unwrap_or_default(),
        });
    }
}

/// The three dashboards as `(file name, JSON)`.
// Long: the three dashboards' rows and panels in display order; each panel is a query and its
// units.
pub fn dashboards(t: &Thresholds, o: &Options) -> Vec<(String, String)> {
    let sel = {
        let sel = Sel::exact(&[("namespace", &o.namespace)]).of(o.engine);
        match o.engine.model_label() {
            Some(k) => sel.and(&format!("{k}=~\"$model\"")),
            None => sel.and(&format!("job={}", inferscale_promql::quote(&o.service))),
        }
    };
    let q = f64::from(t.scale_out.queue_depth_per_pod);
    let guard = t.scale_out.p95_e2e_seconds;
    let slo = o.slo_p95_e2e_s;
    let quant = |qq: f64, s: Signal| promql::quantile(qq, s, &sel, RATE, &[]);
    let name = |s: Signal| {
        inferscale_catalog::names_of(o.engine, s)
            .map(|n| n.name)
            .next()
            .unwrap_or_default()
    };
    let http = inferscale_catalog::vllm::HTTP_REQUESTS;
    let ok_reasons = inferscale_catalog::names::VLLM_OK_REASONS.join("|");
    let success = promql::vllm_names(Signal::RequestsOk)[0];
    let service = vec![
        Panel {
            title: "End-to-end latency p50 / p95 / p99",
            unit: "s",
            description: format!("From arrival to the last token, server side. Red: the SLO ({slo} s, HighLatency pages above it for 2 m). Measured healthy p95: {:.2} s; the scaling guardrail: {guard} s.", t.healthy.p95_e2e_seconds),
            targets: vec![
                (quant(0.5, Signal::E2eLatency), "p50"),
                (quant(0.95, Signal::E2eLatency), "p95"),
                (quant(0.99, Signal::E2eLatency), "p99"),
            ],
            thresholds: vec![(guard.min(slo), "orange"), (slo.max(guard), "red")],
        },
        Panel {
            title: "Time to first token p50 / p95 / p99",
            unit: "s",
            description: "From arrival to the first token: queueing plus prefill. Reacts to missing capacity before end-to-end latency does.".into(),
            targets: vec![
                (quant(0.5, Signal::Ttft), "p50"),
                (quant(0.95, Signal::Ttft), "p95"),
                (quant(0.99, Signal::Ttft), "p99"),
            ],
            thresholds: t.scale_out.p95_ttft_seconds.map(|v| vec![(v, "red")]).unwrap_or_default(),
        },
        Panel {
            title: "Waiting requests per pod",
            unit: "short",
            description: format!("{}. Red: the scale-out threshold ({q} per pod, measured); normal is 0 below saturation.", name(Signal::QueueDepth)),
            targets: vec![
                (format!("sum by (pod) ({})", promql::series(Signal::QueueDepth, &sel)), "{{pod}}"),
            ],
            thresholds: vec![(q, "red")],
        },
        Panel {
            title: "Running requests per pod",
            unit: "short",
            description: format!("{}: the batch; flat at {} means the replica is full.", name(Signal::Running), match o.engine {
                inferscale_catalog::Engine::Vllm => "max_num_seqs",
                inferscale_catalog::Engine::LlamaCpp => "its slots (-np)",
                _ => "its concurrency limit",
            }),
            targets: vec![(format!("sum by (pod) ({})", promql::series(Signal::Running, &sel)), "{{pod}}")],
            thresholds: vec![],
        },
        Panel {
            title: "Requests per second by outcome",
            unit: "reqps",
            description: "Finished requests by finish reason (stop, length: fine; abort: client went away; error: engine error).".into(),
            targets: vec![(
                format!("sum by (finished_reason) (rate({success}{}[{RATE}]))", sel.braces()),
                "{{finished_reason}}",
            )],
            thresholds: vec![],
        },
        Panel {
            title: "Error ratio (HTTP 5xx and engine errors)",
            unit: "percentunit",
            description: "Red: 1 % (VLLMHighErrorRate warns above it for 5 m).".into(),
            targets: vec![
                (
                    format!(
                        "sum(rate({http}{{namespace=\"{ns}\",job=\"{svc}\",handler=~\"/v1/.*\",status=\"5xx\"}}[{RATE}])) / sum(rate({http}{{namespace=\"{ns}\",job=\"{svc}\",handler=~\"/v1/.*\"}}[{RATE}]))",
                        ns = o.namespace,
                        svc = o.service
                    ),
                    "HTTP 5xx",
                ),
                (
                    format!(
                        "sum(rate({success}{}[{RATE}])) / sum(rate({success}{}[{RATE}]))",
                        sel.and("finished_reason=\"error\"").braces(), sel.braces()
                    ),
                    "engine errors",
                ),
            ],
            thresholds: vec![(0.01, "red")],
        },
        Panel {
            title: "Time per output token and inter-token latency",
            unit: "s",
            description: format!("TPOT per request and ITL per step (vllm:inter_token_latency_seconds, falling back to the removed vllm:time_per_output_token_seconds). Finished requests other than {ok_reasons} are excluded by vLLM from TPOT."),
            targets: vec![
                (quant(0.5, Signal::Tpot), "TPOT p50"),
                (quant(0.95, Signal::Tpot), "TPOT p95"),
                (quant(0.95, Signal::Itl), "ITL p95"),
            ],
            thresholds: vec![],
        },
        Panel {
            title: "Queue time p95",
            unit: "s",
            description: format!("Time requests wait before they run. Red: the KEDA guardrail ({} s): above it the ScaledObject grows the deployment in proportion.", t.scale_out.p95_queue_time_seconds),
            targets: vec![(quant(0.95, Signal::QueueTime), "p95")],
            thresholds: vec![(t.scale_out.p95_queue_time_seconds, "red")],
        },
    ];
    let engine = vec![
        Panel {
            title: "KV-cache usage",
            unit: "percentunit",
            description: "vllm:kv_cache_usage_perc (falls back to the removed vllm:gpu_cache_usage_perc). Orange 80 %: watch; red 95 %: KVCacheFull, preemptions follow.".into(),
            targets: vec![(format!("max by (pod) ({})", promql::series(Signal::KvCacheUsage, &sel)), "{{pod}}")],
            thresholds: vec![(0.8, "orange"), (0.95, "red")],
        },
        Panel {
            title: "Preemptions per second",
            unit: "short",
            description: "Requests evicted and recomputed because the KV cache ran out (PreemptionSpike warns above 5 in 5 m).".into(),
            targets: vec![(format!("sum by (pod) ({})", promql::rate(Signal::Preemptions, &sel, RATE)), "{{pod}}")],
            thresholds: vec![],
        },
        Panel {
            title: "Prompt and generation tokens per second",
            unit: "short",
            description: "Prefill and decode throughput.".into(),
            targets: vec![
                (format!("sum({})", promql::rate(Signal::PromptTokens, &sel, RATE)), "prompt"),
                (format!("sum({})", promql::rate(Signal::GenerationTokens, &sel, RATE)), "generation"),
            ],
            thresholds: vec![],
        },
        Panel {
            title: "Tokens per engine step p50 / p95",
            unit: "short",
            description: "vllm:iteration_tokens_total (a histogram): how full each forward pass is.".into(),
            targets: vec![
                (quant(0.5, Signal::IterationTokens), "p50"),
                (quant(0.95, Signal::IterationTokens), "p95"),
            ],
            thresholds: vec![],
        },
        Panel {
            title: "Waiting and running (all pods)",
            unit: "short",
            description: format!("The scale-out trigger is sum(waiting) / replicas > {q}."),
            targets: vec![
                (format!("sum({})", promql::series(Signal::QueueDepth, &sel)), "waiting"),
                (format!("sum({})", promql::series(Signal::Running, &sel)), "running"),
            ],
            thresholds: vec![],
        },
        Panel {
            title: "Request rate",
            unit: "reqps",
            description: format!("Finished requests per second (all pods). One replica sustained {} req/s in the measurement.", t.saturation_rps.map_or("?".into(), |v| v.to_string())),
            targets: vec![(promql::count_rate(Signal::E2eLatency, &sel, RATE, &[]), "requests/s")],
            thresholds: t.saturation_rps.map(|v| vec![(v, "orange")]).unwrap_or_default(),
        },
    ];
    let node = "Hostname=~\"$node\"";
    let d = |s: Signal| promql::dcgm_name(s);
    let gpu = vec![
        Panel {
            title: "GPU utilisation",
            unit: "percent",
            description: "DCGM_FI_DEV_GPU_UTIL. 30–50 % is normal for memory-bound decoding: never scale on it.".into(),
            targets: vec![(format!("{}{{{node}}}", d(Signal::GpuUtil)), "{{Hostname}} GPU {{gpu}}")],
            thresholds: vec![],
        },
        Panel {
            title: "Memory-copy utilisation",
            unit: "percent",
            description: "DCGM_FI_DEV_MEM_COPY_UTIL: memory bandwidth in use, the real limit of decoding.".into(),
            targets: vec![(format!("{}{{{node}}}", d(Signal::MemCopyUtil)), "{{Hostname}} GPU {{gpu}}")],
            thresholds: vec![],
        },
        Panel {
            title: "Framebuffer used fraction",
            unit: "percentunit",
            description: "Used / (used + free). vLLM preallocates --gpu-memory-utilization of it; red 95 %: GPUMemoryCritical.".into(),
            targets: vec![(
                format!("{u}{{{node}}} / ({u}{{{node}}} + {f}{{{node}}})", u = d(Signal::FbUsed), f = d(Signal::FbFree)),
                "{{Hostname}} GPU {{gpu}}",
            )],
            thresholds: vec![(0.95, "red")],
        },
        Panel {
            title: "Power",
            unit: "watt",
            description: "DCGM_FI_DEV_POWER_USAGE.".into(),
            targets: vec![(format!("{}{{{node}}}", d(Signal::Power)), "{{Hostname}} GPU {{gpu}}")],
            thresholds: vec![],
        },
        Panel {
            title: "Temperature",
            unit: "celsius",
            description: "DCGM_FI_DEV_GPU_TEMP.".into(),
            targets: vec![(format!("{}{{{node}}}", d(Signal::GpuTemp)), "{{Hostname}} GPU {{gpu}}")],
            thresholds: vec![(85.0, "red")],
        },
        Panel {
            title: "SM clock",
            unit: "rotmhz",
            description: "DCGM_FI_DEV_SM_CLOCK: a drop under load means power or thermal throttling.".into(),
            targets: vec![(format!("{}{{{node}}}", d(Signal::SmClock)), "{{Hostname}} GPU {{gpu}}")],
            thresholds: vec![],
        },
        Panel {
            title: "Single-bit ECC errors (volatile)",
            unit: "short",
            description: "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL: corrected errors since the driver loaded; a rising count predicts a failing GPU.".into(),
            targets: vec![(format!("{}{{{node}}}", d(Signal::EccSbeVolatile)), "{{Hostname}} GPU {{gpu}}")],
            thresholds: vec![],
        },
    ];
    let (mut service, mut engine) = (service, engine);
    substitute(t, o, &sel, &mut service, &mut engine);
    let base = o.deployment.as_str();
    let uid = |tier: &str| {
        let mut u = format!("inferscale-{base}-{tier}");
        u.truncate(40);
        u
    };
    let out = [
        (
            "1-service-slis.json",
            dashboard(uid("service"), format!("{base}: service SLIs (tier 1)"), "What users feel: latency, queue, errors. Thresholds drawn from the inferscale measurement.".into(), o, &service, false),
        ),
        (
            "2-engine.json",
            dashboard(uid("engine"), format!("{base}: {} engine (tier 2)", o.engine.title()), format!("Inside {}: KV cache, preemptions, tokens, batch.", o.engine.title()), o, &engine, false),
        ),
        (
            "3-gpu-dcgm.json",
            dashboard(uid("gpu"), format!("{base}: GPUs via DCGM (tier 3)"), "The GPUs, from NVIDIA's DCGM exporter.".into(), o, &gpu, true),
        ),
    ];
    out.into_iter()
        .map(|(name, v)| {
            (
                name.to_owned(),
                serde_json::to_string_pretty(&v).unwrap_or_default() + "\n",
            )
        })
        .collect()
}
