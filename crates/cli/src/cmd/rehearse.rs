//! `inferscale rehearse`: a ScaledObject (and others, or the built-in signals) under traffic,
//! in virtual time; a table, a timeline, a page and a JSON summary.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Result, anyhow, bail};
use inferscale_analysis::Thresholds;
use inferscale_autoscale::cluster::{ClusterSpec, Delay};
use inferscale_autoscale::keda::KedaSpec;
use inferscale_autoscale::rehearse::{Outcome, Setup, rehearse};
use inferscale_autoscale::traffic::Traffic;
use inferscale_engine::EngineConfig;
use inferscale_engine::fleet::Routing;
use inferscale_sim::FleetExporters;

use crate::cli::{RehearseArgs, RoutingArg};
use crate::job::manifests::read_thresholds;
use crate::job::prompts::Prompts;
use crate::job::rehearse::{
    details, read_rules, read_scaledobject, read_trace, table, timeline_csv,
};
use crate::output::{check_distinct, check_writable, emit, write_all};

fn delay(flag: &str, s: &str) -> Result<Delay> {
    Delay::parse(s, |d| {
        inferscale_catalog::units::parse_duration(d).map(|d| d.as_secs_f64())
    })
    .map_err(|e| anyhow!("--{flag}: {e}"))
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

/// Takes the nodes' behaviour from a NodePool: `consolidateAfter` (`Never`: never
/// consolidated), the `do-not-disrupt` annotation of its node template, and a single
/// `instance-gpu-count` requirement as the GPUs per node.
fn apply_nodepool(path: &std::path::Path, c: &mut ClusterSpec) -> Result<()> {
    use inferscale_manifests::objects::{After, NodePool};
    let text = crate::input::read_text(path, "the NodePool", crate::input::cap::SMALL)?;
    let pool: NodePool = inferscale_manifests::yaml_documents(&text)
        .into_iter()
        .find(|d| d.lines().any(|l| l.trim() == "kind: NodePool"))
        .ok_or_else(|| anyhow!("{}: no document of kind NodePool", path.display()))
        .and_then(|d| {
            inferscale_manifests::objects::load(d).map_err(|e| anyhow!("{}: {e}", path.display()))
        })?;
    match pool.consolidate_after() {
        Some(After::Wait(d)) => c.consolidate_after_s = d.as_secs_f64(),
        Some(After::Never) => c.do_not_disrupt = true,
        None => bail!(
            "{}: spec.disruption.consolidateAfter is not a duration Karpenter takes",
            path.display()
        ),
    }
    c.do_not_disrupt |= pool.do_not_disrupt();
    if let Some(r) = pool.requirement("karpenter.k8s.aws/instance-gpu-count")
        && r.operator == "In"
        && let [one] = r.values.as_slice()
    {
        c.gpus_per_node = one.parse().map_err(|_| {
            anyhow!(
                "{}: instance-gpu-count {one:?} is not a number",
                path.display()
            )
        })?;
    }
    Ok(())
}

/// Runs the command.
pub(crate) fn run(a: &RehearseArgs) -> Result<ExitCode> {
    let outs: Vec<&std::path::Path> = [&a.timeline_out, &a.html_out]
        .into_iter()
        .flatten()
        .map(PathBuf::as_path)
        .collect();
    check_distinct(&outs)?;
    for p in &outs {
        check_writable(p)?;
    }
    let thresholds = a.thresholds.as_deref().map(read_thresholds).transpose()?;
    let replica = crate::job::replica::resolve(&a.replica, thresholds.as_ref())?;
    eprintln!("replicas: {}", replica.about);
    let engine = replica.engine;
    let (traffic, warm, duration_s, own) = traffic_of(a)?;
    let model_name = a
        .model_name
        .clone()
        .or_else(|| thresholds.as_ref().map(|t| t.source.model.clone()))
        .unwrap_or_else(|| engine.model.hf_id.clone());
    let mut setup = setup_of(a, thresholds.as_ref(), engine, warm, duration_s)?;
    let prompts = if a.sharing.shape.is_none() && !a.sharing.unique_prompts && own.is_some() {
        own
    } else {
        crate::job::prompts::chosen(
            a.sharing.shape.as_deref(),
            a.sharing.unique_prompts,
            a.prompt_tokens,
            setup.request.max_tokens,
            thresholds.as_ref(),
            a.seed,
        )?
    };
    if let Some(p) = prompts {
        let (input, output) = p.cycle.mean_lengths();
        eprintln!(
            "prompts: {} ({} a pass, {input:.0} prompt and {output:.0} output tokens on average)",
            p.about,
            p.cycle.len()
        );
        setup.prompts = Some(p.cycle);
    }
    let c = &setup.cluster;
    let startup =
        c.node_provisioning.mean() + c.image_pull.mean() + c.model_load.mean() + c.warmup.mean();
    let capacity = thresholds
        .as_ref()
        .and_then(|t| t.capacity_rps.or(t.saturation_rps));
    if setup.cluster.gpus_per_pod > setup.cluster.gpus_per_node {
        bail!(
            "--gpus-per-node {}: the profile's replicas need {} GPUs each",
            setup.cluster.gpus_per_node,
            setup.cluster.gpus_per_pod
        );
    }
    let objects = objects_of(a, thresholds.as_ref(), &setup, &model_name)?;
    let total = objects.len();
    let mut outcomes: Vec<(String, Outcome)> = Vec::new();
    for (i, (label, k)) in objects.into_iter().enumerate() {
        let started = inferscale_clock::now();
        eprintln!(
            "rehearsing {label} ({}/{total}): {:.1} h of traffic…",
            i + 1,
            duration_s / 3600.0
        );
        let mut sim = FleetExporters::new(&setup.engine, &model_name)
            .speaking(crate::job::rehearse::speaks(&k, &setup.rules)?);
        let mut out = rehearse(&setup, &k, &traffic, &mut sim, &mut |t| {
            eprintln!("  {label}: {:.0} h simulated", t / 3600.0);
        })?;
        if let Some(c) = capacity {
            let backlogged = inferscale_autoscale::tune::backlogged_rps(&setup, c)?;
            crate::job::rehearse::set_apart(
                &mut out,
                &traffic,
                startup,
                (c, backlogged),
                setup.judge_from_s,
            );
        }
        eprintln!("  done in {:.1} s", started.elapsed().as_secs_f64());
        outcomes.push((label, out));
    }
    let mut files = Vec::new();
    if let Some(p) = &a.timeline_out {
        files.push((p.clone(), timeline_csv(&outcomes).into_bytes()));
    }
    if let Some(p) = &a.html_out {
        files.push((
            p.clone(),
            inferscale_report::rehearsal::render(&outcomes, &model_name).into_bytes(),
        ));
    }
    write_all(&files)?;
    print(a, &outcomes)?;
    let first = &outcomes[0].1.summary;
    Ok(
        if first.first_scale_out_s.is_some() && !first.cycle_completed {
            ExitCode::from(crate::exit::CHECK_FAILED)
        } else {
            ExitCode::SUCCESS
        },
    )
}

/// The traffic the flags give, warmed by `--warm-in`, and how long to rehearse it: the
/// traffic, the warm-up and the duration, seconds, and a request trace's own prompts.
fn traffic_of(a: &RehearseArgs) -> Result<(Traffic, f64, f64, Option<Prompts>)> {
    let (traffic, own) = match (&a.trace, &a.pattern) {
        (Some(p), _) => read_trace(p)?,
        (None, Some(spec)) => (
            Traffic::pattern(spec, |d| {
                inferscale_catalog::units::parse_duration(d).map(|d| d.as_secs_f64())
            })
            .map_err(|e| anyhow!("--pattern: {e}"))?,
            None,
        ),
        (None, None) => bail!("give the traffic: --trace FILE or --pattern SPEC"),
    };
    let warm = a.warm_in.map_or(0.0, secs);
    let traffic = if warm > 0.0 {
        traffic.warmed(warm)
    } else {
        traffic
    };
    let duration_s = a
        .duration
        .map_or(traffic.natural_end() + 1800.0, |d| secs(d) + warm);
    if duration_s <= 0.0 || duration_s > 31.0 * 86400.0 {
        bail!("--duration {duration_s} s: expected more than 0 s and at most 31 days");
    }
    Ok((traffic, warm, duration_s, own))
}

/// The rehearsal's setup from the flags, the thresholds (the request's shape, the SLO) and
/// the replica's engine.
fn setup_of(
    a: &RehearseArgs,
    thresholds: Option<&Thresholds>,
    engine: EngineConfig,
    warm: f64,
    duration_s: f64,
) -> Result<Setup> {
    let model_load = match &a.model_load {
        Some(s) => delay("model-load", s)?,
        None => Delay::Fixed(engine.load_time_s()),
    };
    let (rules, group_interval) = match &a.rules {
        Some(p) => read_rules(p)?,
        None => (Vec::new(), None),
    };
    let gpus_per_node = a
        .gpus_per_node
        .unwrap_or(engine.tensor_parallel_size.max(1));
    let setup = Setup {
        request: crate::job::replica::request(a.prompt_tokens, a.max_tokens, thresholds),
        prompts: None,
        routing: match a.routing {
            RoutingArg::Random => Routing::Random,
            RoutingArg::RoundRobin => Routing::RoundRobin,
            RoutingArg::LeastOutstanding => Routing::LeastOutstanding,
            RoutingArg::PrefixAware => Routing::PrefixAware,
        },
        initial_replicas: a.initial_replicas,
        duration_s,
        seed: a.seed,
        slo_e2e_s: a.slo_e2e.map(secs).unwrap_or_else(|| {
            thresholds.map_or(5.0, |t| {
                t.slo
                    .and_then(|s| s.e2e_s)
                    .unwrap_or(t.scale_out.p95_e2e_seconds)
            })
        }),
        scrape_interval_s: secs(a.scrape_interval),
        hpa_sync_s: 15.0,
        rule_interval_s: group_interval.unwrap_or(secs(a.rule_interval)),
        step_s: 15.0,
        cluster: ClusterSpec {
            gpus_per_node,
            gpus_per_pod: engine.tensor_parallel_size.max(1),
            node_provisioning: delay("node-provisioning", &a.node_provisioning)?,
            image_pull: delay("image-pull", &a.image_pull)?,
            model_load,
            warmup: delay("warmup", &a.warmup)?,
            consolidate_after_s: secs(a.consolidate_after),
            do_not_disrupt: a.do_not_disrupt,
            initial_nodes: a
                .initial_replicas
                .div_ceil((gpus_per_node / engine.tensor_parallel_size.max(1)).max(1)),
        },
        rules,
        client: crate::job::replica::client(&a.clients),
        transients: Vec::new(),
        judge_from_s: warm,
        engine,
    };
    let mut setup = setup;
    if let Some(p) = &a.nodepool {
        apply_nodepool(p, &mut setup.cluster)?;
    }
    Ok(setup)
}

/// The ScaledObjects to rehearse: those given, then (with `--compare-signals`) the ones
/// each signal derives from the thresholds, labelled.
fn objects_of(
    a: &RehearseArgs,
    thresholds: Option<&Thresholds>,
    setup: &Setup,
    model_name: &str,
) -> Result<Vec<(String, KedaSpec)>> {
    let mut objects: Vec<(String, KedaSpec)> = Vec::new();
    for p in a.scaledobject.iter().chain(&a.compare) {
        let k = read_scaledobject(p)?;
        objects.push((
            p.file_name()
                .map_or_else(|| k.name.clone(), |f| f.to_string_lossy().into_owned()),
            k,
        ));
    }
    if a.compare_signals {
        let t = thresholds.ok_or_else(|| anyhow!("--compare-signals needs --thresholds"))?;
        let mut o = inferscale_manifests::Options::example();
        o.model_name = model_name.to_owned();
        o.max_replicas = 20;
        o.cold_start_s = (setup.cluster.node_provisioning.mean()
            + setup.cluster.image_pull.mean()
            + setup.cluster.model_load.mean()
            + setup.cluster.warmup.mean())
        .ceil() as u32;
        let capacity = t
            .capacity_rps
            .or(t.saturation_rps)
            .ok_or_else(|| anyhow!("--compare-signals: the thresholds have no capacity"))?;
        let derived =
            inferscale_autoscale::signals::derived(t, &o, setup.engine.max_num_seqs, capacity);
        for d in derived {
            let k = KedaSpec::from_object(&d.object)
                .map_err(|e| anyhow!("the derived {} ScaledObject: {e}", d.name))?;
            objects.push((format!("signal:{}", d.name), k));
        }
    }
    Ok(objects)
}

/// Prints the outcomes: a table and each one's details, or `--json`.
fn print(a: &RehearseArgs, outcomes: &[(String, Outcome)]) -> Result<()> {
    if a.json {
        let mut v = serde_json::to_value(&outcomes[0].1.summary)?;
        if outcomes.len() > 1 {
            v["compare"] = serde_json::Value::Array(
                outcomes
                    .iter()
                    .map(|(label, o)| {
                        let mut s = serde_json::to_value(&o.summary).unwrap_or_default();
                        s["label"] = serde_json::Value::String(label.clone());
                        s
                    })
                    .collect(),
            );
        }
        emit(&(serde_json::to_string_pretty(&v)? + "\n"))?;
    } else {
        let mut text = table(outcomes);
        text.push('\n');
        for (label, o) in outcomes {
            text.push_str(&details(label, o));
        }
        emit(&text)?;
    }
    Ok(())
}
