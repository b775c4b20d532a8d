//! `inferscale generate`: thresholds.json in; the production configuration out.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, anyhow, bail};
use inferscale_analysis::{THRESHOLDS_VERSION, Thresholds};
use inferscale_manifests::Options;
use serde_json::Value;

use crate::cli::{ClusterArgs, GenerateArgs};
use crate::cmd::load::write_atomic;
use crate::output::emit;

/// Fields `generate` needs, with what each must be.
const REQUIRED: &[(&str, &str)] = &[
    ("source.model", "string"),
    ("scale_out.queue_depth_per_pod", "positive integer"),
    ("scale_out.for_seconds", "positive integer"),
    ("scale_out.p95_e2e_seconds", "positive number"),
    ("scale_out.p95_queue_time_seconds", "positive number"),
    ("scale_in.p95_e2e_seconds", "positive number"),
    ("scale_in.for_seconds", "positive integer"),
    ("activation.queue_depth", "positive integer"),
    ("healthy.p95_e2e_seconds", "positive number"),
    ("rationale", "object"),
];

fn at<'a>(v: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.').try_fold(v, |v, k| v.get(k))
}

/// Reads thresholds.json, naming the field when something is missing or malformed.
pub(crate) fn read_thresholds(path: &Path) -> Result<Thresholds> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let name = path.display();
    let v: Value = serde_json::from_str(&text).map_err(|e| {
        anyhow!(
            "{name}: not valid JSON at line {}, column {}: {e}{}",
            e.line(),
            e.column(),
            if e.is_eof() { " (truncated?)" } else { "" }
        )
    })?;
    match v.get("version").and_then(Value::as_u64) {
        None => bail!("{name}: no \"version\" field: not a thresholds.json written by inferscale"),
        Some(n) if n != u64::from(THRESHOLDS_VERSION) => bail!(
            "{name}: thresholds.json version {n} is not supported (this inferscale reads version {THRESHOLDS_VERSION})"
        ),
        Some(_) => {}
    }
    for (field, kind) in REQUIRED {
        let Some(x) = at(&v, field) else {
            bail!("{name}: missing field {field} (a {kind})");
        };
        let ok = match *kind {
            "string" => x.as_str().is_some_and(|s| !s.is_empty()),
            "object" => x.is_object(),
            "positive integer" => x.as_u64().is_some_and(|n| n > 0),
            _ => x.as_f64().is_some_and(|f| f.is_finite() && f > 0.0),
        };
        if !ok {
            bail!("{name}: field {field} must be a {kind}, not {x}");
        }
    }
    serde_json::from_value(v).map_err(|e| anyhow!("{name}: not a valid thresholds.json: {e}"))
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
            .map_or(5, |p| p.replicas + 1)
            .max(c.min_replicas)
    });
    Ok(Options {
        namespace: c.namespace.clone(),
        deployment: c.deployment.clone(),
        container: c.container.clone(),
        container_index: c.container_index,
        service: c.service.clone().unwrap_or_else(|| c.deployment.clone()),
        service_port: parse_port(&c.service_port)?,
        model_name: c
            .model_name
            .clone()
            .unwrap_or_else(|| t.source.model.clone()),
        prometheus_url: c.prometheus_url.clone(),
        prometheus_release: c.prometheus_release.clone(),
        min_replicas: c.min_replicas,
        max_replicas: max,
        slo_p95_e2e_s: c
            .slo_p95_e2e
            .map_or(t.scale_out.p95_e2e_seconds, |d| d.as_secs_f64()),
        cold_start_s: u32::try_from(c.cold_start.as_secs()).unwrap_or(u32::MAX),
        max_model_len: c.max_model_len.unwrap_or(0),
        inferscale_image: c.inferscale_image.clone(),
        runbook_url: c.runbook_url.clone(),
    })
}

/// Generates and writes every file into `dir`; returns their paths.
pub(crate) fn write(t: &Thresholds, c: &ClusterArgs, dir: &Path) -> Result<Vec<PathBuf>> {
    let o = options(t, c)?;
    let files = inferscale_manifests::generate(t, &o).map_err(|e| anyhow!("{e}"))?;
    let mut out = Vec::new();
    for f in files {
        let p = dir.join(&f.path);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("cannot create {}", parent.display()))?;
        }
        write_atomic(&p, f.contents.as_bytes())?;
        out.push(p);
    }
    Ok(out)
}

/// Runs the command.
pub(crate) fn run(a: &GenerateArgs) -> Result<ExitCode> {
    let t = read_thresholds(&a.thresholds)?;
    let paths = write(&t, &a.cluster, &a.out)?;
    let mut text = format!("wrote {} files into {}:\n", paths.len(), a.out.display());
    for p in &paths {
        text.push_str(&format!(
            "  {}\n",
            p.strip_prefix(&a.out).unwrap_or(p).display()
        ));
    }
    text.push_str(&format!(
        "read {} for the order to apply them\n",
        a.out.join("README.md").display()
    ));
    if t.source.simulated.is_some() {
        text.push_str("note: the thresholds come from a simulated run\n");
    }
    emit(&text)?;
    Ok(ExitCode::SUCCESS)
}
