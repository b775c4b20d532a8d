//! From one measured run to decisions: where the replica saturates ([`saturation`]), what
//! the autoscaler and the pager should watch ([`thresholds`]), the replica model a rehearsal
//! of the measured server runs ([`replica`]), and the scaling policy the ScaledObject is
//! written from ([`scaling`]). Pure: `run.json` in, numbers
//! and sentences out. The method is documented in `docs/analysis.md`.

mod read;
pub mod replica;
pub mod saturation;
pub mod scaling;
pub mod thresholds;

pub use read::{ReadError, read_run, read_thresholds};
pub use saturation::{Knee, Saturation, Status, StepAssessment, Verdict};
pub use thresholds::{THRESHOLDS_VERSION, ThresholdError, Thresholds};

use inferscale_results::run::RunReport;

/// A run, analysed.
#[derive(Debug, Clone)]
pub struct Analysis {
    /// The saturation finding.
    pub saturation: Saturation,
    /// The thresholds, or why there are none.
    pub thresholds: Result<Thresholds, ThresholdError>,
}

/// Analyses a run by the method's queue knee. `peak_rps` asks how many replicas a peak
/// needs.
pub fn analyze(run: &RunReport, peak_rps: Option<f64>) -> Analysis {
    analyze_by(run, peak_rps, Knee::Queue)
}

/// Analyses a run, its steps judged as `knee` says.
pub fn analyze_by(run: &RunReport, peak_rps: Option<f64>, knee: Knee) -> Analysis {
    let saturation = saturation::saturation_by(run, knee);
    let thresholds = thresholds::thresholds(run, &saturation, peak_rps);
    Analysis {
        saturation,
        thresholds,
    }
}
