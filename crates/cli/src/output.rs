//! Writing: to standard output without panicking when the reader goes away (`| head`), and
//! files that are whole or absent (checked before work starts, written through a rename).

use std::io::Write as _;
use std::path::Path;

use anyhow::{Context as _, Result, bail};

/// Writes `text` to standard output. A closed pipe comes back as an `io::Error` of kind
/// `BrokenPipe`, which `main` treats as a normal end.
pub(crate) fn emit(text: &str) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()
}

/// Whether an error chain ends in a closed standard output.
pub(crate) fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// Checks that `path` can be written (without touching an existing file).
pub(crate) fn check_writable(path: &Path) -> Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let probe = dir.join(format!(".inferscale-write-check-{}", std::process::id()));
    std::fs::write(&probe, b"").with_context(|| {
        format!(
            "cannot write {} (the directory {} is not writable)",
            path.display(),
            dir.display()
        )
    })?;
    let _ = std::fs::remove_file(probe);
    if path.is_dir() {
        bail!("{} is a directory, not a file", path.display());
    }
    Ok(())
}

/// Writes through a temporary file and a rename, so a reader never sees half a file.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let tmp = dir.join(format!(
        ".{}.tmp-{}",
        path.file_name().and_then(|f| f.to_str()).unwrap_or("out"),
        std::process::id()
    ));
    std::fs::write(&tmp, bytes).with_context(|| format!("cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, path)
        .with_context(|| format!("cannot move {} to {}", tmp.display(), path.display()))
}
