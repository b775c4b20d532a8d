//! Writing: to standard output without panicking when the reader goes away (`| head`), and
//! files that are whole or absent (checked before work starts, written through a rename).

use std::io::Write as _;
use std::path::{Path, PathBuf};

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

/// Writes through a temporary file and a rename, so a reader never sees half a file; on any
/// failure the temporary file is removed and `path` is as it was.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    write_all(&[(path.to_path_buf(), bytes.to_vec())])
}

/// The temporary name a file is written under before its rename.
fn temp_of(path: &Path) -> PathBuf {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    dir.join(format!(
        ".{}.tmp-{}",
        path.file_name().and_then(|f| f.to_str()).unwrap_or("out"),
        std::process::id()
    ))
}

/// Writes several files all or nothing: every destination is checked first (not a folder,
/// its folder creatable), every file is written under a temporary name, and only then are
/// they renamed into place. On a failure before the renames, the temporary files and the
/// folders this call created are removed, so the output is as it was found.
pub(crate) fn write_all(files: &[(PathBuf, Vec<u8>)]) -> Result<()> {
    check_distinct(&files.iter().map(|(p, _)| p.as_path()).collect::<Vec<_>>())?;
    for (p, _) in files {
        if p.is_dir() {
            bail!("{} is a directory, not a file", p.display());
        }
    }
    let mut created: Vec<PathBuf> = Vec::new();
    let mut temps: Vec<PathBuf> = Vec::new();
    let staged = (|| -> Result<()> {
        for (p, bytes) in files {
            if let Some(parent) = p.parent().filter(|d| !d.as_os_str().is_empty()) {
                let mut missing: Vec<PathBuf> = parent
                    .ancestors()
                    .take_while(|a| !a.as_os_str().is_empty() && !a.exists())
                    .map(Path::to_path_buf)
                    .collect();
                std::fs::create_dir_all(parent)
                    .with_context(|| format!("cannot create the folder {}", parent.display()))?;
                missing.reverse();
                created.extend(missing);
            }
            let tmp = temp_of(p);
            temps.push(tmp.clone());
            std::fs::write(&tmp, bytes).with_context(|| format!("cannot write {}", p.display()))?;
        }
        Ok(())
    })();
    let undo = |temps: &[PathBuf], created: &[PathBuf]| {
        for t in temps {
            let _ = std::fs::remove_file(t);
        }
        for d in created.iter().rev() {
            let _ = std::fs::remove_dir(d);
        }
    };
    if let Err(e) = staged {
        undo(&temps, &created);
        return Err(e);
    }
    for (i, ((p, _), tmp)) in files.iter().zip(&temps).enumerate() {
        if let Err(e) = std::fs::rename(tmp, p) {
            undo(&temps[i..], &[]);
            let done: Vec<String> = files[..i]
                .iter()
                .map(|(p, _)| p.display().to_string())
                .collect();
            return Err(anyhow::Error::new(e).context(format!(
                "cannot move the new {} into place{}",
                p.display(),
                if done.is_empty() {
                    String::new()
                } else {
                    format!(" (already replaced: {})", done.join(", "))
                }
            )));
        }
    }
    Ok(())
}

/// Refuses two outputs of one command that are the same file (`--out x --requests-out x`
/// would silently keep only the last).
pub(crate) fn check_distinct(paths: &[&Path]) -> Result<()> {
    let key = |p: &Path| -> PathBuf {
        let parent = p
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let parent = std::fs::canonicalize(parent).unwrap_or_else(|_| parent.to_path_buf());
        match p.file_name() {
            Some(f) => parent.join(f),
            None => parent,
        }
    };
    for (i, a) in paths.iter().enumerate() {
        for b in &paths[..i] {
            if key(a) == key(b) {
                bail!(
                    "{} and {} are the same file: give each output its own path",
                    b.display(),
                    a.display()
                );
            }
        }
    }
    Ok(())
}
