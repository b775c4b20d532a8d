//! `inferscale check`: the production-readiness checklist the seeds end with, checked
//! against what is there rather than read as prose.
//!
//! Checks 1–11 are the seeds' eleven, in their order; 12–14 are what an SRE adds. Ids are
//! stable (a CI job may `--skip 11`); names are stable slugs. Each check is pass, warn, fail
//! or skipped (its input was not given), with the reason and, unless it passed, the fix:
//! the file and field to change or the command to run.
//!
//! - [`cluster`]: a live cluster's namespace read as manifests, with its objects' status;
//! - [`gather`]: reads the endpoints, the Prometheus, the manifests and the run folder into
//!   [`Evidence`] (the one scrape client, the Prometheus API client, the typed manifests);
//! - [`judge`](mod@judge): the checks, a pure function of the evidence;
//! - [`format`](mod@format): the human table, JSON and JUnit XML.
//!
//! ```
//! use inferscale_check::{Check, Status};
//! assert_eq!(Check::DoNotDisrupt.id(), 7);
//! assert_eq!(Check::DoNotDisrupt.name(), "do-not-disrupt");
//! assert!(Status::Fail > Status::Warn);
//! ```

pub mod cluster;
pub mod error;
pub mod evidence;
pub mod format;
pub mod gather;
pub mod judge;
pub mod read;

use serde::Serialize;

pub use error::ReadError;
pub use evidence::Evidence;
pub use judge::judge;

/// A check's verdict. Ordered by severity (skipped < pass < warn < fail).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Its input was not given.
    Skipped,
    /// In place.
    Pass,
    /// In place, with something to improve.
    Warn,
    /// Not in place.
    Fail,
}

impl Status {
    /// `pass`, `warn`, `fail`, `skipped`.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Skipped => "skipped",
            Status::Pass => "pass",
            Status::Warn => "warn",
            Status::Fail => "fail",
        }
    }
}

/// The checks, by stable id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Check {
    /// 1: `/metrics` exposed with the required families.
    MetricsExposed,
    /// 2: Prometheus scrapes it.
    PrometheusScrapes,
    /// 3: the DCGM exporter answers.
    DcgmExporter,
    /// 4: dashboards for the three tiers.
    Dashboards,
    /// 5: the five alerts, present and valid.
    Alerts,
    /// 6: a valid ScaledObject.
    ScaledObject,
    /// 7: `karpenter.sh/do-not-disrupt` on the pod template.
    DoNotDisrupt,
    /// 8: the saturation point measured.
    SaturationMeasured,
    /// 9: warm-up before readiness.
    WarmupGatesReadiness,
    /// 10: `gpu_memory_utilization` and `max_model_len` sized.
    VllmMemory,
    /// 11: a scale-out → scale-in cycle verified.
    ScaleCycle,
    /// 12: the rules and dashboards read metrics the server serves.
    QueriesReadServedMetrics,
    /// 13: `maxReplicaCount` carries the measured peak.
    MaxReplicasCarryPeak,
    /// 14: each Prometheus trigger returns exactly one series.
    TriggersOneSeries,
}

impl Check {
    /// Every check, in id order.
    pub const ALL: [Check; 14] = [
        Check::MetricsExposed,
        Check::PrometheusScrapes,
        Check::DcgmExporter,
        Check::Dashboards,
        Check::Alerts,
        Check::ScaledObject,
        Check::DoNotDisrupt,
        Check::SaturationMeasured,
        Check::WarmupGatesReadiness,
        Check::VllmMemory,
        Check::ScaleCycle,
        Check::QueriesReadServedMetrics,
        Check::MaxReplicasCarryPeak,
        Check::TriggersOneSeries,
    ];

    /// Its stable id.
    pub fn id(self) -> u32 {
        Check::ALL
            .iter()
            .position(|c| *c == self)
            .map_or(0, |i| i as u32 + 1)
    }

    /// The check with id `id`.
    pub fn from_id(id: u32) -> Option<Check> {
        Check::ALL.get((id as usize).checked_sub(1)?).copied()
    }

    /// The check named `name` (its slug).
    pub fn from_name(name: &str) -> Option<Check> {
        Check::ALL.into_iter().find(|c| c.name() == name)
    }

    /// Its stable slug.
    pub fn name(self) -> &'static str {
        match self {
            Check::MetricsExposed => "metrics-exposed",
            Check::PrometheusScrapes => "prometheus-scrapes",
            Check::DcgmExporter => "dcgm-exporter",
            Check::Dashboards => "dashboards",
            Check::Alerts => "alerts",
            Check::ScaledObject => "scaledobject",
            Check::DoNotDisrupt => "do-not-disrupt",
            Check::SaturationMeasured => "saturation-measured",
            Check::WarmupGatesReadiness => "warmup-gates-readiness",
            Check::VllmMemory => "vllm-memory",
            Check::ScaleCycle => "scale-cycle",
            Check::QueriesReadServedMetrics => "queries-read-served-metrics",
            Check::MaxReplicasCarryPeak => "max-replicas-carry-peak",
            Check::TriggersOneSeries => "triggers-one-series",
        }
    }

    /// What it checks, in words.
    pub fn title(self) -> &'static str {
        match self {
            Check::MetricsExposed => "vLLM's /metrics exposed with the required families",
            Check::PrometheusScrapes => "Prometheus scrapes the vLLM pods",
            Check::DcgmExporter => "the DCGM exporter answers",
            Check::Dashboards => "dashboards for the three tiers",
            Check::Alerts => "the five alerts present and valid",
            Check::ScaledObject => "a valid KEDA ScaledObject",
            Check::DoNotDisrupt => "karpenter.sh/do-not-disrupt on the pods",
            Check::SaturationMeasured => "load-tested: the saturation point known",
            Check::WarmupGatesReadiness => "warm-up runs before readiness",
            Check::VllmMemory => "gpu_memory_utilization and max_model_len sized",
            Check::ScaleCycle => "a scale-out → scale-in cycle verified",
            Check::QueriesReadServedMetrics => {
                "alerts and dashboards read metrics the server serves"
            }
            Check::MaxReplicasCarryPeak => "maxReplicaCount carries the measured peak",
            Check::TriggersOneSeries => "each Prometheus trigger returns exactly one series",
        }
    }
}

/// One check's verdict.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Outcome {
    /// The stable id.
    pub id: u32,
    /// The stable slug.
    pub name: &'static str,
    /// What it checks.
    pub title: &'static str,
    /// The verdict.
    pub status: Status,
    /// Why.
    pub reason: String,
    /// What to do (unless it passed or was skipped).
    pub fix: Option<String>,
}

impl Outcome {
    /// The verdict of `check`.
    pub fn new(check: Check, status: Status, reason: String, fix: Option<String>) -> Outcome {
        Outcome {
            id: check.id(),
            name: check.name(),
            title: check.title(),
            status,
            reason,
            fix,
        }
    }
}

/// What makes the command fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FailOn {
    /// A failed check.
    #[default]
    Fail,
    /// A failed check or a warning.
    Warn,
}

/// Whether `outcomes` fail under `on`.
pub fn failed(outcomes: &[Outcome], on: FailOn) -> bool {
    outcomes.iter().any(|o| match on {
        FailOn::Fail => o.status == Status::Fail,
        FailOn::Warn => o.status >= Status::Warn,
    })
}
