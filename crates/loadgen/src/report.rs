//! `run.json`'s types, which live in the pure `inferscale-results` crate so that the analysis
//! can read them without the load generator's I/O.

pub use inferscale_results::run::*;
