//! The one error type of the crate.

use std::fmt;

/// Where and why a text could not be parsed (or, in strict mode, is not valid OpenMetrics).
///
/// Lines and columns are 1-based; the column counts characters, not bytes, so it points at the
/// right place in an editor even after non-ASCII label values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    /// 1-based line number.
    pub line: u32,
    /// 1-based character column within the line.
    pub column: u32,
    /// What is wrong, in words.
    pub message: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "line {}, column {}: {}",
            self.line, self.column, self.message
        )
    }
}

impl std::error::Error for ParseError {}
