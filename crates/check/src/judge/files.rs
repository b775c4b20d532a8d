//! The checks on the manifests: dashboards, alerts, the ScaledObject, the pod template.

use std::collections::BTreeSet;

use inferscale_catalog::{Engine, Signal, names_of};
use inferscale_manifests::objects::{Container, DO_NOT_DISRUPT, PodTemplateSpec};
use inferscale_manifests::validate::{Severity, lint, object};
use inferscale_promql::Query;

use super::names::{base, blind, query_names};
use super::{fail, no_manifests, pass, short, skipped, warn};
use crate::evidence::{Cluster, Condition, Doc, Evidence, Found, Manifests, Promtool};
use crate::{Check, Outcome};

pub(super) fn dashboards(e: &Evidence) -> Outcome {
    let c = Check::Dashboards;
    let Some(m) = &e.manifests else {
        return no_manifests(c);
    };
    let mut tiers = BTreeSet::new();
    let mut dead = Vec::new();
    let mut n = 0;
    for f in &m.docs {
        let Doc::Dashboard { title, queries } = &f.doc else {
            continue;
        };
        n += 1;
        for q in queries {
            let Some(names) = query_names(q) else {
                continue;
            };
            if blind(&names, e) {
                dead.push(format!(
                    "{} ({title:?}) reads {}",
                    f.path,
                    short(&names.names, 2)
                ));
            } else {
                tiers.extend(names.tiers);
            }
        }
    }
    let all: Vec<&str> = m
        .docs
        .iter()
        .flat_map(|f| match &f.doc {
            Doc::Dashboard { queries, .. } => queries.iter().map(String::as_str).collect(),
            _ => Vec::new(),
        })
        .collect();
    if let Some(f) = foreign(e, all) {
        return fail(c, format!("the dashboards {f}"), regenerate(e));
    }
    if n == 0 {
        return fail(
            c,
            format!("no Grafana dashboard in {}", m.dir.display()),
            "inferscale generate writes grafana/1-service-slis.json, 2-engine.json and 3-gpu-dcgm.json: import them",
        );
    }
    if !dead.is_empty() {
        return fail(
            c,
            format!(
                "{} panel quer{} read only metric names current vLLM does not serve, so they show nothing: {}",
                dead.len(),
                if dead.len() == 1 { "y" } else { "ies" },
                short(&dead, 2)
            ),
            "replace vllm:gpu_cache_usage_perc with vllm:kv_cache_usage_perc, vllm:time_per_output_token_seconds with vllm:inter_token_latency_seconds; the avg_*_throughput_toks_per_s gauges do not exist in V1: use rate(vllm:generation_tokens_total[1m])",
        );
    }
    let missing: Vec<&str> = [
        (1, "service SLIs (tier 1)"),
        (2, "engine (tier 2)"),
        (3, "GPU/DCGM (tier 3)"),
    ]
    .iter()
    .filter(|(t, _)| !tiers.contains(t))
    .map(|(_, n)| *n)
    .collect();
    if !missing.is_empty() {
        return fail(
            c,
            format!(
                "{n} dashboard(s), but no panel for the {}",
                missing.join(", ")
            ),
            "add the missing tier's dashboard (inferscale generate writes all three)",
        );
    }
    pass(
        c,
        format!("{n} dashboards cover the three tiers, every query on current names"),
    )
}

/// The seeds' five alerts: their names, and the signal each one reads when it is named
/// otherwise.
pub(super) const FIVE: [(&str, Signal); 5] = [
    ("HighQueueDepth", Signal::QueueDepth),
    ("HighLatency", Signal::E2eLatency),
    ("GPUMemoryCritical", Signal::FbUsed),
    ("KVCacheFull", Signal::KvCacheUsage),
    ("PreemptionSpike", Signal::Preemptions),
];

pub(super) fn reads_signal(q: &Query, s: Signal) -> bool {
    q.metric_names().iter().any(|n| {
        Signal::ALL.contains(&s)
            && Engine::ALL
                .into_iter()
                .flat_map(|en| names_of(en, s))
                .any(|m| m.name == base(n) || m.name == n.as_str())
    })
}

pub(super) fn alerts(e: &Evidence) -> Outcome {
    let c = Check::Alerts;
    let Some(m) = &e.manifests else {
        return no_manifests(c);
    };
    let mut rules = Vec::new();
    let mut broken = Vec::new();
    for f in &m.docs {
        match &f.doc {
            Doc::Rules(Ok(set)) => rules.extend(set.rules.iter().map(|r| (f.path.clone(), r))),
            Doc::Rules(Err(why)) => broken.push(format!("{}: {why}", f.path)),
            _ => {}
        }
    }
    for (f, why) in &m.unreadable {
        broken.push(format!("{f}: {why}"));
    }
    let rule_fix = "fix the rule file (promtool check rules shows the same), or regenerate it with inferscale generate";
    if !broken.is_empty() {
        return fail(c, format!("unreadable: {}", short(&broken, 2)), rule_fix);
    }
    if let Promtool::Ran(verdicts) = &e.promtool {
        let bad: Vec<String> = verdicts
            .iter()
            .filter_map(|(f, v)| v.as_ref().err().map(|w| format!("{f}: {w}")))
            .collect();
        if !bad.is_empty() {
            return fail(
                c,
                format!("promtool check rules refused {}", short(&bad, 2)),
                rule_fix,
            );
        }
    }
    if let Some(f) = foreign(e, rules.iter().map(|(_, r)| r.query.text())) {
        return fail(c, format!("the alerts {f}"), regenerate(e));
    }
    // An alert on a signal the engine does not serve could never fire: not required.
    // (One present by name stands, whatever it reads: llama.cpp's HighLatency reads a mean.)
    let (five, not_applicable): (Vec<_>, Vec<_>) = FIVE.iter().partition(|(name, s)| {
        s.tier() == inferscale_catalog::Tier::Gpu
            || e.engine.serves(*s)
            || rules.iter().any(|(_, r)| r.name == *name)
    });
    let missing: Vec<&str> = five
        .iter()
        .filter(|(name, s)| {
            !rules
                .iter()
                .any(|(_, r)| r.name == *name || reads_signal(&r.query, *s))
        })
        .map(|(n, _)| *n)
        .collect();
    if !missing.is_empty() {
        let file = rules
            .first()
            .map_or("prometheusrule.yaml", |(f, _)| f.as_str());
        return fail(
            c,
            format!(
                "{} of the five alerts missing: {} ({} alerting rules found)",
                missing.len(),
                missing.join(", "),
                rules.len()
            ),
            format!(
                "add them to {file} under spec.groups[].rules (inferscale generate writes all five with measured thresholds)"
            ),
        );
    }
    let dead: Vec<String> = rules
        .iter()
        .filter(|(_, r)| query_names(r.query.text()).is_some_and(|n| blind(&n, e)))
        .map(|(f, r)| format!("{f}: {}", r.name))
        .collect();
    if !dead.is_empty() {
        return fail(
            c,
            format!(
                "{} alert(s) read only metric names current vLLM does not serve, so they can never fire: {}",
                dead.len(),
                short(&dead, 3)
            ),
            "read the current names (vllm:kv_cache_usage_perc, vllm:inter_token_latency_seconds), with the old ones as `or` fallbacks",
        );
    }
    let present = present(e, five.len(), &not_applicable);
    let checked = match &e.promtool {
        Promtool::Ran(v) => format!(", promtool check rules passed on {} file(s)", v.len()),
        Promtool::Missing => ", read by inferscale (promtool not installed)".to_owned(),
    };
    if let Some(p) = &e.prometheus {
        match &p.rules {
            Ok(loaded) => {
                let absent: Vec<&str> = five
                    .iter()
                    .map(|(n, _)| *n)
                    .filter(|n| {
                        rules.iter().any(|(_, r)| r.name == *n)
                            && !loaded.iter().any(|l| l.name == *n)
                    })
                    .collect();
                if !absent.is_empty() {
                    return fail(
                        c,
                        format!(
                            "in the files, but not loaded in {}: {}",
                            p.url,
                            absent.join(", ")
                        ),
                        "apply prometheusrule.yaml; its metadata.labels.release must match the operator's ruleSelector",
                    );
                }
                let unhealthy: Vec<String> = loaded
                    .iter()
                    .filter(|l| l.health == "err")
                    .map(|l| format!("{}: {}", l.name, l.last_error.clone().unwrap_or_default()))
                    .collect();
                if !unhealthy.is_empty() {
                    return fail(
                        c,
                        format!(
                            "loaded in {}, failing to evaluate: {}",
                            p.url,
                            short(&unhealthy, 2)
                        ),
                        rule_fix,
                    );
                }
                return pass(
                    c,
                    format!("{present}{checked}, and loaded and healthy in {}", p.url),
                );
            }
            Err(why) => {
                return warn(
                    c,
                    format!(
                        "{present}{checked}; {} did not list its rules: {why}",
                        p.url
                    ),
                    "check that Prometheus' /api/v1/rules answers",
                );
            }
        }
    }
    pass(c, format!("{present}{checked}"))
}

/// "the five alerts are present", or which the engine can feed and which it cannot.
fn present(e: &Evidence, n: usize, not_applicable: &[(&str, Signal)]) -> String {
    if not_applicable.is_empty() {
        return "the five alerts are present".to_owned();
    }
    let names: Vec<&str> = not_applicable.iter().map(|(n, _)| *n).collect();
    let signals: Vec<&str> = not_applicable.iter().map(|(_, s)| s.label()).collect();
    format!(
        "the {n} alerts {} can feed are present ({} left out: it serves no {})",
        e.engine.title(),
        names.join(", "),
        signals.join(" or ")
    )
}

/// The first query among `queries` that reads another inference engine's names than the
/// deployment's, said as "read vLLM's names (vllm:…), but …".
pub(super) fn foreign<'a>(
    e: &Evidence,
    queries: impl IntoIterator<Item = &'a str>,
) -> Option<String> {
    for q in queries {
        let Some(n) = query_names(q) else { continue };
        for name in &n.names {
            if let Some(other) = Engine::SERVING
                .into_iter()
                .find(|x| *x != e.engine && x.owns(name))
            {
                return Some(format!(
                    "read {}'s names ({name}), but the engine is {} ({}): they would read nothing",
                    other.title(),
                    e.engine.title(),
                    e.engine_from
                ));
            }
        }
    }
    None
}

/// The fix for files written for another engine.
pub(super) fn regenerate(e: &Evidence) -> String {
    format!(
        "regenerate them for this engine: inferscale generate --engine {} (or give check the --engine the deployment runs)",
        e.engine.key()
    )
}

pub(super) fn scaled_object(e: &Evidence) -> Outcome {
    let c = Check::ScaledObject;
    let Some(m) = &e.manifests else {
        return no_manifests(c);
    };
    let sos: Vec<(&Found, &serde_json::Value)> = m
        .docs
        .iter()
        .filter_map(|f| match &f.doc {
            Doc::ScaledObject(v) => Some((f, v)),
            _ => None,
        })
        .collect();
    let triggers: Vec<&str> = sos
        .iter()
        .flat_map(|(_, so)| so["spec"]["triggers"].as_array().into_iter().flatten())
        .filter_map(|t| t["metadata"]["query"].as_str())
        .collect();
    if let Some(f) = foreign(e, triggers) {
        return fail(c, format!("the ScaledObject's triggers {f}"), regenerate(e));
    }
    if let Some(cl) = &e.cluster {
        if cl.not_served.iter().any(|k| k == "ScaledObject") {
            return fail(
                c,
                format!(
                    "the cluster ({}) does not serve ScaledObjects: KEDA is not installed",
                    cl.source
                ),
                "install KEDA (helm install keda kedacore/keda --namespace keda --create-namespace), then apply scaledobject.yaml",
            );
        }
        for kind in ["ScaledObject", "HorizontalPodAutoscaler"] {
            if let Some(why) = cl.unread(kind) {
                return fail(
                    c,
                    format!("{kind}s in namespace {}: {why}", cl.namespace),
                    "let the credentials list scaledobjects.keda.sh and horizontalpodautoscalers.autoscaling in the namespace (kubectl auth can-i list scaledobjects.keda.sh -n NAMESPACE)",
                );
            }
        }
    }
    if sos.is_empty() {
        return fail(
            c,
            format!("no ScaledObject in {}", m.dir.display()),
            "inferscale generate writes scaledobject.yaml (queue depth primary, p95 guardrail): apply it",
        );
    }
    let mut warnings = Vec::new();
    for (f, v) in &sos {
        let errors: Vec<String> = object(v).iter().map(ToString::to_string).collect();
        if !errors.is_empty() {
            return fail(
                c,
                format!("{} would be refused: {}", f.path, short(&errors, 2)),
                format!(
                    "fix {} as the message says (inferscale generate writes a valid one)",
                    f.path
                ),
            );
        }
        warnings.extend(
            lint(v)
                .iter()
                .filter(|x| x.severity != Severity::Error)
                .map(|x| format!("{}: {x}", f.path)),
        );
    }
    let mut live = String::new();
    if let Some(cl) = &e.cluster {
        match live_status(cl) {
            Err(o) => return o,
            Ok((w, line)) => {
                warnings.extend(w);
                live = line;
            }
        }
    }
    if !warnings.is_empty() {
        return warn(
            c,
            format!("valid, with {}: {}", warnings.len(), short(&warnings, 2)),
            "see the messages; each names the field (live ones: kubectl describe the object)",
        );
    }
    let names: Vec<String> = sos
        .iter()
        .map(|(f, v)| {
            format!(
                "{} ({} → {})",
                f.path,
                v.pointer("/metadata/name")
                    .and_then(|n| n.as_str())
                    .unwrap_or("?"),
                v.pointer("/spec/scaleTargetRef/name")
                    .and_then(|n| n.as_str())
                    .unwrap_or("?")
            )
        })
        .collect();
    pass(
        c,
        format!(
            "{} valid against KEDA's CRD schema and its webhook's rules{live}",
            names.join(", ")
        ),
    )
}

fn condition<'a>(cs: &'a [Condition], kind: &str) -> Option<&'a Condition> {
    cs.iter().find(|c| c.kind == kind)
}

fn said(c: &Condition) -> String {
    match (c.reason.is_empty(), c.message.is_empty()) {
        (false, false) => format!("{}: {}", c.reason, c.message),
        (false, true) => c.reason.clone(),
        (true, false) => c.message.clone(),
        (true, true) => "no reason given".into(),
    }
}

/// The live ScaledObjects and their HPAs: a failure, or warnings and a line for the pass.
fn live_status(cl: &Cluster) -> Result<(Vec<String>, String), Outcome> {
    let c = Check::ScaledObject;
    let ns = &cl.namespace;
    let mut warnings = Vec::new();
    let mut lines = Vec::new();
    for so in &cl.scaled_objects {
        let describe = format!(
            "kubectl -n {ns} describe scaledobject {}; KEDA's operator log says why (kubectl -n keda logs deploy/keda-operator)",
            so.name
        );
        let (kind, target) = &so.target;
        if kind == "Deployment" && !cl.deployments.contains(target) {
            return Err(fail(
                c,
                format!(
                    "ScaledObject {ns}/{} scales Deployment {target:?}, which is not in namespace {ns} (there: {})",
                    so.name,
                    if cl.deployments.is_empty() {
                        "none".to_owned()
                    } else {
                        cl.deployments.join(", ")
                    }
                ),
                format!(
                    "set spec.scaleTargetRef.name to the vLLM Deployment's name (inferscale generate --deployment NAME), or deploy it as {target}"
                ),
            ));
        }
        match condition(&so.conditions, "Ready") {
            Some(r) if r.status == "True" => {}
            Some(r) => {
                return Err(fail(
                    c,
                    format!("ScaledObject {ns}/{} is not Ready ({})", so.name, said(r)),
                    describe,
                ));
            }
            None => {
                return Err(fail(
                    c,
                    format!(
                        "ScaledObject {ns}/{} has no Ready condition: KEDA has not reconciled it",
                        so.name
                    ),
                    describe,
                ));
            }
        }
        if let Some(f) = condition(&so.conditions, "Fallback").filter(|f| f.status == "True") {
            warnings.push(format!(
                "ScaledObject {ns}/{}: KEDA's fallback is engaged ({})",
                so.name,
                said(f)
            ));
        }
        let Some(h) = cl.hpas.iter().find(|h| h.name == so.hpa) else {
            return Err(fail(
                c,
                format!(
                    "ScaledObject {ns}/{} is Ready but its HPA {} is not in the namespace",
                    so.name, so.hpa
                ),
                describe,
            ));
        };
        for kind in ["AbleToScale", "ScalingActive"] {
            if let Some(x) = condition(&h.conditions, kind).filter(|x| x.status == "False") {
                warnings.push(format!(
                    "HPA {ns}/{}: {kind} is False ({})",
                    h.name,
                    said(x)
                ));
            }
        }
        let n = |v: Option<u64>| v.map_or_else(|| "?".to_owned(), |v| v.to_string());
        lines.push(format!(
            "{} Ready, HPA {} at {} replicas (desired {})",
            so.name,
            h.name,
            n(h.current),
            n(h.desired)
        ));
    }
    let line = if lines.is_empty() {
        String::new()
    } else {
        format!("; live ({}): {}", cl.source, lines.join("; "))
    };
    Ok((warnings, line))
}

/// The pod templates (Deployments and patches of them), with where each is.
pub(super) fn templates(m: &Manifests) -> Vec<(&str, &PodTemplateSpec)> {
    m.docs
        .iter()
        .filter_map(|f| match &f.doc {
            Doc::PodTemplate { template, .. } => Some((f.path.as_str(), template.as_ref())),
            _ => None,
        })
        .collect()
}

pub(super) fn do_not_disrupt(e: &Evidence) -> Outcome {
    let c = Check::DoNotDisrupt;
    let Some(m) = &e.manifests else {
        return no_manifests(c);
    };
    let ts = templates(m);
    if ts.is_empty() {
        let why = e
            .cluster
            .as_ref()
            .and_then(|cl| cl.unread("Deployment"))
            .map_or_else(String::new, |w| format!(" ({w})"));
        return fail(
            c,
            format!(
                "no Deployment (or patch of one) in {}{why}",
                m.dir.display()
            ),
            "add vllm-deployment-patch.yaml (inferscale generate), or your Deployment, to the folder",
        );
    }
    let with: Vec<&str> = ts
        .iter()
        .filter(|(_, t)| {
            t.metadata
                .as_ref()
                .and_then(|md| md.annotations.as_ref())
                .and_then(|a| a.get(DO_NOT_DISRUPT))
                .is_some_and(|v| v == "true")
        })
        .map(|(p, _)| *p)
        .collect();
    if with.is_empty() {
        return fail(
            c,
            format!(
                "no pod template carries {DO_NOT_DISRUPT}: \"true\" ({}): Karpenter may consolidate a node from under a serving pod",
                ts.iter().map(|(p, _)| *p).collect::<Vec<_>>().join(", ")
            ),
            format!(
                "set spec.template.metadata.annotations.{DO_NOT_DISRUPT}: \"true\" in {}",
                ts[0].0
            ),
        );
    }
    let mut pools = Vec::new();
    for np in e.cluster.iter().flat_map(|cl| &cl.nodepools) {
        let name = np
            .pointer("/metadata/name")
            .and_then(|n| n.as_str())
            .unwrap_or("?");
        let errors: Vec<String> = object(np)
            .iter()
            .filter(|f| f.severity == Severity::Error)
            .map(ToString::to_string)
            .collect();
        if !errors.is_empty() {
            return warn(
                c,
                format!(
                    "{DO_NOT_DISRUPT} is on the pod template, but NodePool {name} would be refused: {}",
                    short(&errors, 2)
                ),
                format!("kubectl edit nodepool {name} as the message says"),
            );
        }
        pools.push(format!(
            "NodePool {name}: consolidation {}",
            np.pointer("/spec/disruption/consolidationPolicy")
                .and_then(|p| p.as_str())
                .unwrap_or("WhenEmptyOrUnderutilized (the default)")
        ));
    }
    if let Some(why) = e.cluster.as_ref().and_then(|cl| cl.unread("NodePool")) {
        pools.push(format!("NodePools not read: {why}"));
    }
    let pools = if pools.is_empty() {
        String::new()
    } else {
        format!("; {}", pools.join(", "))
    };
    pass(
        c,
        format!(
            "{DO_NOT_DISRUPT}: \"true\" on the pod template ({}){pools}",
            with.join(", ")
        ),
    )
}

/// The vLLM container of a template: by name, else the one whose command or args mention
/// vLLM, else the first.
pub(super) fn vllm_container<'a>(t: &'a PodTemplateSpec, name: &str) -> Option<&'a Container> {
    let cs = &t.spec.as_ref()?.containers;
    cs.iter()
        .find(|c| c.name == name)
        .or_else(|| {
            cs.iter().find(|c| {
                c.command
                    .iter()
                    .chain(c.args.iter())
                    .flatten()
                    .chain(c.image.iter())
                    .any(|a| a.contains("vllm"))
            })
        })
        .or_else(|| cs.first())
}

pub(super) fn warmup_gates_readiness(e: &Evidence) -> Outcome {
    let c = Check::WarmupGatesReadiness;
    let Some(m) = &e.manifests else {
        return no_manifests(c);
    };
    let ts = templates(m);
    let fix = "apply vllm-deployment-patch.yaml (inferscale generate): a warm-up sidecar runs `inferscale warmup --done-file /inferscale/warm` and the readiness probe waits for that file";
    if ts.is_empty() {
        return fail(
            c,
            format!("no Deployment (or patch of one) in {}", m.dir.display()),
            fix,
        );
    }
    let job = m.docs.iter().any(|f| matches!(&f.doc, Doc::Job(t) if t.spec.as_ref().is_some_and(|s| s.containers.iter().any(|c| c.args.iter().flatten().any(|a| a == "warmup")))));
    for (path, t) in &ts {
        let Some(spec) = &t.spec else { continue };
        // The warm-up's done file, from a sidecar or container running `inferscale warmup`.
        let done: Option<&str> = spec
            .init_containers
            .iter()
            .chain(&spec.containers)
            .find_map(|c| {
                let args = c.args.as_deref()?;
                if !args.iter().any(|a| a == "warmup") {
                    return None;
                }
                c.flag("--done-file")
            });
        let Some(v) = vllm_container(t, &e.names.container) else {
            continue;
        };
        let Some(probe) = &v.readiness_probe else {
            continue;
        };
        let probe_text = serde_json::to_string(probe).unwrap_or_default();
        if let Some(d) = done
            && probe_text.contains(d)
        {
            return pass(
                c,
                format!(
                    "{path}: {}'s readiness probe waits for the warm-up's {d}",
                    v.name
                ),
            );
        }
    }
    let probe = ts
        .iter()
        .filter_map(|(p, t)| Some((p, vllm_container(t, &e.names.container)?)))
        .find(|(_, v)| v.readiness_probe.is_some());
    let reason = match probe {
        Some((p, v)) => format!(
            "{p}: {}'s readiness probe does not wait for a warm-up: pods take traffic cold (the first requests pay seconds)",
            v.name
        ),
        None => "no readiness probe on the vLLM container: pods take traffic before the model is loaded and warm".to_owned(),
    };
    if job {
        return fail(
            c,
            format!("{reason}; a warm-up Job exists, but it runs after pods are ready"),
            fix,
        );
    }
    fail(c, reason, fix)
}

pub(super) fn max_replicas_carry_peak(e: &Evidence) -> Outcome {
    let c = Check::MaxReplicasCarryPeak;
    let peak = e
        .run
        .as_ref()
        .and_then(|r| r.thresholds.as_ref())
        .and_then(|t| t.as_ref().ok())
        .and_then(|t| t.peak.clone());
    let Some(peak) = peak else {
        return skipped(c, "thresholds.json has no peak (run with --peak-rps)");
    };
    let Some(m) = &e.manifests else {
        return no_manifests(c);
    };
    for f in &m.docs {
        if let Doc::ScaledObject(v) = &f.doc {
            let max = v
                .pointer("/spec/maxReplicaCount")
                .and_then(|x| x.as_u64())
                .unwrap_or(100);
            if max < u64::from(peak.replicas) {
                return fail(
                    c,
                    format!(
                        "{}: maxReplicaCount {max} cannot carry the {:.0} req/s peak, which needs {} replicas at {:.0} req/s each",
                        f.path, peak.rps, peak.replicas, peak.per_replica_rps
                    ),
                    format!(
                        "set spec.maxReplicaCount to {} in {} (and the NodePool's GPU limit with it)",
                        peak.replicas, f.path
                    ),
                );
            }
            return pass(
                c,
                format!(
                    "{}: maxReplicaCount {max} ≥ the {} replicas the {:.0} req/s peak needs",
                    f.path, peak.replicas, peak.rps
                ),
            );
        }
    }
    skipped(c, "no ScaledObject")
}
