//! `inferscale completions` and `inferscale man`: generated from the clap definitions, so they
//! cannot drift from the flags.

use std::process::ExitCode;

use anyhow::Result;
use clap::CommandFactory;

use crate::cli::Cli;
use crate::output::emit;

/// Prints the completion script for `shell`.
pub(crate) fn completions(shell: clap_complete::Shell) -> Result<ExitCode> {
    let mut cmd = Cli::command();
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut cmd, "inferscale", &mut out);
    emit(&String::from_utf8_lossy(&out))?;
    Ok(ExitCode::SUCCESS)
}

/// Prints the manual page: the top-level page, then one section per command.
pub(crate) fn man() -> Result<ExitCode> {
    let cmd = Cli::command();
    let mut out = Vec::new();
    clap_mangen::Man::new(cmd.clone()).render(&mut out)?;
    for sub in cmd.get_subcommands() {
        let name = sub.get_name();
        if name == "help" {
            continue;
        }
        out.extend_from_slice(format!(".SH \"INFERSCALE {}\"\n", name.to_uppercase()).as_bytes());
        clap_mangen::Man::new(sub.clone()).render_description_section(&mut out)?;
        clap_mangen::Man::new(sub.clone()).render_synopsis_section(&mut out)?;
        clap_mangen::Man::new(sub.clone()).render_options_section(&mut out)?;
    }
    emit(&String::from_utf8_lossy(&out))?;
    Ok(ExitCode::SUCCESS)
}
