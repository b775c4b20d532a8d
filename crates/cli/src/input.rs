//! Reading the files a user names, bounded: a wrong path (a device, a FIFO, a multi-gigabyte
//! log) is refused with its name instead of filling memory or hanging.

use std::io::Read as _;
use std::path::Path;

use anyhow::{Context, Result, bail};

/// Reads a file as bytes, refusing what is larger than `max` or not a regular file.
pub(crate) fn read_small_bytes(path: &Path, what: &str, max: u64) -> Result<Vec<u8>> {
    // Looked at before it is opened: opening a FIFO blocks until something writes to it.
    let meta = std::fs::metadata(path)
        .with_context(|| format!("cannot read the {what} {}", path.display()))?;
    if !meta.is_file() {
        bail!("the {what} {} is not a regular file", path.display());
    }
    let f = std::fs::File::open(path)
        .with_context(|| format!("cannot read the {what} {}", path.display()))?;
    let mut bytes = Vec::new();
    f.take(max + 1)
        .read_to_end(&mut bytes)
        .with_context(|| format!("cannot read the {what} {}", path.display()))?;
    if bytes.len() as u64 > max {
        bail!(
            "the {what} {} is larger than {}: is it the right file?",
            path.display(),
            size(max)
        );
    }
    Ok(bytes)
}

/// Reads a small JSON file (a GPU or model spec) into `T`, naming the file when it does not
/// fit.
pub(crate) fn read_json<T: serde::de::DeserializeOwned>(path: &Path, what: &str) -> Result<T> {
    let text = read_text(path, &format!("{what} file"), cap::SMALL)?;
    serde_json::from_str(&text).with_context(|| {
        format!(
            "{} is not a valid {what} (JSON with the built-in table's fields)",
            path.display()
        )
    })
}

/// `64 KiB`, `16 MiB`, `2 GiB`.
fn size(n: u64) -> String {
    match n {
        n if n >= 1 << 30 && n.is_multiple_of(1 << 30) => format!("{} GiB", n >> 30),
        n if n >= 1 << 20 && n.is_multiple_of(1 << 20) => format!("{} MiB", n >> 20),
        n if n >= 1 << 10 && n.is_multiple_of(1 << 10) => format!("{} KiB", n >> 10),
        n => format!("{n} bytes"),
    }
}

/// The caps, by what a file is. Each is far above any real file of its kind.
pub(crate) mod cap {
    /// run.json: a long run with its timeline is a few megabytes.
    pub(crate) const RUN: u64 = 256 << 20;
    /// thresholds.json, plans, the simulator's GPU and model tables, manifests, dashboards.
    pub(crate) const SMALL: u64 = 16 << 20;
    /// A prompt dataset (ShareGPT's is about 650 MiB).
    pub(crate) const DATASET: u64 = 2 << 30;
}

/// Reads a UTF-8 text file, bounded as [`read_small_bytes`].
pub(crate) fn read_text(path: &Path, what: &str, max: u64) -> Result<String> {
    String::from_utf8(read_small_bytes(path, what, max)?)
        .map_err(|_| anyhow::anyhow!("the {what} {} is not UTF-8 text", path.display()))
}
