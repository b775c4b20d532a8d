//! `inferscale check`: the production-readiness checklist.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context as _, Result, bail};
use inferscale_check::evidence::Names;
use inferscale_check::gather::{Inputs, gather};
use inferscale_check::{Check, FailOn, Outcome, Status, failed, format, judge};
use inferscale_loadgen::Target;
use inferscale_loadgen::prometheus::Prometheus;

use crate::cli::{AuthArgs, CheckArgs, CheckFormat, FailOnArg};
use crate::exit;
use crate::output::emit;

/// Where `inferscale run` writes.
const DEFAULT_RUN_DIR: &str = "inferscale-out";

/// The checks `--skip` names, by id or slug.
fn skipped(args: &CheckArgs) -> Result<Vec<Check>> {
    args.skip
        .iter()
        .map(|s| s.trim())
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse::<u32>()
                .ok()
                .and_then(Check::from_id)
                .or_else(|| Check::from_name(s))
                .with_context(|| {
                    format!(
                        "--skip {s:?}: no such check (ids 1 to {}, or names such as do-not-disrupt; see --help)",
                        Check::ALL.len()
                    )
                })
        })
        .collect()
}

/// A server's API base and its metrics URL from one `--url` (given either way).
fn server(url: &str) -> Result<(Target, Target)> {
    let metrics = Target::parse_metrics(url).context("--url")?;
    let base = Target::parse(url).context("--url")?;
    let base = if base
        .path_and_query
        .trim_end_matches('/')
        .ends_with("/metrics")
    {
        base.with_path("/")
    } else {
        base
    };
    Ok((base, metrics))
}

/// `promtool` on PATH, when installed.
fn promtool() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("promtool"))
        .find(|p| p.is_file())
}

fn folder(p: &Path, flag: &str) -> Result<PathBuf> {
    if !p.is_dir() {
        bail!("{flag} {}: not a folder", p.display());
    }
    Ok(p.to_owned())
}

/// Every flag checked, nothing read yet.
fn resolve(args: &CheckArgs) -> Result<(Inputs, Vec<Check>)> {
    let skip = skipped(args)?;
    let access = crate::credentials::scrape_access(&args.access, args.timeout)?;
    let (url, metrics_url) = match &args.url {
        Some(u) => {
            let (a, b) = server(u)?;
            (Some(a), Some(b))
        }
        None => (None, None),
    };
    let dcgm_url = args
        .dcgm_url
        .as_deref()
        .map(Target::parse_metrics)
        .transpose()
        .context("--dcgm-url")?;
    let prometheus = args
        .prometheus
        .as_deref()
        .map(|u| Target::parse(u).map(|t| Prometheus::new(t, access.clone())))
        .transpose()
        .context("--prometheus")?;
    let run_dir = match &args.run_dir {
        Some(d) => Some(folder(d, "--run-dir")?),
        None => Path::new(DEFAULT_RUN_DIR)
            .is_dir()
            .then(|| PathBuf::from(DEFAULT_RUN_DIR)),
    };
    let live = args.kube.named();
    if live && args.manifests.is_some() {
        bail!(
            "--manifests and a cluster (--kubeconfig, --context or --kube-api) both give the manifests: give one"
        );
    }
    let manifests = match (&args.manifests, &run_dir) {
        _ if live => None,
        (Some(d), _) => Some(folder(d, "--manifests")?),
        (None, Some(r)) if r.join("manifests").is_dir() => Some(r.join("manifests")),
        _ => None,
    };
    if url.is_none()
        && dcgm_url.is_none()
        && prometheus.is_none()
        && manifests.is_none()
        && run_dir.is_none()
        && !live
    {
        bail!(
            "nothing to check: give --url, --prometheus, --manifests, --context or --run-dir (no ./{DEFAULT_RUN_DIR} here)"
        );
    }
    let mut api = access.clone();
    api.auth = crate::credentials::client_auth(&AuthArgs {
        api_key_file: args.api_key_file.clone(),
        header_file: None,
        tls: args.access.tls.clone(),
    })?;
    Ok((
        Inputs {
            url,
            metrics_url,
            dcgm_url,
            prometheus,
            manifests,
            run_dir,
            names: Names {
                namespace: args.namespace.clone(),
                job: args.job.clone(),
                container: args.container.clone(),
                engine: args.engine.map(crate::cli::EngineArg::engine),
            },
            access,
            api,
            observe_s: args.observe.as_secs_f64(),
            promtool: promtool(),
            cluster: None,
        },
        skip,
    ))
}

/// Runs the command.
pub(crate) fn run(args: &CheckArgs) -> Result<ExitCode> {
    let (mut inputs, skip) = resolve(args)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    if args.kube.named() {
        inputs.cluster = rt
            .block_on(inferscale_kube::Kube::connect(&args.kube.access()))
            .context("the Kubernetes API")?;
        if let Some(k) = &inputs.cluster {
            rt.block_on(k.probe())?;
        }
    }
    let evidence = rt.block_on(gather(&inputs));
    let outcomes: Vec<Outcome> = judge(&evidence)
        .into_iter()
        .map(|o| match Check::from_id(o.id) {
            Some(c) if skip.contains(&c) => {
                Outcome::new(c, Status::Skipped, "skipped with --skip".into(), None)
            }
            _ => o,
        })
        .collect();
    let on = match args.fail_on {
        FailOnArg::Fail => FailOn::Fail,
        FailOnArg::Warn => FailOn::Warn,
    };
    let fmt = if args.json {
        CheckFormat::Json
    } else {
        args.format
    };
    match fmt {
        CheckFormat::Human => {
            let mut given = Vec::new();
            for (flag, on) in [
                ("--url", inputs.url.is_some()),
                ("--dcgm-url", inputs.dcgm_url.is_some()),
                ("--prometheus", inputs.prometheus.is_some()),
            ] {
                if on {
                    given.push(flag.to_owned());
                }
            }
            if let Some(m) = &inputs.manifests {
                given.push(format!("manifests {}", m.display()));
            }
            if let Some(k) = &inputs.cluster {
                given.push(format!("namespace {} of {}", args.namespace, k.source()));
            }
            if let Some(r) = &inputs.run_dir {
                given.push(format!("run {}", r.display()));
            }
            emit(&format!(
                "inferscale check: {} ({})\n\n{}",
                if inputs.promtool.is_some() {
                    "promtool found"
                } else {
                    "promtool not installed: rules read by inferscale only"
                },
                given.join(", "),
                format::human(&outcomes)
            ))?;
        }
        CheckFormat::Json => emit(&format!(
            "{}\n",
            serde_json::to_string_pretty(&format::json(&outcomes))?
        ))?,
        CheckFormat::Junit => emit(&format::junit(&outcomes, on))?,
    }
    Ok(ExitCode::from(if failed(&outcomes, on) {
        exit::CHECK_FAILED
    } else {
        exit::SUCCESS
    }))
}
