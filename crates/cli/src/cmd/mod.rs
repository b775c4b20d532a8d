//! One module per subcommand; each resolves its flags and calls into the libraries.

pub(crate) mod analyze;
pub(crate) mod check;
pub(crate) mod docs;
pub(crate) mod fidelity;
pub(crate) mod generate;
pub(crate) mod load;
pub(crate) mod merge;
pub(crate) mod monitor;
pub(crate) mod predict;
pub(crate) mod query;
pub(crate) mod rehearse;
pub(crate) mod run;
pub(crate) mod scaler;
pub(crate) mod scrape;
pub(crate) mod sim;
pub(crate) mod tune;
pub(crate) mod warmup;
