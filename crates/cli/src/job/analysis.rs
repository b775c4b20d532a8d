//! Analysing a run: run.json read and checked, thresholds.json and report.html written, and
//! the verdict that decides the exit code. `analyze` and `run` go through here.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, anyhow};
use inferscale_analysis::{Analysis, Status};
use inferscale_results::run::RunReport;

use crate::output::{check_writable, write_all};

/// Reads and checks a run.json.
pub(crate) fn read(path: &Path) -> Result<RunReport> {
    let text = crate::input::read_text(path, "run file", crate::input::cap::RUN)?;
    inferscale_analysis::read_run(&text).with_context(|| path.display().to_string())
}

/// What an analysis wrote.
pub(crate) struct Written {
    pub(crate) analysis: Analysis,
    pub(crate) thresholds: Option<PathBuf>,
    pub(crate) report: PathBuf,
    /// Beside a baseline: how far the knee and the capacity moved, in text.
    pub(crate) compared: Option<String>,
}

/// Analyses `run` and writes `thresholds.json` (when there are thresholds) and `report.html`
/// into `dir`.
pub(crate) fn write(
    run: &RunReport,
    dir: &Path,
    peak_rps: Option<f64>,
    knee: &str,
) -> Result<Written> {
    write_against(run, dir, peak_rps, knee, None)
}

/// [`write()`], and beside `baseline` (another run.json, analysed the same way) when given:
/// the report gets a section saying how far the knee and the capacity moved, and
/// [`Written::compared`] the same in text.
pub(crate) fn write_against(
    run: &RunReport,
    dir: &Path,
    peak_rps: Option<f64>,
    knee: &str,
    baseline: Option<&Path>,
) -> Result<Written> {
    let knee = inferscale_analysis::Knee::parse(knee)?;
    if matches!(knee, inferscale_analysis::Knee::Goodput(_)) && run.slo.is_none() {
        return Err(anyhow!(
            "--knee goodput judges each step by the share of its requests within the run's SLO, and this run counted none: measure with --slo (ttft=…,tpot=…,e2e=…)"
        ));
    }
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
    let analysis = inferscale_analysis::analyze_by(run, peak_rps, knee);
    let compared = match baseline {
        Some(path) => {
            let base = read(path)?;
            let base_a = inferscale_analysis::analyze_by(&base, peak_rps, knee);
            let sides = (
                inferscale_report::compare::Side::of(&base, &base_a),
                inferscale_report::compare::Side::of(run, &analysis),
            );
            let name = path.display().to_string();
            Some((
                inferscale_report::compare::text(sides.0, sides.1, &name),
                inferscale_report::compare::html(sides.0, sides.1, &name),
            ))
        }
        None => None,
    };
    let report = (
        rpath.clone(),
        inferscale_report::html::render_with(
            run,
            &analysis,
            compared.as_ref().map_or("", |c| c.1.as_str()),
        )
        .into_bytes(),
    );
    let thresholds = match &analysis.thresholds {
        Ok(t) => {
            let mut bytes = serde_json::to_vec_pretty(t)?;
            bytes.push(b'\n');
            write_all(&[(tpath.clone(), bytes), report])?;
            Some(tpath)
        }
        Err(_) => {
            write_all(&[report])?;
            // A stale file from an earlier run must not pass for this one's.
            let _ = std::fs::remove_file(&tpath);
            None
        }
    };
    Ok(Written {
        analysis,
        thresholds,
        compared: compared.map(|c| c.0),
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
        .is_some_and(inferscale_results::run::Simulated::fell_behind)
}
