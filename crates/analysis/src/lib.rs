//! From one measured run to decisions: where the replica saturates ([`saturation`]) and what
//! the autoscaler and the pager should watch ([`thresholds`]). Pure: `run.json` in, numbers
//! and sentences out. The method is documented in `docs/analysis.md`.

pub mod saturation;
pub mod thresholds;

pub use saturation::{Saturation, Status, StepAssessment, Verdict};
pub use thresholds::{THRESHOLDS_VERSION, ThresholdError, Thresholds};

use inferscale_results::run::{RUN_VERSION, RunReport};

/// A run, analysed.
#[derive(Debug, Clone)]
pub struct Analysis {
    /// The saturation finding.
    pub saturation: Saturation,
    /// The thresholds, or why there are none.
    pub thresholds: Result<Thresholds, ThresholdError>,
}

/// Analyses a run. `peak_rps` asks how many replicas a peak needs.
pub fn analyze(run: &RunReport, peak_rps: Option<f64>) -> Analysis {
    let saturation = saturation::saturation(run);
    let thresholds = thresholds::thresholds(run, &saturation, peak_rps);
    Analysis {
        saturation,
        thresholds,
    }
}

/// Why a `run.json` could not be read.
#[derive(Debug, Clone, PartialEq)]
pub struct ReadError(pub String);

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ReadError {}

/// Reads `run.json` text, saying exactly what is wrong with it when it cannot.
///
/// ```
/// let err = inferscale_analysis::read_run("{\"version\": 1, \"steps\": [").unwrap_err();
/// assert!(err.0.contains("truncated"));
/// ```
pub fn read_run(text: &str) -> Result<RunReport, ReadError> {
    let value: serde_json::Value = serde_json::from_str(text).map_err(|e| {
        let hint = if e.is_eof() {
            " (the file ends early: truncated?)"
        } else {
            ""
        };
        ReadError(format!(
            "not valid JSON at line {}, column {}: {e}{hint}",
            e.line(),
            e.column()
        ))
    })?;
    match value.get("version").and_then(serde_json::Value::as_u64) {
        None => {
            return Err(ReadError(
                "no \"version\" field: not a run.json written by `inferscale load`".into(),
            ));
        }
        Some(v) if v != u64::from(RUN_VERSION) => {
            return Err(ReadError(format!(
                "run.json version {v} is not supported (this inferscale reads version {RUN_VERSION})"
            )));
        }
        Some(_) => {}
    }
    serde_json::from_value(value).map_err(|e| ReadError(format!("not a valid run.json: {e}")))
}
