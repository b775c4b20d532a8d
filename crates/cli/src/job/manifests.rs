//! Writing the production configuration from thresholds.json. `generate` and `run` go
//! through here.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, anyhow};
use inferscale_analysis::Thresholds;
use inferscale_manifests::Options;

use crate::cli::{ClusterArgs, ScaleByArg};
use crate::output::write_all;

/// Reads thresholds.json, naming the field when something is missing or malformed.
pub(crate) fn read_thresholds(path: &Path) -> Result<Thresholds> {
    let text = crate::input::read_text(path, "thresholds file", crate::input::cap::SMALL)?;
    inferscale_analysis::read_thresholds(&text).with_context(|| path.display().to_string())
}

fn parse_port(s: &str) -> Result<(String, u16)> {
    let (n, p) = s
        .split_once(':')
        .ok_or_else(|| anyhow!("--service-port {s:?} is not NAME:PORT (e.g. http:8000)"))?;
    let port: u16 = p
        .parse()
        .ok()
        .filter(|p| *p > 0)
        .ok_or_else(|| anyhow!("--service-port {s:?}: {p:?} is not a port number"))?;
    Ok((n.to_owned(), port))
}

/// The options from the flags and the thresholds.
pub(crate) fn options(t: &Thresholds, c: &ClusterArgs) -> Result<Options> {
    let max = c.max_replicas.unwrap_or_else(|| {
        t.peak
            .as_ref()
            .map_or(5, |p| p.replicas.saturating_add(1))
            .max(c.min_replicas)
    });
    if c.max_replicas.is_none()
        && max > inferscale_manifests::MAX_REPLICAS
        && let Some(p) = &t.peak
    {
        return Err(anyhow!(
            "the peak of {} req/s needs {} replicas, more than a generated ScaledObject allows ({}): check --peak-rps, or give --max-replicas",
            p.rps,
            p.replicas,
            inferscale_manifests::MAX_REPLICAS
        ));
    }
    let profile = crate::job::replica::measured_profile(t);
    let mut o = from_flags(
        c,
        max,
        t.scale_out.p95_e2e_seconds,
        &t.source.model,
        profile.as_deref(),
    )?;
    o.engine = match (c.engine, t.source.engine.as_deref()) {
        (Some(e), _) => e.engine(),
        (None, None) => inferscale_catalog::Engine::Vllm,
        (None, Some(key)) => match inferscale_catalog::Engine::from_key(key) {
            Some(e)
                if e != inferscale_catalog::Engine::TrtLlm
                    && e != inferscale_catalog::Engine::Dcgm =>
            {
                e
            }
            _ => {
                return Err(anyhow!(
                    "the thresholds come from a {key:?} server, whose metric names inferscale cannot write queries for: give --engine (vllm, sglang, tgi or llamacpp)"
                ));
            }
        },
    };
    o.policy = policy(t, c.signal, &o);
    if let Some(p) = &o.policy
        && p.primary == inferscale_analysis::scaling::Primary::ArrivalRate
    {
        use inferscale_manifests::keda::{Uncounted, arrivals_counted};
        match arrivals_counted(&o, p.output_tokens_mean) {
            Ok(()) => {}
            Err(Uncounted::ByTheExternalScaler) => {
                return Err(anyhow!(
                    "--signal arrival-rate with --scaler external counts finished requests, which {} does not serve: use --scaler prometheus (it counts them from the generated tokens) or --signal in-flight",
                    o.engine.title()
                ));
            }
            Err(Uncounted::NoMeanOutput) => {
                return Err(anyhow!(
                    "--signal arrival-rate: {} counts no finished requests, and the thresholds have no measured mean output length to count them from its generated tokens: use --signal in-flight",
                    o.engine.title()
                ));
            }
        }
    }
    if let Some(p) = &o.policy
        && p.primary.at_gateway()
    {
        if o.scaler == inferscale_manifests::ScalerKind::External {
            return Err(anyhow!(
                "--signal {}: the external scaler reads the model's pods, not an inference gateway; use --scaler prometheus",
                p.primary.key()
            ));
        }
        if p.primary == inferscale_analysis::scaling::Primary::GatewayTokens
            && t.workload.prompt_tokens_mean.is_none()
        {
            return Err(anyhow!(
                "--signal gateway-tokens: the thresholds record no mean prompt length to size the token target from; measure with a run that records usage, or use --signal gateway-in-flight"
            ));
        }
    }
    if let Some(p) = &mut o.policy {
        // The flags win: --min-replicas is the floor written, and --max-replicas the ceiling;
        // without it, the room the tuning needed.
        p.min_replicas = o.min_replicas;
        if c.max_replicas.is_none()
            && let Some(m) = p.max_replicas
        {
            o.max_replicas = o
                .max_replicas
                .max(m)
                .min(inferscale_manifests::MAX_REPLICAS);
        }
    }
    Ok(o)
}

/// The scaling policy `--signal` asks for: the thresholds' tuned one (or, without one, the
/// proportional one derived by rule), a derived one of the named signal (the tuned one when
/// it is of that signal), or none (the seeds' shape).
pub(crate) fn policy(
    t: &Thresholds,
    signal: ScaleByArg,
    o: &Options,
) -> Option<inferscale_analysis::scaling::Policy> {
    use inferscale_analysis::scaling::{DEFAULT_UTILISATION, Policy, Primary};
    let primary = match signal {
        ScaleByArg::Queue => return None,
        ScaleByArg::Tuned => {
            if let Some(p) = &t.scaling {
                return Some(p.clone());
            }
            Primary::InFlight
        }
        ScaleByArg::InFlight => Primary::InFlight,
        ScaleByArg::ArrivalRate => Primary::ArrivalRate,
        ScaleByArg::GatewayInFlight => Primary::GatewayInFlight,
        ScaleByArg::GatewayTokens => Primary::GatewayTokens,
    };
    if let Some(p) = t.scaling.as_ref().filter(|p| p.primary == primary) {
        return Some(p.clone());
    }
    let capacity = t
        .scaling
        .as_ref()
        .map(|p| p.capacity_rps)
        .or(t.capacity_rps)
        .or(t.saturation_rps)?;
    let u = t
        .scaling
        .as_ref()
        .and_then(|p| p.utilisation)
        .unwrap_or(DEFAULT_UTILISATION);
    Some(Policy::derive(
        t,
        primary,
        u,
        capacity,
        f64::from(o.cold_start_s),
        o.min_replicas,
    ))
}

/// Checks the flags that need no measurement (names, ports, replica bounds, the SLO, URLs),
/// so that `run` refuses them before the first request rather than after the run.
pub(crate) fn check_flags(c: &ClusterArgs) -> Result<()> {
    let max = c.max_replicas.unwrap_or(c.min_replicas.max(1));
    let o = from_flags(c, max, 5.0, "model", None)?;
    inferscale_manifests::check(&o)?;
    Ok(())
}

/// The options a load Job needs: the names and the image (no thresholds).
pub(crate) fn load_job_options(c: &ClusterArgs) -> Result<Options> {
    let max = c.max_replicas.unwrap_or(c.min_replicas.max(1));
    let model = c.model_name.clone().unwrap_or_else(|| "model".into());
    from_flags(c, max, 5.0, &model, None)
}

fn from_flags(
    c: &ClusterArgs,
    max: u32,
    slo_s: f64,
    model: &str,
    profile: Option<&str>,
) -> Result<Options> {
    if c.service.is_none()
        && inferscale_manifests::validate::rfc1123_subdomain(&c.deployment).is_ok()
        && let Err(e) = inferscale_manifests::validate::rfc1123_label(&c.deployment)
    {
        return Err(anyhow!(
            "--deployment {:?} is a valid Deployment name, but the Service defaults to it and {e}: give the Service's name with --service",
            c.deployment
        ));
    }
    Ok(Options {
        namespace: c.namespace.clone(),
        deployment: c.deployment.clone(),
        container: c.container.clone(),
        container_index: c.container_index,
        service: c.service.clone().unwrap_or_else(|| c.deployment.clone()),
        service_port: parse_port(&c.service_port)?,
        model_name: c.model_name.clone().unwrap_or_else(|| model.to_owned()),
        engine: c
            .engine
            .map_or(inferscale_catalog::Engine::Vllm, |e| e.engine()),
        prometheus_url: c.prometheus_url.clone(),
        prometheus_release: c.prometheus_release.clone(),
        min_replicas: c.min_replicas,
        max_replicas: max,
        slo_p95_e2e_s: c.slo_p95_e2e.map_or(slo_s, |d| d.as_secs_f64()),
        cold_start_s: crate::job::replica::cold_start_s(c.cold_start, profile),
        max_model_len: c.max_model_len.unwrap_or(0),
        inferscale_image: c.inferscale_image.clone(),
        runbook_url: c.runbook_url.clone(),
        nodes: inferscale_manifests::NodeOptions::default(),
        scaler: match c.scaler {
            crate::cli::ScalerArg::Prometheus => inferscale_manifests::ScalerKind::Prometheus,
            crate::cli::ScalerArg::External => inferscale_manifests::ScalerKind::External,
        },
        policy: None,
    })
}

/// Generates and writes every file into `dir`; returns their paths.
pub(crate) fn write(t: &Thresholds, c: &ClusterArgs, dir: &Path) -> Result<Vec<PathBuf>> {
    let o = options(t, c)?;
    let mut files: Vec<(PathBuf, Vec<u8>)> = inferscale_manifests::generate(t, &o)?
        .into_iter()
        .map(|f| (dir.join(&f.path), f.contents.into_bytes()))
        .collect();
    if c.gateway {
        let capacity = t.capacity_rps.or(t.saturation_rps).ok_or_else(|| {
            anyhow::anyhow!("--gateway: the thresholds have no measured capacity to derive the running-requests target from")
        })?;
        let object = inferscale_autoscale::signals::gateway_object(t, &o, capacity);
        let errors = inferscale_manifests::validate::object(
            &serde_json::to_value(&object).map_err(anyhow::Error::from)?,
        );
        if let Some(e) = errors
            .iter()
            .find(|f| f.severity == inferscale_manifests::validate::Severity::Error)
        {
            anyhow::bail!("the gateway ScaledObject would be refused: {e}");
        }
        files.push((
            dir.join("scaledobject-gateway.yaml"),
            format!(
                "# The generated scaling on an inference gateway's endpoint picker (llm-d's router):\n# its flow-control queue (1 per pod) and running requests (per pod, from the measured\n# capacity). Apply it instead of scaledobject.yaml, not beside it.\n{}",
                inferscale_manifests::objects::to_yaml(&object)
            )
            .into_bytes(),
        ));
    }
    write_all(&files)?;
    Ok(files.into_iter().map(|(p, _)| p).collect())
}
