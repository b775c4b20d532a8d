//! Alerting rules: the seeds' five alerts with thresholds from the measurement and the SLO,
//! plus the ones an SRE adds (target down, metrics absent, GPU metrics absent, error rate) —
//! as a PrometheusRule, as a plain rule file, and as `promtool test rules` cases that make
//! each alert fire and not fire.

use inferscale_analysis::Thresholds;
use inferscale_catalog::Signal;

use crate::Options;
use crate::promql;
use inferscale_catalog::{Engine, names_of};
use std::collections::BTreeMap;

use crate::objects::{Extra, ObjectMeta, PrometheusRule, Rule, RuleFile, RuleGroup};
use crate::yaml::{Explained, Y, document, map, s};

/// One alert.
#[derive(Debug, Clone)]
pub struct Alert {
    /// `alert:`.
    pub name: &'static str,
    /// The expression.
    pub expr: String,
    /// `for:`.
    pub for_: &'static str,
    /// `warning` or `critical`.
    pub severity: &'static str,
    /// Summary template (`{{ $labels.x }}`, `{{ $value | printf "%.2f" }}`).
    pub summary: String,
    /// Description template.
    pub description: String,
    /// What to do, in a few steps.
    pub runbook: String,
    /// Where its threshold comes from.
    pub source: String,
    /// Series that make it fire (promtool notation, 30 s apart), the time to look, and the
    /// labels and value it fires with.
    pub fire: Case,
    /// Series that must not make it fire, and when to look.
    pub quiet: Case,
}

/// Input series and the expected outcome at `eval`.
#[derive(Debug, Clone)]
pub struct Case {
    /// `(series, values)`.
    pub series: Vec<(String, String)>,
    /// When to evaluate.
    pub eval: &'static str,
    /// The firing alert's labels (without `alertname` and `severity`), and its `$value`.
    pub expect: Option<(Vec<(String, String)>, f64)>,
}

/// Renders the two template forms the rules use, as Prometheus would.
pub fn render(template: &str, labels: &[(String, String)], value: f64) -> String {
    let mut out = template.to_owned();
    for (k, v) in labels {
        out = out.replace(&format!("{{{{ $labels.{k} }}}}"), v);
    }
    for digits in 0..=3 {
        out = out.replace(
            &format!("{{{{ $value | printf \"%.{digits}f\" }}}}"),
            &format!("{value:.digits$}"),
        );
    }
    out
}

fn l(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
        .collect()
}

fn series_text(name: &str, labels: &[(String, String)]) -> String {
    let inner = labels
        .iter()
        .map(|(k, v)| format!("{k}={}", inferscale_promql::quote(v)))
        .collect::<Vec<_>>()
        .join(",");
    format!("{name}{{{inner}}}")
}

/// The rules for one deployment.
pub struct Rules {
    /// The alerts, in file order.
    pub alerts: Vec<Alert>,
    header: String,
    namespace: String,
    name: String,
    release: String,
    runbook_url: Option<String>,
}

/// A bucket bound as vLLM writes it (`5.0`, `0.3`).
fn fmt_le(v: f64) -> String {
    if v == v.trunc() {
        format!("{v:.1}")
    } else {
        format!("{v}")
    }
}

fn fmt_s(v: f64) -> String {
    let r = (v * 1000.0).round() / 1000.0;
    if r == r.trunc() {
        format!("{r:.0}")
    } else {
        format!("{r}")
    }
}

impl Rules {
    /// Builds the alerts from the thresholds and the options.
    // Long: the five alert rules one after another, each its expression, duration, labels and
    // annotations from the thresholds, in the order the generated file lists them.
    pub fn new(t: &Thresholds, o: &Options) -> Rules {
        let ns = o.namespace.as_str();
        let engine = o.engine;
        let sel = o.sel();
        // The labels an engine's series carry in Prometheus: the target's namespace and pod,
        // the model's name where the engine labels it, and vLLM's `engine` index.
        let model_label: Vec<(&str, &str)> = vec![o.model_match()];
        let key = o.model_match().0;
        let pod_labels = {
            let mut v = l(&[("namespace", ns), ("pod", "vllm-0")]);
            v.extend(l(&model_label));
            v
        };
        let with_engine = |extra: &[(&str, &str)]| {
            let mut v = l(&[("namespace", ns)]);
            v.extend(l(&model_label));
            v.push(("pod".to_owned(), "vllm-0".to_owned()));
            if engine == Engine::Vllm {
                v.push(("engine".to_owned(), "0".to_owned()));
            }
            v.extend(l(extra));
            v
        };
        let model_sel = {
            let mut v = l(&[("namespace", ns)]);
            v.extend(l(&model_label));
            v
        };
        let name = |signal: Signal| {
            names_of(engine, signal)
                .map(|n| n.name)
                .next()
                .unwrap_or("")
        };
        let waiting = name(Signal::QueueDepth);
        let kv = name(Signal::KvCacheUsage);
        let preempt = name(Signal::Preemptions);
        let e2e = name(Signal::E2eLatency);
        let fb_used = promql::dcgm_name(Signal::FbUsed);
        let fb_free = promql::dcgm_name(Signal::FbFree);
        let gpu_util = promql::dcgm_name(Signal::GpuUtil);
        let http = inferscale_catalog::vllm::HTTP_REQUESTS;
        let q = t.scale_out.queue_depth_per_pod;
        let high_q = 2 * q;
        let slo = o.slo_p95_e2e_s;
        let svc = o.service.as_str();
        let gpu_labels = l(&[("Hostname", "gpu-node-1"), ("gpu", "0"), ("UUID", "GPU-0")]);
        let up_labels = l(&[
            ("namespace", ns),
            ("job", svc),
            ("instance", "10.0.0.7:8000"),
            ("pod", "vllm-0"),
        ]);

        let le = |b: &str| with_engine(&[("le", b)]);
        // vLLM's request-latency buckets: the first, and the first one wholly above the SLO.
        let bounds = inferscale_catalog::buckets::REQUEST_LATENCY;
        let first = bounds[0];
        let lo_i = bounds
            .iter()
            .position(|b| *b >= slo)
            .unwrap_or(bounds.len() - 2)
            .max(1);
        let (lo, hi) = (bounds[lo_i], bounds[(lo_i + 1).min(bounds.len() - 1)]);
        let slow_p95 = lo + (hi - lo) * 0.95;
        let (b_first, b_lo, b_hi) = (fmt_le(first), fmt_le(lo), fmt_le(hi));
        let high_latency = if sel.serves(Signal::E2eLatency) {
            Alert {
                name: "HighLatency",
                expr: format!(
                    "histogram_quantile(0.95, {}) > {}",
                    promql::bucket_rate(Signal::E2eLatency, &sel, "5m", &["namespace", key]),
                    fmt_s(slo)
                ),
                for_: "2m",
                severity: "critical",
                summary: format!("p95 end-to-end latency of {{{{ $labels.{key} }}}} above the {} s SLO", fmt_s(slo)),
                description: format!("The p95 end-to-end latency is {{{{ $value | printf \"%.2f\" }}}} s (SLO {} s; the measured healthy p95 was {:.2} s) for 2 minutes.", fmt_s(slo), t.healthy.p95_e2e_seconds),
                runbook: "Is the queue growing (HighQueueDepth)? Then capacity is short: check scaling. If not, look at output lengths, preemptions (KVCacheFull) and the GPU dashboard for a slow node.".into(),
                source: format!("the p95 SLO ({} s; the measured guardrail is {} s)", fmt_s(slo), fmt_s(t.scale_out.p95_e2e_seconds)),
                fire: Case {
                    // 20 requests per 30 s: all within the first bucket for 10 minutes, then all
                    // in the first bucket above the SLO.
                    series: vec![
                        (series_text(&format!("{e2e}_bucket"), &le(&b_first)), "0+20x20 400+0x30".into()),
                        (series_text(&format!("{e2e}_bucket"), &le(&b_lo)), "0+20x20 400+0x30".into()),
                        (series_text(&format!("{e2e}_bucket"), &le(&b_hi)), "0+20x50".into()),
                        (series_text(&format!("{e2e}_bucket"), &le("+Inf")), "0+20x50".into()),
                    ],
                    eval: "24m",
                    expect: Some((model_sel.clone(), slow_p95)),
                },
                quiet: Case {
                    series: vec![
                        (series_text(&format!("{e2e}_bucket"), &le(&b_first)), "0+20x50".into()),
                        (series_text(&format!("{e2e}_bucket"), &le(&b_lo)), "0+20x50".into()),
                        (series_text(&format!("{e2e}_bucket"), &le(&b_hi)), "0+20x50".into()),
                        (series_text(&format!("{e2e}_bucket"), &le("+Inf")), "0+20x50".into()),
                    ],
                    eval: "24m",
                    expect: None,
                },
            }
        } else {
            // No latency histogram (llama.cpp): the mean end-to-end latency by Little's law,
            // requests in flight over requests finishing per second, the latter the rate of
            // generated tokens over the measured mean output length. A mean is below the p95,
            // so this pages later than the histogram's p95 would; it is the best the engine
            // serves.
            let out = t.workload.output_tokens_mean.unwrap_or(1.0).max(1.0);
            let generated = name(Signal::GenerationTokens);
            let running = name(Signal::Running);
            let by = "namespace";
            let expr = format!(
                "(\n  sum by ({by}) ({running}{b} + {waiting}{b})\n/\n  (sum by ({by}) (rate({generated}{b}[5m])) / {out})\n) > {slo}",
                b = sel.braces(),
                out = fmt_s(out),
                slo = fmt_s(slo),
            );
            let pod = with_engine(&[]);
            Alert {
                name: "HighLatency",
                expr,
                for_: "2m",
                severity: "critical",
                summary: format!("Mean end-to-end latency in {{{{ $labels.namespace }}}} above the {} s SLO", fmt_s(slo)),
                description: format!("{} serves no latency histogram: by Little's law (requests in flight over requests finishing, {} tokens each on average as measured) the mean end-to-end latency is {{{{ $value | printf \"%.2f\" }}}} s (SLO p95 {} s) for 2 minutes; the p95 is higher.", engine.title(), fmt_s(out), fmt_s(slo)),
                runbook: "Is the queue growing (HighQueueDepth)? Then capacity is short: check scaling. If not, look at output lengths and the GPU dashboard for a slow node.".into(),
                source: format!("the p95 SLO ({} s), against the mean by Little's law ({} serves no latency histogram)", fmt_s(slo), engine.title()),
                fire: Case {
                    // One request finishing per second (the mean output length per second):
                    // half the SLO in flight, then twice it and one more.
                    series: vec![
                        (series_text(running, &pod), format!("{}x10 {}x30", fmt_s(slo / 2.0), fmt_s(2.0 * slo + 1.0))),
                        (series_text(waiting, &pod), "0x40".into()),
                        (series_text(generated, &pod), format!("0+{}x40", fmt_s(30.0 * out))),
                    ],
                    eval: "18m",
                    expect: Some((l(&[("namespace", ns)]), 2.0 * slo + 1.0)),
                },
                quiet: Case {
                    series: vec![
                        (series_text(running, &pod), format!("{}x40", fmt_s(slo / 2.0))),
                        (series_text(waiting, &pod), "0x40".into()),
                        (series_text(generated, &pod), format!("0+{}x40", fmt_s(30.0 * out))),
                    ],
                    eval: "18m",
                    expect: None,
                },
            }
        };
        // vLLM's names are the ones operators know; other engines get their own prefix.
        let (target_down, metrics_absent) = match engine {
            Engine::Vllm => ("VLLMTargetDown", "VLLMMetricsAbsent"),
            Engine::Sglang => ("SGLangTargetDown", "SGLangMetricsAbsent"),
            Engine::Tgi => ("TGITargetDown", "TGIMetricsAbsent"),
            Engine::LlamaCpp => ("LlamaCppTargetDown", "LlamaCppMetricsAbsent"),
            Engine::TrtLlm | Engine::Dcgm => ("EngineTargetDown", "EngineMetricsAbsent"),
        };
        let mut alerts = vec![
            Alert {
                name: "HighQueueDepth",
                expr: format!(
                    "max by (namespace, pod, {key}) ({}) > {high_q}",
                    promql::series(Signal::QueueDepth, &sel)
                ),
                for_: "2m",
                severity: "warning",
                summary: format!("{} queue above {high_q} on {{{{ $labels.pod }}}}", engine.title()),
                description: format!("{{{{ $labels.pod }}}} has {{{{ $value | printf \"%.0f\" }}}} requests waiting, more than twice the scale-out threshold ({q} per pod) for 2 minutes: autoscaling is not keeping up (at max replicas, pods pending, or GPUs unavailable)."),
                runbook: "Check the ScaledObject's HPA (kubectl get hpa keda-hpa-…): at maxReplicas? Pods Pending (no GPU node)? New pods still loading? Raise maxReplicas or capacity, or shed load.".into(),
                source: format!("2 × the measured scale-out threshold ({q})"),
                fire: Case {
                    series: vec![(series_text(waiting, &with_engine(&[])), format!("0x6 {}x24", high_q + 10))],
                    eval: "10m",
                    expect: Some((pod_labels.clone(), f64::from(high_q + 10))),
                },
                quiet: Case {
                    series: vec![(series_text(waiting, &with_engine(&[])), format!("{}x30", high_q.saturating_sub(1)))],
                    eval: "10m",
                    expect: None,
                },
            },
            high_latency,
            Alert {
                name: "GPUMemoryCritical",
                expr: format!("max by (Hostname, gpu) ({fb_used} / ({fb_used} + {fb_free})) > 0.95"),
                for_: "1m",
                severity: "critical",
                summary: "GPU {{ $labels.gpu }} on {{ $labels.Hostname }} has less than 5 % memory free".into(),
                description: "Framebuffer use is {{ $value | printf \"%.3f\" }} of the total for a minute. vLLM preallocates --gpu-memory-utilization of it; more means another process or a leak.".into(),
                runbook: "nvidia-smi on the node: which processes hold memory? Lower --gpu-memory-utilization (0.85 advised) or move the other workload.".into(),
                source: "the community guide's 95 %".into(),
                fire: Case {
                    series: vec![
                        (series_text(fb_used, &gpu_labels), "40000x10 47000x20".into()),
                        (series_text(fb_free, &gpu_labels), "8000x10 1000x20".into()),
                    ],
                    eval: "12m",
                    expect: Some((l(&[("Hostname", "gpu-node-1"), ("gpu", "0")]), 47000.0 / 48000.0)),
                },
                quiet: Case {
                    series: vec![
                        (series_text(fb_used, &gpu_labels), "40000x30".into()),
                        (series_text(fb_free, &gpu_labels), "8000x30".into()),
                    ],
                    eval: "12m",
                    expect: None,
                },
            },
            Alert {
                name: "KVCacheFull",
                expr: format!(
                    "max by (namespace, pod, {key}) ({}) > 0.95",
                    promql::series(Signal::KvCacheUsage, &sel)
                ),
                for_: "30s",
                severity: "critical",
                summary: "KV cache of {{ $labels.pod }} is full".into(),
                description: format!("KV-cache usage is {{{{ $value | printf \"%.2f\" }}}} (warn above 0.80, act above 0.95): {} is about to preempt running requests and recompute them.", engine.title()),
                runbook: "Scale out (is the queue trigger firing?), lower --max-num-seqs, or cap max_tokens; check PreemptionSpike.".into(),
                source: "the community guide's 95 %".into(),
                fire: Case {
                    series: vec![(series_text(kv, &with_engine(&[])), "0.5x10 0.99x20".into())],
                    eval: "12m",
                    expect: Some((pod_labels.clone(), 0.99)),
                },
                quiet: Case {
                    series: vec![(series_text(kv, &with_engine(&[])), "0.9x30".into())],
                    eval: "12m",
                    expect: None,
                },
            },
            Alert {
                name: "PreemptionSpike",
                expr: format!(
                    "sum by (namespace, pod, {key}) (increase({preempt}{{{}}}[5m])) > 5",
                    sel.matchers()
                ),
                for_: "1m",
                severity: "warning",
                summary: "{{ $labels.pod }} is preempting requests".into(),
                description: "{{ $value | printf \"%.0f\" }} preemptions in 5 minutes: the KV cache ran out and requests are being recomputed, which wastes GPU time and inflates latency.".into(),
                runbook: "See KVCacheFull; lower --max-num-seqs or raise --gpu-memory-utilization; scale out.".into(),
                source: "the community guide's 5 per 5 minutes".into(),
                fire: Case {
                    series: vec![(series_text(preempt, &with_engine(&[])), "0+0x10 0+2x30".into())],
                    eval: "18m",
                    expect: Some((pod_labels.clone(), 20.0)),
                },
                quiet: Case {
                    series: vec![(series_text(preempt, &with_engine(&[])), "0+0x10 0+0x30".into())],
                    eval: "18m",
                    expect: None,
                },
            },
            Alert {
                name: target_down,
                expr: format!("up{{namespace=\"{ns}\",job=\"{svc}\"}} == 0"),
                for_: "2m",
                severity: "critical",
                summary: "Prometheus cannot scrape {{ $labels.pod }}".into(),
                description: "The scrape of {{ $labels.instance }} has failed for 2 minutes: its queue is invisible to the autoscaler and the alerts.".into(),
                runbook: format!("kubectl describe pod; is {} up (/health)? Is the ServiceMonitor's port name right?", engine.title()),
                source: "added by inferscale (the seeds had none)".into(),
                fire: Case {
                    series: vec![(series_text("up", &up_labels), "1x10 0x20".into())],
                    eval: "12m",
                    expect: Some((up_labels.clone(), 0.0)),
                },
                quiet: Case {
                    series: vec![(series_text("up", &up_labels), "1x30".into())],
                    eval: "12m",
                    expect: None,
                },
            },
            Alert {
                name: metrics_absent,
                expr: format!("absent({waiting}{})", sel.braces()),
                for_: "5m",
                severity: "critical",
                summary: match engine.model_label() {
                    Some(k) => format!("No {} metrics for {{{{ $labels.{k} }}}} in {{{{ $labels.namespace }}}}", engine.title()),
                    None => format!("No {} metrics in {{{{ $labels.namespace }}}}", engine.title()),
                },
                description: format!("{waiting} has been absent for 5 minutes: the ScaledObject is running on its fallback and no alert above can fire."),
                runbook: "Are the pods running? Is the ServiceMonitor selected by Prometheus (release label)? Was --served-model-name changed?".into(),
                source: "added by inferscale (the seeds had none)".into(),
                fire: Case {
                    series: vec![(series_text("up", &up_labels), "1x30".into())],
                    eval: "10m",
                    expect: Some((model_sel.clone(), 1.0)),
                },
                quiet: Case {
                    series: vec![(series_text(waiting, &with_engine(&[])), "0x30".into())],
                    eval: "10m",
                    expect: None,
                },
            },
            Alert {
                name: "GPUMetricsAbsent",
                expr: format!("absent({gpu_util})"),
                for_: "10m",
                severity: "warning",
                summary: "No GPU metrics from the DCGM exporter".into(),
                description: "DCGM_FI_DEV_GPU_UTIL has been absent for 10 minutes: the GPU tier is blind (GPUMemoryCritical cannot fire).".into(),
                runbook: "Is the dcgm-exporter DaemonSet running on the GPU nodes, and its ServiceMonitor selected?".into(),
                source: "added by inferscale (the seeds had none)".into(),
                fire: Case {
                    series: vec![(series_text("up", &up_labels), "1x30".into())],
                    eval: "12m",
                    expect: Some((Vec::new(), 1.0)),
                },
                quiet: Case {
                    series: vec![(series_text(gpu_util, &gpu_labels), "40x30".into())],
                    eval: "12m",
                    expect: None,
                },
            },
            Alert {
                name: "VLLMHighErrorRate",
                expr: format!(
                    "(\n  sum by (namespace) (rate({http}{{namespace=\"{ns}\",job=\"{svc}\",handler=~\"/v1/.*\",status=\"5xx\"}}[5m]))\n/\n  sum by (namespace) (rate({http}{{namespace=\"{ns}\",job=\"{svc}\",handler=~\"/v1/.*\"}}[5m]))\n) > 0.01"
                ),
                for_: "5m",
                severity: "warning",
                summary: "More than 1 % of requests to {{ $labels.namespace }} fail".into(),
                description: "{{ $value | printf \"%.3f\" }} of the OpenAI API requests answered 5xx over 5 minutes (the community guide's bar: 1 %).".into(),
                runbook: "vLLM logs: engine errors, out-of-memory, requests over max_model_len (those are 400s, not counted)?".into(),
                source: "the community guide's 1 % error rate (added by inferscale)".into(),
                fire: Case {
                    series: vec![
                        (series_text(http, &l(&[("namespace", ns), ("job", svc), ("handler", "/v1/completions"), ("method", "POST"), ("status", "2xx")])), "0+100x50".into()),
                        (series_text(http, &l(&[("namespace", ns), ("job", svc), ("handler", "/v1/completions"), ("method", "POST"), ("status", "5xx")])), "0+0x10 0+5x40".into()),
                    ],
                    eval: "24m",
                    expect: Some((l(&[("namespace", ns)]), 5.0 / 105.0)),
                },
                quiet: Case {
                    series: vec![
                        (series_text(http, &l(&[("namespace", ns), ("job", svc), ("handler", "/v1/completions"), ("method", "POST"), ("status", "2xx")])), "0+100x50".into()),
                        (series_text(http, &l(&[("namespace", ns), ("job", svc), ("handler", "/v1/completions"), ("method", "POST"), ("status", "5xx")])), "0+0x50".into()),
                    ],
                    eval: "24m",
                    expect: None,
                },
            },
        ];
        // What the engine cannot feed is left out (a rule on a series it never serves could
        // only stay silent); `engine_notes` says so in the README.
        alerts.retain(|a| match a.name {
            "KVCacheFull" => sel.serves(Signal::KvCacheUsage),
            "PreemptionSpike" => sel.serves(Signal::Preemptions),
            "VLLMHighErrorRate" => engine == Engine::Vllm,
            _ => true,
        });
        Rules {
            alerts,
            header: crate::header(t, ""),
            namespace: o.namespace.clone(),
            name: format!("{}-inferscale", o.deployment),
            release: o.prometheus_release.clone(),
            runbook_url: o.runbook_url.clone(),
        }
    }

    /// The alert group, each rule with where its threshold comes from above it.
    fn group(&self) -> Explained<RuleGroup> {
        let rules = self
            .alerts
            .iter()
            .map(|a| {
                let mut annotations = BTreeMap::from([
                    ("summary".to_owned(), a.summary.clone()),
                    ("description".to_owned(), a.description.clone()),
                    ("runbook".to_owned(), a.runbook.clone()),
                ]);
                if let Some(u) = &self.runbook_url {
                    annotations.insert(
                        "runbook_url".to_owned(),
                        format!("{}#{}", u.trim_end_matches('/'), a.name.to_lowercase()),
                    );
                }
                Rule {
                    record: None,
                    alert: Some(a.name.to_owned()),
                    expr: a.expr.clone(),
                    for_: Some(a.for_.to_owned()),
                    keep_firing_for: None,
                    labels: Some(BTreeMap::from([(
                        "severity".to_owned(),
                        a.severity.to_owned(),
                    )])),
                    annotations: Some(annotations),
                    extra: Extra::new(),
                }
            })
            .collect();
        let mut e = Explained::new(
            "",
            RuleGroup {
                name: self.name.clone(),
                interval: None,
                rules,
                extra: Extra::new(),
            },
        );
        for (k, a) in self.alerts.iter().enumerate() {
            e.comment(
                format!("rules[{k}].alert"),
                format!("Threshold: {}.", a.source),
            );
        }
        e
    }

    /// `prometheusrule.yaml`: the PrometheusRule object.
    pub fn prometheus_rule(&self) -> Explained<PrometheusRule> {
        let mut e = Explained::new(
            format!(
                "PrometheusRule: the seeds' five alerts and four more.{}",
                self.header
            ),
            PrometheusRule {
                api_version: "monitoring.coreos.com/v1".to_owned(),
                kind: "PrometheusRule".to_owned(),
                metadata: ObjectMeta {
                    name: self.name.clone(),
                    namespace: Some(self.namespace.clone()),
                    labels: Some(BTreeMap::from([
                        ("release".to_owned(), self.release.clone()),
                        (
                            "app.kubernetes.io/managed-by".to_owned(),
                            "inferscale".to_owned(),
                        ),
                    ])),
                    ..ObjectMeta::default()
                },
                spec: RuleFile {
                    groups: Vec::new(),
                    extra: Extra::new(),
                },
            },
        );
        let group = e.adopt("spec.groups[0]", self.group());
        e.object.spec.groups.push(group);
        e.comment(
            "metadata",
            "The release label is what kube-prometheus-stack's Prometheus selects rules by.",
        );
        e
    }

    /// `prometheus-rules.yaml`: the same group as a plain rule file (for `promtool` and for a
    /// Prometheus without the operator).
    pub fn rule_file(&self) -> Explained<RuleFile> {
        let mut e = Explained::new(
            format!(
                "The alert rules as a plain Prometheus rule file (promtool check rules prometheus-rules.yaml).{}",
                self.header
            ),
            RuleFile {
                groups: Vec::new(),
                extra: Extra::new(),
            },
        );
        let group = e.adopt("groups[0]", self.group());
        e.object.groups.push(group);
        e
    }

    /// `prometheusrule.test.yaml`: for each alert a group that makes it fire and one that must
    /// not (`promtool test rules prometheusrule.test.yaml`).
    pub fn tests(&self) -> String {
        let mut groups = Vec::new();
        for a in &self.alerts {
            for (case, firing) in [(&a.fire, true), (&a.quiet, false)] {
                let exp = match (&case.expect, firing) {
                    (Some((labels, value)), true) => {
                        let mut all: Vec<(String, String)> = labels.clone();
                        all.push(("severity".into(), a.severity.into()));
                        let mut ann = vec![
                            ("summary".to_owned(), s(render(&a.summary, labels, *value))),
                            (
                                "description".to_owned(),
                                s(render(&a.description, labels, *value)),
                            ),
                            ("runbook".to_owned(), s(a.runbook.clone())),
                        ];
                        if let Some(u) = &self.runbook_url {
                            ann.push((
                                "runbook_url".into(),
                                s(format!(
                                    "{}#{}",
                                    u.trim_end_matches('/'),
                                    a.name.to_lowercase()
                                )),
                            ));
                        }
                        Y::Seq(vec![map(vec![
                            (
                                "exp_labels",
                                map(all.into_iter().map(|(k, v)| (k, s(v))).collect()),
                            ),
                            ("exp_annotations", map(ann)),
                        ])])
                    }
                    _ => Y::Seq(Vec::new()),
                };
                groups.push(map(vec![
                    (
                        "name",
                        s(format!(
                            "{} {}",
                            a.name,
                            if firing { "fires" } else { "stays quiet" }
                        )),
                    ),
                    ("interval", s("30s")),
                    (
                        "input_series",
                        Y::Seq(
                            case.series
                                .iter()
                                .map(|(se, v)| {
                                    map(vec![("series", s(se.clone())), ("values", s(v.clone()))])
                                })
                                .collect(),
                        ),
                    ),
                    (
                        "alert_rule_test",
                        Y::Seq(vec![map(vec![
                            ("eval_time", s(case.eval)),
                            ("alertname", s(a.name)),
                            ("exp_alerts", exp),
                        ])]),
                    ),
                ]));
            }
        }
        let y = map(vec![
            ("rule_files", Y::Seq(vec![s("prometheus-rules.yaml")])),
            ("evaluation_interval", s("30s")),
            ("tests", Y::Seq(groups)),
        ]);
        document(
            &format!(
                "promtool unit tests for every alert: each fires on the series under it and stays quiet on the others.\nRun: promtool test rules prometheusrule.test.yaml{}",
                self.header
            ),
            &y,
        )
    }
}
