//! Exit codes: one table for every command, as k6 and nextest keep one. `main` maps each
//! command's result through it.

use std::fmt;

/// Everything asked for was done.
pub(crate) const SUCCESS: u8 = 0;
/// The work was done, and a check on it failed: a breached `--threshold`, an invalid
/// exposition under `--strict`, a run that found no thresholds (client-limited, partial, not
/// saturated from the start, a simulator that did not hold its speed-up).
pub(crate) const CHECK_FAILED: u8 = 1;
/// Nothing was done: bad flags or input files, an unreachable or wrong target, outputs that
/// cannot be written. Nothing was sent or written.
pub(crate) const USAGE: u8 = 2;
/// Work began and then failed (results could not be written after a measurement, a task
/// died): what could be kept was kept, and the message says where.
pub(crate) const RUNTIME: u8 = 3;

/// The table for `--help` and the README.
pub(crate) const TABLE: &str = "Exit codes (every command):
  0  success
  1  the work was done and a check failed: a --threshold breached, an invalid exposition
     (--strict), no thresholds found (client-limited, partial or unsaturated run), every
     request of a load failed
  2  usage or input error: bad flags or files, an unreachable target; nothing was sent
  3  a failure after work began (e.g. results could not be written); partial results kept";

/// An error that happened after work began (exit code 3).
#[derive(Debug)]
pub(crate) struct AfterStart(anyhow::Error);

impl fmt::Display for AfterStart {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#}", self.0)
    }
}

impl std::error::Error for AfterStart {}

/// Marks an error as one that happened after work began.
pub(crate) fn after_start(e: impl Into<anyhow::Error>) -> anyhow::Error {
    anyhow::Error::new(AfterStart(e.into()))
}

/// Marks a result's error as one that happened after work began.
pub(crate) trait AfterStartExt<T> {
    /// See [`AfterStart`].
    fn after_start(self) -> anyhow::Result<T>;
}

impl<T, E: Into<anyhow::Error>> AfterStartExt<T> for Result<T, E> {
    fn after_start(self) -> anyhow::Result<T> {
        self.map_err(after_start)
    }
}

/// The exit code for a command's error.
pub(crate) fn code(e: &anyhow::Error) -> u8 {
    if e.chain().any(|c| c.downcast_ref::<AfterStart>().is_some()) {
        RUNTIME
    } else {
        USAGE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_after_work_began_exit_3_and_keep_their_message() {
        assert_eq!(code(&anyhow::anyhow!("bad flag")), USAGE);
        let io = anyhow::Error::from(std::io::Error::other("disk full"));
        let late: anyhow::Result<()> = Err(io.context("cannot write run.json"));
        let e = match late.after_start() {
            Err(e) => e,
            Ok(()) => unreachable!(),
        };
        assert_eq!(code(&e), RUNTIME);
        assert_eq!(format!("{e:#}"), "cannot write run.json: disk full");
        assert_eq!(
            code(&e.context("inferscale run")),
            RUNTIME,
            "still 3 under context"
        );
    }
}
