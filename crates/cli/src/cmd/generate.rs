//! `inferscale generate`: thresholds.json in; the production configuration out.

use std::process::ExitCode;

use anyhow::Result;

use crate::cli::GenerateArgs;
use crate::job::manifests::{read_thresholds, write};
use crate::output::emit;

/// Runs the command.
pub(crate) fn run(a: &GenerateArgs) -> Result<ExitCode> {
    let t = read_thresholds(&a.thresholds)?;
    let paths = write(&t, &a.cluster, &a.out)?;
    let mut text = format!("wrote {} files into {}:\n", paths.len(), a.out.display());
    for p in &paths {
        text.push_str(&format!(
            "  {}\n",
            p.strip_prefix(&a.out).unwrap_or(p).display()
        ));
    }
    text.push_str(&format!(
        "read {} for the order to apply them\n",
        a.out.join("README.md").display()
    ));
    if t.source.simulated.is_some() {
        text.push_str("note: the thresholds come from a simulated run\n");
    }
    if a.cluster.inferscale_image == crate::cli::DEFAULT_IMAGE {
        text.push_str(&format!(
            "note: the warm-up sidecar and Job name the default image {}: build and push yours (docs/deploy.md) and pass --inferscale-image\n",
            crate::cli::DEFAULT_IMAGE
        ));
    }
    emit(&text)?;
    Ok(ExitCode::SUCCESS)
}
