//! A rehearsal from files: the ScaledObject and rules read (refusals with field and line),
//! the simulator's exporters behind the rehearsal's trait, and the outputs (table, CSV).

use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Context as _, Result, anyhow, bail};
use inferscale_autoscale::keda::KedaSpec;
use inferscale_autoscale::rehearse::{AlertRule, Outcome};
use inferscale_manifests::objects::{self, ScaledObject};
use inferscale_sim::FleetExporters;

use crate::input::{cap, read_text};
use crate::output::write_all;
use inferscale_analysis::Thresholds;
use inferscale_autoscale::rehearse::{Setup, Window, rehearse};
use inferscale_autoscale::traffic::Traffic;
use inferscale_engine::fleet::Routing;

/// The 1-based line of `path` (`spec.triggers[1].metadata.threshold`) in block YAML `text`,
/// or of the deepest part of it that is there.
pub(crate) fn line_of(text: &str, path: &str) -> Option<usize> {
    let lines: Vec<&str> = text.lines().collect();
    let content = |i: usize| {
        let t = lines[i].trim();
        !t.is_empty() && !t.starts_with('#') && t != "---"
    };
    let item = |i: usize| lines[i].trim_start().starts_with("- ") || lines[i].trim() == "-";
    let indent = |i: usize| lines[i].len() - lines[i].trim_start().len();
    // Where a line's key starts: after "- " for a list item's first key.
    let keycol = |i: usize| indent(i) + if item(i) { 2 } else { 0 };
    let (mut from, mut to) = (0usize, lines.len());
    let mut found = None;
    for part in path.split('.') {
        let (key, index) = match part.split_once('[') {
            Some((k, i)) => (k, i.trim_end_matches(']').parse::<usize>().ok()),
            None => (part, None),
        };
        let base = keycol((from..to).find(|&i| content(i))?);
        let at = (from..to).find(|&i| {
            content(i) && keycol(i) == base && {
                let t = lines[i].trim_start().trim_start_matches("- ");
                t.strip_prefix(key).is_some_and(|r| r.starts_with(':'))
            }
        })?;
        found = Some(at + 1);
        let c = keycol(at);
        from = at + 1;
        to = (from..to)
            .find(|&i| content(i) && keycol(i) <= c)
            .unwrap_or(to);
        if let Some(n) = index {
            let first = (from..to).find(|&i| content(i) && item(i))?;
            let items: Vec<usize> = (from..to)
                .filter(|&i| content(i) && item(i) && indent(i) == indent(first))
                .collect();
            let i = *items.get(n)?;
            found = Some(i + 1);
            from = i;
            to = items.get(n + 1).copied().unwrap_or(to);
        }
    }
    found
}

fn at_line(text: &str, path: &str) -> String {
    line_of(text, path).map_or_else(|| path.to_owned(), |l| format!("line {l}: {path}"))
}

/// Reads a ScaledObject as KEDA would, refusing what KEDA, the HPA or the rehearsal cannot
/// take, naming the field and its line.
pub(crate) fn read_scaledobject(path: &Path) -> Result<KedaSpec> {
    let text = read_text(path, "the ScaledObject", cap::SMALL)?;
    let so: ScaledObject = objects::load(&text).map_err(|e| anyhow!("{}: {e}", path.display()))?;
    if so.kind != "ScaledObject" {
        bail!(
            "{}: kind {:?} is not ScaledObject (keda.sh/v1alpha1)",
            path.display(),
            so.kind
        );
    }
    let doc: serde_json::Value = serde_json::to_value(&so)?;
    let mut findings = Vec::new();
    inferscale_manifests::validate::keda_rules(&doc, &mut findings);
    if let Some(f) = findings
        .iter()
        .find(|f| f.severity == inferscale_manifests::validate::Severity::Error)
    {
        bail!(
            "{}: {}: {} (KEDA would refuse it)",
            path.display(),
            at_line(&text, &f.path),
            f.message
        );
    }
    KedaSpec::from_object(&so).map_err(|e| {
        anyhow!(
            "{}: {}: {}",
            path.display(),
            at_line(&text, &e.path),
            e.message
        )
    })
}

/// Reads the alerting rules of a PrometheusRule or a plain rule file: each rule's query and
/// `for`, and the first group's own interval if it has one; a refusal names the field and its
/// line.
/// Whose metric names a ScaledObject's (and its rules') queries read, as the simulator's
/// dialect: llama.cpp's when any name is, vLLM's otherwise. An engine the simulator does not
/// speak is refused by name (its queries would read nothing in the rehearsal).
pub(crate) fn speaks(keda: &KedaSpec, rules: &[AlertRule]) -> Result<inferscale_sim::Speaks> {
    use inferscale_catalog::Engine;
    let names: Vec<String> = keda
        .triggers
        .iter()
        .filter_map(|t| t.query())
        .chain(rules.iter().map(|r| &r.query))
        .flat_map(|q| q.metric_names())
        .collect();
    // An external trigger names its engine in its settings.
    let external: Vec<Engine> = keda
        .triggers
        .iter()
        .filter_map(|t| match &t.source {
            inferscale_autoscale::keda::Source::External(c) => c.engine,
            inferscale_autoscale::keda::Source::Prometheus(_) => None,
        })
        .collect();
    let mut found = None;
    for e in Engine::SERVING {
        if names.iter().any(|n| e.owns(n)) || external.contains(&e) {
            match (found, inferscale_sim::Speaks::of(e)) {
                (_, None) => bail!(
                    "the ScaledObject reads {}'s metrics, which the rehearsal's simulator does not serve (it speaks vLLM and llama.cpp)",
                    e.title()
                ),
                (Some(f), Some(s)) if f != s => bail!(
                    "the ScaledObject and its rules read both vLLM's and llama.cpp's metric names: one engine at a time"
                ),
                (_, s) => found = s,
            }
        }
    }
    Ok(found.unwrap_or_default())
}

pub(crate) fn read_rules(path: &Path) -> Result<(Vec<AlertRule>, Option<f64>)> {
    let text = read_text(path, "the rule file", cap::SMALL)?;
    let set = inferscale_autoscale::alerts::read_rules(&text).map_err(|e| {
        if e.path.is_empty() {
            anyhow!("{}: {}", path.display(), e.message)
        } else {
            anyhow!(
                "{}: {}: {}",
                path.display(),
                at_line(&text, &e.path),
                e.message
            )
        }
    })?;
    Ok((set.rules, set.interval_s))
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "-".to_owned(), |v| format!("{v:.digits$}"))
}

fn secs(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "-".to_owned(), |v| format!("{v:.digits$}s"))
}

/// The table `rehearse` and `run` print: one row per rehearsal.
pub(crate) fn table(outcomes: &[(String, Outcome)]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<28} {:>9} {:>9} {:>9} {:>7} {:>9} {:>10} {:>9} {:>6} {:>5}  cycle",
        "scaledobject",
        "SLO met",
        "p95 e2e",
        "p99 e2e",
        "max q",
        "replicas",
        "scale-out",
        "GPU-h",
        "events",
        "flaps"
    );
    for (label, o) in outcomes {
        let m = &o.summary;
        let _ = writeln!(
            s,
            "{:<28} {:>8.2}% {:>9} {:>9} {:>7} {:>9} {:>10} {:>9.2} {:>6} {:>5}  {}",
            label,
            m.slo_attainment * 100.0,
            secs(m.p95_e2e_s, 2),
            secs(m.p99_e2e_s, 2),
            m.max_queue,
            m.max_replicas,
            secs(m.first_scale_out_s, 0),
            m.gpu_hours,
            m.scale_events,
            m.flaps,
            m.cycle().word()
        );
    }
    s
}

/// What one rehearsal says beyond the table: events, alerts, notes.
pub(crate) fn details(label: &str, o: &Outcome) -> String {
    let mut s = String::new();
    let m = &o.summary;
    let _ = writeln!(
        s,
        "{label}: {} requests, {} within the {} s SLO, {} refused (no ready pod); final replicas {}{}",
        m.requests,
        m.within_slo,
        m.slo_e2e_s,
        m.unrouted,
        m.final_replicas,
        crate::job::prompts::found_clause("the prefix caches", m.prefix_cache_hit_rate)
    );
    const SHOWN: usize = 12;
    let mut events: Vec<String> = o
        .events
        .iter()
        .take(SHOWN)
        .map(|e| format!("{:.0}s {}→{} ({})", e.time_s, e.from, e.to, e.by))
        .collect();
    if o.events.len() > SHOWN {
        events.push(format!(
            "… {} more (all in --json and --timeline-out)",
            o.events.len() - SHOWN
        ));
    }
    if !events.is_empty() {
        let _ = writeln!(s, "  scale events: {}", events.join(", "));
    }
    if let (Some(a), Some(b)) = (m.first_scale_out_s, m.recovered_s) {
        let _ = writeln!(s, "  first scale-out at {a:.0} s; recovered at {b:.0} s");
    }
    for a in &o.alerts {
        let _ = writeln!(
            s,
            "  alert {} fired at {:.0} s{}",
            a.name,
            a.fired_s,
            a.resolved_s
                .map_or(", still firing at the end".to_owned(), |r| format!(
                    ", resolved at {r:.0} s"
                ))
        );
    }
    for t in &m.triggers {
        let _ = writeln!(
            s,
            "  trigger {} ({} {}): max value {}, max proposal {}, {} failed reads",
            t.metric,
            t.metric_type,
            t.threshold,
            opt(t.max_value, 3),
            t.max_proposal.map_or("-".to_owned(), |p| p.to_string()),
            t.failures
        );
    }
    for n in &m.notes {
        let _ = writeln!(s, "  note: {n}");
    }
    s
}

/// The timeline CSV of every rehearsal (the `scaledobject` column tells them apart).
pub(crate) fn timeline_csv(outcomes: &[(String, Outcome)]) -> String {
    let triggers = outcomes
        .iter()
        .map(|(_, o)| o.summary.triggers.len())
        .max()
        .unwrap_or(0);
    let mut s = String::from(
        "time_s,offered_rps,arrived_rps,desired_replicas,ready_replicas,nodes,queue,queue_per_pod,running,p95_e2e_s,finished,unrouted",
    );
    for i in 0..triggers {
        let _ = write!(s, ",trigger_{i}");
    }
    s.push_str(",alerts_firing,scaledobject\n");
    for (label, o) in outcomes {
        for r in &o.timeline {
            let _ = write!(
                s,
                "{},{},{:.3},{},{},{},{},{:.3},{},{},{},{}",
                r.time_s,
                (r.offered_rps * 1000.0).round() / 1000.0,
                r.arrived_rps,
                r.desired_replicas,
                r.ready_replicas,
                r.nodes,
                r.queue,
                r.queue_per_pod,
                r.running,
                r.p95_e2e_s.map_or(String::new(), |p| format!("{p:.4}")),
                r.finished,
                r.unrouted
            );
            for i in 0..triggers {
                let v = r.triggers.get(i).copied().flatten();
                let _ = write!(s, ",{}", v.map_or(String::new(), |v| format!("{v:.4}")));
            }
            let _ = writeln!(s, ",{},{}", r.firing.join(";"), label);
        }
    }
    s
}

/// Bins of a request trace's arrivals when a rehearsal replays it, seconds: finer than an
/// autoscaler's reactions, coarse enough that a bin holds several requests.
const TRACE_BIN_S: f64 = 10.0;

/// Reads a trace file: `time_s,rps` rows, or a request trace in Mooncake's JSONL (the one
/// `load --trace` replays), whose arrivals become a rate per 10-second bin and whose
/// requests are the prompts sent (in order, again as new users when the rehearsal needs
/// more).
pub(crate) fn read_trace(
    path: &Path,
) -> Result<(
    inferscale_autoscale::traffic::Traffic,
    Option<crate::job::prompts::Prompts>,
)> {
    let requests = path.extension().is_some_and(|e| e == "jsonl");
    let text = read_text(
        path,
        "the trace",
        if requests { cap::DATASET } else { cap::SMALL },
    )?;
    if requests || text.trim_start().starts_with('{') {
        let turns = inferscale_loadgen::trace::parse_mooncake(&text, &path.display().to_string())?;
        let rows = inferscale_loadgen::trace::rate_series(&turns, TRACE_BIN_S);
        let prompts =
            crate::job::prompts::of_turns(&turns).map(|cycle| crate::job::prompts::Prompts {
                cycle,
                about: format!("trace {}'s prompts", path.display()),
            });
        return Ok((
            inferscale_autoscale::traffic::Traffic::steps(&rows),
            prompts,
        ));
    }
    let traffic = inferscale_autoscale::traffic::Traffic::from_csv(&text).with_context(|| {
        format!(
            "{}: not a trace of time_s,rps (or a request trace in Mooncake's JSONL)",
            path.display()
        )
    })?;
    Ok((traffic, None))
}

/// Sets apart the start-up transients of a rehearsal of `traffic` (see
/// [`inferscale_autoscale::rehearse::start_up_transients`]).
pub(crate) fn set_apart(
    out: &mut Outcome,
    traffic: &Traffic,
    startup_s: f64,
    (capacity_rps, backlogged_rps): (f64, f64),
    from_s: f64,
) {
    // The capacity at the SLO is not known here: what a backlogged replica serves stands
    // for it (a little fewer replicas sharing the arrivals: a slightly longer transient).
    let rates = inferscale_autoscale::rehearse::Rates {
        capacity_rps,
        backlogged_rps,
        slo_rps: backlogged_rps.min(capacity_rps),
    };
    let windows: Vec<Window> =
        inferscale_autoscale::rehearse::start_up_transients(traffic, out, startup_s, rates, from_s)
            .into_iter()
            .map(|(w, _)| w)
            .collect();
    out.set_apart(&windows, from_s);
}

/// What the replicas' prefix caches found in a rehearsal of prompts that share, and why a
/// fleet finds less than one replica did.
fn cache_line(out: &Outcome, routing: Routing) -> String {
    let Some(rate) = out.summary.prefix_cache_hit_rate else {
        return String::new();
    };
    let why = match routing {
        Routing::PrefixAware => {
            "routed as an inference gateway does, to the replica holding most of each prompt"
        }
        _ => {
            "routed at random, as a Service does: a prompt lands on a replica that may not have seen its prefix (a conversation's earlier turns, a system prompt), so a fleet finds less than one replica did; an inference gateway's prefix-aware routing keeps them together (--gateway rehearses it)"
        }
    };
    format!(
        "  the replicas' prefix caches found {:.1} % of prompt tokens ({why})\n",
        rate * 100.0
    )
}

/// `--node-provisioning`'s default: Karpenter launching a GPU instance and the node joining.
pub(crate) const NODE_PROVISIONING: &str = "60s±15s";
/// `--image-pull`'s default: a vLLM image (about 10 GB) on a node that has not pulled it.
pub(crate) const IMAGE_PULL: &str = "60s";

/// The verdict of `run`'s rehearsal.
pub(crate) struct Verdict {
    /// For the terminal.
    pub(crate) text: String,
    /// For report.html.
    pub(crate) html: String,
}

/// `run`'s last step: the ScaledObject it generated (`dir/scaledobject.yaml`, the tuned
/// policy unless `--signal` said otherwise) and the seeds' shape side by side under the
/// standard traffic — half the measured capacity, a step to 2.5× for 20 minutes, and back —
/// on `replica`, with the generated alert rules evaluated on the same series and clients that
/// give up and retry as the OpenAI SDKs do. Writes `rehearsal.html` and `rehearsal.json` into
/// `out`.
///
/// Pods and nodes follow what the generated files assume (`o`): a new node takes the
/// NodePool's provisioning, a replica serves the rest of `--cold-start` after its node is
/// up, and an empty node goes after the NodePool's `consolidateAfter`.
///
/// `capacity` is a replica's (the tuning's unit when it ran: the capacity at the SLO for a
/// run that never saturated its server), else the thresholds'. `routing` is the Service's
/// (or the gateway's).
pub(crate) fn standard(
    t: &Thresholds,
    o: &inferscale_manifests::Options,
    dir: &Path,
    replica: &crate::job::replica::Replica,
    out: &Path,
    capacity: Option<f64>,
    routing: Routing,
) -> Result<Verdict> {
    let model_name = o.model_name.as_str();
    let generated = read_scaledobject(&dir.join("scaledobject.yaml"))?;
    let (rules, interval) = read_rules(&dir.join("prometheusrule.yaml"))?;
    let capacity = capacity
        .or(t.capacity_rps)
        .or(t.saturation_rps)
        .ok_or_else(|| anyhow!("the thresholds have no capacity to shape the traffic on"))?;
    let (low, high) = (
        (capacity * 0.5 * 10.0).round() / 10.0,
        (capacity * 2.5 * 10.0).round() / 10.0,
    );
    let startup = f64::from(o.cold_start_s);
    // Warmed in at the low rate and judged after, as `tune` judges: a deployment that had
    // been serving it, whose Prometheus holds the minutes the trend line reads (started cold,
    // the line through the first minutes of a rate that climbs from nothing predicts a load
    // that never comes, and the replica asked for on it is removed as the step arrives).
    let warm = inferscale_autoscale::tune::warm_s(startup);
    let traffic = Traffic::steps(&[(0.0, low), (600.0, high), (1800.0, low)]).warmed(warm);
    let request = crate::job::replica::request(None, None, Some(t));
    // The prompts the run was measured with, when they shared prefixes.
    let prompts = crate::job::prompts::chosen(None, false, None, request.max_tokens, Some(t), 1)?;
    let mut objects = vec![(
        "scaledobject.yaml (generated)".to_owned(),
        generated,
        o.clone(),
    )];
    if o.policy.is_some() {
        let mut seeds = o.clone();
        seeds.policy = None;
        let so = inferscale_manifests::keda::for_options(t, &seeds).object;
        let k = KedaSpec::from_object(&so).map_err(|e| anyhow!("the seeds' ScaledObject: {e}"))?;
        objects.push(("the seeds' shape (queue depth)".to_owned(), k, seeds));
    }
    let mut labelled = Vec::new();
    let mut backlogged = None;
    for (label, keda, opts) in objects {
        // A policy starts at the replicas the low rate needs at its target (the seeds'
        // shape, which has no such notion, at its floor), as a deployment that had been
        // serving it would.
        let needed = opts.policy.as_ref().and_then(|p| {
            let per = p.capacity_rps * p.utilisation?;
            (per > 0.0).then(|| (low / per).ceil() as u32)
        });
        let initial = needed
            .unwrap_or(0)
            .clamp(keda.hpa.min.max(1), keda.hpa.max.max(1));
        let setup = Setup {
            request,
            prompts: prompts.as_ref().map(|p| p.cycle.clone()),
            routing,
            initial_replicas: initial,
            duration_s: 4800.0 + warm,
            seed: 1,
            slo_e2e_s: t
                .slo
                .and_then(|s| s.e2e_s)
                .unwrap_or(t.scale_out.p95_e2e_seconds),
            scrape_interval_s: 15.0,
            hpa_sync_s: 15.0,
            rule_interval_s: interval.unwrap_or(30.0),
            step_s: 15.0,
            cluster: crate::job::replica::cluster(t, &opts, &replica.engine, initial),
            rules: rules.clone(),
            client: inferscale_autoscale::rehearse::Client::OPENAI_SDK,
            transients: Vec::new(),
            judge_from_s: warm,
            engine: replica.engine.clone(),
        };
        let mut sim =
            FleetExporters::new(&setup.engine, model_name).speaking(speaks(&keda, &rules)?);
        let mut out = rehearse(&setup, &keda, &traffic, &mut sim, &mut |_| {})?;
        let backlogged = match backlogged {
            Some(b) => b,
            None => *backlogged.insert(inferscale_autoscale::tune::backlogged_rps(
                &setup, capacity,
            )?),
        };
        set_apart(&mut out, &traffic, startup, (capacity, backlogged), warm);
        labelled.push((label, out));
    }
    let mut shape =
        format!("{low} → {high} → {low} req/s (0.5×, 2.5×, 0.5× a replica's {capacity:.1} req/s)");
    if let Some(p) = &prompts {
        shape.push_str(&format!(", {}", p.about));
    }
    let mut text = format!(
        "rehearsal ({}; {shape}; clients give up after 600 s and retry twice, as the OpenAI SDKs do; the generated alerts evaluated):\n",
        replica.about
    );
    for (label, out) in &labelled {
        text.push_str(&verdict_line(label, out));
    }
    // A replica calibrated from a measured server has no cache of its own: its measured
    // caching is in its fitted step times.
    if let (Some(_), Some((_, out)), true) =
        (&prompts, labelled.first(), replica.engine.prefix_caching)
    {
        text.push_str(&cache_line(out, routing));
    }
    let page = inferscale_report::rehearsal::render(&labelled, model_name);
    let summaries: Vec<serde_json::Value> = labelled
        .iter()
        .map(|(label, o)| {
            let mut v = serde_json::to_value(&o.summary).unwrap_or_default();
            v["label"] = serde_json::Value::String(label.clone());
            v
        })
        .collect();
    let json = serde_json::to_string_pretty(&serde_json::json!({
        "replica": replica.about,
        "traffic": shape,
        "generated": summaries.first(),
        "compare": summaries,
    }))? + "\n";
    write_all(&[
        (out.join("rehearsal.html"), page.into_bytes()),
        (out.join("rehearsal.json"), json.into_bytes()),
    ])?;
    let html = format!(
        "<h2>Rehearsal of the generated ScaledObject</h2><pre>{}</pre><p>The timeline, replicas and latency are in <a href=\"rehearsal.html\">rehearsal.html</a>; the summary in rehearsal.json.</p>",
        inferscale_report::svg::esc(&text)
    );
    Ok(Verdict { text, html })
}

/// One rehearsal's verdict in a few lines: whether it met its SLO outside the named
/// transient, and if not, why, with the alerts that fired.
fn verdict_line(label: &str, out: &Outcome) -> String {
    let m = &out.summary;
    let outside = m.slo_attainment_outside.unwrap_or(m.slo_attainment);
    let mut s = format!(
        "  {label}: SLO ({} s) met by {:.2} % of requests ({:.2} % outside the step's start-up transient), p95 {} s, up to {} replicas, {} flaps, {:.2} GPU-hours; {}\n",
        m.slo_e2e_s,
        m.slo_attainment * 100.0,
        outside * 100.0,
        opt(m.p95_e2e_s, 2),
        m.max_replicas,
        m.flaps,
        m.gpu_hours,
        m.cycle().sentence()
    );
    for tr in &m.transients {
        let share = if tr.judged == 0 {
            1.0
        } else {
            tr.within as f64 / tr.judged as f64
        };
        s.push_str(&format!(
            "    {}: {:.1} % of its {} requests within the SLO\n",
            tr.window.why,
            share * 100.0,
            tr.judged
        ));
    }
    let o = &m.outcomes;
    if o.timeout + o.refused + o.retries > 0 {
        s.push_str(&format!(
            "    clients: {} given up on after timing out, {} refused with no ready replica, {} retries\n",
            o.timeout, o.refused, o.retries
        ));
    }
    s.push_str(&format!(
        "    alerts fired: {}\n",
        if m.alerts_fired.is_empty() {
            "none".to_owned()
        } else {
            m.alerts_fired.join(", ")
        }
    ));
    s
}

#[cfg(test)]
mod tests {
    use super::line_of;

    #[test]
    fn paths_find_their_lines() {
        let y = "apiVersion: keda.sh/v1alpha1\nkind: ScaledObject\nspec:\n  minReplicaCount: 3\n  triggers:\n    # primary\n    - type: prometheus\n      metadata:\n        threshold: \"5\"\n    - type: cpu\n      metadata:\n        value: \"1\"\n  advanced:\n    horizontalPodAutoscalerConfig:\n      behavior:\n        scaleDown:\n          policies:\n          - type: Pods\n            value: 1\n            periodSeconds: 0\n";
        assert_eq!(line_of(y, "spec.minReplicaCount"), Some(4));
        assert_eq!(line_of(y, "spec.triggers"), Some(5));
        assert_eq!(line_of(y, "spec.triggers[0].metadata.threshold"), Some(9));
        assert_eq!(line_of(y, "spec.triggers[1].type"), Some(10));
        assert_eq!(line_of(y, "spec.triggers[1].metadata.value"), Some(12));
        assert_eq!(
            line_of(
                y,
                "spec.advanced.horizontalPodAutoscalerConfig.behavior.scaleDown.policies[0].periodSeconds"
            ),
            Some(20)
        );
    }
}
