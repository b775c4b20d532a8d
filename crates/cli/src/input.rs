//! Reading the files a user names, bounded: a wrong path (a device, a FIFO, a multi-gigabyte
//! log) is refused with its name instead of filling memory or hanging.

use std::io::Read as _;
use std::path::Path;

use anyhow::{Context, Result, bail};

/// Reads a file as bytes, refusing what is larger than `max` or not a regular file.
pub(crate) fn read_small_bytes(path: &Path, what: &str, max: u64) -> Result<Vec<u8>> {
    let f = std::fs::File::open(path)
        .with_context(|| format!("cannot read the {what} {}", path.display()))?;
    if !f.metadata().is_ok_and(|m| m.is_file()) {
        bail!("the {what} {} is not a regular file", path.display());
    }
    let mut bytes = Vec::new();
    f.take(max + 1)
        .read_to_end(&mut bytes)
        .with_context(|| format!("cannot read the {what} {}", path.display()))?;
    if bytes.len() as u64 > max {
        bail!(
            "the {what} {} is larger than {} KiB: is it the right file?",
            path.display(),
            max >> 10
        );
    }
    Ok(bytes)
}

/// Reads a UTF-8 text file, bounded as [`read_small_bytes`].
pub(crate) fn read_text(path: &Path, what: &str, max: u64) -> Result<String> {
    String::from_utf8(read_small_bytes(path, what, max)?)
        .map_err(|_| anyhow::anyhow!("the {what} {} is not UTF-8 text", path.display()))
}
