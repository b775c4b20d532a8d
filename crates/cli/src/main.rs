//! The `inferscale` binary: parses the command line, runs the command, and owns exit codes.
//!
//! Exit codes: see [`exit`] (0 success; 1 a check failed; 2 usage or input error; 3 a failure
//! after work began, partial results kept).

mod cli;
mod cmd;
mod credentials;
mod exit;
mod input;
mod job;
mod labels;
mod output;
mod shutdown;
mod specs;
mod units;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    let result = match cli.command {
        cli::Command::Scrape(args) => cmd::scrape::run(args),
        cli::Command::Sim(args) => cmd::sim::run(&args),
        cli::Command::Warmup(args) => cmd::warmup::run(&args),
        cli::Command::Load(args) => cmd::load::run_load(&args),
        cli::Command::Analyze(args) => cmd::analyze::run(&args),
        cli::Command::Merge(args) => cmd::merge::run(&args),
        cli::Command::Run(args) => cmd::run::run(&args),
        cli::Command::Generate(args) => cmd::generate::run(&args),
        cli::Command::Query(args) => cmd::query::run(&args),
        cli::Command::Monitor(args) => cmd::monitor::run(&args),
        cli::Command::Check(args) => cmd::check::run(&args),
        cli::Command::Predict(args) => cmd::predict::run(&args),
        cli::Command::Fidelity(args) => cmd::fidelity::run(&args),
        cli::Command::Scaler(args) => cmd::scaler::run(&args),
        cli::Command::Rehearse(args) => cmd::rehearse::run(&args),
        cli::Command::Tune(args) => cmd::tune::run(&args),
        cli::Command::Completions(args) => cmd::docs::completions(args.shell),
        cli::Command::Man => cmd::docs::man(),
    };
    match result {
        Ok(code) => code,
        Err(e) if output::is_broken_pipe(&e) => ExitCode::from(exit::SUCCESS),
        Err(e) => {
            eprintln!("error: {}", excerpt(&chain(&e), MAX_MESSAGE));
            ExitCode::from(exit::code(&e))
        }
    }
}

/// The error and its causes on one line, each cause once: libraries whose errors print
/// their source in their own message as well (kube's, hyper's) would otherwise repeat it.
fn chain(e: &anyhow::Error) -> String {
    let mut out = String::new();
    for c in e.chain() {
        let c = c.to_string();
        if c.is_empty() || out.contains(&c) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&c);
    }
    out
}

/// An error message is at most this many characters: a parser that quotes a hostile input
/// whole (a 100 KB string, a 10 MB line) must not flood the terminal.
const MAX_MESSAGE: usize = 2000;

/// `s`, cut to `max` characters with the number left out said.
fn excerpt(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        None => s.to_owned(),
        Some((at, _)) => format!(
            "{}… ({} more characters)",
            &s[..at],
            s[at..].chars().count()
        ),
    }
}
