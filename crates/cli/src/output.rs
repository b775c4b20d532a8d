//! Writing to standard output without panicking when the reader goes away (`| head`).

use std::io::Write as _;

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
