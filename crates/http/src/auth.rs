//! What a client sends to be let in: a bearer token (an OpenAI API key for a vLLM started with
//! `--api-key`, a token for a Prometheus or a gateway) and the extra headers a gateway wants.
//!
//! Secrets never come from the command line (where `ps` and shell history show them): the
//! caller reads them from the environment or from files. Their header values are marked
//! sensitive, and `Debug` shows header names only, so a secret cannot reach a log, a report
//! or `run.json` through this type.

use http::{HeaderName, HeaderValue};

/// Headers sent with every request to one server.
#[derive(Clone, Default)]
pub struct Auth {
    headers: Vec<(HeaderName, HeaderValue)>,
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Auth")
            .field("headers", &self.names())
            .finish()
    }
}

/// Headers inferscale sets itself: a header file may not replace them (they frame the
/// request, and a wrong one breaks it in ways that look like a server fault).
const RESERVED: &[&str] = &[
    "host",
    "content-length",
    "content-type",
    "transfer-encoding",
    "connection",
    "accept",
];

/// Why credentials or headers cannot be used. No variant holds a secret.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AuthError {
    /// An empty token (an empty file, an empty variable).
    #[error("{source_name}: the token is empty")]
    Empty {
        /// Where it came from (`OPENAI_API_KEY`, a file's path).
        source_name: String,
    },
    /// A token an HTTP header cannot carry (a control character, a line break inside it).
    #[error("{source_name}: the token has characters an HTTP header cannot carry")]
    BadToken {
        /// Where it came from.
        source_name: String,
    },
    /// A header-file line that is not `Name: value`.
    #[error("{file}:{line}: expected `Name: value`")]
    Line {
        /// The file.
        file: String,
        /// 1-based.
        line: usize,
    },
    /// An invalid header name.
    #[error("{file}:{line}: {name:?} is not a valid header name")]
    Name {
        /// The file.
        file: String,
        /// 1-based.
        line: usize,
        /// The name.
        name: String,
    },
    /// An invalid header value (the value is not repeated: it may be a secret).
    #[error("{file}:{line}: the value of {name} is not a valid header value")]
    Value {
        /// The file.
        file: String,
        /// 1-based.
        line: usize,
        /// The header's name.
        name: String,
    },
    /// A header inferscale sets itself.
    #[error("{file}:{line}: {name} is set by inferscale and cannot be replaced")]
    Reserved {
        /// The file.
        file: String,
        /// 1-based.
        line: usize,
        /// The header's name.
        name: String,
    },
    /// The same header twice (a header file and a token both setting `Authorization`).
    #[error("{name} is set twice ({where_})")]
    Twice {
        /// The header's name.
        name: String,
        /// Where the second one came from.
        where_: String,
    },
}

impl Auth {
    /// The headers, in the order they were added.
    pub(crate) fn headers(&self) -> &[(HeaderName, HeaderValue)] {
        &self.headers
    }

    /// No credentials.
    pub fn none() -> Auth {
        Auth::default()
    }

    /// `Authorization: Bearer TOKEN`. `source_name` says where the token came from, for
    /// messages; surrounding whitespace (a file's final newline) is ignored.
    pub fn bearer(token: &str, source_name: &str) -> Result<Auth, AuthError> {
        let mut a = Auth::none();
        a.add_bearer(token, source_name)?;
        Ok(a)
    }

    /// Adds `Authorization: Bearer TOKEN`.
    pub fn add_bearer(&mut self, token: &str, source_name: &str) -> Result<(), AuthError> {
        let token = token.trim();
        if token.is_empty() {
            return Err(AuthError::Empty {
                source_name: source_name.to_owned(),
            });
        }
        let mut v =
            HeaderValue::from_str(&format!("Bearer {token}")).map_err(|_| AuthError::BadToken {
                source_name: source_name.to_owned(),
            })?;
        v.set_sensitive(true);
        self.push(http::header::AUTHORIZATION, v, source_name)
    }

    /// Adds the headers of a header file: one `Name: value` per line; blank lines and lines
    /// starting with `#` are skipped. Every value is treated as a secret.
    pub fn add_header_file(&mut self, text: &str, file: &str) -> Result<(), AuthError> {
        for (i, raw) in text.lines().enumerate() {
            let line = i + 1;
            let l = raw.trim();
            if l.is_empty() || l.starts_with('#') {
                continue;
            }
            let Some((name, value)) = l.split_once(':') else {
                return Err(AuthError::Line {
                    file: file.to_owned(),
                    line,
                });
            };
            let name = name.trim();
            let header = HeaderName::from_bytes(name.as_bytes()).map_err(|_| AuthError::Name {
                file: file.to_owned(),
                line,
                name: name.to_owned(),
            })?;
            if RESERVED.contains(&header.as_str()) {
                return Err(AuthError::Reserved {
                    file: file.to_owned(),
                    line,
                    name: header.as_str().to_owned(),
                });
            }
            let mut v = HeaderValue::from_str(value.trim()).map_err(|_| AuthError::Value {
                file: file.to_owned(),
                line,
                name: header.as_str().to_owned(),
            })?;
            v.set_sensitive(true);
            self.push(header, v, &format!("{file}:{line}"))?;
        }
        Ok(())
    }

    fn push(&mut self, name: HeaderName, v: HeaderValue, from: &str) -> Result<(), AuthError> {
        if self.headers.iter().any(|(n, _)| *n == name) {
            return Err(AuthError::Twice {
                name: name.as_str().to_owned(),
                where_: from.to_owned(),
            });
        }
        self.headers.push((name, v));
        Ok(())
    }

    /// Whether no header is set.
    pub fn is_empty(&self) -> bool {
        self.headers.is_empty()
    }

    /// The names of the headers set (never their values).
    pub fn names(&self) -> Vec<&str> {
        self.headers.iter().map(|(n, _)| n.as_str()).collect()
    }

    /// Adds the headers to a request.
    pub(crate) fn apply(&self, mut b: http::request::Builder) -> http::request::Builder {
        for (n, v) in &self.headers {
            b = b.header(n, v);
        }
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bearer_token_is_sent_and_never_printed() {
        let a = Auth::bearer("sk-s3cret\n", "key.txt").unwrap_or_else(|_| unreachable!());
        assert_eq!(a.names(), ["authorization"]);
        let dbg = format!("{a:?}");
        assert!(!dbg.contains("s3cret"), "{dbg}");
        let req = a
            .apply(http::Request::get("/"))
            .body(())
            .unwrap_or_else(|_| unreachable!());
        let v = &req.headers()[http::header::AUTHORIZATION];
        assert_eq!(v.as_bytes(), b"Bearer sk-s3cret");
        assert!(v.is_sensitive());
        assert!(!format!("{req:?}").contains("s3cret"));
    }

    #[test]
    fn bad_tokens_and_header_files_are_refused_naming_the_place() {
        assert_eq!(
            Auth::bearer("  \n", "OPENAI_API_KEY")
                .unwrap_err()
                .to_string(),
            "OPENAI_API_KEY: the token is empty"
        );
        assert!(matches!(
            Auth::bearer("a\u{7}b", "f"),
            Err(AuthError::BadToken { .. })
        ));
        let mut a = Auth::none();
        a.add_header_file("# gateway\n\nX-Tenant: llm\nX-Api-Key: k\n", "h.txt")
            .unwrap_or_else(|_| unreachable!());
        assert_eq!(a.names(), ["x-tenant", "x-api-key"]);
        for (text, why) in [
            ("no colon here", "h:1: expected `Name: value`"),
            ("Bad Name: x", "\"Bad Name\" is not a valid header name"),
            ("Host: evil", "host is set by inferscale"),
            ("X-A: a\nX-A: b", "x-a is set twice"),
        ] {
            let e = Auth::none().add_header_file(text, "h").unwrap_err();
            assert!(e.to_string().contains(why), "{text:?}: {e}");
        }
        let mut both = Auth::bearer("t", "key").unwrap_or_else(|_| unreachable!());
        let e = both
            .add_header_file("Authorization: Basic x", "h")
            .unwrap_err();
        assert!(e.to_string().contains("authorization is set twice"), "{e}");
        assert!(!e.to_string().contains("Basic x"));
    }
}
