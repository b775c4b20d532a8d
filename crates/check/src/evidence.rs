//! What the checks judge: everything gathered from the endpoints, Prometheus, the manifests
//! and the run folder, as plain data. Gathering ([`crate::gather`]) is I/O; judging
//! ([`judge`](fn@crate::judge)) is a pure function of this, tested without a network.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use inferscale_analysis::Thresholds;
use inferscale_autoscale::alerts::RuleSet;
use inferscale_manifests::objects::{JsonPatch, PodTemplateSpec};

use crate::ReadError;

/// What a metrics endpoint served.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Served {
    /// Every sample name served (`vllm:e2e_request_latency_seconds_bucket`, …).
    pub samples: BTreeSet<String>,
    /// The engines whose names those are, most samples first.
    pub engines: Vec<inferscale_catalog::Engine>,
    /// The labels of vLLM's `vllm:cache_config_info` (its cache configuration), when served.
    pub cache_config: Option<BTreeMap<String, String>>,
}

impl Served {
    /// Whether a metric is served, under its name or as a histogram's or counter's samples.
    pub fn has(&self, metric: &str) -> bool {
        self.samples.contains(metric)
            || ["_bucket", "_count", "_sum", "_total"]
                .iter()
                .any(|s| self.samples.contains(&format!("{metric}{s}")))
    }
}

/// A model the server lists on `/v1/models`.
#[derive(Debug, Clone, PartialEq)]
pub struct ServedModel {
    /// `id` (the served name).
    pub id: String,
    /// `root` (what it was loaded from), when given.
    pub root: Option<String>,
    /// vLLM's `max_model_len`, when given.
    pub max_model_len: Option<u64>,
}

/// One alerting rule as a Prometheus has it loaded.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadedRule {
    /// Its `alert` name.
    pub name: String,
    /// `ok`, `err` or `unknown`.
    pub health: String,
    /// Its last evaluation error.
    pub last_error: Option<String>,
}

/// One series of a Prometheus answer: its labels and value.
pub type Row = (BTreeMap<String, String>, f64);

/// What a Prometheus answered.
#[derive(Debug)]
pub struct PrometheusEvidence {
    /// Its URL.
    pub url: String,
    /// `up` of the deployment's targets.
    pub up: Result<Vec<Row>, ReadError>,
    /// The engine's queue-depth series it has.
    pub engine_series: Result<Vec<Row>, ReadError>,
    /// The DCGM exporter's utilisation series it has.
    pub gpu_series: Result<Vec<Row>, ReadError>,
    /// Its loaded alerting rules.
    pub rules: Result<Vec<LoadedRule>, ReadError>,
    /// Each Prometheus trigger of the ScaledObject: its query and how many series it returned.
    pub triggers: Vec<(String, Result<usize, ReadError>)>,
    /// The deployment's ready replicas over the observation window, as Prometheus saw them
    /// (the lowest, the highest, the last), when it has them.
    pub replicas: Result<Option<(f64, f64, f64)>, ReadError>,
    /// The window those replicas cover, seconds.
    pub observed_s: f64,
}

/// A readable file among the manifests, by what it holds.
#[derive(Debug)]
pub enum Doc {
    /// A KEDA ScaledObject (as data, and its text for positions).
    ScaledObject(serde_json::Value),
    /// A PrometheusRule or a plain rule file.
    Rules(Result<RuleSet, ReadError>),
    /// A Grafana dashboard: its title and queries.
    Dashboard {
        /// `title`.
        title: String,
        /// Every query (`expr`/`query`), variables left in.
        queries: Vec<String>,
    },
    /// A Deployment's pod template (a full Deployment, or a strategic-merge patch of one).
    PodTemplate {
        /// A patch rather than a whole Deployment.
        patch: bool,
        /// The template.
        template: Box<PodTemplateSpec>,
    },
    /// A JSON patch (`kubectl patch --type json`).
    JsonPatch(JsonPatch),
    /// A Job's pod template (the warm-up Job).
    Job(Box<PodTemplateSpec>),
}

/// One document of one file.
#[derive(Debug)]
pub struct Found {
    /// The file, relative to the manifests folder.
    pub path: String,
    /// What it holds.
    pub doc: Doc,
}

/// The manifests folder, read.
#[derive(Debug, Default)]
pub struct Manifests {
    /// The folder.
    pub dir: PathBuf,
    /// The documents found, in file order.
    pub docs: Vec<Found>,
    /// Files that could not be read or parsed, and why.
    pub unreadable: Vec<(String, ReadError)>,
    /// The text of documents that are not files under `dir` (a cluster's objects), by path.
    pub inline: std::collections::BTreeMap<String, String>,
}

/// What `promtool check rules` said of each rule file.
#[derive(Debug)]
pub enum Promtool {
    /// Not installed: the rules were checked by inferscale's own reading only.
    Missing,
    /// Each file and its verdict (`Err` with promtool's words).
    Ran(Vec<(String, Result<(), ReadError>)>),
}

/// An `inferscale run` folder, read.
#[derive(Debug, Default)]
pub struct RunDir {
    /// The folder.
    pub dir: PathBuf,
    /// `thresholds.json` (`None`: absent).
    pub thresholds: Option<Result<Thresholds, ReadError>>,
    /// `rehearsal.json` (`None`: absent).
    pub rehearsal: Option<Result<serde_json::Value, ReadError>>,
}

/// The names the deployment's series carry.
#[derive(Debug, Clone)]
pub struct Names {
    /// The namespace label.
    pub namespace: String,
    /// The pods' job label (the Service's name).
    pub job: String,
    /// The vLLM container's name (to find it in a pod template).
    pub container: String,
    /// `--engine`: the engine the deployment runs, when given (else found from what the
    /// server serves, the manifests read, or the thresholds say).
    pub engine: Option<inferscale_catalog::Engine>,
}

/// Everything gathered.
#[derive(Debug)]
pub struct Evidence {
    /// The names.
    pub names: Names,
    /// The engine the deployment runs, whose names the checks expect.
    pub engine: inferscale_catalog::Engine,
    /// How it was chosen (`--engine`, the server's /metrics, …), for messages.
    pub engine_from: String,
    /// `--url`, and what its `/metrics` served (`None`: no `--url`).
    pub metrics: Option<(String, Result<Served, ReadError>)>,
    /// What its `/v1/models` listed.
    pub models: Option<Result<Vec<ServedModel>, ReadError>>,
    /// `--dcgm-url`, and what it served.
    pub dcgm: Option<(String, Result<Served, ReadError>)>,
    /// What the Prometheus answered (`None`: no `--prometheus`).
    pub prometheus: Option<PrometheusEvidence>,
    /// The manifests (`None`: no folder).
    pub manifests: Option<Manifests>,
    /// promtool's verdicts on the rule files.
    pub promtool: Promtool,
    /// The run folder (`None`: none given or found).
    pub run: Option<RunDir>,
    /// What a live cluster showed (`None`: none named).
    pub cluster: Option<Cluster>,
}

/// A status condition of a live object.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Condition {
    /// `type` (`Ready`, `ScalingActive`, …).
    pub kind: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// `reason`.
    pub reason: String,
    /// `message`.
    pub message: String,
}

/// A live ScaledObject's status.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LiveScaledObject {
    /// Its name.
    pub name: String,
    /// What it scales: `spec.scaleTargetRef`'s kind (default Deployment) and name.
    pub target: (String, String),
    /// The HPA KEDA made for it (`status.hpaName`, else `keda-hpa-<name>`).
    pub hpa: String,
    /// `status.conditions` (`Ready`, `Active`, `Fallback`, `Paused`).
    pub conditions: Vec<Condition>,
}

/// A live HorizontalPodAutoscaler's status.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LiveHpa {
    /// Its name.
    pub name: String,
    /// `status.currentReplicas`.
    pub current: Option<u64>,
    /// `status.desiredReplicas`.
    pub desired: Option<u64>,
    /// `status.conditions` (`AbleToScale`, `ScalingActive`, `ScalingLimited`).
    pub conditions: Vec<Condition>,
}

/// What a live cluster showed beyond its objects (which are read as the manifests).
#[derive(Debug, Clone, Default)]
pub struct Cluster {
    /// Where its configuration came from (`kubeconfig …, context …`).
    pub source: String,
    /// The namespace read.
    pub namespace: String,
    /// The ScaledObjects' status.
    pub scaled_objects: Vec<LiveScaledObject>,
    /// The HPAs' status.
    pub hpas: Vec<LiveHpa>,
    /// The names of the namespace's Deployments.
    pub deployments: Vec<String>,
    /// The cluster's Karpenter NodePools, as JSON.
    pub nodepools: Vec<serde_json::Value>,
    /// The kinds the cluster does not serve (their CRDs are not installed).
    pub not_served: Vec<String>,
    /// The kinds that could not be read, and why (PrometheusRules' go with the manifests'
    /// unreadable files).
    pub unread: Vec<(String, String)>,
}

impl Cluster {
    /// Why `kind` could not be read, when it could not.
    pub fn unread(&self, kind: &str) -> Option<&str> {
        self.unread
            .iter()
            .find(|(k, _)| k == kind)
            .map(|(_, why)| why.as_str())
    }
}
