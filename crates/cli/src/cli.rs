//! The command line as clap sees it. Flags are resolved into library configurations in each
//! command's module, not here.

use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::units::{parse_duration, parse_size};

/// Measure, monitor and autoscale LLM inference deployments.
#[derive(Debug, Parser)]
#[command(
    name = "inferscale",
    version,
    about = "Measure, monitor and autoscale LLM inference deployments (vLLM and other OpenAI-compatible engines)",
    after_help = "Exit codes: 0 success; 1 a check failed (invalid exposition, threshold breached); 2 usage or input error."
)]
pub(crate) struct Cli {
    /// The command to run.
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// One look at the three metric tiers of live endpoints or saved expositions.
    Scrape(ScrapeArgs),
}

/// The exposition format to assume.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum FormatArg {
    /// From the Content-Type, else from the text (OpenMetrics ends with `# EOF`).
    Auto,
    /// The Prometheus text format (0.0.4 / 1.0.0).
    Prometheus,
    /// OpenMetrics 1.0 text.
    Openmetrics,
}

/// `inferscale scrape`.
#[derive(Debug, Args)]
#[command(after_help = "\
Examples:
  inferscale scrape http://127.0.0.1:8000              # a vLLM server (path defaults to /metrics)
  inferscale scrape http://10.0.0.7:8000 http://10.0.0.8:8000 --interval 10s
                                                        # two pods: rates and windowed p95 over 10 s
  inferscale scrape http://node:9400/metrics --json     # a DCGM exporter, as JSON
  curl -s http://127.0.0.1:8000/metrics | inferscale scrape -
  inferscale scrape dump.txt --format openmetrics --strict
                                                        # validate; exit 1 with line and column if invalid

Missing values are shown as '-', never as zero. Each target that cannot be read is reported on
one line and the command exits 2; the others are still shown.")]
pub(crate) struct ScrapeArgs {
    /// URLs (http://host:port[/path]; /metrics when no path), files, or - for standard input.
    #[arg(required = true, value_name = "TARGET")]
    pub(crate) targets: Vec<String>,

    /// Scrape twice this long apart and report rates and windowed percentiles instead of totals.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub(crate) interval: Option<Duration>,

    /// Print JSON (documented in docs/formats.md) instead of tables.
    #[arg(long)]
    pub(crate) json: bool,

    /// The exposition format.
    #[arg(long, value_enum, default_value_t = FormatArg::Auto)]
    pub(crate) format: FormatArg,

    /// Only validate: check each target strictly against OpenMetrics 1.0 and print the verdict.
    #[arg(long)]
    pub(crate) strict: bool,

    /// Give up on a URL after this long (connection and body together).
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_duration)]
    pub(crate) timeout: Duration,

    /// Refuse bodies larger than this.
    #[arg(long, value_name = "SIZE", default_value = "64MiB", value_parser = parse_size)]
    pub(crate) max_body: usize,
}
