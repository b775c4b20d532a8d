//! The checks on the measurement and the deployment's settings and history.

use std::collections::BTreeSet;

use inferscale_manifests::objects::{Container, appended_args};

use super::files::{templates, vllm_container};
use super::{fail, pass, skipped, warn};
use crate::evidence::{Doc, Evidence, Found};
use crate::{Check, Outcome, Status};

pub(super) fn saturation_measured(e: &Evidence) -> Outcome {
    let c = Check::SaturationMeasured;
    let fix = "run inferscale run --url http://<vllm>:8000 (or inferscale load, then analyze) and keep its thresholds.json";
    let Some(run) = &e.run else {
        if e.manifests.is_none() {
            return skipped(c, "no --run-dir or --manifests given");
        }
        return fail(c, "no thresholds.json found (give --run-dir)", fix);
    };
    match &run.thresholds {
        None => fail(
            c,
            format!("no thresholds.json in {}", run.dir.display()),
            fix,
        ),
        Some(Err(why)) => fail(
            c,
            format!("{}/thresholds.json: {why}", run.dir.display()),
            fix,
        ),
        Some(Ok(t)) => {
            use inferscale_analysis::saturation::Status as S;
            let at = |v: Option<f64>| v.map_or("?".into(), |v| format!("{v:.0}"));
            match t.status {
                S::Saturated if !t.partial => pass(
                    c,
                    format!(
                        "thresholds.json: saturates between {} and {} req/s per replica (capacity ≈ {} req/s), queue threshold {} per pod",
                        at(t.saturation_rps),
                        at(t.first_saturated_rps),
                        at(t.capacity_rps),
                        t.scale_out.queue_depth_per_pod
                    ),
                ),
                S::Saturated => warn(c, "thresholds.json comes from an interrupted run", fix),
                other => warn(
                    c,
                    format!("thresholds.json says {other:?}: the saturation point was not found"),
                    "rerun with rates that reach saturation (--rates up to twice the expected capacity)",
                ),
            }
        }
    }
}

/// vLLM's default `--gpu-memory-utilization`.
pub(super) const DEFAULT_GMU: f64 = 0.9;

/// The advised value (headroom for CUDA graphs, activations, other processes).
pub(super) const ADVISED_GMU: f64 = 0.85;

/// Where each of the two settings was read, and its value there; and the model, when known.
struct Settings {
    gmu: Vec<(String, Option<f64>)>,
    mml: Vec<(String, Option<u64>)>,
    model: Option<String>,
}

/// The settings from the live server (its cache configuration and `/v1/models`) and from
/// the manifests (the vLLM container's args and what JSON patches append to them).
fn settings(e: &Evidence) -> Settings {
    let mut gmu: Vec<(String, Option<f64>)> = Vec::new();
    let mut mml: Vec<(String, Option<u64>)> = Vec::new();
    let mut model: Option<String> = None;
    if let Some((url, Ok(served))) = &e.metrics
        && let Some(cc) = &served.cache_config
    {
        gmu.push((
            format!("{url} (vllm:cache_config_info)"),
            cc.get("gpu_memory_utilization")
                .and_then(|v| v.parse().ok()),
        ));
    }
    if let Some(Ok(models)) = &e.models
        && let Some(first) = models.first()
    {
        if first.max_model_len.is_some() {
            mml.push((format!("/v1/models ({})", first.id), first.max_model_len));
        }
        model = Some(first.root.clone().unwrap_or_else(|| first.id.clone()));
    }
    if let Some(m) = &e.manifests {
        let patches: Vec<&Found> = m
            .docs
            .iter()
            .filter(|f| matches!(f.doc, Doc::JsonPatch(_)))
            .collect();
        let ts = templates(m);
        // The container's own args (a whole Deployment), then what JSON patches append.
        let mut args: Vec<String> = ts
            .iter()
            .filter_map(|(_, t)| vllm_container(t, &e.names.container))
            .flat_map(|v| v.args.iter().flatten().cloned())
            .collect();
        let mut sources: Vec<&str> = ts.iter().map(|(p, _)| *p).collect();
        for f in &patches {
            if let Doc::JsonPatch(p) = &f.doc {
                for i in 0..8 {
                    args.extend(appended_args(p, i).into_iter().map(str::to_owned));
                }
                sources.push(&f.path);
            }
        }
        if !args.is_empty() || !sources.is_empty() {
            let probe = Container {
                name: String::new(),
                image: None,
                command: None,
                args: Some(args),
                restart_policy: None,
                resources: None,
                volume_mounts: Vec::new(),
                readiness_probe: None,
                extra: Default::default(),
            };
            let at = sources.join(" + ");
            gmu.push((
                at.clone(),
                Some(
                    probe
                        .flag("--gpu-memory-utilization")
                        .and_then(|v| v.parse().ok())
                        .unwrap_or(DEFAULT_GMU),
                ),
            ));
            mml.push((
                at,
                probe.flag("--max-model-len").and_then(|v| v.parse().ok()),
            ));
            if model.is_none() {
                model = probe.flag("--model").map(str::to_owned);
            }
        }
    }
    Settings { gmu, mml, model }
}

pub(super) fn vllm_memory(e: &Evidence) -> Outcome {
    let c = Check::VllmMemory;
    if e.engine != inferscale_catalog::Engine::Vllm {
        return skipped(
            c,
            format!(
                "the engine is {}: gpu_memory_utilization and max_model_len are vLLM's flags",
                e.engine.title()
            ),
        );
    }
    let Settings {
        gmu,
        mml,
        mut model,
    } = settings(e);
    if gmu.is_empty() && mml.is_empty() {
        return skipped(
            c,
            "no --url and no Deployment or args patch in the manifests",
        );
    }
    // The measured model, when nothing else says which model it is.
    if model.is_none()
        && let Some(Some(Ok(t))) = e.run.as_ref().map(|r| r.thresholds.as_ref())
    {
        model = Some(t.source.model.clone());
    }
    let max_context = model
        .as_deref()
        .and_then(inferscale_engine::model::find_model)
        .map(|m| u64::from(m.max_context));
    let mut problems: Vec<(Status, String)> = Vec::new();
    for (at, v) in &gmu {
        match v {
            Some(v) if *v > DEFAULT_GMU => problems.push((
                Status::Fail,
                format!("{at}: gpu_memory_utilization {v} leaves no room for CUDA graphs and activations (0.9 at most, {ADVISED_GMU} advised)"),
            )),
            Some(v) if *v > ADVISED_GMU => problems.push((
                Status::Warn,
                format!("{at}: gpu_memory_utilization {v} ({ADVISED_GMU} advised)"),
            )),
            Some(_) => {}
            None => problems.push((Status::Warn, format!("{at}: gpu_memory_utilization not readable"))),
        }
    }
    for (at, v) in &mml {
        match (v, max_context) {
            (None, _) => problems.push((
                Status::Fail,
                format!("{at}: --max-model-len is not set, so vLLM sizes for the model's whole context"),
            )),
            (Some(v), Some(max)) if *v >= max => problems.push((
                Status::Fail,
                format!("{at}: max_model_len {v} is the model's maximum ({max}): size it to the longest real request"),
            )),
            _ => {}
        }
    }
    let fix = "set --gpu-memory-utilization=0.85 and --max-model-len to twice the longest real request (vllm-args-patch.yaml, which inferscale generate sizes from the measurement)";
    if let Some(worst) = problems.iter().map(|(s, _)| *s).max() {
        let text = problems
            .into_iter()
            .map(|(_, t)| t)
            .collect::<Vec<_>>()
            .join("; ");
        return Outcome::new(c, worst, text, Some(fix.to_owned()));
    }
    let g = gmu
        .iter()
        .filter_map(|(_, v)| *v)
        .map(|v| format!("{v}"))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect::<Vec<_>>()
        .join("/");
    let l = mml
        .iter()
        .filter_map(|(_, v)| *v)
        .map(|v| v.to_string())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect::<Vec<_>>()
        .join("/");
    let of = max_context.map_or(String::new(), |m| format!(" of the model's {m}"));
    pass(
        c,
        format!(
            "gpu_memory_utilization {} and max_model_len {}{of} ({} source(s))",
            if g.is_empty() { "-".into() } else { g },
            if l.is_empty() { "-".into() } else { l },
            gmu.len().max(mml.len())
        ),
    )
}

pub(super) fn scale_cycle(e: &Evidence) -> Outcome {
    let c = Check::ScaleCycle;
    let fix = "inferscale rehearse --scaledobject scaledobject.yaml (or inferscale run, which rehearses its own), and once deployed, a load that scales out then stops";
    if let Some(run) = &e.run
        && let Some(r) = &run.rehearsal
    {
        return match r {
            Err(why) => fail(
                c,
                format!("{}/rehearsal.json: {why}", run.dir.display()),
                fix,
            ),
            Ok(v) => {
                // `run` writes the generated ScaledObject's summary under `generated` (beside
                // the seeds' shape); a rehearsal's own `--json`, and older runs, at the top.
                let v = v.get("generated").filter(|g| g.is_object()).unwrap_or(v);
                let done = v.get("cycle_completed").and_then(|b| b.as_bool());
                let most = v.get("max_replicas").and_then(|b| b.as_u64()).unwrap_or(0);
                let last = v
                    .get("final_replicas")
                    .and_then(|b| b.as_u64())
                    .unwrap_or(0);
                if done == Some(true) {
                    pass(
                        c,
                        format!("rehearsal.json: scaled out to {most} replicas and back to {last}"),
                    )
                } else {
                    fail(
                        c,
                        format!(
                            "rehearsal.json: the cycle did not complete (up to {most} replicas, {last} at the end)"
                        ),
                        "look at rehearsal.html: the scale-in window, cooldown or a flapping trigger; fix the ScaledObject and rehearse again",
                    )
                }
            }
        };
    }
    if let Some(p) = &e.prometheus {
        return match &p.replicas {
            Ok(Some((lo, hi, last))) if hi > lo && last < hi => pass(
                c,
                format!(
                    "{} saw the ready replicas go from {lo:.0} to {hi:.0} and back to {last:.0} in the last {}",
                    p.url,
                    inferscale_catalog::units::format_duration(std::time::Duration::from_secs_f64(
                        p.observed_s
                    ))
                ),
            ),
            Ok(Some((lo, hi, _))) => fail(
                c,
                format!(
                    "{} saw no scale-out then scale-in in the last {} (ready replicas between {lo:.0} and {hi:.0})",
                    p.url,
                    inferscale_catalog::units::format_duration(std::time::Duration::from_secs_f64(
                        p.observed_s
                    ))
                ),
                fix,
            ),
            Ok(None) => fail(c, format!("{} has no replica history", p.url), fix),
            Err(why) => fail(c, format!("{}: {why}", p.url), fix),
        };
    }
    if e.run.is_some() {
        return fail(
            c,
            "no rehearsal.json in the run folder and no --prometheus to observe one",
            fix,
        );
    }
    skipped(
        c,
        "no --run-dir (a rehearsal) and no --prometheus (an observation)",
    )
}
