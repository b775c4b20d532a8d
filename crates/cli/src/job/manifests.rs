//! Writing the production configuration from thresholds.json. `generate` and `run` go
//! through here.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, anyhow};
use inferscale_analysis::Thresholds;
use inferscale_manifests::Options;

use crate::cli::ClusterArgs;
use crate::output::write_atomic;

/// Reads thresholds.json, naming the field when something is missing or malformed.
pub(crate) fn read_thresholds(path: &Path) -> Result<Thresholds> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
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
    let files = inferscale_manifests::generate(t, &o)?;
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
