//! How a request ended, and where its token count came from.

use serde::{Deserialize, Serialize};

/// How a request ended. Every scheduled request ends in exactly one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Outcome {
    /// A complete, well-formed answer.
    Ok,
    /// A status other than 200.
    HttpError {
        /// The status.
        status: u16,
    },
    /// No complete answer before the deadline.
    Timeout,
    /// The connection could not be made.
    ConnectError,
    /// The answer was malformed or cut off.
    StreamError,
    /// Never sent: the in-flight cap was reached (k6's `dropped_iterations`).
    Dropped,
}

impl Outcome {
    /// A short name (`ok`, `http_error`, …).
    pub fn kind(&self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::HttpError { .. } => "http_error",
            Outcome::Timeout => "timeout",
            Outcome::ConnectError => "connect_error",
            Outcome::StreamError => "stream_error",
            Outcome::Dropped => "dropped",
        }
    }
}

/// Where the output token count came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TokenSource {
    /// The server's `usage`.
    Usage,
    /// Counted token-bearing stream events (a fallback when the server sent no usage).
    Chunks,
}
