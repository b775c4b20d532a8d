//! `inferscale warmup`: sequential requests and the cold-start cost, alone (as a Kubernetes
//! Job or sidecar runs it).

use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use inferscale_loadgen::Target;
use inferscale_loadgen::discover::resolve_model;
use inferscale_loadgen::prompt::Api;
use inferscale_loadgen::transport::{Get, wait_ready};

use crate::cli::{ApiArg, WarmupArgs};
use crate::job::load::{Warmup, hint_auth, opt};
use crate::output::{emit, write_atomic};
use crate::units::format_seconds;

fn api_of(a: ApiArg) -> Api {
    match a {
        ApiArg::Completions => Api::Completions,
        ApiArg::Chat => Api::Chat,
    }
}

/// `inferscale warmup`.
pub(crate) fn run(a: &WarmupArgs) -> Result<ExitCode> {
    let url = Target::parse(&a.url).context("--url")?;
    if !(a.speedup.is_finite() && a.speedup > 0.0) {
        bail!("--speedup must be a positive number, not {}", a.speedup);
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let mut access = Get::new("*/*");
    access.auth = crate::credentials::client_auth(&a.auth)?;
    access.tls = crate::credentials::tls(&a.auth.tls)?;
    let report = rt.block_on(async {
        if let Some(limit) = a.wait_ready {
            wait_ready(&url.with_path("/health"), &access, limit).await?;
        }
        let model = resolve_model(&url, &access, a.model.clone())
            .await
            .map_err(hint_auth)?;
        Warmup {
            url: &url,
            access: &access,
            model: &model,
            n: a.requests,
            timeout: a.timeout,
            speedup: a.speedup,
            prompt: a.prompt.clone(),
            quiet: a.json,
            api: api_of(a.api),
            stream: a.stream,
            max_tokens: a.max_tokens,
        }
        .run()
        .await
    })?;
    if a.json {
        emit(
            &(serde_json::to_string_pretty(
                &serde_json::json!({ "version": 1, "warmup": report }),
            )? + "\n"),
        )?;
    } else {
        emit(&format!(
            "warm-up: {} requests, {} ok\n  first   {}\n  median  {}\n  steady  {} (median of the second half)\n  cold/steady {}\n",
            report.requests,
            report.ok,
            opt(report.first_s, format_seconds),
            opt(report.median_s, format_seconds),
            opt(report.steady_s, format_seconds),
            opt(report.cold_ratio, |r| format!("{r:.2}×"))
        ))?;
    }
    let all_ok = report.ok == report.requests;
    if all_ok && let Some(p) = &a.done_file {
        write_atomic(p, b"warm\n")?;
    }
    if a.hold {
        // A sidecar that exits is restarted (and would warm up again): stay until told to go.
        eprintln!("warm-up done; holding until terminated");
        rt.block_on(crate::shutdown::signal());
    }
    Ok(if all_ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(crate::exit::CHECK_FAILED)
    })
}
