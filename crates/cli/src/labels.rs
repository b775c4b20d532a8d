//! Labels a user gives on the command line (`--label k=v`, `URL#k=v,k=v`).

use anyhow::{Result, bail};

/// `k=v`, naming what was wrong.
pub(crate) fn label(pair: &str, context: &str) -> Result<(String, String)> {
    let Some((k, v)) = pair.split_once('=') else {
        bail!("{context}: {pair:?} is not a label (expected name=value)");
    };
    let valid = |s: &str| {
        s.chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    };
    if !valid(k) || k.starts_with("__") {
        bail!(
            "{context}: {k:?} is not a label name (letters, digits and _, not starting with a \
             digit or __)"
        );
    }
    Ok((k.to_owned(), v.to_owned()))
}
