//! What inferscale's tests share across crates (a dev-dependency only): finding the external
//! programs the suite needs, and reaping child processes.
//!
//! ```
//! let sh = inferscale_testkit::program("sh");
//! assert!(sh.is_file());
//! ```

use std::path::PathBuf;
use std::process::Child;

/// An external program from `PATH`. A missing one fails the test, naming how to get it: the
/// suite never skips a test because a program is missing (`./scripts/test` installs
/// Prometheus, k6 and Chromium first).
///
/// # Panics
///
/// When `name` is not on `PATH`.
pub fn program(name: &str) -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!("`{name}` is not installed; ./scripts/test installs it (this test never skips)")
        })
}

/// The first of `names` found on `PATH` (a program packaged under several names, like
/// Chromium), as [`program`] finds it.
///
/// # Panics
///
/// When none is on `PATH`.
pub fn program_any(names: &[&str]) -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let found = names
        .iter()
        .find(|n| std::env::split_paths(&path).any(|d| d.join(n).is_file()));
    program(
        found
            .copied()
            .unwrap_or(names.first().copied().unwrap_or("")),
    )
}

/// Kills and waits for a child process when dropped, so a failing test leaves nothing
/// running.
pub struct Reap(pub Child);

impl Drop for Reap {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
