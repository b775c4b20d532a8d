//! `inferscale analyze`: run.json in; thresholds.json, report.html and a summary out.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result, anyhow};
use inferscale_analysis::{Analysis, Status, analyze};
use inferscale_results::run::RunReport;

use crate::cli::AnalyzeArgs;
use crate::cmd::load::{check_writable, write_atomic};
use crate::output::emit;

/// Reads and checks a run.json.
pub(crate) fn read(path: &Path) -> Result<RunReport> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    inferscale_analysis::read_run(&text).with_context(|| path.display().to_string())
}

/// What an analysis wrote.
pub(crate) struct Written {
    pub(crate) analysis: Analysis,
    pub(crate) thresholds: Option<PathBuf>,
    pub(crate) report: PathBuf,
}

/// Analyses `run` and writes `thresholds.json` (when there are thresholds) and `report.html`
/// into `dir`.
pub(crate) fn write(run: &RunReport, dir: &Path, peak_rps: Option<f64>) -> Result<Written> {
    if let Some(p) = peak_rps
        && !(p.is_finite() && p > 0.0)
    {
        return Err(anyhow!("--peak-rps must be a positive rate, not {p}"));
    }
    std::fs::create_dir_all(dir)
        .with_context(|| format!("cannot create the folder {}", dir.display()))?;
    let tpath = dir.join("thresholds.json");
    let rpath = dir.join("report.html");
    check_writable(&tpath)?;
    check_writable(&rpath)?;
    let analysis = analyze(run, peak_rps);
    let thresholds = match &analysis.thresholds {
        Ok(t) => {
            let mut bytes = serde_json::to_vec_pretty(t)?;
            bytes.push(b'\n');
            write_atomic(&tpath, &bytes)?;
            Some(tpath)
        }
        Err(_) => {
            // A stale file from an earlier run must not pass for this one's.
            let _ = std::fs::remove_file(&tpath);
            None
        }
    };
    write_atomic(&rpath, inferscale_report::render(run, &analysis).as_bytes())?;
    Ok(Written {
        analysis,
        thresholds,
        report: rpath,
    })
}

/// Whether the finding deserves exit code 1.
pub(crate) fn degraded(run: &RunReport, a: &Analysis) -> bool {
    run.interrupted
        || a.thresholds.is_err()
        || matches!(a.saturation.status, Status::ClientLimited | Status::NoData)
        || simulator_fell_behind(run)
}

/// Whether the embedded simulator recorded that it could not hold its speed-up (its
/// latencies are then overstated by the machine, not computed by the model).
pub(crate) fn simulator_fell_behind(run: &RunReport) -> bool {
    run.target
        .simulated
        .as_ref()
        .and_then(|s| s.get("clock_held"))
        .and_then(serde_json::Value::as_bool)
        == Some(false)
}

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
    let w = write(&run, &dir, a.peak_rps)?;
    if a.json {
        match &w.analysis.thresholds {
            Ok(t) => emit(&(serde_json::to_string_pretty(t)? + "\n"))?,
            Err(e) => eprintln!("no thresholds: {e}"),
        }
    } else {
        let mut text = inferscale_report::summary(&run, &w.analysis);
        text.push('\n');
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
