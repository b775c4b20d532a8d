//! The workspace's HTTP, in one place, for the load generator, the scaler, the monitor and
//! `check` alike:
//!
//! - [`target`]: what a URL names (a server, its `/metrics`, its API key), redacted in every
//!   message;
//! - [`auth`] and [`tls`]: credentials from the environment or files, rustls with the Mozilla
//!   roots or a given CA;
//! - [`transport`]: requests to an OpenAI-compatible server (streaming or not, a deadline
//!   each, every outcome named), over [`h1`]'s preconnected HTTP/1.1 or hyper for one-off
//!   `GET`s;
//! - [`scrape`]: a `/metrics` scrape, strict about what it parses and liberal about how it
//!   is served; [`prometheus`]: Prometheus' HTTP API;
//! - [`server`]: one way to serve a connection (size and time limits, a graceful stop).

pub mod auth;
pub mod h1;
pub mod prometheus;
pub mod scrape;
pub mod server;
pub mod target;
pub mod tls;
pub mod transport;

pub use auth::{Auth, AuthError};
pub use target::{Target, UrlError};

/// An error and every cause under it, joined (`URL: connecting: Connection refused`): the one
/// line a list of failures shows.
pub fn with_causes(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        out.push_str(": ");
        out.push_str(&c.to_string());
        cur = c.source();
    }
    out
}
