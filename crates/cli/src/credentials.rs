//! Credentials from the environment and files into the client's [`Auth`]. Secrets are never
//! taken from argv; files are read with a size cap.

use std::path::Path;
use std::time::Duration;

use anyhow::Result;
use inferscale_loadgen::Auth;
use inferscale_loadgen::tls::{TlsConfig, TlsOptions};
use inferscale_loadgen::transport::Get;

use crate::cli::{AuthArgs, ScrapeAccessArgs, TlsArgs};
use crate::input::read_small_bytes;

/// The environment variable an OpenAI API key is read from, as OpenAI's own clients do.
pub(crate) const API_KEY_ENV: &str = "OPENAI_API_KEY";

/// Secrets and header files are small; anything larger is a wrong path.
const MAX_SECRET_FILE: u64 = 64 << 10;

/// A CA bundle holds a few hundred certificates at most (the Mozilla set is ~250 KiB).
const MAX_CA_FILE: u64 = 4 << 20;

/// Reads a small text file (a key, a token, headers), refusing large files and what is not
/// a regular file.
pub(crate) fn read_small(path: &Path, what: &str) -> Result<String> {
    crate::input::read_text(path, what, MAX_SECRET_FILE)
}

/// The TLS configuration for https targets from `--ca-file` and `--insecure` (`None`: the
/// public roots). `--insecure` is said on standard error, every time.
pub(crate) fn tls(a: &TlsArgs) -> Result<Option<TlsConfig>> {
    let (ca_file, insecure) = (a.ca_file.as_deref(), a.insecure);
    if insecure {
        eprintln!("warning: --insecure: the server's TLS certificate is not checked");
    }
    if ca_file.is_none() && !insecure {
        return Ok(None);
    }
    let ca_pem = match ca_file {
        Some(p) => Some((
            p.display().to_string(),
            read_small_bytes(p, "CA file", MAX_CA_FILE)?,
        )),
        None => None,
    };
    Ok(Some(inferscale_loadgen::tls::client_config(&TlsOptions {
        ca_pem,
        insecure,
    })?))
}

/// The client's credentials: `--api-key-file`, else `OPENAI_API_KEY`; plus `--header-file`.
pub(crate) fn client_auth(a: &AuthArgs) -> Result<Auth> {
    let mut auth = Auth::none();
    if let Some(p) = &a.api_key_file {
        let key = read_small(p, "API key file")?;
        auth.add_bearer(&key, &p.display().to_string())?;
    } else if let Some(key) = std::env::var_os(API_KEY_ENV) {
        let key = key
            .into_string()
            .map_err(|_| anyhow::anyhow!("{API_KEY_ENV} is not valid UTF-8"))?;
        if !key.trim().is_empty() {
            auth.add_bearer(&key, API_KEY_ENV)?;
        }
    }
    if let Some(p) = &a.header_file {
        let text = read_small(p, "header file")?;
        auth.add_header_file(&text, &p.display().to_string())?;
    }
    Ok(auth)
}

/// How `scrape` and `query` read an endpoint: the body cap, `--bearer-token-file` (as
/// Prometheus' `bearer_token_file`) and TLS.
pub(crate) fn scrape_access(a: &ScrapeAccessArgs, timeout: Duration) -> Result<Get> {
    let mut access = Get::new("*/*");
    access.timeout = timeout;
    access.max_body = a.max_body;
    access.auth = scrape_auth(a.bearer_token_file.as_deref())?;
    access.tls = tls(&a.tls)?;
    Ok(access)
}

/// A scrape's bearer token, from `--bearer-token-file`.
pub(crate) fn scrape_auth(bearer_token_file: Option<&Path>) -> Result<Auth> {
    match bearer_token_file {
        Some(p) => Ok(Auth::bearer(
            &read_small(p, "bearer token file")?,
            &p.display().to_string(),
        )?),
        None => Ok(Auth::none()),
    }
}
