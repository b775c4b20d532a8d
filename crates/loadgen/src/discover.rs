//! What a server offers before anything is sent to it: its models (`GET /v1/models`) and
//! whether it is ready (`GET /health`, through [`crate::transport::wait_ready`]).

use std::time::Duration;

use crate::auth::Auth;
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

/// The ids of the models `target` serves. Only `id` is read from each entry: servers differ
/// in the rest.
pub async fn models(target: &Target, auth: &Auth) -> Result<Vec<String>, ModelsError> {
    let t = target.with_path("/v1/models");
    let url = || t.url.clone();
    let mut how = Get::new("application/json");
    how.timeout = Duration::from_secs(10);
    how.max_body = 4 << 20;
    how.auth = auth.clone();
    let f = get(&t, &how)
        .await
        .map_err(|source| ModelsError::Fetch { url: url(), source })?;
    match f.status {
        200 => {}
        401 | 403 => {
            return Err(ModelsError::Unauthorized {
                url: url(),
                status: f.status,
                sent_credentials: !auth.is_empty(),
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
    auth: &Auth,
    wanted: Option<String>,
) -> Result<String, ModelsError> {
    let available = models(target, auth).await?;
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
