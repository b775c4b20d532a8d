//! The measured results as files: `run.json` (the load generator's output, documented in
//! `docs/formats.md`) and the plan it records. Pure data with serde; the load generator writes
//! it, the analysis and the report read it.

pub mod plan;
pub mod run;
pub mod slo;
