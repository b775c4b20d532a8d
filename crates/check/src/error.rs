//! Why something `check` looks at could not be read. A failure to read is evidence too: the
//! checks judge it, and print it as one line with every cause, so each variant's message
//! holds its cause's (the cause is kept, typed, in the variant).

use std::path::PathBuf;

use inferscale_http::with_causes;

/// Why an endpoint, a Prometheus, a file or `promtool` gave nothing usable.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// A `/metrics` endpoint could not be scraped.
    #[error("{}", with_causes(.0))]
    Scrape(inferscale_http::scrape::ScrapeError),
    /// An endpoint gave no answer.
    #[error("{}", with_causes(.0))]
    Fetch(inferscale_http::transport::FetchError),
    /// An endpoint answered with another status than 200.
    #[error("{url}: HTTP {status}")]
    Status {
        /// The URL.
        url: String,
        /// The status.
        status: u16,
    },
    /// `/v1/models` did not answer a model list.
    #[error("{url}: not a model list: {error}")]
    NotModelList {
        /// The URL.
        url: String,
        /// Why.
        error: serde_json::Error,
    },
    /// A scrape's body is not a valid exposition.
    #[error("not a valid exposition: {0}")]
    Exposition(inferscale_promtext::ParseError),
    /// Prometheus could not be asked.
    #[error("{}", with_causes(.0))]
    Prometheus(inferscale_http::prometheus::ApiCallError),
    /// Prometheus' answer is not a query result.
    #[error("{0}")]
    Answer(inferscale_promql::ApiError),
    /// A manifests folder that is not one.
    #[error("{} is not a folder", .0.display())]
    NotFolder(PathBuf),
    /// A folder that cannot be listed.
    #[error("cannot list {}: {error}", dir.display())]
    List {
        /// The folder.
        dir: PathBuf,
        /// Why.
        error: std::io::Error,
    },
    /// A file that cannot be read.
    #[error("{0}")]
    Io(std::io::Error),
    /// Something other than a regular file where one is read.
    #[error("not a regular file")]
    NotRegularFile,
    /// A file over the size read.
    #[error("larger than {} MiB", crate::read::MAX_FILE_BYTES >> 20)]
    TooLarge,
    /// A file that is not text.
    #[error("not UTF-8 text")]
    NotUtf8,
    /// A `.json` file that is not JSON.
    #[error("not JSON: {0}")]
    NotJson(serde_json::Error),
    /// A YAML file that is not YAML.
    #[error("not YAML: {0}")]
    NotYaml(inferscale_manifests::yaml::Error),
    /// A Kubernetes object that is not what its kind says.
    #[error("{0}")]
    Object(inferscale_manifests::objects::LoadError),
    /// A rule file that is not one.
    #[error("{0}")]
    Rules(inferscale_autoscale::alerts::RuleError),
    /// A `thresholds.json` that is not one.
    #[error("{0}")]
    Thresholds(inferscale_analysis::ReadError),
    /// `promtool` could not be run, or the temporary rule file for it not written.
    #[error("cannot run {}: {error}", tool.display())]
    Promtool {
        /// The program.
        tool: PathBuf,
        /// Why.
        error: std::io::Error,
    },
    /// A kind could not be listed from the cluster: the API's reason.
    #[error("{0}")]
    Cluster(String),
    /// `promtool check rules` refused the file: what it printed, on one line.
    #[error("{0}")]
    Refused(String),
}
