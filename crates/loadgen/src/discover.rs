//! What a server offers before anything is sent to it: its models (`GET /v1/models`) and
//! whether it is ready (`GET /health`, through [`crate::transport::wait_ready`]).

use std::time::Duration;

use crate::target::Target;
use crate::transport::{FetchError, Get, get};

/// Why the server's models could not be learned, or the one asked for is not among them.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ModelsError {
    /// No answer.
    #[error("{url} does not answer")]
    Fetch {
        /// The models URL.
        url: String,
        /// Why.
        #[source]
        source: FetchError,
    },
    /// 401 or 403.
    #[error("{url} answered HTTP {status}: {}", if *.sent_credentials { "the server refused the credentials sent" } else { "the server wants an API key, and none was sent" })]
    Unauthorized {
        /// The models URL.
        url: String,
        /// 401 or 403.
        status: u16,
        /// Whether any credentials were sent.
        sent_credentials: bool,
    },
    /// Another status.
    #[error("{url} answered HTTP {status}; is this an OpenAI-compatible server?")]
    Status {
        /// The models URL.
        url: String,
        /// The status.
        status: u16,
    },
    /// Not a model list.
    #[error("{url} did not return a model list")]
    NotAList {
        /// The models URL.
        url: String,
        /// What was wrong with it.
        #[source]
        source: serde_json::Error,
    },
    /// The model asked for is not served.
    #[error("the server has no model {wanted:?}; it serves: {}", available.join(", "))]
    NoSuchModel {
        /// `--model`.
        wanted: String,
        /// What it serves.
        available: Vec<String>,
    },
    /// An empty list.
    #[error("{url} serves no model")]
    NoModel {
        /// The models URL.
        url: String,
    },
}

/// The ids of the models `target` serves, asked with `access`'s credentials and TLS. Only
/// `id` is read from each entry: servers differ in the rest.
pub async fn models(target: &Target, access: &Get) -> Result<Vec<String>, ModelsError> {
    let t = target.with_path("/v1/models");
    let url = || t.url.clone();
    let mut how = access.clone();
    how.accept = "application/json".into();
    how.timeout = Duration::from_secs(10);
    how.max_body = 4 << 20;
    let f = get(&t, &how)
        .await
        .map_err(|source| ModelsError::Fetch { url: url(), source })?;
    match f.status {
        200 => {}
        401 | 403 => {
            return Err(ModelsError::Unauthorized {
                url: url(),
                status: f.status,
                sent_credentials: !access.auth.is_empty(),
            });
        }
        status => return Err(ModelsError::Status { url: url(), status }),
    }
    let list: inferscale_openai::ModelList = serde_json::from_slice(&f.body)
        .map_err(|source| ModelsError::NotAList { url: url(), source })?;
    Ok(list.data.into_iter().map(|m| m.id).collect())
}

/// Checks that `wanted` is served, or picks the first model when none is asked for.
pub async fn resolve_model(
    target: &Target,
    access: &Get,
    wanted: Option<String>,
) -> Result<String, ModelsError> {
    let available = models(target, access).await?;
    match wanted {
        Some(m) if available.contains(&m) => Ok(m),
        Some(wanted) => Err(ModelsError::NoSuchModel { wanted, available }),
        None => available
            .into_iter()
            .next()
            .ok_or_else(|| ModelsError::NoModel {
                url: target.with_path("/v1/models").url,
            }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read as _, Write as _};

    /// A server on loopback that answers every request with `status` and `body`.
    fn answer(status: u16, body: &'static str) -> Target {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap_or_else(|_| unreachable!());
        let port = l.local_addr().map_or(0, |a| a.port());
        std::thread::spawn(move || {
            for s in l.incoming().take(4) {
                let Ok(mut s) = s else { continue };
                let mut buf = [0u8; 2048];
                let _ = s.read(&mut buf);
                let _ = write!(
                    s,
                    "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
            }
        });
        Target::parse(&format!("http://127.0.0.1:{port}")).unwrap_or_else(|_| unreachable!())
    }

    /// Regression: a model list without `created` (or `object`, `owned_by`) was refused,
    /// although only `id` is needed.
    #[tokio::test]
    async fn a_model_list_with_only_ids_is_read() {
        let t = answer(200, r#"{"data":[{"id":"llama"},{"id":"qwen","extra":1}]}"#);
        let m = models(&t, &Get::new("*/*")).await;
        assert_eq!(m.ok(), Some(vec!["llama".to_owned(), "qwen".to_owned()]));
    }

    #[tokio::test]
    async fn a_401_says_a_key_is_wanted_and_an_unknown_model_lists_the_served_ones() {
        let t = answer(401, r#"{"error":"Unauthorized"}"#);
        let e = resolve_model(&t, &Get::new("*/*"), None).await.unwrap_err();
        assert!(
            e.to_string()
                .contains("wants an API key, and none was sent"),
            "{e}"
        );
        let t = answer(200, r#"{"data":[{"id":"llama"}]}"#);
        let e = resolve_model(&t, &Get::new("*/*"), Some("gpt".into()))
            .await
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "the server has no model \"gpt\"; it serves: llama"
        );
    }
}
