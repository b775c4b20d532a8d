//! `inferscale analyze`: run.json in; thresholds.json, report.html and a summary out.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Result;

use crate::cli::AnalyzeArgs;
use crate::job::analysis::{degraded, read, write_against};
use crate::output::emit;

/// Runs the command.
pub(crate) fn run(a: &AnalyzeArgs) -> Result<ExitCode> {
    let run = read(&a.run)?;
    let dir = match &a.out {
        Some(d) => d.clone(),
        None => a
            .run
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .map_or_else(|| PathBuf::from("."), Path::to_path_buf),
    };
    let w = write_against(&run, &dir, a.peak_rps, &a.knee, a.baseline.as_deref())?;
    if a.json {
        match &w.analysis.thresholds {
            Ok(t) => emit(&(serde_json::to_string_pretty(t)? + "\n"))?,
            Err(e) => eprintln!("no thresholds: {e}"),
        }
    } else {
        let mut text = inferscale_report::summary(&run, &w.analysis);
        text.push('\n');
        if let Some(c) = &w.compared {
            text.push_str(c);
            text.push('\n');
        }
        if let Some(t) = &w.thresholds {
            text.push_str(&format!("wrote {}\n", t.display()));
        }
        text.push_str(&format!("wrote {}\n", w.report.display()));
        emit(&text)?;
    }
    if run.interrupted {
        eprintln!("warning: the run was interrupted; the analysis is of a partial run");
    }
    Ok(if degraded(&run, &w.analysis) {
        ExitCode::from(crate::exit::CHECK_FAILED)
    } else {
        ExitCode::SUCCESS
    })
}
