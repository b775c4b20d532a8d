//! Server addresses: `http(s)://host:port[/base]` URLs turned into what a connection needs.

/// A parsed `http://` or `https://` URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The URL as given (with `/metrics` added for scrape targets without a path).
    pub url: String,
    /// `https://`: the connection is TLS.
    pub tls: bool,
    /// Host name or address (without brackets for IPv6).
    pub host: String,
    /// Port (80 by default, 443 for https).
    pub port: u16,
    /// Path and query as given (`/` when none).
    pub path_and_query: String,
}

/// Why a URL cannot be a target. Each names the URL (with any password hidden) and the
/// part that is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum UrlError {
    /// Not a URL at all.
    #[error("{url:?} is not a valid URL")]
    Invalid {
        /// As given.
        url: String,
    },
    /// Another scheme.
    #[error("{url:?}: unsupported scheme {scheme:?} (expected http:// or https://)")]
    Scheme {
        /// As given.
        url: String,
        /// The scheme.
        scheme: String,
    },
    /// `host:port` without `http://`.
    #[error("{url:?} has no scheme (expected http://host:port)")]
    NoScheme {
        /// As given.
        url: String,
    },
    /// No host.
    #[error("{url:?} has no host")]
    NoHost {
        /// As given.
        url: String,
    },
    /// A port that is not 1–65535 (it would otherwise silently become 80).
    #[error("{url:?}: the port {port:?} is not a number from 1 to 65535")]
    Port {
        /// As given.
        url: String,
        /// The port part.
        port: String,
    },
    /// `user:password@host`: refused rather than written into run.json and logs.
    #[error(
        "{url:?}: credentials in a URL are not accepted (they would end up in run.json and in logs)"
    )]
    Credentials {
        /// The URL with its user information replaced by `***`.
        url: String,
    },
}

/// The port part of an authority (`host:port`, `[v6]:port`), if it has one.
fn port_part(authority: &str) -> Option<&str> {
    if let Some(rest) = authority.strip_prefix('[') {
        rest.split_once(']')
            .and_then(|(_, after)| after.strip_prefix(':'))
    } else {
        authority.rsplit_once(':').map(|(_, p)| p)
    }
}

/// `url` with any user information (`user:password@`) replaced by `***@`: how a URL that
/// may carry a secret is shown.
///
/// ```
/// use inferscale_http::target::redact;
/// assert_eq!(redact("http://u:pw@host:8000/x"), "http://***@host:8000/x");
/// assert_eq!(redact("http://host/a@b"), "http://host/a@b");
/// ```
pub fn redact(url: &str) -> String {
    if let Some((scheme, rest)) = url.split_once("://") {
        let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
        if let Some((_, host)) = authority.rsplit_once('@') {
            return format!("{scheme}://***@{host}{}", &rest[authority.len()..]);
        }
    }
    url.to_owned()
}

impl Target {
    /// Parses an `http://` or `https://` URL; other schemes, ports outside 1–65535 and
    /// credentials are refused with the reason.
    pub fn parse(url: &str) -> Result<Target, UrlError> {
        let owned = || url.to_owned();
        let shown = redact(url);
        if shown != url {
            return Err(UrlError::Credentials { url: shown });
        }
        let uri: http::Uri = url
            .parse()
            .map_err(|_| UrlError::Invalid { url: owned() })?;
        let tls = match uri.scheme_str() {
            Some("http") => false,
            Some("https") => true,
            Some(other) => {
                return Err(UrlError::Scheme {
                    url: owned(),
                    scheme: other.to_owned(),
                });
            }
            None => return Err(UrlError::NoScheme { url: owned() }),
        };
        let authority = uri.authority().map_or("", |a| a.as_str());
        let port = match port_part(authority) {
            None if tls => 443,
            None => 80,
            Some(p) => p
                .parse::<u16>()
                .ok()
                .filter(|p| *p > 0)
                .ok_or_else(|| UrlError::Port {
                    url: owned(),
                    port: p.to_owned(),
                })?,
        };
        let host = uri
            .host()
            .ok_or_else(|| UrlError::NoHost { url: owned() })?;
        let host = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned();
        if host.is_empty() {
            return Err(UrlError::NoHost { url: owned() });
        }
        let path_and_query = uri.path_and_query().map_or("/", |p| p.as_str()).to_owned();
        Ok(Target {
            url: url.to_owned(),
            tls,
            host,
            port,
            path_and_query,
        })
    }

    /// Parses a scrape URL: an empty path means `/metrics` (Prometheus' convention).
    pub fn parse_metrics(url: &str) -> Result<Target, UrlError> {
        let mut t = Target::parse(url)?;
        if t.path_and_query == "/" {
            t.path_and_query = "/metrics".into();
            t.url = format!("{}/metrics", url.trim_end_matches('/'));
        }
        Ok(t)
    }

    /// `host:port` (IPv6 in brackets) for the `Host` header.
    pub fn authority(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }

    /// The base path (without query) joined with `path`: a server behind a prefix
    /// (`http://gw/llm`) gets `/llm/v1/completions`.
    pub fn path(&self, path: &str) -> String {
        format!("{}{path}", self.base_path())
    }

    /// The base path, without query or trailing slash (`/llm` for `http://gw/llm/`).
    pub fn base_path(&self) -> &str {
        self.path_and_query
            .split('?')
            .next()
            .unwrap_or("")
            .trim_end_matches('/')
    }

    /// The same server at another path (`/metrics` next to the API).
    pub fn with_path(&self, path: &str) -> Target {
        let mut t = self.clone();
        t.path_and_query = self.path(path);
        t.url = format!(
            "{}://{}{}",
            if self.tls { "https" } else { "http" },
            self.authority(),
            t.path_and_query
        );
        t
    }
}

pub use inferscale_catalog::units::format_duration;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        let t = Target::parse_metrics("http://127.0.0.1:8000").unwrap();
        assert_eq!(
            (t.url.as_str(), t.path_and_query.as_str(), t.port),
            ("http://127.0.0.1:8000/metrics", "/metrics", 8000)
        );
        let t = Target::parse("http://[::1]:9400/llm/").unwrap();
        assert_eq!(
            (t.host.as_str(), t.authority()),
            ("::1", "[::1]:9400".to_owned())
        );
        assert_eq!(t.path("/v1/completions"), "/llm/v1/completions");
        assert_eq!(t.with_path("/metrics").url, "http://[::1]:9400/llm/metrics");
        let t = Target::parse("https://x/llm").unwrap();
        assert!(t.tls);
        assert_eq!(t.port, 443);
        assert_eq!(t.with_path("/metrics").url, "https://x:443/llm/metrics");
        assert!(Target::parse("ftp://x").is_err());
        assert!(Target::parse("127.0.0.1:8000").is_err());
        assert_eq!(Target::parse("http://[::1]/").unwrap().port, 80);
        assert_eq!(Target::parse("http://h:8000?x=1").unwrap().port, 8000);
    }

    /// Regression: `http://127.0.0.1:99999/` used to connect to port 80.
    #[test]
    fn a_bad_port_is_refused_not_turned_into_80() {
        for url in [
            "http://127.0.0.1:99999/",
            "http://127.0.0.1:65536",
            "http://127.0.0.1:0/",
            "http://127.0.0.1:abc/",
            "http://127.0.0.1:-1/",
            "http://[::1]:70000/",
        ] {
            let e = Target::parse(url).unwrap_err();
            assert!(
                matches!(e, UrlError::Port { .. } | UrlError::Invalid { .. }),
                "{url}: {e}"
            );
            assert!(e.to_string().contains(url), "{e}");
        }
    }

    #[test]
    fn credentials_in_a_url_are_refused_without_echoing_the_password() {
        let e = Target::parse("http://user:s3cret@127.0.0.1:8000/v1").unwrap_err();
        assert!(matches!(e, UrlError::Credentials { .. }), "{e}");
        assert!(!e.to_string().contains("s3cret"), "{e}");
        assert!(e.to_string().contains("***@127.0.0.1:8000/v1"), "{e}");
        assert_eq!(format_duration(std::time::Duration::from_secs(90)), "1m30s");
    }
}
