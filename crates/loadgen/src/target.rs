//! Server addresses: `http://host:port[/base]` URLs turned into what a connection needs.

use std::time::Duration;

/// A parsed `http://` URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The URL as given (with `/metrics` added for scrape targets without a path).
    pub url: String,
    /// Host name or address (without brackets for IPv6).
    pub host: String,
    /// Port (80 by default).
    pub port: u16,
    /// Path and query as given (`/` when none).
    pub path_and_query: String,
}

impl Target {
    /// Parses an `http://` URL; `https` and other schemes are refused with the reason.
    pub fn parse(url: &str) -> Result<Target, String> {
        let uri: http::Uri = url
            .parse()
            .map_err(|_| format!("{url:?} is not a valid URL"))?;
        match uri.scheme_str() {
            Some("http") => {}
            Some("https") => {
                return Err("https is not supported; use http (inside the cluster, or through `kubectl port-forward`)".into());
            }
            Some(other) => return Err(format!("unsupported scheme {other:?} (expected http://)")),
            None => return Err(format!("{url:?} has no scheme (expected http://host:port)")),
        }
        let host = uri.host().ok_or_else(|| format!("{url:?} has no host"))?;
        let host = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned();
        let port = uri.port_u16().unwrap_or(80);
        let path_and_query = uri.path_and_query().map_or("/", |p| p.as_str()).to_owned();
        Ok(Target {
            url: url.to_owned(),
            host,
            port,
            path_and_query,
        })
    }

    /// Parses a scrape URL: an empty path means `/metrics` (Prometheus' convention).
    pub fn parse_metrics(url: &str) -> Result<Target, String> {
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
        let base = self
            .path_and_query
            .split('?')
            .next()
            .unwrap_or("")
            .trim_end_matches('/');
        format!("{base}{path}")
    }

    /// The same server at another path (`/metrics` next to the API).
    pub fn with_path(&self, path: &str) -> Target {
        let mut t = self.clone();
        t.path_and_query = self.path(path);
        t.url = format!("http://{}{}", self.authority(), t.path_and_query);
        t
    }
}

/// A duration as operators write it: `250ms`, `5s`, `1m30s`.
pub fn format_duration(d: Duration) -> String {
    let secs = d.as_secs_f64();
    if secs < 1.0 {
        return format!("{}ms", (secs * 1000.0).round() as u64);
    }
    if secs < 60.0 {
        let s = format!("{secs:.3}");
        return format!("{}s", s.trim_end_matches('0').trim_end_matches('.'));
    }
    let whole = secs.round() as u64;
    let (h, m, s) = (whole / 3600, whole / 60 % 60, whole % 60);
    let mut out = String::new();
    if h > 0 {
        out.push_str(&format!("{h}h"));
    }
    if m > 0 {
        out.push_str(&format!("{m}m"));
    }
    if s > 0 || out.is_empty() {
        out.push_str(&format!("{s}s"));
    }
    out
}

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
        assert!(Target::parse("https://x").unwrap_err().contains("https"));
        assert!(Target::parse("ftp://x").is_err());
        assert!(Target::parse("127.0.0.1:8000").is_err());
        assert_eq!(format_duration(Duration::from_secs(90)), "1m30s");
    }
}
