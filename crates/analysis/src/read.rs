//! Reading the documents inferscale writes, `run.json` and `thresholds.json`, saying exactly
//! what is wrong with one that cannot be used: where its JSON breaks, which version it has,
//! which field is missing or of the wrong kind.

use inferscale_results::run::{RUN_VERSION, RunReport};
use serde_json::Value;

use crate::thresholds::{THRESHOLDS_VERSION, Thresholds};

/// Why a document could not be read. The file's name is the caller's to add.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReadError {
    /// Not JSON.
    #[error("not valid JSON at line {line}, column {column}{}", if *.truncated { " (the file ends early: truncated?)" } else { "" })]
    Json {
        /// 1-based.
        line: usize,
        /// 1-based.
        column: usize,
        /// The text ends before the JSON does.
        truncated: bool,
        /// The parser's words.
        #[source]
        source: serde_json::Error,
    },
    /// No `version` field.
    #[error("no \"version\" field: not a {doc} written by inferscale")]
    NoVersion {
        /// `run.json` or `thresholds.json`.
        doc: &'static str,
    },
    /// A `version` that is not a whole number.
    #[error("\"version\" is {found}, not a whole number: not a {doc} written by inferscale")]
    VersionNotNumber {
        /// `run.json` or `thresholds.json`.
        doc: &'static str,
        /// What it holds, as JSON (cut to 40 characters).
        found: String,
    },
    /// A version this build does not read.
    #[error("{doc} version {found} is not supported (this inferscale reads version {supported})")]
    Version {
        /// `run.json` or `thresholds.json`.
        doc: &'static str,
        /// The file's.
        found: u64,
        /// Ours.
        supported: u32,
    },
    /// A required field is absent.
    #[error("missing field {field} (a {expected})")]
    Missing {
        /// Dotted path.
        field: &'static str,
        /// What it must be.
        expected: String,
    },
    /// A required field has the wrong kind of value.
    #[error("field {field} must be a {expected}, not {found}")]
    Field {
        /// Dotted path.
        field: &'static str,
        /// What it must be.
        expected: String,
        /// What it holds, as JSON (cut to 40 characters).
        found: String,
    },
    /// Valid JSON of the right version whose shape is still wrong.
    #[error("not a valid {doc}")]
    Shape {
        /// `run.json` or `thresholds.json`.
        doc: &'static str,
        /// The field serde stopped at.
        #[source]
        source: serde_json::Error,
    },
}

/// A value as short JSON for a message.
fn excerpt(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() > 40 {
        format!("{}…", s.chars().take(40).collect::<String>())
    } else {
        s
    }
}

/// Parses the JSON and checks the version, the common header of both documents.
fn versioned(text: &str, doc: &'static str, supported: u32) -> Result<Value, ReadError> {
    let value: Value = serde_json::from_str(text).map_err(|e| ReadError::Json {
        line: e.line(),
        column: e.column(),
        truncated: e.is_eof(),
        source: e,
    })?;
    match value.get("version") {
        None => Err(ReadError::NoVersion { doc }),
        Some(v) => match v.as_u64() {
            None => Err(ReadError::VersionNotNumber {
                doc,
                found: excerpt(v),
            }),
            Some(n) if n != u64::from(supported) => Err(ReadError::Version {
                doc,
                found: n,
                supported,
            }),
            Some(_) => Ok(value),
        },
    }
}

/// Reads `run.json` text, saying exactly what is wrong with it when it cannot.
///
/// ```
/// let err = inferscale_analysis::read_run("{\"version\": 1, \"steps\": [").unwrap_err();
/// assert!(err.to_string().contains("truncated"));
/// ```
pub fn read_run(text: &str) -> Result<RunReport, ReadError> {
    let value = versioned(text, "run.json", RUN_VERSION)?;
    serde_json::from_value(value).map_err(|source| ReadError::Shape {
        doc: "run.json",
        source,
    })
}

/// What a value must be.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Text,
    Object,
    PositiveInteger,
    PositiveNumber,
    /// A number in a range (inclusive): what arithmetic downstream can take without
    /// overflowing, far above any real value.
    Between(f64, f64),
}

impl Kind {
    fn name(self) -> String {
        match self {
            Kind::Text => "string".into(),
            Kind::Object => "object".into(),
            Kind::PositiveInteger => "positive integer".into(),
            Kind::PositiveNumber => "positive number".into(),
            Kind::Between(lo, hi) => format!("number from {lo} to {hi}"),
        }
    }

    fn holds(self, v: &Value) -> bool {
        match self {
            Kind::Text => v.as_str().is_some_and(|s| !s.is_empty()),
            Kind::Object => v.is_object(),
            Kind::PositiveInteger => v.as_u64().is_some_and(|n| n > 0),
            Kind::PositiveNumber => v.as_f64().is_some_and(|f| f.is_finite() && f > 0.0),
            Kind::Between(lo, hi) => v.as_f64().is_some_and(|f| f >= lo && f <= hi),
        }
    }
}

/// Fields that may be absent (`null`), and when present must be in range: the sizing of
/// `--max-model-len`, the grace period and `maxReplicaCount` is computed from them.
const BOUNDED: &[(&str, Kind)] = &[
    (
        "workload.prompt_tokens_mean",
        Kind::Between(0.0, 10_000_000.0),
    ),
    (
        "workload.output_tokens_mean",
        Kind::Between(0.0, 10_000_000.0),
    ),
    ("workload.max_tokens", Kind::Between(0.0, 10_000_000.0)),
    ("workload.e2e_max_seconds", Kind::Between(0.0, 86_400.0)),
    ("peak.replicas", Kind::Between(1.0, 100_000.0)),
    (
        "scale_out.queue_depth_per_pod",
        Kind::Between(1.0, 1_000_000.0),
    ),
    ("scale_out.for_seconds", Kind::Between(1.0, 86_400.0)),
    ("scale_in.for_seconds", Kind::Between(1.0, 86_400.0)),
    ("scale_out.p95_e2e_seconds", Kind::Between(0.0, 86_400.0)),
    ("scale_in.p95_e2e_seconds", Kind::Between(0.0, 86_400.0)),
    ("activation.queue_depth", Kind::Between(1.0, 1_000_000.0)),
];

/// The fields the production configuration is built from, with what each must be: checked
/// one by one so that a hand-edited file is refused naming the field.
const REQUIRED: &[(&str, Kind)] = &[
    ("source.model", Kind::Text),
    ("scale_out.queue_depth_per_pod", Kind::PositiveInteger),
    ("scale_out.for_seconds", Kind::PositiveInteger),
    ("scale_out.p95_e2e_seconds", Kind::PositiveNumber),
    ("scale_out.p95_queue_time_seconds", Kind::PositiveNumber),
    ("scale_in.p95_e2e_seconds", Kind::PositiveNumber),
    ("scale_in.for_seconds", Kind::PositiveInteger),
    ("activation.queue_depth", Kind::PositiveInteger),
    ("healthy.p95_e2e_seconds", Kind::PositiveNumber),
    ("rationale", Kind::Object),
];

/// Reads `thresholds.json` text, naming the field when something is missing or malformed.
///
/// ```
/// let err = inferscale_analysis::read_thresholds("{\"version\": 1}").unwrap_err();
/// assert_eq!(err.to_string(), "missing field source.model (a string)");
/// ```
pub fn read_thresholds(text: &str) -> Result<Thresholds, ReadError> {
    let value = versioned(text, "thresholds.json", THRESHOLDS_VERSION)?;
    for &(field, kind) in REQUIRED {
        let Some(x) = field.split('.').try_fold(&value, |v, k| v.get(k)) else {
            return Err(ReadError::Missing {
                field,
                expected: kind.name(),
            });
        };
        if !kind.holds(x) {
            return Err(ReadError::Field {
                field,
                expected: kind.name(),
                found: excerpt(x),
            });
        }
    }
    for &(field, kind) in BOUNDED {
        if let Some(x) = field.split('.').try_fold(&value, |v, k| v.get(k))
            && !x.is_null()
            && !kind.holds(x)
        {
            return Err(ReadError::Field {
                field,
                expected: kind.name(),
                found: excerpt(x),
            });
        }
    }
    serde_json::from_value(value).map_err(|source| ReadError::Shape {
        doc: "thresholds.json",
        source,
    })
}
