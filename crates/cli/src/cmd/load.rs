//! `inferscale load`: the flags resolved into a plan (`job::load::resolve_load`); the job does
//! the rest.

use std::process::ExitCode;

use anyhow::{Context, Result};

use crate::cli::LoadArgs;
use crate::job::load::{execute, opt, resolve_load, summary};
use crate::output::emit;

/// `inferscale load`.
pub(crate) fn run_load(a: &LoadArgs) -> Result<ExitCode> {
    let resolved = resolve_load(a)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let out = rt.block_on(execute(resolved, &a.out, a.requests_out.as_deref(), a.json))?;
    let mut text = String::new();
    if a.json {
        text = serde_json::to_string_pretty(&out.report)? + "\n";
    } else {
        text.push_str(&summary(&out.report));
        for t in &out.report.thresholds {
            text.push_str(&format!(
                "threshold {}: {} ({})\n",
                t.expr,
                if t.ok { "ok" } else { "BREACHED" },
                opt(t.value, |v| format!("{v:.4}"))
            ));
        }
        text.push_str(&format!(
            "wrote {}{}\n",
            a.out.display(),
            a.requests_out
                .as_ref()
                .map_or(String::new(), |p| format!(" and {}", p.display()))
        ));
    }
    emit(&text)?;
    if a.emit_part {
        let bytes = std::fs::read(&a.out)
            .with_context(|| format!("cannot read back {}", a.out.display()))?;
        let name = out.report.segment.as_ref().map_or_else(
            || "part.json".to_owned(),
            |s| format!("part-{}.json", s.index),
        );
        emit(&inferscale_loadgen::parts::frame(&name, &bytes))?;
    }
    Ok(if out.breached {
        ExitCode::from(crate::exit::CHECK_FAILED)
    } else {
        ExitCode::SUCCESS
    })
}
