//! Which Kubernetes API to talk to, and as whom.
//!
//! The order, first that applies:
//! 1. `--kube-api URL` (`https://…`, or `http://` through `kubectl proxy` or a test server),
//!    with `--kube-token-file` and `--kube-ca-file` (a token is never taken on argv);
//! 2. `--kubeconfig PATH` and/or `--context NAME`: that file (default `$KUBECONFIG`, else
//!    `~/.kube/config`) and that context (default its current-context);
//! 3. in a pod (`KUBERNETES_SERVICE_HOST` set): the service account's token and CA;
//! 4. a kubeconfig at `$KUBECONFIG` or `~/.kube/config`, when there is one;
//! 5. none: [`Kube::connect`] answers `Ok(None)`.
//!
//! A kubeconfig's user may be a token, a client certificate, or an exec credential plugin
//! (`aws eks get-token`, `gke-gcloud-auth-plugin`, …); kube-rs runs the plugin when a token
//! is needed and again when it expires.

use std::path::{Path, PathBuf};

use kube::config::{KubeConfigOptions, Kubeconfig, KubeconfigError};

/// What the command line says about the API (all optional).
#[derive(Debug, Clone, Default)]
pub struct Access {
    /// The API's URL.
    pub api: Option<String>,
    /// A file holding a bearer token for `api` (re-read as it rotates).
    pub token_file: Option<PathBuf>,
    /// A PEM CA bundle that signed `api`'s certificate.
    pub ca_file: Option<PathBuf>,
    /// A kubeconfig file.
    pub kubeconfig: Option<PathBuf>,
    /// A context in the kubeconfig.
    pub context: Option<String>,
}

/// Why the Kubernetes API cannot be reached as given.
#[derive(Debug, thiserror::Error)]
pub enum KubeError {
    /// `--kube-api` is not a URL.
    #[error("--kube-api {url:?} is not a URL like https://host:6443: {reason}")]
    Url {
        /// What was given.
        url: String,
        /// Why.
        reason: String,
    },
    /// A file named on the command line is not there.
    #[error("{what} {}", path.display())]
    File {
        /// Which flag's file.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The kubeconfig cannot be read or has no usable context.
    #[error("kubeconfig {where_}")]
    Kubeconfig {
        /// The file (or "$KUBECONFIG / ~/.kube/config"), and the context when one was asked.
        where_: String,
        /// Why.
        #[source]
        source: KubeconfigError,
    },
    /// The pod's service account cannot be used.
    #[error("the in-cluster service account")]
    InCluster(#[source] kube::config::InClusterError),
    /// The API does not answer (checked once, by commands that need it at the start).
    #[error("the Kubernetes API of {source_} does not answer")]
    Unreachable {
        /// Where the configuration came from.
        source_: String,
        /// Why.
        #[source]
        error: kube::Error,
    },
    /// A client cannot be made of the configuration (its TLS, its credentials).
    #[error("a Kubernetes client for {source_}")]
    Client {
        /// Where the configuration came from.
        source_: String,
        /// Why.
        #[source]
        error: kube::Error,
    },
}

/// A Kubernetes API client, and where its configuration came from.
#[derive(Clone)]
pub struct Kube {
    client: kube::Client,
    namespace: String,
    source: String,
}

impl std::fmt::Debug for Kube {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The client holds credentials: only where it came from is shown.
        f.debug_struct("Kube")
            .field("source", &self.source)
            .field("namespace", &self.namespace)
            .finish_non_exhaustive()
    }
}

/// `$KUBECONFIG`'s first file, else `~/.kube/config`, when it exists.
fn default_kubeconfig() -> Option<PathBuf> {
    if let Some(v) = std::env::var_os("KUBECONFIG").filter(|v| !v.is_empty()) {
        return std::env::split_paths(&v).find(|p| p.is_file());
    }
    let home = std::env::var_os("HOME")?;
    Some(Path::new(&home).join(".kube/config")).filter(|p| p.is_file())
}

impl Kube {
    /// The API `access` names (see the module's order), or `Ok(None)` when nothing names one.
    /// Must run inside a tokio runtime: the client's buffer is a task.
    ///
    /// # Errors
    ///
    /// When what was named cannot be read or used: a bad URL, a missing file, a kubeconfig
    /// without the context asked for, a service account without its token.
    pub async fn connect(access: &Access) -> Result<Option<Kube>, KubeError> {
        let (config, source) = if let Some(api) = &access.api {
            (from_flags(api, access)?, format!("--kube-api {api}"))
        } else if access.kubeconfig.is_some() || access.context.is_some() {
            let path = access.kubeconfig.clone().or_else(default_kubeconfig);
            from_kubeconfig(path.as_deref(), access.context.as_deref()).await?
        } else if std::env::var_os("KUBERNETES_SERVICE_HOST").is_some() {
            let c = kube::Config::incluster().map_err(KubeError::InCluster)?;
            (c, "the pod's service account".to_owned())
        } else if let Some(path) = default_kubeconfig() {
            from_kubeconfig(Some(&path), None).await?
        } else {
            return Ok(None);
        };
        Kube::from_config(config, source).map(Some)
    }

    /// A client of `config`, described as `source` in messages.
    ///
    /// # Errors
    ///
    /// When the configuration's TLS or credentials cannot be set up.
    pub fn from_config(config: kube::Config, source: String) -> Result<Kube, KubeError> {
        let namespace = config.default_namespace.clone();
        let client = kube::Client::try_from(config).map_err(|error| KubeError::Client {
            source_: source.clone(),
            error,
        })?;
        Ok(Kube {
            client,
            namespace,
            source,
        })
    }

    /// Asks the API server its version (`GET /version`): `Ok` with it when it answers, even
    /// with an error status (the credentials are then judged by the calls that need them).
    ///
    /// # Errors
    ///
    /// When it cannot be reached at all (connection refused, TLS, DNS, a plugin that fails).
    pub async fn probe(&self) -> Result<String, KubeError> {
        match self.client.apiserver_version().await {
            Ok(v) => Ok(v.git_version),
            Err(kube::Error::Api(s)) => Ok(format!("unknown (HTTP {})", s.code)),
            Err(error) => Err(KubeError::Unreachable {
                source_: self.source.clone(),
                error,
            }),
        }
    }

    /// The client.
    pub fn client(&self) -> kube::Client {
        self.client.clone()
    }

    /// Where the configuration came from, for messages ("kubeconfig ~/.kube/config, context
    /// eks-prod (https://…)").
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The context's namespace (`default` when it names none).
    pub fn default_namespace(&self) -> &str {
        &self.namespace
    }
}

fn from_flags(api: &str, access: &Access) -> Result<kube::Config, KubeError> {
    let bad = |reason: String| KubeError::Url {
        url: api.to_owned(),
        reason,
    };
    let uri: http::Uri = api
        .parse()
        .map_err(|e: http::uri::InvalidUri| bad(e.to_string()))?;
    if !matches!(uri.scheme_str(), Some("http" | "https")) || uri.host().is_none() {
        return Err(bad("it needs http:// or https:// and a host".into()));
    }
    let mut c = kube::Config::new(uri);
    let exists = |what, p: &Path| {
        std::fs::metadata(p)
            .map(|_| ())
            .map_err(|source| KubeError::File {
                what,
                path: p.to_owned(),
                source,
            })
    };
    if let Some(t) = &access.token_file {
        exists("--kube-token-file", t)?;
        c.auth_info.token_file = Some(t.display().to_string());
    }
    if let Some(ca) = &access.ca_file {
        exists("--kube-ca-file", ca)?;
        c.root_cert_file = Some(ca.clone());
    }
    Ok(c)
}

async fn from_kubeconfig(
    path: Option<&Path>,
    context: Option<&str>,
) -> Result<(kube::Config, String), KubeError> {
    let shown = path.map_or_else(
        || "($KUBECONFIG or ~/.kube/config: none found)".to_owned(),
        |p| p.display().to_string(),
    );
    let where_ = match context {
        Some(c) => format!("{shown}, context {c:?}"),
        None => shown.clone(),
    };
    let options = KubeConfigOptions {
        context: context.map(str::to_owned),
        ..KubeConfigOptions::default()
    };
    let file = match path {
        Some(p) => Kubeconfig::read_from(p),
        None => Err(KubeconfigError::FindPath),
    }
    .map_err(|source| KubeError::Kubeconfig {
        where_: where_.clone(),
        source,
    })?;
    let current = context
        .map(str::to_owned)
        .or_else(|| file.current_context.clone())
        .unwrap_or_default();
    let config = kube::Config::from_custom_kubeconfig(file, &options)
        .await
        .map_err(|source| KubeError::Kubeconfig { where_, source })?;
    let source = format!(
        "kubeconfig {shown}, context {current} ({})",
        config.cluster_url
    );
    Ok((config, source))
}
